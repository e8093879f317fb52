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
pub mod chunker;
pub mod live;
mod request;
pub mod tokenizer;

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxBuildHasher;

pub use chunker::ChunkOptions;
pub use request::{
    parse_limit, path_matches_prefix, validate_path_prefix, validate_query, DEFAULT_LIMIT,
    MAX_LIMIT,
};
pub use tokenizer::{Token, Tokenizer, TokenizerOptions};

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
}

impl Default for Params {
    fn default() -> Self {
        Params {
            tokenizer: TokenizerOptions::default(),
            chunks: ChunkOptions::default(),
            k1: 0.9,
            b: 0.75,
            title_weight: 4.0,
            note_weight: 1.0,
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
    /// Each query term found in `content`, once, in query order, spelled as the
    /// caller typed it (its first spelling when several normalize alike).
    pub matched_terms: Vec<String>,
}

#[derive(Debug, Clone)]
struct Chunk {
    note: u32,
    chunk_index: u32,
    content: String,
    /// Terms in the content (after stop words), the BM25 document length.
    len: u32,
}

#[derive(Debug, Clone)]
struct Note {
    path: String,
    /// Chunk slots in chunk_index order.
    chunks: Vec<u32>,
    title_terms: Vec<(u32, u32)>,
    title_len: u32,
    /// Terms in all its chunks: the note-level BM25 document length.
    len: u64,
    bytes: u64,
    hash: u64,
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

/// A note to index: its text, or (loading an artifact) its chunks as cut
/// then, with the fingerprint the artifact recorded if it has one.
enum Source {
    Text(String),
    Chunks(Vec<String>, Option<Fingerprint>),
}

impl Source {
    /// Size in bytes: how building work is shared between threads.
    fn len(&self) -> usize {
        match self {
            Source::Text(text) => text.len(),
            Source::Chunks(chunks, _) => chunks.iter().map(String::len).sum(),
        }
    }
}

/// Threads to build or load with: one per core.
fn parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
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
        }
    }

    /// Indexes `notes` (relative path, content) with the default parameters.
    /// A path given twice keeps its last content.
    pub fn build(notes: Vec<(String, String)>) -> Index {
        Index::build_with(notes, Params::default())
    }

    pub fn build_with(notes: Vec<(String, String)>, params: Params) -> Index {
        let notes = notes
            .into_iter()
            .map(|(path, content)| (path, Source::Text(content)))
            .collect();
        Index::from_sources(notes, params, parallelism())
    }

    /// Indexes `notes` on `parts` threads: each indexes a slice of about
    /// equal size into an index of its own, and the parts are appended to the
    /// first in order. Slots and term ids differ from a one-thread build, but
    /// nothing observable depends on them: scores are computed per slot, ties
    /// break by path, and the artifact is written in path order.
    fn from_sources(mut notes: Vec<(String, Source)>, params: Params, parts: usize) -> Index {
        // A path given twice keeps its last content; after this, no part
        // replaces a note, and no two parts hold the same path. The stable sort
        // keeps duplicates in input order, and each later one is swapped into
        // the place of the earlier one that `dedup_by` keeps.
        notes.sort_by(|a, b| a.0.cmp(&b.0));
        notes.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
        let total: usize = notes.iter().map(|(_, src)| src.len()).sum();
        let parts = parts.clamp(1, notes.len().max(1));
        let mut slices: Vec<Vec<(String, Source)>> = Vec::with_capacity(parts);
        let mut rest = notes.into_iter().peekable();
        let mut done = 0usize;
        for part in 1..=parts {
            let target = total * part / parts;
            let mut slice = Vec::new();
            while let Some((_, src)) = rest.peek() {
                if done >= target && part < parts {
                    break;
                }
                done += src.len();
                slice.extend(rest.next());
            }
            slices.push(slice);
        }
        let mut slices = slices.into_iter();
        let first = slices.next().unwrap_or_default();
        let (mut idx, rest) = std::thread::scope(|scope| {
            let workers: Vec<_> = slices
                .map(|slice| scope.spawn(move || Index::from_slice(slice, params)))
                .collect();
            // The calling thread builds the first part: its allocations come
            // from the heap the notes are freed to, which a spawned thread's
            // (another malloc arena) would leave unused, growing the process.
            let first = Index::from_slice(first, params);
            let rest: Vec<Index> = workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect();
            (first, rest)
        });
        for part in rest {
            idx.append(part);
        }
        idx
    }

    /// One part of a build: `notes`, of distinct paths, in a fresh index.
    fn from_slice(notes: Vec<(String, Source)>, params: Params) -> Index {
        let mut idx = Index::empty(params);
        for (path, src) in notes {
            idx.insert_source(&path, src);
        }
        idx
    }

    /// Appends `other`, a fresh index of other paths, after this index's
    /// notes: `other`'s slots are shifted past ours and its term ids mapped
    /// to ours. Shifted slots are all higher than ours, so postings stay sorted.
    fn append(&mut self, other: Index) {
        debug_assert!(other.free_notes.is_empty() && other.free_chunks.is_empty());
        let note_base = self.notes.len() as u32;
        let chunk_base = self.chunks.len() as u32;
        let mut ids = vec![0u32; other.terms.body.len()];
        for (term, id) in other.terms.ids {
            ids[id as usize] = self.terms.intern_owned(term);
        }
        let fields = other
            .terms
            .body
            .into_iter()
            .zip(other.terms.title)
            .zip(other.terms.whole);
        for (id, ((body, title), whole)) in fields.enumerate() {
            let to = ids[id] as usize;
            self.terms.body[to].append_shifted(&body, chunk_base);
            self.terms.title[to].append_shifted(&title, note_base);
            self.terms.whole[to].append_shifted(&whole, note_base);
        }
        self.notes.extend(other.notes.into_iter().map(|note| {
            note.map(|mut n| {
                n.chunks.iter_mut().for_each(|c| *c += chunk_base);
                n.title_terms
                    .iter_mut()
                    .for_each(|t| t.0 = ids[t.0 as usize]);
                n
            })
        }));
        self.chunks.extend(other.chunks.into_iter().map(|chunk| {
            chunk.map(|mut c| {
                c.note += note_base;
                c
            })
        }));
        self.by_path.extend(
            other
                .by_path
                .into_iter()
                .map(|(path, slot)| (path, slot + note_base)),
        );
        self.live_chunks += other.live_chunks;
        self.live_notes += other.live_notes;
        self.total_len += other.total_len;
        self.total_title_len += other.total_title_len;
        self.content_bytes += other.content_bytes;
    }

    fn insert_source(&mut self, path: &str, src: Source) {
        match src {
            Source::Text(content) => {
                let title = title_field(path, &content);
                let fingerprint = Fingerprint::of(&content);
                let ranges = chunker::chunk_ranges(&content, self.params.chunks);
                // A note of one chunk (most of them) becomes it without a copy.
                let chunks = if ranges.len() == 1 {
                    vec![content]
                } else {
                    cut(&content, &ranges)
                };
                self.insert_chunks(path, &title, chunks, fingerprint);
            }
            Source::Chunks(chunks, fingerprint) => {
                let content = chunks.concat();
                let fingerprint = fingerprint.unwrap_or_else(|| Fingerprint::of(&content));
                self.insert_chunks(path, &title_field(path, &content), chunks, fingerprint);
            }
        }
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Adds or replaces one note, e.g. right after a write was committed.
    pub fn upsert_note(&mut self, path: &str, content: &str) {
        let ranges = chunker::chunk_ranges(content, self.params.chunks);
        let title = title_field(path, content);
        self.insert_chunks(
            path,
            &title,
            cut(content, &ranges),
            Fingerprint::of(content),
        );
    }

    /// Inserts a note whose chunks are already cut (an artifact's chunks are
    /// served as they are, whatever chunker wrote them), with the text of its
    /// title field.
    fn insert_chunks(
        &mut self,
        path: &str,
        title: &str,
        chunks: Vec<String>,
        fingerprint: Fingerprint,
    ) {
        self.remove_note(path);
        let mut title_counts: Vec<u32> = Vec::new();
        self.term_ids(title, &mut title_counts);
        let title_terms = count_ids(&mut title_counts);
        let title_len = title_counts.len() as u32;

        let note_slot = match self.free_notes.pop() {
            Some(slot) => slot,
            None => {
                self.notes.push(None);
                (self.notes.len() - 1) as u32
            }
        };
        for &(term, tf) in &title_terms {
            self.terms.title[term as usize].insert(note_slot, tf);
        }

        let mut slots = Vec::with_capacity(chunks.len());
        let mut ids: Vec<u32> = Vec::new();
        let mut note_ids: Vec<u32> = Vec::new();
        for (chunk_index, text) in chunks.into_iter().enumerate() {
            ids.clear();
            self.term_ids(&text, &mut ids);
            note_ids.extend_from_slice(&ids);
            let len = ids.len() as u32;
            let slot = match self.free_chunks.pop() {
                Some(slot) => slot,
                None => {
                    self.chunks.push(None);
                    (self.chunks.len() - 1) as u32
                }
            };
            for (term, tf) in count_ids(&mut ids) {
                self.terms.body[term as usize].insert(slot, tf);
            }
            self.live_chunks += 1;
            self.total_len += u64::from(len);
            self.total_title_len += u64::from(title_len);
            self.content_bytes += text.len() as u64;
            self.chunks[slot as usize] = Some(Chunk {
                note: note_slot,
                chunk_index: chunk_index as u32,
                content: text,
                len,
            });
            slots.push(slot);
        }
        let note_len = note_ids.len() as u64;
        for (term, tf) in count_ids(&mut note_ids) {
            self.terms.whole[term as usize].insert(note_slot, tf);
        }
        if !slots.is_empty() {
            self.live_notes += 1;
        }
        self.notes[note_slot as usize] = Some(Note {
            path: path.to_string(),
            chunks: slots,
            title_terms,
            title_len,
            len: note_len,
            bytes: fingerprint.bytes,
            hash: fingerprint.hash,
        });
        self.by_path.insert(path.to_string(), note_slot);
    }

    /// Appends the term ids of `text`'s tokens to `out`, adding new terms.
    fn term_ids(&mut self, text: &str, out: &mut Vec<u32>) {
        let terms = &mut self.terms;
        self.tokenizer.for_each_term_id(
            text,
            &mut self.words,
            |term| terms.intern(term),
            |id| out.push(id),
        );
    }

    /// Drops one note (deleted, or about to be replaced). Unknown paths are a no-op.
    pub fn remove_note(&mut self, path: &str) {
        let Some(note_slot) = self.by_path.remove(path) else {
            return;
        };
        let Some(note) = self.notes[note_slot as usize].take() else {
            return;
        };
        self.free_notes.push(note_slot);
        for &(term, _) in &note.title_terms {
            self.terms.title[term as usize].remove(note_slot);
        }
        if !note.chunks.is_empty() {
            self.live_notes -= 1;
        }
        let mut ids: Vec<u32> = Vec::new();
        let mut note_ids: Vec<u32> = Vec::new();
        for &slot in &note.chunks {
            let Some(chunk) = self.chunks[slot as usize].take() else {
                continue;
            };
            ids.clear();
            // Every term of an indexed chunk is known: this adds none.
            self.term_ids(&chunk.content, &mut ids);
            ids.sort_unstable();
            ids.dedup();
            for &term in &ids {
                self.terms.body[term as usize].remove(slot);
            }
            note_ids.extend_from_slice(&ids);
            self.live_chunks -= 1;
            self.total_len -= u64::from(chunk.len);
            self.total_title_len -= u64::from(note.title_len);
            self.content_bytes -= chunk.content.len() as u64;
        }
        // Pushed last-first, the slots are popped in chunk order: a note
        // written again gets its old slots back chunk by chunk, and its
        // unchanged terms land on their own tombstones (see `Postings`).
        self.free_chunks.extend(note.chunks.iter().rev());
        note_ids.sort_unstable();
        note_ids.dedup();
        for &term in &note_ids {
            self.terms.whole[term as usize].remove(note_slot);
        }
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

    /// Indexed note paths, sorted by bytes.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.by_path.keys().map(String::as_str)
    }

    /// Each note's chunks in path then chunk order: the artifact's order.
    fn sorted_chunks(&self) -> impl Iterator<Item = (&str, usize, &str)> {
        self.by_path.iter().flat_map(move |(path, &slot)| {
            let note = self.notes[slot as usize].as_ref();
            note.into_iter().flat_map(move |n| {
                n.chunks.iter().filter_map(move |&c| {
                    let chunk = self.chunks[c as usize].as_ref()?;
                    Some((
                        path.as_str(),
                        chunk.chunk_index as usize,
                        chunk.content.as_str(),
                    ))
                })
            })
        })
    }

    /// The best `limit` chunks for `q`, optionally only under `path_prefix`
    /// (a prefix already normalized by [`validate_path_prefix`]).
    pub fn query(&self, q: &str, limit: usize, path_prefix: Option<&str>) -> Vec<Hit> {
        let query = self.analyze_query(q);
        if query.is_empty() || limit == 0 || self.live_chunks == 0 {
            return Vec::new();
        }
        let n = self.live_chunks as f64;
        let avg_len = (self.total_len as f64 / n).max(1.0);
        let avg_title = (self.total_title_len as f64 / n).max(1.0);
        let (k1, b, wt) = (self.params.k1, self.params.b, self.params.title_weight);
        let nw = self.params.note_weight;
        let n_notes = (self.live_notes as f64).max(1.0);
        let avg_note_len = (self.total_len as f64 / n_notes).max(1.0);

        // Candidates: chunks whose own text holds a query term, under the prefix.
        // Dense per-slot arrays: a query touches a large share of the chunks of
        // a vault with a small vocabulary, where hashing would dominate.
        let mut note_ok: Vec<u8> = Vec::new(); // 0 unknown, 1 in prefix, 2 not
        if path_prefix.is_some() {
            note_ok.resize(self.notes.len(), 0);
        }
        let mut is_candidate = vec![false; self.chunks.len()];
        let mut candidates: Vec<u32> = Vec::new();
        for qt in &query {
            for (slot, _) in self.terms.body[qt.id as usize].iter() {
                if is_candidate[slot as usize] {
                    continue;
                }
                let Some(chunk) = self.chunks[slot as usize].as_ref() else {
                    continue;
                };
                if let Some(prefix) = path_prefix {
                    let state = &mut note_ok[chunk.note as usize];
                    if *state == 0 {
                        let inside = self.notes[chunk.note as usize]
                            .as_ref()
                            .is_some_and(|note| path_matches_prefix(&note.path, prefix));
                        *state = if inside { 1 } else { 2 };
                    }
                    if *state == 2 {
                        continue;
                    }
                }
                is_candidate[slot as usize] = true;
                candidates.push(slot);
            }
        }
        if candidates.is_empty() {
            return Vec::new();
        }
        let cand_notes: Vec<(u32, u32)> = candidates
            .iter()
            .filter_map(|&slot| Some((slot, self.chunks[slot as usize].as_ref()?.note)))
            .collect();

        // Per term, the chunk's BM25F pseudo-frequency (text plus weighted
        // title) is saturated once; the whole note's BM25 is added per note.
        let mut scores = vec![0f64; self.chunks.len()];
        let mut body_tf = vec![0f64; self.chunks.len()];
        let mut title_tf = vec![0f64; self.notes.len()];
        let mut note_score = vec![0f64; self.notes.len()];
        for qt in &query {
            let postings = &self.terms.body[qt.id as usize];
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (slot, tf) in postings.iter() {
                if is_candidate[slot as usize] {
                    if let Some(chunk) = self.chunks[slot as usize].as_ref() {
                        let norm = 1.0 - b + b * f64::from(chunk.len) / avg_len;
                        body_tf[slot as usize] = f64::from(tf) / norm;
                    }
                }
            }
            let title_postings = &self.terms.title[qt.id as usize];
            let titles = || title_postings.iter().filter(|_| wt > 0.0);
            for (note_slot, tf) in titles() {
                if let Some(note) = self.notes[note_slot as usize].as_ref() {
                    let norm = 1.0 - b + b * f64::from(note.title_len) / avg_title;
                    title_tf[note_slot as usize] = wt * f64::from(tf) / norm;
                }
            }
            for &(slot, note) in &cand_notes {
                let t = std::mem::take(&mut body_tf[slot as usize]) + title_tf[note as usize];
                if t > 0.0 {
                    scores[slot as usize] += qt.weight * idf * t / (k1 + t);
                }
            }
            for (note_slot, _) in titles() {
                title_tf[note_slot as usize] = 0.0;
            }
            if nw > 0.0 {
                let postings = &self.terms.whole[qt.id as usize];
                let df = postings.len() as f64;
                let idf = (1.0 + (n_notes - df + 0.5) / (df + 0.5)).ln();
                for (note_slot, tf) in postings.iter() {
                    if let Some(note) = self.notes[note_slot as usize].as_ref() {
                        let t = f64::from(tf) / (1.0 - b + b * note.len as f64 / avg_note_len);
                        note_score[note_slot as usize] += nw * qt.weight * idf * t / (k1 + t);
                    }
                }
            }
        }
        if nw > 0.0 {
            for &(slot, note) in &cand_notes {
                scores[slot as usize] += note_score[note as usize];
            }
        }

        let mut ranked: Vec<(f64, u32)> = candidates
            .iter()
            .map(|&slot| (scores[slot as usize], slot))
            .collect();
        let cmp = |a: &(f64, u32), b: &(f64, u32)| {
            b.0.total_cmp(&a.0).then_with(|| self.chunk_order(a.1, b.1))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, cmp);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(cmp);
        ranked
            .into_iter()
            .filter_map(|(score, slot)| self.hit(slot, score, &query))
            .collect()
    }

    fn chunk_order(&self, a: u32, b: u32) -> std::cmp::Ordering {
        let key = |slot: u32| {
            let chunk = self.chunks[slot as usize].as_ref();
            let path = chunk
                .and_then(|c| self.notes[c.note as usize].as_ref())
                .map_or("", |n| n.path.as_str());
            (path, chunk.map_or(0, |c| c.chunk_index))
        };
        let (pa, ca) = key(a);
        let (pb, cb) = key(b);
        pa.as_bytes().cmp(pb.as_bytes()).then(ca.cmp(&cb))
    }

    fn hit(&self, slot: u32, score: f64, query: &[QueryTerm]) -> Option<Hit> {
        let chunk = self.chunks[slot as usize].as_ref()?;
        let note = self.notes[chunk.note as usize].as_ref()?;
        let mut found = vec![false; query.len()];
        let mut snippet: Option<(usize, usize)> = None;
        self.tokenizer
            .for_each_token(&chunk.content, |term, start, end| {
                if let Some(i) = query.iter().position(|q| q.term == term) {
                    found[i] = true;
                    // Tokens arrive by start offset; at the same start the
                    // longer one (an ideograph pair over its first ideograph) wins.
                    match snippet {
                        None => snippet = Some((start, end)),
                        Some((s, e)) if s == start && end > e => snippet = Some((start, end)),
                        _ => {}
                    }
                }
            });
        let matched_terms = query
            .iter()
            .zip(&found)
            .filter(|(_, &f)| f)
            .map(|(q, _)| q.surface.clone())
            .collect();
        Some(Hit {
            content: chunk.content.clone(),
            score,
            path: note.path.clone(),
            chunk_index: chunk.chunk_index as usize,
            snippet_offset: snippet,
            matched_terms,
        })
    }

    /// Distinct known query terms in query order, weighted by repetition.
    fn analyze_query(&self, q: &str) -> Vec<QueryTerm> {
        let chars: Vec<char> = q.chars().collect();
        let mut out: Vec<QueryTerm> = Vec::new();
        self.tokenizer.for_each_token(q, |term, start, end| {
            if let Some(existing) = out.iter_mut().find(|t| t.term == term) {
                existing.weight += 1.0;
                return;
            }
            if let Some(&id) = self.terms.ids.get(term) {
                out.push(QueryTerm {
                    term: term.to_string(),
                    surface: chars[start..end].iter().collect(),
                    id,
                    weight: 1.0,
                });
            }
        });
        out
    }
}

#[derive(Debug)]
struct QueryTerm {
    term: String,
    surface: String,
    id: u32,
    weight: f64,
}

/// The term dictionary and its postings, one list per field, indexed by term id.
/// Ids are never reused: a term whose notes are all gone keeps empty lists.
#[derive(Debug, Clone, Default)]
struct Terms {
    ids: HashMap<Box<str>, u32, FxBuildHasher>,
    /// (chunk slot, term frequency in the chunk text).
    body: Vec<Postings>,
    /// (note slot, term frequency in the note's title field).
    title: Vec<Postings>,
    /// (note slot, term frequency in the whole note).
    whole: Vec<Postings>,
}

impl Terms {
    /// The id of `term`, adding it when new.
    fn intern(&mut self, term: &str) -> u32 {
        match self.ids.get(term) {
            Some(&id) => id,
            None => self.intern_owned(term.into()),
        }
    }

    fn intern_owned(&mut self, term: Box<str>) -> u32 {
        let next = self.ids.len() as u32;
        let id = *self.ids.entry(term).or_insert(next);
        if id == next {
            self.body.push(Postings::default());
            self.title.push(Postings::default());
            self.whole.push(Postings::default());
        }
        id
    }
}

/// One term's postings in one field: (slot, term frequency) pairs, in no
/// order that ranking depends on. Lists of common terms hold most slots, so
/// an update must not shift them: `entries[..sorted]` is sorted by slot and a
/// removal there leaves a tombstone (frequency 0) found by binary search,
/// which the same slot, reused, fills again; a reused slot with no tombstone
/// goes to the unsorted tail. Both are folded back once they outgrow a small
/// share of the list, so the cost is amortized and queries skip little.
#[derive(Debug, Clone, Default)]
struct Postings {
    entries: Vec<(u32, u32)>,
    sorted: u32,
    tombstones: u32,
}

impl Postings {
    /// Live entries: the term's document frequency in this field.
    fn len(&self) -> usize {
        self.entries.len() - self.tombstones as usize
    }

    fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.entries.iter().copied().filter(|&(_, tf)| tf > 0)
    }

    /// Adds `slot`, which must not be live in the list.
    fn insert(&mut self, slot: u32, tf: u32) {
        let sorted = self.sorted as usize;
        // Fresh slots are the highest: the common case, and all of a build.
        if sorted == self.entries.len() && self.entries.last().is_none_or(|e| e.0 < slot) {
            self.entries.push((slot, tf));
            self.sorted += 1;
            return;
        }
        match self.entries[..sorted].binary_search_by_key(&slot, |e| e.0) {
            Ok(pos) => {
                debug_assert_eq!(self.entries[pos].1, 0, "slot {slot} inserted twice");
                self.entries[pos].1 = tf;
                self.tombstones -= 1;
            }
            Err(_) => {
                self.entries.push((slot, tf));
                if self.entries.len() - sorted > slack(sorted) {
                    self.compact();
                }
            }
        }
    }

    /// Drops `slot`; a slot not in the list is a no-op.
    fn remove(&mut self, slot: u32) {
        let sorted = self.sorted as usize;
        match self.entries[..sorted].binary_search_by_key(&slot, |e| e.0) {
            Ok(pos) if self.entries[pos].1 > 0 => {
                self.entries[pos].1 = 0;
                self.tombstones += 1;
                if self.tombstones as usize > slack(sorted) {
                    self.compact();
                }
            }
            Ok(_) => {}
            Err(_) => {
                if let Some(pos) = self.entries[sorted..].iter().position(|e| e.0 == slot) {
                    // The tail is unsorted, and its last entry is in the tail too.
                    self.entries.swap_remove(sorted + pos);
                }
            }
        }
    }

    /// Drops the tombstones and sorts the tail in.
    fn compact(&mut self) {
        self.entries.retain(|&(_, tf)| tf > 0);
        // Stable sort: it finds the sorted run and only sorts the short tail.
        self.entries.sort_by_key(|e| e.0);
        self.sorted = self.entries.len() as u32;
        self.tombstones = 0;
    }

    /// Appends `other`'s entries with slots shifted by `base`, which is above
    /// every slot here (merging parallel build parts).
    fn append_shifted(&mut self, other: &Postings, base: u32) {
        debug_assert!(self.sorted as usize == self.entries.len() && other.tombstones == 0);
        // Exact: merged lists are final, and doubling slack on every list of
        // a large vault adds up.
        self.entries.reserve_exact(other.entries.len());
        self.entries
            .extend(other.entries.iter().map(|&(slot, tf)| (slot + base, tf)));
        self.sorted = self.entries.len() as u32;
    }
}

/// How many tombstones or unsorted entries a list of `sorted` entries holds
/// before it is compacted.
fn slack(sorted: usize) -> usize {
    16 + sorted / 32
}

/// The slices of `content` at `ranges`, as strings.
fn cut(content: &str, ranges: &[(usize, usize)]) -> Vec<String> {
    ranges
        .iter()
        .map(|&(s, e)| content[s..e].to_string())
        .collect()
}

/// (term, count) pairs of a list of term ids; sorts `ids` in place.
fn count_ids(ids: &mut [u32]) -> Vec<(u32, u32)> {
    ids.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &id in ids.iter() {
        match out.last_mut() {
            Some((last, n)) if *last == id => *n += 1,
            _ => out.push((id, 1)),
        }
    }
    out
}

/// The text of a note's title field: the front-matter `title`, else the first
/// ATX heading, followed by the path without `.md` (folder and file names are
/// titles too: `projects/mirai/design.md`, `dendron.topic.vaults.md`).
fn title_field(path: &str, content: &str) -> String {
    let stem = path
        .strip_suffix(".md")
        .or_else(|| path.strip_suffix(".MD"))
        .unwrap_or(path);
    match note_title(content) {
        Some(t) => format!("{t}\n{stem}"),
        None => stem.to_string(),
    }
}

fn note_title(content: &str) -> Option<&str> {
    let mut lines = content.lines();
    let mut in_fence = false;
    if content.starts_with("---") && lines.next().map(str::trim_end) == Some("---") {
        for line in lines.by_ref() {
            let line = line.trim_end();
            if line == "---" || line == "..." {
                break;
            }
            if let Some(v) = line.strip_prefix("title:") {
                let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
                if !v.is_empty() {
                    return Some(v);
                }
            }
        }
    }
    for line in lines {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let hashes = t.bytes().take_while(|&b| b == b'#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with([' ', '\t']) {
            let text = t[hashes..].trim().trim_end_matches('#').trim();
            if !text.is_empty() {
                return Some(text);
            }
        }
    }
    None
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
        assert_eq!(h.matched_terms, vec!["Jumps", "QUICK"]);
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
    fn a_path_given_twice_keeps_its_last_content() {
        for parts in [1, 2] {
            let notes = vec![
                ("a.md".to_string(), Source::Text("first fox".into())),
                ("b.md".to_string(), Source::Text("other".into())),
                ("a.md".to_string(), Source::Text("second dog".into())),
                ("a.md".to_string(), Source::Text("third cat".into())),
            ];
            let idx = Index::from_sources(notes, Params::default(), parts);
            assert_eq!(idx.notes_indexed(), 2);
            assert!(idx.query("fox", 5, None).is_empty());
            assert!(idx.query("dog", 5, None).is_empty());
            assert_eq!(idx.query("cat", 5, None)[0].path, "a.md");
        }
    }

    #[test]
    fn postings_match_a_plain_set_under_any_updates() {
        let mut postings = Postings::default();
        let mut plain: BTreeMap<u32, u32> = BTreeMap::new();
        let mut state: u64 = 1;
        for step in 0..20_000u32 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Mostly reuse of low slots, sometimes a fresh high one.
            let slot = if step % 7 == 0 {
                step
            } else {
                (state >> 40) as u32 % 300
            };
            if plain.remove(&slot).is_some() {
                postings.remove(slot);
            } else {
                let tf = 1 + (state >> 20) as u32 % 5;
                postings.insert(slot, tf);
                plain.insert(slot, tf);
            }
            if step % 997 == 0 || step == 19_999 {
                let mut got: Vec<(u32, u32)> = postings.iter().collect();
                got.sort_unstable();
                let want: Vec<(u32, u32)> = plain.iter().map(|(&s, &t)| (s, t)).collect();
                assert_eq!(got, want, "step {step}");
                assert_eq!(postings.len(), plain.len());
            }
        }
        postings.remove(1_000_000);
        assert_eq!(postings.len(), plain.len());
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

    #[test]
    fn titles_come_from_front_matter_or_first_heading() {
        assert_eq!(
            note_title("---\nid: 1\ntitle: 'Hi there'\n---\n# H\n"),
            Some("Hi there")
        );
        assert_eq!(note_title("```\n# not\n```\n## Real ##\n"), Some("Real"));
        assert_eq!(note_title("plain\n"), None);
        assert_eq!(title_field("d/e.md", "plain"), "d/e");
    }
}
