//! Sync with a git remote, on loopback: what one push and one pull cost
//! (a bare repository on disk, and `git http-backend` behind the specs' small
//! CGI server), and what a remote costs a write: the latency of 200 applies
//! against the release server with no remote, and with a slow one (every push
//! waits 200 ms at the remote), in the same run.
//!
//! cargo bench --bench sync
//!
//! With `MIRAI_SOAK_SECS=600` it runs only the soak instead: two replicas and a
//! person write to one bare remote on disk for that long (a fifth of the
//! replicas' writes go to notes both write), then both sync until nothing is
//! left to push; it prints the writes acknowledged, how many were lost (on
//! neither the remote's branch nor an unmerged branch: must be 0), the moves of
//! the remote's branch that were not fast-forwards (must be 0), and the share of
//! writes that stayed on the branch.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

#[path = "../spec/common/git_http.rs"]
mod git_http;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use mirai::config::{Config, GitCredentials, SyncConfig, Transport};
use mirai::notes::Notes;
use mirai::ops::{self, Input};
use serde_json::json;
use support::{git, report, time_ms, Server};

const SAMPLES: usize = 50;
const APPLIES: usize = 200;

/// A bare `remote.git` in `dir` with one commit of 100 notes, and a person's clone.
fn world(dir: &Path) {
    git(dir, &["init", "-q", "--bare", "-b", "main", "remote.git"]);
    git(dir, &["clone", "-q", "remote.git", "person"]);
    let person = dir.join("person");
    git(&person, &["checkout", "-q", "-b", "main"]);
    for n in 0..100 {
        std::fs::write(
            person.join(format!("n{n}.md")),
            format!("# Note {n}\n\nsome text {n}\n"),
        )
        .unwrap();
    }
    git(&person, &["add", "-A"]);
    git(&person, &["commit", "-qm", "seed"]);
    git(&person, &["push", "-q", "origin", "main"]);
}

fn sync_config(url: &str, credentials: GitCredentials) -> SyncConfig {
    SyncConfig {
        remote: url.to_string(),
        transport: Transport::of(url).unwrap(),
        branch: None,
        credentials,
        interval_secs: 0,
    }
}

/// Push and pull medians against `url`, with mirai's clone at `root`.
fn push_and_pull(name: &str, dir: &Path, url: &str, credentials: GitCredentials) {
    let root = dir.join(format!("mirai-{name}"));
    git(
        dir,
        &[
            "clone",
            "-q",
            dir.join("remote.git").to_str().unwrap(),
            root.to_str().unwrap(),
        ],
    );
    let mut config = Config::new(&root);
    config.sync = Some(sync_config(url, credentials));
    let ctx = mirai::app::context(Notes::open(&root).unwrap(), &config);
    let sync = ctx.sync.clone().unwrap();
    let person = dir.join("person");
    let (mut pushes, mut pulls) = (Vec::new(), Vec::new());
    for n in 0..SAMPLES {
        let write =
            json!({"path": format!("n{}.md", n % 100), "content": format!("mirai {name} {n}\n")});
        ops::dispatch(&ctx, "notes.write", Input::Json(write)).unwrap();
        pushes.push(time_ms(|| assert!(sync.push().unwrap())));
        git(&person, &["pull", "-q", "--ff-only", "origin", "main"]);
        std::fs::write(
            person.join(format!("p{n}.md")),
            format!("person {name} {n}\n"),
        )
        .unwrap();
        git(&person, &["add", "-A"]);
        git(&person, &["commit", "-qm", "person"]);
        git(&person, &["push", "-q", "origin", "main"]);
        pulls.push(time_ms(|| assert!(sync.pull().unwrap())));
    }
    report(&format!("push of one commit ({name})"), &mut pushes);
    report(
        &format!("pull of one commit, fast-forward ({name})"),
        &mut pulls,
    );
}

/// The median latency of `APPLIES` applies against a release server on `root`.
fn burst(name: &str, root: &Path, env: &[(&str, &str)]) -> (f64, Server) {
    let server = Server::start_with_env(root, env);
    let mut samples = Vec::new();
    for n in 0..APPLIES {
        let body =
            json!({"path": format!("burst/{}.md", n % 20), "content": format!("note {n}\n")});
        samples.push(time_ms(|| {
            let response = server
                .client
                .post(format!("{}/mcp/notes/write", server.url))
                .json(&body)
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
        }));
    }
    let median = report(name, &mut samples);
    (median, server)
}

/// Every object reachable from `refs` in `repo` (`git rev-list --objects`).
fn reachable_objects(repo: &Path, refs: &[&str]) -> std::collections::HashSet<String> {
    let mut args = vec!["rev-list", "--objects"];
    args.extend_from_slice(refs);
    git(repo, &args)
        .lines()
        .filter_map(|line| line.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// The blob id git gives `text`.
fn blob_of(text: &str) -> String {
    git2::Oid::hash_object(git2::ObjectType::Blob, text.as_bytes())
        .unwrap()
        .to_string()
}

fn soak(secs: u64) {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    world(dir);
    let remote = dir.join("remote.git");
    git(&remote, &["config", "core.logAllRefUpdates", "always"]);
    let cache = dir.join("cache");
    let remote_url = remote.to_str().unwrap().to_string();
    let env = [
        ("MIRAI_CACHE_DIR", cache.to_str().unwrap()),
        ("MIRAI_GIT_REMOTE", remote_url.as_str()),
        ("MIRAI_SYNC_INTERVAL", "2"),
    ];
    let replicas: Vec<(std::path::PathBuf, Server)> = (0..2)
        .map(|k| {
            let root = dir.join(format!("replica{k}"));
            git(dir, &["clone", "-q", "remote.git", root.to_str().unwrap()]);
            let server = Server::start_with_env(&root, &env);
            (root, server)
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(secs);
    let acked = std::sync::Mutex::new(Vec::<(String, String)>::new());
    let refused = std::sync::atomic::AtomicUsize::new(0);
    let person_pushes = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for (k, (_, server)) in replicas.iter().enumerate() {
            let (acked, refused) = (&acked, &refused);
            scope.spawn(move || {
                let mut i = 0u64;
                while Instant::now() < until {
                    i += 1;
                    let path = if i.is_multiple_of(5) {
                        format!("shared/s{}.md", i % 3)
                    } else {
                        format!("r{k}/n{}.md", i % 40)
                    };
                    let content = format!("replica {k} write {i}\n");
                    let body = json!({"path": path, "content": content});
                    let response = server
                        .client
                        .post(format!("{}/mcp/notes/write", server.url))
                        .json(&body)
                        .send()
                        .unwrap();
                    if response.status().is_success() {
                        acked.lock().unwrap().push((path, content));
                    } else {
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
        let (acked, pushes) = (&acked, &person_pushes);
        scope.spawn(move || {
            let person = dir.join("person");
            let mut i = 0u64;
            while Instant::now() < until {
                i += 1;
                let _ = std::process::Command::new("git")
                    .arg("-C")
                    .arg(&person)
                    .args(["pull", "-q", "--rebase", "origin", "main"])
                    .output();
                let path = format!("person/p{}.md", i % 10);
                let content = format!("person write {i}\n");
                std::fs::create_dir_all(person.join("person")).unwrap();
                std::fs::write(person.join(&path), &content).unwrap();
                git(&person, &["add", "-A"]);
                git(&person, &["commit", "-qm", &format!("person {i}")]);
                for _ in 0..200 {
                    let pushed = std::process::Command::new("git")
                        .arg("-C")
                        .arg(&person)
                        .args(["push", "-q", "origin", "main"])
                        .output()
                        .unwrap();
                    if pushed.status.success() {
                        acked.lock().unwrap().push((path.clone(), content.clone()));
                        pushes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        break;
                    }
                    let _ = std::process::Command::new("git")
                        .arg("-C")
                        .arg(&person)
                        .args(["pull", "-q", "--rebase", "origin", "main"])
                        .output();
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    });
    // Both replicas sync until neither has anything left to push.
    let settle = Instant::now();
    loop {
        let mut done = true;
        for (_, server) in &replicas {
            let _ = server
                .client
                .post(format!("{}/mcp/repo/sync", server.url))
                .json(&json!({}))
                .send();
            let status: serde_json::Value = server
                .client
                .get(format!("{}/mcp/repo/status", server.url))
                .send()
                .unwrap()
                .json()
                .unwrap();
            done &= status["ahead"] == 0;
        }
        if done || settle.elapsed() > Duration::from_secs(120) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let on_branch = reachable_objects(&remote, &["main"]);
    let mut kept = std::collections::HashSet::new();
    let mut unmerged_branches = 0;
    for (root, _) in &replicas {
        let branches = git(
            root,
            &[
                "for-each-ref",
                "--format=%(refname)",
                "refs/heads/mirai/unmerged/",
            ],
        );
        for branch in branches.lines() {
            unmerged_branches += 1;
            kept.extend(reachable_objects(root, &[branch]));
        }
    }
    let acked = acked.into_inner().unwrap();
    let stayed = acked
        .iter()
        .filter(|(_, content)| on_branch.contains(&blob_of(content)))
        .count();
    let lost = acked
        .iter()
        .filter(|(_, content)| {
            let blob = blob_of(content);
            !on_branch.contains(&blob) && !kept.contains(&blob)
        })
        .count();
    let reflog = std::fs::read_to_string(remote.join("logs/refs/heads/main")).unwrap_or_default();
    let mut moves = 0;
    let mut not_forward = 0;
    for line in reflog.lines() {
        let mut fields = line.split(' ');
        let (old, new) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        if old.is_empty() || old.bytes().all(|b| b == b'0') {
            continue;
        }
        moves += 1;
        let forward = std::process::Command::new("git")
            .arg("-C")
            .arg(&remote)
            .args(["merge-base", "--is-ancestor", old, new])
            .status()
            .unwrap()
            .success();
        not_forward += usize::from(!forward);
    }
    println!(
        "soak {secs} s, two replicas and a person on one bare remote: {} writes acknowledged \
         ({} by the person), {} refused; lost {lost}; {moves} moves of the remote's main, \
         {not_forward} not fast-forward; {stayed} of {} ({:.1}%) on the branch, the rest on \
         {unmerged_branches} unmerged branch(es)",
        acked.len(),
        person_pushes.into_inner(),
        refused.into_inner(),
        acked.len(),
        100.0 * stayed as f64 / acked.len().max(1) as f64
    );
    assert_eq!(lost, 0, "acknowledged writes were lost");
    assert_eq!(
        not_forward, 0,
        "the remote's branch moved other than forward"
    );
}

fn main() {
    if let Some(secs) = std::env::var("MIRAI_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        soak(secs);
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    world(dir);
    let http = git_http::GitHttp::start(dir, "bench", "tok", Duration::ZERO);
    println!("{SAMPLES} samples each; mirai's clone has 100 notes");
    push_and_pull(
        "bare repository on disk",
        dir,
        dir.join("remote.git").to_str().unwrap(),
        GitCredentials::None,
    );
    push_and_pull(
        "git http-backend, basic auth",
        dir,
        &format!("{}/remote.git", http.base),
        GitCredentials::Token {
            username: "bench".into(),
            token: "tok".into(),
        },
    );
    drop(http);

    let slow = git_http::GitHttp::start(dir, "bench", "tok", Duration::from_millis(200));
    let cache = dir.join("cache");
    let cache = cache.to_str().unwrap();
    let plain = dir.join("plain");
    git(dir, &["clone", "-q", "remote.git", plain.to_str().unwrap()]);
    let (without, server) = burst("apply, no remote", &plain, &[("MIRAI_CACHE_DIR", cache)]);
    drop(server);
    let synced = dir.join("synced");
    git(
        dir,
        &["clone", "-q", "remote.git", synced.to_str().unwrap()],
    );
    let url = format!("{}/remote.git", slow.base);
    let env = [
        ("MIRAI_CACHE_DIR", cache),
        ("MIRAI_GIT_REMOTE", url.as_str()),
        ("MIRAI_GIT_TOKEN", "tok"),
        ("MIRAI_GIT_USERNAME", "bench"),
        ("MIRAI_SYNC_INTERVAL", "0"),
    ];
    let started = Instant::now();
    let (with, server) = burst("apply, slow remote (200 ms a push)", &synced, &env);
    let head = git(&synced, &["rev-parse", "HEAD"]);
    while git(&dir.join("remote.git"), &["rev-parse", "main"]) != head {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the burst never reached the remote"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "burst of {APPLIES} applies: median with a slow remote / without = {:.2}x; all on the remote {:.1} s after the first apply, in {} pushes",
        with / without,
        started.elapsed().as_secs_f64(),
        slow.pushes()
    );
    drop(server);
}
