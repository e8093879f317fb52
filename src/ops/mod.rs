//! The operation table: every capability mirai offers, by dotted name, with its
//! request and response types, policy class and one function.
//!
//! Adapters (HTTP, the CLI, later the sandbox and MCP) call [`dispatch`] and
//! nothing else, so validation, policy and errors exist exactly once.

mod change;
mod changes;
pub mod guard;
mod history;
mod index;
mod links;
mod moves;
mod notes;
mod outline;
mod patch;
mod proposals;
mod proposing;
mod render;
mod repo;
mod revert;
mod shortcuts;
mod tags;
mod write;

pub use changes::*;
pub use history::*;
pub use index::*;
pub use links::*;
pub use moves::*;
pub use notes::*;
pub use outline::*;
pub use patch::*;
pub use proposals::*;
pub use proposing::*;
pub use render::*;
pub use repo::*;
pub use revert::*;
pub use shortcuts::*;
pub use tags::*;
pub use write::*;

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use schemars::{schema_for, JsonSchema, Schema};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::config::{Config, DirtyNotes, GitIdentity, Guards, PolicyMode};
use crate::embed::Embeddings;
use crate::error::{Error, ErrorCode, Result};
use crate::index::live::LiveIndex;
use crate::notes::overlay::Overlay;
use crate::notes::suggest::{self, MAX_SUGGESTIONS, NOTHING_CLOSE};
use crate::notes::{Notes, View};
use crate::proposals::Proposals;
use crate::repo::history::History;
use crate::repo::{Author, Repo};
use crate::sync::Syncer;

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
    /// (DESIGN 7.16), yet not a read (MCP does not call it read-only).
    Sync,
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
    /// The repository's history, walked once per HEAD (reads never take the writer).
    pub history: Arc<History>,
    /// Chunk embeddings for semantic and hybrid queries (`None`: not configured).
    pub embeddings: Option<Arc<Embeddings>>,
    /// Largest note content a write may produce (the request body limit).
    pub max_content_bytes: usize,
    /// Most edits one `notes.edit` may carry.
    pub max_edits: usize,
    /// Most notes one `changes.apply` or `notes.revert` commit may change.
    pub max_changes: usize,
    /// Most notes one `notes.move` rewrites links in (and a revert of a move changes, with the two paths).
    pub max_move_notes: usize,
    /// What a write does to a note with someone else's uncommitted changes.
    pub dirty_notes: DirtyNotes,
    /// The guards against destructive writes (see [`guard`]).
    pub guards: Guards,
    identity: GitIdentity,
    writer: Arc<Mutex<Option<Repo>>>,
    /// Set in an agent run: its commits carry `Mirai-Run: <id>`.
    run_id: Option<Arc<str>>,
    /// Set for a sandbox program: a write does not wait for the writer past it.
    deadline: Option<Instant>,
    /// Set where a model is the author (the sandbox, agent runs, MCP): the
    /// guards apply by default (`MIRAI_GUARDS=models`).
    model_author: bool,
    /// The git remote's sync, when `MIRAI_GIT_REMOTE` is set: told of every commit.
    pub sync: Option<Arc<Syncer>>,
    /// Review mode's proposals (`.mirai/proposals/`).
    pub proposals: Arc<Proposals>,
    /// Most pending proposals at once (`MIRAI_PROPOSALS_MAX_PENDING`).
    pub max_pending: usize,
    /// Set where a reviewer acts (the reviewer token over HTTP, the CLI): rows
    /// of class review run only then.
    reviewer: bool,
    /// The adapter the calls come through (`http`, `mcp`, `sandbox`, `agent`, `cli`),
    /// as a proposal records who asked.
    adapter: &'static str,
    /// Set in review mode while writes gather into one proposal (an eval, an
    /// agent run, one write call), with the row being run.
    draft: Option<(Arc<Draft>, &'static str)>,
}

impl Context {
    pub fn new(notes: Notes, config: &Config) -> Context {
        let notes = notes.with_max_note_bytes(config.max_note_bytes);
        let index = Arc::new(LiveIndex::new(notes.clone()));
        let embeddings = config.embed.clone().map(|embed| {
            Arc::new(Embeddings::new(
                embed,
                config.secrets(),
                notes.clone(),
                index.clone(),
            ))
        });
        let writer: Arc<Mutex<Option<Repo>>> = Arc::new(Mutex::new(None));
        let sync = config.sync.clone().map(|sync| {
            let (writer, for_writer) = (writer.clone(), notes.clone());
            let with_writer: crate::sync::WithWriter = Box::new(move |work| {
                let guard = lock_writer(&writer, &for_writer)?;
                work(guard.as_ref().expect("lock_writer opens the repository"));
                Ok(())
            });
            let author = Author {
                name: config.git_identity.name.clone(),
                email: config.git_identity.email.clone(),
            };
            let pushes = config.policy != PolicyMode::ReadOnly;
            Arc::new(Syncer::new(
                sync,
                notes.clone(),
                index.clone(),
                with_writer,
                author,
                pushes,
            ))
        });
        Context {
            proposals: Arc::new(Proposals::new(notes.clone(), config.max_body_bytes)),
            max_pending: config.proposals_max_pending,
            reviewer: false,
            adapter: "cli",
            draft: None,
            index,
            embeddings,
            history: Arc::new(History::new(notes.root())),
            view: View::disk(notes),
            policy: config.policy,
            max_content_bytes: config.max_body_bytes,
            max_edits: config.max_edits,
            max_changes: config.max_changes,
            max_move_notes: config.max_move_notes,
            dirty_notes: config.dirty_notes,
            guards: config.guards,
            identity: config.git_identity.clone(),
            writer,
            run_id: None,
            deadline: None,
            model_author: false,
            sync,
        }
    }

    /// This context, for calls a model makes (the sandbox, agent runs, MCP):
    /// never a reviewer's.
    pub fn by_model(&self) -> Context {
        Context {
            model_author: true,
            reviewer: false,
            ..self.clone()
        }
    }

    /// This context, acting for a reviewer (who may approve and reject proposals).
    pub fn as_reviewer(&self) -> Context {
        Context {
            reviewer: true,
            ..self.clone()
        }
    }

    /// This context, for calls through `adapter` (`http`, `mcp`, `sandbox`, `agent`, `cli`).
    pub fn via(&self, adapter: &'static str) -> Context {
        Context {
            adapter,
            ..self.clone()
        }
    }

    /// The adapter the calls come through.
    pub fn adapter(&self) -> &'static str {
        self.adapter
    }

    /// The agent run this context works for, if any.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// The draft proposal writes gather into, if any.
    pub fn draft(&self) -> Option<&Arc<Draft>> {
        self.draft.as_ref().map(|(draft, _)| draft)
    }

    /// This context, with writes gathering into `draft` while row `op` runs:
    /// its writes land in the draft's overlay (reads see them) and its commit
    /// messages are recorded without a run's trailer (the draft keeps the run).
    pub fn drafting(&self, draft: &Arc<Draft>, op: &'static str) -> Context {
        Context {
            view: self.view.with_overlay(draft.overlay()),
            draft: Some((Arc::clone(draft), op)),
            run_id: None,
            ..self.clone()
        }
    }

    /// Whether a model makes the calls through this context.
    pub fn is_model_author(&self) -> bool {
        self.model_author
    }

    /// This context, for work that must end by `deadline` (a sandbox program):
    /// a write that cannot get the writer by then fails instead of waiting.
    pub fn with_deadline(&self, deadline: Instant) -> Context {
        Context {
            deadline: Some(deadline),
            ..self.clone()
        }
    }

    /// When work through this context must end (`None`: no deadline).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// This context, for agent run `run_id`: its commits carry the run's trailer.
    pub fn for_run(&self, run_id: &str) -> Context {
        Context {
            run_id: Some(Arc::from(run_id)),
            ..self.clone()
        }
    }

    /// A commit message (DESIGN 7.8): `subject`, then `body` after a blank
    /// line (when not empty), then, in an agent run, the run's
    /// `Mirai-Run: <run_id>` trailer as a paragraph of its own; it ends with
    /// a newline.
    pub fn commit_message(&self, subject: &str, body: &str) -> String {
        let mut message = format!("{subject}\n");
        let body = body.trim_end_matches('\n');
        if !body.is_empty() {
            message.push('\n');
            message.push_str(body);
            message.push('\n');
        }
        if let Some(run) = &self.run_id {
            message.push_str(&format!("\nMirai-Run: {run}\n"));
        }
        message
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
        let mut guard = match self.deadline {
            None => return lock_writer(&self.writer, self.view.disk_notes()).map(Writer),
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

/// Takes the writer lock (waiting as long as it takes) with the repository
/// opened. A panic during an earlier write left the repository as git left it; carry on.
fn lock_writer<'a>(
    writer: &'a Mutex<Option<Repo>>,
    notes: &Notes,
) -> Result<MutexGuard<'a, Option<Repo>>> {
    let mut guard = writer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if guard.is_none() {
        *guard = Some(Repo::open(notes)?);
    }
    Ok(guard)
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
    /// The code a malformed request gets: each endpoint keeps its own (DESIGN 7.2).
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
        prompt: O::PROMPT,
        reviewed: O::REVIEWED,
        request_schema: || schema_for!(O::Request),
        response_schema: response_schema::<O>,
        committed_schema: || schema_for!(O::Response),
        call: call_typed::<O>,
    }
}

/// A row's answer schema: for a write that review mode proposes, either its
/// committed answer or the proposal (`{"proposal", "changes"}`).
fn response_schema<O: Operation>() -> Schema {
    let committed = schema_for!(O::Response);
    if O::CLASS != Class::Write || !O::REVIEWED {
        return committed;
    }
    let proposed = schema_for!(Proposed);
    let mut value = committed.to_value();
    let defs = value
        .as_object_mut()
        .and_then(|object| object.remove("$defs"))
        .unwrap_or_else(|| json!({}));
    let mut proposed = proposed.to_value();
    proposed
        .as_object_mut()
        .map(|object| object.remove("$schema"));
    let schema_uri = value
        .as_object_mut()
        .and_then(|object| object.remove("$schema"));
    let mut both = json!({
        "title": value.get("title").cloned().unwrap_or(Value::Null),
        "description": "The committed answer; in review mode, the proposal the write made instead.",
        "anyOf": [value, proposed],
    });
    if let Some(uri) = schema_uri {
        both["$schema"] = uri;
    }
    if defs.as_object().is_some_and(|d| !d.is_empty()) {
        both["$defs"] = defs;
    }
    Schema::try_from(both).unwrap_or_else(|_| schema_for!(O::Response))
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
    entry::<NotesOutline>(),
    entry::<NotesRender>(),
    entry::<NotesHistory>(),
    entry::<NotesDiff>(),
    entry::<NotesLinks>(),
    entry::<NotesGraph>(),
    entry::<NotesTags>(),
    entry::<PatchPropose>(),
    entry::<PatchApply>(),
    entry::<PatchMake>(),
    entry::<NotesWrite>(),
    entry::<NotesEdit>(),
    entry::<NotesAppend>(),
    entry::<NotesInsert>(),
    entry::<NotesDelete>(),
    entry::<NotesMove>(),
    entry::<ChangesApply>(),
    entry::<NotesRevert>(),
    entry::<IndexRebuild>(),
    entry::<IndexStatus>(),
    entry::<IndexQuery>(),
    entry::<IndexInvalidate>(),
    entry::<RepoStatus>(),
    entry::<RepoSync>(),
    entry::<ProposalsList>(),
    entry::<ProposalsGet>(),
    entry::<ProposalsApprove>(),
    entry::<ProposalsReject>(),
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
/// then parsing, then the operation. In review mode a write of notes is run
/// against a draft and answers the proposal it made (see [`proposing`]).
pub fn dispatch(ctx: &Context, name: &str, input: Input<'_>) -> Result<Value> {
    let (op, request) = admit(ctx, name, input)?;
    if is_proposed(ctx, op) {
        return propose(ctx, op, request, |ctx, request| {
            (op.call)(ctx, request).map_err(|err| hinted(ctx, err))
        });
    }
    (op.call)(ctx, request).map_err(|err| hinted(ctx, err))
}

/// Whether an answer of row `op` is a proposal, not a commit (HTTP answers it 202).
pub fn answers_proposal(op: &OpEntry, answer: &Value) -> bool {
    op.class == Class::Write && answer.get("proposal").is_some()
}

/// What [`dispatch`] does for `repo.sync` (the one row of class sync), up to
/// the wait: policy, parsing and the row's checks, then the caller's place in
/// the next coalesced sync. For adapters that must not hold a thread while a
/// sync runs (HTTP awaits [`Ticket::answer`](crate::sync::Ticket::answer)).
pub fn dispatch_sync(ctx: &Context, name: &str, input: Input<'_>) -> Result<crate::sync::Ticket> {
    let (op, request) = admit(ctx, name, input)?;
    if op.name != RepoSync::NAME {
        return Err(Error::internal(format!("{} is not a sync", op.name)));
    }
    serde_json::from_value::<<RepoSync as Operation>::Request>(request).map_err(|e| {
        Error::new(
            op.malformed,
            format!("malformed request for {}: {e}", op.name),
        )
    })?;
    RepoSync::ticket(ctx)
}

/// The row named `name`, once policy allows it, and its request as JSON.
fn admit(ctx: &Context, name: &str, input: Input<'_>) -> Result<(&'static OpEntry, Value)> {
    let op = find(name).ok_or_else(|| Error::not_found(format!("unknown operation: {name}")))?;
    check_policy(ctx.policy, ctx.reviewer, op)?;
    let request = match input {
        Input::Json(value) => value,
        Input::Body(bytes) => crate::json::from_slice(bytes).map_err(|e| {
            Error::new(
                op.malformed,
                format!("request body for {} is not valid JSON: {e}", op.name),
            )
        })?,
    };
    Ok((op, request))
}

/// `err`, with the notes holding the words of the missing note's name added
/// when it is a missing note's `not_found` with no close name: found by the
/// index.query row itself (lexical, so no embedding server is asked). A small
/// model that guessed `recipes/sourdough.md` is told about `recipes/bread.md`
/// instead of being left to guess again.
fn hinted(ctx: &Context, mut err: Error) -> Error {
    if err.code != ErrorCode::NotFound || !err.message.starts_with(suggest::MISSING) {
        return err;
    }
    let Some(before) = err.message.strip_suffix(NOTHING_CLOSE) else {
        return err;
    };
    let Some(words) = name_words(before) else {
        return err;
    };
    let found = notes_holding(ctx, &words);
    if !found.is_empty() {
        let quoted: Vec<String> = found.iter().map(|path| format!("{path:?}")).collect();
        err.message = format!(
            "{before}; no note has a close name, but these notes hold its words: {}",
            quoted.join(", ")
        );
    }
    err
}

/// The words of the path in a missing note's message (`note not found:
/// "recipes/sourdough.md"` gives `recipes sourdough`).
fn name_words(message: &str) -> Option<String> {
    let quoted = message.strip_prefix(suggest::MISSING)?;
    let path: String = serde_json::from_str(quoted).ok()?;
    let path = path.strip_suffix(".md").unwrap_or(&path);
    let words: Vec<&str> = path
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// Up to [`MAX_SUGGESTIONS`] notes, best first, whose text matches `words`.
fn notes_holding(ctx: &Context, words: &str) -> Vec<String> {
    let request = json!({"q": words, "limit": 10, "mode": "lexical"});
    let Ok(answer) = dispatch(ctx, "index.query", Input::Json(request)) else {
        return Vec::new();
    };
    let mut paths: Vec<String> = Vec::new();
    for chunk in answer["chunks"].as_array().into_iter().flatten() {
        if let Some(path) = chunk["metadata"]["path"].as_str().map(str::to_string) {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        if paths.len() == MAX_SUGGESTIONS {
            break;
        }
    }
    paths
}

fn check_policy(mode: PolicyMode, reviewer: bool, op: &OpEntry) -> Result<()> {
    if mode == PolicyMode::ReadOnly && matches!(op.class, Class::Write | Class::Review) {
        return Err(Error::new(
            ErrorCode::PolicyDenied,
            format!("action {} is denied in read_only mode", op.name),
        ));
    }
    if op.class == Class::Review && !reviewer {
        return Err(Error::new(
            ErrorCode::PolicyDenied,
            format!(
                "{} is a reviewer's action: over HTTP send Authorization: Bearer \
                 <MIRAI_REVIEWER_TOKEN> (the API token cannot), or run `mirai proposals` \
                 on the server; the sandbox, agent runs and MCP can list and read proposals \
                 but never approve or reject them",
                op.name
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_paths_words_are_its_folders_and_name() {
        assert_eq!(
            name_words("note not found: \"recipes/sour-dough_bread.md\"").as_deref(),
            Some("recipes sour dough bread")
        );
        assert_eq!(name_words("note not found: \"--.md\""), None);
        assert_eq!(name_words("unknown operation: x"), None);
    }

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
            prompt: PromptDetail::Full,
            reviewed: true,
            request_schema: || schema_for!(Empty),
            response_schema: || schema_for!(Empty),
            committed_schema: || schema_for!(Empty),
            call: |_, v| Ok(v),
        };
        let err = check_policy(PolicyMode::ReadOnly, true, &write).unwrap_err();
        assert_eq!(err.code, ErrorCode::PolicyDenied);
        assert_eq!(err.message, "action x.write is denied in read_only mode");
        assert!(check_policy(PolicyMode::AllowAll, false, &write).is_ok());
        assert!(check_policy(PolicyMode::Review, false, &write).is_ok());
        assert!(check_policy(PolicyMode::ReadOnly, false, find("notes.read").unwrap()).is_ok());
    }

    #[test]
    fn a_proposed_writes_schema_describes_both_answers() {
        for op in TABLE {
            let schema = (op.response_schema)().to_value();
            let branches = schema["anyOf"].as_array();
            if op.class == Class::Write && op.reviewed {
                let branches = branches.unwrap_or_else(|| panic!("{}: {schema}", op.name));
                assert_eq!(branches.len(), 2, "{}", op.name);
                assert_eq!(
                    branches[0]["properties"],
                    (op.committed_schema)().to_value()["properties"],
                    "{}",
                    op.name
                );
                assert!(
                    branches[1]["properties"]["proposal"].is_object(),
                    "{}",
                    op.name
                );
            } else {
                assert!(branches.is_none(), "{}", op.name);
            }
        }
        assert!(!find("index.rebuild").unwrap().reviewed);
        assert!(!find("patch.propose").unwrap().reviewed);
    }

    #[test]
    fn only_a_reviewer_decides_proposals_and_never_in_read_only_mode() {
        let approve = find("proposals.approve").unwrap();
        for mode in [PolicyMode::AllowAll, PolicyMode::Review] {
            let err = check_policy(mode, false, approve).unwrap_err();
            assert_eq!(err.code, ErrorCode::PolicyDenied);
            assert!(
                err.message.contains("MIRAI_REVIEWER_TOKEN"),
                "{}",
                err.message
            );
            assert!(check_policy(mode, true, approve).is_ok());
            assert!(check_policy(mode, false, find("proposals.list").unwrap()).is_ok());
        }
        assert!(check_policy(PolicyMode::ReadOnly, true, approve).is_err());
    }
}
