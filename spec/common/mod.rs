//! Test harness: a real mirai server on a loopback port, over its own temp
//! notes repository, spoken to over real HTTP.

pub mod auth_server;
pub mod browser;
pub mod fake_embed;
pub mod fake_llm;
pub mod git_http;
pub mod hostile;
pub mod loopback;
mod schema;
#[path = "../../benches/support/vault.rs"]
pub mod vault;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;

use mirai::app;
use mirai::config::Config;
use mirai::http;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::Value;
use tempfile::TempDir;

/// A running server and the notes repository it serves.
pub struct TestServer {
    pub url: String,
    pub dir: TempDir,
    pub root: PathBuf,
    handle: actix_web::dev::ServerHandle,
    client: Client,
    token: Option<String>,
}

/// An answer: status and parsed JSON body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    /// The error code of an error answer, checking the documented shape on the way.
    pub fn error_code(&self) -> &str {
        let error = self
            .body
            .get("error")
            .unwrap_or_else(|| panic!("not an error answer: {self:?}"));
        let object = error.as_object().expect("error is an object");
        assert_eq!(
            object.len(),
            2,
            "error has exactly code and message: {self:?}"
        );
        let message = object["message"].as_str().expect("message is a string");
        assert!(!message.trim().is_empty(), "message is not empty: {self:?}");
        object["code"].as_str().expect("code is a string")
    }

    /// Asserts status and error code together.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.error_code(), code, "{self:?}");
    }
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::start_with(|_| {})
    }

    /// Starts a server whose configuration `adjust` may change first.
    pub fn start_with(adjust: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("notes");
        TestServer::start_in(dir, root, adjust)
    }

    /// Serves `root` (inside `dir`, which the server keeps alive), as it is
    /// or created when missing.
    pub fn start_in(dir: TempDir, root: PathBuf, adjust: impl FnOnce(&mut Config)) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        TestServer::start_on(listener, dir, root, adjust)
    }

    /// [`TestServer::start_in`] on a listener the spec bound, so it knows
    /// the server's URL before the configuration (`MIRAI_PUBLIC_URL`).
    pub fn start_on(
        listener: TcpListener,
        dir: TempDir,
        root: PathBuf,
        adjust: impl FnOnce(&mut Config),
    ) -> TestServer {
        let mut config = Config::new(&root);
        config.cache_dir = Some(guest_cache());
        adjust(&mut config);
        let token = config.api_token.clone();
        // Wired as `mirai serve` wires it: bootstrap, recovery, index warm-up and watch.
        let app = app::build(config).expect("the app builds");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let server = http::serve(app, listener).expect("serve");
                tx.send(server.handle()).expect("send handle");
                server.await.expect("server runs");
            })
        });
        let handle = rx.recv().expect("server started");
        let client = Client::builder().build().expect("client");
        TestServer {
            url,
            dir,
            root,
            handle,
            client,
            token,
        }
    }

    /// Writes a file under the notes root, creating folders.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    fn authorized(&self, builder: RequestBuilder) -> RequestBuilder {
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    pub fn get(&self, path_and_query: &str) -> Answer {
        let request = self.client.get(format!("{}{}", self.url, path_and_query));
        send(self.authorized(request))
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Answer {
        let request = self.client.post(format!("{}{}", self.url, path)).json(body);
        send(self.authorized(request))
    }

    /// MCP's `tools/list` over Streamable HTTP (a sessionless modern request).
    pub fn mcp_tools(&self) -> Vec<Value> {
        let answer: Value = self
            .raw()
            .post(format!("{}/mcp", self.url))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .json(
                &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                "params": {"_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .send()
            .expect("tools/list answers")
            .json()
            .expect("a JSON-RPC answer");
        answer["result"]["tools"].as_array().expect("tools").clone()
    }

    pub fn post_raw(&self, path: &str, body: impl Into<Vec<u8>>) -> Answer {
        let request = self
            .client
            .post(format!("{}{}", self.url, path))
            .header("content-type", "application/json")
            .body(body.into());
        send(self.authorized(request))
    }

    /// A server whose repository has `rel` committed with `content`.
    pub fn with_note(rel: &str, content: &str) -> TestServer {
        let server = TestServer::start();
        server.write(rel, content);
        server.commit_all();
        server
    }

    /// The commit HEAD points at.
    pub fn head(&self) -> String {
        git(&self.root, &["rev-parse", "HEAD"]).trim().to_string()
    }

    /// How many commits HEAD has.
    pub fn commit_count(&self) -> usize {
        git(&self.root, &["rev-list", "--count", "HEAD"])
            .trim()
            .parse()
            .expect("a count")
    }

    /// Commits everything in the notes root, as a user seeding the repository would.
    pub fn commit_all(&self) {
        git(&self.root, &["add", "-A"]);
        git(
            &self.root,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "seed",
            ],
        );
    }

    /// A request without the harness's token, for auth tests.
    pub fn raw(&self) -> &Client {
        &self.client
    }

    /// `GET /mcp/notes/read?path=...` with the path percent-encoded.
    pub fn read(&self, path: &str) -> Answer {
        self.get(&format!("/mcp/notes/read?path={}", encode(path)))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // Sends the stop command now; the server's thread ends on its own.
        drop(self.handle.stop(false));
    }
}

/// Sends `request` and parses the answer; a 200 from a row is checked against
/// the row's answer schema on the way, as is a 202 proposal ([`schema::check_answer`]).
pub fn send(request: RequestBuilder) -> Answer {
    let (client, request) = request.build_split();
    let request = request.expect("request builds");
    let (method, path) = (
        request.method().to_string(),
        request.url().path().to_string(),
    );
    let response = client.execute(request).expect("request reaches the server");
    let status = response.status().as_u16();
    let text = response.text().expect("body");
    let body =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("body is JSON ({status}): {text:?}"));
    schema::check_answer(&method, &path, status, &body);
    Answer { status, body }
}

/// Percent-encodes every byte outside the unreserved set.
/// The note path of each hit of an `index.query` answer, in rank order.
pub fn hit_paths(body: &Value) -> Vec<String> {
    body["chunks"]
        .as_array()
        .expect("an index.query answer has chunks")
        .iter()
        .map(|c| c["metadata"]["path"].as_str().unwrap().to_string())
        .collect()
}

pub fn encode(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `git` in `repo` and returns its stdout.
/// A token's SHA-256 in hex, as a callers file stores it.
pub fn token_sha256(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Everything a failed write must leave alone: HEAD, `.git/index`'s bytes and
/// every file of the work tree (`.git/` and `.mirai/` aside), with its bytes.
pub fn repo_state(root: &Path) -> (String, Vec<u8>, BTreeMap<String, Vec<u8>>) {
    let head = git(root, &["rev-parse", "HEAD"]);
    let index = std::fs::read(root.join(".git/index")).unwrap();
    let files = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".git" && e.file_name() != ".mirai")
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap().display().to_string();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect();
    (head, index, files)
}

/// One compiled guest module for every server and CLI run of every spec binary.
pub fn guest_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("guest-cache")
}

/// The built `mirai` binary, with none of the settings a developer's shell may carry.
/// The tests may run as root (CI does), which mirai refuses without MIRAI_ALLOW_ROOT.
pub fn mirai_cli() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mirai"));
    clean_env(&mut command);
    command
}

/// `mirai serve` as a child process on a free loopback port, serving
/// `root`, with [`mirai_cli`]'s settings; under `umask` when one is given
/// (started by `sh`, which sets it and execs mirai).
pub fn serve_child(root: &Path, umask: Option<&str>) -> (std::process::Child, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut command = match umask {
        None => Command::new(env!("CARGO_BIN_EXE_mirai")),
        Some(umask) => {
            let mut sh = Command::new("sh");
            sh.args(["-c", &format!("umask {umask} && exec \"$0\" \"$@\"")])
                .arg(env!("CARGO_BIN_EXE_mirai"));
            sh
        }
    };
    clean_env(&mut command);
    let child = command
        .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--notes-root")
        .arg(root)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while reqwest::blocking::get(format!("http://127.0.0.1:{port}/health")).is_err() {
        assert!(std::time::Instant::now() < deadline, "mirai never served");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (child, port)
}

/// None of the settings a developer's shell may carry; the shared guest
/// cache; root allowed.
fn clean_env(command: &mut Command) {
    for var in [
        "MIRAI_POLICY_MODE",
        "MCP_POLICY_MODE",
        "MIRAI_API_TOKEN",
        "MIRAI_REVIEWER_TOKEN",
        "MIRAI_CALLERS_FILE",
        "MIRAI_PROPOSALS_MAX_PENDING",
        "NOTES_ROOT",
        "PORT",
        "HOST",
    ] {
        command.env_remove(var);
    }
    command.env("MIRAI_CACHE_DIR", guest_cache());
    command.env("MIRAI_ALLOW_ROOT", "1");
}
