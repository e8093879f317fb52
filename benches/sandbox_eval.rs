//! The sandbox through HTTP: server start-up with a cold and a warm module
//! cache, the latency of an eval that makes three host calls (against the
//! server's own `/health` round trip and a call-free eval, measured in the
//! same run), evals per second on every core, and the guest's size.
//!
//! cargo bench --bench sandbox_eval

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{report, time_ms, Server};

const SAMPLES: usize = 500;
const THROUGHPUT_SECONDS: u64 = 5;

const THREE_CALLS: &str = "const list = await mirai.notes.list();
const note = await mirai.notes.read({path: list.notes[0]});
const hits = await mirai.index.query({q: 'garden', limit: 3});
return {notes: list.notes.length, bytes: note.content.length, hits: hits.chunks.length};";

fn main() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    let cache = work.path().join("cache");
    println!(
        "guest module: {:.0} KiB (guest/mirai-guest.wasm, pre-initialized)",
        mirai::sandbox::GUEST_WASM.len() as f64 / 1024.0
    );

    // Start-up: spawn to the first /health answer, the module compiled (cold
    // cache) or loaded (warm). The first start also creates the notes repository.
    let env = [("MIRAI_CACHE_DIR", cache.to_str().unwrap())];
    drop(Server::start_with_env(&root, &env));
    std::fs::remove_dir_all(&cache).unwrap();
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(&cache);
        cold.push(time_ms(|| drop(Server::start_with_env(&root, &env))));
        warm.push(time_ms(|| drop(Server::start_with_env(&root, &env))));
    }
    report("start-up, module compiled (cold cache)", &mut cold);
    report("start-up, module from cache (warm)", &mut warm);

    let server = Server::start_with_env(&root, &env);
    for i in 0..20 {
        let note = format!("# Note {i}\n\nThe garden has {i} beds of herbs and a pond.\n");
        let response = server
            .client
            .post(format!("{}/mcp/notes/write", server.url))
            .json(&json!({"path": format!("n{i:02}.md"), "content": note}))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }

    let eval = |code: &str| {
        let response = server
            .client
            .post(format!("{}/agent/eval", server.url))
            .json(&json!({ "code": code }))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let body: Value = response.json().unwrap();
        assert!(body["error"].is_null(), "{body}");
        body
    };
    let answer = eval(THREE_CALLS);
    assert_eq!(answer["calls"].as_array().unwrap().len(), 3, "{answer}");
    println!(
        "eval with 3 host calls, inside the server: wall {} ms, fuel {}, memory peak {:.1} MiB",
        answer["stats"]["wall_ms"],
        answer["stats"]["fuel"],
        answer["stats"]["memory_peak_bytes"].as_f64().unwrap() / 1048576.0
    );
    for _ in 0..50 {
        eval(THREE_CALLS);
    }

    let mut health = Vec::new();
    let mut trivial = Vec::new();
    let mut three = Vec::new();
    for _ in 0..SAMPLES {
        health.push(server.health_ms());
        trivial.push(time_ms(|| {
            eval("return 1 + 1");
        }));
        three.push(time_ms(|| {
            eval(THREE_CALLS);
        }));
    }
    let base = report("baseline: GET /health", &mut health);
    let one = report("eval `return 1 + 1`", &mut trivial);
    let median = report("eval with 3 host calls", &mut three);
    println!(
        "ratios to /health: trivial eval {:.1}x, 3-call eval {:.1}x",
        one / base,
        median / base
    );

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
    let deadline = Instant::now() + Duration::from_secs(THROUGHPUT_SECONDS);
    let done: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut n = 0;
                    while Instant::now() < deadline {
                        eval(THREE_CALLS);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    println!(
        "throughput: {:.0} evals/s with 3 host calls each ({threads} clients, {THROUGHPUT_SECONDS} s)",
        done as f64 / THROUGHPUT_SECONDS as f64
    );
}
