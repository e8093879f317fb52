//! Write operations by unified diff: `patch.propose` checks everything apply
//! checks and writes nothing; `patch.apply` writes the note and commits it.
//!
//! Both plan through [`super::change`], so they accept and refuse exactly the
//! same patches.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::change::{land, plan_patch, Plan};
use super::guard::GuardPolicy;
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{ErrorCode, Result};
use crate::patch::Budget;

/// The request of both patch operations.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PatchRequest {
    /// A single-file unified diff.
    pub patch: String,
    /// Apply only: refuse when the note changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
    /// True when you mean to remove more than half of a long note.
    #[serde(default)]
    pub allow_large_delete: bool,
}

/// What a patch does.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PatchSummary {
    pub path: String,
    pub hunk_count: usize,
    pub net_line_delta: i64,
}

/// `patch.apply`'s answer: the summary and the commit it made.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PatchApplied {
    pub path: String,
    pub hunk_count: usize,
    pub net_line_delta: i64,
    /// `null` only in a dry run, where nothing is committed.
    pub commit: Option<String>,
}

/// `patch.propose`: would this patch apply, and what would it do?
pub struct PatchPropose;

impl Operation for PatchPropose {
    const NAME: &'static str = "patch.propose";
    const EXAMPLE: &'static str = r##"await mirai.patch.propose({patch: "--- a/shop/list.md\n+++ b/shop/list.md\n@@ -1 +1,2 @@\n # Shopping\n+- pears\n"})"##;
    const CLASS: Class = Class::Write;
    /// Changes no note: review mode runs it as allow_all does.
    const REVIEWED: bool = false;
    const SUMMARY: &'static str =
        "Check a single-file diff exactly as patch.apply would, writing nothing.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPatch;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/patch/propose", HttpInput::Body);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = PatchRequest;
    type Response = PatchSummary;

    fn run(ctx: &Context, request: PatchRequest) -> Result<PatchSummary> {
        let guard = GuardPolicy::for_write(ctx, request.allow_large_delete);
        let plan = plan_patch(ctx, &request.patch, &guard, &Budget::request())?;
        Ok(summary(&plan))
    }
}

/// `patch.apply`: write the note and commit it as `mcp.patch_apply: <path>`.
pub struct PatchApply;

impl Operation for PatchApply {
    const NAME: &'static str = "patch.apply";
    const EXAMPLE: &'static str = r##"await mirai.patch.apply({patch: "--- a/shop/list.md\n+++ b/shop/list.md\n@@ -1 +1,2 @@\n # Shopping\n+- pears\n"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Apply a single-file unified diff to a note and commit it; answers the new commit.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPatch;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/patch/apply", HttpInput::Body);
    type Request = PatchRequest;
    type Response = PatchApplied;

    fn run(ctx: &Context, request: PatchRequest) -> Result<PatchApplied> {
        let guard = GuardPolicy::for_write(ctx, request.allow_large_delete);
        let (plan, commit) = land(ctx, request.base_commit.as_deref(), |ctx, budget| {
            plan_patch(ctx, &request.patch, &guard, budget)
        })?;
        let summary = summary(&plan);
        Ok(PatchApplied {
            path: summary.path,
            hunk_count: summary.hunk_count,
            net_line_delta: summary.net_line_delta,
            commit,
        })
    }
}

/// A plan's answer: its note, hunks and line delta.
pub(super) fn summary(plan: &Plan) -> PatchSummary {
    PatchSummary {
        path: plan.note.rel.clone(),
        hunk_count: plan.hunk_count,
        net_line_delta: plan.net_line_delta,
    }
}
