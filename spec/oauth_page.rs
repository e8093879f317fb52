//! The page signs in through the identity provider (issue 47): the
//! authorization code flow with PKCE as the public client
//! `MIRAI_OAUTH_PAGE_CLIENT_ID`, against the spec's own authorization server
//! (spec/common/auth_server.rs: `/authorize` approves at once, `/token`
//! checks the verifier, the client and the redirect URI), in a real chromium.
//! The person lands back signed in, reads and writes as themself, and is
//! asked to sign in again when the token is refused.

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mirai::callers::{Right, Rights};
use mirai::config::OAuthSettings;
use serde_json::json;

use crate::common::auth_server::{now, AuthServer, SigningKey};
use crate::common::browser::Browser;
use crate::common::{git, TestServer};

const CLIENT: &str = "mirai-page";
const EMAIL: &str = "ann@example.org";

/// mirai on `listener` taking `auth`'s tokens, its page signing in as CLIENT;
/// a signed-in subject with no entry may read and write.
fn mirai(auth: &AuthServer, listener: TcpListener, url: &str) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("notes");
    let mut can = Rights::none();
    can.add(Right::Read);
    can.add(Right::Write);
    let oauth = OAuthSettings {
        issuer: auth.issuer.clone(),
        audience: url.to_string(),
        public_url: url.to_string(),
        jwks_url: None,
        default_can: can,
        fetch_timeout: Duration::from_secs(5),
        refresh_interval: Duration::from_secs(60),
        page_client_id: Some(CLIENT.to_string()),
    };
    let server = TestServer::start_on(listener, dir, root, |c| c.oauth = Some(oauth));
    server.write("todo.md", "# Todo\n\n- milk\n");
    server.commit_all();
    server.write("todo.md", "# Todo\n\n- milk\n- eggs\n");
    git(&server.root, &["commit", "-qam", "Add eggs"]);
    server
}

#[test]
fn the_page_client_names_the_providers_endpoints_and_the_csp_adds_only_its_token_origin() {
    let key = SigningKey::ed25519("k1");
    let auth = AuthServer::start(&[&key]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = mirai(&auth, listener, &url);
    let client = server
        .raw()
        .get(format!("{url}/oauth/page-client"))
        .send()
        .unwrap();
    assert_eq!(client.status(), 200);
    let client: serde_json::Value = client.json().unwrap();
    assert_eq!(
        client,
        json!({
            "issuer": auth.issuer,
            "authorization_endpoint": format!("{}/authorize", auth.issuer),
            "token_endpoint": format!("{}/token", auth.issuer),
            "client_id": CLIENT,
            "scopes": ["notes:read", "notes:write", "notes:propose", "proposals:review", "repo:sync"],
            "redirect_uri": format!("{url}/ui/signed-in"),
            "resource": url,
            "code_challenge_method": "S256",
        })
    );
    let page = server.raw().get(format!("{url}/ui/notes/")).send().unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains(&format!("connect-src 'self' {};", auth.issuer)),
        "{csp}"
    );
    for kept in [
        "default-src 'none'",
        "script-src 'self';",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(kept), "{kept} in {csp}");
    }
    assert_eq!(csp.matches(&auth.issuer).count(), 1, "{csp}");

    // Without a page client: no sign-in offered, the CSP as strict as ever.
    let plain = TestServer::start_with(|c| {
        c.oauth = Some(OAuthSettings {
            issuer: auth.issuer.clone(),
            audience: "http://mirai.test".into(),
            public_url: "http://mirai.test".into(),
            jwks_url: None,
            default_can: Rights::none(),
            fetch_timeout: Duration::from_secs(5),
            refresh_interval: Duration::from_secs(60),
            page_client_id: None,
        })
    });
    plain
        .get("/oauth/page-client")
        .assert_error(404, "not_found");
    let page = plain.raw().get(format!("{}/", plain.url)).send().unwrap();
    assert!(page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("connect-src 'self';"));
}

#[test]
fn the_page_signs_in_through_the_provider_and_writes_as_the_person() {
    let browser = Browser::start()
        .unwrap_or_else(|why| panic!("this spec drives chromium: {why} (.ci/run installs both)"));
    let shots = std::env::var_os("MIRAI_PAGE_SHOTS").map(PathBuf::from);
    let key = SigningKey::ed25519("k1");
    let auth = AuthServer::start(&[&key]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    auth.register(CLIENT, &format!("{url}/ui/signed-in"));
    auth.sign_in_as("sub-ann", Some(EMAIL), &url);
    let server = mirai(&auth, listener, &url);

    // No token: the dialog offers the sign-in.
    browser.goto(&format!("{url}/ui/notes/"));
    browser.wait("#token-dialog[open] #signin-offer:not([hidden])");
    browser.wait_text("#token-title", "Sign in");
    let host = auth.issuer.trim_start_matches("http://");
    assert!(
        browser.text("#token-why").contains(host),
        "{}",
        browser.text("#token-why")
    );
    browser.shot(&shots, "signin-desktop", 1280, 900);
    browser.shot(&shots, "signin-360", 360, 780);

    // To the provider and back: signed in, at the view it started from.
    browser.click("#signin-button");
    browser.wait_text("main", "todo.md");
    assert_eq!(browser.url(), format!("{url}/ui/notes/"));
    assert_eq!(
        browser.js("return document.getElementById('token-dialog').open"),
        json!(false)
    );
    // The provider was asked as a public client with PKCE S256 for mirai's resource.
    let asked = auth.requests_to("/authorize");
    assert_eq!(asked.len(), 1);
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(asked[0].target.split_once('?').unwrap().1.as_bytes())
            .into_owned()
            .collect();
    let sent = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(sent("client_id"), CLIENT);
    assert_eq!(sent("code_challenge_method"), "S256");
    assert_eq!(sent("resource"), url);
    assert_eq!(sent("redirect_uri"), format!("{url}/ui/signed-in"));
    assert!(sent("scope").contains("notes:write"), "{query:?}");
    assert_eq!(sent("code_challenge").len(), 43, "{query:?}");
    assert_eq!(auth.requests_to("/token").len(), 1);
    // The code and verifier are gone from the tab; the token is kept as a typed one is.
    assert_eq!(
        browser.js("return [sessionStorage.getItem('mirai.signin'), sessionStorage.getItem('mirai.signedin'), (sessionStorage.getItem('mirai.token') || '').split('.').length]"),
        json!([null, "1", 3])
    );
    browser.shot(&shots, "signed-in-desktop", 1280, 900);
    browser.shot(&shots, "signed-in-360", 360, 780);

    // A write through the page: its commit names the person who signed in.
    browser.goto(&format!("{url}/ui/history/todo.md"));
    browser.wait_text("main", "Add eggs");
    let head = server.head();
    browser.click(".commit button.danger");
    browser.accept_alert();
    browser.wait_text(".commit .notice", "Reverted in commit");
    assert_ne!(server.head(), head);
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        "# Todo\n\n- milk\n"
    );
    let log = git(&server.root, &["log", "-1", "--format=%an <%ae>|%B"]);
    assert!(log.starts_with(&format!("{EMAIL} <{EMAIL}>|")), "{log}");
    assert!(log.contains(&format!("Mirai-Caller: {EMAIL}")), "{log}");

    // The token refused (here: one that has expired): sign in again.
    let stale = key.sign(&json!({"iss": auth.issuer, "aud": url, "sub": "sub-ann",
        "scope": "notes:read", "iat": now() - 7200, "exp": now() - 3600}));
    browser.js(&format!(
        "sessionStorage.setItem('mirai.token', {0}); share('mirai.token', {0}); changed(null); return true",
        json!(stale)
    ));
    browser.wait("#token-dialog[open] #signin-offer:not([hidden])");
    browser.wait_text("#token-title", "Sign-in expired — sign in again");
    browser.shot(&shots, "signin-expired-desktop", 1280, 900);
    browser.shot(&shots, "signin-expired-360", 360, 780);
    browser.click("#signin-button");
    let started = Instant::now();
    while auth.requests_to("/token").len() < 2 || !browser.url().ends_with("/ui/history/todo.md") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not back at the history view: {}",
            browser.url()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    browser.wait_text("main", "Add eggs");
    assert_eq!(
        browser.js("return [document.getElementById('token-dialog').open, sessionStorage.getItem('mirai.signedin')]"),
        json!([false, "1"])
    );
}
