//! The 409 message for a hunk that does not apply. It is written for a model that
//! sees nothing else: which hunk failed and why, the lines it expected, the note's
//! real lines around that place with their line numbers, and the nearest partial
//! match, so the next patch can be right in one try.

use std::fmt::Write;

use super::apply::{matches_at, Anchor, ImgLine};
use super::{Patch, Target};
use crate::error::Error;

/// Lines of context shown around the place a hunk aimed at.
const AROUND: usize = 3;
/// Longest list of expected lines or differences a message shows.
const MAX_LISTED: usize = 30;
/// Longest line shown, in characters.
const MAX_CHARS: usize = 160;

/// Builds the conflict for hunk `n` (0-based) of `patch`, which found no place in `img`.
pub(super) fn explain(
    patch: &Patch,
    n: usize,
    img: &[ImgLine],
    pre: &[&str],
    anchor: Anchor,
) -> Error {
    let hunk = &patch.hunks[n];
    let mut m = format!(
        "hunk {} of {} ({}, patch line {}) does not apply to {}",
        n + 1,
        patch.hunks.len(),
        hunk.header(),
        hunk.header_line,
        patch.path
    );
    if n > 0 {
        m.push_str(" (after the earlier hunks were applied)");
    }
    m.push_str(".\n");

    let free = Anchor {
        match_beginning: false,
        match_end: false,
        ..anchor
    };
    let aim = anchor.pos.min(img.len());
    // Where the lines are, ignoring the start/end rules (and, second, earlier hunks).
    let nearest = |ok: &dyn Fn(usize) -> bool| {
        (0..=img.len())
            .filter(|&at| ok(at))
            .min_by_key(|at| at.abs_diff(aim))
    };
    let found_free = nearest(&|at| matches_at(img, pre, at, free));
    let found_overlap = nearest(&|at| {
        at + pre.len() <= img.len()
            && img[at..at + pre.len()]
                .iter()
                .zip(pre)
                .all(|(l, w)| l.text == *w)
    });
    let lines = format!("{} lines", img.len());
    match (found_free, found_overlap) {
        _ if patch.target == Target::Delete => {
            let _ = writeln!(
                m,
                "A patch that deletes a note (`+++ /dev/null`) must remove every line of it, \
                 exactly as it is now; the note has {lines}."
            );
        }
        _ if pre.is_empty() => {
            let _ = writeln!(
                m,
                "It has no context or removed lines and its old side starts at line {}, so \
                 (as in `git apply`) it only applies to an empty note; this note has {lines}. \
                 Add a few unchanged lines around the insertion as context.",
                hunk.old_start
            );
        }
        (Some(at), _) if anchor.match_beginning && at != 0 => {
            let _ = writeln!(
                m,
                "Its lines are in the note at {}, but a hunk whose old side starts at line \
                 {} must match at the very start of the note (as in `git apply`). Fix the \
                 line numbers in the `@@` header.",
                span(img, at, pre.len()),
                hunk.old_start
            );
        }
        (Some(at), _) if anchor.match_end => {
            let _ = writeln!(
                m,
                "The hunk has no context lines after its last change, so (as in `git apply`) \
                 it must match at the very end of the note ({lines}), but its lines are at {}. \
                 Add the unchanged lines that follow the change as context lines, and count \
                 them in the `@@` header.",
                span(img, at, pre.len())
            );
        }
        (Some(_), _) => {}
        (None, Some(at)) => {
            let _ = writeln!(
                m,
                "Its lines are at {}, but an earlier hunk of this patch already changed some of \
                 them; merge the overlapping hunks into one.",
                span(img, at, pre.len())
            );
        }
        (None, None) => {
            let _ = writeln!(
                m,
                "Its context and removed lines do not appear together, exactly, anywhere in \
                 the note (spaces, tabs and line endings must match too)."
            );
        }
    }

    if !pre.is_empty() {
        let _ = writeln!(
            m,
            "\nExpected (context and removed lines, numbered from the header's line {}):",
            hunk.old_start
        );
        for (k, line) in pre.iter().enumerate().take(MAX_LISTED) {
            let _ = writeln!(m, "{:>6} | {}", hunk.old_start + k, show(line));
        }
        if pre.len() > MAX_LISTED {
            let _ = writeln!(m, "   ... ({} more)", pre.len() - MAX_LISTED);
        }
    }

    if img.is_empty() {
        m.push_str("\nThe note is empty.\n");
    } else {
        let from = aim.saturating_sub(AROUND);
        let to = (aim + pre.len().max(1) + AROUND).min(img.len());
        let _ = writeln!(m, "\nThe note at {}:", span(img, from, to - from));
        for line in &img[from..to] {
            let _ = writeln!(m, "{} | {}", number(line), show(line.text));
        }
    }

    let exact = |want: &str, line: &ImgLine| line.text == want && !line.patched;
    let loose = |want: &str, line: &ImgLine| squash(want) == squash(line.text);
    // A window that matches exactly as a whole was explained above (start/end rule,
    // overlap or deletion); a partial match only helps when there is none.
    let partial = match nearest_partial(img, pre, aim, &exact) {
        Some(p) if p.equal == pre.len() => None,
        Some(p) => Some((p, "expected lines equal")),
        None => nearest_partial(img, pre, aim, &loose).map(|p| {
            (
                p,
                "expected lines equal once spaces and line endings are ignored",
            )
        }),
    };
    if let Some((best, what)) = partial {
        let _ = writeln!(
            m,
            "\nNearest partial match: {} ({} of {} {what}). Differences:",
            span(img, best.at, pre.len().min(img.len() - best.at)),
            best.equal,
            pre.len()
        );
        let mut listed = 0;
        for (k, want) in pre.iter().enumerate() {
            let got = img.get(best.at + k);
            if got.is_some_and(|g| exact(want, g)) {
                continue;
            }
            listed += 1;
            if listed > MAX_LISTED {
                m.push_str("  ...\n");
                break;
            }
            let _ = match got {
                Some(g) => writeln!(
                    m,
                    "  line {}: expected {}, found {}{}",
                    number(g).trim(),
                    quoted(want),
                    quoted(g.text),
                    why_different(want, g)
                ),
                None => writeln!(m, "  expected {} past the end of the note", quoted(want)),
            };
        }
    }
    m.push_str("\nRead the note again and rebuild the hunk from its current lines.");
    Error::conflict(m)
}

struct Partial {
    at: usize,
    equal: usize,
}

/// The window with the most lines equal to the expected ones under `same` (ties:
/// nearest to where the hunk aimed).
fn nearest_partial(
    img: &[ImgLine],
    pre: &[&str],
    aim: usize,
    same: &dyn Fn(&str, &ImgLine) -> bool,
) -> Option<Partial> {
    if pre.len() < 2 {
        return None;
    }
    let mut best: Option<(usize, usize, usize)> = None;
    for at in 0..img.len() {
        let equal = pre
            .iter()
            .zip(&img[at..])
            .filter(|(want, line)| same(want, line))
            .count();
        let distance = at.abs_diff(aim);
        if equal > 0 && best.is_none_or(|(e, d, _)| equal > e || (equal == e && distance < d)) {
            best = Some((equal, distance, at));
        }
    }
    best.map(|(equal, _, at)| Partial { at, equal })
}

fn why_different(want: &str, got: &ImgLine) -> &'static str {
    if got.patched && got.text == want {
        " (written by an earlier hunk of this patch)"
    } else if trim_ending(want) == trim_ending(got.text) {
        " (only the line ending differs)"
    } else if squash(want) == squash(got.text) {
        " (only whitespace differs)"
    } else {
        ""
    }
}

fn trim_ending(s: &str) -> &str {
    s.trim_end_matches(['\n', '\r'])
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `lines 4-7` of the note as it was, or `line 4`, for a window of the working lines.
fn span(img: &[ImgLine], at: usize, len: usize) -> String {
    let window = &img[at.min(img.len())..(at + len).min(img.len())];
    let first = window.iter().find_map(|l| l.origin);
    let last = window.iter().rev().find_map(|l| l.origin);
    match (first, last) {
        (Some(a), Some(b)) if a == b => format!("line {a}"),
        (Some(a), Some(b)) => format!("lines {a}-{b}"),
        _ if at >= img.len() => "the end of the note".to_string(),
        _ => "lines added by an earlier hunk".to_string(),
    }
}

/// The line's number in the note as it was; lines added by an earlier hunk have none.
fn number(line: &ImgLine) -> String {
    match line.origin {
        Some(n) => format!("{n:>6}"),
        None => format!("{:>6}", "+"),
    }
}

/// A line for an inline comparison: in backticks, or named when it is empty.
fn quoted(line: &str) -> String {
    let (body, marks) = split_display(line);
    if body.is_empty() {
        format!("an empty line{marks}")
    } else {
        format!("`{body}`{marks}")
    }
}

/// A line as text, its ending made visible when it is not a plain `\n`.
fn show(line: &str) -> String {
    let (body, marks) = split_display(line);
    body + &marks
}

/// The line's text (shortened if huge) and markers for an unusual ending.
fn split_display(line: &str) -> (String, String) {
    let (body, newline) = match line.strip_suffix('\n') {
        Some(body) => (body, true),
        None => (line, false),
    };
    let (body, cr) = match body.strip_suffix('\r') {
        Some(body) => (body, true),
        None => (body, false),
    };
    let text = match body.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!(
            "{}… ({} more characters)",
            &body[..cut],
            body[cut..].chars().count()
        ),
        None => body.to_string(),
    };
    let mut marks = String::new();
    if cr {
        marks.push_str(" [CRLF]");
    }
    if !newline {
        marks.push_str(" [no newline at end of file]");
    }
    (text, marks)
}
