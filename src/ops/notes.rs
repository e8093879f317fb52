//! Note reading operations: `notes.list`, `notes.read` (now, or at a commit),
//! `notes.read_batch`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use serde_json::Value;

use super::{Class, Context, Empty, HttpInput, HttpRoute, Operation};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::path;
use crate::repo::history::{Entry, Rev};

/// Most paths one `notes.read_batch` may ask for.
pub const MAX_BATCH_PATHS: usize = 20;

/// `notes.list`: every note, sorted.
pub struct NotesList;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NotesListResponse {
    pub notes: Vec<String>,
}

impl Operation for NotesList {
    const NAME: &'static str = "notes.list";
    const EXAMPLE: &'static str = r##"await mirai.notes.list()"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "List every markdown note, as paths relative to the notes root, sorted.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/notes", HttpInput::Nothing);
    type Request = Empty;
    type Response = NotesListResponse;

    fn run(ctx: &Context, _request: Empty) -> Result<NotesListResponse> {
        Ok(NotesListResponse {
            notes: ctx.view.list()?,
        })
    }
}

/// `notes.read`: one note's content.
pub struct NotesRead;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NotesReadRequest {
    /// The note's path relative to the notes root, e.g. "trips/lisbon.md".
    pub path: String,
    /// Read the note as it was at this commit: a commit id (7 to 40 hex
    /// digits) or HEAD~N. Without it, the note as it is now.
    #[serde(default)]
    #[schemars(with = "String")]
    pub rev: Option<Value>,
}

/// One note's content; at a `rev`, with the commit it was read at.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteRead {
    pub path: String,
    pub content: String,
    /// The commit `rev` named (only when reading at a `rev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub commit: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteContent {
    pub path: String,
    pub content: String,
}

impl Operation for NotesRead {
    const NAME: &'static str = "notes.read";
    const EXAMPLE: &'static str = r##"await mirai.notes.read({path: "trips/lisbon.md"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Read one note's full text, as it is now or, with rev, as it was at a commit.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/notes/read", HttpInput::Query(&["path", "rev"]));
    type Request = NotesReadRequest;
    type Response = NoteRead;

    fn run(ctx: &Context, request: NotesReadRequest) -> Result<NoteRead> {
        let Some(rev) = request.rev else {
            let (note, content) = ctx.view.read(&request.path)?;
            return Ok(NoteRead {
                path: note.rel,
                content,
                commit: None,
            });
        };
        read_at(ctx, &request.path, &rev).map_err(|e| ctx.history.scrub(e))
    }
}

/// A note as it was at commit `rev`: from git's tree, never the disk; the
/// path rules hold (hidden and non-`.md` paths are refused) and only a regular
/// file is a note (a symlink there is `invalid_path`, a folder `not_found`).
fn read_at(ctx: &Context, raw: &str, rev: &Value) -> Result<NoteRead> {
    let rel = path::in_history(raw)?;
    let Value::String(rev) = rev else {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!("rev must be a string (a commit id or HEAD~N), not {rev}"),
        ));
    };
    let rev = Rev::parse(rev)?;
    let reader = ctx.history.reader()?.ok_or_else(|| {
        Error::not_found("the notes root is not a git repository: there are no commits to read at")
    })?;
    let commit = ctx.history.resolve(&reader, &rev)?;
    let short = &commit.to_string()[..12];
    let blob = match reader.entry(commit, &rel)? {
        Entry::Note(blob) => blob,
        Entry::Missing => {
            return Err(Error::not_found(format!(
                "{rel:?} did not exist at commit {short}"
            )))
        }
        Entry::Folder => {
            return Err(Error::not_found(format!(
                "{rel:?} was a folder at commit {short}, not a note"
            )))
        }
        Entry::Symlink => {
            return Err(Error::invalid_path(format!(
                "{rel:?} was a symlink at commit {short}; a symlink is not a note: read the \
                 note it pointed to by its own path"
            )))
        }
        Entry::Other => {
            return Err(Error::invalid_path(format!(
                "{rel:?} was not a regular file at commit {short}; only regular files are notes"
            )))
        }
    };
    let bytes = reader.note_blob(blob, &rel, ctx.view.disk_notes().max_note_bytes())?;
    Ok(NoteRead {
        path: rel,
        // Bytes that are not UTF-8 come back as U+FFFD, as a read of the disk does.
        content: String::from_utf8_lossy(&bytes).into_owned(),
        commit: Some(commit.to_string()),
    })
}

/// `notes.read_batch`: up to [`MAX_BATCH_PATHS`] notes in request order.
pub struct NotesReadBatch;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NotesReadBatchRequest {
    /// 1 to 20 note paths.
    pub paths: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NotesReadBatchResponse {
    pub notes: Vec<NoteContent>,
}

impl Operation for NotesReadBatch {
    const NAME: &'static str = "notes.read_batch";
    const EXAMPLE: &'static str =
        r##"await mirai.notes.read_batch({paths: ["trips/lisbon.md", "shop/list.md"]})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Read up to 20 notes at once, in request order; fails on the first bad path.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/read_batch", HttpInput::Body);
    type Request = NotesReadBatchRequest;
    type Response = NotesReadBatchResponse;

    fn run(ctx: &Context, request: NotesReadBatchRequest) -> Result<NotesReadBatchResponse> {
        if request.paths.is_empty() {
            return Err(Error::invalid_path(
                "paths must not be empty: give 1 to 20 note paths",
            ));
        }
        if request.paths.len() > MAX_BATCH_PATHS {
            return Err(Error::invalid_path(format!(
                "paths holds {} entries; at most {MAX_BATCH_PATHS} may be read in one batch",
                request.paths.len()
            )));
        }
        let notes = request
            .paths
            .iter()
            .map(|raw| {
                let (note, content) = ctx.view.read(raw)?;
                Ok(NoteContent {
                    path: note.rel,
                    content,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(NotesReadBatchResponse { notes })
    }
}
