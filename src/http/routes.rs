//! The route table: every row of the operation table at the route it declares
//! (served by the one handler in `row.rs`), and the routes of mirai's own
//! (`/health`, `/config`, `/agent/*`, `/mcp`, `/events`, the OAuth protected
//! resource metadata under `/.well-known/`). The server is built from
//! [`endpoints`], and the OpenAPI spec is checked against it. Paths no route
//! matches, and methods a path does not serve, are answered here too. The web
//! page (`/`, `/ui/...`, served by `ui.rs`) is routed here beside the API.

use actix_web::http::Method;
use actix_web::{web, HttpRequest, HttpResponse, Route};
use serde_json::json;

use super::respond::error_response;
use super::{agent, events, hooks, mcp, row, ui};
use crate::app::App;
use crate::error::{Error, ErrorCode};
use crate::oauth;
use crate::ops::{OpEntry, Verb, TABLE};

/// One served route.
#[derive(Clone, Copy)]
pub struct Endpoint {
    pub method: Verb,
    pub path: &'static str,
    handler: Handler,
}

#[derive(Clone, Copy)]
enum Handler {
    /// A row of the operation table, served by `row::serve`.
    Row(&'static OpEntry),
    /// A route of its own.
    Own(fn() -> Route),
}

impl Endpoint {
    /// The row this route serves; `None` for the routes of mirai's own.
    pub fn row(&self) -> Option<&'static OpEntry> {
        match self.handler {
            Handler::Row(op) => Some(op),
            Handler::Own(_) => None,
        }
    }

    fn route(&self) -> Route {
        let route = match self.handler {
            Handler::Row(op) => web::route().to(
                move |app: web::Data<App>, req: HttpRequest, payload: web::Payload| {
                    row::serve(app, op, req, payload)
                },
            ),
            Handler::Own(route) => route(),
        };
        route.method(method(self.method))
    }
}

fn method(verb: Verb) -> Method {
    match verb {
        Verb::Get => Method::GET,
        Verb::Post => Method::POST,
        Verb::Delete => Method::DELETE,
    }
}

const fn own(method: Verb, path: &'static str, route: fn() -> Route) -> Endpoint {
    Endpoint {
        method,
        path,
        handler: Handler::Own(route),
    }
}

/// The routes that are not rows.
#[rustfmt::skip]
static OWN: &[Endpoint] = &[
    own(Verb::Get, "/health", || web::route().to(health)),
    own(Verb::Get, "/config", || web::route().to(config)),
    own(Verb::Post, "/agent/eval", || web::route().to(agent::eval)),
    own(Verb::Post, "/agent/run", || web::route().to(agent::run)),
    own(Verb::Get, "/agent/runs", || web::route().to(agent::runs)),
    own(Verb::Get, "/agent/runs/{run_id}", || web::route().to(agent::transcript)),
    own(Verb::Post, "/mcp", || web::route().to(mcp::post)),
    own(Verb::Get, "/mcp", || web::route().to(mcp::get)),
    own(Verb::Delete, "/mcp", || web::route().to(mcp::delete)),
    own(Verb::Post, "/hooks/push", || web::route().to(hooks::push)),
    own(Verb::Get, "/events", || web::route().to(events::stream)),
    own(Verb::Get, "/.well-known/oauth-protected-resource", || web::route().to(resource_metadata)),
    own(Verb::Get, "/.well-known/oauth-protected-resource/mcp", || web::route().to(resource_metadata)),
    own(Verb::Get, "/oauth/page-client", || web::route().to(page_client)),
];

/// Every route the server answers: each row at its declared route, then mirai's own.
pub fn endpoints() -> Vec<Endpoint> {
    TABLE
        .iter()
        .map(|op| Endpoint {
            method: op.http.verb,
            path: op.http.path,
            handler: Handler::Row(op),
        })
        .chain(OWN.iter().copied())
        .collect()
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    // One resource per path, holding every method served there; paths are exact, so order is free.
    let endpoints = endpoints();
    let mut paths: Vec<&str> = endpoints.iter().map(|e| e.path).collect();
    paths.sort_unstable();
    paths.dedup();
    for path in paths {
        let mut resource = web::resource(path).default_service(web::to(method_not_allowed));
        for endpoint in endpoints.iter().filter(|e| e.path == path) {
            resource = resource.route(endpoint.route());
        }
        cfg.service(resource);
    }
    // The web page: not rows and not part of the API (no token, no OpenAPI entry).
    for path in ["/", "/ui", "/ui/{view:.*}"] {
        cfg.service(
            web::resource(path)
                .route(web::get().to(ui::serve))
                .default_service(web::to(method_not_allowed_page)),
        );
    }
}

/// The page's paths serve GET only.
async fn method_not_allowed_page(req: HttpRequest) -> HttpResponse {
    let mut response = error_response(&Error::new(
        ErrorCode::MethodNotAllowed,
        format!("{} is not allowed on {}; use GET", req.method(), req.path()),
    ));
    response.headers_mut().insert(
        actix_web::http::header::ALLOW,
        actix_web::http::header::HeaderValue::from_static("GET"),
    );
    response
}

/// RFC 9728's protected resource metadata (the server's, or `/mcp`'s at the
/// path-suffixed address); 404 when mirai takes no access tokens.
async fn resource_metadata(app: web::Data<App>, req: HttpRequest) -> HttpResponse {
    let suffix = if req.path().ends_with(oauth::MCP_PATH) {
        oauth::MCP_PATH
    } else {
        ""
    };
    match &app.oauth {
        Some(resource) => HttpResponse::Ok().json(resource.metadata(suffix)),
        None => error_response(&Error::new(
            ErrorCode::NotFound,
            "mirai takes no OAuth access tokens here: MIRAI_OAUTH_ISSUER is not set, so use a \
             bearer token (MIRAI_API_TOKEN or a caller's token)",
        )),
    }
}

/// What the page signs in with (authorization code with PKCE as the public
/// client `MIRAI_OAUTH_PAGE_CLIENT_ID`): the provider's endpoints from its
/// metadata, the client id, the scopes, the redirect URI. 404 when the page
/// has no sign-in; 503 while the provider's metadata cannot be read.
async fn page_client(app: web::Data<App>) -> HttpResponse {
    let off = |why: &str| {
        error_response(&Error::new(
            ErrorCode::NotFound,
            format!("the page has no sign-in here: {why}; it takes a bearer token instead"),
        ))
    };
    let Some(resource) = app.oauth.clone() else {
        return off("MIRAI_OAUTH_ISSUER is not set");
    };
    match web::block(move || resource.page_client()).await {
        Ok(None) => off("MIRAI_OAUTH_PAGE_CLIENT_ID is not set"),
        Ok(Some(Ok(document))) => HttpResponse::Ok()
            .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
            .json(document),
        Ok(Some(Err(why))) => error_response(&Error::new(
            ErrorCode::RemoteUnavailable,
            format!(
                "the identity provider's sign-in endpoints could not be found ({}); try again \
                 later, or sign in with a bearer token",
                crate::redact::urls(&why)
            ),
        )),
        Err(_) => error_response(&super::respond::internal_error()),
    }
}

async fn health() -> HttpResponse {
    HttpResponse::Ok().json(json!({"ok": true}))
}

async fn config(app: web::Data<App>) -> HttpResponse {
    let config = &app.config;
    HttpResponse::Ok().json(json!({
        "notes_root": config.notes_root.display().to_string(),
        "policy_mode": config.policy.as_str(),
        "auth_required": app.callers.current().guards_network(),
        "max_body_bytes": config.max_body_bytes,
        "mcp": {
            "protocol_versions": crate::mcp::PROTOCOL_VERSIONS,
            "max_result_bytes": config.mcp_max_result_bytes,
        },
        "sandbox": {
            "memory_mb": config.sandbox.memory_bytes / (1024 * 1024),
            "timeout_ms": config.sandbox.timeout_ms,
            "fuel": config.sandbox.fuel,
            "max_calls": config.sandbox.max_calls,
            "max_output_bytes": config.sandbox.max_output_bytes,
        },
        "llm_configured": config.llm.is_configured(),
        "llm_model": config.llm.model,
        "agent": {
            "max_steps": config.agent.default_steps,
            "deadline_ms": config.agent.deadline_ms,
        },
        "sync": config.sync.as_ref().map(|sync| json!({
            "remote": sync.shown_remote(),
            "branch": sync.branch,
            "interval_seconds": sync.interval_secs,
            "pushes": config.policy != crate::ops::PolicyMode::ReadOnly,
            "webhook": config.webhook_secret.is_some(),
        })),
        "version": env!("CARGO_PKG_VERSION"),
    }))
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
async fn method_not_allowed(req: HttpRequest) -> HttpResponse {
    let pattern = req
        .match_pattern()
        .unwrap_or_else(|| req.path().to_string());
    let allowed: Vec<&str> = endpoints()
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_row_has_its_route_and_every_route_a_row_or_a_handler_of_its_own() {
        let endpoints = endpoints();
        for op in TABLE {
            let serving: Vec<&Endpoint> = endpoints
                .iter()
                .filter(|e| e.row().is_some_and(|row| std::ptr::eq(row, op)))
                .collect();
            assert_eq!(serving.len(), 1, "{} must have exactly one route", op.name);
            assert_eq!(
                (serving[0].method, serving[0].path),
                (op.http.verb, op.http.path),
                "{}",
                op.name
            );
        }
        for endpoint in &endpoints {
            match endpoint.row() {
                Some(row) => assert!(
                    TABLE.iter().any(|op| std::ptr::eq(op, row)),
                    "{} {} names a row that is not in the table",
                    endpoint.method.as_str(),
                    endpoint.path
                ),
                // /mcp/... belongs to the rows; mirai's own routes live elsewhere.
                None => assert!(
                    !endpoint.path.starts_with("/mcp/"),
                    "{} {} is under /mcp/ but serves no row",
                    endpoint.method.as_str(),
                    endpoint.path
                ),
            }
        }
        let distinct: BTreeSet<(&str, &str)> = endpoints
            .iter()
            .map(|e| (e.method.as_str(), e.path))
            .collect();
        assert_eq!(
            distinct.len(),
            endpoints.len(),
            "two routes share a method and path"
        );
    }
}
