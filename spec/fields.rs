//! No field is silently ignored (issue 44): a field a row does not take, at any
//! depth, in a JSON body, a query string, a sandbox call, an MCP tool call or
//! `mirai call`, is refused before anything runs, naming the field and the
//! closest known one, with the endpoint's malformed-request code (the
//! original's endpoints keep theirs: DESIGN.md 7.2).

use crate::common;

use common::{mirai_cli, TestServer};
use mirai::config::PolicyMode;
use serde_json::{json, Value};

#[test]
fn a_misspelt_field_in_a_body_is_refused_and_nothing_is_written() {
    let server = TestServer::with_note("a.md", "alpha\n");
    let before = server.commit_count();
    let patch = "--- a/a.md\n+++ b/a.md\n@@ -1 +1 @@\n-alpha\n+beta\n";
    let answer = server.post_json(
        "/mcp/changes/apply",
        &json!({"patches": [patch], "mesage": "typo"}),
    );
    answer.assert_error(400, "invalid_request");
    assert_eq!(
        answer.body["error"]["message"],
        "malformed request for changes.apply: unknown field `mesage`; did you mean `message`?"
    );
    // Nothing close: the fields there are.
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "changed\n", "commit_message": "typo"}),
    );
    answer.assert_error(400, "invalid_request");
    assert_eq!(
        answer.body["error"]["message"],
        "malformed request for notes.write: unknown field `commit_message`; the fields are \
         `allow_large_delete`, `base_commit`, `content`, `path`"
    );
    // A misspelt base_commit never drops the optimistic check silently.
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "changed\n", "base_comit": "0000000"}),
    );
    answer.assert_error(400, "invalid_request");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("unknown field `base_comit`; did you mean `base_commit`?"),
        "{answer:?}"
    );
    // Inside a list of objects too.
    let answer = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "a.md", "edits": [{"old": "alpha", "nwe": "beta"}]}),
    );
    answer.assert_error(400, "invalid_request");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("unknown field `nwe` in `edits[0]`; did you mean `new`?"),
        "{answer:?}"
    );
    assert_eq!(server.commit_count(), before);
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "alpha\n"
    );
}

#[test]
fn the_originals_endpoints_refuse_with_their_own_codes() {
    let server = TestServer::with_note("a.md", "alpha\n");
    let patch = "--- a/a.md\n+++ b/a.md\n@@ -1 +1 @@\n-alpha\n+beta\n";
    let answer = server.post_json(
        "/mcp/patch/apply",
        &json!({"patch": patch, "base_comit": "0000000"}),
    );
    answer.assert_error(400, "invalid_patch");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `base_commit`?"),
        "{answer:?}"
    );
    let answer = server.post_json("/mcp/notes/read_batch", &json!({"path": ["a.md"]}));
    answer.assert_error(400, "invalid_path");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `path`; did you mean `paths`?"),
        "{answer:?}"
    );
    server
        .get("/mcp/notes/read?path=a.md&pth=b.md")
        .assert_error(400, "invalid_path");
    let answer = server.get("/mcp/index/query?q=alpha&limt=3");
    answer.assert_error(400, "invalid_query");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("unknown field `limt`; did you mean `limit`?"),
        "{answer:?}"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "alpha\n"
    );
    // Known fields still pass.
    assert_eq!(server.get("/mcp/index/query?q=alpha&limit=3").status, 200);
    let answer = server.post_json("/mcp/patch/apply", &json!({"patch": patch}));
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[test]
fn a_query_parameter_a_row_does_not_take_is_refused() {
    let server = TestServer::with_note("a.md", "alpha\n");
    let answer = server.get("/mcp/index/status?verbose=1");
    answer.assert_error(400, "invalid_request");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("unknown field `verbose`: this request takes no fields"),
        "{answer:?}"
    );
    let answer = server.get("/mcp/notes/history?path=a.md&limt=2");
    answer.assert_error(400, "invalid_request");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `limit`?"),
        "{answer:?}"
    );
    assert_eq!(
        server.get("/mcp/notes/history?path=a.md&limit=2").status,
        200
    );
}

#[test]
fn policy_comes_before_the_fields() {
    let server = TestServer::start_with(|config| config.policy = PolicyMode::ReadOnly);
    server
        .post_json(
            "/mcp/notes/write",
            &json!({"path": "a.md", "content": "x", "mesage": "typo"}),
        )
        .assert_error(403, "policy_denied");
}

#[test]
fn the_sandbox_tells_the_program_and_the_model_the_right_name() {
    let server = TestServer::with_note("a.md", "alpha\n");
    let answer = server.post_json(
        "/agent/eval",
        &json!({"code": "return await mirai.notes.write({path: 'a.md', contnet: 'x\\n'})"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["error"]["code"], "invalid_request",
        "{answer:?}"
    );
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `contnet`; did you mean `content`?"),
        "{answer:?}"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "alpha\n"
    );
}

#[test]
fn mirai_call_refuses_an_unknown_field() {
    let server = TestServer::with_note("a.md", "alpha\n");
    let out = mirai_cli()
        .args([
            "call",
            "notes.write",
            r#"{"path":"a.md","content":"x\n","base_comit":"HEAD"}"#,
            "--notes-root",
        ])
        .arg(&server.root)
        .output()
        .unwrap();
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{body}");
    assert_eq!(body["error"]["code"], "invalid_request", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `base_commit`?"),
        "{body}"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "alpha\n"
    );
}
