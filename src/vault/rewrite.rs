//! Rewriting a link so it names another file, keeping its form: a wikilink
//! keeps `!`, its `#heading` or `#^block` and its `|alias`; a markdown link
//! keeps its text, its `#fragment` as written, its title, and the
//! angle-bracket form (else the new path is percent-encoded where a bare
//! destination could not hold a character). Nothing else of the note changes.

use super::resolve::folder_of;
use super::scan::Link;

/// The bytes of `link` (as found in `note`) with its path replaced by
/// `new_path`: a path from the root (wikilinks: without `.md` for a note,
/// or a bare name) or, for a markdown link, a path relative to the linking
/// note. `None`: a form this cannot rewrite (a reference-style markdown link,
/// whose destination lives in its definition).
pub fn relink(note: &str, link: &Link, new_path: &str) -> Option<String> {
    let raw = note.get(link.span.clone())?;
    if link.wiki {
        let bang = if raw.starts_with('!') { "!" } else { "" };
        let inner = raw.strip_prefix(bang)?.strip_prefix("[[")?.strip_suffix("]]")?;
        let (target, alias) = match inner.find('|') {
            Some(at) => inner.split_at(at),
            None => (inner, ""),
        };
        let rest = target.find('#').map_or("", |at| &target[at..]);
        return Some(format!("{bang}[[{new_path}{rest}{alias}]]"));
    }
    let open = raw.rfind("](")? + 2;
    let after = &raw[open..];
    let lead = after.len() - after.trim_start().len();
    let dest_start = open + lead;
    let body = &raw[dest_start..];
    let (dest_end, angle) = if body.starts_with('<') {
        (dest_start + body.find('>')? + 1, true)
    } else {
        let len = body
            .find(|c: char| c.is_whitespace() || c == ')')
            .unwrap_or(body.len());
        (dest_start + len, false)
    };
    let dest = &raw[dest_start..dest_end];
    let inner = if angle { &dest[1..dest.len() - 1] } else { dest };
    let fragment = inner.find('#').map_or("", |at| &inner[at..]);
    let path = if angle {
        format!("<{new_path}{fragment}>")
    } else {
        format!("{}{fragment}", encode(new_path))
    };
    Some(format!("{}{path}{}", &raw[..dest_start], &raw[dest_end..]))
}

/// How a wikilink names `target` (a file's path from the root): without
/// `.md` for a note; `bare` gives the file name alone.
pub fn wiki_path(target: &str, bare: bool) -> String {
    let path = if bare {
        target.rsplit('/').next().unwrap_or(target)
    } else {
        target
    };
    match path.len().checked_sub(3) {
        Some(cut) if path.is_char_boundary(cut) && path[cut..].eq_ignore_ascii_case(".md") => {
            path[..cut].to_string()
        }
        _ => path.to_string(),
    }
}

/// `target` (a path from the root) as a path relative to the folder of note `from`.
pub fn relative_path(from: &str, target: &str) -> String {
    let from_folder: Vec<&str> = folder_of(from).split('/').filter(|p| !p.is_empty()).collect();
    let parts: Vec<&str> = target.split('/').collect();
    let (folders, name) = parts.split_at(parts.len() - 1);
    let common = from_folder
        .iter()
        .zip(folders)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out: Vec<&str> = vec![".."; from_folder.len() - common];
    out.extend(&folders[common..]);
    out.extend(name);
    out.join("/")
}

/// A path as a bare markdown destination: percent-encoded where a character
/// would end or break it (whitespace, parentheses, `<>`, `%`, `#`, `?`, controls).
fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_whitespace() || c.is_control() || matches!(c, '(' | ')' | '<' | '>' | '%' | '#' | '?' | '\\') {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::scan::scan;

    fn relinked(note: &str, new_path: &str) -> Vec<Option<String>> {
        scan(note, 0)
            .links
            .iter()
            .map(|link| relink(note, link, new_path))
            .collect()
    }

    #[test]
    fn every_form_is_kept() {
        assert_eq!(
            relinked("[[a#H|Alias]] ![[a#^b]] [[a]]", "x/b"),
            [
                Some("[[x/b#H|Alias]]".to_string()),
                Some("![[x/b#^b]]".to_string()),
                Some("[[x/b]]".to_string())
            ]
        );
        assert_eq!(
            relinked("[t](a.md#h \"T\") ![i]( <a b.md> ) [u](a%20b.md)", "../new dir/c.md"),
            [
                Some("[t](../new%20dir/c.md#h \"T\")".to_string()),
                Some("![i]( <../new dir/c.md> )".to_string()),
                Some("[u](../new%20dir/c.md)".to_string())
            ]
        );
        assert_eq!(relinked("[r][ref]\n\n[ref]: a.md\n", "b.md"), [None]);
    }

    #[test]
    fn paths_are_named_as_each_form_names_them() {
        assert_eq!(wiki_path("a/B.md", true), "B");
        assert_eq!(wiki_path("a/B.md", false), "a/B");
        assert_eq!(wiki_path("img/p.png", true), "p.png");
        assert_eq!(relative_path("a/b/n.md", "a/c/t.md"), "../c/t.md");
        assert_eq!(relative_path("n.md", "a/t.md"), "a/t.md");
        assert_eq!(relative_path("a/n.md", "t.md"), "../t.md");
        assert_eq!(relative_path("a/n.md", "a/t.md"), "t.md");
    }
}
