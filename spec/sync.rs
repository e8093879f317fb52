//! Sync with a git remote (issue 18): a bare repository on disk as the remote
//! and a second clone as a person on another machine; a real smart-HTTP remote
//! (`git http-backend` behind the test's own server) with credentials; the push
//! webhook; a burst of applies against a slow remote.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::git_http::GitHttp;
use common::{git, mirai_cli, send, TestServer};
use mirai::config::{Config, GitCredentials, PolicyMode, SyncConfig, Transport};
use serde_json::{json, Value};

/// A bare remote with one seed commit (`a.md`, `b.md`) on `main`, and a
/// person's clone of it.
struct World {
    dir: tempfile::TempDir,
    remote: PathBuf,
    person: PathBuf,
}

fn person_git(repo: &Path, args: &[&str]) -> String {
    let mut full = vec![
        "-c",
        "user.name=Person",
        "-c",
        "user.email=person@example.org",
    ];
    full.extend_from_slice(args);
    git(repo, &full)
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        let person = dir.path().join("person");
        git(
            dir.path(),
            &[
                "init",
                "-q",
                "--bare",
                "-b",
                "main",
                remote.to_str().unwrap(),
            ],
        );
        git(
            dir.path(),
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                person.to_str().unwrap(),
            ],
        );
        git(&person, &["checkout", "-q", "-b", "main"]);
        std::fs::write(person.join("a.md"), "alpha\n").unwrap();
        std::fs::write(person.join("b.md"), "beta\n").unwrap();
        person_git(&person, &["add", "-A"]);
        person_git(&person, &["commit", "-qm", "seed"]);
        person_git(&person, &["push", "-q", "origin", "main"]);
        World {
            dir,
            remote,
            person,
        }
    }

    /// The person commits `files` (path, content; `None` deletes) and pushes.
    fn person_pushes(&self, files: &[(&str, Option<&str>)], message: &str) -> String {
        person_git(&self.person, &["pull", "-q", "--ff-only", "origin", "main"]);
        for (rel, content) in files {
            let path = self.person.join(rel);
            match content {
                Some(text) => {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, text).unwrap();
                }
                None => std::fs::remove_file(&path).unwrap(),
            }
        }
        person_git(&self.person, &["add", "-A", "-f"]);
        person_git(&self.person, &["commit", "-qm", message]);
        person_git(&self.person, &["push", "-q", "origin", "main"]);
        self.remote_head()
    }

    /// A plain clone of the remote beside it, named `name`.
    fn clone_into(&self, name: &str) -> PathBuf {
        let root = self.dir.path().join(name);
        git(
            self.dir.path(),
            &[
                "clone",
                "-q",
                self.remote.to_str().unwrap(),
                root.to_str().unwrap(),
            ],
        );
        root
    }

    fn remote_head(&self) -> String {
        git(&self.remote, &["rev-parse", "main"]).trim().to_string()
    }

    fn sync_config(&self, url: &str) -> SyncConfig {
        SyncConfig {
            remote: url.to_string(),
            transport: Transport::of(url).unwrap(),
            branch: None,
            credentials: GitCredentials::None,
            interval_secs: 0,
        }
    }

    /// mirai serving a root cloned at start-up from the remote on disk.
    /// mirai following the remote served over smart HTTP by `http`, as user `ada` with token `tok`.
    fn mirai_over_http(&self, http: &GitHttp, adjust: impl FnOnce(&mut Config)) -> TestServer {
        let mut sync = self.sync_config(&format!("{}/remote.git", http.base));
        sync.credentials = GitCredentials::Token {
            username: "ada".into(),
            token: "tok".into(),
        };
        let root = tempfile::tempdir().unwrap();
        let notes = root.path().join("notes");
        TestServer::start_in(root, notes, |config| {
            config.sync = Some(sync);
            adjust(config);
        })
    }

    fn mirai(&self, adjust: impl FnOnce(&mut Config)) -> TestServer {
        let sync = self.sync_config(self.remote.to_str().unwrap());
        let root = tempfile::tempdir().unwrap();
        let notes = root.path().join("notes");
        TestServer::start_in(root, notes, |config| {
            config.sync = Some(sync);
            adjust(config);
        })
    }
}

/// `git fsck` is clean in `repo`.
fn assert_fsck(repo: &Path) {
    git(repo, &["fsck", "--strict", "--no-progress"]);
}

/// `commit` is reachable from `branch` in `repo`.
fn reachable(repo: &Path, commit: &str, branch: &str) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["merge-base", "--is-ancestor", commit, branch])
        .status()
        .unwrap()
        .success()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write_note(server: &TestServer, path: &str, content: &str) -> String {
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": path, "content": content}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["commit"].as_str().unwrap().to_string()
}

#[test]
fn an_empty_root_is_cloned_and_a_fast_forward_takes_in_the_persons_commits() {
    let world = World::new();
    let server = world.mirai(|_| {});
    // Cloned at start-up: the seed's notes, HEAD on main, nothing to commit.
    assert_eq!(server.read("a.md").body["content"], "alpha\n");
    assert_eq!(server.head(), world.remote_head());
    assert_eq!(
        git(&server.root, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/main"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    // A query builds the index now, so the pull must update it.
    let before = server.get("/mcp/index/query?q=zeppelin");
    assert_eq!(
        before.body["chunks"].as_array().unwrap().len(),
        0,
        "{before:?}"
    );

    let pushed = world.person_pushes(
        &[
            ("a.md", Some("alpha\nzeppelin over the bay\n")),
            ("b.md", None),
            ("deep/new.md", Some("# New\n")),
            (".obsidian/workspace.json", Some("{\"remote\": true}\n")),
            (".mirai/index.json", Some("{\"version\":1}\n")),
            ("assets/pic.txt", Some("not a note\n")),
        ],
        "person: edits",
    );
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["pulled"], true);
    assert_eq!(answer.body["pushed"], false);
    assert_eq!(answer.body["head"], pushed.as_str());
    assert_eq!(answer.body["unmerged"], json!([]));

    assert_eq!(
        server.read("a.md").body["content"],
        "alpha\nzeppelin over the bay\n"
    );
    server.read("b.md").assert_error(404, "not_found");
    assert_eq!(server.read("deep/new.md").body["content"], "# New\n");
    assert_eq!(
        std::fs::read_to_string(server.root.join("assets/pic.txt")).unwrap(),
        "not a note\n"
    );
    // Hidden paths the remote tracks are never written into the working tree.
    assert!(!server.root.join(".obsidian").exists());
    assert!(!server.root.join(".mirai/index.json").exists());
    // The live index has the pulled text before the next query.
    let hits = server.get("/mcp/index/query?q=zeppelin");
    assert_eq!(
        hits.body["chunks"][0]["metadata"]["path"], "a.md",
        "{hits:?}"
    );
    // git agrees: HEAD is the remote's commit and nothing is dirty (hidden paths skip-worktree).
    assert_eq!(server.head(), pushed);
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    let status = server.get("/mcp/repo/status");
    assert_eq!(status.status, 200);
    assert_eq!(
        (
            status.body["ahead"].as_u64(),
            status.body["behind"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert!(
        status.body["last_pull"].as_str().unwrap().ends_with('Z'),
        "{status:?}"
    );
    assert_eq!(status.body["last_error"], Value::Null);
    assert_eq!(status.body["branch"], "main");
    assert_fsck(&server.root);
    assert_fsck(&world.remote);
}

#[test]
fn every_apply_is_pushed_in_the_background_and_never_forced() {
    let world = World::new();
    let server = world.mirai(|_| {});
    let first = write_note(&server, "a.md", "alpha 2\n");
    let second = write_note(&server, "c.md", "gamma\n");
    wait_until("the remote has both commits", || {
        world.remote_head() == second
    });
    assert!(reachable(&world.remote, &first, "main"));
    wait_until("status shows the push", || {
        let status = server.get("/mcp/repo/status");
        status.body["last_push"].is_string() && status.body["ahead"] == 0
    });
    // The person's view matches mirai's.
    person_git(
        &world.person,
        &["pull", "-q", "--ff-only", "origin", "main"],
    );
    assert_eq!(
        std::fs::read_to_string(world.person.join("c.md")).unwrap(),
        "gamma\n"
    );
    assert_fsck(&world.remote);
}

#[test]
fn uncommitted_edits_block_a_pull_until_they_are_gone() {
    let world = World::new();
    let server = world.mirai(|_| {});
    let head = server.head();
    let pushed = world.person_pushes(&[("a.md", Some("alpha from the person\n"))], "person: a");
    // Someone edits a.md in mirai's clone without committing.
    std::fs::write(server.root.join("a.md"), "my local draft\n").unwrap();
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    answer.assert_error(409, "conflict");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("a.md") && message.contains("uncommitted"),
        "{message}"
    );
    // Nothing moved: the edit, HEAD and the index are as they were.
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "my local draft\n"
    );
    assert_eq!(server.head(), head);
    assert_eq!(git(&server.root, &["status", "--porcelain"]), " M a.md\n");
    let status = server.get("/mcp/repo/status");
    assert!(
        status.body["last_error"].as_str().unwrap().contains("a.md"),
        "{status:?}"
    );
    assert_eq!(status.body["behind"], 1);

    // An edit elsewhere does not block; once a.md is clean the pull goes through.
    std::fs::write(server.root.join("b.md"), "beta draft\n").unwrap();
    git(&server.root, &["checkout", "--", "a.md"]);
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(server.head(), pushed);
    assert_eq!(
        server.read("a.md").body["content"],
        "alpha from the person\n"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), " M b.md\n");
    assert_eq!(
        server.get("/mcp/repo/status").body["last_error"],
        Value::Null
    );
    assert_fsck(&server.root);
}

/// The commits `from..to` in `repo`, oldest first.
fn commits_between(repo: &Path, from: &str, to: &str) -> Vec<String> {
    git(repo, &["rev-list", "--reverse", &format!("{from}..{to}")])
        .lines()
        .map(str::to_string)
        .collect()
}

/// A commit's message, author (name, email, date) and committer (name, email).
fn identity(repo: &Path, commit: &str) -> (String, String) {
    let show = |format: &str| git(repo, &["show", "-s", &format!("--format={format}"), commit]);
    (show("%B%an <%ae> %at"), show("%cn <%ce>"))
}

/// The old -> new pairs of mirai's map of replayed commits.
fn replayed_map(server: &TestServer) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(server.root.join(".mirai/replayed.json")).unwrap();
    let map: Value = serde_json::from_str(&text).unwrap();
    map["replayed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_string(),
                pair[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn when_both_sides_moved_the_local_commits_are_replayed_on_top_and_pushed() {
    let world = World::new();
    let long = "# Long\n\none\ntwo\nthree\nfour\nfive\n";
    world.person_pushes(&[("long.md", Some(long))], "person: long");
    let server = world.mirai(|_| {});
    // The person pushes first, so mirai's background pushes are refused (never forced).
    let theirs = world.person_pushes(
        &[
            ("long.md", Some(&long.replace("\none", "\nintro\n\none"))),
            ("c.md", Some("the person's c\n")),
        ],
        "person: long and c",
    );
    // mirai's own commit: its diff applies to the person's long.md two lines further down.
    let one = write_note(&server, "long.md", &long.replace("five", "five from mirai"));
    // A person working in mirai's clone, with git: a note and a non-note file.
    std::fs::write(server.root.join("e.md"), "# E\n").unwrap();
    std::fs::write(server.root.join(".gitignore"), "*.tmp\n").unwrap();
    person_git(&server.root, &["add", "e.md", ".gitignore"]);
    person_git(
        &server.root,
        &["commit", "-qm", "clone person: e and .gitignore"],
    );
    let two = server.head();
    // A multi-note commit with a message of its own.
    let answer = server.post_json(
        "/mcp/changes/apply",
        &json!({
            "patches": [
                "--- a/b.md\n+++ b/b.md\n@@ -1 +1,2 @@\n beta\n+more beta\n",
                "--- /dev/null\n+++ b/d.md\n@@ -0,0 +1 @@\n+# D\n",
            ],
            "message": "Two notes at once",
        }),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let three = answer.body["commit"].as_str().unwrap().to_string();
    let originals = [one, two, three];
    let before: Vec<_> = originals
        .iter()
        .map(|c| identity(&server.root, c))
        .collect();
    let mirai_committer = before[0].1.clone();

    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["pulled"], true);
    assert_eq!(answer.body["unmerged"], json!([]));
    let head = server.head();
    assert_eq!(answer.body["head"], head.as_str());
    // Pushed by this sync, or by the background pusher retrying just before it.
    assert_eq!(world.remote_head(), head, "pushed");

    // On top of the person's commit, in order, each keeping message and
    // author; mirai commits them.
    let replayed = commits_between(&server.root, &theirs, &head);
    assert_eq!(replayed.len(), 3, "{replayed:?}");
    assert_eq!(
        git(&server.root, &["rev-parse", &format!("{}~1", replayed[0])]).trim(),
        theirs
    );
    for (n, new) in replayed.iter().enumerate() {
        assert_ne!(new, &originals[n]);
        let (message_and_author, committer) = identity(&server.root, new);
        assert_eq!(message_and_author, before[n].0, "commit {n}");
        assert_eq!(committer, mirai_committer, "commit {n}");
    }
    assert!(before[1].0.contains("Person <person@example.org>"));
    // The multi-note commit is still one commit.
    assert_eq!(
        git(
            &server.root,
            &["show", "--name-only", "--format=", &replayed[2]]
        ),
        "b.md\nd.md\n"
    );
    // The notes: both sides' changes, in the answer, on disk and in search.
    assert_eq!(
        server.read("long.md").body["content"],
        "# Long\n\nintro\n\none\ntwo\nthree\nfour\nfive from mirai\n"
    );
    assert_eq!(server.read("b.md").body["content"], "beta\nmore beta\n");
    assert_eq!(server.read("c.md").body["content"], "the person's c\n");
    assert_eq!(server.read("d.md").body["content"], "# D\n");
    assert_eq!(server.read("e.md").body["content"], "# E\n");
    assert_eq!(
        git(&server.root, &["show", &format!("{head}:.gitignore")]),
        "*.tmp\n"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join(".gitignore")).unwrap(),
        "*.tmp\n"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    let hits = server.get("/mcp/index/query?q=person");
    assert!(
        hits.body["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["metadata"]["path"] == "c.md"),
        "{hits:?}"
    );

    // Nothing is lost: the person's commit is on both sides, each old id maps
    // to its replacement on the branch.
    assert!(reachable(&world.remote, &theirs, "main"));
    let map = replayed_map(&server);
    let expected: Vec<(String, String)> = originals
        .iter()
        .cloned()
        .zip(replayed.iter().cloned())
        .collect();
    assert_eq!(map, expected);
    for new in &replayed {
        assert!(reachable(&world.remote, new, "main"));
    }
    let status = server.get("/mcp/repo/status");
    assert_eq!(
        (
            status.body["ahead"].as_u64(),
            status.body["behind"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert_eq!(status.body["last_error"], Value::Null);
    assert_fsck(&server.root);
    assert_fsck(&world.remote);
}

/// A local commit that no longer applies on the remote's goes to a
/// `mirai/unmerged/` branch with the later commits that change the same
/// notes (they may depend on it); later commits that touch other notes stay
/// on the branch, in order.
#[test]
fn a_commit_that_no_longer_applies_goes_to_an_unmerged_branch_with_the_commits_that_depend_on_it() {
    let world = World::new();
    let server = world.mirai(|_| {});
    let theirs = world.person_pushes(&[("a.md", Some("alpha by the person\n"))], "person: a");
    let fits = write_note(&server, "c.md", "c from mirai\n");
    let clash = write_note(&server, "a.md", "alpha by mirai\n");
    let after = write_note(&server, "b.md", "beta by mirai\n");
    let dependent = write_note(&server, "a.md", "alpha by mirai, again\n");

    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["pulled"], true);
    let unmerged = answer.body["unmerged"].as_array().unwrap().clone();
    assert_eq!(unmerged.len(), 1, "{answer:?}");
    let branch = unmerged[0]["branch"].as_str().unwrap().to_string();
    assert!(branch.starts_with("mirai/unmerged/"), "{branch}");
    assert_eq!(unmerged[0]["commit"], dependent.as_str());

    // The branch follows the remote plus every commit that still applies.
    let head = server.head();
    let replayed = commits_between(&server.root, &theirs, &head);
    assert_eq!(replayed.len(), 2);
    assert_eq!(
        identity(&server.root, &replayed[0]).0,
        identity(&server.root, &fits).0
    );
    assert_eq!(
        identity(&server.root, &replayed[1]).0,
        identity(&server.root, &after).0
    );
    assert_eq!(server.read("c.md").body["content"], "c from mirai\n");
    assert_eq!(server.read("a.md").body["content"], "alpha by the person\n");
    assert_eq!(server.read("b.md").body["content"], "beta by mirai\n");
    assert_eq!(
        std::fs::read_to_string(server.root.join("b.md")).unwrap(),
        "beta by mirai\n"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    wait_until("the replayed commits are pushed", || {
        world.remote_head() == head
    });

    // The original commits are kept on the unmerged branch, which git and status show.
    for original in [&fits, &clash, &after, &dependent] {
        assert!(reachable(&server.root, original, &branch), "{original}");
    }
    assert_eq!(
        git(&server.root, &["show", &format!("{branch}:a.md")]),
        "alpha by mirai, again\n"
    );
    let status = server.get("/mcp/repo/status");
    assert_eq!(status.body["unmerged"], json!(unmerged));
    assert_eq!(status.body["head"], head.as_str());
    assert_eq!(
        git(
            &server.root,
            &["for-each-ref", "--format=%(refname)", "refs/heads/mirai/"]
        )
        .trim(),
        format!("refs/heads/{branch}")
    );
    // A later sync has nothing to join and keeps the branch.
    let again = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.body["pulled"], false);
    assert_eq!(again.body["unmerged"], json!(unmerged));
    assert!(reachable(&world.remote, &theirs, "main"));
    assert_fsck(&server.root);
    assert_fsck(&world.remote);
}

#[test]
fn a_merge_in_the_clone_replays_as_one_commit_and_uncommitted_edits_block_a_replay() {
    let world = World::new();
    let server = world.mirai(|config| {
        // The person switches branches in mirai's clone: sync follows main only.
        config.sync.as_mut().unwrap().branch = Some("main".into());
    });
    let theirs = world.person_pushes(&[("b.md", Some("beta by the person\n"))], "person: b");
    let commit = |files: &[(&str, &str)], message: &str| {
        for (rel, text) in files {
            std::fs::write(server.root.join(rel), text).unwrap();
            person_git(&server.root, &["add", rel]);
        }
        person_git(&server.root, &["commit", "-qm", message]);
    };
    person_git(&server.root, &["checkout", "-qb", "side"]);
    commit(&[("f.md", "# F\n")], "side: f");
    person_git(&server.root, &["checkout", "-q", "main"]);
    commit(&[("g.md", "# G\n")], "main: g");
    person_git(
        &server.root,
        &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
    );
    let merge = server.head();

    // An uncommitted edit to a note the pull would change stops it: nothing moves.
    std::fs::write(server.root.join("b.md"), "beta, edited by hand\n").unwrap();
    let blocked = server.post_json("/mcp/repo/sync", &json!({}));
    blocked.assert_error(409, "conflict");
    assert!(
        blocked.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("b.md has uncommitted changes"),
        "{blocked:?}"
    );
    assert_eq!(server.head(), merge);
    assert_eq!(
        std::fs::read_to_string(server.root.join("b.md")).unwrap(),
        "beta, edited by hand\n"
    );
    assert_eq!(
        git(&server.root, &["for-each-ref", "refs/heads/mirai/"]),
        ""
    );
    assert!(!server.root.join(".mirai/replayed.json").exists());

    // Once the edit is gone, the replay runs; the merge is one commit of what it brought in.
    git(&server.root, &["checkout", "--", "b.md"]);
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["unmerged"], json!([]));
    let head = server.head();
    let replayed = commits_between(&server.root, &theirs, &head);
    let subjects: Vec<String> = replayed
        .iter()
        .map(|c| git(&server.root, &["show", "-s", "--format=%s %p", c]))
        .collect();
    assert_eq!(
        subjects,
        vec![
            format!("main: g {}\n", &theirs[..7]),
            format!("merge side {}\n", &replayed[0][..7]),
        ]
    );
    assert_eq!(
        git(
            &server.root,
            &["show", "--name-only", "--format=", &replayed[1]]
        ),
        "f.md\n"
    );
    for (note, text) in [
        ("b.md", "beta by the person\n"),
        ("f.md", "# F\n"),
        ("g.md", "# G\n"),
    ] {
        assert_eq!(server.read(note).body["content"], text, "{note}");
    }
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    wait_until("the replayed commits are pushed", || {
        world.remote_head() == head
    });
    assert_fsck(&server.root);
    assert_fsck(&world.remote);
}

#[test]
fn old_ids_keep_working_after_a_replay_base_commit_revert_and_a_runs_commits() {
    use common::fake_llm::{FakeLlm, Script};
    let llm = FakeLlm::start(Script::answering(&[
        r#"<think>Append it.</think><code>return await mirai.notes.append({path: "a.md", text: "- from the run"});</code>"#.into(),
        "<think>Done.</think><reply>Appended to a.md.</reply>".into(),
    ]));
    let world = World::new();
    let base_url = llm.base_url.clone();
    let server = world.mirai(|config| {
        config.llm.base_url = base_url;
        config.llm.model = "fake-model".into();
    });
    let theirs = world.person_pushes(&[("b.md", Some("beta by the person\n"))], "person: b");
    let run = server.post_json("/agent/run", &json!({"task": "Append to a.md."}));
    assert_eq!(run.status, 200, "{run:?}");
    let run_id = run.body["run_id"].as_str().unwrap().to_string();
    let run_commit = run.body["commits"][0].as_str().unwrap().to_string();
    let ours = write_note(&server, "c.md", "c from mirai\n");

    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    let replayed = commits_between(&server.root, &theirs, &server.head());
    assert_eq!(replayed.len(), 2);
    let (new_run_commit, new_ours) = (replayed[0].clone(), replayed[1].clone());
    assert!(
        git(
            &server.root,
            &["show", "-s", "--format=%B", &new_run_commit]
        )
        .contains(&format!("Mirai-Run: {run_id}")),
        "the trailer is kept"
    );

    // The run's commits are found by their trailer: the replayed one.
    let transcript = server.get(&format!("/agent/runs/{run_id}"));
    assert_eq!(transcript.status, 200, "{transcript:?}");
    let commits: Vec<&str> = transcript.body["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit"].as_str().unwrap())
        .collect();
    assert_eq!(commits, vec![new_run_commit.as_str()]);

    // base_commit with an old id: a.md is as the run left it, so the write lands...
    let write = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "alpha, rewritten\n", "base_commit": run_commit}),
    );
    assert_eq!(write.status, 200, "{write:?}");
    // ...b.md changed on the remote underneath that commit: refused.
    let write = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "b.md", "content": "beta, rewritten\n", "base_commit": run_commit}),
    );
    write.assert_error(409, "conflict");
    assert_eq!(server.read("b.md").body["content"], "beta by the person\n");

    // A revert by the old id takes back its replacement.
    let revert = server.post_json("/mcp/notes/revert", &json!({"commit": ours}));
    assert_eq!(revert.status, 200, "{revert:?}");
    assert_eq!(revert.body["reverted"], json!([new_ours]));
    server.read("c.md").assert_error(404, "not_found");
    assert!(git(&server.root, &["show", "-s", "--format=%B", "HEAD"])
        .contains(&format!("This reverts commit {new_ours}.")));
    assert_fsck(&server.root);
}

#[test]
fn a_read_only_replica_pulls_but_never_pushes_or_writes() {
    let world = World::new();
    let server = world.mirai(|config| config.policy = PolicyMode::ReadOnly);
    let seed = world.remote_head();
    server
        .post_json(
            "/mcp/notes/write",
            &json!({"path": "x.md", "content": "x\n"}),
        )
        .assert_error(403, "policy_denied");
    let pushed = world.person_pushes(&[("a.md", Some("alpha 2\n"))], "person: a");
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        (
            answer.body["pulled"].as_bool(),
            answer.body["pushed"].as_bool()
        ),
        (Some(true), Some(false))
    );
    assert_eq!(server.read("a.md").body["content"], "alpha 2\n");
    assert_ne!(pushed, seed);
    assert_eq!(world.remote_head(), pushed);
}

#[test]
fn the_interval_puller_takes_in_commits_without_being_asked() {
    let world = World::new();
    let server = world.mirai(|config| config.sync.as_mut().unwrap().interval_secs = 1);
    let pushed = world.person_pushes(&[("a.md", Some("alpha by interval\n"))], "person: a");
    wait_until("the interval pull", || server.head() == pushed);
    assert_eq!(server.read("a.md").body["content"], "alpha by interval\n");
}

#[test]
fn repo_status_without_a_remote_has_nulls_and_sync_is_refused() {
    let server = TestServer::with_note("a.md", "a\n");
    let status = server.get("/mcp/repo/status");
    assert_eq!(status.status, 200, "{status:?}");
    assert_eq!(status.body["head"], server.head().as_str());
    for key in [
        "remote",
        "ahead",
        "behind",
        "last_push",
        "last_pull",
        "last_error",
    ] {
        assert_eq!(status.body[key], Value::Null, "{key}");
    }
    server
        .post_json("/mcp/repo/sync", &json!({}))
        .assert_error(400, "invalid_request");
    // Without a secret the webhook route does not exist.
    server
        .post_raw("/hooks/push", "{}")
        .assert_error(404, "not_found");
}

#[test]
fn the_push_webhook_needs_a_good_signature_and_then_pulls() {
    let world = World::new();
    let server = world.mirai(|config| {
        config.webhook_secret = Some("hook-s3cret".into());
        config.api_token = Some("api-token".into());
    });
    let pushed = world.person_pushes(&[("a.md", Some("alpha via hook\n"))], "person: a");
    let body = br#"{"ref":"refs/heads/main"}"#.to_vec();
    let good = mirai::sync::webhook::sign("hook-s3cret", &body);
    let hook = |signature: Option<&str>, body: &[u8]| {
        let mut request = server
            .raw()
            .post(format!("{}/hooks/push", server.url))
            // A forge may send its webhooks form-encoded: the signature is the credential.
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_vec());
        if let Some(signature) = signature {
            request = request.header("X-Hub-Signature-256", signature);
        }
        send(request)
    };
    hook(None, &body).assert_error(401, "unauthorized");
    hook(Some("sha256=00"), &body).assert_error(401, "unauthorized");
    hook(Some(&mirai::sync::webhook::sign("wrong", &body)), &body)
        .assert_error(401, "unauthorized");
    hook(Some(&good), br#"{"ref":"refs/heads/other"}"#).assert_error(401, "unauthorized");
    assert_ne!(server.head(), pushed, "refused calls pulled nothing");
    // Signed right, with no bearer token: the webhook's signature is its credential.
    let answer = hook(Some(&good), &body);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["pulled"], true);
    assert_eq!(server.head(), pushed);
    // Every other route still needs the token.
    send(server.raw().get(format!("{}/mcp/repo/status", server.url)))
        .assert_error(401, "unauthorized");
}

/// `mirai serve` as a child process with its log captured.
struct Served {
    child: Child,
    url: String,
    log: Arc<Mutex<String>>,
}

impl Served {
    fn start(root: &Path, env: &[(&str, &str)]) -> Served {
        let mut command = mirai_cli();
        command
            .args(["serve", "--port", "0", "--notes-root"])
            .arg(root)
            .env("RUST_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find(" on http://") {
                    let url = line[at + 4..]
                        .split_whitespace()
                        .next()
                        .unwrap_or("")
                        .to_string();
                    let _ = tx.send(url);
                }
                let mut log = kept.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("mirai did not start: {}", log.lock().unwrap()));
        Served { child, url, log }
    }

    fn get(&self, path: &str) -> common::Answer {
        send(reqwest::blocking::Client::new().get(format!("{}{path}", self.url)))
    }

    fn post(&self, path: &str, body: Value) -> common::Answer {
        send(
            reqwest::blocking::Client::new()
                .post(format!("{}{path}", self.url))
                .json(&body),
        )
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_https_style_remote_with_a_token_pushes_and_the_token_appears_nowhere() {
    let world = World::new();
    let http = GitHttp::start(world.dir.path(), "ada", "tok-s3cret-42", Duration::ZERO);
    let url = format!("{}/remote.git", http.base);

    // The wrong token: remote_unavailable, nothing changed, no secret in the answer.
    let root = world.dir.path().join("wrong");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    let wrong = Served::start(
        &root,
        &[
            ("MIRAI_GIT_REMOTE", &url),
            ("MIRAI_GIT_TOKEN", "wrong-s3cret-7"),
            ("MIRAI_GIT_USERNAME", "ada"),
            ("MIRAI_SYNC_INTERVAL", "0"),
        ],
    );
    let answer = wrong.post("/mcp/repo/sync", json!({}));
    answer.assert_error(503, "remote_unavailable");
    assert!(!answer.body.to_string().contains("s3cret"), "{answer:?}");
    assert_eq!(
        git(&root, &["rev-list", "--all", "--count"]).trim(),
        "0",
        "nothing fetched"
    );
    let status = wrong.get("/mcp/repo/status");
    assert!(status.body["last_error"].is_string(), "{status:?}");
    assert!(!status.body.to_string().contains("s3cret"), "{status:?}");
    let wrong_log = wrong.log.clone();
    drop(wrong);

    // The right token: clones at start-up, pushes an apply.
    let root = world.dir.path().join("served");
    let served = Served::start(
        &root,
        &[
            ("MIRAI_GIT_REMOTE", &url),
            ("MIRAI_GIT_TOKEN", "tok-s3cret-42"),
            ("MIRAI_GIT_USERNAME", "ada"),
            ("MIRAI_SYNC_INTERVAL", "0"),
            ("MIRAI_WEBHOOK_SECRET", "hook-s3cret-9"),
        ],
    );
    assert_eq!(
        served.get("/mcp/notes/read?path=a.md").body["content"],
        "alpha\n"
    );
    let answer = served.post(
        "/mcp/notes/write",
        json!({"path": "n.md", "content": "new\n"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let commit = answer.body["commit"].as_str().unwrap().to_string();
    wait_until("the push reached the HTTP remote", || {
        world.remote_head() == commit
    });
    // The remote's ref moves before the CGI server logs the request that moved it.
    wait_until("the remote logged the push", || http.pushes() >= 1);
    let answer = served.post("/mcp/repo/sync", json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");

    let config = served.get("/config");
    let status = served.get("/mcp/repo/status");
    assert_eq!(config.body["sync"]["remote"], url.as_str());
    assert_eq!(status.body["remote"], url.as_str());
    assert_eq!(status.body["ahead"], 0);
    let served_log = served.log.clone();
    drop(served);
    let logs = [
        wrong_log.lock().unwrap().clone(),
        served_log.lock().unwrap().clone(),
    ];
    assert!(logs[1].contains("sync: remote"), "{}", logs[1]);
    for text in [config.body.to_string(), status.body.to_string()]
        .iter()
        .chain(&logs)
    {
        assert!(!text.contains("s3cret"), "{text}");
    }
}

#[test]
fn a_burst_of_applies_against_a_slow_remote_is_pushed_whole_in_a_few_pushes() {
    let world = World::new();
    // Every push waits 200 ms at the remote; the applies must not.
    let http = GitHttp::start(world.dir.path(), "ada", "tok", Duration::from_millis(200));
    let url = format!("{}/remote.git", http.base);
    let mut sync = world.sync_config(&url);
    sync.credentials = GitCredentials::Token {
        username: "ada".into(),
        token: "tok".into(),
    };
    let root = tempfile::tempdir().unwrap();
    let notes = root.path().join("notes");
    let server = TestServer::start_in(root, notes, |config| config.sync = Some(sync));
    let seed = world.remote_head();
    let mut commits = Vec::new();
    for n in 0..200 {
        commits.push(write_note(
            &server,
            &format!("burst/{}.md", n % 20),
            &format!("note {n}\n"),
        ));
    }
    let last = commits.last().unwrap().clone();
    wait_until("the remote has the last apply", || {
        world.remote_head() == last
    });
    for commit in &commits {
        assert!(
            reachable(&world.remote, commit, "main"),
            "{commit} was not pushed"
        );
    }
    assert_eq!(
        git(
            &world.remote,
            &["rev-list", "--count", &format!("{seed}..main")]
        )
        .trim(),
        "200"
    );
    let pushes = http.pushes();
    assert!(
        (1..200).contains(&pushes),
        "{pushes} pushes for 200 applies: {:?}",
        http.requests()
    );
    assert_fsck(&world.remote);
}

#[test]
fn mirai_sync_pulls_and_pushes_once_and_fails_with_a_non_zero_exit() {
    let world = World::new();
    let root = world.clone_into("cli");
    let pushed = world.person_pushes(&[("a.md", Some("alpha for cron\n"))], "person: a");
    let run = |remote: &str| {
        mirai_cli()
            .args(["sync", "--notes-root"])
            .arg(&root)
            .env("MIRAI_GIT_REMOTE", remote)
            .output()
            .unwrap()
    };
    let out = run(world.remote.to_str().unwrap());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (answer["pulled"].as_bool(), answer["head"].as_str()),
        (Some(true), Some(pushed.as_str()))
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.md")).unwrap(),
        "alpha for cron\n"
    );
    let missing = world.dir.path().join("nowhere.git");
    let out = run(missing.to_str().unwrap());
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("remote_unavailable"), "{stderr}");
    // No remote configured: a configuration error.
    let out = mirai_cli()
        .args(["sync", "--notes-root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Three replicas and a person push to one bare remote on this disk at the
/// same time. A push is a compare-and-swap: the remote's branch only ever
/// moves forward (its reflog has no entry whose new value does not descend
/// from its old one), every note each replica wrote ends up on the remote
/// with its last text, and every commit the person pushed is still there.
#[test]
fn three_replicas_and_a_person_pushing_to_a_local_remote_never_overwrite_each_other() {
    const WRITES: usize = 80;
    let world = World::new();
    git(
        &world.remote,
        &["config", "core.logAllRefUpdates", "always"],
    );
    let replicas: Vec<TestServer> = (0..3)
        .map(|_| {
            world.mirai(|config| {
                if let Some(sync) = config.sync.as_mut() {
                    sync.interval_secs = 1;
                }
            })
        })
        .collect();
    let person_pushed = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|scope| {
        for (r, server) in replicas.iter().enumerate() {
            scope.spawn(move || {
                for i in 0..WRITES {
                    write_note(
                        server,
                        &format!("r{r}/n{}.md", i % 5),
                        &format!("replica {r} write {i}\n"),
                    );
                    if i % 6 == 5 {
                        // Pulls (and replays) between writes; a refused push waits for it.
                        let _ = server.post_json("/mcp/repo/sync", &json!({}));
                    }
                }
            });
        }
        let pushed = Arc::clone(&person_pushed);
        let world = &world;
        scope.spawn(move || {
            for i in 0..8 {
                let file = format!("person/p{i}.md");
                let text = format!("person {i}\n");
                person_git(&world.person, &["fetch", "-q", "origin"]);
                person_git(&world.person, &["reset", "-q", "--hard", "origin/main"]);
                std::fs::create_dir_all(world.person.join("person")).unwrap();
                std::fs::write(world.person.join(&file), &text).unwrap();
                person_git(&world.person, &["add", "-A"]);
                person_git(&world.person, &["commit", "-qm", &format!("person {i}")]);
                // The person retries as people do: fetch, rebase, push, until it takes.
                for _ in 0..50 {
                    let out = std::process::Command::new("git")
                        .arg("-C")
                        .arg(&world.person)
                        .args(["push", "-q", "origin", "main"])
                        .output()
                        .unwrap();
                    if out.status.success() {
                        break;
                    }
                    person_git(&world.person, &["pull", "-q", "--rebase", "origin", "main"]);
                }
                let head = git(&world.person, &["rev-parse", "HEAD"])
                    .trim()
                    .to_string();
                pushed.lock().unwrap().push(head);
                std::thread::sleep(Duration::from_millis(30));
            }
        });
    });
    // Every replica syncs until it has nothing left to push.
    wait_until("every replica's commits reach the remote", || {
        replicas.iter().all(|server| {
            let _ = server.post_json("/mcp/repo/sync", &json!({}));
            server.get("/mcp/repo/status").body["ahead"] == 0
        })
    });

    let reflog = std::fs::read_to_string(world.remote.join("logs/refs/heads/main")).unwrap();
    let mut moves = 0;
    for line in reflog.lines() {
        let mut fields = line.split(' ');
        let (old, new) = (fields.next().unwrap(), fields.next().unwrap());
        if old.bytes().all(|b| b == b'0') {
            continue;
        }
        moves += 1;
        assert!(
            reachable(&world.remote, old, new),
            "the remote's main moved from {old} to {new}, which does not descend from it: {line}"
        );
    }
    assert!(
        moves > 20,
        "the race ran ({moves} moves of the remote's main)"
    );
    for commit in person_pushed.lock().unwrap().iter() {
        assert!(
            reachable(&world.remote, commit, "main"),
            "the person's pushed commit {commit} is gone from the remote"
        );
    }
    for r in 0..3 {
        for n in 0..5 {
            let last = (0..WRITES).filter(|i| i % 5 == n).max().unwrap();
            let shown = git(&world.remote, &["show", &format!("main:r{r}/n{n}.md")]);
            assert_eq!(shown, format!("replica {r} write {last}\n"), "r{r}/n{n}.md");
        }
    }
    assert_fsck(&world.remote);
}

/// `mirai mcp` on stdio is wired as `serve` is: a commit made over stdio is
/// pushed at once, the remote's commits are pulled on the interval (and reach
/// its search); `mirai revert` pushes what it committed before it exits.
#[test]
fn mcp_on_stdio_pushes_and_pulls_and_the_cli_revert_pushes_before_it_exits() {
    use std::io::Write;
    let world = World::new();
    let root = world.clone_into("stdio");
    let mut child = mirai_cli()
        .args(["mcp", "--notes-root"])
        .arg(&root)
        .env("MIRAI_GIT_REMOTE", &world.remote)
        .env("MIRAI_SYNC_INTERVAL", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut id = 0;
    let mut call = |method: &str, params: Value| -> Value {
        id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    call(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "spec", "version": "1"}}),
    );
    let written = call(
        "tools/call",
        json!({"name": "notes_write", "arguments": {"path": "stdio.md", "content": "from stdio\n"}}),
    );
    assert_eq!(written["result"]["isError"], false, "{written}");
    wait_until("the stdio commit reaches the remote", || {
        let shown = std::process::Command::new("git")
            .arg("-C")
            .arg(&world.remote)
            .args(["show", "main:stdio.md"])
            .output()
            .unwrap();
        shown.stdout == b"from stdio\n"
    });

    world.person_pushes(
        &[("b.md", Some("beta from the person, kiwi\n"))],
        "person: b",
    );
    wait_until("the person's commit is pulled over stdio", || {
        let read = call(
            "tools/call",
            json!({"name": "notes_read", "arguments": {"path": "b.md"}}),
        );
        read.to_string().contains("kiwi")
    });
    wait_until("the pulled text reaches search over stdio", || {
        let hits = call(
            "tools/call",
            json!({"name": "index_query", "arguments": {"q": "kiwi"}}),
        );
        hits.to_string().contains("b.md")
    });
    drop(stdin);
    assert!(child.wait().unwrap().success());

    // The CLI's revert pushes its commit before it exits.
    let last = git(&root, &["log", "-1", "--format=%H", "--", "stdio.md"])
        .trim()
        .to_string();
    let out = mirai_cli()
        .args(["revert", &last, "--notes-root"])
        .arg(&root)
        .env("MIRAI_GIT_REMOTE", &world.remote)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reverted = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        world.remote_head(),
        reverted,
        "the revert was pushed before exit"
    );
    assert_eq!(git(&root, &["status", "--porcelain"]), "");
}

#[test]
fn a_local_move_is_run_again_on_the_remote_with_its_new_text_and_new_links() {
    let world = World::new();
    world.person_pushes(
        &[
            ("people/ann.md", Some("# Ann\n")),
            ("l1.md", Some("[[ann]] and [her](people/ann.md)\n")),
        ],
        "person: ann",
    );
    let server = world.mirai(|_| {});
    assert_eq!(server.read("l1.md").status, 200);
    let theirs = world.person_pushes(
        &[
            (
                "people/ann.md",
                Some("# Ann\n\nNew text from the person.\n"),
            ),
            ("l2.md", Some("see [[people/ann|Ann]]\n")),
        ],
        "person: ann grows, l2 links her",
    );
    let moved = server.post_json(
        "/mcp/notes/move",
        &json!({"from": "people/ann.md", "to": "team/ann-lee.md"}),
    );
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(
        moved.body["rewritten"],
        json!([{"path": "l1.md", "links": 2}])
    );

    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    let head = server.head();
    wait_until("the replayed move is pushed", || {
        world.remote_head() == head
    });
    assert_eq!(commits_between(&server.root, &theirs, &head).len(), 1);
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%s"]).trim(),
        "mcp.notes_move: people/ann.md -> team/ann-lee.md"
    );
    let file = |rel: &str| std::fs::read_to_string(server.root.join(rel)).unwrap();
    assert_eq!(
        file("team/ann-lee.md"),
        "# Ann\n\nNew text from the person.\n"
    );
    assert!(!server.root.join("people/ann.md").exists());
    assert_eq!(file("l1.md"), "[[ann-lee]] and [her](team/ann-lee.md)\n");
    assert_eq!(
        file("l2.md"),
        "see [[team/ann-lee|Ann]]\n",
        "the remote's new link too"
    );
    let status = git(
        &server.root,
        &["show", "-M", "--name-status", "--format=", "HEAD"],
    );
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("R100\tpeople/ann.md\tteam/ann-lee.md")),
        "{status}"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    assert_eq!(server.read("team/ann-lee.md").status, 200);
    assert_fsck(&server.root);
}

/// A local move the remote made impossible (it deleted the note, or created
/// the move's destination) is not forced: it goes to an unmerged branch, the
/// branch follows the remote, and nothing of the person's is lost.
#[test]
fn a_move_the_remote_made_impossible_goes_to_an_unmerged_branch() {
    for (case, remote_change) in [
        ("deleted", vec![("people/ann.md", None)]),
        (
            "destination taken",
            vec![("team/ann-lee.md", Some("# Someone else\n"))],
        ),
    ] {
        let world = World::new();
        world.person_pushes(
            &[
                ("people/ann.md", Some("# Ann\n")),
                ("l1.md", Some("[[ann]] and [her](people/ann.md)\n")),
            ],
            "person: ann",
        );
        let server = world.mirai(|_| {});
        assert_eq!(server.read("l1.md").status, 200);
        let theirs = world.person_pushes(&remote_change, "person: a change in the way");
        let moved = server.post_json(
            "/mcp/notes/move",
            &json!({"from": "people/ann.md", "to": "team/ann-lee.md"}),
        );
        assert_eq!(moved.status, 200, "{case}: {moved:?}");
        let local = moved.body["commit"].as_str().unwrap().to_string();

        let answer = server.post_json("/mcp/repo/sync", &json!({}));
        assert_eq!(answer.status, 200, "{case}: {answer:?}");
        let unmerged = answer.body["unmerged"].as_array().unwrap().clone();
        assert_eq!(unmerged.len(), 1, "{case}: {answer:?}");
        let branch = unmerged[0]["branch"].as_str().unwrap().to_string();
        assert!(reachable(&server.root, &local, &branch), "{case}");
        assert_eq!(server.head(), theirs, "{case}: the branch is the remote's");
        wait_until("nothing new to push", || world.remote_head() == theirs);
        // The person's change stands, and the move is kept whole on the branch.
        match case {
            "deleted" => assert!(!server.root.join("people/ann.md").exists()),
            _ => assert_eq!(
                std::fs::read_to_string(server.root.join("team/ann-lee.md")).unwrap(),
                "# Someone else\n"
            ),
        }
        assert_eq!(
            std::fs::read_to_string(server.root.join("l1.md")).unwrap(),
            "[[ann]] and [her](people/ann.md)\n",
            "{case}"
        );
        assert_eq!(
            git(&server.root, &["show", &format!("{branch}:l1.md")]),
            "[[ann-lee]] and [her](team/ann-lee.md)\n",
            "{case}"
        );
        assert_eq!(git(&server.root, &["status", "--porcelain"]), "", "{case}");
        assert_fsck(&server.root);
    }
}

/// A note a pull brings past MIRAI_MAX_NOTE_BYTES is the person's file, on
/// disk, but never read as text: not indexed, and in the link graph a file
/// links reach, with no links of its own.
/// The paths `repo.status` lists as skipped, with their reasons.
fn skipped_paths(server: &TestServer) -> Vec<(String, String)> {
    let status = server.get("/mcp/repo/status");
    status.body["skipped_paths"]
        .as_array()
        .unwrap_or_else(|| panic!("{status:?}"))
        .iter()
        .map(|s| {
            let field = |name: &str| s[name].as_str().unwrap().to_string();
            (field("path"), field("reason"))
        })
        .collect()
}

#[test]
fn a_pulled_file_past_the_file_limit_stays_in_git_and_out_of_the_working_tree() {
    let world = World::new();
    world.person_pushes(
        &[
            ("small.md", Some("# Small\n")),
            ("grows.md", Some("# Grows\n")),
        ],
        "person: start",
    );
    // Over a network transport (a remote on this machine refuses such files: the next spec).
    let http = GitHttp::start(world.dir.path(), "ada", "tok", Duration::ZERO);
    let server = world.mirai_over_http(&http, |c| {
        c.max_body_bytes = 2048;
        c.max_note_bytes = 4096;
        c.max_file_bytes = 8192;
    });
    assert_eq!(server.read("grows.md").body["content"], "# Grows\n");
    let huge = "huge line\n".repeat(2_000);
    world.person_pushes(
        &[
            ("huge.md", Some(huge.as_str())),
            ("grows.md", Some(huge.as_str())),
        ],
        "person: two files past the limit",
    );
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(server.head(), world.remote_head());
    // Neither is written (grows.md's old file is gone); git status stays clean.
    assert!(!server.root.join("huge.md").exists());
    assert!(!server.root.join("grows.md").exists());
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    let skipped = skipped_paths(&server);
    let paths: Vec<&str> = skipped.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["grows.md", "huge.md"], "{skipped:?}");
    assert!(
        skipped[0].1.contains("MIRAI_MAX_FILE_BYTES") && skipped[0].1.contains("20000 bytes"),
        "{skipped:?}"
    );
    server.read("huge.md").assert_error(404, "not_found");

    // mirai's own commit on top keeps both as the remote has them, and pushes.
    let written = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "small.md", "content": "# Small\nmore\n"}),
    );
    assert_eq!(written.status, 200, "{written:?}");
    assert_eq!(git(&server.root, &["show", "HEAD:huge.md"]), huge);
    assert_eq!(server.post_json("/mcp/repo/sync", &json!({})).status, 200);
    assert_eq!(world.remote_head(), server.head());

    // The remote shrinks one and deletes the other: the file comes back, the entry goes.
    world.person_pushes(
        &[
            ("grows.md", Some("# Grows\nsmall again\n")),
            ("huge.md", None),
        ],
        "person: back within the limit",
    );
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("grows.md")).unwrap(),
        "# Grows\nsmall again\n"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    assert_eq!(skipped_paths(&server), []);
    assert_eq!(git(&server.root, &["ls-files", "huge.md"]), "");
}

#[test]
fn a_remote_on_this_machine_with_a_file_past_the_limit_is_refused_before_the_fetch() {
    let world = World::new();
    let server = world.mirai(|c| {
        c.max_body_bytes = 2048;
        c.max_note_bytes = 4096;
        c.max_file_bytes = 8192;
    });
    let before = server.head();
    let huge = world.person_pushes(
        &[("huge.md", Some("huge line\n".repeat(2_000).as_str()))],
        "person: huge",
    );
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    answer.assert_error(409, "conflict");
    let text = answer.body["error"]["message"].as_str().unwrap();
    assert!(
        text.contains("MIRAI_MAX_FILE_BYTES") && text.contains("https or ssh"),
        "{text}"
    );
    // Not fetched at all: the commit is not in mirai's repository.
    assert_eq!(server.head(), before);
    let found = std::process::Command::new("git")
        .args(["-C", server.root.to_str().unwrap(), "cat-file", "-e", &huge])
        .status()
        .unwrap();
    assert!(!found.success(), "the refused commit was fetched");
    assert!(!server.root.join("huge.md").exists());
}

#[test]
fn a_fetched_commit_past_one_mib_is_refused_before_anything_reads_it() {
    let world = World::new();
    world.person_pushes(&[("first.md", Some("first\n"))], "person: first");
    let server = world.mirai(|_| {});
    let before = server.head();
    // A commit whose message alone is 2 MiB (too long for an argument: from a file).
    person_git(
        &world.person,
        &["pull", "-q", "--ff-only", "origin", "main"],
    );
    std::fs::write(world.person.join("late.md"), "late\n").unwrap();
    let message = world.dir.path().join("message.txt");
    std::fs::write(&message, "m".repeat(2 * 1024 * 1024)).unwrap();
    person_git(&world.person, &["add", "late.md"]);
    person_git(
        &world.person,
        &["commit", "-q", "-F", message.to_str().unwrap()],
    );
    person_git(&world.person, &["push", "-q", "origin", "main"]);
    let huge = world.remote_head();

    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    answer.assert_error(409, "conflict");
    let text = answer.body["error"]["message"].as_str().unwrap();
    assert!(text.contains(&huge) && text.contains("1 MiB"), "{text}");
    // Nothing moved: not the branch, not the tracking ref, no file.
    assert_eq!(server.head(), before);
    assert!(!server.root.join("late.md").exists());
    assert_eq!(
        git(&server.root, &["rev-parse", "refs/remotes/mirai/main"]).trim(),
        before
    );
    let status = server.get("/mcp/repo/status");
    assert!(
        status.body["last_error"].as_str().unwrap().contains(&huge),
        "{status:?}"
    );

    // The person rewrites the commit: the next sync takes it in.
    person_git(
        &world.person,
        &["commit", "-q", "--amend", "-m", "person: b"],
    );
    person_git(&world.person, &["push", "-q", "-f", "origin", "main"]);
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(server.head(), world.remote_head());
    assert_eq!(server.read("late.md").body["content"], "late\n");
}

#[test]
fn a_pulled_note_past_the_note_limit_is_on_disk_but_never_indexed_or_parsed() {
    let world = World::new();
    world.person_pushes(
        &[("small.md", Some("# Small\n\nSee [[big]].\n"))],
        "person: small",
    );
    let server = world.mirai(|c| {
        c.max_body_bytes = 2048;
        c.max_note_bytes = 4096;
    });
    // The link graph is built before the pull, so the pull updates it.
    let graph = server.get("/mcp/notes/graph");
    assert_eq!(
        graph.body["broken"].as_array().unwrap().len(),
        1,
        "{graph:?}"
    );
    let big = format!(
        "# Big\n\nzanzibar [[nowhere]]\n{}",
        "filler line\n".repeat(500)
    );
    world.person_pushes(&[("big.md", Some(big.as_str()))], "person: big");
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["pulled"], true);
    assert_eq!(
        std::fs::read_to_string(server.root.join("big.md")).unwrap(),
        big
    );
    server.read("big.md").assert_error(413, "note_too_large");
    let hits = server.get("/mcp/index/query?q=zanzibar");
    assert_eq!(hits.body["chunks"], json!([]), "{hits:?}");
    // [[big]] now resolves; big.md's own [[nowhere]] is never read.
    let graph = server.get("/mcp/notes/graph");
    assert_eq!(graph.body["broken"], json!([]), "{graph:?}");
    let links = server.get("/mcp/notes/links?path=small.md");
    assert_eq!(links.body["outgoing"][0]["resolved"], "big.md", "{links:?}");
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
}

/// A person folds edits into mirai's move commit before it is pushed (`git
/// commit --amend`); the remote moved on meanwhile. The replay runs the move
/// again and then what else the commit changed: every byte of it reaches the
/// branch and the remote.
#[test]
fn edits_folded_into_a_move_commit_survive_its_replay() {
    let world = World::new();
    world.person_pushes(
        &[
            ("people/ann.md", Some("# Ann\n")),
            ("l1.md", Some("[[ann]] and [her](people/ann.md)\n")),
        ],
        "person: ann",
    );
    let server = world.mirai(|_| {});
    assert_eq!(server.read("l1.md").status, 200);
    let theirs = world.person_pushes(
        &[(
            "people/ann.md",
            Some("# Ann\n\nNew text from the person.\n"),
        )],
        "person: ann grows",
    );
    let moved = server.post_json(
        "/mcp/notes/move",
        &json!({"from": "people/ann.md", "to": "team/ann-lee.md"}),
    );
    assert_eq!(moved.status, 200, "{moved:?}");
    // Before the push, the person amends mirai's commit with two edits.
    std::fs::write(server.root.join("b.md"), "beta\nfolded in\n").unwrap();
    std::fs::write(server.root.join("c.md"), "# C\n\nalso folded in\n").unwrap();
    person_git(&server.root, &["add", "b.md", "c.md"]);
    person_git(&server.root, &["commit", "-q", "--amend", "--no-edit"]);

    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["unmerged"], json!([]), "{answer:?}");
    let head = server.head();
    wait_until("the replayed move is pushed", || {
        world.remote_head() == head
    });
    assert_eq!(commits_between(&server.root, &theirs, &head).len(), 1);
    let file = |rel: &str| std::fs::read_to_string(server.root.join(rel)).unwrap();
    assert_eq!(
        file("team/ann-lee.md"),
        "# Ann\n\nNew text from the person.\n"
    );
    assert!(!server.root.join("people/ann.md").exists());
    assert_eq!(file("l1.md"), "[[ann-lee]] and [her](team/ann-lee.md)\n");
    assert_eq!(file("b.md"), "beta\nfolded in\n");
    assert_eq!(file("c.md"), "# C\n\nalso folded in\n");
    for (rel, want) in [
        ("b.md", "beta\nfolded in\n"),
        ("c.md", "# C\n\nalso folded in\n"),
    ] {
        assert_eq!(git(&world.remote, &["show", &format!("main:{rel}")]), want);
    }
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    assert_fsck(&server.root);
}

/// A replayed move finds links the remote added in any spelling that
/// resolves to the note (percent-encoded, as `notes.move` itself writes
/// them), and a move made with `update_links: false` rewrites none on replay.
#[test]
fn a_replayed_move_follows_percent_encoded_links_and_honours_update_links() {
    for update_links in [true, false] {
        let world = World::new();
        world.person_pushes(&[("p (1).md", Some("# P\n"))], "person: p");
        let server = world.mirai(|_| {});
        assert_eq!(server.read("p (1).md").status, 200);
        let theirs = world.person_pushes(
            &[
                ("enc.md", Some("see [y](p%20%281%29.md)\n")),
                ("wiki.md", Some("see [[p (1)]]\n")),
            ],
            "person: two new links",
        );
        let moved = server.post_json(
            "/mcp/notes/move",
            &json!({"from": "p (1).md", "to": "q.md", "update_links": update_links}),
        );
        assert_eq!(moved.status, 200, "{moved:?}");
        let answer = server.post_json("/mcp/repo/sync", &json!({}));
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.body["unmerged"], json!([]), "{answer:?}");
        let head = server.head();
        assert_eq!(commits_between(&server.root, &theirs, &head).len(), 1);
        let file = |rel: &str| std::fs::read_to_string(server.root.join(rel)).unwrap();
        assert_eq!(file("q.md"), "# P\n");
        let (enc, wiki) = if update_links {
            ("see [y](q.md)\n", "see [[q]]\n")
        } else {
            ("see [y](p%20%281%29.md)\n", "see [[p (1)]]\n")
        };
        assert_eq!(file("enc.md"), enc, "update_links {update_links}");
        assert_eq!(file("wiki.md"), wiki, "update_links {update_links}");
        assert_fsck(&server.root);
    }
}

/// A local move of an attachment replays on the remote's tree: its bytes move
/// (unread, as the remote holds them) and the remote's new embeds of it follow.
#[test]
fn a_replayed_move_of_an_attachment_moves_its_bytes_and_rewrites_new_embeds() {
    let world = World::new();
    world.person_pushes(
        &[
            ("assets/x.png", Some("fake png bytes")),
            ("a.md", Some("![[x.png]]\n")),
        ],
        "person: an image",
    );
    let server = world.mirai(|_| {});
    assert_eq!(server.read("a.md").status, 200);
    let theirs = world.person_pushes(
        &[("c.md", Some("![plot](assets/x.png)\n"))],
        "person: a new embed",
    );
    let moved = server.post_json(
        "/mcp/notes/move",
        &json!({"from": "assets/x.png", "to": "img/x.png"}),
    );
    assert_eq!(moved.status, 200, "{moved:?}");
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["unmerged"], json!([]), "{answer:?}");
    let head = server.head();
    assert_eq!(commits_between(&server.root, &theirs, &head).len(), 1);
    let file = |rel: &str| std::fs::read_to_string(server.root.join(rel)).unwrap();
    assert_eq!(file("img/x.png"), "fake png bytes");
    assert!(!server.root.join("assets/x.png").exists());
    assert_eq!(file("a.md"), "![[x.png]]\n");
    assert_eq!(file("c.md"), "![plot](img/x.png)\n");
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    assert_fsck(&server.root);
}

/// A local write into a folder that the remote meanwhile made a plain file
/// cannot replay: it is kept back on an unmerged branch, the branch takes the
/// remote's file, and later syncs pull and push as before.
#[test]
fn a_write_into_a_folder_the_remote_made_a_file_is_kept_back_and_syncs_go_on() {
    let world = World::new();
    let server = world.mirai(|_| {});
    assert_eq!(server.read("a.md").status, 200);
    let theirs = world.person_pushes(&[("x", Some("a plain file\n"))], "person: x is a file");
    let local = write_note(&server, "x/note.md", "# In x\n");

    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    let unmerged = answer.body["unmerged"].as_array().unwrap().clone();
    assert_eq!(unmerged.len(), 1, "{answer:?}");
    let branch = unmerged[0]["branch"].as_str().unwrap().to_string();
    assert!(reachable(&server.root, &local, &branch));
    assert_eq!(server.head(), theirs);
    assert_eq!(
        std::fs::read_to_string(server.root.join("x")).unwrap(),
        "a plain file\n"
    );
    assert_eq!(
        git(&server.root, &["show", &format!("{branch}:x/note.md")]),
        "# In x\n"
    );

    // Later writes sync both ways again.
    let later = write_note(&server, "later.md", "# Later\n");
    let again = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(again.status, 200, "{again:?}");
    wait_until("the later write is pushed", || world.remote_head() == later);
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    assert_fsck(&server.root);
}

/// An approved proposal whose commit a sync keeps back (the remote changed the
/// same lines meanwhile) is not in the notes: it reads as pending again,
/// saying why, and can be approved once more against the notes as they are.
#[test]
fn a_proposal_whose_commit_a_sync_kept_back_is_pending_again() {
    const REVIEWER: &str = "reviewer-s3cret";
    let world = World::new();
    let server = world.mirai(|config| {
        config.policy = PolicyMode::Review;
        config.reviewer_token = Some(REVIEWER.into());
    });
    assert_eq!(server.read("a.md").status, 200);
    let proposed = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "alpha, as mirai proposed\n"}),
    );
    assert_eq!(proposed.status, 202, "{proposed:?}");
    let id = proposed.body["proposal"].as_str().unwrap().to_string();
    let theirs = world.person_pushes(
        &[("a.md", Some("alpha, as the person wrote\n"))],
        "person: a",
    );
    let reviewer = |path: &str, body: Value| {
        send(
            server
                .raw()
                .post(format!("{}{path}", server.url))
                .bearer_auth(REVIEWER)
                .json(&body),
        )
    };
    let approved = reviewer("/mcp/proposals/approve", json!({"id": id}));
    assert_eq!(approved.status, 200, "{approved:?}");
    let kept = approved.body["commit"].as_str().unwrap().to_string();

    let answer = reviewer("/mcp/repo/sync", json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");
    let branch = answer.body["unmerged"][0]["branch"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reachable(&server.root, &kept, &branch));
    assert_eq!(server.head(), theirs);

    let detail = server.get(&format!("/mcp/proposals/get?id={id}"));
    assert_eq!(detail.body["status"], "pending", "{detail:?}");
    assert_eq!(detail.body["commit"], Value::Null, "{detail:?}");
    let why = detail.body["reason"].as_str().unwrap();
    assert!(
        why.contains(&kept) && why.contains("mirai/unmerged/"),
        "{why}"
    );
    let listed = server.get("/mcp/proposals?status=pending");
    assert_eq!(listed.body["proposals"][0]["id"], id.as_str(), "{listed:?}");
    // Approved again, it no longer applies to the person's text: it stays pending.
    let again = reviewer("/mcp/proposals/approve", json!({"id": id}));
    again.assert_error(409, "conflict");
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "alpha, as the person wrote\n"
    );
}
