//! An MCP round trip over Streamable HTTP against the release server: a
//! `tools/call` of `notes_read`, in a 2025-11-25 session and as a 2026-07-28
//! request, against `GET /health` and the same read over mirai's own route,
//! all measured in the same run.
//!
//! cargo bench --bench mcp_roundtrip

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use serde_json::{json, Value};
use support::{report, time_ms, Server};

const SAMPLES: usize = 1000;

fn main() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    let cache = work.path().join("cache");
    let server = Server::start_with_env(&root, &[("MIRAI_CACHE_DIR", cache.to_str().unwrap())]);
    let mcp = format!("{}/mcp", server.url);
    let post = |headers: &[(&str, &str)], body: &Value| {
        let mut request = server
            .client
            .post(&mcp)
            .header("accept", "application/json, text/event-stream")
            .json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().unwrap();
        assert!(response.status().is_success());
        response
    };

    let init = post(
        &[],
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}),
    );
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let legacy = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "notes_read", "arguments": {"path": "welcome.md"}}});
    let mut modern_call = call.clone();
    modern_call["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let modern = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "notes_read"),
    ];
    let answer: Value = post(&legacy, &call).json().unwrap();
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    let (mut health, mut route, mut session_calls, mut stateless_calls) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        health.push(server.health_ms());
        route.push(time_ms(|| {
            server
                .client
                .get(format!("{}/mcp/notes/read?path=welcome.md", server.url))
                .send()
                .unwrap();
        }));
        session_calls.push(time_ms(|| {
            post(&legacy, &call).bytes().unwrap();
        }));
        stateless_calls.push(time_ms(|| {
            post(&modern, &modern_call).bytes().unwrap();
        }));
    }
    let base = report("baseline: GET /health", &mut health);
    let read = report("GET /mcp/notes/read (mirai's route)", &mut route);
    let legacy_ms = report("MCP tools/call notes_read, 2025-11-25", &mut session_calls);
    let modern_ms = report(
        "MCP tools/call notes_read, 2026-07-28",
        &mut stateless_calls,
    );
    println!(
        "ratios: route {:.1}x /health; MCP {:.1}x and {:.1}x /health, {:.2}x and {:.2}x the route",
        read / base,
        legacy_ms / base,
        modern_ms / base,
        legacy_ms / read,
        modern_ms / read
    );
}
