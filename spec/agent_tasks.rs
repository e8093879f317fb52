//! The agent task suite (benches/agent-tasks) with the scripted fake model:
//! every task must pass its checker on the real repository it leaves.

use crate::common;

#[path = "../benches/agent-tasks/suite.rs"]
mod suite;

use common::fake_llm::{FakeLlm, Script};
use common::TestServer;
use mirai::config::PolicyMode;
use serde_json::json;

#[test]
fn every_task_passes_with_its_scripted_model() {
    let tasks = suite::load_all();
    assert!(tasks.len() >= 34, "the suite has {} tasks", tasks.len());
    assert!(
        tasks
            .iter()
            .filter(|t| t.name.starts_with("vault-"))
            .count()
            >= 10,
        "at least 10 vault tasks"
    );
    let mut failed = Vec::new();
    for task in &tasks {
        let dir = tempfile::tempdir().unwrap();
        let prepared = suite::prepare(task, dir.path());
        let llm = FakeLlm::start(Script::answering(&prepared.script));
        let base_url = llm.base_url.clone();
        let (read_only, review) = (task.read_only, task.review);
        let server = TestServer::start_in(dir, prepared.root.clone(), |config| {
            config.llm.base_url = base_url;
            if read_only {
                config.policy = PolicyMode::ReadOnly;
            }
            if review {
                config.policy = PolicyMode::Review;
                config.reviewer_token = Some("reviewer".into());
            }
        });
        let answer = server.post_json("/agent/run", &json!({"task": prepared.task}));
        assert_eq!(answer.status, 200, "{}: {answer:?}", task.name);
        let failures = suite::check(task, &prepared, &answer.body);
        if !failures.is_empty() {
            failed.push(format!("{}: {failures:?}\n{}", task.name, answer.body));
        }
        assert_eq!(
            llm.requests().len(),
            prepared.script.len(),
            "{}: every scripted answer is used",
            task.name
        );
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// What the suite's checker finds wrong when the model answers `task_name`
/// with `reply` alone.
fn failures_of_one_reply(task_name: &str, reply: &str) -> Vec<String> {
    let task = suite::load_all()
        .into_iter()
        .find(|task| task.name == task_name)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let prepared = suite::prepare(&task, dir.path());
    // The model says the same again when told the facts.
    let llm = FakeLlm::start(Script {
        repeat_last: true,
        ..Script::answering(&[reply.to_string()])
    });
    let base_url = llm.base_url.clone();
    let server = TestServer::start_in(dir, prepared.root.clone(), |config| {
        config.llm.base_url = base_url;
    });
    let answer = server.post_json("/agent/run", &json!({"task": prepared.task}));
    suite::check(&task, &prepared, &answer.body)
}

#[test]
fn a_false_claim_fails_a_task_that_expects_no_warnings() {
    let failures = failures_of_one_reply(
        "which-note-mentions",
        "<think>Easy.</think><reply>Updated projects/garden.md with the answer.</reply>",
    );
    assert!(
        failures
            .iter()
            .any(|f| f.starts_with("the run has warnings") && f.contains("describes a change")),
        "{failures:?}"
    );
}

#[test]
fn a_model_that_does_nothing_fails_the_checkers() {
    let failures = failures_of_one_reply(
        "fix-typo",
        "<think>Easy.</think><reply>Fixed the typo.</reply>",
    );
    assert!(
        failures
            .iter()
            .any(|f| f.contains("0 commits (expected 1)")),
        "{failures:?}"
    );
    assert!(
        failures.iter().any(|f| f.contains("recieve")),
        "{failures:?}"
    );
}

#[test]
fn scripted_only_tasks_run_with_the_scripted_model_alone() {
    let claim = "vault-claim-without-a-write-marked".to_string();
    let names = |real: bool| -> Vec<String> {
        suite::selected(suite::load_all(), &[], real)
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    assert!(names(false).contains(&claim));
    assert!(!names(true).contains(&claim));
    assert!(names(true).contains(&"vault-backlinks".to_string()));
    let only = suite::selected(suite::load_all(), std::slice::from_ref(&claim), false);
    assert_eq!(only.len(), 1);
}
