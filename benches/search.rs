//! Semantic and hybrid search on a large vault, through HTTP, with a fast fake
//! embedding server (deterministic hashed bag-of-words vectors of the real
//! model's dimension, 384, answered at once) so the figures are mirai's own:
//! cold rebuilds with embeddings off (the lexical baseline) against on (while
//! the worker embeds the vault, and once it is done), embedding throughput
//! (the whole vault, from start to no chunk pending), lexical and hybrid query
//! latency (cold: one embedding call; warm: the query vector cached) against
//! `/health` in the same run. Then in this process: exact cosine search over
//! 10k to 100k chunks.
//!
//! cargo bench --bench search -- VAULT   (a vault from `cargo run --release --example gen-notes -- --git`)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

#[path = "../spec/common/fake_embed.rs"]
#[allow(dead_code)] // the specs use the rest of it
mod fake_embed;
#[path = "../spec/common/loopback.rs"]
mod loopback;

use std::time::{Duration, Instant};

use mirai::embed::search::{KeyCache, Matrix};
use mirai::embed::vectors::Vectors;
use mirai::index::Index;
use serde_json::Value;
use support::{copy_tree, note_name_words, report, time_ms, vault_arg, Server};

const DIMENSION: usize = 384;
const REBUILDS: usize = 5;
const QUERIES: usize = 300;

fn main() {
    let vault = vault_arg("search");
    let fake = fake_embed::FakeEmbed::with_dimension(DIMENSION);
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("vault");
    copy_tree(&vault, &root);
    let _ = std::fs::remove_dir_all(root.join(".mirai"));

    // Cold rebuilds, embeddings off.
    let off = Server::start(&root);
    let rebuild = |server: &Server| {
        let invalidated = server
            .client
            .post(format!("{}/mcp/index/invalidate", server.url))
            .send()
            .unwrap();
        assert_eq!(invalidated.status().as_u16(), 200);
        time_ms(|| {
            let response = server
                .client
                .post(format!("{}/mcp/index/rebuild", server.url))
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
        })
    };
    let mut rebuild_off: Vec<f64> = (0..REBUILDS).map(|_| rebuild(&off)).collect();
    drop(off);

    // Embeddings on: the worker starts embedding the vault at once.
    let env = [
        ("MIRAI_EMBED_BASE_URL", fake.base_url.as_str()),
        ("MIRAI_EMBED_MODEL", "fake-bow-384"),
        ("MIRAI_EMBED_BATCH", "64"),
    ];
    let started = Instant::now();
    let on = Server::start_with_env(&root, &env);
    let status = |server: &Server| -> Value {
        server
            .client
            .get(format!("{}/mcp/index/status", server.url))
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let mut rebuild_busy = Vec::new();
    for _ in 0..REBUILDS {
        rebuild_busy.push(rebuild(&on));
    }
    let chunks = loop {
        let s = status(&on);
        let e = &s["embeddings"];
        if e["chunks_pending"] == 0 && e["chunks_embedded"].as_u64().unwrap_or(0) > 0 {
            break e["chunks_embedded"].as_u64().unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "never embedded: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let embed_secs = started.elapsed().as_secs_f64();
    println!(
        "vault: {chunks} chunks embedded (dimension {DIMENSION}) in {embed_secs:.1} s from start-up: {:.0} chunks/s, \
         {} requests to the fake server (the first {REBUILDS} rebuilds ran meanwhile)",
        chunks as f64 / embed_secs,
        fake.requests()
    );
    // Every chunk has its vector: a rebuild re-keys the chunks and embeds nothing.
    let mut rebuild_idle = Vec::new();
    for _ in 0..REBUILDS {
        rebuild_idle.push(rebuild(&on));
        std::thread::sleep(Duration::from_millis(500));
    }
    let off_ms = report("rebuild (cold), embeddings off", &mut rebuild_off);
    report(
        "rebuild (cold), embeddings on, worker embedding",
        &mut rebuild_busy,
    );
    let idle_ms = report(
        "rebuild (cold), embeddings on, all embedded",
        &mut rebuild_idle,
    );
    println!(
        "rebuild with embeddings on (all embedded) over off: {:.2}x",
        idle_ms / off_ms
    );

    // Queries: words from the vault's note names, so every one finds something.
    let words = note_name_words(&on);
    let queries: Vec<String> = (0..QUERIES)
        .map(|i| {
            let a = &words[(i * 7919) % words.len()];
            let b = &words[(i * 104_729 + 13) % words.len()];
            format!("{a} {b} {i}")
        })
        .collect();
    let mut health = Vec::new();
    let run = |mode: &str, health: &mut Vec<f64>| -> Vec<f64> {
        queries
            .iter()
            .map(|q| {
                health.push(on.health_ms());
                time_ms(|| {
                    let response = on
                        .client
                        .get(format!("{}/mcp/index/query", on.url))
                        .query(&[("q", q.as_str()), ("mode", mode)])
                        .send()
                        .unwrap();
                    assert_eq!(response.status().as_u16(), 200);
                    let body: Value = response.json().unwrap();
                    assert_eq!(body["mode"], mode, "{body}");
                })
            })
            .collect()
    };
    let mut lexical = run("lexical", &mut health);
    let mut cold = run("hybrid", &mut health);
    let mut warm = run("hybrid", &mut health);
    let mut semantic = run("semantic", &mut health);
    let base = report("GET /health (baseline)", &mut health);
    let lex = report("query, lexical", &mut lexical);
    report("query, hybrid, cold (one embedding call)", &mut cold);
    let hyb = report("query, hybrid, warm (query vector cached)", &mut warm);
    report("query, semantic, warm", &mut semantic);
    println!(
        "hybrid warm over lexical: {:.2}x; over /health: {:.1}x",
        hyb / lex,
        hyb / base
    );
    drop(on);

    // Exact search alone, in this process, as the number of chunks grows.
    for count in [10_000usize, 35_000, 100_000] {
        let notes: Vec<(String, String)> = (0..count)
            .map(|i| {
                (
                    format!("n{i}.md"),
                    format!("note {i} word{} word{}\n", i % 977, i % 89),
                )
            })
            .collect();
        let index = Index::build(notes);
        let keyed = KeyCache::default().keyed(&index);
        let mut vectors = Vectors::new("fake", "bench");
        for k in &keyed {
            vectors.insert(k.key, fake_embed::vector(k.text, DIMENSION));
        }
        let matrix = Matrix::build(&keyed, &vectors);
        let query = fake_embed::vector("word17 word5 note", DIMENSION);
        let mut samples: Vec<f64> = (0..50)
            .map(|_| time_ms(|| assert!(!matrix.nearest(&index, &query, 100, None).is_empty())))
            .collect();
        report(
            &format!("exact top-100 over {count} chunks (in process)"),
            &mut samples,
        );
    }
}
