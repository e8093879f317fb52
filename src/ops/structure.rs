//! The structure guard: a guarded write (see [`super::guard`]) that would drop
//! a note's whole front matter block, all its headings or most of its links,
//! or replace a note of 5 lines or more keeping less than half of its lines,
//! is refused with 422 `guard_refused`, naming what would be lost and the row
//! to use instead; so is one that turns a heading into a plain line (a model's
//! heading rename that dropped the `## `), with the edit that keeps its marks
//! (that refusal does not offer the way past it: small models take it).
//! Passed like the shrink guard, with `allow_large_delete`.

use std::collections::HashMap;

use super::adapters::heading_level;
use crate::error::{Error, ErrorCode, Result};
use crate::patch;
use crate::vault::front_matter::{self, FrontMatter};
use crate::vault::{scan, sections};

/// Notes with fewer lines than this are not held to the kept-lines rule.
pub const MIN_LINES: usize = 5;

/// Most names (fields, headings, links) a refusal lists.
const LISTED: usize = 5;

/// Checks that turning note `rel` from `old` into `new` keeps its structure.
pub fn check(rel: &str, old: &str, new: &str) -> Result<()> {
    let mut lost: Vec<String> = Vec::new();
    let (old_front, new_front) = (front_matter::parse(old), front_matter::parse(new));
    if let (Some(fields), false) = (
        old_front.fields().filter(|f| !f.is_empty()),
        matches!(new_front, FrontMatter::Parsed { .. }),
    ) {
        let names: Vec<&str> = fields.keys().map(String::as_str).collect();
        lost.push(format!(
            "its whole front matter ({} field{}: {})",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            listed(&names)
        ));
    }
    let old_headings = sections::headings(old);
    if !old_headings.is_empty() && sections::headings(new).is_empty() {
        let names: Vec<String> = old_headings
            .iter()
            .map(|h| {
                let text = h.path.last().map_or("", String::as_str);
                format!("{} {text}", "#".repeat(h.level.into()))
            })
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        lost.push(format!(
            "all {} of its headings ({})",
            names.len(),
            listed(&names)
        ));
    }
    let (old_links, new_links) = (links(old, &old_front), links(new, &new_front));
    let dropped = missing(&old_links, &new_links);
    if old_links.len() >= 2 && dropped.len() * 2 > old_links.len() {
        lost.push(format!(
            "{} of its {} links ({})",
            dropped.len(),
            old_links.len(),
            listed(&dropped)
        ));
    }
    let old_lines: Vec<&str> = content_lines(old);
    let new_lines: Vec<&str> = content_lines(new);
    let gone = missing(&old_lines, &new_lines);
    let kept = old_lines.len() - gone.len();
    if sections::line_count(old) >= MIN_LINES && kept * 2 < old_lines.len() {
        lost.push(format!(
            "most of its text (it keeps {kept} of its {} lines)",
            old_lines.len()
        ));
    }
    if lost.is_empty() {
        return match demoted(old, new) {
            None => Ok(()),
            Some((heading, level, line)) => {
                let kept = format!("{} {}", "#".repeat(level.into()), line.trim());
                Err(Error::new(
                    ErrorCode::GuardRefused,
                    format!(
                        "the structure guard refused this write: it would turn the heading {heading:?} \
                         of {rel} into the plain line {line:?}. Nothing was changed. A heading keeps \
                         its marks: to rename it, notes.edit with edits: [{{old: {heading:?}, new: \
                         {kept:?}}}]."
                    ),
                ))
            }
        };
    }
    Err(Error::new(
        ErrorCode::GuardRefused,
        format!(
            "the structure guard refused this write: it would drop from {rel} {}. Nothing was changed. \
             To set or remove a front matter field use notes.front_matter; to change some lines use \
             notes.edit (with `section` for one section); to add use notes.append or notes.insert; to \
             delete the note use notes.delete. If the task really asks to rewrite the note, send the \
             same request with \"allow_large_delete\": true.",
            lost.join(", and ")
        ),
    ))
}

/// The first heading line of `old` that `new` puts a plain line in place of:
/// the changed lines between the texts' common first and last lines, taken
/// pairwise when both sides changed as many lines.
fn demoted<'a>(old: &'a str, new: &'a str) -> Option<(&'a str, u8, &'a str)> {
    let (old, new): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let (prefix, suffix) = patch::common_ends(&old, &new);
    let (old, new) = (
        &old[prefix..old.len() - suffix],
        &new[prefix..new.len() - suffix],
    );
    if old.len() != new.len() {
        return None;
    }
    old.iter().zip(new).find_map(|(before, after)| {
        let plain = !after.trim().is_empty() && !is_heading(after);
        let level = heading_level(before)?;
        plain.then_some((*before, level, *after))
    })
}

/// Whether `line` is an ATX heading.
fn is_heading(line: &str) -> bool {
    heading_level(line).is_some()
}

/// The paths a note's links name, as written.
fn links(content: &str, front: &FrontMatter) -> Vec<String> {
    scan::scan(content, front.body_start())
        .links
        .into_iter()
        .map(|link| link.path)
        .filter(|path| !path.is_empty())
        .collect()
}

/// The non-blank lines, without trailing space.
fn content_lines(content: &str) -> Vec<&str> {
    content
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.trim().is_empty())
        .collect()
}

/// The items of `old` that `new` no longer holds, counted as many times as
/// they are missing, in order.
fn missing<'a, T: AsRef<str>>(old: &'a [T], new: &[T]) -> Vec<&'a str> {
    let mut left: HashMap<&str, usize> = HashMap::new();
    for item in new {
        *left.entry(item.as_ref()).or_default() += 1;
    }
    let mut gone = Vec::new();
    for item in old {
        match left.get_mut(item.as_ref()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => gone.push(item.as_ref()),
        }
    }
    gone
}

/// The first few names, and how many more.
fn listed<T: AsRef<str>>(names: &[T]) -> String {
    let shown: Vec<&str> = names.iter().take(LISTED).map(AsRef::as_ref).collect();
    match names.len().saturating_sub(LISTED) {
        0 => shown.join(", "),
        more => format!("{}, and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTE: &str = "---\ntitle: Bread\nstatus: draft\n---\n# Bread\n\nSee [[starter]] and [flour](flour.md).\n\n## Steps\n\n- mix\n- bake\n";

    fn refusal(new: &str) -> String {
        let err = check("bread.md", NOTE, new).unwrap_err();
        assert_eq!(err.code, ErrorCode::GuardRefused);
        err.message
    }

    #[test]
    fn dropping_the_front_matter_headings_and_links_is_named() {
        let message = refusal("status: tested\n");
        assert!(
            message.contains("its whole front matter (2 fields: status, title)"),
            "{message}"
        );
        assert!(
            message.contains("all 2 of its headings (# Bread, ## Steps)"),
            "{message}"
        );
        assert!(
            message.contains("2 of its 2 links (starter, flour.md)"),
            "{message}"
        );
        assert!(message.contains("keeps 0 of its 9 lines"), "{message}");
        assert!(message.contains("notes.front_matter"), "{message}");
    }

    #[test]
    fn ordinary_changes_pass() {
        for new in [
            NOTE.replace("status: draft", "status: tested"),
            NOTE.replace("- bake\n", "- bake\n- cool\n"),
            NOTE.replace("## Steps", "## Method"),
            NOTE.replace("- mix\n", ""),
        ] {
            assert!(check("bread.md", NOTE, &new).is_ok(), "{new}");
        }
        // A short note may be rewritten; a new block is no loss.
        assert!(check("a.md", "one\ntwo\n", "three\n").is_ok());
        assert!(check("a.md", "# A\n", "---\nx: 1\n---\n# A\n").is_ok());
    }

    #[test]
    fn a_heading_turned_into_a_plain_line_is_refused_with_the_edit_that_keeps_its_marks() {
        // From a real run: "rename the heading Plans to Spring plans".
        let message = refusal(&NOTE.replace("## Steps", "Method"));
        assert!(
            message.contains(
                r###"it would turn the heading "## Steps" of bread.md into the plain line "Method""###
            ) && message.contains(r###"edits: [{old: "## Steps", new: "## Method"}]"###),
            "{message}"
        );
        // A heading's text changed, a line added under it, or a heading made a list item
        // among other changes of a different count, all pass.
        for new in [
            NOTE.replace("## Steps", "### Method"),
            NOTE.replace("## Steps\n", "## Steps\nfirst\n"),
            NOTE.replace("# Bread\n", "#hashtag\n# Bread\n"),
        ] {
            assert!(check("bread.md", NOTE, &new).is_ok(), "{new}");
        }
        assert!(
            !is_heading("#hashtag") && is_heading("  ### Three") && !is_heading("####### seven")
        );
    }

    #[test]
    fn keeping_less_than_half_of_a_note_of_five_lines_is_refused() {
        let old = "a\nb\nc\nd\ne\n";
        assert!(check("a.md", old, "a\nb\nc\nx\ny\n").is_ok());
        let message = check("a.md", old, "a\nb\nx\ny\nz\n").unwrap_err().message;
        assert!(message.contains("keeps 2 of its 5 lines"), "{message}");
    }
}
