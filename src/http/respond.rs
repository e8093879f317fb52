//! Answers: an [`Error`] as an HTTP response in the one error shape, blocking
//! work's outcome as JSON, and request bodies read within their limits. The
//! other http modules build on this one; it builds on none of them.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use crate::config::Config;
use crate::error::{Error, ErrorCode};

/// The HTTP status of `err`'s code.
fn status(err: &Error) -> StatusCode {
    StatusCode::from_u16(err.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// `err` as an answer: its code's status and [`Error::to_json`]'s body.
pub fn error_response(err: &Error) -> HttpResponse {
    let mut answer = HttpResponse::build(status(err));
    if err.code == ErrorCode::NotReady {
        answer.insert_header(("Retry-After", "1"));
    }
    answer.json(err.to_json())
}

impl actix_web::ResponseError for Error {
    fn status_code(&self) -> StatusCode {
        status(self)
    }

    fn error_response(&self) -> HttpResponse {
        error_response(self)
    }
}

/// The answer when something inside mirai broke; details stay in the log.
pub fn internal_error() -> Error {
    Error::internal(
        "internal error: the request could not be completed; the server log has details",
    )
}

/// What a request whose caller closed the connection answers (nobody reads it;
/// the log line shows it).
pub fn gone() -> Error {
    Error::new(
        ErrorCode::RequestTimeout,
        "the caller closed the connection before the answer was ready; nothing was waited for",
    )
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
pub async fn read_body(config: &Config, payload: web::Payload) -> Result<web::Bytes, Error> {
    let limit = config.max_body_bytes;
    let too_large = || {
        Error::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "request body is larger than the limit of {limit} bytes (MIRAI_MAX_BODY_BYTES)"
            ),
        )
    };
    read_limited(config, payload, limit, too_large).await
}

/// Reads the body up to `limit` bytes and within `MIRAI_BODY_TIMEOUT_MS`.
async fn read_limited(
    config: &Config,
    payload: web::Payload,
    limit: usize,
    too_large: impl Fn() -> Error,
) -> Result<web::Bytes, Error> {
    let timeout_ms = config.body_timeout_ms;
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
