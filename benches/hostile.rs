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

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
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
        .find(|(i, a)| !a.starts_with('-') && (*i == 0 || args[i - 1] != "--timeout"))
        .map(|(_, a)| a.clone());
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
}
