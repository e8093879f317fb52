//! The one tokenizer behind indexing, queries, snippet offsets and explanations.
//!
//! Text is cut at Unicode (UAX #29) word boundaries, then each word is cut again at
//! inner punctuation (`.`, `:`, `_`), because UAX #29 keeps `dendron.topic.vaults`
//! or `snake_case` whole and a note search should find their parts. A piece is
//! lowercased, optionally folded to its base letters (`café` -> `cafe`), dropped
//! when it is an English stop word, and Snowball-stemmed. Han, kana and Hangul
//! runs become one term per character plus one per adjacent pair, so a query of
//! one ideograph still matches while a two-character word prefers the notes that
//! hold it as a word. Every token carries the character (Unicode scalar) offsets
//! of its source text, end exclusive.

use std::collections::HashMap;
use std::sync::Mutex;

use rustc_hash::FxBuildHasher;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

/// Pieces longer than this (in chars) are hashes, base64 or minified blobs:
/// nobody types them, and they would bloat the dictionary.
const MAX_TERM_CHARS: usize = 64;

/// Bound on the stem cache (about 40 MB at worst) and on an index's word ids.
const MAX_CACHED_STEMS: usize = 500_000;

/// Which normalizations the analyzer applies. The default is the measured choice
/// (see `benches/ir-eval/README.md`); the other settings exist so the evaluation
/// can compare them on the same code path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenizerOptions {
    pub fold_diacritics: bool,
    pub stem: bool,
    pub stop_words: bool,
    pub cjk_bigrams: bool,
}

impl Default for TokenizerOptions {
    fn default() -> Self {
        TokenizerOptions {
            fold_diacritics: true,
            stem: true,
            stop_words: true,
            cjk_bigrams: true,
        }
    }
}

/// One term with where it came from, in characters of the analyzed text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub term: String,
    pub start: usize,
    pub end: usize,
}

/// Turns text into terms. Holds no per-text state; clones start with an
/// empty stem cache.
pub struct Tokenizer {
    options: TokenizerOptions,
    stemmer: Stemmer,
    stems: Mutex<StemCache>,
}

impl Clone for Tokenizer {
    fn clone(&self) -> Self {
        Tokenizer::new(self.options)
    }
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("options", &self.options)
            .finish()
    }
}

impl Default for Tokenizer {
    fn default() -> Self {
        Tokenizer::new(TokenizerOptions::default())
    }
}

impl Tokenizer {
    pub fn new(options: TokenizerOptions) -> Self {
        Tokenizer {
            options,
            stemmer: Stemmer::create(Algorithm::English),
            stems: Mutex::new(HashMap::default()),
        }
    }

    /// All tokens of `text`, in order of their start offset.
    pub fn tokenize(&self, text: &str) -> Vec<Token> {
        let mut out = Vec::new();
        self.for_each_token(text, |term, start, end| {
            out.push(Token {
                term: term.to_string(),
                start,
                end,
            })
        });
        out
    }

    /// Calls `emit(term, start_char, end_char)` for every token of `text`, in
    /// order: the form queries and snippets use, without a `String` per token.
    pub fn for_each_token(&self, text: &str, emit: impl FnMut(&str, usize, usize)) {
        // Another thread tokenizing at the same moment just stems uncached.
        let mut stems = self.stems.try_lock().ok();
        let mut sink = TermSink {
            stems: stems.as_deref_mut(),
            bufs: NormBufs::default(),
            emit,
        };
        self.scan(text, &mut sink);
    }

    /// Calls `emit(id)` for every token of `text`, in order, where the id is
    /// `intern(term)`: the indexer's form. `words` remembers each word as
    /// written with its id, so a repeated word costs one lookup instead of
    /// lowercasing, a stem-cache lookup and an intern lookup. `words` must only
    /// ever be used with this tokenizer and the same `intern`.
    pub(super) fn for_each_term_id(
        &self,
        text: &str,
        words: &mut WordIds,
        intern: impl FnMut(&str) -> u32,
        emit: impl FnMut(u32),
    ) {
        let mut stems = self.stems.try_lock().ok();
        let mut sink = IdSink {
            words,
            stems: stems.as_deref_mut(),
            bufs: NormBufs::default(),
            intern,
            emit,
        };
        self.scan(text, &mut sink);
    }

    fn scan(&self, text: &str, sink: &mut impl Sink) {
        let mut scratch = Scratch::default();
        // Words never span ASCII whitespace, so text is taken one
        // whitespace-free field at a time: all-ASCII fields (most of a typical
        // note) take a byte scanner that cuts exactly where UAX #29 plus the
        // inner-punctuation split would, the others the full segmenter.
        let bytes = text.as_bytes();
        let mut char_pos = 0usize;
        let mut i = 0usize;
        while i < bytes.len() {
            if bytes[i].is_ascii_whitespace() {
                i += 1;
                char_pos += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            let field = &text[start..i];
            char_pos = if field.is_ascii() {
                self.ascii_field(field, char_pos, sink)
            } else {
                self.unicode_field(field, char_pos, &mut scratch, sink)
            };
        }
    }

    /// Tokens of an all-ASCII field starting at char `base`; returns the char
    /// position after it. An apostrophe stays inside a piece only between two
    /// letters or two digits, as UAX #29 keeps it.
    fn ascii_field(&self, field: &str, base: usize, sink: &mut impl Sink) -> usize {
        let b = field.as_bytes();
        let mut i = 0usize;
        while i < b.len() {
            if !b[i].is_ascii_alphanumeric() {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() {
                if b[i].is_ascii_alphanumeric() {
                    i += 1;
                } else if b[i] == b'\'' && i + 1 < b.len() && {
                    let (p, n) = (b[i - 1], b[i + 1]);
                    (p.is_ascii_alphabetic() && n.is_ascii_alphabetic())
                        || (p.is_ascii_digit() && n.is_ascii_digit())
                } {
                    i += 2;
                } else {
                    break;
                }
            }
            self.piece(&field[start..i], base + start, base + i, sink);
        }
        base + b.len()
    }

    /// Tokens of a field with non-ASCII text, cut by UAX #29; returns the char
    /// position after it.
    fn unicode_field(
        &self,
        field: &str,
        base: usize,
        scratch: &mut Scratch,
        sink: &mut impl Sink,
    ) -> usize {
        // Char offsets are derived incrementally: counting from the start for
        // every word would be quadratic on long lines.
        let mut byte_cursor = 0usize;
        let mut char_cursor = base;
        let mut piece = std::mem::take(&mut scratch.piece);
        for (byte_pos, word) in field.unicode_word_indices() {
            char_cursor += field[byte_cursor..byte_pos].chars().count();
            byte_cursor = byte_pos + word.len();
            let mut piece_start: Option<usize> = None;
            let mut char_pos = char_cursor;
            piece.clear();
            for c in word.chars() {
                if is_cjk(c) {
                    if let Some(start) = piece_start.take() {
                        self.piece(&piece, start, char_pos, sink);
                        piece.clear();
                    }
                    push_cjk(self.options, c, char_pos, scratch, sink);
                } else if c.is_alphanumeric() || is_apostrophe(c) || is_combining_mark(c) {
                    piece_start.get_or_insert(char_pos);
                    piece.push(c);
                } else if let Some(start) = piece_start.take() {
                    self.piece(&piece, start, char_pos, sink);
                    piece.clear();
                }
                char_pos += 1;
            }
            if let Some(start) = piece_start {
                self.piece(&piece, start, char_pos, sink);
            }
            char_cursor = char_pos;
        }
        scratch.piece = piece;
        char_cursor + field[byte_cursor..].chars().count()
    }

    /// Hands the word inside `piece` (chars `start..end`) to the sink, if any.
    fn piece(&self, piece: &str, start: usize, end: usize, sink: &mut impl Sink) {
        // Apostrophes are kept inside words (`don't`, `user's`) for the stop list
        // and the stemmer, but never lead or trail a term. Trimming looks at
        // the ends only: most pieces have no apostrophe to trim.
        let core = piece.trim_start_matches(is_apostrophe);
        let lead = piece[..piece.len() - core.len()].chars().count();
        let trimmed = core.trim_end_matches(is_apostrophe);
        let trail = core[trimmed.len()..].chars().count();
        let core = trimmed;
        if core.is_empty() {
            return;
        }
        let core_start = start + lead;
        let core_end = end - trail;
        if core_end - core_start > MAX_TERM_CHARS {
            return;
        }
        sink.word(self, core, core_start, core_end);
    }

    /// Calls `found(term)` with `word`'s term, unless it is a stop word.
    fn with_term(
        &self,
        word: &str,
        bufs: &mut NormBufs,
        stems: Option<&mut StemCache>,
        found: impl FnOnce(&str),
    ) {
        let norm = &mut bufs.norm;
        norm.clear();
        if word.is_ascii() {
            norm.extend(word.chars().map(|c| c.to_ascii_lowercase()));
        } else {
            for c in word.chars() {
                if is_apostrophe(c) {
                    norm.push('\'');
                } else {
                    norm.extend(c.to_lowercase());
                }
            }
            if self.options.fold_diacritics {
                let folded = &mut bufs.folded;
                folded.clear();
                for c in norm.nfd() {
                    if is_combining_mark(c) {
                        continue;
                    }
                    match fold_letter(c) {
                        Some(s) => folded.push_str(s),
                        None => folded.push(c),
                    }
                }
                std::mem::swap(norm, folded);
            }
        }
        // Normalizing a word to its term (stop list, stemmer) is the costliest
        // step and a vault repeats its words, so the outcome is remembered, up
        // to a bound against floods of unique words. `None` marks a stop word.
        let Some(cache) = stems else {
            if let Some(term) = self.term_of(norm) {
                found(&term);
            }
            return;
        };
        if let Some(known) = cache.get(norm.as_str()) {
            if let Some(term) = known {
                found(term);
            }
            return;
        }
        let term = self.term_of(norm);
        if let Some(term) = &term {
            found(term);
        }
        if cache.len() < MAX_CACHED_STEMS {
            cache.insert(norm.as_str().into(), term);
        }
    }

    /// The term of a normalized word: stemmed, or `None` for a stop word.
    fn term_of(&self, norm: &str) -> Option<Box<str>> {
        if self.options.stop_words && is_stop_word(norm) {
            None
        } else if self.options.stem {
            Some(self.stemmer.stem(norm).into())
        } else {
            Some(norm.into())
        }
    }
}

fn push_cjk(
    options: TokenizerOptions,
    c: char,
    pos: usize,
    scratch: &mut Scratch,
    sink: &mut impl Sink,
) {
    // UAX #29 makes each ideograph its own word, so a run is recognised by
    // position: the previous CJK character ended right where this one starts.
    if let Some((prev, prev_pos)) = scratch.cjk_prev {
        if prev_pos + 1 == pos && options.cjk_bigrams {
            let mut pair = [0u8; 8];
            let a = prev.encode_utf8(&mut pair).len();
            let b = c.encode_utf8(&mut pair[a..]).len();
            let pair = std::str::from_utf8(&pair[..a + b]).unwrap_or_default();
            sink.term(pair, prev_pos, pos + 1);
        }
    }
    let mut buf = [0u8; 4];
    sink.term(c.encode_utf8(&mut buf), pos, pos + 1);
    scratch.cjk_prev = Some((c, pos));
}

/// Normalized word -> its term, or `None` for a stop word.
type StemCache = HashMap<Box<str>, Option<Box<str>>, FxBuildHasher>;

/// A word as written -> its term's id, or `None` for a stop word: see
/// [`Tokenizer::for_each_term_id`]. Bounded like the stem cache.
#[derive(Debug, Clone, Default)]
pub(super) struct WordIds(HashMap<Box<str>, Option<u32>, FxBuildHasher>);

/// Where the scanner's output goes: words (apostrophes trimmed, length
/// checked) still to be normalized, and CJK terms, which are final.
trait Sink {
    fn word(&mut self, tokenizer: &Tokenizer, word: &str, start: usize, end: usize);
    fn term(&mut self, term: &str, start: usize, end: usize);
}

/// Emits terms as strings with their offsets.
struct TermSink<'a, F> {
    stems: Option<&'a mut StemCache>,
    bufs: NormBufs,
    emit: F,
}

impl<F: FnMut(&str, usize, usize)> Sink for TermSink<'_, F> {
    fn word(&mut self, tokenizer: &Tokenizer, word: &str, start: usize, end: usize) {
        let emit = &mut self.emit;
        tokenizer.with_term(word, &mut self.bufs, self.stems.as_deref_mut(), |term| {
            emit(term, start, end)
        });
    }

    fn term(&mut self, term: &str, start: usize, end: usize) {
        (self.emit)(term, start, end);
    }
}

/// Emits term ids, resolving each word through [`WordIds`] first.
struct IdSink<'a, I, E> {
    words: &'a mut WordIds,
    stems: Option<&'a mut StemCache>,
    bufs: NormBufs,
    intern: I,
    emit: E,
}

impl<I: FnMut(&str) -> u32, E: FnMut(u32)> Sink for IdSink<'_, I, E> {
    fn word(&mut self, tokenizer: &Tokenizer, word: &str, _: usize, _: usize) {
        if let Some(&known) = self.words.0.get(word) {
            if let Some(id) = known {
                (self.emit)(id);
            }
            return;
        }
        let mut id = None;
        let intern = &mut self.intern;
        tokenizer.with_term(word, &mut self.bufs, self.stems.as_deref_mut(), |term| {
            id = Some(intern(term))
        });
        if let Some(id) = id {
            (self.emit)(id);
        }
        if self.words.0.len() < MAX_CACHED_STEMS {
            self.words.0.insert(word.into(), id);
        }
    }

    fn term(&mut self, term: &str, _: usize, _: usize) {
        let id = (self.intern)(term);
        (self.emit)(id);
    }
}

/// The scanner's reusable buffers and CJK run state.
#[derive(Default)]
struct Scratch {
    piece: String,
    cjk_prev: Option<(char, usize)>,
}

/// Normalization's reusable buffers.
#[derive(Default)]
struct NormBufs {
    norm: String,
    folded: String,
}

fn is_apostrophe(c: char) -> bool {
    c == '\'' || c == '\u{2019}'
}

/// Scripts written without spaces between words (plus Hangul, whose words carry
/// particles): Han, Hiragana, Katakana, Hangul syllables and jamo.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF        // Hiragana, Katakana
        | 0x31F0..=0x31FF      // Katakana phonetic extensions
        | 0x3400..=0x4DBF      // CJK extension A
        | 0x4E00..=0x9FFF      // CJK unified ideographs
        | 0xF900..=0xFAFF      // CJK compatibility ideographs
        | 0x1100..=0x11FF      // Hangul jamo
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0xFF66..=0xFF9F      // half-width Katakana
        | 0x20000..=0x3134F // CJK extensions B-G
    )
}

/// Letters that carry their accent in the glyph rather than as a combining mark,
/// so NFD leaves them alone although people type them without it.
fn fold_letter(c: char) -> Option<&'static str> {
    Some(match c {
        'ł' => "l",
        'ø' => "o",
        'đ' | 'ð' => "d",
        'ħ' => "h",
        'ı' => "i",
        'æ' => "ae",
        'œ' => "oe",
        'ß' => "ss",
        'þ' => "th",
        _ => return None,
    })
}

/// The Snowball English stop list (snowball.tartarus.org, `english.stop`).
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren't",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can't",
    "cannot",
    "could",
    "couldn't",
    "did",
    "didn't",
    "do",
    "does",
    "doesn't",
    "doing",
    "don't",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn't",
    "has",
    "hasn't",
    "have",
    "haven't",
    "having",
    "he",
    "he'd",
    "he'll",
    "he's",
    "her",
    "here",
    "here's",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "how's",
    "i",
    "i'd",
    "i'll",
    "i'm",
    "i've",
    "if",
    "in",
    "into",
    "is",
    "isn't",
    "it",
    "it's",
    "its",
    "itself",
    "let's",
    "me",
    "more",
    "most",
    "mustn't",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "ought",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "shan't",
    "she",
    "she'd",
    "she'll",
    "she's",
    "should",
    "shouldn't",
    "so",
    "some",
    "such",
    "than",
    "that",
    "that's",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "there's",
    "these",
    "they",
    "they'd",
    "they'll",
    "they're",
    "they've",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "wasn't",
    "we",
    "we'd",
    "we'll",
    "we're",
    "we've",
    "were",
    "weren't",
    "what",
    "what's",
    "when",
    "when's",
    "where",
    "where's",
    "which",
    "while",
    "who",
    "who's",
    "whom",
    "why",
    "why's",
    "with",
    "won't",
    "would",
    "wouldn't",
    "you",
    "you'd",
    "you'll",
    "you're",
    "you've",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

fn is_stop_word(term: &str) -> bool {
    STOP_WORDS.binary_search(&term).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        Tokenizer::default()
            .tokenize(text)
            .into_iter()
            .map(|t| t.term)
            .collect()
    }

    #[test]
    fn stop_list_is_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn lowercases_stems_and_drops_stop_words() {
        assert_eq!(
            terms("The Running of the Indexes"),
            vec!["run".to_string(), "index".to_string()]
        );
    }

    #[test]
    fn splits_dotted_and_snake_case_words() {
        assert_eq!(
            terms("dendron.topic.vaults snake_case"),
            vec!["dendron", "topic", "vault", "snake", "case"]
        );
    }

    #[test]
    fn folds_diacritics_including_letters_without_marks() {
        assert_eq!(terms("Café Łódź Straße"), vec!["cafe", "lodz", "strass"]);
        assert_eq!(terms("cafe lodz"), vec!["cafe", "lodz"]);
    }

    #[test]
    fn offsets_are_in_chars_not_bytes() {
        let text = "日本 café über";
        let toks = Tokenizer::default().tokenize(text);
        let chars: Vec<char> = text.chars().collect();
        for t in &toks {
            let surface: String = chars[t.start..t.end].iter().collect();
            assert!(!surface.is_empty(), "{t:?}");
        }
        let cafe = toks.iter().find(|t| t.term == "cafe").unwrap();
        assert_eq!((cafe.start, cafe.end), (3, 7));
        let uber = toks.iter().find(|t| t.term == "uber").unwrap();
        assert_eq!((uber.start, uber.end), (8, 12));
    }

    #[test]
    fn cjk_gives_unigrams_and_adjacent_bigrams() {
        let toks = Tokenizer::default().tokenize("全文検索 x 索引");
        let got: Vec<(&str, usize, usize)> = toks
            .iter()
            .map(|t| (t.term.as_str(), t.start, t.end))
            .collect();
        assert_eq!(
            got,
            vec![
                ("全", 0, 1),
                ("全文", 0, 2),
                ("文", 1, 2),
                ("文検", 1, 3),
                ("検", 2, 3),
                ("検索", 2, 4),
                ("索", 3, 4),
                ("x", 5, 6),
                ("索", 7, 8),
                ("索引", 7, 9),
                ("引", 8, 9),
            ]
        );
    }

    #[test]
    fn term_ids_follow_the_same_tokens() {
        let text = "The Running café's CAFÉ don't 'quoted' dendron.topic 全文検索 \
                    ünïcödé Łódź the the running";
        let tok = Tokenizer::default();
        let want: Vec<String> = tok.tokenize(text).into_iter().map(|t| t.term).collect();
        let mut names: Vec<String> = Vec::new();
        let mut words = WordIds::default();
        // Twice: the second pass answers every word from `words`.
        for _ in 0..2 {
            let mut got: Vec<usize> = Vec::new();
            tok.for_each_term_id(
                text,
                &mut words,
                |term| match names.iter().position(|n| n == term) {
                    Some(i) => i as u32,
                    None => {
                        names.push(term.to_string());
                        (names.len() - 1) as u32
                    }
                },
                |id| got.push(id as usize),
            );
            let got: Vec<String> = got.iter().map(|&i| names[i].clone()).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn kana_and_hangul_are_findable() {
        assert!(terms("検索エンジンの評価").contains(&"エン".to_string()));
        assert!(terms("검색 품질을").contains(&"품질".to_string()));
    }

    #[test]
    fn apostrophes_stay_inside_words_only() {
        assert_eq!(terms("'quoted' user’s"), vec!["quot", "user"]);
    }

    #[test]
    fn very_long_pieces_are_skipped() {
        let blob = "a".repeat(MAX_TERM_CHARS + 1);
        assert_eq!(terms(&format!("{blob} kept")), vec!["kept"]);
    }

    #[test]
    fn options_turn_each_step_off() {
        let plain = Tokenizer::new(TokenizerOptions {
            fold_diacritics: false,
            stem: false,
            stop_words: false,
            cjk_bigrams: false,
        });
        let got: Vec<String> = plain
            .tokenize("The cafés 検索")
            .into_iter()
            .map(|t| t.term)
            .collect();
        assert_eq!(got, vec!["the", "cafés", "検", "索"]);
    }
}
