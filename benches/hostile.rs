//! Requests built to make the server work hard, each at (or near) the 1 MiB body
//! limit, against the release server over HTTP: the time of each (median of a few
//! runs), the server's own `/health` round trip as the baseline, and the latency of
//! a small `notes.write` sent while the hostile request runs (it waits for the
//! writer lock whenever the hostile request holds it).
//!
//! cargo bench --bench hostile [-- FILTER] [--timeout SECONDS]
//!
//! Each case gets a fresh server and notes repository. A request that takes longer
//! than the timeout (default 60 s) is reported as such and its server is killed, so
//! it cannot slow the cases after it.
//!
//! Then what others can make the server hold or spend (issue 27), each against a
//! hostile server this bench runs on loopback: an embedding server and a model
//! whose answers never end (time to the answer, the server's peak RSS), and a
//! flood of sync requests against a remote that takes 1.5 s per fetch (the
//! server's threads, a notes.list during the flood, the fetches that reached
//! the remote); and a 100 MiB note committed beside the server (a read, a
//! rebuild, the peak RSS).
//!
//! The second pass of issue 27 runs each of its cases against this build and,
//! with `--before PATH` (a `mirai` binary built from the code before the
//! change), against that one too, side by side: reverting one commit that
//! rewrote 50 notes of 800 KB (the server's CPU time), the same revert into
//! notes that moved since, a clone of a remote whose tree holds entries Linux
//! cannot hold, 60 MCP `repo_sync` calls against a slow remote (the server's
//! threads) and a sandbox program's `mirai.repo.sync()` against a remote that
//! takes 6 s.
//!
//! `soak [--minutes N]` (default 5) runs one server against a hostile
//! embedding server and a hostile model (endless, huge, NaN and wrongly shaped
//! answers, in turn) under a steady load of hybrid queries, writes and agent
//! runs, and prints its RSS every 10 s and at the end its peak over the RSS
//! it had once its index was built.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use std::ffi::OsString;
use std::path::Path;
use support::{git, median_p95, Server};

/// The default request body limit (MIRAI_MAX_BODY_BYTES).
const LIMIT: usize = 1024 * 1024;
/// Runs per case, unless one case's runs together pass [`CASE_SECONDS`].
const RUNS: usize = 3;
const CASE_SECONDS: f64 = 20.0;

/// One hostile request: the notes it needs and what it sends.
struct Case {
    name: String,
    /// (path, content) committed before the server sees the request.
    notes: Vec<(String, String)>,
    route: &'static str,
    /// The bodies of successive runs (a rewrite alternates between two texts so
    /// that every run really rewrites the note).
    bodies: Vec<Value>,
    /// The status the fixed server answers; reported when another comes back.
    expect: u16,
}

/// Short distinct lines: `prefix` and the number in hex.
fn lines(n: usize, prefix: &str) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:x}")).collect()
}

fn text(lines: &[String]) -> String {
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

fn body_bytes(body: &Value) -> usize {
    serde_json::to_vec(body).unwrap().len()
}

/// The largest `n` in `1..=max` for which `make(n)` stays within the body limit.
fn fill<T>(max: usize, make: impl Fn(usize) -> (T, Value)) -> T {
    let (mut lo, mut hi) = (1, max);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if body_bytes(&make(mid).1) <= LIMIT - 1024 {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    make(lo).0
}

/// A hunk whose n−1 context lines all match the note but one, against an n-line note.
fn near_miss(n: usize, route: &'static str) -> (Case, Value) {
    let note = lines(n, "");
    let mut patch = format!(
        "--- a/big.md\n+++ b/big.md\n@@ -2,{} +2,{} @@\n",
        n - 1,
        n - 1
    );
    for (i, line) in note.iter().enumerate().skip(1) {
        if i == n / 2 {
            patch.push_str(&format!("-{line}\n+changed\n"));
        } else if i == n - 2 {
            patch.push_str(" not in the note\n");
        } else {
            patch.push_str(&format!(" {line}\n"));
        }
    }
    let body = json!({ "patch": patch });
    let case = Case {
        name: format!("{route}: near miss, {n} lines"),
        notes: vec![("big.md".into(), text(&note))],
        route,
        bodies: vec![body.clone()],
        expect: 409,
    };
    (case, body)
}

/// `hunks` one-line insertions spread over a `note_lines`-line note.
fn tiny_hunks(note_lines: usize, hunks: usize) -> (Case, Value) {
    let note: Vec<String> = (0..note_lines).map(|i| format!("{:x}", i % 256)).collect();
    let step = note_lines / hunks;
    let mut patch = String::from("--- a/big.md\n+++ b/big.md\n");
    for h in 0..hunks {
        let old = 2 + h * step;
        patch.push_str(&format!(
            "@@ -{old},1 +{},2 @@\n+n\n {}\n",
            old + h,
            note[old - 1]
        ));
    }
    let body = json!({ "patch": patch });
    let case = Case {
        name: format!("patch.propose: {hunks} hunks, {note_lines}-line note"),
        notes: vec![("big.md".into(), text(&note))],
        route: "/mcp/patch/propose",
        bodies: vec![body.clone()],
        expect: 200,
    };
    (case, body)
}

/// notes.edit whose `old` (n lines) is not in the note (n lines), one word off.
fn edit_missing(n: usize) -> (Case, Value) {
    let note: Vec<String> = (0..n)
        .map(|i| format!("line {i:x} of the long note, alpha beta gamma"))
        .collect();
    let mut old = note.clone();
    old[n / 2] = "a line that is not there".into();
    let body = json!({"path": "big.md", "edits": [{"old": text(&old), "new": "x"}]});
    let case = Case {
        name: format!("notes.edit: old not found, {n} lines"),
        notes: vec![("big.md".into(), text(&note))],
        route: "/mcp/notes/edit",
        bodies: vec![body.clone()],
        expect: 409,
    };
    (case, body)
}

/// notes.edit `{"old": "a"}` against one line of `n` a's.
fn edit_many(n: usize) -> Case {
    Case {
        name: format!("notes.edit: old \"a\" in {n} a's"),
        notes: vec![("big.md".into(), format!("{}\n", "a".repeat(n)))],
        route: "/mcp/notes/edit",
        bodies: vec![json!({"path": "big.md", "edits": [{"old": "a", "new": "b"}]})],
        expect: 409,
    }
}

/// notes.write replacing every one of `n` distinct lines.
fn rewrite(n: usize) -> (Case, Value) {
    let version = |v: usize| text(&lines(n, &format!("v{v} ")));
    let bodies = vec![
        json!({"path": "big.md", "content": version(1)}),
        json!({"path": "big.md", "content": version(2)}),
    ];
    let probe = bodies[0].clone();
    let case = Case {
        name: format!("notes.write: rewrite {n} distinct lines"),
        notes: vec![("big.md".into(), version(0))],
        route: "/mcp/notes/write",
        bodies,
        expect: 200,
    };
    (case, probe)
}

/// patch.make against a one-line note with an `n`-line new text.
fn grow(n: usize) -> (Case, Value) {
    let body = json!({"path": "one.md", "content": text(&lines(n, ""))});
    let case = Case {
        name: format!("patch.make: 1 line to {n} lines"),
        notes: vec![("one.md".into(), "one line\n".into())],
        route: "/mcp/patch/make",
        bodies: vec![body.clone()],
        expect: 200,
    };
    (case, body)
}

/// A near miss where every line is alike, so every place matches for a long way.
fn near_miss_alike(n: usize) -> (Case, Value) {
    let mut patch = format!("--- a/a.md\n+++ b/a.md\n@@ -2,{} +2,{} @@\n", n - 1, n - 1);
    for i in 1..n {
        patch.push_str(match i {
            i if i == n / 2 => "-a\n+b\n",
            i if i == n - 2 => " b\n",
            _ => " a\n",
        });
    }
    let body = json!({ "patch": patch });
    let case = Case {
        name: format!("extra: apply near miss, {n} lines alike"),
        notes: vec![("a.md".into(), "a\n".repeat(n))],
        route: "/mcp/patch/apply",
        bodies: vec![body.clone()],
        expect: 409,
    };
    (case, body)
}

/// Hunks that all claim line 2 but whose lines are far down the note.
fn far_hunks(note_lines: usize, hunks: usize) -> (Case, Value) {
    let note = lines(note_lines, "");
    let mut patch = String::from("--- a/big.md\n+++ b/big.md\n");
    for h in 0..hunks {
        let at = note_lines / 4 + h * 2;
        patch.push_str(&format!(
            "@@ -2,2 +2,2 @@\n-{}\n+x\n {}\n",
            note[at],
            note[at + 1]
        ));
    }
    let body = json!({ "patch": patch });
    let case = Case {
        name: format!("extra: apply {hunks} hunks far from their lines"),
        notes: vec![("big.md".into(), text(&note))],
        route: "/mcp/patch/apply",
        bodies: vec![body.clone()],
        expect: 409,
    };
    (case, body)
}

/// patch.make between two texts of the same few short lines in random orders.
fn shuffled(n: usize) -> (Case, Value) {
    let random = |mut x: u64| -> String {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ["a\n", "b\n", "c\n", "\n"][(x % 4) as usize]
            })
            .collect()
    };
    let body = json!({"path": "mix.md", "content": random(11)});
    let case = Case {
        name: format!("extra: patch.make, {n} lines of 4 kinds reordered"),
        notes: vec![("mix.md".into(), random(7))],
        route: "/mcp/patch/make",
        bodies: vec![body.clone()],
        expect: 200,
    };
    (case, body)
}

fn cases() -> Vec<Case> {
    vec![
        // The sizes the issue reports.
        near_miss(100_000, "/mcp/patch/propose").0,
        near_miss(100_000, "/mcp/patch/apply").0,
        tiny_hunks(300_000, 20_000).0,
        edit_missing(20_000).0,
        edit_many(200_000),
        rewrite(40_000).0,
        grow(120_000).0,
        // The same shapes grown to the body limit.
        fill(400_000, |n| near_miss(n, "/mcp/patch/apply")),
        fill(60_000, |h| tiny_hunks(LIMIT / 4, h)),
        fill(100_000, edit_missing),
        edit_many(LIMIT - 1),
        fill(200_000, rewrite),
        fill(400_000, grow),
        // Shapes beyond the issue's: lines all alike, hunks all far off, few distinct lines.
        fill(400_000, near_miss_alike),
        fill(50_000, |h| far_hunks(150_000, h)),
        fill(600_000, shuffled),
    ]
}

enum Outcome {
    Done { ms: f64, status: u16 },
    TimedOut,
}

fn send(client: &reqwest::blocking::Client, url: &str, body: &Value) -> Outcome {
    let started = Instant::now();
    match client.post(url).json(body).send() {
        Ok(response) => {
            let status = response.status().as_u16();
            let _ = response.bytes();
            Outcome::Done {
                ms: started.elapsed().as_secs_f64() * 1000.0,
                status,
            }
        }
        Err(_) => Outcome::TimedOut,
    }
}

/// A server on loopback answering every request with `answer`; counts the
/// requests whose first line contains `counted`.
fn hostile(
    counted: &'static str,
    answer: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let (answer, counter) = (Arc::new(answer), count.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (answer, counter) = (answer.clone(), counter.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) <= 2 {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let _ = reader.by_ref().take(length).read_to_end(&mut Vec::new());
                if first.contains(counted) {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                let mut stream = stream;
                answer(&first, &mut stream);
            });
        }
    });
    (base, count)
}

/// A 200 with a chunked body that repeats `piece` until the client goes away.
fn endless(stream: &mut TcpStream, piece: &str) {
    let head =
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
    if stream.write_all(head.as_bytes()).is_ok() {
        while stream.write_all(chunk.as_bytes()).is_ok() {}
    }
}

fn respond(stream: &mut TcpStream, status: u16, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A notes repository with one committed note.
fn seeded_root(work: &std::path::Path) -> std::path::PathBuf {
    let root = work.join("notes");
    std::fs::create_dir_all(&root).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("cars.md"), "# Cars\nThe car needs new tyres.\n").unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "seed"]);
    root
}

/// An embedding server whose answers never end: a hybrid query's time and the peak RSS.
fn endless_embeddings() {
    let (base, _) = hostile("POST", |_, stream| endless(stream, &"[0.5,".repeat(2000)));
    let work = tempfile::tempdir().unwrap();
    let root = seeded_root(work.path());
    let server = Server::start_with_env(&root, &[("MIRAI_EMBED_BASE_URL", &format!("{base}/v1"))]);
    let mut samples = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let answer = server
            .client
            .get(format!(
                "{}/mcp/index/query?q=tyres&mode=hybrid",
                server.url
            ))
            .send()
            .unwrap();
        assert_eq!(answer.status().as_u16(), 200);
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        std::thread::sleep(Duration::from_millis(200));
    }
    let (median, _) = median_p95(&mut samples);
    println!(
        "{:<52} {median:>12.1}   (peak RSS {:.0} MiB)",
        "provider: endless embedding answer, hybrid query",
        server.peak_rss_mib()
    );
}

/// A model whose second answer never ends: the run's time and the peak RSS.
fn endless_model() {
    let calls = Arc::new(AtomicUsize::new(0));
    let first = json!({"choices": [{"message": {"content": "<code>return 1</code>"}}]}).to_string();
    let (base, _) = hostile("POST", move |_, stream| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            respond(stream, 200, &first);
        } else {
            endless(stream, &"{\"choices\":[".repeat(1000));
        }
    });
    let work = tempfile::tempdir().unwrap();
    let root = seeded_root(work.path());
    let server = Server::start_with_env(
        &root,
        &[
            ("MIRAI_LLM_BASE_URL", &format!("{base}/v1")),
            ("MIRAI_LLM_MAX_RETRIES", "0"),
        ],
    );
    let started = Instant::now();
    let answer = server
        .client
        .post(format!("{}/agent/run", server.url))
        .json(&json!({"task": "anything"}))
        .send()
        .unwrap();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let report: Value = answer.json().unwrap_or(Value::Null);
    println!(
        "{:<52} {ms:>12.1}   (stopped {}, peak RSS {:.0} MiB)",
        "provider: endless model answer, one run",
        report["stopped"],
        server.peak_rss_mib()
    );
}

/// 600 sync requests within 2 s against a remote whose fetches take 1.5 s.
fn sync_flood() {
    let (base, fetches) = hostile("git-upload-pack", |first, stream| {
        if first.contains("git-upload-pack") {
            std::thread::sleep(Duration::from_millis(1500));
        }
        respond(stream, 503, "busy");
    });
    let work = tempfile::tempdir().unwrap();
    let root = seeded_root(work.path());
    let server = Server::start_with_env(
        &root,
        &[
            ("MIRAI_GIT_REMOTE", &format!("{base}/remote.git")),
            ("MIRAI_SYNC_INTERVAL", "0"),
        ],
    );
    let threads_before = server.threads();
    let url = format!("{}/mcp/repo/sync", server.url);
    let started = Instant::now();
    let callers: Vec<_> = (0..600)
        .map(|i| {
            let (client, url) = (server.client.clone(), url.clone());
            std::thread::sleep(Duration::from_micros(3000 * (i % 2)));
            std::thread::spawn(move || client.post(url).json(&json!({})).send().is_ok())
        })
        .collect();
    let spread = started.elapsed().as_secs_f64();
    let mut list_ms: Vec<f64> = Vec::new();
    let mut threads_peak = threads_before;
    while started.elapsed() < Duration::from_secs(4) {
        threads_peak = threads_peak.max(server.threads());
        let asked = Instant::now();
        let listed = server
            .client
            .get(format!("{}/mcp/notes", server.url))
            .timeout(Duration::from_secs(20))
            .send();
        list_ms.push(if listed.is_ok() {
            asked.elapsed().as_secs_f64() * 1000.0
        } else {
            f64::INFINITY
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    let answered = callers
        .into_iter()
        .map(|c| c.join().unwrap())
        .filter(|ok| *ok)
        .count();
    let slowest = list_ms.iter().cloned().fold(0.0, f64::max);
    println!(
        "{:<52} {:>12.1}   (600 requests in {:.1} s, {answered} answered; server threads {threads_before} -> {threads_peak}; fetches {})",
        "sync: flood, slowest notes.list during it (ms)",
        slowest,
        spread,
        fetches.load(Ordering::SeqCst)
    );
}

/// A 100 MiB note committed beside the server (as a pull leaves one): a read,
/// a rebuild and the peak RSS.
fn huge_note() {
    let work = tempfile::tempdir().unwrap();
    let root = seeded_root(work.path());
    let line = "a fairly ordinary line of a very long note\n";
    let big = line.repeat(100 * 1024 * 1024 / line.len());
    std::fs::write(root.join("big.md"), big).unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "big"]);
    let server = Server::start(&root);
    let started = Instant::now();
    let read = server
        .client
        .get(format!("{}/mcp/notes/read?path=big.md", server.url))
        .send()
        .unwrap();
    let status = read.status().as_u16();
    let _ = read.bytes();
    let read_ms = started.elapsed().as_secs_f64() * 1000.0;
    let started = Instant::now();
    let rebuilt = server
        .client
        .post(format!("{}/mcp/index/rebuild", server.url))
        .json(&json!({}))
        .send()
        .unwrap();
    let rebuild_ms = started.elapsed().as_secs_f64() * 1000.0;
    println!(
        "{:<52} {read_ms:>12.1}   (status {status}; index.rebuild {} in {rebuild_ms:.0} ms; peak RSS {:.0} MiB)",
        "note: 100 MiB note beside the server, notes.read",
        rebuilt.status().as_u16(),
        server.peak_rss_mib()
    );
}

/// A case of the second pass, given the `--before` build.
type Scenario = fn(&Option<OsString>);

/// The builds the second pass compares: `--before PATH` first when given, then this one.
fn builds(before: &Option<OsString>) -> Vec<(&'static str, OsString)> {
    let mut builds = Vec::new();
    if let Some(path) = before {
        builds.push(("before", path.clone()));
    }
    builds.push(("after", OsString::from(env!("CARGO_BIN_EXE_mirai"))));
    builds
}

/// One line of a before/after case.
fn report(case: &str, build: &str, figures: String) {
    println!("{case:<52} {build:>6}   {figures}");
}

/// POSTs `body` to `path`: (status, answer, wall ms, server CPU ms).
fn timed_post(server: &Server, path: &str, body: &Value) -> (u16, Value, f64, f64) {
    let (cpu, started) = (server.cpu_ms(), Instant::now());
    let answer = server
        .client
        .post(format!("{}{path}", server.url))
        .json(body)
        .send()
        .unwrap();
    let status = answer.status().as_u16();
    let value: Value = answer.json().unwrap_or(Value::Null);
    let wall = started.elapsed().as_secs_f64() * 1000.0;
    (status, value, wall, server.cpu_ms() - cpu)
}

/// A notes repository of `count` notes of `lines` lines (about 40 bytes
/// each), then a commit rewriting every `every`-th line of each (answered),
/// then, with `moved` > 0, a commit putting that many lines at each note's top.
fn rewritten(
    work: &Path,
    count: usize,
    lines: usize,
    every: usize,
    moved: usize,
) -> (std::path::PathBuf, String) {
    let root = seeded_root(work);
    let note = |n: usize, changed: bool, top: usize| -> String {
        let mut text: String = (0..top)
            .map(|i| format!("inserted line {i} of note {n}\n"))
            .collect();
        for i in 0..lines {
            if changed && i % every == every / 2 {
                text.push_str(&format!(
                    "REWRITTEN LINE {i:>8} OF NOTE {n:>3} WITH WORDS\n"
                ));
            } else {
                text.push_str(&format!("note {n:>3} line {i:>8} of some ordinary words\n"));
            }
        }
        text
    };
    let commit = |changed: bool, top: usize, message: &str| {
        for n in 0..count {
            std::fs::write(root.join(format!("n{n}.md")), note(n, changed, top)).unwrap();
        }
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", message]);
    };
    commit(false, 0, "notes");
    commit(true, 0, "rewrite");
    let rewrite = git(&root, &["rev-parse", "HEAD"]).trim().to_string();
    if moved > 0 {
        commit(true, moved, "moved");
    }
    (root, rewrite)
}

/// Reverting one commit that rewrote 50 notes of 800 KB, and the same revert
/// into notes that moved since (every hunk far from its line).
fn revert_cases(before: &Option<OsString>) {
    for (case, every, moved) in [
        ("revert: 50 notes of 800 KB, every line rewritten", 1, 0),
        ("revert: 50 notes of 800 KB, moved since", 75, 6_000),
    ] {
        for (build, binary) in builds(before) {
            let work = tempfile::tempdir().unwrap();
            let (root, rewrite) = rewritten(work.path(), 50, 20_000, every, moved);
            let server = Server::try_start(&binary, &root, &[("RUST_LOG", "error")]).unwrap();
            let (status, answer, wall, cpu) =
                timed_post(&server, "/mcp/notes/revert", &json!({"commit": rewrite}));
            let why = answer["error"]["message"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect::<String>();
            report(
                case,
                build,
                format!("status {status}, {wall:.0} ms, server CPU {cpu:.0} ms {why}"),
            );
        }
    }
}

/// git in `repo` with `input` on stdin; its trimmed output.
fn git_stdin(repo: &Path, args: &[&str], input: &[u8]) -> String {
    let mut child = std::process::Command::new("git")
        .current_dir(repo)
        .args(["-c", "user.name=p", "-c", "user.email=p@x"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A bare remote whose main holds two notes and entries Linux cannot hold (a
/// 300-byte name, an absolute name, a file entry naming a tree), built with
/// git's plumbing.
fn hostile_tree_remote(work: &Path) -> std::path::PathBuf {
    let remote = work.join("remote.git");
    git(
        work,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    let blob = |text: &str| git_stdin(&remote, &["hash-object", "-w", "--stdin"], text.as_bytes());
    let folder = git_stdin(
        &remote,
        &["mktree"],
        format!("100644 blob {}\tin.md\n", blob("in\n")).as_bytes(),
    );
    let mut entries = vec![
        ("a.md".to_string(), blob("alpha\n")),
        ("b.md".to_string(), blob("beta\n")),
        (format!("{}.md", "x".repeat(300)), blob("long\n")),
        ("/abs.md".to_string(), blob("absolute\n")),
        ("folder-as-file.md".to_string(), folder),
    ];
    entries.sort();
    let mut raw = Vec::new();
    for (name, id) in &entries {
        raw.extend_from_slice(format!("100644 {name}\0").as_bytes());
        raw.extend((0..20).map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap()));
    }
    let tree = git_stdin(
        &remote,
        &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
        &raw,
    );
    let commit = git_stdin(&remote, &["commit-tree", &tree, "-m", "hostile"], b"");
    git(&remote, &["update-ref", "refs/heads/main", &commit]);
    remote
}

/// A clone, at start-up, of a remote whose tree holds entries Linux cannot hold.
fn hostile_tree_clone(before: &Option<OsString>) {
    let case = "sync: clone of a tree Linux cannot hold";
    for (build, binary) in builds(before) {
        let work = tempfile::tempdir().unwrap();
        let remote = hostile_tree_remote(work.path());
        let root = work.path().join("clone");
        let started = Instant::now();
        let server = Server::try_start(
            &binary,
            &root,
            &[
                ("MIRAI_GIT_REMOTE", remote.to_str().unwrap()),
                ("RUST_LOG", "error"),
            ],
        );
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let figures = match server {
            Ok(server) => {
                let status: Value = server
                    .client
                    .get(format!("{}/mcp/repo/status", server.url))
                    .send()
                    .unwrap()
                    .json()
                    .unwrap();
                let skipped = status["skipped_paths"].as_array().map_or(0, Vec::len);
                format!(
                    "started in {ms:.0} ms, b.md there: {}, skipped_paths {skipped}",
                    root.join("b.md").exists()
                )
            }
            Err(why) => format!("did not start: {why} after {ms:.0} ms"),
        };
        report(case, build, figures);
    }
}

/// A remote whose every request takes `seconds` and fails.
fn slow_remote(seconds: f64) -> (String, Arc<AtomicUsize>) {
    hostile("git-upload-pack", move |_, stream| {
        std::thread::sleep(Duration::from_secs_f64(seconds));
        respond(stream, 503, "busy");
    })
}

/// 60 MCP `repo_sync` calls at once against a remote whose fetches take 1.5 s.
fn mcp_sync_flood(before: &Option<OsString>) {
    let case = "sync: 60 MCP repo_sync calls, server threads";
    for (build, binary) in builds(before) {
        let (base, fetches) = slow_remote(1.5);
        let work = tempfile::tempdir().unwrap();
        let root = seeded_root(work.path());
        let remote = format!("{base}/remote.git");
        let server = Server::try_start(
            &binary,
            &root,
            &[
                ("MIRAI_GIT_REMOTE", remote.as_str()),
                ("MIRAI_SYNC_INTERVAL", "0"),
                ("RUST_LOG", "error"),
            ],
        )
        .unwrap();
        let mcp = format!("{}/mcp", server.url);
        let initialized = server
            .client
            .post(&mcp)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}}),
            )
            .send()
            .unwrap();
        let session = initialized.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let threads_before = server.threads();
        let started = Instant::now();
        let callers: Vec<_> = (0..60)
            .map(|n| {
                let (client, mcp, session) = (server.client.clone(), mcp.clone(), session.clone());
                std::thread::spawn(move || {
                    client
                        .post(mcp)
                        .header("accept", "application/json, text/event-stream")
                        .header("mcp-session-id", session)
                        .header("mcp-protocol-version", "2025-06-18")
                        .json(
                            &json!({"jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
                            "params": {"name": "repo_sync", "arguments": {}}}),
                        )
                        .send()
                        .is_ok()
                })
            })
            .collect();
        let mut peak = threads_before;
        while started.elapsed() < Duration::from_secs(3) {
            peak = peak.max(server.threads());
            std::thread::sleep(Duration::from_millis(50));
        }
        let answered = callers
            .into_iter()
            .map(|c| c.join().unwrap())
            .filter(|ok| *ok)
            .count();
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        report(
            case,
            build,
            format!(
                "threads {threads_before} -> {peak}, {answered} answered in {ms:.0} ms, fetches {}",
                fetches.load(Ordering::SeqCst)
            ),
        );
    }
}

/// A sandbox program's `mirai.repo.sync()` against a remote whose every request takes 6 s.
fn sandbox_sync(before: &Option<OsString>) {
    let case = "sync: sandbox repo.sync, remote takes 6 s";
    for (build, binary) in builds(before) {
        let (base, _) = slow_remote(6.0);
        let work = tempfile::tempdir().unwrap();
        let root = seeded_root(work.path());
        let remote = format!("{base}/remote.git");
        let server = Server::try_start(
            &binary,
            &root,
            &[
                ("MIRAI_GIT_REMOTE", remote.as_str()),
                ("MIRAI_SYNC_INTERVAL", "0"),
                ("RUST_LOG", "error"),
            ],
        )
        .unwrap();
        let (status, answer, wall, _) = timed_post(
            &server,
            "/agent/eval",
            &json!({"code": "await mirai.repo.sync(); return 1"}),
        );
        report(
            case,
            build,
            format!(
                "eval answered {status} in {wall:.0} ms ({})",
                answer["error"]["code"]
            ),
        );
    }
}

/// Answers of a hostile embedding server, in turn: endless, huge, NaN, the wrong shape.
fn hostile_embedding(n: usize, stream: &mut TcpStream) {
    match n % 4 {
        0 => endless(stream, &"[0.5,".repeat(2000)),
        1 => respond(
            stream,
            200,
            &format!(
                "{{\"data\":[{{\"embedding\":[{}0]}}]}}",
                "0.25,".repeat(4_000_000)
            ),
        ),
        2 => respond(stream, 200, "{\"data\":[{\"embedding\":[NaN,1]}]}"),
        _ => respond(
            stream,
            200,
            "{\"data\":[{\"embedding\":[[1,2],[3]]}],\"extra\":[1,2,3]}",
        ),
    }
}

/// Answers of a hostile model, in turn: endless, a 50 MB answer, a broken one.
fn hostile_model(n: usize, stream: &mut TcpStream) {
    match n % 3 {
        0 => endless(stream, &"{\"choices\":[".repeat(1000)),
        1 => respond(
            stream,
            200,
            &json!({"choices": [{"message": {"content": "x".repeat(50 * 1024 * 1024)}}]})
                .to_string(),
        ),
        _ => respond(
            stream,
            200,
            "{\"choices\": [{\"message\": {\"content\": 7}}]}",
        ),
    }
}

/// `minutes` of hybrid queries, writes and agent runs against hostile
/// providers: the server's RSS every 10 s, and its peak over the RSS it had
/// once its index was built.
fn soak(minutes: f64) {
    let embeds = Arc::new(AtomicUsize::new(0));
    let (embed_base, _) = {
        let embeds = embeds.clone();
        hostile("POST", move |_, stream| {
            hostile_embedding(embeds.fetch_add(1, Ordering::SeqCst), stream)
        })
    };
    let models = Arc::new(AtomicUsize::new(0));
    let (model_base, _) = {
        let models = models.clone();
        hostile("POST", move |_, stream| {
            hostile_model(models.fetch_add(1, Ordering::SeqCst), stream)
        })
    };
    let work = tempfile::tempdir().unwrap();
    let root = seeded_root(work.path());
    for n in 0..500 {
        let text: String = (0..40)
            .map(|i| format!("Note {n} paragraph {i}: tyres, boats, gardens and tomatoes.\n"))
            .collect();
        std::fs::write(root.join(format!("soak{n}.md")), text).unwrap();
    }
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "soak notes"]);
    let server = Server::start_with_env(
        &root,
        &[
            ("MIRAI_EMBED_BASE_URL", &format!("{embed_base}/v1")),
            ("MIRAI_LLM_BASE_URL", &format!("{model_base}/v1")),
            ("MIRAI_LLM_MAX_RETRIES", "0"),
            ("RUST_LOG", "error"),
        ],
    );
    let get = |path: &str| {
        server
            .client
            .get(format!("{}{path}", server.url))
            .send()
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    };
    let post = |path: &str, body: Value| {
        server
            .client
            .post(format!("{}{path}", server.url))
            .json(&body)
            .send()
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    };
    assert_eq!(post("/mcp/index/rebuild", json!({})), 200);
    let baseline = server.rss_mib();
    println!("soak: {minutes} min; RSS once the index is built {baseline:.0} MiB");
    let started = Instant::now();
    let (mut next_sample, mut requests, mut n) = (Duration::ZERO, 0usize, 0usize);
    let mut peak = baseline;
    while started.elapsed() < Duration::from_secs_f64(minutes * 60.0) {
        n += 1;
        get("/mcp/index/query?q=tyres%20boats&mode=hybrid");
        post(
            "/mcp/notes/write",
            json!({"path": format!("soak{}.md", n % 500), "content": format!("Rewritten {n}: boats and tyres.\n")}),
        );
        if n % 5 == 0 {
            post(
                "/agent/run",
                json!({"task": "Summarise the notes about tyres."}),
            );
        }
        requests += if n % 5 == 0 { 3 } else { 2 };
        let rss = server.rss_mib();
        peak = peak.max(rss);
        if started.elapsed() >= next_sample {
            println!(
                "soak: {:>5.0} s  RSS {rss:>6.0} MiB  peak {:>6.0} MiB  threads {:>4.0}  requests {requests}  provider calls {} + {}",
                started.elapsed().as_secs_f64(),
                server.peak_rss_mib(),
                server.threads(),
                embeds.load(Ordering::SeqCst),
                models.load(Ordering::SeqCst)
            );
            next_sample += Duration::from_secs(10);
        }
    }
    let peak = peak.max(server.peak_rss_mib());
    println!(
        "soak: done, {requests} requests; peak RSS {peak:.0} MiB, {:.0} MiB over the {baseline:.0} MiB the built index needed; health {}",
        peak - baseline,
        get("/health")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let timeout = args
        .iter()
        .position(|a| a == "--timeout")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(60);
    // cargo passes `--bench` itself; the one other bare word is the filter.
    let filter = args
        .iter()
        .enumerate()
        .find(|(i, a)| {
            !a.starts_with('-')
                && (*i == 0
                    || !["--timeout", "--before", "--minutes"].contains(&args[i - 1].as_str()))
        })
        .map(|(_, a)| a.clone());
    let before: Option<OsString> = args
        .iter()
        .position(|a| a == "--before")
        .and_then(|i| args.get(i + 1))
        .map(OsString::from);
    if filter.as_deref() == Some("soak") {
        let minutes = args
            .iter()
            .position(|a| a == "--minutes")
            .and_then(|i| args.get(i + 1))
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(5.0);
        soak(minutes);
        return;
    }
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(timeout))
        .build()
        .unwrap();

    let mut baseline_done = false;
    println!(
        "{:<52} {:>12} {:>9} {:>6} {:>16}",
        "case", "median ms", "body KiB", "status", "small write ms"
    );
    for case in cases() {
        if filter
            .as_ref()
            .is_some_and(|f| !case.name.contains(f.as_str()))
        {
            continue;
        }
        let work = tempfile::tempdir().unwrap();
        let root = work.path().join("notes");
        let server = Server::start(&root);
        if !baseline_done {
            let mut health: Vec<f64> = (0..200).map(|_| server.health_ms()).collect();
            let (median, p95) = median_p95(&mut health);
            println!(
                "{:<52} {median:>12.3}   (p95 {p95:.3} ms)",
                "baseline: GET /health"
            );
            baseline_done = true;
        }
        for (path, content) in &case.notes {
            std::fs::write(root.join(path), content).unwrap();
        }
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "seed"]);
        let url = format!("{}{}", server.url, case.route);

        // First run: a small write goes in while the hostile request runs.
        let small_url = format!("{}/mcp/notes/write", server.url);
        let (first, small) = std::thread::scope(|scope| {
            let hostile = scope.spawn(|| send(&client, &url, &case.bodies[0]));
            std::thread::sleep(Duration::from_millis(100));
            let small = send(
                &client,
                &small_url,
                &json!({"path": "small.md", "content": "a small note\n"}),
            );
            (hostile.join().unwrap(), small)
        });
        let mut samples = Vec::new();
        let mut statuses = Vec::new();
        let mut timed_out = false;
        let mut spent = 0.0;
        for run in 0..RUNS {
            let outcome = if run == 0 {
                match &first {
                    Outcome::Done { ms, status } => Outcome::Done {
                        ms: *ms,
                        status: *status,
                    },
                    Outcome::TimedOut => Outcome::TimedOut,
                }
            } else {
                send(&client, &url, &case.bodies[run % case.bodies.len()])
            };
            match outcome {
                Outcome::Done { ms, status } => {
                    samples.push(ms);
                    statuses.push(status);
                    spent += ms / 1000.0;
                }
                Outcome::TimedOut => {
                    timed_out = true;
                    break;
                }
            }
            if spent > CASE_SECONDS {
                break;
            }
        }
        let size = body_bytes(&case.bodies[0]) as f64 / 1024.0;
        let small = match small {
            Outcome::Done { ms, .. } => format!("{ms:.1}"),
            Outcome::TimedOut => format!("> {timeout} s"),
        };
        let status = match statuses.first() {
            Some(s) if *s == case.expect => s.to_string(),
            Some(s) => format!("{s}!"),
            None => "-".into(),
        };
        let median = if timed_out && samples.is_empty() {
            format!("> {} s", timeout)
        } else {
            let (median, _) = median_p95(&mut samples);
            format!("{median:.1}{}", if timed_out { " (+timeout)" } else { "" })
        };
        println!(
            "{:<52} {median:>12} {size:>9.0} {status:>6} {small:>16}   (n={})",
            case.name,
            samples.len()
        );
        drop(server);
    }
    let scenarios: [(&str, fn()); 4] = [
        ("provider: endless embedding answer", endless_embeddings),
        ("provider: endless model answer", endless_model),
        ("sync: flood", sync_flood),
        ("note: 100 MiB note", huge_note),
    ];
    for (name, scenario) in scenarios {
        if filter.as_ref().is_none_or(|f| name.contains(f.as_str())) {
            scenario();
        }
    }
    let second: [(&str, Scenario); 4] = [
        ("revert: 50 notes", revert_cases),
        (
            "sync: clone of a tree Linux cannot hold",
            hostile_tree_clone,
        ),
        ("sync: 60 MCP repo_sync calls", mcp_sync_flood),
        ("sync: sandbox repo.sync", sandbox_sync),
    ];
    for (name, scenario) in second {
        if filter.as_ref().is_none_or(|f| name.contains(f.as_str())) {
            scenario(&before);
        }
    }
}
