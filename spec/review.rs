//! Review mode (`MIRAI_POLICY_MODE=review`): every write of notes, from HTTP,
//! MCP, the sandbox, an agent run and the CLI, becomes a proposal under
//! `.mirai/proposals/` that a reviewer approves (one commit with the original
//! subject and a `Mirai-Proposal` trailer) or rejects. The tokens, proposals
//! whose base moved, conflicts, the pending bound, restarts, hostile proposal
//! files and a kill -9 during approvals.

use crate::common;
use crate::crash::{seeded, Mirai};

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use common::fake_llm::{FakeLlm, Script};
use common::{git, mirai_cli, send, Answer, TestServer};
use mirai::config::{Config, GuardMode, PolicyMode};
use serde_json::{json, Value};

const REVIEWER: &str = "reviewer-s3cret";
const TODO: &str = "# Todo\n\n- buy milk\n- water the plants\n";

fn review(config: &mut Config) {
    config.policy = PolicyMode::Review;
    config.reviewer_token = Some(REVIEWER.into());
}

/// A review mode server whose repository has `todo.md` committed.
fn server() -> TestServer {
    let server = TestServer::start_with(review);
    server.write("todo.md", TODO);
    server.commit_all();
    server
}

fn as_reviewer(server: &TestServer, path: &str, body: Value) -> Answer {
    send(
        server
            .raw()
            .post(format!("{}{path}", server.url))
            .bearer_auth(REVIEWER)
            .json(&body),
    )
}

fn approve(server: &TestServer, id: &str) -> Answer {
    as_reviewer(server, "/mcp/proposals/approve", json!({"id": id}))
}

fn proposed(answer: &Answer) -> String {
    assert_eq!(answer.status, 202, "{answer:?}");
    answer.body["proposal"].as_str().unwrap().to_string()
}

fn todo(server: &TestServer) -> String {
    std::fs::read_to_string(server.root.join("todo.md")).unwrap()
}

fn pending_ids(server: &TestServer) -> Vec<String> {
    let page = server.get("/mcp/proposals?limit=100");
    assert_eq!(page.status, 200, "{page:?}");
    page.body["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn an_http_write_is_proposed_and_a_reviewer_approves_it_as_one_commit() {
    let server = server();
    let (head, count) = (server.head(), server.commit_count());
    let answer = server.post_json(
        "/mcp/notes/append",
        &json!({"path": "todo.md", "text": "- call mum\n"}),
    );
    let id = proposed(&answer);
    assert_eq!(answer.body["changes"][0]["path"], "todo.md");
    let diff = answer.body["changes"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("+- call mum\n"), "{diff}");
    assert_eq!(
        (server.head(), todo(&server)),
        (head.clone(), TODO.to_string())
    );
    assert!(server
        .root
        .join(format!(".mirai/proposals/{id}.json"))
        .is_file());
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");

    let page = server.get("/mcp/proposals");
    assert_eq!(page.body["proposals"][0]["id"], id.as_str(), "{page:?}");
    let listed = &page.body["proposals"][0];
    assert_eq!(listed["status"], "pending");
    assert_eq!(listed["requested_by"]["adapter"], "http");
    assert_eq!(listed["operation"], "notes.append");
    assert_eq!(listed["subject"], "mcp.patch_apply: todo.md");
    assert_eq!(listed["base_commit"], head.as_str());
    let detail = server.get(&format!("/mcp/proposals/get?id={id}"));
    assert_eq!(detail.body["applies"], true, "{detail:?}");
    assert_eq!(detail.body["conflicts"], json!([]));
    assert_eq!(detail.body["changes"][0]["diff"], diff);

    // Nobody but the reviewer decides.
    let unauthorized = server.post_json("/mcp/proposals/approve", &json!({"id": id}));
    unauthorized.assert_error(401, "unauthorized");
    let approved = approve(&server, &id);
    assert_eq!(approved.status, 200, "{approved:?}");
    assert_eq!(approved.body["status"], "applied");
    assert_eq!(approved.body["commit"], server.head().as_str());
    assert_eq!(server.commit_count(), count + 1);
    assert_eq!(todo(&server), format!("{TODO}- call mum\n"));
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        format!("mcp.patch_apply: todo.md\n\nMirai-Proposal: {id}\n\n")
    );
    approve(&server, &id).assert_error(409, "conflict");
    let applied_commit = server.head();

    // Taking it back is proposed too, with the subject and body a revert commits.
    let revert =
        proposed(&server.post_json("/mcp/notes/revert", &json!({"commit": applied_commit})));
    let detail = server.get(&format!("/mcp/proposals/get?id={revert}"));
    assert_eq!(detail.body["operation"]["name"], "notes.revert");
    let subject = detail.body["operation"]["subject"].as_str().unwrap();
    assert!(subject.starts_with("mcp.revert: "), "{subject}");
    let body = detail.body["operation"]["body"].as_str().unwrap();
    assert!(
        body.starts_with(&format!("This reverts commit {applied_commit}.")),
        "{body}"
    );
    assert_eq!(todo(&server), format!("{TODO}- call mum\n"));
    assert_eq!(
        as_reviewer(&server, "/mcp/proposals/reject", json!({"id": revert})).status,
        200
    );
    let applied = server.get("/mcp/proposals?status=applied");
    assert_eq!(
        applied.body["proposals"][0]["commit"],
        server.head().as_str()
    );
    assert_eq!(pending_ids(&server), Vec::<String>::new());

    // A rejection writes nothing and keeps the reason.
    let id = proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "new.md", "content": "# New\n"}),
    ));
    let rejected = as_reviewer(
        &server,
        "/mcp/proposals/reject",
        json!({"id": id, "reason": "not now"}),
    );
    assert_eq!(rejected.status, 200, "{rejected:?}");
    assert!(!server.root.join("new.md").exists());
    let listed = server.get("/mcp/proposals?status=rejected");
    assert_eq!(listed.body["proposals"][0]["reason"], "not now");
    approve(&server, &id).assert_error(409, "conflict");

    // Upkeep is not proposed; a dry check stays a dry check; a write that
    // changes nothing answers as it always does.
    assert_eq!(
        server.post_json("/mcp/index/rebuild", &json!({})).status,
        200
    );
    let check = server.post_json(
        "/mcp/patch/propose",
        &json!({"patch": "--- /dev/null\n+++ b/x.md\n@@ -0,0 +1 @@\n+x\n"}),
    );
    assert_eq!(check.status, 200, "{check:?}");
    let same = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "todo.md", "content": todo(&server)}),
    );
    assert_eq!(same.status, 200, "{same:?}");
    assert_eq!(same.body["commit"], Value::Null);
    assert_eq!(pending_ids(&server), Vec::<String>::new());
}

#[test]
fn a_refused_write_is_refused_not_proposed_and_proposals_are_bounded() {
    let long: String = (0..40).map(|i| format!("line {i}\n")).collect();
    let server = TestServer::start_with(|c| {
        review(c);
        c.guards.mode = GuardMode::All;
        c.proposals_max_pending = 2;
    });
    server.write("long.md", &long);
    server.commit_all();
    let wiped = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "long.md", "content": "x\n"}),
    );
    wiped.assert_error(422, "guard_refused");
    let missing = server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "nope.md", "edits": [{"old": "a", "new": "b"}]}),
    );
    assert_eq!(missing.status, 404, "{missing:?}");
    assert!(pending_ids(&server).is_empty());

    for name in ["a", "b"] {
        proposed(&server.post_json(
            "/mcp/notes/write",
            &json!({"path": format!("{name}.md"), "content": "x\n"}),
        ));
    }
    let third = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "c.md", "content": "x\n"}),
    );
    third.assert_error(429, "too_many_proposals");
    assert!(third.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("approve or reject"));
    let id = pending_ids(&server).remove(0);
    assert_eq!(
        as_reviewer(&server, "/mcp/proposals/reject", json!({"id": id})).status,
        200
    );
    proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "c.md", "content": "x\n"}),
    ));

    // A program's proposal is bounded as changes.apply is: no more notes than
    // MIRAI_CHANGES_MAX_PATCHES (here 2), or nothing is proposed.
    let server = TestServer::start_with(|c| {
        review(c);
        c.max_changes = 2;
    });
    let code = "for (const p of ['x.md', 'y.md', 'z.md']) \
                { await mirai.notes.write({path: p, content: 'x\\n'}); } return 1";
    let refused = server.post_json("/agent/eval", &json!({ "code": code }));
    refused.assert_error(413, "payload_too_large");
    assert!(pending_ids(&server).is_empty());
}

#[test]
fn the_reviewer_token_alone_decides_and_opens_what_the_api_token_opens() {
    let server = TestServer::start_with(|c| {
        review(c);
        c.api_token = Some("api-s3cret".into());
    });
    let id = proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "a\n"}),
    ));
    let get = |token: Option<&str>| {
        let request = server.raw().get(format!("{}/mcp/notes", server.url));
        send(match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        })
    };
    assert_eq!(get(Some("api-s3cret")).status, 200);
    assert_eq!(get(Some(REVIEWER)).status, 200);
    get(None).assert_error(401, "unauthorized");
    // The API token can never approve or reject.
    for path in ["/mcp/proposals/approve", "/mcp/proposals/reject"] {
        let denied = server.post_json(path, &json!({"id": id}));
        denied.assert_error(403, "policy_denied");
        assert!(denied.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MIRAI_REVIEWER_TOKEN"));
    }
    let approved = approve(&server, &id);
    assert_eq!(approved.status, 200, "{approved:?}");

    // With the reviewer token alone, other routes stay open; deciding does not.
    let server = TestServer::start_with(review);
    let id = proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "a\n"}),
    ));
    assert_eq!(get_open(&server).status, 200);
    server
        .post_json("/mcp/proposals/reject", &json!({"id": id}))
        .assert_error(401, "unauthorized");
    let wrong = send(
        server
            .raw()
            .post(format!("{}/mcp/proposals/approve", server.url))
            .bearer_auth("guess")
            .json(&json!({"id": id})),
    );
    wrong.assert_error(401, "unauthorized");
    assert_eq!(
        as_reviewer(&server, "/mcp/proposals/reject", json!({"id": id})).status,
        200
    );

    // `mirai serve` in review mode without a reviewer token refuses to start.
    let dir = tempfile::tempdir().unwrap();
    let out = mirai_cli()
        .args(["serve", "--port", "0", "--notes-root"])
        .arg(dir.path().join("notes"))
        .env("MIRAI_POLICY_MODE", "review")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("needs MIRAI_REVIEWER_TOKEN"), "{stderr}");
}

fn get_open(server: &TestServer) -> Answer {
    send(server.raw().get(format!("{}/mcp/notes", server.url)))
}

#[test]
fn a_proposal_whose_base_moved_still_applies_and_one_that_conflicts_stays_pending() {
    let server = server();
    let appended = proposed(&server.post_json(
        "/mcp/notes/append",
        &json!({"path": "todo.md", "text": "- call mum\n"}),
    ));
    let edited = proposed(&server.post_json(
        "/mcp/notes/edit",
        &json!({"path": "todo.md", "edits": [{"old": "# Todo", "new": "# Tasks"}]}),
    ));
    // A person changes the note's title meanwhile.
    server.write("todo.md", TODO.replace("# Todo", "# To do"));
    server.commit_all();

    let detail = server.get(&format!("/mcp/proposals/get?id={edited}"));
    assert_eq!(detail.body["applies"], false, "{detail:?}");
    let conflict = &detail.body["conflicts"][0];
    assert_eq!(conflict["path"], "todo.md");
    assert_eq!(conflict["code"], "conflict");
    let message = conflict["message"].as_str().unwrap();
    assert!(message.contains("line"), "{message}");
    let head = server.head();
    let refused = approve(&server, &edited);
    refused.assert_error(409, "conflict");
    assert!(refused.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("stays pending"));
    assert_eq!(server.head(), head);
    assert!(pending_ids(&server).contains(&edited));

    let moved = server.get(&format!("/mcp/proposals/get?id={appended}"));
    assert_eq!(moved.body["applies"], true, "{moved:?}");
    assert_ne!(moved.body["base_commit"], head.as_str());
    assert_eq!(approve(&server, &appended).status, 200);
    assert_eq!(
        todo(&server),
        "# To do\n\n- buy milk\n- water the plants\n- call mum\n"
    );
    assert_eq!(pending_ids(&server), vec![edited]);
}

#[test]
fn an_eval_gathers_its_writes_into_one_proposal_that_its_reads_see() {
    let server = server();
    let head = server.head();
    let code = r##"
        const a = await mirai.notes.write({path: "plan.md", content: "# Plan\n"});
        const b = await mirai.notes.append({path: "plan.md", text: "- step one\n"});
        const c = await mirai.notes.edit({path: "todo.md", edits: [{old: "buy milk", new: "buy oat milk"}]});
        const read = await mirai.notes.read({path: "plan.md"});
        let denied = null;
        try { await mirai.proposals.approve({id: a.proposal}); } catch (e) { denied = e.code; }
        const listed = await mirai.proposals.list({});
        return {ids: [a.proposal, b.proposal, c.proposal], content: read.content, denied,
                listed: listed.proposals.length};
    "##;
    let answer = server.post_json("/agent/eval", &json!({ "code": code }));
    assert_eq!(answer.status, 200, "{answer:?}");
    let result = &answer.body["result"];
    assert_eq!(result["content"], "# Plan\n- step one\n", "{answer:?}");
    assert_eq!(result["denied"], "policy_denied");
    assert_eq!(result["listed"], 0, "filed when the eval ends");
    let ids = result["ids"].as_array().unwrap();
    assert!(ids.iter().all(|id| id == &ids[0]), "{ids:?}");
    let id = ids[0].as_str().unwrap();
    assert_eq!(answer.body["proposal"]["proposal"], id);
    let changes = answer.body["proposal"]["changes"].as_array().unwrap();
    let paths: Vec<&str> = changes
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["plan.md", "todo.md"]);
    assert_eq!(server.head(), head);
    assert!(!server.root.join("plan.md").exists());

    // A dry run still files nothing.
    let dry = server.post_json(
        "/agent/eval",
        &json!({"code": "return (await mirai.notes.write({path: \"d.md\", content: \"d\\n\"})).commit", "dry_run": true}),
    );
    assert_eq!(dry.body["result"], Value::Null, "{dry:?}");
    assert!(dry.body.get("proposal").is_none());
    assert_eq!(pending_ids(&server), vec![id.to_string()]);

    let detail = server.get(&format!("/mcp/proposals/get?id={id}"));
    assert_eq!(detail.body["requested_by"]["adapter"], "sandbox");
    let count = server.commit_count();
    assert_eq!(approve(&server, id).status, 200);
    assert_eq!(server.commit_count(), count + 1);
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        format!("mcp.changes_apply: 2 notes\n\nA plan.md\nM todo.md\n\nMirai-Proposal: {id}\n\n")
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("plan.md")).unwrap(),
        "# Plan\n- step one\n"
    );
    assert!(todo(&server).contains("buy oat milk"));
}

#[test]
fn an_agent_run_makes_one_proposal_approved_as_one_commit_with_its_trailers() {
    let llm = FakeLlm::start(Script::answering(&[
        "<think>Add a line.</think>\n<code>\nconst r = await mirai.notes.append({path: \"todo.md\", text: \"- call mum\\n\"});\nreturn r.proposal;\n</code>".to_string(),
        "<think>And fix the milk.</think>\n<code>\nawait mirai.notes.edit({path: \"todo.md\", edits: [{old: \"buy milk\", new: \"buy oat milk\"}]});\nreturn (await mirai.notes.read({path: \"todo.md\"})).content;\n</code>".to_string(),
        "<think>Done.</think>\n<reply>I proposed adding \"call mum\" and changing the milk to oat milk in todo.md.</reply>".to_string(),
    ]));
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|c| {
        review(c);
        c.llm.base_url = base_url;
        c.llm.model = "fake-model".into();
    });
    server.write("todo.md", TODO);
    server.commit_all();
    let head = server.head();
    let report = server.post_json(
        "/agent/run",
        &json!({"task": "Add call mum, make the milk oat milk."}),
    );
    assert_eq!(report.status, 200, "{report:?}");
    let report = report.body;
    assert_eq!(report["stopped"], "reply", "{report}");
    assert_eq!(report["commits"], json!([]));
    assert_eq!(report["warnings"], json!([]), "{report}");
    let id = report["proposal"]["proposal"].as_str().unwrap();
    assert_eq!(report["steps"][0]["result"], id);
    assert_eq!(
        report["steps"][1]["result"], "# Todo\n\n- buy oat milk\n- water the plants\n- call mum\n",
        "the run reads what it proposed"
    );
    assert_eq!(server.head(), head);
    // The prompt said so, and no observation called a proposed write a no-op.
    let requests = llm.requests();
    let prompt = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.contains("Writes are proposed for a person to approve"));
    let observation = requests[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!observation.contains("changed nothing"), "{observation}");

    assert_eq!(pending_ids(&server), vec![id.to_string()]);
    let count = server.commit_count();
    let approved = approve(&server, id);
    assert_eq!(approved.status, 200, "{approved:?}");
    assert_eq!(server.commit_count(), count + 1);
    let run_id = report["run_id"].as_str().unwrap();
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%B"]),
        format!("mcp.changes_apply: 1 note\n\nM todo.md\n\nMirai-Run: {run_id}\nMirai-Proposal: {id}\n\n")
    );
    let run = server.get(&format!("/agent/runs/{run_id}"));
    assert_eq!(run.status, 200, "{run:?}");
    assert_eq!(
        todo(&server),
        "# Todo\n\n- buy oat milk\n- water the plants\n- call mum\n"
    );
}

#[test]
fn mcp_tools_propose_and_list_but_never_decide() {
    use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;

    let server = server();
    let head = server.head();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (written, listed, denied) = runtime.block_on(async {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.url));
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mirai-spec", "0.1.0"),
        )
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
        let call = |tool: &str, args: Value| {
            client.call_tool(
                CallToolRequestParams::new(tool.to_string())
                    .with_arguments(args.as_object().cloned().unwrap()),
            )
        };
        let written = call("notes_write", json!({"path": "m.md", "content": "# M\n"}))
            .await
            .unwrap();
        let listed = call("proposals_list", json!({})).await.unwrap();
        let id = written.structured_content.as_ref().unwrap()["proposal"].clone();
        let denied = call("proposals_approve", json!({ "id": id }))
            .await
            .unwrap();
        (written, listed, denied)
    });
    assert_eq!(written.is_error, Some(false));
    let answer = written.structured_content.unwrap();
    let id = answer["proposal"].as_str().unwrap();
    assert_eq!(answer["changes"][0]["path"], "m.md");
    assert_eq!(listed.structured_content.unwrap()["proposals"][0]["id"], id);
    assert_eq!(denied.is_error, Some(true));
    assert!(serde_json::to_string(&denied.content)
        .unwrap()
        .contains("policy_denied"));
    assert_eq!(server.head(), head);
    let detail = server.get(&format!("/mcp/proposals/get?id={id}"));
    assert_eq!(detail.body["requested_by"]["adapter"], "mcp");
    assert_eq!(approve(&server, id).status, 200);
    assert!(server.root.join("m.md").is_file());
}

fn cli(root: &Path, args: &[&str]) -> std::process::Output {
    mirai_cli()
        .args(args)
        .arg("--notes-root")
        .arg(root)
        .env("MIRAI_POLICY_MODE", "review")
        .output()
        .unwrap()
}

#[test]
fn the_cli_proposes_lists_shows_approves_and_rejects() {
    let (_dir, root) = seeded(&[("todo.md", TODO)]);
    let head = git(&root, &["rev-parse", "HEAD"]);
    let mut ids = Vec::new();
    for path in ["a.md", "b.md"] {
        let request = json!({"path": path, "content": "# A\n"}).to_string();
        let out = cli(&root, &["call", "notes.write", &request]);
        assert!(out.status.success(), "{out:?}");
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        ids.push(answer["proposal"].as_str().unwrap().to_string());
    }
    assert_eq!(git(&root, &["rev-parse", "HEAD"]), head);
    let out = cli(&root, &["proposals", "list"]);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with(&ids[1]) && lines[0].contains("cli  mcp.patch_apply: b.md"),
        "{lines:?}"
    );
    let out = cli(&root, &["proposals", "show", &ids[0]]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["applies"], true);
    assert_eq!(shown["changes"][0]["path"], "a.md");

    let out = cli(&root, &["proposals", "approve", &ids[0]]);
    assert!(out.status.success(), "{out:?}");
    let commit = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(git(&root, &["rev-parse", "HEAD"]).trim(), commit);
    assert!(
        git(&root, &["log", "-1", "--format=%B"]).contains(&format!("Mirai-Proposal: {}", ids[0]))
    );
    let again = cli(&root, &["proposals", "approve", &ids[0]]);
    assert_eq!(again.status.code(), Some(5), "{again:?}");

    let out = cli(
        &root,
        &["proposals", "reject", &ids[1], "--reason", "no thanks"],
    );
    assert!(out.status.success(), "{out:?}");
    let out = cli(&root, &["proposals", "list", "--status", "rejected"]);
    assert!(String::from_utf8(out.stdout).unwrap().starts_with(&ids[1]));
    assert!(!root.join("b.md").exists());
    // `mirai revert` proposes too, and says so.
    let out = cli(&root, &["revert", &commit]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(said.starts_with("proposed "), "{said}");
    assert_eq!(git(&root, &["rev-parse", "HEAD"]).trim(), commit);
    let missing = cli(&root, &["proposals", "show", "nope"]);
    assert_eq!(missing.status.code(), Some(4), "{missing:?}");
}

#[test]
fn pending_proposals_outlive_a_restart_and_a_trailer_on_the_branch_marks_one_applied() {
    let server = server();
    let first = proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "a\n"}),
    ));
    let second = proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "b.md", "content": "b\n"}),
    ));
    // Another server on the same notes: what it knows of proposals it reads from disk.
    let before = server;
    let server = TestServer::start_in(tempfile::tempdir().unwrap(), before.root.clone(), review);
    assert_eq!(pending_ids(&server), vec![second.clone(), first.clone()]);

    // An approval killed after its commit: the commit carries the trailer, the file still says pending.
    server.write("a.md", "a\n");
    git(&server.root, &["add", "a.md"]);
    git(
        &server.root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            &format!("mcp.patch_apply: a.md\n\nMirai-Proposal: {first}"),
        ],
    );
    let head = server.head();
    assert_eq!(pending_ids(&server), vec![second.clone()]);
    let applied = server.get("/mcp/proposals?status=applied");
    assert_eq!(applied.body["proposals"][0]["commit"], head.as_str());
    approve(&server, &first).assert_error(409, "conflict");
    assert_eq!(server.head(), head);
    assert_eq!(approve(&server, &second).status, 200);
}

#[test]
fn hostile_proposal_files_are_refused_and_never_followed() {
    let server = server();
    let good = proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "a\n"}),
    ));
    let folder = server.root.join(".mirai/proposals");
    let hostile: Vec<String> = (0..3).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    // Another proposal's text under a new name, a path out of the root, a link to a secret.
    let text = std::fs::read_to_string(folder.join(format!("{good}.json"))).unwrap();
    std::fs::write(folder.join(format!("{}.json", hostile[0])), &text).unwrap();
    let escaping = text
        .replace(&good, &hostile[1])
        .replace("\"a.md\"", "\"../outside.md\"");
    std::fs::write(folder.join(format!("{}.json", hostile[1])), escaping).unwrap();
    std::fs::write(server.dir.path().join("secret.json"), &text).unwrap();
    std::os::unix::fs::symlink(
        server.dir.path().join("secret.json"),
        folder.join(format!("{}.json", hostile[2])),
    )
    .unwrap();
    let head = server.head();
    for id in &hostile {
        let detail = server.get(&format!("/mcp/proposals/get?id={id}"));
        detail.assert_error(409, "conflict");
        approve(&server, id).assert_error(409, "conflict");
    }
    server
        .get("/mcp/proposals/get?id=..%2F..%2Fsecret")
        .assert_error(404, "not_found");
    let page = server.get("/mcp/proposals");
    assert_eq!(page.body["unreadable"], 3, "{page:?}");
    assert_eq!(pending_ids(&server), vec![good.clone()]);
    assert_eq!(server.head(), head);
    assert!(!server.dir.path().join("outside.md").exists());
    assert_eq!(approve(&server, &good).status, 200);
}

/// A planted proposal file whose change is listed as one note while its
/// diff's headers name another is refused whole: never listed, shown or
/// approved, so what a person approves is what they were shown.
#[test]
fn a_proposal_whose_diff_names_another_note_than_it_lists_is_refused() {
    let server = server();
    server.write("important.md", "keep me\n");
    server.commit_all();
    let good = proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "harmless.md", "content": "hello\n"}),
    ));
    let folder = server.root.join(".mirai/proposals");
    let text = std::fs::read_to_string(folder.join(format!("{good}.json"))).unwrap();
    let stored: Value = serde_json::from_str(&text).unwrap();
    let planted = |id: &str, diff: &str| {
        let mut forged = stored.clone();
        forged["id"] = json!(id);
        forged["changes"][0]["diff"] = json!(diff);
        std::fs::write(
            folder.join(format!("{id}.json")),
            serde_json::to_string_pretty(&forged).unwrap(),
        )
        .unwrap();
    };
    let both = uuid::Uuid::now_v7().to_string();
    planted(
        &both,
        "--- a/important.md\n+++ b/important.md\n@@ -1 +1 @@\n-keep me\n+owned\n",
    );
    let git_header = uuid::Uuid::now_v7().to_string();
    planted(
        &git_header,
        "diff --git a/important.md b/important.md\n--- a/important.md\n+++ b/important.md\n\
         @@ -1 +1 @@\n-keep me\n+owned\n",
    );
    let created = uuid::Uuid::now_v7().to_string();
    planted(
        &created,
        "--- /dev/null\n+++ b/./other.md\n@@ -0,0 +1 @@\n+owned\n",
    );
    let head = server.head();
    for id in [&both, &git_header, &created] {
        let detail = server.get(&format!("/mcp/proposals/get?id={id}"));
        detail.assert_error(409, "conflict");
        assert!(
            detail.body.to_string().contains("harmless.md"),
            "{detail:?}"
        );
        approve(&server, id).assert_error(409, "conflict");
    }
    let page = server.get("/mcp/proposals");
    assert_eq!(page.body["unreadable"], 3, "{page:?}");
    assert_eq!(pending_ids(&server), vec![good.clone()]);
    assert_eq!(server.head(), head);
    assert_eq!(
        std::fs::read_to_string(server.root.join("important.md")).unwrap(),
        "keep me\n"
    );
    assert!(!server.root.join("other.md").exists());
    assert_eq!(approve(&server, &good).status, 200);
}

/// A request's message is bounded when it is proposed, and a listing shows
/// a short summary of it (proposals.get shows it whole).
#[test]
fn a_proposals_message_is_bounded_at_filing_and_listed_short() {
    let server = server();
    let patch = |line: &str| {
        format!("--- a/todo.md\n+++ b/todo.md\n@@ -4 +4 @@\n-- water the plants\n+{line}\n")
    };
    let long = "m".repeat(4097);
    let refused = server.post_json(
        "/mcp/changes/apply",
        &json!({"patches": [patch("- x")], "message": long}),
    );
    refused.assert_error(400, "invalid_request");
    assert!(refused.body.to_string().contains("4096"), "{refused:?}");
    assert!(pending_ids(&server).is_empty());
    let message = "word ".repeat(800);
    let id = proposed(&server.post_json(
        "/mcp/changes/apply",
        &json!({"patches": [patch("- y")], "message": message}),
    ));
    let page = server.get("/mcp/proposals");
    let listed = page.body["proposals"][0]["requested_by"]["message"]
        .as_str()
        .unwrap();
    assert!(listed.chars().count() <= 201, "{listed}");
    assert!(listed.ends_with('…') && message.starts_with(listed.trim_end_matches('…')));
    let detail = server.get(&format!("/mcp/proposals/get?id={id}"));
    assert_eq!(detail.body["requested_by"]["message"], message);
}

#[test]
fn sigkill_during_approvals_never_applies_a_proposal_twice() {
    let rounds: usize = std::env::var("MIRAI_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let (dir, root) = seeded(&[("seed.md", "seed\n")]);
    let env = [
        ("MIRAI_POLICY_MODE", "review"),
        ("MIRAI_REVIEWER_TOKEN", REVIEWER),
    ];
    let mut all: Vec<String> = Vec::new();
    let mut reconciled = 0;
    for round in 0..=rounds {
        let log = dir.path().join(format!("review-{round}.log"));
        let mut mirai = Mirai::start_env(&root, &log, &env);
        let (client, url) = (mirai.client.clone(), mirai.url.clone());
        // After each restart: no proposal applied twice, every applied one by
        // exactly one commit, every pending one by none.
        let trailers: Vec<String> = git(
            &root,
            &["log", "--format=%(trailers:key=Mirai-Proposal,valueonly)"],
        )
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect();
        let unique: HashSet<&String> = trailers.iter().collect();
        assert_eq!(unique.len(), trailers.len(), "round {round}: {trailers:?}");
        // Approvals the kill cut between their commit and their file's update.
        reconciled += unique
            .iter()
            .filter(|id| {
                let file = root.join(format!(".mirai/proposals/{id}.json"));
                std::fs::read_to_string(file)
                    .unwrap()
                    .contains("\"pending\"")
            })
            .count();
        let listed = |status: &str| -> Vec<String> {
            let body: Value = client
                .get(format!("{url}/mcp/proposals?status={status}&limit=100"))
                .send()
                .unwrap()
                .json()
                .unwrap();
            body["proposals"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["id"].as_str().unwrap().to_string())
                .collect()
        };
        let (pending, applied) = (listed("pending"), listed("applied"));
        assert_eq!(pending.len() + applied.len(), all.len(), "round {round}");
        for id in &applied {
            assert!(
                unique.contains(id),
                "round {round}: {id} applied without its commit"
            );
        }
        for id in &pending {
            assert!(
                !unique.contains(id),
                "round {round}: {id} pending with a commit"
            );
        }
        assert_eq!(git(&root, &["status", "--porcelain"]), "", "round {round}");
        if round == rounds {
            assert!(!applied.is_empty(), "no approval landed in {rounds} rounds");
            eprintln!(
                "review crash harness: {rounds} kills, {} proposals, {} applied, {} pending; \
                 {reconciled} marked applied from their trailer after a kill",
                all.len(),
                applied.len(),
                pending.len()
            );
            break;
        }
        for i in 0..8 {
            let body: Value = client
                .post(format!("{url}/mcp/notes/write"))
                .json(&json!({"path": format!("r{round}/n{i}.md"), "content": format!("{round} {i}\n")}))
                .send()
                .unwrap()
                .json()
                .unwrap();
            all.push(body["proposal"].as_str().unwrap().to_string());
        }
        let ids = listed("pending");
        let approver = std::thread::spawn(move || {
            for id in ids {
                let sent = client
                    .post(format!("{url}/mcp/proposals/approve"))
                    .bearer_auth(REVIEWER)
                    .json(&json!({ "id": id }))
                    .send();
                if sent.is_err() {
                    return;
                }
            }
        });
        std::thread::sleep(Duration::from_millis(fastrand::u64(5..120)));
        mirai.kill();
        approver.join().unwrap();
    }
}

/// Proposals that create, delete or move an empty note (diffs of headers
/// alone, which no patch carries) are approved as `notes.write` lands them
/// outside review mode; one whose note changed meanwhile stays pending.
#[test]
fn proposals_of_empty_notes_created_deleted_and_moved_are_approved() {
    let server = server();
    let created = proposed(&server.post_json(
        "/mcp/notes/write",
        &json!({"path": "empty.md", "content": ""}),
    ));
    let approved = approve(&server, &created);
    assert_eq!(approved.status, 200, "{approved:?}");
    assert_eq!(std::fs::read(server.root.join("empty.md")).unwrap(), b"");
    assert_eq!(git(&server.root, &["show", "HEAD:empty.md"]), "");

    let moved = proposed(&server.post_json(
        "/mcp/notes/move",
        &json!({"from": "empty.md", "to": "still-empty.md"}),
    ));
    let approved = approve(&server, &moved);
    assert_eq!(approved.status, 200, "{approved:?}");
    assert!(!server.root.join("empty.md").exists());
    assert_eq!(
        std::fs::read(server.root.join("still-empty.md")).unwrap(),
        b""
    );

    let deleted =
        proposed(&server.post_json("/mcp/notes/delete", &json!({"path": "still-empty.md"})));
    // The note is no longer empty: the deletion stays pending, the note stays.
    server.write("still-empty.md", "now it says something\n");
    server.commit_all();
    let refused = approve(&server, &deleted);
    refused.assert_error(409, "conflict");
    assert!(pending_ids(&server).contains(&deleted));
    std::fs::write(server.root.join("still-empty.md"), "").unwrap();
    server.commit_all();
    let approved = approve(&server, &deleted);
    assert_eq!(approved.status, 200, "{approved:?}");
    assert!(!server.root.join("still-empty.md").exists());
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
}

/// A move proposal is approved only while it is still the whole move: a note
/// that gained a link to the moved note since is named and the approval
/// refused, rather than left with a broken link.
#[test]
fn approving_a_move_refuses_when_notes_gained_links_since() {
    let server = server();
    server.write("hub.md", "# Hub\n");
    server.write("l1.md", "see [[hub]]\n");
    server.commit_all();
    let id = proposed(&server.post_json(
        "/mcp/notes/move",
        &json!({"from": "hub.md", "to": "hub2.md"}),
    ));
    server.write("l2.md", "also [[hub]]\n");
    server.commit_all();
    let refused = approve(&server, &id);
    refused.assert_error(409, "conflict");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("l2.md") && !message.contains("l1.md"),
        "{message}"
    );
    assert!(pending_ids(&server).contains(&id));
    assert!(server.root.join("hub.md").exists());

    // Without the new link, the same move approves.
    std::fs::remove_file(server.root.join("l2.md")).unwrap();
    server.commit_all();
    let approved = approve(&server, &id);
    assert_eq!(approved.status, 200, "{approved:?}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("l1.md")).unwrap(),
        "see [[hub2]]\n"
    );
}
