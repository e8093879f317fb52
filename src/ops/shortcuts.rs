//! The operations a model reaches for: `notes.delete`, `notes.append` and
//! `notes.insert`. Each makes the one diff the change needs and sends it down
//! `patch.apply`'s own path ([`super::change`]): one commit, subject
//! `mcp.patch_apply: <path>`.
//!
//! `notes.insert` finds a heading through [`crate::vault::sections`], on the one
//! reader of markdown structure ([`crate::index::markdown`]), so a `#` line inside a code fence or front
//! matter is never taken for a heading, as the index never takes it.

use schemars::JsonSchema;
use serde::Deserialize;

use super::change::{check_size, land, plan_delete};
use super::guard::GuardPolicy;
use super::write::{write_through_patch, Written};
use super::{Class, Context, HttpInput, HttpRoute, Operation};
use crate::error::{Error, ErrorCode, Result};
use crate::index::markdown;
use crate::notes::{suggest, Existence};
use crate::vault::sections::{self, MAX_HEADINGS_LISTED};
/// Longest anchor line for which the closest lines of the note are looked for
/// (the search is quadratic in it).
const MAX_SUGGESTED_LINE_CHARS: usize = 120;

/// `notes.delete`: delete a note, as one commit.
pub struct NotesDelete;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteRequest {
    /// The note's path relative to the notes root.
    pub path: String,
    /// Refuse (conflict) when the note changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
}

impl Operation for NotesDelete {
    const NAME: &'static str = "notes.delete";
    const EXAMPLE: &'static str = r##"await mirai.notes.delete({path: "old/draft.md"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str = "Delete a note.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/delete", HttpInput::Body);
    type Request = DeleteRequest;
    type Response = Written;

    fn run(ctx: &Context, request: DeleteRequest) -> Result<Written> {
        let (plan, commit) = land(ctx, request.base_commit.as_deref(), |ctx, budget| {
            plan_delete(ctx, &request.path, budget)
        })?;
        Ok(Written {
            path: plan.note.rel,
            hunk_count: plan.hunk_count,
            net_line_delta: plan.net_line_delta,
            commit,
            patch: plan.patch,
        })
    }
}

/// `notes.append`: add text at the end of a note.
pub struct NotesAppend;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AppendRequest {
    /// The note's path relative to the notes root.
    pub path: String,
    /// The line(s) to add; a final newline is added when missing.
    pub text: String,
    /// True: create the note when it does not exist.
    #[serde(default)]
    pub create: bool,
}

impl Operation for NotesAppend {
    const NAME: &'static str = "notes.append";
    const EXAMPLE: &'static str =
        r##"await mirai.notes.append({path: "log.md", text: "Fed the cat."})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Add text at the end of a note, on a line of its own, as one commit.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/append", HttpInput::Body);
    type Request = AppendRequest;
    type Response = Written;

    fn run(ctx: &Context, request: AppendRequest) -> Result<Written> {
        check_text(&request.text)?;
        let existence = if request.create {
            Existence::MayBeMissing
        } else {
            Existence::MustExist
        };
        let guard = GuardPolicy::for_write(ctx, false);
        write_through_patch(ctx, None, &guard, |ctx| {
            let note = ctx
                .view
                .resolve_for_write(&request.path, existence)
                .map_err(|e| suggest::amend_missing(e, |note| note.creatable = true))?;
            let current = ctx.view.current_text(&note)?;
            let before = current.as_deref().unwrap_or_default();
            let mut content = before.to_string();
            if !content.is_empty() && !content.ends_with('\n') {
                content.push_str(line_ending(before));
            }
            content.push_str(&fit(&request.text, before));
            check_size(ctx, &note, &content)?;
            Ok((note, current, content))
        })
    }
}

/// `notes.insert`: insert text under a heading, or after or before a line.
pub struct NotesInsert;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InsertRequest {
    /// The note's path relative to the notes root.
    pub path: String,
    /// The line(s) to insert; a final newline is added when missing.
    pub text: String,
    /// Insert at the end of this heading's section: its text without the #s (for a heading under another, the two joined by " > ").
    #[serde(default)]
    pub heading: Option<String>,
    /// Insert right after this line, copied exactly; it must occur once.
    #[serde(default)]
    pub after_line: Option<String>,
    /// Insert right before this line, copied exactly; it must occur once.
    #[serde(default)]
    pub before_line: Option<String>,
}

impl Operation for NotesInsert {
    const NAME: &'static str = "notes.insert";
    const EXAMPLE: &'static str = r##"await mirai.notes.insert({path: "trips/lisbon.md", heading: "Day two", text: "- tram 28"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Insert text into a note, as one commit: give exactly one of heading, after_line or before_line.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/insert", HttpInput::Body);
    type Request = InsertRequest;
    type Response = Written;

    fn run(ctx: &Context, request: InsertRequest) -> Result<Written> {
        check_text(&request.text)?;
        let anchor = match (&request.heading, &request.after_line, &request.before_line) {
            (Some(heading), None, None) => Anchor::Heading(heading),
            (None, Some(line), None) => Anchor::After(check_line("after_line", line)?),
            (None, None, Some(line)) => Anchor::Before(check_line("before_line", line)?),
            _ => return Err(Error::new(
                ErrorCode::InvalidRequest,
                "give exactly one of heading (insert at the end of that section), after_line or \
                     before_line (insert next to that line)",
            )),
        };
        let guard = GuardPolicy::for_write(ctx, false);
        write_through_patch(ctx, None, &guard, |ctx| {
            let note = ctx
                .view
                .resolve_for_write(&request.path, Existence::MustExist)?;
            let current = ctx
                .view
                .current_text(&note)?
                .ok_or_else(|| suggest::missing(&note.rel))?;
            let at = match anchor {
                Anchor::Heading(heading) => section_end(&note.rel, &current, heading)?,
                Anchor::After(line) => line_place(&note.rel, &current, line, "after_line")?.1,
                Anchor::Before(line) => line_place(&note.rel, &current, line, "before_line")?.0,
            };
            let mut content = String::with_capacity(current.len() + request.text.len() + 2);
            content.push_str(&current[..at]);
            if !content.is_empty() && !content.ends_with('\n') {
                content.push_str(line_ending(&current));
            }
            content.push_str(&fit(&request.text, &current));
            content.push_str(&current[at..]);
            check_size(ctx, &note, &content)?;
            Ok((note, Some(current), content))
        })
    }
}

/// Where `notes.insert` puts its text.
#[derive(Clone, Copy)]
enum Anchor<'a> {
    Heading(&'a str),
    After(&'a str),
    Before(&'a str),
}

fn check_text(text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            "text is empty: give the line(s) to add",
        ));
    }
    Ok(())
}

/// An anchor line without its line ending; one line, not blank.
fn check_line<'a>(field: &str, line: &'a str) -> Result<&'a str> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() || line.contains('\n') {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!("{field} must be one non-blank line of the note, copied exactly"),
        ));
    }
    Ok(line)
}

/// The note's line ending: `\r\n` when its first line ends so, else `\n`.
fn line_ending(note: &str) -> &'static str {
    match note.find('\n') {
        Some(at) if note[..at].ends_with('\r') => "\r\n",
        _ => "\n",
    }
}

/// `text` with a final newline, in the note's line ending.
fn fit(text: &str, note: &str) -> String {
    let mut text = text.replace("\r\n", "\n");
    if !text.ends_with('\n') {
        text.push('\n');
    }
    match line_ending(note) {
        "\r\n" => text.replace('\n', "\r\n"),
        _ => text,
    }
}

/// Where text inserted under `wanted` (`Plans`, `## Plans`, `Garden > Plans`) goes.
fn section_end(rel: &str, note: &str, wanted: &str) -> Result<usize> {
    let all = sections::headings(note);
    let no_headings = "insert with after_line or before_line, or add at the end with notes.append";
    Ok(sections::find(rel, &all, wanted, "heading", no_headings)?.end)
}

/// The byte offsets where the one line of `note` equal to `wanted` (trailing
/// whitespace ignored) starts and where the next line starts.
fn line_place(rel: &str, note: &str, wanted: &str, field: &str) -> Result<(usize, usize)> {
    let wanted_key = wanted.trim_end();
    let lines: Vec<markdown::Line<'_>> = markdown::lines(note).collect();
    let found: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line.text.trim_end() == wanted_key)
        .map(|(i, _)| i)
        .collect();
    let next_start = |i: usize| lines.get(i + 1).map_or(note.len(), |next| next.start);
    match found.as_slice() {
        [i] => Ok((lines[*i].start, next_start(*i))),
        [] => {
            let closest = if wanted_key.chars().count() <= MAX_SUGGESTED_LINE_CHARS {
                suggest::closest(wanted_key, lines.iter().map(|line| line.text))
            } else {
                Vec::new()
            };
            Err(Error::conflict(format!(
                "{field} {wanted:?} is not a line of {rel}{}; copy a whole line exactly as the note has it \
                 (read the note again), or use heading",
                suggest::did_you_mean(&closest)
            )))
        }
        many => {
            let numbers: Vec<String> = many
                .iter()
                .take(MAX_HEADINGS_LISTED)
                .map(|i| (i + 1).to_string())
                .collect();
            Err(Error::conflict(format!(
                "{field} {wanted:?} occurs {} times in {rel} (lines {}); give a line that occurs once, or use heading",
                many.len(),
                numbers.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GARDEN: &str = "---\ntitle: G\n---\n# Garden\n\n## Plans\n\nMore herbs.\n\n```sh\n# not a heading\n```\n\n## Tomatoes\n\nStake them.\n\n### Plans\n\nCages.\n";

    fn insert_at(note: &str, at: usize, text: &str) -> String {
        format!("{}{}{}", &note[..at], fit(text, note), &note[at..])
    }

    #[test]
    fn text_goes_at_the_end_of_the_section_before_its_blank_lines() {
        let at = section_end("g.md", GARDEN, "Garden > Plans").unwrap();
        let new = insert_at(GARDEN, at, "- basil");
        assert!(
            new.contains(
                "## Plans\n\nMore herbs.\n\n```sh\n# not a heading\n```\n- basil\n\n## Tomatoes"
            ),
            "{new}"
        );
        // A section runs over its subsections: the note's last line here.
        let at = section_end("g.md", GARDEN, "## tomatoes").unwrap();
        assert!(insert_at(GARDEN, at, "x").ends_with("Cages.\nx\n"));
        let at = section_end("g.md", GARDEN, "Tomatoes > Plans").unwrap();
        assert!(insert_at(GARDEN, at, "y").ends_with("Cages.\ny\n"));
    }

    #[test]
    fn an_anchor_that_does_not_fit_says_what_would() {
        let err = section_end("g.md", GARDEN, "Plans").unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict);
        assert!(
            err.message.contains(
                "2 headings in g.md match \"Plans\": \"Garden > Plans\" (line 6), \"Garden > Tomatoes > Plans\" (line 18)"
            ),
            "{}",
            err.message
        );
        let err = section_end("g.md", GARDEN, "Tomatos").unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound);
        assert!(
            err.message
                .starts_with("no heading \"Tomatos\" in g.md; did you mean \"Tomatoes\"?"),
            "{}",
            err.message
        );
        assert!(err
            .message
            .contains("Its headings: \"Garden\", \"Garden > Plans\""));
        let err = section_end("g.md", GARDEN, "not a heading").unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound, "code is not a heading");
        let err = section_end("n.md", "plain\n", "X").unwrap_err();
        assert!(
            err.message.contains("n.md has no headings"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_line_anchor_must_occur_once() {
        let note = "a\nb  \na\n";
        assert_eq!(line_place("n.md", note, "b", "after_line").unwrap(), (2, 6));
        let err = line_place("n.md", note, "a", "after_line").unwrap_err();
        assert!(
            err.message
                .contains("after_line \"a\" occurs 2 times in n.md (lines 1, 3)"),
            "{}",
            err.message
        );
        let err = line_place("n.md", "- buy milk\n", "- buy mlik", "before_line").unwrap_err();
        assert!(
            err.message
                .contains("is not a line of n.md; did you mean \"- buy milk\"?"),
            "{}",
            err.message
        );
    }

    #[test]
    fn text_takes_the_note_line_endings() {
        assert_eq!(fit("x", "a\n"), "x\n");
        assert_eq!(fit("x\ny", "a\r\nb"), "x\r\ny\r\n");
        assert_eq!(line_ending(""), "\n");
    }
}
