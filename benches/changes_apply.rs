//! `changes.apply` of 1,000 new notes in one call (one commit) on a large
//! vault, over HTTP with the index loaded (every note also goes into the live
//! index), against baselines measured in the same run on the same repository:
//! the same 1,000 notes committed by git as processes (files written, then
//! `git add` + `git commit`), and the same 1,000 notes sent as 1,000
//! `patch.apply` calls (1,000 commits). The server runs with
//! MIRAI_CHANGES_MAX_PATCHES=1000 and a body limit of 8 MiB. After mirai's
//! commits `git status --porcelain` must be empty (the bench fails otherwise).
//!
//! cargo bench --bench changes_apply -- VAULT   (a git vault from the gen-notes example, e.g. 10,000 notes)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use serde_json::json;
use support::{copy_tree, fsck, git, report, time_ms, vault_arg, Server};

/// Notes per call.
const NOTES: usize = 1_000;
/// Calls of 1,000 notes measured (after one warm-up call), and git commits alike.
const SAMPLES: usize = 7;
/// Rounds of 1,000 single `patch.apply` calls (each round is 1,000 commits).
const SINGLE_ROUNDS: usize = 2;

/// A new note's text: a heading and a few paragraphs, about 600 bytes.
fn note_text(round: &str, n: usize) -> String {
    let mut text = format!("# Bench note {round} {n}\n\n");
    for p in 0..5 {
        text.push_str(&format!(
            "Paragraph {p} of note {n} in round {round}: a line of prose about \
             gardens, tea and the weather, long enough to look like a note.\n\n"
        ));
    }
    text
}

/// The diff that creates `path` with `text`.
fn creation(path: &str, text: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut patch = format!(
        "--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{} @@\n",
        lines.len()
    );
    for line in lines {
        patch.push('+');
        patch.push_str(line);
    }
    patch
}

fn main() {
    let vault = vault_arg("changes_apply");
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("vault");
    copy_tree(&vault, &root);
    let notes = git(&root, &["ls-files"]).lines().count();
    println!("vault: {notes} files at {}", vault.display());
    let server = Server::start_with_env(
        &root,
        &[
            ("MIRAI_CHANGES_MAX_PATCHES", "1000"),
            ("MIRAI_MAX_BODY_BYTES", "8388608"),
        ],
    );
    let post = |route: &str, body: &serde_json::Value| {
        let response = server
            .client
            .post(format!("{}{route}", server.url))
            .json(body)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().unwrap();
        assert_eq!(status, 200, "{route}: {text}");
    };
    post("/mcp/index/rebuild", &json!({}));
    let commits_before = git(&root, &["rev-list", "--count", "HEAD"]);

    // changes.apply: one call, one commit of 1,000 new notes.
    let mut changes = Vec::new();
    for round in 0..=SAMPLES {
        let tag = format!("c{round}");
        let patches: Vec<String> = (0..NOTES)
            .map(|n| creation(&format!("bench-{tag}/n{n}.md"), &note_text(&tag, n)))
            .collect();
        let body = json!({ "patches": patches, "message": "bench" });
        let ms = time_ms(|| post("/mcp/changes/apply", &body));
        if round > 0 {
            changes.push(ms);
        }
    }
    let commits = git(&root, &["rev-list", "--count", "HEAD"]);
    assert_eq!(
        commits.trim().parse::<usize>().unwrap(),
        commits_before.trim().parse::<usize>().unwrap() + SAMPLES + 1,
        "one commit per call"
    );

    // Baseline: 1,000 patch.apply calls of the same notes (1,000 commits).
    let mut singles = Vec::new();
    for round in 0..SINGLE_ROUNDS {
        let tag = format!("s{round}");
        let patches: Vec<String> = (0..NOTES)
            .map(|n| creation(&format!("bench-{tag}/n{n}.md"), &note_text(&tag, n)))
            .collect();
        singles.push(time_ms(|| {
            for patch in &patches {
                post("/mcp/patch/apply", &json!({ "patch": patch }));
            }
        }));
    }
    let status = git(&root, &["status", "--porcelain"]);
    assert_eq!(status, "", "git status after mirai's commits");
    drop(server);

    // Baseline: git as processes, the files written first, then git add + commit.
    let mut by_git = Vec::new();
    for round in 0..=SAMPLES {
        let tag = format!("g{round}");
        let ms = time_ms(|| {
            let folder = root.join(format!("bench-{tag}"));
            std::fs::create_dir(&folder).unwrap();
            for n in 0..NOTES {
                std::fs::write(folder.join(format!("n{n}.md")), note_text(&tag, n)).unwrap();
            }
            git(&root, &["add", &format!("bench-{tag}")]);
            git(&root, &["commit", "-q", "-m", "bench"]);
        });
        if round > 0 {
            by_git.push(ms);
        }
    }

    println!();
    let median = report("changes.apply, 1,000 new notes, one call", &mut changes);
    let git_median = report("baseline: write + git add + git commit", &mut by_git);
    let singles_median = report("baseline: 1,000 patch.apply calls", &mut singles);
    println!(
        "\nchanges.apply / git baseline: {:.2}   1,000 patch.apply / changes.apply: {:.1}   \
         target: changes.apply <= 2000 ms ({})",
        median / git_median,
        singles_median / median,
        if median <= 2000.0 { "met" } else { "MISSED" }
    );
    println!(
        "git status after mirai's commits: clean; git fsck after the run: {}",
        fsck(&root)
    );
}
