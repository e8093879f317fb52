//! The web page (issue 31): its files served without a token under a strict
//! Content-Security-Policy, the Origin rule's amendment for mirai's own page,
//! the rows the page reads (`notes.list` by folder, `index.query` paged,
//! `notes.render`, a run's calls in its transcript), and the page itself
//! driven in a real browser (Debian's chromium and chromedriver, through
//! fantoccini): search, a note and its history, a run, approving and
//! rejecting proposals, a revert, notes whose HTML is hostile, hostile
//! attachments opened straight from `files.read`, and the named callers who
//! wrote, asked, decided and started runs.

use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::browser::Browser;
use crate::common::fake_llm::{FakeLlm, Script};
use crate::common::{encode, git, TestServer};
use mirai::config::{Config, PolicyMode};
use serde_json::{json, Value};

const TOKEN: &str = "api-s3cret";
const REVIEWER: &str = "reviewer-s3cret";

const HOSTILE: &str = "# Hostile\n\n<script>window.pwned = 'script'</script>\n\n\
<img src=x onerror=\"window.pwned = 'img'\">\n\n\
[click me](javascript:window.pwned='link')\n\n\
<a href=\"javascript:window.pwned='a'\" id=\"js-link\">raw link</a>\n\n\
<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"window.pwned='svg'\"><script>window.pwned='svg-script'</script><a href=\"javascript:window.pwned='svg-a'\"><text>svg text</text></a></svg>\n\n\
<iframe src=\"data:text/html,<script>parent.pwned='iframe'</script>\"></iframe>\n\n\
<div style=\"background:url(javascript:window.pwned='css')\" onmouseover=\"window.pwned='hover'\">hover me</div>\n\n\
Plain words stay.\n";

const WELCOME: &str = "---\ntitle: Welcome home\ntags: [start, garden]\n---\n# Welcome\n\n\
Read [[plans]] and [[Missing note]] before planting.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n";
const PLANS: &str = "# Plans\n\nPlant tomatoes by the south wall.\n\n## Later\n\nBeans.\n";
const PLANS_EDITED: &str =
    "# Plans\n\nPlant tomatoes and basil by the south wall.\n\n## Later\n\nBeans.\n";
const TODO: &str = "# Todo\n\n- buy milk\n";

fn review(config: &mut Config) {
    config.policy = PolicyMode::Review;
    config.reviewer_token = Some(REVIEWER.into());
    config.api_token = Some(TOKEN.into());
}

fn get_raw(
    server: &TestServer,
    path: &str,
    headers: &[(&str, &str)],
) -> reqwest::blocking::Response {
    let mut request = server.raw().get(format!("{}{path}", server.url));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().expect("the server answers")
}

#[test]
fn the_page_is_served_without_a_token_under_a_strict_policy() {
    let server = TestServer::start_with(|c| c.api_token = Some(TOKEN.into()));
    for path in ["/", "/ui/notes/a%20b/c.md", "/ui/runs/x", "/ui/status"] {
        let page = get_raw(&server, path, &[]);
        assert_eq!(page.status(), 200, "{path}");
        let csp = page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_string();
        for part in [
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "default-src 'none'",
        ] {
            assert!(csp.contains(part), "{csp}");
        }
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(page.headers()["x-content-type-options"], "nosniff");
        assert!(page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
        let body = page.text().unwrap();
        assert!(body.contains("/ui/assets/app.js"), "{body}");
        assert!(!body.contains("<script>"), "no inline script: {body}");
    }
    let js = get_raw(&server, "/ui/assets/app.js", &[("accept-encoding", "gzip")]);
    assert_eq!(js.status(), 200);
    assert_eq!(js.headers()["content-encoding"], "gzip");
    assert!(js.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    let missing = get_raw(&server, "/ui/assets/nope.js", &[]);
    assert_eq!(missing.status(), 404);
    assert!(missing.headers().contains_key("content-security-policy"));
    // The API behind it still needs the token.
    let notes = get_raw(&server, "/mcp/notes", &[]);
    assert_eq!(notes.status(), 401);
    let post = server
        .raw()
        .post(format!("{}/ui/notes/", server.url))
        .send()
        .unwrap();
    assert_eq!(post.status(), 405);
}

#[test]
fn the_page_is_a_few_small_files_and_compressed() {
    let server = TestServer::start();
    let mut total = 0;
    for path in [
        "/",
        "/ui/assets/app.js",
        "/ui/assets/style.css",
        "/ui/assets/icon.svg",
    ] {
        // reqwest here does not decompress: the bytes are what went over the wire.
        let mut answer = get_raw(&server, path, &[("accept-encoding", "gzip")]);
        assert_eq!(answer.status(), 200, "{path}");
        assert_eq!(answer.headers()["content-encoding"], "gzip", "{path}");
        let mut bytes = Vec::new();
        answer.read_to_end(&mut bytes).unwrap();
        total += bytes.len();
        let plain = get_raw(&server, path, &[]);
        assert!(!plain.headers().contains_key("content-encoding"), "{path}");
        assert!(plain.bytes().unwrap().len() > bytes.len(), "{path}");
    }
    assert!(total < 150 * 1024, "first load is {total} bytes");
}

#[test]
fn its_own_origin_is_allowed_when_the_host_rule_passes() {
    let server = TestServer::start_with(|c| c.allowed_hosts = vec!["notes.lan".into()]);
    let port = server.url.rsplit(':').next().unwrap().to_string();
    let host = format!("notes.lan:{port}");
    let own = format!("http://notes.lan:{port}");
    let ok = get_raw(&server, "/mcp/notes", &[("host", &host), ("origin", &own)]);
    assert_eq!(ok.status(), 200);
    for (origin, host) in [
        (format!("http://evil.example:{port}"), host.clone()),
        (
            format!("http://notes.lan:{}", port.parse::<u16>().unwrap() + 1),
            host.clone(),
        ),
        (format!("https://notes.lan:{port}"), host.clone()),
        ("null".to_string(), host.clone()),
        // A name the Host rule refuses (DNS rebinding) is refused even as its own origin.
        (
            format!("http://rebind.evil.example:{port}"),
            format!("rebind.evil.example:{port}"),
        ),
    ] {
        let refused = get_raw(
            &server,
            "/mcp/notes",
            &[("host", &host), ("origin", &origin)],
        );
        assert_eq!(refused.status(), 403, "{origin} {host}");
        let body: Value = refused.json().unwrap();
        assert_eq!(body["error"]["code"], "origin_refused", "{origin}");
    }
    // With a token set, the Host rule is off: the page opened by any name may call, with the token.
    let guarded = TestServer::start_with(|c| c.api_token = Some(TOKEN.into()));
    let port = guarded.url.rsplit(':').next().unwrap().to_string();
    let host = format!("box.example:{port}");
    let own = format!("http://box.example:{port}");
    let auth = format!("Bearer {TOKEN}");
    let ok = get_raw(
        &guarded,
        "/mcp/notes",
        &[("host", &host), ("origin", &own), ("authorization", &auth)],
    );
    assert_eq!(ok.status(), 200);
    let foreign = get_raw(
        &guarded,
        "/mcp/notes",
        &[
            ("host", &host),
            ("origin", "http://evil.example"),
            ("authorization", &auth),
        ],
    );
    assert_eq!(foreign.status(), 403);
}

#[test]
fn notes_list_answers_one_folder_level_with_counts() {
    let server = TestServer::start();
    for path in [
        "top.md",
        "a/one.md",
        "a/two.md",
        "a/b/three.md",
        "a/b/c/four.md",
        "z/five.md",
        "ab.md",
    ] {
        server.write(path, "# x\n");
    }
    server.commit_all();
    let root = server.get("/mcp/notes?folders=true");
    assert_eq!(root.status, 200, "{root:?}");
    // welcome.md is the note a new notes root starts with.
    assert_eq!(root.body["notes"], json!(["ab.md", "top.md", "welcome.md"]));
    assert_eq!(
        root.body["folders"],
        json!([{"path": "a/", "notes": 4}, {"path": "z/", "notes": 1}])
    );
    let a = server.get("/mcp/notes?folders=true&prefix=a");
    assert_eq!(a.body["notes"], json!(["a/one.md", "a/two.md"]));
    assert_eq!(a.body["folders"], json!([{"path": "a/b/", "notes": 2}]));
    let under = server.get("/mcp/notes?prefix=a/b/");
    assert_eq!(
        under.body["notes"],
        json!(["a/b/c/four.md", "a/b/three.md"])
    );
    assert!(under.body.get("folders").is_none());
    for bad in [
        "/mcp/notes?prefix=../x",
        "/mcp/notes?prefix=/etc",
        "/mcp/notes?folders=maybe",
    ] {
        server.get(bad).assert_error(400, "invalid_request");
    }
}

#[test]
fn index_query_pages_with_offset() {
    let server = TestServer::start();
    for i in 0..12 {
        server.write(
            &format!("n{i:02}.md"),
            format!("# Note {i}\n\nbasil {}\n", "basil ".repeat(i)),
        );
    }
    server.commit_all();
    let all = server.get("/mcp/index/query?q=basil&limit=12");
    assert_eq!(all.status, 200, "{all:?}");
    let paths = |answer: &Value| -> Vec<String> {
        answer["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["metadata"]["path"].as_str().unwrap().to_string())
            .collect()
    };
    let every = paths(&all.body);
    assert_eq!(every.len(), 12);
    let second = server.get("/mcp/index/query?q=basil&limit=5&offset=5");
    assert_eq!(second.body["offset"], 5);
    assert_eq!(paths(&second.body), every[5..10].to_vec());
    let last = server.get("/mcp/index/query?q=basil&limit=5&offset=10");
    assert_eq!(paths(&last.body), every[10..].to_vec());
    let past = server.get("/mcp/index/query?q=basil&limit=5&offset=40");
    assert_eq!(past.body["chunks"], json!([]));
    for bad in ["-1", "1001", "x", "1.5"] {
        server
            .get(&format!("/mcp/index/query?q=basil&offset={bad}"))
            .assert_error(400, "invalid_request");
    }
}

#[test]
fn notes_render_resolves_links_keeps_front_matter_as_data_and_runs_nothing() {
    let server = TestServer::start();
    server.write("welcome.md", WELCOME);
    server.write("garden/plans.md", PLANS);
    server.write("hostile.md", HOSTILE);
    server.commit_all();
    let note = server.get("/mcp/notes/render?path=welcome.md");
    assert_eq!(note.status, 200, "{note:?}");
    let html = note.body["html"].as_str().unwrap();
    assert!(
        html.contains("<a href=\"/ui/notes/garden/plans.md\""),
        "{html}"
    );
    assert!(
        html.contains("<span class=\"unresolved\">Missing note</span>"),
        "{html}"
    );
    assert!(html.contains("<table>"), "{html}");
    assert!(
        !html.contains("title: Welcome home"),
        "front matter is data: {html}"
    );
    assert_eq!(note.body["front_matter"]["title"], "Welcome home");
    assert_eq!(note.body["title"], "Welcome home");
    let hostile = server.get("/mcp/notes/render?path=hostile.md");
    let html = hostile.body["html"].as_str().unwrap().to_lowercase();
    for bad in [
        "<script",
        "onerror",
        "javascript:",
        "<svg",
        "onload",
        "<iframe",
        "style=",
        "onmouseover",
        "<img",
    ] {
        assert!(!html.contains(bad), "{bad} survived: {html}");
    }
    assert!(html.contains("plain words stay."), "{html}");
    server
        .get("/mcp/notes/render?path=../etc/passwd.md")
        .assert_error(400, "invalid_path");
    server
        .get("/mcp/notes/render?path=nope.md")
        .assert_error(404, "not_found");
}

/// The probe's costly shapes, each a note at the note limit (1 MiB): nested
/// block HTML, a note of `>`, nested lists, a table whose rows its header
/// pads. Each answers what fits, then a plain notice that points at the
/// source, and an answer bounded by the note's size (benches/render.rs times them).
#[test]
fn notes_render_is_bounded_for_deep_and_huge_notes_at_the_note_limit() {
    const LIMIT: usize = 1024 * 1024;
    let server = TestServer::start_with(|c| c.max_note_bytes = LIMIT);
    let fill = |head: &str, unit: &str| {
        let mut note = head.to_string();
        note.push_str(&unit.repeat((LIMIT - head.len()) / unit.len()));
        note
    };
    let columns = 2000;
    let header = format!("{}|\n{}|\n", "|a".repeat(columns), "|-".repeat(columns));
    let shapes = [
        ("div.md", fill("# Divs\n\n", "<div>"), "too deeply"),
        ("ul.md", fill("", "<ul><li>"), "too deeply"),
        ("dl.md", fill("", "<dl><dt>x<dd>"), "too deeply"),
        ("blockquote.md", fill("", "<blockquote>"), "too deeply"),
        ("section.md", fill("", "<section>"), "too deeply"),
        ("quotes.md", fill("", ">"), "too deeply"),
        ("lists.md", fill("", "+ "), "too deeply"),
        ("table.md", fill(&header, "|b\n"), "too large"),
    ];
    for (path, note, _) in &shapes {
        assert!(note.len() <= LIMIT && note.len() > LIMIT - 64, "{path}");
        server.write(path, note);
    }
    for (path, note, why) in &shapes {
        let answer = server.get(&format!("/mcp/notes/render?path={path}"));
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        assert_eq!(answer.body["bytes"], note.len());
        let html = answer.body["html"].as_str().unwrap();
        let notice = "<p class=\"render-cut\">The rest of this note is";
        assert!(
            html.contains(notice) && html.contains(why) && html.ends_with("see its source.</p>\n"),
            "{path}: {}",
            &html[html.len().saturating_sub(300)..]
        );
        assert_eq!(html.matches(notice).count(), 1, "{path}");
        // Bounded by the note's size: eight times it, plus 256 KiB, at most.
        assert!(
            html.len() <= 8 * note.len() + 256 * 1024,
            "{path}: {}",
            html.len()
        );
    }
    let divs = server.get("/mcp/notes/render?path=div.md");
    let html = divs.body["html"].as_str().unwrap();
    assert!(
        html.starts_with("<h1>Divs</h1>"),
        "what fits is rendered: {html:.200}"
    );
    assert!(html.len() < 64 * 1024, "{}", html.len());
    let table = server.get("/mcp/notes/render?path=table.md");
    let html = table.body["html"].as_str().unwrap();
    assert!(
        html.contains("<td>b</td>"),
        "the rows that fit are rendered"
    );
}

/// A footnote's name becomes an element id: prefixed, so a note's ids never
/// equal the page's own (a note naming one `token-form` cannot take the
/// token prompt's place).
#[test]
fn footnote_ids_from_a_note_never_equal_the_pages_own() {
    let page_ids: Vec<&str> = include_str!("../ui/index.html")
        .split(" id=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert!(page_ids.contains(&"token-form"), "{page_ids:?}");
    let mut note = String::from("# Footnotes\n\n");
    for id in &page_ids {
        note.push_str(&format!("See[^{id}].\n\n"));
    }
    for id in &page_ids {
        note.push_str(&format!("[^{id}]: about {id}\n"));
    }
    let server = TestServer::with_note("notes.md", &note);
    let answer = server.get("/mcp/notes/render?path=notes.md");
    let html = answer.body["html"].as_str().unwrap();
    let ids: Vec<&str> = html
        .split(" id=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert_eq!(ids.len(), page_ids.len(), "{html}");
    for id in &ids {
        assert!(!page_ids.contains(id), "{id} is the page's: {html}");
        assert!(id.starts_with("note-fn-"), "{id}");
    }
    assert!(html.contains("href=\"#note-fn-token-form\""), "{html}");
}

#[test]
fn a_note_past_the_size_limit_is_not_rendered() {
    let server = TestServer::start_with(|c| c.max_note_bytes = 1000);
    server.write("big.md", "word ".repeat(400));
    server
        .get("/mcp/notes/render?path=big.md")
        .assert_error(413, "note_too_large");
}

/// An agent run whose one step appends to todo.md (a proposal in review mode), then replies.
fn agent_script() -> Script {
    Script::answering(&[
        "<think>Add a line to the todo list.</think>\n<code>\nconst r = await mirai.notes.append({path: \"todo.md\", text: \"- call mum\\n\"});\nreturn r.proposal;\n</code>".to_string(),
        "<think>Done.</think>\n<reply>I proposed adding \"call mum\" to todo.md.</reply>".to_string(),
    ])
}

/// The page's runs: the proposal run, then one whose reply after a failed step is
/// held back (step 2), then one that runs out of steps.
fn page_script() -> Script {
    Script::answering(&[
        "<think>Add a line to the todo list.</think>\n<code>\nconst r = await mirai.notes.append({path: \"todo.md\", text: \"- call mum\\n\"});\nreturn r.proposal;\n</code>".to_string(),
        "<think>Done.</think>\n<reply>I proposed adding \"call mum\" to todo.md.</reply>".to_string(),
        "<think>Try.</think>\n<code>\nthrow new Error(\"boom\");\n</code>".to_string(),
        "<think>Give up.</think>\n<reply>Too early reply.</reply>".to_string(),
        "<think>Really.</think>\n<reply>It could not be done.</reply>".to_string(),
        "<think>Look.</think>\n<code>\nreturn 1;\n</code>".to_string(),
        "<think>Claim.</think>\n<code>\nreturn \"changed bread to rye bread\";\n</code>".to_string(),
        "<think>Done.</think>\n<reply>I changed bread to rye bread in todo.md.</reply>".to_string(),
        "<think>Sure.</think>\n<reply>I changed bread to rye bread in todo.md.</reply>".to_string(),
    ])
}

const GUIDE: &str = "# Guide\n\nRead the [[guide#Far section|far section]] first.[^1]\n\n\
> [!warning] Mind the frost\n> Cover the beds at night.\n\n![[plans#Later]]\n\n";

/// The guide's tail: far below the fold, then the footnote.
fn guide() -> String {
    let filler: String = (0..60)
        .map(|i| format!("Filler line {i} about nothing much.\n\n"))
        .collect();
    format!("{GUIDE}{filler}## Far section\n\nDeep words about compost.\n\n{filler}[^1]: The footnote text.\n")
}

#[test]
fn a_runs_transcript_keeps_each_calls_request_and_answer() {
    let llm = FakeLlm::start(agent_script());
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|c| {
        c.llm.base_url = base_url;
        c.llm.model = "fake-model".into();
    });
    server.write("todo.md", TODO);
    server.commit_all();
    let report = server.post_json("/agent/run", &json!({"task": "Add call mum."}));
    assert_eq!(report.status, 200, "{report:?}");
    let run_id = report.body["run_id"].as_str().unwrap();
    let run = server.get(&format!("/agent/runs/{run_id}"));
    let call = run.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "host_call")
        .unwrap()
        .clone();
    assert_eq!(call["op"], "notes.append");
    let request: Value = serde_json::from_str(call["request"].as_str().unwrap()).unwrap();
    assert_eq!(request, json!({"path": "todo.md", "text": "- call mum\n"}));
    let answer: Value = serde_json::from_str(call["answer"].as_str().unwrap()).unwrap();
    assert_eq!(
        answer["ok"]["commit"].as_str().unwrap().len(),
        40,
        "{answer}"
    );
}

fn proposal_status(server: &TestServer, id: &str) -> String {
    let answer = server.get(&format!("/mcp/proposals/get?id={}", encode(id)));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["status"].as_str().unwrap().to_string()
}

#[test]
fn the_page_in_a_real_browser() {
    let browser = match Browser::start() {
        Ok(browser) => browser,
        Err(why) => {
            println!("SKIPPED: the browser test needs chromium and chromedriver: {why}");
            return;
        }
    };
    let shots = std::env::var_os("MIRAI_PAGE_SHOTS").map(PathBuf::from);
    let llm = FakeLlm::start(page_script());
    let base_url = llm.base_url.clone();
    let server = TestServer::start_with(|c| {
        review(c);
        c.llm.base_url = base_url;
        c.llm.model = "fake-model".into();
    });
    server.write("welcome.md", WELCOME);
    server.write("garden/plans.md", PLANS);
    server.write("todo.md", TODO);
    server.write("hostile.md", HOSTILE);
    server.write("garden/beds/north.md", "# North bed\n\nShade plants.\n");
    // A dotted (Dendron-style) name: a path with nowhere to wrap.
    server.write(
        "garden/beds/garden.beds.south.wall.espaliers.planting.schedule.md",
        "# South wall\n\nEspaliered pears along the wall.\n",
    );
    server.write("guide.md", guide());
    server.commit_all();
    server.write("garden/plans.md", PLANS_EDITED);
    git(
        &server.root,
        &[
            "-c",
            "user.name=Ann",
            "-c",
            "user.email=ann@example.com",
            "commit",
            "-qam",
            "Add basil to the plans",
        ],
    );
    // The agent's run files a proposal; so does a plain HTTP write.
    let report = server.post_json(
        "/agent/run",
        &json!({"task": "Add call mum to my todo list."}),
    );
    assert_eq!(report.status, 200, "{report:?}");
    let run_id = report.body["run_id"].as_str().unwrap().to_string();
    let agents = report.body["proposal"]["proposal"]
        .as_str()
        .unwrap()
        .to_string();
    // A run whose reply after a failed step is held back, and one out of steps.
    let held = server.post_json("/agent/run", &json!({"task": "Try and fail."}));
    assert_eq!(held.status, 200, "{held:?}");
    let held_id = held.body["run_id"].as_str().unwrap().to_string();
    let short = server.post_json("/agent/run", &json!({"task": "Too short.", "max_steps": 1}));
    assert_eq!(short.body["stopped"], "max_steps", "{short:?}");
    // A run whose reply claims a change nothing made, twice: contradicted.
    // (It names a note: mirai's opening look reads it first.)
    let claimed = server.post_json(
        "/agent/run",
        &json!({"task": "Change bread to rye bread in todo.md."}),
    );
    assert_eq!(claimed.body["reply_contradicted"], true, "{claimed:?}");
    let claimed_id = claimed.body["run_id"].as_str().unwrap().to_string();
    let http = server.post_json(
        "/mcp/notes/append",
        &json!({"path": "welcome.md", "text": "A line from HTTP.\n"}),
    );
    assert_eq!(http.status, 202, "{http:?}");

    // The page asks for the token once, then shows the notes.
    browser.goto(&format!("{}/", server.url));
    browser.wait("#token-dialog[open]");
    browser.type_into("#token-input", TOKEN);
    browser.click("#token-form button[type=submit]");
    browser.wait_text(".tree", "garden/");
    assert!(browser.url().ends_with("/ui/notes/"), "{}", browser.url());
    assert_eq!(browser.title(), "Notes · mirai");
    let token_kept = browser.js("return [sessionStorage.getItem('mirai.token'), document.cookie]");
    assert_eq!(token_kept, json!([TOKEN, ""]));
    // Folders load lazily: garden/beds/ appears once garden/ is opened.
    assert!(!browser.text(".tree").contains("beds/"));
    browser.click(".tree details[data-prefix='garden/'] > summary");
    browser.wait_text(".tree", "beds/");
    browser.shot(&shots, "notes-tree-desktop", 1280, 900);
    // The first page: newest commits, what waits, runs, index and sync, broken links.
    let home = browser.wait_text(".home", "Add basil to the plans");
    for shown in [
        "Ann",
        "2 proposals pending",
        "Try and fail.",
        "failed: max steps",
        "1 broken link",
        "Index",
        "Sync",
    ] {
        assert!(
            home.contains(shown),
            "the first page lacks {shown:?}: {home}"
        );
    }
    browser.shot(&shots, "home-360", 360, 780);
    assert_eq!(
        browser.overflow_at(360),
        0,
        "the home view is wider than 360 px"
    );
    // "/" puts the cursor in the search box.
    browser.js("document.body.focus(); return true");
    let body = browser.wait("body");
    browser.runtime.block_on(body.send_keys("/")).unwrap();
    assert_eq!(
        browser.js("return document.activeElement.id"),
        json!("search-input")
    );
    browser.js("document.getElementById('search-input').blur(); return true");

    // Search, and open a hit at its chunk.
    browser.type_into("#search-input", "basil");
    browser.click("#search-form button");
    browser.wait(".hit-card mark");
    // One result per note, its passage with the term marked from the answer's offsets.
    assert_eq!(
        browser.js("return document.querySelectorAll('.hit-card').length"),
        json!(1)
    );
    assert_eq!(browser.text(".hit-card mark"), "basil");
    assert!(browser.text(".hit-card").contains("garden/plans.md"));
    browser.shot(&shots, "search-desktop", 1280, 900);
    assert!(
        browser.url().contains("/ui/search?q=basil"),
        "{}",
        browser.url()
    );
    assert_eq!(browser.title(), "Search: basil · mirai");
    assert!(browser.text("main").contains("Mode: lexical"));
    browser.click(".hit-card h3 a");
    browser.wait_text("article.note", "basil by the south wall");
    assert!(
        browser.url().contains("/ui/notes/garden/plans.md"),
        "{}",
        browser.url()
    );
    assert_eq!(
        browser.text("article.note .hit"),
        "Plant tomatoes and basil by the south wall."
    );
    // A hit's long path wraps inside its card on a phone.
    browser.goto(&format!("{}/ui/search?q=espaliered", server.url));
    browser.wait_text(".hit-card", "garden.beds.south.wall");
    browser.shot(&shots, "search-360", 360, 780);
    assert_eq!(
        browser.overflow_at(360),
        0,
        "the search view is wider than 360 px"
    );

    // A note: rendered, its front matter as a table, a resolved link, the source.
    browser.goto(&format!("{}/ui/notes/welcome.md", server.url));
    browser.wait_text("table.fm", "Welcome home");
    assert_eq!(browser.title(), "Note: Welcome home · mirai");
    let link = browser.js("return document.querySelector('article.note a').getAttribute('href')");
    assert_eq!(link, "/ui/notes/garden/plans.md");
    assert!(browser
        .text("article.note .unresolved")
        .contains("Missing note"));
    // Its place in the vault: tags, outgoing links (the broken one marked).
    let tags = browser.text(".note-head .tags");
    assert!(
        tags.contains("#start") && tags.contains("#garden"),
        "{tags}"
    );
    let links = browser.text(".vault-links");
    assert!(links.contains("broken: Missing note"), "{links}");
    assert!(links.contains("plans"), "{links}");
    browser.shot(&shots, "note-desktop", 1280, 900);
    browser.shot(&shots, "note-360", 360, 780);
    // A phone's width shows the whole note view: nothing to scroll sideways
    // (a grid column's `1fr` once grew to its widest item, past the screen).
    assert_eq!(
        browser.overflow_at(360),
        0,
        "the note view is wider than 360 px"
    );
    browser.click(".note-head button[aria-pressed]");
    browser.wait_text("pre.source", "[[Missing note]]");
    browser.click(".note-head button[aria-pressed]");
    browser.wait("article.note");
    browser.click("article.note a");
    browser.wait_text("main h1", "Plans");
    // Backlinks, each with the line that links; the title once.
    browser.wait_text(
        ".vault-links",
        "Read [[plans]] and [[Missing note]] before planting.",
    );
    assert_eq!(
        browser.js("return document.querySelectorAll('main h1').length"),
        json!(1)
    );

    // Its history, a diff, and a revert (review mode: a proposal, approved below).
    browser.click(".note-head a[href^='/ui/history/']");
    browser.wait_text("main", "Add basil to the plans");
    assert_eq!(browser.title(), "History: garden/plans.md · mirai");
    browser.click(".commit button[aria-expanded]");
    browser.wait_text(".diff .add", "basil");
    browser.shot(&shots, "history-desktop", 1280, 900);
    browser.click(".commit button.danger");
    browser.accept_alert();
    browser.wait_text(".commit .notice", "Filed as a proposal");
    let href =
        browser.js("return document.querySelector('.commit .notice a').getAttribute('href')");
    let revert = href
        .as_str()
        .unwrap()
        .trim_start_matches("/ui/proposals/")
        .to_string();
    assert_eq!(proposal_status(&server, &revert), "pending");

    // The agent's run, step by step, with each mirai.* call's request and answer.
    browser.click(".top nav a[data-view=runs]");
    browser.wait_text("main", "Add call mum");
    browser.click(&format!("main .card h3 a[href$='{run_id}']"));
    browser.wait_text(".step", "mirai.notes.append");
    assert!(browser.title().starts_with("Run "), "{}", browser.title());
    assert!(
        browser.url().ends_with(&format!("/ui/runs/{run_id}")),
        "{}",
        browser.url()
    );
    browser.click(".host-call > summary");
    browser.wait_text(".host-call", "\"path\": \"todo.md\"");
    assert!(
        browser.text(".host-call").contains("\"proposal\""),
        "the answer is shown"
    );
    let run = browser.text(".run");
    for shown in [
        "Ended",
        "✓ replied",
        "Add a line to the todo list.",
        "await mirai.notes.append({path: \"todo.md\"",
        "I proposed adding",
    ] {
        assert!(run.contains(shown), "the run view lacks {shown:?}: {run}");
    }
    assert!(!run.contains("[object"), "{run}");
    browser.shot(&shots, "run-desktop", 1280, 900);
    browser.shot(&shots, "run-360", 360, 780);

    // Proposals: pending first; approve the revert (the reviewer token asked then).
    browser.click(".top nav a[data-view=proposals]");
    browser.wait_text("main", "Waiting for you (3)");
    browser.shot(&shots, "proposals-desktop", 1280, 900);
    browser.shot(&shots, "proposals-360", 360, 780);
    browser.goto(&format!("{}/ui/proposals/{revert}", server.url));
    browser.wait_text("main", "Applies now");
    browser.shot(&shots, "proposal-desktop", 1400, 900);
    // The wide side-by-side view shows the diff's own file headers.
    let split = browser.text(".proposal table.split");
    assert!(
        split.contains("--- a/garden/plans.md") && split.contains("+++ b/garden/plans.md"),
        "{split}"
    );
    browser.shot(&shots, "proposal-360", 360, 780);
    let head = server.head();
    browser.click("#approve");
    browser.wait("#token-dialog[open]");
    browser.type_into("#token-input", REVIEWER);
    browser.click("#token-form button[type=submit]");
    browser.wait_text("main", "Approved: committed as");
    assert_ne!(server.head(), head);
    assert_eq!(
        std::fs::read_to_string(server.root.join("garden/plans.md")).unwrap(),
        PLANS
    );
    assert!(git(&server.root, &["log", "-1", "--format=%B"])
        .contains(&format!("Mirai-Proposal: {revert}")));
    assert_eq!(proposal_status(&server, &revert), "applied");

    // Reject the agent's proposal: the reviewer token is kept for the tab.
    browser.goto(&format!("{}/ui/proposals/{agents}", server.url));
    browser.wait("#reject");
    browser.type_into("#reject-reason", "not now");
    // The proposal goes stale live: the view redraws, the half-typed reason stays.
    let commit_as_ann = |message: &str| {
        git(
            &server.root,
            &[
                "-c",
                "user.name=Ann",
                "-c",
                "user.email=ann@example.com",
                "commit",
                "-qam",
                message,
            ],
        )
    };
    server.write("todo.md", "# Todo\n\n- buy eggs\n");
    commit_as_ann("Eggs");
    browser.wait_text("main", "no: the notes changed since");
    assert_eq!(
        browser.js("return document.getElementById('reject-reason').value"),
        json!("not now")
    );
    server.write("todo.md", TODO);
    commit_as_ann("Milk again");
    let started = Instant::now();
    while browser.text("main").contains("no: the notes changed since") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the proposal never applied again"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let head = server.head();
    browser.click("#reject");
    browser.wait_text("main", "Rejected.");
    assert_eq!(server.head(), head);
    assert_eq!(
        std::fs::read_to_string(server.root.join("todo.md")).unwrap(),
        TODO
    );
    assert_eq!(proposal_status(&server, &agents), "rejected");

    // Status.
    browser.click(".top nav a[data-view=status]");
    browser.wait_text("main", "review");
    assert_eq!(browser.title(), "Status · mirai");

    // Live: a person's commit beside mirai reaches the open note within two seconds or so.
    browser.goto(&format!("{}/ui/notes/todo.md", server.url));
    browser.wait_text("article.note", "buy milk");
    // Past the first look live updates take, so what follows is a change they notice.
    std::thread::sleep(Duration::from_millis(2000));
    server.write("todo.md", "# Todo\n\n- buy bread\n");
    git(
        &server.root,
        &[
            "-c",
            "user.name=Ann",
            "-c",
            "user.email=ann@example.com",
            "commit",
            "-qam",
            "Bread",
        ],
    );
    browser.wait_text("article.note", "buy bread");

    // A hostile note runs nothing.
    browser.goto(&format!("{}/ui/notes/hostile.md", server.url));
    browser.wait_text("article.note", "Plain words stay.");
    for css in ["article.note a", "article.note div"] {
        browser.js(&format!(
            "document.querySelectorAll({}).forEach(e => {{ e.click(); e.dispatchEvent(new MouseEvent('mouseover', {{bubbles: true}})); }}); return true",
            json!(css)
        ));
    }
    std::thread::sleep(Duration::from_millis(300));
    let ran = browser.js(
        "return [typeof window.pwned, location.pathname, \
         document.querySelectorAll('article.note :is(script, svg, img, iframe, [onerror], [onload], [style])').length]",
    );
    assert_eq!(ran, json!(["undefined", "/ui/notes/hostile.md", 0]));

    // Obsidian: a callout, an embedded section, the title once, an outline,
    // a link to a heading, a footnote.
    browser.goto(&format!("{}/ui/notes/guide.md", server.url));
    browser.wait_text("article.note .embedded", "Beans.");
    assert_eq!(
        browser.text("article.note .callout-warning .callout-title"),
        "Mind the frost"
    );
    assert!(!browser.text("article.note").contains("[!warning]"));
    assert!(!browser
        .text("article.note .embedded")
        .contains("Plant tomatoes"));
    assert_eq!(
        browser.js("return document.querySelectorAll('main h1').length"),
        json!(1)
    );
    assert!(browser.text(".outline").contains("Far section"));
    browser.shot(&shots, "guide-desktop", 1280, 900);
    browser.shot(&shots, "guide-360", 360, 780);
    browser.click("article.note a[href*='#Far']");
    browser.wait("#h-far-section.target");
    assert!(
        browser.url().ends_with("/ui/notes/guide.md#Far%20section"),
        "{}",
        browser.url()
    );
    let y = browser.js("return window.scrollY").as_f64().unwrap();
    assert!(y > 500.0, "scrolled to {y}");
    browser.goto(&format!("{}/ui/notes/guide.md", server.url));
    browser.wait("article.note sup a");
    browser.js("window.scrollTo(0, 0); return true");
    browser.click("article.note sup a");
    std::thread::sleep(Duration::from_millis(300));
    let y = browser.js("return window.scrollY").as_f64().unwrap();
    assert!(y > 1000.0, "the footnote is far down: {y}");
    assert!(browser.text(".target").contains("The footnote text."));
    assert!(
        browser.url().contains("/ui/notes/guide.md#"),
        "{}",
        browser.url()
    );

    // Tags, a tag's notes, broken links and orphans.
    browser.click(".top nav a[data-view=tags]");
    browser.wait_text("main", "#garden");
    browser.click("main a.tag[href='/ui/tags/start']");
    browser.wait_text("main", "welcome.md");
    browser.goto(&format!("{}/ui/links", server.url));
    browser.wait_text("main table", "Missing note");
    assert!(browser.text("main").contains("todo.md"), "an orphan");

    // Runs: failures look like failures; a held-back reply sits under its own step.
    browser.click(".top nav a[data-view=runs]");
    browser.wait_text("main", "failed: max steps");
    browser.goto(&format!("{}/ui/runs/{held_id}", server.url));
    browser.wait_text(".step[aria-label='Step 2']", "Too early reply.");
    assert!(!browser
        .text(".step[aria-label='Step 3']")
        .contains("Too early reply."));
    // A contradicted reply: marked in the list, mirai's record above it in the run.
    browser.click(".top nav a[data-view=runs]");
    browser.wait_text("main", "replied, but the record contradicts the reply");
    assert!(browser.text("main").contains("Nothing was changed."));
    browser.goto(&format!("{}/ui/runs/{claimed_id}", server.url));
    browser.wait_text("main", "The record contradicts this reply");
    assert!(browser.text(".outcome").contains("Nothing was changed."));
    // mirai's opening look is shown as its own, before the model's steps.
    let look = browser.text(".step[aria-label=\"mirai's look\"]");
    assert!(
        look.contains("mirai ran this code itself, read-only") && look.contains("mirai.notes.read"),
        "{look}"
    );

    // Live updates keep what a person types; the live region speaks words.
    browser.goto(&format!("{}/ui/notes/todo.md", server.url));
    browser.wait_text("article.note", "buy bread");
    std::thread::sleep(Duration::from_millis(2000));
    browser.type_into("#search-input", "half typ");
    server.write("todo.md", "# Todo\n\n- buy jam\n");
    git(
        &server.root,
        &[
            "-c",
            "user.name=Ann",
            "-c",
            "user.email=ann@example.com",
            "commit",
            "-qam",
            "Jam",
        ],
    );
    browser.wait_text("article.note", "buy jam");
    assert_eq!(
        browser.js(
            "return [document.getElementById('search-input').value, document.activeElement.id]"
        ),
        json!(["half typ", "search-input"])
    );
    let said = browser.text("#live");
    assert!(said.contains("Ann changed todo.md"), "{said}");
    assert!(
        !said.contains("notes_changed") && !said.contains("commit"),
        "{said}"
    );

    // The status page: no artifact is not shown as good; dark mode is there.
    browser.goto(&format!("{}/ui/status", server.url));
    browser.wait_text("main", "State");
    let state = browser.js(
        "const dd = [...document.querySelectorAll('dl.kv dt')].find(d => d.textContent === 'State').nextElementSibling; \
         return [dd.textContent, dd.className]",
    );
    if state[0].as_str().unwrap().contains("no artifact") {
        assert_eq!(state[1], "warn", "{state}");
    }
    let dark = browser.js(
        "return [...document.styleSheets].some(s => [...s.cssRules].some(r => r.media && r.media.mediaText.includes('prefers-color-scheme: dark')))",
    );
    assert_eq!(dark, json!(true));
    drop(llm);
}

#[test]
fn index_query_answers_one_result_per_note_with_a_readable_passage() {
    let server = TestServer::start();
    let filler = "Plain words about the weather and nothing else at all. ".repeat(8);
    let section = "Plain words about the weather and nothing else at all. ".repeat(40);
    // One note matches in many sections; four others once each.
    let mut long = String::from("---\ntags: [garden, plans]\n---\n# Graph view\n\n");
    for i in 0..6 {
        long.push_str(&format!(
            "## Part {i}\n\n{section}The graph view shows links between notes.\n\n"
        ));
    }
    server.write("long.md", &long);
    for i in 0..4 {
        server.write(
            &format!("other{i}.md"),
            format!("# Other {i}\n\n{filler}A graph of note {i}, seen in a view.\n"),
        );
    }
    server.commit_all();
    let chunks = server.get("/mcp/index/query?q=graph%20view&limit=10");
    assert_eq!(chunks.status, 200, "{chunks:?}");
    let paths = |answer: &Value| -> Vec<String> {
        answer["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["metadata"]["path"].as_str().unwrap().to_string())
            .collect()
    };
    // Without group, chunks as before: the long note's chunks crowd the answer.
    assert!(
        paths(&chunks.body)
            .iter()
            .filter(|p| *p == "long.md")
            .count()
            > 1
    );
    assert!(chunks.body["chunks"][0].get("context").is_none());
    let notes = server.get("/mcp/index/query?q=graph%20view&limit=10&group=note");
    assert_eq!(notes.status, 200, "{notes:?}");
    let found = paths(&notes.body);
    let mut distinct = found.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(found.len(), 5, "{found:?}");
    assert_eq!(distinct.len(), 5, "one entry per note: {found:?}");
    let first = &notes.body["chunks"][0];
    assert_eq!(first["metadata"]["path"], "long.md", "{first}");
    let all = server.get("/mcp/index/query?q=graph%20view&limit=50");
    let long_chunks = paths(&all.body).iter().filter(|p| *p == "long.md").count();
    assert!(long_chunks >= 6, "{long_chunks}");
    assert_eq!(first["other_chunks"], long_chunks - 1, "{first}");
    assert_eq!(first["metadata"]["tags"], json!(["garden", "plans"]));
    for entry in notes.body["chunks"].as_array().unwrap() {
        let context = &entry["context"];
        let text: Vec<char> = context["text"].as_str().unwrap().chars().collect();
        let whole = entry["content"].as_str().unwrap().chars().count();
        assert!(
            text.len() <= 240 && (whole < 240 || text.len() >= 100),
            "{} chars: {context}",
            text.len()
        );
        let marked: Vec<String> = context["terms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let (s, e) = (
                    t["start"].as_u64().unwrap() as usize,
                    t["end"].as_u64().unwrap() as usize,
                );
                text[s..e].iter().collect::<String>().to_lowercase()
            })
            .collect();
        assert!(
            marked.contains(&"graph".to_string()),
            "{marked:?} {context}"
        );
        assert!(marked.contains(&"view".to_string()), "{marked:?} {context}");
        // Whole words at both ends.
        let content: Vec<char> = entry["content"].as_str().unwrap().chars().collect();
        let (start, end) = (
            context["start"].as_u64().unwrap() as usize,
            context["end"].as_u64().unwrap() as usize,
        );
        assert!(
            start == 0 || !content[start - 1].is_alphanumeric(),
            "{context}"
        );
        assert!(
            end == content.len() || !content[end].is_alphanumeric(),
            "{context}"
        );
        assert!(entry["other_chunks"].is_u64());
    }
    // The passage of a section's chunk names its heading.
    let part = server.get("/mcp/index/query?q=graph%20view&group=note&path_prefix=long.md");
    assert_eq!(paths(&part.body), ["long.md"]);
    // limit and offset count notes.
    let page = server.get("/mcp/index/query?q=graph%20view&limit=2&offset=2&group=note");
    assert_eq!(paths(&page.body), found[2..4].to_vec());
    let chunked = server.get("/mcp/index/query?q=graph%20view&group=chunk&limit=10");
    assert_eq!(paths(&chunked.body), paths(&chunks.body));
    for bad in ["notes", "1", ""] {
        server
            .get(&format!("/mcp/index/query?q=graph&group={bad}"))
            .assert_error(400, "invalid_request");
    }
}

/// A browser window's handle, opening `url` in a new tab of the session.
fn open_tab(browser: &Browser, url: &str) -> fantoccini::wd::WindowHandle {
    let tab = browser
        .runtime
        .block_on(browser.c().new_window(true))
        .unwrap();
    browser
        .runtime
        .block_on(browser.c().switch_to_window(tab.handle.clone()))
        .unwrap();
    browser.goto(url);
    tab.handle
}

#[test]
fn ten_tabs_share_one_change_stream_and_the_token() {
    let browser = match Browser::start() {
        Ok(browser) => browser,
        Err(why) => {
            println!("SKIPPED: the browser test needs chromium and chromedriver: {why}");
            return;
        }
    };
    // A browser opens six connections per host: ten tabs that each held a
    // stream would leave the seventh waiting for ever.
    let server = TestServer::start_with(|c| c.api_token = Some(TOKEN.into()));
    server.write("welcome.md", WELCOME);
    server.write("garden/plans.md", PLANS);
    server.write("todo.md", TODO);
    server.commit_all();
    browser.goto(&format!("{}/ui/notes/todo.md", server.url));
    browser.wait("#token-dialog[open]");
    browser.type_into("#token-input", TOKEN);
    browser.click("#token-form button[type=submit]");
    browser.wait_text("article.note", "buy milk");
    let first = browser.runtime.block_on(browser.c().window()).unwrap();
    let views = [
        "/ui/notes/",
        "/ui/notes/welcome.md",
        "/ui/notes/garden/plans.md",
        "/ui/history/todo.md",
        "/ui/search?q=milk",
        "/ui/runs",
        "/ui/proposals",
        "/ui/status",
        "/ui/tags",
    ];
    let mut tabs = vec![first];
    for view in views {
        tabs.push(open_tab(&browser, &format!("{}{view}", server.url)));
        // Each renders, with the token the first tab was given (no dialog).
        browser.wait("main h1");
        assert!(
            !browser.text("main").contains("Loading"),
            "{view}: {}",
            browser.text("main")
        );
        let asked = browser.js("return document.getElementById('token-dialog').open");
        assert_eq!(asked, json!(false), "{view} asked for the token again");
    }
    // Every tab is past its first look before the change.
    std::thread::sleep(Duration::from_millis(1500));
    server.write("todo.md", "# Todo\n\n- buy bread\n");
    git(
        &server.root,
        &[
            "-c",
            "user.name=Ann",
            "-c",
            "user.email=ann@example.com",
            "commit",
            "-qam",
            "Bread",
        ],
    );
    let committed = Instant::now();
    let mut waiting: Vec<_> = tabs.clone();
    while !waiting.is_empty() {
        waiting.retain(|tab| {
            browser
                .runtime
                .block_on(browser.c().switch_to_window(tab.clone()))
                .unwrap();
            !browser.text("#live").contains("Ann changed todo.md")
        });
        assert!(
            committed.elapsed() < Duration::from_millis(2000) || waiting.is_empty(),
            "{} of 10 tabs did not show the commit within 2 s",
            waiting.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The open note and its history follow the commit too.
    browser
        .runtime
        .block_on(browser.c().switch_to_window(tabs[0].clone()))
        .unwrap();
    browser.wait_text("article.note", "buy bread");
    browser
        .runtime
        .block_on(browser.c().switch_to_window(tabs[4].clone()))
        .unwrap();
    browser.wait_text("main", "Bread");
    // Closing every tab but one leaves the stream working for the last.
    for tab in &tabs[1..] {
        browser
            .runtime
            .block_on(browser.c().switch_to_window(tab.clone()))
            .unwrap();
        browser
            .runtime
            .block_on(browser.c().close_window())
            .unwrap();
    }
    browser
        .runtime
        .block_on(browser.c().switch_to_window(tabs[0].clone()))
        .unwrap();
    server.write("todo.md", "# Todo\n\n- buy cheese\n");
    git(
        &server.root,
        &[
            "-c",
            "user.name=Ann",
            "-c",
            "user.email=ann@example.com",
            "commit",
            "-qam",
            "Cheese",
        ],
    );
    browser.wait_text("article.note", "buy cheese");
}

#[test]
fn a_tab_without_a_stream_polls() {
    let browser = match Browser::start() {
        Ok(browser) => browser,
        Err(why) => {
            println!("SKIPPED: the browser test needs chromium and chromedriver: {why}");
            return;
        }
    };
    // No stream at all for this browser: every tab falls back to polling within 2 s.
    let server = TestServer::start_with(|c| c.events.max_clients = 0);
    server.write("todo.md", TODO);
    server.commit_all();
    browser.goto(&format!("{}/ui/notes/todo.md", server.url));
    browser.wait_text("article.note", "buy milk");
    std::thread::sleep(Duration::from_millis(2500));
    server.write("todo.md", "# Todo\n\n- buy bread\n");
    server.commit_all();
    browser.wait_text("article.note", "buy bread");
}

/// Attachments served by `files.read` never run as a page of mirai's origin:
/// an HTML page named `.png`, an SVG with a script and a PDF, opened straight
/// in the browser, run no script (none of them manages to write a note with
/// the page's own `fetch`, nor to set the title), and SVG and PDF are
/// downloads, never shown.
#[test]
fn hostile_attachments_never_run_as_a_page_of_mirai() {
    let browser = match Browser::start() {
        Ok(browser) => browser,
        Err(why) => {
            println!("SKIPPED: the browser test needs chromium and chromedriver: {why}");
            return;
        }
    };
    let server = TestServer::with_note("a.md", "# A\n");
    let attack = |name: &str| {
        format!(
            "document.title = 'pwned {name}'; fetch('/mcp/notes/write', {{method: 'POST', \
             headers: {{'content-type': 'application/json'}}, \
             body: JSON.stringify({{path: 'pwned-{name}.md', content: 'x'}})}})"
        )
    };
    server.write(
        "evil.png",
        format!(
            "<html><body><h1>page</h1><script>{}</script></body></html>",
            attack("png")
        ),
    );
    server.write(
        "evil.svg",
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"{}\"><script>{}</script><text y=\"20\">svg</text></svg>",
            attack("svg-onload").replace('"', "&quot;"),
            attack("svg")
        ),
    );
    server.write(
        "evil.pdf",
        "%PDF-1.4\n1 0 obj << /Type /Catalog /OpenAction << /S /JavaScript /JS (app.alert(1)) >> >> endobj\n",
    );
    server.commit_all();
    for name in ["evil.png", "evil.svg", "evil.pdf"] {
        browser.goto(&format!("{}/ui", server.url));
        browser.goto(&format!("{}/mcp/files/read?path={name}", server.url));
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            !browser.title().contains("pwned"),
            "{name}: {}",
            browser.title()
        );
        if name == "evil.png" {
            // Shown as an image (nosniff): the browser's image document, no script, no heading.
            let kind = browser.js(
                "return [document.contentType, document.querySelectorAll('script, h1').length]",
            );
            assert_eq!(kind, json!(["image/png", 0]), "{name}");
        } else {
            // A download: the browser stays on the page it was on.
            assert!(browser.url().contains("/ui"), "{name}: {}", browser.url());
        }
    }
    let shots = std::env::var_os("MIRAI_PAGE_SHOTS").map(PathBuf::from);
    browser.goto(&format!("{}/mcp/files/read?path=evil.png", server.url));
    browser.shot(&shots, "hostile-png", 800, 600);
    std::thread::sleep(Duration::from_millis(500));
    let notes = server.get("/mcp/notes").body;
    assert!(!notes.to_string().contains("pwned"), "{notes}");
}

/// A PNG of `width` x `height`: the left half red, the right half blue.
fn png(width: u32, height: u32) -> Vec<u8> {
    use std::io::Write;
    // Each row: filter byte 0, then the pixels.
    let mut row = vec![0u8];
    for x in 0..width {
        row.extend_from_slice(if x < width / 2 {
            &[220, 40, 40]
        } else {
            &[40, 80, 220]
        });
    }
    let raw = row.repeat(height as usize);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&raw).unwrap();
    let data = z.finish().unwrap();
    let chunk = |out: &mut Vec<u8>, kind: &[u8], body: &[u8]| {
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(kind);
        crc.update(body);
        out.extend_from_slice(kind);
        out.extend_from_slice(body);
        out.extend_from_slice(&crc.finalize().to_be_bytes());
    };
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"IDAT", &data);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// A note's vault image is fetched with the token and shown from a blob:
/// URL; a PDF and an SVG are download links; a remote image is never loaded.
#[test]
fn the_page_shows_vault_images_and_offers_other_files_as_downloads() {
    let browser = match Browser::start() {
        Ok(browser) => browser,
        Err(why) => {
            println!("SKIPPED: the browser test needs chromium and chromedriver: {why}");
            return;
        }
    };
    let shots = std::env::var_os("MIRAI_PAGE_SHOTS").map(PathBuf::from);
    let server = TestServer::start_with(|c| c.api_token = Some(TOKEN.into()));
    server.write(
        "pics.md",
        "# Pictures\n\n![[chart.png]]\n\nThe [report](docs/report.pdf) and ![plot](plot.svg).\n\n\
         ![remote](https://example.com/x.png)\n",
    );
    server.write("assets/chart.png", png(240, 80));
    server.write("docs/report.pdf", "%PDF-1.4\n");
    server.write("plot.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>");
    server.commit_all();
    browser.goto(&format!("{}/ui/notes/pics.md", server.url));
    browser.wait("#token-dialog[open]");
    browser.type_into("#token-input", TOKEN);
    browser.click("#token-form button[type=submit]");
    browser.wait("article.note img.vault-image");
    let started = Instant::now();
    let shown = loop {
        let shown = browser.js(
            "const i = document.querySelector('article.note img.vault-image'); \
             return [i.src.slice(0, 5), i.complete, i.naturalWidth, i.alt]",
        );
        if shown[2] != json!(0) || started.elapsed() > Duration::from_secs(10) {
            break shown;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(shown, json!(["blob:", true, 240, "chart.png"]));
    let links = browser.js(
        "return [...document.querySelectorAll('article.note a.file-download')].map(a => a.textContent)",
    );
    assert_eq!(links, json!(["report", "plot"]));
    let remote = browser.js(
        "return [document.querySelectorAll('article.note img').length, \
         document.querySelector('article.note span.embed').textContent]",
    );
    assert_eq!(remote, json!([1, "remote"]));
    browser.shot(&shots, "vault-image", 1000, 700);
}

/// A note's "Attach file" control: a labelled file input; the chosen PNG is
/// uploaded beside the note as a raw body with the token, a name already
/// taken is the server's conflict with the next name offered, the bytes are
/// in HEAD and the note unchanged until the embed is confirmed, and then the
/// image shows in the note.
#[test]
fn a_file_attached_on_the_page_is_committed_and_embedded_once_confirmed() {
    let browser = match Browser::start() {
        Ok(browser) => browser,
        Err(why) => {
            println!("SKIPPED: the browser test needs chromium and chromedriver: {why}");
            return;
        }
    };
    let shots = std::env::var_os("MIRAI_PAGE_SHOTS").map(PathBuf::from);
    let server = TestServer::start_with(|c| c.api_token = Some(TOKEN.into()));
    let note = "# Trip\n\nThe route.\n";
    server.write("travel/trip.md", note);
    server.write("travel/map.png", png(10, 10));
    server.commit_all();
    let chosen = tempfile::tempdir().unwrap();
    let picture = png(180, 60);
    let file = chosen.path().join("map.png");
    std::fs::write(&file, &picture).unwrap();

    browser.goto(&format!("{}/ui/notes/travel/trip.md", server.url));
    browser.wait("#token-dialog[open]");
    browser.type_into("#token-input", TOKEN);
    browser.click("#token-form button[type=submit]");
    browser.wait("#attach-file");
    let control = browser.js(
        "const i = document.querySelector('#attach-file'); i.focus(); \
         return [i.type, i.labels[0].textContent, document.activeElement === i, i.tabIndex >= 0]",
    );
    assert_eq!(control, json!(["file", "Attach file", true, true]));
    browser.type_into("#attach-file", &file.display().to_string());
    assert_eq!(
        browser.js("return document.querySelector('#attach-name').value"),
        json!("map.png")
    );
    let head = server.head();

    // travel/map.png is taken: the server's conflict, and the next name offered.
    browser.click("#attach-upload");
    let said = browser.wait_text(".attach-status .error", "already exists");
    assert!(said.contains("choose another name"), "{said}");
    assert_eq!(server.head(), head, "nothing was written");
    browser.shot(&shots, "attach-clash", 1280, 900);
    assert_eq!(
        std::fs::read(server.root.join("travel/map.png")).unwrap(),
        png(10, 10)
    );
    browser.click("#attach-rename");
    assert_eq!(
        browser.js("return document.querySelector('#attach-name').value"),
        json!("map-2.png")
    );
    browser.click("#attach-upload");
    browser.wait_text(".attach-status", "Uploaded travel/map-2.png");
    browser.wait("#attach-insert");
    assert_ne!(server.head(), head);
    let in_head = std::process::Command::new("git")
        .arg("-C")
        .arg(&server.root)
        .args(["cat-file", "blob", "HEAD:travel/map-2.png"])
        .output()
        .unwrap()
        .stdout;
    assert_eq!(in_head, picture, "the chosen file's bytes are in HEAD");
    assert_eq!(
        git(&server.root, &["log", "-1", "--format=%s"]).trim(),
        "mcp.files_write: travel/map-2.png"
    );
    assert_eq!(
        std::fs::read_to_string(server.root.join("travel/trip.md")).unwrap(),
        note,
        "the note is unchanged until the embed is confirmed"
    );
    browser.shot(&shots, "attach-offer", 1280, 900);
    browser.shot(&shots, "attach-offer-narrow", 360, 900);

    browser.click("#attach-insert");
    browser.wait("article.note img.vault-image");
    let started = Instant::now();
    let shown = loop {
        let shown = browser.js(
            "const i = document.querySelector('article.note img.vault-image'); \
             return [i.src.slice(0, 5), i.naturalWidth, i.alt]",
        );
        if shown[1] != json!(0) || started.elapsed() > Duration::from_secs(10) {
            break shown;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(shown, json!(["blob:", 180, "map-2.png"]));
    assert_eq!(
        std::fs::read_to_string(server.root.join("travel/trip.md")).unwrap(),
        format!("{note}\n![[map-2.png]]\n")
    );
    browser.shot(&shots, "attach-embedded", 1280, 900);
}

/// With named callers (MIRAI_CALLERS_FILE), the page says who wrote each
/// commit of a note's history and of the first page's latest changes, who
/// asked for each proposal and who decided it, and who started each run.
#[test]
fn the_page_names_the_callers_who_wrote_asked_and_decided() {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::PermissionsExt;
    let browser = match Browser::start() {
        Ok(browser) => browser,
        Err(why) => {
            println!("SKIPPED: the browser test needs chromium and chromedriver: {why}");
            return;
        }
    };
    let shots = std::env::var_os("MIRAI_PAGE_SHOTS").map(PathBuf::from);
    let hash = |token: &str| -> String {
        Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("callers.toml");
    std::fs::write(
        &file,
        format!(
            "[[caller]]\nname = \"ann\"\nemail = \"ann@example.org\"\ntoken_sha256 = \"{}\"\n\
             can = [\"read\", \"write\"]\n\n\
             [[caller]]\nname = \"research-bot\"\ntoken_sha256 = \"{}\"\ncan = [\"read\", \"propose\"]\n\
             paths = [\"inbox/\"]\n\n\
             [[caller]]\nname = \"boss\"\ntoken_sha256 = \"{}\"\ncan = [\"read\", \"review\"]\n",
            hash("ann-token"),
            hash("bot-token"),
            hash("boss-token")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let llm = FakeLlm::start(Script::answering(&[
        r#"<think>Look.</think><code>return (await mirai.notes.list({})).notes;</code>"#.into(),
        "<think>Listed.</think><reply>There are two notes.</reply>".into(),
    ]));
    let base_url = llm.base_url.clone();
    let root = dir.path().join("notes");
    let server = TestServer::start_in(dir, root, |c: &mut Config| {
        c.callers_file = Some(file);
        c.llm.base_url = base_url;
        c.llm.model = "fake-model".into();
    });
    server.write("todo.md", TODO);
    server.commit_all();
    let send = |token: &str, path: &str, body: Value| {
        let answer = server
            .raw()
            .post(format!("{}{path}", server.url))
            .bearer_auth(token)
            .json(&body)
            .send()
            .unwrap();
        let status = answer.status().as_u16();
        (status, answer.json::<Value>().unwrap())
    };
    let (status, _) = send(
        "ann-token",
        "/mcp/notes/append",
        json!({"path": "todo.md", "text": "- call the plumber\n"}),
    );
    assert_eq!(status, 200);
    let (status, asked) = send(
        "bot-token",
        "/mcp/notes/write",
        json!({"path": "inbox/ideas.md", "content": "# Ideas\n\nA greenhouse.\n"}),
    );
    assert_eq!(status, 202, "{asked}");
    let approved_id = asked["proposal"].as_str().unwrap().to_string();
    let (status, _) = send(
        "boss-token",
        "/mcp/proposals/approve",
        json!({"id": approved_id}),
    );
    assert_eq!(status, 200);
    let (status, asked) = send(
        "bot-token",
        "/mcp/notes/write",
        json!({"path": "inbox/later.md", "content": "Later.\n"}),
    );
    assert_eq!(status, 202, "{asked}");
    let rejected_id = asked["proposal"].as_str().unwrap().to_string();
    let (status, _) = send(
        "boss-token",
        "/mcp/proposals/reject",
        json!({"id": rejected_id, "reason": "not now"}),
    );
    assert_eq!(status, 200);
    let (status, run) = send(
        "ann-token",
        "/agent/run",
        json!({"task": "Which notes are there?"}),
    );
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();

    browser.goto(&format!("{}/", server.url));
    browser.wait("#token-dialog[open]");
    browser.type_into("#token-input", "boss-token");
    browser.click("#token-form button[type=submit]");
    // The first page: the latest changes by the callers who made them.
    let latest = browser.wait_text("section[aria-label='Latest changes']", "research-bot");
    assert!(latest.contains("ann"), "{latest}");
    browser.wait_text("section[aria-label='Latest agent runs']", "started by ann");
    browser.shot(&shots, "callers-home", 1280, 900);

    // A note's history: each commit by its caller.
    browser.goto(&format!("{}/ui/history/todo.md", server.url));
    let history = browser.wait_text(".commit", "by ann");
    assert!(!history.contains("by mirai"), "{history}");
    browser.goto(&format!("{}/ui/history/inbox/ideas.md", server.url));
    browser.wait_text(".commit", "by research-bot");
    browser.shot(&shots, "callers-history", 1280, 900);

    // Proposals: who asked, who decided.
    browser.goto(&format!("{}/ui/proposals", server.url));
    let cards = browser.wait_text(".proposal-card", "research-bot");
    let all = browser.wait_text("main", "rejected by boss");
    assert!(all.contains("approved by boss"), "{all}");
    assert!(
        cards.contains("research-bot through an HTTP caller"),
        "{cards}"
    );
    browser.shot(&shots, "callers-proposals", 1280, 900);
    browser.goto(&format!(
        "{}/ui/proposals/{}",
        server.url,
        encode(&approved_id)
    ));
    let shown = browser.wait_text(".proposal", "by boss");
    assert!(
        shown.contains("research-bot through an HTTP caller"),
        "{shown}"
    );
    assert!(shown.contains("mcp.patch_apply: inbox/ideas.md"), "{shown}");
    browser.shot(&shots, "callers-proposal", 1280, 900);

    // Runs: who started each.
    browser.goto(&format!("{}/ui/runs", server.url));
    browser.wait_text("main", "started by ann");
    browser.goto(&format!("{}/ui/runs/{}", server.url, encode(&run_id)));
    let shown = browser.wait_text(".run", "Started by");
    assert!(shown.contains("ann"), "{shown}");
}
