//! Write operations by unified diff: `patch.propose` checks everything apply
//! checks and writes nothing; `patch.apply` writes the note and commits it.
//!
//! Both go through [`plan`], so they accept and refuse exactly the same patches.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Class, Context, Operation};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::{Existence, NotePath};
use crate::patch::{self, Target};
use crate::repo::{self, Repo};

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
    type Request = PatchRequest;
    type Response = PatchSummary;

    fn run(ctx: &Context, request: PatchRequest) -> Result<PatchSummary> {
        let plan = plan(ctx, &request.patch)?;
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
    type Request = PatchRequest;
    type Response = PatchApplied;

    fn run(ctx: &Context, request: PatchRequest) -> Result<PatchApplied> {
        // Writes are serialized: the plan is made against the note as the previous
        // write left it, and commits never race for HEAD.
        let repo = ctx.writer()?;
        apply_text(ctx, &repo, &request.patch, request.base_commit.as_deref())
    }
}

/// The one write path: every write operation ends here, holding the writer.
pub(super) fn apply_text(
    ctx: &Context,
    repo: &Repo,
    text: &str,
    base_commit: Option<&str>,
) -> Result<PatchApplied> {
    let plan = plan(ctx, text)?;
    if let Some(content) = &plan.content {
        check_size(ctx, &plan.note, content)?;
    }
    if let Some(base) = base_commit.map(str::trim).filter(|b| !b.is_empty()) {
        if repo.changed_since(base, &plan.note.rel)? {
            let head = repo.head()?.unwrap_or_default();
            return Err(Error::conflict(format!(
                "{} changed between base_commit {} and HEAD {}; read the note again and rebuild the change against HEAD",
                plan.note.rel,
                short(base),
                short(&head)
            )));
        }
    }
    let summary = plan.summary();
    if let Some(overlay) = ctx.overlay() {
        overlay.write(
            &plan.note.rel,
            plan.before.as_deref(),
            plan.content.as_deref(),
        );
        return Ok(PatchApplied {
            path: summary.path,
            hunk_count: summary.hunk_count,
            net_line_delta: summary.net_line_delta,
            commit: None,
        });
    }
    let message = ctx.commit_message(&plan.note.rel);
    let commit = repo::write_and_commit(
        repo,
        &plan.note.rel,
        plan.content.as_deref(),
        &message,
        &ctx.author(),
    )?;
    ctx.index
        .note_changed(&plan.note.rel, plan.content.as_deref(), &commit);
    Ok(PatchApplied {
        path: summary.path,
        hunk_count: summary.hunk_count,
        net_line_delta: summary.net_line_delta,
        commit: Some(commit),
    })
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

/// A patch that parsed, whose path passed the rules, and that applies to the note as it is.
struct Plan {
    note: NotePath,
    /// The note's text before the patch (`None`: it does not exist yet).
    before: Option<String>,
    /// The note's text after it (`None`: the patch deletes it).
    content: Option<String>,
    hunk_count: usize,
    net_line_delta: i64,
}

impl Plan {
    fn summary(&self) -> PatchSummary {
        PatchSummary {
            path: self.note.rel.clone(),
            hunk_count: self.hunk_count,
            net_line_delta: self.net_line_delta,
        }
    }
}

fn plan(ctx: &Context, text: &str) -> Result<Plan> {
    let parsed = patch::parse(text)?;
    let existence = match parsed.target {
        Target::Create => Existence::MayBeMissing,
        Target::Modify | Target::Delete => Existence::MustExist,
    };
    let note = ctx.resolve(&parsed.path, existence)?;
    let before = ctx.current_text(&note)?;
    let applied = patch::apply(&parsed, before.as_deref())?;
    Ok(Plan {
        note,
        before,
        content: applied.content,
        hunk_count: applied.hunk_count,
        net_line_delta: applied.net_line_delta,
    })
}

/// The note's text on disk, or `None` when there is no note at that path yet.
pub(super) fn text_on_disk(note: &NotePath) -> Result<Option<String>> {
    match std::fs::read(&note.abs) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            Error::conflict(format!(
                "{} is not valid UTF-8 text; mirai changes text notes only",
                note.rel
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(_) if note.abs.is_dir() => Err(Error::conflict(format!(
            "{} is a folder; a note cannot be created there",
            note.rel
        ))),
        Err(e) => Err(Error::internal(format!("cannot read {}: {e}", note.rel))),
    }
}
