//! `notes.front_matter`: set or remove a note's front matter fields, leaving
//! every other byte as it was (vault/front_matter_edit.rs); the result goes
//! down `patch.apply`'s own path, one commit (`mcp.patch_apply: <path>`), or a
//! proposal in review mode.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::change::check_size;
use super::guard::GuardPolicy;
use super::write::{write_through_patch, Written};
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::{suggest, Existence};
use crate::vault::front_matter_edit;

/// `notes.front_matter`: a note's front matter fields set or removed.
pub struct NotesFrontMatter;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FrontMatterRequest {
    /// The note's path relative to the notes root.
    pub path: String,
    /// Fields to set, each to its value (a string, number, true/false, a list); added when missing.
    #[serde(default)]
    pub set: Map<String, Value>,
    /// Names of fields to remove.
    #[serde(default)]
    pub remove: Vec<String>,
    /// Refuse (conflict) when the note changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
}

impl Operation for NotesFrontMatter {
    const NAME: &'static str = "notes.front_matter";
    const EXAMPLE: &'static str = r##"await mirai.notes.front_matter({path: "recipes/bread.md", set: {status: "tested"}, remove: ["draft"]})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Set or remove front matter fields; every other line stays as it is.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/front_matter", HttpInput::Body);
    // The prompt's vault examples show it in use.
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = FrontMatterRequest;
    type Response = Written;

    fn run(ctx: &Context, request: FrontMatterRequest) -> Result<Written> {
        let guard = GuardPolicy::for_write(ctx, false);
        write_through_patch(ctx, request.base_commit.as_deref(), &guard, |ctx| {
            let note = ctx
                .view
                .resolve_for_write(&request.path, Existence::MustExist)?;
            let current = ctx
                .view
                .current_text(&note)?
                .ok_or_else(|| suggest::missing(&note.rel))?;
            let edited = front_matter_edit::edit(&current, &request.set, &request.remove).map_err(
                |why| {
                    Error::new(
                        ErrorCode::InvalidRequest,
                        format!("cannot change the front matter of {}: {why}", note.rel),
                    )
                },
            )?;
            check_size(ctx, &note, &edited)?;
            Ok((note, Some(current), edited))
        })
    }
}
