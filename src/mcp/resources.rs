//! Notes as MCP resources: `mirai://notes/<path>`, each path segment
//! percent-encoded (docs/src/mcp.md); listing is paged with opaque cursors and
//! reading goes through `notes.read`, so it obeys the same path rules.

use serde_json::{json, Value};

use super::rpc::{code, Era, RpcError};
use crate::error::ErrorCode;
use crate::ops::{self, Context, Input};

const SCHEME: &str = "mirai://notes/";
/// Notes per `resources/list` page.
const PAGE: usize = 100;

pub fn list(ctx: &Context, params: &Value) -> Result<Value, RpcError> {
    let cursor = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(cursor) => Some(
            cursor
                .as_str()
                .ok_or_else(|| bad_cursor(&cursor.to_string()))?,
        ),
    };
    let listed = ops::dispatch(ctx, "notes.list", Input::Json(json!({})))
        .map_err(|e| RpcError::new(code::INVALID_PARAMS, format!("{}: {}", e.code, e.message)))?;
    let notes: Vec<&str> = listed["notes"]
        .as_array()
        .map(|notes| notes.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let start = match cursor {
        None => 0,
        Some(cursor) => page_start(cursor, notes.len()).ok_or_else(|| bad_cursor(cursor))?,
    };
    let end = notes.len().min(start.saturating_add(PAGE));
    let resources: Vec<Value> = notes[start..end]
        .iter()
        .map(|path| json!({"uri": uri_of(path), "name": path, "mimeType": "text/markdown"}))
        .collect();
    let mut result = json!({ "resources": resources });
    if end < notes.len() {
        result["nextCursor"] = json!(end.to_string());
    }
    Ok(result)
}

/// Where a cursor says the page starts: the decimal index mirai wrote in
/// `nextCursor`, at most the number of notes. `None` for anything else,
/// including an index past the end (forged, or the list shrank since): the
/// client is told to start over rather than handed a page that loops.
fn page_start(cursor: &str, notes: usize) -> Option<usize> {
    let canonical = !cursor.is_empty()
        && cursor.bytes().all(|b| b.is_ascii_digit())
        && (cursor == "0" || !cursor.starts_with('0'));
    let start = cursor.parse::<usize>().ok().filter(|_| canonical)?;
    (start <= notes).then_some(start)
}

fn bad_cursor(cursor: &str) -> RpcError {
    let shown: String = cursor.chars().take(40).collect();
    RpcError::new(
        code::INVALID_PARAMS,
        format!("invalid cursor {shown:?}: pass back nextCursor exactly as it came, or leave cursor out to start from the first page"),
    )
}

pub fn templates() -> Value {
    json!({"resourceTemplates": [{
        "uriTemplate": format!("{SCHEME}{{path}}"),
        "name": "note",
        "title": "A note by its path",
        "description": "A markdown note; each segment of its path percent-encoded, e.g. mirai://notes/projects/my%20plan.md",
        "mimeType": "text/markdown",
    }]})
}

pub fn read(ctx: &Context, params: &Value, era: Era) -> Result<Value, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(code::INVALID_PARAMS, "resources/read needs a uri"))?;
    let path = path_of(uri).ok_or_else(|| RpcError {
        code: code::INVALID_PARAMS,
        message: format!(
            "{uri} is not a note: note URIs are {SCHEME}<path>, each segment percent-encoded"
        ),
        data: Some(json!({"uri": uri})),
    })?;
    match ops::dispatch(ctx, "notes.read", Input::Json(json!({ "path": path }))) {
        Ok(note) => Ok(json!({"contents": [{
            "uri": uri,
            "mimeType": "text/markdown",
            "text": note["content"],
        }]})),
        Err(err) => Err(RpcError {
            // 2026-07-28 retired -32002 for a missing resource in favour of invalid params.
            code: if err.code == ErrorCode::NotFound && era == Era::Handshake {
                code::RESOURCE_NOT_FOUND
            } else {
                code::INVALID_PARAMS
            },
            message: format!("{}: {}", err.code, err.message),
            data: Some(json!({"uri": uri, "code": err.code, "message": err.message})),
        }),
    }
}

/// `mirai://notes/` and the path with each segment percent-encoded.
pub fn uri_of(path: &str) -> String {
    let segments: Vec<String> = path.split('/').map(encode).collect();
    format!("{SCHEME}{}", segments.join("/"))
}

fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The note path a URI names, or `None` when it is not a note URI or not
/// valid percent-encoded UTF-8.
pub(super) fn path_of(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix(SCHEME)?;
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut rest = encoded.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_indexes_mirai_wrote_and_never_past_the_list() {
        assert_eq!(page_start("0", 0), Some(0));
        assert_eq!(page_start("100", 250), Some(100));
        assert_eq!(page_start("250", 250), Some(250));
        for bad in [
            "251",
            "18446744073709551615",
            "18446744073709551516",
            "99999999999999999999",
            "-1",
            "+1",
            "007",
            "",
            " 1",
            "1.0",
        ] {
            assert_eq!(page_start(bad, 250), None, "{bad:?}");
        }
    }

    #[test]
    fn uris_percent_encode_each_segment_and_decode_back() {
        let path = "projects/my plan/ünïcode#1.md";
        let uri = uri_of(path);
        assert_eq!(
            uri,
            "mirai://notes/projects/my%20plan/%C3%BCn%C3%AFcode%231.md"
        );
        assert_eq!(path_of(&uri).as_deref(), Some(path));
        assert_eq!(path_of("file:///etc/passwd"), None);
        assert_eq!(path_of("mirai://notes/bad%zz.md"), None);
        assert_eq!(path_of("mirai://notes/%FF.md"), None);
    }
}
