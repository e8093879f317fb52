//! Attachments, the vault's files that are not notes: `files.list` (paged,
//! with size, media type and the notes linking to each) and `files.read`
//! (metadata, and the bytes as base64 up to [`INLINE_BYTES`]; HTTP serves the
//! whole file raw through [`dispatch_file`](super::dispatch_file) and
//! [`FilesRead::whole`]).

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::history::{invalid_request, page_limit};
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::files::{self, file_too_large, media_type};
use crate::repo::history::Entry;

/// Files one `files.list` page holds by default.
pub const DEFAULT_FILES_LIMIT: usize = 100;
/// The most files one `files.list` page may hold.
pub const MAX_FILES_LIMIT: usize = 1000;
/// The most bytes `files.read` answers inline (as base64) outside HTTP: 32 KiB
/// is about 43,700 characters of base64, which fits MCP's default result cap
/// (64 KiB, `MIRAI_MCP_MAX_RESULT_BYTES`) with the metadata, and a sandbox
/// program's output; a model reads text, not pixels, so this is room for an
/// icon, a small SVG or a file's header, and a larger file is named by its
/// path (the page and HTTP's `GET /mcp/files/read` serve it whole).
pub const INLINE_BYTES: usize = 32 * 1024;

/// `files.list`: every attachment, sorted, paged by a cursor.
pub struct FilesList;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FilesListRequest {
    /// Only files under this folder, e.g. "assets/" (by whole folder names).
    #[serde(default)]
    pub prefix: Option<String>,
    /// How many files, 1 to 1000 (default 100). A number, or a decimal string.
    #[serde(default)]
    #[schemars(with = "Option<u32>", extend("default" = DEFAULT_FILES_LIMIT))]
    pub limit: Option<Value>,
    /// The `next_cursor` of the previous page, to go on from there.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FilesListResponse {
    pub files: Vec<FileEntry>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// One attachment in a listing.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileEntry {
    /// Relative to the notes root, e.g. "assets/diagram.png".
    pub path: String,
    pub size: u64,
    /// From the extension's allow-list (png, jpg/jpeg, gif, webp, svg, pdf);
    /// `application/octet-stream` for anything else.
    pub media_type: String,
    /// The notes whose links or embeds resolve to this file, sorted.
    pub linked_from: Vec<String>,
}

impl Operation for FilesList {
    const NAME: &'static str = "files.list";
    const EXAMPLE: &'static str = r##"await mirai.files.list({prefix: "assets/"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str = "Attachments, with linking notes; paged.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get(
        "/mcp/files",
        HttpInput::Query(&["prefix", "limit", "cursor"]),
    );
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = FilesListRequest;
    type Response = FilesListResponse;

    fn run(ctx: &Context, request: FilesListRequest) -> Result<FilesListResponse> {
        let limit = page_limit(request.limit.as_ref(), DEFAULT_FILES_LIMIT, MAX_FILES_LIMIT)?;
        let prefix = match request.prefix.as_deref() {
            None => None,
            Some(raw) => crate::index::validate_path_prefix(Some(raw))
                .map_err(|e| invalid_request(e.message.replace("path_prefix", "prefix")))?
                .map(|folder| format!("{folder}/")),
        };
        // A caller's read_paths hide attachments as they hide notes.
        let mut all = ctx.view.disk_notes().list_file_sizes();
        all.retain(|(path, _)| ctx.view.sees(path));
        let start = match request.cursor.as_deref() {
            None => 0,
            Some(after) if !after.is_empty() => {
                all.partition_point(|(path, _)| path.as_str() <= after)
            }
            Some(_) => {
                return Err(invalid_request(
                    "cursor is empty: pass the next_cursor of the previous page as it is, or leave it out to start at the beginning",
                ))
            }
        };
        let mut page = all[start..]
            .iter()
            .filter(|(path, _)| prefix.as_deref().is_none_or(|p| path.starts_with(p)));
        let picked: Vec<&(String, u64)> = page.by_ref().take(limit).collect();
        let next_cursor = match (page.next(), picked.last()) {
            (Some(_), Some((last, _))) => Some(last.clone()),
            _ => None,
        };
        let vault = ctx.index.vault_as_if(&ctx.view.as_seen()?)?;
        let files = picked
            .into_iter()
            .map(|(path, size)| {
                let mut linked_from: Vec<String> =
                    vault.backlinks(path).into_iter().map(|b| b.path).collect();
                linked_from.dedup();
                FileEntry {
                    path: path.clone(),
                    size: *size,
                    media_type: media_type(path).mime.to_string(),
                    linked_from,
                }
            })
            .collect();
        Ok(FilesListResponse { files, next_cursor })
    }
}

/// `files.read`: one attachment's metadata and (small ones) its bytes.
pub struct FilesRead;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FilesReadRequest {
    /// The file's path relative to the notes root, e.g. "assets/diagram.png".
    pub path: String,
    /// Read the file as it was at this commit: a commit id (7 to 40 hex
    /// digits) or HEAD~N. Without it, the file as it is now.
    #[serde(default)]
    #[schemars(with = "String")]
    pub rev: Option<Value>,
}

/// An attachment's metadata, and its bytes as base64 when they are small.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileRead {
    pub path: String,
    pub size: u64,
    /// From the extension's allow-list; `application/octet-stream` otherwise.
    pub media_type: String,
    /// Git's blob id of the bytes (HTTP's ETag).
    pub blob: String,
    /// The commit `rev` named (only when reading at a `rev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub commit: Option<String>,
    /// The bytes, base64 (standard alphabet, padded), when the file holds at
    /// most 32 KiB; null for a larger one (see `content_omitted`).
    pub content_base64: Option<String>,
    /// Why the bytes are not inline, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub content_omitted: Option<String>,
}

/// An attachment read whole, for HTTP's raw answer.
pub struct FileBytes {
    pub meta: FileRead,
    /// Whether a browser may show it inline (a raster image); anything else
    /// is served as a download.
    pub inline: bool,
    pub bytes: Vec<u8>,
}

impl Operation for FilesRead {
    const NAME: &'static str = "files.read";
    const EXAMPLE: &'static str = r##"await mirai.files.read({path: "assets/diagram.png"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str = "An attachment's metadata; base64 bytes up to 32 KiB.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidPath;
    const HTTP: HttpRoute =
        HttpRoute::get("/mcp/files/read", HttpInput::Query(&["path", "rev"])).raw();
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = FilesReadRequest;
    type Response = FileRead;

    fn run(ctx: &Context, request: FilesReadRequest) -> Result<FileRead> {
        let whole = FilesRead::whole(ctx, request)?;
        let mut meta = whole.meta;
        if whole.bytes.len() <= INLINE_BYTES {
            meta.content_base64 =
                Some(base64::engine::general_purpose::STANDARD.encode(&whole.bytes));
        } else {
            meta.content_omitted = Some(format!(
                "{} bytes, more than the {INLINE_BYTES} answered inline; GET /mcp/files/read?path=... over HTTP serves the whole file",
                whole.bytes.len()
            ));
        }
        Ok(meta)
    }
}

impl FilesRead {
    /// The attachment `request` names, whole (up to `MIRAI_MAX_FILE_BYTES`,
    /// refused from its size before it is read).
    pub fn whole(ctx: &Context, request: FilesReadRequest) -> Result<FileBytes> {
        // Hidden by the caller's read_paths: answered as missing, before the disk or git is asked.
        let named = files::file_path(&request.path)?;
        if !ctx.view.sees(&named) {
            return Err(files::missing(&named));
        }
        let (path, bytes, commit) = match request.rev {
            None => {
                let sees = |real: &str| ctx.view.sees(real);
                let (path, bytes) = ctx.view.disk_notes().read_file(&request.path, &sees)?;
                (path, bytes, None)
            }
            Some(rev) => read_at(ctx, &request.path, &rev).map_err(|e| ctx.history.scrub(e))?,
        };
        let media = media_type(&path);
        Ok(FileBytes {
            meta: FileRead {
                size: bytes.len() as u64,
                media_type: media.mime.to_string(),
                blob: files::blob_id(&bytes),
                path,
                commit,
                content_base64: None,
                content_omitted: None,
            },
            inline: media.raster,
            bytes,
        })
    }
}

/// An attachment as it was at commit `rev`, from git's tree (never the disk):
/// only a regular file; past `MIRAI_MAX_FILE_BYTES` (from the object's header)
/// never loaded.
fn read_at(ctx: &Context, raw: &str, rev: &Value) -> Result<(String, Vec<u8>, Option<String>)> {
    let rel = files::file_path(raw)?;
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
                "{rel:?} was a folder at commit {short}, not a file"
            )))
        }
        Entry::Symlink | Entry::Other => {
            return Err(Error::invalid_path(format!(
                "{rel:?} was not a regular file at commit {short} (a symlink or a submodule)"
            )))
        }
    };
    let limit = ctx.view.disk_notes().max_file_bytes();
    match reader.blob_upto(blob, limit)? {
        Ok(bytes) => Ok((rel, bytes, Some(commit.to_string()))),
        Err(size) => Err(file_too_large(&rel, size, limit)),
    }
}
