//! The linear-time search the patch code shares, so no request can make it
//! compare every position with every other: Knuth–Morris–Pratt over any sequence
//! of comparable items (bytes of a note, or lines turned into numbers by
//! [`super::matching::LineIds`]).

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
