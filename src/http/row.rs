//! The one handler for every row of the operation table: takes the request
//! from where the row's [`HttpRoute`](crate::ops::HttpRoute) says (nothing, the
//! query string or the JSON body), runs it through [`ops::dispatch`] on the
//! blocking pool, and renders the answer. A row of class sync is not run on
//! the pool: the caller's place in the next sync is taken
//! ([`ops::dispatch_sync`]) and its answer awaited, holding no thread, until
//! it comes or the caller goes away. A row answering a file (`files.read`)
//! answers its raw bytes (`file.rs`). A request that carried the reviewer token
//! runs as a reviewer's; a write review mode proposed answers 202.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};

use super::middleware::caller_of;
use super::peer::unless_gone;
use super::respond::{error_response, gone, read_body, render};
use super::upload::stream_file_body;
use crate::app::App;
use crate::error::Error;
use crate::ops::adapters::Upload;
use crate::ops::{self, Class, HttpAnswer, HttpInput, Input, OpEntry};

/// Request input an operation will get, owned so it can move to a blocking thread.
enum OwnedInput {
    Json(Value),
    Body(web::Bytes),
}

/// Serves row `op`. A query string that cannot be decoded gets the row's
/// malformed code; a body is read within its limits before policy and parsing.
/// A person signed in through OAuth whose token's scopes withheld the right
/// the row takes gets the 403 with the `insufficient_scope` challenge naming
/// the scope that grants it.
pub async fn serve(
    app: web::Data<App>,
    op: &'static OpEntry,
    req: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let ctx = app.ctx.via("http").as_caller(caller_of(&req));
    let step_up = app.oauth.as_ref().and_then(|oauth| {
        let right = ops::missing_right(&ctx, op.name)?;
        HeaderValue::from_str(&oauth.insufficient_scope(req.path(), right)).ok()
    });
    let mut response = run(app, ctx, op, req, payload).await;
    if let Some(challenge) = step_up {
        if response.status() == StatusCode::FORBIDDEN {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
    }
    response
}

async fn run(
    app: web::Data<App>,
    mut ctx: ops::Context,
    op: &'static OpEntry,
    req: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let input = match op.http.input {
        // A row that takes no fields still refuses parameters it would ignore.
        HttpInput::Nothing | HttpInput::Query(_) => match query_object(&req) {
            Ok(request) => OwnedInput::Json(request),
            Err(why) => return error_response(&Error::new(op.malformed, why)),
        },
        HttpInput::BodyOrFile(_) if !sends_json(&req) => {
            match raw_file(&app, &ctx, op, &req, payload).await {
                Ok((request, upload)) => {
                    ctx = ctx.with_upload(upload);
                    OwnedInput::Json(request)
                }
                Err(err) => return error_response(&err),
            }
        }
        HttpInput::Body | HttpInput::BodyOrFile(_) => match read_body(&app.config, payload).await {
            Ok(body) => OwnedInput::Body(body),
            Err(err) => return error_response(&err),
        },
    };
    if op.class == Class::Sync {
        let ticket = match &input {
            OwnedInput::Json(value) => {
                ops::dispatch_sync(&ctx, op.name, Input::Json(value.clone()))
            }
            OwnedInput::Body(bytes) => ops::dispatch_sync(&ctx, op.name, Input::Body(bytes)),
        };
        let outcome = match ticket {
            // A caller that went away gives up its place (the ticket is dropped).
            Ok(ticket) => match unless_gone(&req, ticket.answer()).await {
                Some(outcome) => outcome,
                None => return error_response(&gone()),
            },
            Err(err) => Err(err),
        };
        return render(Ok(outcome), op.name);
    }
    // Operations do file and git I/O: off the async workers. A panic becomes 500 `internal`.
    if op.http.answer == HttpAnswer::File {
        let outcome = web::block(move || match input {
            OwnedInput::Json(value) => ops::dispatch_file(&ctx, op.name, Input::Json(value)),
            OwnedInput::Body(bytes) => ops::dispatch_file(&ctx, op.name, Input::Body(&bytes)),
        })
        .await;
        return match outcome {
            Ok(Ok(file)) => super::file::answer(&req, file),
            other => render(other.map(|r| r.map(|_| ())), op.name),
        };
    }
    let outcome = web::block(move || match input {
        OwnedInput::Json(value) => ops::dispatch(&ctx, op.name, Input::Json(value)),
        OwnedInput::Body(bytes) => ops::dispatch(&ctx, op.name, Input::Body(&bytes)),
    })
    .await;
    // Review mode: a proposed write is accepted for a person to decide, not done.
    if let Ok(Ok(answer)) = &outcome {
        if ops::answers_proposal(op, answer) {
            return HttpResponse::Accepted().json(answer);
        }
    }
    render(outcome, op.name)
}

/// Whether the request's body is JSON (its Content-Type says so, or says nothing).
fn sends_json(req: &HttpRequest) -> bool {
    match req.headers().get(actix_web::http::header::CONTENT_TYPE) {
        None => true,
        Some(value) => value.to_str().is_ok_and(|value| {
            let essence = value.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
        }),
    }
}

/// A file sent as the raw body, as the row's JSON request (the query
/// string's fields, the Content-Type as `media_type`) and the file itself,
/// streamed to disk (upload.rs) for the context to carry. The policy and the
/// caller's rights are checked before the body is read, and the body is
/// capped by `MIRAI_MAX_FILE_BYTES` as it arrives.
async fn raw_file(
    app: &App,
    ctx: &ops::Context,
    op: &OpEntry,
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<(Value, Upload), Error> {
    ops::admits(ctx, op.name)?;
    let mut request = query_object(req).map_err(|why| Error::new(op.malformed, why))?;
    for field in ["content_base64", "media_type"] {
        if request.get(field).is_some() {
            return Err(Error::new(
                op.malformed,
                format!(
                    "{field} comes from the raw body and its Content-Type, not the query string: \
                     leave it out of the query, or send JSON instead"
                ),
            ));
        }
    }
    let upload = stream_file_body(&app.config, ctx, req, payload).await?;
    let media_type = req
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    if let (Value::Object(fields), Some(media_type)) = (&mut request, media_type) {
        fields.insert("media_type".into(), Value::String(media_type));
    }
    Ok((request, upload))
}

/// Builds a JSON object from the query string's parameters (first value wins;
/// absent ones are left out, so the operation reports them as missing). Every
/// parameter is kept, not only the row's `names`: one the row does not take
/// is refused by `ops::dispatch` (no field is silently ignored), so a
/// misspelt `limt=` is never dropped without a word.
fn query_object(req: &HttpRequest) -> Result<Value, String> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map_err(|e| format!("the query string could not be decoded: {e}"))?;
    let mut object = Map::new();
    for (key, value) in pairs.into_inner() {
        object.entry(key).or_insert(Value::String(value));
    }
    Ok(Value::Object(object))
}
