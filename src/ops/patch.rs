//! Write operations by unified diff: `patch.propose` checks everything apply
//! checks and writes nothing; `patch.apply` writes the note and commits it.
//!
//! Both go through [`plan`], so they accept and refuse exactly the same patches.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Class, Context, HttpInput, HttpRoute, Operation};
use crate::config::DirtyNotes;
use crate::error::{Error, ErrorCode, Result};
use crate::notes::{Existence, NotePath};
use crate::patch::{self, Target};
use crate::repo;

/// The request of both patch operations.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PatchRequest {
    /// A single-file unified diff.
    pub patch: String,
    /// Apply only: refuse when the note changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
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
    const EXAMPLE: &'static str = r##"await mirai.patch.propose({patch: "--- a/todo.md\n+++ b/todo.md\n@@ -1 +1,2 @@\n # Todo\n+- water the plants\n"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Check a single-file unified diff against the note as it is now, exactly as patch.apply would, without writing.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPatch;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/patch/propose", HttpInput::Body);
    type Request = PatchRequest;
    type Response = PatchSummary;

    fn run(ctx: &Context, request: PatchRequest) -> Result<PatchSummary> {
        let plan = plan_patch(ctx, &request.patch)?;
        Ok(plan.summary())
    }
}

/// `patch.apply`: write the note and commit it as `mcp.patch_apply: <path>`.
pub struct PatchApply;

impl Operation for PatchApply {
    const NAME: &'static str = "patch.apply";
    const EXAMPLE: &'static str = r##"await mirai.patch.apply({patch: "--- a/todo.md\n+++ b/todo.md\n@@ -1 +1,2 @@\n # Todo\n+- water the plants\n"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Apply a single-file unified diff to a note and commit it; answers the new commit.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPatch;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/patch/apply", HttpInput::Body);
    type Request = PatchRequest;
    type Response = PatchApplied;

    fn run(ctx: &Context, request: PatchRequest) -> Result<PatchApplied> {
        let (plan, commit) = commit_plan(ctx, request.base_commit.as_deref(), |ctx| {
            plan_patch(ctx, &request.patch)
        })?;
        let summary = plan.summary();
        Ok(PatchApplied {
            path: summary.path,
            hunk_count: summary.hunk_count,
            net_line_delta: summary.net_line_delta,
            commit,
        })
    }
}

/// The one write path: every write operation ends here.
///
/// `planner` makes the change (parse, resolve, read, apply: the work that grows
/// with the request) without the writer lock, so a costly request never makes
/// other writes wait. Under the lock the note is read again; if it changed
/// meanwhile, the change is planned again against it. Then the base commit is
/// checked and the note written and committed (or, in a dry run, recorded in
/// the overlay). A plan that changes nothing answers `None` and commits nothing.
pub(super) fn commit_plan(
    ctx: &Context,
    base_commit: Option<&str>,
    planner: impl Fn(&Context) -> Result<Plan>,
) -> Result<(Plan, Option<String>)> {
    let mut plan = planner(ctx)?;
    if plan.is_noop() {
        return Ok((plan, None));
    }
    let repo = ctx.writer()?;
    if ctx.current_text(&plan.note)? != plan.before {
        plan = planner(ctx)?;
        if plan.is_noop() {
            return Ok((plan, None));
        }
    }
    if let Some(base) = base_commit.map(str::trim).filter(|b| !b.is_empty()) {
        if repo.changed_since(base, &plan.note.rel)? {
            let head = repo.head()?.unwrap_or_default();
            let by = repo
                .last_change_since(base, &plan.note.rel)
                .map(|change| format!(" (last changed in {change})"))
                .unwrap_or_default();
            return Err(Error::conflict(format!(
                "{} changed between base_commit {} and HEAD {}{by}; read the note again and rebuild the change against HEAD",
                plan.note.rel,
                short(base),
                short(&head)
            )));
        }
    }
    if let Some(overlay) = ctx.overlay() {
        overlay.write(
            &plan.note.rel,
            plan.before.as_deref(),
            plan.content.as_deref(),
        );
        return Ok((plan, None));
    }
    if ctx.dirty_notes == DirtyNotes::Snapshot {
        if let Some(snapshot) = repo::snapshot(&repo, &plan.note.rel, &ctx.author())? {
            ctx.index
                .note_changed(&plan.note.rel, plan.before.as_deref(), &snapshot);
        }
    }
    let message = ctx.commit_message(&plan.note.rel);
    let commit = repo::write_and_commit(
        &repo,
        &plan.note.rel,
        plan.content.as_deref(),
        &message,
        &ctx.author(),
    )?;
    ctx.index
        .note_changed(&plan.note.rel, plan.content.as_deref(), &commit);
    Ok((plan, Some(commit)))
}

/// A note may not grow past the request body limit, whichever way it is written.
pub(super) fn check_size(ctx: &Context, note: &NotePath, content: &str) -> Result<()> {
    if content.len() > ctx.max_content_bytes {
        return Err(Error::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "{} would be {} bytes; notes may hold at most {} bytes (MIRAI_MAX_BODY_BYTES)",
                note.rel,
                content.len(),
                ctx.max_content_bytes
            ),
        ));
    }
    Ok(())
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// A change to one note, planned: its path passed the rules, and the patch
/// applies to the note as it is.
pub(super) struct Plan {
    pub note: NotePath,
    /// The note's text before the change (`None`: it does not exist yet).
    pub before: Option<String>,
    /// The note's text after it (`None`: the change deletes it).
    pub content: Option<String>,
    /// The unified diff of the change (empty: it changes nothing).
    pub patch: String,
    pub hunk_count: usize,
    pub net_line_delta: i64,
}

impl Plan {
    fn summary(&self) -> PatchSummary {
        PatchSummary {
            path: self.note.rel.clone(),
            hunk_count: self.hunk_count,
            net_line_delta: self.net_line_delta,
        }
    }

    /// A plan for a write whose result equals the note (DESIGN 7.6).
    pub fn unchanged(note: NotePath, text: Option<String>) -> Plan {
        Plan {
            note,
            before: text.clone(),
            content: text,
            patch: String::new(),
            hunk_count: 0,
            net_line_delta: 0,
        }
    }

    fn is_noop(&self) -> bool {
        self.patch.is_empty()
    }
}

/// Plans a unified diff: parse, resolve the path for a write, read the note,
/// apply the hunks, check the size.
pub(super) fn plan_patch(ctx: &Context, text: &str) -> Result<Plan> {
    let parsed = patch::parse(text)?;
    let existence = match parsed.target {
        Target::Create => Existence::MayBeMissing,
        Target::Modify | Target::Delete => Existence::MustExist,
    };
    let note = ctx.resolve_for_write(&parsed.path, existence)?;
    let before = ctx.current_text(&note)?;
    let applied = patch::apply(&parsed, before.as_deref())?;
    if let Some(content) = &applied.content {
        check_size(ctx, &note, content)?;
    }
    Ok(Plan {
        note,
        before,
        content: applied.content,
        patch: text.to_string(),
        hunk_count: applied.hunk_count,
        net_line_delta: applied.net_line_delta,
    })
}
