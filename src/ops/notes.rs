//! Note reading operations: `notes.list`, `notes.read`, `notes.read_batch`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Class, Context, Empty, HttpInput, HttpRoute, Operation};
use crate::error::{Error, ErrorCode, Result};

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
    /// The note's path relative to the notes root, e.g. "inbox/todo.md".
    pub path: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteContent {
    pub path: String,
    pub content: String,
}

impl Operation for NotesRead {
    const NAME: &'static str = "notes.read";
    const EXAMPLE: &'static str = r##"await mirai.notes.read({path: "inbox.md"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str = "Read one note's full text.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/notes/read", HttpInput::Query(&["path"]));
    type Request = NotesReadRequest;
    type Response = NoteContent;

    fn run(ctx: &Context, request: NotesReadRequest) -> Result<NoteContent> {
        let (note, content) = ctx.view.read(&request.path)?;
        Ok(NoteContent {
            path: note.rel,
            content,
        })
    }
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
        r##"await mirai.notes.read_batch({paths: ["inbox.md", "todo.md"]})"##;
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
