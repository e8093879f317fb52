//! A note's headings and their sections, as [`crate::index::markdown`] reads
//! headings (outside code fences and front matter), and the one way a caller
//! names a section: a heading's text without the `#`s, or `A > B` for a
//! heading B under A (case and runs of whitespace ignored). `notes.insert`,
//! `notes.read`'s `section` and `notes.outline` all go through here.

use crate::error::{Error, ErrorCode, Result};
use crate::index::markdown::{self, Kind};
use crate::notes::suggest;

/// Headings an error lists before it says how many more there are.
pub const MAX_HEADINGS_LISTED: usize = 30;

/// One heading of a note and its section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// 1 to 6.
    pub level: u8,
    /// Its text and those of the headings it is under: `["Garden", "Plans"]`.
    pub path: Vec<String>,
    /// 1-based line of the heading.
    pub line: usize,
    /// 1-based last line of its section: the line before the next heading
    /// of the same or a higher level, or the note's last line.
    pub last_line: usize,
    /// Byte offset where text inserted at the end of its section goes: after
    /// the section's last non-blank line, before the blank lines and the next
    /// heading of the same or a higher level.
    pub end: usize,
}

impl Heading {
    /// `Garden > Plans`.
    pub fn name(&self) -> String {
        self.path.join(" > ")
    }

    /// Its own text.
    pub fn text(&self) -> &str {
        self.path.last().map(String::as_str).unwrap_or_default()
    }
}

/// Every heading of `note`, in order, with its section.
pub fn headings(note: &str) -> Vec<Heading> {
    let lines: Vec<markdown::Line<'_>> = markdown::lines(note).collect();
    let line_end = |i: usize| lines.get(i + 1).map_or(note.len(), |next| next.start);
    let mut found = Vec::new();
    let mut open: Vec<(u8, String)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Kind::Heading(level, text) = line.kind else {
            continue;
        };
        while open.last().is_some_and(|(l, _)| *l >= level) {
            open.pop();
        }
        open.push((level, text.to_string()));
        let next = lines[i + 1..]
            .iter()
            .position(|l| matches!(l.kind, Kind::Heading(other, _) if other <= level))
            .map_or(lines.len(), |offset| i + 1 + offset);
        let last_text = (i..next)
            .rev()
            .find(|&j| !lines[j].text.trim().is_empty())
            .unwrap_or(i);
        found.push(Heading {
            level,
            path: open.iter().map(|(_, text)| text.clone()).collect(),
            line: i + 1,
            last_line: next,
            end: line_end(last_text),
        });
    }
    found
}

/// A heading's words for comparison: case and runs of whitespace ignored.
fn fold(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The one heading of `all` (the headings of note `rel`) that `wanted`
/// (`Plans`, `## Plans`, `Garden > Plans`) names. Errors: `field` empty
/// (invalid_request), no such heading (not_found, listing the note's headings,
/// or saying `no_headings` when it has none), several (conflict, naming each
/// with its parents and line).
pub fn find<'a>(
    rel: &str,
    all: &'a [Heading],
    wanted: &str,
    field: &str,
    no_headings: &str,
) -> Result<&'a Heading> {
    let parts: Vec<String> = wanted
        .trim()
        .trim_start_matches('#')
        .split('>')
        .map(fold)
        .collect();
    if parts.iter().any(String::is_empty) {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!(
                "{field} is empty: give a heading's text without the #s, or \"A > B\" for B under A"
            ),
        ));
    }
    let matches: Vec<&Heading> = all
        .iter()
        .filter(|h| {
            h.path.len() >= parts.len()
                && h.path[h.path.len() - parts.len()..]
                    .iter()
                    .zip(&parts)
                    .all(|(have, want)| fold(have) == *want)
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] if all.is_empty() => Err(Error::not_found(format!(
            "{rel} has no headings; {no_headings}"
        ))),
        [] => {
            let names: Vec<String> = all.iter().map(Heading::name).collect();
            let closest = suggest::closest(
                wanted.trim().trim_start_matches('#'),
                all.iter()
                    .map(Heading::text)
                    .chain(names.iter().map(String::as_str)),
            );
            let mut listed: Vec<String> = names
                .iter()
                .take(MAX_HEADINGS_LISTED)
                .map(|n| format!("{n:?}"))
                .collect();
            if names.len() > MAX_HEADINGS_LISTED {
                listed.push(format!("and {} more", names.len() - MAX_HEADINGS_LISTED));
            }
            // "...; did you mean "X"? Its headings: ..." or "... in a.md. Its headings: ...".
            let hint = match suggest::did_you_mean(&closest) {
                none if none.is_empty() => ".".to_string(),
                question => question,
            };
            Err(Error::not_found(format!(
                "no heading {:?} in {rel}{hint} Its headings: {}",
                wanted.trim(),
                listed.join(", ")
            )))
        }
        many => {
            let listed: Vec<String> = many
                .iter()
                .take(MAX_HEADINGS_LISTED)
                .map(|h| format!("{:?} (line {})", h.name(), h.line))
                .collect();
            Err(Error::conflict(format!(
                "{} headings in {rel} match {:?}: {}; name the one you mean with the headings above it, \
                 as in {:?}",
                many.len(),
                wanted.trim(),
                listed.join(", "),
                many[0].name()
            )))
        }
    }
}

/// How many lines `note` has (a last line without a newline counts; an
/// empty note has none).
pub fn line_count(note: &str) -> usize {
    note.split_inclusive('\n').count()
}

/// The bytes of lines `first..=last` (1-based) of `note`.
pub fn line_slice(note: &str, first: usize, last: usize) -> &str {
    let mut start = note.len();
    let mut end = note.len();
    for (i, (at, _)) in std::iter::once((0, ""))
        .chain(note.match_indices('\n').map(|(at, s)| (at + 1, s)))
        .enumerate()
    {
        let line = i + 1;
        if line == first {
            start = at;
        }
        if line == last + 1 {
            end = at;
            break;
        }
    }
    &note[start.min(end)..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const GARDEN: &str = "---\ntitle: G\n---\n# Garden\n\n## Plans\n\nMore herbs.\n\n```sh\n# not a heading\n```\n\n## Tomatoes\n\nStake them.\n\n### Plans\n\nCages.\n";

    #[test]
    fn headings_nest_and_ignore_code_and_front_matter() {
        let all = headings(GARDEN);
        let names: Vec<String> = all.iter().map(Heading::name).collect();
        assert_eq!(
            names,
            [
                "Garden",
                "Garden > Plans",
                "Garden > Tomatoes",
                "Garden > Tomatoes > Plans"
            ]
        );
        let ranges: Vec<(usize, usize)> = all.iter().map(|h| (h.line, h.last_line)).collect();
        assert_eq!(ranges, [(4, 20), (6, 13), (14, 20), (18, 20)]);
        assert_eq!(line_count(GARDEN), 20);
    }

    #[test]
    fn a_section_is_named_once_or_the_error_says_which() {
        let all = headings(GARDEN);
        let found = find("g.md", &all, "tomatoes > plans", "section", "").unwrap();
        assert_eq!(found.line, 18);
        let err = find("g.md", &all, "Plans", "section", "").unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict);
        assert!(
            err.message.contains("\"Garden > Plans\" (line 6)"),
            "{}",
            err.message
        );
        let err = find("g.md", &all, " > ", "section", "").unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(
            err.message.starts_with("section is empty"),
            "{}",
            err.message
        );
        let err = find("n.md", &[], "X", "section", "read it whole").unwrap_err();
        assert_eq!(err.message, "n.md has no headings; read it whole");
    }

    #[test]
    fn line_slices_are_exact() {
        let note = "a\nb\r\nc";
        assert_eq!(line_slice(note, 1, 1), "a\n");
        assert_eq!(line_slice(note, 2, 3), "b\r\nc");
        assert_eq!(line_slice(note, 3, 3), "c");
        assert_eq!(line_count(note), 3);
        assert_eq!(line_count(""), 0);
        assert_eq!(line_count("x\n"), 1);
    }
}
