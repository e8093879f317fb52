//! Index operations: `index.rebuild`, `index.status`, `index.query`,
//! `index.invalidate`, over the server's [`crate::index::live::LiveIndex`].

use chrono::{SecondsFormat, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::grouped::{self, Passage};
use super::tags::{tag_param, tagged};
use super::{Class, Context, Empty, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::{Landing, Seen};
use crate::{embed, index};

/// `index.rebuild`: index every note and write `.mirai/index.json`.
pub struct IndexRebuild;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RebuildResponse {
    pub notes_indexed: usize,
    pub chunks_indexed: usize,
}

impl Operation for IndexRebuild {
    const NAME: &'static str = "index.rebuild";
    const EXAMPLE: &'static str = r##"await mirai.index.rebuild()"##;
    const CLASS: Class = Class::Write;
    /// Changes no note: review mode runs it as allow_all does.
    const REVIEWED: bool = false;
    const SUMMARY: &'static str =
        "Rebuild the search index from every note and write the artifact .mirai/index.json.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/index/rebuild", HttpInput::Nothing);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = Empty;
    type Response = RebuildResponse;

    fn run(ctx: &Context, _request: Empty) -> Result<RebuildResponse> {
        refuse_in_dry_run(ctx, Self::NAME)?;
        // Holding the writer keeps applies out while the notes are read.
        let repo = ctx.writer()?;
        let head = repo.head()?;
        // A root never served (only rebuilt from cron) gets the exclusion here.
        crate::repo::exclude_mirai_folder(&ctx.view.disk_notes().root().join(".git")).map_err(
            |e| {
                Error::internal(format!(
                    "cannot keep .mirai/ out of git (.git/info/exclude): {e}"
                ))
            },
        )?;
        let rebuilt = ctx.index.rebuild(head.as_deref())?;
        Ok(RebuildResponse {
            notes_indexed: rebuilt.notes_indexed,
            chunks_indexed: rebuilt.chunks_indexed,
        })
    }
}

/// `index.status`: what the artifact holds and whether the notes moved on since.
pub struct IndexStatus;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct StatusResponse {
    pub present: bool,
    pub generated_at: Option<String>,
    pub notes_indexed: Option<usize>,
    pub chunks_indexed: Option<usize>,
    pub stale: Option<bool>,
    /// Why the artifact is stale (null when it is not).
    pub stale_reason: Option<String>,
    /// How many notes changed since the artifact was written (null when it is not stale).
    pub notes_changed_since: Option<usize>,
    pub artifact_age_seconds: Option<i64>,
    pub notes_present: usize,
    /// Notes larger than `MIRAI_MAX_NOTE_BYTES`: never read, indexed or embedded.
    pub notes_too_large: usize,
    pub artifact_byte_size: Option<u64>,
    pub chunks_content_bytes_total: Option<u64>,
    pub notes_commit: Option<String>,
    /// Chunk embeddings (null when no embedding server is configured).
    pub embeddings: Option<EmbeddingsStatus>,
}

/// How far the background worker is with embedding the chunks.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct EmbeddingsStatus {
    pub model: String,
    pub chunks_embedded: usize,
    /// Chunks still waiting for a vector; semantic ranking skips them.
    pub chunks_pending: usize,
    /// The last failure of the embedding server (null once a batch succeeds).
    pub last_error: Option<String>,
}

impl Operation for IndexStatus {
    const NAME: &'static str = "index.status";
    const EXAMPLE: &'static str = r##"await mirai.index.status()"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Describe the index artifact: when it was built, from which commit, its size, and whether notes changed since.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/index/status", HttpInput::Nothing);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = Empty;
    type Response = StatusResponse;

    fn run(ctx: &Context, _request: Empty) -> Result<StatusResponse> {
        let status = ctx.index.status()?;
        let (notes_present, notes_too_large) = ctx.index.note_counts()?;
        let embeddings = ctx.embeddings.as_ref().map(|e| {
            let s = e.status();
            EmbeddingsStatus {
                model: s.model,
                chunks_embedded: s.chunks_embedded,
                chunks_pending: s.chunks_pending,
                last_error: s.last_error,
            }
        });
        Ok(match status {
            None => StatusResponse {
                present: false,
                generated_at: None,
                notes_indexed: None,
                chunks_indexed: None,
                stale: None,
                stale_reason: None,
                notes_changed_since: None,
                artifact_age_seconds: None,
                notes_present,
                notes_too_large,
                artifact_byte_size: None,
                chunks_content_bytes_total: None,
                notes_commit: None,
                embeddings,
            },
            Some(s) => StatusResponse {
                present: true,
                generated_at: Some(s.generated_at.to_rfc3339_opts(SecondsFormat::Secs, true)),
                notes_indexed: Some(s.notes_indexed),
                chunks_indexed: Some(s.chunks_indexed),
                stale: Some(s.stale),
                stale_reason: s.stale.then(|| {
                    format!(
                        "{} notes differ from the artifact (changed by mirai or beside it since it was \
                         written); mirai rewrites it within seconds, or POST /mcp/index/rebuild now",
                        s.notes_changed_since
                    )
                }),
                notes_changed_since: s.stale.then_some(s.notes_changed_since),
                artifact_age_seconds: Some((Utc::now() - s.generated_at).num_seconds().max(0)),
                notes_present,
                notes_too_large,
                artifact_byte_size: Some(s.byte_size),
                chunks_content_bytes_total: Some(s.content_bytes),
                notes_commit: s.notes_commit,
                embeddings,
            },
        })
    }
}

/// `index.query`: rank note chunks for a query.
pub struct IndexQuery;

/// With `tag`, how many of the best chunks are looked at, at most, for tagged ones.
pub const MAX_TAGGED_CHUNKS: usize = 3200;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct QueryRequest {
    /// The words to search for.
    #[serde(default)]
    #[schemars(required, with = "String")]
    pub q: Option<String>,
    /// How many chunks to answer, 1 to [`index::MAX_LIMIT`] (default
    /// [`index::DEFAULT_LIMIT`]). A number, or a decimal string.
    #[serde(default)]
    #[schemars(
        with = "Option<u32>",
        description = limit_description(),
        extend("default" = index::DEFAULT_LIMIT)
    )]
    pub limit: Option<Value>,
    /// Only notes under this folder, e.g. "projects/".
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// How to rank: "lexical" (the words), "semantic" (the meaning, by
    /// embeddings) or "hybrid" (both fused); the default is hybrid when an
    /// embedding server is configured, else lexical.
    #[serde(default)]
    #[schemars(with = "Option<QueryMode>")]
    pub mode: Option<Value>,
    /// Only notes with this tag.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub tag: Option<Value>,
    /// Skip this many of the best chunks first, for the next page: 0 to
    /// [`MAX_OFFSET`] (default 0). A number, or a decimal string.
    #[serde(default)]
    #[schemars(
        with = "Option<u32>",
        description = offset_description(),
        extend("default" = 0)
    )]
    pub offset: Option<Value>,
    /// "note": one result per note (its best chunk, with `other_chunks`,
    /// `context` and the note's `tags`), `limit` and `offset` counting notes;
    /// "chunk" (the default): one result per chunk.
    #[serde(default)]
    #[schemars(with = "Option<QueryGroup>")]
    pub group: Option<Value>,
}

/// `index.query`'s `group` values.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QueryGroup {
    Chunk,
    Note,
}

/// The most chunks `offset` may skip: paging stops 1,000 chunks down.
pub const MAX_OFFSET: usize = 1000;

/// `index.query`'s ranking modes.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QueryMode {
    Lexical,
    Semantic,
    Hybrid,
}

/// The `limit` field's description as models and MCP clients read it, from the
/// numbers the server uses.
fn limit_description() -> String {
    format!(
        "How many chunks to answer, 1 to {} (default {}). A number, or a decimal string.",
        index::MAX_LIMIT,
        index::DEFAULT_LIMIT
    )
}

/// The `offset` field's description, from the bound the server uses (a doc
/// comment's link would reach models and MCP clients as `[`MAX_OFFSET`]`).
fn offset_description() -> String {
    format!(
        "Skip this many of the best chunks first, for the next page: 0 to {MAX_OFFSET} (default 0). \
         A number, or a decimal string."
    )
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct QueryResponse {
    pub query: String,
    pub limit: usize,
    /// How many of the best chunks were skipped (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: usize,
    /// The mode that ranked the answer: lexical when semantic ranking was asked
    /// for but could not be had (then `degraded` says why).
    pub mode: QueryMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    pub chunks: Vec<QueryChunk>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct QueryChunk {
    pub content: String,
    pub score: f64,
    pub metadata: ChunkMetadata,
    pub explanation: Explanation,
    /// With `group=note`: how many other chunks of this note the ranking holds
    /// (among its best few thousand chunks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_chunks: Option<usize>,
    /// With `group=note`: a passage of about 200 characters on whole words
    /// around the best match, with each matched term's place in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Passage>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ChunkMetadata {
    pub path: String,
    /// The note's title: front matter title, else its first heading, else its file name.
    pub title: String,
    pub chunk_index: usize,
    pub snippet_offset: Option<SnippetOffset>,
    /// With `group=note`: the note's tags (lowercased, without #).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// Characters (Unicode scalar values) from the start of the chunk, end exclusive.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SnippetOffset {
    pub start: usize,
    pub end: usize,
}

/// Why a chunk is in the answer. In semantic and hybrid modes a chunk may hold
/// no query term (`matched_terms` empty): its `semantic_score` (cosine
/// similarity with the query) and ranks say why it is there.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Explanation {
    pub matched_terms: Vec<String>,
    pub matched_term_count: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic_score: Option<f64>,
    /// 1-based place in the lexical ranking (hybrid mode; null when absent from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lexical_rank: Option<usize>,
    /// 1-based place in the semantic ranking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semantic_rank: Option<usize>,
}

impl Operation for IndexQuery {
    const NAME: &'static str = "index.query";
    const EXAMPLE: &'static str = r##"await mirai.index.query({q: "tram lisbon", limit: 5})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Search the notes: the best-matching chunks for a query, with scores, matched terms and snippet offsets.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidQuery;
    const HTTP: HttpRoute = HttpRoute::get(
        "/mcp/index/query",
        HttpInput::Query(&[
            "q",
            "limit",
            "path_prefix",
            "mode",
            "tag",
            "offset",
            "group",
        ]),
    );
    type Request = QueryRequest;
    type Response = QueryResponse;

    fn run(ctx: &Context, request: QueryRequest) -> Result<QueryResponse> {
        let query = index::validate_query(request.q.as_deref())?;
        let limit = match &request.limit {
            None | Some(Value::Null) => index::parse_limit(None)?,
            Some(Value::String(raw)) => index::parse_limit(Some(raw))?,
            Some(Value::Number(n)) => index::parse_limit(Some(&n.to_string()))?,
            Some(other) => {
                return Err(Error::new(
                    ErrorCode::InvalidLimit,
                    format!(
                        "limit must be a whole number from 1 to {}, not {other}",
                        index::MAX_LIMIT
                    ),
                ))
            }
        };
        let prefix = index::validate_path_prefix(request.path_prefix.as_deref())?;
        let offset = parse_offset(request.offset.as_ref())?;
        let by_note = grouped::parse_group(request.group.as_ref())?;
        // The page asked for is the tail of the best `offset + limit`.
        let (page, limit) = (limit, limit + offset);
        let mode = match &request.mode {
            None | Some(Value::Null) => None,
            Some(Value::String(raw)) => Some(embed::Mode::parse(raw).ok_or_else(|| bad_mode(raw))?),
            Some(other) => return Err(bad_mode(&other.to_string())),
        };
        let mode = mode.unwrap_or(if ctx.embeddings.is_some() {
            embed::Mode::Hybrid
        } else {
            embed::Mode::Lexical
        });
        let tag = tag_param(request.tag.as_ref())?;
        let unsaved = ctx.view.as_seen()?;
        // The link graph answers tags and titles; until it is built (a first
        // query after start-up), titles are read from the hits' own notes
        // rather than waiting for every note to be read.
        let vault = match (&tag, ctx.index.vault_built()) {
            (None, false) if !by_note => None,
            _ => Some(ctx.index.vault_as_if(&unsaved)?),
        };
        let tagged = match (tag, &vault) {
            (Some(tag), Some(vault)) => Some(tagged(vault, &tag)),
            _ => None,
        };
        // With a tag, rank more chunks than asked for and keep the tagged ones,
        // ranking more again while the tagged ones do not fill the answer, up
        // to the best MAX_TAGGED_CHUNKS (the work stays bounded). Grouped by
        // note, the same while the notes found do not fill the answer.
        let mut fetch = if by_note {
            limit.saturating_mul(8).clamp(200, MAX_TAGGED_CHUNKS)
        } else if tagged.is_some() {
            limit.max(index::MAX_LIMIT)
        } else {
            limit
        };
        let mut answer = loop {
            let mut answer = ctx.index.as_if(&unsaved, |idx| match (&ctx.embeddings, mode) {
                (_, embed::Mode::Lexical) => embed::lexical(idx, &query, fetch, prefix.as_deref(), None),
                (Some(embeddings), _) => embeddings.search(idx, &query, fetch, prefix.as_deref(), mode),
                (None, _) => embed::lexical(
                    idx,
                    &query,
                    fetch,
                    prefix.as_deref(),
                    Some(format!(
                        "no embedding server is configured (MIRAI_EMBED_BASE_URL), so {} ranking is not available",
                        mode.as_str()
                    )),
                ),
            })?;
            if tagged.is_none() && !by_note {
                break answer;
            }
            let ranked = answer.hits.len();
            if let Some(tagged) = &tagged {
                answer
                    .hits
                    .retain(|ranked| tagged.contains(&ranked.hit.path));
            }
            let found = if by_note {
                grouped::notes_in(&answer.hits)
            } else {
                answer.hits.len()
            };
            if found >= limit || ranked < fetch || fetch >= MAX_TAGGED_CHUNKS {
                if !by_note {
                    answer.hits.truncate(limit);
                }
                break answer;
            }
            fetch = fetch.saturating_mul(4).min(MAX_TAGGED_CHUNKS);
        };
        // One entry per note (each with its other chunks counted) or per chunk.
        let mut entries: Vec<(embed::Ranked, Option<usize>)> = if by_note {
            let mut notes = grouped::by_note(std::mem::take(&mut answer.hits));
            notes.truncate(limit);
            notes.into_iter().map(|(r, n)| (r, Some(n))).collect()
        } else {
            answer.hits.drain(..).map(|r| (r, None)).collect()
        };
        entries.drain(..offset.min(entries.len()));
        let tokenizer = if by_note {
            Some(
                ctx.index
                    .as_if(&Seen::default(), |idx| idx.tokenizer().clone())?,
            )
        } else {
            None
        };
        let title = |path: &str| {
            let from_text = |content: &str| {
                crate::vault::facts::title(
                    path,
                    content,
                    &crate::vault::front_matter::parse(content),
                )
            };
            match &vault {
                Some(vault) => vault
                    .note(path)
                    .map_or_else(|| from_text(""), |facts| facts.title.clone()),
                None => ctx
                    .view
                    .read(path)
                    .map_or_else(|_| from_text(""), |(_, content)| from_text(&content)),
            }
        };
        let chunks = entries
            .into_iter()
            .map(|(ranked, other_chunks)| {
                let hit = ranked.hit;
                let context = tokenizer
                    .as_ref()
                    .map(|t| grouped::context(t, &query, &hit.content));
                let tags = match (by_note, &vault) {
                    (true, Some(vault)) => Some(
                        vault
                            .note(&hit.path)
                            .map_or_else(Vec::new, |f| f.tags.clone()),
                    ),
                    _ => None,
                };
                QueryChunk {
                    other_chunks,
                    context,
                    content: hit.content,
                    score: hit.score,
                    metadata: ChunkMetadata {
                        title: title(&hit.path),
                        path: hit.path,
                        chunk_index: hit.chunk_index,
                        tags,
                        snippet_offset: hit
                            .snippet_offset
                            .map(|(start, end)| SnippetOffset { start, end }),
                    },
                    explanation: Explanation {
                        matched_term_count: hit.matched_terms.len(),
                        matched_terms: hit.matched_terms,
                        semantic_score: ranked.semantic_score,
                        lexical_rank: ranked.lexical_rank,
                        semantic_rank: ranked.semantic_rank,
                    },
                }
            })
            .collect();
        Ok(QueryResponse {
            query,
            limit: page,
            offset,
            mode: match answer.mode {
                embed::Mode::Lexical => QueryMode::Lexical,
                embed::Mode::Semantic => QueryMode::Semantic,
                embed::Mode::Hybrid => QueryMode::Hybrid,
            },
            degraded: answer.degraded,
            chunks,
        })
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The `offset` parameter: absent is 0; else a whole number up to [`MAX_OFFSET`].
fn parse_offset(raw: Option<&Value>) -> Result<usize> {
    let bad = |shown: String| {
        Error::new(
            ErrorCode::InvalidRequest,
            format!(
                "offset must be a whole number from 0 to {MAX_OFFSET} (chunks to skip), not {shown}"
            ),
        )
    };
    let n = match raw {
        None | Some(Value::Null) => return Ok(0),
        Some(Value::Number(n)) => n.as_u64().ok_or_else(|| bad(n.to_string()))?,
        Some(Value::String(text))
            if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) =>
        {
            text.parse::<u64>().map_err(|_| bad(format!("{text:?}")))?
        }
        Some(Value::String(text)) => return Err(bad(format!("{text:?}"))),
        Some(other) => return Err(bad(other.to_string())),
    };
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= MAX_OFFSET)
        .ok_or_else(|| bad(n.to_string()))
}

/// A `mode` other than the three (a new parameter's own code: ARCHITECTURE.md,
/// "Bad bodies keep the endpoint's code").
fn bad_mode(raw: &str) -> Error {
    Error::new(
        ErrorCode::InvalidRequest,
        format!("mode must be lexical, semantic or hybrid, not {raw}"),
    )
}

/// `index.invalidate`: delete the artifact; queries then index on demand.
pub struct IndexInvalidate;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct InvalidateResponse {
    pub invalidated: bool,
}

impl Operation for IndexInvalidate {
    const NAME: &'static str = "index.invalidate";
    const EXAMPLE: &'static str = r##"await mirai.index.invalidate()"##;
    const CLASS: Class = Class::Write;
    /// Changes no note: review mode runs it as allow_all does.
    const REVIEWED: bool = false;
    const SUMMARY: &'static str =
        "Delete the index artifact; later queries index on demand until the next rebuild.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/index/invalidate", HttpInput::Nothing);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = Empty;
    type Response = InvalidateResponse;

    fn run(ctx: &Context, _request: Empty) -> Result<InvalidateResponse> {
        refuse_in_dry_run(ctx, Self::NAME)?;
        Ok(InvalidateResponse {
            invalidated: ctx.index.invalidate()?,
        })
    }
}

/// The artifact lives on disk: a dry run, which writes nothing, cannot rebuild
/// or delete it.
fn refuse_in_dry_run(ctx: &Context, name: &str) -> Result<()> {
    if let Landing::Overlay(_) = ctx.view.landing() {
        return Err(Error::new(
            ErrorCode::PolicyDenied,
            format!("action {name} is denied in a dry run: it writes the index artifact, and a dry run writes nothing"),
        ));
    }
    Ok(())
}
