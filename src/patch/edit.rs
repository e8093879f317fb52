//! Search-and-replace edits: each `old` must occur exactly once in the note as
//! the previous edits left it. When it does not, the conflict says where the
//! closest text is, or every line where it occurs, so the caller can fix the
//! edit in one try.

use crate::error::{Error, Result};

/// One replacement.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
pub struct Edit {
    /// Exact text now in the note (include enough context to be unique).
    pub old: String,
    /// What replaces it.
    pub new: String,
}

/// Applies `edits` in order to `text`; all or nothing.
pub fn apply_edits(path: &str, text: &str, edits: &[Edit]) -> Result<String> {
    let mut current = text.to_string();
    let total = edits.len();
    for (i, edit) in edits.iter().enumerate() {
        let which = format!("edit {} of {total}", i + 1);
        if edit.old.is_empty() {
            return Err(Error::new(
                crate::error::ErrorCode::InvalidRequest,
                format!("{which}: `old` is empty; give the exact text to replace (to replace the whole note, use notes.write)"),
            ));
        }
        let found = occurrences(&current, &edit.old);
        match found.as_slice() {
            [at] => current.replace_range(*at..*at + edit.old.len(), &edit.new),
            [] => {
                return Err(Error::conflict(not_found_message(
                    path, &which, &current, &edit.old, i,
                )))
            }
            many => {
                let lines: Vec<String> = many
                    .iter()
                    .map(|&at| line_of(&current, at).to_string())
                    .collect();
                return Err(Error::conflict(format!(
                    "{which}: `old` occurs {} times in {path}, at lines {}; include more of the surrounding text so it occurs exactly once",
                    many.len(),
                    lines.join(", ")
                )));
            }
        }
    }
    Ok(current)
}

/// Byte offsets of every occurrence, overlapping ones included.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = haystack[from..].find(needle) {
        found.push(from + at);
        // Step one character, not the needle's length: "aa" occurs twice in "aaa".
        from += at
            + haystack[from + at..]
                .chars()
                .next()
                .map_or(1, char::len_utf8);
    }
    found
}

/// 1-based line number of a byte offset.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

fn squash_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn not_found_message(
    path: &str,
    which: &str,
    text: &str,
    old: &str,
    edits_before: usize,
) -> String {
    let after = if edits_before > 0 {
        format!(" (as the {edits_before} edit(s) before it left it)")
    } else {
        String::new()
    };
    let mut message = format!("{which}: `old` was not found in {path}{after}.");
    match closest(text, old) {
        Some(near) => {
            let how = if near.whitespace_only {
                "differs only in whitespace"
            } else {
                "is the closest text"
            };
            message.push_str(&format!(
                " Lines {}-{} {how}:\n{}\nCopy the text exactly as it is in the note, or read the note again.",
                near.first,
                near.last,
                near.shown
            ));
        }
        None => message.push_str(" Nothing similar is in the note; read it again."),
    }
    message
}

struct NearMatch {
    first: usize,
    last: usize,
    shown: String,
    whitespace_only: bool,
}

/// The window of lines most like `old`: first one equal to it ignoring
/// whitespace, else the one sharing the most words with it.
fn closest(text: &str, old: &str) -> Option<NearMatch> {
    let lines: Vec<&str> = text.lines().collect();
    let width = old.lines().count().max(1);
    let target = squash_whitespace(old);
    let target_words: std::collections::HashSet<&str> = old.split_whitespace().collect();
    if target_words.is_empty() || lines.is_empty() {
        return None;
    }
    let mut best: Option<(usize, usize, bool)> = None; // (start, score, whitespace_only)
                                                       // Long notes are scanned up to a bound: a message, not a search engine.
    for start in 0..lines.len().min(20_000) {
        let end = (start + width).min(lines.len());
        let window = lines[start..end].join("\n");
        if squash_whitespace(&window) == target {
            best = Some((start, usize::MAX, true));
            break;
        }
        let score = window
            .split_whitespace()
            .filter(|w| target_words.contains(w))
            .count();
        if score > 0 && best.is_none_or(|(_, s, _)| score > s) {
            best = Some((start, score, false));
        }
    }
    let (start, _, whitespace_only) = best?;
    let end = (start + width).min(lines.len());
    let shown = lines[start..end]
        .iter()
        .enumerate()
        .map(|(k, line)| format!("{:>6} | {line}", start + k + 1))
        .collect::<Vec<_>>()
        .join("\n");
    Some(NearMatch {
        first: start + 1,
        last: end,
        shown,
        whitespace_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str) -> Edit {
        Edit {
            old: old.into(),
            new: new.into(),
        }
    }

    #[test]
    fn edits_apply_in_order_on_the_text_the_previous_left() {
        let out = apply_edits("n.md", "a b c\n", &[edit("b", "B"), edit("B c", "X")]).unwrap();
        assert_eq!(out, "a X\n");
    }

    #[test]
    fn several_occurrences_name_every_line() {
        let err = apply_edits("n.md", "x\ny\nx\n", &[edit("x", "z")]).unwrap_err();
        assert_eq!(err.code, crate::error::ErrorCode::Conflict);
        assert!(err.message.contains("2 times"), "{}", err.message);
        assert!(err.message.contains("lines 1, 3"), "{}", err.message);
        let err = apply_edits("n.md", "aaa", &[edit("aa", "b")]).unwrap_err();
        assert!(
            err.message.contains("2 times"),
            "overlapping: {}",
            err.message
        );
    }

    #[test]
    fn a_missing_old_points_at_the_nearest_text() {
        let text = "# T\n\nWater the  tomatoes\nevery morning.\n";
        let err = apply_edits(
            "n.md",
            text,
            &[edit("Water the tomatoes\nevery morning.", "x")],
        )
        .unwrap_err();
        assert!(
            err.message.contains("Lines 3-4 differs only in whitespace"),
            "{}",
            err.message
        );
        let err = apply_edits("n.md", text, &[edit("Feed the tomatoes", "x")]).unwrap_err();
        assert!(
            err.message.contains("Lines 3-3 is the closest"),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("     3 | Water the  tomatoes"),
            "{}",
            err.message
        );
    }

    #[test]
    fn empty_old_is_refused_and_nothing_applies_on_failure() {
        assert!(apply_edits("n.md", "x", &[edit("", "y")]).is_err());
        assert!(apply_edits("n.md", "x y", &[edit("x", "z"), edit("q", "w")]).is_err());
    }
}
