//! The operation table: every capability mirai offers, by dotted name, with its
//! request and response types, policy class and one function.
//!
//! Adapters (HTTP, the CLI, later the sandbox and MCP) call [`dispatch`] and
//! nothing else, so validation, policy and errors exist exactly once.

mod change;
mod index;
mod notes;
mod patch;
mod write;

pub use index::*;
pub use notes::*;
pub use patch::*;
pub use write::*;

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use schemars::{schema_for, JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::config::{Config, DirtyNotes, GitIdentity, PolicyMode};
use crate::embed::Embeddings;
use crate::error::{Error, ErrorCode, Result};
use crate::index::live::LiveIndex;
use crate::notes::overlay::Overlay;
use crate::notes::{Notes, View};
use crate::repo::{Author, Repo};

/// What an operation does to the notes: `read_only` mode denies every `Write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Read,
    Write,
}

/// What operations run against: the notes as this context sees them, the
/// policy, the live index, and the repository, which one writer at a time may hold.
///
/// Cloning is cheap and shares everything; [`Context::dry_run`] makes a
/// context whose view has an [`Overlay`] on top, where its writes land.
#[derive(Clone)]
pub struct Context {
    /// The notes: resolve, read and list through it, in a dry run or not.
    pub view: View,
    pub policy: PolicyMode,
    pub index: Arc<LiveIndex>,
    /// Chunk embeddings for semantic and hybrid queries (`None`: not configured).
    pub embeddings: Option<Arc<Embeddings>>,
    /// Largest note content a write may produce (the request body limit).
    pub max_content_bytes: usize,
    /// Most edits one `notes.edit` may carry.
    pub max_edits: usize,
    /// What a write does to a note with someone else's uncommitted changes.
    pub dirty_notes: DirtyNotes,
    identity: GitIdentity,
    writer: Arc<Mutex<Option<Repo>>>,
    /// Set in an agent run: its commits carry `Mirai-Run: <id>`.
    run_id: Option<Arc<str>>,
    /// Set for a sandbox program: a write does not wait for the writer past it.
    deadline: Option<Instant>,
}

impl Context {
    pub fn new(notes: Notes, config: &Config) -> Context {
        let index = Arc::new(LiveIndex::new(notes.clone()));
        let embeddings = config
            .embed
            .clone()
            .map(|embed| Arc::new(Embeddings::new(embed, notes.clone(), index.clone())));
        Context {
            index,
            embeddings,
            view: View::disk(notes),
            policy: config.policy,
            max_content_bytes: config.max_body_bytes,
            max_edits: config.max_edits,
            dirty_notes: config.dirty_notes,
            identity: config.git_identity.clone(),
            writer: Arc::new(Mutex::new(None)),
            run_id: None,
            deadline: None,
        }
    }

    /// This context, for work that must end by `deadline` (a sandbox program):
    /// a write that cannot get the writer by then fails instead of waiting.
    pub fn with_deadline(&self, deadline: Instant) -> Context {
        Context {
            deadline: Some(deadline),
            ..self.clone()
        }
    }

    /// This context, for agent run `run_id`: its commits carry the run's trailer.
    pub fn for_run(&self, run_id: &str) -> Context {
        Context {
            run_id: Some(Arc::from(run_id)),
            ..self.clone()
        }
    }

    /// The commit message of a write to `rel` (DESIGN 7.8).
    pub fn commit_message(&self, rel: &str) -> String {
        match &self.run_id {
            Some(run) => format!("mcp.patch_apply: {rel}\n\nMirai-Run: {run}\n"),
            None => format!("mcp.patch_apply: {rel}\n"),
        }
    }

    /// This context, with writes going to `overlay` instead of disk and git.
    pub fn dry_run(&self, overlay: Arc<Overlay>) -> Context {
        Context {
            view: self.view.with_overlay(overlay),
            ..self.clone()
        }
    }

    /// Takes the repository for one write. Writes are serialized; reads never wait for this.
    pub fn writer(&self) -> Result<Writer<'_>> {
        // A panic during an earlier write left the repository as git left it; carry on.
        let mut guard = match self.deadline {
            None => self
                .writer
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            Some(deadline) => loop {
                match self.writer.try_lock() {
                    Ok(guard) => break guard,
                    Err(TryLockError::Poisoned(poisoned)) => break poisoned.into_inner(),
                    Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(TryLockError::WouldBlock) => return Err(Error::conflict(
                        "other writes held the notes until this program's deadline; nothing was \
                             changed: try again",
                    )),
                }
            },
        };
        if guard.is_none() {
            *guard = Some(Repo::open(self.view.disk_notes())?);
        }
        Ok(Writer(guard))
    }

    /// Who commits.
    pub fn author(&self) -> Author {
        Author {
            name: self.identity.name.clone(),
            email: self.identity.email.clone(),
        }
    }
}

/// The repository, held for one write.
pub struct Writer<'a>(MutexGuard<'a, Option<Repo>>);

impl Deref for Writer<'_> {
    type Target = Repo;

    fn deref(&self) -> &Repo {
        self.0
            .as_ref()
            .expect("Context::writer opens the repository before handing it out")
    }
}

/// The request of an operation that takes no fields.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct Empty {}

/// The HTTP methods mirai serves. Plain data: the HTTP adapter maps them to its own types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
        }
    }
}

/// Where HTTP finds a row's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpInput {
    /// None: the row takes no fields and the body is not read.
    Nothing,
    /// The query string: these parameters, each a string (the first value wins;
    /// others are ignored). One that cannot be decoded gets the row's `MALFORMED` code.
    Query(&'static [&'static str]),
    /// The JSON body, parsed once the policy allows the row.
    Body,
}

/// How HTTP serves a row: method, path and where the request comes from. A
/// malformed input gets the row's `MALFORMED` code, wherever it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpRoute {
    pub verb: Verb,
    pub path: &'static str,
    pub input: HttpInput,
}

impl HttpRoute {
    pub const fn get(path: &'static str, input: HttpInput) -> HttpRoute {
        HttpRoute {
            verb: Verb::Get,
            path,
            input,
        }
    }

    pub const fn post(path: &'static str, input: HttpInput) -> HttpRoute {
        HttpRoute {
            verb: Verb::Post,
            path,
            input,
        }
    }
}

/// One row of the table, in typed form.
pub trait Operation {
    const NAME: &'static str;
    const CLASS: Class;
    const SUMMARY: &'static str;
    /// One call from JavaScript, as the sandbox's `mirai.*` takes it.
    const EXAMPLE: &'static str;
    /// The code a malformed request gets: each endpoint keeps its own (DESIGN 7.2).
    const MALFORMED: ErrorCode;
    /// How HTTP serves it (the adapter has one handler for every row).
    const HTTP: HttpRoute;
    type Request: DeserializeOwned + JsonSchema;
    type Response: Serialize + JsonSchema;
    fn run(ctx: &Context, request: Self::Request) -> Result<Self::Response>;
}

/// One row of the table, with its types erased so adapters can look it up by name.
pub struct OpEntry {
    pub name: &'static str,
    pub class: Class,
    pub summary: &'static str,
    pub example: &'static str,
    pub malformed: ErrorCode,
    pub http: HttpRoute,
    /// JSON Schemas of the request and the response, generated from their types.
    pub request_schema: fn() -> Schema,
    pub response_schema: fn() -> Schema,
    call: fn(&Context, Value) -> Result<Value>,
}

const fn entry<O: Operation>() -> OpEntry {
    OpEntry {
        name: O::NAME,
        class: O::CLASS,
        summary: O::SUMMARY,
        example: O::EXAMPLE,
        malformed: O::MALFORMED,
        http: O::HTTP,
        request_schema: || schema_for!(O::Request),
        response_schema: || schema_for!(O::Response),
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
    entry::<PatchPropose>(),
    entry::<PatchApply>(),
    entry::<PatchMake>(),
    entry::<NotesWrite>(),
    entry::<NotesEdit>(),
    entry::<IndexRebuild>(),
    entry::<IndexStatus>(),
    entry::<IndexQuery>(),
    entry::<IndexInvalidate>(),
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
        Input::Body(bytes) => crate::json::from_slice(bytes).map_err(|e| {
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
            example: "",
            malformed: ErrorCode::InvalidRequest,
            http: HttpRoute::post("/x/write", HttpInput::Body),
            request_schema: || schema_for!(Empty),
            response_schema: || schema_for!(Empty),
            call: |_, v| Ok(v),
        };
        let err = check_policy(PolicyMode::ReadOnly, &write).unwrap_err();
        assert_eq!(err.code, ErrorCode::PolicyDenied);
        assert_eq!(err.message, "action x.write is denied in read_only mode");
        assert!(check_policy(PolicyMode::AllowAll, &write).is_ok());
        assert!(check_policy(PolicyMode::ReadOnly, find("notes.read").unwrap()).is_ok());
    }
}
