//! mirai beside a person using git (ARCHITECTURE.md, "Nobody else's work is
//! taken"): it never commits, overwrites or undoes someone else's work.
//! Uncommitted edits to the target note are refused (or, when the operator opts
//! in, committed first as a snapshot); other notes' changes stay as they were;
//! git's `index.lock` is held the way git holds it, waited for briefly and
//! never written around.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{git, TestServer};
use mirai::config::DirtyNotes;
use serde_json::json;

fn write(server: &TestServer, path: &str, content: &str) -> common::Answer {
    server.post_json(
        "/mcp/notes/write",
        &json!({"path": path, "content": content}),
    )
}

#[test]
fn a_persons_uncommitted_edit_to_the_note_is_refused_and_kept() {
    let server = TestServer::with_note("a.md", "one\ntwo\n");
    let head = server.head();
    // Unstaged.
    server.write("a.md", "one\ntwo\nmine, not committed\n");
    let answer = write(&server, "a.md", "replaced\n");
    answer.assert_error(409, "conflict");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("a.md has uncommitted changes"),
        "{message}"
    );
    let apply = server.post_json(
        "/mcp/patch/apply",
        &json!({"patch": "--- a/a.md\n+++ b/a.md\n@@ -1,2 +1,2 @@\n-one\n+ONE\n two\n"}),
    );
    apply.assert_error(409, "conflict");
    server
        .post_json(
            "/mcp/notes/edit",
            &json!({"path": "a.md", "edits": [{"old": "two", "new": "2"}]}),
        )
        .assert_error(409, "conflict");
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "one\ntwo\nmine, not committed\n"
    );
    assert_eq!(server.head(), head);
    assert_eq!(git(&server.root, &["status", "--porcelain"]), " M a.md\n");

    // Staged, with the working tree back as HEAD has it.
    git(&server.root, &["add", "a.md"]);
    server.write("a.md", "one\ntwo\n");
    write(&server, "a.md", "replaced\n").assert_error(409, "conflict");
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "MM a.md\n");
    assert_eq!(server.head(), head);

    // A new file nobody committed yet is someone's work too.
    server.write("fresh.md", "a draft\n");
    write(&server, "fresh.md", "mirai's\n").assert_error(409, "conflict");
    assert_eq!(
        std::fs::read_to_string(server.root.join("fresh.md")).unwrap(),
        "a draft\n"
    );
}

#[test]
fn other_notes_staged_and_unstaged_changes_stay_exactly_as_they_were() {
    let server = TestServer::start();
    server.write("staged.md", "s0\n");
    server.write("both.md", "b0\n");
    server.commit_all();
    server.write("staged.md", "s1\n");
    git(&server.root, &["add", "staged.md"]);
    server.write("both.md", "b1\n");
    git(&server.root, &["add", "both.md"]);
    server.write("both.md", "b2\n");
    server.write("untracked.md", "u\n");
    let answer = write(&server, "mirai.md", "mine\n");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        git(&server.root, &["status", "--porcelain"]),
        "MM both.md\nM  staged.md\n?? untracked.md\n"
    );
    assert_eq!(git(&server.root, &["show", ":staged.md"]), "s1\n");
    assert_eq!(git(&server.root, &["show", ":both.md"]), "b1\n");
    assert_eq!(
        std::fs::read_to_string(server.root.join("both.md")).unwrap(),
        "b2\n"
    );
    assert_eq!(
        git(&server.root, &["show", "--name-only", "--format=", "HEAD"]),
        "mirai.md\n"
    );
}

#[test]
fn a_held_index_lock_is_waited_for_briefly_then_refused_with_nothing_changed() {
    let server = TestServer::with_note("a.md", "a\n");
    let lock = server.root.join(".git/index.lock");

    // Released after 200 ms, as a person's `git commit` would: the write goes through.
    std::fs::write(&lock, "").unwrap();
    let releaser = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            std::fs::remove_file(lock).unwrap();
        })
    };
    let answer = write(&server, "a.md", "after the lock\n");
    releaser.join().unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        git(&server.root, &["show", "HEAD:a.md"]),
        "after the lock\n"
    );

    // Held for 5 s: 500 git_error within about the bound, and nothing changed.
    std::fs::write(&lock, "").unwrap();
    let head = server.head();
    let index = std::fs::read(server.root.join(".git/index")).unwrap();
    let started = Instant::now();
    let answer = write(&server, "a.md", "never\n");
    let waited = started.elapsed();
    answer.assert_error(500, "git_error");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("index.lock"), "{message}");
    assert!(message.contains("retry"), "{message}");
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
    assert_eq!(server.head(), head);
    assert_eq!(
        std::fs::read(server.root.join(".git/index")).unwrap(),
        index
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "after the lock\n"
    );
    // The other process's lock is still there: mirai never removes a lock it did not take.
    assert!(lock.exists());
    std::fs::remove_file(&lock).unwrap();
}

#[test]
fn snapshot_mode_commits_the_persons_edit_first_then_the_write_on_top() {
    let server = TestServer::start_with(|config| config.dirty_notes = DirtyNotes::Snapshot);
    server.write("a.md", "one\n");
    server.commit_all();
    server.write("a.md", "one\nperson's line\n");
    let answer = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "a.md", "edits": [{"old": "one", "new": "ONE"}]}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        git(&server.root, &["log", "-2", "--format=%s%n%b--"]),
        "mcp.patch_apply: a.md\n--\nmirai: snapshot of uncommitted edits to a.md\n--\n"
    );
    assert_eq!(
        git(&server.root, &["show", "HEAD~1:a.md"]),
        "one\nperson's line\n"
    );
    assert_eq!(
        git(&server.root, &["show", "HEAD:a.md"]),
        "ONE\nperson's line\n"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    // A clean note gets no snapshot.
    let answer = write(&server, "a.md", "clean\n");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%s", "HEAD~1"]),
        "mcp.patch_apply: a.md\n"
    );
}

#[test]
fn a_persons_git_add_and_commit_racing_with_writes_are_never_undone() {
    let server = TestServer::start();
    let root = server.root.clone();
    let person = std::thread::spawn(move || {
        let mut committed = Vec::new();
        for j in 0..25 {
            let name = format!("person{j}.md");
            std::fs::write(root.join(&name), format!("person {j}\n")).unwrap();
            // git gives up at once when mirai holds index.lock; a person tries again.
            let retry = |args: &[&str]| {
                for _ in 0..2000 {
                    let ok = Command::new("git")
                        .arg("-C")
                        .arg(&root)
                        .args(["-c", "user.name=p", "-c", "user.email=p@p"])
                        .args(args)
                        .output()
                        .unwrap()
                        .status
                        .success();
                    if ok {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                panic!("git {args:?} never got the index lock");
            };
            retry(&["add", &name]);
            retry(&["commit", "-qm", &format!("person {j}"), "--", &name]);
            committed.push(name);
        }
        committed
    });
    let mut written = Vec::new();
    let mut i = 0;
    while !person.is_finished() || i < 10 {
        let name = format!("mirai{i}.md");
        let answer = write(&server, &name, &format!("mirai {i}\n"));
        // A person's git may hold the lock past mirai's 1 s wait on a loaded
        // machine: that write is refused whole, as the contract says.
        if answer.status == 500 {
            answer.assert_error(500, "git_error");
            assert!(!server.root.join(&name).exists(), "{name}");
        } else {
            assert_eq!(answer.status, 200, "{answer:?}");
            written.push(name);
        }
        i += 1;
    }
    let committed = person.join().unwrap();
    let tree = git(&server.root, &["ls-tree", "--name-only", "HEAD"]);
    for name in committed.iter().chain(&written) {
        assert!(
            tree.lines().any(|line| line == name),
            "{name} is missing from HEAD"
        );
    }
    // Every one of the person's notes is in the index with its committed blob:
    // nothing of theirs was undone.
    for name in &committed {
        assert_eq!(
            git(&server.root, &["rev-parse", &format!(":{name}")]),
            git(&server.root, &["rev-parse", &format!("HEAD:{name}")]),
            "{name}"
        );
    }
    // (`git commit -- <path>` reads the index before it locks it, so git itself
    // may drop an entry mirai committed meanwhile; mirai's commits stay in HEAD.)
    git(&server.root, &["fsck", "--no-progress"]);
}

/// Polls `q` until its hits' paths equal `want` (sorted), for up to `bound`.
fn eventually_found(server: &TestServer, q: &str, want: &[&str], bound: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let answer = server.get(&format!("/mcp/index/query?q={q}&limit=50"));
        assert_eq!(answer.status, 200, "{answer:?}");
        let mut paths = crate::common::hit_paths(&answer.body);
        paths.sort();
        paths.dedup();
        if paths == want {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < bound,
            "query {q:?} still answers {paths:?}, not {want:?}, after {bound:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn changes_made_beside_mirai_reach_search_within_seconds() {
    let server = TestServer::with_note("a.md", "apple\n");
    // Load the index (from an artifact, as a cron rebuild leaves it).
    assert_eq!(
        server.post_json("/mcp/index/rebuild", &json!({})).status,
        200
    );
    // The watcher looks every 2 s; the rest is room for a loaded machine.
    let bound = Duration::from_secs(10);
    eventually_found(&server, "apple", &["a.md"], bound);

    // A file edited with no commit, and one added.
    server.write("a.md", "banana\n");
    server.write("b.md", "cherry\n");
    eventually_found(&server, "banana", &["a.md"], bound);
    eventually_found(&server, "cherry", &["b.md"], bound);
    eventually_found(&server, "apple", &[], bound);
    // A commit, an amend, then a reset --hard that takes both back.
    server.commit_all();
    server.write("b.md", "damson\n");
    git(
        &server.root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qam",
            "d",
            "--amend",
        ],
    );
    eventually_found(&server, "damson", &["b.md"], bound);
    git(&server.root, &["reset", "-q", "--hard", "HEAD~1"]);
    eventually_found(&server, "damson", &[], bound);
    eventually_found(&server, "cherry", &[], bound);
    eventually_found(&server, "apple", &["a.md"], bound);
    // A branch switch to one where the note differs.
    git(&server.root, &["checkout", "-q", "-b", "other"]);
    server.write("a.md", "elderberry\n");
    server.commit_all();
    git(&server.root, &["checkout", "-q", "-"]);
    eventually_found(&server, "apple", &["a.md"], bound);
    git(&server.root, &["checkout", "-q", "other"]);
    eventually_found(&server, "elderberry", &["a.md"], bound);
    // A deleted note is no longer returned.
    std::fs::remove_file(server.root.join("a.md")).unwrap();
    eventually_found(&server, "elderberry", &[], bound);
}

#[test]
fn a_restart_takes_in_notes_the_artifact_has_not_seen() {
    // What a kill leaves behind: writes acknowledged and committed, but an
    // artifact written before them.
    let first = TestServer::with_note("a.md", "apple\n");
    assert_eq!(
        first.post_json("/mcp/index/rebuild", &json!({})).status,
        200
    );
    let artifact = std::fs::read(first.root.join(".mirai/index.json")).unwrap();
    for i in 0..20 {
        let answer = write(
            &first,
            &format!("n{i}.md"),
            &format!("acknowledged{i} fig\n"),
        );
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    std::fs::remove_file(first.root.join("a.md")).unwrap();
    git(
        &first.root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qam",
            "rm",
        ],
    );
    std::fs::write(first.root.join(".mirai/index.json"), &artifact).unwrap();
    // The first server's folder goes when it stops; the second serves a copy.
    let root = first.root.clone();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("notes");
    let status = Command::new("cp")
        .arg("-a")
        .arg(&root)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    drop(first);

    let second = TestServer::start_in(dir, copy, |_| {});
    let answer = second.get("/mcp/index/query?q=fig&limit=50");
    assert_eq!(
        answer.body["chunks"].as_array().unwrap().len(),
        20,
        "{answer:?}"
    );
    let answer = second.get("/mcp/index/query?q=apple");
    assert_eq!(answer.body["chunks"], json!([]), "{answer:?}");
}

#[test]
fn a_stale_base_commit_names_the_commit_and_author_that_moved_the_note_on() {
    let server = TestServer::with_note("a.md", "one\n");
    let base = server.head();
    server.write("a.md", "two\n");
    git(
        &server.root,
        &[
            "-c",
            "user.name=Ada",
            "-c",
            "user.email=ada@example.org",
            "commit",
            "-qam",
            "Ada's edit",
        ],
    );
    let theirs = server.head();
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "three\n", "base_commit": base}),
    );
    answer.assert_error(409, "conflict");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&theirs[..12]), "{message}");
    assert!(message.contains("Ada <ada@example.org>"), "{message}");
    assert!(message.contains("Ada's edit"), "{message}");
}

#[test]
fn index_status_says_when_and_why_the_artifact_lags_the_notes() {
    let server = TestServer::with_note("a.md", "apple\n");
    assert_eq!(
        server.post_json("/mcp/index/rebuild", &json!({})).status,
        200
    );
    let status = server.get("/mcp/index/status").body;
    assert_eq!(status["stale"], false, "{status}");
    assert_eq!(status["stale_reason"], serde_json::Value::Null);
    assert_eq!(status["notes_changed_since"], serde_json::Value::Null);
    // Two notes changed beside mirai: stale at once, with the count.
    server.write("a.md", "apricot\n");
    server.write("b.md", "banana\n");
    let status = server.get("/mcp/index/status").body;
    assert_eq!(status["stale"], true, "{status}");
    assert_eq!(status["notes_changed_since"], 2, "{status}");
    assert!(
        status["stale_reason"].as_str().unwrap().contains("2 notes"),
        "{status}"
    );
    // Once the index took them in and rewrote the artifact, it is current again.
    let started = Instant::now();
    while server.get("/mcp/index/status").body["stale"] != false {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never caught up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let artifact = std::fs::read_to_string(server.root.join(".mirai/index.json")).unwrap();
    assert!(
        artifact.contains("banana"),
        "the artifact holds the outside change"
    );
}

#[test]
fn a_racily_clean_edit_of_another_note_stays_visible_as_an_edit() {
    // git's racy-git case made deterministic: a note staged and then edited to
    // the same size within the same second as the index was written. git can
    // only tell by its content; the index mirai writes must keep it that way.
    let server = TestServer::with_note("both.md", "b0\n");
    git(&server.root, &["config", "core.trustctime", "false"]);
    git(&server.root, &["config", "core.checkStat", "minimal"]);
    let same_second = "@1700000000";
    server.write("both.md", "b1\n");
    let touch = |path: &str| {
        let ok = Command::new("touch")
            .args(["-d", same_second])
            .arg(server.root.join(path))
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    touch("both.md");
    git(&server.root, &["add", "both.md"]);
    server.write("both.md", "b2\n");
    touch("both.md");
    // (No `git status` before the write: it would smudge the entry itself.)
    touch(".git/index");
    let answer = write(&server, "mirai.md", "mine\n");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        git(&server.root, &["status", "--porcelain"]),
        "MM both.md\n",
        "the edit to both.md must not look staged-only"
    );
    assert_eq!(git(&server.root, &["show", ":both.md"]), "b1\n");
}

/// While a person's `git rebase -i` is stopped (at a `break`), every write is
/// refused with 409 saying a rebase is in progress, reads and search go on,
/// and nothing lands on the detached HEAD; once the rebase is aborted,
/// writes land on the branch again. A detached HEAD is refused the same way.
#[test]
fn writes_wait_for_a_persons_rebase_and_never_land_on_a_detached_head() {
    let server = TestServer::with_note("a.md", "one\n");
    write(&server, "b.md", "two\n");
    write(&server, "c.md", "three\n");
    let branch = git(&server.root, &["symbolic-ref", "HEAD"])
        .trim()
        .to_string();
    let branch_before = git(&server.root, &["rev-parse", &branch]);
    let stopped = Command::new("git")
        .arg("-C")
        .arg(&server.root)
        .args([
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@x",
            "rebase",
            "-i",
            "HEAD~2",
        ])
        .env("GIT_SEQUENCE_EDITOR", "sed -i '1i break'")
        .output()
        .unwrap();
    assert!(stopped.status.success(), "{stopped:?}");
    assert!(
        server.root.join(".git/rebase-merge").exists(),
        "the rebase is stopped"
    );
    let detached_at = git(&server.root, &["rev-parse", "HEAD"]);

    let kinds = [
        (
            "/mcp/notes/write",
            json!({"path": "a.md", "content": "changed\n"}),
        ),
        ("/mcp/notes/append", json!({"path": "a.md", "text": "more"})),
        ("/mcp/notes/delete", json!({"path": "a.md"})),
        (
            "/mcp/patch/apply",
            json!({"patch": "--- a/a.md\n+++ b/a.md\n@@ -1 +1 @@\n-one\n+ONE\n"}),
        ),
    ];
    for (route, body) in &kinds {
        let answer = server.post_json(route, body);
        answer.assert_error(409, "conflict");
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("a rebase is in progress"),
            "{route}: {message}"
        );
        assert!(message.contains("git rebase --abort"), "{route}: {message}");
    }
    assert_eq!(
        git(&server.root, &["rev-parse", "HEAD"]),
        detached_at,
        "nothing on the detached HEAD"
    );
    assert_eq!(server.read("a.md").body["content"], "one\n", "reads go on");
    let hits = server.get("/mcp/index/query?q=three");
    assert_eq!(hits.status, 200, "search goes on: {hits:?}");

    git(&server.root, &["rebase", "--abort"]);
    assert_eq!(git(&server.root, &["rev-parse", &branch]), branch_before);
    let answer = write(&server, "a.md", "after the rebase\n");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        git(&server.root, &["rev-parse", &branch]).trim(),
        answer.body["commit"].as_str().unwrap(),
        "the write landed on the branch"
    );

    // A detached HEAD with nothing in progress is refused too.
    git(&server.root, &["checkout", "-q", "--detach"]);
    let answer = write(&server, "a.md", "detached\n");
    answer.assert_error(409, "conflict");
    assert!(answer.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("HEAD is detached"));
    let short = branch.trim_start_matches("refs/heads/");
    git(&server.root, &["checkout", "-q", short]);
    assert_eq!(write(&server, "a.md", "back on the branch\n").status, 200);
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
}
