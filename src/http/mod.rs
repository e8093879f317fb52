//! The HTTP adapter: actix-web routes that parse a request, call an operation
//! through [`crate::ops::dispatch`] and render its answer as JSON.
//!
//! Cross-cutting edges live here and nowhere else: the browser check
//! (`Origin` and `Host`, DESIGN 8.3) and then the bearer token (DESIGN 7.4),
//! both before routing; one log line per request; body limits and the time a
//! body may take to arrive; and turning a panic into a plain 500.

mod agent;
mod mcp;
mod middleware;
mod respond;
mod routes;

pub use routes::{Endpoint, Verb, ENDPOINTS};

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{web, App, HttpServer};

use crate::agent::Agent;
use crate::config::Config;
use crate::mcp::Mcp;
use crate::ops::Context;
use crate::sandbox::Sandbox;

/// Shared by every worker.
pub struct AppState {
    pub ctx: Arc<Context>,
    pub sandbox: Arc<Sandbox>,
    pub agent: Arc<Agent>,
    pub mcp: Arc<Mcp>,
    pub mcp_sessions: mcp::Sessions,
    pub config: Config,
}

/// Builds the server on an already-bound listener (port 0 in tests).
pub fn serve(state: AppState, listener: TcpListener) -> std::io::Result<Server> {
    let browsers = web::Data::new(middleware::Browsers::new(&state.config));
    let state = web::Data::new(state);
    // The last `wrap` runs first: log, then the browser check, then the token.
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(browsers.clone())
            .configure(routes::configure)
            .default_service(web::to(respond::unknown_route))
            .wrap(actix_web::middleware::from_fn(middleware::catch_panic))
            .wrap(actix_web::middleware::from_fn(middleware::require_token))
            .wrap(actix_web::middleware::from_fn(middleware::refuse_browsers))
            .wrap(actix_web::middleware::from_fn(middleware::log_request))
    })
    .listen(listener)?
    .run();
    Ok(server)
}
