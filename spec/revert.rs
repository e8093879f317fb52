//! `POST /mcp/notes/revert` and `mirai revert`: a commit, one note of it, and
//! a whole agent run (made through the scripted fake LLM) taken back as one new
//! commit, each checked byte for byte against `git revert` in a scratch clone;
//! a revert that conflicts leaves everything as it was; reverting a revert
//! restores; refusals; the MCP tool's annotations; `git fsck` after each.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::fake_llm::{FakeLlm, Script};
use common::{git, mirai_cli, repo_state, Answer, TestServer};
use serde_json::{json, Value};

fn revert(server: &TestServer, body: Value) -> Answer {
    server.post_json("/mcp/notes/revert", &body)
}

fn assert_clean(root: &Path) {
    assert_eq!(git(root, &["status", "--porcelain"]), "");
    git(root, &["fsck", "--strict", "--no-progress"]);
}

/// git in `dir` as a person, with an identity.
fn git_as_person(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["-c", "user.name=p", "-c", "user.email=p@p"];
    all.extend_from_slice(args);
    git(dir, &all)
}

/// What `git revert` makes of `commits` (newest first) on top of the
/// repository's HEAD, in a scratch clone: the resulting tree. One commit is
/// reverted with `--no-edit`; several with `-n`, one after the other.
fn git_revert_tree(root: &Path, commits: &[&str]) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let clone = scratch.path().join("clone");
    let out = Command::new("git")
        .args(["clone", "-q"])
        .arg(root)
        .arg(&clone)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    if let [one] = commits {
        git_as_person(&clone, &["revert", "--no-edit", one]);
        git(&clone, &["rev-parse", "HEAD^{tree}"])
    } else {
        let mut args = vec!["revert", "-n"];
        args.extend_from_slice(commits);
        git_as_person(&clone, &args);
        git(&clone, &["write-tree"])
    }
    .trim()
    .to_string()
}

fn tree(root: &Path, rev: &str) -> String {
    git(root, &["rev-parse", &format!("{rev}^{{tree}}")])
        .trim()
        .to_string()
}

const LONG: &str = "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\n\
                    line 10\nline 11\nline 12\nline 13\nline 14\nline 15\nline 16\nline 17\n";

/// A server whose history has X (a mirai commit changing four notes: a.md
/// modified, b.md modified, c.md deleted, d.md created) and then Y (a.md
/// changed elsewhere). Answers X.
fn with_history() -> (TestServer, String) {
    let server = TestServer::start();
    server.write("a.md", LONG);
    server.write("b.md", "# B\n\nbeta\n");
    server.write("c.md", "# C\n\ngamma\n");
    server.commit_all();
    let x = server.post_json(
        "/mcp/changes/apply",
        &json!({"patches": [
            "--- a/a.md\n+++ b/a.md\n@@ -2,5 +2,5 @@\n line 2\n line 3\n-line 4\n+line FOUR\n line 5\n line 6\n",
            "--- a/b.md\n+++ b/b.md\n@@ -3 +3,2 @@\n-beta\n+BETA\n+more\n",
            "--- a/c.md\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-# C\n-\n-gamma\n",
            "--- /dev/null\n+++ b/d.md\n@@ -0,0 +1 @@\n+delta\n",
        ]}),
    );
    assert_eq!(x.status, 200, "{x:?}");
    let x = x.body["commit"].as_str().unwrap().to_string();
    let y = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "a.md", "edits": [{"old": "line 15\n", "new": "line fifteen\n"}]}),
    );
    assert_eq!(y.status, 200, "{y:?}");
    (server, x)
}

#[test]
fn a_commit_is_taken_back_as_git_revert_would_and_a_revert_of_it_restores() {
    let (server, x) = with_history();
    let y = server.head();
    let expected = git_revert_tree(&server.root, &[&x]);
    let answer = revert(&server, json!({"commit": x[..10]}));
    assert_eq!(answer.status, 200, "{answer:?}");
    let r = server.head();
    assert_eq!(
        answer.body,
        json!({"commit": r, "reverted": [x], "changes": [
            {"path": "a.md", "hunk_count": 1, "net_line_delta": 0},
            {"path": "b.md", "hunk_count": 1, "net_line_delta": -1},
            {"path": "c.md", "hunk_count": 1, "net_line_delta": 3},
            {"path": "d.md", "hunk_count": 1, "net_line_delta": -1},
        ]})
    );
    assert_eq!(
        tree(&server.root, "HEAD"),
        expected,
        "the same tree as git revert"
    );
    assert_eq!(git(&server.root, &["rev-parse", "HEAD~1"]).trim(), y);
    let short = git(&server.root, &["rev-parse", "--short", &x]);
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        format!(
            "mcp.revert: {}\n\nThis reverts commit {x}.\n\nM a.md\nM b.md\nA c.md\nD d.md\n\n",
            short.trim()
        )
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        LONG.replace("line 15\n", "line fifteen\n")
    );
    assert_clean(&server.root);

    // Reverting the revert brings X's change back.
    let answer = revert(&server, json!({ "commit": r }));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(tree(&server.root, "HEAD"), tree(&server.root, &y));
    assert_clean(&server.root);
}

#[test]
fn one_note_of_a_commit_is_taken_back_alone() {
    let (server, x) = with_history();
    let before = server.head();
    let scratch = tempfile::tempdir().unwrap();
    let clone = scratch.path().join("clone");
    git(
        scratch.path(),
        &["clone", "-q", server.root.to_str().unwrap(), "clone"],
    );
    git_as_person(&clone, &["revert", "-n", &x]);
    let expected = git(&clone, &["rev-parse", ":b.md"]);

    let answer = revert(&server, json!({"commit": x, "path": " b.md "}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["changes"],
        json!([{"path": "b.md", "hunk_count": 1, "net_line_delta": -1}])
    );
    assert_eq!(git(&server.root, &["rev-parse", "HEAD:b.md"]), expected);
    assert_eq!(
        git(&server.root, &["diff", "--name-only", &before, "HEAD"]),
        "b.md\n"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("b.md")).unwrap(),
        "# B\n\nbeta\n"
    );
    // A deleted note comes back alone too.
    let answer = revert(&server, json!({"commit": x, "path": "c.md"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("c.md")).unwrap(),
        "# C\n\ngamma\n"
    );
    assert_clean(&server.root);
}

#[test]
fn a_revert_that_conflicts_leaves_everything_as_it_was() {
    let (server, x) = with_history();
    // The line X changed is changed again: its inverse no longer applies.
    let edit = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "a.md", "edits": [{"old": "line FOUR", "new": "line 4 again"}]}),
    );
    assert_eq!(edit.status, 200, "{edit:?}");
    let before = repo_state(&server.root);
    let answer = revert(&server, json!({ "commit": x }));
    answer.assert_error(409, "conflict");
    let message = answer.body["error"]["message"].as_str().unwrap();
    let short = git(&server.root, &["rev-parse", "--short", &x]);
    assert!(
        message.starts_with(&format!(
            "cannot take back commit {} (mcp.changes_apply: 4 notes) in a.md",
            short.trim()
        )),
        "{message}"
    );
    assert!(message.contains("hunk 1 of 1"), "{message}");
    assert!(
        message.contains("line 4 again"),
        "shows the note's lines: {message}"
    );
    assert_eq!(repo_state(&server.root), before);
    assert_clean(&server.root);
    // The other notes of X can still be taken back one by one.
    let answer = revert(&server, json!({"commit": x, "path": "d.md"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(!server.root.join("d.md").exists());
}

#[test]
fn a_whole_agent_run_is_taken_back_newest_first() {
    let js = |value: &str| json!(value).to_string();
    let first = format!(
        "<think>Two notes at once.</think>\n<code>\nreturn (await mirai.changes.apply({{patches: [{}, {}]}})).commit;\n</code>",
        js("--- a/todo.md\n+++ b/todo.md\n@@ -1,4 +1,4 @@\n # Todo\n \n-- buy milk\n+- buy oat milk\n - water the plants\n"),
        js("--- /dev/null\n+++ b/shop.md\n@@ -0,0 +1 @@\n+oat milk\n"),
    );
    let second = format!(
        "<think>Then one more.</think>\n<code>\nreturn (await mirai.notes.write({{path: 'todo.md', content: {}}})).commit;\n</code>",
        js("# Todo\n\n- buy oat milk\n- water the plants\n- call mum\n"),
    );
    let llm = FakeLlm::start(Script::answering(&[
        first,
        second,
        "<think>Done.</think>\n<reply>Changed the todo list.".to_string(),
    ]));
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|config| {
        config.llm.base_url = base_url;
        config.llm.model = "fake-model".into();
    });
    server.write("todo.md", "# Todo\n\n- buy milk\n- water the plants\n");
    server.write("notes/other.md", "untouched\n");
    server.commit_all();
    let report = server.post_json("/agent/run", &json!({"task": "Fix the todo list."}));
    assert_eq!(report.status, 200, "{report:?}");
    assert_eq!(report.body["stopped"], "reply", "{report:?}");
    let run_id = report.body["run_id"].as_str().unwrap().to_string();
    let commits: Vec<String> = report.body["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(commits.len(), 2, "{report:?}");
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B", &commits[0]]),
        format!("mcp.changes_apply: 2 notes\n\nM todo.md\nA shop.md\n\nMirai-Run: {run_id}\n\n")
    );
    // A person's commit after the run, elsewhere.
    server.write("notes/other.md", "changed by a person\n");
    git(&server.root, &["add", "-A"]);
    git_as_person(&server.root, &["commit", "-qm", "person"]);

    let newest_first = [commits[1].as_str(), commits[0].as_str()];
    let expected = git_revert_tree(&server.root, &newest_first);
    let answer = revert(&server, json!({ "run_id": run_id }));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["reverted"], json!(newest_first));
    assert_eq!(
        answer.body["changes"],
        json!([
            {"path": "todo.md", "hunk_count": 1, "net_line_delta": -1},
            {"path": "shop.md", "hunk_count": 1, "net_line_delta": -1},
        ])
    );
    assert_eq!(
        tree(&server.root, "HEAD"),
        expected,
        "the same tree as git revert"
    );
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        format!(
            "mcp.revert: run {run_id}\n\nThis reverts commit {}.\nThis reverts commit {}.\n\n\
             M todo.md\nD shop.md\n\n",
            commits[1], commits[0]
        )
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        "# Todo\n\n- buy milk\n- water the plants\n"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("notes/other.md")).unwrap(),
        "changed by a person\n"
    );
    assert_clean(&server.root);

    // Only one note of the run.
    let answer = revert(&server, json!({"run_id": run_id, "path": "shop.md"}));
    answer.assert_error(409, "conflict"); // already taken back: the note is gone
}

#[test]
fn refusals_change_nothing() {
    let (server, x) = with_history();
    // A merge, and a person's commit that changes a file that is not a note.
    git(&server.root, &["checkout", "-qb", "side"]);
    server.write("side.md", "side\n");
    git(&server.root, &["add", "-A"]);
    git_as_person(&server.root, &["commit", "-qm", "side"]);
    git(&server.root, &["checkout", "-q", "-"]);
    git_as_person(
        &server.root,
        &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
    );
    let merge = server.head();
    server.write(".gitignore", "*.tmp\n");
    git(&server.root, &["add", "-A"]);
    git_as_person(&server.root, &["commit", "-qm", "ignore temp files"]);
    let ignore = server.head();
    let before = repo_state(&server.root);
    let unknown_run = "0190a0c0-0000-7000-8000-000000000000";
    let cases: Vec<(Value, u16, &str, String)> = vec![
        (json!({}), 400, "invalid_request", "exactly one".into()),
        (
            json!({"commit": x, "run_id": unknown_run}),
            400,
            "invalid_request",
            "exactly one".into(),
        ),
        (
            json!({"commit": "HEAD^"}),
            400,
            "invalid_request",
            "hex".into(),
        ),
        (
            json!({"commit": "0123456789abcdef0123456789abcdef01234567"}),
            404,
            "not_found",
            "no commit".into(),
        ),
        (
            json!({"run_id": "run-1"}),
            400,
            "invalid_request",
            "UUID".into(),
        ),
        (
            json!({"run_id": unknown_run}),
            404,
            "not_found",
            unknown_run.into(),
        ),
        (
            json!({"commit": merge}),
            400,
            "invalid_request",
            "merge".into(),
        ),
        (
            json!({"commit": ignore}),
            400,
            "invalid_request",
            ".gitignore".into(),
        ),
        (
            json!({"commit": x, "path": "nope.md"}),
            400,
            "invalid_request",
            "did not change nope.md".into(),
        ),
        (
            json!({"commit": x, "path": "../x.md"}),
            400,
            "invalid_path",
            "escapes".into(),
        ),
        (
            json!({"commit": 7}),
            400,
            "invalid_request",
            "notes.revert".into(),
        ),
    ];
    for (body, status, code, says) in cases {
        let answer = revert(&server, body.clone());
        answer.assert_error(status, code);
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&says), "{body}: {message}");
        assert_eq!(repo_state(&server.root), before, "{body}");
    }
    // More notes than one commit may change.
    let small = TestServer::start_with(|c| c.max_changes = 3);
    for n in 0..4 {
        small.write(&format!("n{n}.md"), "x\n");
    }
    small.commit_all();
    let answer = revert(&small, json!({"commit": small.head()}));
    answer.assert_error(400, "invalid_request");
    assert!(answer.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("MIRAI_CHANGES_MAX_PATCHES"));
}

#[test]
fn mcp_lists_both_rows_as_destructive_tools() {
    let server = TestServer::start();
    let tools = server.mcp_tools();
    for name in ["notes_revert", "changes_apply"] {
        let tool = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} is listed: {tools:?}"));
        assert_eq!(tool["annotations"]["destructiveHint"], true, "{tool}");
        assert_eq!(tool["annotations"]["readOnlyHint"], false, "{tool}");
    }
}

#[test]
fn mirai_revert_prints_the_new_commit() {
    let (server, x) = with_history();
    let root = server.root.clone();
    let run = |args: &[&str]| {
        mirai_cli()
            .arg("revert")
            .args(args)
            .arg("--notes-root")
            .arg(&root)
            .output()
            .unwrap()
    };
    let out = run(&[&x, "--path", "d.md"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}\n", server.head())
    );
    assert!(!root.join("d.md").exists());
    assert_clean(&root);
    // A conflict is exit 1 with the code and message, and changes nothing.
    let out = run(&[&x, "--path", "d.md"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("conflict: cannot take back commit"));
    let out = run(&["--run", "not-a-run"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_request"));
}

#[test]
fn a_run_whose_changes_cancel_out_is_taken_back_with_no_commit() {
    let write = |content: &str| {
        format!(
            "<think>Write.</think>\n<code>\nreturn (await mirai.notes.write({{path: 'a.md', content: {}}})).commit;\n</code>",
            json!(content)
        )
    };
    let llm = FakeLlm::start(Script::answering(&[
        write("changed\n"),
        write("original\n"),
        "<think>Done.</think>\n<reply>Back as it was.".to_string(),
    ]));
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|config| {
        config.llm.base_url = base_url;
        config.llm.model = "fake-model".into();
    });
    server.write("a.md", "original\n");
    server.commit_all();
    let report = server.post_json("/agent/run", &json!({"task": "Try something."}));
    assert_eq!(report.status, 200, "{report:?}");
    let run_id = report.body["run_id"].as_str().unwrap();
    let commits = report.body["commits"].as_array().unwrap().clone();
    assert_eq!(commits.len(), 2, "{report:?}");
    let before = repo_state(&server.root);
    let answer = revert(&server, json!({ "run_id": run_id }));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"commit": null, "reverted": [commits[1], commits[0]], "changes": []})
    );
    assert_eq!(repo_state(&server.root), before);
}

#[test]
fn head_and_head_tilde_n_name_the_commits_a_person_types() {
    let (server, x) = with_history();
    let y = server.head();
    // HEAD~1 is X (Y is HEAD): its part of d.md (the note X created) is taken back.
    let answer = revert(&server, json!({"commit": "HEAD~1", "path": "d.md"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["reverted"], json!([x]));
    assert!(!server.root.join("d.md").exists());
    assert_clean(&server.root);
    // HEAD is now that revert; `mirai revert HEAD` takes it back in turn.
    let out = mirai_cli()
        .args(["revert", "HEAD", "--notes-root"])
        .arg(&server.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("d.md")).unwrap(),
        "delta\n"
    );
    assert_eq!(tree(&server.root, "HEAD"), tree(&server.root, &y));
    assert_clean(&server.root);
    // Too far back is 404; other spellings are refused with what to give instead.
    let answer = revert(&server, json!({"commit": "HEAD~99"}));
    assert_eq!(answer.status, 404, "{answer:?}");
    assert!(answer.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("commit(s) before it"));
    for bad in ["HEAD^", "HEAD~", "HEAD~-1", "main", "head"] {
        let answer = revert(&server, json!({ "commit": bad }));
        assert_eq!(answer.status, 400, "{bad}: {answer:?}");
        assert!(answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("HEAD~N"));
    }
}

#[test]
fn a_revert_of_many_large_notes_is_refused_up_front_and_one_note_at_a_time_works() {
    // 8 request bodies of text (before and after) at most for several notes:
    // here 8 x 4 KiB, and the commit rewrote three notes of 12 KB.
    let server = TestServer::start_with(|c| c.max_body_bytes = 4096);
    let note = |word: &str| format!("{word} line of the note\n").repeat(500);
    for n in 0..3 {
        server.write(&format!("big{n}.md"), note("first"));
    }
    server.commit_all();
    for n in 0..3 {
        server.write(&format!("big{n}.md"), note("second"));
    }
    server.commit_all();
    let rewrite = server.head();
    let before = repo_state(&server.root);
    let answer = revert(&server, json!({"commit": rewrite}));
    answer.assert_error(400, "invalid_request");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("rewrites 3 notes") && message.contains("give `path`"),
        "{message}"
    );
    assert_eq!(repo_state(&server.root), before);
    let answer = revert(&server, json!({"commit": rewrite, "path": "big1.md"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("big1.md")).unwrap(),
        note("first")
    );
    assert_clean(&server.root);
}
