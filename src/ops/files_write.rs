//! `files.write` and `files.delete`: an attachment's bytes added, replaced or
//! removed as one commit, on the one write path the notes take
//! ([`plan_file`] and [`land_all`] in `change.rs`): the writer lock, git's
//! index lock, the crash record, the change stream, a caller's paths and
//! name on the commit, dry runs, and review mode (a proposal whose diff
//! names the sizes and SHA-256 of both sides, carrying the exact bytes).
//!
//! Notes are refused (`invalid_extension`: the note rows write them), and so
//! is an extension off the media-type allow-list unless the operator allows
//! any (`MIRAI_FILES_ANY_TYPE=on`). The bytes come as base64 from every
//! adapter (held in memory: within the request body limit). HTTP also takes
//! the raw body, streamed to `.mirai/uploads/` as it arrives and capped there
//! by `MIRAI_MAX_FILE_BYTES` (http/row.rs); the row gets it from the context
//! ([`Context::with_upload`](super::Context::with_upload)) and the write path
//! moves that file into place and streams it into git, never holding it whole.

use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::change::{land_all, plan_file, plan_file_body, Body};
use super::history::invalid_request;
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::files::{self, file_too_large, media_type};
use crate::notes::Existence;

/// The commit subject of `files.write`, before the path.
pub const FILES_WRITE_SUBJECT: &str = "mcp.files_write: ";
/// The commit subject of `files.delete`, before the path.
pub const FILES_DELETE_SUBJECT: &str = "mcp.files_delete: ";

/// `files.write`: add or replace one attachment.
pub struct FilesWrite;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FilesWriteRequest {
    /// The file's path, e.g. "assets/diagram.png" (not a .md note).
    pub path: String,
    /// The bytes, base64 (over HTTP the raw body may be the file instead).
    // Missing is None to serde, so HTTP's raw body can stand in; the schema
    // keeps it required for every other caller.
    #[schemars(with = "String")]
    pub content_base64: Option<String>,
    /// The bytes' media type (a raw HTTP body's Content-Type): the
    /// extension's, or application/octet-stream.
    #[serde(default)]
    pub media_type: Option<String>,
    /// Refuse (conflict) when the file changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
    /// True: only create the file; one already at the path is a 409
    /// conflict, never replaced (choose another name). A boolean, or
    /// `true`/`false` in a query string.
    #[serde(default)]
    #[schemars(with = "Option<bool>", extend("default" = false))]
    pub create_only: Option<serde_json::Value>,
}

/// What `files.write` did.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileWritten {
    pub path: String,
    pub size: u64,
    /// From the extension's allow-list; `application/octet-stream` otherwise.
    pub media_type: String,
    /// Git's blob id of the bytes (files.read's ETag).
    pub blob: String,
    pub sha256: String,
    /// The commit; null when the file already held these bytes, or in a dry run.
    pub commit: Option<String>,
}

impl Operation for FilesWrite {
    const NAME: &'static str = "files.write";
    const EXAMPLE: &'static str =
        r##"await mirai.files.write({path: "assets/dot.svg", content_base64: "PHN2Zy8+"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str = "Write an attachment from base64.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post(
        "/mcp/files/write",
        HttpInput::BodyOrFile(&["path", "base_commit", "create_only"]),
    );
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = FilesWriteRequest;
    type Response = FileWritten;

    fn run(ctx: &Context, request: FilesWriteRequest) -> Result<FileWritten> {
        let rel = files::file_path(&request.path)?;
        let media = media_type(&rel);
        check_writable_type(ctx, &rel)?;
        let create_only = super::notes::flag("create_only", request.create_only.as_ref())?;
        if let Some(sent) = request.media_type.as_deref() {
            check_sent_type(&rel, sent, media.mime)?;
        }
        let content =
            match (request.content_base64.as_deref(), &ctx.upload) {
                (Some(text), None) => Body::Bytes(decode(ctx, &rel, text)?),
                (None, Some(upload)) => Body::Upload(upload.clone()),
                (Some(_), Some(_)) => {
                    return Err(invalid_request(
                        "the file came as the raw body: leave content_base64 out",
                    ))
                }
                (None, None) => return Err(invalid_request(
                    "content_base64 is missing: send the file's bytes as base64 in content_base64 \
                     (over HTTP the raw body may be the file instead, with its media type)",
                )),
            };
        let (size, blob, sha256) = match &content {
            Body::Upload(upload) => (
                upload.size(),
                upload.blob_id().to_string(),
                upload.sha256_hex(),
            ),
            Body::Bytes(bytes) => (
                bytes.len() as u64,
                files::blob_id(bytes),
                files::sha256_hex(bytes),
            ),
            Body::Text(_) => unreachable!("files.write writes bytes"),
        };
        let (_, commit) = land_all(
            ctx,
            request.base_commit.as_deref(),
            |ctx, _| {
                let file = ctx
                    .view
                    .resolve_file_for_write(&request.path, Existence::MayBeMissing)?;
                let current = ctx.view.current_file(&file)?;
                if create_only && current.is_some() {
                    return Err(Error::conflict(format!(
                        "{:?} already exists and create_only is set, so it was not replaced: \
                         choose another name (or leave create_only out to replace it)",
                        file.rel
                    )));
                }
                Ok(vec![plan_file_body(
                    ctx,
                    file,
                    current,
                    Some(content.clone()),
                )?])
            },
            |_| ctx.commit_message(&format!("{FILES_WRITE_SUBJECT}{rel}"), ""),
        )?;
        Ok(FileWritten {
            size,
            media_type: media.mime.to_string(),
            blob,
            sha256,
            path: rel,
            commit,
        })
    }
}

/// An attachment mirai makes (written or moved there) must have an extension
/// on the media-type allow-list, unless the operator allows any.
pub(super) fn check_writable_type(ctx: &Context, rel: &str) -> Result<()> {
    if media_type(rel).allowed || ctx.files_any_type {
        return Ok(());
    }
    Err(Error::invalid_extension(format!(
        "{rel:?} is not a file type mirai writes: attachments are png, jpg, jpeg, gif, webp, svg \
         and pdf (an operator may allow any with MIRAI_FILES_ANY_TYPE=on)"
    )))
}

/// The bytes of `text` (base64), refused from its length alone, before it
/// is decoded, when they would pass `MIRAI_MAX_FILE_BYTES`.
fn decode(ctx: &Context, rel: &str, text: &str) -> Result<Vec<u8>> {
    let limit = ctx.view.disk_notes().max_file_bytes();
    let text = text.trim_end_matches('=');
    let size = (text.len() as u64).saturating_mul(3) / 4;
    if size > limit {
        return Err(file_too_large(rel, size, limit));
    }
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(text)
        .map_err(|e| {
            invalid_request(format!(
                "content_base64 is not base64 ({e}): send the file's bytes in the standard \
                 alphabet (A-Z a-z 0-9 + /), as btoa or base64 make them"
            ))
        })
}

/// A sent media type must be the path's own (parameters and case aside), or
/// the generic `application/octet-stream`.
fn check_sent_type(rel: &str, sent: &str, expected: &str) -> Result<()> {
    let essence = sent
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if essence == expected || essence == "application/octet-stream" {
        return Ok(());
    }
    Err(invalid_request(format!(
        "the bytes are sent as {essence}, but {rel:?} is {expected} by its extension: send them as \
         {expected} (or application/octet-stream), or name the file with the extension of its type"
    )))
}

/// `files.delete`: remove one attachment.
pub struct FilesDelete;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FilesDeleteRequest {
    /// The file's path, e.g. "assets/old.png".
    pub path: String,
    /// Refuse (conflict) when the file changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
}

/// What `files.delete` did.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileDeleted {
    pub path: String,
    /// The commit; null in a dry run.
    pub commit: Option<String>,
}

impl Operation for FilesDelete {
    const NAME: &'static str = "files.delete";
    const EXAMPLE: &'static str = r##"await mirai.files.delete({path: "assets/old.png"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str = "Delete an attachment.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/files/delete", HttpInput::Body);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = FilesDeleteRequest;
    type Response = FileDeleted;

    fn run(ctx: &Context, request: FilesDeleteRequest) -> Result<FileDeleted> {
        let rel = files::file_path(&request.path)?;
        let (_, commit) = land_all(
            ctx,
            request.base_commit.as_deref(),
            |ctx, _| {
                let file = ctx
                    .view
                    .resolve_file_for_write(&request.path, Existence::MustExist)?;
                let current = ctx
                    .view
                    .current_file(&file)?
                    .ok_or_else(|| files::missing(&file.rel))?;
                Ok(vec![plan_file(ctx, file, Some(current), None)?])
            },
            |_| ctx.commit_message(&format!("{FILES_DELETE_SUBJECT}{rel}"), ""),
        )?;
        Ok(FileDeleted { path: rel, commit })
    }
}
