//! notes.edit's matcher never panics and answers what a plain search answers:
//! one occurrence is replaced, none or several are conflicts that count them,
//! and the "closest text" hint of a missing `old` names the window a direct
//! scan of every window picks.
//!
//! The input is `note \0 old \0 new`.

#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use mirai_fuzz::error::ErrorCode;
use mirai_fuzz::patch::{apply_edits, Edit};

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = input.splitn(3, '\0');
    let (Some(text), Some(old), Some(new)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let edit = Edit {
        old: old.into(),
        new: new.into(),
    };
    let outcome = apply_edits("n.md", text, &[edit]);
    if old.is_empty() {
        assert_eq!(outcome.unwrap_err().code, ErrorCode::InvalidRequest);
        return;
    }
    let found = naive_occurrences(text, old);
    match (found.as_slice(), outcome) {
        ([at], Ok(result)) => {
            assert_eq!(
                result,
                format!("{}{new}{}", &text[..*at], &text[at + old.len()..])
            );
        }
        ([], Err(e)) => {
            assert_eq!(e.code, ErrorCode::Conflict);
            let hint = match naive_closest(text, old) {
                Some((first, last, true)) => {
                    format!("Lines {first}-{last} differs only in whitespace:")
                }
                Some((first, last, false)) => format!("Lines {first}-{last} is the closest text:"),
                None => "Nothing similar is in the note".to_string(),
            };
            assert!(e.message.contains(&hint), "{hint:?} not in {:?}", e.message);
        }
        (many, Err(e)) if many.len() > 1 => {
            assert_eq!(e.code, ErrorCode::Conflict);
            let count = format!("occurs {} times", many.len());
            assert!(
                e.message.contains(&count),
                "{count:?} not in {:?}",
                e.message
            );
        }
        (found, outcome) => panic!("{} occurrences but {outcome:?}", found.len()),
    }
});

/// Every occurrence, stepping one character at a time.
fn naive_occurrences(text: &str, old: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(at, _)| at)
        .filter(|&at| text[at..].starts_with(old))
        .collect()
}

/// The first window of `old`'s line count equal to it but for whitespace, else the
/// first with the most of `old`'s words: (first line, last line, whitespace only).
fn naive_closest(text: &str, old: &str) -> Option<(usize, usize, bool)> {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let lines: Vec<&str> = text.lines().collect();
    let width = old.lines().count().max(1);
    let target = squash(old);
    let words: HashSet<&str> = old.split_whitespace().collect();
    if words.is_empty() || lines.is_empty() {
        return None;
    }
    let mut best: Option<(usize, usize)> = None;
    for start in 0..lines.len() {
        let end = (start + width).min(lines.len());
        let window = lines[start..end].join("\n");
        if squash(&window) == target {
            return Some((start + 1, end, true));
        }
        let score = window
            .split_whitespace()
            .filter(|w| words.contains(w))
            .count();
        if score > 0 && best.is_none_or(|(_, s)| score > s) {
            best = Some((start, score));
        }
    }
    best.map(|(start, _)| (start + 1, (start + width).min(lines.len()), false))
}
