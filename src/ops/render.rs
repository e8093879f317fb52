//! `notes.render`: a note as the web page shows it: its body as sanitized
//! HTML ([`crate::vault::render`]), its links resolved against the vault as
//! `notes.links` resolves them, and its front matter as data, never rendered.

use std::borrow::Cow;
use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{ErrorCode, Result};
use crate::index::Fingerprint;
use crate::vault::facts::NoteFacts;
use crate::vault::sections::line_count;
use crate::vault::{front_matter, render};

/// `notes.render`: one note as HTML.
pub struct NotesRender;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RenderRequest {
    /// The note's path relative to the notes root.
    pub path: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RenderResponse {
    pub path: String,
    /// The note's title: front matter title, else its first heading, else its file name.
    pub title: String,
    /// The body after the front matter as HTML, sanitized: no scripts, event
    /// handlers, `javascript:` links, SVG or images; links that resolve to a
    /// note point at `/ui/notes/<path>`, others are `<span class="unresolved">`.
    pub html: String,
    /// The note's YAML front matter, or null when it has none (or it is broken).
    pub front_matter: Option<Map<String, Value>>,
    /// Why the front matter could not be read (its lines are then body text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub front_matter_error: Option<String>,
    /// Lines in the whole note.
    pub line_count: usize,
    /// Bytes of the whole note.
    pub bytes: usize,
    /// The note's tags (front matter and inline #tags), lowercased, without #.
    pub tags: Vec<String>,
}

impl Operation for NotesRender {
    const NAME: &'static str = "notes.render";
    const EXAMPLE: &'static str = r##"await mirai.notes.render({path: "trips/lisbon.md"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "A note rendered as sanitized HTML for display, with its front matter as data.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/notes/render", HttpInput::Query(&["path"]));
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = RenderRequest;
    type Response = RenderResponse;

    fn run(ctx: &Context, request: RenderRequest) -> Result<RenderResponse> {
        // The note size limit bounds the text, and so the work and the HTML.
        let (note, content) = ctx.view.read(&request.path)?;
        let vault = ctx.index.vault_as_if(&ctx.view.as_seen()?)?;
        // The vault's facts of this very version when it holds them (no second scan).
        let print = Fingerprint::of(&content);
        let facts = match vault.note(&note.rel).filter(|facts| facts.print == print) {
            Some(kept) => Cow::Borrowed(kept),
            None => Cow::Owned(NoteFacts::of(&note.rel, &content)),
        };
        let links: HashMap<usize, Option<String>> = facts
            .links
            .iter()
            .map(|link| {
                let resolved = vault.resolve(&note.rel, link).map(str::to_string);
                (link.span.start, resolved)
            })
            .collect();
        let front = front_matter::parse(&content);
        Ok(RenderResponse {
            html: render::render(&content, front.body_start(), &links),
            title: facts.title.clone(),
            tags: facts.tags.clone(),
            front_matter: front.fields().cloned(),
            front_matter_error: front.error().map(str::to_string),
            line_count: line_count(&content),
            bytes: content.len(),
            path: note.rel,
        })
    }
}
