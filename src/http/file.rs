//! A file's raw answer (`files.read` over HTTP): the bytes with their media
//! type, and the headers that keep a hostile file from ever running as a page
//! of mirai's origin: `X-Content-Type-Options: nosniff`,
//! `Content-Security-Policy: sandbox; default-src 'none'`, and
//! `Content-Disposition: attachment` for everything but raster images (SVG
//! and PDF are downloads). `Cache-Control: private`; the ETag is the blob id,
//! and a matching `If-None-Match` answers 304.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};

use crate::ops::FileBytes;

/// The policy every file is served under: no script, no plugin, no fetch, no
/// form, its own opaque origin.
pub const FILE_CSP: &str = "sandbox; default-src 'none'";

/// `file` as an HTTP answer to `req`.
pub fn answer(req: &HttpRequest, file: FileBytes) -> HttpResponse {
    let etag = format!("\"{}\"", file.meta.blob);
    let unchanged = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|tag| tag.trim().trim_start_matches("W/") == etag || tag.trim() == "*")
        });
    let mut response = if unchanged {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    response
        .insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, "private"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::CONTENT_SECURITY_POLICY, FILE_CSP))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CONTENT_DISPOSITION, disposition(&file)));
    if unchanged {
        return response.finish();
    }
    response
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static(static_mime(&file.meta.media_type)),
        ))
        .body(file.bytes)
}

/// `inline` for a raster image, else `attachment`, with the file's name
/// (RFC 6266: an ASCII fallback and the UTF-8 name percent-encoded).
fn disposition(file: &FileBytes) -> String {
    let name = file.meta.path.rsplit('/').next().unwrap_or(&file.meta.path);
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded = percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC);
    let kind = if file.inline { "inline" } else { "attachment" };
    format!("{kind}; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// The media type as a static header value: only the allow-list's types (and
/// `application/octet-stream`) are ever served.
fn static_mime(mime: &str) -> &'static str {
    match mime {
        "image/png" => "image/png",
        "image/jpeg" => "image/jpeg",
        "image/gif" => "image/gif",
        "image/webp" => "image/webp",
        "image/svg+xml" => "image/svg+xml",
        "application/pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}
