//! Sync with a git remote, on loopback: what one push and one pull cost
//! (a bare repository on disk, and `git http-backend` behind the specs' small
//! CGI server), and what a remote costs a write: the latency of 200 applies
//! against the release server with no remote, and with a slow one (every push
//! waits 200 ms at the remote), in the same run.
//!
//! cargo bench --bench sync

#[path = "../spec/common/git_http.rs"]
mod git_http;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use mirai::config::{Config, GitCredentials, SyncConfig, Transport};
use mirai::notes::Notes;
use mirai::ops::{self, Context, Input};
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
    let ctx = Context::new(Notes::open(&root).unwrap(), &config);
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

fn main() {
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
