//! Named callers (MIRAI_CALLERS_FILE): each token a person or an agent with its
//! own rights and paths, its name on every commit it makes; what its
//! `read_paths` hide never reaches it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use mirai::config::Config;
use serde_json::{json, Value};

use crate::common::fake_llm::{FakeLlm, Script};
use crate::common::{git, mirai_cli, send, token_sha256, Answer, TestServer};

const WRITER: &str = "writer-token";
const AGENT: &str = "agent-token";
const BOSS: &str = "boss-token";
const READER: &str = "reader-token";
const SELF: &str = "self-token";
const CANARY: &str = "zebracanary";

/// The callers file every spec here serves, mode 600, beside the notes.
fn callers_file(dir: &Path) -> PathBuf {
    let text = format!(
        r#"[[caller]]
name = "writer"
email = "writer@example.org"
token_sha256 = "{}"
can = ["read", "write"]
paths = ["inbox/"]

[[caller]]
name = "agent"
email = "agent@example.org"
token_sha256 = "{}"
can = ["read", "propose"]
paths = ["inbox/"]

[[caller]]
name = "boss"
email = "boss@example.org"
token_sha256 = "{}"
can = ["read", "review"]

[[caller]]
name = "reader"
token_sha256 = "{}"
can = ["read", "write"]
read_paths = ["public/"]

[[caller]]
name = "selfish"
token_sha256 = "{}"
can = ["read", "propose", "review"]
"#,
        token_sha256(WRITER),
        token_sha256(AGENT),
        token_sha256(BOSS),
        token_sha256(READER),
        token_sha256(SELF)
    );
    let path = dir.join("callers.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn server() -> TestServer {
    server_with(|_| {})
}

fn server_with(adjust: impl FnOnce(&mut Config)) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let file = callers_file(dir.path());
    let root = dir.path().join("notes");
    let server = TestServer::start_in(dir, root, |c: &mut Config| {
        c.callers_file = Some(file);
        adjust(c);
    });
    server.write("public/open.md", "# Open\n\nplain words\n");
    server.write(
        "secret/hidden.md",
        format!("# Hidden\n\nthe {CANARY} lives here\n"),
    );
    server.commit_all();
    server
}

fn get(server: &TestServer, token: &str, path: &str) -> Answer {
    send(
        server
            .raw()
            .get(format!("{}{path}", server.url))
            .bearer_auth(token),
    )
}

fn post(server: &TestServer, token: &str, path: &str, body: Value) -> Answer {
    send(
        server
            .raw()
            .post(format!("{}{path}", server.url))
            .bearer_auth(token)
            .json(&body),
    )
}

#[test]
fn a_callers_write_names_it_and_stays_inside_its_paths() {
    let server = server();
    let none = send(server.raw().get(format!("{}/mcp/notes", server.url)));
    none.assert_error(401, "unauthorized");

    let wrote = post(
        &server,
        WRITER,
        "/mcp/notes/write",
        json!({"path": "inbox/idea.md", "content": "an idea\n"}),
    );
    assert_eq!(wrote.status, 200, "{wrote:?}");
    let author = git(&server.root, &["log", "-1", "--format=%an <%ae>|%cn|%B"]);
    assert!(
        author.starts_with("writer <writer@example.org>|mirai|"),
        "{author}"
    );
    assert!(author.contains("\nMirai-Caller: writer\n"), "{author}");
    let history = get(&server, BOSS, "/mcp/notes/history?limit=1");
    let newest = &history.body["commits"][0];
    assert_eq!(
        (&newest["author"], &newest["caller"]),
        (&json!("writer"), &json!("writer")),
        "{history:?}"
    );

    let head = server.head();
    let outside = post(
        &server,
        WRITER,
        "/mcp/notes/write",
        json!({"path": "public/open.md", "content": "taken over\n"}),
    );
    outside.assert_error(403, "policy_denied");
    assert!(outside.body.to_string().contains("inbox/"), "{outside:?}");
    assert_eq!(server.head(), head);

    // No review right: deciding is refused before the row.
    post(
        &server,
        WRITER,
        "/mcp/proposals/approve",
        json!({"id": "x"}),
    )
    .assert_error(403, "policy_denied");
}

#[test]
fn a_proposer_gets_proposals_in_allow_all_and_another_caller_decides() {
    let server = server();
    let head = server.head();
    let proposed = post(
        &server,
        AGENT,
        "/mcp/notes/write",
        json!({"path": "inbox/plan.md", "content": "the plan\n"}),
    );
    assert_eq!(proposed.status, 202, "{proposed:?}");
    assert_eq!(server.head(), head, "a proposal commits nothing");
    let id = proposed.body["proposal"].as_str().unwrap().to_string();
    let shown = get(&server, BOSS, &format!("/mcp/proposals/get?id={id}"));
    assert_eq!(shown.body["requested_by"]["caller"], "agent", "{shown:?}");

    post(&server, AGENT, "/mcp/proposals/approve", json!({"id": id}))
        .assert_error(403, "policy_denied");
    let approved = post(&server, BOSS, "/mcp/proposals/approve", json!({"id": id}));
    assert_eq!(approved.status, 200, "{approved:?}");
    let log = git(&server.root, &["log", "-1", "--format=%an|%cn|%B"]);
    assert!(log.starts_with("agent|mirai|"), "{log}");
    assert!(log.contains("Mirai-Caller: agent"), "{log}");
    let decided = get(&server, BOSS, &format!("/mcp/proposals/get?id={id}"));
    assert_eq!(decided.body["decided_by"], "boss", "{decided:?}");
    let listed = get(&server, AGENT, "/mcp/proposals?status=applied");
    assert_eq!(
        listed.body["proposals"][0]["requested_by"]["caller"], "agent",
        "{listed:?}"
    );
    assert_eq!(listed.body["proposals"][0]["decided_by"], "boss");
    // History names the caller who asked, not the reviewer who approved.
    let history = get(&server, AGENT, "/mcp/notes/history?path=inbox/plan.md");
    assert_eq!(history.body["commits"][0]["caller"], "agent", "{history:?}");
}

#[test]
fn a_caller_never_approves_its_own_proposal() {
    let server = server();
    let proposed = post(
        &server,
        SELF,
        "/mcp/notes/write",
        json!({"path": "public/mine.md", "content": "mine\n"}),
    );
    assert_eq!(proposed.status, 202, "{proposed:?}");
    let id = proposed.body["proposal"].as_str().unwrap();
    let own = post(&server, SELF, "/mcp/proposals/approve", json!({"id": id}));
    own.assert_error(403, "policy_denied");
    assert!(own.body.to_string().contains("self_review"), "{own:?}");
    let other = post(&server, BOSS, "/mcp/proposals/approve", json!({"id": id}));
    assert_eq!(other.status, 200, "{other:?}");
}

#[test]
fn what_read_paths_hide_never_reaches_the_caller() {
    let server = server();
    let answers = [
        get(&server, READER, "/mcp/notes"),
        get(&server, READER, "/mcp/notes/read?path=secret/hidden.md"),
        get(&server, READER, &format!("/mcp/index/query?q={CANARY}")),
        get(&server, READER, "/mcp/index/query?q=hidden&limit=50"),
        get(&server, READER, "/mcp/notes/read?path=secret/hiden.md"),
        post(
            &server,
            READER,
            "/mcp/notes/read_batch",
            json!({"paths": ["public/open.md", "secret/hidden.md"]}),
        ),
        get(&server, READER, "/mcp/notes/history"),
        get(&server, READER, "/mcp/notes/history?path=secret/hidden.md"),
        get(&server, READER, "/mcp/notes/tags"),
        get(&server, READER, "/mcp/notes/graph"),
        get(&server, READER, "/mcp/notes/diff?commit=HEAD~0"),
        get(
            &server,
            READER,
            "/mcp/notes/read?path=secret/hidden.md&rev=HEAD~0",
        ),
    ];
    for (i, answer) in answers.iter().enumerate() {
        let mut body = answer.body.clone();
        body.as_object_mut().map(|o| o.remove("query")); // the caller's own words, echoed
        let text = body.to_string();
        assert!(!text.contains(CANARY), "{text}");
        // A read of the hidden note echoes only the path it was asked for.
        if ![1, 5, 7, 11].contains(&i) {
            assert!(!text.contains("secret/hidden.md"), "{text}");
        }
    }
    answers[5].assert_error(404, "not_found");
    assert_eq!(answers[2].body["chunks"], json!([]));
    answers[7].assert_error(404, "not_found");
    answers[11].assert_error(404, "not_found");
    assert!(
        answers[10].body.to_string().contains("public/open.md"),
        "{:?}",
        answers[10]
    );
    let history = answers[6].body.to_string();
    assert!(history.contains("public/open.md"), "{history}");
    assert_eq!(answers[0].body["notes"], json!(["public/open.md"]));
    answers[1].assert_error(404, "not_found");
    // Writing where it cannot read is refused on the path alone.
    post(
        &server,
        READER,
        "/mcp/notes/write",
        json!({"path": "secret/hidden.md", "content": "x\n"}),
    )
    .assert_error(403, "policy_denied");
    // Another caller sees everything.
    let all = get(&server, BOSS, &format!("/mcp/index/query?q={CANARY}"));
    assert!(all.body.to_string().contains("secret/hidden.md"), "{all:?}");
}

#[test]
fn the_sandbox_and_mcp_keep_the_callers_rights() {
    let server = server();
    let eval = post(
        &server,
        WRITER,
        "/agent/eval",
        json!({"code": "return await mirai.notes.write({path: 'public/x.md', content: 'x\\n'})"}),
    );
    assert_eq!(eval.status, 200, "{eval:?}");
    assert_eq!(eval.body["error"]["code"], "policy_denied", "{eval:?}");
    let mcp: Value = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .bearer_auth(READER)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "resources/list")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list",
            "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .unwrap()
        .json()
        .unwrap();
    let text = mcp.to_string();
    assert!(text.contains("public/open.md"), "{text}");
    assert!(!text.contains("secret"), "{text}");
}

#[test]
fn a_file_others_may_read_stops_start_up_and_the_cli_adds_and_lists() {
    let dir = tempfile::tempdir().unwrap();
    let file = callers_file(dir.path());
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = mirai_cli().args(["ops"]).output().unwrap();
    assert!(out.status.success());
    let out = mirai_cli()
        .env("MIRAI_CALLERS_FILE", &file)
        .env("NOTES_ROOT", dir.path().join("notes"))
        .args(["call", "notes.list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("chmod 600"));

    let fresh = dir.path().join("fresh.toml");
    let added = mirai_cli()
        .args([
            "callers",
            "add",
            "bot",
            "--can",
            "read,write,propose",
            "--paths",
            "inbox/",
        ])
        .env("MIRAI_CALLERS_FILE", &fresh)
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let token = String::from_utf8(added.stdout).unwrap().trim().to_string();
    assert_eq!(token.len(), 64);
    let stored = std::fs::read_to_string(&fresh).unwrap();
    assert!(stored.contains(&token_sha256(&token)) && !stored.contains(&token));
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0);
    let listed = mirai_cli()
        .args(["callers", "list"])
        .env("MIRAI_CALLERS_FILE", &fresh)
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(
        listed.starts_with("bot\tcan=read,write,propose\tpaths=inbox/"),
        "{listed}"
    );
    assert!(!listed.contains(&token_sha256(&token)));
}

#[test]
fn mirai_call_as_a_caller_has_its_rights() {
    let server = server();
    let file = server.dir.path().join("callers.toml");
    let call = |name: &str, op: &str, request: &str| {
        mirai_cli()
            .env("MIRAI_CALLERS_FILE", &file)
            .env("NOTES_ROOT", &server.root)
            .args(["call", "--as", name, op, request])
            .output()
            .unwrap()
    };
    let out = call("reader", "notes.list", "{}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !text.contains("secret"), "{text}");
    let out = call(
        "writer",
        "notes.write",
        r#"{"path":"public/x.md","content":"x\n"}"#,
    );
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    let out = call(
        "writer",
        "notes.write",
        r#"{"path":"inbox/cli.md","content":"x\n"}"#,
    );
    assert!(out.status.success(), "{out:?}");
    let log = git(&server.root, &["log", "-1", "--format=%an|%B"]);
    assert!(
        log.starts_with("writer|") && log.contains("Mirai-Caller: writer"),
        "{log}"
    );
}

/// `mirai serve` as its own process, so it can be sent SIGHUP.
struct Served {
    process: std::process::Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

#[test]
fn sighup_reloads_the_callers_while_requests_run_and_a_bad_file_keeps_the_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let file = callers_file(dir.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let process = mirai_cli()
        .args(["serve", "--port", &port.to_string(), "--notes-root"])
        .arg(dir.path().join("notes"))
        .env("MIRAI_CALLERS_FILE", &file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let served = Served {
        process,
        url: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::blocking::Client::new();
    let status = |token: &str| {
        client
            .get(format!("{}/mcp/notes", served.url))
            .bearer_auth(token)
            .send()
            .map(|r| r.status().as_u16())
    };
    let started = std::time::Instant::now();
    while status(BOSS).is_err() {
        assert!(started.elapsed().as_secs() < 60, "mirai did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(status("late-token").unwrap(), 401);

    // Requests keep running across the reload; none is refused or dropped.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let running = {
        let (stop, url) = (stop.clone(), served.url.clone());
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            let mut answered = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let answer = client
                    .get(format!("{url}/mcp/notes"))
                    .bearer_auth(BOSS)
                    .send();
                assert_eq!(answer.unwrap().status().as_u16(), 200);
                answered += 1;
            }
            answered
        })
    };
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!(
        "\n[[caller]]\nname = \"late\"\ntoken_sha256 = \"{}\"\ncan = [\"read\"]\n",
        token_sha256("late-token")
    ));
    std::fs::write(&file, &text).unwrap();
    let hangup = |pid: u32| {
        std::process::Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    };
    assert!(hangup(served.process.id()));
    let started = std::time::Instant::now();
    while status("late-token").unwrap() != 200 {
        assert!(started.elapsed().as_secs() < 10, "the reload did not take");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    // A file with a problem is refused whole: the callers before it stay.
    std::fs::write(&file, format!("{text}\nbogus = 1\n")).unwrap();
    assert!(hangup(served.process.id()));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(status("late-token").unwrap(), 200);
    assert_eq!(status(BOSS).unwrap(), 200);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(running.join().unwrap() > 0);
}

#[test]
fn read_paths_hide_attachments_and_the_notes_that_embed_them() {
    let server = server();
    std::fs::create_dir_all(server.root.join("secret")).unwrap();
    std::fs::write(server.root.join("secret/plan.png"), b"\x89PNG\r\n\x1a\nzz").unwrap();
    std::fs::create_dir_all(server.root.join("public")).unwrap();
    std::fs::write(server.root.join("public/logo.png"), b"\x89PNG\r\n\x1a\nyy").unwrap();
    server.write("secret/uses.md", "# Uses\n\n![[public/logo.png]]\n");
    server.commit_all();
    let list = get(&server, READER, "/mcp/files");
    assert_eq!(list.status, 200, "{list:?}");
    let text = list.body.to_string();
    assert!(text.contains("public/logo.png"), "{text}");
    // Neither the hidden file nor the hidden note that links the visible one.
    assert!(!text.contains("secret/"), "{text}");
    get(&server, READER, "/mcp/files/read?path=secret/plan.png").assert_error(404, "not_found");
    get(
        &server,
        READER,
        "/mcp/files/read?path=secret/plan.png&rev=HEAD",
    )
    .assert_error(404, "not_found");
    // Another caller sees both, and who links the logo.
    let all = get(&server, BOSS, "/mcp/files").body.to_string();
    assert!(
        all.contains("secret/plan.png") && all.contains("secret/uses.md"),
        "{all}"
    );
    let bytes = server
        .raw()
        .get(format!(
            "{}/mcp/files/read?path=secret/plan.png",
            server.url
        ))
        .bearer_auth(BOSS)
        .send()
        .unwrap();
    assert_eq!(bytes.status(), 200);
    assert_eq!(bytes.bytes().unwrap().as_ref(), b"\x89PNG\r\n\x1a\nzz");
}

#[test]
fn the_change_stream_never_tells_a_caller_of_a_note_it_cannot_read() {
    use std::io::{BufRead, BufReader};
    let server = server();
    let client = reqwest::blocking::Client::builder()
        .timeout(None::<std::time::Duration>)
        .build()
        .unwrap();
    let response = client
        .get(format!("{}/events?types=commit", server.url))
        .bearer_auth(READER)
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The writer's note is outside the reader's read_paths; the reader's own is inside.
    let hidden = post(
        &server,
        WRITER,
        "/mcp/notes/write",
        json!({"path": "inbox/plan.md", "content": format!("the {CANARY}\n")}),
    );
    assert_eq!(hidden.status, 200, "{hidden:?}");
    let seen = post(
        &server,
        READER,
        "/mcp/notes/write",
        json!({"path": "public/second.md", "content": "visible\n"}),
    );
    assert_eq!(seen.status, 200, "{seen:?}");
    let mut read = Vec::new();
    while !read.iter().any(|l: &String| l.contains("public/second.md")) {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no event for public/second.md; read {read:#?}"));
        read.push(line);
    }
    let text = read.join("\n");
    assert!(!text.contains("inbox/") && !text.contains(CANARY), "{text}");
    // One commit told: the reader's (the writer's is only its parent's id, as git has it).
    assert_eq!(text.matches("event: commit").count(), 1, "{text}");
    assert!(text.contains(r#""caller":"reader""#), "{text}");
}

#[test]
fn an_mcp_subscription_to_a_hidden_note_is_never_told_of_it() {
    use std::io::{BufRead, BufReader};
    let server = server();
    let post_mcp = |session: Option<&str>, body: Value| {
        let mut request = server
            .raw()
            .post(format!("{}/mcp", server.url))
            .bearer_auth(READER)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(id) = session {
            request = request.header("mcp-session-id", id);
        }
        request.send().unwrap()
    };
    let opened = post_mcp(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    assert_eq!(opened.status().as_u16(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    for uri in [
        "mirai://notes/secret/hidden.md",
        "mirai://notes/public/open.md",
    ] {
        let answer: Value = post_mcp(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}}),
        )
        .json()
        .unwrap();
        // The same answer for both: nothing says the hidden note is there.
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
    let stream = reqwest::blocking::Client::builder()
        .timeout(None::<std::time::Duration>)
        .build()
        .unwrap()
        .get(format!("{}/mcp", server.url))
        .bearer_auth(READER)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    server.write(
        "secret/hidden.md",
        format!("# Hidden\n\nthe {CANARY} moved\n"),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    server.write("public/open.md", "# Open\n\nnew words\n");
    let mut read = Vec::new();
    while !read.iter().any(|l: &String| l.contains("public/open.md")) {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no notification for public/open.md; read {read:#?}"));
        read.push(line);
    }
    // Whatever else came with it or right after.
    while let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(1)) {
        read.push(line);
    }
    let text = read.join("\n");
    assert!(!text.contains("secret/"), "{text}");
}

/// The code both runs below send: read the hidden note, search a word of it.
const PEEK: &str = r#"<think>Look.</think><code>let r; try { r = (await mirai.notes.read({path: "secret/hidden.md"})).content; } catch (e) { r = e.code; } const q = await mirai.index.query({q: "lives"}); return {r, hits: q.chunks.length};</code>"#;
const ANSWERED: &str = "<think>Said.</think><reply>Here is what the note holds.</reply>";

#[test]
fn a_run_has_its_starters_rights_and_a_scoped_caller_sees_only_its_own_runs() {
    let llm = FakeLlm::start(Script::answering(&[
        PEEK.into(),
        ANSWERED.into(),
        PEEK.into(),
        ANSWERED.into(),
    ]));
    let base_url = llm.base_url.clone();
    let server = server_with(|c| {
        c.llm.base_url = base_url;
        c.llm.model = "fake-model".into();
    });
    // The reader's change stream, open before either run starts.
    let (tx, told) = std::sync::mpsc::channel::<String>();
    let stream = reqwest::blocking::Client::builder()
        .timeout(None::<std::time::Duration>)
        .build()
        .unwrap()
        .get(format!("{}/events?types=run", server.url))
        .bearer_auth(READER)
        .send()
        .unwrap();
    assert_eq!(stream.status(), 200);
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let task = json!({"task": "What does the hidden note say?"});
    let boss_run = post(&server, BOSS, "/agent/run", task.clone());
    assert_eq!(boss_run.status, 200, "{boss_run:?}");
    assert!(boss_run.body.to_string().contains(CANARY), "{boss_run:?}");
    let asked_by_boss = llm.requests().len();
    let reader_run = post(&server, READER, "/agent/run", task);
    assert_eq!(reader_run.status, 200, "{reader_run:?}");
    // The reader's run read with the reader's rights: the note is not there, nor its word.
    assert_eq!(
        reader_run.body["steps"][0]["result"],
        json!({"r": "not_found", "hits": 0}),
        "{reader_run:?}"
    );
    assert!(!reader_run.body.to_string().contains(CANARY));
    let sent_for_reader = serde_json::to_string(&llm.requests()[asked_by_boss..]).unwrap();
    assert!(!sent_for_reader.contains(CANARY), "{sent_for_reader}");
    let (boss_id, reader_id) = (
        boss_run.body["run_id"].as_str().unwrap(),
        reader_run.body["run_id"].as_str().unwrap(),
    );

    // Its stream told of its own run and never of the boss's.
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.contains(reader_id) && l.contains("ended"))
    {
        let line = told
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the reader's run never ended on its stream: {lines:#?}"));
        lines.push(line);
    }
    assert!(!lines.join("\n").contains(boss_id), "{lines:#?}");

    // The reader lists and reads only its own run; the boss's is as missing as none.
    let listed = get(&server, READER, "/agent/runs");
    assert_eq!(listed.status, 200, "{listed:?}");
    let runs = listed.body.as_array().unwrap();
    assert_eq!(runs.len(), 1, "{listed:?}");
    assert_eq!(runs[0]["run_id"], reader_id);
    assert_eq!(runs[0]["caller"], "reader");
    let own = get(&server, READER, &format!("/agent/runs/{reader_id}"));
    assert_eq!(own.status, 200, "{own:?}");
    assert_eq!(own.body["caller"], "reader");
    assert_eq!(own.body["events"][0]["caller"], "reader");
    assert!(!own.body.to_string().contains(CANARY), "{own:?}");
    let others = get(&server, READER, &format!("/agent/runs/{boss_id}"));
    others.assert_error(404, "not_found");
    let none = get(
        &server,
        READER,
        "/agent/runs/0192f0c4-0000-7000-8000-000000000001",
    );
    assert_eq!(
        others.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace(boss_id, "ID"),
        none.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace("0192f0c4-0000-7000-8000-000000000001", "ID")
    );

    // A caller that reads everything sees every run, each naming its caller.
    let all = get(&server, BOSS, "/agent/runs");
    let callers: Vec<&str> = all
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["caller"].as_str().unwrap())
        .collect();
    assert_eq!(callers, ["reader", "boss"], "{all:?}");
    let boss_transcript = get(&server, WRITER, &format!("/agent/runs/{boss_id}"));
    assert_eq!(boss_transcript.body["caller"], "boss");
    assert!(boss_transcript.body.to_string().contains(CANARY));

    // Code mode keeps the asker's rights too.
    let eval = post(
        &server,
        READER,
        "/agent/eval",
        json!({"code": PEEK.split("<code>").nth(1).unwrap().trim_end_matches("</code>")}),
    );
    assert_eq!(eval.status, 200, "{eval:?}");
    assert_eq!(
        eval.body["result"],
        json!({"r": "not_found", "hits": 0}),
        "{eval:?}"
    );
}

/// `mirai mcp --as NAME` as a child process, spoken to over its stdin and stdout.
struct StdioMcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    id: u64,
}

impl StdioMcp {
    fn start(server: &TestServer, name: &str) -> StdioMcp {
        let mut child = mirai_cli()
            .args(["mcp", "--as", name, "--notes-root"])
            .arg(&server.root)
            .env("MIRAI_CALLERS_FILE", server.dir.path().join("callers.toml"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut mcp = StdioMcp {
            child,
            stdin,
            stdout,
            id: 0,
        };
        let opened = mcp.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "spec", "version": "1"}}),
        );
        assert!(opened["result"].is_object(), "{opened}");
        mcp
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        use std::io::{BufRead, Write};
        self.id += 1;
        let message = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    fn tool(&mut self, name: &str, arguments: Value) -> Value {
        self.call("tools/call", json!({"name": name, "arguments": arguments}))
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mirai_mcp_on_stdio_as_a_caller_has_its_rights_and_its_name() {
    let server = server();
    let mut reader = StdioMcp::start(&server, "reader");
    let answers = [
        reader.tool("notes_list", json!({})),
        reader.tool("notes_read", json!({"path": "secret/hidden.md"})),
        reader.tool("index_query", json!({"q": "lives"})),
        reader.tool("notes_history", json!({})),
        reader.call("resources/list", json!({})),
        reader.call(
            "resources/read",
            json!({"uri": "mirai://notes/secret/hidden.md"}),
        ),
    ];
    for answer in &answers {
        let text = answer.to_string();
        assert!(!text.contains(CANARY), "{text}");
    }
    assert!(answers[0].to_string().contains("public/open.md"));
    assert!(
        !answers[0].to_string().contains("secret/"),
        "{}",
        answers[0]
    );
    assert_eq!(answers[1]["result"]["isError"], true, "{}", answers[1]);
    assert!(
        answers[1].to_string().contains("not_found"),
        "{}",
        answers[1]
    );
    assert!(
        !answers[2].to_string().contains("secret/"),
        "{}",
        answers[2]
    );
    assert!(
        !answers[4].to_string().contains("secret/"),
        "{}",
        answers[4]
    );
    let denied = reader.tool(
        "notes_write",
        json!({"path": "secret/new.md", "content": "x\n"}),
    );
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(denied.to_string().contains("policy_denied"), "{denied}");
    drop(reader);

    // A writer's session writes as the writer, inside its paths only.
    let mut writer = StdioMcp::start(&server, "writer");
    let wrote = writer.tool(
        "notes_write",
        json!({"path": "inbox/stdio.md", "content": "from stdio\n"}),
    );
    assert_eq!(wrote["result"]["isError"], false, "{wrote}");
    let log = git(&server.root, &["log", "-1", "--format=%an <%ae>|%cn|%B"]);
    assert!(
        log.starts_with("writer <writer@example.org>|mirai|")
            && log.contains("Mirai-Caller: writer"),
        "{log}"
    );
    let outside = writer.tool(
        "notes_write",
        json!({"path": "public/taken.md", "content": "x\n"}),
    );
    assert!(outside.to_string().contains("policy_denied"), "{outside}");
    drop(writer);

    // An unknown name stops before serving.
    let out = mirai_cli()
        .args(["mcp", "--as", "nobody", "--notes-root"])
        .arg(&server.root)
        .env("MIRAI_CALLERS_FILE", server.dir.path().join("callers.toml"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no caller named \"nobody\""));
}

#[test]
fn the_canary_never_reaches_a_scoped_caller_through_embeds_links_diffs_or_proposals() {
    let server = server();
    server.write(
        "public/embeds.md",
        "# Embeds\n\n![[secret/hidden]]\n\nSee [[secret/hidden]].\n\nAnd [[public/open]].\n",
    );
    server.write(
        "secret/links.md",
        format!("# Links\n\n[[public/open]] and the {CANARY}.\n"),
    );
    server.commit_all(); // one commit touching a visible and a hidden note
    let proposed = post(
        &server,
        SELF,
        "/mcp/notes/append",
        json!({"path": "secret/hidden.md", "text": format!("more {CANARY}\n")}),
    );
    assert_eq!(proposed.status, 202, "{proposed:?}");
    let id = proposed.body["proposal"].as_str().unwrap();
    let mcp_read = |uri: &str| -> Value {
        server
            .raw()
            .post(format!("{}/mcp", server.url))
            .bearer_auth(READER)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "resources/read")
            .header("mcp-name", uri)
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                "params": {"uri": uri, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    // (answer, whether it may name secret/links.md: it echoes the path asked for)
    let answers: Vec<(Value, bool)> = vec![
        (
            get(&server, READER, "/mcp/notes/render?path=public/embeds.md").body,
            false,
        ),
        (
            get(&server, READER, "/mcp/notes/links?path=public/embeds.md").body,
            false,
        ),
        (
            get(&server, READER, "/mcp/notes/links?path=public/open.md").body,
            false,
        ),
        (
            get(&server, READER, "/mcp/notes/outline?path=secret/hidden.md").body,
            false,
        ),
        (
            post(
                &server,
                READER,
                "/mcp/patch/make",
                json!({"path": "secret/hidden.md", "content": "x\n"}),
            )
            .body,
            true,
        ),
        (get(&server, READER, "/mcp/proposals").body, false),
        (
            get(&server, READER, &format!("/mcp/proposals/get?id={id}")).body,
            false,
        ),
        (
            get(&server, READER, "/mcp/notes/diff?commit=HEAD~0").body,
            false,
        ),
        (
            get(
                &server,
                READER,
                "/mcp/notes/diff?from=HEAD~1&to=HEAD~0&path=secret/links.md",
            )
            .body,
            true,
        ),
        (get(&server, READER, "/mcp/notes/history").body, false),
        (
            get(
                &server,
                READER,
                "/mcp/index/query?q=open&group=note&limit=50",
            )
            .body,
            false,
        ),
        (get(&server, READER, "/mcp/notes/graph").body, false),
        (mcp_read("mirai://notes/secret/links.md"), true),
    ];
    for (i, (body, may_name)) in answers.iter().enumerate() {
        let text = body.to_string();
        assert!(!text.contains(CANARY), "answer {i}: {text}");
        // The hidden note no visible note names is never named unasked.
        if !may_name {
            assert!(!text.contains("secret/links"), "answer {i}: {text}");
        }
    }
    // Nor is the hidden note a proposal changes.
    for i in [5, 6] {
        assert!(
            !answers[i].0.to_string().contains("secret/"),
            "{:?}",
            answers[i]
        );
    }
    // The visible commit is told, with only its visible note.
    let history = answers[9].0.to_string();
    assert!(history.contains("public/embeds.md"), "{history}");
    assert!(
        answers[7].0.to_string().contains("public/embeds.md"),
        "{:?}",
        answers[7]
    );
    for i in [3, 4, 8] {
        assert_eq!(
            answers[i].0["error"]["code"], "not_found",
            "{:?}",
            answers[i]
        );
    }
    assert!(answers[12].0["error"].is_object(), "{:?}", answers[12]);
    assert_eq!(answers[5].0["proposals"], json!([]));
    assert_eq!(answers[6].0["error"]["code"], "not_found");
    // The one who may read it sees the canary in the same places.
    let boss = get(&server, BOSS, "/mcp/notes/diff?commit=HEAD~0");
    assert!(boss.body.to_string().contains(CANARY), "{boss:?}");
    let boss = get(&server, BOSS, &format!("/mcp/proposals/get?id={id}"));
    assert!(boss.body.to_string().contains(CANARY), "{boss:?}");
}

/// The paths of a query's hits for `token`.
fn found(server: &TestServer, token: &str, q: &str) -> Vec<String> {
    let answer = get(server, token, &format!("/mcp/index/query?q={q}&limit=50"));
    assert_eq!(answer.status, 200, "{answer:?}");
    let mut paths = crate::common::hit_paths(&answer.body);
    paths.dedup();
    paths
}

#[test]
fn a_scoped_callers_search_and_tags_follow_every_write() {
    // A scoped caller's index and link graph are made once and kept while
    // the index does not change: each write must show in its next answer.
    let server = server();
    assert_eq!(found(&server, READER, "plain"), ["public/open.md"]);
    assert!(found(&server, READER, "lives").is_empty());
    let wrote = post(
        &server,
        READER,
        "/mcp/notes/write",
        json!({"path": "public/new.md", "content": "mango season #fruit\n"}),
    );
    assert_eq!(wrote.status, 200, "{wrote:?}");
    assert_eq!(found(&server, READER, "mango"), ["public/new.md"]);
    let tags = get(&server, READER, "/mcp/notes/tags");
    assert!(tags.body.to_string().contains("fruit"), "{tags:?}");
    // A note written where the caller cannot read never shows, before or after.
    let wrote = post(
        &server,
        WRITER,
        "/mcp/notes/write",
        json!({"path": "inbox/mango.md", "content": "mango zebracanary #hiddentag\n"}),
    );
    assert_eq!(wrote.status, 200, "{wrote:?}");
    assert_eq!(
        found(&server, BOSS, "mango"),
        ["inbox/mango.md", "public/new.md"]
    );
    assert_eq!(found(&server, READER, "mango"), ["public/new.md"]);
    let tags = get(&server, READER, "/mcp/notes/tags");
    assert!(!tags.body.to_string().contains("hiddentag"), "{tags:?}");
    // Deleted: gone from the next answer too.
    let deleted = post(
        &server,
        READER,
        "/mcp/notes/delete",
        json!({"path": "public/new.md"}),
    );
    assert_eq!(deleted.status, 200, "{deleted:?}");
    assert!(found(&server, READER, "mango").is_empty());
    // A link into the hidden folder made after the caller's last search hides its note too.
    std::os::unix::fs::symlink("../secret/hidden.md", server.root.join("public/peek.md")).unwrap();
    server.commit_all();
    let answer = get(&server, READER, "/mcp/index/query?q=lives&limit=50");
    assert!(!answer.body.to_string().contains(CANARY), "{answer:?}");
    assert_eq!(
        found(&server, BOSS, "lives"),
        ["public/peek.md", "secret/hidden.md"]
    );
}

#[test]
fn an_operators_link_in_a_visible_folder_never_shows_a_hidden_note() {
    let server = server();
    let link = |target: &str, at: &str| {
        std::os::unix::fs::symlink(target, server.root.join(at)).unwrap();
    };
    link("../secret/hidden.md", "public/peek.md");
    link("../secret", "public/door");
    link("open.md", "public/alias.md");
    std::fs::write(server.root.join("secret/plan.png"), b"\x89PNG\r\n\x1a\nzz").unwrap();
    link("../secret/plan.png", "public/plan.png");
    server.commit_all();
    let answers = [
        get(&server, READER, "/mcp/notes"),
        get(&server, READER, "/mcp/notes/read?path=public/peek.md"),
        get(
            &server,
            READER,
            "/mcp/notes/read?path=public/door/hidden.md",
        ),
        post(
            &server,
            READER,
            "/mcp/notes/read_batch",
            json!({"paths": ["public/peek.md"]}),
        ),
        get(&server, READER, "/mcp/index/query?q=lives&limit=50"),
        get(&server, READER, "/mcp/notes/outline?path=public/peek.md"),
        get(&server, READER, "/mcp/notes/tags"),
    ];
    for (i, answer) in answers.iter().enumerate() {
        assert!(
            !answer.body.to_string().contains(CANARY),
            "answer {i}: {answer:?}"
        );
    }
    // Listed: only what leads somewhere visible.
    assert_eq!(
        answers[0].body["notes"],
        json!(["public/alias.md", "public/open.md"]),
        "{:?}",
        answers[0]
    );
    for i in [1, 2, 3, 5] {
        answers[i].assert_error(404, "not_found");
    }
    // In the very words of a note that is not there.
    let missing = get(&server, READER, "/mcp/notes/read?path=public/nothing.md");
    assert_eq!(
        answers[1].body["error"]["message"]
            .as_str()
            .unwrap()
            .replace("public/peek.md", "P"),
        missing.body["error"]["message"]
            .as_str()
            .unwrap()
            .replace("public/nothing.md", "P"),
    );
    assert_eq!(answers[4].body["chunks"], json!([]), "{:?}", answers[4]);
    let alias = get(&server, READER, "/mcp/notes/read?path=public/alias.md");
    assert_eq!(
        alias.body["content"], "# Open\n\nplain words\n",
        "{alias:?}"
    );
    // An attachment behind such a link is as missing.
    get(&server, READER, "/mcp/files/read?path=public/plan.png").assert_error(404, "not_found");
    // The caller that reads everything reads through the link.
    let through = server
        .raw()
        .get(format!(
            "{}/mcp/files/read?path=public/plan.png",
            server.url
        ))
        .bearer_auth(BOSS)
        .send()
        .unwrap();
    assert_eq!(through.status(), 200);
    let boss = get(&server, BOSS, "/mcp/notes/read?path=public/peek.md");
    assert!(
        boss.body["content"].as_str().unwrap().contains(CANARY),
        "{boss:?}"
    );
}
