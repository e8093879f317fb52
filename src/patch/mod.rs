//! Single-file unified diffs: the parsed form of a patch, and the two steps every
//! write goes through, [`parse`] (is this a well-formed one-file diff?) and
//! [`apply`] (what does the note become?).
//!
//! `git apply` is the reference for both: what applies, where an offset hunk lands
//! and which bytes result. Where mirai is stricter (miscounted hunks, several files,
//! misplaced `\ No newline at end of file`) it refuses with a message instead of
//! guessing. The domain stays pure: no filesystem, no git, no HTTP.

mod apply;
mod conflict;
mod edit;
mod make;
mod matching;
mod parse;
mod search;

#[cfg(test)]
mod corpus_tests;

pub use apply::{apply, Applied};
pub use edit::{apply_edits, Edit};
pub use make::{make, quote};
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
    /// Added lines minus removed lines over all hunks.
    pub fn net_line_delta(&self) -> i64 {
        self.hunks
            .iter()
            .map(|h| h.added() as i64 - h.removed() as i64)
            .sum()
    }
}
