//! Attachments written, deleted, moved and taken back (`files.write`,
//! `files.delete`, `notes.move` and `notes.revert` of a file that is not a
//! note): one commit each on the notes' own write path, through every
//! adapter (HTTP with JSON or the raw body, MCP, the sandbox, `mirai call`);
//! refused for notes, hidden paths, types off the allow-list, symlinks and
//! a caller's foreign paths; bounded by MIRAI_MAX_FILE_BYTES before a body
//! is read whole; proposed in review mode with the exact bytes approved;
//! whole or absent after a SIGKILL.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use mirai::config::Config;
use mirai::ops::PolicyMode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::{git, mirai_cli, send, Answer, TestServer};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff\xfe binary";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bytes git holds for `path` at `rev`.
fn in_git(root: &Path, rev: &str, path: &str) -> Vec<u8> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["cat-file", "blob", &format!("{rev}:{path}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{rev}:{path} is in git");
    out.stdout
}

fn subject(root: &Path) -> String {
    git(root, &["log", "-1", "--format=%s"]).trim().to_string()
}

fn clean(root: &Path) {
    assert_eq!(
        git(root, &["status", "--porcelain"]),
        "",
        "the tree equals HEAD"
    );
}

/// A raw upload: the bytes as the body with their media type.
fn upload(server: &TestServer, query: &str, media: &str, bytes: &[u8]) -> Answer {
    send(
        server
            .raw()
            .post(format!("{}/mcp/files/write?{query}", server.url))
            .header("content-type", media)
            .body(bytes.to_vec()),
    )
}

/// MCP's tools/call over Streamable HTTP: the tool result.
fn mcp_call(server: &TestServer, tool: &str, arguments: Value) -> Value {
    let answer: Value = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    answer["result"].clone()
}

fn eval(server: &TestServer, code: &str) -> Value {
    let answer = server.post_json("/agent/eval", &json!({ "code": code }));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

fn call(root: &Path, op: &str, request: &Value) -> Value {
    let out = mirai_cli()
        .args(["call", op, &request.to_string(), "--notes-root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_adapter_writes_and_deletes_an_attachment_as_one_commit() {
    let server = TestServer::with_note("a.md", "![[json.png]] ![[raw.png]]\n");
    let before = server.commit_count();

    // HTTP, JSON with base64.
    let wrote = server.post_json(
        "/mcp/files/write",
        &json!({"path": "assets/json.png", "content_base64": b64(PNG)}),
    );
    assert_eq!(wrote.status, 200, "{wrote:?}");
    let blob = git(&server.root, &["rev-parse", "HEAD:assets/json.png"]);
    assert_eq!(
        wrote.body,
        json!({"path": "assets/json.png", "size": PNG.len(), "media_type": "image/png",
            "blob": blob.trim(), "sha256": sha256(PNG), "commit": server.head()})
    );
    assert_eq!(
        std::fs::read(server.root.join("assets/json.png")).unwrap(),
        PNG
    );
    assert_eq!(in_git(&server.root, "HEAD", "assets/json.png"), PNG);
    assert_eq!(subject(&server.root), "mcp.files_write: assets/json.png");
    assert_eq!(server.commit_count(), before + 1);
    clean(&server.root);
    // The same bytes again change nothing.
    let again = server.post_json(
        "/mcp/files/write",
        &json!({"path": "assets/json.png", "content_base64": b64(PNG)}),
    );
    assert_eq!(again.body["commit"], Value::Null, "{again:?}");
    assert_eq!(server.commit_count(), before + 1);

    // HTTP, the raw body with its media type.
    let raw: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let wrote = upload(&server, "path=assets/raw.png", "image/png", &raw);
    assert_eq!(wrote.status, 200, "{wrote:?}");
    assert_eq!(wrote.body["size"], 70_000);
    assert_eq!(
        std::fs::read(server.root.join("assets/raw.png")).unwrap(),
        raw
    );
    assert_eq!(in_git(&server.root, "HEAD", "assets/raw.png"), raw);
    clean(&server.root);
    // The link graph follows at once: both embeds resolve.
    let listed = server.get("/mcp/files").body;
    assert_eq!(
        listed["files"][0]["linked_from"],
        json!(["a.md"]),
        "{listed}"
    );
    assert_eq!(
        listed["files"][1]["linked_from"],
        json!(["a.md"]),
        "{listed}"
    );

    // MCP.
    let result = mcp_call(
        &server,
        "files_write",
        json!({"path": "mcp/x.pdf", "content_base64": b64(b"%PDF-1.4 mcp")}),
    );
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        std::fs::read(server.root.join("mcp/x.pdf")).unwrap(),
        b"%PDF-1.4 mcp"
    );
    let result = mcp_call(&server, "files_delete", json!({"path": "mcp/x.pdf"}));
    assert_eq!(result["isError"], false, "{result}");
    assert!(!server.root.join("mcp/x.pdf").exists());
    assert_eq!(subject(&server.root), "mcp.files_delete: mcp/x.pdf");

    // The sandbox.
    let body = eval(
        &server,
        &format!(
            "const w = await mirai.files.write({{path: 'js/y.gif', content_base64: '{}'}}); \
             const d = await mirai.files.delete({{path: 'assets/json.png'}}); return [w.size, d.path]",
            b64(b"GIF89a")
        ),
    );
    assert_eq!(body["result"], json!([6, "assets/json.png"]), "{body}");
    assert_eq!(
        std::fs::read(server.root.join("js/y.gif")).unwrap(),
        b"GIF89a"
    );
    assert!(!server.root.join("assets/json.png").exists());
    // A dry run describes the change and writes nothing.
    let dry = server.post_json(
        "/agent/eval",
        &json!({"dry_run": true, "code": format!(
            "return await mirai.files.write({{path: 'dry.webp', content_base64: '{}'}})",
            b64(b"RIFF")
        )}),
    );
    assert_eq!(dry.body["result"]["commit"], Value::Null, "{dry:?}");
    assert_eq!(
        dry.body["changes"][0]["patch"],
        format!(
            "Binary file dry.webp\n--- /dev/null\n+++ binary, 4 bytes, sha256 {}\n",
            sha256(b"RIFF")
        )
    );
    assert!(!server.root.join("dry.webp").exists());

    // mirai call.
    let answer = call(
        &server.root,
        "files.write",
        &json!({"path": "cli/z.jpg", "content_base64": b64(b"\xff\xd8\xff")}),
    );
    assert_eq!(answer["size"], 3, "{answer}");
    assert_eq!(
        std::fs::read(server.root.join("cli/z.jpg")).unwrap(),
        b"\xff\xd8\xff"
    );
    let answer = call(&server.root, "files.delete", &json!({"path": "cli/z.jpg"}));
    assert_eq!(answer["path"], "cli/z.jpg", "{answer}");
    assert!(!server.root.join("cli/z.jpg").exists());
    clean(&server.root);

    // HTTP delete.
    let deleted = server.post_json("/mcp/files/delete", &json!({"path": "assets/raw.png"}));
    assert_eq!(deleted.status, 200, "{deleted:?}");
    assert_eq!(deleted.body["commit"], server.head());
    assert!(!server.root.join("assets/raw.png").exists());
    server
        .post_json("/mcp/files/delete", &json!({"path": "assets/raw.png"}))
        .assert_error(404, "not_found");
    clean(&server.root);
}

#[test]
fn notes_hidden_paths_foreign_types_and_bad_bytes_are_refused() {
    let server = TestServer::with_note("a.md", "# A\n");
    let head = server.head();
    let write = |path: &str, content: &str| {
        server.post_json(
            "/mcp/files/write",
            &json!({"path": path, "content_base64": content}),
        )
    };
    write("a.md", &b64(b"x")).assert_error(400, "invalid_extension");
    write("new.MD", &b64(b"x")).assert_error(400, "invalid_extension");
    write("page.html", &b64(b"<script>")).assert_error(400, "invalid_extension");
    write(".obsidian/x.png", &b64(PNG)).assert_error(400, "invalid_path");
    write("../x.png", &b64(PNG)).assert_error(400, "invalid_path");
    write("x.png", "not base64!").assert_error(400, "invalid_request");
    server
        .post_json(
            "/mcp/files/write",
            &json!({"path": "x.png", "content_base64": b64(PNG), "mesage": "hi"}),
        )
        .assert_error(400, "invalid_request");
    // A raw body claiming another type than its name.
    upload(&server, "path=x.png", "text/html", b"<html>").assert_error(400, "invalid_request");
    upload(&server, "path=x.png&content_base64=AA", "image/png", PNG)
        .assert_error(400, "invalid_request");
    server
        .post_json("/mcp/files/delete", &json!({"path": "a.md"}))
        .assert_error(400, "invalid_extension");
    assert_eq!(server.head(), head, "nothing was committed");
    assert!(!server.root.join("x.png").exists());
    clean(&server.root);
    // Someone's uncommitted file is never overwritten or committed under mirai's name.
    server.write("theirs.png", b"uncommitted");
    write("theirs.png", &b64(PNG)).assert_error(409, "conflict");
    assert_eq!(
        std::fs::read(server.root.join("theirs.png")).unwrap(),
        b"uncommitted"
    );
    assert_eq!(server.head(), head);

    // An operator may allow any type.
    let open = TestServer::start_with(|c| c.files_any_type = true);
    let wrote = open.post_json(
        "/mcp/files/write",
        &json!({"path": "data/table.csv", "content_base64": b64(b"a,b\n")}),
    );
    assert_eq!(wrote.status, 200, "{wrote:?}");
    assert_eq!(wrote.body["media_type"], "application/octet-stream");
}

#[test]
fn a_symlinked_target_escaping_the_root_is_refused_and_nothing_outside_changes() {
    let server = TestServer::with_note("a.md", "# A\n");
    let outside = server.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("victim.png"), b"outside").unwrap();
    std::os::unix::fs::symlink(outside.join("victim.png"), server.root.join("escape.png")).unwrap();
    std::os::unix::fs::symlink(&outside, server.root.join("linked")).unwrap();
    std::os::unix::fs::symlink("a.png", server.root.join("inside.png")).unwrap();
    server.write("a.png", PNG);
    let head = server.head();
    for path in [
        "escape.png",
        "linked/victim.png",
        "linked/new.png",
        "inside.png",
    ] {
        server
            .post_json(
                "/mcp/files/write",
                &json!({"path": path, "content_base64": b64(b"evil")}),
            )
            .assert_error(400, "invalid_path");
    }
    upload(&server, "path=linked/raw.png", "image/png", b"evil").assert_error(400, "invalid_path");
    server
        .post_json("/mcp/files/delete", &json!({"path": "escape.png"}))
        .assert_error(400, "invalid_path");
    server
        .post_json(
            "/mcp/notes/move",
            &json!({"from": "a.png", "to": "linked/moved.png"}),
        )
        .assert_error(400, "invalid_path");
    assert_eq!(
        std::fs::read(outside.join("victim.png")).unwrap(),
        b"outside"
    );
    let mut names: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["victim.png"]);
    assert_eq!(server.head(), head);
    assert_eq!(std::fs::read(server.root.join("a.png")).unwrap(), PNG);
}

/// Sends a request head declaring `length` bytes and only `sent` of them,
/// then reads what the server answers within a few seconds.
fn declared_upload(server: &TestServer, length: u64, sent: usize) -> String {
    let address = server.url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "POST /mcp/files/write?path=big.pdf HTTP/1.1\r\nHost: {address}\r\n\
         Content-Type: application/pdf\r\nContent-Length: {length}\r\n\r\n"
    )
    .unwrap();
    stream.write_all(&vec![b'%'; sent]).unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buffer) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..n]);
        if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
            break;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn a_100_mb_body_is_refused_before_it_is_read_whole() {
    let server = TestServer::with_note("a.md", "# A\n");
    let head = server.head();
    // 100 MB declared, 1 KiB sent: the answer comes without the rest.
    let answer = declared_upload(&server, 100 * 1024 * 1024, 1024);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    assert!(answer.contains("MIRAI_MAX_FILE_BYTES"), "{answer}");
    assert_eq!(server.head(), head);

    // Without a Content-Length (chunked), the read stops at the limit.
    let small = TestServer::start_with(|c| c.max_file_bytes = 64 * 1024);
    let small_head = small.head();
    let body = reqwest::blocking::Body::new(ChunkedReader(vec![vec![0u8; 4096]; 40]));
    let answer = send(
        small
            .raw()
            .post(format!("{}/mcp/files/write?path=big.pdf", small.url))
            .header("content-type", "application/pdf")
            .body(body),
    );
    answer.assert_error(413, "payload_too_large");
    assert_eq!(
        parts(&small.root),
        Vec::<String>::new(),
        "the refused upload's .part went"
    );
    // Base64 in JSON is refused from its length before it is decoded.
    let answer = small.post_json(
        "/mcp/files/write",
        &json!({"path": "big.pdf", "content_base64": b64(&vec![1u8; 100 * 1024])}),
    );
    answer.assert_error(413, "payload_too_large");
    assert!(!small.root.join("big.pdf").exists());
    assert_eq!(small.head(), small_head, "no commit");
    assert_eq!(parts(&server.root), Vec::<String>::new());
}

/// The uploads under way or left behind: `.mirai/uploads/*.part`.
fn parts(root: &Path) -> Vec<String> {
    std::fs::read_dir(root.join(".mirai/uploads"))
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".part"))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (30 s at most) until `done`.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_multi_megabyte_raw_upload_streams_to_disk_and_commits_byte_for_byte() {
    let server = TestServer::with_note("a.md", "![[scan.pdf]]\n");
    let mut bytes = vec![0u8; 6 * 1024 * 1024 + 123];
    fastrand::Rng::with_seed(46).fill(&mut bytes);
    // With a Content-Length (git's blob id hashed as the bytes came) ...
    let wrote = upload(&server, "path=docs/scan.pdf", "application/pdf", &bytes);
    assert_eq!(wrote.status, 200, "{wrote:?}");
    assert_eq!(wrote.body["size"], bytes.len() as u64);
    assert_eq!(wrote.body["sha256"], sha256(&bytes));
    let commit = wrote.body["commit"].as_str().unwrap().to_string();
    assert_eq!(server.head(), commit);
    assert_eq!(subject(&server.root), "mcp.files_write: docs/scan.pdf");
    assert_eq!(
        std::fs::read(server.root.join("docs/scan.pdf")).unwrap(),
        bytes
    );
    assert_eq!(in_git(&server.root, &commit, "docs/scan.pdf"), bytes);
    let blob = git(
        &server.root,
        &["rev-parse", &format!("{commit}:docs/scan.pdf")],
    );
    assert_eq!(
        wrote.body["blob"],
        blob.trim(),
        "the answer names the commit's blob"
    );
    clean(&server.root);
    assert_eq!(
        parts(&server.root),
        Vec::<String>::new(),
        "the upload's file was moved into place"
    );

    // ... and chunked, without one (the blob id read back from the file).
    bytes.reverse();
    let body = reqwest::blocking::Body::new(ChunkedReader(
        bytes.chunks(100_000).map(<[u8]>::to_vec).collect(),
    ));
    let wrote = send(
        server
            .raw()
            .post(format!("{}/mcp/files/write?path=docs/scan.pdf", server.url))
            .header("content-type", "application/octet-stream")
            .body(body),
    );
    assert_eq!(wrote.status, 200, "{wrote:?}");
    let commit = wrote.body["commit"].as_str().unwrap();
    assert_eq!(in_git(&server.root, commit, "docs/scan.pdf"), bytes);
    let blob = git(
        &server.root,
        &["rev-parse", &format!("{commit}:docs/scan.pdf")],
    );
    assert_eq!(wrote.body["blob"], blob.trim());
    assert_eq!(
        std::fs::read(server.root.join("docs/scan.pdf")).unwrap(),
        bytes
    );
    // The same bytes again: no commit, and nothing left behind.
    let again = upload(&server, "path=docs/scan.pdf", "application/pdf", &bytes);
    assert_eq!(again.status, 200, "{again:?}");
    assert!(again.body["commit"].is_null(), "{again:?}");
    // create_only: a file already there is a conflict, never replaced.
    let head = server.head();
    let clash = upload(
        &server,
        "path=docs/scan.pdf&create_only=true",
        "application/pdf",
        b"%PDF other",
    );
    clash.assert_error(409, "conflict");
    assert!(clash.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("choose another name"));
    assert_eq!(server.head(), head);
    assert_eq!(
        std::fs::read(server.root.join("docs/scan.pdf")).unwrap(),
        bytes
    );
    let fresh = upload(
        &server,
        "path=docs/scan-2.pdf&create_only=true",
        "application/pdf",
        b"%PDF other",
    );
    assert_eq!(fresh.status, 200, "{fresh:?}");
    clean(&server.root);
    assert_eq!(parts(&server.root), Vec::<String>::new());
}

#[test]
fn a_caller_gone_mid_body_leaves_no_part_and_no_commit() {
    let server = TestServer::with_note("a.md", "# A\n");
    let head = server.head();
    let address = server.url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /mcp/files/write?path=half.png HTTP/1.1\r\nHost: {address}\r\n\
         Content-Type: image/png\r\nContent-Length: {}\r\n\r\n",
        8 * 1024 * 1024
    )
    .unwrap();
    // A megabyte of the eight: the upload's file is on disk, growing.
    for _ in 0..16 {
        stream.write_all(&[7u8; 64 * 1024]).unwrap();
    }
    wait_until("the upload is on disk", || parts(&server.root).len() == 1);
    drop(stream);
    wait_until("the gone caller's upload is removed", || {
        parts(&server.root).is_empty()
    });
    assert!(!server.root.join("half.png").exists());
    assert_eq!(server.head(), head);
    clean(&server.root);
}

/// A body of several reads, sent chunked (no Content-Length).
struct ChunkedReader(Vec<Vec<u8>>);

impl Read for ChunkedReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(chunk) = self.0.first_mut() else {
            return Ok(0);
        };
        let n = chunk.len().min(buf.len());
        buf[..n].copy_from_slice(&chunk[..n]);
        chunk.drain(..n);
        if chunk.is_empty() {
            self.0.remove(0);
        }
        Ok(n)
    }
}

const REVIEWER: &str = "reviewer-s3cret";

fn as_reviewer(server: &TestServer, path: &str, body: Value) -> Answer {
    send(
        server
            .raw()
            .post(format!("{}{path}", server.url))
            .bearer_auth(REVIEWER)
            .json(&body),
    )
}

#[test]
fn review_mode_proposes_a_binary_change_and_approval_writes_the_exact_bytes() {
    let server = TestServer::start_with(|c: &mut Config| {
        c.policy = PolicyMode::Review;
        c.reviewer_token = Some(REVIEWER.into());
    });
    server.write("old.png", b"old bytes");
    server.commit_all();
    let head = server.head();
    let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();

    let proposed = upload(&server, "path=img/new.png", "image/png", &bytes);
    assert_eq!(proposed.status, 202, "{proposed:?}");
    let diff = format!(
        "Binary file img/new.png\n--- /dev/null\n+++ binary, 5000 bytes, sha256 {}\n",
        sha256(&bytes)
    );
    assert_eq!(proposed.body["changes"][0]["diff"], diff);
    assert_eq!(proposed.body["changes"][0]["content_base64"], b64(&bytes));
    assert!(!server.root.join("img/new.png").exists(), "nothing written");
    assert_eq!(server.head(), head);
    assert_eq!(
        parts(&server.root),
        Vec::<String>::new(),
        "the upload went with the request"
    );
    // An upload no proposal can carry (past MIRAI_MAX_BODY_BYTES as base64)
    // is refused, not read back whole.
    let big = vec![5u8; 2 * 1024 * 1024];
    let refused = upload(&server, "path=img/big.png", "image/png", &big);
    refused.assert_error(413, "payload_too_large");
    let said = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("as base64") && said.contains("MIRAI_MAX_BODY_BYTES"),
        "{said}"
    );
    assert_eq!(parts(&server.root), Vec::<String>::new());
    assert_eq!(server.head(), head);
    let id = proposed.body["proposal"].as_str().unwrap().to_string();
    let detail = server.get(&format!("/mcp/proposals/get?id={id}"));
    assert_eq!(detail.body["applies"], true, "{detail:?}");

    let approved = as_reviewer(&server, "/mcp/proposals/approve", json!({"id": id}));
    assert_eq!(approved.status, 200, "{approved:?}");
    assert_eq!(
        std::fs::read(server.root.join("img/new.png")).unwrap(),
        bytes
    );
    assert_eq!(in_git(&server.root, "HEAD", "img/new.png"), bytes);
    let message = git(&server.root, &["log", "-1", "--format=%B"]);
    assert!(
        message.starts_with("mcp.files_write: img/new.png\n"),
        "{message}"
    );
    assert!(
        message.contains(&format!("Mirai-Proposal: {id}")),
        "{message}"
    );
    clean(&server.root);

    // A replacement whose file changed meanwhile no longer applies.
    let proposed = server.post_json(
        "/mcp/files/write",
        &json!({"path": "old.png", "content_base64": b64(b"new bytes")}),
    );
    assert_eq!(proposed.status, 202, "{proposed:?}");
    let diff = proposed.body["changes"][0]["diff"].as_str().unwrap();
    assert!(
        diff.contains(&format!(
            "--- binary, 9 bytes, sha256 {}",
            sha256(b"old bytes")
        )),
        "{diff}"
    );
    let id = proposed.body["proposal"].as_str().unwrap().to_string();
    server.write("old.png", b"someone else's");
    server.commit_all();
    let refused = as_reviewer(&server, "/mcp/proposals/approve", json!({"id": id}));
    refused.assert_error(409, "conflict");
    assert_eq!(
        std::fs::read(server.root.join("old.png")).unwrap(),
        b"someone else's"
    );
    // A deletion is proposed with no bytes and approved.
    let proposed = server.post_json("/mcp/files/delete", &json!({"path": "img/new.png"}));
    assert_eq!(proposed.status, 202, "{proposed:?}");
    assert!(proposed.body["changes"][0].get("content_base64").is_none());
    let id = proposed.body["proposal"].as_str().unwrap().to_string();
    let approved = as_reviewer(&server, "/mcp/proposals/approve", json!({"id": id}));
    assert_eq!(approved.status, 200, "{approved:?}");
    assert!(!server.root.join("img/new.png").exists());
}

#[test]
fn moving_a_linked_image_rewrites_every_link_form_in_one_commit_and_reverts() {
    let server = TestServer::with_note(
        "a.md",
        "# A\n\n![[x.png]]\n\n![plot](assets/x.png)\n\n![ref][r]\n\n[r]: assets/x.png \"Plot\"\n",
    );
    server.write("deep/b.md", "![](../assets/x.png) and [[x.png|the plot]]\n");
    server.write("assets/x.png", PNG);
    server.write("other.png", b"other");
    server.commit_all();
    let before = server.commit_count();

    let moved = server.post_json(
        "/mcp/notes/move",
        &json!({"from": "assets/x.png", "to": "img/y.png"}),
    );
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(
        moved.body["rewritten"],
        json!([{"path": "a.md", "links": 3}, {"path": "deep/b.md", "links": 2}])
    );
    assert_eq!(server.commit_count(), before + 1, "one commit");
    assert_eq!(
        subject(&server.root),
        "mcp.notes_move: assets/x.png -> img/y.png"
    );
    assert!(!server.root.join("assets/x.png").exists());
    assert_eq!(std::fs::read(server.root.join("img/y.png")).unwrap(), PNG);
    assert_eq!(
        std::fs::read_to_string(server.root.join("a.md")).unwrap(),
        "# A\n\n![[y.png]]\n\n![plot](img/y.png)\n\n![ref][r]\n\n[r]: img/y.png \"Plot\"\n"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("deep/b.md")).unwrap(),
        "![](../img/y.png) and [[y.png|the plot]]\n"
    );
    clean(&server.root);
    let listed = server.get("/mcp/files").body;
    assert_eq!(listed["files"][0]["path"], "img/y.png", "{listed}");
    assert_eq!(
        listed["files"][0]["linked_from"],
        json!(["a.md", "deep/b.md"])
    );
    // The rules notes.move follows: never onto an existing file, never to a note or a foreign type.
    server
        .post_json(
            "/mcp/notes/move",
            &json!({"from": "img/y.png", "to": "other.png"}),
        )
        .assert_error(409, "conflict");
    server
        .post_json(
            "/mcp/notes/move",
            &json!({"from": "img/y.png", "to": "y.md"}),
        )
        .assert_error(400, "invalid_extension");
    server
        .post_json(
            "/mcp/notes/move",
            &json!({"from": "img/y.png", "to": "y.html"}),
        )
        .assert_error(400, "invalid_extension");

    // notes.revert takes the whole move back, the file's bytes included.
    let reverted = server.post_json("/mcp/notes/revert", &json!({"commit": "HEAD"}));
    assert_eq!(reverted.status, 200, "{reverted:?}");
    assert_eq!(
        std::fs::read(server.root.join("assets/x.png")).unwrap(),
        PNG
    );
    assert!(!server.root.join("img/y.png").exists());
    assert!(std::fs::read_to_string(server.root.join("a.md"))
        .unwrap()
        .contains("![[x.png]]"));
    clean(&server.root);
}

#[test]
fn notes_revert_takes_back_an_attachments_change_only_where_it_stands() {
    let server = TestServer::with_note("a.md", "# A\n");
    server.write("p.png", b"version one");
    server.commit_all();
    let wrote = server.post_json(
        "/mcp/files/write",
        &json!({"path": "p.png", "content_base64": b64(b"version two")}),
    );
    let commit = wrote.body["commit"].as_str().unwrap().to_string();
    let created = server.post_json(
        "/mcp/files/write",
        &json!({"path": "n.gif", "content_base64": b64(b"GIF89a")}),
    );
    let creation = created.body["commit"].as_str().unwrap().to_string();

    let reverted = server.post_json(
        "/mcp/notes/revert",
        &json!({"commit": commit, "path": "p.png"}),
    );
    assert_eq!(reverted.status, 200, "{reverted:?}");
    assert_eq!(
        std::fs::read(server.root.join("p.png")).unwrap(),
        b"version one"
    );
    assert_eq!(in_git(&server.root, "HEAD", "p.png"), b"version one");
    let reverted = server.post_json("/mcp/notes/revert", &json!({"commit": creation}));
    assert_eq!(reverted.status, 200, "{reverted:?}");
    assert!(!server.root.join("n.gif").exists());
    clean(&server.root);
    // Taking the first write back again: the file no longer stands as it left it.
    server
        .post_json("/mcp/notes/revert", &json!({"commit": commit}))
        .assert_error(409, "conflict");
    assert_eq!(
        std::fs::read(server.root.join("p.png")).unwrap(),
        b"version one"
    );
}

const WRITER: &str = "writer-token";
const READER: &str = "reader-token";

fn scoped_server() -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let hash = |token: &str| sha256(token.as_bytes());
    let text = format!(
        "[[caller]]\nname = \"writer\"\nemail = \"writer@example.org\"\ntoken_sha256 = \"{}\"\n\
         can = [\"read\", \"write\"]\npaths = [\"inbox/\"]\n\n\
         [[caller]]\nname = \"reader\"\ntoken_sha256 = \"{}\"\ncan = [\"read\", \"write\"]\n\
         read_paths = [\"public/\"]\n",
        hash(WRITER),
        hash(READER)
    );
    let file = dir.path().join("callers.toml");
    std::fs::write(&file, text).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let root = dir.path().join("notes");
    let server = TestServer::start_in(dir, root, |c: &mut Config| c.callers_file = Some(file));
    server.write("inbox/in.png", PNG);
    server.write("public/pub.png", PNG);
    server.write("secret/s.png", PNG);
    server.commit_all();
    server
}

fn post_as(server: &TestServer, token: &str, path: &str, body: Value) -> Answer {
    send(
        server
            .raw()
            .post(format!("{}{path}", server.url))
            .bearer_auth(token)
            .json(&body),
    )
}

#[test]
fn a_scoped_caller_cannot_write_delete_or_move_outside_its_paths() {
    let server = scoped_server();
    let head = server.head();
    let write = |token: &str, path: &str| {
        post_as(
            &server,
            token,
            "/mcp/files/write",
            json!({"path": path, "content_base64": b64(b"mine")}),
        )
    };
    write(WRITER, "public/x.png").assert_error(403, "policy_denied");
    write(READER, "secret/s.png").assert_error(403, "policy_denied");
    post_as(
        &server,
        WRITER,
        "/mcp/files/delete",
        json!({"path": "secret/s.png"}),
    )
    .assert_error(403, "policy_denied");
    post_as(
        &server,
        WRITER,
        "/mcp/notes/move",
        json!({"from": "inbox/in.png", "to": "public/in.png"}),
    )
    .assert_error(403, "policy_denied");
    post_as(
        &server,
        READER,
        "/mcp/notes/move",
        json!({"from": "secret/s.png", "to": "public/s.png"}),
    )
    .assert_error(403, "policy_denied");
    let raw = send(
        server
            .raw()
            .post(format!("{}/mcp/files/write?path=secret/r.png", server.url))
            .bearer_auth(READER)
            .header("content-type", "image/png")
            .body(PNG.to_vec()),
    );
    raw.assert_error(403, "policy_denied");
    assert_eq!(server.head(), head, "nothing was committed");
    assert_eq!(
        std::fs::read(server.root.join("secret/s.png")).unwrap(),
        PNG
    );
    assert!(!server.root.join("public/x.png").exists());

    // Inside its paths it writes, as itself.
    let wrote = write(WRITER, "inbox/new.png");
    assert_eq!(wrote.status, 200, "{wrote:?}");
    let author = git(&server.root, &["log", "-1", "--format=%an <%ae>"]);
    assert_eq!(author.trim(), "writer <writer@example.org>");
    let moved = post_as(
        &server,
        WRITER,
        "/mcp/notes/move",
        json!({"from": "inbox/new.png", "to": "inbox/sub/new.png"}),
    );
    assert_eq!(moved.status, 200, "{moved:?}");
    let wrote = write(READER, "public/mine.png");
    assert_eq!(wrote.status, 200, "{wrote:?}");
}

#[test]
fn an_upload_gets_the_mode_a_note_gets_under_the_servers_umask() {
    // A person whose umask keeps their notes from others' eyes keeps their
    // attachments too: an upload arrives private, then takes a new note's mode.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("notes");
    let (mut child, port) = crate::common::serve_child(&root, Some("027"));
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::blocking::Client::new();
    let uploaded = client
        .post(format!("{url}/mcp/files/write?path=img/plot.png"))
        .header("content-type", "image/png")
        .body(b"\x89PNG\r\n\x1a\nbytes".to_vec())
        .send()
        .unwrap();
    let wrote = client
        .post(format!("{url}/mcp/notes/write"))
        .json(&json!({"path": "img/plot.md", "content": "![[plot.png]]\n"}))
        .send()
        .unwrap();
    let statuses = (uploaded.status().as_u16(), wrote.status().as_u16());
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(statuses, (200, 200));
    let mode = |rel: &str| {
        std::fs::metadata(root.join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("img/plot.md"), 0o640);
    assert_eq!(mode("img/plot.png"), 0o640);
}
