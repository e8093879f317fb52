//! `notes.front_matter` through every adapter (HTTP, MCP, the sandbox, `mirai
//! call`, review mode): only the named fields change, every other byte stays;
//! and the structure guard: a model's write that drops a note's front matter,
//! headings, links or most of its text is refused, passed with
//! `allow_large_delete`, while a person's plain HTTP write is not guarded.

use crate::common;

use common::{git, mirai_cli, TestServer};
use mirai::config::PolicyMode;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

/// Comments, single quotes, a block list, a trailing comment, CRLF-free odd spacing in the body.
const BREAD: &str = "---\n# kept as written\ntitle: 'Sourdough'\nstatus: draft   # for now\ntags:\n  - bread\n  - baking\n---\n# Sourdough\n\nSee [[starter]] and [flour](flour.md).\n\n  Body  with  odd   spacing \n\n## Steps\n\n- mix\n- bake\n";

fn read(server: &TestServer, rel: &str) -> String {
    std::fs::read_to_string(server.root.join(rel)).unwrap()
}

#[test]
fn over_http_only_the_named_fields_change_byte_for_byte() {
    let server = TestServer::with_note("recipes/bread.md", BREAD);
    let answer = server.post_json(
        "/mcp/notes/front_matter",
        &json!({"path": "recipes/bread.md", "set": {"status": "tested", "rating": 5, "note": "yes: really"}, "remove": ["tags"]}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["commit"], server.head());
    let expected = BREAD
        .replace("status: draft   # for now\n", "status: tested\n")
        .replace(
            "tags:\n  - bread\n  - baking\n",
            "note: \"yes: really\"\nrating: 5\n",
        );
    assert_eq!(read(&server, "recipes/bread.md"), expected);
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%s"]).trim(),
        "mcp.patch_apply: recipes/bread.md"
    );
    let front = server.read("recipes/bread.md").body["front_matter"].clone();
    assert_eq!(
        front,
        json!({"title": "Sourdough", "status": "tested", "rating": 5, "note": "yes: really"})
    );
}

#[test]
fn a_note_without_front_matter_gets_a_block_and_bad_requests_change_nothing() {
    let server = TestServer::with_note("plain.md", "# Plain\n\ntext\n");
    let head = server.head();
    for (body, wanted) in [
        (json!({"path": "plain.md"}), "give `set`"),
        (
            json!({"path": "plain.md", "set": {"a: b": 1}}),
            "is not a field name",
        ),
        (
            json!({"path": "plain.md", "set": {"a": 1}, "remove": ["a"]}),
            "both in `set` and in `remove`",
        ),
    ] {
        let answer = server.post_json("/mcp/notes/front_matter", &body);
        answer.assert_error(400, "invalid_request");
        assert!(
            answer.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(wanted),
            "{answer:?}"
        );
    }
    assert_eq!(server.head(), head);
    let answer = server.post_json(
        "/mcp/notes/front_matter",
        &json!({"path": "plain.md", "set": {"tags": ["a", "b c"], "done": false}}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        read(&server, "plain.md"),
        "---\ndone: false\ntags: [a, b c]\n---\n# Plain\n\ntext\n"
    );
    server
        .post_json(
            "/mcp/notes/front_matter",
            &json!({"path": "missing.md", "set": {"a": 1}}),
        )
        .assert_error(404, "not_found");
}

#[test]
fn the_sandbox_and_mirai_call_reach_the_row() {
    let server = TestServer::with_note("recipes/bread.md", BREAD);
    let answer = server.post_json(
        "/agent/eval",
        &json!({"code": r#"return await mirai.notes.front_matter({path: "recipes/bread.md", set: {status: "tested"}});"#}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body["error"].is_null(), "{answer:?}");
    let after_eval = BREAD.replace("status: draft   # for now\n", "status: tested\n");
    assert_eq!(read(&server, "recipes/bread.md"), after_eval);

    let out = mirai_cli()
        .args(["call", "notes.front_matter"])
        .arg(r#"{"path":"recipes/bread.md","remove":["title"]}"#)
        .arg("--notes-root")
        .arg(&server.root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["path"], "recipes/bread.md");
    assert_eq!(
        read(&server, "recipes/bread.md"),
        after_eval.replace("title: 'Sourdough'\n", "")
    );
}

#[test]
fn over_mcp_the_row_is_a_tool() {
    let server = TestServer::with_note("recipes/bread.md", BREAD);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let text = runtime.block_on(async {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.url));
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mirai-spec", "0.1.0"),
        )
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap();
        let result = client
            .call_tool(
                CallToolRequestParams::new("notes_front_matter").with_arguments(
                    json!({"path": "recipes/bread.md", "set": {"status": "baked"}})
                        .as_object()
                        .cloned()
                        .unwrap(),
                ),
            )
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true));
        serde_json::to_value(&result.content).unwrap()[0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    });
    assert!(text.contains("\"commit\""), "{text}");
    assert_eq!(
        read(&server, "recipes/bread.md"),
        BREAD.replace("status: draft   # for now\n", "status: baked\n")
    );
}

#[test]
fn in_review_mode_the_change_is_a_proposal() {
    let server = TestServer::start_with(|c| {
        c.policy = PolicyMode::Review;
        c.reviewer_token = Some("reviewer-s3cret".into());
    });
    server.write("recipes/bread.md", BREAD);
    server.commit_all();
    let head = server.head();
    let answer = server.post_json(
        "/mcp/notes/front_matter",
        &json!({"path": "recipes/bread.md", "set": {"status": "tested"}}),
    );
    assert_eq!(answer.status, 202, "{answer:?}");
    assert!(answer.body["proposal"].is_string(), "{answer:?}");
    let diff = answer.body["changes"][0]["diff"].as_str().unwrap();
    assert!(
        diff.contains("-status: draft   # for now\n+status: tested\n"),
        "{diff}"
    );
    assert_eq!(server.head(), head);
    assert_eq!(read(&server, "recipes/bread.md"), BREAD);
}

#[test]
fn a_models_write_that_drops_the_structure_is_refused_and_a_persons_is_not() {
    let server = TestServer::with_note("recipes/bread.md", BREAD);
    let head = server.head();
    let wipe = |extra: &str| {
        format!(
            r#"try {{ return await mirai.notes.write({{path: "recipes/bread.md", content: "status: tested\nMix and bake.\n"{extra}}}); }} catch (e) {{ return {{code: e.code, message: e.message}}; }}"#
        )
    };
    let refused = server.post_json("/agent/eval", &json!({"code": wipe("")}));
    assert_eq!(
        refused.body["result"]["code"], "guard_refused",
        "{refused:?}"
    );
    let message = refused.body["result"]["message"].as_str().unwrap();
    for lost in [
        "the structure guard refused this write: it would drop from recipes/bread.md its whole front matter (3 fields: status, tags, title)",
        "all 2 of its headings (# Sourdough, ## Steps)",
        "2 of its 2 links (starter, flour.md)",
        "notes.front_matter",
        "\"allow_large_delete\": true",
    ] {
        assert!(message.contains(lost), "{lost}: {message}");
    }
    assert_eq!(server.head(), head);
    assert_eq!(read(&server, "recipes/bread.md"), BREAD);

    // A task that really asks for a rewrite passes it.
    let passed = server.post_json(
        "/agent/eval",
        &json!({"code": wipe(", allow_large_delete: true")}),
    );
    assert!(passed.body["result"]["commit"].is_string(), "{passed:?}");

    // A person's plain HTTP write is not guarded (MIRAI_GUARDS=models by default).
    server.write("people.md", BREAD);
    server.commit_all();
    let person = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "people.md", "content": "short\n"}),
    );
    assert_eq!(person.status, 200, "{person:?}");
    assert_eq!(read(&server, "people.md"), "short\n");
}

#[test]
fn a_models_heading_rename_that_drops_the_marks_is_refused_with_the_edit_that_keeps_them() {
    // From a real run: "rename the heading Plans" sent {old: "## Plans", new: "Spring plans"}.
    let server = TestServer::with_note("recipes/bread.md", BREAD);
    let head = server.head();
    let edit = |new: &str| {
        format!(
            r###"try {{ return await mirai.notes.edit({{path: "recipes/bread.md", edits: [{{old: "## Steps", new: "{new}"}}]}}); }} catch (e) {{ return {{code: e.code, message: e.message}}; }}"###
        )
    };
    let refused = server.post_json("/agent/eval", &json!({"code": edit("Method")}));
    assert_eq!(
        refused.body["result"]["code"], "guard_refused",
        "{refused:?}"
    );
    let message = refused.body["result"]["message"].as_str().unwrap();
    assert!(
        message.contains(r###"it would turn the heading "## Steps" of recipes/bread.md into the plain line "Method""###)
            && message.contains(r###"edits: [{old: "## Steps", new: "## Method"}]"###),
        "{message}"
    );
    assert_eq!(server.head(), head);
    assert_eq!(read(&server, "recipes/bread.md"), BREAD);
    // The edit it names passes.
    let renamed = server.post_json("/agent/eval", &json!({"code": edit("## Method")}));
    assert!(renamed.body["result"]["commit"].is_string(), "{renamed:?}");
    assert_eq!(
        read(&server, "recipes/bread.md"),
        BREAD.replace("## Steps", "## Method")
    );
}
