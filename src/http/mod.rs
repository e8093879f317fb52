//! The HTTP adapter: actix-web routes that parse a request, call an operation
//! through [`crate::ops::dispatch`] and render its answer as JSON.
//!
//! Cross-cutting edges live here and nowhere else: the browser check
//! (`Origin` and `Host`: ARCHITECTURE.md, "Browsers are not callers") and then
//! the bearer token (ARCHITECTURE.md, "The token guards the network"), both
//! before routing; POST bodies declared JSON; one log line per request; body limits and the time a body
//! may take to arrive; and turning a panic into a plain 500.
//!
//! Inside, dependencies point one way: `routes` -> `row` (-> `file`, `upload`), `agent`, `mcp`, `events`, `ui` ->
//! `respond`; `row`, `agent`, `mcp` -> `middleware` (the request's caller) -> `respond`, `ui`; `row`, `hooks`, `events`, `mcp` -> `peer`; this file ->
//! `routes`, `middleware`, `mcp`, `peer`; `stop` and `hangup` (signals, for `mirai serve`:
//! stop, reload the callers) import none of them. `openapi` (the generated document)
//! stands apart: it reads the operation table and its own base file.

mod agent;
mod events;
mod file;
pub mod hangup;
mod hooks;
mod mcp;
mod middleware;
pub mod openapi;
mod peer;
mod respond;
mod routes;
mod row;
pub mod stop;
mod ui;
mod upload;

pub use crate::ops::Verb;
pub use routes::{endpoints, Endpoint};

use std::net::TcpListener;

use actix_web::dev::Server;
use actix_web::{web, HttpServer};

use crate::app::App;

/// Builds the server for `app` on an already-bound listener (port 0 in tests).
/// It does not listen for signals itself: `mirai serve` stops it through
/// [`stop::serve_until_signal`], promptly; a caller that drives it alone
/// stops it by its handle (requests in flight get a second).
pub fn serve(app: App, listener: TcpListener) -> std::io::Result<Server> {
    let browsers = web::Data::new(middleware::Browsers::new(&app.config));
    let sessions = web::Data::new(mcp::Sessions::default());
    let app = web::Data::new(app);
    // The last `wrap` runs first: log, then the browser check, then the token,
    // then a POST body's Content-Type.
    let server = HttpServer::new(move || {
        actix_web::App::new()
            .app_data(app.clone())
            .app_data(browsers.clone())
            .app_data(sessions.clone())
            .configure(routes::configure)
            .default_service(web::to(routes::unknown_route))
            .wrap(actix_web::middleware::from_fn(middleware::catch_panic))
            .wrap(actix_web::middleware::from_fn(middleware::require_json))
            .wrap(actix_web::middleware::from_fn(middleware::require_token))
            .wrap(actix_web::middleware::from_fn(middleware::refuse_browsers))
            .wrap(actix_web::middleware::from_fn(middleware::log_request))
    })
    .on_connect(peer::remember)
    .disable_signals()
    .shutdown_timeout(1)
    .listen(listener)?
    .run();
    Ok(server)
}
