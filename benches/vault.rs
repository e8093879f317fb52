//! Notes as a vault, on a 10,000-note vault from the project's generator
//! (wikilinks in about 3% of words): building the link graph from scratch
//! beside building the index from the same texts (time and memory, in this
//! process), then over HTTP on the release server: `notes.links` of random
//! notes, `notes.outline` and a section read of a 5,000-line note, and
//! `notes.move` of a note with 200 backlinks (each move rewrites the 200
//! linking notes), each beside a baseline in the same run (`/health`; for the
//! move, a one-note `notes.write` and a move with `update_links: false`).
//!
//! cargo bench --bench vault

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

#[path = "support/vault.rs"]
mod vault;

mod support;

use std::fmt::Write;
use std::time::Instant;

use mirai::index::Index;
use mirai::notes::Notes;
use mirai::vault::Vault;
use support::{report, time_ms, Server};

const NOTES: usize = 10_000;
const SAMPLES: usize = 300;
const LONG_LINES: usize = 5_000;
/// Notes linking to the note the move bench moves.
const BACKLINKS: usize = 200;
/// Moves timed (each way in turn).
const MOVES: usize = 10;

/// This process's resident memory, in MiB.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// A 5,000-line note: 50 sections of 100 lines, each with a subsection.
fn long_note() -> String {
    let mut text = String::from("---\ntitle: Long\n---\n");
    let mut lines = 3;
    let mut section = 0;
    while lines < LONG_LINES {
        section += 1;
        let _ = writeln!(text, "# Part {section}");
        lines += 1;
        for i in 0..97 {
            if i == 48 {
                let _ = writeln!(text, "## Detail {section}");
            } else {
                let _ = writeln!(
                    text,
                    "Line {i} of part {section}: notes about [[Part {section}]] and the plans for it."
                );
            }
            lines += 1;
            if lines == LONG_LINES {
                break;
            }
        }
    }
    text
}

fn main() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    let started = Instant::now();
    let summary = vault::generate(&root, &vault::Options::new(NOTES, 1)).unwrap();
    std::fs::write(root.join("long.md"), long_note()).unwrap();
    std::fs::create_dir_all(root.join("hub/linkers")).unwrap();
    std::fs::write(
        root.join("hub/target.md"),
        "# Target\n\nThe note every linker names.\n",
    )
    .unwrap();
    for i in 0..BACKLINKS {
        std::fs::write(
            root.join(format!("hub/linkers/l{i:03}.md")),
            format!("# Linker {i}\n\nSee [[target]], or [it](../target.md#Target).\n"),
        )
        .unwrap();
    }
    vault::commit(&root, 1).unwrap();
    println!(
        "vault: {} notes, {} wikilinks written ({:.1} per note), {:.1} MB, made in {:.1} s",
        summary.notes,
        summary.links,
        summary.links as f64 / summary.notes as f64,
        summary.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );

    // In this process: the same texts, the index and then the graph built from them.
    let notes = Notes::open(&root).unwrap();
    let texts = notes.read_all().unwrap();
    let files = notes.list_files();
    let rss_start = rss_mib();
    let mut index = None;
    let index_ms = time_ms(|| index = Some(Index::build(texts.clone())));
    let rss_index = rss_mib();
    let mut graph = None;
    let graph_ms = time_ms(|| graph = Some(Vault::build(&texts, files.clone())));
    let rss_graph = rss_mib();
    let graph = graph.unwrap();
    let links: usize = graph.notes().map(|(_, facts)| facts.links.len()).sum();
    println!(
        "{:<44} {graph_ms:>9.1} ms   +{:.1} MiB   ({} notes, {links} links)",
        "link graph build, from the texts",
        rss_graph - rss_index,
        graph.len()
    );
    println!(
        "{:<44} {index_ms:>9.1} ms   +{:.1} MiB   (baseline, same texts)",
        "index build, from the texts",
        rss_index - rss_start
    );
    // Worked out once per version of the vault, then kept until it changes.
    let first_ms = time_ms(|| {
        let _ = (graph.broken().len(), graph.orphans().len());
    });
    println!(
        "{:<44} {first_ms:>9.1} ms",
        "broken links + orphans, whole vault, first"
    );
    let mut broken_ms = Vec::new();
    for _ in 0..5 {
        broken_ms.push(time_ms(|| {
            let _ = (graph.broken().len(), graph.orphans().len());
        }));
    }
    report("broken links + orphans, kept", &mut broken_ms);
    drop((index, graph, texts));

    // Over HTTP: the release server with the artifact (the graph is built with it).
    let cache = work.path().join("cache");
    let server = Server::start_with_env(&root, &[("MIRAI_CACHE_DIR", cache.to_str().unwrap())]);
    let get = |path: &str| -> serde_json::Value {
        let response = server
            .client
            .get(format!("{}{path}", server.url))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        response.json().unwrap()
    };
    let rebuild_ms = time_ms(|| {
        let response = server
            .client
            .post(format!("{}/mcp/index/rebuild", server.url))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
    });
    println!(
        "{:<44} {rebuild_ms:>9.1} ms   (server RSS {:.0} MiB)",
        "index.rebuild with the graph, over HTTP",
        server.rss_mib()
    );
    let listed: Vec<String> = serde_json::from_value(get("/mcp/notes")["notes"].clone()).unwrap();
    let mut rng = fastrand::Rng::with_seed(7);
    let picks: Vec<String> = (0..SAMPLES)
        .map(|_| support_encode(&listed[rng.usize(..listed.len())]))
        .collect();
    let mut backlinks = 0usize;
    let mut links_ms: Vec<f64> = picks
        .iter()
        .map(|path| {
            time_ms(|| {
                let body = get(&format!("/mcp/notes/links?path={path}"));
                backlinks += body["backlinks"].as_array().map_or(0, Vec::len);
            })
        })
        .collect();
    let mut health: Vec<f64> = (0..SAMPLES).map(|_| server.health_ms()).collect();
    report("GET /health (baseline)", &mut health);
    report("notes.links of a random note", &mut links_ms);
    println!(
        "{:<44} {:.1} backlinks per note on average",
        "",
        backlinks as f64 / SAMPLES as f64
    );
    let mut graph_page: Vec<f64> = (0..20)
        .map(|_| time_ms(|| drop(get("/mcp/notes/graph?limit=100"))))
        .collect();
    report("notes.graph, first page of 100", &mut graph_page);

    let first_outline = time_ms(|| drop(get("/mcp/notes/outline?path=long.md")));
    println!(
        "{:<44} {first_outline:>9.3} ms   (tokens counted once)",
        "notes.outline of a 5,000-line note, first"
    );
    let mut outline: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| drop(get("/mcp/notes/outline?path=long.md"))))
        .collect();
    report("notes.outline of a 5,000-line note", &mut outline);
    let mut section: Vec<f64> = (0..SAMPLES)
        .map(|i| {
            let part = 1 + i % 50;
            time_ms(|| {
                drop(get(&format!(
                    "/mcp/notes/read?path=long.md&section=Part%20{part}%20%3E%20Detail%20{part}"
                )))
            })
        })
        .collect();
    report("notes.read section of a 5,000-line note", &mut section);
    let mut whole: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| drop(get("/mcp/notes/read?path=long.md"))))
        .collect();
    report("notes.read of the whole 5,000-line note", &mut whole);

    let post = |path: &str, body: serde_json::Value| -> serde_json::Value {
        let response = server
            .client
            .post(format!("{}{path}", server.url))
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        response.json().unwrap()
    };
    let mut write_ms: Vec<f64> = (0..MOVES)
        .map(|i| {
            time_ms(|| {
                drop(post(
                    "/mcp/notes/write",
                    serde_json::json!({"path": "hub/other.md", "content": format!("# Other\n\n{i}\n")}),
                ))
            })
        })
        .collect();
    report("notes.write of one note (baseline)", &mut write_ms);
    let places = ["hub/target.md", "moved/elsewhere.md"];
    let mut rename_ms: Vec<f64> = (0..MOVES)
        .map(|i| {
            let (from, to) = (places[i % 2], places[(i + 1) % 2]);
            time_ms(|| {
                drop(post(
                    "/mcp/notes/move",
                    serde_json::json!({"from": from, "to": to, "update_links": false}),
                ))
            })
        })
        .collect();
    report("notes.move, update_links false (baseline)", &mut rename_ms);
    let mut rewritten = 0usize;
    let mut move_ms: Vec<f64> = (0..MOVES)
        .map(|i| {
            let (from, to) = (places[i % 2], places[(i + 1) % 2]);
            time_ms(|| {
                let body = post(
                    "/mcp/notes/move",
                    serde_json::json!({"from": from, "to": to}),
                );
                rewritten = body["rewritten"].as_array().map_or(0, Vec::len);
            })
        })
        .collect();
    assert_eq!(rewritten, BACKLINKS, "each move rewrites every linker");
    report("notes.move of a note with 200 backlinks", &mut move_ms);
}

/// Percent-encodes a path for a query string.
fn support_encode(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
