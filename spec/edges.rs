//! The network's edges (ARCHITECTURE.md, "Browsers are not callers" and
//! "Secrets and server paths stay home"): web pages from other origins and
//! rebound host names are refused before anything runs, bodies that trickle in
//! time out, credentials in URLs and the server's absolute paths never show,
//! MCP cursors cannot wrap, a lone surrogate is the program's error, and a JSON
//! body that repeats a key is malformed on every route.

use crate::common;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::fake_llm::FakeLlm;
use common::{mirai_cli, send, Answer, TestServer};
use mirai::config::Config;
use reqwest::blocking::RequestBuilder;
use serde_json::{json, Value};

const EVIL: &str = "https://evil.example";
const NOTE: &str = "one\ntwo\n";
const PATCH: &str = "--- a/a.md\n+++ b/a.md\n@@ -1,2 +1,2 @@\n-one\n+owned\n two\n";

/// Applies environment settings to a test server's configuration, as start-up would.
fn with_env(config: &mut Config, pairs: &[(&str, &str)]) {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let env = move |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    *config = config
        .clone()
        .with_environment(&env)
        .expect("valid settings");
}

fn get(server: &TestServer, path: &str) -> RequestBuilder {
    server.raw().get(format!("{}{path}", server.url))
}

/// A `text/plain` POST: what a web page may send anywhere without asking first.
fn plain_post(server: &TestServer, path: &str, body: String) -> RequestBuilder {
    server
        .raw()
        .post(format!("{}{path}", server.url))
        .header("content-type", "text/plain")
        .body(body)
}

fn message(answer: &Answer) -> String {
    answer.body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The note, the files beside it and the history are as they were.
fn assert_untouched(server: &TestServer, commits: usize) {
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        NOTE
    );
    assert!(!server.root.join("b.md").exists());
    assert_eq!(server.commit_count(), commits);
}

fn host_port(server: &TestServer) -> &str {
    server.url.trim_start_matches("http://")
}

/// Sends `head` (and nothing after it) over a new connection and reads the
/// answer until the server closes it: status and body.
fn raw_exchange(server: &TestServer, head: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(host_port(server)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    parse_answer(&answer).expect("an HTTP answer")
}

fn parse_answer(bytes: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(bytes);
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

/// `GET path` with the given `Host` header and, optionally, a bearer token.
fn get_with_host(
    server: &TestServer,
    path: &str,
    host: &str,
    token: Option<&str>,
) -> (u16, String) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    raw_exchange(
        server,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n"),
    )
}

fn error_code_of(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON: {body}"));
    value["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_foreign_origin_is_refused_on_every_route_and_nothing_runs() {
    let server = TestServer::with_note("a.md", NOTE);
    let commits = server.commit_count();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}});
    let write_b = "await mirai.notes.write({path: 'b.md', content: 'owned\\n'}); return 1";
    let requests = [
        plain_post(
            &server,
            "/mcp/patch/apply",
            json!({"patch": PATCH}).to_string(),
        ),
        plain_post(
            &server,
            "/mcp/notes/write",
            json!({"path": "a.md", "content": "owned\n"}).to_string(),
        ),
        plain_post(&server, "/agent/eval", json!({"code": write_b}).to_string()),
        plain_post(&server, "/mcp", initialize.to_string()),
        get(&server, "/mcp/notes/read?path=a.md"),
        get(&server, "/config"),
        get(&server, "/health"),
        get(&server, "/no/such/route"),
    ];
    for request in requests {
        let answer = send(request.header("origin", EVIL));
        answer.assert_error(403, "origin_refused");
        assert!(
            message(&answer).contains("MIRAI_ALLOWED_ORIGINS"),
            "{answer:?}"
        );
        assert!(!answer.body.to_string().contains("one\\ntwo"), "{answer:?}");
    }
    for origin in [
        "null",
        "file://",
        "http://localhost.evil.example",
        "http://127.0.0.1.evil.example:4567",
        "not an origin",
    ] {
        send(get(&server, "/mcp/notes/read?path=a.md").header("origin", origin))
            .assert_error(403, "origin_refused");
    }
    assert_untouched(&server, commits);
}

#[test]
fn the_origin_is_decided_before_the_token() {
    let server = TestServer::start_with(|config| config.api_token = Some("s3cret".into()));
    let notes = || get(&server, "/mcp/notes");
    send(notes().header("origin", EVIL).bearer_auth("s3cret")).assert_error(403, "origin_refused");
    send(notes().header("origin", EVIL)).assert_error(403, "origin_refused");
    send(notes().header("origin", "http://localhost:3000")).assert_error(401, "unauthorized");
    let answer = send(
        notes()
            .header("origin", "http://localhost:3000")
            .bearer_auth("s3cret"),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[test]
fn loopback_and_listed_origins_pass_as_do_requests_without_one() {
    let server = TestServer::start_with(|config| {
        with_env(
            config,
            &[("MIRAI_ALLOWED_ORIGINS", "https://notes.example:8443")],
        )
    });
    server.write("a.md", NOTE);
    server.commit_all();
    for origin in [
        Some("https://notes.example:8443"),
        Some("HTTPS://Notes.Example:8443"),
        Some("http://localhost:3000"),
        Some("https://127.0.0.1"),
        Some("http://[::1]:5173"),
        None,
    ] {
        let mut request = get(&server, "/mcp/notes/read?path=a.md");
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let answer = send(request);
        assert_eq!(answer.status, 200, "{origin:?}: {answer:?}");
        assert_eq!(answer.body["content"], NOTE);
    }
    for other in ["https://notes.example", "http://notes.example:8443"] {
        send(get(&server, "/mcp/notes").header("origin", other))
            .assert_error(403, "origin_refused");
    }
    let applied = send(
        server
            .raw()
            .post(format!("{}/mcp/patch/apply", server.url))
            .json(&json!({"patch": PATCH}))
            .header("origin", "https://notes.example:8443"),
    );
    assert_eq!(applied.status, 200, "{applied:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "owned\ntwo\n"
    );

    // The old name of the setting still works.
    let server = TestServer::start_with(|config| {
        with_env(
            config,
            &[("MIRAI_MCP_ALLOWED_ORIGINS", "https://old.example")],
        )
    });
    let answer = send(get(&server, "/mcp/notes").header("origin", "https://old.example"));
    assert_eq!(answer.status, 200, "{answer:?}");
}

/// A body a page on another loopback origin may send without a preflight
/// (`text/plain`, a form, none declared) is never read: 415
/// `unsupported_media_type`, with what to send; JSON (with or without a
/// charset) is served, and so is a POST without a body.
#[test]
fn a_post_body_not_declared_json_is_refused_before_it_is_read() {
    let server = TestServer::with_note("a.md", NOTE);
    let commits = server.commit_count();
    let write_b = "await mirai.notes.write({path: 'b.md', content: 'owned\\n'}); return 1";
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "page", "version": "1"}}});
    let bodies = [
        ("/mcp/patch/apply", json!({"patch": PATCH}).to_string()),
        (
            "/mcp/notes/write",
            json!({"path": "b.md", "content": "owned\n"}).to_string(),
        ),
        ("/agent/eval", json!({"code": write_b}).to_string()),
        ("/mcp", initialize.to_string()),
    ];
    for (path, body) in &bodies {
        for (origin, kind) in [
            (Some("http://localhost:3000"), Some("text/plain")),
            (
                Some("http://127.0.0.1:8080"),
                Some("application/x-www-form-urlencoded"),
            ),
            (None, Some("multipart/form-data; boundary=x")),
            (None, Some("application/jsonx")),
            (None, None),
        ] {
            let mut request = server
                .raw()
                .post(format!("{}{path}", server.url))
                .body(body.clone());
            if let Some(kind) = kind {
                request = request.header("content-type", kind);
            }
            if let Some(origin) = origin {
                request = request.header("origin", origin);
            }
            let answer = send(request);
            answer.assert_error(415, "unsupported_media_type");
            assert!(
                message(&answer).contains("Content-Type: application/json"),
                "{path} {kind:?}: {answer:?}"
            );
        }
    }
    assert_untouched(&server, commits);
    let applied = send(
        server
            .raw()
            .post(format!("{}/mcp/patch/apply", server.url))
            .header("content-type", "Application/JSON; charset=utf-8")
            .header("origin", "http://localhost:3000")
            .body(json!({"patch": PATCH}).to_string()),
    );
    assert_eq!(applied.status, 200, "{applied:?}");
    let invalidated = send(
        server
            .raw()
            .post(format!("{}/mcp/index/invalidate", server.url)),
    );
    assert_eq!(invalidated.status, 200, "{invalidated:?}");
}

#[test]
fn without_a_token_a_rebound_host_is_refused_and_this_machines_names_pass() {
    let server = TestServer::with_note("a.md", "secret plans\n");
    let read = "/mcp/notes/read?path=a.md";
    for host in [
        "rebind.evil.example",
        "rebind.evil.example:4567",
        "127.0.0.1.evil.example",
        "localhost@rebind.evil.example",
        "0.0.0.0",
    ] {
        let (status, body) = get_with_host(&server, read, host, None);
        assert_eq!(status, 403, "{host}: {body}");
        assert_eq!(error_code_of(&body), "origin_refused", "{host}");
        assert!(body.contains("MIRAI_ALLOWED_HOSTS"), "{body}");
        assert!(!body.contains("secret plans"), "{body}");
    }
    let hostname = nix::unistd::gethostname().unwrap().into_string().unwrap();
    let mut own = vec![
        "localhost".to_string(),
        "LOCALHOST:4567".to_string(),
        "127.0.0.1".to_string(),
        "127.3.2.1:80".to_string(),
        "[::1]:4567".to_string(),
        host_port(&server).to_string(),
        format!("{hostname}:4567"),
    ];
    // An address of one of the machine's interfaces, when it has one besides loopback.
    let interface = nix::ifaddrs::getifaddrs()
        .unwrap()
        .filter_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip()))
        .find(|ip| !ip.is_loopback());
    own.extend(interface.map(|ip| format!("{ip}:4567")));
    for host in own {
        let (status, body) = get_with_host(&server, read, &host, None);
        assert_eq!(status, 200, "{host}: {body}");
        assert!(body.contains("secret plans"), "{body}");
    }
}

#[test]
fn listed_hosts_pass_and_with_a_token_the_bearer_decides() {
    let server = TestServer::start_with(|config| {
        with_env(
            config,
            &[("MIRAI_ALLOWED_HOSTS", "notes.internal, 192.0.2.10")],
        )
    });
    server.write("a.md", NOTE);
    server.commit_all();
    let read = "/mcp/notes/read?path=a.md";
    for host in ["notes.internal", "Notes.Internal:8080", "192.0.2.10:4567"] {
        assert_eq!(get_with_host(&server, read, host, None).0, 200, "{host}");
    }
    assert_eq!(
        get_with_host(&server, read, "rebind.evil.example", None).0,
        403
    );

    // With a token a rebinding page has nothing to send: the Host is not checked.
    let server = TestServer::start_with(|config| config.api_token = Some("tok".into()));
    server.write("a.md", NOTE);
    server.commit_all();
    let (status, body) = get_with_host(&server, read, "rebind.evil.example", Some("tok"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("one\\ntwo"), "{body}");
    let (status, body) = get_with_host(&server, read, "rebind.evil.example", None);
    assert_eq!(status, 401, "{body}");
    assert_eq!(error_code_of(&body), "unauthorized");
}

#[test]
fn malformed_browser_settings_stop_start_up_with_one_line() {
    for (name, value, entry) in [
        (
            "MIRAI_ALLOWED_ORIGINS",
            "https://ok.example, https://bad.example/app",
            "https://bad.example/app",
        ),
        ("MIRAI_MCP_ALLOWED_ORIGINS", "*", "*"),
        (
            "MIRAI_ALLOWED_HOSTS",
            "ok.example,https://bad.example",
            "https://bad.example",
        ),
        ("MIRAI_BODY_TIMEOUT_MS", "soon", "soon"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = mirai_cli()
            .arg("serve")
            .env("NOTES_ROOT", dir.path().join("notes"))
            .env("PORT", "0")
            .env(name, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("mirai: invalid {name}: {entry} (expected ")),
            "{stderr}"
        );
        assert!(!dir.path().join("notes").exists(), "nothing was created");
    }
}

/// Sends a request whose body (of `declared` bytes) comes one byte a second;
/// returns the status answered (`None`: closed without one) and when.
fn trickle(
    address: String,
    path: &'static str,
    declared: usize,
) -> (Option<u16>, String, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n{{"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < Duration::from_secs(60) {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !answer.is_empty() {
                    continue;
                }
                // Still waiting: one more byte of the body (the server may have closed).
                let _ = stream.write_all(b" ");
            }
            Err(_) => break,
        }
    }
    let elapsed = started.elapsed();
    match parse_answer(&answer) {
        Some((status, body)) => (Some(status), body, elapsed),
        None => (None, String::new(), elapsed),
    }
}

#[test]
fn bodies_that_trickle_in_get_408_within_the_bound_and_the_server_keeps_serving() {
    let bound = Duration::from_millis(1500);
    let server = TestServer::start_with(|config| {
        config.body_timeout_ms = bound.as_millis() as u64;
    });
    server.write("a.md", NOTE);
    server.commit_all();
    let routes = [
        "/mcp/patch/apply",
        "/mcp/notes/read_batch",
        "/agent/eval",
        "/agent/run",
        "/mcp",
    ];
    let trickles: Vec<_> = routes
        .iter()
        .cycle()
        .take(30)
        .map(|&path| {
            let address = host_port(&server).to_string();
            (
                path,
                std::thread::spawn(move || trickle(address, path, 1000)),
            )
        })
        .collect();
    for (path, trickle) in trickles {
        let (status, body, elapsed) = trickle.join().unwrap();
        assert_eq!(status, Some(408), "{path}: {body}");
        if path != "/mcp" {
            assert_eq!(error_code_of(&body), "request_timeout", "{path}");
        }
        assert!(body.contains("MIRAI_BODY_TIMEOUT_MS"), "{path}: {body}");
        assert!(
            elapsed < bound + Duration::from_secs(8),
            "{path} answered after {elapsed:?}"
        );
    }
    assert_eq!(server.get("/health").status, 200);
    let answer = server.post_json("/mcp/patch/apply", &json!({ "patch": PATCH }));
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[test]
fn a_slow_body_that_arrives_within_the_bound_is_served() {
    let server = TestServer::start_with(|config| config.body_timeout_ms = 5_000);
    server.write("a.md", NOTE);
    server.commit_all();
    let body = json!({"paths": ["a.md"]}).to_string();
    let mut stream = TcpStream::connect(host_port(&server)).unwrap();
    let head = format!(
        "POST /mcp/notes/read_batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let (first, rest) = body.split_at(body.len() / 2);
    stream.write_all(first.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    stream.write_all(rest.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let (status, text) = parse_answer(&answer).unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("one\\ntwo"), "{text}");
}

#[test]
fn credentials_in_the_model_url_show_in_no_answer_transcript_or_config() {
    let llm = FakeLlm::fixture("error-after-first-step");
    let base_url = llm.base_url.replacen("http://", "http://alice:hunter2@", 1);
    let server = TestServer::start_with(|config| {
        config.llm.base_url = base_url;
        config.llm.max_retries = 0;
    });
    let answer = server.post_json("/agent/run", &json!({"task": "Anything."}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["stopped"], "llm_error");
    let detail = answer.body["stop_detail"].as_str().unwrap();
    assert!(detail.contains("http://***@127.0.0.1"), "{detail}");
    let run_id = answer.body["run_id"].as_str().unwrap();
    let transcript = server.get(&format!("/agent/runs/{run_id}"));
    assert_eq!(transcript.status, 200);
    assert!(transcript.body.to_string().contains("***@127.0.0.1"));
    for shown in [answer.body, transcript.body, server.get("/config").body] {
        let text = shown.to_string();
        assert!(
            !text.contains("hunter2") && !text.contains("alice"),
            "{text}"
        );
    }

    // A model that cannot be reached at all: 503, naming the URL without its credentials.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server = TestServer::start_with(|config| {
        config.llm.base_url = format!("http://alice:hunter2@{closed}/v1");
        config.llm.max_retries = 0;
    });
    let answer = server.post_json("/agent/run", &json!({"task": "Anything."}));
    answer.assert_error(503, "llm_unavailable");
    let text = message(&answer);
    assert!(text.contains(&format!("http://***@{closed}/v1")), "{text}");
    assert!(
        !text.contains("hunter2") && !text.contains("alice"),
        "{text}"
    );
}

#[test]
fn credentials_in_the_model_url_stay_out_of_the_log() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut child = mirai_cli()
        .arg("serve")
        .env("NOTES_ROOT", dir.path().join("notes"))
        .env("PORT", "0")
        .env("RUST_LOG", "info")
        .env(
            "MIRAI_LLM_BASE_URL",
            format!("http://alice:hunter2@{closed}/v1?api-key=hunter3"),
        )
        .env("MIRAI_LLM_MAX_RETRIES", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    let url = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server starts");
        log.push(line.clone());
        if let Some(at) = line.find(" on http://") {
            let rest = &line[at + 4..];
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let answer = send(
        reqwest::blocking::Client::new()
            .post(format!("{url}/agent/run"))
            .json(&json!({"task": "Anything."})),
    );
    answer.assert_error(503, "llm_unavailable");
    // The failed request is logged; wait for its line, then stop the server.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let done = line.contains("POST /agent/run 503");
                log.push(line);
                if done {
                    break;
                }
            }
            Err(_) => continue,
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    log.extend(rx.try_iter());
    let log = log.join("\n");
    assert!(log.contains(&format!("http://***@{closed}/v1")), "{log}");
    assert!(log.contains("POST /agent/run 503"), "{log}");
    assert!(!log.contains("hunter2") && !log.contains("alice"), "{log}");
    // A key in the query string (as some providers take it) is masked too, and
    // the start-up line names only where the model is.
    assert!(!log.contains("hunter3"), "{log}");
    assert!(log.contains(&format!(" at http://{closed}\n")), "{log}");
}

#[test]
fn a_malformed_artifact_is_named_by_its_relative_path_only() {
    let server = TestServer::with_note("a.md", "roses are red\n");
    assert_eq!(
        server.post_json("/mcp/index/rebuild", &json!({})).status,
        200
    );
    std::fs::write(
        server.root.join(".mirai/index.json"),
        b"{\"version\": 1, oops",
    )
    .unwrap();
    let absolute = [
        server.dir.path().to_path_buf(),
        server.dir.path().canonicalize().unwrap(),
    ];
    let mut failures = Vec::new();
    for answer in [
        server.get("/mcp/index/status"),
        server.get("/mcp/index/query?q=roses"),
    ] {
        answer.assert_error(500, "invalid_index_artifact");
        failures.push(message(&answer));
    }
    // The same failure inside a program, where the operation's error keeps its code.
    let eval = server.post_json(
        "/agent/eval",
        &json!({"code": "return await mirai.index.status()"}),
    );
    assert_eq!(eval.status, 200, "{eval:?}");
    assert_eq!(
        eval.body["error"]["code"], "invalid_index_artifact",
        "{eval:?}"
    );
    failures.push(eval.body["error"]["message"].as_str().unwrap().to_string());
    for text in failures {
        assert!(text.contains(".mirai/index.json"), "{text}");
        for path in &absolute {
            assert!(!text.contains(path.to_str().unwrap()), "{text}");
        }
    }
}

/// One JSON-RPC request over HTTP in `session` (or `initialize` when `None`).
fn mcp(server: &TestServer, session: Option<&str>, body: &Value) -> reqwest::blocking::Response {
    let mut request = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    request.send().unwrap()
}

fn mcp_session(server: &TestServer) -> String {
    let answer = mcp(
        server,
        None,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "spec", "version": "1"}}}),
    );
    assert_eq!(answer.status().as_u16(), 200);
    answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn resource_cursors_page_to_the_end_and_never_wrap() {
    let server = TestServer::start();
    for i in 0..150 {
        server.write(&format!("n{i:03}.md"), format!("note {i}\n"));
    }
    server.commit_all();
    let session = mcp_session(&server);
    let list = |cursor: Value| -> Value {
        let mut params = json!({});
        if !cursor.is_null() {
            params["cursor"] = cursor;
        }
        mcp(
            &server,
            Some(&session),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": params}),
        )
        .json()
        .unwrap()
    };
    let notes = || -> usize {
        // welcome.md, from bootstrap, is a note too.
        server.get("/mcp/notes").body["notes"]
            .as_array()
            .unwrap()
            .len()
    };
    let total = notes();
    let first = list(Value::Null);
    assert_eq!(first["result"]["resources"].as_array().unwrap().len(), 100);
    assert_eq!(first["result"]["nextCursor"], "100");
    let second = list(json!("100"));
    assert_eq!(
        second["result"]["resources"].as_array().unwrap().len(),
        total - 100
    );
    assert!(second["result"].get("nextCursor").is_none(), "{second}");
    for bad in [
        json!("18446744073709551516"),
        json!("18446744073709551615"),
        json!("99999999999999999999999"),
        json!((total + 1).to_string()),
        json!("-1"),
        json!("+100"),
        json!("0100"),
        json!("abc"),
        json!(100),
    ] {
        let answer = list(bad.clone());
        assert_eq!(answer["error"]["code"], -32602, "{bad}: {answer}");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(text.contains("invalid cursor"), "{text}");
        assert!(answer.get("result").is_none(), "{bad}: {answer}");
    }
}

#[test]
fn a_lone_surrogate_in_an_outcome_is_the_programs_error() {
    let server = TestServer::start();
    for code in [
        r#"return "\ud800""#,
        r#"return {text: "a\udc00b"}"#,
        r#"throw new Error("bad \ud83d")"#,
    ] {
        let answer = server.post_json("/agent/eval", &json!({ "code": code }));
        assert_eq!(answer.status, 200, "{code}: {answer:?}");
        assert_eq!(
            answer.body["error"]["code"], "sandbox_error",
            "{code}: {answer:?}"
        );
        assert!(answer.body["result"].is_null());
    }
    let answer = server.post_json("/agent/eval", &json!({"code": "return 6 * 7"}));
    assert_eq!(answer.body["result"], 42);
}

#[test]
fn a_repeated_key_is_malformed_on_every_route_with_its_code() {
    let server = TestServer::with_note("a.md", NOTE);
    let commits = server.commit_count();
    let patch = json!(PATCH);
    let cases = [
        (
            "/mcp/patch/apply",
            format!(r#"{{"patch": {patch}, "patch": {patch}}}"#),
            "invalid_patch",
        ),
        (
            "/mcp/patch/propose",
            format!(r#"{{"patch": {patch}, "patch": {patch}}}"#),
            "invalid_patch",
        ),
        (
            "/mcp/notes/read_batch",
            r#"{"paths": ["a.md"], "paths": ["b.md"]}"#.to_string(),
            "invalid_path",
        ),
        (
            "/mcp/notes/write",
            r#"{"path": "b.md", "content": "x\n", "content": "y\n"}"#.to_string(),
            "invalid_request",
        ),
        (
            "/mcp/notes/edit",
            r#"{"path": "a.md", "edits": [{"old": "one", "new": "two", "new": "three"}]}"#
                .to_string(),
            "invalid_request",
        ),
        (
            "/agent/eval",
            r#"{"code": "return 1", "code": "return 2"}"#.to_string(),
            "invalid_request",
        ),
        (
            "/agent/run",
            r#"{"task": "a", "task": "b"}"#.to_string(),
            "invalid_request",
        ),
    ];
    for (path, body, code) in cases {
        let answer = server.post_raw(path, body);
        answer.assert_error(400, code);
        assert!(
            message(&answer).contains("duplicate key"),
            "{path}: {answer:?}"
        );
    }
    assert_untouched(&server, commits);

    // MCP over HTTP: a parse error, nested keys included.
    let session = mcp_session(&server);
    let body = r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "notes_write",
        "arguments": {"path": "b.md", "content": "x\n", "content": "y\n"}}}"#;
    let answer = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .header("content-type", "application/json")
        .header("mcp-session-id", session.as_str())
        .body(body)
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    let answer: Value = answer.json().unwrap();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("duplicate key"));
    assert_untouched(&server, commits);

    // MCP over stdio: the same parser.
    let mut child = mirai_cli()
        .arg("mcp")
        .env("NOTES_ROOT", &server.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = body.replace('\n', " ") + "\n";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_untouched(&server, commits);
}
