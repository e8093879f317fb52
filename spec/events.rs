//! The change stream (`GET /events`, `mirai watch`): every event type from
//! each source (mirai's writes, a person's git commit, amend and reset, an
//! editor's save, a pull from a bare remote, proposals decided here and by the
//! CLI, an agent run, the index, sync rounds), resuming with `Last-Event-ID`
//! inside and past the backlog, filters, a stalled client reset while writes go
//! on, and the client limit; all over a real server on loopback, read by a
//! real SSE reader.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::fake_llm::FakeLlm;
use crate::common::{git, mirai_cli, send, TestServer};
use mirai::config::{Config, GitCredentials, PolicyMode, SyncConfig, Transport};
use serde_json::{json, Value};

/// How long an event may take to arrive in these specs (outside changes
/// arrive within the watcher's settle time; this leaves room for a busy machine).
const WITHIN: Duration = Duration::from_secs(10);

/// One event as read off the wire.
#[derive(Debug, Clone)]
struct Ev {
    id: String,
    kind: String,
    data: Value,
}

/// Reads SSE frames from `reader` into `tx` until the stream ends.
fn read_frames(reader: impl Read, tx: mpsc::Sender<Ev>) {
    let mut lines = BufReader::new(reader).lines();
    let (mut id, mut kind, mut data) = (String::new(), String::new(), String::new());
    while let Some(Ok(line)) = lines.next() {
        if line.is_empty() {
            if !data.is_empty() {
                let ev = Ev {
                    id: std::mem::take(&mut id),
                    kind: std::mem::take(&mut kind),
                    data: serde_json::from_str(&std::mem::take(&mut data)).expect("data is JSON"),
                };
                if tx.send(ev).is_err() {
                    return;
                }
            }
        } else if let Some(v) = line.strip_prefix("id: ") {
            id = v.to_string();
        } else if let Some(v) = line.strip_prefix("event: ") {
            kind = v.to_string();
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = v.to_string();
        }
    }
}

/// A client of `GET /events`, read on a thread of its own.
struct Stream {
    rx: mpsc::Receiver<Ev>,
}

impl Stream {
    /// Opens `/events?query` (after `last_id`); answers once the stream is open.
    fn open(server: &TestServer, query: &str, last_id: Option<&str>) -> Stream {
        let client = reqwest::blocking::Client::builder()
            .timeout(None::<Duration>)
            .build()
            .unwrap();
        let mut request = client.get(format!("{}/events{query}", server.url));
        if let Some(id) = last_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().expect("the stream opens");
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || read_frames(response, tx));
        Stream { rx }
    }

    /// The next event, if one comes within `within`.
    fn next(&self, within: Duration) -> Option<Ev> {
        self.rx.recv_timeout(within).ok()
    }

    /// Events until one of type `kind` that `matches` comes (panics after [`WITHIN`]).
    fn until(&self, kind: &str, matches: impl Fn(&Value) -> bool) -> (Ev, Vec<Ev>) {
        let deadline = Instant::now() + WITHIN;
        let mut seen = Vec::new();
        while let Some(ev) = self.next(deadline.saturating_duration_since(Instant::now())) {
            if ev.kind == kind && matches(&ev.data) {
                return (ev, seen);
            }
            seen.push(ev);
        }
        panic!("no {kind} event came; saw {seen:#?}");
    }
}

fn write(server: &TestServer, path: &str, content: &str) -> Value {
    let answer = server.post_json(
        "/mcp/notes/write",
        &json!({"path": path, "content": content}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

fn person(root: &Path, args: &[&str]) -> String {
    let mut all = vec!["-c", "user.name=Pat", "-c", "user.email=pat@example.com"];
    all.extend_from_slice(args);
    git(root, &all)
}

/// Makes the server load its index, so the watcher compares what changes next.
fn index_loaded(server: &TestServer) {
    assert_eq!(server.get("/mcp/index/query?q=anything").status, 200);
}

#[test]
fn a_write_is_one_commit_event_from_mirai_told_after_its_bytes_are_readable() {
    let server = TestServer::with_note("a.md", "one\n");
    let stream = Stream::open(&server, "", None);
    let answer = write(&server, "a.md", "two\n");
    let (ev, _) = stream.until("commit", |d| d["source"] == "mirai");
    assert_eq!(ev.data["commit"], answer["commit"], "{ev:?}");
    assert_eq!(ev.data["parents"].as_array().unwrap().len(), 1);
    assert_eq!(ev.data["author"], "mirai");
    assert_eq!(ev.data["paths"], json!([{"path": "a.md", "status": "M"}]));
    assert_eq!(ev.data["paths_omitted"], 0);
    assert!(
        ev.data["subject"].as_str().unwrap().contains("a.md"),
        "{ev:?}"
    );
    assert!(
        !ev.data.to_string().contains("two"),
        "events carry no contents"
    );
    assert_eq!(server.read("a.md").body["content"], "two\n");
    assert!(ev.id.contains('-'), "{ev:?}");
    // One event per commit: nothing else about it follows.
    if let Some(more) = stream.next(Duration::from_millis(800)) {
        assert_ne!(
            more.data["commit"], answer["commit"],
            "told twice: {more:?}"
        );
    }
}

#[test]
fn an_attachments_write_and_delete_are_commit_events_like_a_notes() {
    let server = TestServer::with_note("a.md", "one\n");
    let stream = Stream::open(&server, "", None);
    let answer = server.post_json(
        "/mcp/files/write",
        &json!({"path": "img/x.png", "content_base64": "iVBORw=="}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    let (ev, _) = stream.until("commit", |d| d["commit"] == answer.body["commit"]);
    assert_eq!(ev.data["source"], "mirai");
    assert_eq!(
        ev.data["paths"],
        json!([{"path": "img/x.png", "status": "A"}])
    );
    let answer = server.post_json("/mcp/files/delete", &json!({"path": "img/x.png"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    let (ev, _) = stream.until("commit", |d| d["commit"] == answer.body["commit"]);
    assert_eq!(
        ev.data["paths"],
        json!([{"path": "img/x.png", "status": "D"}])
    );
}

#[test]
fn a_persons_save_commit_amend_and_reset_are_told_as_outside() {
    let server = TestServer::with_note("a.md", "one\n");
    index_loaded(&server);
    let stream = Stream::open(&server, "", None);
    server.write("a.md", "one\nsaved by an editor\n");
    let (saved, _) = stream.until("notes_changed", |_| true);
    assert_eq!(saved.data, json!({"paths": ["a.md"], "source": "outside"}));

    person(&server.root, &["commit", "-qam", "by hand"]);
    let by_hand = server.head();
    let (ev, _) = stream.until("commit", |d| d["subject"] == "by hand");
    assert_eq!(ev.data["source"], "outside");
    assert_eq!(ev.data["author"], "Pat");
    assert_eq!(ev.data["commit"], by_hand.as_str());
    assert_eq!(ev.data["paths"], json!([{"path": "a.md", "status": "M"}]));

    person(&server.root, &["commit", "-q", "--amend", "-m", "amended"]);
    let amended = server.head();
    let (moved, _) = stream.until("head_moved", |_| true);
    assert_eq!(
        moved.data,
        json!({"from": by_hand, "to": amended, "source": "outside"})
    );
    let (ev, _) = stream.until("commit", |d| d["subject"] == "amended");
    assert_eq!(ev.data["commit"], amended.as_str());

    person(&server.root, &["reset", "-q", "--hard", "HEAD~1"]);
    let (moved, _) = stream.until("head_moved", |_| true);
    assert_eq!(moved.data["from"], amended.as_str());
    assert_eq!(moved.data["to"], server.head().as_str());

    // mirai's next write builds on the reset branch and is told once, as mirai's.
    let answer = write(&server, "b.md", "bee\n");
    let (ev, seen) = stream.until("commit", |d| d["source"] == "mirai");
    assert_eq!(ev.data["commit"], answer["commit"]);
    assert!(
        seen.iter().all(|e| e.kind != "commit"),
        "no other commit told: {seen:?}"
    );
}

#[test]
fn resuming_replays_inside_the_backlog_and_resets_past_it_or_from_another_start() {
    let server = TestServer::start_with(|c| c.events.backlog = 3);
    let stream = Stream::open(&server, "?types=commit", None);
    let ids: Vec<String> = (0..5)
        .map(|i| {
            write(&server, &format!("n{i}.md"), "x\n");
            stream.until("commit", |_| true).0.id
        })
        .collect();
    // After the fourth: the fifth alone, from the backlog.
    let resumed = Stream::open(&server, "?types=commit", Some(&ids[3]));
    let ev = resumed.next(WITHIN).expect("the fifth");
    assert_eq!(ev.id, ids[4]);
    // After the first: the second is gone, so a reset comes first.
    let past = Stream::open(&server, "", Some(&ids[0]));
    let ev = past.next(WITHIN).expect("a reset");
    assert_eq!(ev.kind, "reset", "{ev:?}");
    assert!(ev.data["reason"]
        .as_str()
        .unwrap()
        .contains("MIRAI_EVENTS_BACKLOG"));
    assert_eq!(ev.id, ids[4], "resume from the newest after re-reading");
    // An id from an earlier start of the server.
    let other = Stream::open(&server, "", Some("0123456789ab-2"));
    let ev = other.next(WITHIN).expect("a reset");
    assert_eq!(ev.kind, "reset");
    assert!(ev.data["reason"]
        .as_str()
        .unwrap()
        .contains("earlier start"));
    // Both go on with new events.
    let answer = write(&server, "later.md", "x\n");
    for stream in [&past, &other] {
        let (ev, _) = stream.until("commit", |_| true);
        assert_eq!(ev.data["commit"], answer["commit"]);
    }
}

#[test]
fn filters_keep_the_types_asked_for_and_paths_under_the_prefix() {
    let server = TestServer::start();
    let stream = Stream::open(&server, "?types=commit,index&path_prefix=work/", None);
    write(&server, "home/a.md", "x\n");
    let kept = write(&server, "work/b.md", "x\n");
    assert_eq!(
        server.post_json("/mcp/index/rebuild", &json!({})).status,
        200
    );
    let first = stream.next(WITHIN).expect("the work commit");
    assert_eq!(first.kind, "commit");
    assert_eq!(first.data["commit"], kept["commit"]);
    let second = stream.next(WITHIN).expect("the index event");
    assert_eq!(second.kind, "index");
    assert_eq!(second.data["stale"], false);
    assert!(
        second.data["notes_indexed"].as_u64().unwrap() >= 2,
        "{second:?}"
    );

    let refused = send(
        server
            .raw()
            .get(format!("{}/events?types=commits", server.url)),
    );
    refused.assert_error(400, "invalid_request");
    assert!(refused.body.to_string().contains("notes_changed"));
}

#[test]
fn past_the_client_limit_a_stream_is_refused_until_one_closes() {
    let server = TestServer::start_with(|c| c.events.max_clients = 2);
    let first = Stream::open(&server, "", None);
    let _second = Stream::open(&server, "", None);
    let refused = send(server.raw().get(format!("{}/events", server.url)));
    refused.assert_error(503, "too_many_streams");
    assert!(refused
        .body
        .to_string()
        .contains("MIRAI_EVENTS_MAX_CLIENTS"));
    drop(first);
    // The server notices the closed stream when it next writes to it.
    write(&server, "a.md", "x\n");
    let deadline = Instant::now() + WITHIN;
    loop {
        let client = reqwest::blocking::Client::builder()
            .timeout(None::<Duration>)
            .build()
            .unwrap();
        let answer = client.get(format!("{}/events", server.url)).send().unwrap();
        if answer.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed stream never freed its place"
        );
        write(&server, "a.md", &format!("{:?}\n", Instant::now()));
    }
}

#[test]
fn a_stalled_client_gets_reset_and_is_closed_while_writes_go_on() {
    let server = TestServer::start();
    // A client that asks for the stream and then reads nothing, with a small receive buffer.
    let addr: std::net::SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();
    let stalled = stalled_client(addr);
    let mut stalled_writer = stalled.try_clone().unwrap();
    write!(
        stalled_writer,
        "GET /events?types=index,commit HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .unwrap();
    let watching = Stream::open(&server, "?types=index,commit", None);
    // First the socket's buffers fill: a person's commits with 64 KiB subjects
    // (the kernel holds a few MiB for a reader that reads nothing).
    let subject = server.dir.path().join("subject");
    std::fs::write(&subject, "s".repeat(64 * 1024)).unwrap();
    let big = 100;
    for _ in 0..big {
        let file = subject.to_str().unwrap();
        person(&server.root, &["commit", "-q", "--allow-empty", "-F", file]);
    }
    for _ in 0..big {
        watching.until("commit", |d| d["source"] == "outside");
    }
    // Then writes at full speed, each one event: the stalled queue overflows.
    let started = Instant::now();
    let writes = 1500;
    for _ in 0..writes {
        let answer = server.post_json("/mcp/index/invalidate", &json!({}));
        assert_eq!(answer.status, 200);
    }
    let took = started.elapsed();
    // The reading client got every one of them.
    for _ in 0..writes {
        watching.until("index", |_| true);
    }
    // The stalled one, read at last: what fitted, then a reset, then the end.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || read_frames(BufReader::new(stalled).skip_head(), tx));
    let got: Vec<Ev> =
        std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(3)).ok()).collect();
    let last = got.last().expect("some events");
    assert_eq!(last.kind, "reset", "{} events, last {last:?}", got.len());
    assert!(last.data["reason"].as_str().unwrap().contains("behind"));
    assert!(
        got.len() < big + writes,
        "closed before the end: {}",
        got.len()
    );
    eprintln!(
        "{writes} writes in {took:?} with a stalled client; it got {} events, then reset",
        got.len() - 1
    );
}

/// A raw `GET /events` on a connection of its own, once its answer's head has come.
fn raw_stream(server: &TestServer, receive_buffer_small: bool) -> TcpStream {
    let addr: std::net::SocketAddr = server.url.trim_start_matches("http://").parse().unwrap();
    let mut stream = if receive_buffer_small {
        stalled_client(addr)
    } else {
        TcpStream::connect(addr).unwrap()
    };
    write!(stream, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the stream opens");
    stream
}

/// Whether `/events` accepts one more stream now (the probe is closed at once).
fn accepts_a_stream(server: &TestServer) -> bool {
    let answer = reqwest::blocking::Client::new()
        .get(format!("{}/events?types=sync", server.url))
        .timeout(Duration::from_millis(500))
        .send();
    answer.is_ok_and(|answer| answer.status() == 200)
}

/// A client that closes its stream gives its place back at once (its close
/// is noticed without waiting for the next write), and MCP's streams take
/// places under the same limit.
#[test]
fn a_closed_stream_frees_its_place_at_once_and_mcp_streams_count_too() {
    let server = TestServer::start_with(|c| c.events.max_clients = 1);
    let stream = raw_stream(&server, false);
    let refused = send(server.raw().get(format!("{}/events", server.url)));
    refused.assert_error(503, "too_many_streams");
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        "notifications": {"resourcesListChanged": true},
    }});
    let listened = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(&listen)
        .timeout(Duration::from_secs(2))
        .send()
        .unwrap();
    assert_eq!(listened.status().as_u16(), 503);
    let answer: Value = listened.json().unwrap();
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("MIRAI_EVENTS_MAX_CLIENTS"));
    drop(stream);
    // No write happens: the close alone gives the place back, within a moment.
    let deadline = Instant::now() + Duration::from_secs(3);
    while !accepts_a_stream(&server) {
        assert!(
            Instant::now() < deadline,
            "the closed stream kept its place"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A client that stops reading keeps its place while its socket is open,
/// even after the hub dropped it for falling behind; a stream whose
/// connection takes nothing for 20 s is then closed, which frees the place.
#[test]
fn a_stalled_stream_is_counted_until_its_connection_is_closed() {
    let server = TestServer::start_with(|c| c.events.max_clients = 2);
    let stalled = raw_stream(&server, true);
    let watching = Stream::open(&server, "?types=index,commit", None);
    let subject = server.dir.path().join("subject");
    std::fs::write(&subject, "s".repeat(64 * 1024)).unwrap();
    for _ in 0..100 {
        let file = subject.to_str().unwrap();
        person(&server.root, &["commit", "-q", "--allow-empty", "-F", file]);
    }
    for _ in 0..100 {
        watching.until("commit", |d| d["source"] == "outside");
    }
    for _ in 0..1500 {
        assert_eq!(
            server.post_json("/mcp/index/invalidate", &json!({})).status,
            200
        );
    }
    for _ in 0..1500 {
        watching.until("index", |_| true);
    }
    // The stalled stream fell behind (the hub feeds it no more) but its socket is open.
    let refused = send(server.raw().get(format!("{}/events", server.url)));
    refused.assert_error(503, "too_many_streams");
    // Then its connection is closed for taking nothing, and its place is free.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !accepts_a_stream(&server) {
        assert!(
            Instant::now() < deadline,
            "the stalled stream was never closed"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut rest = Vec::new();
    let mut stalled = stalled;
    stalled
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let ended = stalled.read_to_end(&mut rest);
    assert!(
        ended.is_ok()
            || ended
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the server closed it: {ended:?}"
    );
}

/// A TCP connection to `addr` whose receive buffer is as small as the kernel allows.
fn stalled_client(addr: std::net::SocketAddr) -> TcpStream {
    use nix::sys::socket::{
        connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    setsockopt(&fd, sockopt::RcvBuf, &1024).unwrap();
    let std::net::SocketAddr::V4(v4) = addr else {
        panic!("loopback v4")
    };
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn::from(v4)).unwrap();
    TcpStream::from(fd)
}

/// Skipping an HTTP response's head (and its chunked framing's size lines,
/// which hold no `data:`), leaving the body's lines.
trait SkipHead: Sized {
    fn skip_head(self) -> Self;
}

impl<R: BufRead> SkipHead for R {
    fn skip_head(mut self) -> Self {
        let mut line = String::new();
        while self.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
            line.clear();
        }
        self
    }
}

#[test]
fn a_pull_and_a_replay_from_a_bare_remote_are_told_as_sync_with_the_round() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote.git");
    let person_root = dir.path().join("person");
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
            person_root.to_str().unwrap(),
        ],
    );
    git(&person_root, &["checkout", "-q", "-b", "main"]);
    std::fs::write(person_root.join("a.md"), "alpha\n").unwrap();
    person(&person_root, &["add", "-A"]);
    person(&person_root, &["commit", "-qm", "seed"]);
    person(&person_root, &["push", "-q", "origin", "main"]);
    let sync = SyncConfig {
        remote: remote.to_str().unwrap().to_string(),
        transport: Transport::of(remote.to_str().unwrap()).unwrap(),
        branch: None,
        credentials: GitCredentials::None,
        interval_secs: 0,
    };
    let notes = dir.path().join("notes");
    let root = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(root, notes, |c: &mut Config| c.sync = Some(sync));
    let stream = Stream::open(&server, "?types=commit,sync,head_moved", None);

    std::fs::write(person_root.join("b.md"), "beta\n").unwrap();
    person(&person_root, &["add", "-A"]);
    person(&person_root, &["commit", "-qm", "from afar"]);
    person(&person_root, &["push", "-q", "origin", "main"]);
    let pushed = git(&person_root, &["rev-parse", "HEAD"]).trim().to_string();
    // mirai's own commit meanwhile: its push is refused (never forced), so the pull replays it.
    let local = write(&server, "c.md", "sea\n");
    let (ev, _) = stream.until("commit", |d| d["source"] == "mirai");
    assert_eq!(ev.data["commit"], local["commit"]);
    let answer = server.post_json("/mcp/repo/sync", &json!({}));
    assert_eq!(answer.status, 200, "{answer:?}");

    let (moved, _) = stream.until("head_moved", |_| true);
    assert_eq!(moved.data["from"], local["commit"]);
    assert_eq!(moved.data["source"], "sync");
    let (ev, seen) = stream.until("commit", |d| d["subject"] == "from afar");
    assert!(seen.iter().all(|e| e.kind != "commit"), "{seen:?}");
    assert_eq!(ev.data["source"], "sync");
    assert_eq!(ev.data["commit"], pushed.as_str());
    assert_eq!(ev.data["paths"], json!([{"path": "b.md", "status": "A"}]));
    assert!(ev.data.get("replaces").is_none());
    let (replayed, _) = stream.until("commit", |d| d["replaces"] == local["commit"]);
    assert_eq!(replayed.data["source"], "sync");
    assert_eq!(replayed.data["commit"], server.head().as_str());
    assert_eq!(moved.data["to"], server.head().as_str());
    assert_eq!(server.read("b.md").body["content"], "beta\n");
    let (round, _) = stream.until("sync", |d| d["pulled"] == true);
    assert_eq!(round.data["last_error"], Value::Null);
    assert_eq!(round.data["unmerged"], json!([]));
}

const REVIEWER: &str = "reviewer-s3cret";

#[test]
fn proposals_are_told_when_filed_applied_here_and_rejected_by_the_cli() {
    let server = TestServer::start_with(|c| {
        c.policy = PolicyMode::Review;
        c.reviewer_token = Some(REVIEWER.into());
    });
    server.write("todo.md", "# Todo\n");
    server.commit_all();
    let stream = Stream::open(&server, "?types=proposal,commit", None);
    let mut ids = Vec::new();
    for path in ["a.md", "b.md"] {
        let answer = server.post_json("/mcp/notes/write", &json!({"path": path, "content": "x\n"}));
        assert_eq!(answer.status, 202, "{answer:?}");
        let id = answer.body["proposal"].as_str().unwrap().to_string();
        let (ev, _) = stream.until("proposal", |d| d["id"] == id.as_str());
        assert_eq!(
            ev.data,
            json!({"id": id, "status": "pending", "paths": [path]})
        );
        ids.push(id);
    }
    let approved = send(
        server
            .raw()
            .post(format!("{}/mcp/proposals/approve", server.url))
            .bearer_auth(REVIEWER)
            .json(&json!({"id": ids[0]})),
    );
    assert_eq!(approved.status, 200, "{approved:?}");
    let (commit, _) = stream.until("commit", |d| d["source"] == "mirai");
    assert_eq!(commit.data["commit"], approved.body["commit"]);
    let (ev, _) = stream.until("proposal", |d| d["status"] == "applied");
    assert_eq!(ev.data["id"], ids[0].as_str());

    let out = mirai_cli()
        .env("NOTES_ROOT", &server.root)
        .args(["proposals", "reject", &ids[1]])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (ev, _) = stream.until("proposal", |d| d["status"] == "rejected");
    assert_eq!(ev.data["id"], ids[1].as_str());
}

#[test]
fn an_agent_run_is_told_as_it_starts_steps_and_ends_with_its_commit() {
    let llm = FakeLlm::fixture("read-edit-reply");
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|c| {
        c.llm.base_url = base_url;
        c.llm.model = "fake-model".into();
    });
    server.write("todo.md", "# Todo\n\n- buy milk\n- water the plants\n");
    server.commit_all();
    let stream = Stream::open(&server, "?types=run,commit", None);
    let report = server.post_json("/agent/run", &json!({"task": "Make the milk oat milk."}));
    assert_eq!(report.status, 200, "{report:?}");
    let run_id = report.body["run_id"].as_str().unwrap();
    let (started, _) = stream.until("run", |d| d["status"] == "started");
    assert_eq!(
        started.data,
        json!({"run_id": run_id, "status": "started", "step": 0})
    );
    let (commit, _) = stream.until("commit", |d| d["run_id"] == run_id);
    assert_eq!(commit.data["source"], "mirai");
    let (ended, steps) = stream.until("run", |d| d["status"] == "ended");
    assert!(
        steps.iter().any(|e| e.data["status"] == "step"),
        "{steps:?}"
    );
    assert_eq!(ended.data["stopped"], "reply");
    assert!(ended.data["step"].as_u64().unwrap() >= 1);
}

#[test]
fn mirai_watch_prints_one_json_line_per_event() {
    let server = TestServer::start();
    let mut child = mirai_cli()
        .args(["watch", "--url", &server.url, "--types", "commit"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The CLI connects on its own time: write until its first line comes.
    let deadline = Instant::now() + WITHIN;
    let line = loop {
        let answer = write(&server, "a.md", &format!("{:?}\n", Instant::now()));
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
            break (line, answer);
        }
        assert!(Instant::now() < deadline, "mirai watch printed nothing");
    };
    let _ = child.kill();
    let _ = child.wait();
    let printed: Value = serde_json::from_str(&line.0).expect("one JSON line");
    assert_eq!(printed["type"], "commit");
    assert!(printed["id"].as_str().unwrap().contains('-'));
    assert_eq!(printed["data"]["source"], "mirai");
    assert_eq!(printed["data"]["paths"][0]["path"], "a.md");
}

/// One raw POST to /mcp within `session` (none: `initialize`).
fn mcp_post(
    server: &TestServer,
    session: Option<&str>,
    body: Value,
) -> reqwest::blocking::Response {
    let mut request = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    request.send().unwrap()
}

fn mcp_session(server: &TestServer) -> String {
    let response = mcp_post(
        server,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    assert_eq!(response.status().as_u16(), 200);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = response.json().unwrap();
    assert_eq!(
        body["result"]["capabilities"]["resources"],
        json!({"subscribe": true, "listChanged": true})
    );
    session
}

fn rpc(server: &TestServer, session: &str, method: &str, uri: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"uri": uri}});
    mcp_post(server, Some(session), body).json().unwrap()
}

/// The session's GET /mcp stream, its messages read on a thread of its own.
fn session_stream(server: &TestServer, session: &str) -> mpsc::Receiver<Ev> {
    let client = reqwest::blocking::Client::builder()
        .timeout(None::<Duration>)
        .build()
        .unwrap();
    let response = client
        .get(format!("{}/mcp", server.url))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || read_frames(response, tx));
    rx
}

/// Notifications until one with `method` (and `uri`, when given) comes.
fn notified(rx: &mpsc::Receiver<Ev>, method: &str, uri: Option<&str>) -> Vec<Value> {
    let deadline = Instant::now() + WITHIN;
    let mut seen = Vec::new();
    while let Ok(ev) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let hit = ev.data["method"] == method && uri.is_none_or(|u| ev.data["params"]["uri"] == u);
        seen.push(ev.data);
        if hit {
            return seen;
        }
    }
    panic!("no {method} {uri:?} came; saw {seen:#?}");
}

#[test]
fn mcp_over_http_subscribes_is_notified_from_any_source_and_unsubscribes() {
    let server = TestServer::with_note("a.md", "one\n");
    index_loaded(&server);
    let session = mcp_session(&server);
    assert_eq!(
        rpc(
            &server,
            &session,
            "resources/subscribe",
            "mirai://notes/a.md"
        )["result"],
        json!({})
    );
    let rx = session_stream(&server, &session);
    // A second stream for the same session is refused.
    let again = server
        .raw()
        .get(format!("{}/mcp", server.url))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .unwrap();
    assert_eq!(again.status().as_u16(), 409);

    write(&server, "a.md", "two\n");
    notified(
        &rx,
        "notifications/resources/updated",
        Some("mirai://notes/a.md"),
    );
    // An editor's save is a change too.
    server.write("a.md", "three\n");
    notified(
        &rx,
        "notifications/resources/updated",
        Some("mirai://notes/a.md"),
    );
    // And a person's commit of it.
    person(&server.root, &["commit", "-qam", "saved"]);
    notified(
        &rx,
        "notifications/resources/updated",
        Some("mirai://notes/a.md"),
    );
    // A new note changes the list.
    write(&server, "b.md", "bee\n");
    let seen = notified(&rx, "notifications/resources/list_changed", None);
    assert!(
        seen.iter()
            .all(|n| n["params"]["uri"] != "mirai://notes/b.md"),
        "b.md is not subscribed: {seen:?}"
    );

    assert_eq!(
        rpc(
            &server,
            &session,
            "resources/unsubscribe",
            "mirai://notes/a.md"
        )["result"],
        json!({})
    );
    write(&server, "a.md", "four\n");
    write(&server, "c.md", "sea\n");
    let seen = notified(&rx, "notifications/resources/list_changed", None);
    assert!(
        seen.iter()
            .all(|n| n["method"] != "notifications/resources/updated"),
        "no update after unsubscribing: {seen:?}"
    );
    let bad = rpc(
        &server,
        &session,
        "resources/subscribe",
        "mirai://notes/../x.md",
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[test]
fn mcp_subscriptions_are_bounded_per_session_and_in_all() {
    let server = TestServer::start_with(|c| c.events.mcp_max_subscriptions = 1003);
    let first = mcp_session(&server);
    for i in 0..mirai::mcp::PER_SESSION {
        let answer = rpc(
            &server,
            &first,
            "resources/subscribe",
            &format!("mirai://notes/n{i}.md"),
        );
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
    let refused = rpc(
        &server,
        &first,
        "resources/subscribe",
        "mirai://notes/more.md",
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1000"),
        "{refused}"
    );
    // Subscribing again to one it holds is no new subscription.
    assert_eq!(
        rpc(
            &server,
            &first,
            "resources/subscribe",
            "mirai://notes/n0.md"
        )["result"],
        json!({})
    );
    let second = mcp_session(&server);
    for i in 0..3 {
        let answer = rpc(
            &server,
            &second,
            "resources/subscribe",
            &format!("mirai://notes/m{i}.md"),
        );
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
    let refused = rpc(
        &server,
        &second,
        "resources/subscribe",
        "mirai://notes/m3.md",
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MIRAI_MCP_MAX_SUBSCRIPTIONS"),
        "{refused}"
    );
    // The first session's end gives its subscriptions back.
    let ended = server
        .raw()
        .delete(format!("{}/mcp", server.url))
        .header("mcp-session-id", &first)
        .send()
        .unwrap();
    assert_eq!(ended.status().as_u16(), 204);
    assert_eq!(
        rpc(
            &server,
            &second,
            "resources/subscribe",
            "mirai://notes/m3.md"
        )["result"],
        json!({})
    );
}

#[test]
fn mcp_over_stdio_notifies_between_responses_for_both_revisions() {
    let server = TestServer::with_note("a.md", "one\n");
    let mut child = mirai_cli()
        .arg("mcp")
        .arg("--notes-root")
        .arg(&server.root)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let Ok(message) = serde_json::from_str(&line) else {
                return;
            };
            if tx.send(message).is_err() {
                return;
            }
        }
    });
    let mut send_line = |message: Value| writeln!(stdin, "{message}").unwrap();
    let answer_to = |id: u64| loop {
        let message = rx.recv_timeout(WITHIN).expect("an answer");
        if message["id"] == id {
            return message;
        }
    };
    send_line(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    answer_to(1);
    send_line(
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "mirai://notes/a.md"}}),
    );
    assert_eq!(answer_to(2)["result"], json!({}));
    send_line(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "notes_write", "arguments": {"path": "a.md", "content": "two\n"}}}),
    );
    let mut seen = Vec::new();
    let deadline = Instant::now() + WITHIN;
    while !seen
        .iter()
        .any(|m: &Value| m["method"] == "notifications/resources/updated")
    {
        let message = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no notification; saw {seen:#?}"));
        seen.push(message);
    }
    let note = seen
        .iter()
        .find(|m| m["method"] == "notifications/resources/updated")
        .unwrap();
    assert_eq!(note["params"]["uri"], "mirai://notes/a.md");
    send_line(
        json!({"jsonrpc": "2.0", "id": 4, "method": "resources/unsubscribe", "params": {"uri": "mirai://notes/a.md"}}),
    );
    assert_eq!(answer_to(4)["result"], json!({}));
    // 2026-07-28's listen on the same connection: acknowledged, then tagged notifications.
    send_line(
        json!({"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        "notifications": {"resourceSubscriptions": ["mirai://notes/a.md"]}}}),
    );
    let ack = rx.recv_timeout(WITHIN).expect("the acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        5
    );
    send_line(
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
        "name": "notes_write", "arguments": {"path": "a.md", "content": "three\n"}}}),
    );
    let deadline = Instant::now() + WITHIN;
    let tagged = loop {
        let message = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("a notification of the listen");
        if message["method"] == "notifications/resources/updated" {
            break message;
        }
    };
    assert_eq!(tagged["params"]["uri"], "mirai://notes/a.md");
    assert_eq!(
        tagged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        5
    );
    // On stdio the client ends a listen by cancelling its request: no more of its notifications.
    send_line(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}),
    );
    send_line(
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "notes_write", "arguments": {"path": "a.md", "content": "four\n"}}}),
    );
    let mut answered = None;
    let quiet_until = Instant::now() + Duration::from_secs(3);
    while let Ok(message) = rx.recv_timeout(quiet_until.saturating_duration_since(Instant::now())) {
        assert_ne!(
            message["method"], "notifications/resources/updated",
            "a cancelled listen still notified: {message}"
        );
        if message["id"] == 7 {
            answered = Some(message);
        }
    }
    assert_eq!(
        answered.expect("the write's answer")["result"]["isError"],
        false
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn mcp_2026_subscriptions_listen_acknowledges_then_notifies_with_its_id() {
    let server = TestServer::with_note("a.md", "one\n");
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        "notifications": {
            "resourcesListChanged": true,
            "toolsListChanged": true,
            "resourceSubscriptions": ["mirai://notes/a.md"],
        },
    }});
    let client = reqwest::blocking::Client::builder()
        .timeout(None::<Duration>)
        .build()
        .unwrap();
    let response = client
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || read_frames(response, tx));
    let ack = rx.recv_timeout(WITHIN).expect("the acknowledgement").data;
    assert_eq!(
        ack,
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
            "_meta": {"io.modelcontextprotocol/subscriptionId": 9},
            "notifications": {"resourcesListChanged": true, "resourceSubscriptions": ["mirai://notes/a.md"]},
        }}),
        "tools never change, so their notifications are not offered"
    );
    write(&server, "a.md", "two\n");
    let seen = notified(
        &rx,
        "notifications/resources/updated",
        Some("mirai://notes/a.md"),
    );
    let updated = seen.last().unwrap();
    assert_eq!(
        updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );
    write(&server, "b.md", "bee\n");
    let seen = notified(&rx, "notifications/resources/list_changed", None);
    assert_eq!(
        seen.last().unwrap()["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        9
    );

    // A URI that is no note is the request's error, not a stream.
    let mut bad = body.clone();
    bad["params"]["notifications"]["resourceSubscriptions"] = json!(["mirai://notes/../x.md"]);
    let answer: Value = client
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(&bad)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

#[test]
fn a_quiet_stream_gets_a_keep_alive_comment_after_fifteen_seconds() {
    let server = TestServer::start();
    let client = reqwest::blocking::Client::builder()
        .timeout(None::<Duration>)
        .build()
        .unwrap();
    // Only sync rounds, which never come without a remote: the stream stays quiet.
    let opened = Instant::now();
    let response = client
        .get(format!("{}/events?types=sync", server.url))
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            if tx.send((line, Instant::now())).is_err() {
                return;
            }
        }
    });
    // The opening comment, its blank line, then nothing until the keep-alive.
    let mut lines = Vec::new();
    let at = loop {
        let (line, at) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a line comes within 30 s");
        if line == ": keep-alive" {
            break at;
        }
        lines.push(line);
    };
    assert_eq!(lines, [": mirai change stream", ""], "no event came first");
    let quiet = at.duration_since(opened);
    assert!(
        quiet >= Duration::from_secs(14) && quiet < Duration::from_secs(25),
        "the comment came after {quiet:?}"
    );
}
