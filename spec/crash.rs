//! Crashes and restarts, against the real `mirai serve` binary: a dead mirai's
//! intent file frees its locks and has its half-done write rolled forward or
//! back at start-up; locks without an intent of ours, and those of a live
//! process, are left alone; stray temp files are swept; malformed and
//! git-tracked intent files are ignored; a multi-note write is rolled back or
//! forward note by note. Last, a harness kills the server with SIGKILL in the
//! middle of a loop of writes (`MIRAI_CRASH_KILLS`, 10 by default), of one note
//! each and of three notes in one commit, and checks every invariant after each
//! restart (a commit of three notes lands whole or not at all); a third kills
//! it in the middle of `notes.move`s of a note with 30 linkers (the note is in
//! one place and every link agrees with it after each restart). A fourth
//! harness kills it in the middle of pulls (fast-forwards of hundreds of
//! notes) and replays: after each restart the working tree equals HEAD. A
//! fifth kills it in the middle of binary `files.write`s and `files.delete`s:
//! the file is whole (the acknowledged bytes or those in flight) or absent,
//! and a large raw upload cut by the kill leaves no `.mirai/uploads/*.part`.

use crate::common;

use std::collections::HashMap;
use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{git, mirai_cli, Answer};
use reqwest::blocking::Client;
use serde_json::{json, Value};

/// A `mirai serve` process on a loopback port, killed when dropped.
pub(crate) struct Mirai {
    child: Child,
    pub(crate) url: String,
    pub(crate) client: Client,
}

impl Mirai {
    fn start(root: &Path, log: &Path) -> Mirai {
        Mirai::start_env(root, log, &[])
    }

    /// [`Mirai::start`] with extra environment (a remote to sync with).
    pub(crate) fn start_env(root: &Path, log: &Path, env: &[(&str, &str)]) -> Mirai {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = mirai_cli()
            .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--notes-root")
            .arg(root)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(fs::File::create(log).unwrap())
            .spawn()
            .expect("mirai starts");
        let client = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let mut mirai = Mirai {
            child,
            url: format!("http://127.0.0.1:{port}"),
            client,
        };
        let started = Instant::now();
        loop {
            if let Ok(response) = mirai.client.get(format!("{}/health", mirai.url)).send() {
                if response.status().is_success() {
                    return mirai;
                }
            }
            if let Some(status) = mirai.child.try_wait().unwrap() {
                panic!(
                    "mirai exited ({status}): {}",
                    fs::read_to_string(log).unwrap()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "mirai never answered"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn write(&self, path: &str, content: &str) -> reqwest::Result<Answer> {
        let request = self
            .client
            .post(format!("{}/mcp/notes/write", self.url))
            .json(&json!({"path": path, "content": content}));
        let response = request.send()?;
        let status = response.status().as_u16();
        let body = response.json::<Value>()?;
        Ok(Answer { status, body })
    }

    /// The paths of the chunks a query finds.
    fn found(&self, q: &str) -> Vec<String> {
        let body: Value = self
            .client
            .get(format!("{}/mcp/index/query?q={q}&limit=50", self.url))
            .send()
            .and_then(|r| r.json())
            .unwrap();
        body["chunks"]
            .as_array()
            .unwrap_or_else(|| panic!("a query answers chunks: {body}"))
            .iter()
            .map(|c| c["metadata"]["path"].as_str().unwrap().to_string())
            .collect()
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for Mirai {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A repository as a person has it: notes committed, `.mirai/` excluded.
pub(crate) fn seeded(notes: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("notes");
    fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    fs::write(root.join(".git/info/exclude"), ".mirai/\n").unwrap();
    for (path, content) in notes {
        let file = root.join(path);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, content).unwrap();
    }
    git(&root, &["add", "-A"]);
    person_commit(&root, "seed");
    (dir, root)
}

fn person_commit(root: &Path, message: &str) {
    git(
        root,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@p",
            "commit",
            "-qm",
            message,
        ],
    );
}

/// Runs git in `root` with `scratch` as its index file (so the real
/// `.git/index` stays as a half-done write left it), as mirai; answers stdout.
fn git_with_index(root: &Path, scratch: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .env("GIT_INDEX_FILE", scratch)
        .env("GIT_AUTHOR_NAME", "mirai")
        .env("GIT_AUTHOR_EMAIL", "m@m")
        .env("GIT_COMMITTER_NAME", "mirai")
        .env("GIT_COMMITTER_EMAIL", "m@m")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn blob(root: &Path, content: &str) -> String {
    let mut child = Command::new("git")
        .args(["hash-object", "-w", "--stdin"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(content.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A lock file's identity as mirai records it.
fn file_id(path: &Path) -> Value {
    let meta = fs::metadata(path).unwrap();
    json!({"ino": meta.ino(), "mtime_ns": meta.mtime() * 1_000_000_000 + meta.mtime_nsec()})
}

/// An intent record as a dead mirai (pid 999999) would have left it.
fn intent(fields: Value) -> Value {
    let mut record = json!({
        "version": 1, "pid": 999999, "stage": "idle", "note": null, "before": null,
        "after": null, "index_before": null, "parent": null, "reference": null,
        "commit": null, "index_lock": [], "ref_lock": null, "recorded_ns": 0
    });
    for (key, value) in fields.as_object().unwrap() {
        record[key] = value.clone();
    }
    record
}

fn put_intent(root: &Path, name: &str, record: &Value) -> PathBuf {
    let dir = root.join(".mirai/intents");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    fs::write(&path, serde_json::to_vec(record).unwrap()).unwrap();
    path
}

fn hold_lock(root: &Path) -> PathBuf {
    let lock = root.join(".git/index.lock");
    fs::write(&lock, "").unwrap();
    lock
}

fn status(root: &Path) -> String {
    git(root, &["status", "--porcelain"])
}

fn head(root: &Path) -> String {
    git(root, &["rev-parse", "HEAD"]).trim().to_string()
}

fn assert_fsck_clean(root: &Path) {
    git(root, &["fsck", "--strict", "--no-progress"]);
}

/// mirai's temp files anywhere under the root (notes, .mirai/, .git/).
fn temp_files(root: &Path) -> Vec<String> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_file())
        .map(|entry| {
            entry
                .path()
                .strip_prefix(root)
                .unwrap()
                .display()
                .to_string()
        })
        .filter(|rel| {
            let name = rel.rsplit('/').next().unwrap();
            (name.starts_with(".mirai-") && name.ends_with(".tmp"))
                || (name.starts_with("mirai-index-") && name.ends_with(".tmp"))
                || name.starts_with("index.json.tmp-")
                || name.contains(".json.tmp-")
                || name.contains(".jsonl.tmp-")
                || name.ends_with(".part")
        })
        .collect()
}

fn intent_files(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join(".mirai/intents"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn log_of(dir: &Path) -> PathBuf {
    dir.join("mirai.log")
}

#[test]
fn a_dead_mirais_index_and_ref_locks_are_removed_at_start_up_and_writes_work() {
    let (dir, root) = seeded(&[("a.md", "alpha\n")]);
    let lock = hold_lock(&root);
    let ref_lock = root.join(".git/refs/heads/main.lock");
    fs::write(&ref_lock, "").unwrap();
    put_intent(
        &root,
        "999999-dead.json",
        &intent(json!({
            "stage": "committing", "reference": "refs/heads/main",
            "index_lock": [file_id(&lock)], "ref_lock": file_id(&ref_lock)
        })),
    );
    let before = head(&root);

    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert!(!lock.exists(), "index.lock is removed");
    assert!(!ref_lock.exists(), "the ref lock is removed");
    assert!(!intent_files(&root).contains(&"999999-dead.json".to_string()));
    let log = fs::read_to_string(log_of(dir.path())).unwrap();
    assert!(log.contains("removed .git/index.lock"), "{log}");
    assert!(log.contains("removed .git/refs/heads/main.lock"), "{log}");

    let answer = mirai.write("a.md", "alpha 2\n").unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(git(&root, &["rev-parse", "HEAD~1"]).trim(), before);
    assert_eq!(git(&root, &["show", "HEAD:a.md"]), "alpha 2\n");
    assert_eq!(status(&root), "");
    assert_fsck_clean(&root);
}

#[test]
fn an_intent_file_of_appended_records_is_read_by_its_last_line() {
    let (dir, root) = seeded(&[("a.md", "alpha\n")]);
    let lock = hold_lock(&root);
    // Records are appended one line per step; the last line is the one in force.
    let mut lines = Vec::new();
    for record in [
        intent(json!({"stage": "idle"})),
        intent(json!({"stage": "locking", "index_lock": [{"ino": 1, "mtime_ns": 2}]})),
        intent(json!({"stage": "locking", "index_lock": [file_id(&lock)]})),
    ] {
        lines.extend(serde_json::to_vec(&record).unwrap());
        lines.push(b'\n');
    }
    let dead = root.join(".mirai/intents/999999-lines.jsonl");
    fs::create_dir_all(dead.parent().unwrap()).unwrap();
    fs::write(&dead, &lines).unwrap();
    // A copy whose newest line was cut short: the line before it counts.
    let mut cut = lines.clone();
    cut.extend_from_slice(br#"{"version":1,"pid":999999,"stage":"wri"#);
    let second = root.join(".mirai/intents/999998-cut.json");
    fs::write(&second, &cut).unwrap();

    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert!(!lock.exists(), "the lock the last line names is removed");
    assert!(
        !dead.exists() && !second.exists(),
        "{:?}",
        intent_files(&root)
    );
    let answer = mirai.write("a.md", "alpha 2\n").unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(status(&root), "");
}

#[test]
fn a_stale_lock_without_an_intent_of_ours_is_left_alone() {
    let (dir, root) = seeded(&[("a.md", "alpha\n")]);
    let lock = hold_lock(&root);
    // A dead mirai's record that names another file (the inode changed since).
    fs::write(root.join(".git/other"), "").unwrap();
    put_intent(
        &root,
        "999999-dead.json",
        &intent(json!({"stage": "locking", "index_lock": [file_id(&root.join(".git/other"))]})),
    );
    let before = head(&root);

    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert!(lock.exists(), "a lock mirai cannot prove its own stays");
    let answer = mirai.write("a.md", "alpha 2\n").unwrap();
    answer.assert_error(500, "git_error");
    assert!(
        answer.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry"),
        "{answer:?}"
    );
    assert!(lock.exists());
    assert_eq!(head(&root), before);
    assert_eq!(fs::read_to_string(root.join("a.md")).unwrap(), "alpha\n");
}

#[test]
fn a_live_processs_lock_and_temp_files_are_never_removed() {
    let (dir, root) = seeded(&[("a.md", "alpha\n")]);
    let lock = hold_lock(&root);
    let temp = root.join(".mirai-4242-0.tmp");
    fs::write(&temp, "half a note").unwrap();
    // A proposal half saved when its process died.
    let proposals = root.join(".mirai/proposals");
    fs::create_dir_all(&proposals).unwrap();
    let half_proposal =
        proposals.join("0190a6f0-0000-7000-8000-000000000000.json.tmp-4242-7-ThreadId(3)");
    fs::write(&half_proposal, "{\"id\":").unwrap();
    let path = put_intent(
        &root,
        "4242-live.json",
        &intent(json!({"stage": "writing", "index_lock": [file_id(&lock)]})),
    );
    // This test process is the live mirai: it holds the record's flock.
    let held = fs::File::open(&path).unwrap();
    held.lock().unwrap();

    let mut mirai = Mirai::start(&root, &log_of(dir.path()));
    assert!(lock.exists(), "a live process's lock stays");
    assert!(temp.exists(), "no sweep while another mirai lives");
    assert!(half_proposal.exists());
    assert!(path.exists());
    let answer = mirai.write("a.md", "alpha 2\n").unwrap();
    answer.assert_error(500, "git_error");
    assert!(lock.exists());
    mirai.kill();

    // Once it is dead, the next start frees the lock and sweeps.
    drop(held);
    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert!(!lock.exists());
    assert!(!temp.exists());
    assert!(!half_proposal.exists(), "a half-saved proposal is swept");
    assert_eq!(mirai.write("a.md", "alpha 2\n").unwrap().status, 200);
    assert_eq!(status(&root), "");
}

#[test]
fn a_half_done_write_is_rolled_back_but_a_persons_edit_is_never_taken_for_it() {
    let (dir, root) = seeded(&[("a.md", "old a\n"), ("b.md", "old b\n")]);
    let parent = head(&root);
    let lock = hold_lock(&root);
    // a.md: mirai's new bytes renamed into place, no commit.
    fs::write(root.join("a.md"), "new a\n").unwrap();
    put_intent(
        &root,
        "999998-a.json",
        &intent(json!({
            "stage": "writing", "note": "a.md", "before": blob(&root, "old a\n"),
            "after": blob(&root, "new a\n"), "index_before": blob(&root, "old a\n"),
            "parent": parent, "reference": "refs/heads/main", "index_lock": [file_id(&lock)]
        })),
    );
    // b.md: the dead mirai meant to write "new b", but a person's edit is there.
    fs::write(root.join("b.md"), "the person's b\n").unwrap();
    put_intent(
        &root,
        "999999-b.json",
        &intent(json!({
            "stage": "writing", "note": "b.md", "before": blob(&root, "old b\n"),
            "after": blob(&root, "new b\n"), "index_before": blob(&root, "old b\n"),
            "parent": parent, "reference": "refs/heads/main"
        })),
    );

    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert_eq!(fs::read_to_string(root.join("a.md")).unwrap(), "old a\n");
    assert_eq!(
        fs::read_to_string(root.join("b.md")).unwrap(),
        "the person's b\n"
    );
    assert!(!lock.exists());
    assert_eq!(head(&root), parent);
    assert_eq!(status(&root), " M b.md\n");
    let log = fs::read_to_string(log_of(dir.path())).unwrap();
    assert!(log.contains("rolled back a.md"), "{log}");
    assert!(
        log.contains("b.md holds bytes mirai did not write"),
        "{log}"
    );
    assert_eq!(mirai.write("a.md", "a again\n").unwrap().status, 200);
    assert_fsck_clean(&root);
}

#[test]
fn a_half_done_write_whose_commit_landed_is_rolled_forward() {
    let (dir, root) = seeded(&[("a.md", "old a\n"), ("b.md", "b\n")]);
    let parent = head(&root);
    let old = blob(&root, "old a\n");
    let new = blob(&root, "new a\n");
    // The commit is on the branch and the note on disk; git's index still has the old blob.
    fs::write(root.join("a.md"), "new a\n").unwrap();
    let scratch = dir.path().join("scratch-index");
    let with_env = |args: &[&str]| git_with_index(&root, &scratch, args);
    with_env(&["read-tree", "HEAD"]);
    with_env(&["update-index", "--cacheinfo", &format!("100644,{new},a.md")]);
    let tree = with_env(&["write-tree"]);
    let commit = with_env(&[
        "commit-tree",
        &tree,
        "-p",
        &parent,
        "-m",
        "mcp.patch_apply: a.md",
    ]);
    git(&root, &["update-ref", "refs/heads/main", &commit]);
    assert_eq!(status(&root), "MM a.md\n", "the index is behind HEAD");
    put_intent(
        &root,
        "999999-a.json",
        &intent(json!({
            "stage": "committing", "note": "a.md", "before": old, "after": new,
            "index_before": old, "parent": parent, "reference": "refs/heads/main",
            "commit": commit
        })),
    );

    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert_eq!(head(&root), commit);
    assert_eq!(status(&root), "");
    assert!(git(&root, &["ls-files", "-s", "a.md"]).contains(&new));
    assert_eq!(fs::read_to_string(root.join("a.md")).unwrap(), "new a\n");
    let log = fs::read_to_string(log_of(dir.path())).unwrap();
    assert!(log.contains("rolled forward a.md"), "{log}");
    assert_eq!(mirai.write("b.md", "b 2\n").unwrap().status, 200);
    assert_eq!(status(&root), "");
    assert_fsck_clean(&root);
}

/// A version 2 record: every note of one commit.
fn notes_intent(fields: Value, notes: Value) -> Value {
    let mut record = intent(fields);
    let record_map = record.as_object_mut().unwrap();
    for old in ["note", "before", "after", "index_before"] {
        record_map.remove(old);
    }
    record["version"] = json!(2);
    record["notes"] = notes;
    record
}

#[test]
fn a_half_done_multi_note_write_is_rolled_back_note_by_note() {
    let (dir, root) = seeded(&[
        ("a.md", "old a\n"),
        ("b.md", "old b\n"),
        ("c.md", "old c\n"),
    ]);
    let parent = head(&root);
    let lock = hold_lock(&root);
    // Renamed into place before the kill: a.md changed, new/n.md created, b.md
    // deleted; c.md was next and is still as it was.
    fs::write(root.join("a.md"), "new a\n").unwrap();
    fs::create_dir(root.join("new")).unwrap();
    fs::write(root.join("new/n.md"), "new n\n").unwrap();
    fs::remove_file(root.join("b.md")).unwrap();
    let note = |path: &str, before: Option<&str>, after: Option<&str>| {
        let before = before.map(|text| blob(&root, text));
        json!({"note": path, "before": before, "index_before": before,
               "after": after.map(|text| blob(&root, text))})
    };
    put_intent(
        &root,
        "999999-multi.json",
        &notes_intent(
            json!({"stage": "writing", "parent": parent, "reference": "refs/heads/main",
                   "index_lock": [file_id(&lock)]}),
            json!([
                note("a.md", Some("old a\n"), Some("new a\n")),
                note("new/n.md", None, Some("new n\n")),
                note("b.md", Some("old b\n"), None),
                note("c.md", Some("old c\n"), Some("new c\n")),
            ]),
        ),
    );

    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert_eq!(fs::read_to_string(root.join("a.md")).unwrap(), "old a\n");
    assert_eq!(fs::read_to_string(root.join("b.md")).unwrap(), "old b\n");
    assert_eq!(fs::read_to_string(root.join("c.md")).unwrap(), "old c\n");
    assert!(!root.join("new/n.md").exists());
    assert!(!lock.exists());
    assert_eq!(head(&root), parent);
    assert_eq!(status(&root), "");
    let log = fs::read_to_string(log_of(dir.path())).unwrap();
    for rolled in ["a.md", "new/n.md", "b.md"] {
        assert!(log.contains(&format!("rolled back {rolled} ")), "{log}");
    }
    assert!(!log.contains("rolled back c.md"), "{log}");
    assert!(log.contains("1 rolled back"), "one write: {log}");
    assert_eq!(mirai.write("a.md", "a again\n").unwrap().status, 200);
    assert_fsck_clean(&root);
}

#[test]
fn a_multi_note_commit_that_landed_has_every_index_entry_rolled_forward() {
    let (dir, root) = seeded(&[("a.md", "old a\n"), ("b.md", "old b\n"), ("c.md", "c\n")]);
    let parent = head(&root);
    let index_before = fs::read(root.join(".git/index")).unwrap();
    // The commit of a.md, b.md (deleted) and new.md is on the branch and the
    // notes on disk; git's index still has the old entries.
    let scratch = dir.path().join("scratch-index");
    let with_env = |args: &[&str]| git_with_index(&root, &scratch, args);
    let (new_a, new_n) = (blob(&root, "new a\n"), blob(&root, "new n\n"));
    with_env(&["read-tree", "HEAD"]);
    with_env(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{new_a},a.md"),
    ]);
    with_env(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("100644,{new_n},new.md"),
    ]);
    with_env(&["update-index", "--force-remove", "b.md"]);
    let tree = with_env(&["write-tree"]);
    let commit = with_env(&[
        "commit-tree",
        &tree,
        "-p",
        &parent,
        "-m",
        "mcp.changes_apply: 3 notes",
    ]);
    git(&root, &["update-ref", "refs/heads/main", &commit]);
    fs::write(root.join("a.md"), "new a\n").unwrap();
    fs::write(root.join("new.md"), "new n\n").unwrap();
    fs::remove_file(root.join("b.md")).unwrap();
    assert_eq!(fs::read(root.join(".git/index")).unwrap(), index_before);
    let note = |path: &str, before: Option<&str>, after: Option<&str>| {
        let before = before.map(|text| blob(&root, text));
        json!({"note": path, "before": before, "index_before": before,
               "after": after.map(|text| blob(&root, text))})
    };
    put_intent(
        &root,
        "999999-multi.json",
        &notes_intent(
            json!({"stage": "committing", "parent": parent, "reference": "refs/heads/main",
                   "commit": commit}),
            json!([
                note("a.md", Some("old a\n"), Some("new a\n")),
                note("b.md", Some("old b\n"), None),
                note("new.md", None, Some("new n\n")),
            ]),
        ),
    );

    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert_eq!(head(&root), commit);
    assert_eq!(status(&root), "");
    assert_eq!(
        git(&root, &["ls-files", "-s"]),
        format!(
            "100644 {new_a} 0\ta.md\n100644 {} 0\tc.md\n100644 {new_n} 0\tnew.md\n",
            blob(&root, "c\n")
        )
    );
    let log = fs::read_to_string(log_of(dir.path())).unwrap();
    for rolled in ["a.md", "b.md", "new.md"] {
        assert!(log.contains(&format!("rolled forward {rolled}:")), "{log}");
    }
    assert!(
        log.contains("1 write(s) rolled forward"),
        "one write: {log}"
    );
    assert_eq!(mirai.write("c.md", "c 2\n").unwrap().status, 200);
    assert_eq!(status(&root), "");
    assert_fsck_clean(&root);
}

#[test]
fn stray_temp_files_are_swept_at_start_up() {
    let (dir, root) = seeded(&[("a.md", "alpha\n"), ("sub/b.md", "beta\n")]);
    let strays = [
        ".mirai-123-4.tmp",
        "sub/.mirai-123-5.tmp",
        ".mirai/index.json.tmp-123-99-ThreadId(7)",
        ".git/mirai-index-123-6.tmp",
    ];
    fs::create_dir_all(root.join(".mirai")).unwrap();
    for stray in strays {
        fs::write(root.join(stray), "half").unwrap();
    }
    // Names that only look similar are not mirai's.
    fs::write(root.join(".mirai-notes.tmp"), "keep").unwrap();
    fs::write(root.join("sub/mirai-1-2.tmp"), "keep").unwrap();

    // A live process's note temp file is never swept (this test process's pid).
    let live_temp = format!(".mirai-{}-1.tmp", std::process::id());
    fs::write(root.join(&live_temp), "in flight").unwrap();

    let _mirai = Mirai::start(&root, &log_of(dir.path()));
    // Notes' temp files are swept beside serving, not before it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while strays.iter().any(|s| root.join(s).exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for stray in strays {
        assert!(!root.join(stray).exists(), "{stray} is swept");
    }
    assert!(
        root.join(&live_temp).exists(),
        "a live process's temp file stays"
    );
    assert!(root.join(".mirai-notes.tmp").exists());
    assert!(root.join("sub/mirai-1-2.tmp").exists());
}

#[test]
fn malformed_and_git_tracked_intent_files_are_ignored() {
    let (dir, root) = seeded(&[("a.md", "alpha\n")]);
    let lock = hold_lock(&root);
    let malformed = put_intent(&root, "1-bad.json", &json!({"stage": "locking"}));
    let garbage = root.join(".mirai/intents/2-garbage.json");
    fs::write(&garbage, "not json").unwrap();
    let record = intent(json!({"stage": "locking", "index_lock": [file_id(&lock)]}));
    let tracked = put_intent(&root, "3-tracked.json", &record);
    fs::remove_file(&lock).unwrap(); // git add needs the lock; it comes back below
    git(&root, &["add", "-f", ".mirai/intents/3-tracked.json"]);
    person_commit(&root, "a record someone pushed");
    let lock = hold_lock(&root);
    let record = intent(json!({"stage": "locking", "index_lock": [file_id(&lock)]}));
    fs::write(&tracked, serde_json::to_vec(&record).unwrap()).unwrap();

    let mirai = Mirai::start(&root, &log_of(dir.path()));
    assert!(lock.exists(), "a tracked record frees nothing");
    assert!(malformed.exists() && garbage.exists() && tracked.exists());
    mirai
        .write("a.md", "x\n")
        .unwrap()
        .assert_error(500, "git_error");
    let log = fs::read_to_string(log_of(dir.path())).unwrap();
    assert!(
        log.contains("3-tracked.json: it is tracked by git"),
        "{log}"
    );
    assert!(
        log.contains("1-bad.json: it is not a mirai intent record"),
        "{log}"
    );
}

/// What the writer thread saw: answered writes and the notes of the one in flight.
#[derive(Default)]
struct Seen {
    last: HashMap<String, String>,
    acked_commits: Vec<String>,
    in_flight: Vec<(String, String)>,
}

#[derive(Default, Debug)]
struct Counts {
    rolled_forward: usize,
    rolled_back: usize,
    locks_removed: usize,
    temps_swept: usize,
    acked: usize,
}

const NOTES: [&str; 3] = ["n0.md", "sub/n1.md", "n2.md"];

#[test]
fn sigkill_during_writes_leaves_nothing_half_done() {
    sigkill_harness(false);
}

#[test]
fn sigkill_during_multi_note_writes_leaves_each_commit_whole() {
    sigkill_harness(true);
}

/// The diff that replaces all of `old` with `new` (both end with a newline).
fn replacing(path: &str, old: &str, new: &str) -> String {
    let lines = |text: &str, mark: char| -> (usize, String) {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        (
            lines.len(),
            lines.iter().map(|l| format!("{mark}{l}")).collect(),
        )
    };
    let ((old_count, removed), (new_count, added)) = (lines(old, '-'), lines(new, '+'));
    format!("--- a/{path}\n+++ b/{path}\n@@ -1,{old_count} +1,{new_count} @@\n{removed}{added}")
}

/// One write of the loop: a note by `notes.write` or, with `multi`, all
/// three notes by one `changes.apply`. `None` once the server is gone.
fn write_once(
    client: &Client,
    url: &str,
    seen: &Arc<Mutex<Seen>>,
    multi: bool,
    round: usize,
    i: usize,
) -> Option<Answer> {
    let content = |k: usize| {
        format!(
            "round {round} write {i} tok{round}x{i}n{k}\n{}\n",
            "x".repeat(i % 4096)
        )
    };
    let (writes, request) = if multi {
        let last = seen.lock().unwrap().last.clone();
        let writes: Vec<(String, String)> = NOTES
            .iter()
            .enumerate()
            .map(|(k, path)| (path.to_string(), content(k)))
            .collect();
        let patches: Vec<String> = writes
            .iter()
            .map(|(path, new)| replacing(path, &last[path], new))
            .collect();
        let request = client
            .post(format!("{url}/mcp/changes/apply"))
            .json(&json!({ "patches": patches }));
        (writes, request)
    } else {
        let path = NOTES[i % NOTES.len()];
        let content = content(0);
        let request = client
            .post(format!("{url}/mcp/notes/write"))
            .json(&json!({"path": path, "content": content}));
        (vec![(path.to_string(), content)], request)
    };
    seen.lock().unwrap().in_flight = writes.clone();
    let response = request.send().ok()?;
    let status = response.status().as_u16();
    let body = response.json::<Value>().ok()?;
    assert_eq!(status, 200, "{body}");
    let answer = Answer { status, body };
    record_ack(seen, &writes, &answer);
    Some(answer)
}

fn sigkill_harness(multi: bool) {
    let kills: usize = std::env::var("MIRAI_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let (dir, root) = seeded(&[("n0.md", "0\n"), ("sub/n1.md", "1\n"), ("n2.md", "2\n")]);
    let mut seen = Seen::default();
    for (path, content) in [("n0.md", "0\n"), ("sub/n1.md", "1\n"), ("n2.md", "2\n")] {
        seen.last.insert(path.to_string(), content.to_string());
    }
    let seen = Arc::new(Mutex::new(seen));
    let mut counts = Counts::default();
    let started = Instant::now();
    for round in 0..=kills {
        let log = dir.path().join(format!("round-{round}.log"));
        let mirai = Arc::new(Mutex::new(Mirai::start(&root, &log)));
        let ref_lock = root.join(".git/refs/heads/main.lock");
        assert!(
            !ref_lock.exists(),
            "round {round}: the ref lock is left ({:?}); the log says: {}",
            fs::metadata(&ref_lock).map(|m| (m.len(), m.mtime(), m.mtime_nsec())),
            fs::read_to_string(&log).unwrap()
        );
        check_after_restart(&root, &mut seen.lock().unwrap(), round);
        // Every acknowledged write still on disk is found by a query at once.
        for (path, content) in seen.lock().unwrap().last.clone() {
            let on_disk = fs::read_to_string(root.join(&path)).unwrap_or_default();
            let token = content.split_whitespace().find(|w| w.starts_with("tok"));
            if let (true, Some(token)) = (on_disk == content, token) {
                let found = mirai.lock().unwrap().found(token);
                assert!(
                    found.contains(&path),
                    "round {round}: the acknowledged write to {path} ({token}) is not found: {found:?}"
                );
            }
        }
        tally(&fs::read_to_string(&log).unwrap(), &mut counts);
        // The next write works at once.
        let (client, url) = {
            let mirai = mirai.lock().unwrap();
            (mirai.client.clone(), mirai.url.clone())
        };
        let answer = write_once(&client, &url, &seen, multi, round, 1_000_000);
        assert!(
            answer.is_some(),
            "round {round}: the first write is answered"
        );
        if round == kills {
            break;
        }
        let writer = {
            let seen = seen.clone();
            std::thread::spawn(move || {
                for i in 0.. {
                    if write_once(&client, &url, &seen, multi, round, i).is_none() {
                        return;
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_millis(fastrand::u64(5..250)));
        let mut guard = mirai.lock().unwrap();
        guard.kill();
        drop(guard);
        writer
            .join()
            .expect("the writer saw only 200s until the kill");
    }
    counts.acked = seen.lock().unwrap().acked_commits.len();
    eprintln!(
        "crash harness ({}): {kills} kills in {:.1} s, {} writes acknowledged; restarts that \
         rolled forward: {}, rolled back: {}, removed locks: {}, swept temp files: {}",
        if multi {
            "three notes per commit"
        } else {
            "one note per commit"
        },
        started.elapsed().as_secs_f64(),
        counts.acked,
        counts.rolled_forward,
        counts.rolled_back,
        counts.locks_removed,
        counts.temps_swept
    );
}

fn record_ack(seen: &Arc<Mutex<Seen>>, writes: &[(String, String)], answer: &Answer) {
    let commit = answer.body["commit"]
        .as_str()
        .expect("a commit")
        .to_string();
    let mut seen = seen.lock().unwrap();
    for (path, content) in writes {
        seen.last.insert(path.clone(), content.clone());
    }
    seen.acked_commits.push(commit);
    seen.in_flight.clear();
}

fn tally(log: &str, counts: &mut Counts) {
    counts.rolled_forward += usize::from(log.contains("recovery: rolled forward"));
    counts.rolled_back += usize::from(log.contains("recovery: rolled back"));
    counts.locks_removed += usize::from(log.contains("recovery: removed .git/"));
    counts.temps_swept += usize::from(log.contains("temporary file(s) left"));
}

/// Every invariant a restart must give.
/// The write in flight at the kill is settled: whichever version survived is
/// the one later rounds expect.
fn check_after_restart(root: &Path, seen: &mut Seen, round: usize) {
    assert_eq!(status(root), "", "round {round}: working tree equals HEAD");
    assert!(!root.join(".git/index.lock").exists(), "round {round}");
    assert!(
        !root.join(".git/refs/heads/main.lock").exists(),
        "round {round}"
    );
    assert_eq!(temp_files(root), Vec::<String>::new(), "round {round}");
    assert_fsck_clean(root);
    if let Some(last) = seen.acked_commits.last() {
        git(root, &["merge-base", "--is-ancestor", last, "HEAD"]);
    }
    // Of the notes the write in flight would change, all took it or none did.
    let mut took_it = Vec::new();
    for path in NOTES {
        let on_disk = fs::read_to_string(root.join(path)).unwrap();
        let acked = &seen.last[path];
        let in_flight = seen
            .in_flight
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, c)| c);
        assert!(
            &on_disk == acked || Some(&on_disk) == in_flight,
            "round {round}: {path} holds {on_disk:?}, neither the acknowledged {acked:?} nor the write in flight"
        );
        if in_flight.is_some() {
            took_it.push(Some(&on_disk) == in_flight);
        }
        seen.last.insert(path.to_string(), on_disk);
    }
    assert!(
        took_it.iter().all(|t| *t) || took_it.iter().all(|t| !*t),
        "round {round}: the write in flight reached some of its notes only: {took_it:?}"
    );
    seen.in_flight.clear();
}

#[test]
fn sigkill_during_pulls_and_replays_leaves_the_working_tree_equal_to_head() {
    let kills: usize = std::env::var("MIRAI_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    let person = dir.path().join("person");
    let root = dir.path().join("notes");
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
    let many = |round: usize| {
        if round > 0 {
            // mirai pushes what it replayed: the person starts from the remote's branch.
            git(&person, &["fetch", "-q", "origin"]);
            git(&person, &["reset", "-q", "--hard", "origin/main"]);
        }
        for k in 0..300 {
            let file = person.join(format!("bulk/{}/n{k}.md", k % 10));
            fs::create_dir_all(file.parent().unwrap()).unwrap();
            fs::write(
                file,
                format!("round {round} note {k}\n{}\n", "y".repeat(900)),
            )
            .unwrap();
        }
        // Some notes come and go, so pulls delete notes too.
        let gone = person.join(format!("gone/r{}.md", round.wrapping_sub(1)));
        let _ = fs::remove_file(gone);
        fs::create_dir_all(person.join("gone")).unwrap();
        fs::write(person.join(format!("gone/r{round}.md")), "for a while\n").unwrap();
        git(&person, &["add", "-A"]);
        person_commit(&person, &format!("person round {round}"));
        git(&person, &["push", "-q", "origin", "main"]);
    };
    many(0);
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            root.to_str().unwrap(),
        ],
    );
    fs::write(root.join(".git/info/exclude"), ".mirai/\n").unwrap();
    let remote_env = remote.to_str().unwrap().to_string();
    let env = [
        ("MIRAI_GIT_REMOTE", remote_env.as_str()),
        ("MIRAI_SYNC_INTERVAL", "0"),
    ];
    // How long one sync of a round's pull takes here, so the kills land inside it.
    many(kills + 1);
    let took = {
        let mirai = Mirai::start_env(&root, &dir.path().join("calibrate.log"), &env);
        let started = Instant::now();
        let answer = mirai
            .client
            .post(format!("{}/mcp/repo/sync", mirai.url))
            .json(&json!({}))
            .send()
            .unwrap();
        assert_eq!(answer.status().as_u16(), 200);
        started.elapsed().as_millis() as u64
    };
    let (mut replays, mut rolled) = (0, 0);
    let mut local_notes = Vec::new();
    for round in 1..=kills {
        many(round);
        // Odd rounds: a local commit the remote lacks, so the pull is a replay.
        if round % 2 == 1 {
            let rel = format!("local/l{round}.md");
            fs::create_dir_all(root.join("local")).unwrap();
            fs::write(root.join(&rel), format!("local {round}\n")).unwrap();
            git(&root, &["add", &rel]);
            person_commit(&root, &format!("local {round}"));
            local_notes.push((rel, format!("local {round}\n")));
            replays += 1;
        }
        let log = dir.path().join(format!("pull-{round}.log"));
        let mirai = Mirai::start_env(&root, &log, &env);
        let (client, url) = (mirai.client.clone(), mirai.url.clone());
        let syncing = std::thread::spawn(move || {
            let _ = client
                .post(format!("{url}/mcp/repo/sync"))
                .json(&json!({}))
                .send();
        });
        std::thread::sleep(Duration::from_millis(fastrand::u64(0..=took + took / 4)));
        let mut mirai = mirai;
        mirai.kill();
        let _ = syncing.join();
        clear_locks_of_a_killed_push(&remote);
        // Restart: recovery puts the working tree back to HEAD (or the index forward).
        let log = dir.path().join(format!("pull-{round}-restart.log"));
        let mirai = Mirai::start(&root, &log);
        let text = fs::read_to_string(&log).unwrap();
        rolled += usize::from(text.contains("recovery: rolled"));
        assert_eq!(
            status(&root),
            "",
            "round {round}: the working tree equals HEAD after restart; log: {text}"
        );
        assert!(!root.join(".git/index.lock").exists(), "round {round}");
        assert_fsck_clean(&root);
        drop(mirai);
    }
    // Once a sync finishes, every local note is on the branch (replayed) and
    // the remote's last round is there too.
    let log = dir.path().join("final.log");
    let mirai = Mirai::start_env(&root, &log, &env);
    let answer = mirai
        .client
        .post(format!("{}/mcp/repo/sync", mirai.url))
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200, "{}", answer.text().unwrap());
    assert_eq!(status(&root), "");
    for (rel, content) in &local_notes {
        assert_eq!(
            &fs::read_to_string(root.join(rel)).unwrap(),
            content,
            "{rel}"
        );
    }
    assert!(fs::read_to_string(root.join("bulk/0/n0.md"))
        .unwrap()
        .starts_with(&format!("round {kills} note 0")));
    eprintln!(
        "pull crash harness: {kills} kills during pulls ({replays} of them replays; a sync \
         takes {took} ms here); {rolled} restarts rolled a half-done pull back or forward"
    );
}

/// The remote here is a bare repository on disk, so mirai's push writes into
/// it directly (libgit2's local transport) and a kill mid-push leaves that
/// push's ref locks behind. A real remote is written by its own receive-pack,
/// which a client's death does not stop; the person's next push must find the
/// remote as a server would keep it. Only lock files are removed, never a ref.
fn clear_locks_of_a_killed_push(remote: &Path) {
    for entry in walkdir::WalkDir::new(remote).into_iter().flatten() {
        if entry.file_type().is_file() && entry.path().extension() == Some("lock".as_ref()) {
            fs::remove_file(entry.path()).unwrap();
        }
    }
}

/// Where the moving note is in `root`'s working tree, checking that it is in
/// exactly one place and that every linker links to that place.
fn moved_note_place(root: &Path, round: usize) -> &'static str {
    let places = ["ann.md", "team/ann.md"];
    let here: Vec<&str> = places
        .iter()
        .copied()
        .filter(|p| root.join(p).exists())
        .collect();
    let [place] = here.as_slice() else {
        panic!("round {round}: the note is at {here:?}");
    };
    let want = if *place == "ann.md" {
        "[[ann]]"
    } else {
        "[[team/ann]]"
    };
    for i in 0..MOVE_LINKERS {
        let text = fs::read_to_string(root.join(format!("l/{i:02}.md"))).unwrap();
        assert_eq!(
            text,
            format!("# L{i}\n\nSee {want} and `[[ann]]`.\n"),
            "round {round}: l/{i:02}.md disagrees with where the note is ({place})"
        );
    }
    place
}

const MOVE_LINKERS: usize = 30;

#[test]
fn sigkill_during_moves_leaves_each_move_whole() {
    let kills: usize = std::env::var("MIRAI_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut notes: Vec<(String, String)> = vec![
        (
            "ann.md".into(),
            "# Ann\n\nAnn runs the reading group.\n".into(),
        ),
        // A second "ann" as deep as team/ann.md: a bare [[ann]] to it would be ambiguous.
        ("b/ann.md".into(), "# Other Ann\n".into()),
    ];
    notes.extend((0..MOVE_LINKERS).map(|i| {
        (
            format!("l/{i:02}.md"),
            format!("# L{i}\n\nSee [[ann]] and `[[ann]]`.\n"),
        )
    }));
    let borrowed: Vec<(&str, &str)> = notes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let (dir, root) = seeded(&borrowed);
    let mut moves = 0usize;
    for round in 0..=kills {
        let log = dir.path().join(format!("move-{round}.log"));
        let mirai = Mirai::start(&root, &log);
        // After the restart: the tree is HEAD's, and the note and its links agree.
        assert_eq!(
            status(&root),
            "",
            "round {round}: {}",
            fs::read_to_string(&log).unwrap()
        );
        assert_fsck_clean(&root);
        let place = moved_note_place(&root, round);
        let head_has = git(&root, &["ls-tree", "-r", "--name-only", "HEAD"]);
        assert!(head_has.lines().any(|l| l == place), "round {round}");
        if round == kills {
            break;
        }
        let (client, url) = (mirai.client.clone(), mirai.url.clone());
        let mover = std::thread::spawn(move || {
            let mut done = 0usize;
            let mut from = place;
            loop {
                let to = if from == "ann.md" {
                    "team/ann.md"
                } else {
                    "ann.md"
                };
                let Ok(response) = client
                    .post(format!("{url}/mcp/notes/move"))
                    .json(&json!({"from": from, "to": to}))
                    .send()
                else {
                    return done;
                };
                let status = response.status().as_u16();
                let Ok(body) = response.json::<Value>() else {
                    return done;
                };
                assert_eq!(status, 200, "{body}");
                assert_eq!(body["rewritten"].as_array().unwrap().len(), MOVE_LINKERS);
                done += 1;
                from = to;
            }
        });
        std::thread::sleep(Duration::from_millis(fastrand::u64(20..400)));
        let mut mirai = mirai;
        mirai.kill();
        moves += mover
            .join()
            .expect("the mover saw only 200s until the kill");
    }
    eprintln!("move crash harness: {kills} kills, {moves} moves acknowledged");
    assert!(moves > 0, "no move was acknowledged between kills");
}

/// What a binary write loop has had acknowledged for its one file, and what
/// it has in flight (`None` inside: the file absent, by a delete).
#[derive(Default)]
struct FileSeen {
    acked: Option<Vec<u8>>,
    in_flight: Option<Option<Vec<u8>>>,
    writes: usize,
}

/// One `files.write` (a raw body of 256 KiB) or, every fifth time while the
/// file exists, `files.delete`. `false` once the server is gone.
fn binary_write_once(client: &Client, url: &str, seen: &Arc<Mutex<FileSeen>>, seed: u64) -> bool {
    let delete = seed % 5 == 4 && seen.lock().unwrap().acked.is_some();
    let next = if delete {
        None
    } else {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut bytes = vec![0u8; 256 * 1024];
        rng.fill(&mut bytes);
        Some(bytes)
    };
    seen.lock().unwrap().in_flight = Some(next.clone());
    let request = match &next {
        Some(bytes) => client
            .post(format!("{url}/mcp/files/write?path=img/pic.png"))
            .header("content-type", "image/png")
            .body(bytes.clone()),
        None => client
            .post(format!("{url}/mcp/files/delete"))
            .json(&json!({"path": "img/pic.png"})),
    };
    let Ok(response) = request.send() else {
        return false;
    };
    let status = response.status().as_u16();
    let Ok(body) = response.json::<Value>() else {
        return false;
    };
    assert_eq!(status, 200, "{body}");
    assert!(body["commit"].is_string(), "{body}");
    let mut seen = seen.lock().unwrap();
    seen.acked = next;
    seen.in_flight = None;
    seen.writes += 1;
    true
}

/// Starts a raw `files.write` of 32 MiB to `img/big.png` and sends its
/// first 2 MiB; answers once its upload file is on disk (the connection,
/// to drop after the kill).
fn large_upload_under_way(url: &str, root: &Path) -> std::net::TcpStream {
    use std::io::Write;
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /mcp/files/write?path=img/big.png HTTP/1.1\r\nHost: {address}\r\n\
         Content-Type: image/png\r\nContent-Length: {}\r\n\r\n",
        32 * 1024 * 1024
    )
    .unwrap();
    for _ in 0..32 {
        stream.write_all(&[9u8; 64 * 1024]).unwrap();
    }
    let parts = || {
        fs::read_dir(root.join(".mirai/uploads"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
                    .count()
            })
            .unwrap_or(0)
    };
    let started = Instant::now();
    while parts() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the upload never reached the disk"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    stream
}

#[test]
fn sigkill_during_binary_writes_leaves_each_file_whole_or_absent() {
    let kills: usize = std::env::var("MIRAI_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let (dir, root) = seeded(&[("a.md", "![[pic.png]]\n")]);
    let seen = Arc::new(Mutex::new(FileSeen::default()));
    for round in 0..=kills {
        let log = dir.path().join(format!("binary-{round}.log"));
        let mirai = Mirai::start(&root, &log);
        {
            let mut seen = seen.lock().unwrap();
            assert_eq!(
                status(&root),
                "",
                "round {round}: the tree equals HEAD; {}",
                fs::read_to_string(&log).unwrap()
            );
            assert!(!root.join(".git/index.lock").exists(), "round {round}");
            assert_eq!(temp_files(&root), Vec::<String>::new(), "round {round}");
            assert_fsck_clean(&root);
            assert!(
                !root.join("img/big.png").exists(),
                "round {round}: the cut upload was never written"
            );
            let on_disk = fs::read(root.join("img/pic.png")).ok();
            let whole = on_disk == seen.acked || Some(&on_disk) == seen.in_flight.as_ref();
            assert!(
                whole,
                "round {round}: img/pic.png holds {:?} bytes, neither the acknowledged version \
                 nor the write in flight",
                on_disk.as_ref().map(Vec::len)
            );
            seen.acked = on_disk;
            seen.in_flight = None;
        }
        if round == kills {
            break;
        }
        let (client, url) = (mirai.client.clone(), mirai.url.clone());
        let writer = {
            let seen = seen.clone();
            std::thread::spawn(move || {
                for i in 0u64.. {
                    if !binary_write_once(&client, &url, &seen, round as u64 * 1_000_000 + i) {
                        return;
                    }
                }
            })
        };
        // Beside them, a large upload sent slowly: killed mid-body, its
        // `.mirai/uploads/*.part` is on disk, and the restart sweeps it.
        let uploader = large_upload_under_way(&mirai.url, &root);
        std::thread::sleep(Duration::from_millis(fastrand::u64(20..300)));
        let mut mirai = mirai;
        mirai.kill();
        writer
            .join()
            .expect("the writer saw only 200s until the kill");
        drop(uploader);
    }
    let writes = seen.lock().unwrap().writes;
    eprintln!("binary crash harness: {kills} kills, {writes} writes acknowledged");
    assert!(writes > 0, "no write was acknowledged between kills");
}
