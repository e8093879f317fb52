//! The agent's own time per step: a run against a fake model that answers at
//! once (a real HTTP server in this process, the one spec/agent.rs uses) with
//! a small program, so what remains of each step is mirai's work: the
//! request, parsing, the sandbox with two host calls, the observation, the
//! transcript. Baselines in the same run: the fake model's round trip as the
//! agent measured it (`llm_ms`), and `GET /health`.
//!
//! cargo bench --bench agent_step

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

#[path = "../spec/common/fake_llm.rs"]
#[allow(dead_code)]
mod fake_llm;
#[path = "../spec/common/loopback.rs"]
mod loopback;
mod support;

use fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};
use support::{median_p95, report, time_ms, Server};

const RUNS: usize = 40;
const STEPS: usize = 8;

fn main() {
    let mut script = Script::answering(&[
        "<think>Look again.</think>\n<code>const {notes} = await mirai.notes.list();\n\
         const first = await mirai.notes.read({path: notes[0]});\n\
         return {count: notes.length, bytes: first.content.length};</code>"
            .into(),
    ]);
    script.repeat_last = true;
    let llm = FakeLlm::start(script);
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    let cache = work.path().join("cache");
    let server = Server::start_with_env(
        &root,
        &[
            ("MIRAI_LLM_BASE_URL", llm.base_url.as_str()),
            ("MIRAI_LLM_MODEL", "fake"),
            ("MIRAI_CACHE_DIR", cache.to_str().unwrap()),
        ],
    );
    let mut per_step = Vec::new();
    let mut llm_ms = Vec::new();
    let mut health = Vec::new();
    for i in 0..RUNS + 3 {
        let mut report_body = Value::Null;
        let wall = time_ms(|| {
            let response = server
                .client
                .post(format!("{}/agent/run", server.url))
                .json(&json!({"task": "Count the notes.", "max_steps": STEPS}))
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            report_body = response.json().unwrap();
        });
        assert_eq!(report_body["stopped"], "max_steps", "{report_body}");
        let steps = report_body["steps"].as_array().unwrap();
        assert_eq!(steps.len(), STEPS);
        assert!(steps.iter().all(|s| s["error"].is_null()), "{report_body}");
        let waited: f64 = steps.iter().map(|s| s["llm_ms"].as_f64().unwrap()).sum();
        if i >= 3 {
            per_step.push((wall - waited) / STEPS as f64);
            llm_ms.extend(steps.iter().map(|s| s["llm_ms"].as_f64().unwrap()));
            health.push(server.health_ms());
        }
    }
    println!("{RUNS} runs of {STEPS} steps; each step runs a program with 2 host calls");
    let base = report("baseline: GET /health", &mut health);
    report("the fake model's round trip (llm_ms)", &mut llm_ms);
    let own = report("mirai's own time per step", &mut per_step);
    let (_, p95) = median_p95(&mut per_step);
    println!(
        "per step: median {own:.3} ms, p95 {p95:.3} ms ({:.1}x a /health round trip)",
        own / base
    );
}
