//! A note's history over HTTP in a 10,000-note repository with 5,000 commits
//! (the project's vault generator, committed by `vault::commit`, then 20 more
//! commits that edit one note), against `git log --first-parent -- PATH` run
//! as a process, in the same run: the first call (the whole first-parent walk)
//! reported apart from the warm ones, the first call after HEAD moves by one
//! commit (only that commit walked), and the whole-history page for comparison.
//!
//! cargo bench --bench history

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

#[path = "support/vault.rs"]
mod vault;

mod support;

use std::path::Path;

use serde_json::Value;
use support::{git, report, time_ms, Server};

const NOTES: usize = 10_000;
const COMMITS: usize = 5_000;
const EDITS: usize = 20;
const SAMPLES: usize = 200;
const GIT_SAMPLES: usize = 20;

fn main() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    let started = std::time::Instant::now();
    vault::generate(&root, &vault::Options::new(NOTES, 1)).unwrap();
    vault::commit(&root, COMMITS).unwrap();
    let target = edit_one_note(&root);
    let total = git(&root, &["rev-list", "--count", "HEAD"]);
    println!(
        "vault: {NOTES} notes, {} commits, history of {target} (made in {:.1} s)",
        total.trim(),
        started.elapsed().as_secs_f64()
    );

    let cache = work.path().join("cache");
    let server = Server::start_with_env(&root, &[("MIRAI_CACHE_DIR", cache.to_str().unwrap())]);
    let url = format!("{}/mcp/notes/history?path={target}&limit=100", server.url);
    let fetch = |url: &str| -> Value {
        let response = server.client.get(url).send().unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.json().unwrap()
    };

    let mut answer = Value::Null;
    let cold = time_ms(|| answer = fetch(&url));
    let ids: Vec<String> = answer["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["commit"].as_str().unwrap().to_string())
        .collect();
    let git_ids: Vec<String> = git(
        &root,
        &["log", "--first-parent", "--format=%H", "--", &target],
    )
    .lines()
    .map(str::to_string)
    .collect();
    assert_eq!(ids, git_ids, "the same commits as git log");
    println!(
        "{:<44} {cold:>9.3} ms   ({} commits listed)",
        "first call (cold walk)",
        ids.len()
    );

    let mut warm: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| drop(fetch(&url))))
        .collect();
    let mut health: Vec<f64> = (0..SAMPLES).map(|_| server.health_ms()).collect();
    let all_url = format!("{}/mcp/notes/history?limit=20", server.url);
    let mut all: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| drop(fetch(&all_url))))
        .collect();
    let mut git_log: Vec<f64> = (0..GIT_SAMPLES)
        .map(|_| {
            time_ms(|| {
                drop(git(
                    &root,
                    &["log", "--first-parent", "--format=%H", "--", &target],
                ))
            })
        })
        .collect();

    // HEAD moves by one commit (a write through mirai): the next call walks only it.
    let mut after_write = Vec::new();
    for i in 0..10 {
        let body =
            serde_json::json!({"path": target, "content": format!("# Edited\n\nround {i}\n")});
        let response = server
            .client
            .post(format!("{}/mcp/notes/write", server.url))
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        after_write.push(time_ms(|| drop(fetch(&url))));
    }

    let health = report("GET /health", &mut health);
    let warm = report("history of one note (warm)", &mut warm);
    report("every commit, first page of 20 (warm)", &mut all);
    report("first call after HEAD moved by one", &mut after_write);
    let git_log = report("git log --first-parent -- PATH (process)", &mut git_log);
    println!(
        "warm history / git log: {:.3}   warm history / health: {:.1}   cold / git log: {:.1}",
        warm / git_log,
        warm / health,
        cold / git_log
    );
}

/// Edits one note in `EDITS` more commits (by git2, fixed dates); answers its path.
fn edit_one_note(root: &Path) -> String {
    let repo = git2::Repository::open(root).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let tree = head.tree().unwrap();
    let mut target = String::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        let name = entry.name().unwrap_or("");
        if target.is_empty() && name.ends_with(".md") && !dir.is_empty() {
            target = format!("{dir}{name}");
            return git2::TreeWalkResult::Abort;
        }
        git2::TreeWalkResult::Ok
    })
    .ok();
    let mut parent = head;
    for k in 0..EDITS {
        let text = format!("# Target\n\nedit {k}\n");
        std::fs::write(root.join(&target), &text).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(&target)).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let when = git2::Time::new(1_800_000_000 + 60 * k as i64, 0);
        let who = git2::Signature::new("Bench", "bench@example.invalid", &when).unwrap();
        let id = repo
            .commit(
                Some("HEAD"),
                &who,
                &who,
                &format!("edit {k}\n"),
                &tree,
                &[&parent],
            )
            .unwrap();
        parent = repo.find_commit(id).unwrap();
    }
    target
}
