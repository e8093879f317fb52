//! `notes.render` at the note limit (issue 50): the shapes an outside probe
//! found costly (nested block HTML, a note of `>`, nested lists, a table whose
//! rows its header pads), each a 1 MiB note, rendered over HTTP by the release
//! server. Prints per shape the median time of a render, the server's CPU per
//! render, the answer's size and the server's peak resident memory after it;
//! then four renders of the `>` note at once.
//!
//! cargo bench --bench render

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use serde_json::Value;
use support::{report, time_ms, Server};

const LIMIT: usize = 1024 * 1024;
const SAMPLES: usize = 5;

/// `head`, then `unit` repeated up to the note limit.
fn fill(head: &str, unit: &str) -> String {
    let mut note = head.to_string();
    note.push_str(&unit.repeat((LIMIT - head.len()) / unit.len()));
    note
}

fn main() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("notes");
    let cache = work.path().join("cache");
    let server = Server::start_with_env(
        &root,
        &[
            ("MIRAI_CACHE_DIR", cache.to_str().unwrap()),
            ("MIRAI_MAX_NOTE_BYTES", &LIMIT.to_string()),
        ],
    );
    let header = format!("{}|\n{}|\n", "|a".repeat(2000), "|-".repeat(2000));
    let prose =
        "Some words of a note, with *emphasis*, `code` and a [link](https://example.com).\n\n";
    let shapes = [
        ("prose.md", fill("# Prose\n\n", prose)),
        ("div.md", fill("", "<div>")),
        ("ul.md", fill("", "<ul><li>")),
        ("dl.md", fill("", "<dl><dt>x<dd>")),
        ("blockquote.md", fill("", "<blockquote>")),
        ("section.md", fill("", "<section>")),
        ("quotes.md", fill("", ">")),
        ("lists.md", fill("", "+ ")),
        ("table.md", fill(&header, "|b\n")),
    ];
    for (path, note) in &shapes {
        std::fs::write(root.join(path), note).unwrap();
    }
    let render = |path: &str| -> usize {
        let response = server
            .client
            .get(format!("{}/mcp/notes/render?path={path}", server.url))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let answer: Value = response.json().unwrap();
        answer["html"].as_str().unwrap().len()
    };
    // The index reads every note once; let it settle before timing.
    for (path, _) in &shapes {
        render(path);
    }
    println!("notes.render of 1 MiB notes (MIRAI_MAX_NOTE_BYTES={LIMIT})");
    for (path, _) in &shapes {
        let cpu_before = server.cpu_ms();
        let mut samples = Vec::with_capacity(SAMPLES);
        let mut bytes = 0;
        for _ in 0..SAMPLES {
            samples.push(time_ms(|| bytes = render(path)));
        }
        let cpu = (server.cpu_ms() - cpu_before) / SAMPLES as f64;
        report(&format!("render {path}"), &mut samples);
        println!(
            "{:<44} cpu {cpu:>8.0} ms/render   html {:>9} bytes   peak RSS {:>7.1} MiB",
            "",
            bytes,
            server.peak_rss_mib()
        );
    }
    let before = server.peak_rss_mib();
    let took = time_ms(|| {
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| render("quotes.md"));
            }
        });
    });
    println!(
        "four renders of quotes.md at once: {took:.1} ms, peak RSS {before:.1} -> {:.1} MiB",
        server.peak_rss_mib()
    );
}
