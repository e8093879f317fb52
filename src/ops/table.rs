//! The table itself and [`dispatch`], the one door every adapter calls:
//! policy first, then parsing (a field the row does not know refused, see
//! [`fields`]), then the row (or, in review mode, a proposal).

use std::collections::HashMap;
use std::sync::OnceLock;

use schemars::{schema_for, Schema};
use serde_json::{json, Value};

use super::fields;
use super::settings::PolicyMode;
use super::*;
use crate::callers::Right;
use crate::error::{Error, ErrorCode, Result};
use crate::notes::suggest::{self, MAX_SUGGESTIONS};

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
        request_schema: request_schema::<O>,
        response_schema: response_schema::<O>,
        committed_schema: || schema_for!(O::Response),
        call: call_typed::<O>,
    }
}

/// A row's request schema: every object in it closed to fields it does not
/// name (`additionalProperties: false`), as [`admit`] enforces.
fn request_schema<O: Operation>() -> Schema {
    let closed = fields::strict(schema_for!(O::Request).to_value());
    Schema::try_from(closed).unwrap_or_else(|_| schema_for!(O::Request))
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
    entry::<FilesList>(),
    entry::<FilesRead>(),
    entry::<FilesWrite>(),
    entry::<FilesDelete>(),
    entry::<PatchPropose>(),
    entry::<PatchApply>(),
    entry::<PatchMake>(),
    entry::<NotesWrite>(),
    entry::<NotesEdit>(),
    entry::<NotesFrontMatter>(),
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

/// Runs operation `name`: policy first, from the operation alone
/// (ARCHITECTURE.md, "Policy before parsing"), then parsing, then the
/// operation. In review mode a write of notes is run against a draft and
/// answers the proposal it made (see [`proposing`]).
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

/// What [`dispatch`] does for `files.read`, answering the whole file (for
/// HTTP's raw answer) instead of the row's JSON: policy, parsing and the
/// unknown-field check, then [`FilesRead::whole`].
pub fn dispatch_file(ctx: &Context, name: &str, input: Input<'_>) -> Result<FileBytes> {
    let (op, request) = admit(ctx, name, input)?;
    if op.name != FilesRead::NAME {
        return Err(Error::internal(format!(
            "{} does not answer a file",
            op.name
        )));
    }
    let request = serde_json::from_value(request).map_err(|e| {
        Error::new(
            op.malformed,
            format!("malformed request for {}: {e}", op.name),
        )
    })?;
    FilesRead::whole(ctx, request)
}

/// Whether `ctx` may run row `name` at all (policy and the caller's rights),
/// decided from the row alone: for an adapter about to read a large body
/// (HTTP's raw file upload) before it reads it.
pub fn admits(ctx: &Context, name: &str) -> Result<()> {
    let op = find(name).ok_or_else(|| Error::not_found(format!("unknown operation: {name}")))?;
    check_policy(ctx.policy, ctx.reviewer, op)?;
    check_rights(ctx, op)
}

/// The row named `name`, once policy allows it, and its request as JSON.
fn admit(ctx: &Context, name: &str, input: Input<'_>) -> Result<(&'static OpEntry, Value)> {
    let op = find(name).ok_or_else(|| Error::not_found(format!("unknown operation: {name}")))?;
    check_policy(ctx.policy, ctx.reviewer, op)?;
    check_rights(ctx, op)?;
    let request = match input {
        Input::Json(value) => value,
        Input::Body(bytes) => crate::json::from_slice(bytes).map_err(|e| {
            Error::new(
                op.malformed,
                format!("request body for {} is not valid JSON: {e}", op.name),
            )
        })?,
    };
    if let Some(why) = known_schema(op).and_then(|schema| fields::unknown(schema, &request)) {
        return Err(Error::new(
            op.malformed,
            format!("malformed request for {}: {why}", op.name),
        ));
    }
    Ok((op, request))
}

/// Row `op`'s request schema as JSON, made once for every row of [`TABLE`]
/// (the unknown-field check reads it on every call).
fn known_schema(op: &OpEntry) -> Option<&'static Value> {
    static SCHEMAS: OnceLock<HashMap<&'static str, Value>> = OnceLock::new();
    SCHEMAS
        .get_or_init(|| {
            TABLE
                .iter()
                .map(|row| (row.name, (row.request_schema)().to_value()))
                .collect()
        })
        .get(op.name)
}

/// `err`, with the notes holding the words of the missing note's name added
/// when it is a missing note's `not_found` with no close name: found by the
/// index.query row itself (lexical, so no embedding server is asked). A small
/// model that guessed `recipes/sourdough.md` is told about `recipes/bread.md`
/// instead of being left to guess again.
fn hinted(ctx: &Context, err: Error) -> Error {
    let Some(note) = suggest::missing_note(&err) else {
        return err;
    };
    if note
        .closest
        .as_ref()
        .is_none_or(|closest| !closest.is_empty())
    {
        return err;
    }
    let Some(words) = name_words(&note.path) else {
        return err;
    };
    let found = notes_holding(ctx, &words);
    suggest::amend_missing(err, |note| note.holding = found)
}

/// The words of a note's path (`recipes/sourdough.md` gives `recipes sourdough`).
fn name_words(path: &str) -> Option<String> {
    let path = path.strip_suffix(".md").unwrap_or(path);
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

/// The rights any one of which lets a caller run row `op` (ARCHITECTURE.md,
/// "Callers"): a row of class read needs `read` (the proposals' own rows also
/// `review`), a write of notes `write` or `propose` (then it is proposed), any
/// other write `write`, sync `sync`, review `review`.
fn rights_for(op: &OpEntry) -> &'static [Right] {
    match op.class {
        Class::Read if op.name.starts_with("proposals.") => &[Right::Read, Right::Review],
        Class::Read => &[Right::Read],
        Class::Write if op.reviewed => &[Right::Write, Right::Propose],
        Class::Write => &[Right::Write],
        Class::Sync => &[Right::Sync],
        Class::Review => &[Right::Review],
    }
}

/// The named caller's rights: it holds one of [`rights_for`] the row.
/// Decided from the row alone, before the body is read.
fn check_rights(ctx: &Context, op: &OpEntry) -> Result<()> {
    let Some(caller) = ctx.caller() else {
        return Ok(());
    };
    let needs = rights_for(op);
    if needs.iter().any(|right| caller.can.has(*right)) {
        return Ok(());
    }
    let needs = needs
        .iter()
        .map(|right| right.name())
        .collect::<Vec<_>>()
        .join(" or ");
    let fix = if caller.withheld.is_empty() {
        "ask the operator to add it in MIRAI_CALLERS_FILE"
    } else {
        "sign in again asking for the scope that grants it, or ask the operator to add it in \
         MIRAI_CALLERS_FILE"
    };
    Err(Error::new(
        ErrorCode::PolicyDenied,
        format!(
            "caller {} may not run {}: that takes the {needs} right, and its `can` holds [{}]; {fix}",
            caller.name,
            op.name,
            caller.can.names().join(", ")
        ),
    ))
}

/// The right whose want alone keeps `ctx`'s caller from row `name`, when its
/// access token's scopes withheld it (a token with the scope that grants it
/// would run the row): what an adapter names in an `insufficient_scope`
/// challenge. `None` when the row is allowed, refused for another reason
/// (policy, an unknown row), or the right is not the token's to grant.
pub fn missing_right(ctx: &Context, name: &str) -> Option<Right> {
    let op = find(name)?;
    let caller = ctx.caller()?;
    check_policy(ctx.policy, ctx.reviewer, op).ok()?;
    check_rights(ctx, op).err()?;
    rights_for(op)
        .iter()
        .copied()
        .find(|right| caller.withheld.has(*right))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_paths_words_are_its_folders_and_name() {
        assert_eq!(
            name_words("recipes/sour-dough_bread.md").as_deref(),
            Some("recipes sour dough bread")
        );
        assert_eq!(name_words("--.md"), None);
    }

    #[test]
    fn every_row_refuses_a_field_it_does_not_know() {
        for op in TABLE {
            let schema = known_schema(op).unwrap();
            let why = fields::unknown(schema, &json!({"zz_unknown": 1}));
            assert!(
                why.as_deref()
                    .is_some_and(|why| why.starts_with("unknown field `zz_unknown`")),
                "{}: {why:?} {schema}",
                op.name
            );
            assert_eq!(schema["additionalProperties"], json!(false), "{}", op.name);
        }
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
