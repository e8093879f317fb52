//! The web page (issue 31) on the release server: a first load of `/` (the
//! HTML and the three files it asks for, gzipped as a browser accepts them):
//! bytes over the wire and each answer's time; and `notes.render` of a
//! 5,000-line note (headings, lists, links, code, tables) over HTTP beside
//! `/health`, and the same rendering in this process (the server's own work);
//! then the same note with one raw HTML tag in it, which ammonia sanitizes whole.
//!
//! cargo bench --bench page

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

#[path = "support/vault.rs"]
mod vault;

mod support;

use std::collections::HashMap;
use std::fmt::Write;

use support::{report, time_ms, Server};

const SAMPLES: usize = 200;
const LINES: usize = 5_000;
const FIRST_LOAD: [&str; 4] = [
    "/",
    "/ui/assets/app.js",
    "/ui/assets/style.css",
    "/ui/assets/icon.svg",
];

/// A 5,000-line note with what notes hold: headings, paragraphs with
/// wikilinks and emphasis, lists, tasks, code blocks and tables.
fn long_note() -> String {
    let mut text = String::from("---\ntitle: Long\ntags: [bench]\n---\n");
    let mut lines = 4;
    let mut part = 0;
    while lines < LINES {
        part += 1;
        let _ = writeln!(text, "# Part {part}\n");
        lines += 2;
        for i in 0..20 {
            let _ = writeln!(
                text,
                "Line {i} of part {part}: *notes* about [[note-{}]] and **plans**, with `code` and a [link](https://example.com/{i}).",
                (part * 7 + i) % 50
            );
            lines += 1;
        }
        let _ = writeln!(text, "\n- [ ] a task\n- [x] done\n- a plain item\n");
        let _ = writeln!(
            text,
            "```rust\nfn main() {{ println!(\"{part}\"); }}\n```\n"
        );
        let _ = writeln!(text, "| a | b |\n|---|---|\n| {part} | x |\n");
        lines += 15;
    }
    text
}

fn main() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    vault::generate(&root, &vault::Options::new(50, 1)).unwrap();
    let note = long_note();
    std::fs::write(root.join("long.md"), &note).unwrap();
    let raw = format!("{note}\n<b>raw HTML</b>\n");
    std::fs::write(root.join("long-html.md"), &raw).unwrap();
    vault::commit(&root, 1).unwrap();
    let server = Server::start(&root);

    println!("first load of / (gzip accepted), {SAMPLES} loads:");
    let mut wire = 0;
    let mut total_median = 0.0;
    for path in FIRST_LOAD {
        let url = format!("{}{path}", server.url);
        let fetch = || {
            let response = server
                .client
                .get(&url)
                .header("accept-encoding", "gzip")
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200, "{path}");
            let headers: usize = response
                .headers()
                .iter()
                .map(|(name, value)| name.as_str().len() + value.len() + 4)
                .sum();
            headers + response.bytes().unwrap().len()
        };
        let bytes = fetch();
        wire += bytes;
        let mut samples: Vec<f64> = (0..SAMPLES)
            .map(|_| {
                time_ms(|| {
                    fetch();
                })
            })
            .collect();
        total_median += report(
            &format!("  GET {path} ({bytes} bytes with headers)"),
            &mut samples,
        );
    }
    let mut health: Vec<f64> = (0..SAMPLES).map(|_| server.health_ms()).collect();
    let health = report("  GET /health (baseline)", &mut health);
    println!(
        "first load: {wire} bytes over the wire ({:.1} KB), {total_median:.3} ms of answers in all (the four medians; /health alone {health:.3} ms)",
        wire as f64 / 1024.0
    );

    for (name, text) in [("long.md", &note), ("long-html.md", &raw)] {
        render_bench(&server, name, text, health);
    }
}

/// `notes.render` of note `name` over HTTP, and `vault::render` of its text here.
fn render_bench(server: &Server, name: &str, text: &str, health: f64) {
    println!(
        "notes.render of {name}, {LINES} lines ({} KB){}:",
        text.len() / 1024,
        if text.contains("<b>") {
            ", with raw HTML (ammonia)"
        } else {
            ""
        }
    );
    let url = format!("{}/mcp/notes/render?path={name}", server.url);
    let render = || {
        let response = server.client.get(&url).send().unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.bytes().unwrap().len()
    };
    let html_bytes = render();
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            time_ms(|| {
                render();
            })
        })
        .collect();
    let over_http = report("  GET /mcp/notes/render (round trip)", &mut samples);
    let front = mirai::vault::front_matter::parse(text);
    let links: HashMap<usize, Option<String>> = HashMap::new();
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            time_ms(|| {
                drop(mirai::vault::render::render(
                    text,
                    front.body_start(),
                    &links,
                ))
            })
        })
        .collect();
    let in_process = report("  vault::render in this process", &mut samples);
    println!(
        "render: {html_bytes} bytes of JSON; {over_http:.3} ms round trip ({:.3} ms above /health), {in_process:.3} ms rendering alone",
        over_http - health
    );
}
