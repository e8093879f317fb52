//! The lexical index: notes cut into chunks ([`chunker`]), turned into terms by
//! one [`tokenizer`], kept in memory as postings and ranked with BM25F (chunk
//! text plus the note's title as a weighted field). It is built whole, loaded
//! from the artifact ([`artifact`]), or updated one note at a time after a write;
//! the three give the same answers for the same notes.
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
        let mut idx = Index::empty(params);
        for (path, content) in notes {
            idx.upsert_note(&path, &content);
        }
        idx
    }

    pub fn params(&self) -> Params {
        self.params
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Adds or replaces one note, e.g. right after a write was committed.
    pub fn upsert_note(&mut self, path: &str, content: &str) {
        let ranges = chunker::chunk_ranges(content, self.params.chunks);
        let chunks = ranges.into_iter().map(|(s, e)| content[s..e].to_string());
        self.insert_chunks(path, content, chunks.collect(), Fingerprint::of(content));
    }

    /// Inserts a note whose chunks are already cut (loading an artifact): the
    /// artifact's chunks are served as they are, whatever chunker wrote them.
    fn insert_chunks(
        &mut self,
        path: &str,
        content: &str,
        chunks: Vec<String>,
        fingerprint: Fingerprint,
    ) {
        self.remove_note(path);
        let mut title_counts: Vec<u32> = Vec::new();
        let title_text = title_field(path, content);
        let terms = &mut self.terms;
        self.tokenizer.for_each_token(&title_text, |term, _, _| {
            title_counts.push(terms.intern(term));
        });
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
            insert_sorted(&mut self.terms.title[term as usize], note_slot, tf);
        }

        let mut slots = Vec::with_capacity(chunks.len());
        let mut ids: Vec<u32> = Vec::new();
        let mut note_ids: Vec<u32> = Vec::new();
        for (chunk_index, text) in chunks.into_iter().enumerate() {
            ids.clear();
            let terms = &mut self.terms;
            self.tokenizer.for_each_token(&text, |term, _, _| {
                ids.push(terms.intern(term));
            });
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
                insert_sorted(&mut self.terms.body[term as usize], slot, tf);
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
            insert_sorted(&mut self.terms.whole[term as usize], note_slot, tf);
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
            remove_sorted(&mut self.terms.title[term as usize], note_slot);
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
            self.tokenizer.for_each_token(&chunk.content, |term, _, _| {
                if let Some(&id) = self.terms.ids.get(term) {
                    ids.push(id);
                }
            });
            ids.sort_unstable();
            ids.dedup();
            for &term in &ids {
                remove_sorted(&mut self.terms.body[term as usize], slot);
            }
            note_ids.extend_from_slice(&ids);
            self.live_chunks -= 1;
            self.total_len -= u64::from(chunk.len);
            self.total_title_len -= u64::from(note.title_len);
            self.content_bytes -= chunk.content.len() as u64;
            self.free_chunks.push(slot);
        }
        note_ids.sort_unstable();
        note_ids.dedup();
        for &term in &note_ids {
            remove_sorted(&mut self.terms.whole[term as usize], note_slot);
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
            for &(slot, _) in &self.terms.body[qt.id as usize] {
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
            for &(slot, tf) in postings {
                if is_candidate[slot as usize] {
                    if let Some(chunk) = self.chunks[slot as usize].as_ref() {
                        let norm = 1.0 - b + b * f64::from(chunk.len) / avg_len;
                        body_tf[slot as usize] = f64::from(tf) / norm;
                    }
                }
            }
            let titles = if wt > 0.0 {
                &self.terms.title[qt.id as usize][..]
            } else {
                &[]
            };
            for &(note_slot, tf) in titles {
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
            for &(note_slot, _) in titles {
                title_tf[note_slot as usize] = 0.0;
            }
            if nw > 0.0 {
                let postings = &self.terms.whole[qt.id as usize];
                let df = postings.len() as f64;
                let idf = (1.0 + (n_notes - df + 0.5) / (df + 0.5)).ln();
                for &(note_slot, tf) in postings {
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
    body: Vec<Vec<(u32, u32)>>,
    /// (note slot, term frequency in the note's title field).
    title: Vec<Vec<(u32, u32)>>,
    /// (note slot, term frequency in the whole note).
    whole: Vec<Vec<(u32, u32)>>,
}

impl Terms {
    /// The id of `term`, adding it when new.
    fn intern(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.ids.get(term) {
            return id;
        }
        let id = self.ids.len() as u32;
        self.body.push(Vec::new());
        self.title.push(Vec::new());
        self.whole.push(Vec::new());
        self.ids.insert(term.into(), id);
        id
    }
}

/// Postings stay sorted by slot: appends are the common case (fresh slots are
/// the highest), a reused slot is inserted in place, and removal is a binary
/// search instead of a scan of a list that can hold every chunk.
fn insert_sorted(postings: &mut Vec<(u32, u32)>, slot: u32, tf: u32) {
    match postings.last() {
        Some(&(last, _)) if last > slot => {
            let pos = postings.partition_point(|&(s, _)| s < slot);
            postings.insert(pos, (slot, tf));
        }
        _ => postings.push((slot, tf)),
    }
}

fn remove_sorted(postings: &mut Vec<(u32, u32)>, slot: u32) {
    if let Ok(pos) = postings.binary_search_by_key(&slot, |&(s, _)| s) {
        postings.remove(pos);
    }
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
