//! Semantic and hybrid search against a fake embedding server (a real HTTP
//! server on loopback with deterministic vectors): the three modes and what
//! their hits explain, lexical answers with `degraded` when the server fails
//! or hangs, incremental embedding after applies, vectors kept across
//! restarts in a file whose bytes depend only on the vectors, the CLI's
//! rebuild, and keys kept out of every log.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::fake_embed::FakeEmbed;
use common::{encode, mirai_cli, TestServer};
use mirai::config::EmbedConfig;
use serde_json::{json, Value};

/// The garden note: two sections long enough to be two chunks.
fn garden(tools: &str) -> String {
    format!(
        "# Garden\n{}\n\n# Tools\n{}\n",
        "Tomatoes and beans grow in the garden. ".repeat(25),
        tools.repeat(25)
    )
}

fn notes() -> Vec<(&'static str, String)> {
    vec![
        (
            "cars.md",
            "# Cars\nThe car needs new tyres and an oil change.\n".into(),
        ),
        (
            "cats.md",
            "# Cats\nThe cat sleeps on the warm windowsill all day.\n".into(),
        ),
        ("garden.md", garden("A spade and a rake hang in the shed. ")),
    ]
}

fn embed_config(fake: &FakeEmbed) -> EmbedConfig {
    let mut c = EmbedConfig::new(&fake.base_url);
    c.model = "fake-bow".into();
    c.batch = 2;
    c.query_timeout_ms = 500;
    c.max_retries = 0;
    c
}

fn server(fake: &FakeEmbed) -> TestServer {
    let config = embed_config(fake);
    let server = TestServer::start_with(move |c| c.embed = Some(config));
    for (path, text) in notes() {
        server.write(path, text);
    }
    server.commit_all();
    server
}

/// A notes root holding [`notes`], committed, that no server embedded.
fn plain_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let server = TestServer::start();
    for (path, text) in notes() {
        server.write(path, text);
    }
    server.commit_all();
    let root = server.root.clone();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("notes");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(&root)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(ok.success());
    (dir, copy)
}

fn status(server: &TestServer) -> Value {
    let answer = server.get("/mcp/index/status");
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

/// Waits until the embedding server has been sent `n` inputs in all.
fn inputs_reach(fake: &FakeEmbed, n: usize) {
    let started = Instant::now();
    while fake.inputs().len() < n {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "only {} inputs were sent, not {n}",
            fake.inputs().len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until every chunk has a vector; the status then.
fn embedded(server: &TestServer) -> Value {
    let started = Instant::now();
    loop {
        // A query makes sure the index is loaded (or built) and the worker woken.
        let _ = server.get("/mcp/index/query?q=warm&mode=lexical");
        let s = status(server);
        let e = &s["embeddings"];
        if e["chunks_pending"] == 0 && e["chunks_embedded"].as_u64().unwrap_or(0) > 0 {
            return s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never embedded: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn query(server: &TestServer, q: &str, mode: Option<&str>) -> Value {
    let mode = mode.map_or(String::new(), |m| format!("&mode={m}"));
    let answer = server.get(&format!("/mcp/index/query?q={}&limit=5{mode}", encode(q)));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

fn paths(answer: &Value) -> Vec<String> {
    crate::common::hit_paths(answer)
}

#[test]
fn the_three_modes_rank_and_explain() {
    let fake = FakeEmbed::start();
    let server = server(&fake);
    let s = embedded(&server);
    assert_eq!(s["embeddings"]["model"], "fake-bow");
    // The three notes' four chunks, and the welcome note mirai starts a root with.
    assert_eq!(s["embeddings"]["chunks_embedded"], 5);
    assert_eq!(s["embeddings"]["last_error"], Value::Null);

    // "automobile" is in no note; by meaning it is the car note.
    let semantic = query(&server, "automobile", Some("semantic"));
    assert_eq!(semantic["mode"], "semantic");
    assert!(semantic.get("degraded").is_none(), "{semantic}");
    let top = &semantic["chunks"][0];
    assert_eq!(top["metadata"]["path"], "cars.md");
    assert_eq!(top["metadata"]["snippet_offset"], Value::Null);
    assert_eq!(top["explanation"]["matched_terms"], json!([]));
    assert_eq!(top["explanation"]["semantic_rank"], 1);
    assert!(top["explanation"]["semantic_score"].as_f64().unwrap() > 0.2);

    // Hybrid is the default with embeddings; a hit found only by meaning has no lexical rank.
    let hybrid = query(&server, "automobile", None);
    assert_eq!(hybrid["mode"], "hybrid");
    assert_eq!(paths(&hybrid)[0], "cars.md");
    assert!(hybrid["chunks"][0]["explanation"]
        .get("lexical_rank")
        .is_none());
    let both = query(&server, "cat sleeps", None);
    let top = &both["chunks"][0];
    assert_eq!(top["metadata"]["path"], "cats.md");
    assert_eq!(top["explanation"]["lexical_rank"], 1);
    assert_eq!(top["explanation"]["semantic_rank"], 1);
    assert_eq!(
        top["explanation"]["matched_terms"],
        json!(["cat", "sleeps"])
    );

    // Lexical: only chunks holding a query term, and no semantic keys.
    let lexical = query(&server, "automobile", Some("lexical"));
    assert_eq!(lexical["mode"], "lexical");
    assert_eq!(lexical["chunks"], json!([]));
    let lexical = query(&server, "spade", Some("lexical"));
    assert_eq!(paths(&lexical), ["garden.md"]);
    assert!(lexical["chunks"][0]["explanation"]
        .get("semantic_score")
        .is_none());

    // A path prefix holds in semantic mode too.
    let prefixed = server.get("/mcp/index/query?q=automobile&mode=semantic&path_prefix=garden.md");
    assert!(
        paths(&prefixed.body).iter().all(|p| p == "garden.md"),
        "{prefixed:?}"
    );

    for bad in ["fuzzy", "", "Hybrid"] {
        server
            .get(&format!("/mcp/index/query?q=car&mode={bad}"))
            .assert_error(400, "invalid_request");
    }
}

#[test]
fn without_embeddings_search_is_lexical_and_says_so_when_asked() {
    let server = TestServer::with_note("a.md", "# A\nThe car is red.\n");
    let plain = query(&server, "car", None);
    assert_eq!(plain["mode"], "lexical");
    assert!(plain.get("degraded").is_none());
    assert!(plain["chunks"][0]["explanation"]
        .get("semantic_score")
        .is_none());
    let asked = query(&server, "car", Some("hybrid"));
    assert_eq!(asked["mode"], "lexical");
    assert!(
        asked["degraded"]
            .as_str()
            .unwrap()
            .contains("MIRAI_EMBED_BASE_URL"),
        "{asked}"
    );
    assert_eq!(paths(&asked), ["a.md"]);
    assert_eq!(status(&server)["embeddings"], Value::Null);
}

#[test]
fn a_failing_or_hung_server_gives_lexical_answers_and_opens_the_breaker() {
    let fake = FakeEmbed::start();
    let server = server(&fake);
    embedded(&server);
    // Asked once while the server works: its vector is cached.
    assert_eq!(query(&server, "automobile", None)["mode"], "hybrid");

    fake.set_failing(true);
    let failed = query(&server, "tyres", None);
    assert_eq!(failed["mode"], "lexical");
    let why = failed["degraded"].as_str().unwrap();
    assert!(
        why.contains("could not be embedded") && why.contains("500"),
        "{why}"
    );
    assert_eq!(paths(&failed), ["cars.md"]);

    // A hung server costs a query its timeout (500 ms here), not more.
    fake.set_failing(false);
    fake.set_delay(Duration::from_secs(5));
    let started = Instant::now();
    let hung = query(&server, "windowsill", None);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(hung["mode"], "lexical");
    assert!(
        hung["degraded"].as_str().unwrap().contains("in time"),
        "{hung}"
    );

    // The third failure in a row opens the breaker: no call, an answer at once.
    assert_eq!(query(&server, "rake", None)["mode"], "lexical");
    let before = fake.requests();
    let started = Instant::now();
    let open = query(&server, "beans", None);
    assert!(started.elapsed() < Duration::from_millis(400));
    assert!(
        open["degraded"]
            .as_str()
            .unwrap()
            .contains("tried again in"),
        "{open}"
    );
    assert_eq!(fake.requests(), before);

    // A cached query vector needs no call: still hybrid.
    assert_eq!(query(&server, "automobile", None)["mode"], "hybrid");
    assert_eq!(fake.requests(), before);
}

#[test]
fn after_an_apply_only_the_changed_chunk_is_embedded() {
    let fake = FakeEmbed::start();
    let server = server(&fake);
    embedded(&server);
    let initial = fake.inputs();
    assert_eq!(initial.len(), 5, "{initial:?}");

    // One section of garden.md changes: only that chunk is sent.
    let tools = "A spade, a rake and a hoe hang in the shed. ";
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "garden.md", "content": garden(tools)}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    // The worker's status is a snapshot of its last pass: wait for the
    // embedding server to have been asked, then for the worker to finish.
    inputs_reach(&fake, initial.len() + 1);
    embedded(&server);
    let after: Vec<String> = fake.inputs().into_iter().skip(initial.len()).collect();
    assert_eq!(after, [format!("# Tools\n{}\n", tools.repeat(25))]);

    // A new note: its one chunk, and nothing else.
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "bikes.md", "content": "# Bikes\nA bicycle with a bell.\n"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    inputs_reach(&fake, initial.len() + 2);
    let started = Instant::now();
    while embedded(&server)["embeddings"]["chunks_embedded"] != 6 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the new note's chunk never counted as embedded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let after: Vec<String> = fake.inputs().into_iter().skip(initial.len() + 1).collect();
    assert_eq!(after, ["# Bikes\nA bicycle with a bell.\n"]);
    // The semantic side finds the new text.
    let hoe = query(&server, "hoe", Some("semantic"));
    assert_eq!(paths(&hoe)[0], "garden.md");
    assert_eq!(hoe["chunks"][0]["metadata"]["chunk_index"], 1);
}

#[test]
fn vectors_survive_a_restart_and_their_file_depends_only_on_them() {
    let fake = FakeEmbed::start();
    let first = server(&fake);
    embedded(&first);
    let file = first.root.join(".mirai/vectors.bin");
    // The status counts the vectors as they come; the file is written at the pass's end.
    let started = Instant::now();
    let bytes = loop {
        match std::fs::read(&file) {
            Ok(bytes) => break bytes,
            Err(e) => assert!(
                started.elapsed() < Duration::from_secs(30),
                "the vector file is never written: {e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    };

    // Another server on the same notes, with a fresh fake: nothing to embed again.
    let again = FakeEmbed::start();
    let root = first.root.clone();
    let dir = tempfile::tempdir().unwrap();
    let config = embed_config(&again);
    let second = TestServer::start_in(dir, root.clone(), move |c| c.embed = Some(config));
    let s = embedded(&second);
    assert_eq!(s["embeddings"]["chunks_embedded"], 5);
    assert_eq!(again.inputs(), Vec::<String>::new());
    assert_eq!(
        query(&second, "automobile", Some("semantic"))["chunks"][0]["metadata"]["path"],
        "cars.md"
    );

    // Embedded again from nothing: the same bytes.
    std::fs::remove_file(&file).unwrap();
    let third_fake = FakeEmbed::start();
    let config = embed_config(&third_fake);
    let third = TestServer::start_in(tempfile::tempdir().unwrap(), root, move |c| {
        c.embed = Some(config)
    });
    embedded(&third);
    let started = Instant::now();
    while std::fs::read(&file).ok().as_deref() != Some(&bytes[..]) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the file differs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop((first, second));
}

#[test]
fn the_cli_rebuild_waits_for_embeddings_unless_told_not_to() {
    let fake = FakeEmbed::start();
    let (_dir, root) = plain_root();
    let cli = |extra: &[&str]| {
        let out = mirai_cli()
            .args(["index", "rebuild"])
            .args(extra)
            .arg("--notes-root")
            .arg(&root)
            .env("MIRAI_EMBED_BASE_URL", &fake.base_url)
            .env("MIRAI_EMBED_MODEL", "fake-bow")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let skipped = cli(&["--no-embed"]);
    assert!(!skipped.contains("embedded"), "{skipped}");
    assert_eq!(fake.requests(), 0);
    let waited = cli(&[]);
    assert!(
        waited.contains("embedded 5 chunks with fake-bow (0 already had vectors)"),
        "{waited}"
    );
    assert_eq!(fake.requests(), 1); // the 5 chunks in one batch (32 by default)
    let again = cli(&[]);
    assert!(
        again.contains("embedded 0 chunks with fake-bow (5 already had vectors)"),
        "{again}"
    );
}

#[test]
fn the_key_reaches_the_server_and_no_log() {
    let fake = FakeEmbed::start();
    let (_dir, root) = plain_root();
    fake.set_failing(true);
    let base = fake.base_url.replace("http://", "http://user:pw-s3cret@");
    let log = tempfile::NamedTempFile::new().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = mirai_cli()
        .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--notes-root")
        .arg(&root)
        .env("MIRAI_EMBED_BASE_URL", &base)
        .env("MIRAI_EMBED_API_KEY", "ek-s3cret-key")
        .env("RUST_LOG", "debug")
        .stdout(log.reopen().unwrap())
        .stderr(log.reopen().unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let client = reqwest::blocking::Client::new();
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let mut last = Value::Null;
    // Until the worker has failed and a query has been refused an embedding.
    while started.elapsed() < Duration::from_secs(30) {
        let query = client.get(format!("{url}/mcp/index/query?q=car")).send();
        let status = client.get(format!("{url}/mcp/index/status")).send();
        if let (Ok(_), Ok(status)) = (query, status) {
            last = status.json().unwrap_or(Value::Null);
            if last["embeddings"]["last_error"].is_string() {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let degraded = client
        .get(format!("{url}/mcp/index/query?q=tyres&mode=semantic"))
        .send()
        .unwrap();
    let degraded: Value = degraded.json().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let error = last["embeddings"]["last_error"]
        .as_str()
        .expect("the worker failed");
    assert!(error.contains("500"), "{error}");
    assert!(fake
        .authorization()
        .iter()
        .any(|a| a == "Bearer ek-s3cret-key"));
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(logged.contains("embedding chunks failed"), "{logged}");
    for shown in [logged, last.to_string(), degraded.to_string()] {
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
