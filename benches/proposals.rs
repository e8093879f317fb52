//! Review mode's listing: 1,000 pending proposals (made by 1,000 HTTP writes,
//! each answered 202) listed over HTTP, beside `GET /health` in the same run:
//! the first page (newest 100), every page in turn (10 pages of 100), and a
//! status no proposal has (every file looked at, nothing listed); then one
//! proposal's detail and the time a write takes to be proposed at 1,000 pending.
//!
//! cargo bench --bench proposals

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use serde_json::{json, Value};
use support::{report, time_ms, Server};

const PENDING: usize = 1000;
const SAMPLES: usize = 100;

fn main() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    let cache = work.path().join("cache");
    let server = Server::start_with_env(
        &root,
        &[
            ("MIRAI_CACHE_DIR", cache.to_str().unwrap()),
            ("MIRAI_POLICY_MODE", "review"),
            ("MIRAI_REVIEWER_TOKEN", "bench-reviewer"),
            ("MIRAI_PROPOSALS_MAX_PENDING", &(PENDING + 1).to_string()),
        ],
    );
    let post = |path: &str, body: &Value| -> (u16, Value) {
        let response = server
            .client
            .post(format!("{}{path}", server.url))
            .json(body)
            .send()
            .unwrap();
        (response.status().as_u16(), response.json().unwrap())
    };
    let get = |path: &str| -> Value {
        let response = server
            .client
            .get(format!("{}{path}", server.url))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.json().unwrap()
    };

    let started = std::time::Instant::now();
    let mut propose: Vec<f64> = Vec::with_capacity(PENDING);
    let mut last = String::new();
    for i in 0..PENDING {
        let body = json!({"path": format!("inbox/n{i:04}.md"), "content": format!("# Note {i}\n\nsome text\n")});
        let mut answer = (0, Value::Null);
        propose.push(time_ms(|| answer = post("/mcp/notes/write", &body)));
        assert_eq!(answer.0, 202, "{}", answer.1);
        last = answer.1["proposal"].as_str().unwrap().to_string();
    }
    println!(
        "{PENDING} writes proposed over HTTP in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let first_page = "/mcp/proposals?limit=100".to_string();
    assert_eq!(get(&first_page)["proposals"].as_array().unwrap().len(), 100);
    let mut health: Vec<f64> = (0..SAMPLES).map(|_| server.health_ms()).collect();
    let mut first: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| drop(get(&first_page))))
        .collect();
    let mut every: Vec<f64> = (0..SAMPLES / 10)
        .map(|_| {
            time_ms(|| {
                let mut listed = 0;
                let mut cursor: Option<String> = None;
                loop {
                    let page = match &cursor {
                        None => get(&first_page),
                        Some(c) => get(&format!("{first_page}&cursor={c}")),
                    };
                    listed += page["proposals"].as_array().unwrap().len();
                    match page["next_cursor"].as_str() {
                        Some(next) => cursor = Some(next.to_string()),
                        None => break,
                    }
                }
                assert_eq!(listed, PENDING);
            })
        })
        .collect();
    let none = "/mcp/proposals?status=rejected&limit=100";
    let mut scan: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| assert!(get(none)["proposals"].as_array().unwrap().is_empty())))
        .collect();
    let detail = format!("/mcp/proposals/get?id={last}");
    let mut one: Vec<f64> = (0..SAMPLES)
        .map(|_| time_ms(|| assert_eq!(get(&detail)["applies"], true)))
        .collect();

    let health = report("GET /health", &mut health);
    let first = report("proposals.list, newest 100 of 1,000 pending", &mut first);
    let every = report("proposals.list, all 1,000 (10 pages)", &mut every);
    let scan = report("proposals.list, a status none has (scan)", &mut scan);
    report("proposals.get (applies checked)", &mut one);
    report("a write proposed (0 to 1,000 pending)", &mut propose);
    println!(
        "first page / health: {:.1}   all pages / health: {:.1}   scan / health: {:.1}",
        first / health,
        every / health,
        scan / health
    );
}
