//! Looking back, over real HTTP against real repositories: `notes.history`
//! checked against `git log --first-parent` and `git diff-tree -M`, its cursor
//! paging, `notes.diff` checked with `git apply` in a scratch clone and with
//! mirai's own patch grammar, `notes.read` at a `rev` in every accepted and
//! refused form, an agent run's commits, MCP, the sandbox and `mirai log`.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::fake_llm::FakeLlm;
use common::{encode, git, mirai_cli, Answer, TestServer};
use serde_json::{json, Value};

/// Runs git in `repo` as Ann, with extra environment (dates), returning stdout.
fn git_as_ann(repo: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "-c",
            "user.name=Ann Person",
            "-c",
            "user.email=ann@example.com",
        ])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Commits everything as a person would, with `message`.
fn person_commit(server: &TestServer, message: &str) -> String {
    git(&server.root, &["add", "-A"]);
    git_as_ann(&server.root, &[], &["commit", "-q", "-m", message]);
    server.head()
}

fn history(server: &TestServer, query: &str) -> Answer {
    server.get(&format!("/mcp/notes/history{query}"))
}

fn ok(answer: Answer) -> Value {
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

fn ids(page: &Value) -> Vec<String> {
    page["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit"].as_str().unwrap().to_string())
        .collect()
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

/// The paths git itself says `commit` changed against its first parent, as
/// `(status letter, path, from)`, renames found by `-M` (git log's default).
fn git_paths(root: &Path, commit: &str, parents: usize) -> BTreeSet<(String, String, String)> {
    let out = if parents == 0 {
        git(
            root,
            &[
                "diff-tree",
                "-r",
                "-M",
                "--root",
                "--name-status",
                "--no-commit-id",
                commit,
            ],
        )
    } else {
        let parent = format!("{commit}^1");
        git(
            root,
            &["diff-tree", "-r", "-M", "--name-status", &parent, commit],
        )
    };
    out.lines()
        .map(|line| -> (String, String, String) {
            let fields: Vec<&str> = line.split('\t').collect();
            let letter = &fields[0][..1];
            match letter {
                "R" => ("R".into(), fields[2].into(), fields[1].into()),
                "T" => ("M".into(), fields[1].into(), String::new()),
                other => (other.into(), fields[1].into(), String::new()),
            }
        })
        .filter(|(_, path, _)| !path.split('/').any(|part| part.starts_with('.')))
        .collect()
}

fn our_paths(commit: &Value) -> BTreeSet<(String, String, String)> {
    commit["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["status"].as_str().unwrap().to_string(),
                p["path"].as_str().unwrap().to_string(),
                p["from"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

const LONG: &str = "# Plans\n\nOne line about the garden.\nAnother about the roof.\nA third about the car.\nA fourth about the taxes.\nA fifth about the trip.\n";

/// A history with people's commits and mirai's, an edited rename, a rename too
/// different to count as one, a deletion, a hidden file, a merge and a commit
/// in another time zone.
fn rich_history() -> TestServer {
    let server = TestServer::start();
    server.write("plans.md", LONG);
    server.write("short.md", "tiny\n");
    server.write("img/logo.png", [0u8, 159, 146, 150]);
    for path in [
        "a.md",
        "a-b.md",
        "a0.md",
        "a/b.md",
        "a/c/d.md",
        "a/c/e.md",
        "z/kind.md",
    ] {
        server.write(path, format!("{path}\n"));
    }
    person_commit(&server, "seed the notes");

    // Names around a folder's (git sorts folder `a` as `a/`), a mode change and a
    // file turned into a symlink, in one commit that adds and removes nothing.
    for path in ["a.md", "a-b.md", "a0.md", "a/c/d.md"] {
        server.write(path, format!("{path} edited\n"));
    }
    let exec = server.root.join("a/b.md");
    std::fs::set_permissions(&exec, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::remove_file(server.root.join("z/kind.md")).unwrap();
    std::os::unix::fs::symlink("../a.md", server.root.join("z/kind.md")).unwrap();
    person_commit(&server, "edits in and around a folder");
    server.write("z.md", "beside the folder z\n");
    server.write("a/c.md", "beside the folder a/c\n");
    person_commit(&server, "add beside folders");

    let written = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "plans.md", "content": LONG.replace("garden", "orchard")}),
    );
    assert_eq!(written.status, 200, "{written:?}");

    git(&server.root, &["mv", "plans.md", "projects.md"]);
    server.write(
        "projects.md",
        LONG.replace("garden", "orchard") + "A sixth.\n",
    );
    git(&server.root, &["mv", "short.md", "brief.md"]);
    server.write("brief.md", "completely different\ncontent here\n");
    server.write(".obsidian/workspace.json", "{}");
    person_commit(&server, "rename plans, rewrite short");

    git(&server.root, &["checkout", "-q", "-b", "side"]);
    server.write("side.md", "from the side branch\n");
    person_commit(&server, "side work");
    git(&server.root, &["checkout", "-q", "-"]);
    git_as_ann(
        &server.root,
        &[("GIT_COMMITTER_DATE", "2024-03-01T10:00:00+02:00")],
        &["merge", "-q", "--no-ff", "-m", "merge side", "side"],
    );

    std::fs::remove_file(server.root.join("brief.md")).unwrap();
    person_commit(
        &server,
        "drop brief\n\nMirai-Run: 0192f0c4-aaaa-7bbb-8ccc-000000000001",
    );
    server
}

#[test]
fn history_matches_git_log_first_parent_with_paths_renames_and_fields() {
    let server = rich_history();
    let root = &server.root;
    let all = ok(history(&server, "?limit=100"));
    let expected = lines(&git(root, &["log", "--first-parent", "--format=%H"]));
    assert_eq!(ids(&all), expected, "newest first, first parents only");
    assert!(all["next_cursor"].is_null());
    let side = git(root, &["rev-parse", "side"]).trim().to_string();
    assert!(
        !ids(&all).contains(&side),
        "the side branch's own commit is not listed"
    );

    for commit in all["commits"].as_array().unwrap() {
        let id = commit["commit"].as_str().unwrap();
        let show = |format: &str| {
            git(root, &["show", "-s", &format!("--format={format}"), id])
                .trim_end_matches('\n')
                .to_string()
        };
        assert_eq!(commit["subject"], show("%s"));
        assert_eq!(commit["author"], show("%an"));
        assert_eq!(commit["email"], show("%ae"));
        let parents: Vec<String> = show("%P").split_whitespace().map(String::from).collect();
        assert_eq!(commit["parents"], json!(parents));
        let ours = chrono::DateTime::parse_from_rfc3339(commit["time"].as_str().unwrap()).unwrap();
        let theirs = chrono::DateTime::parse_from_rfc3339(&show("%cI")).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(ours.offset(), theirs.offset(), "the committer's own offset");
        assert_eq!(
            our_paths(commit),
            git_paths(root, id, parents.len()),
            "paths of {id} ({})",
            commit["subject"]
        );
    }

    let by_subject = |subject: &str| {
        all["commits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["subject"] == subject)
            .unwrap()
            .clone()
    };
    let renamed = by_subject("rename plans, rewrite short");
    assert_eq!(
        renamed["paths"],
        json!([
            {"path": "brief.md", "status": "A"},
            {"path": "projects.md", "status": "R", "from": "plans.md"},
            {"path": "short.md", "status": "D"},
        ]),
        "an edited rename is R with from; a rewrite is a deletion and a creation; hidden files are left out"
    );
    let around = by_subject("edits in and around a folder");
    assert_eq!(
        around["paths"],
        json!([
            {"path": "a-b.md", "status": "M"},
            {"path": "a.md", "status": "M"},
            {"path": "a/b.md", "status": "M"},
            {"path": "a/c/d.md", "status": "M"},
            {"path": "a0.md", "status": "M"},
            {"path": "z/kind.md", "status": "M"},
        ])
    );
    assert_eq!(
        by_subject("add beside folders")["paths"],
        json!([{"path": "a/c.md", "status": "A"}, {"path": "z.md", "status": "A"}])
    );
    let merge = by_subject("merge side");
    assert_eq!(merge["time"], "2024-03-01T10:00:00+02:00");
    assert_eq!(merge["paths"], json!([{"path": "side.md", "status": "A"}]));
    assert_eq!(merge["run_id"], Value::Null);
    let mirai = by_subject("mcp.patch_apply: plans.md");
    assert_eq!(mirai["paths"], json!([{"path": "plans.md", "status": "M"}]));
    let dropped = by_subject("drop brief");
    assert_eq!(dropped["run_id"], "0192f0c4-aaaa-7bbb-8ccc-000000000001");

    // A path's history does not follow renames, as `git log --first-parent -- PATH`.
    for path in ["plans.md", "projects.md", "brief.md", "short.md", "side.md"] {
        let page = ok(history(&server, &format!("?path={path}")));
        let git_ids = lines(&git(
            root,
            &["log", "--first-parent", "--format=%H", "--", path],
        ));
        assert_eq!(ids(&page), git_ids, "history of {path}");
    }
    // Without a limit, the first 20; commits by people list every path they changed.
    let default = ok(history(&server, ""));
    assert_eq!(ids(&default), expected[..20.min(expected.len())].to_vec());
    let seed = by_subject("seed the notes");
    assert!(our_paths(&seed).contains(&("A".into(), "img/logo.png".into(), String::new())));
}

#[test]
fn a_deleted_note_keeps_its_history_and_one_never_committed_is_404() {
    let server = TestServer::with_note("gone.md", "soon gone\n");
    let deleted = server.post_json(
        "/mcp/patch/apply",
        &json!({"patch": "--- a/gone.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-soon gone\n"}),
    );
    assert_eq!(deleted.status, 200, "{deleted:?}");
    assert!(!server.root.join("gone.md").exists());

    let page = ok(history(&server, "?path=gone.md"));
    let commits = page["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 2, "{page}");
    assert_eq!(
        commits[0]["paths"],
        json!([{"path": "gone.md", "status": "D"}])
    );
    assert_eq!(commits[0]["subject"], "mcp.patch_apply: gone.md");
    assert_eq!(commits[1]["subject"], "seed");

    history(&server, "?path=never.md").assert_error(404, "not_found");
    server.write("draft.md", "written, not committed\n");
    let uncommitted = history(&server, "?path=draft.md");
    uncommitted.assert_error(404, "not_found");
    assert!(uncommitted.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("never committed"));
}

#[test]
fn paging_with_the_cursor_covers_every_commit_exactly_once_even_as_head_moves() {
    let server = TestServer::with_note("a.md", "0\n");
    for i in 1..=23 {
        server.write("a.md", format!("{i}\n"));
        if i % 3 == 0 {
            server.write("b.md", format!("b {i}\n"));
        }
        person_commit(&server, &format!("change {i}"));
    }
    for (query, limit, only) in [("", 7, None), ("&path=b.md", 3, Some("b.md"))] {
        let mut log = vec!["log", "--first-parent", "--format=%H"];
        log.extend(only.map(|path| ["--", path]).into_iter().flatten());
        let expected = &lines(&git(&server.root, &log));
        let mut seen: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let after = cursor
                .as_deref()
                .map(|c| format!("&cursor={c}"))
                .unwrap_or_default();
            let page = ok(history(&server, &format!("?limit={limit}{query}{after}")));
            let got = ids(&page);
            assert!(got.len() <= limit);
            seen.extend(got);
            pages += 1;
            if pages == 1 {
                // HEAD moves between pages: the next pages go on where the first ended.
                server.write("a.md", format!("moved on{query}\n"));
                server.write("b.md", format!("moved on{query}\n"));
                person_commit(&server, "meanwhile");
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => break,
            }
        }
        assert_eq!(&seen, expected, "every commit once, in order ({query})");
        assert!(expected.len() > 2 * limit, "several pages ({query})");
        assert_eq!(pages, expected.len().div_ceil(limit));
    }
}

#[test]
fn limit_cursor_and_path_are_checked() {
    let server = TestServer::with_note("a.md", "a\n");
    for bad in ["0", "101", "-1", "abc", "1.5", "+3", ""] {
        history(&server, &format!("?limit={}", encode(bad))).assert_error(400, "invalid_limit");
    }
    assert_eq!(ids(&ok(history(&server, "?limit=100"))).len(), 2);
    assert_eq!(ids(&ok(history(&server, "?limit=1"))).len(), 1);
    let default = ok(history(&server, ""));
    assert_eq!(ids(&default).len(), 2);
    for bad in ["zzz", "0123", &"g".repeat(40)] {
        history(&server, &format!("?cursor={bad}")).assert_error(400, "invalid_request");
    }
    history(&server, &format!("?cursor={}", "0".repeat(40))).assert_error(400, "invalid_request");
    history(&server, "?path=.mirai/x.md").assert_error(400, "invalid_path");
    history(&server, "?path=../a.md").assert_error(400, "invalid_path");
    // Attachments have a history too (issue 46): one never committed has none.
    history(&server, "?path=a.txt").assert_error(404, "not_found");
}

/// A scratch clone of the server's repository with `rev` checked out.
fn scratch_at(server: &TestServer, rev: &str) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let root = server.root.to_str().unwrap();
    let clone = scratch.path().join("c");
    git(
        scratch.path(),
        &["clone", "-q", root, clone.to_str().unwrap()],
    );
    git(&clone, &["checkout", "-q", "--detach", rev]);
    scratch
}

/// Applies `diff` with git in a scratch clone at `base`; answers the clone.
fn git_apply(server: &TestServer, base: &str, diff: &str) -> tempfile::TempDir {
    let scratch = scratch_at(server, base);
    let clone = scratch.path().join("c");
    let file = scratch.path().join("change.diff");
    std::fs::write(&file, diff).unwrap();
    git(&clone, &["apply", "--check", file.to_str().unwrap()]);
    git(&clone, &["apply", file.to_str().unwrap()]);
    scratch
}

fn blob_at(root: &Path, rev: &str, path: &str) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["cat-file", "blob", &format!("{rev}:{path}")])
        .output()
        .unwrap();
    out.status.success().then_some(out.stdout)
}

/// What mirai's own patch grammar makes of `diff` applied to `old`.
fn mirai_applies(diff: &str, old: Option<&[u8]>) -> Option<String> {
    let patch = mirai::patch::parse(diff).unwrap_or_else(|e| panic!("{}\n{diff}", e.message));
    let old = old.map(|b| String::from_utf8(b.to_vec()).unwrap());
    let applied = mirai::patch::apply(&patch, old.as_deref())
        .unwrap_or_else(|e| panic!("{}\n{diff}", e.message));
    applied.content
}

#[test]
fn a_commits_diffs_apply_with_git_and_mirai_to_the_parent_byte_for_byte() {
    let server = TestServer::start();
    server.write("crlf.md", "one\r\ntwo\r\nthree\r\n");
    server.write("no-eol.md", "first\nlast without newline");
    server.write("doomed.md", "to be deleted\n");
    server.write("moving.md", LONG);
    server.write("empty-gone.md", "");
    server.write("deep/ノート.md", "日本語\n");
    person_commit(&server, "seed");
    let parent = server.head();

    server.write("crlf.md", "one\r\nTWO\r\nthree\r\n");
    server.write("no-eol.md", "first\nlast now with newline\n");
    std::fs::remove_file(server.root.join("doomed.md")).unwrap();
    git(&server.root, &["mv", "moving.md", "moved.md"]);
    server.write("moved.md", LONG.replace("roof", "attic"));
    std::fs::remove_file(server.root.join("empty-gone.md")).unwrap();
    server.write("empty-new.md", "");
    server.write("deep/ノート.md", "日本語\n二行目\n");
    server.write("picture.png", [1u8, 2, 3]);
    server.write(".hidden.md", "hidden\n");
    let commit = person_commit(&server, "many changes");

    let answer = ok(server.get(&format!("/mcp/notes/diff?commit={commit}")));
    assert_eq!(answer["commit"], commit);
    assert_eq!(answer["truncated"], false);
    let files = answer["files"].as_array().unwrap();
    let listed: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expect = |p: &str, s: &str| (p.to_string(), s.to_string());
    assert_eq!(
        listed,
        vec![
            expect("crlf.md", "M"),
            expect("deep/ノート.md", "M"),
            expect("doomed.md", "D"),
            expect("empty-gone.md", "D"),
            expect("empty-new.md", "A"),
            expect("moved.md", "A"),
            expect("moving.md", "D"),
            expect("no-eol.md", "M"),
        ],
        "notes only, sorted; the rename as a deletion and a creation"
    );
    for file in files {
        let path = file["path"].as_str().unwrap();
        let diff = file["diff"].as_str().unwrap();
        let clone = git_apply(&server, &parent, diff);
        let on_disk = std::fs::read(clone.path().join("c").join(path)).ok();
        let wanted = blob_at(&server.root, &commit, path);
        assert_eq!(on_disk, wanted, "git apply of {path}:\n{diff}");
        if !path.starts_with("empty-") {
            let old = blob_at(&server.root, &parent, path);
            let new = wanted.map(|b| String::from_utf8(b).unwrap());
            assert_eq!(
                mirai_applies(diff, old.as_deref()),
                new,
                "mirai applies {path}"
            );
        }
    }
    let empty = files.iter().find(|f| f["path"] == "empty-new.md").unwrap();
    assert_eq!(
        empty["diff"],
        "diff --git a/empty-new.md b/empty-new.md\nnew file mode 100644\n"
    );

    let one = ok(server.get(&format!("/mcp/notes/diff?commit={commit}&path=moved.md")));
    assert_eq!(one["files"].as_array().unwrap().len(), 1);
    assert_eq!(one["files"][0]["status"], "A");
    let none = ok(server.get(&format!(
        "/mcp/notes/diff?commit={commit}&path=untouched.md"
    )));
    assert_eq!(none["files"], json!([]));
}

#[test]
fn a_diff_between_two_commits_applies_to_the_first_and_gives_the_second() {
    let server = TestServer::with_note("n.md", "v1\nkeep\n");
    let from = server.head();
    for text in ["v2\nkeep\n", "v3\nkeep\nmore\n"] {
        server.write("n.md", text);
        server.write("other.md", text);
        person_commit(&server, "step");
    }
    let to = server.head();
    let answer = ok(server.get(&format!("/mcp/notes/diff?from={from}&to=HEAD~0&path=n.md")));
    assert_eq!(answer["from"], from);
    assert_eq!(answer["to"], to);
    assert!(answer.get("commit").is_none());
    let files = answer["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "only the note asked for");
    let diff = files[0]["diff"].as_str().unwrap();
    let clone = git_apply(&server, &from, diff);
    assert_eq!(
        std::fs::read(clone.path().join("c/n.md")).unwrap(),
        b"v3\nkeep\nmore\n"
    );
    assert_eq!(
        mirai_applies(diff, Some(b"v1\nkeep\n")).unwrap(),
        "v3\nkeep\nmore\n"
    );

    let same = ok(server.get(&format!("/mcp/notes/diff?from={to}&to={to}&path=n.md")));
    assert_eq!(same["files"], json!([]));

    for (query, code) in [
        ("", "invalid_request"),
        ("?from=HEAD~1", "invalid_request"),
        ("?from=HEAD~1&to=HEAD~0", "invalid_request"),
        (
            "?commit=HEAD~0&from=HEAD~1&to=HEAD~0&path=n.md",
            "invalid_request",
        ),
        ("?commit=main", "invalid_request"),
        ("?commit=HEAD~0&path=.git/config.md", "invalid_path"),
    ] {
        server
            .get(&format!("/mcp/notes/diff{query}"))
            .assert_error(400, code);
    }
    server
        .get(&format!("/mcp/notes/diff?commit={}", "ab".repeat(20)))
        .assert_error(404, "not_found");
    server
        .get("/mcp/notes/diff?commit=HEAD~99")
        .assert_error(404, "not_found");
}

#[test]
fn a_huge_commits_diff_is_cut_at_the_body_limit_and_says_so() {
    let server = TestServer::start_with(|c| c.max_body_bytes = 4_000);
    for i in 0..40 {
        server.write(&format!("n{i:02}.md"), format!("{}\n", "line\n".repeat(50)));
    }
    let commit = person_commit(&server, "forty notes");
    let answer = ok(server.get(&format!("/mcp/notes/diff?commit={commit}")));
    assert_eq!(answer["truncated"], true);
    let files = answer["files"].as_array().unwrap();
    assert_eq!(files.len(), 40, "every note is named");
    let shown: Vec<&str> = files.iter().filter_map(|f| f["diff"].as_str()).collect();
    assert!(!shown.is_empty() && shown.len() < 40, "{}", shown.len());
    assert!(shown.iter().map(|d| d.len()).sum::<usize>() <= 4_000);
    assert!(
        files[0]["diff"].is_string(),
        "the first diff is always there"
    );
    // The rest, one at a time.
    let last = ok(server.get(&format!("/mcp/notes/diff?commit={commit}&path=n39.md")));
    assert_eq!(last["truncated"], false);
    assert!(last["files"][0]["diff"]
        .as_str()
        .unwrap()
        .starts_with("--- /dev/null\n+++ b/n39.md\n"));
}

fn read_at(server: &TestServer, path: &str, rev: &str) -> Answer {
    server.get(&format!(
        "/mcp/notes/read?path={}&rev={}",
        encode(path),
        encode(rev)
    ))
}

#[test]
fn read_at_a_rev_accepts_ids_and_head_n_and_refuses_everything_else() {
    let server = TestServer::with_note("n.md", "version 0\n");
    let mut commits = vec![server.head()];
    for i in 1..=4 {
        server.write("n.md", format!("version {i}\n"));
        commits.push(person_commit(&server, &format!("v{i}")));
    }
    let first = &commits[0];
    for rev in [
        first.clone(),
        first[..7].to_string(),
        first[..7].to_uppercase(),
        "HEAD~4".into(),
    ] {
        let answer = ok(read_at(&server, "n.md", &rev));
        assert_eq!(answer["content"], "version 0\n", "{rev}");
        assert_eq!(answer["commit"], *first);
        assert_eq!(answer["path"], "n.md");
    }
    assert_eq!(
        ok(read_at(&server, "n.md", "HEAD~0"))["content"],
        "version 4\n"
    );
    assert_eq!(
        ok(read_at(&server, "n.md", "HEAD~3"))["content"],
        "version 1\n"
    );
    assert!(
        ok(server.read("n.md")).get("commit").is_none(),
        "no rev, no commit key"
    );

    git(&server.root, &["tag", "v1", &commits[1]]);
    for refused in [
        "main",
        "v1",
        "HEAD",
        "HEAD^",
        "HEAD^1",
        "@{1}",
        "HEAD@{1}",
        "HEAD~x",
        "HEAD~",
        "HEAD~-1",
        "abc",
        "abcdef",
        "HEAD:n.md",
        " HEAD~1",
        "HEAD~1 ",
        "head~1",
        &format!("{}^", first),
        &format!("{}:n.md", first),
        &"a".repeat(41),
        "",
    ] {
        let answer = read_at(&server, "n.md", refused);
        answer.assert_error(400, "invalid_request");
        assert!(
            answer.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("HEAD~N"),
            "{refused:?}: {answer:?}"
        );
    }
    read_at(&server, "n.md", &"0".repeat(40)).assert_error(404, "not_found");
    read_at(&server, "n.md", "1234567").assert_error(404, "not_found");
    read_at(&server, "n.md", "HEAD~5").assert_error(404, "not_found");
    read_at(&server, "n.md", "HEAD~99999999999999999999999").assert_error(404, "not_found");
    let blob = git(&server.root, &["rev-parse", "HEAD:n.md"]);
    let answer = read_at(&server, "n.md", blob.trim());
    answer.assert_error(404, "not_found");
    assert!(answer.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("blob"));
}

#[test]
fn an_ambiguous_abbreviation_is_refused_with_a_clear_message() {
    let server = TestServer::with_note("n.md", "n\n");
    // Two blobs whose ids share 7 hex digits, found by hashing, then stored.
    let repo = git2::Repository::open(&server.root).unwrap();
    let mut seen = std::collections::HashMap::new();
    let prefix = (0u64..)
        .find_map(|i| {
            let data = format!("blob {i}\n");
            let id = git2::Oid::hash_object(git2::ObjectType::Blob, data.as_bytes()).unwrap();
            let short = id.to_string()[..7].to_string();
            match seen.insert(short.clone(), data.clone()) {
                Some(other) => {
                    repo.blob(other.as_bytes()).unwrap();
                    repo.blob(data.as_bytes()).unwrap();
                    Some(short)
                }
                None => None,
            }
        })
        .unwrap();
    let answer = read_at(&server, "n.md", &prefix);
    answer.assert_error(400, "invalid_request");
    assert!(answer.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("ambiguous"));
}

#[test]
fn a_note_at_a_rev_keeps_the_path_rules_and_only_regular_files_are_notes() {
    let server = TestServer::with_note("real.md", "real\n");
    std::os::unix::fs::symlink("real.md", server.root.join("link.md")).unwrap();
    std::fs::create_dir_all(server.root.join("dir.md")).unwrap();
    server.write("dir.md/inner.md", "inner\n");
    std::os::unix::fs::symlink("dir.md", server.root.join("via")).unwrap();
    server.write("gone.md", "was here\n");
    server.write(".secret.md", "hidden\n");
    server.write("data.txt", "text\n");
    person_commit(&server, "odd entries");
    std::fs::remove_file(server.root.join("gone.md")).unwrap();
    person_commit(&server, "remove gone");

    assert_eq!(
        ok(read_at(&server, "gone.md", "HEAD~1"))["content"],
        "was here\n"
    );
    read_at(&server, "gone.md", "HEAD~0").assert_error(404, "not_found");
    read_at(&server, "link.md", "HEAD~0").assert_error(400, "invalid_path");
    read_at(&server, "dir.md", "HEAD~0").assert_error(404, "not_found");
    read_at(&server, "via/inner.md", "HEAD~0").assert_error(404, "not_found");
    read_at(&server, ".secret.md", "HEAD~0").assert_error(400, "invalid_path");
    read_at(&server, ".git/HEAD.md", "HEAD~0").assert_error(400, "invalid_path");
    read_at(&server, "data.txt", "HEAD~0").assert_error(400, "invalid_extension");
    read_at(&server, "../x.md", "HEAD~0").assert_error(400, "invalid_path");
    assert_eq!(
        ok(read_at(&server, "dir.md/inner.md", "HEAD~0"))["content"],
        "inner\n"
    );
}

#[test]
fn an_agent_runs_commits_are_in_its_answer_and_in_history() {
    let llm = FakeLlm::fixture("read-edit-reply");
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|config| {
        config.llm.base_url = base_url;
        config.llm.model = "fake-model".into();
    });
    server.write("todo.md", "# Todo\n\n- buy milk\n- water the plants\n");
    server.commit_all();
    let report = ok(server.post_json("/agent/run", &json!({"task": "Make the milk oat milk."})));
    let run_id = report["run_id"].as_str().unwrap();
    let head = server.head();

    let run = ok(server.get(&format!("/agent/runs/{run_id}")));
    assert_eq!(
        run["commits"],
        json!([{"commit": head, "paths": [{"path": "todo.md", "status": "M"}]}])
    );
    assert!(!run["events"].as_array().unwrap().is_empty());

    let page = ok(history(&server, "?path=todo.md"));
    assert_eq!(page["commits"][0]["commit"], head);
    assert_eq!(page["commits"][0]["run_id"], run_id);
    assert_eq!(page["commits"][1]["run_id"], Value::Null);

    let other = "0192f0c4-aaaa-7bbb-8ccc-00000000ffff";
    server
        .get(&format!("/agent/runs/{other}"))
        .assert_error(404, "not_found");
}

#[test]
fn mcp_lists_the_rows_read_only_and_the_sandbox_calls_them() {
    let server = TestServer::with_note("a.md", "a\n");
    let tools = server.mcp_tools();
    for name in ["notes_history", "notes_diff"] {
        let tool = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        assert_eq!(tool["annotations"]["destructiveHint"], false, "{tool}");
    }

    let code = r#"
        const h = await mirai.notes.history({path: "a.md", limit: 1});
        const d = await mirai.notes.diff({commit: h.commits[0].commit});
        const old = await mirai.notes.read({path: "a.md", rev: "HEAD~0"});
        let refused = null;
        try { await mirai.notes.read({path: "a.md", rev: 3}); } catch (e) { refused = e.code; }
        return {subject: h.commits[0].subject, diff: d.files[0].diff, content: old.content, refused};
    "#;
    let eval = ok(server.post_json("/agent/eval", &json!({"code": code})));
    assert!(eval["error"].is_null(), "{eval}");
    assert_eq!(
        eval["result"],
        json!({"subject": "seed", "diff": "--- /dev/null\n+++ b/a.md\n@@ -0,0 +1 @@\n+a\n",
               "content": "a\n", "refused": "invalid_request"})
    );
}

#[test]
fn mirai_log_prints_one_line_per_commit() {
    let server = TestServer::with_note("a.md", "a\n");
    server.write("a.md", "b\n");
    person_commit(
        &server,
        "second\n\nMirai-Run: 0192f0c4-aaaa-7bbb-8ccc-000000000002",
    );
    server.write("other.md", "o\n");
    person_commit(&server, "unrelated");
    let out = mirai_cli()
        .args(["log", "a.md", "--limit", "5", "--notes-root"])
        .arg(&server.root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<&str> = text.lines().collect();
    let ids = lines(&git(&server.root, &["log", "--format=%H", "--", "a.md"]));
    assert_eq!(printed.len(), 2, "{text}");
    assert!(printed[0].starts_with(&ids[0][..12]), "{text}");
    assert!(
        printed[0].ends_with("second  [run 0192f0c4-aaaa-7bbb-8ccc-000000000002]"),
        "{text}"
    );
    assert!(
        printed[1].starts_with(&ids[1][..12]) && printed[1].ends_with(" seed"),
        "{text}"
    );

    let out = mirai_cli()
        .args(["log", "--limit", "1", "--notes-root"])
        .arg(&server.root)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(text.trim_end().ends_with(" unrelated"), "{text}");

    let out = mirai_cli()
        .args(["log", "never.md", "--notes-root"])
        .arg(&server.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not_found"));
}
