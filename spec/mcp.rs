//! MCP through a real client, the official Rust SDK (rmcp), over Streamable
//! HTTP and over `mirai mcp`'s stdio; plus the transport's rules checked by
//! hand (sessions, Origin, GET, DELETE, notifications, result caps).

use crate::common;

use std::collections::BTreeSet;

use common::{guest_cache, mirai_cli, serve_child, TestServer};
use mirai::config::PolicyMode;
use mirai::ops::TABLE;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{json, Value};

type Client = RunningService<RoleClient, ClientConfig>;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("mirai-spec", "0.1.0"),
    )
}

async fn connect(server: &TestServer, token: Option<&str>) -> Result<Client, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.url));
    if let Some(token) = token {
        config = config.auth_header(token.to_string());
    }
    client_config()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|e| e.to_string())
}

/// `mirai mcp` over `root`, for rmcp's child-process transport.
fn mirai_mcp(root: &std::path::Path) -> tokio::process::Command {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_mirai")).configure(|cmd| {
        cmd.arg("mcp")
            .arg("--notes-root")
            .arg(root)
            .env("MIRAI_CACHE_DIR", guest_cache())
            .env("MIRAI_ALLOW_ROOT", "1")
            .env("RUST_LOG", "warn");
    })
}

fn arguments(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().unwrap()
}

async fn call(client: &Client, tool: &str, args: Value) -> rmcp::model::CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments(args)))
        .await
        .unwrap()
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_client_over_http_lists_calls_writes_fails_and_reads() {
    let server = TestServer::with_note("projects/my plan.md", "# Plan\n\nship it\n");
    // The harness's blocking HTTP client cannot run inside the async client's runtime.
    let over_http = server.read("projects/my plan.md").body;
    runtime().block_on(async {
        let client = connect(&server, None).await.unwrap();
        let info = client.peer_info().unwrap();
        assert_eq!(info.protocol_version.as_str(), "2025-11-25");
        assert_eq!(info.server_info.as_ref().unwrap().name, "mirai");

        // Every row is a tool and every tool a row; agent_eval is the one exception.
        let tools = client.list_all_tools().await.unwrap();
        let names: BTreeSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
        let mut expected: BTreeSet<String> =
            TABLE.iter().map(|op| op.name.replace('.', "_")).collect();
        expected.insert("agent_eval".into());
        assert_eq!(names, expected);
        let read = tools.iter().find(|t| t.name == "notes_read").unwrap();
        let annotations = read.annotations.as_ref().unwrap();
        assert_eq!(annotations.read_only_hint, Some(true));
        assert!(read.output_schema.is_some());
        let write = tools.iter().find(|t| t.name == "notes_write").unwrap();
        assert_eq!(
            write.annotations.as_ref().unwrap().destructive_hint,
            Some(true)
        );
        // A sync changes the notes (others' commits come in) but never loses
        // any, and talks to the remote.
        let sync = tools.iter().find(|t| t.name == "repo_sync").unwrap();
        let annotations = sync.annotations.as_ref().unwrap();
        assert_eq!(annotations.read_only_hint, Some(false));
        assert_eq!(annotations.destructive_hint, Some(false));
        assert_eq!(annotations.open_world_hint, Some(true));
        let eval_tool = tools.iter().find(|t| t.name == "agent_eval").unwrap();
        assert!(eval_tool
            .description
            .as_deref()
            .unwrap()
            .contains("mirai.notes.edit({"));

        // A read answers what HTTP answers.
        let result = call(
            &client,
            "notes_read",
            json!({"path": "projects/my plan.md"}),
        )
        .await;
        assert_eq!(result.is_error, Some(false));
        assert_eq!(result.structured_content, Some(over_http));

        // A write commits.
        let before = server.commit_count();
        let result = call(
            &client,
            "notes_write",
            json!({"path": "new.md", "content": "fresh\n"}),
        )
        .await;
        assert_eq!(result.is_error, Some(false), "{result:?}");
        assert_eq!(server.commit_count(), before + 1);
        assert_eq!(
            result.structured_content.unwrap()["commit"],
            json!(server.head())
        );

        // A failing write is a tool error with mirai's code and words; nothing changes.
        let head = server.head();
        let result = call(
            &client,
            "notes_edit",
            json!({"path": "new.md", "edits": [{"old": "stale", "new": "x"}]}),
        )
        .await;
        assert_eq!(result.is_error, Some(true));
        assert!(
            text_of(&result).starts_with("conflict: edit 1 of 1"),
            "{result:?}"
        );
        assert_eq!(server.head(), head);
        assert_eq!(
            std::fs::read_to_string(server.root.join("new.md")).unwrap(),
            "fresh\n"
        );

        // Code mode.
        let result = call(
            &client,
            "agent_eval",
            json!({"code": "return (await mirai.notes.list()).notes.length"}),
        )
        .await;
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let evaluation: Value = serde_json::from_str(&text_of(&result)).unwrap();
        assert_eq!(evaluation["result"], 3);
        let result = call(
            &client,
            "agent_eval",
            json!({"code": "throw new Error('no')"}),
        )
        .await;
        assert_eq!(result.is_error, Some(true));

        // Unknown tools are protocol errors.
        assert!(client
            .call_tool(CallToolRequestParams::new("nope"))
            .await
            .is_err());

        // Notes as resources, each segment percent-encoded.
        let resources = client.list_all_resources().await.unwrap();
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "mirai://notes/new.md",
                "mirai://notes/projects/my%20plan.md",
                "mirai://notes/welcome.md"
            ]
        );
        let read = client
            .read_resource(ReadResourceRequestParams::new(
                "mirai://notes/projects/my%20plan.md",
            ))
            .await
            .unwrap();
        match &read.contents[0] {
            ResourceContents::TextResourceContents { text, .. } => {
                assert_eq!(text, "# Plan\n\nship it\n")
            }
            other => panic!("{other:?}"),
        }
        assert!(client
            .read_resource(ReadResourceRequestParams::new(
                "mirai://notes/..%2F..%2Fetc%2Fpasswd"
            ))
            .await
            .is_err());
        let templates = client.list_all_resource_templates().await.unwrap();
        assert_eq!(templates[0].uri_template, "mirai://notes/{path}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_tool_call_with_an_unknown_argument_is_refused_naming_the_right_one() {
    let server = TestServer::with_note("a.md", "alpha\n");
    let before = server.commit_count();
    runtime().block_on(async {
        let client = connect(&server, None).await.unwrap();
        let result = call(
            &client,
            "notes_write",
            json!({"path": "a.md", "content": "x\n", "base_comit": "HEAD"}),
        )
        .await;
        assert_eq!(result.is_error, Some(true), "{result:?}");
        assert_eq!(
            text_of(&result),
            "invalid_request: malformed request for notes.write: unknown field `base_comit`; did \
             you mean `base_commit`?"
        );
        client.cancel().await.unwrap();
    });
    assert_eq!(server.commit_count(), before);
}

#[test]
fn read_only_mode_lists_no_write_tools_and_refuses_them() {
    let server = TestServer::start_with(|config| config.policy = PolicyMode::ReadOnly);
    server.write("a.md", "a\n");
    runtime().block_on(async {
        let client = connect(&server, None).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools
            .iter()
            .all(|t| t.name != "notes_write" && t.name != "patch_apply"));
        assert!(tools.iter().any(|t| t.name == "notes_read"));
        let result = call(
            &client,
            "notes_write",
            json!({"path": "b.md", "content": "b\n"}),
        )
        .await;
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            text_of(&result),
            "policy_denied: action notes.write is denied in read_only mode"
        );
        assert!(!server.root.join("b.md").exists());
        client.cancel().await.unwrap();
    });
}

#[test]
fn the_token_guards_mcp_like_every_other_route() {
    let server = TestServer::start_with(|config| config.api_token = Some("s3cret".into()));
    runtime().block_on(async {
        assert!(connect(&server, None).await.is_err());
        let client = connect(&server, Some("s3cret")).await.unwrap();
        let result = call(&client, "notes_list", json!({})).await;
        assert_eq!(result.is_error, Some(false));
        client.cancel().await.unwrap();
    });
}

#[test]
fn mirai_mcp_speaks_mcp_on_stdio() {
    let server = TestServer::with_note("a.md", "over stdio\n");
    let root = server.root.clone();
    runtime().block_on(async {
        let command = mirai_mcp(&root);
        let client = client_config()
            .serve(TokioChildProcess::new(command).unwrap())
            .await
            .unwrap();
        assert_eq!(
            client.peer_info().unwrap().protocol_version.as_str(),
            "2025-11-25"
        );
        let result = call(&client, "notes_read", json!({"path": "a.md"})).await;
        assert_eq!(
            result.structured_content.unwrap()["content"],
            "over stdio\n"
        );
        let result = call(
            &client,
            "notes_write",
            json!({"path": "b.md", "content": "b\n"}),
        )
        .await;
        assert_eq!(result.is_error, Some(false));
        client.cancel().await.unwrap();
    });
    assert_eq!(
        std::fs::read_to_string(server.root.join("b.md")).unwrap(),
        "b\n"
    );
    // stdout carries protocol only: a bad line is answered with a parse error, not a log.
    let out = mirai_cli()
        .arg("mcp")
        .arg("--notes-root")
        .arg(&server.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"not json\n")?;
            child.wait_with_output()
        })
        .unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["error"]["code"], -32700);
}

/// One raw POST to /mcp.
fn post(server: &TestServer, headers: &[(&str, &str)], body: Value) -> reqwest::blocking::Response {
    let mut request = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().unwrap()
}

fn initialize(server: &TestServer, version: &str) -> (String, Value) {
    let response = post(
        server,
        &[],
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    assert_eq!(response.status().as_u16(), 200);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    (session, response.json().unwrap())
}

#[test]
fn the_http_transport_keeps_its_rules() {
    let server = TestServer::start_with(|config| config.mcp_max_result_bytes = 300);
    server.write("big.md", "x".repeat(2_000));

    let (session, init) = initialize(&server, "2025-06-18");
    assert_eq!(
        init["result"]["protocolVersion"], "2025-06-18",
        "an older revision is echoed"
    );
    let (_, init) = initialize(&server, "2099-01-01");
    assert_eq!(
        init["result"]["protocolVersion"], "2025-11-25",
        "an unknown one gets the newest"
    );

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(
        post(&server, &[], list.clone()).status().as_u16(),
        400,
        "no session"
    );
    assert_eq!(
        post(&server, &[("mcp-session-id", "nope")], list.clone())
            .status()
            .as_u16(),
        404
    );
    let with_session = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    assert_eq!(
        post(&server, &with_session, list.clone()).status().as_u16(),
        200
    );
    let wrong_version = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2024-01-01"),
    ];
    assert_eq!(
        post(&server, &wrong_version, list.clone())
            .status()
            .as_u16(),
        400
    );

    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        post(&server, &with_session, notification).status().as_u16(),
        202
    );

    let evil = [
        ("mcp-session-id", session.as_str()),
        ("origin", "https://evil.example"),
    ];
    assert_eq!(post(&server, &evil, list.clone()).status().as_u16(), 403);
    let local = [
        ("mcp-session-id", session.as_str()),
        ("origin", "http://localhost:3000"),
    ];
    assert_eq!(post(&server, &local, list.clone()).status().as_u16(), 200);

    // A result larger than the cap is replaced by valid JSON that states the cap.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "notes_read", "arguments": {"path": "big.md"}}});
    let answer: Value = post(&server, &with_session, call).json().unwrap();
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    let notice: Value = serde_json::from_str(text).unwrap();
    assert_eq!(notice["truncated"], true);
    assert_eq!(notice["max_result_bytes"], 300);
    assert!(answer["result"].get("structuredContent").is_none());

    let unknown = json!({"jsonrpc": "2.0", "id": 4, "method": "sampling/createMessage"});
    let answer: Value = post(&server, &with_session, unknown).json().unwrap();
    assert_eq!(answer["error"]["code"], -32601);

    assert_eq!(
        server
            .raw()
            .get(format!("{}/mcp", server.url))
            .send()
            .unwrap()
            .status()
            .as_u16(),
        405
    );
    let delete = |id: &str| {
        server
            .raw()
            .delete(format!("{}/mcp", server.url))
            .header("mcp-session-id", id)
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(delete(&session), 204);
    assert_eq!(delete(&session), 404);
    assert_eq!(post(&server, &with_session, list).status().as_u16(), 404);
}

#[test]
fn the_current_revision_needs_no_handshake_over_http_or_stdio() {
    let server = TestServer::with_note("a.md", "modern\n");
    let root = server.root.clone();
    runtime().block_on(async {
        let modern = vec![ProtocolVersion::V_2026_07_28];
        let client = client_config()
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
            .serve_with_lifecycle(
                StreamableHttpClientTransport::from_uri(format!("{}/mcp", server.url)),
                ClientLifecycleMode::Discover {
                    preferred_versions: modern.clone(),
                },
            )
            .await
            .unwrap();
        assert_eq!(
            client.peer_info().unwrap().protocol_version.as_str(),
            "2026-07-28"
        );
        let tools = client.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), TABLE.len() + 1);
        let result = call(&client, "notes_read", json!({"path": "a.md"})).await;
        assert_eq!(result.structured_content.unwrap()["content"], "modern\n");
        let read = client
            .read_resource(ReadResourceRequestParams::new("mirai://notes/a.md"))
            .await
            .unwrap();
        assert_eq!(read.contents.len(), 1);
        assert!(client
            .read_resource(ReadResourceRequestParams::new("mirai://notes/missing.md"))
            .await
            .is_err());
        client.cancel().await.unwrap();

        let command = mirai_mcp(&root);
        let client = client_config()
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
            .serve_with_lifecycle(
                TokioChildProcess::new(command).unwrap(),
                ClientLifecycleMode::Auto {
                    preferred_versions: modern,
                    legacy_version: Some(ProtocolVersion::V_2025_11_25),
                },
            )
            .await
            .unwrap();
        assert_eq!(
            client.peer_info().unwrap().protocol_version.as_str(),
            "2026-07-28"
        );
        let result = call(&client, "notes_list", json!({})).await;
        assert_eq!(result.is_error, Some(false));
        client.cancel().await.unwrap();
    });
}

/// A 2026-07-28 request: `_meta` in the body and the routing headers.
fn modern(method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
}

#[test]
fn current_revision_requests_must_carry_matching_routing_headers() {
    let server = TestServer::with_note("a.md", "a\n");
    let headers = |method: &'static str| {
        vec![
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", method),
        ]
    };

    let discover = post(
        &server,
        &headers("server/discover"),
        modern("server/discover", json!({})),
    );
    assert_eq!(discover.status().as_u16(), 200);
    assert!(
        discover.headers().get("mcp-session-id").is_none(),
        "no sessions in 2026-07-28"
    );
    let body: Value = discover.json().unwrap();
    assert_eq!(body["result"]["resultType"], "complete");
    assert_eq!(body["result"]["supportedVersions"][0], "2026-07-28");
    assert_eq!(
        body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mirai"
    );

    let call_body = modern(
        "tools/call",
        json!({"name": "notes_read", "arguments": {"path": "a.md"}}),
    );
    let missing = post(&server, &headers("tools/call"), call_body.clone());
    assert_eq!(missing.status().as_u16(), 400);
    assert_eq!(missing.json::<Value>().unwrap()["error"]["code"], -32020);
    let mut wrong = headers("tools/call");
    wrong.push(("mcp-name", "notes_list"));
    assert_eq!(
        post(&server, &wrong, call_body.clone()).status().as_u16(),
        400
    );
    let mut right = headers("tools/call");
    // =?base64?...?= is how a client sends a value a header cannot hold as it is.
    right.push(("mcp-name", "=?base64?bm90ZXNfcmVhZA==?="));
    let answer: Value = post(&server, &right, call_body).json().unwrap();
    assert_eq!(answer["result"]["structuredContent"]["content"], "a\n");
    assert_eq!(answer["result"]["resultType"], "complete");

    let mut old = modern("tools/list", json!({}));
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("1999-01-01");
    let refused = post(
        &server,
        &[
            ("mcp-protocol-version", "1999-01-01"),
            ("mcp-method", "tools/list"),
        ],
        old,
    );
    assert_eq!(refused.status().as_u16(), 400);
    let body: Value = refused.json().unwrap();
    assert_eq!(body["error"]["code"], -32022);
    assert_eq!(body["error"]["data"]["requested"], "1999-01-01");

    let unknown = post(
        &server,
        &headers("sampling/createMessage"),
        modern("sampling/createMessage", json!({})),
    );
    assert_eq!(unknown.status().as_u16(), 404);
    assert_eq!(unknown.json::<Value>().unwrap()["error"]["code"], -32601);
}

#[test]
fn resources_are_listed_in_pages() {
    let server = TestServer::start();
    for i in 0..149 {
        server.write(&format!("n/{i:03}.md"), "x\n");
    }
    let (session, _) = initialize(&server, "2025-11-25");
    let headers = [("mcp-session-id", session.as_str())];
    let page = |cursor: Value| -> Value {
        let params = if cursor.is_null() {
            json!({})
        } else {
            json!({"cursor": cursor})
        };
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "resources/list", "params": params});
        post(&server, &headers, body).json::<Value>().unwrap()["result"].clone()
    };
    let first = page(Value::Null);
    assert_eq!(first["resources"].as_array().unwrap().len(), 100);
    let second = page(first["nextCursor"].clone());
    let rest = second["resources"].as_array().unwrap();
    assert_eq!(rest.len(), 50, "149 notes and the welcome note");
    assert!(second.get("nextCursor").is_none());
    assert_eq!(rest.last().unwrap()["uri"], "mirai://notes/welcome.md");
    let bad = post(
        &server,
        &headers,
        json!({"jsonrpc": "2.0", "id": 9, "method": "resources/list", "params": {"cursor": "x"}}),
    );
    assert_eq!(bad.json::<Value>().unwrap()["error"]["code"], -32602);
}

#[test]
fn tool_descriptions_state_the_limits_the_server_uses() {
    let server = TestServer::start_with(|c| {
        c.sandbox.timeout_ms = 1234;
        c.sandbox.max_calls = 17;
        c.sandbox.memory_bytes = 48 * 1024 * 1024;
        c.sandbox.max_output_bytes = 9999;
    });
    let answer: Value = post(
        &server,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ],
        modern("tools/list", json!({})),
    )
    .json()
    .unwrap();
    let tools = answer["result"]["tools"].as_array().unwrap();
    let tool = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap().clone();

    let eval = tool("agent_eval")["description"]
        .as_str()
        .unwrap()
        .to_string();
    for configured in ["48 MiB", "1234 ms", "17 calls", "9999 bytes"] {
        assert!(eval.contains(configured), "{configured} in {eval}");
    }

    let limit = &tool("index_query")["inputSchema"]["properties"]["limit"];
    let default = mirai::index::DEFAULT_LIMIT;
    assert_eq!(limit["default"], default, "{limit}");
    let described = limit["description"].as_str().unwrap();
    assert!(
        described.contains(&format!("(default {default})"))
            && described.contains(&format!("1 to {}", mirai::index::MAX_LIMIT)),
        "{described}"
    );
}

/// Sends `head` on a fresh connection and leaves it open.
fn open_connection(port: u16, head: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

#[test]
fn a_stop_is_prompt_whatever_clients_did() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("notes");
    let (mut child, port) = serve_child(&root, None);
    let url = format!("http://127.0.0.1:{port}/mcp");
    runtime().block_on(async {
        // The session the issue measured: initialize, tools, a read, a failing
        // and a good write, code mode, resources; then the client closes.
        let client = client_config()
            .serve(StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(url.clone()),
            ))
            .await
            .unwrap();
        assert!(!client.list_all_tools().await.unwrap().is_empty());
        let read = call(&client, "notes_read", json!({"path": "welcome.md"})).await;
        assert_eq!(read.is_error, Some(false), "{read:?}");
        let failed = call(
            &client,
            "notes_write",
            json!({"path": "../x.md", "content": "x"}),
        )
        .await;
        assert_eq!(failed.is_error, Some(true), "{failed:?}");
        let wrote = call(
            &client,
            "notes_write",
            json!({"path": "kept.md", "content": "kept\n"}),
        )
        .await;
        assert_eq!(wrote.is_error, Some(false), "{wrote:?}");
        let eval = call(&client, "agent_eval", json!({"code": "return 1 + 1"})).await;
        assert_eq!(eval.is_error, Some(false), "{eval:?}");
        assert!(!client.list_all_resources().await.unwrap().is_empty());
        client
            .read_resource(ReadResourceRequestParams::new("mirai://notes/kept.md"))
            .await
            .unwrap();
        client.cancel().await.unwrap();
    });
    // Besides: an open change stream, an idle keep-alive connection, and a
    // request whose body never finishes arriving (in flight).
    let _events = open_connection(port, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let _idle = open_connection(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let _in_flight = open_connection(
        port,
        "POST /mcp/notes/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pa",
    );
    std::thread::sleep(std::time::Duration::from_millis(200));

    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let Some(status) = status else {
        child.kill().unwrap();
        child.wait().unwrap();
        panic!("mirai serve was still running 3 s after SIGTERM");
    };
    assert!(status.success(), "{status:?}");
    // The acknowledged write is there, committed; nothing is left half done.
    assert_eq!(
        std::fs::read_to_string(root.join("kept.md")).unwrap(),
        "kept\n"
    );
    assert_eq!(common::git(&root, &["status", "--porcelain"]), "");
    assert!(common::git(&root, &["log", "--format=%s"]).contains("mcp.patch_apply: kept.md"));
}
