//! Black-box tests of the foundation: health and config, listing and reading
//! notes, every path attack, the error contract, auth and start-up.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::{encode, git, TestServer};
use mirai::config::PolicyMode;
use serde_json::json;

#[test]
fn health_answers_ok() {
    let server = TestServer::start();
    let answer = server.get("/health");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, json!({"ok": true}));
}

#[test]
fn config_describes_the_deployment_without_secrets() {
    let server = TestServer::start_with(|c| {
        c.policy = PolicyMode::ReadOnly;
        c.api_token = Some("s3cret-token-value".into());
    });
    let answer = server.get("/config");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["policy_mode"], "read_only");
    assert_eq!(answer.body["llm_configured"], false);
    assert_eq!(answer.body["notes_root"], server.root.display().to_string());
    assert!(answer.body["version"].is_string());
    assert!(!answer.body.to_string().contains("s3cret-token-value"));
}

#[test]
fn fresh_root_is_a_repository_with_a_committed_welcome_note() {
    let server = TestServer::start();
    assert_eq!(
        server.get("/mcp/notes").body,
        json!({"notes": ["welcome.md"]})
    );
    let log = git(&server.root, &["log", "--format=%s", "--name-only"]);
    assert!(log.contains("welcome.md"), "{log}");
    assert_eq!(git(&server.root, &["status", "--porcelain"]), "");
    let exclude = std::fs::read_to_string(server.root.join(".git/info/exclude")).unwrap();
    assert!(exclude.lines().any(|l| l == ".mirai/"), "{exclude}");
}

#[test]
fn listing_is_sorted_by_bytes_and_skips_hidden_and_non_notes() {
    let server = TestServer::start();
    for rel in [
        "b.md",
        "B.md",
        "a/z.md",
        "a/b/c.MD",
        "a-b.md",
        "notes.txt",
        "x.markdown",
        ".draft.md",
    ] {
        server.write(rel, "x\n");
    }
    server.write(".mirai/inside.md", "x\n");
    server.write(".obsidian/workspace.md", "x\n");
    server.write("sub/.hidden/deep.md", "x\n");
    std::fs::create_dir_all(server.root.join("folder.md")).unwrap();
    let answer = server.get("/mcp/notes");
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.body["notes"],
        json!(["B.md", "a-b.md", "a/b/c.MD", "a/z.md", "b.md", "welcome.md"])
    );
}

#[test]
fn reading_echoes_the_normalized_path() {
    let server = TestServer::start();
    server.write("dir/note.md", "hello\n");
    for raw in [
        "dir/note.md",
        "  dir/note.md  ",
        "./dir/note.md",
        "dir//note.md",
        "dir/x/../note.md",
    ] {
        let answer = server.read(raw);
        assert_eq!(answer.status, 200, "{raw:?}: {answer:?}");
        assert_eq!(
            answer.body,
            json!({"path": "dir/note.md", "content": "hello\n", "line_count": 1, "tokens": 2,
                   "front_matter": null}),
            "{raw:?}"
        );
    }
}

#[test]
fn reading_keeps_content_exact() {
    let server = TestServer::start();
    let content = "# Tïtle 🌸\r\n\r\n日本語のノート\r\nno newline at end";
    server.write("crlf.md", content);
    assert_eq!(server.read("crlf.md").body["content"], content);
}

#[test]
fn path_attacks_are_invalid_path() {
    let server = TestServer::start();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "secret\n").unwrap();
    symlink(
        outside.path().join("secret.md"),
        server.root.join("leak.md"),
    )
    .unwrap();
    symlink(outside.path(), server.root.join("outdir")).unwrap();
    symlink(server.root.join(".git"), server.root.join("gitdir")).unwrap();
    symlink(server.root.join(".git/HEAD"), server.root.join("head.md")).unwrap();
    server.write(".git/x.md", "x\n");
    server.write(".mirai/x.md", "x\n");
    let attacks = [
        "/etc/passwd.md",
        "//etc/passwd.md",
        "../secret.md",
        "a/../../secret.md",
        "..",
        ".",
        "welcome.md\0.md",
        "..\\secret.md",
        "dir\\note.md",
        ".git/x.md",
        ".git/config",
        ".mirai/x.md",
        ".mirai/index.json",
        "sub/.hidden.md",
        "leak.md",
        "outdir/secret.md",
        "outdir/missing.md",
        "gitdir/x.md",
        "head.md",
        "",
        "   ",
    ];
    for attack in attacks {
        let answer = server.read(attack);
        answer.assert_error(400, "invalid_path");
        assert!(
            !answer.body.to_string().contains("secret\\n"),
            "{attack:?} leaked"
        );
    }
}

#[test]
fn missing_path_parameter_is_invalid_path() {
    let server = TestServer::start();
    server
        .get("/mcp/notes/read")
        .assert_error(400, "invalid_path");
    server
        .get("/mcp/notes/read?other=x")
        .assert_error(400, "invalid_path");
    server
        .get("/mcp/notes/read?path=")
        .assert_error(400, "invalid_path");
}

#[test]
fn non_markdown_is_invalid_extension_and_missing_is_not_found() {
    let server = TestServer::start();
    server.write("notes.txt", "x\n");
    std::fs::create_dir_all(server.root.join("folder.md")).unwrap();
    server
        .read("notes.txt")
        .assert_error(400, "invalid_extension");
    server
        .read("image.png")
        .assert_error(400, "invalid_extension");
    server.read("missing.md").assert_error(404, "not_found");
    server
        .read("deep/missing.md")
        .assert_error(404, "not_found");
    server.read("folder.md").assert_error(404, "not_found");
    // Multi-byte endings are refused, never a crash.
    server.read("¾ìÔËÖÿ").assert_error(400, "invalid_extension");
    server.read("ノート").assert_error(400, "invalid_extension");
    assert_eq!(server.read("WELCOME.md").status, 404);
}

#[test]
fn listing_and_reading_agree() {
    let server = TestServer::start();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("o.md"), "o\n").unwrap();
    server.write("plain.md", "p\n");
    server.write("nested/deeper/n.md", "n\n");
    server.write("back\\slash.md", "b\n");
    server.write(" spaced.md", "s\n");
    server.write("trailing.md ", "t\n");
    server.write(".hidden/h.md", "h\n");
    server.write("nested/.h.md", "h\n");
    symlink(server.root.join("plain.md"), server.root.join("alias.md")).unwrap();
    symlink(server.root.join("nested"), server.root.join("linked")).unwrap();
    symlink(outside.path(), server.root.join("away")).unwrap();
    symlink(outside.path().join("o.md"), server.root.join("away.md")).unwrap();
    symlink(server.root.join("loop"), server.root.join("loop")).unwrap();

    let listed: Vec<String> =
        serde_json::from_value(server.get("/mcp/notes").body["notes"].clone()).unwrap();
    // Each real folder is listed once, under its real path: `linked` is a
    // symlink to `nested`, so its notes are not listed twice
    // (ARCHITECTURE.md, "The root is a wall, not a check").
    assert_eq!(
        listed,
        ["alias.md", "nested/deeper/n.md", "plain.md", "welcome.md"]
    );
    assert_eq!(server.read("linked/deeper/n.md").body["content"], "n\n");
    for rel in &listed {
        assert_eq!(
            server.read(rel).status,
            200,
            "{rel} is listed but cannot be read"
        );
    }
    // Every markdown file reachable on disk, hidden or not, that listing left out cannot be read.
    let candidates = [
        "back\\slash.md",
        " spaced.md",
        "trailing.md ",
        ".hidden/h.md",
        "nested/.h.md",
        "away/o.md",
        "away.md",
        "loop",
    ];
    for rel in candidates {
        assert_ne!(
            server.read(rel).status,
            200,
            "{rel} is readable but not listed"
        );
    }
}

#[test]
fn read_batch_answers_in_request_order() {
    let server = TestServer::start();
    server.write("a.md", "A\n");
    server.write("b/c.md", "C\n");
    let answer = server.post_json(
        "/mcp/notes/read_batch",
        &json!({"paths": ["b/c.md", " a.md ", "b/../a.md"]}),
    );
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.body,
        json!({"notes": [
            {"path": "b/c.md", "content": "C\n"},
            {"path": "a.md", "content": "A\n"},
            {"path": "a.md", "content": "A\n"},
        ]})
    );
}

#[test]
fn read_batch_fails_on_the_first_bad_path() {
    let server = TestServer::start();
    server.write("a.md", "A\n");
    let answer = server.post_json(
        "/mcp/notes/read_batch",
        &json!({"paths": ["a.md", "missing.md", "../x.md"]}),
    );
    answer.assert_error(404, "not_found");
    let answer = server.post_json(
        "/mcp/notes/read_batch",
        &json!({"paths": ["a.md", "x.txt", "missing.md"]}),
    );
    answer.assert_error(400, "invalid_extension");
}

#[test]
fn read_batch_bad_bodies_are_invalid_path() {
    let server = TestServer::start();
    let twenty_one: Vec<String> = (0..21).map(|i| format!("n{i}.md")).collect();
    let bodies = [
        json!({}),
        json!({"paths": null}),
        json!({"paths": "a.md"}),
        json!({"paths": []}),
        json!({"paths": twenty_one}),
        json!({"paths": [1]}),
        json!({"paths": ["welcome.md", ""]}),
        json!({"paths": ["welcome.md", "  "]}),
        json!(["welcome.md"]),
        json!(null),
    ];
    for body in bodies {
        server
            .post_json("/mcp/notes/read_batch", &body)
            .assert_error(400, "invalid_path");
    }
    for raw in ["", "not json", "{\"paths\": [", "\u{0}"] {
        server
            .post_raw("/mcp/notes/read_batch", raw)
            .assert_error(400, "invalid_path");
    }
    let twenty: Vec<&str> = vec!["welcome.md"; 20];
    assert_eq!(
        server
            .post_json("/mcp/notes/read_batch", &json!({"paths": twenty}))
            .status,
        200
    );
}

#[test]
fn unknown_routes_and_wrong_methods_keep_the_error_shape() {
    let server = TestServer::start();
    server.get("/nope").assert_error(404, "not_found");
    server.get("/mcp/notes/").assert_error(404, "not_found");
    server
        .post_raw("/mcp/unknown", "{}")
        .assert_error(404, "not_found");
    server
        .post_raw("/mcp/notes", "{}")
        .assert_error(405, "method_not_allowed");
    server
        .post_raw("/health", "{}")
        .assert_error(405, "method_not_allowed");
    server
        .get("/mcp/notes/read_batch")
        .assert_error(405, "method_not_allowed");
    let deleted = common::send(
        server
            .raw()
            .delete(format!("{}/mcp/notes/read", server.url)),
    );
    deleted.assert_error(405, "method_not_allowed");
}

#[test]
fn oversized_bodies_are_payload_too_large() {
    let server = TestServer::start_with(|c| c.max_body_bytes = 64);
    let small = json!({"paths": ["welcome.md"]});
    assert_eq!(
        server.post_json("/mcp/notes/read_batch", &small).status,
        200
    );
    let big = json!({"paths": ["welcome.md"], "padding": "x".repeat(100)});
    server
        .post_json("/mcp/notes/read_batch", &big)
        .assert_error(413, "payload_too_large");
}

#[test]
fn default_body_limit_is_one_mebibyte() {
    let server = TestServer::start();
    let padding = "x".repeat(1024 * 1024);
    let big = json!({"paths": ["welcome.md"], "padding": padding});
    server
        .post_json("/mcp/notes/read_batch", &big)
        .assert_error(413, "payload_too_large");
    // Just under the limit (padded with whitespace: an unknown field is refused).
    let fits = format!(r#"{{"paths": ["welcome.md"]{}}}"#, " ".repeat(1000 * 1000));
    assert_eq!(server.post_raw("/mcp/notes/read_batch", fits).status, 200);
}

#[test]
fn bearer_token_guards_every_route_but_health() {
    let server = TestServer::start_with(|c| c.api_token = Some("tok-123".into()));
    let client = server.raw();
    let url = |p: &str| format!("{}{}", server.url, p);
    assert_eq!(common::send(client.get(url("/health"))).status, 200);
    for path in [
        "/config",
        "/mcp/notes",
        "/mcp/notes/read?path=welcome.md",
        "/nope",
    ] {
        common::send(client.get(url(path))).assert_error(401, "unauthorized");
        common::send(client.get(url(path)).bearer_auth("wrong")).assert_error(401, "unauthorized");
        common::send(client.get(url(path)).header("authorization", "tok-123"))
            .assert_error(401, "unauthorized");
    }
    common::send(client.post(url("/mcp/notes/read_batch")).body("{}"))
        .assert_error(401, "unauthorized");
    assert_eq!(
        common::send(client.get(url("/mcp/notes")).bearer_auth("tok-123")).status,
        200
    );
    assert_eq!(
        common::send(
            client
                .get(url("/config"))
                .header("authorization", "bearer tok-123")
        )
        .status,
        200
    );
    common::send(client.get(url("/nope")).bearer_auth("tok-123")).assert_error(404, "not_found");
}

#[test]
fn read_only_mode_still_reads() {
    let server = TestServer::start_with(|c| c.policy = PolicyMode::ReadOnly);
    // read_only writes nothing at start-up: no git init, no welcome note.
    assert_eq!(server.get("/mcp/notes").body, json!({"notes": []}));
    assert!(!server.root.join(".git").exists());
    server.write("my note.md", "mine\n");
    assert_eq!(
        server.get("/mcp/notes").body,
        json!({"notes": ["my note.md"]})
    );
    let answer = server.get(&format!("/mcp/notes/read?path={}", encode("my note.md")));
    assert_eq!(
        answer.body,
        json!({"path": "my note.md", "content": "mine\n", "line_count": 1, "tokens": 2,
               "front_matter": null})
    );
}

#[test]
fn start_up_refuses_a_root_that_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let out = common::mirai_cli()
        .env("NOTES_ROOT", &file)
        .env("PORT", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or("");
    assert!(last.contains("is not a directory"), "{stderr}");
}

#[test]
fn start_up_refuses_a_root_that_cannot_be_written() {
    // /proc refuses new files even to root, so this holds whoever runs the tests.
    let out = common::mirai_cli()
        .env("NOTES_ROOT", "/proc/self")
        .env("PORT", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not writable"), "{stderr}");
}

#[test]
fn start_up_refuses_an_unknown_policy_mode() {
    let dir = tempfile::tempdir().unwrap();
    for var in ["MIRAI_POLICY_MODE", "MCP_POLICY_MODE"] {
        let out = common::mirai_cli()
            .env("NOTES_ROOT", dir.path())
            .env(var, "yolo")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("invalid policy mode: yolo"), "{stderr}");
    }
}

#[test]
fn the_binary_refuses_root_without_mirai_allow_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("notes");
    for allow in [None, Some("0"), Some("yes")] {
        let mut command = common::mirai_cli();
        command.env_remove("MIRAI_ALLOW_ROOT");
        if let Some(value) = allow {
            command.env("MIRAI_ALLOW_ROOT", value);
        }
        let out = command
            .args(["index", "status", "--notes-root"])
            .arg(&root)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if rustix::process::geteuid().is_root() {
            assert_eq!(out.status.code(), Some(2), "{allow:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains("does not run as root"), "{stderr}");
            assert!(
                stderr.contains("docker compose exec --user \"$(id -u)\" mirai mirai"),
                "{stderr}"
            );
            assert!(stderr.contains("MIRAI_ALLOW_ROOT=1"), "{stderr}");
        } else {
            // Any other user gets past the refusal, to the missing repository.
            assert!(!stderr.contains("does not run as root"), "{stderr}");
        }
    }
    assert!(!root.exists(), "a refused start writes nothing");
}

/// A notes folder owned by another user (uid 4242), with an empty global git
/// config in `home`; None when the tests cannot chown (not root).
fn foreign_root(dir: &Path, with_repo: bool) -> Option<PathBuf> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: only root can give a folder to another user");
        return None;
    }
    let root = dir.join("notes");
    std::fs::create_dir(&root).unwrap();
    if with_repo {
        git(&root, &["init", "-q"]);
        std::fs::write(root.join("a.md"), "# a\n").unwrap();
        git(&root, &["add", "a.md"]);
        git(
            &root,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "a",
            ],
        );
        for entry in walkdir::WalkDir::new(&root) {
            std::os::unix::fs::lchown(entry.unwrap().path(), Some(4242), Some(4242)).unwrap();
        }
    } else {
        std::os::unix::fs::chown(&root, Some(4242), Some(4242)).unwrap();
    }
    std::fs::create_dir(dir.join("home")).unwrap();
    Some(root)
}

/// `mirai` with `dir/home` as HOME and XDG config, so only that global git config counts.
fn mirai_at_home(dir: &Path) -> std::process::Command {
    let mut command = common::mirai_cli();
    command
        .env("HOME", dir.join("home"))
        .env("XDG_CONFIG_HOME", dir.join("home"))
        .env_remove("SUDO_UID")
        .env_remove("GIT_CONFIG_GLOBAL");
    command
}

fn trust_in_global_config(dir: &Path, root: &Path) {
    let config = format!("[safe]\n\tdirectory = {}\n", root.display());
    std::fs::write(dir.join("home/.gitconfig"), config).unwrap();
}

#[test]
fn a_repository_another_user_owns_is_refused_with_the_safe_directory_fix() {
    let dir = tempfile::tempdir().unwrap();
    let Some(root) = foreign_root(dir.path(), true) else {
        return;
    };
    let out = mirai_at_home(dir.path())
        .args(["index", "status", "--notes-root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fix = format!(
        "git config --global --add safe.directory {}",
        root.display()
    );
    assert!(stderr.contains(&fix), "{stderr}");
    assert!(stderr.contains("uid 4242"), "{stderr}");
    assert!(
        !root.join(".mirai").exists(),
        "a refused start writes nothing"
    );

    // The fix it names is the one that works; libgit2's own check stays on.
    trust_in_global_config(dir.path(), &root);
    let out = mirai_at_home(dir.path())
        .args(["index", "status", "--notes-root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(status.is_object(), "{status}");
}

/// Runs `mirai serve` on `root` until it is serving (then stops it) or exits by
/// itself: whether it served, and its log lines up to then.
fn serve_until_ready(mut command: std::process::Command, root: &Path) -> (bool, Vec<String>) {
    use std::io::{BufRead, BufReader};
    let mut child = command
        .args(["serve", "--port", "0", "--notes-root"])
        .arg(root)
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    let mut served = false;
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        served = line.contains("serving");
        lines.push(line);
        if served {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    (served, lines)
}

#[test]
fn a_new_root_another_user_owns_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let Some(root) = foreign_root(dir.path(), false) else {
        return;
    };
    let (served, lines) = serve_until_ready(mirai_at_home(dir.path()), &root);
    assert!(!served, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let fix = format!(
        "git config --global --add safe.directory {}",
        root.display()
    );
    assert!(lines[0].contains(&fix), "{lines:?}");
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        0,
        "nothing written"
    );

    // Once trusted, serve creates the repository and libgit2 opens it.
    trust_in_global_config(dir.path(), &root);
    let (served, lines) = serve_until_ready(mirai_at_home(dir.path()), &root);
    assert!(served, "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("initialized a git repository")),
        "{lines:?}"
    );
    assert!(root.join(".git").is_dir() && root.join("welcome.md").is_file());
}

#[test]
fn the_binary_serves_creates_its_root_and_logs_each_request() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("new/notes");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let mut child = common::mirai_cli()
        .arg("serve")
        .arg("--notes-root")
        .arg(&root)
        .arg("--port")
        .arg(port.to_string())
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push(line.clone());
        if line.contains("serving") {
            break;
        }
    }
    assert!(
        seen.iter()
            .any(|l| l.contains("initialized a git repository")),
        "{seen:?}"
    );
    let body = reqwest::blocking::get(format!("http://127.0.0.1:{port}/health"))
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(body, r#"{"ok":true}"#);
    let line = lines
        .map(|l| l.unwrap())
        .find(|l| l.contains("/health"))
        .expect("a log line for the request");
    assert!(line.contains("GET /health 200"), "{line}");
    assert!(line.trim_end().ends_with("ms"), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(root.join("welcome.md").is_file());
    assert_eq!(git(&root, &["status", "--porcelain"]), "");
}

#[test]
fn a_generated_vault_is_the_same_for_a_seed_and_served_whole() {
    use common::vault::{self, Options};
    let dir = tempfile::tempdir().unwrap();
    let options = Options::new(150, 7);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let summary = vault::generate(&a, &options).unwrap();
    vault::generate(&b, &options).unwrap();
    let (notes, links, _) = vault::notes(&options);
    assert_eq!(summary.notes, 150);
    assert!(links > 100, "wikilinks: {links}");
    let mut expected: Vec<String> = notes.iter().map(|n| n.path.clone()).collect();
    expected.sort();
    for note in &notes {
        assert_eq!(
            std::fs::read_to_string(a.join(&note.path)).unwrap(),
            note.text
        );
        assert_eq!(
            std::fs::read_to_string(b.join(&note.path)).unwrap(),
            note.text
        );
    }
    let with_front_matter = notes.iter().filter(|n| n.text.starts_with("---\n")).count();
    assert!(
        (45..=135).contains(&with_front_matter),
        "{with_front_matter}"
    );
    assert!(notes.iter().any(|n| n.path.starts_with("Daily/")));
    // Another seed, another vault; no links when asked for none.
    let (other, _, _) = vault::notes(&Options::new(150, 8));
    assert_ne!(other[0].text, notes[0].text);
    let plain = Options {
        link_permille: 0,
        ..options.clone()
    };
    assert!(vault::notes(&plain)
        .0
        .iter()
        .all(|n| !n.text.contains("[[")));
    // The same history on every run.
    let head_a = vault::commit(&a, 3).unwrap();
    assert_eq!(vault::commit(&b, 3).unwrap(), head_a);
    assert_eq!(git(&a, &["rev-list", "--count", "HEAD"]).trim(), "3");
    assert_eq!(git(&a, &["status", "--porcelain"]), "");
    // mirai lists every generated note and reads each one back as written.
    let server = TestServer::start_in(dir, a, |_| {});
    let listed: Vec<String> =
        serde_json::from_value(server.get("/mcp/notes").body["notes"].clone()).unwrap();
    assert_eq!(listed, expected);
    let note = &notes[42];
    let answer = server.get(&format!("/mcp/notes/read?path={}", encode(&note.path)));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["content"], note.text.as_str());
}
