//! What a hunk is matched against, shared by applying a patch (`apply.rs`) and
//! explaining why a hunk did not apply (`conflict.rs`): the note's working lines
//! ([`ImgLine`]), where git lets a hunk land ([`Anchor`]), and the numbering of a
//! note's lines that lets a line compare in one step ([`LineIds`]).

use std::collections::HashMap;

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

/// A number for a line no note line has (an expected line that is not in the note).
pub(super) const NOT_IN_NOTE: u32 = u32::MAX;
/// A number for a working line that must match nothing (written by an earlier hunk).
const UNMATCHABLE: u32 = u32::MAX - 1;

/// The note's lines as numbers: equal lines get equal numbers, so comparing two
/// lines costs one step however long they are.
pub(super) struct LineIds<'a> {
    by_text: HashMap<&'a str, u32>,
    /// The number of the note's line `n` (1-based) at `n - 1`.
    by_origin: Vec<u32>,
}

impl<'a> LineIds<'a> {
    pub(super) fn of_note(note: &'a str) -> Self {
        let mut by_text = HashMap::new();
        let by_origin = note
            .split_inclusive('\n')
            .map(|line| {
                let next = by_text.len() as u32;
                *by_text.entry(line).or_insert(next)
            })
            .collect();
        LineIds { by_text, by_origin }
    }

    /// The number of an expected line (context or removed) of a hunk.
    pub(super) fn expected(&self, line: &str) -> u32 {
        self.by_text.get(line).copied().unwrap_or(NOT_IN_NOTE)
    }

    /// The number of a working line for an exact match: lines an earlier hunk
    /// wrote match nothing.
    pub(super) fn working(&self, line: &ImgLine) -> u32 {
        match line.origin {
            Some(n) if !line.patched => self.by_origin[n - 1],
            _ => UNMATCHABLE,
        }
    }

    /// The number of a working line by its text alone, written by a hunk or not.
    pub(super) fn text_of(&self, line: &ImgLine) -> u32 {
        match line.origin {
            Some(n) => self.by_origin[n - 1],
            None => self.by_text.get(line.text).copied().unwrap_or(UNMATCHABLE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_lines_get_equal_numbers_and_patched_lines_match_nothing() {
        let ids = LineIds::of_note("a\nb\na\n");
        assert_eq!(ids.expected("a\n"), ids.expected("a\n"));
        assert_ne!(ids.expected("a\n"), ids.expected("b\n"));
        assert_eq!(ids.expected("c\n"), NOT_IN_NOTE);

        let third = ImgLine {
            text: "a\n",
            origin: Some(3),
            patched: false,
        };
        assert_eq!(ids.working(&third), ids.expected("a\n"));
        let written = ImgLine {
            patched: true,
            ..third
        };
        assert_eq!(ids.working(&written), UNMATCHABLE);
        assert_eq!(ids.text_of(&written), ids.expected("a\n"));
        let added = ImgLine {
            text: "b\n",
            origin: None,
            patched: true,
        };
        assert_eq!(ids.text_of(&added), ids.expected("b\n"));
    }
}
