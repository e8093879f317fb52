//! What a row is: the [`Operation`] trait each row implements, its policy
//! [`Class`], how HTTP serves it and how much of it the agent's prompt shows.

use schemars::{JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::context::Context;
use crate::error::{ErrorCode, Result};

/// What an operation does to the notes: `read_only` mode denies every
/// `Write`, and review mode turns a write of notes into a proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Read,
    Write,
    /// A reviewer's decision on a proposal (approve, reject): only a context
    /// acting for a reviewer may run it (the reviewer token over HTTP, the CLI),
    /// never the sandbox, agent runs or MCP; denied in `read_only` mode.
    Review,
    /// Brings the notes up to date with the git remote (pulls, and pushes
    /// mirai's own commits): allowed in `read_only` mode, where it only pulls
    /// (ARCHITECTURE.md, "A read replica keeps itself current"), yet not a read
    /// (MCP does not call it read-only).
    Sync,
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
    /// None: the row takes no fields and the body is not read (a query
    /// parameter is refused, as any field the row does not take).
    Nothing,
    /// The query string: these parameters, each a string (the first value wins).
    /// A query string that cannot be decoded, or a parameter the row does not
    /// take, gets the row's `MALFORMED` code.
    Query(&'static [&'static str]),
    /// The JSON body, parsed once the policy allows the row.
    Body,
    /// The JSON body; or, when the Content-Type is not JSON, a file's raw
    /// bytes (refused past `MIRAI_MAX_FILE_BYTES` from Content-Length before
    /// a byte is read) with these query parameters: the adapter hands the
    /// row the bytes as `content_base64` and the Content-Type as `media_type`.
    BodyOrFile(&'static [&'static str]),
}

/// What HTTP answers for a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpAnswer {
    /// The row's answer as JSON.
    Json,
    /// A file's raw bytes with its media type (`files.read`: the adapter calls
    /// [`dispatch_file`](super::dispatch_file) instead of `dispatch`).
    File,
}

/// How HTTP serves a row: method, path, where the request comes from and
/// what it answers. A malformed input gets the row's `MALFORMED` code,
/// wherever it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpRoute {
    pub verb: Verb,
    pub path: &'static str,
    pub input: HttpInput,
    pub answer: HttpAnswer,
}

impl HttpRoute {
    pub const fn get(path: &'static str, input: HttpInput) -> HttpRoute {
        HttpRoute {
            verb: Verb::Get,
            path,
            input,
            answer: HttpAnswer::Json,
        }
    }

    pub const fn post(path: &'static str, input: HttpInput) -> HttpRoute {
        HttpRoute {
            verb: Verb::Post,
            path,
            input,
            answer: HttpAnswer::Json,
        }
    }

    /// The same route, answering a file's raw bytes instead of JSON.
    pub const fn raw(self) -> HttpRoute {
        HttpRoute {
            answer: HttpAnswer::File,
            ..self
        }
    }
}

/// How much of a row the agent's generated prompt shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptDetail {
    /// Request and answer shapes, summary, each field's description and the example.
    Full,
    /// Request shape and summary alone: rows a model rarely needs for everyday note
    /// tasks (history, diffs, multi-note commits, the index's upkeep).
    Brief,
}

/// One row of the table, in typed form.
pub trait Operation {
    const NAME: &'static str;
    const CLASS: Class;
    const SUMMARY: &'static str;
    /// One call from JavaScript, as the sandbox's `mirai.*` takes it.
    const EXAMPLE: &'static str;
    /// The code a malformed request gets: each endpoint keeps its own
    /// (ARCHITECTURE.md, "Bad bodies keep the endpoint's code").
    const MALFORMED: ErrorCode;
    /// How HTTP serves it (the adapter has one handler for every row).
    const HTTP: HttpRoute;
    /// How much of it the agent's prompt shows (a small model's context is 8k tokens).
    const PROMPT: PromptDetail = PromptDetail::Full;
    /// For a row of class write: whether review mode turns it into a proposal.
    /// Every write of notes is (a new write row is by default); only upkeep
    /// that changes no note (`index.rebuild`, `index.invalidate`) says `false`.
    const REVIEWED: bool = true;
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
    pub prompt: PromptDetail,
    /// Whether review mode turns this write into a proposal (see [`Operation::REVIEWED`]).
    pub reviewed: bool,
    /// JSON Schemas of the request and the response, generated from their types
    /// (a proposed write's answer among them: see [`response_schema`]).
    pub request_schema: fn() -> Schema,
    pub response_schema: fn() -> Schema,
    /// The committed answer's schema alone (the agent's prompt shows it; review
    /// mode's prompt says what a proposed write answers instead).
    pub committed_schema: fn() -> Schema,
    pub(super) call: fn(&Context, Value) -> Result<Value>,
}
