//! What `read_paths` cost a search: `index.query` through HTTP on a large
//! vault, for a caller that reads everything against one whose `read_paths`
//! hold a single top folder (its query answers from an index and link graph
//! without the other notes, made on first need and kept until the index
//! changes), the same words alternating between the two, with `/health` in
//! the same run; then the scoped caller's first query after each write
//! (when both are made again).
//!
//! cargo bench --bench callers -- VAULT   (a vault from `cargo run --release --example gen-notes -- --git`)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;
use sha2::{Digest, Sha256};
use support::{copy_tree, report, time_ms, vault_arg, Server};

const QUERIES: usize = 40;
/// Writes, each followed by a scoped query that makes the scoped copies again.
const WRITES: usize = 8;
const FULL: &str = "bench-full-token";
const SCOPED: &str = "bench-scoped-token";

fn hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn main() {
    let vault = vault_arg("callers");
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("vault");
    copy_tree(&vault, &root);
    let _ = std::fs::remove_dir_all(root.join(".mirai"));

    // The scoped caller reads the first top folder of the vault only.
    let first = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|name| !name.starts_with('.'))
        .min()
        .expect("a vault with folders");
    let file = work.path().join("callers.toml");
    std::fs::write(
        &file,
        format!(
            "[[caller]]\nname = \"full\"\ntoken_sha256 = \"{}\"\ncan = [\"read\", \"write\"]\n\n\
             [[caller]]\nname = \"scoped\"\ntoken_sha256 = \"{}\"\ncan = [\"read\"]\n\
             read_paths = [\"{first}/\"]\n",
            hash(FULL),
            hash(SCOPED)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = Server::start_with_env(&root, &[("MIRAI_CALLERS_FILE", file.to_str().unwrap())]);
    let get = |token: &str, path: &str| -> Value {
        let response = server
            .client
            .get(format!("{}{path}", server.url))
            .bearer_auth(token)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        response.json().unwrap()
    };
    let rebuilt = server
        .client
        .post(format!("{}/mcp/index/rebuild", server.url))
        .bearer_auth(FULL)
        .send()
        .unwrap();
    assert_eq!(rebuilt.status().as_u16(), 200);
    let listed = |token: &str| get(token, "/mcp/notes")["notes"].as_array().unwrap().len();
    let (all, seen) = (listed(FULL), listed(SCOPED));
    println!("notes: {all}; the scoped caller reads {seen} (read_paths = [\"{first}/\"])");

    // Words from the scoped caller's own note names: each query finds something for both.
    let names: Vec<String> =
        serde_json::from_value(get(SCOPED, "/mcp/notes")["notes"].clone()).unwrap();
    let words = support::name_words(&names);
    assert!(!words.is_empty(), "no words to query");
    let query = |token: &str, word: &str| {
        get(token, &format!("/mcp/index/query?q={word}&limit=10"));
    };
    // Warm both once (the first scoped query builds nothing the next reuses, but the index is loaded).
    query(FULL, &words[0]);
    query(SCOPED, &words[0]);
    let (mut health, mut full, mut scoped) = (Vec::new(), Vec::new(), Vec::new());
    for word in words.iter().cycle().take(QUERIES) {
        health.push(server.health_ms());
        full.push(time_ms(|| query(FULL, word)));
        scoped.push(time_ms(|| query(SCOPED, word)));
    }
    report("GET /health", &mut health);
    let full = report("index.query, a caller that reads everything", &mut full);
    let scoped = report("index.query, a caller with read_paths", &mut scoped);
    println!("scoped / full (medians): {:.1}x", scoped / full);

    let mut after_write = Vec::new();
    for (i, word) in words.iter().cycle().take(WRITES).enumerate() {
        let wrote = server
            .client
            .post(format!("{}/mcp/notes/write", server.url))
            .bearer_auth(FULL)
            .json(&serde_json::json!({"path": format!("{first}/bench-{i}.md"), "content": format!("{word} written\n")}))
            .send()
            .unwrap();
        assert_eq!(wrote.status().as_u16(), 200);
        after_write.push(time_ms(|| query(SCOPED, word)));
    }
    let after = report(
        "index.query, a caller with read_paths, first after a write",
        &mut after_write,
    );
    println!("first after a write / full (medians): {:.1}x", after / full);
}
