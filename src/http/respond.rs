//! Turning operation results into HTTP answers, and requests into operation input.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::middleware::internal_error;
use super::routes::ENDPOINTS;
use super::AppState;
use crate::error::{Error, ErrorCode};
use crate::ops::{self, Input};

/// The one error shape: `{"error":{"code","message"}}`.
pub fn error_response(err: &Error) -> HttpResponse {
    let status =
        StatusCode::from_u16(err.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    HttpResponse::build(status)
        .json(json!({"error": {"code": err.code.as_str(), "message": err.message}}))
}

impl actix_web::ResponseError for Error {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        error_response(self)
    }
}

/// Request input an operation will get, owned so it can move to a blocking thread.
pub enum OwnedInput {
    Json(Value),
    Body(web::Bytes),
}

/// Runs an operation off the async workers (operations do file and git I/O)
/// and renders its result. A panic inside the operation becomes 500 `internal`.
pub async fn run_operation(
    state: &web::Data<AppState>,
    name: &'static str,
    input: OwnedInput,
) -> HttpResponse {
    let ctx = state.ctx.clone();
    let outcome = web::block(move || match input {
        OwnedInput::Json(value) => ops::dispatch(&ctx, name, Input::Json(value)),
        OwnedInput::Body(bytes) => ops::dispatch(&ctx, name, Input::Body(&bytes)),
    })
    .await;
    render(outcome, name)
}

/// Renders blocking work's outcome: the value as JSON, its error in the one
/// error shape (5xx logged), or a plain 500 when it panicked.
pub fn render<T: serde::Serialize>(
    outcome: Result<Result<T, Error>, actix_web::error::BlockingError>,
    what: &str,
) -> HttpResponse {
    match outcome {
        Ok(Ok(value)) => HttpResponse::Ok().json(value),
        Ok(Err(err)) => {
            if err.code.http_status() >= 500 {
                log::error!("{what} failed: {err}");
            }
            error_response(&err)
        }
        Err(_) => {
            log::error!("{what} panicked; answered 500");
            error_response(&internal_error())
        }
    }
}

/// Reads a request body up to the configured limit; larger bodies are 413,
/// and one that has not arrived in `MIRAI_BODY_TIMEOUT_MS` is 408 (the
/// connection is then closed, since the rest of the body is never read).
pub async fn read_body(
    state: &web::Data<AppState>,
    payload: web::Payload,
) -> Result<web::Bytes, Error> {
    let limit = state.config.max_body_bytes;
    let timeout_ms = state.config.body_timeout_ms;
    let too_large = || {
        Error::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "request body is larger than the limit of {limit} bytes (MIRAI_MAX_BODY_BYTES)"
            ),
        )
    };
    let read = actix_web::rt::time::timeout(
        std::time::Duration::from_millis(timeout_ms),
        payload.to_bytes_limited(limit),
    );
    match read.await {
        Ok(Ok(Ok(bytes))) => Ok(bytes),
        Ok(Ok(Err(err))) => Err(Error::new(
            ErrorCode::InvalidRequest,
            format!("request body could not be read: {err}"),
        )),
        Ok(Err(_)) => Err(too_large()),
        Err(_) => Err(Error::new(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within {timeout_ms} ms (MIRAI_BODY_TIMEOUT_MS): send it in one go"
            ),
        )),
    }
}

/// Every path no route matches.
pub async fn unknown_route(req: HttpRequest) -> HttpResponse {
    error_response(&Error::not_found(format!(
        "no route {} {}; GET /mcp/notes lists notes, and spec/openapi.yaml lists every route",
        req.method(),
        req.path()
    )))
}

/// A known path asked with a method it does not serve; `Allow` names the ones it does.
pub async fn method_not_allowed(req: HttpRequest) -> HttpResponse {
    let pattern = req
        .match_pattern()
        .unwrap_or_else(|| req.path().to_string());
    let allowed: Vec<&str> = ENDPOINTS
        .iter()
        .filter(|e| e.path == pattern)
        .map(|e| e.method.as_str())
        .collect();
    let allowed = allowed.join(", ");
    let mut response = error_response(&Error::new(
        ErrorCode::MethodNotAllowed,
        format!(
            "{} is not allowed on {}; use {allowed}",
            req.method(),
            req.path()
        ),
    ));
    if let Ok(value) = actix_web::http::header::HeaderValue::from_str(&allowed) {
        response
            .headers_mut()
            .insert(actix_web::http::header::ALLOW, value);
    }
    response
}
