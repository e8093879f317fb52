//! Single-file unified diffs: the parsed form of a patch, and the two steps every
//! write goes through, [`parse`] (is this a well-formed one-file diff?) and
//! [`apply`] (what does the note become?).
//!
//! `git apply` is the reference for both: what applies, where an offset hunk lands
//! and which bytes result. Where mirai is stricter (miscounted hunks, several files,
//! misplaced `\ No newline at end of file`) it refuses with a message instead of
//! guessing. The domain stays pure: no filesystem, no git, no HTTP.

mod apply;
mod budget;
mod conflict;
mod edit;
mod make;
mod matching;
mod parse;
mod search;

#[cfg(test)]
mod corpus_tests;

pub use apply::{apply, apply_within, Applied};
pub use budget::Budget;
pub use edit::{apply_edits, Edit};
pub use make::{common_ends, empty_note_change, make, make_within, quote};
pub use parse::parse;

/// What the patch does to its note, decided by its `/dev/null` sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `--- a/P` and `+++ b/P`: the note must exist.
    Modify,
    /// `--- /dev/null`: the note must not exist yet.
    Create,
    /// `+++ /dev/null`: the hunks must remove the whole note.
    Delete,
}

/// A parsed single-file patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The header path with its `a/` or `b/` prefix removed. Not yet checked
    /// against the notes root: that is the path rules' job.
    pub path: String,
    pub target: Target,
    pub hunks: Vec<Hunk>,
}

/// One `@@ -old_start,old_count +new_start,new_count @@` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub old_start: usize,
    pub old_count: usize,
    pub new_start: usize,
    pub new_count: usize,
    pub lines: Vec<HunkLine>,
    /// 1-based line of the `@@` header in the patch text, so messages can point at it.
    pub header_line: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Context,
    Removed,
    Added,
}

/// A hunk line. `text` is the line exactly as it is (or will be) in the note,
/// terminator included: `"x\n"`, `"x\r\n"` for CRLF notes, or `"x"` when the patch
/// marks it with `\ No newline at end of file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkLine {
    pub kind: LineKind,
    pub text: String,
}

impl Hunk {
    /// Context lines before the first change; git uses it to tell where a hunk may land.
    pub fn leading(&self) -> usize {
        self.lines
            .iter()
            .take_while(|l| l.kind == LineKind::Context)
            .count()
    }

    /// Context lines after the last change. A hunk without any must match at the
    /// end of the note, as in `git apply`.
    pub fn trailing(&self) -> usize {
        self.lines
            .iter()
            .rev()
            .take_while(|l| l.kind == LineKind::Context)
            .count()
    }

    pub fn added(&self) -> usize {
        self.count(LineKind::Added)
    }

    pub fn removed(&self) -> usize {
        self.count(LineKind::Removed)
    }

    fn count(&self, kind: LineKind) -> usize {
        self.lines.iter().filter(|l| l.kind == kind).count()
    }

    /// The header as a person would write it, for messages.
    pub fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@",
            self.old_start, self.old_count, self.new_start, self.new_count
        )
    }
}

impl Patch {
    /// The patch that undoes this one, as `git apply -R` reads it: added and
    /// removed lines trade places, so do the two sides of every hunk header
    /// and of the file (a creation becomes a deletion and back).
    pub fn reversed(&self) -> Patch {
        let swap = |kind| match kind {
            LineKind::Context => LineKind::Context,
            LineKind::Removed => LineKind::Added,
            LineKind::Added => LineKind::Removed,
        };
        Patch {
            path: self.path.clone(),
            target: match self.target {
                Target::Modify => Target::Modify,
                Target::Create => Target::Delete,
                Target::Delete => Target::Create,
            },
            hunks: self
                .hunks
                .iter()
                .map(|hunk| Hunk {
                    old_start: hunk.new_start,
                    old_count: hunk.new_count,
                    new_start: hunk.old_start,
                    new_count: hunk.old_count,
                    lines: hunk
                        .lines
                        .iter()
                        .map(|line| HunkLine {
                            kind: swap(line.kind),
                            text: line.text.clone(),
                        })
                        .collect(),
                    header_line: hunk.header_line,
                })
                .collect(),
        }
    }

    /// Added lines minus removed lines over all hunks.
    pub fn net_line_delta(&self) -> i64 {
        self.hunks
            .iter()
            .map(|h| h.added() as i64 - h.removed() as i64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reversed_patch_takes_the_change_back() {
        let long: String = (1..=40).map(|n| format!("line {n}\n")).collect();
        let edited = long
            .replace("line 3\n", "line three\n")
            .replace("line 30\n", "")
            + "tail";
        let cases: [(Option<&str>, Option<&str>); 4] = [
            (Some(long.as_str()), Some(edited.as_str())),
            (None, Some("created\r\nwith crlf\r\n")),
            (Some("deleted\nno newline"), None),
            (Some("a\nb\n"), Some("a\nb")),
        ];
        for (old, new) in cases {
            let forward = parse(&make("n.md", old, new).unwrap()).unwrap();
            assert_eq!(apply(&forward, old).unwrap().content.as_deref(), new);
            let back = forward.reversed();
            assert_eq!(back.net_line_delta(), -forward.net_line_delta());
            assert_eq!(apply(&back, new).unwrap().content.as_deref(), old);
        }
        // Applied where the note moved on between its hunks, each lands by its context.
        let forward = parse(&make("n.md", Some(&long), Some(&edited)).unwrap()).unwrap();
        let moved = edited.replace("line 15\n", "line 15\nadded\n");
        let back = apply(&forward.reversed(), Some(&moved)).unwrap();
        assert_eq!(
            back.content.unwrap(),
            long.replace("line 15\n", "line 15\nadded\n")
        );
    }
}
