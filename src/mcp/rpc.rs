//! The JSON-RPC vocabulary the MCP protocol and its tools and resources share:
//! error codes, the protocol fault, and which lifecycle a request belongs to.

use serde_json::Value;

/// JSON-RPC error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// 2026-07-28: an HTTP header does not match the body, or is missing.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: the requested revision is not served.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}

/// A protocol fault, answered as a JSON-RPC error (operation failures are
/// tool results with `isError`, not these).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// Which lifecycle a request belongs to: a session opened by `initialize`
/// (2025-11-25 and before) or a self-describing request (2026-07-28).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Handshake,
    Stateless,
}
