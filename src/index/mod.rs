//! The lexical index: notes cut into chunks ([`chunker`]), turned into terms by
//! one [`tokenizer`], kept in memory as postings and ranked with BM25F (chunk
//! text plus the note's title as a weighted field). It is built whole, loaded
//! from the artifact ([`artifact`]), or updated one note at a time after a write;
//! the three give the same answers for the same notes. Building and loading
//! cut the notes into slices, index them on one thread per core and merge.
//!
//! Ranking: every returned chunk contains at least one query term in its own
//! text; the title field and feedback only reorder. Ties are broken by path bytes,
//! then chunk index, so answers are deterministic.

pub mod artifact;
mod binary;
mod blocks;
mod build;
pub mod chunker;
mod dense;
pub mod live;
pub mod markdown;
mod postings;
mod rank;
mod request;
mod scoped;
mod stats;
pub(crate) mod stored;
mod subset;
pub mod tokenizer;
mod update;

use std::collections::BTreeMap;

pub use chunker::ChunkOptions;
pub use request::{
    parse_limit, path_matches_prefix, validate_path_prefix, validate_query, DEFAULT_LIMIT,
    MAX_LIMIT,
};
pub use tokenizer::{Token, Tokenizer, TokenizerOptions};

use postings::Terms;
use tokenizer::WordIds;

/// Everything that shapes indexing and ranking. The default is the measured
/// choice (`benches/ir-eval/README.md`); other values exist for that evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub tokenizer: TokenizerOptions,
    pub chunks: ChunkOptions,
    /// BM25 term-frequency saturation.
    pub k1: f64,
    /// BM25 length normalization, for the chunk text and the title alike.
    pub b: f64,
    /// Weight of the title field (front-matter `title`, else the first heading,
    /// plus the note's path) against the chunk text; zero turns BM25F off.
    pub title_weight: f64,
    /// Weight of the whole note's BM25 score added to each of its chunks, so a
    /// chunk is judged with its note's context; zero ranks chunks alone.
    pub note_weight: f64,
    /// Whether a note of one chunk gets the whole-note score too (its note is
    /// its chunk, so the score counts the same words a second time).
    pub note_score_one_chunk: bool,
    /// Whether the title field is added to a chunk no longer than it: a note
    /// that is its title (a one-line stub) would count its title twice.
    pub title_on_title_only: bool,
    /// Length normalization treats a chunk, note or title shorter than this
    /// share of the average as this long, so a one-line note's few words are
    /// not multiplied up; zero is plain BM25. A quarter by default: a note
    /// that is only its title no longer outranks a note that says more.
    pub min_length_share: f64,
    /// Pseudo-relevance feedback (RM3); light, and for queries of five or more
    /// terms, by default ([`Feedback::LIGHT`]).
    pub feedback: Feedback,
}

/// RM3 pseudo-relevance feedback: terms drawn from the best chunks of a first
/// pass are mixed into the query for a second. It re-ranks and never adds: a
/// chunk is still returned only when its own text holds an original query term.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    /// How many chunks of the first pass feed the relevance model (0: off).
    pub docs: usize,
    /// How many expansion terms the relevance model gives the second pass.
    pub terms: usize,
    /// The original query's share of the mixed query (RM3's lambda), 0..=1;
    /// 1 turns feedback off.
    pub original_weight: f64,
    /// Terms found in more than this share of all chunks are never expansion
    /// terms (1: no limit).
    pub max_df_share: f64,
    /// Queries with fewer distinct indexed terms are ranked without feedback:
    /// short queries are mostly names and titles of known notes, where
    /// expansion pulls in their neighbours (benches/ir-eval/README.md).
    pub min_query_terms: usize,
}

impl Feedback {
    /// The default (benches/ir-eval/README.md, issue 48's third round): the
    /// ten best chunks of the first pass give twenty terms that share a tenth
    /// of the query's weight (the query keeps 0.9), for queries of five or
    /// more distinct indexed terms. A light touch: it lifts MED, the worst
    /// collection without it, over the peers (and TIME a little) for about 2%
    /// of LISA and CISI-stubs, without the drift the heavier [`Feedback::RM3`]
    /// costs ADI and LISA. Shorter queries, mostly names and titles of known
    /// notes, rank as typed (and as fast as before).
    pub const LIGHT: Feedback = Feedback {
        docs: 10,
        terms: 20,
        original_weight: 0.9,
        max_df_share: 1.0,
        min_query_terms: 5,
    };

    /// RM3 as first measured (benches/ir-eval/README.md): the ten best chunks
    /// give ten terms, the query keeps 0.6 of the weight, for queries of
    /// twelve or more distinct indexed terms. Kept for the evaluation: it
    /// gains on CISI and MED and loses on LISA and ADI at every length threshold.
    pub const RM3: Feedback = Feedback {
        docs: 10,
        terms: 10,
        original_weight: 0.6,
        max_df_share: 1.0,
        min_query_terms: 12,
    };

    /// No feedback: one pass, the query as typed.
    pub const OFF: Feedback = Feedback {
        docs: 0,
        terms: 0,
        original_weight: 1.0,
        max_df_share: 1.0,
        min_query_terms: 0,
    };

    /// Whether a query of `terms` distinct indexed terms gets feedback.
    fn applies_to(&self, terms: usize) -> bool {
        self.docs > 0
            && self.terms > 0
            && self.original_weight < 1.0
            && terms >= self.min_query_terms
    }
}

impl Default for Params {
    fn default() -> Self {
        Params {
            tokenizer: TokenizerOptions::default(),
            chunks: ChunkOptions::default(),
            k1: 1.5,
            b: 0.6,
            title_weight: 4.0,
            note_weight: 1.0,
            note_score_one_chunk: true,
            title_on_title_only: true,
            min_length_share: 0.25,
            feedback: Feedback::LIGHT,
        }
    }
}

/// One ranked chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub content: String,
    pub score: f64,
    pub path: String,
    pub chunk_index: usize,
    /// The earliest matched query term in `content`: (start, end) in characters,
    /// end exclusive.
    pub snippet_offset: Option<(usize, usize)>,
    /// Each query token found in `content`, once, in query order, lowercased as
    /// the original service answers it (`Mango kiwi`: `["mango", "kiwi"]`; the
    /// first spelling when several analyze alike). Not stemmed, so the page can
    /// still find it in the text (case-insensitively) to highlight it.
    pub matched_terms: Vec<String>,
}

/// A chunk as a ranking of one index names it: meaningful only with that
/// index (slots are reused as notes change).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkRef(u32);

#[derive(Debug, Clone)]
struct Chunk {
    note: u32,
    chunk_index: u32,
    /// Shared with copies of the index (a dry run's, a scoped caller's): text is never copied.
    content: std::sync::Arc<str>,
    /// Terms in the content (after stop words), the BM25 document length.
    len: u32,
}

#[derive(Debug, Clone)]
struct Note {
    path: String,
    /// Chunk slots in chunk_index order.
    chunks: Vec<u32>,
    /// (term, count) pairs of the title field, sorted by term.
    title_terms: Vec<(u32, u32)>,
    title_len: u32,
    /// Terms in all its chunks: the note-level BM25 document length.
    len: u64,
    bytes: u64,
    hash: u64,
    /// Its chunks are what [`chunker`] cuts from the text it was indexed
    /// from (false for an artifact's chunks, which another chunker may have
    /// cut): [`Index::refreshed`] reuses such a note without cutting it again.
    cut_here: bool,
}

/// A note's identity for freshness checks: its size and a content hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    pub bytes: u64,
    pub hash: u64,
}

impl Fingerprint {
    pub fn of(content: &str) -> Self {
        Fingerprint {
            bytes: content.len() as u64,
            hash: fnv1a(content.as_bytes()),
        }
    }
}

/// FNV-1a, 64 bits: stable across Rust versions and platforms (unlike std's
/// hasher), which the artifact's byte-for-byte determinism needs.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The in-memory index, ready to query. Slots of removed notes and chunks are
/// reused, so it does not grow under a stream of edits.
#[derive(Debug, Clone)]
pub struct Index {
    params: Params,
    tokenizer: Tokenizer,
    by_path: BTreeMap<String, u32>,
    notes: Vec<Option<Note>>,
    free_notes: Vec<u32>,
    chunks: Vec<Option<Chunk>>,
    free_chunks: Vec<u32>,
    terms: Terms,
    /// The indexer's word -> term id cache, kept so updates start warm.
    words: WordIds,
    live_chunks: u64,
    /// Notes with at least one chunk: the note-level collection size.
    live_notes: u64,
    total_len: u64,
    /// Sum over chunks of their note's title length (the field is per chunk).
    total_title_len: u64,
    content_bytes: u64,
    /// What ranking reads, made from the rest once per state of the index.
    dense: dense::DenseCell,
}

impl Default for Index {
    fn default() -> Self {
        Index::empty(Params::default())
    }
}

impl Index {
    /// An index with no notes, ranking with `params`.
    pub fn empty(params: Params) -> Self {
        Index {
            params,
            tokenizer: Tokenizer::new(params.tokenizer),
            by_path: BTreeMap::new(),
            notes: Vec::new(),
            free_notes: Vec::new(),
            chunks: Vec::new(),
            free_chunks: Vec::new(),
            terms: Terms::default(),
            words: WordIds::default(),
            live_chunks: 0,
            live_notes: 0,
            total_len: 0,
            total_title_len: 0,
            content_bytes: 0,
            dense: dense::DenseCell::default(),
        }
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn notes_indexed(&self) -> usize {
        self.by_path.len()
    }

    pub fn chunks_indexed(&self) -> usize {
        self.live_chunks as usize
    }

    /// Total UTF-8 bytes of all chunk contents.
    pub fn content_bytes(&self) -> u64 {
        self.content_bytes
    }

    /// The size and content hash the note had when it was indexed.
    pub fn fingerprint(&self, path: &str) -> Option<Fingerprint> {
        let note = self.notes[*self.by_path.get(path)? as usize].as_ref()?;
        Some(Fingerprint {
            bytes: note.bytes,
            hash: note.hash,
        })
    }

    /// Whether any indexed note lies under the folder `folder`.
    pub fn has_notes_under(&self, folder: &str) -> bool {
        let prefix = format!("{folder}/");
        self.by_path
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(path, _)| path.starts_with(&prefix))
    }

    /// Indexed note paths, sorted by bytes.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.by_path.keys().map(String::as_str)
    }

    /// Every chunk as (note path, the note's content hash, chunk index,
    /// text), in path then chunk order: what embeddings are made of.
    pub fn chunk_texts(&self) -> impl Iterator<Item = (&str, u64, usize, &str)> {
        self.chunks_in_order()
            .map(|(path, hash, _, chunk)| (path, hash, chunk.chunk_index as usize, &*chunk.content))
    }

    /// Every chunk with its note's path and content hash and its slot, in
    /// path then chunk order.
    fn chunks_in_order(&self) -> impl Iterator<Item = (&str, u64, u32, &Chunk)> {
        self.by_path.iter().flat_map(move |(path, &slot)| {
            let note = self.notes[slot as usize].as_ref();
            note.into_iter().flat_map(move |n| {
                n.chunks.iter().filter_map(move |&c| {
                    let chunk = self.chunks[c as usize].as_ref()?;
                    Some((path.as_str(), n.hash, c, chunk))
                })
            })
        })
    }

    /// The chunk `chunk_index` of `path`, while the note still has the
    /// content hash `note_hash` (`None` once it changed or went).
    pub fn locate(&self, path: &str, note_hash: u64, chunk_index: usize) -> Option<ChunkRef> {
        let note = self.notes[*self.by_path.get(path)? as usize].as_ref()?;
        if note.hash != note_hash {
            return None;
        }
        let at = |slot: u32| {
            self.chunks[slot as usize]
                .as_ref()
                .is_some_and(|c| c.chunk_index as usize == chunk_index)
        };
        // Chunk slots are kept in chunk_index order, so this is its place.
        note.chunks
            .get(chunk_index)
            .copied()
            .filter(|&slot| at(slot))
            .or_else(|| note.chunks.iter().copied().find(|&slot| at(slot)))
            .map(ChunkRef)
    }

    /// Which chunk `chunk` is: its note's path and content hash and its chunk
    /// index (`None` for a slot this index no longer holds).
    pub fn identify(&self, chunk: ChunkRef) -> Option<(&str, u64, usize)> {
        let found = self.chunks.get(chunk.0 as usize)?.as_ref()?;
        let note = self.notes.get(found.note as usize)?.as_ref()?;
        Some((&note.path, note.hash, found.chunk_index as usize))
    }

    /// Each note's chunks in path then chunk order (the artifact's order):
    /// path, chunk slot, chunk index and text.
    fn sorted_chunks(&self) -> impl Iterator<Item = (&str, u32, usize, &str)> {
        self.chunks_in_order()
            .map(|(path, _, slot, chunk)| (path, slot, chunk.chunk_index as usize, &*chunk.content))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes() -> Vec<(String, String)> {
        vec![
            (
                "a.md".into(),
                "# Alpha\nThe quick brown fox jumps.\n".into(),
            ),
            (
                "nested/b.md".into(),
                "---\ntitle: Foxes\n---\nA fox and a dog.\n# Dogs\nDogs bark loudly at night.\n"
                    .into(),
            ),
            ("nested-other.md".into(), "fox fox fox\n".into()),
            ("nested/deep/c.md".into(), "Nothing relevant here.\n".into()),
            ("cjk.md".into(), "会議メモ\n全文検索の評価\n".into()),
            ("empty.md".into(), String::new()),
        ]
    }

    fn summary(hits: &[Hit]) -> Vec<(String, usize, String)> {
        hits.iter()
            .map(|h| (h.path.clone(), h.chunk_index, format!("{:.9}", h.score)))
            .collect()
    }

    #[test]
    fn index_can_be_shared_between_server_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Index>();
    }

    /// The default is the measured choice (benches/ir-eval/README.md, issue 48: the
    /// largest smallest ratio to the best lexical peer over the development set):
    /// k1 1.5, b 0.6, title weight 4, whole-note weight 1, a length floor of a
    /// quarter of the average, light feedback from five terms; and an index built
    /// without parameters ranks with it.
    #[test]
    fn the_default_is_the_measured_choice() {
        let p = Params::default();
        assert_eq!((p.k1, p.b), (1.5, 0.6));
        assert_eq!((p.title_weight, p.note_weight), (4.0, 1.0));
        assert!(p.note_score_one_chunk && p.title_on_title_only);
        assert_eq!(p.min_length_share, 0.25);
        assert_eq!(p.feedback, Feedback::LIGHT);
        assert_eq!(
            (
                p.feedback.docs,
                p.feedback.terms,
                p.feedback.original_weight
            ),
            (10, 20, 0.9)
        );
        assert_eq!(p.feedback.min_query_terms, 5);
        assert_eq!(Index::build(notes()).params, p);
    }

    #[test]
    fn counts_notes_chunks_and_bytes() {
        let idx = Index::build(notes());
        assert_eq!(idx.notes_indexed(), 6);
        assert_eq!(idx.chunks_indexed(), 5);
        let total: usize = notes().iter().map(|(_, c)| c.len()).sum();
        assert_eq!(idx.content_bytes(), total as u64);
    }

    #[test]
    fn every_hit_contains_a_query_term() {
        let params = Params {
            chunks: ChunkOptions {
                pack_chars: 0,
                ..ChunkOptions::default()
            },
            ..Params::default()
        };
        let idx = Index::build_with(notes(), params);
        for q in ["fox", "foxes dogs", "night fox", "検索", "alpha", "bark"] {
            let hits = idx.query(q, 50, None);
            assert!(!hits.is_empty(), "{q}");
            for h in hits {
                assert!(!h.matched_terms.is_empty(), "{q}: {h:?}");
                assert!(h.snippet_offset.is_some());
            }
        }
        // "foxes" is in b.md's title only for the chunk under "# Dogs": that chunk
        // must not be returned for the title alone.
        let hits = idx.query("foxes", 50, None);
        assert!(hits
            .iter()
            .all(|h| !(h.path == "nested/b.md" && h.chunk_index == 1)));
    }

    #[test]
    fn snippet_and_matched_terms() {
        let idx = Index::build(notes());
        let hits = idx.query("Jumps QUICK zebra", 5, None);
        assert_eq!(hits.len(), 1);
        let h = &hits[0];
        assert_eq!(h.matched_terms, vec!["jumps", "quick"]);
        let chars: Vec<char> = h.content.chars().collect();
        let (s, e) = h.snippet_offset.unwrap();
        assert_eq!(chars[s..e].iter().collect::<String>(), "quick");

        let hits = idx.query("評価", 5, None);
        assert_eq!(hits[0].path, "cjk.md");
        let (s, e) = hits[0].snippet_offset.unwrap();
        let chars: Vec<char> = hits[0].content.chars().collect();
        assert_eq!(chars[s..e].iter().collect::<String>(), "評価");
    }

    #[test]
    fn path_prefix_matches_whole_components() {
        let idx = Index::build(notes());
        let hits = idx.query("fox", 50, Some("nested"));
        assert!(!hits.is_empty());
        assert!(hits.iter().all(|h| h.path.starts_with("nested/")));
    }

    #[test]
    fn ties_break_by_path_then_chunk() {
        let same = "identical words here\n".to_string();
        let idx = Index::build(vec![
            ("z.md".into(), same.clone()),
            ("b.md".into(), same.clone()),
            ("a/x.md".into(), same),
        ]);
        let hits = idx.query("identical", 3, None);
        let order: Vec<&str> = hits.iter().map(|h| h.path.as_str()).collect();
        // Titles differ (the path is in the title field), but no title holds the
        // term, so scores tie exactly.
        assert_eq!(order, vec!["a/x.md", "b.md", "z.md"]);
    }

    #[test]
    fn stop_word_only_query_finds_nothing_without_error() {
        let idx = Index::build(notes());
        assert!(idx.query("the and of", 5, None).is_empty());
    }

    #[test]
    fn incremental_updates_equal_a_rebuild() {
        let mut base = notes();
        let mut idx = Index::build(base.clone());
        idx.upsert_note("a.md", "# Alpha\nA lazy dog sleeps; no fox.\n");
        idx.remove_note("nested-other.md");
        idx.upsert_note("new.md", "# New\nfox dog night\n");
        idx.remove_note("does-not-exist.md");

        base[0].1 = "# Alpha\nA lazy dog sleeps; no fox.\n".into();
        base.retain(|(p, _)| p != "nested-other.md");
        base.push(("new.md".into(), "# New\nfox dog night\n".into()));
        let fresh = Index::build(base);

        assert_eq!(idx.notes_indexed(), fresh.notes_indexed());
        assert_eq!(idx.chunks_indexed(), fresh.chunks_indexed());
        assert_eq!(idx.content_bytes(), fresh.content_bytes());
        for q in ["fox", "dog night", "alpha", "foxes", "検索", "bark loudly"] {
            for prefix in [None, Some("nested")] {
                assert_eq!(
                    summary(&idx.query(q, 50, prefix)),
                    summary(&fresh.query(q, 50, prefix)),
                    "{q} {prefix:?}"
                );
            }
        }
    }

    /// A stream of edits, removals and re-additions over notes sharing most
    /// words, long enough that postings go through tombstones, unsorted
    /// tails and compactions, still ranks exactly as a rebuild.
    #[test]
    fn a_long_stream_of_updates_equals_a_rebuild() {
        let words = [
            "fox", "dog", "night", "bark", "alpha", "river", "stone", "light",
        ];
        let mut state: u64 = 7;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize % n
        };
        let mut current: BTreeMap<String, String> = BTreeMap::new();
        let mut idx = Index::build(Vec::new());
        for round in 0..600 {
            let path = format!("n{}.md", next(40));
            if next(4) == 0 {
                idx.remove_note(&path);
                current.remove(&path);
                continue;
            }
            let mut text = format!("# Note {round}\n");
            for section in 0..1 + next(3) {
                text.push_str(&format!("\n## Part {section}\n"));
                for _ in 0..next(30) {
                    text.push_str(words[next(words.len())]);
                    text.push(' ');
                }
            }
            idx.upsert_note(&path, &text);
            current.insert(path, text);
        }
        let fresh = Index::build(current.into_iter().collect());
        assert_eq!(idx.notes_indexed(), fresh.notes_indexed());
        assert_eq!(idx.chunks_indexed(), fresh.chunks_indexed());
        for q in [
            "fox",
            "dog night",
            "river stone light",
            "part",
            "note 599",
            "bark",
        ] {
            assert_eq!(
                summary(&idx.query(q, 50, None)),
                summary(&fresh.query(q, 50, None)),
                "{q}"
            );
        }
    }

    #[test]
    fn title_field_boosts_but_does_not_add() {
        let idx = Index::build(vec![
            (
                "x.md".into(),
                "---\ntitle: Gardening\n---\nsoil and water\n".into(),
            ),
            ("y.md".into(), "soil and water\n".into()),
        ]);
        let hits = idx.query("gardening soil", 5, None);
        assert_eq!(hits[0].path, "x.md");
        assert!(hits[0].score > hits[1].score);
        assert_eq!(hits[0].matched_terms, vec!["gardening", "soil"]);
    }
}
