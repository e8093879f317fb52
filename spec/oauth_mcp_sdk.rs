//! The issue's last test (issue 47): the official MCP Python SDK's client
//! completes its OAuth flow against mirai and the spec's authorization server
//! (spec/common/auth_server.rs), then calls a tool. The client is the
//! committed script spec/python/mcp_oauth_client.py run by the interpreter
//! `MIRAI_MCP_PYTHON` names (.ci/run makes a venv with
//! spec/python/requirements.txt; unset, `$HOME/.cache/mirai-mcp-venv`). A
//! missing interpreter or SDK fails the spec, saying how to install it.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use mirai::callers::Rights;
use mirai::config::OAuthSettings;
use serde_json::Value;

use crate::common::auth_server::{AuthServer, SigningKey};
use crate::common::{git, TestServer};

/// The interpreter with the SDK: `MIRAI_MCP_PYTHON`, else the venv .ci/run makes.
fn python() -> PathBuf {
    let named = std::env::var_os("MIRAI_MCP_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/mirai-mcp-venv/bin/python"))
        })
        .unwrap_or_default();
    assert!(
        named.is_file(),
        "no Python with the MCP SDK at {named:?}: this spec runs the official MCP Python SDK; \
         make one with `python3 -m venv ~/.cache/mirai-mcp-venv && ~/.cache/mirai-mcp-venv/bin/pip \
         install -r spec/python/requirements.txt` (as .ci/run does) or set MIRAI_MCP_PYTHON"
    );
    named
}

#[test]
fn the_mcp_python_sdk_signs_in_through_the_provider_and_calls_a_tool() {
    let python = python();
    let key = SigningKey::rsa("k1");
    let auth = AuthServer::start(&[&key]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    auth.sign_in_as("sub-carol", None, &url);

    let dir = tempfile::tempdir().unwrap();
    let callers = dir.path().join("callers.toml");
    std::fs::write(
        &callers,
        "[[caller]]\nname = \"carol\"\nemail = \"carol@example.org\"\n\
         oauth_subject = \"sub-carol\"\ncan = [\"read\", \"write\"]\n",
    )
    .unwrap();
    std::fs::set_permissions(&callers, std::fs::Permissions::from_mode(0o600)).unwrap();
    let root = dir.path().join("notes");
    let oauth = OAuthSettings {
        issuer: auth.issuer.clone(),
        audience: url.clone(),
        public_url: url.clone(),
        jwks_url: None,
        default_can: Rights::none(),
        fetch_timeout: Duration::from_secs(5),
        refresh_interval: Duration::from_secs(60),
        page_client_id: None,
    };
    let server = TestServer::start_on(listener, dir, root, |c| {
        c.callers_file = Some(callers);
        c.oauth = Some(oauth);
    });
    let head = server.head();

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("spec/python/mcp_oauth_client.py");
    let output = Command::new(&python)
        .arg(&script)
        .arg(format!("{url}/mcp"))
        .arg("notes_write")
        .arg(r##"{"path": "inbox/from-python.md", "content": "# From Python\n\nsigned in\n"}"##)
        .output()
        .unwrap_or_else(|e| panic!("{python:?} did not run: {e}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the SDK's client failed ({}): {stderr}",
        output.status
    );
    let result: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not one JSON line ({e}): {:?}", output.stdout));
    assert_eq!(result["is_error"], false, "{result}");
    // mirai's newest revision: stateless, each request carrying its token.
    assert_eq!(result["protocol_version"], "2026-07-28", "{result}");
    assert!(
        result["text"].as_str().unwrap().contains("commit"),
        "{result}"
    );

    // It registered itself, signed in with PKCE and traded its code once.
    assert_eq!(auth.requests_to("/register").len(), 1);
    let authorize = auth.requests_to("/authorize");
    assert_eq!(authorize.len(), 1);
    for sent in [
        "code_challenge_method=S256".to_string(),
        // RFC 8707: the resource its protected resource metadata named.
        format!(
            "resource={}",
            url::form_urlencoded::byte_serialize(format!("{url}/mcp").as_bytes())
                .collect::<String>()
        ),
    ] {
        assert!(
            authorize[0].target.contains(&sent),
            "{sent} in {}",
            authorize[0].target
        );
    }
    assert_eq!(auth.requests_to("/token").len(), 1);

    // The write is carol's: the caller the token's subject maps to.
    assert_ne!(server.head(), head);
    assert_eq!(
        std::fs::read_to_string(server.root.join("inbox/from-python.md")).unwrap(),
        "# From Python\n\nsigned in\n"
    );
    let log = git(&server.root, &["log", "-1", "--format=%an <%ae>|%B"]);
    assert!(log.starts_with("carol <carol@example.org>|"), "{log}");
    assert!(log.contains("Mirai-Caller: carol"), "{log}");
}
