//! Attachments (`files.list`, `files.read`): listed with size, media type and
//! the notes linking to them, paged; read raw over HTTP with headers that keep
//! a hostile file from running as a page of mirai's origin, and as metadata
//! plus small base64 bytes through MCP, the sandbox and `mirai call`; confined
//! to the root and bounded by MIRAI_MAX_FILE_BYTES before a byte is read.

use base64::Engine;
use serde_json::{json, Value};

use crate::common::{encode, git, mirai_cli, TestServer};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRfake";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A vault with notes embedding and linking attachments, committed.
fn vault() -> TestServer {
    let server = TestServer::with_note(
        "a.md",
        "# A\n\n![[diagram.png]]\n\nSee [the paper](docs/paper.pdf).\n",
    );
    server.write("assets/diagram.png", PNG);
    server.write("docs/paper.pdf", b"%PDF-1.4\n%fake\n");
    server.write("b.md", "![](assets/diagram.png)\n");
    server.write("other.bin", [0u8, 1, 2, 3]);
    server.write(".hidden/secret.png", PNG);
    server.commit_all();
    server
}

/// `GET /mcp/files/read` as raw bytes: status, headers and body.
fn raw_read(server: &TestServer, query: &str) -> reqwest::blocking::Response {
    server
        .raw()
        .get(format!("{}/mcp/files/read?{query}", server.url))
        .send()
        .unwrap()
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

#[test]
fn files_list_lists_attachments_with_size_type_and_linking_notes_in_pages() {
    let server = vault();
    let answer = server.get("/mcp/files");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"files": [
            {"path": "assets/diagram.png", "size": PNG.len(), "media_type": "image/png",
             "linked_from": ["a.md", "b.md"]},
            {"path": "docs/paper.pdf", "size": 15, "media_type": "application/pdf",
             "linked_from": ["a.md"]},
            {"path": "other.bin", "size": 4, "media_type": "application/octet-stream",
             "linked_from": []},
        ], "next_cursor": null})
    );
    let first = server.get("/mcp/files?limit=2");
    assert_eq!(first.body["files"].as_array().unwrap().len(), 2);
    assert_eq!(first.body["next_cursor"], "docs/paper.pdf");
    let rest = server.get("/mcp/files?limit=2&cursor=docs%2Fpaper.pdf");
    assert_eq!(rest.body["files"][0]["path"], "other.bin");
    assert_eq!(rest.body["next_cursor"], Value::Null);
    let docs = server.get("/mcp/files?prefix=docs/");
    assert_eq!(docs.body["files"].as_array().unwrap().len(), 1);
    server
        .get("/mcp/files?limit=0")
        .assert_error(400, "invalid_limit");
    server
        .get("/mcp/files?prefix=../x")
        .assert_error(400, "invalid_request");
}

#[test]
fn files_read_serves_raw_bytes_that_never_run_as_a_page_of_mirai() {
    let server = vault();
    server.write("evil.png", "<html><script>alert(1)</script></html>");
    server.write(
        "evil.svg",
        r#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#,
    );
    let png = raw_read(&server, "path=assets/diagram.png");
    assert_eq!(png.status(), 200);
    let header = |r: &reqwest::blocking::Response, name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert_eq!(header(&png, "content-type"), "image/png");
    assert_eq!(header(&png, "x-content-type-options"), "nosniff");
    assert_eq!(
        header(&png, "content-security-policy"),
        "sandbox; default-src 'none'"
    );
    assert_eq!(header(&png, "cache-control"), "private");
    assert!(header(&png, "content-disposition").starts_with("inline;"));
    let blob = git(&server.root, &["rev-parse", "HEAD:assets/diagram.png"]);
    assert_eq!(header(&png, "etag"), format!("\"{}\"", blob.trim()));
    let etag = header(&png, "etag");
    assert_eq!(png.bytes().unwrap().as_ref(), PNG);

    // The same version again: 304, no body.
    let again = server
        .raw()
        .get(format!(
            "{}/mcp/files/read?path=assets/diagram.png",
            server.url
        ))
        .header("if-none-match", etag)
        .send()
        .unwrap();
    assert_eq!(again.status(), 304);

    // An HTML page named .png is still image/png, never sniffed, sandboxed.
    let evil = raw_read(&server, "path=evil.png");
    assert_eq!(header(&evil, "content-type"), "image/png");
    assert_eq!(header(&evil, "x-content-type-options"), "nosniff");
    // SVG, PDF and everything else are downloads.
    for (path, mime) in [
        ("evil.svg", "image/svg+xml"),
        ("docs/paper.pdf", "application/pdf"),
        ("other.bin", "application/octet-stream"),
    ] {
        let answer = raw_read(&server, &format!("path={path}"));
        assert_eq!(answer.status(), 200, "{path}");
        assert_eq!(header(&answer, "content-type"), mime, "{path}");
        assert!(
            header(&answer, "content-disposition").starts_with("attachment;"),
            "{path}"
        );
        assert_eq!(
            header(&answer, "content-security-policy"),
            "sandbox; default-src 'none'"
        );
    }

    // Errors stay JSON in the one shape.
    server
        .get("/mcp/files/read?path=a.md")
        .assert_error(400, "invalid_extension");
    server
        .get("/mcp/files/read?path=.hidden/secret.png")
        .assert_error(400, "invalid_path");
    server
        .get("/mcp/files/read?path=nope.png")
        .assert_error(404, "not_found");
    server
        .get("/mcp/files/read?path=../x.png")
        .assert_error(400, "invalid_path");
    server
        .get("/mcp/files/read?path=assets")
        .assert_error(404, "not_found");
}

#[test]
fn files_read_at_a_rev_reads_gits_version() {
    let server = vault();
    let first = server.head();
    server.write("assets/diagram.png", b"changed");
    server.commit_all();
    let old = raw_read(
        &server,
        &format!("path=assets/diagram.png&rev={}", &first[..12]),
    );
    assert_eq!(old.status(), 200);
    assert_eq!(old.bytes().unwrap().as_ref(), PNG);
    server
        .get("/mcp/files/read?path=assets/diagram.png&rev=HEAD~1&zz=1")
        .assert_error(400, "invalid_path");
    server
        .get("/mcp/files/read?path=gone.png&rev=HEAD~0")
        .assert_error(404, "not_found");
    server
        .get("/mcp/files/read?path=assets/diagram.png&rev=nonsense")
        .assert_error(400, "invalid_request");
}

#[test]
fn an_attachment_symlinked_out_of_the_root_is_refused() {
    let server = vault();
    let outside = server.dir.path().join("outside.png");
    std::fs::write(&outside, PNG).unwrap();
    std::os::unix::fs::symlink(&outside, server.root.join("escape.png")).unwrap();
    std::os::unix::fs::symlink("../outside.png", server.root.join("escape2.png")).unwrap();
    for path in ["escape.png", "escape2.png"] {
        server
            .get(&format!("/mcp/files/read?path={path}"))
            .assert_error(400, "invalid_path");
    }
    // A link inside the root to an attachment is read; one to a hidden file is not.
    std::os::unix::fs::symlink("assets/diagram.png", server.root.join("inside.png")).unwrap();
    let inside = raw_read(&server, "path=inside.png");
    assert_eq!(inside.status(), 200);
    assert_eq!(inside.bytes().unwrap().as_ref(), PNG);
    std::os::unix::fs::symlink(".hidden/secret.png", server.root.join("peek.png")).unwrap();
    server
        .get("/mcp/files/read?path=peek.png")
        .assert_error(400, "invalid_path");
    // Links are never listed as attachments.
    let listed = server.get("/mcp/files").body;
    let paths: Vec<&str> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(!paths.iter().any(|p| p.contains("escape")), "{paths:?}");
}

#[test]
fn a_100_mb_file_is_refused_from_its_size_before_it_is_read() {
    let server = vault();
    // Sparse: 100 MB by its size, nothing on disk.
    let big = std::fs::File::create(server.root.join("big.pdf")).unwrap();
    big.set_len(100 * 1024 * 1024).unwrap();
    let answer = server.get("/mcp/files/read?path=big.pdf");
    answer.assert_error(413, "payload_too_large");
    let message = answer.body["error"]["message"].as_str().unwrap();
    // The size named is fstat's, not the limit + 1 a read would have stopped at.
    assert!(message.contains("104857600 bytes"), "{message}");
    assert!(message.contains("MIRAI_MAX_FILE_BYTES"), "{message}");
    // Listing it costs no read either.
    let listed = server.get("/mcp/files").body;
    assert!(listed.to_string().contains("104857600"), "{listed}");
}

#[test]
fn mcp_the_sandbox_and_mirai_call_get_metadata_and_small_bytes_as_base64() {
    let server = vault();
    let large: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    server.write("large.png", &large);
    let blob = git(&server.root, &["hash-object", "assets/diagram.png"])
        .trim()
        .to_string();
    let small = json!({"path": "assets/diagram.png", "size": PNG.len(), "media_type": "image/png",
        "blob": blob, "content_base64": b64(PNG)});

    // MCP.
    let result = mcp_call(&server, "files_read", json!({"path": "assets/diagram.png"}));
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"], small);
    let result = mcp_call(&server, "files_read", json!({"path": "large.png"}));
    assert_eq!(result["structuredContent"]["content_base64"], Value::Null);
    assert_eq!(result["structuredContent"]["size"], 40_000);
    assert!(result["structuredContent"]["content_omitted"]
        .as_str()
        .unwrap()
        .contains("32768"));
    let listed = mcp_call(&server, "files_list", json!({"limit": 1}));
    assert_eq!(
        listed["structuredContent"]["files"][0]["path"],
        "assets/diagram.png"
    );

    // The sandbox.
    let eval = server.post_json(
        "/agent/eval",
        &json!({"code": "return [await mirai.files.read({path: 'assets/diagram.png'}), (await mirai.files.list()).files.length]"}),
    );
    assert_eq!(eval.body["result"], json!([small, 4]), "{eval:?}");
    let refused = server.post_json(
        "/agent/eval",
        &json!({"code": "return await mirai.files.read({path: 'a.md'})"}),
    );
    assert_eq!(refused.body["error"]["code"], "invalid_extension");

    // mirai call.
    let out = mirai_cli()
        .args([
            "call",
            "files.read",
            r#"{"path":"assets/diagram.png"}"#,
            "--notes-root",
        ])
        .arg(&server.root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer, small);
    let encoded = encode("assets/diagram.png");
    assert_eq!(
        server.get(&format!("/mcp/files?cursor={encoded}")).body["files"][0]["path"],
        "docs/paper.pdf"
    );
}

#[test]
fn the_token_guards_files_like_every_route() {
    let server = TestServer::start_with(|config| config.api_token = Some("s3cret".into()));
    server.write("x.png", PNG);
    let anonymous = server
        .raw()
        .get(format!("{}/mcp/files/read?path=x.png", server.url))
        .send()
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let listed = server
        .raw()
        .get(format!("{}/mcp/files", server.url))
        .send()
        .unwrap();
    assert_eq!(listed.status(), 401);
    let authorized = server
        .raw()
        .get(format!("{}/mcp/files/read?path=x.png", server.url))
        .bearer_auth("s3cret")
        .send()
        .unwrap();
    assert_eq!(authorized.status(), 200);
}

#[test]
fn render_marks_vault_files_and_the_graph_counts_an_embed_of_a_missing_file() {
    let server = vault();
    server.write("c.md", "![[missing.png]]\n![](assets/diagram.png)\n");
    server.commit_all();
    let html = server.get("/mcp/notes/render?path=a.md").body["html"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        html.contains("<span class=\"file-embed\" data-file=\"assets/diagram.png\">"),
        "{html}"
    );
    assert!(
        html.contains("<span class=\"file-link\" data-file=\"docs/paper.pdf\">the paper</span>"),
        "{html}"
    );
    let graph = server.get("/mcp/notes/graph").body;
    let broken = graph["broken"].as_array().unwrap();
    assert_eq!(
        broken.as_slice(),
        [json!({"path": "c.md", "line": 1, "target": "missing.png"})],
        "{graph}"
    );
}

#[test]
fn history_and_diff_follow_an_attachment_as_binary_with_sizes_and_hashes() {
    use sha2::Digest;
    let server = vault();
    let first = server.head();
    server.write("assets/diagram.png", b"new bytes");
    server.commit_all();
    let history = server.get("/mcp/notes/history?path=assets/diagram.png");
    assert_eq!(history.status, 200, "{history:?}");
    let commits = history.body["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 2, "{history:?}");
    let diff = server.get("/mcp/notes/diff?commit=HEAD~0&path=assets/diagram.png");
    assert_eq!(diff.status, 200, "{diff:?}");
    let hex = |bytes: &[u8]| {
        sha2::Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let blob = |rev: &str| {
        git(
            &server.root,
            &["rev-parse", &format!("{rev}:assets/diagram.png")],
        )
        .trim()
        .to_string()
    };
    assert_eq!(
        diff.body["files"],
        json!([{"path": "assets/diagram.png", "status": "M", "diff": null, "binary": {
            "old": {"size": PNG.len(), "blob": blob(&first), "sha256": hex(PNG)},
            "new": {"size": 9, "blob": blob("HEAD"), "sha256": hex(b"new bytes")},
        }}])
    );
    let between = server.get(&format!(
        "/mcp/notes/diff?from={}&to=HEAD~0&path=assets/diagram.png",
        &first[..12]
    ));
    assert_eq!(between.body["files"][0]["binary"]["new"]["size"], 9);
    server
        .get("/mcp/notes/history?path=.git/config")
        .assert_error(400, "invalid_path");
}

#[test]
fn attachments_are_never_indexed_as_text() {
    let server = vault();
    server.write("notes.txt", "zanzibar quokka\n");
    server.write("pic.svg", "<svg><text>zanzibar quokka</text></svg>");
    server.write("c.md", "# C\n\nquokka sightings\n");
    server.commit_all();
    let rebuilt = server.post_json("/mcp/index/rebuild", &json!({}));
    assert_eq!(rebuilt.status, 200, "{rebuilt:?}");
    // a.md, b.md, c.md and the welcome note: no attachment.
    assert_eq!(rebuilt.body["notes_indexed"], 4, "{rebuilt:?}");
    let found = server.get("/mcp/index/query?q=zanzibar%20quokka&limit=10");
    let paths: Vec<&str> = found.body["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["c.md"], "{found:?}");
}
