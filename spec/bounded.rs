//! Bounded resources (issue 27): what a provider, a remote or one request can
//! make mirai hold or spend. Providers here are real HTTP servers on loopback
//! that answer endlessly, hugely or with the secrets they were sent.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hostile::{endless, respond, Hostile};
use common::TestServer;
use mirai::config::EmbedConfig;
use serde_json::json;

/// A chat completion whose content is `content`.
fn completion(content: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "choices": [{"message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10}
    }))
    .unwrap()
}

/// A server whose model is at `base_url` (one attempt per call).
fn agent_server(base_url: String, key: Option<&str>) -> TestServer {
    let key = key.map(str::to_string);
    let server = TestServer::start_with(move |config| {
        config.llm.base_url = base_url;
        config.llm.model = "hostile".into();
        config.llm.max_retries = 0;
        config.llm.api_key = key;
    });
    server.write("todo.md", "# Todo\n");
    server.commit_all();
    server
}

/// Every line of every transcript the server wrote.
fn transcripts(server: &TestServer) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(server.root.join(".mirai/runs")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    lines
}

#[test]
fn an_endless_model_answer_ends_the_run_with_llm_error_at_the_cap() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let llm = Hostile::start(move |_, stream| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            respond(
                stream,
                200,
                &completion("<think>t</think><code>return 1</code>"),
            );
        } else {
            endless(stream, "{\"choices\":[".repeat(1000).as_bytes());
        }
    });
    let server = agent_server(format!("{}/v1", llm.base), None);
    let started = Instant::now();
    let report = server.post_json("/agent/run", &json!({"task": "Anything."}));
    assert_eq!(report.status, 200, "{report:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(report.body["stopped"], "llm_error", "{report:?}");
    let detail = report.body.to_string();
    assert!(detail.contains("more than"), "{detail}");
    let stored: usize = transcripts(&server).iter().map(String::len).sum();
    assert!(stored < 1024 * 1024, "{stored} bytes of transcript");
}

#[test]
fn a_long_answer_within_the_cap_is_stored_with_each_field_capped() {
    // 150 KiB of reply: within what 1024 tokens may take, past a transcript field's cap.
    let reply = format!("<reply>{}</reply>", "x".repeat(150 * 1024));
    let llm = Hostile::start(move |_, stream| respond(stream, 200, &completion(&reply)));
    let server = agent_server(format!("{}/v1", llm.base), None);
    let report = server.post_json("/agent/run", &json!({"task": "Anything."}));
    assert_eq!(report.status, 200, "{report:?}");
    assert_eq!(report.body["stopped"], "reply", "{report:?}");
    let lines = transcripts(&server);
    assert!(lines.iter().any(|l| l.contains("more bytes not kept")));
    for line in lines {
        assert!(line.len() < 3 * 64 * 1024, "a line of {} bytes", line.len());
    }
}

#[test]
fn secrets_a_provider_echoes_never_reach_the_answer_or_the_transcript() {
    let llm = Hostile::start(move |request, stream| {
        let echo = format!(
            "{{\"error\": \"bad key for {} {} (key q-s3cret-1, user bobby)\"}}",
            request.target, request.headers
        );
        respond(stream, 401, echo.as_bytes());
    });
    let base = format!(
        "http://bobby:pw-s3cret-2@{}/v1?key=q-s3cret-1",
        llm.base.trim_start_matches("http://")
    );
    let server = agent_server(base, Some("sk-s3cret-3"));
    let answer = server.post_json("/agent/run", &json!({"task": "Anything."}));
    answer.assert_error(503, "llm_unavailable");
    // The path goes before the query string.
    assert_eq!(
        llm.requests()[0].target,
        "/v1/chat/completions?key=q-s3cret-1"
    );
    let shown = answer.body.to_string();
    assert!(shown.contains("answered 401"), "{shown}");
    for text in std::iter::once(shown).chain(transcripts(&server)) {
        assert!(!text.contains("s3cret"), "{text}");
        assert!(!text.contains("bobby"), "{text}");
    }
}

/// An embedding server that embeds chunks (4 numbers each) but answers the
/// query `tyres` and any text about boats with a body that never ends.
fn endless_for_tyres_and_boats() -> Hostile {
    Hostile::start(|request, stream| {
        let asked: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let inputs = asked["input"].as_array().cloned().unwrap_or_default();
        let hostile = |i: &serde_json::Value| {
            let text = i.as_str().unwrap_or("");
            text == "tyres" || text.contains("boat")
        };
        if !inputs.iter().any(hostile) {
            let data: Vec<_> = (0..inputs.len())
                .map(|i| json!({"index": i, "embedding": [1.0, 0.0, 0.5, 0.25]}))
                .collect();
            respond(
                stream,
                200,
                &serde_json::to_vec(&json!({"data": data})).unwrap(),
            );
        } else {
            endless(stream, "[0.5,".repeat(2000).as_bytes());
        }
    })
}

#[test]
fn an_endless_embedding_answer_degrades_a_query_in_time_and_fails_the_worker() {
    let embed = endless_for_tyres_and_boats();
    let mut config = EmbedConfig::new(&format!("{}/v1", embed.base));
    config.max_retries = 0;
    let server = TestServer::start_with(move |c| c.embed = Some(config));
    server.write("cars.md", "# Cars\nThe car needs new tyres.\n");
    server.commit_all();
    let status = |server: &TestServer| server.get("/mcp/index/status").body["embeddings"].clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&server)["chunks_embedded"].as_u64().unwrap_or(0) == 0 {
        // A query loads the index and wakes the worker.
        server.get("/mcp/index/query?q=warm&mode=lexical");
        assert!(Instant::now() < deadline, "{}", status(&server));
        std::thread::sleep(Duration::from_millis(100));
    }
    // The query's own embedding never ends: refused at its cap, well within its timeout.
    let started = Instant::now();
    let answer = server.get("/mcp/index/query?q=tyres&mode=hybrid");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["mode"], "lexical");
    let why = answer.body["degraded"].as_str().unwrap();
    assert!(why.contains("more than"), "{why}");
    // So does the worker's embedding of a new note: a failed batch, said in status.
    let written = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "boats.md", "content": "# Boats\nThe boat leaks.\n"}),
    );
    assert_eq!(written.status, 200, "{written:?}");
    loop {
        if let Some(error) = status(&server)["last_error"].as_str() {
            assert!(error.contains("more than"), "{error}");
            break;
        }
        assert!(Instant::now() < deadline, "{}", status(&server));
        std::thread::sleep(Duration::from_millis(100));
    }
}
