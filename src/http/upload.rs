//! A file sent as the raw body (`files.write`), streamed to
//! `.mirai/uploads/<random>.part` as it arrives, never held whole: a
//! Content-Length past `MIRAI_MAX_FILE_BYTES` is 413 before a byte is read,
//! and a body without one is 413 as soon as the bytes pass the cap. The
//! pieces are gathered up to [`FLUSH_BYTES`] and written on the blocking pool;
//! the whole body must arrive within `MIRAI_BODY_TIMEOUT_MS`. Any failure, a
//! refusal or a caller gone drops the writer, which removes its file.

use actix_web::{web, HttpRequest};
use futures_util::StreamExt;

use super::respond::internal_error;
use crate::config::Config;
use crate::error::{Error, ErrorCode};
use crate::ops::adapters::{self, Upload, UploadError, UploadWriter};
use crate::ops::Context;

/// How much of the body is gathered in memory before it is written out.
const FLUSH_BYTES: usize = 256 * 1024;

/// 413: the file is past `limit`; nothing was written.
fn too_large(limit: u64) -> Error {
    Error::new(
        ErrorCode::PayloadTooLarge,
        format!(
            "the file sent is larger than the {limit} bytes mirai writes (MIRAI_MAX_FILE_BYTES): \
             nothing was written; send a smaller file, or raise MIRAI_MAX_FILE_BYTES"
        ),
    )
}

/// Streams the body of `req` into an upload for `ctx`'s `files.write`.
pub async fn stream_file_body(
    config: &Config,
    ctx: &Context,
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<Upload, Error> {
    let limit = adapters::max_file_bytes(ctx);
    let declared = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit) {
        return Err(too_large(limit));
    }
    let timeout_ms = config.body_timeout_ms;
    let read = actix_web::rt::time::timeout(
        std::time::Duration::from_millis(timeout_ms),
        receive(ctx.clone(), declared, limit, payload),
    );
    match read.await {
        Ok(received) => received,
        Err(_) => Err(Error::new(
            ErrorCode::RequestTimeout,
            format!(
                "the file did not arrive within {timeout_ms} ms (MIRAI_BODY_TIMEOUT_MS): nothing \
                 was written; send it in one go, or raise MIRAI_BODY_TIMEOUT_MS"
            ),
        )),
    }
}

/// The body's pieces into a new upload, `limit` bytes at most.
async fn receive(
    ctx: Context,
    declared: Option<u64>,
    limit: u64,
    mut payload: web::Payload,
) -> Result<Upload, Error> {
    let cannot = |e: std::io::Error| {
        log::error!("an upload could not be stored under .mirai/uploads/: {e}");
        if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) {
            Error::new(
                ErrorCode::InsufficientStorage,
                "the disk holding NOTES_ROOT is full, so the file was not stored: free some \
                 space, then send it again",
            )
        } else {
            internal_error()
        }
    };
    let mut writer = web::block(move || adapters::begin_upload(&ctx, declared))
        .await
        .map_err(|_| internal_error())?
        .map_err(cannot)?;
    let mut pending: Vec<u8> = Vec::with_capacity(FLUSH_BYTES);
    let mut received = 0u64;
    loop {
        let piece = payload.next().await;
        let done = piece.is_none();
        if let Some(piece) = piece {
            let piece = piece.map_err(|e| {
                Error::new(
                    ErrorCode::InvalidRequest,
                    format!("the file could not be read to its end ({e}): nothing was written"),
                )
            })?;
            received += piece.len() as u64;
            if received > limit {
                return Err(too_large(limit));
            }
            pending.extend_from_slice(&piece);
        }
        if pending.len() >= FLUSH_BYTES || (done && !pending.is_empty()) {
            let (back, buffer, written) = web::block(move || {
                let written = writer.write(&pending);
                pending.clear();
                (writer, pending, written)
            })
            .await
            .map_err(|_| internal_error())?;
            (writer, pending) = (back, buffer);
            match written {
                Ok(()) => {}
                Err(UploadError::TooLarge { .. }) => return Err(too_large(limit)),
                Err(UploadError::Io(e)) => return Err(cannot(e)),
            }
        }
        if done {
            break;
        }
    }
    web::block(move || UploadWriter::finish(writer))
        .await
        .map_err(|_| internal_error())?
        .map_err(cannot)
}
