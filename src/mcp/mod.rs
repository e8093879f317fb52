//! MCP (Model Context Protocol): the operation table served to MCP clients,
//! one more thin adapter over [`crate::ops`]. This module is the protocol
//! (JSON-RPC messages in, JSON-RPC messages out), the same for every
//! transport; `http/mcp.rs` (Streamable HTTP at `/mcp`) and `mirai mcp`
//! (stdio) only move messages.
//!
//! Served revisions: the current one, 2026-07-28, where every request carries
//! its protocol version and client capabilities in `params._meta` and
//! `server/discover` replaces the handshake; and 2025-11-25 and the ones before
//! it that negotiate in `initialize` (2025-06-18, 2025-03-26). A client asking
//! `initialize` for 2026-07-28 or newer is answered with 2025-11-25, the newest
//! revision that has a handshake, as the specification says.

mod resources;
mod rpc;
mod subscriptions;
mod tools;

use std::sync::Arc;

use serde_json::{json, Value};

use crate::callers::{Caller, Right};
use crate::ops::adapters::{Synced, Ticket};
use crate::ops::Context;
use crate::sandbox::Sandbox;
pub use rpc::{code, Era, RpcError};
pub use subscriptions::{Listen, Notifier, Subscribed, Subscriptions, PER_SESSION};

/// Revisions negotiated in `initialize`, newest first.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// Revisions that carry their version in every request's `_meta` (no handshake).
pub const STATELESS_VERSIONS: [&str; 1] = ["2026-07-28"];

/// Where a 2026-07-28 request names its revision.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// The protocol over the table, shared by both transports.
pub struct Mcp {
    ctx: Arc<Context>,
    sandbox: Arc<Sandbox>,
    /// Largest tool result text, in bytes (`MIRAI_MCP_MAX_RESULT_BYTES`).
    max_result_bytes: usize,
    /// Every session's resource subscriptions.
    subscriptions: Subscriptions,
}

impl Mcp {
    /// MCP's calls come from a model's client: the guards apply to them (`MIRAI_GUARDS`).
    /// `max_subscriptions`: `MIRAI_MCP_MAX_SUBSCRIPTIONS`, across all sessions.
    pub fn new(
        ctx: Arc<Context>,
        sandbox: Arc<Sandbox>,
        max_result_bytes: usize,
        max_subscriptions: usize,
    ) -> Mcp {
        Mcp {
            subscriptions: Subscriptions::new(ctx.events.clone(), max_subscriptions),
            ctx: Arc::new(ctx.by_model().via("mcp")),
            sandbox,
            max_result_bytes,
        }
    }

    /// A new session's subscriptions (an HTTP session, the stdio connection).
    pub fn session(&self) -> Arc<Subscribed> {
        self.subscriptions.session()
    }

    /// A 2026-07-28 `subscriptions/listen` (request `id`): its acknowledgement
    /// and its stream of notifications, or the request's JSON-RPC error.
    pub fn listen(
        &self,
        id: Value,
        params: &Value,
        caller: Option<&Arc<Caller>>,
    ) -> Result<(Value, Listen), Value> {
        let requested = requested_version(params).unwrap_or_default();
        if !STATELESS_VERSIONS.contains(&requested) {
            let error = RpcError {
                code: code::UNSUPPORTED_VERSION,
                message: format!("unsupported protocol version {requested}"),
                data: Some(json!({"supported": supported_versions(), "requested": requested})),
            };
            return Err(error_response(id, &error));
        }
        self.ctx.index.follow();
        let ctx = self.ctx.as_caller(caller.cloned());
        Listen::open(&self.subscriptions, id.clone(), params, &|path| {
            ctx.view.sees(path)
        })
        .map_err(|e| error_response(id, &e))
    }

    /// The notifications of `session`'s subscriptions, from now on.
    pub fn notifier(&self, session: Arc<Subscribed>) -> Notifier {
        self.ctx.index.follow();
        self.subscriptions.notifier(session)
    }

    /// Answers one JSON-RPC message of `session`: a response for a request,
    /// `None` for a notification or a client's response. A `repo_sync` call
    /// waits for its sync on this thread (stdio); see [`Mcp::sync_ticket`] for HTTP.
    /// `caller`: the named caller whose token opened the session (over
    /// HTTP), whose rights the calls keep; `None` on stdio (the operator).
    pub fn handle(
        &self,
        message: &Value,
        session: Option<&Subscribed>,
        caller: Option<&Arc<Caller>>,
    ) -> Option<Value> {
        self.handle_synced(message, None, session, caller)
    }

    /// The place in the next sync of a message that is a `tools/call` of
    /// `repo_sync`, so that a transport can await it holding no thread and
    /// then answer with [`Mcp::handle_synced`]; `None` for any other message.
    pub fn sync_ticket(
        &self,
        message: &Value,
        caller: Option<&Arc<Caller>>,
    ) -> Option<crate::error::Result<Ticket>> {
        if message.get("method").and_then(Value::as_str) != Some("tools/call")
            || message.get("id").is_none()
        {
            return None;
        }
        tools::sync_ticket(&self.ctx.as_caller(caller.cloned()), message.get("params")?)
    }

    /// The right whose want alone keeps `caller` from the tool a `tools/call`
    /// message names, when its access token's scopes withheld it
    /// ([`ops::missing_right`]): a transport answers the step-up challenge.
    pub fn missing_right(&self, message: &Value, caller: Option<&Arc<Caller>>) -> Option<Right> {
        if message.get("method").and_then(Value::as_str) != Some("tools/call") {
            return None;
        }
        let row = tools::row_of(message.get("params")?)?;
        crate::ops::missing_right(&self.ctx.as_caller(caller.cloned()), row)
    }

    /// [`Mcp::handle`], with the answer of the sync a transport awaited for a
    /// `repo_sync` call ([`Mcp::sync_ticket`]).
    pub fn handle_synced(
        &self,
        message: &Value,
        synced: Option<crate::error::Result<Synced>>,
        session: Option<&Subscribed>,
        caller: Option<&Arc<Caller>>,
    ) -> Option<Value> {
        let ctx = &self.ctx.as_caller(caller.cloned());
        let Some(object) = message.as_object() else {
            return Some(error_response(
                Value::Null,
                &RpcError::new(
                    code::INVALID_REQUEST,
                    "a message must be one JSON-RPC 2.0 object (batches are not served)",
                ),
            ));
        };
        let id = object.get("id").cloned();
        let Some(method) = object.get("method").and_then(Value::as_str) else {
            if id.is_some() && (object.contains_key("result") || object.contains_key("error")) {
                return None; // a response to a request mirai never sends
            }
            return Some(error_response(
                id.unwrap_or(Value::Null),
                &RpcError::new(code::INVALID_REQUEST, "the message has no method"),
            ));
        };
        let Some(id) = id else {
            return None; // notifications (initialized, cancelled) need nothing from mirai
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Some(error_response(
                id,
                &RpcError::new(code::INVALID_REQUEST, "jsonrpc must be \"2.0\""),
            ));
        }
        let params = object.get("params").cloned().unwrap_or(json!({}));
        let stateless = method != "initialize" && requested_version(&params).is_some();
        let outcome = if stateless {
            self.stateless(ctx, method, &params, synced)
        } else {
            match method {
                "resources/subscribe" | "resources/unsubscribe" => {
                    subscription(method, &params, session, ctx)
                }
                _ => self.answer(ctx, method, &params, Era::Handshake, synced),
            }
        };
        Some(match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => error_response(id, &error),
        })
    }

    fn answer(
        &self,
        ctx: &Context,
        method: &str,
        params: &Value,
        era: Era,
        synced: Option<crate::error::Result<Synced>>,
    ) -> Result<Value, RpcError> {
        match method {
            "initialize" => Ok(self.initialize(params)),
            "server/discover" if era == Era::Stateless => Ok(self.discover()),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(tools::list(self.read_only(), &self.sandbox)),
            "tools/call" => tools::call(ctx, &self.sandbox, self.max_result_bytes, params, synced),
            "resources/list" => resources::list(ctx, params),
            "resources/templates/list" => Ok(resources::templates()),
            "resources/read" => resources::read(ctx, params, era),
            other => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            )),
        }
    }

    /// A 2026-07-28 request: its revision checked, its result marked complete,
    /// cacheable results given their cache fields, and mirai's identity in `_meta`.
    fn stateless(
        &self,
        ctx: &Context,
        method: &str,
        params: &Value,
        synced: Option<crate::error::Result<Synced>>,
    ) -> Result<Value, RpcError> {
        let requested = requested_version(params).unwrap_or_default();
        if !STATELESS_VERSIONS.contains(&requested) {
            return Err(RpcError {
                code: code::UNSUPPORTED_VERSION,
                message: format!("unsupported protocol version {requested}"),
                data: Some(json!({"supported": supported_versions(), "requested": requested})),
            });
        }
        let mut result = self.answer(ctx, method, params, Era::Stateless, synced)?;
        if let Some(object) = result.as_object_mut() {
            object.insert("resultType".into(), json!("complete"));
            if method != "tools/call" {
                object.entry("ttlMs").or_insert(json!(0));
                object.entry("cacheScope").or_insert(json!("private"));
            }
            let meta = object.entry("_meta").or_insert(json!({}));
            meta["io.modelcontextprotocol/serverInfo"] = server_info();
        }
        Ok(result)
    }

    fn discover(&self) -> Value {
        json!({
            "supportedVersions": supported_versions(),
            "capabilities": capabilities(),
            "instructions": INSTRUCTIONS,
        })
    }

    /// The revision answered to a client that asked for `requested`.
    pub fn negotiate(requested: Option<&str>) -> &'static str {
        requested
            .and_then(|asked| PROTOCOL_VERSIONS.iter().find(|v| **v == asked))
            .copied()
            .unwrap_or(PROTOCOL_VERSIONS[0])
    }

    fn initialize(&self, params: &Value) -> Value {
        let version = Mcp::negotiate(params.get("protocolVersion").and_then(Value::as_str));
        json!({
            "protocolVersion": version,
            "capabilities": capabilities(),
            "serverInfo": server_info(),
            "instructions": INSTRUCTIONS,
        })
    }

    fn read_only(&self) -> bool {
        self.ctx.policy == crate::ops::PolicyMode::ReadOnly
    }
}

const INSTRUCTIONS: &str =
    "mirai keeps a git repository of markdown notes. Read and search with the read tools; \
    every successful write tool call is one git commit. agent_eval runs JavaScript that can call \
    many operations at once. Notes are also resources at mirai://notes/<path>.";

fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": false},
        "resources": {"listChanged": true, "subscribe": true},
    })
}

/// `resources/subscribe` and `resources/unsubscribe`, for a session's URIs.
fn subscription(
    method: &str,
    params: &Value,
    session: Option<&Subscribed>,
    ctx: &Context,
) -> Result<Value, RpcError> {
    let Some(session) = session else {
        return Err(RpcError::new(
            code::INVALID_REQUEST,
            "subscriptions need a session: initialize over HTTP (then GET /mcp for the notifications) or use stdio",
        ));
    };
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            "params.uri is required: mirai://notes/<path>",
        ));
    };
    match method {
        "resources/subscribe" => session.subscribe(uri, &|path| ctx.view.sees(path)),
        _ => session.unsubscribe(uri),
    }
}

fn server_info() -> Value {
    json!({"name": "mirai", "title": "mirai notes", "version": env!("CARGO_PKG_VERSION")})
}

/// Every revision served, newest first.
pub fn supported_versions() -> Vec<&'static str> {
    STATELESS_VERSIONS
        .iter()
        .chain(PROTOCOL_VERSIONS.iter())
        .copied()
        .collect()
}

/// The revision a 2026-07-28-style request names in `params._meta`.
pub fn requested_version(params: &Value) -> Option<&str> {
    params.get("_meta")?.get(META_VERSION)?.as_str()
}

fn error_response(id: Value, error: &RpcError) -> Value {
    let mut body = json!({"code": error.code, "message": error.message});
    if let Some(data) = &error.data {
        body["data"] = data.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "error": body})
}
