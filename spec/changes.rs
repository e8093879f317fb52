//! `POST /mcp/changes/apply`: several notes' diffs in one commit, all or
//! nothing. The commit and its message, the index entries and the live index;
//! a failing patch leaves the notes, HEAD and `.git/index` byte for byte as
//! they were; refusals keep `patch.apply`'s codes with `patch N: ` in front;
//! base_commit; dry runs record into the overlay.

use crate::common;

use common::{git, repo_state, Answer, TestServer};
use serde_json::{json, Value};

fn apply(server: &TestServer, body: &Value) -> Answer {
    server.post_json("/mcp/changes/apply", body)
}

fn seeded() -> TestServer {
    let server = TestServer::start();
    server.write("a.md", "# A\n\none\ntwo\nthree\n");
    server.write("sub/b.md", "# B\n\nbeta\n");
    server.write("c.md", "# C\n\nquokka\n");
    server.commit_all();
    server
}

const MODIFY_A: &str = "--- a/a.md\n+++ b/a.md\n@@ -3,3 +3,3 @@\n one\n-two\n+TWO\n three\n";
const CREATE_D: &str = "--- /dev/null\n+++ b/new/d.md\n@@ -0,0 +1,3 @@\n+# D\n+\n+zeppelin\n";
const DELETE_C: &str = "--- a/c.md\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-# C\n-\n-quokka\n";

#[test]
fn three_notes_land_in_one_commit_with_the_documented_message() {
    let server = seeded();
    // The index is loaded from its artifact, so the apply must update it in memory.
    assert_eq!(
        server.post_json("/mcp/index/rebuild", &json!({})).status,
        200
    );
    let before = server.head();
    let answer = apply(
        &server,
        &json!({
            "patches": [MODIFY_A, CREATE_D, DELETE_C],
            "message": "  Tidy the notes.\n\n\tA second paragraph.\n",
        }),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let head = server.head();
    assert_eq!(
        answer.body,
        json!({"commit": head, "changes": [
            {"path": "a.md", "hunk_count": 1, "net_line_delta": 0},
            {"path": "new/d.md", "hunk_count": 1, "net_line_delta": 3},
            {"path": "c.md", "hunk_count": 1, "net_line_delta": -3},
        ]})
    );
    assert_eq!(git(&server.root, &["rev-parse", "HEAD~1"]).trim(), before);
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        "mcp.changes_apply: 3 notes\n\nTidy the notes.\n\n\tA second paragraph.\n\n\
         M a.md\nA new/d.md\nD c.md\n\n"
    );
    assert_eq!(
        git(
            &server.root,
            &["show", "--name-status", "--format=", "HEAD"]
        ),
        "M\ta.md\nD\tc.md\nA\tnew/d.md\n"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "# A\n\none\nTWO\nthree\n"
    );
    assert_eq!(
        git(&server.root, &["show", "HEAD:new/d.md"]),
        "# D\n\nzeppelin\n"
    );
    assert!(!server.root.join("c.md").exists());
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    git(&server.root, &["fsck", "--strict", "--no-progress"]);

    // The live index has every note as committed, at once.
    let hits = |q: &str| -> Vec<String> {
        let answer = server.get(&format!("/mcp/index/query?q={q}"));
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.body["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["metadata"]["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(hits("zeppelin"), ["new/d.md"]);
    assert_eq!(hits("quokka"), Vec::<String>::new());
    assert_eq!(hits("TWO"), ["a.md"]);

    // One note says "1 note"; no message, no paragraph for it.
    let answer = apply(
        &server,
        &json!({"patches": ["--- a/sub/b.md\n+++ b/sub/b.md\n@@ -3 +3 @@\n-beta\n+BETA\n"]}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        "mcp.changes_apply: 1 note\n\nM sub/b.md\n\n"
    );
}

#[test]
fn a_three_note_change_whose_third_patch_conflicts_writes_nothing() {
    let server = seeded();
    let before = repo_state(&server.root);
    let conflicting = "--- a/sub/b.md\n+++ b/sub/b.md\n@@ -3 +3 @@\n-gamma\n+delta\n";
    let answer = apply(
        &server,
        &json!({"patches": [CREATE_D, MODIFY_A, conflicting]}),
    );
    answer.assert_error(409, "conflict");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "patch 3: hunk 1 of 1 (@@ -3,1 +3,1 @@, patch line 3) does not apply to sub/b.md"
        ),
        "{message}"
    );
    assert!(
        message.contains("beta"),
        "shows the note's actual line: {message}"
    );
    assert_eq!(repo_state(&server.root), before);
    assert!(!server.root.join("new").exists());
    git(&server.root, &["fsck", "--strict", "--no-progress"]);
}

#[test]
fn refusals_keep_patch_applys_codes_and_name_the_patch() {
    let server = TestServer::start_with(|c| c.max_changes = 3);
    server.write("a.md", "# A\n\none\ntwo\nthree\n");
    server.commit_all();
    let before = repo_state(&server.root);
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            json!({"patches": [MODIFY_A, "not a diff"]}),
            400,
            "invalid_patch",
            "patch 2: ",
        ),
        (
            json!({"patches": ["--- a/gone.md\n+++ b/gone.md\n@@ -1 +1 @@\n-x\n+y\n"]}),
            404,
            "not_found",
            "patch 1: ",
        ),
        (
            json!({"patches": [CREATE_D.replace("new/d.md", ".hidden/d.md")]}),
            400,
            "invalid_path",
            "patch 1: ",
        ),
        (
            json!({"patches": [CREATE_D.replace("new/d.md", "d.txt")]}),
            400,
            "invalid_extension",
            "patch 1: ",
        ),
        (
            json!({"patches": [MODIFY_A, CREATE_D, MODIFY_A.replace("TWO", "Two")]}),
            400,
            "invalid_request",
            "patch 3: a.md is already changed by patch 1",
        ),
        (json!({"patches": []}), 400, "invalid_request", "0 patches"),
        (
            json!({"patches": [MODIFY_A, CREATE_D, DELETE_C, CREATE_D]}),
            400,
            "invalid_request",
            "MIRAI_CHANGES_MAX_PATCHES",
        ),
        (
            json!({"patches": [MODIFY_A], "message": "fine\n\nMirai-Run: 0190a0c0-0000-7000-8000-000000000000"}),
            400,
            "invalid_request",
            "message line 3",
        ),
        (
            json!({"patches": [MODIFY_A], "message": "bell \u{7}"}),
            400,
            "invalid_request",
            "U+0007",
        ),
        (
            json!({"patch": MODIFY_A}),
            400,
            "invalid_request",
            "patches",
        ),
        (
            json!({"patches": MODIFY_A}),
            400,
            "invalid_request",
            "sequence",
        ),
    ];
    for (body, status, code, says) in cases {
        let answer = apply(&server, &body);
        answer.assert_error(status, code);
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
        assert_eq!(repo_state(&server.root), before, "{body}");
    }
    let answer = server.post_raw("/mcp/changes/apply", "{\"patches\": [");
    answer.assert_error(400, "invalid_request");
}

#[test]
fn base_commit_refuses_when_any_of_the_notes_changed_since() {
    let server = seeded();
    let base = server.head();
    server.write("sub/b.md", "# B\n\nbeta by a person\n");
    git(&server.root, &["add", "-A"]);
    git(
        &server.root,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@p",
            "commit",
            "-qm",
            "person",
        ],
    );
    let before = repo_state(&server.root);
    let b_patch = "--- a/sub/b.md\n+++ b/sub/b.md\n@@ -3 +3 @@\n-beta by a person\n+beta\n";
    let answer = apply(
        &server,
        &json!({"patches": [MODIFY_A, b_patch], "base_commit": base}),
    );
    answer.assert_error(409, "conflict");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("sub/b.md changed between base_commit"),
        "{message}"
    );
    assert!(
        message.contains("person"),
        "names who changed it: {message}"
    );
    assert_eq!(repo_state(&server.root), before);

    let answer = apply(
        &server,
        &json!({"patches": [MODIFY_A, b_patch], "base_commit": server.head()}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[test]
fn a_dry_run_records_every_note_in_the_overlay_and_writes_nothing() {
    let server = seeded();
    let before = repo_state(&server.root);
    let answer = server.post_json(
        "/agent/eval",
        &json!({"dry_run": true, "code": format!(
            "const done = await mirai.changes.apply({{patches: {}}});\n\
             const d = await mirai.notes.read({{path: 'new/d.md'}});\n\
             const list = await mirai.notes.list();\n\
             return {{commit: done.commit, d: d.content, list: list.notes}};",
            json!([MODIFY_A, CREATE_D, DELETE_C])
        )}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["result"],
        json!({"commit": null, "d": "# D\n\nzeppelin\n",
               "list": ["a.md", "new/d.md", "sub/b.md", "welcome.md"]})
    );
    assert_eq!(repo_state(&server.root), before);
    let changes = answer.body["changes"].as_array().unwrap();
    let paths: Vec<&str> = changes
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.md", "c.md", "new/d.md"]);
    // The combined diffs go through as one real change.
    let patches: Vec<&Value> = changes.iter().map(|c| &c["patch"]).collect();
    let answer = apply(&server, &json!({ "patches": patches }));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
}
