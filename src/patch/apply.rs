//! Applying a parsed patch to a note's text the way `git apply` does: each hunk's
//! context and removed lines must match exactly (bytes, line endings included);
//! a hunk whose line number is off lands at the nearest exact match, searched
//! outward from where the hunk says it starts; hunks starting at line 0 or 1 must
//! match at the start and hunks without trailing context at the end; lines an
//! earlier hunk produced cannot be matched again. No fuzz.

use super::{conflict, LineKind, Patch, Target};
use crate::error::{Error, Result};

/// What a patch does, for propose and apply alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The note's new text, or `None` when the patch deletes it.
    pub content: Option<String>,
    pub hunk_count: usize,
    /// Added lines minus removed lines.
    pub net_line_delta: i64,
}

/// One line of the note while hunks are being applied.
#[derive(Debug, Clone, Copy)]
pub(super) struct ImgLine<'a> {
    /// The line with its terminator, as bytes of the note.
    pub text: &'a str,
    /// Its 1-based number in the note as it was, or `None` if a hunk added it.
    pub origin: Option<usize>,
    /// Written by an earlier hunk, so no later hunk may match it (git's LINE_PATCHED).
    pub patched: bool,
}

/// Where a hunk may land, as git decides it from the hunk's shape.
#[derive(Debug, Clone, Copy)]
pub(super) struct Anchor {
    /// Where the search starts (0-based), from the hunk's new-side line number:
    /// earlier hunks have already shifted the note.
    pub pos: usize,
    pub match_beginning: bool,
    pub match_end: bool,
}

/// Applies `patch` to `current` (`None`: the note does not exist).
pub fn apply(patch: &Patch, current: Option<&str>) -> Result<Applied> {
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
    let mut img: Vec<ImgLine> = current
        .split_inclusive('\n')
        .enumerate()
        .map(|(i, text)| ImgLine {
            text,
            origin: Some(i + 1),
            patched: false,
        })
        .collect();

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
        let Some(at) = find_pos(&img, &pre, anchor) else {
            return Err(conflict::explain(patch, n, &img, &pre, anchor));
        };
        let mut matched = img[at..at + pre.len()].iter();
        let post: Vec<ImgLine> = hunk
            .lines
            .iter()
            .filter_map(|l| {
                let origin = match l.kind {
                    LineKind::Context => matched.next().and_then(|m| m.origin),
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
        img.splice(at..at + pre.len(), post);
    }

    let content: String = img.iter().map(|l| l.text).collect();
    let applied = |content| Applied {
        content,
        hunk_count: patch.hunks.len(),
        net_line_delta: patch.net_line_delta(),
    };
    match patch.target {
        Target::Delete if !content.is_empty() => Err(Error::conflict(format!(
            "the patch deletes {} (`+++ /dev/null`) but would leave {} lines in it; a \
             deletion must remove every line of the note",
            patch.path,
            img.len()
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

/// git's find_pos: tries the anchor line, then one line after, one before, two
/// after, two before, and so on; the first exact match wins.
fn find_pos(img: &[ImgLine], pre: &[&str], anchor: Anchor) -> Option<usize> {
    let nr = img.len();
    let start = if anchor.match_beginning {
        0
    } else if anchor.match_end {
        // A preimage longer than the note gives a negative line in git, clamped to the end.
        nr.checked_sub(pre.len()).unwrap_or(nr)
    } else {
        anchor.pos
    }
    .min(nr);
    let (mut back, mut fwd, mut cur) = (start, start, start);
    let mut i = 0usize;
    loop {
        if matches_at(img, pre, cur, anchor) {
            return Some(cur);
        }
        loop {
            if back == 0 && fwd == nr {
                return None;
            }
            if i % 2 == 1 {
                if back == 0 {
                    i += 1;
                    continue;
                }
                back -= 1;
                cur = back;
            } else {
                if fwd == nr {
                    i += 1;
                    continue;
                }
                fwd += 1;
                cur = fwd;
            }
            break;
        }
        i += 1;
    }
}

/// git's match_fragment without whitespace options: exact bytes, inside the note,
/// honouring the start/end anchors, never over lines an earlier hunk wrote.
pub(super) fn matches_at(img: &[ImgLine], pre: &[&str], at: usize, anchor: Anchor) -> bool {
    let Some(end) = at.checked_add(pre.len()).filter(|&end| end <= img.len()) else {
        return false;
    };
    if (anchor.match_end && end != img.len()) || (anchor.match_beginning && at != 0) {
        return false;
    }
    img[at..end]
        .iter()
        .zip(pre)
        .all(|(line, want)| !line.patched && line.text == *want)
}

#[cfg(test)]
mod tests {
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
}
