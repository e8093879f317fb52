//! The agent through `POST /agent/run`, against a fake LLM that is a real
//! HTTP server replaying scripted conversations (fixtures/agent/*.json):
//! commits and their trailers, dry runs, malformed answers, every way a run
//! stops, transcripts and the server-sent event stream.

use crate::common;

use common::fake_llm::{FakeLlm, Script};
use common::{git, Answer, TestServer};
use mirai::config::PolicyMode;
use serde_json::{json, Value};

const TODO: &str = "# Todo\n\n- buy milk\n- water the plants\n";

/// A server whose model is `llm`, with todo.md committed.
fn server_for(llm: &FakeLlm, adjust: impl FnOnce(&mut mirai::config::Config)) -> TestServer {
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|config| {
        config.llm.base_url = base_url;
        config.llm.model = "fake-model".into();
        config.llm.max_retries = 2;
        adjust(config);
    });
    server.write("todo.md", TODO);
    // A read_only server does not initialize a repository; the note is enough there.
    if server.root.join(".git").exists() {
        server.commit_all();
    }
    server
}

fn run(server: &TestServer, body: Value) -> Answer {
    server.post_json("/agent/run", &body)
}

fn ok_run(server: &TestServer, body: Value) -> Value {
    let answer = run(server, body);
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

/// The content of message `index` of request `request` the fake LLM received.
fn message(llm: &FakeLlm, request: usize, index: usize) -> String {
    llm.requests()[request]["messages"][index]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_task_that_reads_edits_and_replies_leaves_one_commit_with_the_run_trailer() {
    let llm = FakeLlm::fixture("read-edit-reply");
    let server = server_for(&llm, |_| {});
    let before = server.commit_count();
    let report = ok_run(&server, json!({"task": "Make the milk oat milk."}));

    assert_eq!(report["stopped"], "reply", "{report}");
    assert_eq!(
        report["reply"],
        "Changed \"buy milk\" to \"buy oat milk\" in todo.md."
    );
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0]["think"], "I should read the todo note first.");
    assert_eq!(steps[0]["result"], TODO);
    assert_eq!(steps[1]["calls"][0]["op"], "notes.edit");
    assert_eq!(steps[1]["calls"][0]["ok"], true);
    assert!(steps[1]["llm_ms"].as_f64().unwrap() >= 0.0);

    assert_eq!(server.commit_count(), before + 1);
    assert_eq!(report["commits"], json!([server.head()]));
    assert_eq!(steps[1]["result"], json!(server.head()));
    let run_id = report["run_id"].as_str().unwrap();
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        format!("mcp.patch_apply: todo.md\n\nMirai-Run: {run_id}\n\n")
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        TODO.replace("buy milk", "buy oat milk")
    );
    assert_eq!(
        report["usage"],
        json!({"prompt_tokens": 300, "completion_tokens": 60})
    );

    // What mirai sent: the generated prompt, the task first, stop sequences, max_tokens,
    // and each observation as the next user message.
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0];
    assert_eq!(first["model"], "fake-model");
    assert!(first["stop"]
        .as_array()
        .unwrap()
        .contains(&json!("</reply>")));
    // Each answer is bounded (MIRAI_LLM_MAX_TOKENS, default 1024).
    assert_eq!(first["max_tokens"], 1024);
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("mirai.notes.edit({"), "{system}");
    assert_eq!(
        first["messages"][1],
        json!({"role": "user", "content": "Make the milk oat milk."})
    );
    let observation = requests[1]["messages"][3]["content"].as_str().unwrap();
    assert!(observation.starts_with("<observation>"), "{observation}");
    let inner: Value = serde_json::from_str(
        observation
            .trim_start_matches("<observation>")
            .trim_end_matches("</observation>"),
    )
    .unwrap();
    assert_eq!(inner["result"], TODO);
    assert_eq!(inner["calls"], json!([{"op": "notes.read", "ok": true}]));
}

#[test]
fn a_dry_run_leaves_the_repository_untouched_and_answers_the_diff() {
    let llm = FakeLlm::fixture("read-edit-reply");
    let server = server_for(&llm, |_| {});
    let head = server.head();
    let report = ok_run(
        &server,
        json!({"task": "Make the milk oat milk.", "dry_run": true}),
    );
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["commits"], json!([]));
    assert_eq!(
        report["steps"][1]["result"],
        Value::Null,
        "a dry write has no commit"
    );
    assert_eq!(server.head(), head);
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        TODO
    );
    let changes = report["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0]["path"], "todo.md");
    let applied = server.post_json("/mcp/patch/apply", &json!({"patch": changes[0]["patch"]}));
    assert_eq!(applied.status, 200, "{applied:?}");
    assert!(std::fs::read_to_string(server.root.join("todo.md"))
        .unwrap()
        .contains("buy oat milk"));
}

#[test]
fn a_malformed_answer_gets_one_correction_and_counts_as_a_step() {
    let llm = FakeLlm::fixture("malformed-then-reply");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Tidy up."}));
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["reply"], "Nothing needed changing.");
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["error"]["code"], "protocol_error");
    let requests = llm.requests();
    let correction = requests[1]["messages"][3]["content"].as_str().unwrap();
    assert!(correction.contains("<reply>"), "{correction}");
    assert_eq!(
        requests[1]["messages"][2]["content"],
        "<think>I should look at the note first.</think>"
    );
}

#[test]
fn two_malformed_answers_in_a_row_stop_the_run() {
    let llm = FakeLlm::fixture("malformed-twice");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Tidy up."}));
    assert_eq!(report["stopped"], "protocol_error");
    assert_eq!(report["reply"], Value::Null);
    assert_eq!(report["steps"].as_array().unwrap().len(), 2);
}

#[test]
fn code_and_reply_in_one_answer_run_the_code_then_finish() {
    let llm = FakeLlm::fixture("code-and-reply");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Create made.md."}));
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["reply"], "Created made.md.");
    assert_eq!(
        std::fs::read_to_string(server.root.join("made.md")).unwrap(),
        "made\n"
    );
    assert_eq!(report["commits"].as_array().unwrap().len(), 1);
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn a_model_that_writes_the_next_turn_itself_is_cut_at_its_own_turn() {
    let llm = FakeLlm::fixture("invents-next-turn");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "What is in todo.md?"}));
    // The invented "User:" turn and the reply after it are dropped: the code
    // ran, and the run went on to the model's real reply.
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["reply"], "todo.md has two items.");
    assert_eq!(report["steps"][0]["result"], TODO);
    let requests = llm.requests();
    let kept = requests[1]["messages"][2]["content"].as_str().unwrap();
    assert!(!kept.contains("User:"), "{kept}");
    assert!(kept.ends_with("</code>"), "{kept}");
}

#[test]
fn an_object_instead_of_a_diff_is_an_error_the_model_recovers_from() {
    let llm = FakeLlm::fixture("object-instead-of-diff");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Remove the milk item."}));
    assert_eq!(report["stopped"], "reply");
    let first = &report["steps"][0];
    assert_eq!(first["error"]["code"], "invalid_patch");
    assert!(
        first["error"]["message"]
            .as_str()
            .unwrap()
            .contains("patch"),
        "{first}"
    );
    assert_eq!(report["commits"].as_array().unwrap().len(), 1);
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        "# Todo\n\n- water the plants\n"
    );
}

#[test]
fn a_reply_claiming_a_change_that_failed_shows_no_commits_and_the_failed_call() {
    let llm = FakeLlm::fixture("false-claim");
    let server = server_for(&llm, |_| {});
    let head = server.head();
    let text = server
        .raw()
        .post(format!("{}/agent/run", server.url))
        .json(&json!({"task": "Make the bread rye bread."}))
        .send()
        .unwrap()
        .text()
        .unwrap();
    // The answer leads with mirai's record; the reply, still the model's, is marked.
    let run_id_end = text.find("\",\"").unwrap();
    assert!(
        text[run_id_end..].starts_with("\",\"outcome\":{\"kind\":\"nothing\""),
        "{text}"
    );
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["reply"], "I changed bread to rye bread in todo.md.");
    assert_eq!(report["reply_contradicted"], true);
    assert_eq!(report["commits"], json!([]));
    let failed = &report["outcome"]["failed"][0];
    assert_eq!(report["outcome"]["kind"], "nothing");
    assert_eq!(
        (
            failed["op"].as_str(),
            failed["path"].as_str(),
            failed["code"].as_str()
        ),
        (Some("notes.edit"), Some("todo.md"), Some("conflict"))
    );
    assert_eq!(
        report["outcome"]["summary"],
        "Nothing was changed. 1 write failed: notes.edit todo.md (conflict)."
    );
    // ... and says where the two disagree.
    assert_eq!(
        report["warnings"],
        json!([
            "a write was refused or failed (notes.edit) and no write succeeded: commits is empty",
            "the model's reply describes a change (\"I changed bread to rye bread in todo.md\"), but no write succeeded: commits is empty",
            "the model claims a change (\"I changed bread to rye bread in todo.md\"), but mirai's record shows that nothing was changed; the outcome above is mirai's record",
        ])
    );
    // The contradicting reply was answered once with the facts.
    assert_eq!(
        report["steps"][2]["contested_reply"],
        "I changed bread to rye bread in todo.md."
    );
    let facts = message(&llm, 3, 7);
    assert!(
        facts.starts_with("Your reply was not given to the user: the model claims a change")
            && facts.contains("mirai's record of this run: Nothing was changed."),
        "{facts}"
    );
    assert_eq!(
        report["steps"][0]["calls"],
        json!([{"op": "notes.edit", "ok": false, "ms": report["steps"][0]["calls"][0]["ms"]}])
    );
    assert_eq!(server.head(), head);
    // Its first reply, right after the failed edit, was held back once.
    assert_eq!(
        report["steps"][1]["held_reply"],
        "I changed bread to rye bread in todo.md."
    );
    assert!(report["steps"][2].get("held_reply").is_none());
    let again = message(&llm, 2, 5);
    assert!(
        again.starts_with("Your reply was not given to the user: your last code failed"),
        "{again}"
    );
    let observation = message(&llm, 1, 3);
    assert!(
        observation.contains("\"code\":\"conflict\""),
        "{observation}"
    );
    assert!(
        observation.contains(
            "The notes.edit call changed nothing. Next: a <code> block that calls it again"
        ),
        "{observation}"
    );
    assert!(
        observation.contains("\"commits_so_far\":0"),
        "{observation}"
    );
}

#[test]
fn a_read_only_claim_and_an_invented_path_are_warned_of_in_the_answer_and_the_transcript() {
    let llm = FakeLlm::start(Script::answering(&[
        r#"<think>Append it.</think><code>return await mirai.notes.append({path: "todo.md", text: "- bread"});</code>"#.into(),
        "<think>Done.</think><reply>Added the bullet to todo.md; see also shopping/list.md and tdo.md.</reply>".into(),
        "<think>Done.</think><reply>Added the bullet to todo.md; see also shopping/list.md and tdo.md.</reply>".into(),
    ]));
    let server = server_for(&llm, |config| config.policy = PolicyMode::ReadOnly);
    let report = ok_run(&server, json!({"task": "Add \"- bread\" to todo.md."}));
    // The reply is the model's, untouched; the warnings go beside it.
    assert_eq!(
        report["reply"],
        "Added the bullet to todo.md; see also shopping/list.md and tdo.md."
    );
    let expected = json!([
        "the deployment is read-only and the model tried to write (notes.append); nothing was changed: commits is empty",
        "the model's reply describes a change (\"Added the bullet to todo.md\"), but no write succeeded: commits is empty",
        "the model's reply names shopping/list.md, but there is no note at that path",
        "the model's reply names tdo.md, but there is no note at that path; did you mean \"todo.md\"?",
        "the model claims a change (\"Added the bullet to todo.md\"), but mirai's record shows that nothing was changed; the outcome above is mirai's record",
    ]);
    assert_eq!(report["warnings"], expected);
    assert_eq!(report["reply_contradicted"], true);
    let run_id = report["run_id"].as_str().unwrap();
    let transcript =
        std::fs::read_to_string(server.root.join(format!(".mirai/runs/{run_id}.jsonl"))).unwrap();
    let end: Value = serde_json::from_str(transcript.lines().last().unwrap()).unwrap();
    assert_eq!(end["type"], "run_end");
    assert_eq!(end["warnings"], expected);
    assert_eq!(end["outcome"], report["outcome"]);
    assert_eq!(end["reply_contradicted"], true);
    let contested: Vec<Value> = transcript
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["type"] == "reply_contested")
        .collect();
    assert_eq!(contested.len(), 1, "{transcript}");
    assert_eq!(contested[0]["outcome"]["kind"], "nothing");
}

#[test]
fn an_honest_reply_gets_no_warnings() {
    let llm = FakeLlm::start(Script::answering(&[
        r#"<think>Append it.</think><code>return await mirai.notes.append({path: "todo.md", text: "- bread"});</code>"#.into(),
        "<think>Committed.</think><reply>Added \"- bread\" to todo.md.</reply>".into(),
    ]));
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Add \"- bread\" to todo.md."}));
    assert_eq!(report["commits"].as_array().unwrap().len(), 1);
    assert_eq!(report["warnings"], json!([]));
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        format!("{TODO}- bread\n")
    );
}

#[test]
fn a_reply_written_before_failing_code_is_held_back_and_the_run_goes_on() {
    let llm = FakeLlm::fixture("premature-reply");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Make the bread rye bread."}));
    assert_eq!(report["stopped"], "reply");
    assert_eq!(
        report["reply"],
        "todo.md has no bread item, so nothing was changed."
    );
    assert_eq!(report["steps"].as_array().unwrap().len(), 2);
    let observation = message(&llm, 1, 3);
    assert!(
        observation.contains("Your <reply> was not given to the user"),
        "{observation}"
    );
}

#[test]
fn resending_the_same_failing_code_is_taken_out_of_the_history_and_said() {
    let llm = FakeLlm::fixture("repeats-failing-code");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Edit todo.md."}));
    assert_eq!(report["stopped"], "reply");
    // Two tries, a reply held back once, the reply that stands.
    assert_eq!(report["steps"].as_array().unwrap().len(), 4);
    assert_eq!(report["reply"], "I could not edit todo.md.");
    let first = message(&llm, 1, 3);
    assert!(first.contains("to add lines, use notes.append"), "{first}");
    assert!(!first.contains("same code"), "{first}");
    // The model sees its first try and its observation again, not its loop.
    let requests = llm.requests();
    assert_eq!(requests[2]["messages"].as_array().unwrap().len(), 4);
    let second = message(&llm, 2, 3);
    assert!(
        second.contains("You sent this same code 2 times and it failed the same way"),
        "{second}"
    );
    assert!(
        second.contains("to add lines, use notes.append"),
        "{second}"
    );
    // At temperature 0 it would most likely send that code a third time.
    assert_eq!(requests[1]["temperature"], 0.0);
    assert_eq!(requests[2]["temperature"], 0.7);
    assert_eq!(requests[3]["temperature"], 0.0);
}

#[test]
fn rereading_the_same_result_is_said_once_per_repeat_and_the_transcript_records_it() {
    let llm = FakeLlm::fixture("repeats-a-read");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "What does todo.md list?"}));
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["steps"].as_array().unwrap().len(), 4);
    let requests = llm.requests();
    for (request, times) in [(2, 2), (3, 3)] {
        assert_eq!(requests[request]["messages"].as_array().unwrap().len(), 4);
        let note = message(&llm, request, 3);
        assert!(
            note.contains(&format!(
                "You ran this same code {times} times and got this same result each time"
            )),
            "{note}"
        );
        assert!(note.contains("buy milk"), "{note}");
    }
    let run_id = report["run_id"].as_str().unwrap();
    let transcript =
        std::fs::read_to_string(server.root.join(format!(".mirai/runs/{run_id}.jsonl"))).unwrap();
    let repeats: Vec<Value> = transcript
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["type"] == "repeat")
        .collect();
    assert_eq!(repeats.len(), 2, "{transcript}");
    assert_eq!(repeats[1]["times"], 3);
}

#[test]
fn code_that_returns_nothing_after_its_calls_is_told_what_they_answered() {
    let llm = FakeLlm::fixture("reads-a-missing-field");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "How many notes are there?"}));
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["steps"][0]["result"], Value::Null);
    let first = message(&llm, 1, 3);
    assert!(
        first.contains(
            "Your code returned nothing (null or undefined). mirai.notes.list answered {notes: string[2]}"
        ),
        "{first}"
    );
    // A program that returns something gets no such note.
    assert_eq!(report["steps"][1]["result"], 2);
    assert!(!message(&llm, 2, 5).contains("answered"));
}

#[test]
fn a_write_that_changes_nothing_is_said_to_have_changed_nothing() {
    let llm = FakeLlm::fixture("changes-nothing");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Fix the typo in todo.md."}));
    assert_eq!(report["commits"], json!([]));
    assert_eq!(report["steps"][0]["result"]["commit"], Value::Null);
    let first = message(&llm, 1, 3);
    assert!(
        first.contains("A write succeeded but changed nothing (its commit is null)"),
        "{first}"
    );
}

#[test]
fn a_request_missing_a_field_is_told_the_calls_shape() {
    let llm = FakeLlm::fixture("misses-a-field");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Add \"- call mum\" under Todo."}));
    assert_eq!(report["commits"].as_array().unwrap().len(), 1);
    let first = message(&llm, 1, 3);
    assert!(first.contains("missing field `path`"), "{first}");
    assert!(
        first.contains("mirai.notes.insert takes {after_line?: string, before_line?: string, heading?: string, path: string, text: string}."),
        "{first}"
    );
}

#[test]
fn a_model_that_never_replies_stops_at_max_steps() {
    let llm = FakeLlm::fixture("never-replies");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Look around.", "max_steps": 3}));
    assert_eq!(report["stopped"], "max_steps");
    assert_eq!(report["steps"].as_array().unwrap().len(), 3);
    assert_eq!(llm.requests().len(), 3);
    assert!(report["stop_detail"].as_str().unwrap().contains("3 steps"));
}

#[test]
fn a_slow_model_stops_at_the_deadline() {
    let llm = FakeLlm::fixture("slow-second-answer");
    let server = server_for(&llm, |config| config.agent.deadline_ms = 1_500);
    let started = std::time::Instant::now();
    let report = ok_run(&server, json!({"task": "Hurry."}));
    assert_eq!(report["stopped"], "deadline", "{report}");
    assert_eq!(report["steps"].as_array().unwrap().len(), 1);
    // The model would answer after 3 s; the run ends at its 1.5 s deadline instead.
    assert!(started.elapsed() < std::time::Duration::from_millis(2_900));
}

#[test]
fn a_429_is_retried_and_the_run_goes_on() {
    let llm = FakeLlm::fixture("rate-limited-then-ok");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Check."}));
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["reply"], "All good.");
    assert_eq!(llm.requests().len(), 2);
}

#[test]
fn a_provider_failing_from_the_start_is_503_and_later_is_llm_error() {
    let llm = FakeLlm::fixture("server-error-forever");
    let server = server_for(&llm, |_| {});
    run(&server, json!({"task": "Anything."})).assert_error(503, "llm_unavailable");
    assert_eq!(llm.requests().len(), 3, "one try and two retries");

    let llm = FakeLlm::fixture("error-after-first-step");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Anything."}));
    assert_eq!(report["stopped"], "llm_error");
    assert!(
        report["stop_detail"].as_str().unwrap().contains("500"),
        "{report}"
    );
}

#[test]
fn a_program_that_throws_is_observed_and_the_model_goes_on() {
    let llm = FakeLlm::fixture("program-throws");
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, json!({"task": "Try."}));
    assert_eq!(report["stopped"], "reply");
    let error = &report["steps"][0]["error"];
    assert_eq!(error["code"], "sandbox_error");
    assert!(
        error["message"].as_str().unwrap().contains("line 2"),
        "{error}"
    );
    let observation = message(&llm, 1, 3);
    assert!(observation.contains("boom"), "{observation}");
    // No write was attempted, so there is no "nothing was changed" note to parrot.
    assert!(
        !observation.contains("Nothing was changed"),
        "{observation}"
    );
    assert!(
        observation.contains("\"commits_so_far\":0"),
        "{observation}"
    );
}

#[test]
fn read_only_runs_are_allowed_and_their_writes_denied() {
    let llm = FakeLlm::fixture("write-denied");
    let server = server_for(&llm, |config| config.policy = PolicyMode::ReadOnly);
    let report = ok_run(&server, json!({"task": "Write new.md."}));
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["commits"], json!([]));
    assert_eq!(report["steps"][0]["error"]["code"], "policy_denied");
    assert!(!server.root.join("new.md").exists());
    let requests = llm.requests();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        !system.contains("mirai.notes.write("),
        "read_only prompts list reads only"
    );
    let observation = requests[1]["messages"][3]["content"].as_str().unwrap();
    assert!(
        observation.contains(
            "The notes.write call changed nothing: this deployment is read-only and no write can \
             succeed. Next: a <reply> that says so, e.g. <reply>This deployment is read-only, so \
             nothing was changed.</reply>"
        ),
        "{observation}"
    );
}

#[test]
fn bad_requests_and_a_missing_model_are_refused_before_any_call() {
    let llm = FakeLlm::fixture("rate-limited-then-ok");
    let server = server_for(&llm, |_| {});
    for body in [
        json!({}),
        json!({"task": "  "}),
        json!({"task": "x", "max_steps": 0}),
        json!({"task": "x", "max_steps": 33}),
    ] {
        run(&server, body).assert_error(400, "invalid_request");
    }
    assert!(llm.requests().is_empty());

    let server = TestServer::start();
    let answer = run(&server, json!({"task": "x"}));
    answer.assert_error(503, "llm_unavailable");
    assert!(answer.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("MIRAI_LLM_API_KEY"));
    let config = server.get("/config").body;
    assert_eq!(config["llm_configured"], false);
}

#[test]
fn the_key_never_appears_in_config() {
    let server =
        TestServer::start_with(|config| config.llm.api_key = Some("sk-very-secret".into()));
    let config = server.get("/config");
    assert_eq!(config.body["llm_configured"], true);
    assert_eq!(config.body["llm_model"], "gpt-4o-mini");
    assert!(!config.body.to_string().contains("sk-very-secret"));
}

/// The kinds of events a transcript holds, in order.
fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_transcript_and_the_event_stream_carry_every_event() {
    let llm = FakeLlm::fixture("read-edit-reply");
    let server = server_for(&llm, |_| {});
    let response = reqwest::blocking::Client::new()
        .post(format!("{}/agent/run", server.url))
        .header("accept", "text/event-stream")
        .json(&json!({"task": "Make the milk oat milk."}))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let text = response.text().unwrap();
    let mut streamed = Vec::new();
    for frame in text.split("\n\n").filter(|f| !f.trim().is_empty()) {
        let kind = frame
            .lines()
            .find_map(|l| l.strip_prefix("event: "))
            .unwrap();
        let data: Value = serde_json::from_str(
            frame
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap(),
        )
        .unwrap();
        streamed.push((kind.to_string(), data));
    }
    let (last_kind, report) = streamed.pop().unwrap();
    assert_eq!(last_kind, "report");
    assert_eq!(report["stopped"], "reply");
    let run_id = report["run_id"].as_str().unwrap();
    let streamed: Vec<Value> = streamed.into_iter().map(|(_, data)| data).collect();
    assert_eq!(
        kinds(&streamed),
        [
            "run_start",
            "llm_request",
            "llm_response",
            "code_start",
            "host_call",
            "code_end",
            "llm_request",
            "llm_response",
            "code_start",
            "host_call",
            "code_end",
            "llm_request",
            "llm_response",
            "run_end",
        ]
    );
    for event in &streamed {
        assert!(event["at"].as_str().unwrap().ends_with('Z'), "{event}");
    }

    let transcript = server.get(&format!("/agent/runs/{run_id}"));
    assert_eq!(transcript.status, 200);
    assert_eq!(transcript.body["events"], json!(streamed));
    let on_disk =
        std::fs::read_to_string(server.root.join(format!(".mirai/runs/{run_id}.jsonl"))).unwrap();
    assert_eq!(on_disk.lines().count(), streamed.len());

    let runs = server.get("/agent/runs");
    assert_eq!(runs.status, 200);
    assert_eq!(runs.body[0]["run_id"], run_id);
    assert_eq!(runs.body[0]["task"], "Make the milk oat milk.");
    assert_eq!(runs.body[0]["stopped"], "reply");

    server
        .get("/agent/runs/00000000-0000-7000-8000-000000000000")
        .assert_error(404, "not_found");
    server
        .get("/agent/runs/..%2F..%2Fetc")
        .assert_error(404, "not_found");
}

#[test]
fn transcripts_never_go_through_a_symlinked_runs_folder() {
    let llm = FakeLlm::fixture("read-edit-reply");
    let server = server_for(&llm, |_| {});
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(server.root.join(".mirai")).unwrap();
    let _ = std::fs::remove_dir_all(server.root.join(".mirai/runs"));
    std::os::unix::fs::symlink(outside.path(), server.root.join(".mirai/runs")).unwrap();
    let answer = server.post_json("/agent/run", &json!({"task": "Make the milk oat milk."}));
    assert_eq!(answer.status, 200, "{answer:?}");
    let run_id = answer.body["run_id"].as_str().unwrap();
    // The run went on without a transcript; nothing was written outside.
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    server
        .get(&format!("/agent/runs/{run_id}"))
        .assert_error(500, "internal");
    // A transcript planted outside is not listed through the link either.
    std::fs::write(outside.path().join(format!("{run_id}.jsonl")), "{}\n").unwrap();
    let listed = server.get("/agent/runs");
    listed.assert_error(500, "internal");
    let message = listed.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("not a symlink"), "{message}");
}
