//! What a run did, from mirai's own record and never from the model's words:
//! the notes its commits changed, or the proposal and its notes, or a dry
//! run's notes kept aside, or nothing; and the writes that failed, with why.
//! Every run's answer carries it (`outcome`, first), and the model's reply is
//! checked against it ([`contradiction`]): a reply claiming a change the
//! record does not show, or calling a proposed change done.

use serde::Serialize;
use serde_json::Value;

use super::warnings::claimed_change;

/// What kind of change a run made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Commits landed on the branch.
    Committed,
    /// Review mode: the writes are one proposal for a person to approve.
    Proposed,
    /// A dry run: the writes were kept aside, nothing committed.
    DryRun,
    /// Nothing was changed.
    Nothing,
}

/// A write the model's code called that changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedWrite {
    pub op: String,
    /// The note the request named, when it named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The error's code (`conflict`, `guard_refused`, ...).
    pub code: String,
    /// The error's message, its first sentence.
    pub message: String,
}

/// A run's outcome as the answer carries it.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    pub kind: Kind,
    /// One line in plain words, for a person (the page shows it above the reply).
    pub summary: String,
    /// The notes changed (committed, proposed or kept aside), each once, sorted.
    pub notes: Vec<String>,
    /// The run's commits, oldest first (empty unless `committed`).
    pub commits: Vec<String>,
    /// The proposal's id (`proposed` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
    /// Writes that failed, in the order they were called (at most [`MAX_FAILED`]).
    pub failed: Vec<FailedWrite>,
}

/// Most failed writes an outcome lists.
pub const MAX_FAILED: usize = 10;

/// Most note paths the summary names.
const NAMED_NOTES: usize = 5;

impl RunOutcome {
    /// The outcome of `kind` over `notes` (any order, repeats allowed).
    pub fn new(
        kind: Kind,
        notes: impl IntoIterator<Item = String>,
        commits: Vec<String>,
        proposal: Option<String>,
        mut failed: Vec<FailedWrite>,
    ) -> RunOutcome {
        let mut notes: Vec<String> = notes.into_iter().collect();
        notes.sort();
        notes.dedup();
        failed.truncate(MAX_FAILED);
        let summary = summarize(kind, &notes, &commits, proposal.as_deref(), &failed, false);
        RunOutcome {
            kind,
            summary,
            notes,
            commits,
            proposal,
            failed,
        }
    }

    /// The outcome of a run in a read-only deployment: when nothing was
    /// changed, the summary says why.
    pub fn in_read_only(mut self) -> RunOutcome {
        self.summary = summarize(
            self.kind,
            &self.notes,
            &self.commits,
            self.proposal.as_deref(),
            &self.failed,
            true,
        );
        self
    }
}

fn summarize(
    kind: Kind,
    notes: &[String],
    commits: &[String],
    proposal: Option<&str>,
    failed: &[FailedWrite],
    read_only: bool,
) -> String {
    let named = name_notes(notes);
    let mut summary = match kind {
        Kind::Committed => format!(
            "mirai committed changes to {named} in {} ({}).",
            plural(commits.len(), "commit"),
            commits
                .iter()
                .map(|c| c.get(..7).unwrap_or(c))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Kind::Proposed => format!(
            "mirai proposed changes to {named} for a person to approve (proposal {}); nothing is committed yet.",
            proposal.unwrap_or("?")
        ),
        Kind::DryRun => {
            format!("Dry run: changes to {named} were kept aside; nothing was committed.")
        }
        Kind::Nothing if read_only => {
            "Nothing was changed: this deployment is read-only (it reads and searches, never writes).".to_string()
        }
        Kind::Nothing => "Nothing was changed.".to_string(),
    };
    if !failed.is_empty() {
        let each: Vec<String> = failed
            .iter()
            .map(|f| match &f.path {
                Some(path) => format!("{} {path} ({})", f.op, f.code),
                None => format!("{} ({})", f.op, f.code),
            })
            .collect();
        summary.push_str(&format!(
            " {} failed: {}.",
            plural(failed.len(), "write"),
            each.join(", ")
        ));
    }
    summary
}

/// `a.md`, `a.md and b.md`, or the first few and how many more.
fn name_notes(notes: &[String]) -> String {
    match notes {
        [] => "no note".to_string(),
        [one] => one.clone(),
        _ if notes.len() <= NAMED_NOTES => format!("{} notes ({})", notes.len(), notes.join(", ")),
        _ => format!(
            "{} notes ({}, and {} more)",
            notes.len(),
            notes[..NAMED_NOTES].join(", "),
            notes.len() - NAMED_NOTES
        ),
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// A failed write call, from the request and answer texts the sandbox kept
/// (either may be cut; what cannot be read is left out).
pub fn failed_write(op: &str, request: &str, answer: &str) -> FailedWrite {
    let request: Value = serde_json::from_str(request).unwrap_or(Value::Null);
    let path = ["path", "from"]
        .iter()
        .find_map(|field| request.get(field).and_then(Value::as_str))
        .map(str::to_string);
    let answer: Value = serde_json::from_str(answer).unwrap_or(Value::Null);
    let error = &answer["error"];
    let code = error["code"].as_str().unwrap_or("failed").to_string();
    let message = error["message"]
        .as_str()
        .map(first_sentence)
        .unwrap_or_default();
    FailedWrite {
        op: op.to_string(),
        path,
        code,
        message,
    }
}

/// The text up to its first sentence's end (`: ` and `; ` go on), at most 200 characters.
fn first_sentence(text: &str) -> String {
    let end = text
        .match_indices(". ")
        .map(|(at, _)| at + 1)
        .next()
        .unwrap_or(text.len());
    let sentence = &text[..end];
    match sentence.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &sentence[..cut]),
        None => sentence.to_string(),
    }
}

/// Words a reply uses when it says a change is proposed rather than made.
const PROPOSAL_WORDS: [&str; 7] = [
    "propos", "approv", "review", "pending", "await", "suggest", "draft",
];

/// Where the model's claims and the record disagree, in plain words: a claim
/// of a change (in the reply, or a string the code returned with no write
/// behind it, `code_claim`) when nothing was changed, or a reply calling a
/// proposed change done. `None` when they agree.
pub fn contradiction(
    reply: &str,
    code_claim: Option<&str>,
    outcome: &RunOutcome,
) -> Option<String> {
    match outcome.kind {
        Kind::Nothing => {
            let claim = claimed_change(reply).or_else(|| code_claim.map(str::to_string))?;
            Some(format!(
                "the model claims a change (\"{claim}\"), but mirai's record shows that nothing was changed"
            ))
        }
        Kind::Proposed => {
            let lower = reply.to_lowercase();
            if PROPOSAL_WORDS.iter().any(|word| lower.contains(word)) {
                return None;
            }
            let claim = claimed_change(reply)?;
            Some(format!(
                "the model calls the change done (\"{claim}\"), but it is only proposed: nothing is committed until a person approves proposal {}",
                outcome.proposal.as_deref().unwrap_or("?")
            ))
        }
        Kind::Committed | Kind::DryRun => None,
    }
}

/// What the model is told, once, when its reply contradicts the record: the
/// facts, and what to do next.
pub fn facts_message(outcome: &RunOutcome, contradiction: &str) -> String {
    let next = match outcome.kind {
        // Small models copy what they are shown: a true sentence to copy.
        Kind::Proposed => format!(
            "Next: a <reply> that says the change is proposed for a person to approve, not made, \
             e.g. <reply>I proposed the change to {}; it is not made until a person approves it.</reply>",
            outcome.notes.join(", ")
        ),
        _ => "Next: if the task still needs the change, a <code> block that makes it (a write succeeded \
             only when its answer has a commit); if it cannot be made, a <reply> that says nothing was changed."
            .to_string(),
    };
    format!(
        "Your reply was not given to the user: {contradiction}. mirai's record of this run: {} {next}",
        outcome.summary
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing() -> RunOutcome {
        RunOutcome::new(Kind::Nothing, Vec::new(), Vec::new(), None, Vec::new())
    }

    #[test]
    fn summaries_name_what_happened() {
        let committed = RunOutcome::new(
            Kind::Committed,
            ["b.md".to_string(), "a.md".into(), "a.md".into()],
            vec!["0123456789abcdef".into()],
            None,
            Vec::new(),
        );
        assert_eq!(committed.notes, ["a.md", "b.md"]);
        assert_eq!(
            committed.summary,
            "mirai committed changes to 2 notes (a.md, b.md) in 1 commit (0123456)."
        );
        let failed = failed_write(
            "notes.edit",
            r#"{"path":"todo.md","edits":[]}"#,
            r#"{"error":{"code":"conflict","message":"old text not found. Read it again."}}"#,
        );
        assert_eq!(failed.message, "old text not found.");
        let outcome = RunOutcome::new(Kind::Nothing, Vec::new(), Vec::new(), None, vec![failed]);
        assert_eq!(
            outcome.summary,
            "Nothing was changed. 1 write failed: notes.edit todo.md (conflict)."
        );
        // A read-only deployment's outcome says why nothing was changed; a change it names as ever.
        assert_eq!(
            nothing().in_read_only().summary,
            "Nothing was changed: this deployment is read-only (it reads and searches, never writes)."
        );
        let dry = RunOutcome::new(
            Kind::DryRun,
            ["a.md".to_string()],
            Vec::new(),
            None,
            Vec::new(),
        );
        assert_eq!(dry.clone().in_read_only().summary, dry.summary);
        // A cut answer still names the call.
        let cut = failed_write("notes.write", "{\"path\":\"x", "{\"error\":{\"co");
        assert_eq!((cut.path, cut.code.as_str()), (None, "failed"));
    }

    #[test]
    fn claims_are_held_against_the_record() {
        assert!(contradiction("Note renamed and links updated.", None, &nothing()).is_some());
        assert!(contradiction("Nothing was changed.", None, &nothing()).is_none());
        assert!(contradiction("Done.", Some("Changed weekly to daily"), &nothing()).is_some());
        let proposed = RunOutcome::new(
            Kind::Proposed,
            ["todo.md".to_string()],
            Vec::new(),
            Some("p1".into()),
            Vec::new(),
        );
        let said = contradiction("Added the bullet to todo.md.", None, &proposed).unwrap();
        assert!(said.contains("only proposed"), "{said}");
        assert!(contradiction(
            "Added the bullet; it awaits your approval.",
            None,
            &proposed
        )
        .is_none());
    }
}
