//! MCP over Streamable HTTP at `/mcp`: moves JSON-RPC messages between the
//! client and [`crate::mcp::Mcp`], and keeps the transport's rules: for
//! 2025-11-25 and before, a session id issued by `initialize` and
//! required afterwards with the negotiated `MCP-Protocol-Version`; for
//! 2026-07-28, no session and routing headers that must match the body; 202
//! for notifications. `GET` with a session id opens the session's stream of
//! server-to-client messages: the notifications of its resource
//! subscriptions, as server-sent events (one stream per session).
//! `Origin` (403 to a foreign one, as the transport requires) and the bearer
//! token are checked before routing, as for every route; a tool call whose
//! OAuth token lacks the scope for the tool's right is 403 with the
//! `insufficient_scope` challenge.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::middleware::caller_of;
use super::peer::{unless_gone, watched};
use super::respond::{error_response, gone, read_body};
use crate::app::App;
use crate::events::TooManyClients;
use crate::mcp::{code, requested_version, Mcp, Subscribed, PROTOCOL_VERSIONS};
use crate::oauth;

const SESSION_HEADER: &str = "Mcp-Session-Id";
const VERSION_HEADER: &str = "MCP-Protocol-Version";
/// Sessions kept at once; the oldest is forgotten first (its client re-initializes on 404).
const MAX_SESSIONS: usize = 10_000;

/// One session: its revision, its subscriptions, whether its stream is open.
#[derive(Clone)]
struct Session {
    version: &'static str,
    /// The caller whose token opened the session: its rights are the session's.
    caller: Option<String>,
    subscribed: Arc<Subscribed>,
    streaming: Arc<AtomicBool>,
}

/// Live sessions: id -> the session, in creation order.
#[derive(Default)]
pub struct Sessions {
    live: Mutex<(HashMap<String, Session>, std::collections::VecDeque<String>)>,
}

/// Marks a session's stream open while it lives.
struct Streaming(Arc<AtomicBool>);

impl Drop for Streaming {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Sessions {
    fn open(
        &self,
        version: &'static str,
        subscribed: Arc<Subscribed>,
        caller: Option<String>,
    ) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let (by_id, order) = &mut *live;
        if by_id.len() >= MAX_SESSIONS {
            if let Some(oldest) = order.pop_front() {
                by_id.remove(&oldest);
            }
        }
        let session = Session {
            version,
            caller,
            subscribed,
            streaming: Arc::new(AtomicBool::new(false)),
        };
        by_id.insert(id.clone(), session);
        order.push_back(id.clone());
        id
    }

    fn get(&self, id: &str) -> Option<Session> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.0.get(id).cloned()
    }

    fn close(&self, id: &str) -> bool {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let (by_id, order) = &mut *live;
        order.retain(|other| other != id);
        by_id.remove(id).is_some()
    }
}

/// `POST /mcp`: one JSON-RPC message.
pub async fn post(
    app: web::Data<App>,
    sessions: web::Data<Sessions>,
    req: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let body = match read_body(&app.config, payload).await {
        Ok(body) => body,
        Err(err) => {
            return rpc_error(
                StatusCode::from_u16(err.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST),
                code::INVALID_REQUEST,
                &err.message,
            )
        }
    };
    let message: Value = match crate::json::from_slice(&body) {
        Ok(message) => message,
        Err(e) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                code::PARSE_ERROR,
                &format!("the body is not JSON: {e}"),
            )
        }
    };
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let initializing = method == "initialize";
    let stateless = !initializing && requested_version(&message["params"]).is_some();
    if stateless {
        if let Err(mismatch) = check_routing_headers(&req, &method, &message) {
            return rpc_error(StatusCode::BAD_REQUEST, code::HEADER_MISMATCH, &mismatch);
        }
    }
    let caller = caller_of(&req);
    let mut session = None;
    if !stateless && !initializing {
        let Some(id) = header_value(&req, SESSION_HEADER) else {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                code::INVALID_REQUEST,
                "missing Mcp-Session-Id: send initialize first and then the session id it answered",
            );
        };
        // A session is its opener's: another caller's token finds no such session.
        let Some(found) = sessions
            .get(&id)
            .filter(|found| found.caller == caller.as_ref().map(|c| c.name.clone()))
        else {
            return rpc_error(
                StatusCode::NOT_FOUND,
                code::INVALID_REQUEST,
                "unknown or ended session: initialize again",
            );
        };
        let negotiated = found.version;
        session = Some(found.subscribed);
        if let Some(sent) = header_value(&req, VERSION_HEADER) {
            if !PROTOCOL_VERSIONS.contains(&sent.as_str()) || sent != negotiated {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    code::INVALID_REQUEST,
                    &format!("MCP-Protocol-Version {sent} is not this session's ({negotiated})"),
                );
            }
        }
    }
    if stateless && method == "subscriptions/listen" {
        return listen(&app, &req, &message);
    }
    // A person signed in through OAuth whose token's scopes withheld the
    // right a tool takes: 403 with the step-up challenge (the MCP spec's
    // scope challenge), so the client can sign in again for that scope.
    if let Some(oauth) = &app.oauth {
        if let Some(right) = app.mcp.missing_right(&message, caller.as_ref()) {
            let scope = oauth::scope_of(right);
            let mut answer = HttpResponse::Forbidden();
            answer.insert_header((
                header::WWW_AUTHENTICATE,
                oauth.insufficient_scope(req.path(), right),
            ));
            return answer.json(json!({"jsonrpc": "2.0", "id": message.get("id"), "error": {
                "code": code::INVALID_REQUEST,
                "message": format!(
                    "this access token lacks the scope {scope}, which this tool takes: sign in \
                     again asking for {scope}"
                ),
            }}));
        }
    }
    let mcp = app.mcp.clone();
    // A repo_sync call waits for its sync holding no thread, as the HTTP row does;
    // a caller that goes away gives up its place.
    let synced = match mcp.sync_ticket(&message, caller.as_ref()) {
        Some(Ok(ticket)) => match unless_gone(&req, ticket.answer()).await {
            Some(outcome) => Some(outcome),
            None => return error_response(&gone()),
        },
        Some(Err(err)) => Some(Err(err)),
        None => None,
    };
    let opener = caller.as_ref().map(|c| c.name.clone());
    let answered = web::block(move || {
        let response = mcp.handle_synced(&message, synced, session.as_deref(), caller.as_ref());
        (message, response)
    })
    .await;
    let Ok((message, response)) = answered else {
        log::error!("/mcp panicked; answered 500");
        return rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::INTERNAL_ERROR,
            "internal error",
        );
    };
    let Some(response) = response else {
        return HttpResponse::Accepted().finish();
    };
    // 2026-07-28 answers an unsupported revision with 400 and an unknown method with 404,
    // each with its JSON-RPC error, so clients can tell mirai from a legacy server.
    let status = match response["error"]["code"].as_i64() {
        Some(code::UNSUPPORTED_VERSION) if stateless => StatusCode::BAD_REQUEST,
        Some(code::METHOD_NOT_FOUND) if stateless => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    };
    let mut answer = HttpResponse::build(status);
    if initializing && response.get("result").is_some() {
        let version = Mcp::negotiate(message["params"]["protocolVersion"].as_str());
        answer.insert_header((
            SESSION_HEADER,
            sessions.open(version, app.mcp.session(), opener),
        ));
    }
    answer.json(response)
}

/// 2026-07-28's routing headers must agree with the body: `MCP-Protocol-Version`
/// with `_meta`, `Mcp-Method` with the method, `Mcp-Name` with the tool or URI.
fn check_routing_headers(req: &HttpRequest, method: &str, message: &Value) -> Result<(), String> {
    let params = &message["params"];
    let expect = |name: &str, body: &str| -> Result<(), String> {
        match header_value(req, name).map(|v| decode_header(&v)) {
            Some(Some(sent)) if sent == body => Ok(()),
            Some(Some(sent)) => Err(format!(
                "header mismatch: {name} is {sent:?} but the body says {body:?}"
            )),
            Some(None) => Err(format!(
                "header {name} is not valid (=?base64?...?= must hold base64 UTF-8)"
            )),
            None => Err(format!("missing header {name} (it must be {body:?})")),
        }
    };
    expect(
        VERSION_HEADER,
        requested_version(params).unwrap_or_default(),
    )?;
    expect("Mcp-Method", method)?;
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" => params["uri"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        expect("Mcp-Name", name)?;
    }
    Ok(())
}

/// A header value as sent: plain, or `=?base64?<UTF-8 as base64>?=` for
/// values a header cannot carry as they are.
fn decode_header(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_string()),
    }
}

/// The answer when every place under `MIRAI_EVENTS_MAX_CLIENTS` (`max`) is
/// taken and one of MCP's streams was asked for.
fn too_many_streams(max: usize) -> HttpResponse {
    rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        code::INTERNAL_ERROR,
        &format!(
            "too_many_streams: {max} change streams are open (GET /events and MCP's streams \
             together), as many as MIRAI_EVENTS_MAX_CLIENTS allows; close one and try again"
        ),
    )
}

/// 2026-07-28's `subscriptions/listen`: the answer is a stream of
/// server-sent events, the acknowledgement first, then the notifications of
/// the listen's subscriptions; closing it ends them. Counted as `GET /events` is.
fn listen(app: &App, req: &HttpRequest, message: &Value) -> HttpResponse {
    let slot = match app.ctx.events.slot() {
        Ok(slot) => slot,
        Err(TooManyClients(max)) => return too_many_streams(max),
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let (ack, listen) = match app
        .mcp
        .listen(id, &message["params"], caller_of(req).as_ref())
    {
        Ok(opened) => opened,
        Err(error) => {
            let status = match error["error"]["code"].as_i64() {
                Some(code::UNSUPPORTED_VERSION) => StatusCode::BAD_REQUEST,
                _ => StatusCode::OK,
            };
            return HttpResponse::build(status).json(error);
        }
    };
    let opening = futures_util::stream::once(async move {
        Ok::<_, actix_web::Error>(web::Bytes::from(format!("event: message\ndata: {ack}\n\n")))
    });
    let stream = futures_util::stream::unfold((listen, slot), |(mut listen, slot)| async move {
        use futures_util::future::{select, Either};
        let chunk = {
            let next = listen.next();
            let idle = actix_web::rt::time::sleep(KEEP_ALIVE);
            futures_util::pin_mut!(next, idle);
            match select(next, idle).await {
                Either::Left((Some(note), _)) => {
                    web::Bytes::from(format!("event: message\ndata: {note}\n\n"))
                }
                Either::Left((None, _)) => return None,
                Either::Right(_) => web::Bytes::from_static(b": keep-alive\n\n"),
            }
        };
        Some((Ok::<_, actix_web::Error>(chunk), (listen, slot)))
    });
    use futures_util::StreamExt;
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .streaming(watched(req, opening.chain(stream)))
}

/// How long the session stream stays silent before a comment line.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The next chunk of a session's stream: a notification, or a keep-alive comment.
async fn next_note(notifier: &mut crate::mcp::Notifier) -> Option<web::Bytes> {
    use futures_util::future::{select, Either};
    let next = notifier.next();
    let idle = actix_web::rt::time::sleep(KEEP_ALIVE);
    futures_util::pin_mut!(next, idle);
    match select(next, idle).await {
        Either::Left((Some(note), _)) => Some(web::Bytes::from(format!(
            "event: message\ndata: {note}\n\n"
        ))),
        Either::Left((None, _)) => None,
        Either::Right(_) => Some(web::Bytes::from_static(b": keep-alive\n\n")),
    }
}

/// `GET /mcp`: the session's stream (2025 revisions): the notifications of
/// its resource subscriptions as server-sent events, until the session ends.
pub async fn get(
    app: web::Data<App>,
    sessions: web::Data<Sessions>,
    req: HttpRequest,
) -> HttpResponse {
    let accepts = header_value(&req, "Accept").is_some_and(|a| a.contains("text/event-stream"));
    if !accepts {
        return HttpResponse::MethodNotAllowed()
            .insert_header((header::ALLOW, "POST, DELETE"))
            .json(json!({"jsonrpc": "2.0", "id": null, "error": {"code": code::INVALID_REQUEST, "message": "GET /mcp opens a session's stream: send Accept: text/event-stream and the Mcp-Session-Id from initialize"}}));
    }
    let Some(id) = header_value(&req, SESSION_HEADER) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "missing Mcp-Session-Id: the stream is a session's (initialize first)",
        );
    };
    let Some(session) = sessions.get(&id) else {
        return rpc_error(
            StatusCode::NOT_FOUND,
            code::INVALID_REQUEST,
            "unknown or ended session: initialize again",
        );
    };
    if session.streaming.swap(true, Ordering::AcqRel) {
        return rpc_error(
            StatusCode::CONFLICT,
            code::INVALID_REQUEST,
            "this session's stream is already open; one stream per session",
        );
    }
    let streaming = Streaming(session.streaming.clone());
    let slot = match app.ctx.events.slot() {
        Ok(slot) => slot,
        Err(TooManyClients(max)) => return too_many_streams(max),
    };
    let notifier = app.mcp.notifier(session.subscribed.clone());
    let state = (notifier, streaming, sessions.clone(), id, slot);
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        // A session ended (DELETE, or forgotten as the oldest) ends its stream.
        state.2.get(&state.3)?;
        let chunk = next_note(&mut state.0).await?;
        Some((Ok::<_, actix_web::Error>(chunk), state))
    });
    let opening = futures_util::stream::once(async {
        Ok::<_, actix_web::Error>(web::Bytes::from_static(b": mirai session stream\n\n"))
    });
    use futures_util::StreamExt;
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .streaming(watched(&req, opening.chain(stream)))
}

/// `DELETE /mcp`: the client ends its session.
pub async fn delete(sessions: web::Data<Sessions>, req: HttpRequest) -> HttpResponse {
    match header_value(&req, SESSION_HEADER) {
        Some(id) if sessions.close(&id) => HttpResponse::NoContent().finish(),
        Some(_) => rpc_error(
            StatusCode::NOT_FOUND,
            code::INVALID_REQUEST,
            "unknown or ended session",
        ),
        None => rpc_error(
            StatusCode::BAD_REQUEST,
            code::INVALID_REQUEST,
            "missing Mcp-Session-Id",
        ),
    }
}

fn header_value(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn rpc_error(status: StatusCode, code: i64, message: &str) -> HttpResponse {
    HttpResponse::build(status)
        .json(json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}))
}
