//! The route table: every endpoint with its method, path and handler. The
//! server is built from it, and the OpenAPI test checks the spec against it.

use actix_web::http::Method;
use actix_web::{web, HttpRequest, HttpResponse, Route};
use serde_json::{json, Map, Value};

use super::respond::{error_response, method_not_allowed, read_body, run_operation, OwnedInput};
use super::AppState;
use super::{agent, mcp};
use crate::error::{Error, ErrorCode};

/// One served route.
pub struct Endpoint {
    pub method: Verb,
    pub path: &'static str,
    route: fn() -> Route,
}

/// The HTTP methods mirai serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
        }
    }

    fn method(self) -> Method {
        match self {
            Verb::Get => Method::GET,
            Verb::Post => Method::POST,
            Verb::Delete => Method::DELETE,
        }
    }
}

const fn get(path: &'static str, route: fn() -> Route) -> Endpoint {
    Endpoint {
        method: Verb::Get,
        path,
        route,
    }
}

const fn delete(path: &'static str, route: fn() -> Route) -> Endpoint {
    Endpoint {
        method: Verb::Delete,
        path,
        route,
    }
}

const fn post(path: &'static str, route: fn() -> Route) -> Endpoint {
    Endpoint {
        method: Verb::Post,
        path,
        route,
    }
}

/// Every route the server answers.
#[rustfmt::skip]
pub static ENDPOINTS: &[Endpoint] = &[
    get("/health", || web::route().to(health)),
    get("/config", || web::route().to(config)),
    get("/mcp/notes", || web::route().to(notes_list)),
    get("/mcp/notes/read", || web::route().to(notes_read)),
    post("/mcp/notes/read_batch", || web::route().to(notes_read_batch)),
    post("/mcp/patch/propose", || web::route().to(patch_propose)),
    post("/mcp/patch/apply", || web::route().to(patch_apply)),
    post("/mcp/patch/make", || web::route().to(patch_make)),
    post("/mcp/notes/write", || web::route().to(notes_write)),
    post("/mcp/notes/edit", || web::route().to(notes_edit)),
    post("/mcp/index/rebuild", || web::route().to(index_rebuild)),
    get("/mcp/index/status", || web::route().to(index_status)),
    get("/mcp/index/query", || web::route().to(index_query)),
    post("/mcp/index/invalidate", || web::route().to(index_invalidate)),
    post("/agent/eval", || web::route().to(agent::eval)),
    post("/agent/run", || web::route().to(agent::run)),
    get("/agent/runs", || web::route().to(agent::runs)),
    get("/agent/runs/{run_id}", || web::route().to(agent::transcript)),
    post("/mcp", || web::route().to(mcp::post)),
    get("/mcp", || web::route().to(mcp::get)),
    delete("/mcp", || web::route().to(mcp::delete)),
];

pub fn configure(cfg: &mut web::ServiceConfig) {
    // One resource per path, holding every method served there; paths are exact, so order is free.
    let mut paths: Vec<&str> = ENDPOINTS.iter().map(|e| e.path).collect();
    paths.sort_unstable();
    paths.dedup();
    for path in paths {
        let mut resource = web::resource(path).default_service(web::to(method_not_allowed));
        for endpoint in ENDPOINTS.iter().filter(|e| e.path == path) {
            resource = resource.route((endpoint.route)().method(endpoint.method.method()));
        }
        cfg.service(resource);
    }
}

async fn health() -> HttpResponse {
    HttpResponse::Ok().json(json!({"ok": true}))
}

async fn config(state: web::Data<AppState>) -> HttpResponse {
    let config = &state.config;
    HttpResponse::Ok().json(json!({
        "notes_root": config.notes_root.display().to_string(),
        "policy_mode": config.policy.as_str(),
        "auth_required": config.api_token.is_some(),
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
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

async fn notes_list(state: web::Data<AppState>) -> HttpResponse {
    run_operation(&state, "notes.list", OwnedInput::Json(json!({}))).await
}

async fn notes_read(state: web::Data<AppState>, req: HttpRequest) -> HttpResponse {
    match query_object(&req, &["path"]) {
        Ok(request) => run_operation(&state, "notes.read", OwnedInput::Json(request)).await,
        Err(err) => error_response(&Error::invalid_path(err)),
    }
}

async fn notes_read_batch(state: web::Data<AppState>, payload: web::Payload) -> HttpResponse {
    body_operation(&state, "notes.read_batch", payload).await
}

async fn patch_propose(state: web::Data<AppState>, payload: web::Payload) -> HttpResponse {
    body_operation(&state, "patch.propose", payload).await
}

async fn patch_apply(state: web::Data<AppState>, payload: web::Payload) -> HttpResponse {
    body_operation(&state, "patch.apply", payload).await
}

async fn patch_make(state: web::Data<AppState>, payload: web::Payload) -> HttpResponse {
    body_operation(&state, "patch.make", payload).await
}

async fn notes_write(state: web::Data<AppState>, payload: web::Payload) -> HttpResponse {
    body_operation(&state, "notes.write", payload).await
}

async fn notes_edit(state: web::Data<AppState>, payload: web::Payload) -> HttpResponse {
    body_operation(&state, "notes.edit", payload).await
}

async fn index_rebuild(state: web::Data<AppState>) -> HttpResponse {
    run_operation(&state, "index.rebuild", OwnedInput::Json(json!({}))).await
}

async fn index_status(state: web::Data<AppState>) -> HttpResponse {
    run_operation(&state, "index.status", OwnedInput::Json(json!({}))).await
}

async fn index_query(state: web::Data<AppState>, req: HttpRequest) -> HttpResponse {
    match query_object(&req, &["q", "limit", "path_prefix"]) {
        Ok(request) => run_operation(&state, "index.query", OwnedInput::Json(request)).await,
        Err(err) => error_response(&Error::new(ErrorCode::InvalidQuery, err)),
    }
}

async fn index_invalidate(state: web::Data<AppState>) -> HttpResponse {
    run_operation(&state, "index.invalidate", OwnedInput::Json(json!({}))).await
}

/// An operation whose request is the JSON body. Policy is checked before the body is parsed.
async fn body_operation(
    state: &web::Data<AppState>,
    name: &'static str,
    payload: web::Payload,
) -> HttpResponse {
    match read_body(state, payload).await {
        Ok(body) => run_operation(state, name, OwnedInput::Body(body)).await,
        Err(err) => error_response(&err),
    }
}

/// Builds a JSON object from the named query parameters (first value wins;
/// absent ones are left out, so the operation reports them as missing).
fn query_object(req: &HttpRequest, names: &[&str]) -> Result<Value, String> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map_err(|e| format!("the query string could not be decoded: {e}"))?;
    let mut object = Map::new();
    for (key, value) in pairs.into_inner() {
        if names.contains(&key.as_str()) && !object.contains_key(&key) {
            object.insert(key, Value::String(value));
        }
    }
    Ok(Value::Object(object))
}
