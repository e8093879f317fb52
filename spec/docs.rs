//! The guide (`docs/src/`) cannot drift from the code: its settings table
//! names exactly the settings the source reads, its HTTP table names every row
//! at its route (and nothing else as a row), and its MCP page lists exactly
//! one tool per row. Every page is in `SUMMARY.md`, and every relative link of
//! the README and the guide reaches a file that exists.

use std::collections::BTreeSet;
use std::path::Path;

use mirai::ops::TABLE;
use regex::Regex;

/// A page of the guide.
fn page(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/src")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of a page's section, from its heading to the next heading of that level.
fn section(readme: &str, heading: &str) -> Vec<String> {
    let level = heading.split(' ').next().unwrap();
    let mut lines = readme.lines().skip_while(|line| *line != heading);
    assert!(lines.next().is_some(), "the page has a `{heading}` section");
    lines
        .take_while(|line| {
            !(line.starts_with('#') && line.split(' ').next().unwrap().len() <= level.len())
        })
        .map(str::to_string)
        .collect()
}

/// The first cell of each table row in `lines`.
fn first_cells(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|line| line.starts_with("| ") && !line.starts_with("|---"))
        .map(|line| line.split('|').nth(1).unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn the_settings_table_names_exactly_the_settings_mirai_reads() {
    let name = Regex::new(r#""((?:MIRAI|MCP)_[A-Z0-9_]+)""#).unwrap();
    let mut read = BTreeSet::new();
    for entry in walkdir::WalkDir::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("src")) {
        let entry = entry.unwrap();
        if entry.path().extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            read.extend(name.captures_iter(&text).map(|c| c[1].to_string()));
        }
    }
    assert!(
        read.contains("MIRAI_API_TOKEN") && read.len() > 40,
        "{read:?}"
    );

    let readme = page("configuration.md");
    let backticked = Regex::new(r"`([A-Z][A-Z0-9_]+)`").unwrap();
    let mut documented = BTreeSet::new();
    for cell in first_cells(&section(&readme, "# Configuration")) {
        documented.extend(backticked.captures_iter(&cell).map(|c| c[1].to_string()));
    }
    let undocumented: Vec<_> = read.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "read by src/ but missing from the guide's settings table: {undocumented:?}"
    );
    // Besides mirai's own: the server's address, logging, the LLM key's usual name,
    // and the container's settings (docker-compose.yml reads them).
    let compose =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docker-compose.yml"))
            .unwrap();
    let unread: Vec<_> = documented
        .iter()
        .filter(|setting| !read.contains(*setting))
        .filter(|setting| {
            !["NOTES_ROOT", "HOST", "PORT", "RUST_LOG", "OPENAI_API_KEY"]
                .contains(&setting.as_str())
        })
        .filter(|setting| !compose.contains(setting.as_str()))
        .collect();
    assert!(
        unread.is_empty(),
        "in the guide's settings table but read nowhere: {unread:?}"
    );
}

#[test]
fn the_http_table_names_every_row_at_its_route() {
    let readme = page("http-api.md");
    let lines = section(&readme, "# HTTP API");
    let rows: Vec<&String> = lines
        .iter()
        .filter(|line| line.starts_with("| GET") || line.starts_with("| POST"))
        .collect();
    let mut named = BTreeSet::new();
    for line in &rows {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (verb, path, operation) = (cells[1], cells[2], cells[3]);
        if operation.is_empty() {
            continue;
        }
        let name = operation.trim_matches('`');
        let op = TABLE
            .iter()
            .find(|op| op.name == name)
            .unwrap_or_else(|| panic!("the guide's HTTP table names `{name}`, which is no row"));
        assert_eq!(verb, op.http.verb.as_str(), "{name}'s method in the guide");
        assert!(
            path.starts_with(&format!("`{}", op.http.path)),
            "{name} is served at {}, the guide says {path}",
            op.http.path
        );
        named.insert(name.to_string());
    }
    let missing: Vec<_> = TABLE
        .iter()
        .filter(|op| !named.contains(op.name))
        .map(|op| op.name)
        .collect();
    assert!(
        missing.is_empty(),
        "rows missing from the guide's HTTP table: {missing:?}"
    );
}

#[test]
fn the_mcp_section_lists_one_tool_per_row() {
    let readme = page("mcp.md");
    let lines = section(&readme, "# MCP");
    let start = lines
        .iter()
        .position(|line| line.starts_with("- Tools:"))
        .expect("a `- Tools:` item");
    let item: String = lines[start..]
        .iter()
        .take_while(|line| *line == &lines[start] || line.starts_with("  "))
        .map(|line| line.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let listed_part = item
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inside, _)| inside)
        .expect("the tools listed in parentheses");
    let listed: BTreeSet<String> = Regex::new(r"`([a-z_]+)`")
        .unwrap()
        .captures_iter(listed_part)
        .map(|c| c[1].to_string())
        .collect();
    let rows: BTreeSet<String> = TABLE.iter().map(|op| op.name.replace('.', "_")).collect();
    assert_eq!(
        listed, rows,
        "the guide's MCP tools (left) and the rows (right) differ"
    );
}

#[test]
fn every_page_is_in_the_summary_and_every_relative_link_reaches_a_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    // Code (fenced blocks and inline spans) shows link syntax without linking.
    let code = Regex::new(r"(?s)```.*?```|`[^`\n]*`").unwrap();
    let summary = page("SUMMARY.md");
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for entry in std::fs::read_dir(root.join("docs/src")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name != "SUMMARY.md" {
            assert!(
                summary.contains(&format!("]({name})")),
                "docs/src/{name} is not in docs/src/SUMMARY.md"
            );
        }
        files.push(path);
    }
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let text = code.replace_all(&text, "");
        for target in link.captures_iter(&text).map(|c| c[1].to_string()) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let target = target.split('#').next().unwrap();
            let resolved = file.parent().unwrap().join(target);
            assert!(
                resolved.exists(),
                "{} links to {target}, which does not exist",
                file.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} links were checked");
}
