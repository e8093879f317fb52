//! The link graph's rows: `notes.links` (a note's links out, resolved, and the
//! links into it) and `notes.graph` (broken links and orphan notes, paged).
//! Both read the [`crate::vault::Vault`] the live index keeps beside itself
//! (with a dry run's unsaved notes taken in); a note's own links are those
//! of its text as it is now (the graph's when it holds that very text, by
//! size and hash, else read from it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::history::page_limit;
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::index::Fingerprint;
use crate::vault::facts::NoteFacts;
use crate::vault::graph::Broken;

/// Most links of each list one `notes.links` answer carries.
pub const MAX_LINKS_LISTED: usize = 1000;
/// Entries one `notes.graph` page holds by default.
pub const DEFAULT_GRAPH_LIMIT: usize = 100;
/// The most entries one `notes.graph` page may hold.
pub const MAX_GRAPH_LIMIT: usize = 1000;

/// `notes.links`: a note's outgoing links and its backlinks.
pub struct NotesLinks;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LinksRequest {
    /// The note's path relative to the notes root.
    pub path: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LinksResponse {
    pub path: String,
    /// The note's links, in the order they appear.
    pub outgoing: Vec<OutgoingLink>,
    /// Links from notes (this one included) that resolve to this note, by path and line.
    pub backlinks: Vec<Backlink>,
    /// How many more outgoing links there are than listed (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outgoing_omitted: usize,
    /// How many more backlinks there are than listed (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backlinks_omitted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct OutgoingLink {
    /// The target as written, with its #heading or #^block.
    pub target: String,
    /// The file it resolves to, or null when none does.
    pub resolved: Option<String>,
    /// 1-based line.
    pub line: u32,
    /// The alias or link text.
    pub text: String,
    /// wikilink, embed or markdown.
    pub kind: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Backlink {
    /// The linking note.
    pub path: String,
    /// 1-based line of the link.
    pub line: u32,
    /// The linking line, trimmed to 200 characters.
    pub context: String,
}

impl Operation for NotesLinks {
    const NAME: &'static str = "notes.links";
    const EXAMPLE: &'static str = r##"await mirai.notes.links({path: "trips/lisbon.md"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "A note's links, each with the file it resolves to, and its backlinks.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/notes/links", HttpInput::Query(&["path"]));
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = LinksRequest;
    type Response = LinksResponse;

    fn run(ctx: &Context, request: LinksRequest) -> Result<LinksResponse> {
        let (note, content) = ctx.view.read(&request.path)?;
        let vault = ctx.index.vault_as_if(&ctx.view.as_seen()?)?;
        // The graph's facts when they are of this very text; else read now.
        let read_now;
        let facts = match vault.note(&note.rel) {
            Some(kept) if kept.print == Fingerprint::of(&content) => kept,
            _ => {
                read_now = NoteFacts::of(&note.rel, &content);
                &read_now
            }
        };
        let outgoing_omitted = facts.links.len().saturating_sub(MAX_LINKS_LISTED);
        let outgoing = facts
            .links
            .iter()
            .take(MAX_LINKS_LISTED)
            .map(|link| OutgoingLink {
                target: link.target.clone(),
                resolved: vault.resolve(&note.rel, link).map(str::to_string),
                line: link.line,
                text: link.text.clone(),
                kind: link.kind.as_str().to_string(),
            })
            .collect();
        let backlinks = vault.backlinks(&note.rel);
        let backlinks_omitted = backlinks.len().saturating_sub(MAX_LINKS_LISTED);
        Ok(LinksResponse {
            path: note.rel,
            outgoing,
            backlinks: backlinks
                .into_iter()
                .take(MAX_LINKS_LISTED)
                .map(|b| Backlink {
                    path: b.path,
                    line: b.line,
                    context: b.context,
                })
                .collect(),
            outgoing_omitted,
            backlinks_omitted,
        })
    }
}

/// `notes.graph`: the vault's broken links and orphan notes.
pub struct NotesGraph;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GraphRequest {
    /// How many entries (broken links, then orphans), 1 to 1000 (default 100).
    /// A number, or a decimal string.
    #[serde(default)]
    #[schemars(with = "Option<u32>", extend("default" = DEFAULT_GRAPH_LIMIT))]
    pub limit: Option<Value>,
    /// The `next_cursor` of the previous page, to go on from there.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct GraphResponse {
    /// Links that resolve to no file, by note path and line.
    pub broken: Vec<BrokenLink>,
    /// Notes with no link to another file and none from another note, sorted.
    pub orphans: Vec<String>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct BrokenLink {
    pub path: String,
    pub line: u32,
    pub target: String,
}

/// Where a page of `notes.graph` starts: after this broken link, or after this orphan.
#[derive(Debug, PartialEq, Eq)]
enum Cursor {
    Broken { path: String, seq: usize },
    Orphan { path: String },
}

impl Cursor {
    fn parse(raw: &str) -> Result<Cursor> {
        let bad = || {
            Error::new(
                ErrorCode::InvalidRequest,
                format!(
                    "cursor {raw:?} is not one notes.graph gave: pass the next_cursor of the previous page as it is, or leave it out to start at the beginning"
                ),
            )
        };
        match raw.split_once(':').ok_or_else(bad)? {
            ("o", path) if !path.is_empty() => Ok(Cursor::Orphan {
                path: path.to_string(),
            }),
            ("b", rest) => {
                let (seq, path) = rest.split_once(':').ok_or_else(bad)?;
                let seq = seq.parse().map_err(|_| bad())?;
                (!path.is_empty())
                    .then(|| Cursor::Broken {
                        path: path.to_string(),
                        seq,
                    })
                    .ok_or_else(bad)
            }
            _ => Err(bad()),
        }
    }
}

impl Operation for NotesGraph {
    const NAME: &'static str = "notes.graph";
    const EXAMPLE: &'static str = r##"await mirai.notes.graph({limit: 50})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str = "Broken links and orphan notes, paged.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute =
        HttpRoute::get("/mcp/notes/graph", HttpInput::Query(&["limit", "cursor"]));
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = GraphRequest;
    type Response = GraphResponse;

    fn run(ctx: &Context, request: GraphRequest) -> Result<GraphResponse> {
        let limit = page_limit(request.limit.as_ref(), DEFAULT_GRAPH_LIMIT, MAX_GRAPH_LIMIT)?;
        let cursor = request.cursor.as_deref().map(Cursor::parse).transpose()?;
        let vault = ctx.index.vault_as_if(&ctx.view.as_seen()?)?;
        // Both lists are sorted (broken links by note and place, orphans by
        // path): a page starts right after its cursor.
        let broken_start = match &cursor {
            None => 0,
            Some(Cursor::Broken { path, seq }) => vault
                .broken()
                .partition_point(|b| (b.path.as_str(), b.seq) <= (path.as_str(), *seq)),
            Some(Cursor::Orphan { .. }) => vault.broken().len(),
        };
        let mut broken: Vec<&Broken> = vault.broken()[broken_start..]
            .iter()
            .take(limit + 1)
            .collect();
        let mut next_cursor = None;
        if broken.len() > limit {
            broken.truncate(limit);
            let last = broken[limit - 1];
            next_cursor = Some(format!("b:{}:{}", last.seq, last.path));
        }
        let mut orphans: Vec<String> = Vec::new();
        let room = limit - broken.len();
        if next_cursor.is_none() {
            let orphans_start = match &cursor {
                Some(Cursor::Orphan { path: after }) => vault
                    .orphans()
                    .partition_point(|path| path.as_str() <= after.as_str()),
                _ => 0,
            };
            let mut all = vault.orphans()[orphans_start..].iter();
            orphans = all.by_ref().take(room).cloned().collect();
            if all.next().is_some() {
                next_cursor = match orphans.last() {
                    Some(last) => Some(format!("o:{last}")),
                    // The page is full of broken links; orphans start on the next.
                    None => broken.last().map(|b| format!("b:{}:{}", b.seq, b.path)),
                };
            }
        }
        Ok(GraphResponse {
            broken: broken
                .into_iter()
                .map(|b| BrokenLink {
                    path: b.path.clone(),
                    line: b.line,
                    target: b.target.clone(),
                })
                .collect(),
            orphans,
            next_cursor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_say_what_to_do() {
        assert_eq!(
            Cursor::parse("b:3:a/b:c.md").unwrap(),
            Cursor::Broken {
                path: "a/b:c.md".into(),
                seq: 3
            }
        );
        assert_eq!(
            Cursor::parse("o:x.md").unwrap(),
            Cursor::Orphan {
                path: "x.md".into()
            }
        );
        for bad in ["", "b:x:y.md", "o:", "z:1", "b:1:"] {
            let err = Cursor::parse(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidRequest);
            assert!(err.message.contains("next_cursor"), "{}", err.message);
        }
    }
}
