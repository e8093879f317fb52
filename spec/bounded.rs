//! Bounded resources (issue 27): what a provider, a remote or one request can
//! make mirai hold or spend. Providers here are real HTTP servers on loopback
//! that answer endlessly, hugely or with the secrets they were sent.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hostile::{endless, respond, Hostile};
use common::{repo_state, TestServer};
use mirai::config::{EmbedConfig, GitCredentials, SyncConfig, Transport};
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

/// A remote whose fetches each take 1.5 s and fail (a push fails at once).
fn slow_remote() -> Hostile {
    Hostile::start(|request, stream| {
        if request.target.contains("git-upload-pack") {
            std::thread::sleep(Duration::from_millis(1500));
        }
        respond(stream, 503, b"busy");
    })
}

/// A notes repository with one committed note, in `dir`.
fn seeded_root(dir: &std::path::Path) -> std::path::PathBuf {
    let root = dir.join("notes");
    std::fs::create_dir(&root).unwrap();
    common::git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.md"), "alpha\n").unwrap();
    common::git(&root, &["add", "-A"]);
    common::git(
        &root,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@x",
            "commit",
            "-qm",
            "seed",
        ],
    );
    root
}

/// A server syncing with `remote`, in this process.
fn slow_remote_server(remote: &Hostile) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let root = seeded_root(dir.path());
    let url = format!("{}/remote.git", remote.base);
    TestServer::start_in(dir, root, move |config| {
        config.sync = Some(SyncConfig {
            transport: Transport::of(&url).unwrap(),
            remote: url,
            branch: None,
            credentials: GitCredentials::None,
            interval_secs: 0,
        });
    })
}

fn fetches(remote: &Hostile) -> usize {
    remote
        .requests()
        .iter()
        .filter(|r| r.target.contains("git-upload-pack"))
        .count()
}

/// `mirai serve` as its own process (its threads are its own to count).
struct Child {
    process: std::process::Child,
    url: String,
}

impl Child {
    fn serve(root: &std::path::Path, env: &[(&str, &str)]) -> Child {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let process = common::mirai_cli()
            .args(["serve", "--port", &port.to_string(), "--notes-root"])
            .arg(root)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        while reqwest::blocking::get(format!("{url}/health")).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "mirai did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Child { process, url }
    }

    fn threads(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.id()));
        let status = status.unwrap();
        let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
        line["Threads:".len()..].trim().parse().unwrap()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

#[test]
fn a_flood_of_syncs_runs_two_and_holds_no_thread_per_caller() {
    let remote = slow_remote();
    let dir = tempfile::tempdir().unwrap();
    let root = seeded_root(dir.path());
    let url = format!("{}/remote.git", remote.base);
    let server = Child::serve(
        &root,
        &[
            ("MIRAI_GIT_REMOTE", url.as_str()),
            ("MIRAI_SYNC_INTERVAL", "0"),
        ],
    );
    let client = reqwest::blocking::Client::new();
    let before = server.threads();
    let callers: Vec<_> = (0..60)
        .map(|_| {
            let (client, url) = (client.clone(), format!("{}/mcp/repo/sync", server.url));
            std::thread::spawn(move || client.post(url).json(&json!({})).send().unwrap().status())
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let during = server.threads();
    let started = Instant::now();
    let listed = client
        .get(format!("{}/mcp/notes", server.url))
        .send()
        .unwrap();
    let list_time = started.elapsed();
    for caller in callers {
        assert_eq!(caller.join().unwrap(), 503);
    }
    let listed: serde_json::Value = listed.json().unwrap();
    assert_eq!(listed["notes"], json!(["a.md"]), "{listed}");
    assert!(list_time < Duration::from_secs(1), "{list_time:?}");
    // A sync thread and a few more, not one thread per waiting caller.
    assert!(
        during < before + 10,
        "{before} threads, then {during} with 60 waiting"
    );
    let runs = fetches(&remote);
    assert!((1..=3).contains(&runs), "{runs} syncs for 60 requests");
}

#[test]
fn a_caller_that_gave_up_leaves_no_sync_waiting() {
    let remote = slow_remote();
    let server = slow_remote_server(&remote);
    let client = reqwest::blocking::Client::new();
    let url = format!("{}/mcp/repo/sync", server.url);
    let running = {
        let (client, url) = (client.clone(), url.clone());
        std::thread::spawn(move || client.post(url).json(&json!({})).send().unwrap().status())
    };
    std::thread::sleep(Duration::from_millis(300));
    let gave_up = client
        .post(&url)
        .timeout(Duration::from_millis(200))
        .json(&json!({}))
        .send();
    assert!(gave_up.is_err(), "{gave_up:?}");
    assert_eq!(running.join().unwrap(), 503);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(fetches(&remote), 1, "{:?}", remote.requests());
}

#[test]
fn head_n_is_read_from_the_kept_history_not_walked_per_request() {
    let server = TestServer::with_note("a.md", "v0\n");
    for n in 1..=3 {
        let body = json!({"path": "a.md", "content": format!("v{n}\n")});
        assert_eq!(server.post_json("/mcp/notes/write", &body).status, 200);
    }
    // notes.history walks the first-parent chain once and keeps it.
    let history = server.get("/mcp/notes/history?path=a.md");
    assert_eq!(history.status, 200, "{history:?}");
    // The commit between HEAD and HEAD~2 is gone: only a fresh walk would need it.
    let between = common::git(&server.root, &["rev-parse", "HEAD~1"]);
    let between = between.trim();
    std::fs::remove_file(
        server
            .root
            .join(".git/objects")
            .join(&between[..2])
            .join(&between[2..]),
    )
    .unwrap();
    let read = server.get("/mcp/notes/read?path=a.md&rev=HEAD~2");
    assert_eq!(read.status, 200, "{read:?}");
    assert_eq!(read.body["content"], "v1\n");
    let far = server.get("/mcp/notes/read?path=a.md&rev=HEAD~99");
    far.assert_error(404, "not_found");
}

#[test]
fn a_write_under_a_folder_git_holds_as_a_symlink_is_invalid_path() {
    let server = TestServer::with_note("real/a.md", "a\n");
    // As a pull leaves a remote's symlink: in HEAD and the index (skip-worktree), not on disk.
    std::os::unix::fs::symlink("real", server.root.join("linkdir")).unwrap();
    common::git(&server.root, &["add", "linkdir"]);
    common::git(
        &server.root,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@x",
            "commit",
            "-qm",
            "link",
        ],
    );
    common::git(
        &server.root,
        &["update-index", "--skip-worktree", "linkdir"],
    );
    std::fs::remove_file(server.root.join("linkdir")).unwrap();
    let head = server.head();
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "linkdir/new.md", "content": "new\n"}),
    );
    answer.assert_error(400, "invalid_path");
    assert!(answer.body.to_string().contains("symlink"), "{answer:?}");
    assert_eq!(server.head(), head);
    assert!(!server.root.join("linkdir").exists());
}

#[test]
fn a_note_past_the_note_limit_is_never_loaded_and_is_counted() {
    const LIMIT: usize = 2 * 1024 * 1024;
    let server = TestServer::start_with(|c| c.max_note_bytes = LIMIT);
    // As a pull leaves it: committed and on disk, larger than the limit.
    let big = format!(
        "# Big\nzanzibar\n{}",
        "filler line\n".repeat(LIMIT / 12 + 10)
    );
    server.write("big.md", &big);
    server.write("small.md", "# Small\nzanzibar too\n");
    server.commit_all();

    let read = server.read("big.md");
    read.assert_error(413, "note_too_large");
    let message = read.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MIRAI_MAX_NOTE_BYTES") && message.contains(&LIMIT.to_string()),
        "{message}"
    );
    assert_eq!(server.read("small.md").status, 200);
    server
        .get("/mcp/notes/read?path=big.md&rev=HEAD~0")
        .assert_error(413, "note_too_large");
    server
        .get(&format!(
            "/mcp/notes/diff?commit={}&path=big.md",
            server.head()
        ))
        .assert_error(413, "note_too_large");
    // Changing it needs reading it: refused the same way.
    server
        .post_json(
            "/mcp/notes/append",
            &json!({"path": "big.md", "text": "more\n"}),
        )
        .assert_error(413, "note_too_large");

    // Indexing skips it; status counts it.
    let hits = server.get("/mcp/index/query?q=zanzibar");
    assert_eq!(hits.status, 200, "{hits:?}");
    let paths: Vec<&str> = hits.body["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["small.md"]);
    let rebuilt = server.post_json("/mcp/index/rebuild", &json!({}));
    assert_eq!(rebuilt.status, 200, "{rebuilt:?}");
    let status = server.get("/mcp/index/status");
    assert_eq!(status.body["notes_too_large"], 1, "{status:?}");
    assert_eq!(
        status.body["notes_indexed"],
        status.body["notes_present"].as_u64().unwrap() - 1
    );
}

#[test]
fn writes_cap_a_note_at_the_note_limit_and_a_lower_limit_stops_start_up() {
    let server = TestServer::start_with(|c| {
        c.max_body_bytes = 4096;
        c.max_note_bytes = 5000;
    });
    let write = |content: String| {
        server.post_json(
            "/mcp/notes/write",
            &json!({"path": "n.md", "content": content}),
        )
    };
    assert_eq!(write("a".repeat(3000) + "\n").status, 200);
    let grown = server.post_json(
        "/mcp/notes/append",
        &json!({"path": "n.md", "text": "b".repeat(2500) + "\n"}),
    );
    grown.assert_error(413, "note_too_large");
    assert!(grown.body.to_string().contains("5000"), "{grown:?}");

    let dir = tempfile::tempdir().unwrap();
    let out = common::mirai_cli()
        .args(["index", "status", "--notes-root"])
        .arg(dir.path())
        .env("MIRAI_MAX_NOTE_BYTES", "1000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MIRAI_MAX_NOTE_BYTES"), "{stderr}");
}

/// `count` notes of `lines` numbered lines each, committed; then every
/// `every`-th line of each rewritten (one commit, answered); then `moved`
/// lines put at the top of each (a later commit), so that every hunk of the
/// rewrite's inverse lies far from the line it names.
fn rewritten_then_moved(
    server: &TestServer,
    (count, lines, every, moved): (usize, usize, usize, usize),
) -> String {
    let note = |n: usize, changed: bool, top: usize| -> String {
        let mut text: String = (0..top).map(|i| format!("inserted {n} {i}\n")).collect();
        for i in 0..lines {
            if changed && i % every == every / 2 {
                text.push_str(&format!("rewritten line {i} of note {n}\n"));
            } else {
                text.push_str(&format!("note {n} line {i} of ordinary words\n"));
            }
        }
        text
    };
    for n in 0..count {
        server.write(&format!("big/{n}.md"), note(n, false, 0));
    }
    server.commit_all();
    for n in 0..count {
        server.write(&format!("big/{n}.md"), note(n, true, 0));
    }
    server.commit_all();
    let rewrite = server.head();
    for n in 0..count {
        server.write(&format!("big/{n}.md"), note(n, true, moved));
    }
    server.commit_all();
    rewrite
}

#[test]
fn a_revert_into_notes_that_moved_is_refused_past_the_request_s_work() {
    // 20 notes whose 200 hunks each must be searched for over the whole note:
    // each note's inverse is within what one patch may take, all of them are not.
    // (Their text, 18 MB, passes 8 default request bodies, which notes.revert
    // refuses up front: a larger body limit lets the request's work decide.)
    let server = TestServer::start_with(|c| c.max_body_bytes = 4 * 1024 * 1024);
    let rewrite = rewritten_then_moved(&server, (20, 15_000, 75, 6_000));
    let before = repo_state(&server.root);
    // A debug build on a busy machine takes seconds for a request's whole budget: no
    // client timeout decides this spec.
    let refused = common::send(
        server
            .raw()
            .post(format!("{}/mcp/notes/revert", server.url))
            .timeout(Duration::from_secs(600))
            .json(&json!({"commit": rewrite})),
    );
    refused.assert_error(409, "conflict");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("more work than one request may do") && message.contains("`path`"),
        "{message}"
    );
    assert_eq!(repo_state(&server.root), before);
    // One note at a time, the same inverse lands where the note moved to.
    let one = server.post_json(
        "/mcp/notes/revert",
        &json!({"commit": rewrite, "path": "big/7.md"}),
    );
    assert_eq!(one.status, 200, "{one:?}");
    let text = std::fs::read_to_string(server.root.join("big/7.md")).unwrap();
    assert!(text.starts_with("inserted 7 0\n"));
    assert!(!text.contains("rewritten"));
}

#[test]
fn a_revert_of_notes_that_stand_as_the_commit_left_them_puts_back_what_it_found() {
    // Every line of 50 notes rewritten: the inverse is the commit's own diff,
    // which needs no search, whatever the notes' size (their text, before and
    // after, within the 8 request bodies a revert of several notes may rewrite).
    let server = TestServer::start();
    let note = |n: usize, word: &str| -> String {
        (0..2_000)
            .map(|i| format!("{word} {n} line {i} of ordinary words\n"))
            .collect()
    };
    for n in 0..50 {
        server.write(&format!("n{n}.md"), note(n, "note"));
    }
    server.commit_all();
    let (_, _, found) = repo_state(&server.root);
    for n in 0..50 {
        server.write(&format!("n{n}.md"), note(n, "NOTE"));
    }
    server.commit_all();
    let answer = server.post_json("/mcp/notes/revert", &json!({"commit": server.head()}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["changes"].as_array().unwrap().len(), 50);
    assert_eq!(repo_state(&server.root).2, found);
}

/// git in `repo` with `input` on stdin; its trimmed output.
fn git_stdin(repo: &std::path::Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .current_dir(repo)
        .args(["-c", "user.name=p", "-c", "user.email=p@x"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A commit on `remote`'s main whose root tree holds `notes` (name, content)
/// and, beside them, entries Linux cannot hold: a 300-byte name, an absolute
/// name and a file entry pointing at a tree. Built with git's plumbing, as
/// git itself would never build it.
fn push_hostile_tree(remote: &std::path::Path, notes: &[(&str, &str)]) -> String {
    let blob = |text: &str| git_stdin(remote, &["hash-object", "-w", "--stdin"], text.as_bytes());
    let folder = git_stdin(
        remote,
        &["mktree"],
        format!("100644 blob {}\tin.md\n", blob("in\n")).as_bytes(),
    );
    let long = format!("{}.md", "x".repeat(300));
    let mut entries: Vec<(String, &str, String)> = notes
        .iter()
        .map(|(name, text)| (name.to_string(), "100644", blob(text)))
        .collect();
    entries.push((long, "100644", blob("long\n")));
    entries.push(("/abs.md".into(), "100644", blob("absolute\n")));
    entries.push(("folder-as-file.md".into(), "100644", folder));
    entries.sort();
    let mut raw = Vec::new();
    for (name, mode, id) in &entries {
        raw.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        raw.extend((0..20).map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap()));
    }
    let tree = git_stdin(
        remote,
        &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
        &raw,
    );
    let parent = common::git(remote, &["rev-parse", "main"])
        .trim()
        .to_string();
    let commit = git_stdin(
        remote,
        &["commit-tree", &tree, "-p", &parent, "-m", "hostile"],
        b"",
    );
    common::git(remote, &["update-ref", "refs/heads/main", &commit]);
    commit
}

/// mirai syncing with the bare repository `remote` on disk, its root `root`
/// (cloned at start-up when it does not exist yet).
fn local_remote_server(
    dir: tempfile::TempDir,
    root: std::path::PathBuf,
    remote: &std::path::Path,
) -> TestServer {
    let url = remote.to_str().unwrap().to_string();
    TestServer::start_in(dir, root, move |config| {
        config.sync = Some(SyncConfig {
            transport: Transport::of(&url).unwrap(),
            remote: url,
            branch: None,
            credentials: GitCredentials::None,
            interval_secs: 0,
        });
    })
}

#[test]
fn tree_entries_linux_cannot_hold_are_skipped_never_stopping_a_clone_or_a_pull() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    common::git(
        dir.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    let seed = seeded_root(dir.path());
    common::git(&seed, &["push", "-q", remote.to_str().unwrap(), "main"]);

    // A clone made before the hostile commit pulls it, and the one after it.
    let first = local_remote_server(
        tempfile::tempdir().unwrap(),
        dir.path().join("first"),
        &remote,
    );
    assert_eq!(first.read("a.md").body["content"], "alpha\n");
    push_hostile_tree(&remote, &[("a.md", "alpha\n"), ("b.md", "beta\n")]);
    let synced = first.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(synced.status, 200, "{synced:?}");
    assert_eq!(first.read("b.md").body["content"], "beta\n");
    let status = first.get("/mcp/repo/status");
    let skipped = status.body["skipped_paths"].as_array().unwrap().clone();
    let paths: Vec<&str> = skipped
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 3, "{status:?}");
    assert!(
        paths.contains(&"/abs.md") && paths.contains(&"folder-as-file.md"),
        "{paths:?}"
    );
    assert!(skipped
        .iter()
        .all(|s| !s["reason"].as_str().unwrap().is_empty()));
    assert!(!first.root.join("folder-as-file.md").exists());

    // Later commits still arrive, and a clone made now starts.
    let later = push_hostile_tree(
        &remote,
        &[("a.md", "alpha\n"), ("b.md", "beta\n"), ("c.md", "gamma\n")],
    );
    let synced = first.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(synced.status, 200, "{synced:?}");
    assert_eq!(first.head(), later);
    assert_eq!(first.read("c.md").body["content"], "gamma\n");
    let second = local_remote_server(
        tempfile::tempdir().unwrap(),
        dir.path().join("second"),
        &remote,
    );
    assert_eq!(second.head(), later);
    assert_eq!(second.read("c.md").body["content"], "gamma\n");
    assert_eq!(
        second.get("/mcp/repo/status").body["skipped_paths"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // mirai's own commits keep the entries it could not hold, as the remote has them.
    let written = first.post_json(
        "/mcp/notes/write",
        &json!({"path": "d.md", "content": "delta\n"}),
    );
    assert_eq!(written.status, 200, "{written:?}");
    let tree = common::git(&first.root, &["ls-tree", "--name-only", "HEAD"]);
    assert!(
        tree.lines().any(|l| l == "/abs.md") && tree.contains("folder-as-file.md"),
        "{tree}"
    );
    assert!(tree.lines().any(|l| l == "d.md"), "{tree}");
}

#[test]
fn a_flood_of_mcp_sync_calls_holds_no_thread_per_caller() {
    let remote = slow_remote();
    let dir = tempfile::tempdir().unwrap();
    let root = seeded_root(dir.path());
    let url = format!("{}/remote.git", remote.base);
    let server = Child::serve(
        &root,
        &[
            ("MIRAI_GIT_REMOTE", url.as_str()),
            ("MIRAI_SYNC_INTERVAL", "0"),
        ],
    );
    let client = reqwest::blocking::Client::new();
    let mcp = format!("{}/mcp", server.url);
    let initialized = client
        .post(&mcp)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"}}}),
        )
        .send()
        .unwrap();
    let session = initialized.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let before = server.threads();
    let callers: Vec<_> = (0..60)
        .map(|n| {
            let (client, mcp, session) = (client.clone(), mcp.clone(), session.clone());
            std::thread::spawn(move || {
                let answer: serde_json::Value = client
                    .post(mcp)
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-session-id", session)
                    .header("mcp-protocol-version", "2025-06-18")
                    .json(
                        &json!({"jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
                        "params": {"name": "repo_sync", "arguments": {}}}),
                    )
                    .send()
                    .unwrap()
                    .json()
                    .unwrap();
                answer["result"].clone()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    let during = server.threads();
    for caller in callers {
        let result = caller.join().unwrap();
        assert_eq!(result["isError"], true, "{result}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("remote_unavailable"), "{text}");
    }
    assert!(
        during < before + 10,
        "{before} threads, then {during} with 60 MCP calls waiting"
    );
    let runs = fetches(&remote);
    assert!((1..=3).contains(&runs), "{runs} syncs for 60 calls");
}

#[test]
fn a_sandbox_program_waits_for_a_sync_no_longer_than_its_deadline() {
    // Each request to the remote takes 6 s; the program may run for 2 s.
    let remote = Hostile::start(|_, stream| {
        std::thread::sleep(Duration::from_secs(6));
        respond(stream, 503, b"busy");
    });
    let server = slow_remote_server(&remote);
    let answer = server.post_json(
        "/agent/eval",
        &json!({"code": "await mirai.repo.sync(); return 1"}),
    );
    // It answered while the sync still ran: the sync has not failed yet.
    let status = server.get("/mcp/repo/status");
    assert_eq!(
        status.body["last_error"],
        serde_json::Value::Null,
        "{status:?}"
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let error = answer.body["error"].to_string();
    assert!(
        error.contains("deadline") && error.contains("repo.sync"),
        "{answer:?}"
    );
}
