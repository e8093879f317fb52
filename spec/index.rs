//! Black-box tests of the lexical index over HTTP and the CLI: the artifact,
//! status and staleness, queries and their validation, freshness after an
//! apply, corrupt artifacts, and `mirai index rebuild` for cron.

use crate::common;

use common::{encode, git, TestServer};
use mirai::config::PolicyMode;
use serde_json::{json, Value};

fn server_with_notes() -> TestServer {
    let server = TestServer::start();
    server.write(
        "garden/tomatoes.md",
        "# Tomatoes\n\nWater the tomatoes every morning.\n\n## Pests\n\nAphids love tomato leaves.\n",
    );
    server.write(
        "garden/roses.md",
        "# Roses\n\nPrune roses in late winter.\n",
    );
    server.write("garden-other.md", "# Other\n\nTomatoes are not roses.\n");
    server.write(
        "kitchen/soup.md",
        "---\ntags: [cooking, tomato]\n---\n# Soup\n\nSimmer tomatoes with basil.\n",
    );
    server.write("日本/料理.md", "# 料理\n\n味噌汁の作り方。豆腐とわかめ。\n");
    server
}

fn artifact(server: &TestServer) -> std::path::PathBuf {
    server.root.join(".mirai/index.json")
}

fn query(server: &TestServer, q: &str, extra: &str) -> common::Answer {
    server.get(&format!("/mcp/index/query?q={}{extra}", encode(q)))
}

fn rebuild(server: &TestServer) -> Value {
    let answer = server.post_raw("/mcp/index/rebuild", "");
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

fn paths(answer: &common::Answer) -> Vec<String> {
    answer.body["chunks"]
        .as_array()
        .unwrap_or_else(|| panic!("chunks: {answer:?}"))
        .iter()
        .map(|c| c["metadata"]["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn rebuild_answers_counts_and_writes_a_versioned_artifact() {
    let server = server_with_notes();
    let body = rebuild(&server);
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["chunks_indexed", "notes_indexed"]);
    assert_eq!(body["notes_indexed"], 6);
    let chunks = body["chunks_indexed"].as_u64().unwrap();
    assert!(chunks >= 6, "{body}");

    let doc: Value = serde_json::from_slice(&std::fs::read(artifact(&server)).unwrap()).unwrap();
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["notes_indexed"], 6);
    assert_eq!(doc["chunks_indexed"], chunks);
    chrono::DateTime::parse_from_rfc3339(doc["generated_at"].as_str().unwrap()).expect("RFC 3339");
    let listed: Vec<(String, u64)> = doc["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["chunk_index"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "chunks sorted by path then chunk_index");
    // A note's chunks put together give the note back.
    let soup: String = doc["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["path"] == "kitchen/soup.md")
        .map(|c| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        soup,
        std::fs::read_to_string(server.root.join("kitchen/soup.md")).unwrap()
    );
    // .mirai/ is never committed nor shown as a change.
    assert_eq!(
        git(&server.root, &["status", "--porcelain", "--ignored=no"])
            .lines()
            .filter(|l| l.contains(".mirai"))
            .count(),
        0
    );
}

#[test]
fn rebuilds_are_byte_identical_apart_from_generated_at() {
    let server = server_with_notes();
    rebuild(&server);
    let first = std::fs::read(artifact(&server)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    rebuild(&server);
    let second = std::fs::read(artifact(&server)).unwrap();
    let strip = |bytes: &[u8]| {
        let mut doc: Value = serde_json::from_slice(bytes).unwrap();
        doc.as_object_mut().unwrap().remove("generated_at");
        doc
    };
    assert_eq!(strip(&first), strip(&second));
    let text_first = String::from_utf8(first).unwrap();
    let text_second = String::from_utf8(second).unwrap();
    let cut = |t: &str| {
        let start = t.find("\"generated_at\"").unwrap();
        let end = start + t[start..].find(',').unwrap();
        format!("{}{}", &t[..start], &t[end..])
    };
    assert_eq!(
        cut(&text_first),
        cut(&text_second),
        "same bytes apart from generated_at"
    );
}

/// A rebuild after notes changed beside mirai reuses the unchanged notes from
/// the index in memory; what it writes is what a cold rebuild (after
/// invalidate, nothing to reuse) writes, byte for byte apart from
/// `generated_at`, and it answers queries alike.
#[test]
fn a_rebuild_that_reuses_notes_writes_what_a_cold_one_writes() {
    let server = server_with_notes();
    for i in 0..12 {
        server.write(
            &format!("filler/n{i}.md"),
            format!("# Filler {i}\n\nCompost and mulch, bed {i}.\n"),
        );
    }
    rebuild(&server);
    server.write(
        "garden/roses.md",
        "# Roses\n\nPrune roses in early spring; feed with compost.\n",
    );
    server.write(
        "garden/new.md",
        "# Beans\n\nBeans climb the compost fence.\n",
    );
    std::fs::remove_file(server.root.join("filler/n3.md")).unwrap();
    let reused_counts = rebuild(&server);
    let reused = std::fs::read_to_string(artifact(&server)).unwrap();
    let reused_hits = query(&server, "compost roses", "&limit=50").body;

    let answer = server.post_raw("/mcp/index/invalidate", "");
    assert_eq!(answer.body, json!({"invalidated": true}));
    let cold_counts = rebuild(&server);
    let cold = std::fs::read_to_string(artifact(&server)).unwrap();
    let cut = |t: &str| {
        let start = t.find("\"generated_at\"").unwrap();
        let end = start + t[start..].find(',').unwrap();
        format!("{}{}", &t[..start], &t[end..])
    };
    assert_eq!(reused_counts, cold_counts);
    let listed = server.get("/mcp/notes").body["notes"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(reused_counts["notes_indexed"], listed);
    assert!(reused.contains("early spring") && !reused.contains("bed 3."));
    assert_eq!(
        cut(&reused),
        cut(&cold),
        "same bytes apart from generated_at"
    );
    assert_eq!(
        reused_hits,
        query(&server, "compost roses", "&limit=50").body
    );
}

/// The rebuild reads the vault in one walk: it indexes exactly the notes
/// the listing gives (a symlinked note inside the root too, under its own
/// name), and never a file a symlink leads to outside the root, a hidden one
/// or one behind a symlinked folder.
#[test]
fn a_rebuild_indexes_exactly_the_listed_notes() {
    use std::os::unix::fs::symlink;
    let server = TestServer::start();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "outsideword\n").unwrap();
    server.write("real/target.md", "targetword\n");
    server.write(".hidden/h.md", "hiddenword\n");
    symlink("real/target.md", server.root.join("alias.md")).unwrap();
    symlink("real", server.root.join("linked")).unwrap();
    symlink(
        outside.path().join("secret.md"),
        server.root.join("leak.md"),
    )
    .unwrap();
    symlink(outside.path(), server.root.join("away")).unwrap();

    let counts = rebuild(&server);
    let listed = server.get("/mcp/notes").body["notes"].clone();
    assert_eq!(listed, json!(["alias.md", "real/target.md", "welcome.md"]));
    let doc: Value = serde_json::from_slice(&std::fs::read(artifact(&server)).unwrap()).unwrap();
    let indexed: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(json!(indexed), listed);
    assert_eq!(counts["notes_indexed"], 3);
    assert_eq!(
        paths(&query(&server, "targetword", "")),
        vec!["alias.md", "real/target.md"]
    );
    for word in ["outsideword", "hiddenword"] {
        assert!(paths(&query(&server, word, "")).is_empty(), "{word}");
    }
}

#[test]
fn status_without_an_artifact_is_all_nulls() {
    let server = server_with_notes();
    let answer = server.get("/mcp/index/status");
    assert_eq!(answer.status, 200);
    let body = answer.body;
    assert_eq!(body["present"], false);
    assert_eq!(body["notes_present"], 6);
    for key in [
        "generated_at",
        "notes_indexed",
        "chunks_indexed",
        "stale",
        "artifact_age_seconds",
        "artifact_byte_size",
        "chunks_content_bytes_total",
        "notes_commit",
    ] {
        assert!(body.get(key).is_some(), "{key} present: {body}");
        assert!(body[key].is_null(), "{key} is null: {body}");
    }
}

#[test]
fn status_reports_the_artifact_and_staleness() {
    let server = server_with_notes();
    rebuild(&server);
    let body = server.get("/mcp/index/status").body;
    assert_eq!(body["present"], true);
    assert_eq!(body["stale"], false, "{body}");
    assert_eq!(body["notes_indexed"], 6);
    assert_eq!(body["notes_present"], 6);
    assert!(body["artifact_age_seconds"].is_u64(), "{body}");
    assert_eq!(
        body["artifact_byte_size"],
        std::fs::metadata(artifact(&server)).unwrap().len()
    );
    assert!(body["chunks_content_bytes_total"].as_u64().unwrap() > 100);
    assert_eq!(
        body["notes_commit"],
        git(&server.root, &["rev-parse", "HEAD"]).trim()
    );

    std::thread::sleep(std::time::Duration::from_millis(20));
    server.write("garden/roses.md", "# Roses\n\nChanged.\n");
    assert_eq!(
        server.get("/mcp/index/status").body["stale"],
        true,
        "changed note"
    );
    rebuild(&server);
    assert_eq!(server.get("/mcp/index/status").body["stale"], false);
    server.write("new.md", "new\n");
    assert_eq!(
        server.get("/mcp/index/status").body["stale"],
        true,
        "added note"
    );
    rebuild(&server);
    std::fs::remove_file(server.root.join("new.md")).unwrap();
    assert_eq!(
        server.get("/mcp/index/status").body["stale"],
        true,
        "deleted note"
    );
}

#[test]
fn query_answers_the_documented_shape() {
    let server = server_with_notes();
    rebuild(&server);
    let answer = query(&server, "  aphids  ", "");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["query"], "aphids");
    assert_eq!(answer.body["limit"], 5);
    let chunk = &answer.body["chunks"][0];
    assert_eq!(chunk["metadata"]["path"], "garden/tomatoes.md");
    assert!(chunk["metadata"]["chunk_index"].is_u64());
    assert!(chunk["score"].as_f64().unwrap() > 0.0);
    assert_eq!(chunk["explanation"]["matched_terms"], json!(["aphids"]));
    assert_eq!(chunk["explanation"]["matched_term_count"], 1);
    let content = chunk["content"].as_str().unwrap();
    let start = chunk["metadata"]["snippet_offset"]["start"]
        .as_u64()
        .unwrap() as usize;
    let end = chunk["metadata"]["snippet_offset"]["end"].as_u64().unwrap() as usize;
    let snippet: String = content.chars().skip(start).take(end - start).collect();
    assert_eq!(snippet.to_lowercase(), "aphids");
}

#[test]
fn every_chunk_contains_a_query_term_and_terms_keep_query_order() {
    let server = server_with_notes();
    rebuild(&server);
    let answer = query(&server, "roses tomatoes", "&limit=50");
    assert_eq!(answer.status, 200);
    let chunks = answer.body["chunks"].as_array().unwrap();
    assert!(!chunks.is_empty());
    for chunk in chunks {
        let terms = chunk["explanation"]["matched_terms"].as_array().unwrap();
        assert!(!terms.is_empty(), "{chunk}");
        assert_eq!(chunk["explanation"]["matched_term_count"], terms.len());
        if terms.len() == 2 {
            assert_eq!(terms[0], "roses");
            assert_eq!(terms[1], "tomatoes");
        }
    }
    let again = query(&server, "roses tomatoes", "&limit=50");
    assert_eq!(answer.body, again.body, "deterministic");
}

#[test]
fn matched_terms_are_the_normalized_query_tokens_once_in_query_order() {
    // The original's contract: `Mango kiwi` answers ["mango", "kiwi"]. The
    // page highlights from these case-insensitively, and from snippet_offset.
    let server = TestServer::start();
    server.write(
        "fruit.md",
        "# Fruit\n\nA ripe mango and a KIWI for breakfast.\n",
    );
    for q in ["Mango kiwi", "MANGO Kiwi mango KIWI"] {
        let answer = query(&server, q, "");
        assert_eq!(answer.status, 200, "{answer:?}");
        let chunk = &answer.body["chunks"][0];
        assert_eq!(
            chunk["explanation"]["matched_terms"],
            json!(["mango", "kiwi"]),
            "{q}"
        );
        assert_eq!(chunk["explanation"]["matched_term_count"], 2, "{q}");
        let content: Vec<char> = chunk["content"].as_str().unwrap().chars().collect();
        let offset = &chunk["metadata"]["snippet_offset"];
        let (start, end) = (
            offset["start"].as_u64().unwrap() as usize,
            offset["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(content[start..end].iter().collect::<String>(), "mango");
    }
}

#[test]
fn cjk_text_is_findable() {
    let server = server_with_notes();
    rebuild(&server);
    let answer = query(&server, "豆腐", "");
    assert_eq!(
        paths(&answer).first().map(String::as_str),
        Some("日本/料理.md"),
        "{answer:?}"
    );
}

#[test]
fn front_matter_is_searchable() {
    let server = server_with_notes();
    rebuild(&server);
    let answer = query(&server, "cooking", "");
    assert_eq!(paths(&answer), ["kitchen/soup.md"]);
}

#[test]
fn query_validation() {
    let server = server_with_notes();
    server
        .get("/mcp/index/query")
        .assert_error(400, "invalid_query");
    server
        .get("/mcp/index/query?q=")
        .assert_error(400, "invalid_query");
    server
        .get("/mcp/index/query?q=%20%20")
        .assert_error(400, "invalid_query");
    for limit in [
        "0", "51", "010", "0x2", "1.5", "abc", "", "-1", "+3", "%201",
    ] {
        query(&server, "roses", &format!("&limit={limit}")).assert_error(400, "invalid_limit");
    }
    for limit in ["1", "50", "7"] {
        let answer = query(&server, "roses", &format!("&limit={limit}"));
        assert_eq!(answer.status, 200, "{limit}");
        assert_eq!(answer.body["limit"], limit.parse::<u64>().unwrap());
    }
    for prefix in ["", "/garden", "../garden", "garden/../../x", "%00"] {
        query(&server, "roses", &format!("&path_prefix={prefix}"))
            .assert_error(400, "invalid_query");
    }
}

#[test]
fn path_prefix_matches_whole_components() {
    let server = server_with_notes();
    rebuild(&server);
    for prefix in ["garden", "garden/"] {
        let answer = query(
            &server,
            "tomatoes roses",
            &format!("&limit=50&path_prefix={prefix}"),
        );
        let found = paths(&answer);
        assert!(!found.is_empty());
        assert!(
            found.iter().all(|p| p.starts_with("garden/")),
            "{prefix}: {found:?}"
        );
    }
    let answer = query(&server, "tomatoes", "&path_prefix=garden/tomatoes.md");
    assert_eq!(paths(&answer), ["garden/tomatoes.md"]);
}

#[test]
fn query_without_an_artifact_indexes_on_demand_and_writes_nothing() {
    let server = server_with_notes();
    let answer = query(&server, "basil", "");
    assert_eq!(paths(&answer), ["kitchen/soup.md"]);
    assert!(!artifact(&server).exists());
}

#[test]
fn the_next_query_after_an_apply_sees_the_change() {
    let server = server_with_notes();
    server.commit_all();
    rebuild(&server);
    assert!(paths(&query(&server, "zucchini", "")).is_empty());
    let patch = "--- a/garden/roses.md\n+++ b/garden/roses.md\n@@ -3 +3 @@\n-Prune roses in late winter.\n+Plant zucchini beside the roses.\n";
    let answer = server.post_json("/mcp/patch/apply", &json!({"patch": patch}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(paths(&query(&server, "zucchini", "")), ["garden/roses.md"]);
    assert!(
        paths(&query(&server, "prune", "")).is_empty(),
        "old text is gone"
    );
    let delete = "--- a/garden/roses.md\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-# Roses\n-\n-Plant zucchini beside the roses.\n";
    assert_eq!(
        server
            .post_json("/mcp/patch/apply", &json!({"patch": delete}))
            .status,
        200
    );
    assert!(
        paths(&query(&server, "zucchini", "")).is_empty(),
        "deleted note is gone"
    );
    let create = "--- /dev/null\n+++ b/fresh.md\n@@ -0,0 +1 @@\n+Kohlrabi soup.\n";
    assert_eq!(
        server
            .post_json("/mcp/patch/apply", &json!({"patch": create}))
            .status,
        200
    );
    assert_eq!(paths(&query(&server, "kohlrabi", "")), ["fresh.md"]);
}

#[test]
fn corrupt_artifacts_are_invalid_index_artifact_until_rebuilt() {
    let server = server_with_notes();
    rebuild(&server);
    let good = std::fs::read(artifact(&server)).unwrap();
    let corruptions: Vec<Vec<u8>> = vec![
        b"not json".to_vec(),
        good[..good.len() / 2].to_vec(),
        String::from_utf8(good.clone())
            .unwrap()
            .replacen("\"version\":1", "\"version\":2", 1)
            .into_bytes(),
        b"{\"version\":1}".to_vec(),
        b"[]".to_vec(),
        Vec::new(),
    ];
    for bad in corruptions {
        std::fs::write(artifact(&server), &bad).unwrap();
        server
            .get("/mcp/index/status")
            .assert_error(500, "invalid_index_artifact");
        query(&server, "roses", "").assert_error(500, "invalid_index_artifact");
        rebuild(&server);
        assert_eq!(server.get("/mcp/index/status").body["present"], true);
        assert_eq!(query(&server, "roses", "").status, 200);
    }
}

#[test]
fn invalidate_deletes_the_artifact_once() {
    let server = server_with_notes();
    rebuild(&server);
    assert_eq!(
        server.post_raw("/mcp/index/invalidate", "").body,
        json!({"invalidated": true})
    );
    assert!(!artifact(&server).exists());
    assert_eq!(
        server.post_raw("/mcp/index/invalidate", "").body,
        json!({"invalidated": false})
    );
    assert_eq!(server.get("/mcp/index/status").body["present"], false);
    assert_eq!(paths(&query(&server, "basil", "")), ["kitchen/soup.md"]);
}

#[test]
fn read_only_denies_rebuild_and_invalidate_but_answers_queries() {
    let server = TestServer::start_with(|c| c.policy = PolicyMode::ReadOnly);
    server.write("a.md", "alpha beta\n");
    server
        .post_raw("/mcp/index/rebuild", "")
        .assert_error(403, "policy_denied");
    server
        .post_raw("/mcp/index/invalidate", "")
        .assert_error(403, "policy_denied");
    assert_eq!(server.get("/mcp/index/status").status, 200);
    assert_eq!(paths(&query(&server, "alpha", "")), ["a.md"]);
}

#[test]
fn an_artifact_rewritten_by_another_process_is_picked_up() {
    let server = server_with_notes();
    rebuild(&server);
    assert!(paths(&query(&server, "quince", "")).is_empty());
    server.write("orchard.md", "# Orchard\n\nQuince trees.\n");
    let out = common::mirai_cli()
        .args(["index", "rebuild", "--notes-root"])
        .arg(&server.root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(paths(&query(&server, "quince", "")), ["orchard.md"]);
}

#[test]
fn cli_rebuild_prints_one_summary_line_and_status_prints_json() {
    let server = server_with_notes();
    let out = common::mirai_cli()
        .args(["index", "rebuild", "--notes-root"])
        .arg(&server.root)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    for word in ["6 notes", "chunks", "bytes", "ms"] {
        assert!(stdout.contains(word), "{word} in {stdout}");
    }
    assert!(artifact(&server).exists());

    let out = common::mirai_cli()
        .args(["index", "status", "--notes-root"])
        .arg(&server.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["present"], true);
    assert_eq!(status["notes_indexed"], 6);
}

#[test]
fn cli_rebuild_fails_with_a_message_on_a_bad_root() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let out = common::mirai_cli()
        .args(["index", "rebuild", "--notes-root"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).trim().is_empty());
    let out = common::mirai_cli()
        .args(["index", "rebuild", "--notes-root"])
        .arg(dir.path())
        .env("MIRAI_POLICY_MODE", "read_only")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("denied in read_only mode"));
}

#[test]
fn an_apply_is_persisted_to_the_artifact_in_the_background() {
    let server = server_with_notes();
    server.commit_all();
    rebuild(&server);
    let generated_at = server.get("/mcp/index/status").body["generated_at"].clone();
    let create = "--- /dev/null\n+++ b/fresh.md\n@@ -0,0 +1 @@\n+Kohlrabi soup.\n";
    let applied = server.post_json("/mcp/patch/apply", &json!({"patch": create}));
    assert_eq!(applied.status, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // The file lands first; the server counts it written a moment later.
    let status = loop {
        let text = std::fs::read_to_string(artifact(&server)).unwrap_or_default();
        let status = server.get("/mcp/index/status").body;
        if text.contains("Kohlrabi") && status["stale"] == false {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the artifact never got the change: {status}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status["notes_indexed"], 7);
    assert_eq!(
        status["generated_at"], generated_at,
        "the notes were scanned at the rebuild"
    );
    assert_eq!(status["notes_commit"], applied.body["commit"]);
    // A fresh process reading the artifact sees the change.
    let out = common::mirai_cli()
        .args(["index", "status", "--notes-root"])
        .arg(&server.root)
        .output()
        .unwrap();
    let from_disk: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(from_disk["notes_indexed"], 7);
    assert_eq!(from_disk["stale"], false);
}
