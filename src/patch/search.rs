//! Linear-time searches the patch code shares, so no request can make it compare
//! every position with every other: Knuth–Morris–Pratt over any sequence of
//! comparable items (bytes of a note, or lines turned into numbers), and the
//! numbering of a note's lines that lets a line compare in one step.

use std::collections::HashMap;

use super::apply::ImgLine;

/// A needle prepared for Knuth–Morris–Pratt: finds every occurrence, overlapping
/// ones included, in `O(haystack + needle)` comparisons.
pub(super) struct Kmp<'n, T> {
    needle: &'n [T],
    /// `border[i]`: length of the longest proper border of `needle[..=i]`.
    border: Vec<usize>,
}

impl<'n, T: PartialEq> Kmp<'n, T> {
    /// Prepares `needle`, which must not be empty.
    pub(super) fn new(needle: &'n [T]) -> Self {
        debug_assert!(!needle.is_empty());
        let mut border = vec![0; needle.len()];
        let mut k = 0;
        for i in 1..needle.len() {
            while k > 0 && needle[i] != needle[k] {
                k = border[k - 1];
            }
            if needle[i] == needle[k] {
                k += 1;
            }
            border[i] = k;
        }
        Kmp { needle, border }
    }

    /// Calls `found` with the start of every occurrence in `haystack`, in order,
    /// until it answers `false`.
    pub(super) fn each<'h>(
        &self,
        haystack: impl IntoIterator<Item = &'h T>,
        mut found: impl FnMut(usize) -> bool,
    ) where
        T: 'h,
    {
        let mut k = 0;
        for (i, item) in haystack.into_iter().enumerate() {
            while k > 0 && *item != self.needle[k] {
                k = self.border[k - 1];
            }
            if *item == self.needle[k] {
                k += 1;
            }
            if k == self.needle.len() {
                if !found(i + 1 - k) {
                    return;
                }
                k = self.border[k - 1];
            }
        }
    }
}

/// A number for a line no note line has (an expected line that is not in the note).
pub(super) const NOT_IN_NOTE: u32 = u32::MAX;
/// A number for a working line that must match nothing (written by an earlier hunk).
pub(super) const UNMATCHABLE: u32 = u32::MAX - 1;

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

    fn all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
        let mut found = Vec::new();
        Kmp::new(needle).each(haystack, |at| {
            found.push(at);
            true
        });
        found
    }

    fn naive(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
        (0..haystack.len())
            .filter(|&at| haystack[at..].starts_with(needle))
            .collect()
    }

    #[test]
    fn finds_every_occurrence_like_the_naive_search() {
        let cases: [(&[u8], &[u8]); 7] = [
            (b"aaaa", b"aa"),
            (b"abababab", b"abab"),
            (b"abcabcabd", b"abcabd"),
            (b"aabaabaaab", b"aab"),
            (b"xyz", b"xyzw"),
            (b"", b"a"),
            (b"mississippi", b"issi"),
        ];
        for (haystack, needle) in cases {
            assert_eq!(all(haystack, needle), naive(haystack, needle), "{needle:?}");
        }
        // A pseudo-random sweep over a two-letter alphabet, where borders abound.
        let mut x = 0x2545_f491_u64;
        for _ in 0..500 {
            let mut next = |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let hay: Vec<u8> = (0..next(40)).map(|_| b'a' + next(2) as u8).collect();
            let needle: Vec<u8> = (0..1 + next(5)).map(|_| b'a' + next(2) as u8).collect();
            assert_eq!(all(&hay, &needle), naive(&hay, &needle));
        }
    }

    #[test]
    fn stops_when_told() {
        let mut seen = 0;
        Kmp::new(b"a".as_slice()).each(b"aaaa", |_| {
            seen += 1;
            seen < 2
        });
        assert_eq!(seen, 2);
    }
}
