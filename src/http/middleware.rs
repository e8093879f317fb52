//! Edges every request passes: a log line, the browser check (`Origin`, and
//! `Host` while no token is set), the bearer token, a POST body's
//! `Content-Type`, and a net that turns a panic into a plain 500 instead of a
//! dropped connection.
//!
//! The `Origin` rule, as the web page amends it (issue 31): a loopback origin,
//! one listed in `MIRAI_ALLOWED_ORIGINS`, or exactly the `scheme://host:port`
//! the request was sent to (mirai's own page, opened by any name) when its
//! `Host` passes the Host rule or a token is set; every other origin is refused.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, HttpRequest};
use futures_util::FutureExt;

use super::respond::{error_response, internal_error};
use super::ui;
use crate::app::App;
use crate::callers::{Caller, Credential, Right};
use crate::config::Config;
use crate::error::{Error, ErrorCode};
use crate::oauth;
use crate::ops::HttpInput;
use crate::origin::{self, OwnNames};

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

/// Who may send requests from a browser: the allowed origins, and, while no
/// token is set, the names a `Host` header may carry.
pub struct Browsers {
    origins: Vec<String>,
    /// `None` when a token guards the server: a rebinding page has nothing to send then.
    own_names: Option<OwnNames>,
}

impl Browsers {
    pub fn new(config: &Config) -> Browsers {
        Browsers {
            origins: config.allowed_origins.clone(),
            own_names: (config.api_token.is_none()
                && config.callers_file.is_none()
                && config.oauth.is_none())
            .then(|| OwnNames::new(&config.host, &config.allowed_hosts)),
        }
    }

    /// Why a request is refused, if it is: a foreign `Origin`, or a foreign
    /// `Host` on a server without a token (ARCHITECTURE.md, "Browsers are not
    /// callers").
    fn refusal(&self, req: &ServiceRequest) -> Option<Error> {
        let host = match req.headers().get(header::HOST) {
            Some(value) => Some(String::from_utf8_lossy(value.as_bytes()).into_owned()),
            None => req.uri().authority().map(|a| a.to_string()),
        };
        // The Host rule (a token set, a name of this machine's, or no host named), asked once.
        let host_passes = match (&self.own_names, &host) {
            (Some(own), Some(host)) => own.allows(host),
            _ => true,
        };
        for value in req.headers().get_all(header::ORIGIN) {
            let text = String::from_utf8_lossy(value.as_bytes());
            let key = origin::origin_key(&text);
            let allowed = origin::is_loopback_origin(&text)
                || key.as_ref().is_some_and(|key| self.origins.contains(key))
                || (host_passes
                    && key.zip(host.as_deref()).is_some_and(|(key, host)| {
                        origin::is_own_origin(&key, req.connection_info().scheme(), host)
                    }));
            if !allowed {
                return Some(Error::new(
                    ErrorCode::OriginRefused,
                    format!(
                        "origin {:?} may not call mirai: web pages may use it only from mirai's own page, a loopback origin or one listed in MIRAI_ALLOWED_ORIGINS",
                        shorten(&text)
                    ),
                ));
            }
        }
        let host = host.filter(|_| !host_passes)?;
        Some(Error::new(
            ErrorCode::OriginRefused,
            format!(
                "host {:?} is not a name of this server: without MIRAI_API_TOKEN, mirai answers only requests for localhost, its own names and addresses, and the names in MIRAI_ALLOWED_HOSTS (behind a reverse proxy, list the name it forwards there)",
                shorten(&host)
            ),
        ))
    }
}

/// A header value as an error message quotes it: at most 200 characters.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Refuses what a browser sent from elsewhere (403 `origin_refused`), before
/// the token is looked at, on every route.
pub async fn refuse_browsers(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let refusal = req
        .app_data::<web::Data<Browsers>>()
        .and_then(|browsers| browsers.refusal(&req));
    if let Some(err) = refusal {
        return Ok(req.into_response(error_response(&err)));
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// Routes whose callers prove themselves otherwise: `/health` needs nothing,
/// `/hooks/push` its HMAC signature (ARCHITECTURE.md, "The token guards the
/// network"), and the protected resource metadata and the page's client
/// (`/oauth/page-client`) are how a client learns to sign in.
const TOKENLESS: &[&str] = &[
    "/health",
    "/hooks/push",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/oauth/page-client",
];

/// The named caller a request's bearer token belongs to, put on the request
/// for the adapters to hand to `ops` ([`caller_of`]).
#[derive(Clone)]
struct CallerOf(Arc<Caller>);

/// The caller the request was made for (`None`: no credential was needed or sent).
pub fn caller_of(req: &HttpRequest) -> Option<Arc<Caller>> {
    req.extensions().get::<CallerOf>().map(|c| Arc::clone(&c.0))
}

/// The bearer tokens (ARCHITECTURE.md, "The token guards the network" and "Only
/// a person decides a proposal"). The presented token is looked up once, among
/// the callers of the moment (`MIRAI_CALLERS_FILE` and the shorthands
/// `MIRAI_API_TOKEN`, `MIRAI_REVIEWER_TOKEN`); one that is none of theirs and
/// is shaped like a JWT is verified as an OAuth access token
/// (`MIRAI_OAUTH_ISSUER`, on the blocking pool: it may fetch the provider's
/// keys) and its subject mapped onto a caller. With a callers file, the API
/// token or OAuth set, every route but [`TOKENLESS`] and the page's own files
/// (`/`, `/ui/...`: they hold no notes) needs a caller. The routes of the
/// review class's rows (approve, reject) need a caller with `review`: another
/// caller gets 403 `policy_denied`, no token or a wrong one 401. With OAuth,
/// every 401 carries `WWW-Authenticate: Bearer resource_metadata="..."` (and
/// `error="invalid_token"` when a token was sent), where MCP clients start
/// their sign-in; a signed-in person refused a decision for want of the
/// scope proposals:review gets the `insufficient_scope` challenge with it. What each caller may do past that, `ops` decides.
pub async fn require_token(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let app = req.app_data::<web::Data<App>>().cloned();
    let callers = app.as_ref().map(|app| app.callers.current());
    let oauth = app.as_ref().and_then(|app| app.oauth.clone());
    let token = bearer(&req);
    let mut caller = match (&callers, token.as_deref()) {
        (Some(callers), Some(token)) => callers.identify(Credential::Bearer(token)),
        _ => None,
    };
    let mut token_refused = None;
    if let (None, Some(oauth), Some(callers), Some(token)) = (&caller, &oauth, &callers, &token) {
        if oauth::looks_like_jwt(token) {
            let (resource, token) = (Arc::clone(oauth), token.clone());
            match web::block(move || resource.verify(&token)).await {
                Ok(Ok(who)) => caller = callers.identify(Credential::SignedIn(&who)),
                Ok(Err(why)) => {
                    log::info!("oauth: an access token was refused: {why}");
                    token_refused = Some(why);
                }
                Err(_) => token_refused = Some("it could not be checked".to_string()),
            }
        }
    }
    let guarded = callers.is_some_and(|c| c.guards_network()) || oauth.is_some();
    let refusal = if is_review_route(req.path())
        && !caller.as_ref().is_some_and(|c| c.can.has(Right::Review))
    {
        Some(match &caller {
            Some(caller) if caller.name == crate::callers::API_NAME => Error::new(
                ErrorCode::PolicyDenied,
                "the API token cannot approve or reject proposals: a reviewer sends \
                 Authorization: Bearer <MIRAI_REVIEWER_TOKEN>",
            ),
            Some(caller) => Error::new(
                ErrorCode::PolicyDenied,
                format!(
                    "caller {} cannot approve or reject proposals: that takes a caller whose \
                     `can` holds review (MIRAI_CALLERS_FILE; with OAuth, and the scope \
                     proposals:review) or MIRAI_REVIEWER_TOKEN",
                    caller.name
                ),
            ),
            None => Error::new(
                ErrorCode::Unauthorized,
                "approving and rejecting proposals needs the reviewer's bearer token: send the \
                 header Authorization: Bearer <MIRAI_REVIEWER_TOKEN> (or a token of a caller \
                 with the review right)",
            ),
        })
    } else if guarded
        && caller.is_none()
        && !TOKENLESS.contains(&req.path())
        && !ui::is_page_path(req.path())
    {
        Some(match (&token_refused, &oauth) {
            (Some(why), _) => Error::new(
                ErrorCode::Unauthorized,
                format!("the access token was refused: {why}; sign in again for a new one"),
            ),
            (None, Some(oauth)) => Error::new(
                ErrorCode::Unauthorized,
                format!(
                    "missing or wrong bearer token: send the header Authorization: Bearer \
                     <token>, with an access token from {} (the resource metadata at {} says \
                     how to get one) or a caller's token",
                    oauth.settings().issuer,
                    oauth.challenge_url(req.path())
                ),
            ),
            (None, None) => Error::new(
                ErrorCode::Unauthorized,
                "missing or wrong bearer token: send the header Authorization: Bearer <token> \
                 (MIRAI_API_TOKEN, or a caller's token from MIRAI_CALLERS_FILE)",
            ),
        })
    } else {
        None
    };
    if let Some(err) = refusal {
        let mut response = error_response(&err);
        let challenge = match (&err.code, &oauth) {
            (ErrorCode::Unauthorized, Some(oauth)) => {
                Some(oauth.challenge(req.path(), token.is_some()))
            }
            // A signed-in reviewer whose token was not given proposals:review.
            (ErrorCode::PolicyDenied, Some(oauth))
                if caller
                    .as_ref()
                    .is_some_and(|c| c.withheld.has(Right::Review)) =>
            {
                Some(oauth.insufficient_scope(req.path(), Right::Review))
            }
            _ => None,
        };
        if let Some(value) = challenge.and_then(|c| header::HeaderValue::from_str(&c).ok()) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        return Ok(req.into_response(response));
    }
    if let Some(caller) = caller {
        req.extensions_mut().insert(CallerOf(caller));
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// Whether `path` serves a row of class review (a reviewer's decision).
fn is_review_route(path: &str) -> bool {
    crate::ops::TABLE
        .iter()
        .any(|op| op.class == crate::ops::Class::Review && op.http.path == path)
}

/// The bearer token the request carries, if any.
fn bearer(req: &ServiceRequest) -> Option<String> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let mut parts = value.trim().splitn(2, ' ');
    let scheme = parts.next().unwrap_or("");
    let token = parts.next().unwrap_or("").trim();
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.to_string())
}

/// POSTs whose body need not be declared JSON: `/hooks/push`, whose HMAC
/// signature proves its sender (a forge may send its webhooks form-encoded).
const ANY_BODY: &[&str] = &["/hooks/push"];

/// Refuses a POST with a body that is not declared `application/json` (415
/// `unsupported_media_type`): a page on another loopback origin can send a
/// `text/plain` or form body without a preflight, but never a JSON one, so
/// mirai reads no body such a page could send blind. MCP's Streamable HTTP
/// sends `application/json` too. A file sent raw to `files.write` may have
/// its own media type, only one a page cannot send without a preflight.
pub async fn require_json(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let headers = req.headers();
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0");
    if req.method() == actix_web::http::Method::POST && has_body && !ANY_BODY.contains(&req.path())
    {
        let sent = headers
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let media = sent
            .as_deref()
            .and_then(|v| v.split(';').next())
            .map(str::trim);
        let json = media.is_some_and(|m| m.eq_ignore_ascii_case("application/json"));
        let raw_file = takes_a_file(req.path()) && media.is_some_and(needs_preflight);
        if !(json || raw_file) {
            let got = match sent {
                Some(sent) => format!("Content-Type {:?}", shorten(&sent)),
                None => "no Content-Type".to_string(),
            };
            let err = Error::new(
                ErrorCode::UnsupportedMediaType,
                format!(
                    "a POST body must be JSON sent with the header Content-Type: application/json \
                     (this one had {got}); nothing was done"
                ),
            );
            return Ok(req.into_response(error_response(&err)));
        }
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// Whether `path` is a row's that takes a file as its raw body (`files.write`).
fn takes_a_file(path: &str) -> bool {
    crate::ops::TABLE
        .iter()
        .any(|op| matches!(op.http.input, HttpInput::BodyOrFile(_)) && op.http.path == path)
}

/// Whether a browser must ask before sending a body of media type `media`
/// (a CORS preflight, which mirai never grants): anything but the three
/// types a page may send blind (text/plain and the two form encodings).
fn needs_preflight(media: &str) -> bool {
    ![
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ]
    .iter()
    .any(|blind| media.eq_ignore_ascii_case(blind))
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

#[cfg(test)]
mod tests {
    use actix_web::{test as web_test, web, App, HttpResponse};

    use super::catch_panic;

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
}
