//! Guards against destructive writes: a write that would wipe much of a note,
//! that drops its structure (its whole front matter, all its headings, most of
//! its links, or most of a note of 5 lines or more: [`super::structure`]), or
//! that adds a line a model writes instead of content ("... rest of the note
//! unchanged ..."), is refused with 422 `guard_refused` before anything lands.
//!
//! The write path takes a [`GuardPolicy`] as an input when it plans a change
//! ([`super::change::plan_patch`]): [`GuardPolicy::for_write`] answers the
//! deployment's policy for a context (where a model is the author, by default:
//! the sandbox, agent runs and MCP; see `MIRAI_GUARDS`), and
//! [`GuardPolicy::UNGUARDED`] is for writes that are never guarded (deleting a
//! note, undoing a change, replaying a sync).

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use super::settings::GuardMode;
use super::Context;
use crate::error::{Error, ErrorCode, Result};

/// What one write is checked against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuardPolicy {
    /// The shrink guard, when it applies: notes of at least `min_lines` lines
    /// may lose at most `max_ratio` of them, net.
    pub shrink: Option<Shrink>,
    /// Whether added lines that look like elision placeholders are refused.
    pub placeholders: bool,
    /// Whether a write that drops the note's structure is refused.
    pub structure: bool,
}

/// The shrink guard's bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shrink {
    pub max_ratio: f64,
    pub min_lines: usize,
}

/// How a request tells the shrink guard that it means to remove much of a
/// note; the prompt and MCP's tool descriptions say it too.
pub const ALLOW_LARGE_DELETE: &str = "Writes that would remove most of a note, its front matter, all its headings or most of its links, or that add a placeholder such as \"... rest unchanged ...\" instead of the real text, are refused (422 guard_refused); when the task really asks for that, send the same request with allow_large_delete: true.";

impl GuardPolicy {
    /// No guard: for writes the guards never apply to.
    pub const UNGUARDED: GuardPolicy = GuardPolicy {
        shrink: None,
        placeholders: false,
        structure: false,
    };

    /// The policy for a write through `ctx`: the deployment's guards when they
    /// apply to its author (`MIRAI_GUARDS`), without the shrink and structure
    /// guards when the request says `allow_large_delete`.
    pub fn for_write(ctx: &Context, allow_large_delete: bool) -> GuardPolicy {
        let settings = &ctx.guards;
        let applies = match settings.mode {
            GuardMode::Off => false,
            GuardMode::All => true,
            GuardMode::Models => ctx.is_model_author(),
        };
        if !applies {
            return GuardPolicy::UNGUARDED;
        }
        GuardPolicy {
            shrink: (!allow_large_delete).then_some(Shrink {
                max_ratio: settings.max_delete_ratio,
                min_lines: settings.min_lines,
            }),
            placeholders: settings.placeholders,
            structure: settings.structure && !allow_large_delete,
        }
    }
}

/// Checks a write that turns note `rel` from `old` (`None`: a new note) into
/// `new`; a deletion is not checked here (it has no new text).
pub fn check(rel: &str, old: Option<&str>, new: &str, policy: &GuardPolicy) -> Result<()> {
    if let (Some(shrink), Some(old)) = (policy.shrink, old) {
        check_shrink(rel, old, new, shrink)?;
    }
    if let (true, Some(old)) = (policy.structure, old) {
        super::structure::check(rel, old, new)?;
    }
    if policy.placeholders {
        check_placeholders(rel, old.unwrap_or_default(), new)?;
    }
    Ok(())
}

fn check_shrink(rel: &str, old: &str, new: &str, shrink: Shrink) -> Result<()> {
    let before = old.lines().count();
    let after = new.lines().count();
    if before < shrink.min_lines || after >= before {
        return Ok(());
    }
    let lost = before - after;
    let ratio = lost as f64 / before as f64;
    if ratio <= shrink.max_ratio {
        return Ok(());
    }
    Err(Error::new(
        ErrorCode::GuardRefused,
        format!(
            "the shrink guard refused this write: it would take {rel} from {before} lines to {after} \
             ({lost} lines, {:.0}% of the note, removed); a write may remove at most {:.0}% of a note \
             of {} or more lines. Nothing was changed. To change part of the note use notes.edit, to add \
             use notes.append or notes.insert, to delete the note use notes.delete; if you really mean to \
             remove that much, send the same request with \"allow_large_delete\": true.",
            ratio * 100.0,
            shrink.max_ratio * 100.0,
            shrink.min_lines
        ),
    ))
}

fn check_placeholders(rel: &str, old: &str, new: &str) -> Result<()> {
    let existing: HashSet<&str> = old.lines().map(str::trim).collect();
    for (number, line) in new.lines().enumerate() {
        if existing.contains(line.trim()) || !is_placeholder(line) {
            continue;
        }
        return Err(Error::new(
            ErrorCode::GuardRefused,
            format!(
                "the placeholder guard refused this write: line {} of the new {rel}, {:?}, looks like a \
                 placeholder for text left out, not like the note's text. Nothing was changed. Write the \
                 real text (read the note again if you need it), or change only the lines you mean with \
                 notes.edit, notes.append or notes.insert. (An operator can turn this guard off with \
                 MIRAI_GUARD_PLACEHOLDERS=off.)",
                number + 1,
                line.trim()
            ),
        ));
    }
    Ok(())
}

/// Lines longer than this are text, never a placeholder.
const MAX_PLACEHOLDER_CHARS: usize = 120;

/// The lines models write instead of content, as patterns over a line's
/// normalized words (see [`normalize`]), each with whether it counts only on a
/// marked line (a comment, brackets around the whole line, or an ellipsis), so
/// that a plain heading or sentence such as "Other notes" is never taken for one.
const PLACEHOLDERS: &[(&str, bool)] = &[
    // "... rest of the note unchanged ...", "the rest is the same", "rest of file omitted"
    (
        r"^(the )?(rest|remainder)( of( the| this)? (note|file|document|content|contents|text|section|list|lines?|code|page|entries|items|journal))?( (is|are|remains?|stays?|left|kept))? (unchanged|the same|as before|as is|omitted|elided|truncated|not shown|unmodified|skipped|snipped)$",
        false,
    ),
    // "[rest of note]", "(rest of the file)"
    (
        r"^(the )?(rest|remainder) of( the| this)? (note|file|document|content|contents|text|section|list|code|page)$",
        true,
    ),
    // "[remaining text omitted]", "previous entries unchanged", "existing content remains"
    (
        r"^(remaining|other|existing|previous|original|unchanged|old|prior)( \w+)? (content|contents|text|lines?|notes?|sections?|code|entries|items|bullets|tasks|paragraphs?)( (here|unchanged|omitted|elided|truncated|not shown|as before|the same|kept|preserved|goes here|remains?( unchanged| the same)?|stays?( unchanged| the same)?))$",
        false,
    ),
    // "// existing content", "<!-- previous notes -->"
    (
        r"^(remaining|other|existing|previous|original|unchanged|old|prior)( \w+)? (content|contents|text|lines?|notes?|sections?|code|entries|items|bullets|tasks|paragraphs?)$",
        true,
    ),
    // "content unchanged", "lines omitted for brevity"
    (
        r"^(the )?(content|contents|text|lines?|code|sections?|notes?|entries|items)( \w+)? (unchanged|omitted|elided|truncated|not shown|skipped|snipped|as before)( for brevity)?$",
        false,
    ),
    // "... 40 more lines ...", "[12 lines omitted]"
    (
        r"^\d+ (more )?(lines?|items|entries|paragraphs?|sections?) (omitted|unchanged|elided|not shown|hidden|truncated|skipped)$",
        false,
    ),
    (
        r"^\d+ more (lines?|items|entries|paragraphs?|sections?)$",
        true,
    ),
    // "[snip]", "(unchanged)", "... omitted ..."
    (
        r"^(unchanged|omitted|snip|snipped|truncated|elided|skipped|same as (before|above|original|previous))$",
        true,
    ),
    // "keep the rest as it is", "everything else stays the same"
    (
        r"^(keep|leave) (the )?(rest|remainder|everything else)( of( the)? \w+)?( as( it)? is| unchanged| the same)?$",
        true,
    ),
    (
        r"^everything else (is |remains |stays )?(unchanged|the same|as before)$",
        false,
    ),
    // "(omitted for brevity)", anywhere on a short line
    (
        r"\b(omitted|elided|truncated|shortened) for brevity\b",
        false,
    ),
    // A line that is only an ellipsis: "...", "…", "[...]", "// ..."
    (r"^$", true),
];

#[expect(
    clippy::expect_used,
    reason = "a constant pattern; the unit tests compile it"
)]
static COMPILED: LazyLock<Vec<(Regex, bool)>> = LazyLock::new(|| {
    PLACEHOLDERS
        .iter()
        .map(|(pattern, marked)| {
            (
                Regex::new(pattern).expect("the placeholder patterns are valid"),
                *marked,
            )
        })
        .collect()
});

/// Whether `line` looks like an elision placeholder.
pub fn is_placeholder(line: &str) -> bool {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.chars().count() > MAX_PLACEHOLDER_CHARS {
        return false;
    }
    let (words, marked) = normalize(trimmed);
    COMPILED
        .iter()
        .any(|(pattern, needs_mark)| (marked || !needs_mark) && pattern.is_match(&words))
}

/// A line's words, lowercased and joined by single spaces, with comment
/// markers, list bullets, heading hashes, brackets, ellipses and punctuation
/// dropped; and whether the line was marked as something other than text (a
/// comment, brackets around all of it, or an ellipsis). A line of punctuation
/// only (an ellipsis) gives no words.
fn normalize(line: &str) -> (String, bool) {
    let lower = line.to_lowercase();
    let mut s = lower.as_str();
    let mut marked = false;
    // Markdown's own line starts (bullets, quotes, headings) are content, not marks.
    s = s.trim_start_matches(['-', '*', '+', '>', '#', ' ', '\t']);
    for (open, close) in [("<!--", "-->"), ("/*", "*/"), ("{/*", "*/}")] {
        if let Some(rest) = s.strip_prefix(open) {
            s = rest.strip_suffix(close).unwrap_or(rest);
            marked = true;
        }
    }
    if let Some(rest) = s.strip_prefix("//") {
        s = rest;
        marked = true;
    }
    let s = s.trim();
    let wrapped = [('[', ']'), ('(', ')'), ('{', '}'), ('<', '>')]
        .iter()
        .any(|&(open, close)| s.starts_with(open) && s.ends_with(close));
    let ellipsis = s.contains("...") || s.contains('…') || s.contains(". . .");
    marked |= wrapped || ellipsis;
    let words: Vec<String> = s
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    (words.join(" "), marked)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLACEHOLDER_LINES: &[&str] = &[
        "... rest of the note unchanged ...",
        "// existing content",
        "[remaining text omitted]",
        "<!-- rest of file unchanged -->",
        "...",
        "…",
        "[...]",
        "// ...",
        "(rest of the note)",
        "# ... rest unchanged ...",
        "- ... existing items ...",
        "[Previous content remains unchanged]",
        "The rest of the note is unchanged.",
        "Rest of content omitted for brevity",
        "/* existing code */",
        "... 40 more lines ...",
        "[12 lines omitted]",
        "(unchanged)",
        "[snip]",
        "...keep the rest as it is...",
        "Everything else stays the same.",
        "Lines omitted for brevity.",
        "REST OF NOTE UNCHANGED",
        "(Other sections unchanged)",
        "<!-- existing notes here -->",
    ];

    const TEXT_LINES: &[&str] = &[
        "Rest day on Sunday.",
        "The rest of the week is free.",
        "Existing customers get a discount.",
        "## Other items",
        "## Previous notes",
        "- Other notes",
        "Remaining tasks:",
        "- [ ] keep the rest of the bread for Monday",
        "Content unchanged since 2019 is archived in old/.",
        "I left the original text unchanged on purpose.",
        "Same as before",
        "# Existing content",
        "unchanged",
        "- omitted",
        "",
        "Water at the root.",
        "TODO: water the plants... maybe tomorrow",
        "10 more minutes",
        "See https://example.org/rest/unchanged for the API.",
    ];

    #[test]
    fn placeholder_lines_are_recognized() {
        for line in PLACEHOLDER_LINES {
            assert!(is_placeholder(line), "{line:?} should be a placeholder");
        }
    }

    #[test]
    fn text_is_never_taken_for_a_placeholder() {
        for line in TEXT_LINES {
            assert!(!is_placeholder(line), "{line:?} is text");
        }
        let long = format!("... {} unchanged ...", "word ".repeat(40));
        assert!(!is_placeholder(&long), "a long line is text");
    }

    const ON: GuardPolicy = GuardPolicy {
        shrink: Some(Shrink {
            max_ratio: 0.5,
            min_lines: 20,
        }),
        placeholders: true,
        structure: false,
    };

    fn lines(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn the_shrink_guard_counts_net_lines_lost_over_the_old_count() {
        let old = lines(30);
        // 15 of 30 lost is exactly half: allowed; 16 is more than half.
        assert!(check("a.md", Some(&old), &lines(15), &ON).is_ok());
        let err = check("a.md", Some(&old), &lines(14), &ON).unwrap_err();
        assert_eq!(err.code, ErrorCode::GuardRefused);
        assert!(
            err.message
                .contains("from 30 lines to 14 (16 lines, 53% of the note, removed)"),
            "{}",
            err.message
        );
        assert!(err.message.contains("\"allow_large_delete\": true"));
        // Emptying counts; a short note is not held to the ratio; growing is fine.
        assert!(check("a.md", Some(&old), "", &ON).is_err());
        assert!(check("a.md", Some(&lines(19)), "", &ON).is_ok());
        assert!(check("a.md", Some(&old), &lines(40), &ON).is_ok());
        let allowed = GuardPolicy { shrink: None, ..ON };
        assert!(check("a.md", Some(&old), "", &allowed).is_ok());
    }

    #[test]
    fn a_placeholder_already_in_the_note_passes() {
        let old = "# Log\n\n...\n- one\n";
        assert!(check("a.md", Some(old), "# Log\n\n...\n- one\n- two\n", &ON).is_ok());
        let err = check(
            "a.md",
            Some(old),
            "# Log\n\n- one\n// existing content\n",
            &ON,
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::GuardRefused);
        assert!(
            err.message
                .contains("line 4 of the new a.md, \"// existing content\""),
            "{}",
            err.message
        );
        // A new note is checked too; with the guard off nothing is.
        assert!(check("b.md", None, "# B\n[rest of note]\n", &ON).is_err());
        assert!(check(
            "b.md",
            None,
            "# B\n[rest of note]\n",
            &GuardPolicy::UNGUARDED
        )
        .is_ok());
    }
}
