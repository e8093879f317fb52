//! Replies checked against what happened: a run that ends with a reply gets
//! warnings, in plain words, when the reply and the run disagree. The reply is
//! never rewritten; the warnings go beside it, in the run's answer and its
//! transcript.
//!
//! - No write succeeded (no commit, and in a dry run no change, in review mode
//!   no proposal) while a write failed, while the run was read-only and a
//!   write was attempted, or while the reply says the model added, changed,
//!   created, deleted, renamed, fixed, moved or updated something.
//! - The reply names a note path (`something.md`) that is not a note, was not
//!   one when the run began, and is not named by the task.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::ops::adapters::did_you_mean;

/// What the run did, as the warnings need it.
pub struct Outcome<'a> {
    pub task: &'a str,
    /// Whether any write landed: a commit, in a dry run a change, or in review
    /// mode a proposal (an outcome like a dry run's, never a no-op).
    pub wrote: bool,
    pub read_only: bool,
    /// Every write operation the model's code called, with whether it succeeded.
    pub write_calls: Vec<(&'a str, bool)>,
    /// The notes when the run began and when it ended.
    pub notes_before: &'a HashSet<String>,
    pub notes_after: &'a [String],
}

/// A past-tense verb that says something was changed.
#[expect(
    clippy::expect_used,
    reason = "a constant pattern; the unit tests compile it"
)]
static CLAIM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(added|appended|inserted|changed|created|deleted|removed|renamed|fixed|moved|updated|edited|replaced|rewrote|rewritten|saved)\b",
    )
    .expect("the claim pattern is valid")
});

/// A word that turns a clause's claim around ("nothing was changed").
#[expect(
    clippy::expect_used,
    reason = "a constant pattern; the unit tests compile it"
)]
static NEGATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(not|no|nothing|never|cannot|unable|without)\b|n['’]t\b")
        .expect("the negation pattern is valid")
});

/// Where a clause ends: a sentence's punctuation before a space or the end
/// (so `todo.md` stays whole), or a line break.
#[expect(
    clippy::expect_used,
    reason = "a constant pattern; the unit tests compile it"
)]
static CLAUSE_END: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[.!?;:]+(?:\s+|$)|\n").expect("the clause pattern is valid"));

/// A note path: folders and a file name ending in `.md`, not part of a URL or
/// of a longer path.
#[expect(
    clippy::expect_used,
    reason = "a constant pattern; the unit tests compile it"
)]
static NOTE_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^|[^\w./:\\-])((?:[\w.-]+/)*[\w.-]*\w\.md)\b")
        .expect("the note path pattern is valid")
});

/// Most characters of the reply a warning quotes.
const QUOTE_CHARS: usize = 80;

/// The warnings for a run that ended with `reply`; empty when the reply and
/// the run agree.
pub fn check(reply: &str, outcome: &Outcome<'_>) -> Vec<String> {
    let mut warnings = Vec::new();
    if !outcome.wrote {
        let attempted: Vec<&str> = unique(outcome.write_calls.iter().map(|(op, _)| *op));
        let failed: Vec<&str> = unique(
            outcome
                .write_calls
                .iter()
                .filter(|(_, ok)| !ok)
                .map(|(op, _)| *op),
        );
        if outcome.read_only && !attempted.is_empty() {
            warnings.push(format!(
                "the deployment is read-only and the model tried to write ({}); nothing was changed: commits is empty",
                attempted.join(", ")
            ));
        } else if !failed.is_empty() {
            warnings.push(format!(
                "a write was refused or failed ({}) and no write succeeded: commits is empty",
                failed.join(", ")
            ));
        }
        if let Some(claim) = claimed_change(reply) {
            warnings.push(format!(
                "the model's reply describes a change ({claim:?}), but no write succeeded: commits is empty"
            ));
        }
    }
    for named in invented_notes(
        reply,
        outcome.task,
        outcome.notes_before,
        outcome.notes_after,
    ) {
        warnings.push(format!("the model's reply {named}"));
    }
    warnings
}

/// Each note path `reply` names that is not a note now, was not one when the
/// run began and is not named by `task`, said as "names x.md, but there is no
/// note at that path" with the closest note's path when there is one.
pub(super) fn invented_notes(
    reply: &str,
    task: &str,
    notes_before: &HashSet<String>,
    notes_now: &[String],
) -> Vec<String> {
    let now: HashSet<&str> = notes_now.iter().map(String::as_str).collect();
    let task = task.to_lowercase();
    named_paths(reply)
        .into_iter()
        .filter(|named| {
            !now.contains(named.as_str())
                && !notes_before.contains(named)
                && !task.contains(&named.to_lowercase())
        })
        .map(|named| {
            format!(
                "names {named}, but there is no note at that path{}",
                did_you_mean(&named, notes_now)
            )
        })
        .collect()
}

/// The first clause of `reply` that says something was changed and does not
/// say it was not, trimmed to [`QUOTE_CHARS`].
pub(super) fn claimed_change(reply: &str) -> Option<String> {
    CLAUSE_END
        .split(reply)
        .map(str::trim)
        .find(|clause| CLAIM.is_match(clause) && !NEGATION.is_match(clause))
        .map(|clause| match clause.char_indices().nth(QUOTE_CHARS) {
            Some((cut, _)) => format!("{}…", &clause[..cut]),
            None => clause.to_string(),
        })
}

/// The note paths `reply` names, each once, in order, without a leading `./`.
fn named_paths(reply: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for captures in NOTE_PATH.captures_iter(reply) {
        let path = captures[1].trim_start_matches("./").to_string();
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

fn unique<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(paths: &[&str]) -> Vec<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    fn outcome<'a>(before: &'a HashSet<String>, after: &'a [String]) -> Outcome<'a> {
        Outcome {
            task: "Add a line to todo.md",
            wrote: false,
            read_only: false,
            write_calls: Vec::new(),
            notes_before: before,
            notes_after: after,
        }
    }

    #[test]
    fn a_claimed_change_without_a_write_is_named() {
        let after = notes(&["todo.md"]);
        let before: HashSet<String> = after.iter().cloned().collect();
        let quiet = outcome(&before, &after);
        let warnings = check("Added the bullet to todo.md.", &quiet);
        assert_eq!(
            warnings,
            ["the model's reply describes a change (\"Added the bullet to todo.md\"), but no write succeeded: commits is empty"]
        );
        // Said the other way round, or after a real write, there is nothing to warn of.
        assert!(check("Nothing was changed; I didn't update todo.md.", &quiet).is_empty());
        assert!(check("todo.md lists milk.", &quiet).is_empty());
        let wrote = Outcome {
            wrote: true,
            ..outcome(&before, &after)
        };
        assert!(check("Added the bullet.", &wrote).is_empty());
    }

    #[test]
    fn failed_and_read_only_writes_are_named() {
        let after = notes(&["todo.md"]);
        let before: HashSet<String> = after.iter().cloned().collect();
        let failed = Outcome {
            write_calls: vec![("notes.write", false), ("notes.write", false)],
            ..outcome(&before, &after)
        };
        assert_eq!(
            check("I could not do it.", &failed),
            ["a write was refused or failed (notes.write) and no write succeeded: commits is empty"]
        );
        let read_only = Outcome {
            read_only: true,
            write_calls: vec![("notes.edit", false)],
            ..outcome(&before, &after)
        };
        assert_eq!(
            check("Done: updated it.", &read_only),
            [
                "the deployment is read-only and the model tried to write (notes.edit); nothing was changed: commits is empty",
                "the model's reply describes a change (\"updated it\"), but no write succeeded: commits is empty",
            ]
        );
    }

    #[test]
    fn a_path_that_is_no_note_is_named_with_the_closest_ones() {
        let after = notes(&["journal.md", "projects/garden.md"]);
        let before: HashSet<String> = ["journal.md", "projects/garden.md", "scratch.md"]
            .iter()
            .map(|p| p.to_string())
            .collect();
        let quiet = outcome(&before, &after);
        assert_eq!(
            check(
                "See `projects/gardn.md`, ./journal.md and https://x.example/readme.md.",
                &quiet
            ),
            ["the model's reply names projects/gardn.md, but there is no note at that path; did you mean \"projects/garden.md\"?"]
        );
        // A note the run deleted, and one the task names, are not inventions.
        assert!(check(
            "Deleted scratch.md as asked; todo.md stays.",
            &Outcome {
                wrote: true,
                ..outcome(&before, &after)
            }
        )
        .is_empty());
    }
}
