//! Token counts, with OpenAI's o200k_base BPE as the tiktoken-rs crate
//! ships it (the vocabulary is compiled into the binary; nothing is
//! downloaded). A model reading a note sees roughly these many tokens.
//!
//! Bounded work: BPE merging is quadratic in the length of one piece of text
//! between the pre-tokenizer's boundaries, so text is counted in pieces: a
//! run of more than [`MAX_RUN_BYTES`] bytes without whitespace is cut, and
//! long texts are counted a few KiB at a time, cut after a newline (or at
//! whitespace in a very long line). For ordinary prose and code the counts
//! are those of encoding the text whole, give or take a token per cut.
//! Counts of whole notes are kept by content ([`count_cached`]), so a note is
//! counted once per version.

use std::num::NonZeroUsize;
use std::sync::{LazyLock, Mutex};

use lru::LruCache;

use crate::index::Fingerprint;

/// The longest run without whitespace counted in one piece.
pub const MAX_RUN_BYTES: usize = 128;
/// Texts are counted in pieces of about this many bytes, cut after a newline.
const PIECE_BYTES: usize = 4096;
/// Whole-note counts kept.
const CACHED_COUNTS: usize = 4096;
const CACHE_SIZE: NonZeroUsize = match NonZeroUsize::new(CACHED_COUNTS) {
    Some(size) => size,
    None => panic!("CACHED_COUNTS is positive"),
};

static COUNTS: LazyLock<Mutex<LruCache<(u64, u64), usize>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(CACHE_SIZE)));

/// The name of the encoding, for the README and answers that say it.
pub const ENCODING: &str = "o200k_base";

/// How many o200k_base tokens `text` is.
pub fn count(text: &str) -> usize {
    let bpe = tiktoken_rs::o200k_base_singleton();
    pieces(text)
        .into_iter()
        .map(|piece| bpe.encode_ordinary(piece).len())
        .sum()
}

/// [`count`] of a whole note, remembered by its content (size and hash).
pub fn count_cached(text: &str) -> usize {
    let print = Fingerprint::of(text);
    let key = (print.bytes, print.hash);
    if let Some(&n) = COUNTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(&key)
    {
        return n;
    }
    let n = count(text);
    COUNTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .put(key, n);
    n
}

/// `text` cut where counting it in parts is cheap and changes little.
fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut run = 0;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() {
            run = 0;
            if c == '\n' && at + 1 - start >= PIECE_BYTES {
                out.push(&text[start..at + 1]);
                start = at + 1;
            } else if at - start >= 4 * PIECE_BYTES {
                out.push(&text[start..at]);
                start = at;
            }
            continue;
        }
        if run >= MAX_RUN_BYTES {
            out.push(&text[start..at]);
            start = at;
            run = 0;
        }
        run += c.len_utf8();
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_o200k_base() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        let prose = "The quick brown fox jumps over the lazy dog.\n".repeat(400);
        let whole = tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(&prose)
            .len();
        let pieced = count(&prose);
        assert!(
            whole.abs_diff(pieced) <= pieces(&prose).len(),
            "{whole} vs {pieced}"
        );
        assert_eq!(count_cached(&prose), pieced);
    }

    #[test]
    fn pieces_cover_the_text_and_bound_runs() {
        let text = format!("{}\n{}", "a".repeat(1000), "word ".repeat(5000));
        let parts = pieces(&text);
        assert_eq!(parts.concat(), text);
        for part in &parts {
            let longest = part.split_whitespace().map(str::len).max().unwrap_or(0);
            assert!(longest <= MAX_RUN_BYTES);
            assert!(part.len() <= 4 * PIECE_BYTES + MAX_RUN_BYTES + 1);
        }
    }
}
