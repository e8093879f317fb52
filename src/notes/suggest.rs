//! Answers that point the way: when a caller names a note (or a heading) that
//! is not there, the closest names that are, by edit distance (`strsim`'s
//! optimal string alignment: a swap of two letters counts as one edit), at most
//! [`MAX_SUGGESTIONS`] of them.

use std::cmp::Reverse;

use crate::error::{Detail, Error, ErrorCode, MissingNote};

/// Most names one answer suggests.
pub const MAX_SUGGESTIONS: usize = 3;

/// The `not_found` error for a note that is not there, carrying
/// [`MissingNote`] so that [`super::View`] and the table can add hints.
pub fn missing(rel: &str) -> Error {
    let note = MissingNote {
        path: rel.to_string(),
        ..MissingNote::default()
    };
    Error::new(ErrorCode::NotFound, message(&note)).with_detail(Detail::MissingNote(note))
}

/// The missing note `err` is about, if it is about one.
pub fn missing_note(err: &Error) -> Option<&MissingNote> {
    match err.detail.as_deref() {
        Some(Detail::MissingNote(note)) => Some(note),
        None => None,
    }
}

/// `err` with its missing note changed by `change` and its message rendered
/// again; an error about anything else is given back as it is.
pub fn amend_missing(mut err: Error, change: impl FnOnce(&mut MissingNote)) -> Error {
    if let Some(Detail::MissingNote(note)) = err.detail.as_deref_mut() {
        change(note);
        err.message = message(note);
    }
    err
}

/// A missing note's message: the path, then the closest names, or where to
/// look when none is close (the notes holding its words, when known).
fn message(note: &MissingNote) -> String {
    let mut message = format!("note not found: {:?}", note.path);
    match note.closest.as_deref() {
        Some([]) if note.holding.is_empty() => message.push_str(NOTHING_CLOSE),
        Some([]) => {
            let quoted: Vec<String> = note.holding.iter().map(|p| format!("{p:?}")).collect();
            message.push_str(&format!(
                "; no note has a close name, but these notes hold its words: {}",
                quoted.join(", ")
            ));
        }
        Some(closest) => {
            let names: Vec<&str> = closest.iter().map(String::as_str).collect();
            message.push_str(&did_you_mean(&names));
        }
        None => {}
    }
    if note.creatable {
        message.push_str("; to create it, send the same request with create: true");
    }
    message
}

/// The notes closest to `wanted`, best first: compared by file name without
/// `.md`, case ignored, within an edit distance of a third of the name (1 to
/// 4); ties go to the note whose path shares more of `wanted`'s start, then by
/// path. So `garden.md` finds `projects/garden.md`, and `projects/gardn.md`
/// finds it too.
pub fn closest_notes<'a>(wanted: &str, notes: &'a [String]) -> Vec<&'a str> {
    let wanted_name = stem(wanted);
    let wanted_len = wanted_name.chars().count();
    let limit = (wanted_len / 3).clamp(1, 4);
    let mut scored: Vec<(usize, Reverse<usize>, &str)> = notes
        .iter()
        .filter_map(|note| {
            let name = stem(note);
            // The distance is at least the difference in length: skip the work.
            if name.chars().count().abs_diff(wanted_len) > limit {
                return None;
            }
            let distance = strsim::osa_distance(&wanted_name, &name);
            (distance <= limit)
                .then(|| (distance, Reverse(shared_start(wanted, note)), note.as_str()))
        })
        .collect();
    scored.sort_unstable();
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, _, note)| note)
        .collect()
}

/// The `candidates` closest to `wanted` (case and surrounding whitespace
/// ignored), best first, within an edit distance of a third of the longer of
/// the two (at least 2); for heading texts and lines.
pub fn closest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let wanted = wanted.trim().to_lowercase();
    let wanted_len = wanted.chars().count();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let lower = candidate.trim().to_lowercase();
            let len = lower.chars().count();
            let limit = (wanted_len.max(len) / 3).max(2);
            if len.abs_diff(wanted_len) > limit {
                return None;
            }
            let distance = strsim::osa_distance(&wanted, &lower);
            (distance <= limit).then_some((distance, candidate))
        })
        .collect();
    scored.sort_by_key(|&(distance, _)| distance);
    let mut names: Vec<&str> = Vec::new();
    for (_, candidate) in scored {
        if !names.contains(&candidate) && names.len() < MAX_SUGGESTIONS {
            names.push(candidate);
        }
    }
    names
}

/// `; did you mean "a"?`, `; did you mean "a", "b" or "c"?`, or nothing.
pub fn did_you_mean(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("{name:?}")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        [rest @ .., last] => format!("; did you mean {} or {last}?", rest.join(", ")),
    }
}

/// What a missing note's message says when no note has a close name: where
/// to look instead (a small model otherwise gives up, or guesses again).
pub const NOTHING_CLOSE: &str =
    "; no note has a close name: list them (notes.list) or find one by its words (index.query)";

/// A path's file name without `.md` (any case), lowercased.
fn stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = name.to_lowercase();
    match lower.strip_suffix(".md") {
        Some(stem) => stem.to_string(),
        None => lower,
    }
}

/// How many bytes `a` and `b` share from the start.
fn shared_start(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(paths: &[&str]) -> Vec<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_note_is_found_by_its_file_name_and_near_misses() {
        let all = notes(&[
            "journal.md",
            "projects/garden.md",
            "projects/kitchen.md",
            "recipes/bread.md",
            "todo.md",
        ]);
        assert_eq!(closest_notes("garden.md", &all), ["projects/garden.md"]);
        assert_eq!(
            closest_notes("projects/gardn.md", &all),
            ["projects/garden.md"]
        );
        assert_eq!(closest_notes("Todo.MD", &all), ["todo.md"]);
        assert_eq!(closest_notes("todos.md", &all), ["todo.md"]);
        assert!(closest_notes("plan.md", &all).is_empty());
        assert!(closest_notes("", &all).is_empty());
    }

    #[test]
    fn at_most_three_are_suggested_the_nearest_folder_first() {
        let all = notes(&[
            "a/index.md",
            "b/index.md",
            "c/index.md",
            "docs/index.md",
            "docs/indexes.md",
        ]);
        assert_eq!(
            closest_notes("docs/indx.md", &all),
            ["docs/index.md", "a/index.md", "b/index.md"]
        );
    }

    #[test]
    fn headings_and_lines_are_matched_loosely() {
        let headings = ["Plans", "Tomatoes", "Garden > Plans"];
        assert_eq!(closest("tomatos", headings), ["Tomatoes"]);
        assert_eq!(closest("  PLANS ", headings), ["Plans"]);
        assert!(closest("Kitchen shelves", headings).is_empty());
    }

    #[test]
    fn the_suggestion_reads_as_a_question() {
        assert_eq!(did_you_mean(&[]), "");
        assert_eq!(did_you_mean(&["a.md"]), "; did you mean \"a.md\"?");
        assert_eq!(
            did_you_mean(&["a.md", "b.md", "c.md"]),
            "; did you mean \"a.md\", \"b.md\" or \"c.md\"?"
        );
        assert_eq!(missing("x.md").message, "note not found: \"x.md\"");
    }
}
