//! Search-and-replace edits: each `old` must occur exactly once in the note as
//! the previous edits left it. When it does not, the conflict says where the
//! closest text is, or the lines where it occurs, so the caller can fix the
//! edit in one try. Finding, counting and the hint are linear in the note and
//! the edit, whatever their shape.

use std::collections::HashMap;

use super::search::Kmp;
use crate::error::{Error, Result};

/// One replacement.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
pub struct Edit {
    /// Exact text now in the note (include enough context to be unique).
    pub old: String,
    /// What replaces it.
    pub new: String,
}

/// Lines an "occurs N times" message lists before it says how many more.
const MAX_LINES_LISTED: usize = 20;
/// Note lines a "closest text" hint shows.
const MAX_SHOWN: usize = 30;

/// Applies `edits` in order to `text`; all or nothing.
pub fn apply_edits(path: &str, text: &str, edits: &[Edit]) -> Result<String> {
    let mut current = text.to_string();
    let total = edits.len();
    for (i, edit) in edits.iter().enumerate() {
        let which = format!("edit {} of {total}", i + 1);
        if edit.old.is_empty() {
            return Err(Error::new(
                crate::error::ErrorCode::InvalidRequest,
                format!("{which}: `old` is empty; give the exact text to replace (to add lines, use notes.append or notes.insert; to replace the whole note, notes.write)"),
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
                let mut distinct: Vec<usize> = lines_of(&current, many).collect();
                distinct.dedup();
                let mut lines: Vec<String> = distinct
                    .iter()
                    .take(MAX_LINES_LISTED)
                    .map(usize::to_string)
                    .collect();
                if distinct.len() > MAX_LINES_LISTED {
                    lines.push(format!(
                        "and {} more lines",
                        distinct.len() - MAX_LINES_LISTED
                    ));
                }
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

/// Byte offsets of every occurrence, overlapping ones included ("aa" occurs twice
/// in "aaa"), found in one pass. A match of valid UTF-8 in valid UTF-8 always
/// starts at a character boundary, so bytes are enough.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    Kmp::new(needle.as_bytes()).each(haystack.as_bytes(), |at| {
        found.push(at);
        true
    });
    found
}

/// 1-based line numbers of ascending byte offsets, counted in one pass.
fn lines_of<'a>(text: &'a str, offsets: &'a [usize]) -> impl Iterator<Item = usize> + 'a {
    let mut line = 1;
    let mut from = 0;
    offsets.iter().map(move |&at| {
        line += text.as_bytes()[from..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        from = at;
        line
    })
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

/// The window of as many lines as `old` has that is most like it: the first one
/// equal to it ignoring whitespace, else the first sharing the most words with it.
/// Linear in the note and `old`: every window's words are counted from running
/// totals, and the whitespace-blind match is a search of `old`'s words in the
/// note's words.
fn closest(text: &str, old: &str) -> Option<NearMatch> {
    let lines: Vec<&str> = text.lines().collect();
    let width = old.lines().count().max(1);
    // `old`'s words, numbered; words that are not in `old` are OTHER.
    const OTHER: u32 = u32::MAX;
    let mut numbers: HashMap<&str, u32> = HashMap::new();
    let target: Vec<u32> = old
        .split_whitespace()
        .map(|word| {
            let next = numbers.len() as u32;
            *numbers.entry(word).or_insert(next)
        })
        .collect();
    if target.is_empty() || lines.is_empty() {
        return None;
    }
    // The note's words, where each line's start, and running counts of `old`'s words.
    let mut words: Vec<u32> = Vec::new();
    let mut first_word = Vec::with_capacity(lines.len() + 1);
    let mut shared = vec![0usize];
    for line in &lines {
        first_word.push(words.len());
        for word in line.split_whitespace() {
            let number = numbers.get(word).copied().unwrap_or(OTHER);
            words.push(number);
            shared.push(shared[shared.len() - 1] + usize::from(number != OTHER));
        }
    }
    first_word.push(words.len());
    let end_of = |start: usize| (start + width).min(lines.len());

    // Windows equal to `old` but for whitespace: `old`'s words, starting at a
    // window's first word and ending at its last.
    let mut equal_at = None;
    Kmp::new(&target).each(&words, |p| {
        let mut start = first_word.partition_point(|&w| w < p);
        while start < lines.len() && first_word[start] == p {
            if first_word[end_of(start)] == p + target.len() {
                equal_at = Some(start);
                return false;
            }
            start += 1;
        }
        true
    });
    let (start, whitespace_only) = match equal_at {
        Some(start) => (start, true),
        None => {
            let mut best: Option<(usize, usize)> = None; // (start, score)
            for start in 0..lines.len() {
                let score = shared[first_word[end_of(start)]] - shared[first_word[start]];
                if score > 0 && best.is_none_or(|(_, s)| score > s) {
                    best = Some((start, score));
                }
            }
            (best?.0, false)
        }
    };
    let end = end_of(start);
    let mut shown = lines[start..end]
        .iter()
        .take(MAX_SHOWN)
        .enumerate()
        .map(|(k, line)| format!("{:>6} | {line}", start + k + 1))
        .collect::<Vec<_>>()
        .join("\n");
    if end - start > MAX_SHOWN {
        shown.push_str(&format!(
            "\n   ... ({} more lines)",
            end - start - MAX_SHOWN
        ));
    }
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

    #[test]
    fn a_one_letter_old_in_a_huge_line_is_counted_once_per_line() {
        let text = "a".repeat(200_000) + "\nb a\n";
        let err = apply_edits("n.md", &text, &[edit("a", "b")]).unwrap_err();
        assert_eq!(
            err.message,
            "edit 1 of 1: `old` occurs 200001 times in n.md, at lines 1, 2; include more of the surrounding text so it occurs exactly once"
        );
        let many: String = (0..100).map(|i| format!("x {i}\n")).collect();
        let err = apply_edits("n.md", &many, &[edit("x", "y")]).unwrap_err();
        assert!(
            err.message.contains("at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, and 80 more lines;"),
            "{}",
            err.message
        );
        // Overlapping occurrences of a long repetitive `old` are all counted.
        let old = "a".repeat(50_000);
        let err = apply_edits("n.md", &text, &[edit(&old, "x")]).unwrap_err();
        assert!(
            err.message.contains("occurs 150001 times"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_missing_old_as_long_as_a_huge_note_still_gets_its_hint() {
        let lines: Vec<String> = (0..20_000)
            .map(|i| format!("line {i} alpha beta"))
            .collect();
        let text = lines.join("\n") + "\n";
        let mut old = lines.clone();
        old[10_000] = "not there".into();
        let err = apply_edits("n.md", &text, &[edit(&old.join("\n"), "x")]).unwrap_err();
        assert!(
            err.message
                .contains("Lines 1-20000 is the closest text:\n     1 | line 0 alpha beta\n"),
            "{:.300}",
            err.message
        );
        assert!(
            err.message.contains("(19970 more lines)"),
            "{:.3000}",
            err.message
        );
        let spaced = lines[7..].join("\n").replace(' ', " \t ");
        let err = apply_edits("n.md", &text, &[edit(&spaced, "x")]).unwrap_err();
        assert!(
            err.message
                .contains("Lines 8-20000 differs only in whitespace"),
            "{:.300}",
            err.message
        );
    }
}
