//! Notes as a vault, through HTTP on real repositories: links and their
//! resolution (`notes.links`, `notes.graph`), kept fresh by writes and by
//! outside changes; outlines, section and line reads with token counts;
//! front matter; tags (`notes.tags`, `tag=` on `notes.list` and
//! `index.query`). The Obsidian-style vault in `fixtures/vault/` is served
//! as a repository.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{encode, TestServer};
use serde_json::{json, Value};

/// A server over a copy of `fixtures/vault`, committed (the welcome note
/// a new root starts with taken out).
fn vault() -> TestServer {
    let server = TestServer::start();
    std::fs::remove_file(server.root.join("welcome.md")).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/vault");
    for entry in walkdir::WalkDir::new(&fixture) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(&fixture).unwrap();
            server.write(rel.to_str().unwrap(), std::fs::read(entry.path()).unwrap());
        }
    }
    server.commit_all();
    server
}

fn links(server: &TestServer, path: &str) -> Value {
    let answer = server.get(&format!("/mcp/notes/links?path={}", encode(path)));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body
}

/// (target, resolved, line, kind, text) of each outgoing link.
fn outgoing(body: &Value) -> Vec<(String, Value, u64, String, String)> {
    body["outgoing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["target"].as_str().unwrap().to_string(),
                l["resolved"].clone(),
                l["line"].as_u64().unwrap(),
                l["kind"].as_str().unwrap().to_string(),
                l["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn link(
    target: &str,
    resolved: Option<&str>,
    line: u64,
    kind: &str,
    text: &str,
) -> (String, Value, u64, String, String) {
    (
        target.to_string(),
        resolved.map_or(Value::Null, |r| json!(r)),
        line,
        kind.to_string(),
        text.to_string(),
    )
}

fn backlinks(server: &TestServer, path: &str) -> Vec<(String, u64)> {
    links(server, path)["backlinks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["path"].as_str().unwrap().to_string(),
                b["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn every_link_form_resolves_as_obsidian_resolves_it() {
    let server = vault();
    let home = links(&server, "Home.md");
    assert_eq!(home["path"], "Home.md");
    assert_eq!(
        outgoing(&home),
        vec![
            // Two equally short `Alpha`s, neither in the root: the first by bytes.
            link("Alpha", Some("Archive/Alpha.md"), 9, "wikilink", "Alpha"),
            link(
                "Projects/Beta",
                Some("Projects/Beta.md"),
                9,
                "wikilink",
                "the beta project"
            ),
            // The root's Gamma is shorter than Projects/Gamma.md.
            link("Gamma#Plan", Some("Gamma.md"), 10, "wikilink", "Gamma#Plan"),
            link(
                "Ann Lee#^quote",
                Some("People/Ann Lee.md"),
                10,
                "wikilink",
                "Ann Lee#^quote"
            ),
            link("HOME", Some("Home.md"), 10, "wikilink", "HOME"),
            link(
                "diagram.png",
                Some("attachments/diagram.png"),
                11,
                "embed",
                "diagram.png"
            ),
            link("Nowhere", None, 12, "wikilink", "Nowhere"),
            link(
                "Projects/Beta.md#Notes",
                Some("Projects/Beta.md"),
                13,
                "markdown",
                "beta"
            ),
            link(
                "People/Ann Lee.md",
                Some("People/Ann Lee.md"),
                13,
                "markdown",
                "ann"
            ),
            link(
                "People/Ann Lee.md",
                Some("People/Ann Lee.md"),
                14,
                "markdown",
                "ann again"
            ),
        ],
        "code, external URLs and mailto are not links"
    );

    let beta = links(&server, "Projects/Beta.md");
    assert_eq!(
        outgoing(&beta),
        vec![
            // A tie in length goes to the linking note's own folder.
            link("Alpha", Some("Projects/Alpha.md"), 9, "wikilink", "Alpha"),
            // Length goes first: the root's gamma beats the one beside it; case is ignored.
            link("gamma", Some("Gamma.md"), 9, "wikilink", "gamma"),
            link("../Home.md", Some("Home.md"), 10, "markdown", "home"),
            link(
                "Alpha.md#Plan",
                Some("Projects/Alpha.md"),
                10,
                "markdown",
                "alpha plan"
            ),
            link(
                "../People/Ann Lee.md",
                Some("People/Ann Lee.md"),
                10,
                "markdown",
                "ann"
            ),
            link(
                "../attachments/diagram.png",
                Some("attachments/diagram.png"),
                11,
                "embed",
                "d"
            ),
        ]
    );

    assert_eq!(
        backlinks(&server, "People/Ann Lee.md"),
        [
            ("Daily/2024-01-01.md".to_string(), 6),
            ("Home.md".to_string(), 10),
            ("Home.md".to_string(), 13),
            ("Home.md".to_string(), 14),
            ("Projects/Beta.md".to_string(), 10),
        ]
    );
    let back = links(&server, "Projects/Alpha.md");
    assert_eq!(back["backlinks"][0]["path"], "Projects/Beta.md");
    assert_eq!(
        back["backlinks"][0]["context"],
        "Own folder first: [[Alpha]]. Shortest path first: [[gamma]]."
    );
    assert_eq!(back["backlinks"].as_array().unwrap().len(), 2);
}

#[test]
fn a_missing_or_bad_path_and_a_long_line_get_the_usual_answers() {
    let server = vault();
    server
        .get("/mcp/notes/links?path=Nope.md")
        .assert_error(404, "not_found");
    server
        .get("/mcp/notes/links?path=../x.md")
        .assert_error(400, "invalid_path");
    server
        .get("/mcp/notes/links")
        .assert_error(400, "invalid_request");
    let long = format!("{} [[Gamma]] {}\n", "x".repeat(300), "y".repeat(300));
    server.write("Long line.md", &long);
    server.commit_all();
    let back = wait_for(&server, "Gamma.md", |b| {
        b.iter().any(|(p, _)| p == "Long line.md")
    });
    assert!(!back.is_empty());
    let body = links(&server, "Gamma.md");
    let context = body["backlinks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["path"] == "Long line.md")
        .unwrap()["context"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(context.chars().count(), 200);
    assert!(context.starts_with("xxx"));
}

/// Polls `path`'s backlinks until `done` holds (outside changes arrive within seconds).
fn wait_for(
    server: &TestServer,
    path: &str,
    done: impl Fn(&[(String, u64)]) -> bool,
) -> Vec<(String, u64)> {
    let started = Instant::now();
    loop {
        let back = backlinks(server, path);
        if done(&back) {
            return back;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "backlinks of {path} never became as expected: {back:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_graph_follows_writes_and_outside_changes() {
    let server = vault();
    assert_eq!(backlinks(&server, "Gamma.md").len(), 2);
    // A write through mirai is in the graph when it answers.
    let written = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "new/linker.md", "content": "to [[Gamma]] and [[Projects/Gamma]]\n"}),
    );
    assert_eq!(written.status, 200, "{written:?}");
    assert!(backlinks(&server, "Gamma.md").contains(&("new/linker.md".to_string(), 1)));
    assert_eq!(
        backlinks(&server, "Projects/Gamma.md"),
        [("new/linker.md".to_string(), 1)]
    );

    // A note made beside mirai (an editor, a pull) is taken in within seconds.
    server.write("outside.md", "from outside: [[Gamma]]\n");
    wait_for(&server, "Gamma.md", |b| {
        b.iter().any(|(p, _)| p == "outside.md")
    });

    // A deleted note's links go with it; links to it become broken.
    let deleted = server.post_json("/mcp/notes/delete", &json!({"path": "Projects/Gamma.md"}));
    assert_eq!(deleted.status, 200, "{deleted:?}");
    let graph = server.get("/mcp/notes/graph?limit=1000").body;
    let broken: Vec<(String, String)> = graph["broken"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["path"].as_str().unwrap().to_string(),
                b["target"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        broken,
        [
            ("Home.md".to_string(), "Nowhere".to_string()),
            ("new/linker.md".to_string(), "Projects/Gamma".to_string()),
        ]
    );
    // An attachment added beside mirai resolves once the vault sees it.
    server.write("img/late.png", [0u8, 1, 2]);
    server.write("pics.md", "![[late.png]]\n");
    let started = Instant::now();
    loop {
        let out = links(&server, "pics.md");
        if out["outgoing"][0]["resolved"] == "img/late.png" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "{out}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A note's own links are its text's as it is now: the graph's copy of them
/// is used only while it holds that very text. Each change keeps the note's
/// size, so only its content tells the versions apart.
#[test]
fn a_notes_own_links_are_its_text_now_after_writes_and_outside_edits() {
    let server = vault();
    let write = |content: &str| {
        let written = server.post_json(
            "/mcp/notes/write",
            &json!({"path": "probe.md", "content": content}),
        );
        assert_eq!(written.status, 200, "{written:?}");
    };
    let first = |body: &Value| -> (String, Value) {
        let (target, resolved, ..) = outgoing(body).remove(0);
        (target, resolved)
    };
    let linked_from_probe = |to: &str| backlinks(&server, to).iter().any(|(p, _)| p == "probe.md");
    write("see [[Gamma]]\n");
    assert_eq!(
        first(&links(&server, "probe.md")),
        ("Gamma".to_string(), json!("Gamma.md"))
    );
    // Written through mirai again: the graph has the new text when it answers.
    write("see [[Alpha]]\n");
    assert_eq!(
        first(&links(&server, "probe.md")),
        ("Alpha".to_string(), json!("Archive/Alpha.md"))
    );
    assert!(linked_from_probe("Archive/Alpha.md"));
    assert!(!linked_from_probe("Gamma.md"));
    // Changed beside mirai: answered from the new text at once, before the
    // graph takes the change in; then the backlinks follow.
    server.write("probe.md", "see [[Gamma]]\n");
    assert_eq!(
        first(&links(&server, "probe.md")),
        ("Gamma".to_string(), json!("Gamma.md"))
    );
    wait_for(&server, "Gamma.md", |b| {
        b.iter().any(|(p, _)| p == "probe.md")
    });
    assert!(!linked_from_probe("Archive/Alpha.md"));
    assert_eq!(first(&links(&server, "probe.md")).0, "Gamma");
}

#[test]
fn the_graph_pages_broken_links_then_orphans() {
    let server = vault();
    for i in 0..3 {
        server.write(
            &format!("lonely/{i}.md"),
            format!("no links {i}, one [[gone{i}]]\n"),
        );
    }
    server.write("lonely/quiet.md", "nothing at all\n");
    server.commit_all();
    let started = Instant::now();
    let whole = loop {
        let whole = server.get("/mcp/notes/graph").body;
        if whole["orphans"].as_array().unwrap().len() == 5 {
            break whole;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "{whole}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(whole["next_cursor"], Value::Null);
    // Sorted by bytes, as every path list is.
    assert_eq!(
        whole["orphans"],
        json!([
            "Projects/Gamma.md",
            "lonely/0.md",
            "lonely/1.md",
            "lonely/2.md",
            "lonely/quiet.md"
        ])
    );
    assert_eq!(whole["broken"].as_array().unwrap().len(), 4);
    assert_eq!(
        whole["broken"][0],
        json!({"path": "Home.md", "line": 12, "target": "Nowhere"})
    );

    // Pages of 3 hold the same entries, in the same order.
    let (mut broken, mut orphans) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = match &cursor {
            Some(c) => format!("/mcp/notes/graph?limit=3&cursor={}", encode(c)),
            None => "/mcp/notes/graph?limit=3".to_string(),
        };
        let page = server.get(&query);
        assert_eq!(page.status, 200, "{page:?}");
        let got = page.body["broken"].as_array().unwrap().len()
            + page.body["orphans"].as_array().unwrap().len();
        assert!(got <= 3);
        broken.extend(page.body["broken"].as_array().unwrap().clone());
        orphans.extend(page.body["orphans"].as_array().unwrap().clone());
        pages += 1;
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(Value::Array(broken), whole["broken"]);
    assert_eq!(Value::Array(orphans), whole["orphans"]);

    server
        .get("/mcp/notes/graph?cursor=nonsense")
        .assert_error(400, "invalid_request");
    server
        .get("/mcp/notes/graph?limit=0")
        .assert_error(400, "invalid_limit");
}

const GARDEN: &str = "---\ntitle: G\n---\n# Garden\n\n## Plans\n\nMore herbs.\n\n```sh\n# not a heading\n```\n\n## Tomatoes\n\nStake them.\n\n### Plans\n\nCages.\n";

fn read(server: &TestServer, query: &str) -> common::Answer {
    server.get(&format!("/mcp/notes/read?path=garden.md{query}"))
}

#[test]
fn the_outline_lists_headings_outside_code_with_their_sections() {
    let server = TestServer::with_note("garden.md", GARDEN);
    let outline = server.get("/mcp/notes/outline?path=garden.md");
    assert_eq!(outline.status, 200, "{outline:?}");
    let whole = read(&server, "");
    assert_eq!(
        outline.body,
        json!({
            "path": "garden.md",
            "headings": [
                {"level": 1, "text": "Garden", "line": 4, "line_end": 20},
                {"level": 2, "text": "Plans", "line": 6, "line_end": 13},
                {"level": 2, "text": "Tomatoes", "line": 14, "line_end": 20},
                {"level": 3, "text": "Plans", "line": 18, "line_end": 20},
            ],
            "line_count": 20,
            "tokens": whole.body["tokens"],
        })
    );
    assert!(whole.body["tokens"].as_u64().unwrap() > 20);
    assert_eq!(whole.body["line_count"], 20);
    assert_eq!(whole.body["content"], GARDEN);
    assert!(whole.body.get("line_start").is_none());
    server
        .get("/mcp/notes/outline?path=missing.md")
        .assert_error(404, "not_found");
}

#[test]
fn a_section_read_answers_its_lines_and_names_what_is_wrong() {
    let server = TestServer::with_note("garden.md", GARDEN);
    let nested = read(&server, "&section=Tomatoes%20%3E%20plans");
    assert_eq!(nested.status, 200, "{nested:?}");
    assert_eq!(nested.body["content"], "### Plans\n\nCages.\n");
    assert_eq!(nested.body["line_start"], 18);
    assert_eq!(nested.body["line_end"], 20);
    assert_eq!(nested.body["line_count"], 20);
    let tokens = nested.body["tokens"].as_u64().unwrap();
    assert!((3..10).contains(&tokens), "{tokens}");

    let top = read(&server, "&section=Garden%20%3E%20Plans");
    assert_eq!(
        top.body["content"],
        "## Plans\n\nMore herbs.\n\n```sh\n# not a heading\n```\n\n"
    );

    let ambiguous = read(&server, "&section=Plans");
    ambiguous.assert_error(409, "conflict");
    let message = ambiguous.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"Garden > Plans\" (line 6)")
            && message.contains("\"Garden > Tomatoes > Plans\" (line 18)"),
        "{message}"
    );
    let missing = read(&server, "&section=Potatoes");
    missing.assert_error(404, "not_found");
    let message = missing.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Its headings: \"Garden\", \"Garden > Plans\""),
        "{message}"
    );
    read(&server, "&section=not%20a%20heading").assert_error(404, "not_found");

    // At a commit, too.
    let at_head = read(&server, "&rev=HEAD~0&section=Tomatoes");
    assert_eq!(at_head.status, 200, "{at_head:?}");
    assert_eq!(at_head.body["line_start"], 14);
    assert!(at_head.body["commit"].is_string());
}

#[test]
fn a_lines_read_is_exact_and_malformed_ranges_are_invalid_requests() {
    let server = TestServer::with_note("garden.md", GARDEN);
    let two = read(&server, "&lines=4-5");
    assert_eq!(two.status, 200, "{two:?}");
    assert_eq!(two.body["content"], "# Garden\n\n");
    assert_eq!(
        (two.body["line_start"].clone(), two.body["line_end"].clone()),
        (json!(4), json!(5))
    );
    let one = read(&server, "&lines=8");
    assert_eq!(one.body["content"], "More herbs.\n");
    let clamped = read(&server, "&lines=19-500");
    assert_eq!(clamped.body["content"], "\nCages.\n");
    assert_eq!(clamped.body["line_end"], 20);
    for bad in ["3-1", "abc", "0-2", "-2", "1-", "21-30", "1.5"] {
        read(&server, &format!("&lines={}", encode(bad))).assert_error(400, "invalid_request");
    }
    read(&server, "&lines=1-2&section=Garden").assert_error(400, "invalid_request");
    let answer = server.post_json("/mcp/patch/propose", &json!({"patch": "not a patch"}));
    assert_eq!(
        answer.status, 400,
        "the original's endpoints keep their codes"
    );
}

#[test]
fn front_matter_is_read_and_a_broken_block_is_reported() {
    let server = vault();
    let home = server.read("Home.md");
    assert_eq!(
        home.body["front_matter"],
        json!({"title": "Vault home", "tags": ["Index", "#project"], "aliases": ["Start"]})
    );
    assert!(home.body.get("front_matter_error").is_none());
    let broken = server.read("Daily/2024-01-01.md");
    assert_eq!(broken.status, 200, "{broken:?}");
    assert_eq!(broken.body["front_matter"], Value::Null);
    let error = broken.body["front_matter_error"].as_str().unwrap();
    assert!(error.starts_with("line "), "{error}");
    assert_eq!(server.read("Gamma.md").body["front_matter"], Value::Null);
}

fn list(server: &TestServer, query: &str) -> Vec<String> {
    let answer = server.get(&format!("/mcp/notes{query}"));
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn tags_filter_lists_and_queries_and_are_counted() {
    let server = vault();
    assert_eq!(
        list(&server, "?tag=project"),
        [
            "Home.md",
            "Projects/Alpha.md",
            "Projects/Beta.md",
            "Projects/Gamma.md"
        ],
        "front matter lists and strings, inline tags, and tags nested under it"
    );
    assert_eq!(list(&server, "?tag=PROJECT"), list(&server, "?tag=project"));
    assert_eq!(list(&server, "?tag=project%2Falpha"), ["Projects/Alpha.md"]);
    assert_eq!(list(&server, "?tag=%23draft"), ["Projects/Beta.md"]);
    assert_eq!(list(&server, "?tag=home-page"), ["Home.md"]);
    assert!(list(&server, "?tag=nothing").is_empty());
    assert_eq!(list(&server, "").len(), 8);
    server
        .get("/mcp/notes?tag=a%20b")
        .assert_error(400, "invalid_request");

    let tags = server.get("/mcp/notes/tags");
    assert_eq!(
        tags.body,
        json!({"tags": [
            {"tag": "archive", "count": 1},
            {"tag": "draft", "count": 1},
            {"tag": "home-page", "count": 1},
            {"tag": "index", "count": 1},
            {"tag": "project", "count": 4},
            {"tag": "project/alpha", "count": 1},
            {"tag": "project/gamma", "count": 1},
        ]})
    );

    let all = server.get("/mcp/index/query?q=alpha%20gamma%20home&limit=50");
    assert_eq!(all.status, 200, "{all:?}");
    let tagged = server.get("/mcp/index/query?q=alpha%20gamma%20home&limit=50&tag=project");
    assert_eq!(tagged.status, 200, "{tagged:?}");
    let paths = |answer: &common::Answer| -> Vec<String> {
        answer.body["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["metadata"]["path"].as_str().unwrap().to_string())
            .collect()
    };
    let want: Vec<String> = paths(&all)
        .into_iter()
        .filter(|p| p.starts_with("Projects/") || p == "Home.md")
        .collect();
    assert!(!want.is_empty());
    assert_eq!(
        paths(&tagged),
        want,
        "the same ranking, the untagged left out"
    );
    for chunk in all.body["chunks"].as_array().unwrap() {
        let want = match chunk["metadata"]["path"].as_str().unwrap() {
            "Home.md" => "Vault home",
            "Projects/Beta.md" => "Beta project",
            "Gamma.md" => "Gamma",
            "Archive/Alpha.md" => "Old alpha",
            "Projects/Alpha.md" => "Alpha",
            "Projects/Gamma.md" => "Projects gamma",
            other => panic!("unexpected hit {other}"),
        };
        assert_eq!(chunk["metadata"]["title"], want);
    }
    server
        .get("/mcp/index/query?q=alpha&tag=%23")
        .assert_error(400, "invalid_request");
}

// ---- notes.move ----

/// A server whose repository holds `notes` (committed) and nothing else.
fn seeded(notes: &[(&str, &str)], adjust: impl FnOnce(&mut mirai::config::Config)) -> TestServer {
    let server = TestServer::start_with(adjust);
    std::fs::remove_file(server.root.join("welcome.md")).unwrap();
    for (path, content) in notes {
        server.write(path, content);
    }
    server.commit_all();
    server
}

fn move_note(server: &TestServer, body: Value) -> common::Answer {
    server.post_json("/mcp/notes/move", &body)
}

fn file(server: &TestServer, path: &str) -> String {
    std::fs::read_to_string(server.root.join(path)).unwrap()
}

/// The 50 linking notes of the byte-for-byte spec, each linking to
/// people/ann.md in one form (before, after the move to team/ann lee.md).
fn linker(i: usize) -> (String, String, String) {
    let path = format!("n/{i:02}.md");
    let (before, after) = match i % 5 {
        0 => ("[[ann]] and `[[ann]]`\n", "[[ann lee]] and `[[ann]]`\n"),
        1 => (
            "# T\n\n[[people/ann|Ann]] ![[ann#^b1]]\n",
            "# T\n\n[[team/ann lee|Ann]] ![[ann lee#^b1]]\n",
        ),
        2 => (
            "See [her](../people/ann.md#Intro \"Ann\").\n```\n[x](../people/ann.md)\n```\n",
            "See [her](../team/ann%20lee.md#Intro \"Ann\").\n```\n[x](../people/ann.md)\n```\n",
        ),
        3 => (
            "Ref [ann][a] and [a].\n\n[a]: <../people/ann.md> \"Ann\"\n",
            "Ref [ann][a] and [a].\n\n[a]: <../team/ann lee.md> \"Ann\"\n",
        ),
        _ => (
            "[[ann#Intro|intro]] [[Bob]] [root](/people/ann)\n",
            "[[ann lee#Intro|intro]] [[Bob]] [root](/team/ann%20lee)\n",
        ),
    };
    (path, before.to_string(), after.to_string())
}

/// The moved note's lines that no link rewrite touches: git sees a rename
/// when at least half of a note stays the same (its default `-M`).
const ANN_HEAD: &str =
    "# Ann\n\nAnn Lee joined the team in spring and runs the Tuesday reading group.\n\n## Intro\n";

#[test]
fn a_move_rewrites_fifty_notes_byte_for_byte_as_one_rename_and_a_revert_restores_them() {
    let mut notes: Vec<(String, String)> = vec![
        (
            "people/ann.md".into(),
            format!("{ANN_HEAD}Friend of [[bob]]; see [bob](../bob.md) and [pal](pal.md). ^b1\n"),
        ),
        ("bob.md".into(), "# Bob\n".into()),
        ("people/pal.md".into(), "# Pal\n".into()),
        ("loose.md".into(), "[[annex]] `[[ann]]`\n".into()),
    ];
    notes.extend((0..50).map(|i| {
        let (path, before, _) = linker(i);
        (path, before)
    }));
    let borrowed: Vec<(&str, &str)> = notes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let server = seeded(&borrowed, |_| {});
    let (_, _, seed) = common::repo_state(&server.root);
    let answer = move_note(
        &server,
        json!({"from": "people/ann.md", "to": "team/ann lee.md"}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body["from"], "people/ann.md");
    assert_eq!(answer.body["to"], "team/ann lee.md");
    let rewritten = answer.body["rewritten"].as_array().unwrap();
    assert_eq!(
        rewritten.len(),
        51,
        "50 linkers and the moved note's own relative link"
    );
    assert_eq!(
        rewritten[50],
        json!({"path": "team/ann lee.md", "links": 1})
    );
    let commit = answer.body["commit"].as_str().unwrap().to_string();
    assert_eq!(server.head(), commit);
    assert_eq!(
        common::git(&server.root, &["log", "-1", "--format=%s"]).trim(),
        "mcp.notes_move: people/ann.md -> team/ann lee.md"
    );
    let status = common::git(
        &server.root,
        &["show", "-M", "--name-status", "--format=", "HEAD"],
    );
    assert!(
        status
            .lines()
            .any(|l| l.starts_with('R') && l.ends_with("people/ann.md\tteam/ann lee.md")),
        "git sees a rename: {status}"
    );
    assert_eq!(status.lines().count(), 51, "{status}");
    assert!(common::git(&server.root, &["status", "--porcelain"]).is_empty());
    assert!(!server.root.join("people/ann.md").exists());
    assert_eq!(
        file(&server, "team/ann lee.md"),
        format!(
            "{ANN_HEAD}Friend of [[bob]]; see [bob](../bob.md) and [pal](../people/pal.md). ^b1\n"
        ),
        "its relative link to bob.md reaches it from team/ too; the one to pal.md is rewritten"
    );
    for i in 0..50 {
        let (path, _, after) = linker(i);
        assert_eq!(file(&server, &path), after, "{path}");
    }
    assert_eq!(file(&server, "loose.md"), "[[annex]] `[[ann]]`\n");
    assert_eq!(backlinks(&server, "team/ann lee.md").len(), 80);

    let reverted = server.post_json("/mcp/notes/revert", &json!({"commit": commit}));
    assert_eq!(reverted.status, 200, "{reverted:?}");
    let (_, _, now) = common::repo_state(&server.root);
    assert_eq!(now, seed, "every note byte for byte as before the move");
    assert!(common::git(&server.root, &["status", "--porcelain"]).is_empty());
}

#[test]
fn a_move_keeps_other_names_reaching_their_notes_and_leaves_code_alone() {
    let server = seeded(
        &[
            ("a.md", "# A\n"),
            ("deep/x/note.md", "# Deep note\n"),
            (
                "n.md",
                "[[note]] then [[a|the a]]\n\n```md\n[[a]] [x](a.md)\n```\n\n    [[a]] indented\n\n\
                 `[[a]]` and <!-- [[a]] --> [[note#Top]]\n",
            ),
        ],
        |_| {},
    );
    // top/note.md would be shorter than deep/x/note.md: the bare [[note]]s get their path.
    let answer = move_note(&server, json!({"from": "a.md", "to": "top/note.md"}));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        file(&server, "n.md"),
        "[[deep/x/note]] then [[note|the a]]\n\n```md\n[[a]] [x](a.md)\n```\n\n    [[a]] indented\n\n\
         `[[a]]` and <!-- [[a]] --> [[deep/x/note#Top]]\n"
    );
    assert_eq!(
        answer.body["rewritten"],
        json!([{"path": "n.md", "links": 3}])
    );
    let out = outgoing(&links(&server, "n.md"));
    assert_eq!(out[0].1, json!("deep/x/note.md"));
    assert_eq!(out[1].1, json!("top/note.md"));
}

#[test]
fn a_move_refuses_an_existing_to_a_missing_from_and_past_its_bound() {
    let notes = [
        ("a.md", "# A\n"),
        ("b.md", "# B\n"),
        ("l1.md", "[[a]]\n"),
        ("l2.md", "[x](a.md)\n"),
        ("l3.md", "![[a]]\n"),
    ];
    let server = seeded(&notes, |config| {
        config.max_move_notes = 2;
        config.max_changes = 1;
    });
    let before = common::repo_state(&server.root);
    move_note(&server, json!({"from": "a.md", "to": "b.md"})).assert_error(409, "conflict");
    move_note(&server, json!({"from": "gone.md", "to": "c.md"})).assert_error(404, "not_found");
    move_note(&server, json!({"from": "a.md", "to": "../c.md"})).assert_error(400, "invalid_path");
    move_note(&server, json!({"from": "a.md", "to": "a.md"})).assert_error(400, "invalid_request");
    let past = move_note(&server, json!({"from": "a.md", "to": "c.md"}));
    past.assert_error(400, "invalid_request");
    assert!(
        past.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MIRAI_MOVE_MAX_NOTES"),
        "{past:?}"
    );
    assert_eq!(common::repo_state(&server.root), before, "nothing changed");

    // update_links: false renames only.
    let renamed = move_note(
        &server,
        json!({"from": "a.md", "to": "c.md", "update_links": false}),
    );
    assert_eq!(renamed.status, 200, "{renamed:?}");
    assert_eq!(renamed.body["rewritten"], json!([]));
    assert_eq!(file(&server, "l1.md"), "[[a]]\n");
    assert_eq!(file(&server, "c.md"), "# A\n");

    // Two linkers are within the move's bound; taking the move back honours
    // that bound, not MIRAI_CHANGES_MAX_PATCHES (1 here).
    std::fs::remove_file(server.root.join("l3.md")).unwrap();
    server.commit_all();
    let moved = move_note(&server, json!({"from": "b.md", "to": "d/b.md"}));
    assert_eq!(moved.status, 200, "{moved:?}");
    let moved = move_note(&server, json!({"from": "c.md", "to": "d/a.md"}));
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(moved.body["rewritten"].as_array().unwrap().len(), 0);
    server.write("l1.md", "[[b]] [[d/a]]\n");
    server.write("l2.md", "[x](d/b.md)\n");
    server.commit_all();
    let moved = move_note(&server, json!({"from": "d/b.md", "to": "e/b.md"}));
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(file(&server, "l1.md"), "[[b]] [[d/a]]\n");
    assert_eq!(file(&server, "l2.md"), "[x](e/b.md)\n");
    let moved = move_note(&server, json!({"from": "d/a.md", "to": "e/a.md"}));
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(file(&server, "l1.md"), "[[b]] [[e/a]]\n");
    let commit = moved.body["commit"].as_str().unwrap();
    let reverted = server.post_json("/mcp/notes/revert", &json!({"commit": commit}));
    assert_eq!(reverted.status, 200, "{reverted:?}");
    assert_eq!(file(&server, "l1.md"), "[[b]] [[d/a]]\n");
    assert_eq!(file(&server, "d/a.md"), "# A\n");
    assert!(!server.root.join("e/a.md").exists());
}

#[test]
fn an_edit_with_a_section_searches_only_that_section() {
    let server = seeded(
        &[(
            "plan.md",
            "# Plan\n\n## Monday\n- rest\n\n## Tuesday\n- rest\n- read\n",
        )],
        |_| {},
    );
    let edit = |body: Value| server.post_json("/mcp/notes/edit", &body);
    // Twice in the note: refused without a section.
    edit(json!({"path": "plan.md", "edits": [{"old": "- rest", "new": "- walk"}]}))
        .assert_error(409, "conflict");
    let done = edit(json!({"path": "plan.md", "section": "Plan > Tuesday",
        "edits": [{"old": "- rest", "new": "- walk"}]}));
    assert_eq!(done.status, 200, "{done:?}");
    assert_eq!(
        file(&server, "plan.md"),
        "# Plan\n\n## Monday\n- rest\n\n## Tuesday\n- walk\n- read\n"
    );
    let missing = edit(json!({"path": "plan.md", "section": "Monday",
        "edits": [{"old": "- read", "new": "- x"}]}));
    missing.assert_error(409, "conflict");
    assert!(missing.body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("in section \"Plan > Monday\""));
    edit(json!({"path": "plan.md", "section": "Friday",
        "edits": [{"old": "- rest", "new": "- x"}]}))
    .assert_error(404, "not_found");
}

#[test]
fn list_stats_answer_each_notes_bytes_lines_and_tokens_per_version() {
    let server = seeded(
        &[
            ("a.md", "# A\n\nSome words here.\n"),
            ("b/c.md", "one line no newline"),
        ],
        |_| {},
    );
    let stats = |server: &TestServer| -> Value {
        let answer = server.get("/mcp/notes?stats=true");
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.body
    };
    let tokens = |path: &str| server.read(path).body["tokens"].as_u64().unwrap();
    let body = stats(&server);
    assert_eq!(body["notes"], json!(["a.md", "b/c.md"]));
    assert_eq!(
        body["stats"],
        json!([
            {"path": "a.md", "bytes": 22, "line_count": 3, "tokens": tokens("a.md")},
            {"path": "b/c.md", "bytes": 19, "line_count": 1, "tokens": tokens("b/c.md")},
        ])
    );
    assert!(tokens("a.md") > 3);
    assert_eq!(stats(&server), body, "the same answer from the kept counts");
    assert!(server.get("/mcp/notes").body.get("stats").is_none());
    server
        .get("/mcp/notes?stats=maybe")
        .assert_error(400, "invalid_request");
    let written = server.post_json(
        "/mcp/notes/write",
        &json!({"path": "a.md", "content": "# A\n\nSome more words here, and more.\n\nEnd.\n"}),
    );
    assert_eq!(written.status, 200, "{written:?}");
    let body = stats(&server);
    assert_eq!(
        body["stats"][0],
        json!({"path": "a.md", "bytes": 43, "line_count": 5, "tokens": tokens("a.md")})
    );
    let tagged = server.get("/mcp/notes?stats=true&tag=none");
    assert_eq!(tagged.body, json!({"notes": [], "stats": []}));
}

/// Moving a note nothing links to reads none of the many notes that link to
/// other notes of its name: the link graph says their links keep their
/// targets, so `MIRAI_MOVE_MAX_NOTES` (which counts every note read) is not
/// reached; moving the note they do reach rewrites them, within the bound.
#[test]
fn a_move_reads_only_the_notes_whose_links_it_changes() {
    let mut notes: Vec<(String, String)> = vec![
        ("x.md".into(), "# Root x\n".into()),
        ("deep/x.md".into(), "# Deep x\n".into()),
    ];
    notes.extend((0..30).map(|i| (format!("n/{i:02}.md"), format!("{i} links [[x]]\n"))));
    let refs: Vec<(&str, &str)> = notes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let server = seeded(&refs, |config| config.max_move_notes = 2);
    let moved = move_note(&server, json!({"from": "deep/x.md", "to": "deep/y.md"}));
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(moved.body["rewritten"], json!([]));
    assert_eq!(file(&server, "n/07.md"), "7 links [[x]]\n");
    let past = move_note(&server, json!({"from": "x.md", "to": "z.md"}));
    past.assert_error(400, "invalid_request");
    assert!(
        past.body.to_string().contains("MIRAI_MOVE_MAX_NOTES"),
        "{past:?}"
    );
}

#[test]
fn a_move_refuses_a_stale_base_commit_and_a_linker_with_uncommitted_changes() {
    let server = seeded(&[("a.md", "# A\n"), ("l1.md", "[[a]]\n")], |_| {});
    let base = server.head();
    server.write("l1.md", "[[a]] and more\n");
    server.commit_all();
    let before = common::repo_state(&server.root);
    let stale = move_note(
        &server,
        json!({"from": "a.md", "to": "b.md", "base_commit": base}),
    );
    stale.assert_error(409, "conflict");
    assert!(
        stale.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("l1.md changed between base_commit"),
        "{stale:?}"
    );
    assert_eq!(common::repo_state(&server.root), before);
    // Someone's uncommitted edit to a linker: refused, nothing written.
    server.write("l1.md", "[[a]] edited by hand\n");
    let before = common::repo_state(&server.root);
    move_note(&server, json!({"from": "a.md", "to": "b.md"})).assert_error(409, "conflict");
    assert_eq!(common::repo_state(&server.root), before);
    assert!(server.root.join("a.md").exists() && !server.root.join("b.md").exists());
}

#[test]
fn an_empty_note_moves_and_comes_back() {
    let server = seeded(&[("empty.md", ""), ("l.md", "[[empty]]\n")], |_| {});
    let before = common::repo_state(&server.root).2;
    let moved = move_note(&server, json!({"from": "empty.md", "to": "x/blank.md"}));
    assert_eq!(moved.status, 200, "{moved:?}");
    assert_eq!(file(&server, "x/blank.md"), "");
    assert_eq!(file(&server, "l.md"), "[[blank]]\n");
    let commit = moved.body["commit"].as_str().unwrap();
    let reverted = server.post_json("/mcp/notes/revert", &json!({"commit": commit}));
    assert_eq!(reverted.status, 200, "{reverted:?}");
    assert_eq!(common::repo_state(&server.root).2, before);
}

#[test]
fn a_dry_run_move_shows_the_moved_vault_and_writes_nothing() {
    let server = seeded(
        &[
            ("ann.md", "# Ann\n\nSee [[bob]].\n"),
            ("b/ann.md", "# Other Ann\n"),
            ("bob.md", "# Bob\n\nAsk [[ann]] or [her](ann.md).\n"),
        ],
        |_| {},
    );
    let before = common::repo_state(&server.root);
    let code = r#"
        const moved = await mirai.notes.move({from: "ann.md", to: "team/ann.md"});
        const bob = await mirai.notes.read({path: "bob.md"});
        const links = await mirai.notes.links({path: "team/ann.md"});
        let gone = null;
        try { await mirai.notes.read({path: "ann.md"}); } catch (e) { gone = e.code; }
        return {moved, bob: bob.content, backlinks: links.backlinks.map(b => b.path), gone};
    "#;
    let answer = server.post_json("/agent/eval", &json!({ "code": code, "dry_run": true }));
    assert_eq!(answer.status, 200, "{answer:?}");
    let result = &answer.body["result"];
    assert!(answer.body["error"].is_null(), "{answer:?}");
    assert_eq!(
        result["moved"]["commit"],
        Value::Null,
        "a dry run commits nothing"
    );
    assert_eq!(result["moved"]["to"], "team/ann.md");
    assert_eq!(
        result["moved"]["rewritten"],
        json!([{"path": "bob.md", "links": 2}])
    );
    assert_eq!(
        result["bob"], "# Bob\n\nAsk [[team/ann]] or [her](team/ann.md).\n",
        "later calls of the run see the moved vault"
    );
    assert_eq!(result["backlinks"], json!(["bob.md", "bob.md"]));
    assert_eq!(result["gone"], "not_found");
    assert_eq!(
        common::repo_state(&server.root),
        before,
        "nothing on disk or in git changed"
    );
}

/// The index's background persist after writes rewrites `.mirai/index.json`
/// (and `index.bin`);
/// a read landing between that rename and the new stamp being recorded must
/// not take the file for another process's and load it back (dropping the
/// link graph, which the next read then builds again from every note).
#[test]
fn the_link_graph_is_built_once_while_writes_persist_the_index() {
    let notes: Vec<(String, String)> = (0..1500)
        .map(|i| {
            (
                format!("n/{i:04}.md"),
                format!(
                    "# Note {i}\n\nSee [[{:04}]] and [[{:04}]].\n{}",
                    (i + 1) % 1500,
                    (i + 7) % 1500,
                    "words here\n".repeat(20)
                ),
            )
        })
        .collect();
    let borrowed: Vec<(&str, &str)> = notes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let (dir, root) = crate::crash::seeded(&borrowed);
    let log = dir.path().join("mirai.log");
    let mirai = crate::crash::Mirai::start_env(&root, &log, &[("RUST_LOG", "mirai=debug")]);
    let get = |path: &str| -> Value {
        mirai
            .client
            .get(format!("{}{path}", mirai.url))
            .send()
            .and_then(|r| r.json())
            .unwrap()
    };
    let rebuilt: Value = mirai
        .client
        .post(format!("{}/mcp/index/rebuild", mirai.url))
        .json(&json!({}))
        .send()
        .and_then(|r| r.json())
        .unwrap();
    assert_eq!(rebuilt["notes_indexed"], 1500, "{rebuilt}");
    assert_eq!(
        get("/mcp/notes/links?path=n/0001.md")["backlinks"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let links = get("/mcp/notes/links?path=n/0002.md");
                assert_eq!(links["backlinks"].as_array().unwrap().len(), 2, "{links}");
            }
        });
        for round in 0..6 {
            for i in 0..5 {
                let answer: Value = mirai
                    .client
                    .post(format!("{}/mcp/notes/append", mirai.url))
                    .json(&json!({"path": format!("n/{:04}.md", round * 5 + i + 100), "text": "more"}))
                    .send()
                    .and_then(|r| r.json())
                    .unwrap();
                assert!(answer["commit"].is_string(), "{answer}");
            }
            // Quiet for the persist to run while reads go on.
            std::thread::sleep(Duration::from_millis(700));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let text = std::fs::read_to_string(&log).unwrap();
    // The rebuild built the graph with the index; no reload dropped it since.
    let builds = text.matches("link graph of").count();
    assert_eq!(
        builds, 0,
        "the link graph was built again {builds} times: {text}"
    );
    assert!(!text.contains("not using .mirai/index.bin"), "{text}");
}
