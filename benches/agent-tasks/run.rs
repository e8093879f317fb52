//! Runs the agent task suite against a model and prints, per task and in
//! total: success, steps, prompt and completion tokens, wall time, and why
//! the run stopped; and how many final answers were untrue (a change stated
//! that the record does not show, with no outcome leading it; target 0). Each task gets a fresh copy of the vault and its own
//! release server.
//!
//! cargo bench --bench agent_tasks                       # the scripted fake model
//! cargo bench --bench agent_tasks -- --base-url http://127.0.0.1:8080/v1 --model qwen2.5-coder
//!     [--key-env OPENAI_API_KEY] [--only fix-typo,delete-note] [--max-steps 8]
//!     [--transcripts DIR]   # keep each run's transcript as DIR/<task>.jsonl

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

#[path = "../../spec/common/fake_llm.rs"]
#[allow(dead_code)]
mod fake_llm;
#[path = "../../spec/common/loopback.rs"]
mod loopback;
#[path = "suite.rs"]
mod suite;
#[path = "../support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::time::Duration;

use fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};
use support::{time_ms, Server};

struct Options {
    base_url: Option<String>,
    model: String,
    key_env: Option<String>,
    only: Vec<String>,
    max_steps: usize,
    transcripts: Option<PathBuf>,
}

fn options() -> Options {
    let mut options = Options {
        base_url: None,
        model: "fake".into(),
        key_env: None,
        only: Vec::new(),
        max_steps: 8,
        transcripts: None,
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--base-url" => options.base_url = Some(value()),
            "--model" => options.model = value(),
            "--key-env" => options.key_env = Some(value()),
            "--only" => options.only = value().split(',').map(str::to_string).collect(),
            "--max-steps" => options.max_steps = value().parse().expect("a number"),
            "--transcripts" => options.transcripts = Some(PathBuf::from(value())),
            other => panic!("unknown flag {other}; see the top of benches/agent-tasks/run.rs"),
        }
    }
    options
}

fn main() {
    let options = options();
    let tasks = suite::selected(suite::load_all(), &options.only, options.base_url.is_some());
    let model_name = match &options.base_url {
        Some(url) => format!("{} at {url}", options.model),
        None => "the scripted fake model".into(),
    };
    println!(
        "agent task suite: {} tasks, {model_name}, max_steps {}",
        tasks.len(),
        options.max_steps
    );
    println!(
        "{:<30} {:>6} {:>5} {:>8} {:>8} {:>8}  stopped",
        "task", "ok", "steps", "prompt", "compl", "wall s"
    );
    let (mut passed, mut steps, mut prompt, mut completion, mut wall) = (0, 0, 0, 0, 0.0);
    let mut untrue = 0;
    for task in &tasks {
        let dir = tempfile::tempdir().unwrap();
        let prepared = suite::prepare(task, dir.path());
        // The fake model lives as long as the task; a real one is just a URL.
        let fake = options
            .base_url
            .is_none()
            .then(|| FakeLlm::start(Script::answering(&prepared.script)));
        let base_url = options
            .base_url
            .clone()
            .unwrap_or_else(|| fake.as_ref().unwrap().base_url.clone());
        let key = options
            .key_env
            .as_ref()
            .and_then(|var| std::env::var(var).ok())
            .unwrap_or_default();
        let cache = dir.path().join("cache");
        let mut env = vec![
            ("MIRAI_LLM_BASE_URL", base_url.as_str()),
            ("MIRAI_LLM_MODEL", options.model.as_str()),
            ("MIRAI_CACHE_DIR", cache.to_str().unwrap()),
            ("MIRAI_AGENT_DEADLINE_MS", "600000"),
            ("MIRAI_LLM_TIMEOUT_MS", "300000"),
        ];
        if !key.is_empty() {
            env.push(("MIRAI_LLM_API_KEY", key.as_str()));
        }
        if task.read_only {
            env.push(("MIRAI_POLICY_MODE", "read_only"));
        }
        if task.review {
            env.push(("MIRAI_POLICY_MODE", "review"));
            env.push(("MIRAI_REVIEWER_TOKEN", "bench-reviewer"));
        }
        let server = Server::start_with_env(&prepared.root, &env);
        let mut report = Value::Null;
        let ms = time_ms(|| {
            let response = server
                .client
                .post(format!("{}/agent/run", server.url))
                .timeout(Duration::from_secs(900))
                .json(&json!({"task": prepared.task, "max_steps": options.max_steps}))
                .send()
                .unwrap();
            report = response.json().unwrap();
        });
        if let (Some(keep), Some(run_id)) = (&options.transcripts, report["run_id"].as_str()) {
            let from = prepared.root.join(format!(".mirai/runs/{run_id}.jsonl"));
            std::fs::create_dir_all(keep).unwrap();
            std::fs::copy(&from, keep.join(format!("{}.jsonl", task.name)))
                .unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        }
        let failures = suite::check(task, &prepared, &report);
        let n = report["steps"].as_array().map_or(0, Vec::len);
        let p = report["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
        let c = report["usage"]["completion_tokens"].as_u64().unwrap_or(0);
        println!(
            "{:<30} {:>6} {:>5} {:>8} {:>8} {:>8.1}  {}",
            task.name,
            if failures.is_empty() { "pass" } else { "FAIL" },
            n,
            p,
            c,
            ms / 1000.0,
            report["stopped"].as_str().unwrap_or("(no report)")
        );
        for failure in &failures {
            println!("    {failure}");
        }
        if !failures.is_empty() {
            print_steps(&report);
        }
        passed += usize::from(failures.is_empty());
        untrue += usize::from(suite::untrue_answer(&report).is_some());
        steps += n;
        prompt += p;
        completion += c;
        wall += ms / 1000.0;
    }
    println!(
        "{:<30} {:>6} {:>5} {:>8} {:>8} {:>8.1}",
        "total",
        format!("{passed}/{}", tasks.len()),
        steps,
        prompt,
        completion,
        wall
    );
    // A final answer stating a change its record lacks, with no outcome leading it: a failure of the system.
    println!("untrue final answers: {untrue} (target 0)");
}

/// What the model did, step by step, so a failure can be read without the transcript.
fn print_steps(report: &Value) {
    let shorten = |text: &str| {
        let one_line = text.replace('\n', "\\n");
        match one_line.char_indices().nth(200) {
            Some((cut, _)) => format!("{}…", &one_line[..cut]),
            None => one_line,
        }
    };
    for (i, step) in report["steps"].as_array().into_iter().flatten().enumerate() {
        if let Some(code) = step["code"].as_str() {
            println!("      {}. code: {}", i + 1, shorten(code));
        }
        if !step["error"].is_null() {
            println!("         error: {}", shorten(&step["error"].to_string()));
        } else if !step["result"].is_null() {
            println!("         result: {}", shorten(&step["result"].to_string()));
        }
    }
    if let Some(reply) = report["reply"].as_str() {
        println!("      reply: {}", shorten(reply));
    }
    if let Some(detail) = report["stop_detail"].as_str() {
        println!("      stopped: {}", shorten(detail));
    }
}
