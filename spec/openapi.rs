//! The OpenAPI document is generated (`mirai openapi`) and committed as
//! spec/openapi.yaml; it and the served routes must list the same routes.

use crate::common;

use std::collections::BTreeSet;

use common::TestServer;
use mirai::http::endpoints;

fn documented_routes() -> BTreeSet<(String, String)> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/spec/openapi.yaml")).unwrap();
    let doc: serde_json::Value = serde_norway::from_str(&text).expect("openapi.yaml parses");
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().expect("paths");
    let mut routes = BTreeSet::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                routes.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    routes
}

#[test]
fn the_committed_document_is_what_mirai_openapi_prints() {
    let out = common::mirai_cli().arg("openapi").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/spec/openapi.yaml")).unwrap();
    assert!(
        printed == committed,
        "spec/openapi.yaml is not what `mirai openapi` prints: run \
         `cargo run -- openapi > spec/openapi.yaml` and commit the result"
    );
    let doc: serde_json::Value = serde_norway::from_str(&printed).unwrap();
    assert_eq!(
        doc["paths"]["/mcp/notes/read"]["get"]["operationId"],
        "notes.read"
    );
}

#[test]
fn every_served_route_is_documented_and_every_documented_route_is_served() {
    let served: BTreeSet<(String, String)> = endpoints()
        .iter()
        .map(|e| (e.method.as_str().to_string(), e.path.to_string()))
        .collect();
    let documented = documented_routes();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty(),
        "served but missing from spec/openapi.yaml: {undocumented:?}"
    );
    assert!(
        unserved.is_empty(),
        "in spec/openapi.yaml but not served: {unserved:?}"
    );
}

#[test]
fn every_documented_route_is_answered_by_the_live_server() {
    let server = TestServer::start();
    for (method, path) in documented_routes() {
        // The change stream never ends; a filter it refuses shows it is routed.
        let query = if path == "/events" { "?types=none" } else { "" };
        let url = format!("{}{}{query}", server.url, path);
        let request = match method.as_str() {
            "GET" => server.raw().get(url),
            "POST" => server
                .raw()
                .post(url)
                .header("content-type", "application/json")
                .body("{}"),
            "DELETE" => server.raw().delete(url),
            other => panic!("unexpected method {other}"),
        };
        let answer = common::send(request);
        // The router's own refusals use mirai's error shape; /mcp answers JSON-RPC errors.
        if answer.status >= 400 && answer.body["error"]["code"].is_string() {
            let code = answer.error_code();
            assert!(
                code != "method_not_allowed"
                    && !(code == "not_found" && answer.body.to_string().contains("no route")),
                "{method} {path} is documented but not routed: {answer:?}"
            );
        }
    }
}

#[test]
fn every_row_is_served_at_its_declared_route_by_that_row() {
    // In read_only mode a write row answers a policy refusal that names it; a read
    // row answers 200 or its own malformed code to an empty request.
    let server = TestServer::start_with(|c| c.policy = mirai::config::PolicyMode::ReadOnly);
    let rows: Vec<_> = endpoints().into_iter().filter_map(|e| e.row()).collect();
    assert_eq!(rows.len(), mirai::ops::TABLE.len(), "one route per row");
    for op in mirai::ops::TABLE {
        let url = format!("{}{}", server.url, op.http.path);
        let request = match op.http.verb {
            mirai::ops::Verb::Get => server.raw().get(url),
            mirai::ops::Verb::Post => server
                .raw()
                .post(url)
                .header("content-type", "application/json")
                .body("{}"),
            mirai::ops::Verb::Delete => server.raw().delete(url),
        };
        let answer = common::send(request);
        match op.class {
            mirai::ops::Class::Write => {
                answer.assert_error(403, "policy_denied");
                assert_eq!(
                    answer.body["error"]["message"],
                    format!("action {} is denied in read_only mode", op.name)
                );
            }
            // A reviewer's decision needs the reviewer token, whatever the mode.
            mirai::ops::Class::Review => answer.assert_error(401, "unauthorized"),
            mirai::ops::Class::Read | mirai::ops::Class::Sync if answer.status == 200 => {}
            mirai::ops::Class::Read | mirai::ops::Class::Sync => {
                assert_eq!(
                    answer.error_code(),
                    op.malformed.as_str(),
                    "{}: {answer:?}",
                    op.name
                )
            }
        }
    }
}
