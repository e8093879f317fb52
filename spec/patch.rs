//! Black-box tests of `patch.propose` and `patch.apply` over HTTP on real git
//! repositories: what applies, the bytes it leaves, the commit it makes, and
//! that a failure leaves everything exactly as it was.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{git, TestServer};
use mirai::config::PolicyMode;
use serde_json::json;

const NOTE: &str = "# Groceries\n\n- apples\n- bread\n- milk\n- eggs\n- tea\n";

fn apply(server: &TestServer, patch: &str) -> common::Answer {
    server.post_json("/mcp/patch/apply", &json!({ "patch": patch }))
}

fn propose(server: &TestServer, patch: &str) -> common::Answer {
    server.post_json("/mcp/patch/propose", &json!({ "patch": patch }))
}

const MILK_TO_OAT: &str = "--- a/list.md\n+++ b/list.md\n@@ -3,4 +3,4 @@\n - apples\n - bread\n-- milk\n+- oat milk\n - eggs\n";

#[test]
fn propose_answers_exactly_what_apply_would_and_writes_nothing() {
    let server = TestServer::with_note("list.md", NOTE);
    let before = server.head();
    let answer = propose(&server, MILK_TO_OAT);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"path": "list.md", "hunk_count": 1, "net_line_delta": 0})
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("list.md")).unwrap(),
        NOTE
    );
    assert_eq!(server.head(), before);
}

#[test]
fn apply_writes_the_note_and_commits_only_that_path() {
    let server = TestServer::with_note("list.md", NOTE);
    server.write("other.md", "untracked\n");
    server.write("staged.md", "staged\n");
    git(&server.root, &["add", "staged.md"]);
    let before = server.head();

    let answer = apply(&server, MILK_TO_OAT);
    assert_eq!(answer.status, 200, "{answer:?}");
    let commit = answer.body["commit"].as_str().unwrap().to_string();
    let mut expected = json!({"path": "list.md", "hunk_count": 1, "net_line_delta": 0});
    expected["commit"] = json!(commit);
    assert_eq!(answer.body, expected);

    assert_eq!(
        std::fs::read_to_string(server.root.join("list.md")).unwrap(),
        NOTE.replace("- milk", "- oat milk")
    );
    assert_eq!(server.head(), commit);
    assert_eq!(git(&server.root, &["rev-parse", "HEAD~1"]).trim(), before);
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        "mcp.patch_apply: list.md\n\n"
    );
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%an <%ae>|%cn <%ce>"]).trim(),
        "mirai <mirai@localhost>|mirai <mirai@localhost>"
    );
    assert_eq!(
        git(&server.root, &["show", "--name-only", "--format=", "HEAD"]).trim(),
        "list.md"
    );
    // The staged file is still staged, the untracked one untouched, and list.md clean.
    let status = git(&server.root, &["status", "--porcelain"]);
    assert_eq!(status, "A  staged.md\n?? other.md\n", "{status}");
    git(&server.root, &["fsck", "--strict"]);
}

#[test]
fn apply_honours_the_configured_author() {
    let server = TestServer::start_with(|c| {
        c.git_identity.name = "Ada".into();
        c.git_identity.email = "ada@example.org".into();
    });
    let answer = apply(
        &server,
        "--- /dev/null\n+++ b/new.md\n@@ -0,0 +1 @@\n+hello\n",
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%an <%ae>|%cn <%ce>"]).trim(),
        "Ada <ada@example.org>|Ada <ada@example.org>"
    );
}

#[test]
fn dev_null_creates_a_note_with_its_folders_and_refuses_an_existing_one() {
    let server = TestServer::start();
    let patch = "--- /dev/null\n+++ b/deep/er/new.md\n@@ -0,0 +1,2 @@\n+# New\n+body\n";
    let answer = apply(&server, patch);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["net_line_delta"], 2);
    assert_eq!(
        std::fs::read_to_string(server.root.join("deep/er/new.md")).unwrap(),
        "# New\nbody\n"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    apply(&server, patch).assert_error(409, "conflict");
}

#[test]
fn dev_null_deletes_a_note_only_when_the_hunk_is_its_whole_content() {
    let server = TestServer::with_note("gone.md", "one\ntwo\n");
    let partial = "--- a/gone.md\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-one\n";
    assert_ne!(apply(&server, partial).status, 200);
    assert!(server.root.join("gone.md").exists());
    let whole = "--- a/gone.md\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n";
    let answer = apply(&server, whole);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["net_line_delta"], -2);
    assert!(!server.root.join("gone.md").exists());
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    assert!(git(&server.root, &["ls-files"])
        .lines()
        .all(|l| l != "gone.md"));
}

#[test]
fn a_patch_that_does_not_apply_is_a_conflict_a_model_can_act_on() {
    let server = TestServer::with_note("list.md", NOTE);
    let before = server.head();
    let patch =
        "--- a/list.md\n+++ b/list.md\n@@ -3,3 +3,3 @@\n - apples\n-- butter\n+- ghee\n - milk\n";
    let answer = apply(&server, patch);
    answer.assert_error(409, "conflict");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("hunk 1"), "{message}");
    assert!(
        message.contains("butter"),
        "expected lines shown: {message}"
    );
    assert!(message.contains("bread"), "actual lines shown: {message}");
    assert!(message.contains('4'), "line numbers shown: {message}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("list.md")).unwrap(),
        NOTE
    );
    assert_eq!(server.head(), before);
    propose(&server, patch).assert_error(409, "conflict");
}

#[test]
fn a_patch_that_changes_nothing_is_refused_without_a_commit() {
    let server = TestServer::with_note("list.md", NOTE);
    let before = server.commit_count();
    let patch = "--- a/list.md\n+++ b/list.md\n@@ -3,2 +3,2 @@\n - apples\n - bread\n";
    propose(&server, patch).assert_error(400, "invalid_patch");
    apply(&server, patch).assert_error(400, "invalid_patch");
    assert_eq!(server.commit_count(), before);
}

#[test]
fn malformed_bodies_and_patches_are_invalid_patch() {
    let server = TestServer::with_note("list.md", NOTE);
    for body in [
        json!({}),
        json!({"patch": null}),
        json!({"patch": 3}),
        json!(["x"]),
        json!({"patch": ""}),
    ] {
        for route in ["/mcp/patch/propose", "/mcp/patch/apply"] {
            server
                .post_json(route, &body)
                .assert_error(400, "invalid_patch");
        }
    }
    for raw in ["", "nope", "{\"patch\":"] {
        server
            .post_raw("/mcp/patch/apply", raw)
            .assert_error(400, "invalid_patch");
    }
    let bad_patches = [
        "just prose, no diff at all\n",
        // two files
        "--- a/list.md\n+++ b/list.md\n@@ -3 +3 @@\n-- apples\n+- pears\n--- a/b.md\n+++ b/b.md\n@@ -1 +1 @@\n-x\n+y\n",
        // header names disagree
        "--- a/list.md\n+++ b/other.md\n@@ -3 +3 @@\n-- apples\n+- pears\n",
        // counts larger than the body
        "--- a/list.md\n+++ b/list.md\n@@ -3,3 +3,3 @@\n-- apples\n+- pears\n",
        // rename
        "diff --git a/list.md b/moved.md\nsimilarity index 100%\nrename from list.md\nrename to moved.md\n",
        // mode change
        "diff --git a/list.md b/list.md\nold mode 100644\nnew mode 100755\n",
        // binary
        "diff --git a/list.md b/list.md\nBinary files a/list.md and b/list.md differ\n",
    ];
    for patch in bad_patches {
        let answer = apply(&server, patch);
        answer.assert_error(400, "invalid_patch");
        assert_eq!(
            propose(&server, patch).error_code(),
            "invalid_patch",
            "{patch}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(server.root.join("list.md")).unwrap(),
        NOTE
    );
}

#[test]
fn patch_paths_follow_the_read_rules() {
    let server = TestServer::with_note("list.md", NOTE);
    let cases = [
        ("../escape.md", "invalid_path"),
        (".git/config.md", "invalid_path"),
        (".mirai/x.md", "invalid_path"),
        ("notes.txt", "invalid_extension"),
    ];
    for (path, code) in cases {
        let patch = format!("--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n");
        apply(&server, &patch).assert_error(400, code);
        propose(&server, &patch).assert_error(400, code);
    }
    let missing = "--- a/missing.md\n+++ b/missing.md\n@@ -1 +1 @@\n-x\n+y\n";
    apply(&server, missing).assert_error(404, "not_found");
}

#[test]
fn read_only_denies_propose_and_apply_before_reading_the_body() {
    let server = TestServer::start_with(|c| c.policy = PolicyMode::ReadOnly);
    for route in ["/mcp/patch/propose", "/mcp/patch/apply"] {
        let answer = server.post_raw(route, "not even json");
        answer.assert_error(403, "policy_denied");
        let op = if route.ends_with("propose") {
            "patch.propose"
        } else {
            "patch.apply"
        };
        assert_eq!(
            answer.body["error"]["message"],
            format!("action {op} is denied in read_only mode")
        );
    }
}

#[test]
fn a_failed_commit_restores_the_note_byte_for_byte() {
    let server = TestServer::with_note("list.md", NOTE);
    let before = server.head();
    let lock = server.root.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    apply(&server, MILK_TO_OAT).assert_error(500, "git_error");
    std::fs::remove_file(&lock).unwrap();
    assert_eq!(
        std::fs::read_to_string(server.root.join("list.md")).unwrap(),
        NOTE
    );
    assert_eq!(server.head(), before);
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    // And the same patch applies once the lock is gone.
    assert_eq!(apply(&server, MILK_TO_OAT).status, 200);
}

#[test]
fn base_commit_guards_against_changes_since() {
    let server = TestServer::with_note("list.md", NOTE);
    let base = server.head();
    // Another note changes: the base is old, but this note did not change since.
    let other = apply(
        &server,
        "--- /dev/null\n+++ b/other.md\n@@ -0,0 +1 @@\n+x\n",
    );
    assert_eq!(other.status, 200);
    let answer = server.post_json(
        "/mcp/patch/apply",
        &json!({"patch": MILK_TO_OAT, "base_commit": base}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    // Now the note itself changed after `base`.
    let back =
        "--- a/list.md\n+++ b/list.md\n@@ -4,3 +4,3 @@\n - bread\n-- oat milk\n+- milk\n - eggs\n";
    let answer = server.post_json(
        "/mcp/patch/apply",
        &json!({"patch": back, "base_commit": base}),
    );
    answer.assert_error(409, "conflict");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&base[..7]), "{message}");
    assert!(message.contains(&server.head()[..7]), "{message}");
}

/// Ninety numbered lines: patches that each replace one even line (odd lines are
/// their context) never overlap; patches that all replace line 84 conflict.
fn numbered() -> String {
    (1..=90).map(|i| format!("L{i}\n")).collect()
}

fn replace_line(line: usize, with: &str) -> String {
    format!(
        "--- a/n.md\n+++ b/n.md\n@@ -{},3 +{},3 @@\n L{}\n-L{line}\n+{with}\n L{}\n",
        line - 1,
        line - 1,
        line - 1,
        line + 1
    )
}

#[test]
fn fifty_parallel_applies_each_commit_or_conflict() {
    let server = Arc::new(TestServer::with_note("n.md", &numbered()));
    let start = server.commit_count();
    let mut patches: Vec<String> = (1..=40)
        .map(|i| replace_line(2 * i, &format!("even {i}")))
        .collect();
    patches.extend((0..10).map(|j| replace_line(84, &format!("contested {j}"))));
    let handles: Vec<_> = patches
        .into_iter()
        .map(|patch| {
            let server = server.clone();
            std::thread::spawn(move || (patch.clone(), apply(&server, &patch)))
        })
        .collect();
    let mut ok = 0;
    let mut by_commit: HashMap<String, String> = HashMap::new();
    for handle in handles {
        let (patch, answer) = handle.join().unwrap();
        match answer.status {
            200 => {
                ok += 1;
                by_commit.insert(answer.body["commit"].as_str().unwrap().to_string(), patch);
            }
            409 => assert_eq!(answer.error_code(), "conflict"),
            other => panic!("unexpected {other}: {answer:?}"),
        }
    }
    assert_eq!(
        ok, 41,
        "all forty disjoint edits and exactly one contested edit land"
    );
    assert_eq!(server.commit_count(), start + ok);
    git(&server.root, &["fsck", "--strict"]);
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");

    // Replaying the committed patches in commit order with `git apply` gives the final bytes.
    let replay = tempfile::tempdir().unwrap();
    std::fs::write(replay.path().join("n.md"), numbered()).unwrap();
    let order = git(
        &server.root,
        &["rev-list", "--reverse", &format!("HEAD~{ok}..HEAD")],
    );
    for commit in order.lines() {
        let patch_path = replay.path().join("p.diff");
        std::fs::write(&patch_path, &by_commit[commit]).unwrap();
        git(replay.path(), &["apply", "p.diff"]);
    }
    assert_eq!(
        std::fs::read(replay.path().join("n.md")).unwrap(),
        std::fs::read(server.root.join("n.md")).unwrap()
    );
}

#[test]
fn reads_see_old_or_new_never_a_torn_note() {
    let server = Arc::new(TestServer::with_note("n.md", &numbered()));
    let reader = {
        let server = server.clone();
        std::thread::spawn(move || {
            for _ in 0..200 {
                let answer = server.read("n.md");
                assert_eq!(answer.status, 200);
                let content = answer.body["content"].as_str().unwrap();
                assert!(content.starts_with("L1\n"), "{content:?}");
                assert!(content.ends_with("L90\n"), "{content:?}");
                assert_eq!(content.lines().count(), 90, "{content:?}");
            }
        })
    };
    for i in 1..=20 {
        assert_eq!(
            apply(&server, &replace_line(2 * i, &format!("even {i}"))).status,
            200
        );
    }
    reader.join().unwrap();
}

/// Every case of `fixtures/patch-cases` (real notes, real diffs, `git apply` as the
/// oracle), applied over HTTP to a real repository: same bytes, or the same refusal
/// with the note and HEAD untouched.
#[test]
fn every_corpus_case_applies_over_http_as_recorded() {
    let cases = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/patch-cases");
    let mut dirs: Vec<_> = std::fs::read_dir(&cases)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 60, "{} cases", dirs.len());
    let read = |p: std::path::PathBuf| std::fs::read(p).ok();
    let mut failures = Vec::new();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
        let path = meta["path"].as_str().unwrap();
        let patch = String::from_utf8(std::fs::read(dir.join("patch.diff")).unwrap()).unwrap();
        let before = read(dir.join("before.md"));
        let server = TestServer::start();
        if let Some(bytes) = &before {
            server.write(path, bytes);
            server.commit_all();
        }
        let head_before = server.head();
        let answer = apply(&server, &patch);
        let on_disk = read(server.root.join(path));
        let problem = match read(dir.join("expect.json")) {
            Some(expect) => {
                let expect: serde_json::Value = serde_json::from_slice(&expect).unwrap();
                let code = expect["error"].as_str().unwrap();
                if answer.status == 200 || answer.error_code() != code {
                    Some(format!("expected {code}, got {answer:?}"))
                } else if on_disk != before || server.head() != head_before {
                    Some("a refused patch changed the note or HEAD".to_string())
                } else {
                    None
                }
            }
            None if answer.status != 200 => Some(format!("expected success, got {answer:?}")),
            None if on_disk != read(dir.join("after.md")) => {
                Some("wrong bytes on disk".to_string())
            }
            None if !git(&server.root, &["status", "--porcelain"]).is_empty() => {
                Some("git status not clean".to_string())
            }
            None => None,
        };
        if let Some(problem) = problem {
            failures.push(format!("{name}: {problem}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `n` distinct short lines, `1` to `n` in hex.
fn hex_lines(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{i:x}")).collect()
}

#[test]
fn a_near_miss_hunk_against_a_huge_note_is_a_precise_conflict() {
    // Every context line of the hunk matches the note but one: the search for a
    // place and for the nearest partial match must both stay linear.
    let n = 100_000;
    let lines = hex_lines(n);
    let server = TestServer::with_note("big.md", &(lines.join("\n") + "\n"));
    let mut patch = format!(
        "--- a/big.md\n+++ b/big.md\n@@ -2,{} +2,{} @@\n",
        n - 1,
        n - 1
    );
    for (i, line) in lines.iter().enumerate().skip(1) {
        match i {
            50_000 => patch.push_str(&format!("-{line}\n+changed\n")),
            90_000 => patch.push_str(" not in the note\n"),
            _ => patch.push_str(&format!(" {line}\n")),
        }
    }
    let before = server.head();
    for answer in [propose(&server, &patch), apply(&server, &patch)] {
        answer.assert_error(409, "conflict");
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "Nearest partial match: lines 2-{n} ({} of {} expected lines equal)",
                n - 2,
                n - 1
            )),
            "{message:.2000}"
        );
        assert!(
            message.contains("line 90001: expected `not in the note`, found `15f91`"),
            "{message:.2000}"
        );
        assert!(message.len() < 20_000, "{} bytes", message.len());
    }
    assert_eq!(server.head(), before);
}

#[test]
fn twenty_thousand_tiny_hunks_propose_and_apply_exactly() {
    let n = 300_000;
    let lines: Vec<String> = (0..n).map(|i| format!("{:x}", i % 256)).collect();
    let server = TestServer::with_note("big.md", &(lines.join("\n") + "\n"));
    let hunks = 20_000;
    let step = n / hunks;
    let mut patch = String::from("--- a/big.md\n+++ b/big.md\n");
    let mut expected = lines.clone();
    for h in (0..hunks).rev() {
        let old = 2 + h * step;
        expected.insert(old - 1, "n".into());
    }
    for h in 0..hunks {
        let old = 2 + h * step;
        patch.push_str(&format!(
            "@@ -{old},1 +{},2 @@\n+n\n {}\n",
            old + h,
            lines[old - 1]
        ));
    }
    let summary = json!({"path": "big.md", "hunk_count": hunks, "net_line_delta": hunks});
    let proposed = propose(&server, &patch);
    assert_eq!(proposed.status, 200, "{proposed:?}");
    assert_eq!(proposed.body, summary);
    let applied = apply(&server, &patch);
    assert_eq!(applied.status, 200, "{applied:?}");
    assert_eq!(applied.body["hunk_count"], hunks);
    assert_eq!(
        std::fs::read_to_string(server.root.join("big.md")).unwrap(),
        expected.join("\n") + "\n"
    );
}
