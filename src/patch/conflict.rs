//! The 409 message for a hunk that does not apply. It is written for a model that
//! sees nothing else: which hunk failed and why, the lines it expected, the note's
//! real lines around that place with their line numbers, and the nearest partial
//! match, so the next patch can be right in one try.
//!
//! Every search here is bounded: exact matches are found in one linear pass over
//! numbered lines, and the nearest partial match counts equal lines per place by
//! voting from each expected line to the places where it occurs, skipping the most
//! repeated lines (blank lines, say) when counting them all would cost more than
//! [`VOTE_PAIRS`]; the places that come out best are then counted exactly.

use std::collections::HashMap;
use std::fmt::Write;

use super::matching::{Anchor, ImgLine, LineIds, NOT_IN_NOTE};
use super::search::Kmp;
use super::{Hunk, Patch, Target};
use crate::error::Error;

/// Lines of context shown around the place a hunk aimed at.
const AROUND: usize = 3;
/// Longest list of expected lines, note lines or differences a message shows.
const MAX_LISTED: usize = 30;
/// Longest line shown, in characters.
const MAX_CHARS: usize = 160;
/// Below this many line comparisons (note lines times expected lines) every place
/// is counted directly.
const DIRECT_PAIRS: usize = 1 << 22;
/// Most (expected line, equal note line) pairs the partial match counts.
const VOTE_PAIRS: usize = 1 << 22;
/// Places counted exactly after the vote.
const FINALISTS: usize = 8;

/// Builds the conflict for hunk `n` (0-based) of `patch`, which found no place in
/// `img`, the working lines of `note`.
pub(super) fn explain(
    patch: &Patch,
    n: usize,
    img: &[ImgLine],
    pre: &[&str],
    anchor: Anchor,
    note: &str,
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

    let ids = LineIds::of_note(note);
    let want: Vec<u32> = pre.iter().map(|line| ids.expected(line)).collect();
    let exact: Vec<u32> = img.iter().map(|line| ids.working(line)).collect();
    let aim = anchor.pos.min(img.len());
    let lines = format!("{} lines", img.len());
    // Where the lines are, ignoring the start/end rules (and, second, earlier hunks).
    let found_free = || nearest(&exact, &want, aim);
    let found_overlap = || {
        let by_text: Vec<u32> = img.iter().map(|line| ids.text_of(line)).collect();
        nearest(&by_text, &want, aim)
    };
    if patch.target == Target::Delete {
        let _ = writeln!(
            m,
            "A patch that deletes a note (`+++ /dev/null`) must remove every line of it, \
             exactly as it is now; the note has {lines}."
        );
    } else if pre.is_empty() {
        let _ = writeln!(
            m,
            "It has no context or removed lines and its old side starts at line {}, so \
             (as in `git apply`) it only applies to an empty note; this note has {lines}. \
             Add a few unchanged lines around the insertion as context.",
            hunk.old_start
        );
    } else if let Some(at) = found_free() {
        if anchor.match_beginning && at != 0 {
            let _ = writeln!(
                m,
                "Its lines are in the note at {}, but a hunk whose old side starts at line \
                 {} must match at the very start of the note (as in `git apply`). Fix the \
                 line numbers in the `@@` header.",
                span(img, at, pre.len()),
                hunk.old_start
            );
        } else if anchor.match_end {
            let _ = writeln!(
                m,
                "The hunk has no context lines after its last change, so (as in `git apply`) \
                 it must match at the very end of the note ({lines}), but its lines are at {}. \
                 Add the unchanged lines that follow the change as context lines, and count \
                 them in the `@@` header.",
                span(img, at, pre.len())
            );
        }
    } else if let Some(at) = found_overlap() {
        let _ = writeln!(
            m,
            "Its lines are at {}, but an earlier hunk of this patch already changed some of \
             them; merge the overlapping hunks into one.",
            span(img, at, pre.len())
        );
    } else {
        let _ = writeln!(
            m,
            "Its context and removed lines do not appear together, exactly, anywhere in \
             the note (spaces, tabs and line endings must match too)."
        );
    }

    list_expected(&mut m, hunk, pre);

    show_note_around(&mut m, img, aim, pre.len());

    nearest_partial_match(&mut m, img, (pre, &want), &exact, aim);
    m.push_str("\nRead the note again and rebuild the hunk from its current lines.");
    Error::conflict(m)
}

/// The hunk's context and removed lines, numbered from its header.
fn list_expected(m: &mut String, hunk: &Hunk, pre: &[&str]) {
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
}

/// The note's lines around `aim`, where the hunk was aimed.
fn show_note_around(m: &mut String, img: &[ImgLine], aim: usize, wanted: usize) {
    if img.is_empty() {
        m.push_str("\nThe note is empty.\n");
    } else {
        let from = aim.saturating_sub(AROUND);
        let to = (aim + wanted.max(1) + AROUND).min(img.len());
        let shown = to.min(from + MAX_LISTED + 2 * AROUND);
        let _ = writeln!(m, "\nThe note at {}:", span(img, from, to - from));
        for line in &img[from..shown] {
            let _ = writeln!(m, "{} | {}", number(line), show(line.text));
        }
        if shown < to {
            let _ = writeln!(m, "   ... ({} more lines)", to - shown);
        }
    }
}

/// The nearest window where some of the expected lines are (exactly, or once
/// spaces and line endings are ignored), with each line that differs.
fn nearest_partial_match(
    m: &mut String,
    img: &[ImgLine],
    (pre, want): (&[&str], &[u32]),
    exact: &[u32],
    aim: usize,
) {
    let same_exact = |want: &str, line: &ImgLine| line.text == want && !line.patched;
    // A window that matches exactly as a whole was explained above (start/end rule,
    // overlap or deletion); a partial match only helps when there is none.
    let partial = match nearest_partial(exact, want, aim) {
        Some(p) if p.equal == pre.len() => None,
        Some(p) => Some((p, "expected lines equal")),
        None => {
            let mut squashed = HashMap::new();
            let mut number = |text: &str| {
                let next = squashed.len() as u32;
                *squashed.entry(squash(text)).or_insert(next)
            };
            let want: Vec<u32> = pre.iter().map(|line| number(line)).collect();
            let loose: Vec<u32> = img.iter().map(|line| number(line.text)).collect();
            nearest_partial(&loose, &want, aim).map(|p| {
                (
                    p,
                    "expected lines equal once spaces and line endings are ignored",
                )
            })
        }
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
            if got.is_some_and(|g| same_exact(want, g)) {
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
}

/// The start of the occurrence of `want` in `lines` nearest to `aim` (ties: the
/// earlier one).
fn nearest(lines: &[u32], want: &[u32], aim: usize) -> Option<usize> {
    if want.is_empty() {
        return Some(aim);
    }
    let mut best: Option<usize> = None;
    Kmp::new(want).each(lines, |at| {
        if best.is_none_or(|b| at.abs_diff(aim) < b.abs_diff(aim)) {
            best = Some(at);
        }
        at < aim
    });
    best
}

#[derive(Debug, PartialEq, Eq)]
struct Partial {
    at: usize,
    equal: usize,
}

/// The window with the most lines equal to the expected ones (ties: nearest to
/// where the hunk aimed, then the earlier). Lines are compared by number; an
/// expected line numbered [`NOT_IN_NOTE`] equals nothing.
fn nearest_partial(lines: &[u32], want: &[u32], aim: usize) -> Option<Partial> {
    if want.len() < 2 {
        return None;
    }
    let candidates: Vec<usize> = if lines.len().saturating_mul(want.len()) <= DIRECT_PAIRS {
        (0..lines.len()).collect()
    } else {
        finalists(lines, want, aim)
    };
    best_of(lines, want, aim, candidates)
}

/// The best of `candidates` by [`nearest_partial`]'s order, counted exactly.
fn best_of(lines: &[u32], want: &[u32], aim: usize, candidates: Vec<usize>) -> Option<Partial> {
    let equal_at = |at: usize| {
        want.iter()
            .zip(&lines[at..])
            .filter(|(w, l)| w == l && **w != NOT_IN_NOTE)
            .count()
    };
    // (equal, at): more equal lines win, then the place nearer the aim, then the earlier.
    let key = |(equal, at): (usize, usize)| (std::cmp::Reverse(equal), at.abs_diff(aim), at);
    let mut best: Option<(usize, usize)> = None;
    for at in candidates {
        let equal = equal_at(at);
        if equal > 0 && best.is_none_or(|b| key((equal, at)) < key(b)) {
            best = Some((equal, at));
        }
    }
    best.map(|(equal, at)| Partial { at, equal })
}

/// The places most likely to hold the best partial match, and the aim itself:
/// each expected line votes for the places its equal note lines put the window
/// at, the rarest lines first, until [`VOTE_PAIRS`] votes are cast.
fn finalists(lines: &[u32], want: &[u32], aim: usize) -> Vec<usize> {
    let mut wanted_at: HashMap<u32, Vec<usize>> = HashMap::new();
    for (k, &id) in want.iter().enumerate() {
        if id != NOT_IN_NOTE {
            wanted_at.entry(id).or_default().push(k);
        }
    }
    let mut found_at: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, id) in lines.iter().enumerate() {
        if wanted_at.contains_key(id) {
            found_at.entry(*id).or_default().push(j);
        }
    }
    let mut by_cost: Vec<(usize, u32)> = found_at
        .iter()
        .map(|(id, found)| (found.len().saturating_mul(wanted_at[id].len()), *id))
        .collect();
    by_cost.sort_unstable();
    let mut votes = vec![0u32; lines.len()];
    let mut cast = 0usize;
    for (cost, id) in by_cost {
        cast = cast.saturating_add(cost);
        if cast > VOTE_PAIRS {
            break;
        }
        for &j in &found_at[&id] {
            for &k in &wanted_at[&id] {
                if let Some(at) = j.checked_sub(k) {
                    votes[at] += 1;
                }
            }
        }
    }
    let mut top: Vec<(u32, usize)> = Vec::with_capacity(FINALISTS + 1);
    for (at, &v) in votes.iter().enumerate() {
        if v == 0 {
            continue;
        }
        let key = |(v, at): (u32, usize)| (std::cmp::Reverse(v), at.abs_diff(aim), at);
        if top.len() < FINALISTS || key((v, at)) < key(top[top.len() - 1]) {
            let place = top.partition_point(|&t| key(t) <= key((v, at)));
            top.insert(place, (v, at));
            top.truncate(FINALISTS);
        }
    }
    let mut places: Vec<usize> = top.into_iter().map(|(_, at)| at).collect();
    if aim < lines.len() {
        places.push(aim);
    }
    places
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The vote picks what counting every place picks whenever no line was
    /// skipped for being too common.
    #[test]
    fn the_vote_agrees_with_counting_every_place() {
        let mut x = 0x9e37_79b9_u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..2_000 {
            let alphabet = 2 + next(6);
            let lines: Vec<u32> = (0..1 + next(60)).map(|_| next(alphabet) as u32).collect();
            let mut want: Vec<u32> = (0..2 + next(12))
                .map(|_| next(alphabet + 1) as u32)
                .collect();
            if round % 3 == 0 {
                want[0] = NOT_IN_NOTE;
            }
            let aim = next(lines.len() as u64 + 1) as usize;
            let every = best_of(&lines, &want, aim, (0..lines.len()).collect());
            let voted = best_of(&lines, &want, aim, finalists(&lines, &want, aim));
            assert_eq!(voted, every, "{lines:?} {want:?} aim {aim}");
        }
    }

    /// Lines too common to count all their pairs are skipped, and the place the
    /// hunk aimed at is still counted exactly.
    #[test]
    fn common_lines_are_skipped_and_the_aim_is_still_counted() {
        let lines = vec![7u32; 5_000];
        let mut want = vec![7u32; 4_000];
        want[100] = NOT_IN_NOTE;
        assert_eq!(finalists(&lines, &want, 17), vec![17]);
        assert_eq!(
            nearest_partial(&lines, &want, 17),
            Some(Partial {
                at: 17,
                equal: 3_999
            })
        );
    }
}
