//! The sandbox and the agent over HTTP: `POST /agent/eval`, `POST /agent/run`
//! (JSON, or server-sent events with `Accept: text/event-stream`), and the
//! run transcripts under `GET /agent/runs` (one run's with the commits it made).

use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::middleware::caller_of;
use super::respond::{error_response, read_body, render};
use crate::agent::transcript::{self, Event};
use crate::agent::RunRequest;
use crate::app::App;
use crate::error::{Error, ErrorCode};
use crate::ops;
use crate::sandbox::EvalRequest;

/// How many runs `GET /agent/runs` lists.
const RECENT_RUNS: usize = 50;

/// Code mode: one program in the sandbox. Its failure is a 200 with `error` set.
pub async fn eval(app: web::Data<App>, req: HttpRequest, payload: web::Payload) -> HttpResponse {
    let request: EvalRequest = match body(
        &app,
        payload,
        r#"{"code": "<JavaScript>", "dry_run"?: bool}"#,
    )
    .await
    {
        Ok(request) => request,
        Err(err) => return error_response(&err),
    };
    let ctx = app.ctx.as_caller(caller_of(&req));
    let sandbox = app.sandbox.clone();
    render(
        web::block(move || sandbox.eval(&ctx, &request)).await,
        "/agent/eval",
    )
}

/// One agent run, answered as a report, or streamed as it happens.
pub async fn run(app: web::Data<App>, req: HttpRequest, payload: web::Payload) -> HttpResponse {
    let request: RunRequest = match body(
        &app,
        payload,
        r#"{"task": "<what to do>", "max_steps"?: 1-32, "dry_run"?: bool}"#,
    )
    .await
    {
        Ok(request) => request,
        Err(err) => return error_response(&err),
    };
    if let Err(err) = app.agent.check(&request) {
        return error_response(&err);
    }
    let ctx = app.ctx.as_caller(caller_of(&req));
    let agent = app.agent.clone();
    let streaming = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if !streaming {
        let ran = web::block(move || agent.run(&ctx, &request, &mut |_| {})).await;
        return render(ran, "/agent/run");
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    actix_web::rt::task::spawn_blocking(move || {
        let mut forward = |event: &Event| {
            let data = serde_json::to_string(event).unwrap_or_default();
            let _ = tx.send(frame(event.kind, &data));
        };
        let last = match agent.run(&ctx, &request, &mut forward) {
            Ok(report) => frame(
                "report",
                &serde_json::to_string(&report).unwrap_or_default(),
            ),
            Err(err) => frame("error", &err.to_json().to_string()),
        };
        let _ = tx.send(last);
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, actix_web::Error>(bytes), rx))
    });
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .streaming(events)
}

/// Recent runs, newest first: those the caller may see ([`transcript::Seer`]).
pub async fn runs(app: web::Data<App>, req: HttpRequest) -> HttpResponse {
    let dir = app.agent.runs().clone();
    let seer = transcript::Seer::of(caller_of(&req).as_deref());
    render(
        web::block(move || transcript::list(&dir, RECENT_RUNS, &seer)).await,
        "/agent/runs",
    )
}

/// Every event of one run, and the commits it made (found by their trailer),
/// as the caller sees them; another's run is `not_found` to a caller that
/// sees only its own.
pub async fn transcript(
    app: web::Data<App>,
    req: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    let dir = app.agent.runs().clone();
    let caller = caller_of(&req);
    let seer = transcript::Seer::of(caller.as_deref());
    let ctx = app.ctx.as_caller(caller);
    let run_id = path.into_inner();
    let read = web::block(move || {
        let events = transcript::read_seen(&dir, &run_id, &seer)?;
        let caller = events.first().map_or(Value::Null, |e| e["caller"].clone());
        let commits = ops::run_commits(&ctx, &run_id)?;
        Ok(json!({"run_id": run_id, "caller": caller, "events": events, "commits": commits}))
    })
    .await;
    render(read, "/agent/runs/{run_id}")
}

/// Reads and parses a JSON body (strictly: a repeated key is malformed); a
/// malformed one is `invalid_request` naming the shape.
async fn body<T: DeserializeOwned>(
    app: &web::Data<App>,
    payload: web::Payload,
    shape: &str,
) -> Result<T, Error> {
    let bytes = read_body(&app.config, payload).await?;
    let malformed = |e: serde_json::Error| {
        Error::new(
            ErrorCode::InvalidRequest,
            format!("request body must be {shape}: {e}"),
        )
    };
    let value = crate::json::from_slice(&bytes).map_err(malformed)?;
    serde_json::from_value(value).map_err(malformed)
}

/// One server-sent event.
fn frame(kind: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}
