//! A person's editor saving a note while mirai writes it (ARCHITECTURE.md,
//! "Nobody else's work is taken"): whatever the moment of the save, in place
//! or by rename (a new inode), during a move that rewrites 200 linkers, a
//! `changes.apply` of 50 notes, a one-note edit, an approval or a revert, the
//! person's line ends up in the note on disk or in a commit. mirai either
//! wrote before the save (the save then lies on top, uncommitted) or refused
//! with 409 and left the save in place; it never puts its bytes over a save.

use crate::common;

use std::path::PathBuf;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::{git, send, Answer, TestServer};
use mirai::config::{Config, PolicyMode};
use serde_json::{json, Value};

/// How a person's editor saves.
#[derive(Clone, Copy, Debug)]
enum Save {
    /// Truncates the file and writes it again (the same inode).
    InPlace,
    /// Writes a temp file beside it and renames it over the note (a new inode).
    ByRename,
}

/// Saves `rel` as a person's editor does, after `delay`: the note as it is
/// then, plus `line`.
fn save_later(
    root: PathBuf,
    rel: String,
    line: String,
    delay: Duration,
    how: Save,
) -> JoinHandle<()> {
    thread::spawn(move || {
        thread::sleep(delay);
        let path = root.join(&rel);
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&line);
        match how {
            Save::InPlace => std::fs::write(&path, text).unwrap(),
            Save::ByRename => {
                let temp = root.join(".editor-save.tmp");
                std::fs::write(&temp, text).unwrap();
                std::fs::rename(&temp, &path).unwrap();
            }
        }
    })
}

/// Whether `line` survived: in the note on disk, or in HEAD's version of it.
fn kept(server: &TestServer, rel: &str, line: &str) -> bool {
    let on_disk = std::fs::read_to_string(server.root.join(rel)).unwrap_or_default();
    let committed = std::process::Command::new("git")
        .arg("-C")
        .arg(&server.root)
        .args(["show", &format!("HEAD:{rel}")])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    on_disk.contains(line) || committed.contains(line)
}

/// Commits whatever the person left, so the next round starts clean.
fn settle(server: &TestServer) {
    git(&server.root, &["add", "-A"]);
    if !git(&server.root, &["status", "--porcelain"]).is_empty() {
        git(
            &server.root,
            &[
                "-c",
                "user.name=p",
                "-c",
                "user.email=p@p",
                "commit",
                "-qm",
                "person's saves",
            ],
        );
    }
}

/// Runs `rounds` of `write` against a save of `target(round)` at a moment
/// spread across the write's length, half in place and half by rename;
/// `prepare(round)` makes what the write needs (its diffs, a proposal, a
/// commit to revert) before the race starts. Asserts no save was lost and
/// answers how many writes were made (200) and refused (409).
fn race<P>(
    server: &TestServer,
    rounds: usize,
    target: impl Fn(usize) -> String,
    prepare: impl Fn(usize) -> P,
    write: impl Fn(P) -> Answer,
) -> (usize, usize) {
    // One write alone first, to learn how long one takes here.
    let prepared = prepare(0);
    let started = Instant::now();
    let first = write(prepared);
    assert_eq!(first.status, 200, "{first:?}");
    // The longest write seen so far: the saves spread over it, and past it.
    let mut length = started.elapsed();
    settle(server);
    let (mut made, mut refused) = (0, 0);
    for round in 1..=rounds {
        let rel = target(round);
        let line = format!("a person's line {round}\n");
        let delay = length.mul_f64(round as f64 / rounds as f64 * 1.5);
        let how = if round % 2 == 0 {
            Save::InPlace
        } else {
            Save::ByRename
        };
        let prepared = prepare(round);
        let person = save_later(server.root.clone(), rel.clone(), line.clone(), delay, how);
        let started = Instant::now();
        let answer = write(prepared);
        length = length.max(started.elapsed());
        person.join().unwrap();
        match answer.status {
            200 => made += 1,
            409 => {
                answer.assert_error(409, "conflict");
                refused += 1;
            }
            _ => panic!("round {round}: {answer:?}"),
        }
        assert!(
            kept(server, &rel, &line),
            "round {round} ({how:?} after {delay:?}): the person's save of {rel} was lost; \
             mirai answered {} {}",
            answer.status,
            answer.body.get("commit").unwrap_or(&Value::Null)
        );
        settle(server);
    }
    git(&server.root, &["fsck", "--no-progress"]);
    (made, refused)
}

#[test]
fn saves_during_moves_of_a_note_with_200_linkers_are_never_lost() {
    let server = TestServer::start();
    server.write("hub.md", "# Hub\n");
    for i in 0..200 {
        server.write(&format!("l{i:03}.md"), format!("# L{i}\n\nsee [[hub]]\n"));
    }
    server.commit_all();
    let (made, _) = race(
        &server,
        12,
        |round| format!("l{:03}.md", round * 17 % 200),
        // Back and forth, from wherever the last round left it.
        |_| {
            if server.root.join("hub.md").exists() {
                ("hub.md", "hub2.md")
            } else {
                ("hub2.md", "hub.md")
            }
        },
        |(from, to)| server.post_json("/mcp/notes/move", &json!({"from": from, "to": to})),
    );
    assert!(made > 0, "no move was ever made");
}

/// One diff per note `n00.md`.. of `count`, each adding a line, made by
/// `patch.make` from the notes as they are now.
fn appending(server: &TestServer, count: usize, round: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            let rel = format!("n{i:02}.md");
            let now = std::fs::read_to_string(server.root.join(&rel)).unwrap();
            let made = server.post_json(
                "/mcp/patch/make",
                &json!({"path": rel, "content": format!("{now}round {round}\n")}),
            );
            assert_eq!(made.status, 200, "{made:?}");
            made.body["patch"].clone()
        })
        .collect()
}

#[test]
fn saves_during_a_changes_apply_of_50_notes_are_never_lost() {
    let server = TestServer::start();
    for i in 0..50 {
        server.write(&format!("n{i:02}.md"), format!("# N{i}\n\nversion 0\n"));
    }
    server.commit_all();
    let (made, _) = race(
        &server,
        12,
        |round| format!("n{:02}.md", round * 7 % 50),
        |round| appending(&server, 50, round),
        |patches| server.post_json("/mcp/changes/apply", &json!({"patches": patches})),
    );
    assert!(made > 0, "no changes.apply was ever made");
}

#[test]
fn saves_during_one_note_edits_are_never_lost() {
    let server = TestServer::with_note("a.md", "# A\n\nstate: one\n");
    let (made, _) = race(
        &server,
        16,
        |_| "a.md".to_string(),
        |_| {
            let now = std::fs::read_to_string(server.root.join("a.md")).unwrap();
            if now.contains("state: one") {
                ("state: one", "state: two")
            } else {
                ("state: two", "state: one")
            }
        },
        |(old, new)| {
            server.post_json(
                "/mcp/notes/edit",
                &json!({"path": "a.md", "edits": [{"old": old, "new": new}]}),
            )
        },
    );
    assert!(made > 0, "no edit was ever made");
}

#[test]
fn saves_during_reverts_are_never_lost() {
    let server = TestServer::with_note("a.md", "# A\n\nfirst\n");
    let (made, _) = race(
        &server,
        12,
        |_| "a.md".to_string(),
        // A commit of mirai's to take back.
        |round| {
            let now = std::fs::read_to_string(server.root.join("a.md")).unwrap();
            let wrote = server.post_json(
                "/mcp/notes/write",
                &json!({"path": "a.md", "content": format!("{now}mirai {round}\n")}),
            );
            assert_eq!(wrote.status, 200, "{wrote:?}");
            wrote.body["commit"].as_str().unwrap().to_string()
        },
        |commit| server.post_json("/mcp/notes/revert", &json!({"commit": commit})),
    );
    assert!(made > 0, "no revert was ever made");
}

const REVIEWER: &str = "reviewer-s3cret";

#[test]
fn saves_during_approvals_are_never_lost() {
    let server = TestServer::start_with(|config: &mut Config| {
        config.policy = PolicyMode::Review;
        config.reviewer_token = Some(REVIEWER.into());
    });
    for i in 0..20 {
        server.write(&format!("n{i:02}.md"), format!("# N{i}\n\nversion 0\n"));
    }
    server.commit_all();
    let (made, _) = race(
        &server,
        12,
        |round| format!("n{:02}.md", round * 7 % 20),
        // A proposal touching every note, approved while the person saves one.
        |round| {
            let patches = appending(&server, 20, round);
            let proposed = server.post_json("/mcp/changes/apply", &json!({"patches": patches}));
            assert_eq!(proposed.status, 202, "{proposed:?}");
            proposed.body["proposal"].as_str().unwrap().to_string()
        },
        |id| {
            send(
                server
                    .raw()
                    .post(format!("{}/mcp/proposals/approve", server.url))
                    .bearer_auth(REVIEWER)
                    .json(&json!({"id": id})),
            )
        },
    );
    assert!(made > 0, "no approval was ever made");
}
