//! `notes.outline`: a note's headings with the line ranges of their sections,
//! its line count and tokens, so a long note can be read a section at a time
//! (`notes.read` with `section` or `lines`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{ErrorCode, Result};
use crate::vault::sections::{self, line_count};
use crate::vault::tokens;

/// `notes.outline`: the headings of a note.
pub struct NotesOutline;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct OutlineRequest {
    /// The note's path relative to the notes root.
    pub path: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct OutlineResponse {
    pub path: String,
    /// The headings outside code and front matter, in order.
    pub headings: Vec<OutlineHeading>,
    /// Lines in the note.
    pub line_count: usize,
    /// o200k_base tokens of the whole note.
    pub tokens: usize,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct OutlineHeading {
    /// 1 to 6.
    pub level: u8,
    /// The heading's text without the #s.
    pub text: String,
    /// 1-based line of the heading: where its section starts.
    pub line: usize,
    /// Last line of its section (before the next heading of the same or a higher level).
    pub line_end: usize,
}

impl Operation for NotesOutline {
    const NAME: &'static str = "notes.outline";
    const EXAMPLE: &'static str = r##"await mirai.notes.outline({path: "trips/lisbon.md"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "A note's headings with their lines, and its line_count and tokens.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/notes/outline", HttpInput::Query(&["path"]));
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = OutlineRequest;
    type Response = OutlineResponse;

    fn run(ctx: &Context, request: OutlineRequest) -> Result<OutlineResponse> {
        let (note, content) = ctx.view.read(&request.path)?;
        let headings = sections::headings(&content)
            .into_iter()
            .map(|h| OutlineHeading {
                level: h.level,
                text: h.text().to_string(),
                line: h.line,
                line_end: h.last_line,
            })
            .collect();
        Ok(OutlineResponse {
            path: note.rel,
            headings,
            line_count: line_count(&content),
            tokens: tokens::count_cached(&content),
        })
    }
}
