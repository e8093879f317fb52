//! `GET /events`: the change stream as server-sent events. Each event is
//! `id:` (resume with `Last-Event-ID`), `event:` (its type) and `data:` (one
//! JSON line); `?types=` and `?path_prefix=` filter; a comment line after
//! [`KEEP_ALIVE`] without an event keeps proxies from closing the stream.
//! Events within [`SPACING`] of a stream's last write go out in one write.
//! The stream reads a subscription of the hub ([`crate::events`]): it never
//! slows a writer, and ends after a `reset` when it fell too far behind.
//! Past `MIRAI_EVENTS_MAX_CLIENTS` streams (MCP's streams over HTTP count
//! too), 503 `too_many_streams`; a stream keeps its place until its
//! connection is gone, which [`peer::watched`] notices at once when the
//! client closes it and forces when the client stops reading.

use std::time::{Duration, Instant};

use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::future::{select, Either};

use super::middleware::caller_of;
use super::peer;
use super::respond::error_response;
use crate::agent::transcript::Seer;
use crate::app::App;
use crate::error::{Error, ErrorCode};
use crate::events::{Filter, Item, Subscription, TooManyClients};

/// How long a stream stays silent before a comment line.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Every event type a client may ask for.
pub const TYPES: &[&str] = &[
    "commit",
    "head_moved",
    "notes_changed",
    "proposal",
    "run",
    "index",
    "sync",
];

/// The longest `path_prefix` taken.
const MAX_PREFIX: usize = 4096;

fn invalid(message: String) -> Error {
    Error::new(ErrorCode::InvalidRequest, message)
}

/// The filter a query string asks for.
fn filter(query: &str) -> Result<Filter, Error> {
    let mut filter = Filter::default();
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "types" => {
                let mut types = Vec::new();
                for t in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                    if !TYPES.contains(&t) {
                        return Err(invalid(format!(
                            "unknown event type {t:?} in types; use a comma-separated list of: {}",
                            TYPES.join(", ")
                        )));
                    }
                    types.push(t.to_string());
                }
                filter.types = Some(types);
            }
            "path_prefix" => {
                if value.len() > MAX_PREFIX || value.chars().any(char::is_control) {
                    return Err(invalid(format!(
                        "path_prefix must be a note path prefix of at most {MAX_PREFIX} bytes without control characters"
                    )));
                }
                filter.path_prefix = Some(value.trim_start_matches('/').to_string());
            }
            other => {
                return Err(invalid(format!(
                    "unknown query parameter {other:?}; GET /events takes types and path_prefix"
                )))
            }
        }
    }
    Ok(filter)
}

/// The least time between two writes to one stream: events that come closer
/// together go out in one write, so a burst of writes costs each client one
/// write per interval instead of one per event, and an event still reaches
/// the client well within 50 ms.
const SPACING: Duration = Duration::from_millis(10);
/// The most events one write carries.
const MAX_PER_WRITE: usize = 256;

/// One SSE frame, appended to `out`.
fn frame(item: &Item, out: &mut String) {
    use std::fmt::Write;
    let (id, kind, data) = item.parts();
    let _ = write!(out, "id: {id}\nevent: {kind}\ndata: {data}\n\n");
}

/// A stream's subscription, and when it last wrote.
struct Stream {
    sub: Subscription,
    wrote: Option<Instant>,
}

/// The next chunk of a stream: the frames of the events that came (those
/// within [`SPACING`] of the last write together), a keep-alive comment, or
/// the end.
async fn next_chunk(stream: &mut Stream) -> Option<Bytes> {
    let first = {
        let next = stream.sub.next();
        let idle = actix_web::rt::time::sleep(KEEP_ALIVE);
        futures_util::pin_mut!(next, idle);
        match select(next, idle).await {
            Either::Left((Some(item), _)) => item,
            Either::Left((None, _)) => return None,
            Either::Right(_) => return Some(Bytes::from_static(b": keep-alive\n\n")),
        }
    };
    if let Some(wait) = stream
        .wrote
        .and_then(|wrote| (wrote + SPACING).checked_duration_since(Instant::now()))
    {
        actix_web::rt::time::sleep(wait).await;
    }
    let mut out = String::new();
    frame(&first, &mut out);
    for item in std::iter::from_fn(|| stream.sub.try_next()).take(MAX_PER_WRITE - 1) {
        frame(&item, &mut out);
    }
    stream.wrote = Some(Instant::now());
    Some(Bytes::from(out))
}

/// `GET /events`.
pub async fn stream(app: web::Data<App>, req: HttpRequest) -> HttpResponse {
    let mut filter = match filter(req.query_string()) {
        Ok(filter) => filter,
        Err(e) => return error_response(&e),
    };
    // What the caller's read_paths hide never reaches its stream.
    // Nor another's agent run, to a caller that sees only its own (GET /agent/runs).
    if let Some(caller) = caller_of(&req) {
        filter.sees = caller.read_paths.clone();
        if let Seer::Own(name) = Seer::of(Some(&caller)) {
            filter.own_runs_only = Some(name);
        }
    }
    let last_id = req
        .headers()
        .get("Last-Event-ID")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    // Someone listens: outside edits are compared with the index from now on.
    app.ctx.index.follow();
    let sub = match app.ctx.events.stream(filter, last_id) {
        Ok(sub) => sub,
        Err(TooManyClients(max)) => {
            return error_response(&Error::new(
                ErrorCode::TooManyStreams,
                format!(
                    "{max} change streams are open, as many as MIRAI_EVENTS_MAX_CLIENTS allows; \
                     close one (or raise MIRAI_EVENTS_MAX_CLIENTS) and connect again"
                ),
            ))
        }
    };
    let opening = futures_util::stream::once(async {
        Ok::<_, actix_web::Error>(Bytes::from_static(b": mirai change stream\n\n"))
    });
    let stream = Stream { sub, wrote: None };
    let events = futures_util::stream::unfold(stream, |mut stream| async move {
        let chunk = next_chunk(&mut stream).await?;
        Some((Ok::<_, actix_web::Error>(chunk), stream))
    });
    use futures_util::StreamExt;
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(peer::watched(&req, opening.chain(events)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_known_types_and_a_prefix() {
        let f = filter("types=commit,%20notes_changed&path_prefix=/work/").unwrap();
        assert_eq!(f.types, Some(vec!["commit".into(), "notes_changed".into()]));
        assert_eq!(f.path_prefix.as_deref(), Some("work/"));
        let e = filter("types=commits").unwrap_err();
        assert!(e.message.contains("head_moved"), "{}", e.message);
        assert!(filter("since=3").is_err());
        assert!(filter("path_prefix=a%0Ab").is_err());
    }

    /// Events that are there together go out in one write; one that comes
    /// right after a write waits out the spacing.
    #[test]
    fn events_that_come_together_go_out_in_one_write() {
        let hub = crate::events::Events::new(100, 4);
        let mut stream = Stream {
            sub: hub.subscribe(Filter::default()),
            wrote: None,
        };
        for n in 0..3 {
            hub.publish("index", serde_json::json!({ "n": n }), None);
        }
        actix_web::rt::System::new().block_on(async {
            let chunk = next_chunk(&mut stream).await.unwrap();
            let text = std::str::from_utf8(&chunk).unwrap();
            assert_eq!(text.matches("event: index\n").count(), 3, "{text}");
            assert!(text.contains("data: {\"n\":2}\n\n"), "{text}");

            let first = stream.wrote.unwrap();
            hub.publish("sync", serde_json::json!({}), None);
            let chunk = next_chunk(&mut stream).await.unwrap();
            assert!(std::str::from_utf8(&chunk).unwrap().starts_with("id: "));
            assert!(stream.wrote.unwrap() - first >= SPACING);
        });
    }
}
