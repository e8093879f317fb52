//! Applying a parsed patch to a note's text the way `git apply` does: each hunk's
//! context and removed lines must match exactly (bytes, line endings included);
//! a hunk whose line number is off lands at the nearest exact match, searched
//! outward from where the hunk says it starts; hunks starting at line 0 or 1 must
//! match at the start and hunks without trailing context at the end; lines an
//! earlier hunk produced cannot be matched again. No fuzz.
//!
//! The work is bounded whatever the patch and the note: a hunk is first tried
//! where it says it goes and near there, and only when that fails is the whole
//! note searched, in one linear pass (Knuth–Morris–Pratt over numbered lines), so
//! the answer is git's and the cost is not a comparison of every place with every
//! line. The working lines sit on both sides of a gap at the last hunk, so hunks in
//! order cost what they touch. A patch whose hunks would need more than
//! [`WORK_LIMIT`] steps in all (hundreds of hunks far from their stated lines, or
//! jumping back and forth over a huge note) is refused with a conflict that says
//! how to fix it.

use super::budget::WORK_LIMIT;
use super::matching::{Anchor, ImgLine, LineIds};
use super::search::Kmp;
use super::{conflict, Budget, LineKind, Patch, Target};
use crate::error::{Error, Result};

/// Steps a hunk may spend trying places near its stated line, beyond twice its own
/// size, before the whole note is searched at once.
const NEAR_STEPS: u64 = 4096;

/// What a patch does, for propose and apply alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The note's new text, or `None` when the patch deletes it.
    pub content: Option<String>,
    pub hunk_count: usize,
    /// Added lines minus removed lines.
    pub net_line_delta: i64,
}

/// The note's lines while hunks apply: `left` is lines `0..left.len()`, `right`
/// holds the rest in reverse, so the gap between them moves line by line and a
/// hunk changes the lines at the gap without shifting the rest of the note.
struct Image<'a> {
    left: Vec<ImgLine<'a>>,
    right: Vec<ImgLine<'a>>,
}

impl<'a> Image<'a> {
    fn new(text: &'a str) -> Self {
        let mut right: Vec<ImgLine> = text
            .split_inclusive('\n')
            .enumerate()
            .map(|(i, text)| ImgLine {
                text,
                origin: Some(i + 1),
                patched: false,
            })
            .collect();
        right.reverse();
        Image {
            left: Vec::new(),
            right,
        }
    }

    fn len(&self) -> usize {
        self.left.len() + self.right.len()
    }

    fn get(&self, i: usize) -> &ImgLine<'a> {
        match i.checked_sub(self.left.len()) {
            None => &self.left[i],
            Some(k) => &self.right[self.right.len() - 1 - k],
        }
    }

    fn iter(&self) -> impl Iterator<Item = &ImgLine<'a>> {
        self.left.iter().chain(self.right.iter().rev())
    }

    /// Lines the gap must move to reach `at`.
    fn distance(&self, at: usize) -> usize {
        at.abs_diff(self.left.len())
    }

    /// Replaces the `remove` lines at `at` with `with`.
    fn replace(&mut self, at: usize, remove: usize, with: impl IntoIterator<Item = ImgLine<'a>>) {
        if self.left.len() > at {
            self.right.extend(self.left.drain(at..).rev());
        } else if self.left.len() < at {
            let from = self.right.len().saturating_sub(at - self.left.len());
            self.left.extend(self.right.drain(from..).rev());
        }
        self.right.truncate(self.right.len() - remove);
        self.left.extend(with);
    }
}

/// The steps left for this patch and for its request, and the note's numbered
/// lines once a hunk has needed a search of the whole note.
struct Work<'a> {
    note: &'a str,
    left: u64,
    budget: &'a Budget,
    ids: Option<LineIds<'a>>,
}

/// The patch ran out of [`WORK_LIMIT`], or its request out of its [`Budget`].
enum Exhausted {
    Patch,
    Request,
}

impl<'a> Work<'a> {
    fn spend(&mut self, steps: u64) -> std::result::Result<(), Exhausted> {
        self.left = self.left.checked_sub(steps).ok_or(Exhausted::Patch)?;
        if !self.budget.spend_steps(steps) {
            return Err(Exhausted::Request);
        }
        Ok(())
    }

    fn ids(&mut self) -> std::result::Result<&LineIds<'a>, Exhausted> {
        if self.ids.is_none() {
            self.spend(self.note.len() as u64 / 16 + 1)?;
        }
        Ok(self.ids.get_or_insert_with(|| LineIds::of_note(self.note)))
    }
}

/// Applies `patch` to `current` (`None`: the note does not exist), as the one
/// patch of its request.
pub fn apply(patch: &Patch, current: Option<&str>) -> Result<Applied> {
    apply_within(patch, current, &Budget::request())
}

/// Applies `patch` to `current`, its work drawn from `budget` too.
pub fn apply_within(patch: &Patch, current: Option<&str>, budget: &Budget) -> Result<Applied> {
    let current = match (patch.target, current) {
        (Target::Create, Some(_)) => {
            return Err(Error::conflict(format!(
                "{} already exists, but the patch creates it (`--- /dev/null`); read the note \
                 and send a patch against its current content instead",
                patch.path
            )))
        }
        (Target::Create, None) => "",
        (_, None) => {
            return Err(Error::not_found(format!(
                "note {} does not exist; to create it use `--- /dev/null` and `+++ b/{}`",
                patch.path, patch.path
            )))
        }
        (_, Some(text)) => text,
    };
    let mut img = Image::new(current);
    let mut work = Work {
        note: current,
        left: WORK_LIMIT,
        budget,
        ids: None,
    };

    for (n, hunk) in patch.hunks.iter().enumerate() {
        let pre: Vec<&str> = hunk
            .lines
            .iter()
            .filter(|l| l.kind != LineKind::Added)
            .map(|l| l.text.as_str())
            .collect();
        let anchor = Anchor {
            pos: hunk.new_start.saturating_sub(1),
            match_beginning: hunk.old_start <= 1,
            match_end: hunk.trailing() == 0,
        };
        let found = find_pos(&img, &pre, anchor, &mut work).and_then(|found| {
            if let Some(at) = found {
                work.spend((img.distance(at) + hunk.lines.len()) as u64)?;
            }
            Ok(found)
        });
        let at = match found {
            Ok(Some(at)) => at,
            Ok(None) => {
                let lines: Vec<ImgLine> = img.iter().copied().collect();
                return Err(conflict::explain(patch, n, &lines, &pre, anchor, current));
            }
            Err(Exhausted::Patch) => return Err(too_much_work(patch, n)),
            Err(Exhausted::Request) => return Err(request_spent(patch, n)),
        };
        let mut matched = (at..at + pre.len()).map(|i| img.get(i).origin);
        let post: Vec<ImgLine> = hunk
            .lines
            .iter()
            .filter_map(|l| {
                let origin = match l.kind {
                    LineKind::Context => matched.next().flatten(),
                    LineKind::Removed => {
                        matched.next();
                        return None;
                    }
                    LineKind::Added => None,
                };
                Some(ImgLine {
                    text: l.text.as_str(),
                    origin,
                    patched: true,
                })
            })
            .collect();
        img.replace(at, pre.len(), post);
    }

    let lines = img.len();
    let content: String = img.iter().map(|l| l.text).collect();
    let applied = |content| Applied {
        content,
        hunk_count: patch.hunks.len(),
        net_line_delta: patch.net_line_delta(),
    };
    match patch.target {
        Target::Delete if !content.is_empty() => Err(Error::conflict(format!(
            "the patch deletes {} (`+++ /dev/null`) but would leave {lines} lines in it; a \
             deletion must remove every line of the note",
            patch.path,
        ))),
        Target::Delete => Ok(applied(None)),
        _ if content == current && patch.target == Target::Modify => {
            Err(Error::invalid_patch(format!(
                "patch changes nothing: {} would stay exactly as it is",
                patch.path
            )))
        }
        _ => Ok(applied(Some(content))),
    }
}

fn too_much_work(patch: &Patch, n: usize) -> Error {
    let hunk = &patch.hunks[n];
    Error::conflict(format!(
        "hunk {} of {} ({}, patch line {}) was not placed in {}: the hunks before it already \
         took the most work one patch may take, searching far from the lines their headers \
         give or jumping back and forth through the note. Read the note again, give every \
         hunk the line numbers it has now, keep the hunks in order, or send fewer hunks per \
         patch.",
        n + 1,
        patch.hunks.len(),
        hunk.header(),
        hunk.header_line,
        patch.path
    ))
}

fn request_spent(patch: &Patch, n: usize) -> Error {
    let hunk = &patch.hunks[n];
    Error::conflict(format!(
        "hunk {} of {} ({}, patch line {}) was not placed in {}: this request's patches \
         together already took the most work one request may take (hunks far from the lines \
         their headers give, in notes that moved since the patches were made). Send the \
         changes in several requests, or read the notes again and give every hunk the line \
         numbers it has now.",
        n + 1,
        patch.hunks.len(),
        hunk.header(),
        hunk.header_line,
        patch.path
    ))
}

/// git's find_pos: tries the anchor line, then one line after, one before, two
/// after, two before, and so on; the first exact match wins. Places near the
/// anchor are tried one by one; past [`NEAR_STEPS`] the rest of the note is
/// searched in one pass and the match git would reach first is taken.
fn find_pos(
    img: &Image,
    pre: &[&str],
    anchor: Anchor,
    work: &mut Work,
) -> std::result::Result<Option<usize>, Exhausted> {
    let nr = img.len();
    if anchor.match_beginning || anchor.match_end {
        // Only one place can satisfy the anchors; git tries the others in vain.
        let at = if anchor.match_beginning {
            0
        } else {
            match nr.checked_sub(pre.len()) {
                Some(at) => at,
                None => return Ok(None),
            }
        };
        return Ok(matches_at(img, pre, at, anchor, work)?.then_some(at));
    }
    let start = anchor.pos.min(nr);
    let mut near = NEAR_STEPS + 2 * weight(pre);
    let budget_before = work.left;
    for at in outward(start, nr) {
        if matches_at(img, pre, at, anchor, work)? {
            return Ok(Some(at));
        }
        if budget_before - work.left > near {
            near = 0;
            break;
        }
    }
    if near > 0 {
        // Every place was tried.
        return Ok(None);
    }
    // Far from the anchor: the match nearest to it (after it first, at equal
    // distance), found in one pass over the whole note.
    work.spend((nr + pre.len()) as u64)?;
    let ids = work.ids()?;
    let want: Vec<u32> = pre.iter().map(|line| ids.expected(line)).collect();
    let lines: Vec<u32> = img.iter().map(|line| ids.working(line)).collect();
    let mut best: Option<usize> = None;
    Kmp::new(&want).each(&lines, |at| {
        let key = |at: usize| (at.abs_diff(start), at < start);
        if best.is_none_or(|b| key(at) < key(b)) {
            best = Some(at);
        }
        // A later match is further from the anchor than one at or after it.
        at < start
    });
    Ok(best)
}

/// The places git tries, in its order: `start`, `start + 1`, `start - 1`, ...
/// within `0..=nr`.
fn outward(start: usize, nr: usize) -> impl Iterator<Item = usize> {
    std::iter::once(start).chain((1..=nr).flat_map(move |d| {
        let after = (start + d <= nr).then_some(start + d);
        let before = start.checked_sub(d);
        after.into_iter().chain(before)
    }))
}

/// What comparing all of `pre` costs, in steps.
fn weight(pre: &[&str]) -> u64 {
    pre.iter().map(|line| 1 + line.len() as u64 / 64).sum()
}

/// git's match_fragment without whitespace options: exact bytes, inside the note,
/// honouring the start/end anchors, never over lines an earlier hunk wrote.
fn matches_at(
    img: &Image,
    pre: &[&str],
    at: usize,
    anchor: Anchor,
    work: &mut Work,
) -> std::result::Result<bool, Exhausted> {
    let Some(end) = at.checked_add(pre.len()).filter(|&end| end <= img.len()) else {
        return Ok(false);
    };
    if (anchor.match_end && end != img.len()) || (anchor.match_beginning && at != 0) {
        return Ok(false);
    }
    for (k, want) in pre.iter().enumerate() {
        let line = img.get(at + k);
        work.spend(1 + want.len().min(line.text.len()) as u64 / 64)?;
        if line.patched || line.text != *want {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::budget::REQUEST_STEPS;
    use super::super::parse;
    use super::*;
    use crate::error::ErrorCode;

    fn run(before: &str, diff: &str) -> Result<Applied> {
        apply(&parse(diff).unwrap(), Some(before))
    }

    fn text(before: &str, diff: &str) -> String {
        run(before, diff).unwrap().content.unwrap()
    }

    const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";

    #[test]
    fn applies_at_the_stated_line() {
        let out = run(
            TEN,
            "--- a/n.md\n+++ b/n.md\n@@ -4,3 +4,4 @@\n 4\n-5\n+five\n+5b\n 6\n",
        )
        .unwrap();
        assert_eq!(
            out.content.unwrap(),
            "1\n2\n3\n4\nfive\n5b\n6\n7\n8\n9\n10\n"
        );
        assert_eq!((out.hunk_count, out.net_line_delta), (1, 1));
    }

    #[test]
    fn wrong_line_number_lands_on_the_nearest_exact_match() {
        let before = "a\nx\nb\nc\nx\nd\n";
        // Both "x" lines match; the one nearer to line 4 (line 5) wins.
        let diff = "--- a/n.md\n+++ b/n.md\n@@ -4,1 +4,1 @@\n-x\n+y\n";
        let err = run(before, diff).unwrap_err();
        // No trailing context: git requires the match at the end, which fails here.
        assert_eq!(err.code, ErrorCode::Conflict);
        let diff = "--- a/n.md\n+++ b/n.md\n@@ -4,2 +4,2 @@\n-x\n+y\n d\n";
        assert_eq!(text(before, diff), "a\nx\nb\nc\ny\nd\n");
        let diff = "--- a/n.md\n+++ b/n.md\n@@ -3,2 +3,2 @@\n-x\n+y\n b\n";
        assert_eq!(text(before, diff), "a\ny\nb\nc\nx\nd\n");
    }

    #[test]
    fn zero_context_insertion_goes_to_the_end_like_git() {
        let out = text(TEN, "--- a/n.md\n+++ b/n.md\n@@ -5,0 +6 @@\n+new\n");
        assert!(out.ends_with("10\nnew\n"));
    }

    #[test]
    fn hunks_starting_at_line_one_must_match_at_the_start() {
        let before = "x\na\nx\nb\n";
        let diff = "--- a/n.md\n+++ b/n.md\n@@ -1,2 +1,2 @@\n-x\n+y\n b\n";
        assert_eq!(run(before, diff).unwrap_err().code, ErrorCode::Conflict);
    }

    #[test]
    fn lines_written_by_an_earlier_hunk_cannot_be_matched_again() {
        let before = "a\nb\nc\n";
        let diff =
            "--- a/n.md\n+++ b/n.md\n@@ -2,2 +2,2 @@\n-b\n+x\n c\n@@ -2,2 +2,2 @@\n-x\n+y\n c\n";
        assert_eq!(run(before, diff).unwrap_err().code, ErrorCode::Conflict);
    }

    #[test]
    fn crlf_and_missing_final_newline_are_kept() {
        let before = "a\r\nb\r\nc";
        let diff = "--- a/n.md\n+++ b/n.md\n@@ -2,2 +2,2 @@\n b\r\n-c\n\\ No newline at end of file\n+d\n\\ No newline at end of file\n";
        assert_eq!(text(before, diff), "a\r\nb\r\nd");
        let lf =
            "--- a/n.md\n+++ b/n.md\n@@ -2,2 +2,2 @@\n b\n-c\n\\ No newline at end of file\n+d\n";
        assert_eq!(run(before, lf).unwrap_err().code, ErrorCode::Conflict);
    }

    #[test]
    fn create_delete_and_existence() {
        let create = parse("--- /dev/null\n+++ b/n.md\n@@ -0,0 +1,2 @@\n+a\n+b\n").unwrap();
        assert_eq!(apply(&create, None).unwrap().content.unwrap(), "a\nb\n");
        assert_eq!(
            apply(&create, Some("")).unwrap_err().code,
            ErrorCode::Conflict
        );
        let delete = parse("--- a/n.md\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n").unwrap();
        assert_eq!(apply(&delete, Some("a\nb\n")).unwrap().content, None);
        assert_eq!(
            apply(&delete, Some("a\nb\nc\n")).unwrap_err().code,
            ErrorCode::Conflict
        );
        assert_eq!(apply(&delete, None).unwrap_err().code, ErrorCode::NotFound);
    }

    #[test]
    fn a_patch_that_changes_nothing_is_refused() {
        let err = run(
            "a\nb\n",
            "--- a/n.md\n+++ b/n.md\n@@ -1,2 +1,2 @@\n-a\n+a\n b\n",
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidPatch);
        assert!(err.message.contains("changes nothing"));
    }

    #[test]
    fn conflict_message_shows_expected_actual_and_nearest_match() {
        let before = "# Title\n\nalpha\nbeta  gamma\ndelta\nomega\n";
        let diff = "--- a/n.md\n+++ b/n.md\n@@ -3,3 +3,3 @@\n alpha\n-beta gamma\n+BETA\n delta\n";
        let err = run(before, diff).unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict);
        let m = err.message;
        assert!(m.contains("hunk 1 of 1"), "{m}");
        assert!(m.contains("beta gamma"), "{m}");
        assert!(m.contains("4 | beta  gamma"), "{m}");
        assert!(m.contains("2 of 3"), "{m}");
        assert!(m.contains("whitespace"), "{m}");
    }

    fn numbered(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    /// The old way: every place in git's order, each compared line by line.
    fn naive_pos(lines: &[String], pre: &[&str], start: usize) -> Option<usize> {
        let fits = |at: usize| {
            at + pre.len() <= lines.len()
                && lines[at..at + pre.len()]
                    .iter()
                    .zip(pre)
                    .all(|(l, w)| l == w)
        };
        (0..=lines.len()).find_map(|d| {
            [Some(start + d), start.checked_sub(d).filter(|_| d > 0)]
                .into_iter()
                .flatten()
                .find(|&at| fits(at))
        })
    }

    #[test]
    fn hunks_far_from_their_line_land_where_git_puts_them() {
        // Copies of one block far before and far after where the hunk says it
        // starts, beyond the places tried one by one: the nearer wins, and at equal
        // distance the one after.
        let block = ["a\n", "b\n", "c\n"];
        for (before, after, want) in [
            (20_000, 20_000, 70_000),
            (19_999, 20_000, 30_001),
            (25_000, 20_000, 70_000),
        ] {
            let mut lines = numbered(100_000);
            let start = 50_000;
            for (i, line) in block.iter().enumerate() {
                lines[start - before + i] = line.to_string();
                lines[start + after + i] = line.to_string();
            }
            assert_eq!(naive_pos(&lines, &block, start), Some(want));
            let note: String = lines.concat();
            let diff = format!(
                "--- a/n.md\n+++ b/n.md\n@@ -{0},3 +{0},3 @@\n a\n-b\n+B\n c\n",
                start + 1
            );
            let out = text(&note, &diff);
            let mut expected = lines.clone();
            expected[want + 1] = "B\n".into();
            assert_eq!(out, expected.concat(), "block at {want}");
        }
    }

    #[test]
    fn lines_an_earlier_hunk_wrote_stay_unmatchable_in_a_whole_note_search() {
        let mut lines = numbered(50_000);
        lines[10] = "x\n".into();
        lines[11] = "y\n".into();
        let note = lines.concat();
        // Hunk 1 rewrites "x" in place; hunk 2 wants "x", "y" again, far away.
        let diff = "--- a/n.md\n+++ b/n.md\n@@ -10,3 +10,3 @@\n line 10\n-x\n+x\n y\n@@ -40000,2 +40000,2 @@\n-x\n+z\n y\n";
        let err = run(&note, diff).unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict);
        assert!(err.message.contains("hunk 2 of 2"), "{}", err.message);
        assert!(err.message.contains("already changed"), "{}", err.message);
    }

    #[test]
    fn a_near_miss_against_a_huge_note_is_a_conflict_with_its_nearest_partial_match() {
        // n-1 context lines, all in the note but one, against an n-line note; and
        // the same with every line alike, where counting all places would be quadratic.
        let n = 100_000;
        for alike in [false, true] {
            let lines: Vec<String> = if alike {
                vec!["a\n".to_string(); n]
            } else {
                numbered(n)
            };
            let mut diff = format!("--- a/n.md\n+++ b/n.md\n@@ -2,{} +2,{} @@\n", n - 1, n - 1);
            for (i, line) in lines.iter().enumerate().skip(1) {
                match i {
                    50_000 => diff.push_str(&format!("-{line}+changed\n")),
                    90_000 => diff.push_str(" not in the note\n"),
                    _ => diff.push_str(&format!(" {line}")),
                }
            }
            let err = run(&lines.concat(), &diff).unwrap_err();
            assert_eq!(err.code, ErrorCode::Conflict);
            let m = err.message;
            assert!(
                m.contains(&format!(
                    "Nearest partial match: lines 2-{n} ({} of {} expected lines equal)",
                    n - 2,
                    n - 1
                )),
                "{m:.3000}"
            );
            assert!(
                m.contains("line 90001: expected `not in the note`"),
                "{m:.3000}"
            );
            assert!(m.len() < 20_000, "{} bytes", m.len());
        }
    }

    #[test]
    fn thousands_of_hunks_in_order_apply_exactly() {
        let lines = numbered(300_000);
        let mut diff = String::from("--- a/n.md\n+++ b/n.md\n");
        let mut expected = lines.clone();
        for h in 0..20_000 {
            let at = 2 + h * 15; // 1-based line of the context line
            diff.push_str(&format!(
                "@@ -{at},1 +{},2 @@\n+new {h}\n {}",
                at + h,
                lines[at - 1]
            ));
        }
        for h in (0..20_000).rev() {
            expected.insert(1 + h * 15, format!("new {h}\n"));
        }
        let out = run(&lines.concat(), &diff).unwrap();
        assert_eq!(out.content.unwrap(), expected.concat());
        assert_eq!((out.hunk_count, out.net_line_delta), (20_000, 20_000));
    }

    #[test]
    fn the_patches_of_one_request_share_its_budget() {
        // Each patch's hunk lies far from its stated line: a whole-note search each.
        let lines = numbered(50_000);
        let note = lines.concat();
        let diff = format!(
            "--- a/n.md\n+++ b/n.md\n@@ -2,2 +2,2 @@\n-{}+changed\n {}",
            lines[40_000], lines[40_001]
        );
        let patch = parse(&diff).unwrap();
        let alone = Budget::request();
        apply_within(&patch, Some(&note), &alone).unwrap();
        let one_search = REQUEST_STEPS - alone.steps_left();
        let shared = Budget::with(3 * one_search + one_search / 2, 0);
        for _ in 0..3 {
            apply_within(&patch, Some(&note), &shared).unwrap();
        }
        let err = apply_within(&patch, Some(&note), &shared).unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict);
        assert!(
            err.message.contains("the most work one request may take"),
            "{}",
            err.message
        );
        assert!(shared.exhausted());
    }

    #[test]
    fn a_patch_whose_hunks_all_need_a_whole_note_search_runs_out_of_work() {
        // Each hunk says line 2, but its lines are far down a 200,000-line note:
        // each would cost a search of the whole note.
        let lines = numbered(200_000);
        let mut diff = String::from("--- a/n.md\n+++ b/n.md\n");
        for h in 0..2_000 {
            let at = 100_000 + h * 40;
            diff.push_str(&format!(
                "@@ -2,2 +2,2 @@\n-{}+changed\n {}",
                lines[at],
                lines[at + 1]
            ));
        }
        let err = run(&lines.concat(), &diff).unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict);
        assert!(
            err.message.contains("the most work one patch may take"),
            "{}",
            err.message
        );
        assert!(err.message.contains("@@ -2,2 +2,2 @@"), "{}", err.message);
        // A few such hunks are fine.
        let few: String = diff
            .split("@@ -2,2")
            .take(4)
            .collect::<Vec<_>>()
            .join("@@ -2,2");
        let out = run(&lines.concat(), &few).unwrap();
        assert_eq!(out.hunk_count, 3);
    }
}
