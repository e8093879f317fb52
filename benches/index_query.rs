//! The index on a large vault, through HTTP: cold rebuilds (after
//! `index.invalidate`, nothing to reuse) and unchanged rebuilds (every note
//! reused from the index in memory), the server's memory after one and after
//! ten rebuilds of each kind, artifact size, and query latency, against the
//! server's own `/health` round trip measured in the same run; queries of two
//! common words back to back, as a client searching in a loop sends them; the
//! first query of a restarted server, timed from the process's start. Then in
//! this process, through the library: loading the artifact from its binary
//! form against the JSON alone, and pruned ranking against exhaustive scoring
//! (identical answers checked) on the same queries, on rare-with-common ones
//! and on the two-common-word pairs (the HTTP figure without HTTP); queries of
//! six words, which the default's feedback ranks twice, against the same
//! queries as typed; three to eight common words as typed (where ranking by
//! blocks stops paying); and the first query after a one-note change against
//! the same query again.
//!
//! cargo bench --bench index_query -- VAULT   (a vault from `cargo run --release --example gen-notes`)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use mirai::index::{artifact, Feedback, Index, Params};
use serde_json::Value;
use support::{copy_tree, note_name_words, report, time_ms, vault_arg, Server};

const REBUILDS: usize = 10;
const QUERIES: usize = 1000;
const RESTARTS: usize = 3;

fn main() {
    let vault = vault_arg("index_query");
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("vault");
    copy_tree(&vault, &root);
    let _ = std::fs::remove_dir_all(root.join(".mirai"));
    let server = Server::start(&root);
    let url = |p: &str| format!("{}{p}", server.url);
    let rss_before = server.rss_mib();

    let mut counts = Value::Null;
    let mut rebuild = || {
        time_ms(|| {
            let response = server
                .client
                .post(url("/mcp/index/rebuild"))
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            counts = response.json().unwrap();
        })
    };
    let mut health = Vec::new();
    let mut cold = Vec::new();
    let mut rss_cold = Vec::new();
    for _ in 0..REBUILDS {
        let response = server
            .client
            .post(url("/mcp/index/invalidate"))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        health.push(server.health_ms());
        cold.push(rebuild());
        rss_cold.push(server.rss_mib());
    }
    let mut unchanged = Vec::new();
    let mut rss_unchanged = Vec::new();
    for _ in 0..REBUILDS {
        health.push(server.health_ms());
        unchanged.push(rebuild());
        rss_unchanged.push(server.rss_mib());
    }
    let artifact = std::fs::metadata(root.join(".mirai/index.json"))
        .unwrap()
        .len();
    println!(
        "vault: {} notes, {} chunks; artifact {:.1} MiB",
        counts["notes_indexed"],
        counts["chunks_indexed"],
        artifact as f64 / 1048576.0
    );

    // Queries: words from the vault's note names, so every one finds something.
    let words = note_name_words(&server);
    let queries: Vec<String> = (0..QUERIES)
        .map(|i| {
            let a = &words[(i * 7919) % words.len()];
            let b = &words[(i * 104_729 + 13) % words.len()];
            if i % 2 == 0 {
                a.clone()
            } else {
                format!("{a} {b}")
            }
        })
        .collect();

    let mut query = Vec::new();
    let mut hits = 0usize;
    for q in &queries {
        health.push(server.health_ms());
        query.push(time_ms(|| {
            let response = server
                .client
                .get(url("/mcp/index/query"))
                .query(&[("q", q.as_str())])
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            let body: Value = response.json().unwrap();
            hits += body["chunks"].as_array().map_or(0, Vec::len);
        }));
    }
    // What a client searching in a loop sees: two of the vault's most common
    // name words at a time, back to back on one connection.
    let common = common_pairs(&words);
    let mut pairs = Vec::with_capacity(QUERIES);
    for i in 0..QUERIES {
        let q = &common[i % common.len()];
        pairs.push(time_ms(|| {
            let response = server
                .client
                .get(url("/mcp/index/query"))
                .query(&[("q", q.as_str()), ("limit", "5")])
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
        }));
    }
    let rss_loaded = server.rss_mib();

    // A fresh server loads the artifact on its first query; three restarts.
    drop(server);
    let mut firsts = Vec::new();
    let mut ready = Vec::new();
    let (mut rss_fresh, mut rss_fresh_loaded) = (0.0, 0.0);
    for _ in 0..RESTARTS {
        let fresh = Server::start(&root);
        rss_fresh = fresh.rss_mib();
        ready.push(fresh.started.elapsed().as_secs_f64() * 1000.0);
        let response = fresh
            .client
            .get(format!("{}/mcp/index/query", fresh.url))
            .query(&[("q", common[0].as_str()), ("limit", "5")])
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        firsts.push(fresh.started.elapsed().as_secs_f64() * 1000.0);
        rss_fresh_loaded = fresh.rss_mib();
    }
    let (first_query_ms, _) = support::median_p95(&mut firsts);
    let (ready_ms, _) = support::median_p95(&mut ready);

    println!();
    let c = report("index.rebuild, cold (after invalidate)", &mut cold);
    let u = report("index.rebuild, unchanged (notes reused)", &mut unchanged);
    let q = report("index.query over HTTP (limit 5)", &mut query);
    report("index.query, two common words, back to back", &mut pairs);
    let h = report("baseline: GET /health over HTTP", &mut health);
    println!(
        "\nunchanged / cold rebuild: {:.3}; cold / health: {:.0}; query / health: {:.2}; {} hits over {} queries",
        u / c,
        c / h,
        q / h,
        hits,
        queries.len()
    );
    println!(
        "server RSS: {rss_before:.0} MiB at start; after cold rebuild 1: {:.0} MiB, 10: {:.0} MiB; \
         after unchanged rebuild 1: {:.0} MiB, 10: {:.0} MiB; {rss_loaded:.0} MiB after queries",
        rss_cold[0],
        rss_cold[REBUILDS - 1],
        rss_unchanged[0],
        rss_unchanged[REBUILDS - 1],
    );
    println!(
        "restarted server ({RESTARTS} restarts, median): first query (two common words) answered {first_query_ms:.0} ms after the process started (/health answered at {ready_ms:.0} ms); RSS {rss_fresh:.0} MiB before, {rss_fresh_loaded:.0} MiB after"
    );

    // In process: the two ways to load, and pruned against exhaustive ranking.
    let state =
        cap_std::fs::Dir::open_ambient_dir(root.join(".mirai"), cap_std::ambient_authority())
            .unwrap();
    let mut loaded = None;
    let binary_ms = time_ms(|| loaded = artifact::read(&state, true).unwrap());
    let json_ms = time_ms(|| drop(artifact::read(&state, false).unwrap()));
    let (index, _) = loaded.unwrap();
    println!(
        "\nartifact load in process: binary form {binary_ms:.0} ms, JSON {json_ms:.0} ms (index.bin {:.1} MiB)",
        std::fs::metadata(root.join(".mirai/index.bin")).map_or(0, |m| m.len()) as f64 / 1048576.0
    );
    let rare: Vec<String> = rare_words(&index);
    let mixed: Vec<String> = (0..QUERIES)
        .map(|i| {
            format!(
                "{} {}",
                rare[i % rare.len()],
                words[(i * 7919) % words.len()]
            )
        })
        .collect();
    // Six of the vault's name words: long enough for the default's feedback.
    let six_words: Vec<String> = (0..QUERIES / 5)
        .map(|i| {
            (0..6)
                .map(|k| words[(i * 7919 + k * 104_729 + 7) % words.len()].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    // The HTTP figure for two common words, without HTTP: what ranking them costs.
    let common_queries: Vec<String> = (0..QUERIES)
        .map(|i| common[i % common.len()].clone())
        .collect();
    for (name, set) in [
        ("bench queries", &queries),
        ("rare + common", &mixed),
        ("two common words", &common_queries),
    ] {
        pruned_against_exhaustive(&index, name, set);
    }
    let with_feedback = pruned_against_exhaustive(&index, "six words, with feedback", &six_words);

    // The same six words as typed: what the default's feedback costs. Then
    // common words, three to eight at a time, as typed: where ranking by
    // blocks stops paying against scoring every candidate.
    let mut index = index;
    let default_feedback = Params::default().feedback;
    index.set_feedback(Feedback::OFF);
    let typed = pruned_against_exhaustive(&index, "six words, as typed", &six_words);
    println!("with feedback / as typed: {:.2}", with_feedback / typed);
    let top: Vec<&str> = common_words(&words, 20);
    for k in [3, 4, 5, 6, 8] {
        let set: Vec<String> = (0..QUERIES / 5)
            .map(|i| {
                (0..k)
                    .map(|j| top[(i + j * 7) % top.len()])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        pruned_against_exhaustive(&index, &format!("{k} common words, as typed"), &set);
    }
    index.set_feedback(default_feedback);

    // A write then a search: the first query after a change pays for what
    // ranking derives from the index (its dense figures, the terms' block bounds).
    let path = index.paths().next().unwrap().to_string();
    let (mut after_change, mut again) = (Vec::new(), Vec::new());
    for (i, q) in common.iter().cycle().take(RESTARTS * 20).enumerate() {
        index.upsert_note(&path, &format!("# Changed {i}\n\nA note written again.\n"));
        after_change.push(time_ms(|| drop(index.query(q, 5, None))));
        again.push(time_ms(|| drop(index.query(q, 5, None))));
    }
    let first = report(
        "query after a one-note change (two common words)",
        &mut after_change,
    );
    let next = report("the same query again", &mut again);
    println!("first after a change / again: {:.1}", first / next);
}

/// Terms that occur in fewer than 500 chunks: the vault's words are all
/// common, its rare terms are numbers.
fn rare_words(index: &Index) -> Vec<String> {
    let out: Vec<String> = (0..100_000)
        .map(|n| n.to_string())
        .filter(|w| (1..500).contains(&index.query(w, 500, None).len()))
        .take(200)
        .collect();
    assert!(!out.is_empty(), "no rare terms found in the vault");
    out
}

/// Ranks every query of `set` pruned, then exhaustively (the answers
/// checked identical), prints both and their ratio; the pruned median.
fn pruned_against_exhaustive(index: &Index, name: &str, set: &[String]) -> f64 {
    // One pass each (the first to run would otherwise warm the caches for the other).
    let (mut pruned, mut exhaustive) = (Vec::new(), Vec::new());
    let mut answers = Vec::new();
    for q in set {
        pruned.push(time_ms(|| answers.push(index.query(q, 5, None))));
    }
    for (q, want) in set.iter().zip(&answers) {
        let mut got = Vec::new();
        exhaustive.push(time_ms(|| got = index.query_exhaustive(q, 5, None)));
        assert_eq!(&got, want, "{q}");
    }
    let p = report(&format!("query, pruned ({name})"), &mut pruned);
    let e = report(&format!("query, exhaustive ({name})"), &mut exhaustive);
    println!("pruned / exhaustive: {:.2}", p / e);
    p
}

/// The `n` words most frequent in the vault's note names, most frequent first.
fn common_words(words: &[String], n: usize) -> Vec<&str> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for word in words {
        *counts.entry(word.as_str()).or_default() += 1;
    }
    let mut common: Vec<(&str, usize)> = counts.into_iter().collect();
    common.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    common.truncate(n);
    common.into_iter().map(|(word, _)| word).collect()
}

/// Pairs of the 20 words most frequent in the vault's note names (each with
/// the next), as queries of two common words.
fn common_pairs(words: &[String]) -> Vec<String> {
    let common = common_words(words, 20);
    (0..common.len())
        .map(|i| format!("{} {}", common[i], common[(i + 1) % common.len()]))
        .collect()
}
