//! What the vault keeps of one note, read from its text once per version:
//! its links, its tags (front matter and inline) and its title.
//!
//! Tags come from the front matter's `tags` or `tag` (a list, or a string of
//! tags separated by commas or spaces; `#` optional) and from inline `#tags`
//! in the body outside code; all lowercased. The title is the front matter's
//! `title`, else the first heading (as [`crate::index::markdown`] reads
//! headings, the same reader `notes.insert` and the outline use), else the
//! file name without `.md`.
//!
//! Its size, line count and o200k_base token count ([`NoteFacts::tokens`])
//! belong to the version too: the count is made the first time it is asked
//! for and kept with these facts, so `notes.list?stats=true` counts a note
//! once per version.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::front_matter::{self, FrontMatter};
use super::scan::{self, Link};
use super::{sections, tokens};
use crate::index::markdown::{self, Kind};
use crate::index::Fingerprint;

/// One note, as the vault knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteFacts {
    pub links: Vec<Link>,
    /// Lowercased, without `#`, sorted, each once.
    pub tags: Vec<String>,
    pub title: String,
    /// The version's size and content hash.
    pub print: Fingerprint,
    pub line_count: usize,
    tokens: OnceLock<usize>,
}

impl NoteFacts {
    /// Reads the facts of note `path` from its text.
    pub fn of(path: &str, content: &str) -> NoteFacts {
        let front = front_matter::parse(content);
        let found = scan::scan(content, front.body_start());
        let mut tags = front.fields().map(tags_of_fields).unwrap_or_default();
        tags.extend(found.tags);
        tags.sort_unstable();
        tags.dedup();
        NoteFacts {
            links: found.links,
            tags,
            title: title(path, content, &front),
            print: Fingerprint::of(content),
            line_count: sections::line_count(content),
            tokens: OnceLock::new(),
        }
    }

    /// The version's o200k_base token count, counted from `content` the
    /// first time (`None`: `content` is another version than these facts').
    pub fn tokens(&self, content: &str) -> Option<usize> {
        if let Some(&n) = self.tokens.get() {
            return Some(n);
        }
        if Fingerprint::of(content) != self.print {
            return None;
        }
        Some(*self.tokens.get_or_init(|| tokens::count(content)))
    }

    /// The token count, when it has been counted.
    pub fn counted_tokens(&self) -> Option<usize> {
        self.tokens.get().copied()
    }

    /// Whether the note carries `tag` (lowercased, no `#`) or a tag nested
    /// under it (`a/b` carries `a`).
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| {
            t == tag
                || t.strip_prefix(tag)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }
}

/// A tag as asked for or written: trimmed, without `#` and outer `/`, lowercased.
pub fn normalize_tag(raw: &str) -> String {
    raw.trim()
        .trim_start_matches('#')
        .trim_matches('/')
        .to_lowercase()
}

/// The tags of the front matter's `tags` / `tag` fields.
fn tags_of_fields(fields: &Map<String, Value>) -> Vec<String> {
    let mut tags = Vec::new();
    for (key, value) in fields {
        if !key.eq_ignore_ascii_case("tags") && !key.eq_ignore_ascii_case("tag") {
            continue;
        }
        let items: Vec<String> = match value {
            Value::Array(items) => items.iter().filter_map(scalar_text).collect(),
            other => scalar_text(other).into_iter().collect(),
        };
        for item in items {
            for part in item.split(|c: char| c == ',' || c.is_whitespace()) {
                let tag = normalize_tag(part);
                if !tag.is_empty() {
                    tags.push(tag);
                }
            }
        }
    }
    tags
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The note's title: front matter `title`, else the first heading, else the file name.
pub fn title(path: &str, content: &str, front: &FrontMatter) -> String {
    if let Some(title) = front.title() {
        return title.to_string();
    }
    let heading = markdown::lines(content).find_map(|line| match line.kind {
        Kind::Heading(_, text) if !text.is_empty() => Some(text),
        _ => None,
    });
    if let Some(heading) = heading {
        return heading.to_string();
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.len().checked_sub(3) {
        Some(cut) if name.is_char_boundary(cut) && name[cut..].eq_ignore_ascii_case(".md") => {
            name[..cut].to_string()
        }
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_come_from_every_front_matter_form_and_the_body() {
        let forms = [
            "---\ntags: [Alpha, '#beta']\n---\n",
            "---\ntags:\n  - alpha\n  - beta\n---\n",
            "---\ntag: \"#alpha, beta\"\n---\n",
            "---\nTags: alpha beta\n---\n",
            "#alpha text #beta\n",
        ];
        for note in forms {
            assert_eq!(
                NoteFacts::of("n.md", note).tags,
                ["alpha", "beta"],
                "{note}"
            );
        }
    }

    #[test]
    fn nested_tags_match_their_parents_only() {
        let facts = NoteFacts::of("n.md", "#proj/Alpha\n");
        assert!(facts.has_tag("proj"));
        assert!(facts.has_tag("proj/alpha"));
        assert!(!facts.has_tag("pro"));
        assert!(!facts.has_tag("alpha"));
    }

    #[test]
    fn the_title_is_front_matter_then_heading_then_name() {
        assert_eq!(
            NoteFacts::of("a/x.md", "---\ntitle: T\n---\n# H\n").title,
            "T"
        );
        assert_eq!(
            NoteFacts::of("a/x.md", "```\n# no\n```\n## H ##\n").title,
            "H"
        );
        assert_eq!(NoteFacts::of("a/Some Name.MD", "text\n").title, "Some Name");
    }
}
