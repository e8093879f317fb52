//! The sandbox through `POST /agent/eval` and `mirai eval`: every operation is
//! reachable from JavaScript with the answers HTTP gives, policy holds, dry
//! runs write nothing, and hostile programs end with the right error while the
//! server keeps answering.

use crate::common;

use std::collections::BTreeSet;

use common::{git, mirai_cli, Answer, TestServer};
use mirai::config::PolicyMode;
use mirai::ops::TABLE;
use serde_json::{json, Value};

fn eval(server: &TestServer, code: &str) -> Answer {
    let answer = server.post_json("/agent/eval", &json!({ "code": code }));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer
}

fn dry_run(server: &TestServer, code: &str) -> Answer {
    let answer = server.post_json("/agent/eval", &json!({ "code": code, "dry_run": true }));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer
}

/// The program's result, asserting it succeeded.
fn result(answer: &Answer) -> &Value {
    assert!(answer.body["error"].is_null(), "{answer:?}");
    &answer.body["result"]
}

/// The program's error code and message, asserting the documented shape.
fn failure(answer: &Answer) -> (String, String) {
    assert!(answer.body["result"].is_null(), "{answer:?}");
    let error = answer.body["error"].as_object().expect("error is set");
    assert_eq!(error.len(), 2, "{answer:?}");
    (
        error["code"].as_str().unwrap().to_string(),
        error["message"].as_str().unwrap().to_string(),
    )
}

fn assert_still_serving(server: &TestServer) {
    assert_eq!(server.get("/health").status, 200);
    let answer = eval(server, "return 6 * 7");
    assert_eq!(result(&answer), &json!(42));
}

#[test]
fn every_operation_answers_from_javascript_as_it_does_over_http() {
    let server = TestServer::with_note("a.md", "# Alpha\n\nlemon tart recipe\n");
    server.write("b.md", "# Beta\n\nsecond note\n");
    server.commit_all();
    let mut covered = BTreeSet::new();
    let mut same = |op: &str, js: &str, http: Answer| {
        covered.insert(op.to_string());
        let answer = eval(&server, js);
        if http.status == 200 {
            assert_eq!(result(&answer), &http.body, "{op}");
        } else {
            let (code, message) = failure(&answer);
            assert_eq!(code, http.error_code(), "{op}");
            assert_eq!(message, http.body["error"]["message"], "{op}");
        }
    };

    same(
        "notes.list",
        "return await mirai.notes.list()",
        server.get("/mcp/notes"),
    );
    same(
        "notes.read",
        "return await mirai.notes.read({path: 'a.md'})",
        server.read("a.md"),
    );
    same(
        "notes.read",
        "return await mirai.notes.read({path: '../x.md'})",
        server.read("../x.md"),
    );
    same(
        "notes.read_batch",
        "return await mirai.notes.read_batch({paths: ['b.md', 'a.md']})",
        server.post_json("/mcp/notes/read_batch", &json!({"paths": ["b.md", "a.md"]})),
    );
    same(
        "notes.read",
        "return await mirai.notes.read({path: 'a.md', rev: 'HEAD~0'})",
        server.get("/mcp/notes/read?path=a.md&rev=HEAD~0"),
    );
    same(
        "notes.history",
        "return await mirai.notes.history({path: 'a.md', limit: 5})",
        server.get("/mcp/notes/history?path=a.md&limit=5"),
    );
    same(
        "notes.history",
        "return await mirai.notes.history({limit: 0})",
        server.get("/mcp/notes/history?limit=0"),
    );
    same(
        "notes.diff",
        "return await mirai.notes.diff({commit: 'HEAD~0', path: 'a.md'})",
        server.get("/mcp/notes/diff?commit=HEAD~0&path=a.md"),
    );
    same(
        "notes.diff",
        "return await mirai.notes.diff({commit: 'main'})",
        server.get("/mcp/notes/diff?commit=main"),
    );
    let patch = "--- a/a.md\n+++ b/a.md\n@@ -1,3 +1,3 @@\n # Alpha\n \n-lemon tart recipe\n+lime tart recipe\n";
    same(
        "patch.propose",
        &format!(
            "return await mirai.patch.propose({{patch: {}}})",
            json!(patch)
        ),
        server.post_json("/mcp/patch/propose", &json!({ "patch": patch })),
    );
    same(
        "patch.propose",
        "return await mirai.patch.propose({patch: 'not a diff'})",
        server.post_json("/mcp/patch/propose", &json!({"patch": "not a diff"})),
    );
    same(
        "patch.make",
        "return await mirai.patch.make({path: 'b.md', content: 'new\\n'})",
        server.post_json(
            "/mcp/patch/make",
            &json!({"path": "b.md", "content": "new\n"}),
        ),
    );
    same(
        "notes.outline",
        "return await mirai.notes.outline({path: 'a.md'})",
        server.get("/mcp/notes/outline?path=a.md"),
    );
    same(
        "notes.render",
        "return await mirai.notes.render({path: 'a.md'})",
        server.get("/mcp/notes/render?path=a.md"),
    );
    same(
        "notes.read",
        "return await mirai.notes.read({path: 'a.md', section: 'Alpha', lines: '1-2'})",
        server.get("/mcp/notes/read?path=a.md&section=Alpha&lines=1-2"),
    );
    same(
        "notes.links",
        "return await mirai.notes.links({path: 'b.md'})",
        server.get("/mcp/notes/links?path=b.md"),
    );
    same(
        "notes.graph",
        "return await mirai.notes.graph({limit: 1})",
        server.get("/mcp/notes/graph?limit=1"),
    );
    same(
        "notes.tags",
        "return await mirai.notes.tags()",
        server.get("/mcp/notes/tags"),
    );
    server.write("pic.png", b"\x89PNG");
    same(
        "files.list",
        "return await mirai.files.list({limit: 5})",
        server.get("/mcp/files?limit=5"),
    );
    same(
        "files.read",
        "return await mirai.files.read({path: 'a.md'})",
        server.get("/mcp/files/read?path=a.md"),
    );
    // Refused alike (spec/files_write.rs follows the bytes of a sandbox's write).
    same(
        "files.write",
        "return await mirai.files.write({path: 'a.md', content_base64: 'AA=='})",
        server.post_json(
            "/mcp/files/write",
            &json!({"path": "a.md", "content_base64": "AA=="}),
        ),
    );
    same(
        "files.delete",
        "return await mirai.files.delete({path: 'nope.png'})",
        server.post_json("/mcp/files/delete", &json!({"path": "nope.png"})),
    );
    same(
        "index.status",
        "return await mirai.index.status()",
        server.get("/mcp/index/status"),
    );
    same(
        "index.query",
        "return await mirai.index.query({q: 'lemon', limit: 5})",
        server.get("/mcp/index/query?q=lemon&limit=5"),
    );
    same(
        "index.query",
        "return await mirai.index.query({q: ''})",
        server.get("/mcp/index/query?q="),
    );

    // Writes: the same effects as over HTTP (a commit each, the bytes on disk).
    let before = server.commit_count();
    let answer = eval(
        &server,
        &format!(
            "return await mirai.patch.apply({{patch: {}}})",
            json!(patch)
        ),
    );
    covered.insert("patch.apply".into());
    assert_eq!(result(&answer)["commit"], json!(server.head()));
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "# Alpha\n\nlime tart recipe\n"
    );
    let answer = eval(
        &server,
        "return await mirai.notes.write({path: 'c.md', content: 'gamma\\n'})",
    );
    covered.insert("notes.write".into());
    assert_eq!(result(&answer)["commit"], json!(server.head()));
    let answer = eval(
        &server,
        "return await mirai.notes.edit({path: 'c.md', edits: [{old: 'gamma', new: 'delta'}]})",
    );
    covered.insert("notes.edit".into());
    assert_eq!(result(&answer)["hunk_count"], json!(1));
    assert_eq!(
        std::fs::read_to_string(server.root.join("c.md")).unwrap(),
        "delta\n"
    );
    assert_eq!(server.commit_count(), before + 3);
    // Commits made by an eval carry no trailer (ARCHITECTURE.md, "The agent's
    // commits are marked").
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        "mcp.patch_apply: c.md\n\n"
    );
    let answer = eval(
        &server,
        "return await mirai.notes.append({path: 'c.md', text: 'epsilon'})",
    );
    covered.insert("notes.append".into());
    assert_eq!(result(&answer)["commit"], json!(server.head()));
    let answer = eval(
        &server,
        "return await mirai.notes.insert({path: 'c.md', before_line: 'epsilon', text: 'zeta'})",
    );
    covered.insert("notes.insert".into());
    assert_eq!(result(&answer)["commit"], json!(server.head()));
    assert_eq!(
        std::fs::read_to_string(server.root.join("c.md")).unwrap(),
        "delta\nzeta\nepsilon\n"
    );
    let answer = eval(
        &server,
        "await mirai.notes.append({path: 'd.md', text: 'eta', create: true}); \
         return await mirai.notes.delete({path: 'd.md'})",
    );
    covered.insert("notes.delete".into());
    assert_eq!(result(&answer)["commit"], json!(server.head()));
    assert!(!server.root.join("d.md").exists());

    // Several notes in one commit, and that commit taken back as a new one.
    let answer = eval(
        &server,
        r#"return await mirai.changes.apply({patches: [
            "--- a/c.md\n+++ b/c.md\n@@ -1,3 +1,3 @@\n-delta\n+omega\n zeta\n epsilon\n",
            "--- /dev/null\n+++ b/d.md\n@@ -0,0 +1 @@\n+dee\n"]})"#,
    );
    covered.insert("changes.apply".into());
    let applied = server.head();
    assert_eq!(
        result(&answer),
        &json!({"commit": applied, "changes": [
            {"path": "c.md", "hunk_count": 1, "net_line_delta": 0},
            {"path": "d.md", "hunk_count": 1, "net_line_delta": 1}]})
    );
    let answer = eval(
        &server,
        &format!("return await mirai.notes.revert({{commit: '{applied}'}})"),
    );
    covered.insert("notes.revert".into());
    assert_eq!(result(&answer)["commit"], json!(server.head()));
    assert_eq!(result(&answer)["reverted"], json!([applied]));
    assert_eq!(
        std::fs::read_to_string(server.root.join("c.md")).unwrap(),
        "delta\nzeta\nepsilon\n"
    );
    assert!(!server.root.join("d.md").exists());
    assert_eq!(server.commit_count(), before + 9);
    let answer = eval(
        &server,
        "await mirai.notes.move({from: 'c.md', to: 'moved/c.md'}); \
         return await mirai.notes.move({from: 'moved/c.md', to: 'c.md'})",
    );
    covered.insert("notes.move".into());
    assert_eq!(
        result(&answer),
        &json!({"from": "moved/c.md", "to": "c.md", "commit": server.head(), "rewritten": []})
    );
    assert_eq!(server.commit_count(), before + 11);
    let text = std::fs::read_to_string(server.root.join("c.md")).unwrap();
    let answer = eval(
        &server,
        "return await mirai.notes.front_matter({path: 'c.md', set: {status: 'done'}})",
    );
    covered.insert("notes.front_matter".into());
    assert_eq!(result(&answer)["commit"], json!(server.head()));
    assert_eq!(
        std::fs::read_to_string(server.root.join("c.md")).unwrap(),
        format!("---\nstatus: done\n---\n{text}")
    );

    let answer = eval(&server, "return await mirai.index.rebuild()");
    covered.insert("index.rebuild".into());
    assert_eq!(
        result(&answer),
        &json!({"notes_indexed": 4, "chunks_indexed": 4})
    );
    let answer = eval(&server, "return await mirai.index.invalidate()");
    covered.insert("index.invalidate".into());
    assert_eq!(result(&answer), &json!({"invalidated": true}));

    // Without a remote, status shows the branch and HEAD, and a sync is refused.
    let answer = eval(&server, "return await mirai.repo.status()");
    covered.insert("repo.status".into());
    assert_eq!(result(&answer)["head"], json!(server.head()));
    assert_eq!(result(&answer)["remote"], Value::Null);
    let answer = eval(&server, "await mirai.repo.sync()");
    covered.insert("repo.sync".into());
    assert_eq!(failure(&answer).0, "invalid_request");

    // Proposals (review mode's) can be listed and read, never decided, from a program.
    let answer = eval(&server, "return await mirai.proposals.list()");
    covered.insert("proposals.list".into());
    assert_eq!(
        result(&answer),
        &json!({"proposals": [], "next_cursor": null, "unreadable": 0})
    );
    let id = "0192f0c4-5b3e-7c11-8d2a-4f3b2a1c0d9e";
    let answer = eval(
        &server,
        &format!("await mirai.proposals.get({{id: '{id}'}})"),
    );
    covered.insert("proposals.get".into());
    assert_eq!(failure(&answer).0, "not_found");
    for name in ["approve", "reject"] {
        let answer = eval(
            &server,
            &format!("await mirai.proposals.{name}({{id: '{id}'}})"),
        );
        covered.insert(format!("proposals.{name}"));
        assert_eq!(failure(&answer).0, "policy_denied");
    }

    let table: BTreeSet<String> = TABLE.iter().map(|op| op.name.to_string()).collect();
    assert_eq!(
        covered, table,
        "every row of the table is exercised from JavaScript"
    );
}

#[test]
fn operation_errors_are_thrown_with_their_code_and_can_be_caught() {
    let server = TestServer::with_note("a.md", "one\n");
    let answer = eval(
        &server,
        r#"
        try {
          await mirai.notes.edit({path: 'a.md', edits: [{old: 'missing', new: 'x'}]});
        } catch (e) {
          return {name: e.name, code: e.code, isError: e instanceof Error};
        }
        "#,
    );
    assert_eq!(
        result(&answer),
        &json!({"name": "Error", "code": "conflict", "isError": true})
    );
    // Uncaught, the operation's own code is the program's error
    // (docs/src/sandbox.md).
    let answer = eval(&server, "await mirai.notes.read({path: 'nope.md'})");
    let (code, message) = failure(&answer);
    assert_eq!(code, "not_found");
    assert!(message.contains("nope.md"), "{message}");
    assert_eq!(answer.body["calls"][0]["op"], "notes.read");
    assert_eq!(answer.body["calls"][0]["ok"], false);
}

#[test]
fn read_only_mode_denies_writes_from_javascript_and_allows_reads() {
    let server = TestServer::start_with(|config| config.policy = PolicyMode::ReadOnly);
    server.write("kept.md", "kept\n");
    let answer = eval(
        &server,
        "return await mirai.notes.write({path: 'x.md', content: 'x\\n'})",
    );
    let (code, message) = failure(&answer);
    assert_eq!(code, "policy_denied");
    assert_eq!(message, "action notes.write is denied in read_only mode");
    assert!(!server.root.join("x.md").exists());
    let answer = eval(&server, "return (await mirai.notes.list()).notes");
    assert_eq!(result(&answer), &json!(["kept.md"]));
}

#[test]
fn programs_use_await_return_console_and_json_results() {
    let server = TestServer::start();
    let answer = eval(
        &server,
        r#"console.log("hello", {a: 1}, [2], null);
        console.error("multi\nline");
        const notes = await mirai.notes.list();
        return {count: notes.notes.length, when: typeof Date.now()}"#,
    );
    assert_eq!(result(&answer), &json!({"count": 1, "when": "number"}));
    assert_eq!(
        answer.body["console"],
        json!(["hello {\"a\":1} [2] null", "multi\nline"])
    );
    let stats = &answer.body["stats"];
    assert!(stats["fuel"].as_u64().unwrap() > 0, "{stats}");
    assert!(stats["memory_peak_bytes"].as_u64().unwrap() > 0, "{stats}");
    assert!(stats["wall_ms"].as_f64().unwrap() > 0.0, "{stats}");
    assert!(
        answer.body.get("changes").is_none(),
        "changes only in a dry run"
    );

    assert_eq!(result(&eval(&server, "1 + 1")), &Value::Null);
    assert_eq!(result(&eval(&server, "return undefined")), &Value::Null);
    let (code, message) = failure(&eval(&server, "return () => 1"));
    assert_eq!(code, "sandbox_error");
    assert!(message.contains("not JSON"), "{message}");
    let (code, message) = failure(&eval(&server, "return 10n"));
    assert_eq!(code, "sandbox_error");
    assert!(message.contains("BigInt"), "{message}");
    let (code, message) = failure(&eval(&server, "await new Promise(() => {})"));
    assert_eq!(code, "sandbox_error");
    assert!(message.contains("never settles"), "{message}");
}

#[test]
fn javascript_errors_carry_their_message_and_line() {
    let server = TestServer::start();
    let answer = eval(&server, "const a = 1;\nconst b = 2;\nnull.boom;\n");
    let (code, message) = failure(&answer);
    assert_eq!(code, "sandbox_error");
    assert!(message.starts_with("TypeError"), "{message}");
    assert!(message.contains("line 3"), "{message}");

    let (code, message) = failure(&eval(&server, "let x = 1;\nlet = = 2;"));
    assert_eq!(code, "sandbox_error");
    assert!(message.starts_with("SyntaxError"), "{message}");
    assert!(message.contains("line 2"), "{message}");

    let (code, message) = failure(&eval(&server, "throw 'plain string'"));
    assert_eq!(code, "sandbox_error");
    assert_eq!(message, "uncaught exception: plain string");
}

#[test]
fn math_random_differs_between_evals() {
    let server = TestServer::start();
    let first = eval(&server, "return [Math.random(), Math.random()]");
    let second = eval(&server, "return [Math.random(), Math.random()]");
    assert_ne!(result(&first), result(&second));
    assert_ne!(result(&first)[0], result(&first)[1]);
}

#[test]
fn a_dry_run_writes_nothing_sees_its_own_writes_and_answers_the_diffs() {
    let server = TestServer::with_note("a.md", "# A\n\nkeep this\n");
    let head = server.head();
    let answer = dry_run(
        &server,
        r#"
        const written = await mirai.notes.write({path: 'new/idea.md', content: '# Idea\n\nzeppelin garden\n'});
        await mirai.notes.edit({path: 'a.md', edits: [{old: 'keep this', new: 'changed this'}]});
        await mirai.notes.edit({path: 'a.md', edits: [{old: 'changed', new: 'twice changed'}]});
        const read = await mirai.notes.read({path: 'new/idea.md'});
        const list = await mirai.notes.list();
        const hits = await mirai.index.query({q: 'zeppelin'});
        return {commit: written.commit, content: read.content, list: list.notes,
                hit: hits.chunks.map(c => c.metadata.path)};
        "#,
    );
    assert_eq!(
        result(&answer),
        &json!({
            "commit": null,
            "content": "# Idea\n\nzeppelin garden\n",
            "list": ["a.md", "new/idea.md", "welcome.md"],
            "hit": ["new/idea.md"],
        })
    );
    // Nothing reached the disk or git.
    assert_eq!(server.head(), head);
    assert!(!server.root.join("new").exists());
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "# A\n\nkeep this\n"
    );
    let changes = answer.body["changes"].as_array().expect("changes");
    let paths: Vec<&str> = changes
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.md", "new/idea.md"]);
    // Each combined diff applies for real, as it is.
    for change in changes {
        let applied = server.post_json("/mcp/patch/apply", &json!({"patch": change["patch"]}));
        assert_eq!(applied.status, 200, "{applied:?}");
    }
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "# A\n\ntwice changed this\n"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("new/idea.md")).unwrap(),
        "# Idea\n\nzeppelin garden\n"
    );

    let answer = dry_run(&server, "return await mirai.index.rebuild()");
    assert_eq!(failure(&answer).0, "policy_denied");
    assert_eq!(answer.body["changes"], json!([]));
}

#[test]
fn bad_requests_are_400_and_programs_never_are() {
    let server = TestServer::start();
    for body in [
        json!({}),
        json!({"code": 5}),
        json!({"code": "  "}),
        json!([]),
    ] {
        server
            .post_json("/agent/eval", &body)
            .assert_error(400, "invalid_request");
    }
    server
        .post_raw("/agent/eval", "not json")
        .assert_error(400, "invalid_request");
    assert_eq!(server.get("/agent/eval").status, 405);
}

#[test]
fn an_endless_loop_runs_out_of_cpu() {
    // A far deadline, so the CPU bound ends the loop however loaded the machine is.
    let server = TestServer::start_with(|config| config.sandbox.timeout_ms = 120_000);
    let (code, message) = failure(&eval(&server, "while (true) {}"));
    assert_eq!(code, "sandbox_timeout");
    assert!(message.contains("MIRAI_SANDBOX_FUEL"), "{message}");
    assert_still_serving(&server);
}

#[test]
fn the_wall_clock_deadline_holds_when_fuel_would_not() {
    let server = TestServer::start_with(|config| {
        config.sandbox.timeout_ms = 200;
        config.sandbox.fuel = u64::MAX / 2;
    });
    let answer = eval(&server, "while (true) {}");
    let (code, message) = failure(&answer);
    assert_eq!(code, "sandbox_timeout");
    assert!(message.contains("200 ms"), "{message}");
    let wall = answer.body["stats"]["wall_ms"].as_f64().unwrap();
    assert!((200.0..2_000.0).contains(&wall), "{wall}");
    assert_still_serving(&server);
}

#[test]
fn a_loop_of_host_calls_hits_the_call_limit() {
    let server = TestServer::start_with(|config| config.sandbox.timeout_ms = 120_000);
    let answer = eval(
        &server,
        "for (;;) { try { await mirai.notes.list() } catch (e) {} }",
    );
    let (code, message) = failure(&answer);
    assert_eq!(code, "sandbox_call_limit");
    assert!(message.contains("200"), "{message}");
    assert_eq!(answer.body["calls"].as_array().unwrap().len(), 200);
    assert_still_serving(&server);
}

#[test]
fn memory_bombs_end_as_sandbox_memory() {
    let server = TestServer::start();
    for bomb in [
        "const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length);",
        "let s = 'x'; for (;;) s = s.repeat(2);",
        "const a = []; for (;;) a.push(new Array(1 << 16).fill(a.length));",
        "const f = () => Promise.resolve().then(f); await f();",
    ] {
        let answer = eval(&server, bomb);
        let (code, _) = failure(&answer);
        // Allocation-heavy loops may burn their CPU budget before memory runs out.
        assert!(
            code == "sandbox_memory" || code == "sandbox_timeout",
            "{bomb}: {answer:?}"
        );
        let peak = answer.body["stats"]["memory_peak_bytes"].as_u64().unwrap();
        assert!(peak <= 64 * 1024 * 1024, "{peak}");
    }
    let answer = eval(&server, "let s = 'x'; for (;;) s = s.repeat(2);");
    assert_eq!(failure(&answer).0, "sandbox_memory");
    assert_still_serving(&server);
}

#[test]
fn deep_recursion_is_a_sandbox_error() {
    let server = TestServer::start();
    let (code, message) = failure(&eval(
        &server,
        "function f(n) { return f(n + 1) + 1 } return f(0)",
    ));
    assert_eq!(code, "sandbox_error");
    assert!(
        message.contains("stack") || message.contains("recurs"),
        "{message}"
    );
    assert_still_serving(&server);
}

#[test]
fn output_is_capped_console_and_result_alike() {
    let server = TestServer::start();
    let answer = eval(
        &server,
        "for (let i = 0; i < 10000; i++) console.log('x'.repeat(1000));",
    );
    let (code, message) = failure(&answer);
    assert_eq!(code, "sandbox_output_limit");
    assert!(message.contains("65536"), "{message}");
    let kept: usize = answer.body["console"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line.as_str().unwrap().len())
        .sum();
    assert!((30_000..=65_536).contains(&kept), "{kept}");

    let (code, message) = failure(&eval(&server, "return 'x'.repeat(10 * 1024 * 1024)"));
    assert_eq!(code, "sandbox_output_limit");
    assert!(
        message.contains("MIRAI_SANDBOX_MAX_OUTPUT_BYTES"),
        "{message}"
    );
    assert_still_serving(&server);
}

#[test]
fn tampering_with_builtins_and_mirai_changes_only_the_programs_view() {
    let server = TestServer::with_note("a.md", "alpha\n");
    let answer = eval(
        &server,
        r#"
        JSON.parse = () => ({ok: 'forged'});
        JSON.stringify = () => '{"path":"../../etc/passwd"}';
        Object.prototype.then = undefined;
        Array.prototype.map = () => [];
        Object.defineProperty(Object.prototype, 'path', {get() { return '../escape.md' }});
        try { mirai.notes.read = async () => 'forged' } catch (e) {}
        try { globalThis.mirai = null } catch (e) {}
        try { delete mirai.notes } catch (e) {}
        const read = await mirai.notes.read({path: 'a.md'});
        return read.content;
        "#,
    );
    // JSON.stringify was replaced after the result hook captured the original.
    assert_eq!(result(&answer), &json!("alpha\n"));
}

#[test]
fn the_guest_reaches_no_files_environment_network_or_timers() {
    let server = TestServer::start();
    let answer = eval(
        &server,
        r#"
        let imported;
        try { await import('fs'); imported = 'loaded' } catch (e) { imported = e.name }
        const now = Date.now();
        return {
          imported,
          require: typeof require, fetch: typeof fetch, setTimeout: typeof setTimeout,
          std: typeof std, os: typeof os, process: typeof process, WebAssembly: typeof WebAssembly,
          clockSkewMs: Math.abs(now - __HOST_NOW__),
          coarseClock: now % 1 === 0,
        };
        "#
        .replace(
            "__HOST_NOW__",
            &std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
                .to_string(),
        )
        .as_str(),
    );
    let got = result(&answer);
    assert_ne!(got["imported"], "loaded");
    for name in [
        "require",
        "fetch",
        "setTimeout",
        "std",
        "os",
        "process",
        "WebAssembly",
    ] {
        assert_eq!(got[name], "undefined", "{name}: {got}");
    }
    assert!(got["clockSkewMs"].as_f64().unwrap() < 5_000.0, "{got}");
    assert_eq!(got["coarseClock"], true);
}

#[test]
fn thirty_two_evals_in_parallel_all_complete() {
    let server = TestServer::with_note("a.md", "parallel\n");
    let answers: Vec<Answer> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..32)
            .map(|i| {
                let server = &server;
                scope.spawn(move || {
                    server.post_json(
                        "/agent/eval",
                        &json!({"code": format!(
                            "const r = await mirai.notes.read({{path: 'a.md'}}); return [{i}, r.content]"
                        )}),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(result(answer), &json!([i, "parallel\n"]));
    }
}

#[test]
fn mirai_eval_runs_a_file_from_the_command_line() {
    let server = TestServer::with_note("a.md", "from disk\n");
    let program = server.dir.path().join("program.js");
    std::fs::write(
        &program,
        "await mirai.notes.write({path: 'b.md', content: 'made\\n'}); return (await mirai.notes.read({path: 'a.md'})).content",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        mirai_cli()
            .arg("eval")
            .arg(&program)
            .args(extra)
            .arg("--notes-root")
            .arg(&server.root)
            .output()
            .expect("mirai runs")
    };
    let out = run(&["--dry-run"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evaluation: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(evaluation["result"], "from disk\n");
    assert_eq!(evaluation["changes"][0]["path"], "b.md");
    assert!(!server.root.join("b.md").exists());

    let out = run(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("b.md")).unwrap(),
        "made\n"
    );

    std::fs::write(&program, "throw new Error('nope')").unwrap();
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(1));
    let evaluation: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(evaluation["error"]["code"], "sandbox_error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("sandbox_error: Error: nope"));
}

#[test]
fn the_deadline_bounds_host_calls_too() {
    // A deadline with room for a loaded machine, fuel for the busy wait below,
    // and calls enough that the loop at the end meets the deadline first (a
    // rebuild of an unchanged vault reuses the index and takes milliseconds).
    let deadline = 6_000.0;
    let server = TestServer::start_with(|config| {
        config.sandbox.timeout_ms = deadline as u64;
        config.sandbox.fuel = u64::MAX / 2;
        config.sandbox.max_calls = 1_000_000;
    });
    for i in 0..400 {
        let words: String = (0..300)
            .map(|w| format!("word{} ", (i * 7 + w) % 997))
            .collect();
        server.write(&format!("n{i:03}.md"), format!("# Note {i}\n\n{words}\n"));
    }
    server.commit_all();
    // One slow-ish call, then a busy wait until only half of that call's time is
    // left, then the same call again: it could not finish by the deadline, so it
    // must not start.
    let code = format!(
        "const t0 = Date.now();
         await mirai.index.rebuild();
         const took = Date.now() - t0;
         while (Date.now() - t0 < {deadline} - took / 2) {{}}
         await mirai.index.rebuild();
         return 'both calls ran';"
    );
    let answer = eval(&server, &code);
    let (code, message) = failure(&answer);
    assert_eq!(code, "sandbox_timeout", "{message}");
    assert!(message.contains("index.rebuild"), "{message}");
    let calls = answer.body["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{answer:?}");
    let wall = answer.body["stats"]["wall_ms"].as_f64().unwrap();
    assert!(
        wall < deadline,
        "ended at {wall} ms, past the {deadline} ms deadline"
    );

    // A loop of calls ends by the deadline too, with the call that would overrun refused.
    let answer = eval(&server, "for (;;) { await mirai.index.rebuild() }");
    let (code, _) = failure(&answer);
    assert_eq!(code, "sandbox_timeout");
    let wall = answer.body["stats"]["wall_ms"].as_f64().unwrap();
    let longest = answer.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        wall < deadline + longest,
        "{wall} ms, calls up to {longest} ms"
    );
    assert_still_serving(&server);
}

#[test]
fn a_host_call_waiting_for_other_writes_ends_by_the_deadline() {
    let deadline = 1_500.0;
    let server = TestServer::start_with(|config| config.sandbox.timeout_ms = deadline as u64);
    // A person's git holds index.lock: an HTTP write waits for it (and holds
    // mirai's writer meanwhile) for longer than the program's deadline.
    let lock = server.root.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let blocked = {
        let url = server.url.clone();
        std::thread::spawn(move || {
            reqwest::blocking::Client::new()
                .post(format!("{url}/mcp/notes/write"))
                .json(&json!({"path": "http.md", "content": "x\n"}))
                .send()
                .map(|r| r.status().as_u16())
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let answer = eval(
        &server,
        "return await mirai.notes.write({path: 'js.md', content: 'y\\n'})",
    );
    let (code, message) = failure(&answer);
    assert_eq!(code, "sandbox_timeout", "{message}");
    let wall = answer.body["stats"]["wall_ms"].as_f64().unwrap();
    assert!(wall < deadline + 500.0, "ended at {wall} ms");
    assert_eq!(blocked.join().unwrap().unwrap(), 500);
    std::fs::remove_file(&lock).unwrap();
    assert!(!server.root.join("js.md").exists());
}
