//! Making patches: the unified diff (three lines of context, git's headers and
//! name quoting, `\ No newline at end of file`) that turns a note's text into
//! another, so callers that hold whole texts can write through the same
//! validated path as callers that hold diffs.
//!
//! The line diff is imara-diff's Myers with git's own heuristics. Those still
//! grow about quadratically on texts of few distinct lines in new orders, so a
//! large changed region is first cut at lines unique to both sides (patience
//! diff's anchors) and only pieces within a fixed budget are diffed exactly; the
//! rest are replaced whole. The diff is minimal for ordinary edits, coarser but
//! correct for pathological texts, and its cost is bounded without any clock.
//! That exact diffing is also drawn from the request's [`Budget`]: the diffs of
//! one request share it, and once it is spent their changed regions are
//! replaced whole.

use std::collections::HashMap;
use std::fmt::Write;

use imara_diff::{Algorithm, Diff, Hunk, InternedInput, Token};

use super::budget::EXACT_WORK;
use super::Budget;

const NO_NEWLINE: &str = "\\ No newline at end of file";
/// Unchanged lines around each change, as git writes by default.
const CONTEXT: u32 = 3;

/// The diff from `old` to `new` for the note at `path` (`None` on either side:
/// the note does not exist / is deleted), or `None` when nothing changes: the
/// one diff of its request.
pub fn make(path: &str, old: Option<&str>, new: Option<&str>) -> Option<String> {
    make_within(path, old, new, &Budget::request())
}

/// Whether `diff` is the diff of headers alone that [`make`] writes when an
/// empty note at `path` is created (`Some(true)`) or deleted (`Some(false)`):
/// no patch carries such a change (it has no hunk), so mirai's own records
/// of one (a proposal's) are recognized by their exact text.
pub fn empty_note_change(path: &str, diff: &str) -> Option<bool> {
    if make(path, None, Some("")).as_deref() == Some(diff) {
        Some(true)
    } else if make(path, Some(""), None).as_deref() == Some(diff) {
        Some(false)
    } else {
        None
    }
}

/// [`make`], its exact diffing drawn from `budget` too.
pub fn make_within(
    path: &str,
    old: Option<&str>,
    new: Option<&str>,
    budget: &Budget,
) -> Option<String> {
    if old == new {
        return None;
    }
    let side = |text: Option<&str>, prefix: &str| match text {
        Some(_) => quote(&format!("{prefix}/{path}")),
        None => "/dev/null".to_string(),
    };
    let input = InternedInput::new(old.unwrap_or(""), new.unwrap_or(""));
    let changes = changes(&input, budget);
    let mut out = format!("--- {}\n+++ {}\n", side(old, "a"), side(new, "b"));
    // Changes closer than twice the context share one hunk, as in git.
    let mut rest = changes.as_slice();
    while let Some(first) = rest.first() {
        let together = 1 + rest
            .windows(2)
            .take_while(|pair| pair[1].before.start - pair[0].before.end <= 2 * CONTEXT)
            .count();
        let (group, after) = rest.split_at(together);
        write_hunk(&mut out, &input, first, group);
        rest = after;
    }
    Some(out)
}

/// How many lines `before` and `after` share at their start, and then at
/// their end (never overlapping the start): what lies between is what changed.
pub fn common_ends<T: PartialEq>(before: &[T], after: &[T]) -> (usize, usize) {
    let prefix = before.iter().zip(after).take_while(|(a, b)| a == b).count();
    let suffix = before[prefix..]
        .iter()
        .rev()
        .zip(after[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    (prefix, suffix)
}

/// The changed line ranges, in order. When the changed region is small enough
/// that even a pathological diff of it is cheap, that is imara-diff's diff of the
/// whole. Otherwise the lines that occur exactly once on each side and in the
/// same order (patience diff's anchors) cut the region into pieces, each diffed
/// exactly while the squares of their sizes fit [`EXACT_WORK`] (and what is
/// left of `budget`), the rest each replaced as a whole: a coarser diff, never
/// a wrong one.
fn changes(input: &InternedInput<&str>, budget: &Budget) -> Vec<Hunk> {
    let (before, after) = (&input.before[..], &input.after[..]);
    let (prefix, suffix) = common_ends(before, after);
    let (old, new) = (prefix..before.len() - suffix, prefix..after.len() - suffix);
    let allowed = EXACT_WORK.min(budget.exact_left());
    let whole = cost(old.len(), new.len());
    if whole <= allowed {
        budget.spend_exact(whole);
        let mut diff = Diff::compute(Algorithm::Myers, input);
        diff.postprocess_lines(input);
        return diff.hunks().collect();
    }
    let mut hunks = Vec::new();
    let mut work = allowed;
    let mut from = (old.start, new.start);
    let anchors = anchors(&before[old.clone()], &after[new.clone()]);
    let ends = anchors
        .iter()
        .map(|&(a, b)| (old.start + a, new.start + b))
        .chain(std::iter::once((old.end, new.end)));
    for (a, b) in ends {
        let piece = (from.0..a, from.1..b);
        let size = cost(piece.0.len(), piece.1.len());
        if piece.0.is_empty() || piece.1.is_empty() || size > work {
            if !(piece.0.is_empty() && piece.1.is_empty()) {
                hunks.push(Hunk {
                    before: piece.0.start as u32..piece.0.end as u32,
                    after: piece.1.start as u32..piece.1.end as u32,
                });
            }
        } else {
            work -= size;
            let mut diff = Diff::default();
            diff.compute_with(
                Algorithm::Myers,
                &before[piece.0.clone()],
                &after[piece.1.clone()],
                input.interner.num_tokens(),
            );
            hunks.extend(diff.hunks().map(|h| Hunk {
                before: h.before.start + piece.0.start as u32..h.before.end + piece.0.start as u32,
                after: h.after.start + piece.1.start as u32..h.after.end + piece.1.start as u32,
            }));
        }
        // The anchor line itself is unchanged.
        from = (a + 1, b + 1);
    }
    budget.spend_exact(allowed - work);
    hunks
}

/// What diffing `a` lines against `b` lines may cost at worst, in [`EXACT_WORK`] units.
fn cost(a: usize, b: usize) -> u64 {
    let n = (a + b) as u64;
    n * n
}

/// Lines that occur exactly once in `before` and once in `after`, as (index in
/// before, index in after), the longest run of them in the same order on both
/// sides (patience sorting).
fn anchors(before: &[Token], after: &[Token]) -> Vec<(usize, usize)> {
    let mut seen: HashMap<Token, (u32, u32, usize, usize)> = HashMap::new();
    for (i, t) in before.iter().enumerate() {
        let entry = seen.entry(*t).or_insert((0, 0, i, 0));
        entry.0 += 1;
    }
    for (j, t) in after.iter().enumerate() {
        if let Some(entry) = seen.get_mut(t) {
            entry.1 += 1;
            entry.3 = j;
        }
    }
    let mut pairs: Vec<(usize, usize)> = seen
        .values()
        .filter(|(in_before, in_after, _, _)| *in_before == 1 && *in_after == 1)
        .map(|&(_, _, i, j)| (i, j))
        .collect();
    pairs.sort_unstable();
    // Longest increasing run of `j`: tails[k] ends the best run of length k + 1.
    let mut tails: Vec<usize> = Vec::new();
    let mut previous: Vec<Option<usize>> = vec![None; pairs.len()];
    for (p, &(_, j)) in pairs.iter().enumerate() {
        let k = tails.partition_point(|&t| pairs[t].1 < j);
        previous[p] = k.checked_sub(1).map(|k| tails[k]);
        if k == tails.len() {
            tails.push(p);
        } else {
            tails[k] = p;
        }
    }
    let mut chain = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied();
    while let Some(p) = at {
        chain.push(pairs[p]);
        at = previous[p];
    }
    chain.reverse();
    chain
}

/// One `@@` hunk: the changes of `group` with their context.
fn write_hunk(out: &mut String, input: &InternedInput<&str>, first: &Hunk, group: &[Hunk]) {
    let last = &group[group.len() - 1];
    let lead = first.before.start.min(CONTEXT);
    let tail = (input.before.len() as u32 - last.before.end).min(CONTEXT);
    let before = first.before.start - lead..last.before.end + tail;
    let after = first.after.start - lead..last.after.end + tail;
    let range = |r: &std::ops::Range<u32>| match r.len() {
        0 => format!("{},0", r.start),
        1 => format!("{}", r.start + 1),
        n => format!("{},{n}", r.start + 1),
    };
    let _ = writeln!(out, "@@ -{} +{} @@", range(&before), range(&after));
    let mut line = |sign: char, token: &Token| {
        let text = input.interner[*token];
        out.push(sign);
        out.push_str(text);
        if !text.ends_with('\n') {
            out.push('\n');
            out.push_str(NO_NEWLINE);
            out.push('\n');
        }
    };
    let mut at = before.start;
    for change in group {
        for token in &input.before[at as usize..change.before.start as usize] {
            line(' ', token);
        }
        for token in &input.before[change.before.start as usize..change.before.end as usize] {
            line('-', token);
        }
        for token in &input.after[change.after.start as usize..change.after.end as usize] {
            line('+', token);
        }
        at = change.before.end;
    }
    for token in &input.before[at as usize..before.end as usize] {
        line(' ', token);
    }
}

/// A file name as git writes it in a header: in double quotes with C escapes when
/// it holds a control character, a quote or a backslash.
pub fn quote(name: &str) -> String {
    let needs = |b: u8| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\';
    if !name.bytes().any(needs) {
        return name.to_string();
    }
    let mut out = String::from("\"");
    for c in name.chars() {
        match c {
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0b' => out.push_str("\\v"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\{:03o}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::{apply, parse};

    fn round_trip(path: &str, old: Option<&str>, new: Option<&str>) {
        let text = make(path, old, new).expect("a change");
        let patch = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(patch.path, path);
        let applied = apply(&patch, old).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(applied.content.as_deref(), new, "{text}");
    }

    #[test]
    fn a_spent_budget_makes_a_coarser_diff_that_still_applies() {
        // Two lines changed far apart in a note of one repeated line: no anchors.
        let mut lines = vec!["x\n"; 2_000];
        let old = lines.concat();
        (lines[500], lines[1_500]) = ("y\n", "y\n");
        let new = lines.concat();
        let exact = make_within("n.md", Some(&old), Some(&new), &Budget::request()).unwrap();
        assert_eq!(parse(&exact).unwrap().hunks.len(), 2);
        // Past the request's exact diffing, the changed region is replaced whole.
        let coarse = make_within("n.md", Some(&old), Some(&new), &Budget::with(0, 0)).unwrap();
        let patch = parse(&coarse).unwrap();
        assert_eq!(patch.hunks.len(), 1);
        assert_eq!(patch.hunks[0].removed(), 1_001);
        let applied = apply(&patch, Some(&old)).unwrap();
        assert_eq!(applied.content.as_deref(), Some(new.as_str()));
    }

    #[test]
    fn made_patches_apply_back_exactly() {
        let note = "# Title\n\none\ntwo\nthree\nfour\nfive\nsix\nseven\n";
        round_trip("a.md", Some(note), Some(&note.replace("four", "FOUR")));
        round_trip("a.md", Some(note), Some(&note.replace("one\n", "")));
        round_trip("a.md", Some(note), Some(&format!("{note}eight\n")));
        round_trip("a.md", Some(note), Some("replaced entirely"));
        round_trip("a.md", Some("no newline"), Some("no newline, still"));
        round_trip("a.md", Some("a\r\nb\r\nc\r\n"), Some("a\r\nB\r\nc\r\n"));
        round_trip("a.md", Some(note), Some(""));
        round_trip("dir/new note.md", None, Some("fresh\n"));
        round_trip("gone.md", Some(note), None);
        round_trip("odd\tname.md", Some("x\n"), Some("y\n"));
        round_trip("\"quoted\".md", Some("x\n"), Some("y\n"));
        round_trip("日本/料理.md", Some("x\n"), Some("y\n"));
    }

    #[test]
    fn headers_and_counts_are_git_s() {
        assert_eq!(
            make("a.md", Some("one\n"), Some("two\n")).unwrap(),
            "--- a/a.md\n+++ b/a.md\n@@ -1 +1 @@\n-one\n+two\n"
        );
        assert_eq!(
            make("a.md", Some("one\n"), None).unwrap(),
            "--- a/a.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"
        );
        assert_eq!(
            make("odd\tname.md", None, Some("x")).unwrap(),
            "--- /dev/null\n+++ \"b/odd\\tname.md\"\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
        );
        let ten: String = (1..=10).map(|i| format!("{i}\n")).collect();
        assert_eq!(
            make("a.md", Some(&ten), Some(&ten.replace("5\n", "5\nnew\n"))).unwrap(),
            "--- a/a.md\n+++ b/a.md\n@@ -3,6 +3,7 @@\n 3\n 4\n 5\n+new\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn no_change_is_no_patch() {
        assert_eq!(make("a.md", Some("x\n"), Some("x\n")), None);
        assert_eq!(make("a.md", None, None), None);
    }

    /// Texts that make an exact diff quadratic (every line rewritten, one line
    /// grown to very many, few distinct lines in a new order) still give a diff
    /// that applies back to exactly the new text.
    #[test]
    fn costly_diffs_still_round_trip() {
        let numbered =
            |n: usize, tag: &str| -> String { (0..n).map(|i| format!("{tag} {i}\n")).collect() };
        round_trip(
            "a.md",
            Some(&numbered(40_000, "old")),
            Some(&numbered(40_000, "new")),
        );
        round_trip("a.md", Some("one line\n"), Some(&numbered(120_000, "line")));
        let pattern = |n: usize, seed: u64| -> String {
            let mut x = seed;
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ["a\n", "b\n", "c\n", "\n"][(x % 4) as usize]
                })
                .collect()
        };
        round_trip(
            "a.md",
            Some(&pattern(100_000, 7)),
            Some(&pattern(100_000, 11)),
        );
        let reversed: String = numbered(30_000, "l")
            .lines()
            .rev()
            .map(|l| format!("{l}\n"))
            .collect();
        round_trip("a.md", Some(&numbered(30_000, "l")), Some(&reversed));
    }

    /// A changed region too large to diff whole is cut at lines unique to both
    /// sides, so edits far apart in a big note still make small hunks.
    #[test]
    fn far_apart_edits_in_a_big_note_stay_small_hunks() {
        let note: String = (0..90_000)
            .map(|i| {
                if i % 3 == 0 {
                    "\n".to_string()
                } else {
                    format!("line {i}\n")
                }
            })
            .collect();
        let edited =
            note.replacen("line 10\n", "line ten\n", 1)
                .replacen("line 89998\n", "line last\n", 1);
        let text = make("a.md", Some(&note), Some(&edited)).unwrap();
        assert_eq!(text.matches("\n@@ ").count(), 2, "{text:.400}");
        assert!(text.len() < 400, "{text}");
        round_trip("a.md", Some(&note), Some(&edited));
    }
}
