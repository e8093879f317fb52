//! The web page: its static files (`ui/` at the crate's root: HTML, CSS, a
//! little plain JavaScript), embedded in the binary, served at `GET /` and
//! under `/ui/` without a token, since they hold no notes: every note, run
//! and proposal reaches the page through the HTTP API with the token the
//! person types, sent in the `Authorization` header (never a cookie).
//!
//! Every answer here carries a strict `Content-Security-Policy` (scripts and
//! styles from this server only, nothing inline, no eval, `connect-src
//! 'self'`, no framing), `X-Content-Type-Options: nosniff` and no referrer.
//! With the page's sign-in (`MIRAI_OAUTH_PAGE_CLIENT_ID`), `connect-src` adds
//! one origin, the provider's token endpoint's, where the page trades its
//! authorization code for an access token; nothing else is loosened.
//! Each file is gzipped once, the first time a client that accepts gzip asks.

use std::sync::OnceLock;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{web, HttpRequest, HttpResponse};

use super::respond::error_response;
use crate::app::App;
use crate::error::Error;

/// The page's Content-Security-Policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// [`CSP`] with `origin` (the sign-in's token endpoint's) added to `connect-src`.
fn csp_with(origin: Option<&str>) -> String {
    match origin {
        Some(origin) => CSP.replace(
            "connect-src 'self'",
            &format!("connect-src 'self' {origin}"),
        ),
        None => CSP.to_string(),
    }
}

/// One embedded file.
struct Asset {
    /// Its name under `/ui/assets/` (the page's HTML has none: it answers every view).
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    gzipped: OnceLock<Vec<u8>>,
}

const fn asset(name: &'static str, content_type: &'static str, bytes: &'static [u8]) -> Asset {
    Asset {
        name,
        content_type,
        bytes,
        gzipped: OnceLock::new(),
    }
}

/// The page's HTML: the same for `/` and every view under `/ui/`.
static PAGE: Asset = asset(
    "",
    "text/html; charset=utf-8",
    include_bytes!("../../ui/index.html"),
);

static ASSETS: [Asset; 5] = [
    // The sign-in through the identity provider (authorization code with PKCE).
    asset(
        "signin.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/signin.js"),
    ),
    asset(
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/app.js"),
    ),
    // The SharedWorker every tab of one browser shares: the one change stream.
    asset(
        "worker.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../ui/worker.js"),
    ),
    asset(
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../../ui/style.css"),
    ),
    asset(
        "icon.svg",
        "image/svg+xml",
        include_bytes!("../../ui/icon.svg"),
    ),
];

/// Whether `path` is one of the page's (served without a token).
pub fn is_page_path(path: &str) -> bool {
    path == "/" || path == "/ui" || path.starts_with("/ui/")
}

/// `GET /` and `GET /ui/...`: the page for a view, or one of its files.
pub async fn serve(req: HttpRequest) -> HttpResponse {
    // The sign-in's token endpoint, found once (off the async threads: the
    // first look may fetch the provider's metadata, within its timeout).
    let resource = req
        .app_data::<web::Data<App>>()
        .and_then(|app| app.oauth.clone());
    let origin = match resource {
        Some(resource) => web::block(move || resource.page_connect_origin())
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let csp = HeaderValue::from_str(&csp_with(origin.as_deref()))
        .unwrap_or_else(|_| HeaderValue::from_static(CSP));
    let path = req.path();
    let found = match path.strip_prefix("/ui/assets/") {
        Some(name) => ASSETS.iter().find(|asset| asset.name == name),
        None => Some(&PAGE),
    };
    let Some(asset) = found else {
        let mut response = error_response(&Error::not_found(format!(
            "no file {path}: the page's files are {}",
            ASSETS
                .iter()
                .map(|a| format!("/ui/assets/{}", a.name))
                .collect::<Vec<_>>()
                .join(", ")
        )));
        guard(&mut response, csp);
        return response;
    };
    let mut response = HttpResponse::Ok();
    response
        .content_type(asset.content_type)
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::VARY, "Accept-Encoding"));
    let mut response = if accepts_gzip(&req) {
        response
            .insert_header((header::CONTENT_ENCODING, "gzip"))
            .body(gzipped(asset))
    } else {
        response.body(asset.bytes)
    };
    guard(&mut response, csp);
    response
}

/// The headers every answer of the page carries.
fn guard(response: &mut HttpResponse, csp: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// Whether the client lists gzip (without `q=0`) in `Accept-Encoding`.
fn accepts_gzip(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(header::ACCEPT_ENCODING)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let refused = parts.any(|p| p.replace(' ', "") == "q=0");
            name.eq_ignore_ascii_case("gzip") && !refused
        })
}

/// The asset gzipped (best compression), made once.
fn gzipped(asset: &'static Asset) -> &'static [u8] {
    asset.gzipped.get_or_init(|| {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        // Writing to a Vec cannot fail.
        let _ = encoder.write_all(asset.bytes);
        encoder.finish().unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_small_once_gzipped() {
        let total: usize = std::iter::once(&PAGE)
            .chain(ASSETS.iter())
            .map(|asset| gzipped(asset).len())
            .sum();
        assert!(total < 150 * 1024, "{total} bytes gzipped");
    }

    #[test]
    fn the_sign_in_adds_one_origin_to_connect_src_only() {
        assert_eq!(csp_with(None), CSP);
        let csp = csp_with(Some("https://id.example"));
        assert!(
            csp.contains("connect-src 'self' https://id.example;"),
            "{csp}"
        );
        assert_eq!(csp.matches("https://id.example").count(), 1, "{csp}");
    }

    #[test]
    fn page_paths_are_the_root_and_ui_only() {
        assert!(is_page_path("/"));
        assert!(is_page_path("/ui/notes/a.md"));
        assert!(!is_page_path("/uix"));
        assert!(!is_page_path("/mcp/notes"));
    }
}
