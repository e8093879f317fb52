//! A run's answer tells what happened from mirai's record, and the model's
//! answers are taken as they are meant: through `POST /agent/run` against a
//! fake LLM that is a real HTTP server. Each run's `outcome` (committed notes
//! and commits, a proposal and its notes, a dry run's notes, or nothing, with
//! the failed writes); a reply claiming a change the record does not show (or
//! calling a proposed change done, or code returning a success string with no
//! write) answered once with the facts, then marked `reply_contradicted`;
//! plain answers as replies; only an answer's first code block run; results
//! that look wrong (a list of nulls, an object iterated) named with the
//! answers' real shapes, and the same failing code twice shown a working call
//! (a read's from the table; a write's own call mended, never the table's
//! example, whose text small models write into the note).

use crate::common;

use common::fake_llm::{FakeLlm, Script};
use common::TestServer;
use mirai::config::{Config, PolicyMode};
use serde_json::{json, Value};

const TODO: &str = "# Todo\n\n- buy milk\n- water the plants\n";

fn server_for(llm: &FakeLlm, adjust: impl FnOnce(&mut Config)) -> TestServer {
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|config| {
        config.llm.base_url = base_url;
        config.llm.model = "fake-model".into();
        config.llm.max_retries = 0;
        adjust(config);
    });
    server.write("todo.md", TODO);
    if server.root.join(".git").exists() {
        server.commit_all();
    }
    server
}

fn answers(contents: &[&str]) -> FakeLlm {
    FakeLlm::start(Script::answering(
        &contents.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
    ))
}

fn ok_run(server: &TestServer, task: &str) -> Value {
    let answer = server.post_json("/agent/run", &json!({"task": task}));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

/// The last message mirai sent the model in request `request`.
fn last_message(llm: &FakeLlm, request: usize) -> String {
    let requests = llm.requests();
    let messages = requests[request]["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn transcript(server: &TestServer, report: &Value) -> Vec<Value> {
    let run_id = report["run_id"].as_str().unwrap();
    std::fs::read_to_string(server.root.join(format!(".mirai/runs/{run_id}.jsonl")))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

const APPEND: &str = r#"<think>Append it.</think><code>return await mirai.notes.append({path: "todo.md", text: "- bread"});</code>"#;

#[test]
fn a_committed_run_names_its_notes_and_commits() {
    let llm = answers(&[APPEND, "<reply>Added \"- bread\" to todo.md.</reply>"]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Add bread to todo.md.");
    let commit = server.head();
    assert_eq!(
        report["outcome"],
        json!({"kind": "committed", "notes": ["todo.md"], "commits": [commit], "failed": [],
               "summary": format!("mirai committed changes to todo.md in 1 commit ({}).", &commit[..7])})
    );
    assert_eq!(report["reply_contradicted"], false);
    assert_eq!(report["reply"], "Added \"- bread\" to todo.md.");
}

#[test]
fn a_claim_with_nothing_changed_gets_the_facts_once_and_an_honest_reply_stands() {
    let llm = answers(&[
        "<think>Easy.</think><reply>Note renamed and links updated.</reply>",
        "<think>Nothing was done.</think><reply>I did not rename it: nothing was changed yet.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let head = server.head();
    let report = ok_run(&server, "Rename todo.md to tasks.md.");
    assert_eq!(report["stopped"], "reply");
    assert_eq!(
        report["reply"],
        "I did not rename it: nothing was changed yet."
    );
    assert_eq!(report["reply_contradicted"], false);
    assert_eq!(report["outcome"]["kind"], "nothing");
    assert_eq!(report["outcome"]["summary"], "Nothing was changed.");
    assert_eq!(
        report["steps"][0]["contested_reply"],
        "Note renamed and links updated."
    );
    let facts = last_message(&llm, 1);
    assert!(
        facts.starts_with(
            "Your reply was not given to the user: the model claims a change (\"Note renamed and links updated\"), but mirai's record shows that nothing was changed. mirai's record of this run: Nothing was changed."
        ),
        "{facts}"
    );
    assert_eq!(server.head(), head);
}

#[test]
fn code_returning_a_success_string_without_a_write_is_a_claim() {
    let llm = answers(&[
        r#"<think>Say it is done.</think><code>const notes = await mirai.notes.list(); return "Changed 'weekly' to 'daily' in todo.md";</code>"#,
        "<think>Done.</think><reply>Done.</reply>",
        "<think>Done.</think><reply>Done.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Change weekly to daily in todo.md.");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains(
            r#"Your code returned "Changed 'weekly' to 'daily' in todo.md", but no write succeeded in it"#
        ),
        "{observation}"
    );
    // The second "Done." still stands on the code's claim: marked, led by the record.
    assert_eq!(report["reply"], "Done.");
    assert_eq!(report["reply_contradicted"], true);
    assert_eq!(report["outcome"]["kind"], "nothing");
    assert_eq!(report["steps"][1]["contested_reply"], "Done.");
    assert!(report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().starts_with(
            "the model claims a change (\"Changed 'weekly' to 'daily' in todo.md\")"
        )));
}

#[test]
fn a_proposed_change_called_done_is_told_so_and_the_outcome_names_the_proposal() {
    let append_and_reply = format!("{APPEND}<reply>Added \"- bread\" to todo.md.</reply>");
    let llm = answers(&[
        &append_and_reply,
        "<reply>Added \"- bread\" to todo.md.</reply>",
    ]);
    let server = server_for(&llm, |c| {
        c.policy = PolicyMode::Review;
        c.reviewer_token = Some("reviewer-s3cret".into());
    });
    let head = server.head();
    let report = ok_run(&server, "Add bread to todo.md.");
    assert_eq!(server.head(), head, "a proposal commits nothing");
    let proposal = report["proposal"]["proposal"].as_str().unwrap();
    assert_eq!(report["outcome"]["kind"], "proposed");
    assert_eq!(report["outcome"]["proposal"], proposal);
    assert_eq!(report["outcome"]["notes"], json!(["todo.md"]));
    assert_eq!(report["outcome"]["commits"], json!([]));
    assert_eq!(
        report["outcome"]["summary"],
        format!("mirai proposed changes to todo.md for a person to approve (proposal {proposal}); nothing is committed yet.")
    );
    let facts = last_message(&llm, 1);
    assert!(
        facts.contains("it is only proposed")
            && facts.contains("Next: a <reply> that says the change is proposed")
            && facts.contains("e.g. <reply>I proposed the change to todo.md; it is not made until a person approves it.</reply>"),
        "{facts}"
    );
    // The observation of the step whose reply was contested came with the facts.
    assert!(facts.starts_with("<observation>"), "{facts}");
    assert_eq!(report["reply_contradicted"], true);
}

#[test]
fn a_proposed_change_said_to_be_proposed_stands() {
    let llm = answers(&[
        APPEND,
        "<reply>Proposed adding \"- bread\" to todo.md; it awaits your approval.</reply>",
    ]);
    let server = server_for(&llm, |c| {
        c.policy = PolicyMode::Review;
        c.reviewer_token = Some("reviewer-s3cret".into());
    });
    let report = ok_run(&server, "Add bread to todo.md.");
    assert_eq!(report["reply_contradicted"], false);
    assert_eq!(report["outcome"]["kind"], "proposed");
    assert_eq!(llm.requests().len(), 2);
    // The write's own observation said it was only proposed, before any reply.
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains("This change is proposed, not made")
            && !observation.contains("commits_so_far"),
        "{observation}"
    );
}

#[test]
fn a_dry_run_names_the_notes_kept_aside() {
    let llm = answers(&[APPEND, "<reply>Added \"- bread\" to todo.md.</reply>"]);
    let server = server_for(&llm, |_| {});
    let answer = server.post_json(
        "/agent/run",
        &json!({"task": "Add bread to todo.md.", "dry_run": true}),
    );
    assert_eq!(answer.body["outcome"]["kind"], "dry_run", "{answer:?}");
    assert_eq!(answer.body["outcome"]["notes"], json!(["todo.md"]));
    assert_eq!(
        answer.body["outcome"]["summary"],
        "Dry run: changes to todo.md were kept aside; nothing was committed."
    );
    assert_eq!(answer.body["reply_contradicted"], false);
}

#[test]
fn a_failed_write_is_in_the_outcome_with_why() {
    let llm = answers(&[
        r#"<code>return await mirai.notes.edit({path: "todo.md", edits: [{old: "- buy bread", new: "- rye"}]});</code>"#,
        "<reply>I could not: todo.md has no \"- buy bread\" line. Nothing was changed.</reply>",
        "<reply>I could not: todo.md has no \"- buy bread\" line. Nothing was changed.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Make the bread rye.");
    let failed = &report["outcome"]["failed"];
    assert_eq!(failed.as_array().unwrap().len(), 1, "{report}");
    assert_eq!(failed[0]["op"], "notes.edit");
    assert_eq!(failed[0]["path"], "todo.md");
    assert_eq!(failed[0]["code"], "conflict");
    assert!(!failed[0]["message"].as_str().unwrap().is_empty());
    assert_eq!(report["reply_contradicted"], false);
}

#[test]
fn a_plain_answer_is_the_reply_after_one_reminder_when_nothing_was_looked_at() {
    let plain = "The deployment is read-only: you can read and search, not write.";
    let llm = answers(&[plain, plain]);
    let server = server_for(&llm, |c| c.policy = PolicyMode::ReadOnly);
    let report = ok_run(&server, "Add bread to todo.md.");
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["reply"], plain);
    // No code had run: the first was held once with a reminder, the second stands.
    assert_eq!(report["steps"].as_array().unwrap().len(), 2);
    assert_eq!(report["steps"][0]["held_reply"], plain);
    let reminder = last_message(&llm, 1);
    assert!(
        reminder.starts_with("Your answer had no <code> block and no <reply>")
            // A call to copy, for the note the task names.
            && reminder.contains(
                r#"A first step for this task: <code>return (await mirai.notes.read({path: "todo.md"})).content;</code>"#
            ),
        "{reminder}"
    );
    assert_eq!(report["steps"][1]["error"], Value::Null);
    assert_eq!(report["outcome"]["kind"], "nothing");
    // The outcome says why nothing was changed.
    assert_eq!(
        report["outcome"]["summary"],
        "Nothing was changed: this deployment is read-only (it reads and searches, never writes)."
    );
}

#[test]
fn a_plain_answer_before_anything_ran_is_shown_a_first_call_for_its_task() {
    let plain = "It is a handbook.";
    let llm = answers(&[plain, plain]);
    let server = server_for(&llm, |_| {});
    // It names no note there is and asks no question: the call to copy is shown, not run.
    let report = ok_run(&server, "Summarise the handbook in one line.");
    let reminder = last_message(&llm, 1);
    assert!(
        reminder.starts_with("Your answer had no <code> block and no <reply>")
            && reminder.contains(
                r#"A first step for this task: <code>const hits = await mirai.index.query({q: "Summarise the handbook in one line.", limit: 3});"#
            ),
        "{reminder}"
    );
    assert!(
        !transcript(&server, &report)
            .iter()
            .any(|e| e["type"] == "first_look"),
        "nothing ran for a task that names no note and asks no question"
    );
    assert_eq!(report["reply"], plain);
}

/// mirai's opening look as the first request's message shows it: the task,
/// then mirai's code and its observation, then what to do next.
fn opening(llm: &FakeLlm, task: &str, code: &str, next: &str) -> String {
    let message = last_message(llm, 0);
    assert!(
        message.starts_with(&format!(
            "{task}\n\nmirai looked at the notes for this task first (its own code, already run; nothing was changed):\n<code>{code}"
        )) && message.contains("<observation>")
            && message.ends_with(next),
        "{message}"
    );
    message
}

#[test]
fn a_task_naming_a_note_gets_mirais_opening_look_before_the_first_answer() {
    let long: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    let llm = answers(&["<reply>It is a handbook of 200 lines.</reply>"]);
    let server = server_for(&llm, |_| {});
    server.write("handbook.md", format!("# Handbook\n\n## Doors\n\n{long}"));
    server.commit_all();
    let task = "Summarise handbook.md in one line.";
    let report = ok_run(&server, task);
    // A long note is outlined.
    let message = opening(
        &llm,
        task,
        r#"return (await mirai.notes.outline({path: "handbook.md"})).headings;</code>"#,
        "or a <reply> if it asks only for an answer.",
    );
    assert!(message.contains("Doors"), "{message}");
    // The look is mirai's, not a step of the model's: its answer is the reply.
    assert_eq!(report["reply"], "It is a handbook of 200 lines.");
    assert_eq!(report["steps"].as_array().unwrap().len(), 1);
    let events = transcript(&server, &report);
    let looks: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "first_look")
        .collect();
    assert_eq!(looks.len(), 1);
    assert_eq!(looks[0]["step"], 0);
    assert_eq!(report["outcome"]["kind"], "nothing");

    // A change to a note: the note read, and the text it replaces to be copied from it.
    let edit = r#"<code>return await mirai.notes.edit({path: "todo.md", edits: [{old: "- buy milk", new: "- buy oat milk"}]});</code>"#;
    let llm = answers(&[edit, "<reply>todo.md now says buy oat milk.</reply>"]);
    let server = server_for(&llm, |_| {});
    let task = "Change milk to oat milk in todo.md.";
    let report = ok_run(&server, task);
    let message = opening(
        &llm,
        task,
        r#"return (await mirai.notes.read({path: "todo.md"})).content;</code>"#,
        "to change text, notes.edit with `old` copied exactly from this observation).",
    );
    assert!(message.contains("- buy milk"), "{message}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        TODO.replace("buy milk", "buy oat milk")
    );
    assert_eq!(report["outcome"]["kind"], "committed");

    // Text the task quotes is to be written as quoted (a real run added "- ").
    let append = r#"<code>return await mirai.notes.append({path: "todo.md", text: "Saw a kingfisher."});</code>"#;
    let llm = answers(&[append, "<reply>Appended it to todo.md.</reply>"]);
    let server = server_for(&llm, |_| {});
    let task = "Append the line \"Saw a kingfisher.\" to todo.md.";
    ok_run(&server, task);
    opening(
        &llm,
        task,
        r#"return (await mirai.notes.read({path: "todo.md"})).content;</code>"#,
        r#"Use "Saw a kingfisher." exactly as the task quotes it, with no mark such as "- " added."#,
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        format!("{TODO}Saw a kingfisher.\n")
    );
}

#[test]
fn a_question_gets_mirais_opening_look_and_a_reply_denying_it_is_held_once() {
    let guess = "<reply>There is no note about the fire door.</reply>";
    let answer = "<reply>handbook.md says the fire door stays closed.</reply>";
    let mut long: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    long.push_str("## Part 19\n\nFire door: keep the back fire door clear and closed.\n");
    let cases = [
        (
            "What does handbook.md say about the fire door?",
            r#"const hits = await mirai.index.query({q: "What does handbook.md say about the fire door?", path_prefix: "handbook.md", limit: 3});"#,
        ),
        (
            "What do my notes say about the fire door?",
            r#"const hits = await mirai.index.query({q: "What do my notes say about the fire door?", limit: 3});"#,
        ),
        (
            "Which notes link to handbook.md?",
            r#"return (await mirai.notes.links({path: "handbook.md"})).backlinks.map(b => b.path);</code>"#,
        ),
    ];
    for (task, call) in cases {
        let llm = answers(&[guess, answer]);
        let server = server_for(&llm, |_| {});
        server.write("handbook.md", format!("# Handbook\n\n{long}"));
        server.write("index.md", "See [[handbook]].\n");
        server.commit_all();
        let report = ok_run(&server, task);
        let message = opening(&llm, task, call, "or a <code> block to look further.");
        let seen = if task.contains("link") {
            "index.md"
        } else {
            "keep the back fire door clear and closed"
        };
        assert!(
            message.contains(seen),
            "{task}: the observation shows what the call found: {message}"
        );
        if task.contains("handbook.md say") {
            // A long note's look shows only the lines with the words found.
            assert!(!message.contains("line 150"), "{message}");
        }
        // A reply that nothing was found, after mirai's look found it, is held once.
        assert_eq!(
            report["steps"][0]["held_reply"],
            "There is no note about the fire door."
        );
        let told = last_message(&llm, 1);
        assert!(
            told.starts_with("Your reply was not given to the user: it says nothing was found, but mirai's look at the notes answered [")
                && told.contains(if task.contains("link") { "index.md" } else { "handbook.md" }),
            "{task}: {told}"
        );
        assert_eq!(
            report["reply"],
            "handbook.md says the fire door stays closed."
        );
        let events = transcript(&server, &report);
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "host_call" && e["ok"] == true),
            "{task}"
        );
        // A look reads: nothing was written.
        assert_eq!(report["outcome"]["kind"], "nothing", "{task}");
    }
}

#[test]
fn a_read_only_refusal_to_a_question_stands_without_a_look() {
    let refusal = "This deployment is read-only: nothing was changed.";
    let llm = answers(&[&format!("<reply>{refusal}</reply>")]);
    let server = server_for(&llm, |c| c.policy = PolicyMode::ReadOnly);
    let report = ok_run(&server, "Can you delete todo.md?");
    assert_eq!(report["reply"], refusal);
    assert_eq!(report["steps"].as_array().unwrap().len(), 1, "{report}");
    assert!(!transcript(&server, &report)
        .iter()
        .any(|e| e["type"] == "first_look"));
}

#[test]
fn a_plain_answer_that_reads_unfinished_gets_one_reminder() {
    let llm = answers(&["Let me read the note first.", "Let me think about it more."]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Tidy todo.md.");
    assert_eq!(
        report["steps"][0]["held_reply"],
        "Let me read the note first."
    );
    assert!(
        last_message(&llm, 1).starts_with("Your answer had no <code> block and no <reply>"),
        "{}",
        last_message(&llm, 1)
    );
    // One reminder per run: the second stands.
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["reply"], "Let me think about it more.");
}

#[test]
fn only_the_first_code_block_runs_and_the_rest_is_dropped_and_said() {
    let llm = answers(&[
        "<think>Both.</think><code>return await mirai.notes.append({path: \"todo.md\", text: \"- one\"});</code>\n(the observation shows a commit)\n<code>return await mirai.notes.append({path: \"todo.md\", text: \"- two\"});</code>\n<reply>Added both.</reply>",
        "<reply>Added \"- one\" to todo.md.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Add one and two.");
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        format!("{TODO}- one\n")
    );
    assert_eq!(report["reply"], "Added \"- one\" to todo.md.");
    let dropped = report["steps"][0]["dropped"].as_str().unwrap();
    assert!(
        dropped.starts_with("(the observation shows a commit)"),
        "{dropped}"
    );
    assert!(dropped.ends_with("<reply>Added both.</reply>"), "{dropped}");
    let observation = last_message(&llm, 1);
    assert!(
        observation
            .contains("Only your first <code> block ran; what you wrote after it was dropped."),
        "{observation}"
    );
    let events = transcript(&server, &report);
    let said: Vec<&Value> = events.iter().filter(|e| e["type"] == "dropped").collect();
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["step"], 1);
    assert_eq!(said[0]["text"], dropped);
}

#[test]
fn a_list_of_nulls_names_the_real_shape_and_a_reply_on_it_is_held_once() {
    let llm = answers(&[
        "<code>const list = await mirai.notes.list(); return list.notes.map(n => n.path);</code>",
        "<reply>There are no notes.</reply>",
        "<code>return (await mirai.notes.list()).notes;</code>",
        "<reply>The notes: todo.md and one other.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Which notes are there?");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains("Your result is a list of nothing but null")
            && observation.contains(
                "mirai.notes.list answers {notes: string[2]} (a list of plain strings: each entry is the value itself"
            )
            // The data itself, to answer from.
            && observation.contains(r#"What mirai.notes.list answered: {"notes":[""#)
            && observation.contains("todo.md"),
        "{observation}"
    );
    // The reply made up from nulls was not given: the model was told why.
    assert_eq!(report["steps"][1]["held_reply"], "There are no notes.");
    let told = last_message(&llm, 2);
    assert!(
        told.contains("your last result was a list of nothing but null"),
        "{told}"
    );
    assert_eq!(report["reply"], "The notes: todo.md and one other.");
    assert_eq!(report["stopped"], "reply");
    let held: Vec<Value> = transcript(&server, &report)
        .into_iter()
        .filter(|e| e["type"] == "reply_held")
        .map(|e| e["why"].clone())
        .collect();
    assert_eq!(held, vec![json!("after_a_null_result")]);
}

#[test]
fn a_reply_sent_with_code_that_answers_only_nulls_is_not_given() {
    let llm = answers(&[
        "<code>return (await mirai.notes.list()).notes.map(n => n.path);</code><reply>No notes.</reply>",
        "<code>return (await mirai.notes.list()).notes;</code>",
        "<reply>todo.md and one other.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Which notes are there?");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains("Your <reply> was not given to the user"),
        "{observation}"
    );
    assert_eq!(report["reply"], "todo.md and one other.");
}

#[test]
fn an_object_iterated_as_a_list_is_named() {
    let llm = answers(&[
        "<code>const out = []; for (const note of await mirai.notes.list()) { out.push(note); } return out;</code>",
        "<reply>todo.md.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    ok_run(&server, "Which notes are there?");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains("Your code iterated an answer that is an object, not a list")
            && observation.contains("mirai.notes.list answers {notes: string[2]}"),
        "{observation}"
    );
}

#[test]
fn the_same_failing_code_twice_is_shown_a_working_call_from_the_table() {
    // A read: the table's own example, with the path the model used (small
    // models copy a path verbatim).
    let bad = r#"<code>return await mirai.notes.outline({path: "todo.md", depth: "all"});</code>"#;
    let llm = answers(&[bad, bad, "<reply>todo.md has no headings.</reply>"]);
    let server = server_for(&llm, |_| {});
    ok_run(&server, "Outline todo.md.");
    let observation = last_message(&llm, 2);
    let example = mirai::ops::find("notes.outline").unwrap().example;
    assert!(example.contains("trips/lisbon.md"));
    let shown = example.replace("trips/lisbon.md", "todo.md");
    assert!(
        observation.contains("You sent this same code 2 times")
            && observation
                .contains("A call of mirai.notes.outline that works, from the API's own examples")
            && observation.contains(&shown),
        "{observation}"
    );
}

#[test]
fn the_same_failing_write_twice_is_never_shown_the_tables_example() {
    // A write's example text is what a small model writes into the note
    // (seen in a real run): a write that failed twice gets its own call
    // mended, or none.
    let bad = r#"<code>return await mirai.notes.edit({path: "todo.md", edits: [{old: "- buy bread", new: "- rye"}]});</code>"#;
    let llm = answers(&[
        bad,
        bad,
        "<reply>I could not change it; nothing was changed.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    ok_run(&server, "Make the bread rye.");
    let observation = last_message(&llm, 2);
    let example = mirai::ops::find("notes.edit").unwrap().example;
    assert!(example.contains("shop/list.md"));
    assert!(
        observation.contains("You sent this same code 2 times")
            && !observation.contains("from the API's own examples")
            && !observation.contains("shop/list.md"),
        "{observation}"
    );
}

#[test]
fn a_request_field_put_inside_a_lists_entries_is_said_to_belong_beside_path() {
    let llm = answers(&[
        r#"<code>return await mirai.notes.edit({path: "todo.md", edits: [{old: "milk", new: "oat milk"}, {section: "Todo"}]});</code>"#,
        "<reply>Nothing was changed.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    ok_run(&server, "Make the milk oat milk.");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains(
            "`section` is a field of the request itself, beside `path`, not of each entry of `edits`."
        ),
        "{observation}"
    );
}

#[test]
fn a_contested_reply_is_kept_and_marked_when_the_run_cannot_go_on() {
    // The script ends after the claim: the provider fails on the step with the facts.
    let llm = answers(&["<reply>Note renamed and links updated.</reply>"]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Rename todo.md to tasks.md.");
    assert_eq!(report["stopped"], "llm_error", "{report}");
    assert_eq!(report["reply"], "Note renamed and links updated.");
    assert_eq!(report["reply_contradicted"], true);
    assert_eq!(report["outcome"]["kind"], "nothing");
}

/// `mirai run TASK` against `llm`, on `server`'s notes (the server is not
/// asked: the command opens the notes itself).
fn mirai_run(server: &TestServer, llm: &FakeLlm, task: &str) -> (Option<i32>, Value, String) {
    let out = common::mirai_cli()
        .args(["run", task, "--notes-root"])
        .arg(&server.root)
        .env("MIRAI_LLM_BASE_URL", &llm.base_url)
        .env("MIRAI_LLM_MODEL", "fake-model")
        .env("MIRAI_LLM_MAX_RETRIES", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("no report on stdout: {stderr}"));
    (out.status.code(), report, stderr)
}

#[test]
fn mirai_run_commits_and_prints_the_report_led_by_the_outcome() {
    let llm = answers(&[APPEND, "<reply>Added \"- bread\" to todo.md.</reply>"]);
    let server = server_for(&llm, |_| {});
    let (code, report, stderr) = mirai_run(&server, &llm, "Add bread to todo.md.");
    assert_eq!(code, Some(0), "{stderr}");
    let commit = server.head();
    assert_eq!(report["outcome"]["kind"], "committed", "{report}");
    assert_eq!(report["outcome"]["commits"], json!([commit]));
    assert_eq!(report["reply"], "Added \"- bread\" to todo.md.");
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        format!("{TODO}- bread\n")
    );
    assert!(
        stderr.contains("step 1: its code ran")
            && stderr.contains("mirai committed changes to todo.md"),
        "{stderr}"
    );
}

#[test]
fn mirai_run_exits_1_when_the_reply_contradicts_the_record() {
    let claim = "<reply>Added \"- bread\" to todo.md.</reply>";
    let llm = answers(&[claim, claim, claim]);
    let server = server_for(&llm, |_| {});
    let head = server.head();
    let (code, report, stderr) = mirai_run(&server, &llm, "Add bread to todo.md.");
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(report["reply_contradicted"], true, "{report}");
    assert_eq!(report["outcome"]["kind"], "nothing");
    assert_eq!(server.head(), head);
    assert!(stderr.contains("contradicts mirai's record"), "{stderr}");
}

#[test]
fn a_whole_note_written_back_unchanged_shows_the_note_to_change() {
    let same = r#"<code>const n = await mirai.notes.read({path: "todo.md"}); return await mirai.notes.write({path: "todo.md", content: n.content.replace("by milk", "buy milk")});</code>"#;
    let llm = answers(&[
        same,
        r#"<code>return await mirai.notes.edit({path: "todo.md", edits: [{old: "- buy milk", new: "- buy oat milk"}]});</code>"#,
        "<reply>Changed it to oat milk.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Make the milk oat milk in todo.md.");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains("changed nothing")
            && observation
                .contains(r##"todo.md holds: "# Todo\n\n- buy milk\n- water the plants\n""##),
        "{observation}"
    );
    assert_eq!(report["outcome"]["kind"], "committed");
}

#[test]
fn a_path_copied_from_the_prompts_examples_is_named_as_made_up() {
    let llm = answers(&[
        r#"<code>return await mirai.notes.edit({path: "shop/list.md", edits: [{old: "- apples", new: "- pears"}]});</code>"#,
        "<reply>Nothing was changed.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    ok_run(&server, "Change milk to oat milk in todo.md.");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains(
            "shop/list.md is a made-up path from the examples, not one of your notes. The task's note is todo.md."
        ),
        "{observation}"
    );
}

#[test]
fn a_reply_that_only_repeats_mirais_note_is_held_once_with_the_task() {
    let parrot = "<reply>Only your first <code> block ran; what you wrote after it was dropped.";
    let llm = answers(&[
        "<code>const note = {content: \"Plan the week.\"};</code>\n(the observation shows plan.md)",
        parrot,
        "<reply>This deployment is read-only: nothing was changed.</reply>",
    ]);
    let server = server_for(&llm, |c| c.policy = PolicyMode::ReadOnly);
    let report = ok_run(
        &server,
        "Create a note called plan.md saying \"Plan the week.\"",
    );
    assert_eq!(
        report["steps"][1]["held_reply"],
        "Only your first <code> block ran; what you wrote after it was dropped."
    );
    let told = last_message(&llm, 2);
    assert!(
        told.starts_with("Your reply was not given to the user: it repeated mirai's note")
            && told
                .contains(r#"The task: "Create a note called plan.md saying \"Plan the week.\"""#)
            && told.contains("This deployment is read-only"),
        "{told}"
    );
    assert_eq!(
        report["reply"],
        "This deployment is read-only: nothing was changed."
    );
}

#[test]
fn a_tag_copied_from_the_prompts_examples_is_named_with_a_search_to_copy() {
    let llm = answers(&[
        r#"<code>return (await mirai.notes.list({tag: "recipe"})).notes;</code>"#,
        "<reply>No note.</reply>",
        "<reply>No note.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    // The task speaks of tags but names none: the prompt's example tag is shown, and copied.
    ok_run(&server, "Which of my tags has a note that mentions milk?");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains(r#""recipe" is a tag from the examples; the task names no such tag."#)
            && observation.contains(
                r#"mirai.index.query({q: "Which of my tags has a note that mentions milk?""#
            ),
        "{observation}"
    );
}

#[test]
fn a_failed_write_is_shown_mended_in_the_models_own_words_never_the_tables_example() {
    // From a real run: notes.write sent with notes.edit's `edits` twice, then
    // the table's example written into the note ("# Porto ..."). Now the
    // observation hands back the model's own call, mended, and no example text.
    let create = r##"<think>Create it.</think><code>return await mirai.notes.write({path: "ideas/tea.md", edits: [{old: "", new: "# Tea\nTry oolong."}]});</code>"##;
    let mended = r##"<think>As mirai says.</think><code>return await mirai.notes.write({"content":"# Tea\nTry oolong.","path":"ideas/tea.md"});</code>"##;
    let assign = r#"<think>Fix it.</think><code>const text = (await mirai.notes.read({path: "todo.md"})).content; text = text.replace("milk", "oat milk"); return text;</code>"#;
    let llm = answers(&[
        create,
        create,
        mended,
        assign,
        "<think>Done.</think><reply>Created ideas/tea.md.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(
        &server,
        "Create ideas/tea.md with a heading Tea and the line Try oolong.",
    );
    for request in [1, 2] {
        let observation = last_message(&llm, request);
        assert!(
            observation.contains(
                r##"Your call, mended (your own path and text): mirai.notes.write({"content":"# Tea\nTry oolong.","path":"ideas/tea.md"})"##
            ),
            "{observation}"
        );
        // The note is plain text after the observation's JSON: its code has single escapes.
        assert!(!observation.contains(r"\\n"), "{observation}");
        assert!(!observation.contains("Porto"), "{observation}");
    }
    assert_eq!(
        std::fs::read_to_string(server.root.join("ideas/tea.md")).unwrap(),
        "# Tea\nTry oolong."
    );
    // A const given a new value is told in plain words.
    let observation = last_message(&llm, 4);
    assert!(
        observation.contains("`text` was declared with const, so it cannot be given a new value"),
        "{observation}"
    );
    assert_eq!(report["outcome"]["kind"], "committed");
}

#[test]
fn nothing_found_after_mirais_look_found_it_is_held_once_with_what_it_found() {
    // From a real run: "Which note mentions a heron?" looked with a made-up
    // tag, found nothing, and answered "There is no note that mentions a heron."
    let llm = answers(&[
        r#"<code>return (await mirai.notes.list({tag: "heron"})).notes;</code>"#,
        "<reply>There is no note that mentions a heron.</reply>",
        "<reply>journal.md mentions a heron.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    server.write(
        "journal.md",
        "# Journal\n\nSaw a blue heron by the canal.\n",
    );
    server.commit_all();
    let report = ok_run(&server, "Which note mentions a heron?");
    // mirai's opening look searched the task's words and found the note.
    assert!(last_message(&llm, 0).contains("journal.md"));
    let told = last_message(&llm, 2);
    assert!(
        told.starts_with("Your reply was not given to the user: it says nothing was found, but mirai's look at the notes answered [")
            && told.contains("journal.md"),
        "{told}"
    );
    assert_eq!(report["reply"], "journal.md mentions a heron.");
    let held: Vec<Value> = transcript(&server, &report)
        .into_iter()
        .filter(|e| e["type"] == "reply_held")
        .map(|e| e["why"].clone())
        .collect();
    assert_eq!(held, vec![json!("denies_its_result")]);

    // A run whose looks found nothing may answer that nothing was found.
    let llm = answers(&[
        r#"<code>return (await mirai.index.query({q: "pelican"})).chunks;</code>"#,
        "<reply>There is no note that mentions a pelican.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Which note mentions a pelican?");
    assert_eq!(report["reply"], "There is no note that mentions a pelican.");
    assert_eq!(llm.requests().len(), 2);
}

#[test]
fn an_edit_of_nothing_but_new_text_is_shown_the_append_it_is() {
    // From real runs: `old: ""` sent eight times until max_steps.
    let bad = r#"<code>return await mirai.notes.edit({path: "todo.md", edits: [{old: "", new: "- buy eggs"}]});</code>"#;
    let append =
        r#"<code>return await mirai.notes.append({"path":"todo.md","text":"- buy eggs"});</code>"#;
    let llm = answers(&[bad, append, "<reply>Added - buy eggs to todo.md.</reply>"]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Add buy eggs to todo.md.");
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains(
            r#"Your call, mended (your own path and text): mirai.notes.append({"path":"todo.md","text":"- buy eggs"})"#
        ),
        "{observation}"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        format!("{TODO}- buy eggs\n")
    );
    assert_eq!(report["outcome"]["kind"], "committed");
}

#[test]
fn a_reply_naming_a_note_that_does_not_exist_is_held_once_and_shown_a_search() {
    // From a real run: the model answered with trips/lisbon.md, a path from the
    // prompt's examples that it had read and been told is not there.
    let llm = answers(&[
        r#"<code>return (await mirai.notes.read({path: "todo.md"})).content;</code>"#,
        "<reply>trips/lisbon.md says to buy milk.</reply>",
        "<reply>todo.md says to buy milk.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let head = server.head();
    let report = ok_run(
        &server,
        "Which note says to buy milk? Answer with its path.",
    );
    assert_eq!(report["stopped"], "reply");
    assert_eq!(report["reply"], "todo.md says to buy milk.");
    assert_eq!(
        report["steps"][1]["contested_reply"],
        "trips/lisbon.md says to buy milk."
    );
    assert_eq!(report["warnings"], json!([]));
    let told = last_message(&llm, 2);
    assert!(
        told.starts_with(
            "Your reply was not given to the user: it names trips/lisbon.md, but there is no note at that path."
        ) && told.contains("mirai.index.query"),
        "{told}"
    );
    let contested: Vec<Value> = transcript(&server, &report)
        .into_iter()
        .filter(|e| e["type"] == "reply_contested")
        .map(|e| e["why"].clone())
        .collect();
    assert_eq!(
        contested,
        vec![json!(
            "the reply names trips/lisbon.md, but there is no note at that path"
        )]
    );
    assert_eq!(server.head(), head);
}

#[test]
fn a_second_reply_naming_a_missing_note_stands_with_its_warning() {
    let invented = "<reply>trips/lisbon.md says to buy milk.</reply>";
    let llm = answers(&[
        r#"<code>return (await mirai.notes.read({path: "todo.md"})).content;</code>"#,
        invented,
        invented,
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(
        &server,
        "Which note says to buy milk? Answer with its path.",
    );
    assert_eq!(report["reply"], "trips/lisbon.md says to buy milk.");
    assert_eq!(
        report["warnings"],
        json!(["the model's reply names trips/lisbon.md, but there is no note at that path"])
    );
    assert_eq!(report["steps"].as_array().unwrap().len(), 3);
}

#[test]
fn a_write_sent_again_after_it_succeeded_is_not_run_and_said_so() {
    // From a real run: the model appended its line, then sent the same append
    // again; the note got the line twice.
    let llm = answers(&[
        APPEND,
        APPEND,
        "<reply>Added \"- bread\" to todo.md.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Add bread to todo.md.");
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        format!("{TODO}- bread\n")
    );
    assert_eq!(report["commits"].as_array().unwrap().len(), 1);
    assert_eq!(report["outcome"]["kind"], "committed");
    assert_eq!(report["reply"], "Added \"- bread\" to todo.md.");
    // The first observation says the change is made.
    let first = last_message(&llm, 1);
    let commit = report["commits"][0].as_str().unwrap();
    assert!(
        first.contains(&format!(
            "note: Done: the change to todo.md is committed ({}). Do not send this code again",
            &commit[..7]
        )),
        "{first}"
    );
    // The second was not run, and the step says why.
    assert_eq!(
        report["steps"][1]["not_run"],
        "it is step 1's code, whose notes.append of todo.md already succeeded"
    );
    assert_eq!(report["steps"][1]["calls"], json!([]));
    let second = last_message(&llm, 2);
    assert!(
        second.contains("\"not_run\":true")
            && second.contains("This code was not run: it is step 1's code"),
        "{second}"
    );
    let not_run: Vec<Value> = transcript(&server, &report)
        .into_iter()
        .filter(|e| e["type"] == "not_run")
        .map(|e| e["step"].clone())
        .collect();
    assert_eq!(not_run, vec![json!(2)]);
}

#[test]
fn a_failed_write_sent_again_is_run_again() {
    let missing =
        r#"<code>return await mirai.notes.append({path: "nope.md", text: "- bread"});</code>"#;
    let llm = answers(&[
        missing,
        missing,
        "<reply>nope.md is not there; nothing was changed.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Add bread to nope.md.");
    // Both ran (and failed): only a write that succeeded is kept from running twice.
    assert_eq!(report["steps"][1]["calls"][0]["ok"], false);
    assert_eq!(report["steps"][1].get("not_run"), None);
    assert_eq!(report["outcome"]["kind"], "nothing");
}

#[test]
fn the_same_code_answering_nothing_twice_gets_mirais_look_again_once() {
    // From a real run: `notes.list(...).notes[0]` of an empty list, eight times.
    let empty = r#"<code>return (await mirai.notes.list({prefix: "trips/"})).notes[0];</code>"#;
    let llm = answers(&[empty, empty, "<reply>todo.md says to buy milk.</reply>"]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Which note says to buy milk?");
    assert_eq!(report["reply"], "todo.md says to buy milk.");
    let told = last_message(&llm, 2);
    assert!(
        told.starts_with("You sent the same code twice and it answered nothing both times")
            && told.contains("mirai.index.query({q: \"Which note says to buy milk?\"")
            // The look's observation: the search found the note.
            && told.contains("[\"todo.md\",")
            && told.contains("Next: answer the task from this observation"),
        "{told}"
    );
    // The opening look, then the one after the same code twice.
    let looks: Vec<Value> = transcript(&server, &report)
        .into_iter()
        .filter(|e| e["type"] == "first_look")
        .map(|e| e["step"].clone())
        .collect();
    assert_eq!(looks, vec![json!(0), json!(2)]);
}

#[test]
fn a_reply_that_nothing_was_found_right_after_code_that_found_something_is_held_once() {
    // From a real run: backlinks answered ["seeds.md","weekend.md"], and the
    // reply said "There are no links to projects/garden.md in this note."
    let llm = answers(&[
        "<code>return (await mirai.notes.list()).notes;</code>",
        "<reply>There are no notes in this vault.</reply>",
        "<reply>todo.md and one other.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Which notes are there?");
    assert_eq!(report["reply"], "todo.md and one other.");
    assert_eq!(
        report["steps"][1]["held_reply"],
        "There are no notes in this vault."
    );
    let told = last_message(&llm, 2);
    assert!(
        told.starts_with(
            "Your reply was not given to the user: it says nothing was found, but your last code answered ["
        ) && told.contains("todo.md"),
        "{told}"
    );
    let held: Vec<Value> = transcript(&server, &report)
        .into_iter()
        .filter(|e| e["type"] == "reply_held")
        .map(|e| e["why"].clone())
        .collect();
    assert_eq!(held, vec![json!("denies_its_result")]);
}

#[test]
fn a_reply_to_a_change_with_nothing_changed_and_no_why_is_held_once() {
    // From a real run: "Give journal.md a front matter field owner with the value
    // Sam." answered by quoting the note mirai's opening look had read.
    let quoted = "todo.md says: buy milk, water the plants";
    let llm = answers(&[
        &format!("<reply>{quoted}</reply>"),
        r#"<code>return await mirai.notes.front_matter({path: "todo.md", set: {owner: "Sam"}});</code>"#,
        "<reply>todo.md now has the field owner: Sam.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(
        &server,
        "Give todo.md a front matter field owner with the value Sam.",
    );
    assert_eq!(report["steps"][0]["held_reply"], quoted);
    // A front matter task is shown its row after the opening look.
    assert!(
        last_message(&llm, 0).ends_with(
            "with mirai.notes.front_matter({path, set: {field: value}}) or ({path, remove: [field]}), never notes.edit or notes.write."
        ),
        "{}",
        last_message(&llm, 0)
    );
    let told = last_message(&llm, 1);
    assert!(
        told.starts_with("Your reply was not given to the user: the task asks for a change to the notes, and nothing has been changed yet."),
        "{told}"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        format!("---\nowner: Sam\n---\n{TODO}")
    );
    assert_eq!(report["outcome"]["kind"], "committed");
    // The report shows mirai's opening look, with its call, apart from the model's steps.
    assert_eq!(
        report["opening"]["calls"][0]["op"], "notes.read",
        "{report}"
    );
    assert_eq!(report["steps"].as_array().unwrap().len(), 3);

    // A reply that says why nothing was changed stands.
    let why = "I cannot: todo.md has no line about eggs, so nothing was changed.";
    let llm = answers(&[&format!("<reply>{why}</reply>")]);
    let server = server_for(&llm, |_| {});
    let report = ok_run(&server, "Remove eggs from todo.md.");
    assert_eq!(report["reply"], why);
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn in_review_a_proposed_write_sent_again_is_said_proposed_and_the_offered_reply_stands() {
    // From a real run: the repeat was told "The change is made", the model called it
    // done, and mirai's own example reply, copied, was held as a parrot.
    let offered = "I proposed the change to todo.md; it is not made until a person approves it.";
    let llm = answers(&[
        APPEND,
        APPEND,
        "<reply>Added \"- bread\" to todo.md.</reply>",
        &format!("<reply>{offered}</reply>"),
    ]);
    let server = server_for(&llm, |c| {
        c.policy = PolicyMode::Review;
        c.reviewer_token = Some("reviewer-s3cret".into());
    });
    let head = server.head();
    let report = ok_run(&server, "Add bread to todo.md.");
    let repeat = last_message(&llm, 2);
    assert!(
        repeat.contains("This code was not run")
            && repeat.contains("The change is proposed: a person approves it before it is made.")
            && repeat.contains("a <reply> that says you proposed the change for review")
            && !repeat.contains("The change is made"),
        "{repeat}"
    );
    assert_eq!(report["reply"], offered);
    assert_eq!(report["reply_contradicted"], false);
    assert_eq!(report["outcome"]["kind"], "proposed");
    assert_eq!(server.head(), head);
    assert_eq!(llm.requests().len(), 4);
}

#[test]
fn a_heading_renamed_to_a_plain_line_is_refused_and_shown_its_own_call_with_the_marks() {
    // From a real run: {old: "## Plans", new: "Spring plans"}, sent until it passed
    // allow_large_delete: true.
    let demote = r###"<code>return await mirai.notes.edit({path: "garden.md", edits: [{old: "## Plans", new: "Spring plans"}]});</code>"###;
    let kept = r###"<code>return await mirai.notes.edit({"edits":[{"new":"## Spring plans","old":"## Plans"}],"path":"garden.md"});</code>"###;
    let llm = answers(&[
        demote,
        kept,
        "<reply>Renamed the heading to Spring plans in garden.md.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    let garden = "# Garden\n\n## Plans\n\nMore herbs this year.\n";
    server.write("garden.md", garden);
    server.commit_all();
    let report = ok_run(
        &server,
        "In garden.md, rename the heading Plans to Spring plans.",
    );
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains("guard_refused")
            && !observation.contains("allow_large_delete")
            && observation.contains(
                r###"Your call, mended (your own path and text): mirai.notes.edit({"edits":[{"new":"## Spring plans","old":"## Plans"}],"path":"garden.md"})"###
            ),
        "{observation}"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("garden.md")).unwrap(),
        garden.replace("## Plans", "## Spring plans")
    );
    assert_eq!(report["outcome"]["kind"], "committed");
}

#[test]
fn an_edit_whose_old_occurs_twice_is_shown_its_call_confined_to_the_section_the_task_names() {
    // From a real run: "- weekly review" under Monday and Friday, sent eight times.
    let plans = "# Plans\n\n## Monday\n\n- weekly review\n\n## Friday\n\n- weekly review\n";
    let twice = r#"<code>return await mirai.notes.edit({path: "plans.md", edits: [{old: "- weekly review", new: "- daily review"}, {old: "- weekly review", new: "- daily review"}]});</code>"#;
    let confined = r#"<code>return await mirai.notes.edit({"edits":[{"new":"- daily review","old":"- weekly review"}],"path":"plans.md","section":"Friday"});</code>"#;
    let llm = answers(&[
        twice,
        confined,
        "<reply>Changed weekly to daily in the Friday section of plans.md.</reply>",
    ]);
    let server = server_for(&llm, |_| {});
    server.write("plans.md", plans);
    server.commit_all();
    let report = ok_run(
        &server,
        "In plans.md, change \"weekly\" to \"daily\" in the Friday section only.",
    );
    let observation = last_message(&llm, 1);
    assert!(
        observation.contains(r#"The task names the section "Friday": edit within it alone. Your call, confined to it: mirai.notes.edit({"edits":[{"new":"- daily review","old":"- weekly review"}],"path":"plans.md","section":"Friday"})"#),
        "{observation}"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("plans.md")).unwrap(),
        plans.replace("## Friday\n\n- weekly", "## Friday\n\n- daily")
    );
    assert_eq!(report["outcome"]["kind"], "committed");
}
