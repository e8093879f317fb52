//! The operation table: every capability mirai offers, by dotted name, with its
//! request and response types, policy class and one function.
//!
//! Adapters (HTTP, the CLI, later the sandbox and MCP) call [`dispatch`] and
//! nothing else, so validation, policy and errors exist exactly once.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::PolicyMode;
use crate::error::{Error, ErrorCode, Result};
use crate::notes::Notes;

/// Most paths one `notes.read_batch` may ask for.
pub const MAX_BATCH_PATHS: usize = 20;

/// What an operation does to the notes: `read_only` mode denies every `Write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Read,
    Write,
}

/// What operations run against: the notes and the deployment's policy.
pub struct Context {
    pub notes: Notes,
    pub policy: PolicyMode,
}

/// One row of the table, in typed form.
pub trait Operation {
    const NAME: &'static str;
    const CLASS: Class;
    const SUMMARY: &'static str;
    /// The code a malformed request gets: each endpoint keeps its own (DESIGN 7.2).
    const MALFORMED: ErrorCode;
    type Request: DeserializeOwned;
    type Response: Serialize;
    fn run(ctx: &Context, request: Self::Request) -> Result<Self::Response>;
}

/// One row of the table, with its types erased so adapters can look it up by name.
pub struct OpEntry {
    pub name: &'static str,
    pub class: Class,
    pub summary: &'static str,
    pub malformed: ErrorCode,
    call: fn(&Context, Value) -> Result<Value>,
}

const fn entry<O: Operation>() -> OpEntry {
    OpEntry {
        name: O::NAME,
        class: O::CLASS,
        summary: O::SUMMARY,
        malformed: O::MALFORMED,
        call: call_typed::<O>,
    }
}

fn call_typed<O: Operation>(ctx: &Context, request: Value) -> Result<Value> {
    let request: O::Request = serde_json::from_value(request).map_err(|e| {
        Error::new(
            O::MALFORMED,
            format!("malformed request for {}: {e}", O::NAME),
        )
    })?;
    let response = O::run(ctx, request)?;
    serde_json::to_value(response)
        .map_err(|e| Error::internal(format!("cannot encode the answer of {}: {e}", O::NAME)))
}

/// The table itself. A new capability is a new row; every adapter picks it up.
pub static TABLE: &[OpEntry] = &[
    entry::<NotesList>(),
    entry::<NotesRead>(),
    entry::<NotesReadBatch>(),
];

/// Looks a row up by its dotted name.
pub fn find(name: &str) -> Option<&'static OpEntry> {
    TABLE.iter().find(|op| op.name == name)
}

/// A request as an adapter received it.
pub enum Input<'a> {
    /// Already-structured input (query parameters, a sandbox call).
    Json(Value),
    /// A raw request body, parsed only once policy allows the operation.
    Body(&'a [u8]),
}

/// Runs operation `name`: policy first, from the operation alone (DESIGN 7.3),
/// then parsing, then the operation.
pub fn dispatch(ctx: &Context, name: &str, input: Input<'_>) -> Result<Value> {
    let op = find(name).ok_or_else(|| Error::not_found(format!("unknown operation: {name}")))?;
    check_policy(ctx.policy, op)?;
    let request = match input {
        Input::Json(value) => value,
        Input::Body(bytes) => serde_json::from_slice(bytes).map_err(|e| {
            Error::new(
                op.malformed,
                format!("request body for {} is not valid JSON: {e}", op.name),
            )
        })?,
    };
    (op.call)(ctx, request)
}

fn check_policy(mode: PolicyMode, op: &OpEntry) -> Result<()> {
    if mode == PolicyMode::ReadOnly && op.class == Class::Write {
        return Err(Error::new(
            ErrorCode::PolicyDenied,
            format!("action {} is denied in read_only mode", op.name),
        ));
    }
    Ok(())
}

/// `notes.list`: every note, sorted.
pub struct NotesList;

#[derive(Debug, Default, Deserialize)]
pub struct NotesListRequest {}

#[derive(Debug, Serialize, Deserialize)]
pub struct NotesListResponse {
    pub notes: Vec<String>,
}

impl Operation for NotesList {
    const NAME: &'static str = "notes.list";
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "List every markdown note, as paths relative to the notes root, sorted.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    type Request = NotesListRequest;
    type Response = NotesListResponse;

    fn run(ctx: &Context, _request: NotesListRequest) -> Result<NotesListResponse> {
        Ok(NotesListResponse {
            notes: ctx.notes.list()?,
        })
    }
}

/// `notes.read`: one note's content.
pub struct NotesRead;

#[derive(Debug, Deserialize)]
pub struct NotesReadRequest {
    pub path: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct NoteContent {
    pub path: String,
    pub content: String,
}

impl Operation for NotesRead {
    const NAME: &'static str = "notes.read";
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str = "Read one note's full text.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
    type Request = NotesReadRequest;
    type Response = NoteContent;

    fn run(ctx: &Context, request: NotesReadRequest) -> Result<NoteContent> {
        let (note, content) = ctx.notes.read(&request.path)?;
        Ok(NoteContent {
            path: note.rel,
            content,
        })
    }
}

/// `notes.read_batch`: up to [`MAX_BATCH_PATHS`] notes in request order.
pub struct NotesReadBatch;

#[derive(Debug, Deserialize)]
pub struct NotesReadBatchRequest {
    pub paths: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct NotesReadBatchResponse {
    pub notes: Vec<NoteContent>,
}

impl Operation for NotesReadBatch {
    const NAME: &'static str = "notes.read_batch";
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Read up to 20 notes at once, in request order; fails on the first bad path.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
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
                let (note, content) = ctx.notes.read(raw)?;
                Ok(NoteContent {
                    path: note.rel,
                    content,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(NotesReadBatchResponse { notes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_dotted() {
        for (i, op) in TABLE.iter().enumerate() {
            assert!(op.name.contains('.'), "{}", op.name);
            assert!(
                TABLE[i + 1..].iter().all(|other| other.name != op.name),
                "{}",
                op.name
            );
        }
    }

    #[test]
    fn read_only_denies_writes_only() {
        let write = OpEntry {
            name: "x.write",
            class: Class::Write,
            summary: "",
            malformed: ErrorCode::InvalidRequest,
            call: |_, v| Ok(v),
        };
        let err = check_policy(PolicyMode::ReadOnly, &write).unwrap_err();
        assert_eq!(err.code, ErrorCode::PolicyDenied);
        assert_eq!(err.message, "action x.write is denied in read_only mode");
        assert!(check_policy(PolicyMode::AllowAll, &write).is_ok());
        assert!(check_policy(PolicyMode::ReadOnly, find("notes.read").unwrap()).is_ok());
    }
}
