//! Edges every request passes: a log line, the bearer token, and a net that
//! turns a panic into a plain 500 instead of a dropped connection.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::web;
use futures_util::FutureExt;

use super::respond::error_response;
use super::AppState;
use crate::error::{Error, ErrorCode};

/// One line per request: method, path, status, duration.
pub async fn log_request(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.path().to_owned();
    let res = next.call(req).await?;
    log::info!(
        "{method} {path} {} {:.1}ms",
        res.status().as_u16(),
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(res)
}

/// With `MIRAI_API_TOKEN` set, every route but `/health` needs `Authorization: Bearer <token>`.
pub async fn require_token(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let expected = req
        .app_data::<web::Data<AppState>>()
        .and_then(|state| state.config.api_token.clone());
    if let Some(expected) = expected {
        if req.path() != "/health" && !bearer_matches(&req, &expected) {
            let err = Error::new(
                ErrorCode::Unauthorized,
                "missing or wrong bearer token: send the header Authorization: Bearer <MIRAI_API_TOKEN>",
            );
            return Ok(req.into_response(error_response(&err)));
        }
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

fn bearer_matches(req: &ServiceRequest, expected: &str) -> bool {
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return false;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let mut parts = value.trim().splitn(2, ' ');
    let scheme = parts.next().unwrap_or("");
    let token = parts.next().unwrap_or("").trim();
    scheme.eq_ignore_ascii_case("bearer") && constant_time_eq(token.as_bytes(), expected.as_bytes())
}

/// Compares without stopping at the first difference, so timing does not leak the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A panic anywhere below answers 500 `internal`, with nothing of the panic in it.
pub async fn catch_panic(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    match AssertUnwindSafe(next.call(req)).catch_unwind().await {
        Ok(res) => Ok(res?.map_into_boxed_body()),
        Err(_) => {
            log::error!("a request handler panicked; answered 500");
            Err(internal_error().into())
        }
    }
}

/// The answer when something inside mirai broke; details stay in the log.
pub fn internal_error() -> Error {
    Error::internal(
        "internal error: the request could not be completed; the server log has details",
    )
}

#[cfg(test)]
mod tests {
    use actix_web::{test as web_test, web, App, HttpResponse};

    use super::{catch_panic, constant_time_eq};

    #[actix_web::test]
    async fn a_panicking_handler_answers_500_internal_without_details() {
        async fn boom() -> HttpResponse {
            panic!("secret detail from deep inside")
        }
        let app = web_test::init_service(
            App::new()
                .route("/boom", web::get().to(boom))
                .wrap(actix_web::middleware::from_fn(catch_panic)),
        )
        .await;
        let err = match web_test::try_call_service(
            &app,
            web_test::TestRequest::get().uri("/boom").to_request(),
        )
        .await
        {
            Ok(res) => panic!("expected an error, got {}", res.status()),
            Err(err) => err,
        };
        let res = err.error_response();
        assert_eq!(res.status().as_u16(), 500);
        let body = actix_web::body::to_bytes(res.into_body()).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "internal");
        assert!(!body.to_string().contains("secret detail"));
    }

    #[test]
    fn constant_time_eq_compares_whole_values() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
