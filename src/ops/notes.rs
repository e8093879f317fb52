//! Note reading operations: `notes.list`, `notes.read` (now, or at a commit;
//! whole, one section or a range of lines; with its line and token counts),
//! `notes.read_batch`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use serde_json::{Map, Value};

use super::tags::{tag_param, tagged};
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::path;
use crate::repo::history::Entry;
use crate::vault::front_matter;
use crate::vault::sections::{self, line_count, line_slice};
use crate::vault::tokens;

/// Most paths one `notes.read_batch` may ask for.
pub const MAX_BATCH_PATHS: usize = 20;

/// `notes.list`: every note, sorted.
pub struct NotesList;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct NotesListRequest {
    /// Only notes with this tag.
    #[serde(default)]
    #[schemars(with = "String")]
    pub tag: Option<Value>,
    /// Also answer each note's bytes, line_count and tokens.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub stats: Option<Value>,
    /// Only notes under this folder, e.g. "projects/" (by whole folder names).
    #[serde(default)]
    #[schemars(with = "String")]
    pub prefix: Option<Value>,
    /// One folder's level only: `notes` holds the notes directly in `prefix`
    /// (or the root), and `folders` its direct subfolders with their note counts.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub folders: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NotesListResponse {
    pub notes: Vec<String>,
    /// With `stats=true`: each listed note's size and counts, in the same
    /// order (a note that cannot be read, such as one past
    /// MIRAI_MAX_NOTE_BYTES, has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Vec<NoteStats>>,
    /// With `folders=true`: the direct subfolders of `prefix` (or the root),
    /// sorted, each with how many notes it holds at any depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folders: Option<Vec<FolderCount>>,
}

/// A folder and how many notes lie under it, at any depth.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FolderCount {
    /// The folder's path from the notes root, ending in `/`: "projects/2024/".
    pub path: String,
    pub notes: usize,
}

/// One note's size and counts, kept with the index per note version.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NoteStats {
    pub path: String,
    pub bytes: u64,
    pub line_count: usize,
    /// o200k_base tokens of the whole note.
    pub tokens: usize,
}

impl Operation for NotesList {
    const NAME: &'static str = "notes.list";
    const EXAMPLE: &'static str = r##"await mirai.notes.list()"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "List every markdown note (or those with a tag, or under a folder), as paths relative to the notes root, sorted; folders=true lists one folder's level with note counts.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get(
        "/mcp/notes",
        HttpInput::Query(&["tag", "stats", "prefix", "folders"]),
    );
    type Request = NotesListRequest;
    type Response = NotesListResponse;

    fn run(ctx: &Context, request: NotesListRequest) -> Result<NotesListResponse> {
        let tag = tag_param(request.tag.as_ref())?;
        let with_stats = flag("stats", request.stats.as_ref())?;
        let by_folder = flag("folders", request.folders.as_ref())?;
        let prefix = folder_prefix(request.prefix.as_ref())?;
        let mut notes = ctx.view.list()?;
        if let Some(prefix) = &prefix {
            notes.retain(|path| path.starts_with(prefix.as_str()));
        }
        if let Some(tag) = tag {
            let vault = ctx.index.vault_as_if(&ctx.view.as_seen()?)?;
            let tagged = tagged(&vault, &tag);
            notes.retain(|path| tagged.contains(path));
        }
        let folders = by_folder.then(|| one_level(&mut notes, prefix.as_deref().unwrap_or("")));
        let stats = with_stats.then(|| stats_of(ctx, &notes)).transpose()?;
        Ok(NotesListResponse {
            notes,
            stats,
            folders,
        })
    }
}

/// `prefix` as a folder path ending in `/` (`None`: the whole root), checked
/// as `index.query`'s `path_prefix` is (relative, inside the root).
fn folder_prefix(raw: Option<&Value>) -> Result<Option<String>> {
    let raw = match raw {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(raw)) => raw,
        Some(other) => {
            return Err(invalid_request(format!(
                "prefix must be a folder path such as \"projects/\", not {other}"
            )))
        }
    };
    let folder = crate::index::validate_path_prefix(Some(raw))
        .map_err(|e| invalid_request(e.message.replace("path_prefix", "prefix")))?;
    Ok(folder.map(|folder| format!("{folder}/")))
}

/// Keeps in `notes` (all under `prefix`, sorted) those directly in `prefix`,
/// and answers the folders one level down with how many notes each holds.
fn one_level(notes: &mut Vec<String>, prefix: &str) -> Vec<FolderCount> {
    let mut folders: std::collections::BTreeMap<String, usize> = Default::default();
    notes.retain(|path| {
        let rest = &path[prefix.len()..];
        let Some((folder, _)) = rest.split_once('/') else {
            return true;
        };
        *folders.entry(format!("{prefix}{folder}/")).or_default() += 1;
        false
    });
    folders
        .into_iter()
        .map(|(path, notes)| FolderCount { path, notes })
        .collect()
}

/// A yes-or-no parameter: a boolean, or `true`/`false` in a query string.
pub(super) fn flag(field: &str, raw: Option<&Value>) -> Result<bool> {
    match raw {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s.trim() == "true" => Ok(true),
        Some(Value::String(s)) if s.trim() == "false" => Ok(false),
        Some(other) => Err(invalid_request(format!(
            "{field} must be true or false, not {other}"
        ))),
    }
}

/// Each note's size and counts, from the vault's facts of its version: a
/// count made once per version (the first time it is asked for, from the
/// note's text) is kept there; a note the vault does not hold yet is counted
/// from its text now.
fn stats_of(ctx: &Context, notes: &[String]) -> Result<Vec<NoteStats>> {
    let vault = ctx.index.vault_as_if(&ctx.view.as_seen()?)?;
    let mut out = Vec::with_capacity(notes.len());
    for path in notes {
        let facts = vault.note(path);
        if let Some((facts, tokens)) = facts.and_then(|f| f.counted_tokens().map(|t| (f, t))) {
            out.push(NoteStats {
                path: path.clone(),
                bytes: facts.print.bytes,
                line_count: facts.line_count,
                tokens,
            });
            continue;
        }
        let Ok((_, content)) = ctx.view.read(path) else {
            continue;
        };
        let (line_count, tokens) = match facts.and_then(|f| f.tokens(&content).map(|t| (f, t))) {
            Some((facts, tokens)) => (facts.line_count, tokens),
            None => (line_count(&content), tokens::count_cached(&content)),
        };
        out.push(NoteStats {
            path: path.clone(),
            bytes: content.len() as u64,
            line_count,
            tokens,
        });
    }
    Ok(out)
}

/// `notes.read`: one note's content.
pub struct NotesRead;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NotesReadRequest {
    /// The note's path relative to the notes root, e.g. "trips/lisbon.md".
    pub path: String,
    /// Read the note as it was at this commit: a commit id (7 to 40 hex
    /// digits) or HEAD~N. Without it, the note as it is now.
    #[serde(default)]
    #[schemars(with = "String")]
    pub rev: Option<Value>,
    /// Only this section: a heading's text, or "A > B" for B under A.
    #[serde(default)]
    #[schemars(with = "String")]
    pub section: Option<Value>,
    /// Only these lines: "a-b" (1-based).
    #[serde(default)]
    #[schemars(with = "String")]
    pub lines: Option<Value>,
}

/// One note's content (or the section or lines asked for); at a `rev`, with
/// the commit it was read at.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteRead {
    pub path: String,
    pub content: String,
    /// The commit `rev` named (only when reading at a `rev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub commit: Option<String>,
    /// First line of `content` in the note, 1-based (only for a section or lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub line_start: Option<usize>,
    /// Last line of `content` in the note, inclusive (only for a section or lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "usize")]
    pub line_end: Option<usize>,
    /// Lines in the whole note.
    pub line_count: usize,
    /// o200k_base tokens of `content`.
    pub tokens: usize,
    /// The note's YAML front matter, or null when it has none (or it is broken).
    pub front_matter: Option<Map<String, Value>>,
    /// Why the front matter could not be read (its lines are then body text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub front_matter_error: Option<String>,
}

impl NoteRead {
    /// A whole note as read: its counts and front matter.
    fn whole(path: String, content: String, commit: Option<String>) -> NoteRead {
        let front = front_matter::parse(&content);
        NoteRead {
            line_count: line_count(&content),
            tokens: tokens::count_cached(&content),
            front_matter: front.fields().cloned(),
            front_matter_error: front.error().map(str::to_string),
            path,
            content,
            commit,
            line_start: None,
            line_end: None,
        }
    }

    /// Keeps only lines `first..=last` of the content.
    fn narrowed(mut self, first: usize, last: usize) -> NoteRead {
        self.content = line_slice(&self.content, first, last).to_string();
        self.tokens = tokens::count(&self.content);
        self.line_start = Some(first);
        self.line_end = Some(last);
        self
    }
}

/// What part of a note `notes.read` answers.
enum Part {
    Whole,
    Section(String),
    /// 1-based, inclusive; the end may be past the note's last line.
    Lines(usize, usize),
}

fn invalid_request(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::InvalidRequest, message)
}

/// `section` and `lines`, checked (malformed is `invalid_request`:
/// ARCHITECTURE.md, "Bad bodies keep the endpoint's code").
fn part(section: Option<&Value>, lines: Option<&Value>) -> Result<Part> {
    let text = |field: &str, value: &Value| match value {
        Value::String(text) => Ok(text.clone()),
        other => Err(invalid_request(format!(
            "{field} must be a string, not {other}"
        ))),
    };
    match (section, lines) {
        (None | Some(Value::Null), None | Some(Value::Null)) => Ok(Part::Whole),
        (Some(section), None | Some(Value::Null)) => Ok(Part::Section(text("section", section)?)),
        (None | Some(Value::Null), Some(lines)) => {
            let raw = text("lines", lines)?;
            let bad = || {
                invalid_request(format!(
                    "lines must be \"a-b\" (1-based, inclusive, a <= b), e.g. \"10-40\", or one line number; got {raw:?}"
                ))
            };
            let number = |s: &str| {
                let s = s.trim();
                (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| s.parse::<usize>().ok())
                    .flatten()
                    .filter(|&n| n >= 1)
            };
            let (first, last) = match raw.split_once('-') {
                Some((a, b)) => (number(a).ok_or_else(bad)?, number(b).ok_or_else(bad)?),
                None => {
                    let n = number(&raw).ok_or_else(bad)?;
                    (n, n)
                }
            };
            if first > last {
                return Err(bad());
            }
            Ok(Part::Lines(first, last))
        }
        (Some(_), Some(_)) => Err(invalid_request(
            "give section or lines, not both: read a section by its heading, or any lines by number",
        )),
    }
}

/// `read` narrowed to `part` of its note.
fn narrow(read: NoteRead, part: Part) -> Result<NoteRead> {
    match part {
        Part::Whole => Ok(read),
        Part::Section(wanted) => {
            let all = sections::headings(&read.content);
            let no_headings = "read it whole, or by lines";
            let heading = sections::find(&read.path, &all, &wanted, "section", no_headings)?;
            let (first, last) = (heading.line, heading.last_line);
            Ok(read.narrowed(first, last))
        }
        Part::Lines(first, last) => {
            if first > read.line_count {
                return Err(invalid_request(format!(
                    "lines {first}-{last} start past the end of {}: it has {} lines",
                    read.path, read.line_count
                )));
            }
            let last = last.min(read.line_count);
            Ok(read.narrowed(first, last))
        }
    }
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NoteContent {
    pub path: String,
    pub content: String,
}

impl Operation for NotesRead {
    const NAME: &'static str = "notes.read";
    const EXAMPLE: &'static str = r##"await mirai.notes.read({path: "trips/lisbon.md"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Read a note (whole, a section or lines), as it is now or at a commit (rev).";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
    const HTTP: HttpRoute = HttpRoute::get(
        "/mcp/notes/read",
        HttpInput::Query(&["path", "rev", "section", "lines"]),
    );
    type Request = NotesReadRequest;
    type Response = NoteRead;

    fn run(ctx: &Context, request: NotesReadRequest) -> Result<NoteRead> {
        let part = part(request.section.as_ref(), request.lines.as_ref())?;
        let read = match request.rev {
            None => {
                let (note, content) = ctx.view.read(&request.path)?;
                NoteRead::whole(note.rel, content, None)
            }
            Some(rev) => read_at(ctx, &request.path, &rev).map_err(|e| ctx.history.scrub(e))?,
        };
        narrow(read, part)
    }
}

/// A note as it was at commit `rev`: from git's tree, never the disk; the
/// path rules hold (hidden and non-`.md` paths are refused) and only a regular
/// file is a note (a symlink there is `invalid_path`, a folder `not_found`).
fn read_at(ctx: &Context, raw: &str, rev: &Value) -> Result<NoteRead> {
    let rel = path::in_history(raw)?;
    if !ctx.view.sees(&rel) {
        return Err(crate::notes::suggest::missing(&rel));
    }
    let (reader, commit, entry) = super::history::entry_at(ctx, &rel, rev)?;
    let short = &commit.to_string()[..12];
    let blob = match entry {
        Entry::Note(blob) => blob,
        Entry::Missing => {
            return Err(Error::not_found(format!(
                "{rel:?} did not exist at commit {short}"
            )))
        }
        Entry::Folder => {
            return Err(Error::not_found(format!(
                "{rel:?} was a folder at commit {short}, not a note"
            )))
        }
        Entry::Symlink => {
            return Err(Error::invalid_path(format!(
                "{rel:?} was a symlink at commit {short}; a symlink is not a note: read the \
                 note it pointed to by its own path"
            )))
        }
        Entry::Other => {
            return Err(Error::invalid_path(format!(
                "{rel:?} was not a regular file at commit {short}; only regular files are notes"
            )))
        }
    };
    let bytes = reader.note_blob(blob, &rel, ctx.view.disk_notes().max_note_bytes())?;
    Ok(NoteRead::whole(
        rel,
        // Bytes that are not UTF-8 come back as U+FFFD, as a read of the disk does.
        String::from_utf8_lossy(&bytes).into_owned(),
        Some(commit.to_string()),
    ))
}

/// `notes.read_batch`: up to [`MAX_BATCH_PATHS`] notes in request order.
pub struct NotesReadBatch;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NotesReadBatchRequest {
    /// 1 to 20 note paths.
    pub paths: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NotesReadBatchResponse {
    pub notes: Vec<NoteContent>,
}

impl Operation for NotesReadBatch {
    const NAME: &'static str = "notes.read_batch";
    const EXAMPLE: &'static str =
        r##"await mirai.notes.read_batch({paths: ["trips/lisbon.md", "shop/list.md"]})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Read up to 20 notes at once, in request order; fails on the first bad path.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/read_batch", HttpInput::Body);
    // notes.read is the one small models need; the vault rows' examples took its place.
    const PROMPT: PromptDetail = PromptDetail::Brief;
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
                let (note, content) = ctx.view.read(raw)?;
                Ok(NoteContent {
                    path: note.rel,
                    content,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(NotesReadBatchResponse { notes })
    }
}
