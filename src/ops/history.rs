//! Looking back: `notes.history` (the commits that changed a note, or every
//! commit, newest first along first parents) and `notes.diff` (what one commit,
//! or the span between two commits, did to notes, as diffs `git apply` and
//! mirai's own `patch.apply` accept). Both read git through
//! [`crate::repo::history`]; neither takes the writer lock.
//!
//! Answers are bounded: a commit lists at most [`MAX_PATHS_PER_COMMIT`] paths
//! (with a count of the rest), and a diff answer carries at most the body limit
//! of diff text over at most [`MAX_DIFF_FILES`] notes (then `truncated`).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::path;
use crate::patch;
use crate::repo::history::{Change, Entry, NoteDelta, Reader, Rev, Summary};

/// Commits one history page holds by default.
pub const DEFAULT_HISTORY_LIMIT: usize = 20;
/// The most commits one history page may hold.
pub const MAX_HISTORY_LIMIT: usize = 100;
/// The most paths one commit lists in an answer; `paths_omitted` counts the rest.
pub const MAX_PATHS_PER_COMMIT: usize = 100;
/// The most notes one `notes.diff` answer lists.
pub const MAX_DIFF_FILES: usize = 1000;

pub(super) fn invalid_request(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::InvalidRequest, message)
}

/// `notes.history`: commits, newest first, following first parents.
pub struct NotesHistory;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HistoryRequest {
    /// Only commits that changed this note (a deleted note keeps its history);
    /// without it, every commit.
    #[serde(default)]
    pub path: Option<String>,
    /// How many commits, 1 to 100 (default 20). A number, or a decimal string.
    #[serde(default)]
    #[schemars(with = "Option<u32>", extend("default" = DEFAULT_HISTORY_LIMIT))]
    pub limit: Option<Value>,
    /// The `next_cursor` of the previous page, to go on from there.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct HistoryResponse {
    pub commits: Vec<HistoryCommit>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct HistoryCommit {
    pub commit: String,
    pub parents: Vec<String>,
    /// Committer time, RFC 3339.
    pub time: String,
    pub author: String,
    pub email: String,
    pub subject: String,
    /// The agent run that made it (its `Mirai-Run` trailer), or null.
    pub run_id: Option<String>,
    /// The named caller it was made for (its `Mirai-Caller` trailer), or null.
    pub caller: Option<String>,
    /// The paths it changed against its first parent.
    pub paths: Vec<ChangedPath>,
    /// How many more paths it changed than `paths` lists (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paths_omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ChangedPath {
    pub path: String,
    /// A (added), M (modified), D (deleted) or R (renamed from `from`).
    pub status: String,
    /// A rename's old path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub from: Option<String>,
}

impl Operation for NotesHistory {
    const NAME: &'static str = "notes.history";
    const EXAMPLE: &'static str =
        r##"await mirai.notes.history({path: "shop/list.md", limit: 5})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Commits that changed a note (or every commit), newest first: id, time, author, subject, run, paths.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get(
        "/mcp/notes/history",
        HttpInput::Query(&["path", "limit", "cursor"]),
    );
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = HistoryRequest;
    type Response = HistoryResponse;

    fn run(ctx: &Context, request: HistoryRequest) -> Result<HistoryResponse> {
        let path = request
            .path
            .as_deref()
            .map(path::file_in_history)
            .transpose()?;
        if let Some(hidden) = path.as_deref().filter(|p| !ctx.view.sees(p)) {
            return Err(Error::not_found(format!(
                "no history for {hidden}: no commit changed it"
            )));
        }
        let limit = history_limit(request.limit.as_ref())?;
        let reader = ctx.history.reader().map_err(|e| ctx.history.scrub(e))?;
        let page = ctx
            .history
            .page(
                reader.as_ref(),
                path.as_deref(),
                request.cursor.as_deref(),
                limit,
            )
            .map_err(|e| ctx.history.scrub(e))?;
        Ok(HistoryResponse {
            commits: page
                .commits
                .iter()
                .filter_map(|c| as_seen(ctx, c))
                .map(|c| history_commit(&c, path.as_deref()))
                .collect(),
            next_cursor: page.next,
        })
    }
}

/// Commit `summary` as `ctx`'s caller may see it (`read_paths` hide): left
/// out when it changed only hidden notes; else with only the visible paths
/// (a rename from a hidden note shows no `from`) and, when its subject names
/// a hidden note, a subject saying so instead. A page may then hold fewer
/// commits than its limit; its cursor still goes on.
fn as_seen<'a>(ctx: &Context, summary: &'a Summary) -> Option<std::borrow::Cow<'a, Summary>> {
    if ctx.view.read_prefixes().is_none() {
        return Some(std::borrow::Cow::Borrowed(summary));
    }
    let sees = |p: &str| ctx.view.sees(p);
    if !summary.changes.iter().any(|c| sees(&c.path)) {
        return None;
    }
    let names_hidden = summary
        .changes
        .iter()
        .flat_map(|c| std::iter::once(c.path.as_str()).chain(c.from.as_deref()))
        .any(|p| !sees(p) && summary.subject.contains(p));
    let changes = summary
        .changes
        .iter()
        .filter(|c| sees(&c.path))
        .map(|c| Change {
            path: c.path.clone(),
            status: c.status,
            from: c.from.clone().filter(|from| sees(from)),
        })
        .collect();
    Some(std::borrow::Cow::Owned(Summary {
        id: summary.id,
        parents: summary.parents.clone(),
        time: summary.time.clone(),
        author: summary.author.clone(),
        email: summary.email.clone(),
        subject: if names_hidden {
            "(subject hidden: it names a note outside this caller's read_paths)".to_string()
        } else {
            summary.subject.clone()
        },
        run_id: summary.run_id.clone(),
        proposal: summary.proposal.clone(),
        caller: summary.caller.clone(),
        changes,
    }))
}

/// `limit`: absent is 20; else plain digits (a number or a decimal string), 1 to 100.
fn history_limit(raw: Option<&Value>) -> Result<usize> {
    page_limit(raw, DEFAULT_HISTORY_LIMIT, MAX_HISTORY_LIMIT)
}

/// A page's `limit`: absent is `default`; else plain digits (a number or a
/// decimal string), 1 to `max`.
pub(super) fn page_limit(raw: Option<&Value>, default: usize, max: usize) -> Result<usize> {
    let text = match raw {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => other.to_string(),
    };
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    match text.parse::<usize>() {
        Ok(n) if digits && (1..=max).contains(&n) => Ok(n),
        _ => Err(Error::new(
            ErrorCode::InvalidLimit,
            format!("limit must be a whole number from 1 to {max} (default {default}), got {text}"),
        )),
    }
}

/// One commit as history answers it: its paths, those that touch `wanted` first
/// when the list must be cut, then sorted again.
fn history_commit(summary: &Summary, wanted: Option<&str>) -> HistoryCommit {
    let total = summary.changes.len();
    let kept: Vec<&Change> = if total <= MAX_PATHS_PER_COMMIT {
        summary.changes.iter().collect()
    } else {
        let touches =
            |c: &&Change| wanted.is_some_and(|p| c.path == p || c.from.as_deref() == Some(p));
        let mut kept: Vec<_> = summary.changes.iter().filter(touches).collect();
        let room = MAX_PATHS_PER_COMMIT.saturating_sub(kept.len());
        kept.extend(summary.changes.iter().filter(|c| !touches(c)).take(room));
        kept.sort_by(|a, b| a.path.cmp(&b.path));
        kept
    };
    HistoryCommit {
        commit: summary.id.to_string(),
        parents: summary.parents.iter().map(|p| p.to_string()).collect(),
        time: summary.time.clone(),
        author: summary.author.clone(),
        email: summary.email.clone(),
        subject: summary.subject.clone(),
        run_id: summary.run_id.clone(),
        caller: summary.caller.clone(),
        paths_omitted: total - kept.len(),
        paths: kept
            .into_iter()
            .map(|c| ChangedPath {
                path: c.path.clone(),
                status: c.status.letter().to_string(),
                from: c.from.clone(),
            })
            .collect(),
    }
}

/// One commit of an agent run: its id and paths, in `notes.history`'s shape.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RunCommit {
    pub commit: String,
    pub paths: Vec<ChangedPath>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paths_omitted: usize,
}

/// The commits of agent run `run_id` (found by their `Mirai-Run` trailer),
/// newest first along HEAD's first parents, for `GET /agent/runs/{run_id}`,
/// as `ctx`'s caller may see them.
pub fn run_commits(ctx: &Context, run_id: &str) -> Result<Vec<RunCommit>> {
    let commits: Vec<Arc<Summary>> = ctx
        .history
        .commits_of_run(run_id)
        .map_err(|e| ctx.history.scrub(e))?;
    Ok(commits
        .iter()
        .filter_map(|c| as_seen(ctx, c))
        .map(|c| {
            let full = history_commit(&c, None);
            RunCommit {
                commit: full.commit,
                paths: full.paths,
                paths_omitted: full.paths_omitted,
            }
        })
        .collect())
}

/// `notes.diff`: what one commit, or the span between two, did to notes.
pub struct NotesDiff;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DiffRequest {
    /// The commit (id, 7+ hex digits, or HEAD~N) whose change to show, against its first parent.
    #[serde(default)]
    pub commit: Option<String>,
    /// Only this note; required with `from` and `to`.
    #[serde(default)]
    pub path: Option<String>,
    /// With `to` instead of `commit`: the older side of the span.
    #[serde(default)]
    pub from: Option<String>,
    /// With `from`: the newer side of the span.
    #[serde(default)]
    pub to: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DiffResponse {
    /// The commit shown (with `commit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub commit: Option<String>,
    /// The span shown (with `from` and `to`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub to: Option<String>,
    /// One entry per note, sorted by path; a rename is a deletion and a creation.
    pub files: Vec<FileDiff>,
    /// Some diffs (or notes) were left out to keep the answer within its bound;
    /// ask for those one at a time with `path`.
    pub truncated: bool,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileDiff {
    pub path: String,
    /// A (created), M (modified) or D (deleted).
    pub status: String,
    /// A single-file unified diff `git apply` and `patch.apply` accept; null when
    /// the note is not UTF-8 text or the answer's bound was reached (`truncated`).
    pub diff: Option<String>,
    /// For an attachment (a file that is not a note): both sides' sizes and
    /// hashes instead of a diff (null on the side where there is no file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<BinaryChange>,
}

/// An attachment's change: each side's size, git blob id and SHA-256.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct BinaryChange {
    pub old: Option<BinarySide>,
    pub new: Option<BinarySide>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct BinarySide {
    pub size: u64,
    pub blob: String,
    /// Null when the file is past MIRAI_MAX_FILE_BYTES (never loaded).
    pub sha256: Option<String>,
}

impl Operation for NotesDiff {
    const NAME: &'static str = "notes.diff";
    const EXAMPLE: &'static str =
        r##"await mirai.notes.diff({commit: "HEAD~0", path: "shop/list.md"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "What a commit changed, or a note between two commits (from, to, path): one unified diff per note.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get(
        "/mcp/notes/diff",
        HttpInput::Query(&["commit", "path", "from", "to"]),
    );
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = DiffRequest;
    type Response = DiffResponse;

    fn run(ctx: &Context, request: DiffRequest) -> Result<DiffResponse> {
        let path = request
            .path
            .as_deref()
            .map(path::file_in_history)
            .transpose()?;
        if let Some(hidden) = path.as_deref().filter(|p| !ctx.view.sees(p)) {
            return Err(Error::not_found(format!(
                "no diff for {hidden}: no commit changed it"
            )));
        }
        let shape = match (&request.commit, &request.from, &request.to) {
            (Some(commit), None, None) => Ok((Rev::parse(commit)?, None)),
            (None, Some(from), Some(to)) if path.is_some() => {
                Ok((Rev::parse(to)?, Some(Rev::parse(from)?)))
            }
            (None, Some(_), Some(_)) => {
                Err("path is required with from and to: the diff between two commits is one note's")
            }
            (Some(_), _, _) => Err("give either commit, or from and to, not both"),
            (None, None, None) => {
                Err("commit is required (or from and to with path): which change to show")
            }
            (None, _, _) => Err("from and to go together: give both, with path"),
        };
        let (to, from) = shape.map_err(invalid_request)?;
        let reader = ctx
            .history
            .reader()
            .map_err(|e| ctx.history.scrub(e))?
            .ok_or_else(|| {
                Error::not_found("the notes root is not a git repository: there is no history")
            })?;
        diff(ctx, &reader, to, from, path.as_deref()).map_err(|e| ctx.history.scrub(e))
    }
}

fn diff(
    ctx: &Context,
    reader: &Reader,
    to: Rev,
    from: Option<Rev>,
    path: Option<&str>,
) -> Result<DiffResponse> {
    let to = ctx.history.resolve(reader, &to)?;
    let (deltas, from) = match (from, path) {
        (Some(from), Some(path)) => {
            let from = ctx.history.resolve(reader, &from)?;
            let delta = reader.note_between(from, to, path)?;
            (delta.into_iter().collect(), Some(from))
        }
        _ => (reader.note_changes(to, path)?, None),
    };
    let mut files = Vec::new();
    let mut truncated = false;
    let mut budget = ctx.max_content_bytes;
    // A caller's read_paths hide: a hidden note's delta is left out (a rename
    // is a deletion and an addition, each judged by its own path).
    for delta in deltas.into_iter().filter(|d| ctx.view.sees(&d.path)) {
        if files.len() == MAX_DIFF_FILES {
            truncated = true;
            break;
        }
        if !path::has_note_extension(&delta.path) {
            let limit = ctx.view.disk_notes().max_file_bytes();
            let side =
                |id: Option<git2::Oid>| id.map(|id| binary_side(reader, id, limit)).transpose();
            files.push(FileDiff {
                binary: Some(BinaryChange {
                    old: side(delta.old)?,
                    new: side(delta.new)?,
                }),
                path: delta.path,
                status: delta.status.letter().to_string(),
                diff: None,
            });
            continue;
        }
        // The first diff always comes (it is bounded as reading the note is);
        // the others while the answer stays within the body limit.
        let text = if files.is_empty() || budget > 0 {
            note_diff(reader, &delta, ctx.view.disk_notes().max_note_bytes())?
        } else {
            None
        };
        let diff = match text {
            Some(text) if files.is_empty() || text.len() <= budget => {
                budget = budget.saturating_sub(text.len());
                Some(text)
            }
            Some(_) => {
                budget = 0;
                truncated = true;
                None
            }
            None if budget == 0 => {
                truncated = true;
                None
            }
            None => None,
        };
        files.push(FileDiff {
            path: delta.path,
            status: delta.status.letter().to_string(),
            diff,
            binary: None,
        });
    }
    let (commit, from, to) = match from {
        Some(from) => (None, Some(from.to_string()), Some(to.to_string())),
        None => (Some(to.to_string()), None, None),
    };
    Ok(DiffResponse {
        commit,
        from,
        to,
        files,
        truncated,
    })
}

/// One side of an attachment's change: size, blob id and SHA-256 (none past `limit`).
fn binary_side(reader: &Reader, id: git2::Oid, limit: u64) -> Result<BinarySide> {
    use sha2::Digest;
    Ok(match reader.blob_upto(id, limit)? {
        Ok(bytes) => BinarySide {
            size: bytes.len() as u64,
            blob: id.to_string(),
            sha256: Some(
                sha2::Sha256::digest(&bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
            ),
        },
        Err(size) => BinarySide {
            size,
            blob: id.to_string(),
            sha256: None,
        },
    })
}

/// A note's change as one diff (`None`: a side is not UTF-8 text); a side
/// larger than `limit` is 413 `note_too_large`, never loaded.
fn note_diff(reader: &Reader, delta: &NoteDelta, limit: u64) -> Result<Option<String>> {
    let side = |id| -> Result<Option<Option<String>>> {
        match id {
            None => Ok(Some(None)),
            Some(id) => {
                let bytes = reader.note_blob(id, &delta.path, limit)?;
                Ok(String::from_utf8(bytes).ok().map(Some))
            }
        }
    };
    let (Some(old), Some(new)) = (side(delta.old)?, side(delta.new)?) else {
        return Ok(None);
    };
    let names = || {
        format!(
            "diff --git {} {}\n",
            patch::quote(&format!("a/{}", delta.path)),
            patch::quote(&format!("b/{}", delta.path))
        )
    };
    Ok(match (old.as_deref(), new.as_deref()) {
        // An empty note has no hunk to carry it: git's own form for it.
        (None, Some("")) => Some(format!("{}new file mode 100644\n", names())),
        (Some(""), None) => Some(format!("{}deleted file mode 100644\n", names())),
        (old, new) => patch::make(&delta.path, old, new),
    })
}

/// What the tree of commit `rev` (a JSON string: an id or `HEAD~N`) holds
/// at `rel`, with the reader and the commit it resolved to: for reading a
/// note or an attachment as it was.
pub(super) fn entry_at(
    ctx: &Context,
    rel: &str,
    rev: &Value,
) -> Result<(Reader, git2::Oid, Entry)> {
    let Value::String(rev) = rev else {
        return Err(invalid_request(format!(
            "rev must be a string (a commit id or HEAD~N), not {rev}"
        )));
    };
    let rev = Rev::parse(rev)?;
    let reader = ctx.history.reader()?.ok_or_else(|| {
        Error::not_found("the notes root is not a git repository: there are no commits to read at")
    })?;
    let commit = ctx.history.resolve(&reader, &rev)?;
    let entry = reader.entry(commit, rel)?;
    Ok((reader, commit, entry))
}
