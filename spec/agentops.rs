//! Agent operations over the real server (issue 19): the rows a model reaches
//! for (`notes.delete`, `notes.append`, `notes.insert`) over HTTP, `not_found`
//! answers that suggest the closest notes and headings, and the guards against
//! destructive writes through the sandbox, MCP and plain HTTP, with writes that
//! must pass and writes that must be refused.

use crate::common;

use common::{git, guest_cache, mirai_cli, Answer, TestServer};
use mirai::config::GuardMode;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

const GARDEN: &str = "# Garden\n\n## Plans\n\nMore herbs this year.\n\n```sh\n# not a heading\n```\n\n## Tomatoes\n\nStake them early.\n- one\n- one\n";

/// A note of 32 lines: long enough for the shrink guard.
fn long_note() -> String {
    let mut note = String::from("# Log\n\n");
    for i in 1..=30 {
        note.push_str(&format!("- entry {i}\n"));
    }
    note
}

fn message(answer: &Answer) -> &str {
    answer.body["error"]["message"].as_str().unwrap_or_default()
}

fn subject(server: &TestServer) -> String {
    git(&server.root, &["log", "-1", "--format=%s"])
        .trim()
        .to_string()
}

fn clean(server: &TestServer) -> bool {
    git(&server.root, &["status", "--porcelain"])
        .trim()
        .is_empty()
}

/// Runs `code` in the sandbox through `/agent/eval`.
fn eval(server: &TestServer, code: &str) -> Value {
    let answer = server.post_json("/agent/eval", &json!({ "code": code }));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

#[test]
fn notes_delete_commits_a_deletion_on_patch_applys_path() {
    let server = TestServer::with_note("scratch.md", "# Scratch\n\nloose\n");
    server.write("empty.md", "");
    server.commit_all();
    let head = server.head();

    let answer = server.post_json(
        "/mcp/notes/delete",
        &json!({"path": "scratch.md", "base_commit": head}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["path"], "scratch.md");
    assert_eq!(answer.body["net_line_delta"], -3);
    assert!(answer.body["patch"]
        .as_str()
        .unwrap()
        .contains("\n+++ /dev/null\n"));
    assert_eq!(answer.body["commit"], server.head());
    assert!(!server.root.join("scratch.md").exists());
    assert_eq!(subject(&server), "mcp.patch_apply: scratch.md");
    assert!(clean(&server));

    // An empty note, which no diff can delete, is deleted too.
    let answer = server.post_json("/mcp/notes/delete", &json!({"path": "empty.md"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(!server.root.join("empty.md").exists());
    assert_eq!(subject(&server), "mcp.patch_apply: empty.md");

    // Gone now: not_found, and nothing else changes.
    let count = server.commit_count();
    server
        .post_json("/mcp/notes/delete", &json!({"path": "scratch.md"}))
        .assert_error(404, "not_found");
    server
        .post_json("/mcp/notes/delete", &json!({}))
        .assert_error(400, "invalid_request");
    assert_eq!(server.commit_count(), count);
}

#[test]
fn notes_append_adds_a_line_of_its_own() {
    let server = TestServer::with_note("a.md", "a\nb");
    server.write("crlf.md", "x\r\ny\r\n");
    server.commit_all();

    let answer = server.post_json("/mcp/notes/append", &json!({"path": "a.md", "text": "c"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["net_line_delta"], 1);
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "a\nb\nc\n"
    );
    assert_eq!(subject(&server), "mcp.patch_apply: a.md");
    assert!(clean(&server));

    // The note's own line endings.
    server.post_json(
        "/mcp/notes/append",
        &json!({"path": "crlf.md", "text": "z\nw"}),
    );
    assert_eq!(
        std::fs::read(server.root.join("crlf.md")).unwrap(),
        b"x\r\ny\r\nz\r\nw\r\n"
    );

    // A missing note only with create: true.
    let missing = server.post_json(
        "/mcp/notes/append",
        &json!({"path": "new.md", "text": "- first"}),
    );
    missing.assert_error(404, "not_found");
    assert!(message(&missing).contains("create: true"), "{missing:?}");
    let created = server.post_json(
        "/mcp/notes/append",
        &json!({"path": "new.md", "text": "- first", "create": true}),
    );
    assert_eq!(created.status, 200, "{created:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("new.md")).unwrap(),
        "- first\n"
    );
    server
        .post_json("/mcp/notes/append", &json!({"path": "a.md", "text": " \n"}))
        .assert_error(400, "invalid_request");
}

#[test]
fn notes_insert_goes_under_a_heading_or_next_to_a_line() {
    let server = TestServer::with_note("garden.md", GARDEN);
    let insert = |body: Value| server.post_json("/mcp/notes/insert", &body);
    let read = || std::fs::read_to_string(server.root.join("garden.md")).unwrap();

    let answer =
        insert(json!({"path": "garden.md", "heading": "Garden > Plans", "text": "- basil"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(
        read().contains("# not a heading\n```\n- basil\n\n## Tomatoes\n"),
        "{}",
        read()
    );
    assert_eq!(subject(&server), "mcp.patch_apply: garden.md");

    let answer = insert(
        json!({"path": "garden.md", "before_line": "Stake them early.", "text": "Water first."}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(read().contains("## Tomatoes\n\nWater first.\nStake them early.\n"));
    let answer = insert(
        json!({"path": "garden.md", "after_line": "More herbs this year.", "text": "Sage."}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(read().contains("More herbs this year.\nSage.\n"));

    // Anchors that do not fit say what would, and change nothing.
    let before = read();
    let count = server.commit_count();
    let answer = insert(json!({"path": "garden.md", "heading": "Tomatos", "text": "x"}));
    answer.assert_error(404, "not_found");
    assert!(
        message(&answer).starts_with(
            "no heading \"Tomatos\" in garden.md; did you mean \"Tomatoes\"? Its headings: \"Garden\", \"Garden > Plans\", \"Garden > Tomatoes\""
        ),
        "{answer:?}"
    );
    // A `#` line in a code fence is code, as the index reads it.
    insert(json!({"path": "garden.md", "heading": "not a heading", "text": "x"}))
        .assert_error(404, "not_found");
    let answer = insert(json!({"path": "garden.md", "after_line": "- one", "text": "x"}));
    answer.assert_error(409, "conflict");
    assert!(
        message(&answer).contains("occurs 2 times in garden.md (lines 17, 18)"),
        "{answer:?}"
    );
    insert(json!({"path": "garden.md", "heading": "Plans", "after_line": "- one", "text": "x"}))
        .assert_error(400, "invalid_request");
    insert(json!({"path": "garden.md", "text": "x"})).assert_error(400, "invalid_request");
    assert_eq!(read(), before);
    assert_eq!(server.commit_count(), count);
}

#[test]
fn a_missing_note_suggests_the_closest_paths() {
    let server = TestServer::with_note("projects/garden.md", GARDEN);
    server.write("todo.md", "# Todo\n");
    server.commit_all();

    let answer = server.read("garden.md");
    answer.assert_error(404, "not_found");
    assert_eq!(
        message(&answer),
        "note not found: \"garden.md\"; did you mean \"projects/garden.md\"?"
    );
    let answer = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "projects/gardn.md", "edits": [{"old": "a", "new": "b"}]}),
    );
    answer.assert_error(404, "not_found");
    assert!(message(&answer).ends_with("did you mean \"projects/garden.md\"?"));
    let answer = server.post_json(
        "/mcp/notes/read_batch",
        &json!({"paths": ["todo.md", "tdoo.md"]}),
    );
    answer.assert_error(404, "not_found");
    assert!(message(&answer).ends_with("did you mean \"todo.md\"?"));
    // Nothing close: no guess, but where to look.
    assert_eq!(
        message(&server.read("zebra.md")),
        "note not found: \"zebra.md\"; no note has a close name: list them (notes.list) or \
         find one by its words (index.query)"
    );
    // Nothing close by name, but a note holds the words of it.
    assert_eq!(
        message(&server.read("tomato/plans.md")),
        "note not found: \"tomato/plans.md\"; no note has a close name, but these notes hold its \
         words: \"projects/garden.md\""
    );
}

#[test]
fn plain_http_keeps_the_original_contract_by_default() {
    let server = TestServer::with_note("log.md", &long_note());
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "log.md", "content": "# Log\n\n... rest unchanged ...\n"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        "# Log\n\n... rest unchanged ...\n"
    );
}

#[test]
fn the_sandbox_is_guarded_and_allow_large_delete_passes() {
    let long = long_note();
    let server = TestServer::with_note("log.md", &long);
    let count = server.commit_count();

    // Shrinking 32 lines to 1: refused, with what the guard saw and how to pass.
    let out = eval(
        &server,
        r##"return await mirai.notes.write({path: "log.md", content: "# Log\n"})"##,
    );
    assert_eq!(out["error"]["code"], "guard_refused", "{out}");
    let said = out["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("from 32 lines to 1 (31 lines, 97% of the note, removed)"),
        "{said}"
    );
    assert!(said.contains("\"allow_large_delete\": true"), "{said}");
    // propose answers the same refusal as apply.
    let out = eval(
        &server,
        r##"const made = await mirai.patch.make({path: "log.md", content: "# Log\n"});
           return await mirai.patch.propose({patch: made.patch})"##,
    );
    assert_eq!(out["error"]["code"], "guard_refused", "{out}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        long
    );
    assert_eq!(server.commit_count(), count);

    // A legitimate large rewrite says so.
    let out = eval(
        &server,
        r##"return await mirai.notes.write({path: "log.md", content: "# Log\n", allow_large_delete: true})"##,
    );
    assert!(out["result"]["commit"].is_string(), "{out}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        "# Log\n"
    );
    assert_eq!(subject(&server), "mcp.patch_apply: log.md");
}

#[test]
fn changes_apply_is_guarded_per_note_and_a_revert_is_not() {
    let long = long_note();
    let server = TestServer::with_note("log.md", &long);
    server.write("todo.md", "# Todo\n");
    server.commit_all();
    let count = server.commit_count();
    // The second note's patch empties a long note: the whole commit is refused.
    let program = r##"const cut = await mirai.patch.make({path: "log.md", content: "# Log\n"});
        const add = await mirai.patch.make({path: "todo.md", content: "# Todo\n- tea\n"});
        return await mirai.changes.apply({patches: [add.patch, cut.patch]ALLOW})"##;
    let out = eval(&server, &program.replace("ALLOW", ""));
    assert_eq!(out["error"]["code"], "guard_refused", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("patch 2: "),
        "{out}"
    );
    assert_eq!(server.commit_count(), count);
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        long
    );
    // Said on purpose, it lands; taking it back (a large re-growth) is never guarded.
    let out = eval(
        &server,
        &program.replace("ALLOW", ", allow_large_delete: true"),
    );
    let commit = out["result"]["commit"]
        .as_str()
        .expect("a commit")
        .to_string();
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        "# Log\n"
    );
    let out = eval(
        &server,
        &format!("return await mirai.notes.revert({{commit: \"{commit}\"}})"),
    );
    let restored = out["result"]["commit"]
        .as_str()
        .expect("a commit")
        .to_string();
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        long
    );
    // Reverting the revert empties the long note again: a revert is not guarded.
    let out = eval(
        &server,
        &format!("return await mirai.notes.revert({{commit: \"{restored}\"}})"),
    );
    assert!(out["result"]["commit"].is_string(), "{out}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        "# Log\n"
    );
}

#[test]
fn placeholders_are_refused_unless_the_note_already_had_them() {
    let note = "# Draft\n\n...\n- one\n- two\n";
    let server = TestServer::with_note("draft.md", note);
    for code in [
        r##"return await mirai.notes.edit({path: "draft.md", edits: [{old: "- two\n", new: "- two\n// ... existing content ...\n"}]})"##,
        r##"return await mirai.notes.append({path: "draft.md", text: "[remaining text omitted]"})"##,
        r##"return await mirai.notes.insert({path: "draft.md", heading: "Draft", text: "... rest of the note unchanged ..."})"##,
        r##"return await mirai.notes.write({path: "new.md", content: "# New\n\n(rest of the note)\n"})"##,
    ] {
        let out = eval(&server, code);
        assert_eq!(out["error"]["code"], "guard_refused", "{code}: {out}");
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("the placeholder guard refused this write: line "),
            "{out}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(server.root.join("draft.md")).unwrap(),
        note
    );
    assert!(!server.root.join("new.md").exists());

    // The note's own "..." line is its text: a write that keeps it passes.
    let out = eval(
        &server,
        r##"return await mirai.notes.edit({path: "draft.md", edits: [{old: "- one", new: "- first"}]})"##,
    );
    assert!(out["result"]["commit"].is_string(), "{out}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("draft.md")).unwrap(),
        "# Draft\n\n...\n- first\n- two\n"
    );
}

#[test]
fn deletions_are_never_guarded() {
    let server = TestServer::with_note("a.md", &long_note());
    server.write("b.md", long_note());
    server.commit_all();
    let out = eval(
        &server,
        r##"const made = await mirai.patch.make({path: "a.md", content: null});
           const applied = await mirai.patch.apply({patch: made.patch});
           const deleted = await mirai.notes.delete({path: "b.md"});
           return [applied.commit, deleted.commit]"##,
    );
    assert!(out["error"].is_null(), "{out}");
    assert!(!server.root.join("a.md").exists());
    assert!(!server.root.join("b.md").exists());
}

#[test]
fn mcp_calls_are_guarded_and_their_tools_say_how_to_pass() {
    let server = TestServer::with_note("log.md", &long_note());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.url));
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mirai-spec", "0.1.0"),
        )
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
        let tools = client.list_all_tools().await.unwrap();
        for name in ["notes_write", "notes_edit", "patch_apply", "patch_propose"] {
            let tool = tools.iter().find(|t| t.name == name).unwrap();
            assert!(
                tool.description
                    .as_deref()
                    .unwrap()
                    .contains("allow_large_delete: true"),
                "{name}"
            );
        }
        let call = |args: Value| {
            client.call_tool(
                CallToolRequestParams::new("notes_write")
                    .with_arguments(args.as_object().cloned().unwrap()),
            )
        };
        let text = |result: &rmcp::model::CallToolResult| {
            serde_json::to_value(&result.content).unwrap()[0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let refused = call(json!({"path": "log.md", "content": "# Log\n"}))
            .await
            .unwrap();
        assert_eq!(refused.is_error, Some(true));
        assert!(
            text(&refused).starts_with("guard_refused: the shrink guard refused this write"),
            "{}",
            text(&refused)
        );
        let placeholder = call(
            json!({"path": "log.md", "content": format!("{}// existing content\n", long_note())}),
        )
        .await
        .unwrap();
        assert!(text(&placeholder).starts_with("guard_refused: the placeholder guard"));
        let passed =
            call(json!({"path": "log.md", "content": "# Log\n", "allow_large_delete": true}))
                .await
                .unwrap();
        assert_eq!(passed.is_error, Some(false), "{}", text(&passed));
        client.cancel().await.unwrap();
    });
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        "# Log\n"
    );
}

#[test]
fn guards_all_covers_plain_http_and_off_covers_nothing() {
    let server = TestServer::start_with(|config| config.guards.mode = GuardMode::All);
    server.write("log.md", long_note());
    server.commit_all();
    let shrink = json!({"path": "log.md", "content": "# Log\n"});
    let answer = server.post_json("/mcp/notes/write", &shrink);
    answer.assert_error(422, "guard_refused");
    assert!(
        message(&answer).contains("from 32 lines to 1"),
        "{answer:?}"
    );
    let patch = server.post_json("/mcp/patch/make", &shrink).body["patch"]
        .as_str()
        .unwrap()
        .to_string();
    server
        .post_json("/mcp/patch/propose", &json!({ "patch": patch }))
        .assert_error(422, "guard_refused");
    server
        .post_json("/mcp/patch/apply", &json!({ "patch": patch }))
        .assert_error(422, "guard_refused");
    let propose = server.post_json(
        "/mcp/patch/propose",
        &json!({"patch": patch, "allow_large_delete": true}),
    );
    assert_eq!(propose.status, 200, "{propose:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("log.md")).unwrap(),
        long_note()
    );
    // A deletion is not a shrink: `+++ /dev/null` passes.
    let delete = server
        .post_json(
            "/mcp/patch/make",
            &json!({"path": "log.md", "content": null}),
        )
        .body["patch"]
        .clone();
    let answer = server.post_json("/mcp/patch/apply", &json!({ "patch": delete }));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(!server.root.join("log.md").exists());

    let server = TestServer::start_with(|config| config.guards.mode = GuardMode::Off);
    server.write("log.md", long_note());
    server.commit_all();
    let out = eval(
        &server,
        r##"return await mirai.notes.write({path: "log.md", content: "# Log\n// existing content\n"})"##,
    );
    assert!(out["result"]["commit"].is_string(), "{out}");
}

#[test]
fn the_guards_bounds_are_the_operators() {
    let server = TestServer::start_with(|config| {
        config.guards.min_lines = 40;
        config.guards.placeholders = false;
        // The structure guard's own rule (most of a note of 5+ lines) would refuse these too.
        config.guards.structure = false;
    });
    server.write("log.md", long_note());
    server.write("big.md", long_note().repeat(2));
    server.commit_all();
    let out = eval(
        &server,
        r##"return await mirai.notes.write({path: "log.md", content: "# Log\n[...]\n"})"##,
    );
    assert!(out["result"]["commit"].is_string(), "{out}");
    let out = eval(
        &server,
        r##"return await mirai.notes.write({path: "big.md", content: "# Log\n"})"##,
    );
    assert_eq!(out["error"]["code"], "guard_refused", "{out}");
    assert!(out["error"]["message"]
        .as_str()
        .unwrap()
        .contains("at most 50% of a note of 40 or more lines"));
}

#[test]
fn start_up_refuses_an_unknown_guard_setting() {
    let dir = tempfile::tempdir().unwrap();
    for (var, value, expected) in [
        ("MIRAI_GUARDS", "sometimes", "models, all or off"),
        ("MIRAI_GUARD_MAX_DELETE_RATIO", "2", "at most 1"),
        (
            "MIRAI_GUARD_MIN_LINES",
            "none",
            "a positive number of lines",
        ),
        ("MIRAI_GUARD_PLACEHOLDERS", "maybe", "on or off"),
    ] {
        let out = mirai_cli()
            .env("NOTES_ROOT", dir.path())
            .env("MIRAI_CACHE_DIR", guest_cache())
            .env(var, value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{var}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("invalid {var}: {value} (")) && stderr.contains(expected),
            "{stderr}"
        );
    }
}

/// Four clients appending to one note at once never get a 409: an append has
/// no diff and no base, so a conflict found before the writer lock is planned
/// again under it. Every line lands, once, and each append is one commit.
#[test]
fn concurrent_appends_to_one_note_all_land_without_a_conflict() {
    let server = TestServer::with_note("log.md", "# Log\n");
    let commits_before = server.commit_count();
    std::thread::scope(|scope| {
        for client in 0..4 {
            let server = &server;
            scope.spawn(move || {
                for i in 0..25 {
                    let answer = server.post_json(
                        "/mcp/notes/append",
                        &json!({"path": "log.md", "text": format!("client {client} line {i}")}),
                    );
                    assert_eq!(answer.status, 200, "client {client} append {i}: {answer:?}");
                }
            });
        }
    });
    let content = server.read("log.md").body["content"]
        .as_str()
        .unwrap()
        .to_string();
    for client in 0..4 {
        for i in 0..25 {
            let line = format!("client {client} line {i}");
            assert_eq!(
                content.lines().filter(|l| *l == line).count(),
                1,
                "{line} is in the note once"
            );
        }
    }
    assert_eq!(content.lines().count(), 101);
    assert_eq!(server.commit_count(), commits_before + 100);
    assert!(clean(&server));
}

/// `mirai ops` lists every row of the table; `mirai call OP JSON` runs any row
/// with the environment's policy, prints the answer as JSON, and on a refusal
/// prints the error's JSON with an exit code of its kind.
#[test]
fn mirai_call_runs_any_row_and_mirai_ops_lists_them() {
    use std::io::Write;
    let server = TestServer::with_note("a.md", "alpha\n");
    let root = server.root.clone();
    let listed = mirai_cli().arg("ops").output().unwrap();
    assert!(listed.status.success());
    let listed = String::from_utf8(listed.stdout).unwrap();
    for op in mirai::ops::TABLE {
        assert!(
            listed
                .lines()
                .any(|line| line.split_whitespace().next() == Some(op.name)),
            "{} is listed: {listed}",
            op.name
        );
    }
    let call = |args: &[&str], policy: Option<&str>| {
        let mut command = mirai_cli();
        command
            .arg("call")
            .args(args)
            .arg("--notes-root")
            .arg(&root);
        if let Some(policy) = policy {
            command.env("MIRAI_POLICY_MODE", policy);
        }
        let out = command.output().unwrap();
        let body: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), body)
    };
    let (code, body) = call(
        &[
            "notes.write",
            r#"{"path":"cli/x.md","content":"from the cli\n"}"#,
        ],
        None,
    );
    assert_eq!(code, Some(0), "{body}");
    assert!(body["commit"].is_string(), "{body}");
    assert_eq!(
        std::fs::read_to_string(root.join("cli/x.md")).unwrap(),
        "from the cli\n"
    );
    let mut piped = mirai_cli()
        .args(["call", "notes.read", "-", "--notes-root"])
        .arg(&root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    piped
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"path":"cli/x.md"}"#)
        .unwrap();
    let out = piped.wait_with_output().unwrap();
    let read: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read["content"], "from the cli\n");

    let cases: [(&[&str], Option<&str>, i32, &str); 5] = [
        (
            &["notes.read", r#"{"path":"missing.md"}"#],
            None,
            4,
            "not_found",
        ),
        (
            &["patch.apply", r#"{"patch":"not a diff"}"#],
            None,
            3,
            "invalid_patch",
        ),
        (&["notes.read", "not json"], None, 3, "invalid_path"),
        (
            &["notes.write", r#"{"path":"b.md","content":"x"}"#],
            Some("read_only"),
            6,
            "policy_denied",
        ),
        (&["no.such_op", "{}"], None, 4, "not_found"),
    ];
    for (args, policy, want, error) in cases {
        let (code, body) = call(args, policy);
        assert_eq!(code, Some(want), "{args:?}: {body}");
        assert_eq!(body["error"]["code"], error, "{args:?}: {body}");
    }
    assert!(!root.join("b.md").exists());
    assert!(clean(&server), "the CLI leaves git status clean");
}
