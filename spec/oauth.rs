//! mirai as an OAuth 2.1 resource server (issue 47): access tokens from a real
//! authorization server (spec/common/auth_server.rs: its metadata, its JWKS,
//! tokens signed with keys made here) are verified locally and mapped onto the
//! named callers; everything else is 401 with the challenge MCP clients start
//! their sign-in from.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use mirai::callers::{Right, Rights};
use mirai::config::{Config, OAuthSettings};
use serde_json::{json, Value};

use crate::common::auth_server::{now, AuthServer, Jwks, SigningKey};
use crate::common::{git, token_sha256, Answer, TestServer};

const AUDIENCE: &str = "http://mirai.test";
const STATIC: &str = "static-token";
const METADATA: &str = "http://mirai.test/.well-known/oauth-protected-resource";

/// ann signs in by subject, bea by verified email; `static` keeps a token.
fn callers_file(dir: &Path) -> PathBuf {
    let text = format!(
        r#"[[caller]]
name = "ann"
email = "ann@example.org"
oauth_subject = "sub-ann"
can = ["read", "write"]
paths = ["inbox/"]

[[caller]]
name = "bea"
email = "bea@example.org"
oauth_email = "bea@example.org"
can = ["read", "write"]
read_paths = ["public/"]

[[caller]]
name = "static"
token_sha256 = "{}"
can = ["read"]
"#,
        token_sha256(STATIC)
    );
    let path = dir.join("callers.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn settings(auth: &AuthServer, default_can: &[Right]) -> OAuthSettings {
    let mut can = Rights::none();
    for right in default_can {
        can.add(*right);
    }
    OAuthSettings {
        issuer: auth.issuer.clone(),
        audience: AUDIENCE.to_string(),
        public_url: AUDIENCE.to_string(),
        jwks_url: None,
        default_can: can,
        fetch_timeout: Duration::from_millis(800),
        refresh_interval: Duration::from_secs(60),
        page_client_id: None,
    }
}

/// mirai with the callers file, taking tokens from `auth`.
fn mirai(oauth: OAuthSettings) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let file = callers_file(dir.path());
    let root = dir.path().join("notes");
    let server = TestServer::start_in(dir, root, |c: &mut Config| {
        c.callers_file = Some(file);
        c.oauth = Some(oauth);
    });
    server.write("inbox/todo.md", "# Todo\n\n- milk\n");
    server.write("public/open.md", "# Open\n\nplain words\n");
    server.write("secret/hidden.md", "# Hidden\n\nzebracanary\n");
    server.commit_all();
    server
}

/// The answer and its `WWW-Authenticate`.
fn call(
    server: &TestServer,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (Answer, Option<String>) {
    let url = format!("{}{path}", server.url);
    let mut request = match method {
        "GET" => server.raw().get(url),
        _ => server.raw().post(url),
    };
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().unwrap();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (Answer { status, body }, challenge)
}

fn read_todo(server: &TestServer, token: &str) -> (Answer, Option<String>) {
    call(
        server,
        "GET",
        "/mcp/notes/read?path=inbox/todo.md",
        Some(token),
        None,
    )
}

fn write(server: &TestServer, token: &str, path: &str) -> Answer {
    call(
        server,
        "POST",
        "/mcp/notes/write",
        Some(token),
        Some(json!({"path": path, "content": "written\n"})),
    )
    .0
}

/// A 2026-07-28 MCP tools/call over HTTP.
fn mcp_call(server: &TestServer, token: &str, tool: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let response = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.json().unwrap()
}

/// A 2026-07-28 MCP tools/call over HTTP: its status and `WWW-Authenticate`.
fn mcp_refused(
    server: &TestServer,
    token: &str,
    tool: &str,
    arguments: Value,
) -> (u16, Option<String>) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let response = server
        .raw()
        .post(format!("{}/mcp", server.url))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .unwrap();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    (response.status().as_u16(), challenge)
}

#[test]
fn the_metadata_documents_and_the_challenge_on_every_route() {
    let key = SigningKey::p256("k1");
    let auth = AuthServer::start(&[&key]);
    let server = mirai(settings(&auth, &[Right::Read]));

    let (doc, _) = call(
        &server,
        "GET",
        "/.well-known/oauth-protected-resource",
        None,
        None,
    );
    assert_eq!(doc.status, 200, "{doc:?}");
    assert_eq!(doc.body["resource"], AUDIENCE);
    assert_eq!(doc.body["authorization_servers"], json!([auth.issuer]));
    assert_eq!(
        doc.body["scopes_supported"],
        json!([
            "notes:read",
            "notes:write",
            "notes:propose",
            "proposals:review",
            "repo:sync"
        ])
    );
    let (mcp_doc, _) = call(
        &server,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        None,
        None,
    );
    assert_eq!(
        mcp_doc.body["resource"],
        format!("{AUDIENCE}/mcp"),
        "{mcp_doc:?}"
    );

    for (method, path, metadata) in [
        ("GET", "/mcp/notes", METADATA.to_string()),
        ("GET", "/events", METADATA.to_string()),
        ("GET", "/config", METADATA.to_string()),
        ("POST", "/mcp", format!("{METADATA}/mcp")),
    ] {
        let (answer, challenge) = call(&server, method, path, None, Some(json!({})));
        answer.assert_error(401, "unauthorized");
        assert_eq!(
            challenge.as_deref(),
            Some(format!("Bearer resource_metadata=\"{metadata}\"").as_str()),
            "{method} {path}"
        );
    }
    // The page's own files need no token; its API calls do (above).
    let page = server.raw().get(format!("{}/", server.url)).send().unwrap();
    assert_eq!(page.status().as_u16(), 200);
}

#[test]
fn valid_tokens_of_each_algorithm_read_and_write_as_their_caller_over_http_and_mcp() {
    let (rsa, ec, ed) = (
        SigningKey::rsa("rsa"),
        SigningKey::p256("ec"),
        SigningKey::ed25519("ed"),
    );
    let auth = AuthServer::start(&[&rsa, &ec, &ed]);
    let server = mirai(settings(&auth, &[Right::Read]));
    let claims = auth.claims(AUDIENCE, "sub-ann", "notes:read notes:write", json!({}));
    for key in [&rsa, &ec, &ed] {
        let (read, _) = read_todo(&server, &key.sign(&claims));
        assert_eq!(read.status, 200, "{:?}: {read:?}", key.alg);
        assert_eq!(read.body["content"], "# Todo\n\n- milk\n");
    }
    // A token issued for /mcp's own resource is this server's too.
    let mcp_claims = auth.claims(
        &format!("{AUDIENCE}/mcp"),
        "sub-ann",
        "notes:read notes:write",
        json!({}),
    );
    let token = ec.sign(&mcp_claims);

    let wrote = write(&server, &token, "inbox/idea.md");
    assert_eq!(wrote.status, 200, "{wrote:?}");
    let log = git(&server.root, &["log", "-1", "--format=%an <%ae>|%cn|%B"]);
    assert!(log.starts_with("ann <ann@example.org>|mirai|"), "{log}");
    assert!(log.contains("\nMirai-Caller: ann\n"), "{log}");
    // ann's paths hold: outside inbox/ is refused.
    write(&server, &token, "public/open.md").assert_error(403, "policy_denied");

    let answer = mcp_call(
        &server,
        &token,
        "notes_write",
        json!({"path": "inbox/from-mcp.md", "content": "via mcp\n"}),
    );
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let log = git(&server.root, &["log", "-1", "--format=%an|%B"]);
    assert!(
        log.starts_with("ann|mcp.patch_apply: inbox/from-mcp.md"),
        "{log}"
    );
    assert!(log.contains("Mirai-Caller: ann"), "{log}");

    // The static token keeps working beside OAuth.
    let (read, _) = read_todo(&server, STATIC);
    assert_eq!(read.status, 200, "{read:?}");
}

#[test]
fn forged_misdirected_and_stale_tokens_are_401_invalid_token() {
    let key = SigningKey::rsa("k1");
    let stranger = SigningKey::rsa("k1");
    let auth = AuthServer::start(&[&key]);
    let server = mirai(settings(&auth, &[Right::Read]));
    let good = auth.claims(AUDIENCE, "sub-ann", "notes:read", json!({}));
    let (ok, _) = read_todo(&server, &key.sign(&good));
    assert_eq!(ok.status, 200, "{ok:?}");

    let hs256 = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        encode(
            &header,
            &good,
            &EncodingKey::from_secret(&key.public_der).unwrap(),
        )
        .unwrap()
    };
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT","kid":"k1"}"#),
        URL_SAFE_NO_PAD.encode(good.to_string())
    );
    let extra = |patch: Value| {
        let mut claims = good.clone();
        for (k, v) in patch.as_object().unwrap() {
            claims[k] = v.clone();
        }
        key.sign(&claims)
    };
    let refused = [
        ("not issued by", extra(json!({"iss": "http://127.0.0.1:1"}))),
        (
            "not issued for this resource",
            extra(json!({"aud": "http://elsewhere.test"})),
        ),
        ("has expired", extra(json!({"exp": now() - 600}))),
        ("not valid yet", extra(json!({"nbf": now() + 600}))),
        ("no `sub` claim", {
            let mut claims = good.clone();
            claims.as_object_mut().unwrap().remove("sub");
            key.sign(&claims)
        }),
        // Another key under the same kid.
        ("signature does not verify", stranger.sign(&good)),
        // HS256 keyed with the public key's bytes.
        ("only RS256, ES256 and EdDSA", hs256),
        ("alg none", none),
        ("not a JWT", "a.b.c".to_string()),
    ];
    for (why, token) in refused {
        let (answer, challenge) = read_todo(&server, &token);
        answer.assert_error(401, "unauthorized");
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{why}: {message}");
        assert_eq!(
            challenge.as_deref(),
            Some(
                format!("Bearer resource_metadata=\"{METADATA}\", error=\"invalid_token\"")
                    .as_str()
            ),
            "{why}"
        );
    }
}

#[test]
fn scopes_cut_the_callers_rights_and_its_paths_and_read_paths_hold() {
    let key = SigningKey::ed25519("k1");
    let auth = AuthServer::start(&[&key]);
    let server = mirai(settings(&auth, &[Right::Read]));
    let head = server.head();
    // ann may write, but this token only reads.
    let reading = key.sign(&auth.claims(AUDIENCE, "sub-ann", "notes:read", json!({})));
    assert_eq!(read_todo(&server, &reading).0.status, 200);
    let (denied, challenge) = call(
        &server,
        "POST",
        "/mcp/notes/write",
        Some(&reading),
        Some(json!({"path": "inbox/x.md", "content": "written\n"})),
    );
    denied.assert_error(403, "policy_denied");
    // The step-up: the scope that would grant the write, and where to learn more.
    assert_eq!(
        challenge.as_deref(),
        Some(&*format!(
            "Bearer error=\"insufficient_scope\", scope=\"notes:write\", resource_metadata=\"{METADATA}\""
        )),
        "{denied:?}"
    );
    // The same over MCP: 403 and the challenge naming the /mcp metadata.
    let (status, challenge) = mcp_refused(
        &server,
        &reading,
        "notes_write",
        json!({"path": "inbox/x.md", "content": "written\n"}),
    );
    assert_eq!(status, 403);
    assert_eq!(
        challenge.as_deref(),
        Some(&*format!(
            "Bearer error=\"insufficient_scope\", scope=\"notes:write\", resource_metadata=\"{METADATA}/mcp\""
        ))
    );
    // No scope at all: nothing, not even reading.
    let bare = key.sign(&auth.claims(AUDIENCE, "sub-ann", "openid", json!({})));
    read_todo(&server, &bare)
        .0
        .assert_error(403, "policy_denied");
    assert_eq!(server.head(), head);

    // bea is found by her verified email; her read_paths hide secret/.
    let bea = key.sign(&auth.claims(
        AUDIENCE,
        "sub-bea",
        "notes:read notes:write",
        json!({"email": "bea@example.org", "email_verified": true}),
    ));
    let (list, _) = call(&server, "GET", "/mcp/notes", Some(&bea), None);
    assert_eq!(list.body["notes"], json!(["public/open.md"]), "{list:?}");
    let wrote = write(&server, &bea, "public/bea.md");
    assert_eq!(wrote.status, 200, "{wrote:?}");
    let log = git(&server.root, &["log", "-1", "--format=%an <%ae>|%B"]);
    assert!(log.starts_with("bea <bea@example.org>|"), "{log}");
    assert!(log.contains("Mirai-Caller: bea"), "{log}");

    // The same email unverified is not bea: an unlisted subject, read only.
    let unverified = key.sign(&auth.claims(
        AUDIENCE,
        "sub-eve",
        "notes:read notes:write",
        json!({"email": "bea@example.org", "email_verified": false}),
    ));
    let (list, _) = call(&server, "GET", "/mcp/notes", Some(&unverified), None);
    assert_eq!(list.status, 200, "{list:?}");
    assert!(
        list.body["notes"]
            .as_array()
            .unwrap()
            .contains(&json!("secret/hidden.md")),
        "{list:?}"
    );
    // An unlisted subject's default rights hold no write: no scope would
    // grant it, so no step-up is offered.
    let (refused, challenge) = call(
        &server,
        "POST",
        "/mcp/notes/write",
        Some(&unverified),
        Some(json!({"path": "public/eve.md", "content": "written\n"})),
    );
    refused.assert_error(403, "policy_denied");
    assert_eq!(challenge, None);
    assert_eq!(
        mcp_refused(
            &server,
            &unverified,
            "notes_write",
            json!({"path": "public/eve.md", "content": "x\n"})
        )
        .0,
        200
    );
}

#[test]
fn an_unlisted_subject_gets_the_default_rights_and_its_name_on_commits() {
    let key = SigningKey::p256("k1");
    let auth = AuthServer::start(&[&key]);
    let server = mirai(settings(&auth, &[Right::Read, Right::Write]));
    let zed = key.sign(&auth.claims(
        AUDIENCE,
        "sub-zed",
        "notes:read notes:write proposals:review",
        json!({"email": "zed@example.org", "email_verified": true}),
    ));
    let wrote = write(&server, &zed, "public/zed.md");
    assert_eq!(wrote.status, 200, "{wrote:?}");
    let log = git(&server.root, &["log", "-1", "--format=%an <%ae>|%cn|%B"]);
    assert!(
        log.starts_with("zed@example.org <zed@example.org>|mirai|"),
        "{log}"
    );
    assert!(log.contains("\nMirai-Caller: zed@example.org\n"), "{log}");
    // Its scope asks for review; the default rights do not give it, and no
    // scope would: no step-up is offered.
    let (refused, challenge) = call(
        &server,
        "POST",
        "/mcp/proposals/approve",
        Some(&zed),
        Some(json!({"id": "x"})),
    );
    refused.assert_error(403, "policy_denied");
    assert_eq!(challenge, None);
    // The default rights hold write; a token without notes:write is told to ask for it.
    let reading = key.sign(&auth.claims(AUDIENCE, "sub-zed", "notes:read", json!({})));
    let (refused, challenge) = call(
        &server,
        "POST",
        "/mcp/notes/write",
        Some(&reading),
        Some(json!({"path": "public/zed2.md", "content": "x\n"})),
    );
    refused.assert_error(403, "policy_denied");
    assert!(
        challenge
            .as_deref()
            .is_some_and(|c| c.contains("scope=\"notes:write\"")),
        "{challenge:?}"
    );

    // No verified email: named by its subject.
    let anon = key.sign(&auth.claims(AUDIENCE, "sub-anon", "notes:write notes:read", json!({})));
    assert_eq!(write(&server, &anon, "public/anon.md").status, 200);
    let log = git(&server.root, &["log", "-1", "--format=%an <%ae>|%B"]);
    assert!(log.starts_with("sub-anon <sub-anon@127.0.0.1>|"), "{log}");
    assert!(log.contains("Mirai-Caller: sub-anon"), "{log}");

    // Read only by default.
    let reader_auth = AuthServer::start(&[&key]);
    let reader = mirai(settings(&reader_auth, &[Right::Read]));
    let token =
        key.sign(&reader_auth.claims(AUDIENCE, "sub-zed", "notes:read notes:write", json!({})));
    assert_eq!(read_todo(&reader, &token).0.status, 200);
    write(&reader, &token, "public/zed.md").assert_error(403, "policy_denied");

    // Review in the default rights, not in the token: the decision's step-up names proposals:review.
    let review_auth = AuthServer::start(&[&key]);
    let reviewer = mirai(settings(&review_auth, &[Right::Read, Right::Review]));
    let token = key.sign(&review_auth.claims(AUDIENCE, "sub-rev", "notes:read", json!({})));
    let (refused, challenge) = call(
        &reviewer,
        "POST",
        "/mcp/proposals/approve",
        Some(&token),
        Some(json!({"id": "x"})),
    );
    refused.assert_error(403, "policy_denied");
    assert_eq!(
        challenge.as_deref(),
        Some(&*format!(
            "Bearer error=\"insufficient_scope\", scope=\"proposals:review\", resource_metadata=\"{METADATA}\""
        ))
    );
}

#[test]
fn a_new_key_is_fetched_when_a_token_names_it_at_most_once_per_interval() {
    let (old, new, unknown) = (
        SigningKey::ed25519("old"),
        SigningKey::ed25519("new"),
        SigningKey::ed25519("unknown"),
    );
    let auth = AuthServer::start(&[&old]);
    let mut oauth = settings(&auth, &[Right::Read]);
    oauth.refresh_interval = Duration::from_secs(2);
    let server = mirai(oauth);
    let claims = auth.claims(AUDIENCE, "sub-ann", "notes:read", json!({}));
    assert_eq!(
        auth.jwks_fetches(),
        0,
        "keys are fetched when a token needs them"
    );
    assert_eq!(read_todo(&server, &old.sign(&claims)).0.status, 200);
    assert_eq!(read_todo(&server, &old.sign(&claims)).0.status, 200);
    assert_eq!(auth.jwks_fetches(), 1, "the keys are kept");

    auth.publish(&new);
    let started = Instant::now();
    let (early, challenge) = read_todo(&server, &new.sign(&claims));
    early.assert_error(401, "unauthorized");
    assert!(challenge.unwrap().contains("invalid_token"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once, not after a wait"
    );
    assert_eq!(
        auth.jwks_fetches(),
        1,
        "no second fetch within the interval"
    );

    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(read_todo(&server, &new.sign(&claims)).0.status, 200);
    assert_eq!(auth.jwks_fetches(), 2, "the rotation was picked up");
    read_todo(&server, &unknown.sign(&claims))
        .0
        .assert_error(401, "unauthorized");
    assert_eq!(auth.jwks_fetches(), 2);
    assert_eq!(read_todo(&server, &old.sign(&claims)).0.status, 200);
}

#[test]
fn a_jwks_that_hangs_or_never_ends_does_not_hold_requests() {
    let key = SigningKey::p256("k1");
    for jwks in [Jwks::Hangs, Jwks::Endless] {
        let auth = AuthServer::start(&[&key]);
        auth.set_jwks(jwks);
        let server = mirai(settings(&auth, &[Right::Read]));
        let token = key.sign(&auth.claims(AUDIENCE, "sub-ann", "notes:read", json!({})));
        let started = Instant::now();
        let (answer, challenge) = read_todo(&server, &token);
        let took = started.elapsed();
        answer.assert_error(401, "unauthorized");
        assert!(challenge.unwrap().contains("invalid_token"));
        assert!(
            answer.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("could not be fetched"),
            "{answer:?}"
        );
        // The fetch timeout is 800 ms.
        assert!(took < Duration::from_secs(3), "{jwks:?} took {took:?}");
        assert_eq!(auth.jwks_fetches(), 1);
        // Other callers were never held.
        assert_eq!(read_todo(&server, STATIC).0.status, 200);
    }
}
