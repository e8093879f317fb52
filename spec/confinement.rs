//! The notes root is a wall, not a check (that invariant of ARCHITECTURE.md,
//! with "Notes are data, never code" and "mirai's own state is read as
//! hostile"): file access that cannot leave the root even while folders are
//! swapped for symlinks, only regular files as notes, listing that visits each
//! real folder once, note names that cannot forge commit messages, and nothing
//! under `.mirai/` that a repository carries is trusted.

use crate::common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{git, mirai_cli, TestServer};
use serde_json::json;

/// Swaps two names atomically (`renameat2(RENAME_EXCHANGE)`), as an attacker
/// or a sync tool renaming inside the root would.
fn exchange(a: &Path, b: &Path) {
    let a = CString::new(a.as_os_str().as_bytes()).unwrap();
    let b = CString::new(b.as_os_str().as_bytes()).unwrap();
    // SAFETY: two valid NUL-terminated paths; the call only renames.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_folder_swapped_for_an_outside_symlink_never_lets_a_write_or_read_out() {
    let server = TestServer::start();
    server.write("folder/x.md", "inside\n");
    server.commit_all();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.md"), "OUTSIDE\n").unwrap();
    symlink(outside.path(), server.root.join("swap")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, folder, swap) = (
            stop.clone(),
            server.root.join("folder"),
            server.root.join("swap"),
        );
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                exchange(&folder, &swap);
                swaps += 1;
            }
            // Leave the real folder where it started.
            if swaps % 2 == 1 {
                exchange(&folder, &swap);
            }
            swaps
        })
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    let (mut written, mut reads, mut i) = (0, 0, 0);
    while Instant::now() < deadline {
        let answer = server.post_json(
            "/mcp/notes/write",
            &json!({"path": format!("folder/n{i}.md"), "content": format!("note {i}\n")}),
        );
        match answer.status {
            200 => written += 1,
            // The folder was a symlink when the write looked, or kept changing.
            400 => answer.assert_error(400, "invalid_path"),
            _ => answer.assert_error(409, "conflict"),
        }
        let read = server.read("folder/x.md");
        assert!(
            !read.body.to_string().contains("OUTSIDE"),
            "a read returned the outside file: {read:?}"
        );
        reads += 1;
        i += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 100, "the swap ran ({swaps} swaps)");
    assert!(written > 0, "some writes landed while the folder was real");
    assert!(reads > 0);
    // Nothing was created or changed outside the root.
    assert_eq!(files_in(outside.path()), ["x.md"]);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("x.md")).unwrap(),
        "OUTSIDE\n"
    );
    // Every committed note's bytes are in the root, where the commit says.
    let committed = git(&server.root, &["ls-tree", "-r", "--name-only", "HEAD"]);
    for path in committed.lines().filter(|p| p.starts_with("folder/n")) {
        let on_disk = std::fs::read(server.root.join(path)).unwrap();
        let in_commit = git(&server.root, &["show", &format!("HEAD:{path}")]);
        assert_eq!(on_disk, in_commit.as_bytes(), "{path}");
    }
    git(&server.root, &["fsck", "--no-progress"]);
}

#[test]
fn a_fifo_named_like_a_note_is_never_opened_and_never_blocks_writes() {
    let server = TestServer::start();
    let fifo = CString::new(server.root.join("pipe.md").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    #[allow(unsafe_code)]
    let made = unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) };
    assert_eq!(made, 0);
    server.read("pipe.md").assert_error(400, "invalid_path");
    let listed = server.get("/mcp/notes");
    assert_eq!(listed.body["notes"], json!(["welcome.md"]));
    server
        .post_json(
            "/mcp/notes/write",
            &json!({"path": "pipe.md", "content": "x\n"}),
        )
        .assert_error(400, "invalid_path");
    server
        .post_json(
            "/mcp/patch/apply",
            &json!({"patch": "--- /dev/null\n+++ b/pipe.md\n@@ -0,0 +1 @@\n+x\n"}),
        )
        .assert_error(400, "invalid_path");
    // The writer lock is free: another write goes through at once.
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "after.md", "content": "after\n"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let rebuilt = server.post_json("/mcp/index/rebuild", &json!({}));
    assert_eq!(rebuilt.body["notes_indexed"], 2, "{rebuilt:?}");
}

#[test]
fn writes_through_symlinks_are_refused_and_reads_through_them_still_work() {
    let server = TestServer::start();
    server.write("real/target.md", "target\n");
    server.commit_all();
    symlink("real/target.md", server.root.join("alias.md")).unwrap();
    symlink("real", server.root.join("linked")).unwrap();
    let head = server.head();

    assert_eq!(server.read("alias.md").body["content"], "target\n");
    assert_eq!(server.read("linked/target.md").body["content"], "target\n");
    for (path, content) in [("alias.md", "changed\n"), ("linked/target.md", "changed\n")] {
        server
            .post_json(
                "/mcp/notes/write",
                &json!({"path": path, "content": content}),
            )
            .assert_error(400, "invalid_path");
    }
    server
        .post_json(
            "/mcp/notes/edit",
            &json!({"path": "alias.md", "edits": [{"old": "target", "new": "x"}]}),
        )
        .assert_error(400, "invalid_path");
    server
        .post_json(
            "/mcp/patch/propose",
            &json!({"patch": "--- a/alias.md\n+++ b/alias.md\n@@ -1 +1 @@\n-target\n+x\n"}),
        )
        .assert_error(400, "invalid_path");
    server
        .post_json(
            "/mcp/notes/write",
            &json!({"path": "linked/new.md", "content": "new\n"}),
        )
        .assert_error(400, "invalid_path");
    // The links are still links, the target untouched, nothing committed.
    assert!(std::fs::symlink_metadata(server.root.join("alias.md"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(server.root.join("real/target.md")).unwrap(),
        "target\n"
    );
    assert!(!server.root.join("real/new.md").exists());
    assert_eq!(server.head(), head);
    // The real path is written as usual.
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "real/target.md", "content": "changed\n"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
}

#[test]
fn listing_visits_each_real_folder_once_whatever_the_symlinks() {
    let server = TestServer::start();
    // 24 folders, each with two symlinks to the next: 2^24 paths for a walk
    // that follows links, 24 folders for one that does not.
    let depth = 24;
    for level in 0..depth {
        server.write(&format!("d{level}/n{level}.md"), format!("{level}\n"));
    }
    for level in 0..depth - 1 {
        for name in ["a", "b"] {
            symlink(
                format!("../d{}", level + 1),
                server.root.join(format!("d{level}/{name}")),
            )
            .unwrap();
        }
    }
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let response = client
        .get(format!("{}/mcp/notes", server.url))
        .send()
        .expect("the listing answers");
    let body: serde_json::Value = response.json().unwrap();
    let notes = body["notes"].as_array().unwrap();
    assert_eq!(notes.len(), depth + 1, "{body}");
    assert!(notes.contains(&json!("d23/n23.md")));
    assert!(!notes.iter().any(|n| n.as_str().unwrap().contains("/a/")));
    // A note reached through a link is still readable by that path.
    assert_eq!(server.read("d0/a/n1.md").body["content"], "1\n");
}

#[test]
fn names_with_control_characters_are_invalid_and_forge_nothing() {
    let server = TestServer::start();
    let head = server.head();
    for path in [
        "evil\n\nMirai-Run: 0192.md",
        "a\u{1b}[31m.md",
        "tab\there.md",
        "del\u{7f}.md",
        "c1\u{85}.md",
        "sep\u{2028}.md",
    ] {
        server
            .post_json("/mcp/notes/write", &json!({"path": path, "content": "x\n"}))
            .assert_error(400, "invalid_path");
        server.read(path).assert_error(400, "invalid_path");
    }
    assert_eq!(server.head(), head);
    // Such a file made on disk by someone else is not listed either.
    server.write("odd\u{1b}name.md", "x\n");
    assert_eq!(
        server.get("/mcp/notes").body["notes"],
        json!(["welcome.md"])
    );
}

#[test]
fn long_names_up_to_the_file_system_limit_work_and_longer_ones_are_invalid() {
    let server = TestServer::start();
    let longest = format!("{}.md", "n".repeat(252));
    assert_eq!(longest.len(), 255);
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": format!("folder/{longest}"), "content": "long\n"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("folder").join(&longest)).unwrap(),
        "long\n"
    );
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    let too_long = format!("{}.md", "n".repeat(253));
    server
        .post_json(
            "/mcp/notes/write",
            &json!({"path": too_long, "content": "x\n"}),
        )
        .assert_error(400, "invalid_path");
}

#[test]
fn writes_leave_git_status_clean_with_the_stat_git_would_record() {
    let server = TestServer::start();
    for i in 0..5 {
        let answer = server.post_json(
            "/mcp/notes/write",
            &json!({"path": format!("s/n{i}.md"), "content": format!("{i}\n")}),
        );
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let answer = server.post_json(
        "/mcp/patch/apply",
        &json!({"patch": "--- a/s/n0.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-0\n"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    // git agrees with the index entries mirai wrote without rehashing anything.
    assert_eq!(
        git(&server.root, &["diff-files", "--name-only"]),
        "",
        "the index's stat data matches the files"
    );
    git(&server.root, &["fsck", "--strict", "--no-progress"]);
}

#[test]
fn an_index_artifact_committed_to_the_repository_is_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("notes");
    std::fs::create_dir_all(root.join(".mirai")).unwrap();
    std::fs::write(root.join("welcome.md"), "# Hello\n\nplain words\n").unwrap();
    // A forged artifact that claims the note says something it does not.
    let forged = json!({"version": 1, "generated_at": "2026-01-01T00:00:00Z",
        "notes_indexed": 1, "chunks_indexed": 1,
        "chunks": [{"path": "welcome.md", "chunk_index": 0, "content": "forgedword everywhere"}]});
    std::fs::write(root.join(".mirai/index.json"), forged.to_string()).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["add", "-f", "welcome.md", ".mirai/index.json"]);
    git(
        &root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "seed",
        ],
    );
    let server = TestServer::start_in(dir, root, |_| {});
    let answer = server.get("/mcp/index/query?q=forgedword");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["chunks"], json!([]), "{answer:?}");
    let answer = server.get("/mcp/index/query?q=plain");
    assert_eq!(answer.body["chunks"][0]["metadata"]["path"], "welcome.md");
}

#[test]
fn a_module_cache_inside_the_notes_root_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("notes");
    let out = mirai_cli()
        .args(["serve", "--port", "0"])
        .env("NOTES_ROOT", &root)
        .env("MIRAI_CACHE_DIR", root.join(".mirai/cache"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MIRAI_CACHE_DIR"), "{stderr}");
    assert!(stderr.contains("inside the notes root"), "{stderr}");
}

#[test]
fn a_compiled_module_committed_under_mirai_cache_is_never_loaded() {
    // The attack: a shared notes repository carries `.mirai/cache/guest-*.cwasm`
    // under the name every install of a build uses, and an earlier build loaded
    // it as native code. Here the planted file is a real compiled guest (the
    // harness's), so loading it would show as "loaded from cache".
    let _warm = TestServer::start(); // fills the harness's module cache
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("notes");
    let home = dir.path().join("home");
    std::fs::create_dir_all(root.join(".mirai/cache")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let mut planted = 0;
    for entry in std::fs::read_dir(common::guest_cache()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            root.join(".mirai/cache").join(entry.file_name()),
        )
        .unwrap();
        planted += 1;
    }
    assert!(planted > 0);
    let script = dir.path().join("script.js");
    std::fs::write(&script, "return 6 * 7").unwrap();
    let out = mirai_cli()
        .env_remove("MIRAI_CACHE_DIR")
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", &home)
        .env("RUST_LOG", "info")
        .env("NOTES_ROOT", &root)
        .arg("eval")
        .arg(&script)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("42"),
        "{out:?}"
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("guest module compiled"), "{log}");
    assert!(!log.contains("loaded from cache"), "{log}");
    // The cache went to the user's cache folder, private to the user.
    let cache = home.join(".cache/mirai");
    let cached = files_in(&cache);
    assert!(cached.iter().any(|n| n.ends_with(".cwasm")), "{cached:?}");
    assert!(
        cached.iter().any(|n| n.ends_with(".cwasm.sha256")),
        "{cached:?}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
}

#[test]
fn a_state_folder_swapped_for_an_outside_symlink_is_never_written_through() {
    let server = TestServer::start();
    let outside = tempfile::tempdir().unwrap();
    let _ = std::fs::remove_dir_all(server.root.join(".mirai"));
    symlink(outside.path(), server.root.join(".mirai")).unwrap();
    let answer = server.post_json("/mcp/index/rebuild", &json!({}));
    answer.assert_error(500, "internal");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(".mirai"), "{message}");
    assert!(
        !message.contains(server.root.to_str().unwrap()),
        "{message}"
    );
    // Writes need mirai's state folder (their crash records live there): they
    // are refused with the same clear message, and change nothing.
    let head = server.head();
    let written = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "n.md", "content": "searchable words\n"}),
    );
    written.assert_error(500, "internal");
    assert!(written.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains(".mirai"));
    assert_eq!(server.head(), head);
    assert!(!server.root.join("n.md").exists());
    // Reads and queries still work.
    server.write("r.md", "readable words\n");
    let found = server.get("/mcp/index/query?q=readable");
    assert_eq!(
        found.body["chunks"][0]["metadata"]["path"], "r.md",
        "{found:?}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(files_in(outside.path()), Vec::<String>::new());
}

#[test]
fn a_path_that_normalizes_to_a_name_with_surrounding_spaces_is_refused() {
    // Found by fuzzing: "./ x.md" used to name " x.md", a note a write could
    // create but no read could ask for again (paths are trimmed) and listing hid.
    let server = TestServer::start();
    let head = server.head();
    server
        .post_json(
            "/mcp/notes/write",
            &json!({"path": "./ x.md", "content": "x\n"}),
        )
        .assert_error(400, "invalid_path");
    server.read("folder /.").assert_error(400, "invalid_path");
    assert_eq!(server.head(), head);
    assert!(!server.root.join(" x.md").exists());
}
