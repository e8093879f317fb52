//! Model-friendly writes: `patch.make` turns whole texts into a diff;
//! `notes.write` and `notes.edit` make that diff and send it down the very
//! same path as `patch.apply` (see [`super::change::plan_text`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::change::{check_size, land, plan_text};
use super::guard::GuardPolicy;
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::{Existence, NotePath};
use crate::patch::{self, Edit};
use crate::vault::sections;

/// `patch.make`: the diff that would turn the note into `content`.
pub struct PatchMake;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MakeRequest {
    /// The note's path relative to the notes root.
    pub path: String,
    /// The note's new text; `null` for a deletion diff. Absent is an error, so a
    /// forgotten field never turns into a deletion.
    #[serde(default, deserialize_with = "present")]
    #[schemars(required, with = "Option<String>")]
    pub content: Option<Option<String>>,
}

/// Tells a field that is `null` (`Some(None)`) from one that is absent (`None`).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct MadePatch {
    pub path: String,
    /// Empty when `content` is what the note already holds.
    pub patch: String,
    pub hunk_count: usize,
    pub net_line_delta: i64,
}

impl Operation for PatchMake {
    const NAME: &'static str = "patch.make";
    const EXAMPLE: &'static str =
        r##"await mirai.patch.make({path: "shop/list.md", content: "# Shopping\n- pears\n"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "The unified diff turning a note into the given content (null: deletion). Writes nothing.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/patch/make", HttpInput::Body);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = MakeRequest;
    type Response = MadePatch;

    fn run(ctx: &Context, request: MakeRequest) -> Result<MadePatch> {
        let content = request.content.ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidRequest,
                "content is required: the note's new text, or null for a deletion diff",
            )
        })?;
        let (note, current) = note_and_text(ctx, &request.path, content.as_deref())?;
        made(&note, current.as_deref(), content.as_deref())
    }
}

/// `notes.write`: replace (or create) a note's whole text, as one commit.
pub struct NotesWrite;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteRequest {
    /// The note's path relative to the notes root; created when missing.
    pub path: String,
    /// The note's whole new text.
    pub content: String,
    /// Refuse (conflict) when the note changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
    /// True when you mean to remove more than half of a long note.
    #[serde(default)]
    pub allow_large_delete: bool,
}

/// What `notes.write` and `notes.edit` answer: apply's fields and the patch,
/// with `commit: null` when the note already held that text.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Written {
    pub path: String,
    pub hunk_count: usize,
    pub net_line_delta: i64,
    pub commit: Option<String>,
    pub patch: String,
}

impl Operation for NotesWrite {
    const NAME: &'static str = "notes.write";
    const EXAMPLE: &'static str = r##"await mirai.notes.write({path: "trips/porto.md", content: "# Porto\n\nTake the tram up the hill.\n"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Create a note or replace its whole text; committed like patch.apply. Same text as now: no commit.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/write", HttpInput::Body);
    type Request = WriteRequest;
    type Response = Written;

    fn run(ctx: &Context, request: WriteRequest) -> Result<Written> {
        let guard = GuardPolicy::for_write(ctx, request.allow_large_delete);
        write_through_patch(ctx, request.base_commit.as_deref(), &guard, |ctx| {
            let note = ctx
                .view
                .resolve_for_write(&request.path, Existence::MayBeMissing)?;
            check_size(ctx, &note, &request.content)?;
            let current = ctx.view.current_text(&note)?;
            Ok((note, current, request.content.clone()))
        })
    }
}

/// `notes.edit`: exact search-and-replace edits, all or none, as one commit.
pub struct NotesEdit;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditRequest {
    /// The note's path relative to the notes root.
    pub path: String,
    /// Replacements applied in order; each `old` must occur exactly once.
    pub edits: Vec<Edit>,
    /// Search only this section.
    #[serde(default)]
    pub section: Option<String>,
    /// Refuse (conflict) when the note changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
    /// True when you mean to remove more than half of a long note.
    #[serde(default)]
    pub allow_large_delete: bool,
}

impl Operation for NotesEdit {
    const NAME: &'static str = "notes.edit";
    const EXAMPLE: &'static str = r##"await mirai.notes.edit({path: "shop/list.md", edits: [{old: "- pears", new: "- ripe pears"}]})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Replace text inside a note: each edit's `old` must occur exactly once (after the edits before it); all edits or none, one commit.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/edit", HttpInput::Body);
    type Request = EditRequest;
    type Response = Written;

    fn run(ctx: &Context, request: EditRequest) -> Result<Written> {
        if request.edits.is_empty() {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                "edits is empty: give at least one {\"old\", \"new\"}",
            ));
        }
        if request.edits.len() > ctx.max_edits {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!(
                    "{} edits in one call; at most {} are allowed (MIRAI_EDIT_MAX_EDITS): split them",
                    request.edits.len(),
                    ctx.max_edits
                ),
            ));
        }
        let guard = GuardPolicy::for_write(ctx, request.allow_large_delete);
        write_through_patch(ctx, request.base_commit.as_deref(), &guard, |ctx| {
            let note = ctx
                .view
                .resolve_for_write(&request.path, Existence::MustExist)?;
            let current = ctx
                .view
                .current_text(&note)?
                .ok_or_else(|| crate::notes::suggest::missing(&note.rel))?;
            let edited = match request.section.as_deref() {
                None => patch::apply_edits(&note.rel, &current, &request.edits)?,
                Some(wanted) => edit_section(&note.rel, &current, wanted, &request.edits)?,
            };
            check_size(ctx, &note, &edited)?;
            Ok((note, Some(current), edited))
        })
    }
}

/// `edits` applied to the section of `text` (note `rel`) that `wanted`
/// names, as `notes.read` names sections; the rest of the note is kept.
fn edit_section(rel: &str, text: &str, wanted: &str, edits: &[Edit]) -> Result<String> {
    let all = sections::headings(text);
    let heading = sections::find(rel, &all, wanted, "section", "edit it without `section`")?;
    let slice = sections::line_slice(text, heading.line, heading.last_line);
    let start = slice.as_ptr() as usize - text.as_ptr() as usize;
    let edited = patch::apply_edits(rel, slice, edits).map_err(|e| {
        Error::new(
            e.code,
            format!(
                "in section {:?} (lines {}-{}, counted from its heading): {}",
                heading.name(),
                heading.line,
                heading.last_line,
                e.message
            ),
        )
    })?;
    let mut out = String::with_capacity(text.len() + edited.len());
    out.push_str(&text[..start]);
    out.push_str(&edited);
    out.push_str(&text[start + slice.len()..]);
    Ok(out)
}

/// Resolves the path for a write of `content` and reads what is there now.
fn note_and_text(
    ctx: &Context,
    raw_path: &str,
    content: Option<&str>,
) -> Result<(NotePath, Option<String>)> {
    let existence = if content.is_some() {
        Existence::MayBeMissing
    } else {
        Existence::MustExist
    };
    let note = ctx.view.resolve(raw_path, existence)?;
    if let Some(content) = content {
        check_size(ctx, &note, content)?;
    }
    let current = ctx.view.current_text(&note)?;
    Ok((note, current))
}

fn made(note: &NotePath, current: Option<&str>, content: Option<&str>) -> Result<MadePatch> {
    let Some(text) = patch::make(&note.rel, current, content) else {
        return Ok(MadePatch {
            path: note.rel.clone(),
            patch: String::new(),
            hunk_count: 0,
            net_line_delta: 0,
        });
    };
    let parsed = patch::parse(&text)?;
    Ok(MadePatch {
        path: note.rel.clone(),
        hunk_count: parsed.hunks.len(),
        net_line_delta: parsed.net_line_delta(),
        patch: text,
    })
}

/// Writes `content` over the note by the diff between them, on
/// `patch.apply`'s own path, checked against `guard`. `read` resolves the note
/// and reads its text now; it runs again under the writer lock when the note
/// changed meanwhile.
pub(super) fn write_through_patch(
    ctx: &Context,
    base_commit: Option<&str>,
    guard: &GuardPolicy,
    read: impl Fn(&Context) -> Result<(NotePath, Option<String>, String)>,
) -> Result<Written> {
    let (plan, commit) = land(ctx, base_commit, |ctx, budget| {
        let (note, current, content) = read(ctx)?;
        plan_text(ctx, note, current, Some(&content), guard, budget)
    })?;
    Ok(Written {
        path: plan.note.rel,
        hunk_count: plan.hunk_count,
        net_line_delta: plan.net_line_delta,
        commit,
        patch: plan.patch,
    })
}
