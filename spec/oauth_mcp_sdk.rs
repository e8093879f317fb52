//! The issue's last test (issue 47): the official MCP Python SDK's client
//! completes its OAuth flow against mirai and the spec's authorization server
//! (spec/common/auth_server.rs), then calls a tool. The client is the
//! committed script spec/python/mcp_oauth_client.py run by the interpreter
//! `MIRAI_MCP_PYTHON` names, else a venv at `$HOME/.cache/mirai-mcp-venv`
//! with spec/python/requirements.txt, which the spec makes when missing (as
//! .ci/run does). Without python3 and its venv module the spec fails, saying
//! how to install them.

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

/// The interpreter with the SDK: `MIRAI_MCP_PYTHON`, else the venv at
/// `$HOME/.cache/mirai-mcp-venv`, made here (python3's venv, the pinned
/// requirements from PyPI) when there is none, so `cargo test` alone runs it.
fn python() -> PathBuf {
    if let Some(named) = std::env::var_os("MIRAI_MCP_PYTHON").map(PathBuf::from) {
        assert!(
            named.is_file(),
            "MIRAI_MCP_PYTHON names {named:?}, which is not a file: name a Python with the MCP SDK \
             (spec/python/requirements.txt), or unset it to have this spec make one"
        );
        return named;
    }
    let venv =
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/mirai-mcp-venv");
    let python = venv.join("bin/python");
    let requirements = concat!(env!("CARGO_MANIFEST_DIR"), "/spec/python/requirements.txt");
    let has_sdk = |python: &PathBuf| {
        Command::new(python)
            .args(["-c", "import mcp"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has_sdk(&python) {
        let run = |program: &str, args: &[&str]| {
            let out = Command::new(program).args(args).output();
            assert!(
                out.as_ref().is_ok_and(|o| o.status.success()),
                "making the MCP SDK's venv at {venv:?} failed at `{program} {}`: {out:?}; \
                 this spec runs the official MCP Python SDK: install python3 and its venv module \
                 (Debian: python3-venv), or set MIRAI_MCP_PYTHON to a Python with \
                 spec/python/requirements.txt installed",
                args.join(" ")
            );
        };
        let venv_str = venv.to_str().expect("a UTF-8 HOME");
        run("python3", &["-m", "venv", venv_str]);
        let pip = venv.join("bin/pip");
        run(
            pip.to_str().unwrap(),
            &[
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
                requirements,
            ],
        );
    }
    assert!(
        has_sdk(&python),
        "the venv at {venv:?} has no MCP SDK after installing it"
    );
    python
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
