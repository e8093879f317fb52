//! Black-box tests of the model-friendly writes over HTTP on real repositories:
//! `patch.make` (its patches apply back byte for byte), `notes.write` and
//! `notes.edit` (through the same path as `patch.apply`).

use crate::common;

use common::{git, TestServer};
use mirai::config::PolicyMode;
use serde_json::{json, Value};

const NOTE: &str = "# Groceries\n\n- apples\n- bread\n- milk\n- eggs\n- tea\n";

fn on_disk(server: &TestServer, rel: &str) -> Option<String> {
    std::fs::read_to_string(server.root.join(rel)).ok()
}

#[test]
fn made_patches_apply_back_byte_for_byte_over_the_corpus() {
    let cases = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/patch-cases");
    let mut checked = 0;
    for dir in std::fs::read_dir(&cases)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
    {
        let meta: Value =
            serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
        let path = meta["path"].as_str().unwrap();
        let before = std::fs::read_to_string(dir.join("before.md")).ok();
        let after = std::fs::read_to_string(dir.join("after.md")).ok();
        if dir.join("expect.json").exists() || before == after {
            continue;
        }
        let server = TestServer::start();
        if let Some(text) = &before {
            server.write(path, text);
            server.commit_all();
        }
        let made = server.post_json("/mcp/patch/make", &json!({"path": path, "content": after}));
        assert_eq!(made.status, 200, "{}: {made:?}", dir.display());
        let applied = server.post_json("/mcp/patch/apply", &json!({"patch": made.body["patch"]}));
        assert_eq!(applied.status, 200, "{}: {applied:?}", dir.display());
        assert_eq!(on_disk(&server, path), after, "{}", dir.display());
        assert_eq!(applied.body["hunk_count"], made.body["hunk_count"]);
        assert_eq!(applied.body["net_line_delta"], made.body["net_line_delta"]);
        checked += 1;
    }
    assert!(checked >= 40, "{checked} cases");
}

#[test]
fn patch_make_writes_nothing_and_is_allowed_in_read_only_mode() {
    let server = TestServer::start_with(|c| c.policy = PolicyMode::ReadOnly);
    server.write("a.md", "one\n");
    let made = server.post_json(
        "/mcp/patch/make",
        &json!({"path": "a.md", "content": "two\n"}),
    );
    assert_eq!(made.status, 200, "{made:?}");
    assert_eq!(
        made.body["patch"],
        "--- a/a.md\n+++ b/a.md\n@@ -1 +1 @@\n-one\n+two\n"
    );
    assert_eq!(made.body["hunk_count"], 1);
    assert_eq!(on_disk(&server, "a.md").as_deref(), Some("one\n"));
    let deletion = server.post_json("/mcp/patch/make", &json!({"path": "a.md", "content": null}));
    assert_eq!(
        deletion.body["patch"],
        "--- a/a.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"
    );
    let creation = server.post_json(
        "/mcp/patch/make",
        &json!({"path": "new/b.md", "content": "hi\n"}),
    );
    assert_eq!(
        creation.body["patch"],
        "--- /dev/null\n+++ b/new/b.md\n@@ -0,0 +1 @@\n+hi\n"
    );
    let same = server.post_json(
        "/mcp/patch/make",
        &json!({"path": "a.md", "content": "one\n"}),
    );
    assert_eq!(
        same.body,
        json!({"path": "a.md", "patch": "", "hunk_count": 0, "net_line_delta": 0})
    );
    server
        .post_json(
            "/mcp/patch/make",
            &json!({"path": "missing.md", "content": null}),
        )
        .assert_error(404, "not_found");
    server
        .post_json("/mcp/patch/make", &json!({"path": "x.txt", "content": "x"}))
        .assert_error(400, "invalid_extension");
    server
        .post_json("/mcp/patch/make", &json!({"path": "a.md"}))
        .assert_error(400, "invalid_request");
}

#[test]
fn notes_write_creates_replaces_and_commits_like_apply() {
    let server = TestServer::with_note("list.md", NOTE);
    let created = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "ideas/new.md", "content": "# New\n"}),
    );
    assert_eq!(created.status, 200, "{created:?}");
    assert_eq!(created.body["commit"], server.head());
    assert_eq!(
        created.body["patch"],
        "--- /dev/null\n+++ b/ideas/new.md\n@@ -0,0 +1 @@\n+# New\n"
    );
    assert_eq!(on_disk(&server, "ideas/new.md").as_deref(), Some("# New\n"));
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        "mcp.patch_apply: ideas/new.md\n\n"
    );

    let replaced = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "list.md", "content": NOTE.replace("milk", "oat milk")}),
    );
    assert_eq!(replaced.status, 200);
    assert_eq!(replaced.body["hunk_count"], 1);
    assert_eq!(
        on_disk(&server, "list.md"),
        Some(NOTE.replace("milk", "oat milk"))
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
}

#[test]
fn notes_write_of_the_same_text_makes_no_commit() {
    let server = TestServer::with_note("list.md", NOTE);
    let before = server.head();
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "list.md", "content": NOTE}),
    );
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.body,
        json!({"path": "list.md", "hunk_count": 0, "net_line_delta": 0, "commit": null, "patch": ""})
    );
    assert_eq!(server.head(), before);
}

#[test]
fn notes_write_honours_base_commit_policy_and_size() {
    let server = TestServer::with_note("list.md", NOTE);
    let base = server.head();
    assert_eq!(
        server
            .post_json(
                "/mcp/notes/write",
                &json!({"path": "list.md", "content": "v2\n"})
            )
            .status,
        200
    );
    let stale = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "list.md", "content": "v3\n", "base_commit": base}),
    );
    stale.assert_error(409, "conflict");
    assert_eq!(on_disk(&server, "list.md").as_deref(), Some("v2\n"));

    // A body over the limit, and a small request that would grow a note past the
    // note limit (MIRAI_MAX_NOTE_BYTES, here as low as it may be: the body limit).
    let small = TestServer::start_with(|c| {
        c.max_body_bytes = 300;
        c.max_note_bytes = 300;
    });
    let answer = small.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "x".repeat(350)}),
    );
    answer.assert_error(413, "payload_too_large");
    small.write("big.md", format!("{}\n", "z".repeat(280)));
    let grow = json!({"path": "big.md", "edits": [{"old": "zz\n", "new": "zz, and then some more text\n"}]});
    small
        .post_json("/mcp/notes/edit", &grow)
        .assert_error(413, "note_too_large");
    let patch = format!(
        "--- a/big.md\n+++ b/big.md\n@@ -1 +1,2 @@\n {}\n+{}\n",
        "z".repeat(280),
        "y".repeat(10)
    );
    let grow_by_patch = small.post_json("/mcp/patch/apply", &json!({"patch": patch}));
    assert_eq!(grow_by_patch.status, 413, "{grow_by_patch:?}");

    let read_only = TestServer::start_with(|c| c.policy = PolicyMode::ReadOnly);
    for route in ["/mcp/notes/write", "/mcp/notes/edit"] {
        read_only
            .post_raw(route, "not json")
            .assert_error(403, "policy_denied");
    }
}

#[test]
fn notes_edit_replaces_exact_text_as_one_commit() {
    let server = TestServer::with_note("list.md", NOTE);
    let before = server.commit_count();
    let answer = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "list.md", "edits": [{"old": "- milk", "new": "- oat milk"}, {"old": "- tea\n", "new": "- tea\n- honey\n"}]}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["net_line_delta"], 1);
    assert_eq!(
        on_disk(&server, "list.md"),
        Some(NOTE.replace("- milk", "- oat milk") + "- honey\n")
    );
    assert_eq!(
        server.commit_count(),
        before + 1,
        "one commit for all edits"
    );
}

#[test]
fn notes_edit_conflicts_say_where_to_look_and_change_nothing() {
    let server = TestServer::with_note("list.md", NOTE);
    let before = server.head();
    let missing = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "list.md", "edits": [{"old": "- apples", "new": "- pears"}, {"old": "-  bread", "new": "- rye"}]}),
    );
    missing.assert_error(409, "conflict");
    let message = missing.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("edit 2 of 2"), "{message}");
    assert!(message.contains("differs only in whitespace"), "{message}");
    assert!(message.contains("     4 | - bread"), "{message}");

    let twice = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "list.md", "edits": [{"old": "- ", "new": "* "}]}),
    );
    twice.assert_error(409, "conflict");
    let message = twice.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("5 times") && message.contains("lines 3, 4, 5, 6, 7"),
        "{message}"
    );

    assert_eq!(on_disk(&server, "list.md").as_deref(), Some(NOTE));
    assert_eq!(server.head(), before);
}

#[test]
fn notes_edit_validates_its_request() {
    let server = TestServer::start_with(|c| c.max_edits = 2);
    server.write("a.md", "a b c\n");
    let three =
        json!([{"old": "a", "new": "1"}, {"old": "b", "new": "2"}, {"old": "c", "new": "3"}]);
    server
        .post_json("/mcp/notes/edit", &json!({"path": "a.md", "edits": three}))
        .assert_error(400, "invalid_request");
    server
        .post_json("/mcp/notes/edit", &json!({"path": "a.md", "edits": []}))
        .assert_error(400, "invalid_request");
    server
        .post_json(
            "/mcp/notes/edit",
            &json!({"path": "a.md", "edits": [{"old": "", "new": "x"}]}),
        )
        .assert_error(400, "invalid_request");
    server
        .post_json("/mcp/notes/edit", &json!({"path": "a.md", "edits": "a->b"}))
        .assert_error(400, "invalid_request");
    server
        .post_json(
            "/mcp/notes/edit",
            &json!({"path": "none.md", "edits": [{"old": "a", "new": "b"}]}),
        )
        .assert_error(404, "not_found");
    let same = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "a.md", "edits": [{"old": "b", "new": "b"}]}),
    );
    assert_eq!(same.status, 200);
    assert_eq!(same.body["commit"], Value::Null);
}

#[test]
fn edit_conflicts_on_huge_notes_stay_precise() {
    let n = 20_000;
    let lines: Vec<String> = (0..n)
        .map(|i| format!("line {i} of a long note, alpha beta"))
        .collect();
    let note = lines.join("\n") + "\n";
    let server = TestServer::with_note("big.md", &note);
    let mut old = lines.clone();
    old[n / 2] = "a line that is not there".into();
    let missing = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "big.md", "edits": [{"old": old.join("\n"), "new": "x"}]}),
    );
    missing.assert_error(409, "conflict");
    let message = missing.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "Lines 1-{n} is the closest text:\n     1 | line 0 of"
        )),
        "{message:.500}"
    );
    assert!(
        message.contains(&format!("({} more lines)", n - 30)),
        "{message:.3000}"
    );

    let spaced = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "big.md", "edits": [{"old": lines[5..].join("\n").replace(' ', "  "), "new": "x"}]}),
    );
    spaced.assert_error(409, "conflict");
    let message = spaced.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("Lines 6-{n} differs only in whitespace")),
        "{message:.500}"
    );

    server.write("a.md", "a".repeat(200_000) + "\n");
    server.commit_all();
    let many = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "a.md", "edits": [{"old": "a", "new": "b"}]}),
    );
    many.assert_error(409, "conflict");
    assert_eq!(
        many.body["error"]["message"],
        "edit 1 of 1: `old` occurs 200000 times in a.md, at lines 1; include more of the surrounding text so it occurs exactly once"
    );
    assert_eq!(on_disk(&server, "big.md"), Some(note));
}

#[test]
fn diffs_too_costly_to_minimise_still_write_exactly_the_new_text() {
    let numbered =
        |n: usize, tag: &str| -> String { (0..n).map(|i| format!("{tag} {i}\n")).collect() };
    let server = TestServer::with_note("big.md", &numbered(40_000, "old"));
    let rewritten = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "big.md", "content": numbered(40_000, "new")}),
    );
    assert_eq!(rewritten.status, 200, "{rewritten:?}");
    assert_eq!(rewritten.body["commit"], server.head());
    assert_eq!(rewritten.body["net_line_delta"], 0);
    assert_eq!(on_disk(&server, "big.md"), Some(numbered(40_000, "new")));

    server.write("one.md", "one line\n");
    server.commit_all();
    let grown: String = (0..120_000).map(|i| format!("{i:x}\n")).collect();
    let made = server.post_json(
        "/mcp/patch/make",
        &json!({"path": "one.md", "content": grown}),
    );
    assert_eq!(made.status, 200, "{made:?}");
    assert_eq!(made.body["net_line_delta"], 120_000 - 1);
    let applied = server.post_json("/mcp/patch/apply", &json!({"patch": made.body["patch"]}));
    assert_eq!(applied.status, 200, "{applied:?}");
    assert_eq!(on_disk(&server, "one.md"), Some(grown));
}

/// A tmpfs of a fixed size mounted at a fresh folder, unmounted when dropped.
struct Tmpfs {
    at: std::path::PathBuf,
}

impl Tmpfs {
    /// `None` (with the reason printed) where mounting is not allowed: the
    /// spec then checks nothing and says so.
    fn mount(size: &str) -> Option<Tmpfs> {
        let at = std::env::temp_dir().join(format!("mirai-diskfull-{}", uuid_like()));
        std::fs::create_dir_all(&at).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .output();
        let why = match out {
            Ok(out) if out.status.success() => return Some(Tmpfs { at }),
            Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
            Err(e) => format!("cannot run mount: {e}"),
        };
        eprintln!(
            "SKIPPED: cannot mount a tmpfs here ({why}); run the specs as root to check writes on a full disk"
        );
        let _ = std::fs::remove_dir(&at);
        None
    }

    /// Fills the disk, then frees `leave` bytes: the filler lives beside the
    /// notes, outside the root.
    fn fill_leaving(&self, leave: u64) {
        use std::io::Write;
        let filler = self.at.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => size += n as u64,
            }
        }
        // Page by page, to the last byte.
        let page = [0u8; 1];
        while file.write(&page).is_ok_and(|n| n == 1) {
            size += 1;
        }
        file.set_len(size.saturating_sub(leave)).unwrap();
    }

    fn free(&self) {
        let _ = std::fs::remove_file(self.at.join("filler"));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.at)
            .status();
        let _ = std::fs::remove_dir_all(&self.at);
    }
}

fn uuid_like() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Every kind of write on a full disk (0 B, 4 KiB, 16 KiB and 32 KiB free)
/// answers 507 `insufficient_storage` naming the disk, and leaves the notes,
/// HEAD and `.git/index` byte for byte; once space is freed, every kind works
/// and nothing is left dirty. The vault has 600 notes, so the index alone is
/// larger than the most free space tried, and a write must fail somewhere.
#[test]
fn writes_on_a_full_disk_change_nothing_and_work_once_space_is_freed() {
    let Some(disk) = Tmpfs::mount("16m") else {
        return;
    };
    let root = disk.at.join("notes");
    std::fs::create_dir_all(&root).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    for i in 0..600 {
        std::fs::write(root.join(format!("n{i:03}.md")), format!("note {i}\n")).unwrap();
    }
    std::fs::create_dir_all(root.join("box")).unwrap();
    std::fs::write(root.join("box/plan.md"), "# Plan\n\n## Later\n\n- rest\n").unwrap();
    git(&root, &["add", "-A"]);
    git(
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
    for i in 0..3 {
        std::fs::write(
            root.join(format!("n{i:03}.md")),
            format!("note {i} again\n"),
        )
        .unwrap();
    }
    git(
        &root,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@x",
            "commit",
            "-qam",
            "second",
        ],
    );
    let second = git(&root, &["rev-parse", "HEAD"]).trim().to_string();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(dir, root.clone(), |_| {});

    let big = "lorem ipsum dolor sit amet\n".repeat(2000); // 54 KB
    let diff = |i: usize| {
        format!("--- a/n{i:03}.md\n+++ b/n{i:03}.md\n@@ -1 +1 @@\n-note {i}\n+note {i} changed\n")
    };
    let writes: Vec<(&str, Value)> = vec![
        ("/mcp/patch/apply", json!({"patch": diff(10)})),
        (
            "/mcp/notes/write",
            json!({"path": "n011.md", "content": big}),
        ),
        (
            "/mcp/notes/write",
            json!({"path": "new/deep/x.md", "content": big}),
        ),
        (
            "/mcp/notes/edit",
            json!({"path": "n012.md", "edits": [{"old": "note", "new": "NOTE"}]}),
        ),
        (
            "/mcp/notes/append",
            json!({"path": "n013.md", "text": "more"}),
        ),
        (
            "/mcp/notes/insert",
            json!({"path": "box/plan.md", "heading": "Later", "text": "- sleep"}),
        ),
        ("/mcp/notes/delete", json!({"path": "n014.md"})),
        (
            "/mcp/changes/apply",
            json!({"patches": (20..25).map(diff).collect::<Vec<_>>()}),
        ),
        ("/mcp/notes/revert", json!({"commit": second})),
    ];
    let head = server.head();
    for leave in [0u64, 4096, 16 * 1024, 32 * 1024] {
        for (route, body) in &writes {
            disk.fill_leaving(leave);
            let before = common::repo_state(&root);
            let answer = server.post_json(route, body);
            disk.free();
            answer.assert_error(507, "insufficient_storage");
            let message = answer.body["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("disk holding NOTES_ROOT is full"),
                "{route} with {leave} B free: {message}"
            );
            assert!(
                common::repo_state(&root) == before,
                "{route} with {leave} B free changed the notes, HEAD or .git/index: {message}"
            );
        }
    }
    assert_eq!(server.head(), head);
    assert_eq!(
        git(&root, &["status", "--porcelain"]),
        "",
        "nothing is dirty"
    );

    // With space again, every kind of write works and leaves nothing dirty.
    for (route, body) in &writes {
        let answer = server.post_json(route, body);
        assert_eq!(answer.status, 200, "{route}: {answer:?}");
        assert!(answer.body["commit"].is_string(), "{route}: {answer:?}");
        assert_eq!(
            git(&root, &["status", "--porcelain"]),
            "",
            "{route} left something dirty"
        );
    }
    // Failed writes may leave unreferenced objects (git gc takes them), nothing broken.
    assert_eq!(
        git(&root, &["fsck", "--no-progress", "--no-dangling"]).trim(),
        ""
    );
    drop(server);
}
