//! The change stream's cost and speed, against the real server on loopback:
//! `patch.apply`'s median over HTTP with no stream client and with 64
//! connected (same run: two servers over copies of the same notes, their
//! applies in alternating blocks of ten; the 64 clients are raw sockets one
//! thread sweeps, so the clients' own cost is small beside the server's on a
//! 2-core machine; half the samples with the clients on one server, half on
//! the other, so neither copy's place on the disk favours a side); the time
//! from a write's answer to its `commit` event on a stream, 64 clients
//! connected; the time from an outside save (a file written beside mirai) to
//! its `notes_changed` event.
//!
//! cargo bench --bench events [-- NOTES]   (NOTES: how many notes to seed, default 500)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{git, report, Server};

const SAMPLES: usize = 200;
/// Applies to one server in a row (plus one not counted).
const BLOCK: usize = 10;
const CLIENTS: usize = 64;
const SAVES: usize = 20;

/// One event off the wire, with when it arrived.
struct Arrived {
    kind: String,
    data: Value,
    at: Instant,
}

/// Opens `/events?query` and reads it on a thread of its own until `tx` is gone.
fn stream(url: &str, query: &str, tx: mpsc::Sender<Arrived>, count: Arc<AtomicUsize>) {
    let client = reqwest::blocking::Client::builder()
        .timeout(None::<Duration>)
        .build()
        .unwrap();
    let response = client
        .get(format!("{url}/events{query}"))
        .send()
        .expect("the stream opens");
    assert_eq!(response.status(), 200, "stream refused");
    std::thread::spawn(move || {
        let (mut kind, mut data) = (String::new(), String::new());
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            if line.is_empty() && !data.is_empty() {
                let at = Instant::now();
                count.fetch_add(1, Ordering::Relaxed);
                let arrived = Arrived {
                    kind: std::mem::take(&mut kind),
                    data: serde_json::from_str(&std::mem::take(&mut data)).unwrap(),
                    at,
                };
                if tx.send(arrived).is_err() {
                    return;
                }
                data.clear();
            } else if let Some(v) = line.strip_prefix("event: ") {
                kind = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = v.to_string();
            }
        }
    });
}

/// Opens `n` streams on raw sockets and reads them all from ONE thread that
/// sweeps them without blocking (sleeping 5 ms when none had bytes), counting
/// their frames: the clients' own cost on this 2-core machine stays one
/// thread's, so what the comparison shows is the server's.
fn counting_streams(
    url: &str,
    n: usize,
    count: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let address = url.trim_start_matches("http://").to_string();
    let mut sockets: Vec<(std::net::TcpStream, Frames)> = (0..n)
        .map(|_| {
            let mut socket = std::net::TcpStream::connect(&address).unwrap();
            std::io::Write::write_all(
                &mut socket,
                format!(
                    "GET /events HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
            socket.set_nonblocking(true).unwrap();
            (socket, Frames::default())
        })
        .collect();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        // Stopped: the sockets close as the thread ends.
        while !stop.load(Ordering::Relaxed) {
            let mut read_any = false;
            for (socket, frames) in sockets.iter_mut() {
                loop {
                    match socket.read(&mut buf) {
                        Ok(0) => return,
                        Ok(got) => {
                            read_any = true;
                            count.fetch_add(frames.count(&buf[..got]), Ordering::Relaxed);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(_) => return,
                    }
                }
            }
            if !read_any {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    })
}

/// Counts one raw stream's frames: each `data:` line after the response's
/// header (right after a newline: "\ndata: ").
#[derive(Default)]
struct Frames {
    /// The header as read so far, until its end is seen.
    header: Vec<u8>,
    in_body: bool,
    /// The last byte of the body read so far.
    last: u8,
}

impl Frames {
    fn count(&mut self, bytes: &[u8]) -> usize {
        if self.in_body {
            return self.scan(bytes);
        }
        self.header.extend_from_slice(bytes);
        let Some(end) = self.header.windows(4).position(|w| w == b"\r\n\r\n") else {
            return 0;
        };
        self.in_body = true;
        let body = self.header.split_off(end + 4);
        self.header = Vec::new();
        self.last = b'\n'; // the body starts a line
        self.scan(&body)
    }

    fn scan(&mut self, bytes: &[u8]) -> usize {
        let mut frames = 0;
        for &b in bytes {
            if self.last == b'\n' && b == b'd' {
                frames += 1;
            }
            self.last = b;
        }
        frames
    }
}

/// Seeds `root` with `notes` notes in one commit.
fn seed(root: &Path, notes: usize) {
    std::fs::create_dir_all(root).unwrap();
    git(root, &["init", "-q", "-b", "main"]);
    for i in 0..notes {
        let folder = root.join(format!("f{}", i % 20));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join(format!("note{i}.md")),
            format!("# Note {i}\n\nsome text\nmore text\nend\n"),
        )
        .unwrap();
    }
    git(root, &["add", "-A"]);
    git(
        root,
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "seed",
        ],
    );
}

/// One `patch.apply` creating note `bench/{tag}{i}.md`: its time and its answer's commit.
fn apply(server: &Server, tag: &str, i: usize) -> (f64, String, Instant) {
    let patch = format!("--- /dev/null\n+++ b/bench/{tag}{i}.md\n@@ -0,0 +1 @@\n+line {i}\n");
    let started = Instant::now();
    let answer: Value = server
        .client
        .post(format!("{}/mcp/patch/apply", server.url))
        .json(&json!({"patch": patch}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let done = Instant::now();
    let commit = answer["commit"].as_str().expect("a commit").to_string();
    ((done - started).as_secs_f64() * 1000.0, commit, done)
}

fn main() {
    let notes: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let work = tempfile::tempdir().unwrap();
    // Two servers over two copies of the same notes: one with no stream
    // client, one with 64; their applies alternate, so the machine's other
    // load falls on both alike.
    let root = work.path().join("notes");
    let quiet_root = work.path().join("quiet");
    seed(&root, notes);
    support::copy_tree(&root, &quiet_root);
    let server = Server::start(&root);
    let quiet = Server::start(&quiet_root);
    // The index loaded on both, as a write updates it: outside saves are
    // compared from now on.
    for s in [&server, &quiet] {
        s.client
            .get(format!("{}/mcp/index/query?q=note", s.url))
            .send()
            .unwrap();
    }
    println!("events bench: {notes} notes, {SAMPLES} applies per case, {CLIENTS} stream clients");
    for i in 0..5 {
        apply(&server, "warm", i);
        apply(&quiet, "warm", i);
    }
    // In blocks of BLOCK applies to one server, then to the other (which
    // goes first alternates), each block's first apply not counted: a write
    // to the streamed server is delivered to 64 clients after its answer, and
    // that work must fall on the applies of the server it belongs to (a
    // client writing in a loop there), not on the other server's next apply.
    // Half the blocks with the clients on one server, half on the other.
    let (mut none, mut with) = (Vec::new(), Vec::new());
    let (mut delivered, mut told) = (0, 0);
    let mut counter = 0;
    for (streamed, unstreamed) in [(&server, &quiet), (&quiet, &server)] {
        let received = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let sweeper = counting_streams(&streamed.url, CLIENTS, received.clone(), stop.clone());
        // Every client subscribed: the first write reaches all 64.
        let deadline = Instant::now() + Duration::from_secs(10);
        apply(streamed, "ready", counter);
        counter += 1;
        while received.load(Ordering::Relaxed) < CLIENTS && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut applied = 1;
        for block in 0..SAMPLES / BLOCK / 2 {
            for to_streamed in [block % 2 == 1, block % 2 == 0] {
                for j in 0..=BLOCK {
                    counter += 1;
                    let (target, times) = if to_streamed {
                        applied += 1;
                        (streamed, &mut with)
                    } else {
                        (unstreamed, &mut none)
                    };
                    let ms = apply(target, "b", counter).0;
                    if j > 0 {
                        times.push(ms);
                    }
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while received.load(Ordering::Relaxed) < applied * CLIENTS && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        delivered += received.load(Ordering::Relaxed);
        told += applied * CLIENTS;
        stop.store(true, Ordering::Relaxed);
        sweeper.join().unwrap();
        // The closed streams are noticed at the next write, not counted.
        apply(streamed, "closed", counter);
        counter += 1;
    }
    let none_median = report("patch.apply, no stream client", &mut none);
    let with_median = report("patch.apply, 64 stream clients", &mut with);
    println!(
        "{:<44} {:+.1} %",
        "median change with 64 clients",
        (with_median / none_median - 1.0) * 100.0
    );
    println!(
        "{:<44} {delivered} of {told}",
        "commit events received by the 64 clients"
    );

    // Answer -> event on a client that parses its stream, 63 others connected.
    let received = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    stream(&server.url, "", tx, received.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let sweeper = counting_streams(&server.url, CLIENTS - 1, received, stop.clone());
    let mut answered = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let (_, commit, done) = apply(&server, "lag", i);
        answered.push((commit, done));
    }
    let mut arrivals: HashMap<String, Instant> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while arrivals.len() < answered.len() && Instant::now() < deadline {
        if let Ok(event) = rx.recv_timeout(Duration::from_millis(100)) {
            if event.kind == "commit" {
                arrivals.insert(event.data["commit"].as_str().unwrap().to_string(), event.at);
            }
        }
    }
    let mut lags: Vec<f64> = answered
        .iter()
        .map(|(commit, answered)| {
            let at = arrivals.get(commit).expect("every commit told");
            // An event that came before the answer was read counts as 0.
            at.saturating_duration_since(*answered).as_secs_f64() * 1000.0
        })
        .collect();
    report("write answered -> its commit event", &mut lags);
    stop.store(true, Ordering::Relaxed);
    sweeper.join().unwrap();

    // An outside save -> its notes_changed event.
    let mut saves = Vec::with_capacity(SAVES);
    for i in 0..SAVES {
        let rel = format!("f{}/note{i}.md", i % 20);
        std::thread::sleep(Duration::from_millis(700));
        while rx.try_recv().is_ok() {}
        let saved = Instant::now();
        std::fs::write(
            root.join(&rel),
            format!("# Note {i}\n\nsaved outside {i}\n"),
        )
        .unwrap();
        let deadline = saved + Duration::from_secs(10);
        let at = loop {
            let event = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the save is told");
            if event.kind == "notes_changed"
                && event.data["paths"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p == &json!(rel))
            {
                break event.at;
            }
        };
        saves.push((at - saved).as_secs_f64() * 1000.0);
    }
    report("outside save -> notes_changed (inotify)", &mut saves);
}
