//! Ranking: BM25F over the chunk text and the note's title field, plus the
//! whole note's BM25 score, for the chunks that hold a query term in their own
//! text; ties break by path bytes, then chunk index. Also what a hit shows:
//! the matched terms and the snippet offset.

use std::cell::RefCell;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use super::blocks::{self, BLOCK};
use super::dense::{Dense, Extras, TermBlocks};
use super::stats::{idf, Stats};
use super::{path_matches_prefix, ChunkRef, Hit, Index};

thread_local! {
    /// Per-thread working arrays, kept between queries: zeroing arrays the
    /// size of the index for every query would cost more than the scoring.
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Dense per-slot arrays for one query at a time. Every entry is zero (or
/// false) between queries: a query resets what it touched.
#[derive(Default)]
struct Scratch {
    /// Per chunk slot.
    is_candidate: Vec<bool>,
    scores: Vec<f64>,
    /// The term pass that last met the chunk in its postings.
    term_seen: Vec<u32>,
    /// The current term pass (0 only before the first).
    pass: u32,
    /// Per note slot.
    title_tf: Vec<f64>,
    note_score: Vec<f64>,
    /// 0 unknown, 1 under the path prefix, 2 not.
    note_ok: Vec<u8>,
    /// Notes whose chunks the pruned ranking has scored.
    note_seen: Vec<bool>,
    /// The candidates of the exhaustive ranking: (chunk slot, note slot,
    /// whether the title field and the note score apply to it).
    candidates: Vec<(u32, u32, Extras)>,
    /// Chunks the exhaustive ranking summed a score for that may not be
    /// candidates: their sums are cleared at the end.
    also_summed: Vec<u32>,
    /// How many blocks the last block-max ranking scored.
    blocks_scored: usize,
    /// Set while a query runs: found set at the start, a query was cut short
    /// (a panic) and the arrays are cleared whole.
    busy: bool,
}

impl Scratch {
    fn fit(&mut self, chunks: usize, notes: usize) {
        if std::mem::replace(&mut self.busy, true) {
            *self = Scratch {
                busy: true,
                ..Scratch::default()
            };
        }
        if self.scores.len() < chunks {
            self.scores.resize(chunks, 0.0);
        }
        if self.term_seen.len() < chunks {
            self.term_seen.resize(chunks, 0);
        }
        if self.is_candidate.len() < chunks {
            self.is_candidate.resize(chunks, false);
        }
        for v in [&mut self.title_tf, &mut self.note_score] {
            if v.len() < notes {
                v.resize(notes, 0.0);
            }
        }
        if self.note_ok.len() < notes {
            self.note_ok.resize(notes, 0);
        }
        if self.note_seen.len() < notes {
            self.note_seen.resize(notes, false);
        }
    }
}

impl Index {
    /// Ranks chunks for `q` (a prefix already normalized by
    /// [`super::validate_path_prefix`]). Pruned (see [`Index::pruned`]); the
    /// answer is exactly [`Index::query_exhaustive`]'s.
    pub fn query(&self, q: &str, limit: usize, path_prefix: Option<&str>) -> Vec<Hit> {
        self.query_with(q, limit, path_prefix, true)
    }

    /// The same ranking with every candidate chunk scored: what pruning is
    /// checked against (tests) and measured against (benches).
    #[doc(hidden)]
    pub fn query_exhaustive(&self, q: &str, limit: usize, path_prefix: Option<&str>) -> Vec<Hit> {
        self.query_with(q, limit, path_prefix, false)
    }

    fn query_with(
        &self,
        q: &str,
        limit: usize,
        path_prefix: Option<&str>,
        prune: bool,
    ) -> Vec<Hit> {
        let query = self.analyze_query(q);
        self.ranked_with(&query, limit, path_prefix, prune)
            .into_iter()
            .filter_map(|(score, slot)| self.hit(slot, score, &query))
            .collect()
    }

    /// How many distinct indexed terms `q` has: what [`super::Feedback::min_query_terms`]
    /// is compared with (measured per collection by benches/ir-eval).
    #[doc(hidden)]
    pub fn query_terms(&self, q: &str) -> usize {
        self.analyze_query(q).len()
    }

    /// Ranks with `feedback` from now on: what the query-speed bench times the
    /// default's feedback against (nothing indexed depends on it).
    #[doc(hidden)]
    pub fn set_feedback(&mut self, feedback: super::Feedback) {
        self.params.feedback = feedback;
    }

    /// The lexical ranking of [`Index::query`] as chunk references, for
    /// fusing with another ranking; [`Index::hits`] turns them into hits.
    pub fn ranked(&self, q: &str, limit: usize, path_prefix: Option<&str>) -> Vec<(f64, ChunkRef)> {
        let query = self.analyze_query(q);
        self.ranked_with(&query, limit, path_prefix, true)
            .into_iter()
            .map(|(score, slot)| (score, ChunkRef(slot)))
            .collect()
    }

    /// A hit for each chunk of this index, in the order given, with the
    /// terms of `q` its text holds (none, for a chunk found by meaning);
    /// `None` for a reference this index does not hold.
    pub fn hits(&self, q: &str, ranked: &[(f64, ChunkRef)]) -> Vec<Option<Hit>> {
        let query = self.analyze_query(q);
        ranked
            .iter()
            .map(|&(score, ChunkRef(slot))| self.hit(slot, score, &query))
            .collect()
    }

    fn ranked_with(
        &self,
        query: &[QueryTerm],
        limit: usize,
        path_prefix: Option<&str>,
        prune: bool,
    ) -> Vec<(f64, u32)> {
        if query.is_empty() || limit == 0 || self.live_chunks == 0 {
            return Vec::new();
        }
        let stats = self.stats();
        let dense = self.dense();
        let rank = |query: &[QueryTerm], limit: usize, prune: bool| {
            self.rank(query, limit, path_prefix, &stats, &dense, prune)
        };
        let feedback = self.params.feedback;
        if feedback.applies_to(query.len()) {
            let first = rank(query, feedback.docs, prune);
            // The expanded query's bounds sum twenty terms and more: pruning
            // it rarely stops early, and trying cost three times the one
            // exhaustive pass at the 95th percentile (benches/index_query.rs).
            rank(&self.expand(query, &first), limit, false)
        } else {
            rank(query, limit, prune)
        }
    }

    /// The best `limit` candidate chunks for `query` with their scores.
    fn rank(
        &self,
        query: &[QueryTerm],
        limit: usize,
        path_prefix: Option<&str>,
        stats: &Stats,
        dense: &Dense,
        prune: bool,
    ) -> Vec<(f64, u32)> {
        let rank = |scratch: &mut Scratch| {
            scratch.fit(self.chunks.len(), self.notes.len());
            let pruned = if prune {
                self.pruned(query, limit, path_prefix, (stats, dense), scratch)
            } else {
                None
            };
            let ranked = match pruned {
                Some(scored) => top(self, scored, limit),
                None if prune && self.by_blocks(query) => {
                    self.block_max(query, limit, path_prefix, stats, dense, scratch)
                }
                None => self.exhaustive(query, limit, path_prefix, stats, dense, scratch),
            };
            scratch.busy = false;
            ranked
        };
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => rank(&mut scratch),
            Err(_) => rank(&mut Scratch::default()),
        })
    }

    /// RM3: the relevance model of the first pass's chunks (each chunk's term
    /// distribution weighted by its share of the scores), its best
    /// [`Feedback::terms`] terms mixed with the query. The original terms keep
    /// their weights; the model's terms get `(1 - lambda) / lambda` times the
    /// query's length, split by their probabilities (RM3's interpolation,
    /// scaled so a query without feedback terms scores as before); the
    /// original terms stay first, as [`Index::exhaustive`] expects. Ties
    /// between equally likely terms go to the smaller term, so loading the
    /// index or building it gives the same query.
    fn expand(&self, query: &[QueryTerm], first: &[(f64, u32)]) -> Vec<QueryTerm> {
        let feedback = self.params.feedback;
        let total: f64 = first.iter().map(|&(score, _)| score.max(0.0)).sum();
        // Terms in more than this many chunks say nothing about the topic.
        let max_df = (self.live_chunks as f64 * feedback.max_df_share).max(1.0) as usize;
        let mut model: HashMap<u32, (f64, &str)> = HashMap::new();
        if total > 0.0 {
            let mut counts: HashMap<u32, (u32, &str)> = HashMap::new();
            for &(score, slot) in first {
                let Some(chunk) = self.chunks[slot as usize].as_ref() else {
                    continue;
                };
                counts.clear();
                let mut len = 0u32;
                self.tokenizer.for_each_token(&chunk.content, |term, _, _| {
                    if let Some((known, &id)) = self.terms.ids.get_key_value(term) {
                        counts.entry(id).or_insert((0, known)).0 += 1;
                        len += 1;
                    }
                });
                let doc_weight = score.max(0.0) / total;
                for (&id, &(tf, term)) in &counts {
                    if self.terms.body[id as usize].len() <= max_df {
                        model.entry(id).or_insert((0.0, term)).0 +=
                            doc_weight * f64::from(tf) / f64::from(len);
                    }
                }
            }
        }
        let mut best: Vec<(f64, &str, u32)> = model
            .into_iter()
            .map(|(id, (p, term))| (p, term, id))
            .collect();
        best.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        best.truncate(feedback.terms);
        let mass: f64 = best.iter().map(|b| b.0).sum();
        let mut expanded: Vec<QueryTerm> = query.iter().map(QueryTerm::clone).collect();
        if mass <= 0.0 {
            return expanded;
        }
        let length: f64 = query.iter().map(|qt| qt.weight).sum();
        let lambda = feedback.original_weight.clamp(f64::MIN_POSITIVE, 1.0);
        let share = length * (1.0 - lambda) / lambda / mass;
        for (p, term, id) in best {
            match expanded.iter_mut().find(|qt| qt.id == id) {
                Some(qt) => qt.weight += share * p,
                None => expanded.push(QueryTerm {
                    term: term.to_string(),
                    surface: String::new(),
                    id,
                    weight: share * p,
                    original: false,
                }),
            }
        }
        expanded
    }

    /// The best `limit` candidates (chunks whose own text holds an original
    /// query term, under the prefix) with their scores, scored term at a time
    /// in one pass over each term's postings, reading the dense figures.
    ///
    /// A chunk's score sums, in query order, each term's BM25F saturation of
    /// its text frequency plus its note's weighted title frequency, then its
    /// note's whole-note score: [`Index::score_note`]'s arithmetic in the same
    /// order, so both give the same bits. Chunks an original term reaches only
    /// through its note's title are summed too and dropped at the end unless
    /// another original term made them candidates. Feedback terms come after
    /// every original one (see [`Index::expand`]), when the candidates are
    /// known: they add to candidates only, and pass over the rest of their
    /// postings.
    fn exhaustive(
        &self,
        query: &[QueryTerm],
        limit: usize,
        path_prefix: Option<&str>,
        st: &Stats,
        dense: &Dense,
        scratch: &mut Scratch,
    ) -> Vec<(f64, u32)> {
        let Scratch {
            is_candidate,
            scores,
            term_seen,
            pass,
            title_tf,
            note_score,
            note_ok,
            candidates,
            also_summed,
            ..
        } = scratch;
        let (k1, wt, nw) = (st.k1, st.wt, st.nw);
        candidates.clear();
        also_summed.clear();
        for qt in query {
            let postings = &self.terms.body[qt.id as usize];
            let weight = qt.weight * idf(st.n, postings.len());
            let title_postings = &self.terms.title[qt.id as usize];
            let titles = || title_postings.iter().filter(|_| wt > 0.0);
            for (note_slot, tf) in titles() {
                if let Some(note) = dense.notes[note_slot as usize] {
                    title_tf[note_slot as usize] = wt * f64::from(tf) / note.title_norm;
                }
            }
            // Marks the chunks whose text holds the term, for the title pass.
            *pass = pass.wrapping_add(1);
            if *pass == 0 {
                term_seen.fill(0);
                *pass = 1;
            }
            for (slot, tf) in postings.iter() {
                let Some(chunk) = dense.chunks[slot as usize] else {
                    continue;
                };
                if !self.under_prefix(chunk.note, path_prefix, note_ok) {
                    continue;
                }
                if qt.original {
                    if !std::mem::replace(&mut is_candidate[slot as usize], true) {
                        candidates.push((slot, chunk.note, chunk.extras));
                    }
                } else if !is_candidate[slot as usize] {
                    continue;
                }
                term_seen[slot as usize] = *pass;
                let mut t = f64::from(tf) / chunk.norm;
                if chunk.extras.title {
                    t += title_tf[chunk.note as usize];
                }
                scores[slot as usize] += weight * t / (k1 + t);
            }
            // Chunks of notes whose title holds the term, their text not.
            for (note_slot, _) in titles() {
                let t = title_tf[note_slot as usize];
                if t <= 0.0 || !self.under_prefix(note_slot, path_prefix, note_ok) {
                    continue;
                }
                let Some(note) = self.notes[note_slot as usize].as_ref() else {
                    continue;
                };
                for &slot in &note.chunks {
                    if term_seen[slot as usize] == *pass
                        || (!qt.original && !is_candidate[slot as usize])
                    {
                        continue;
                    }
                    if dense.chunks[slot as usize].is_some_and(|c| c.extras.title) {
                        also_summed.push(slot);
                        scores[slot as usize] += weight * t / (k1 + t);
                    }
                }
            }
            for (note_slot, _) in titles() {
                title_tf[note_slot as usize] = 0.0;
            }
            if nw > 0.0 {
                let postings = &self.terms.whole[qt.id as usize];
                let note_idf = idf(st.n_notes, postings.len());
                for (note_slot, tf) in postings.iter() {
                    if let Some(note) = dense.notes[note_slot as usize] {
                        let t = f64::from(tf) / note.norm;
                        note_score[note_slot as usize] += nw * qt.weight * note_idf * t / (k1 + t);
                    }
                }
            }
        }
        let scored = candidates.iter().map(|&(slot, note, extras)| {
            let mut score = std::mem::take(&mut scores[slot as usize]);
            if extras.note {
                score += note_score[note as usize];
            }
            is_candidate[slot as usize] = false;
            (score, slot)
        });
        let best = top(self, scored, limit);
        for &slot in also_summed.iter() {
            scores[slot as usize] = 0.0;
        }
        note_score.fill(0.0);
        if path_prefix.is_some() {
            note_ok.fill(0);
        }
        best
    }

    /// MaxScore over notes: a query term adds at most `weight * (idf +
    /// note_weight * note idf)` to any chunk (both saturations stay below 1),
    /// and only to chunks of notes that hold it (in their text or title field).
    /// Terms are taken by that bound, highest first; each one's notes have
    /// their candidate chunks scored exactly (document at a time, the same
    /// arithmetic in the same order as [`Index::exhaustive`]). Once the chunks
    /// scored so far hold `limit` whose lowest score is above the sum of the
    /// bounds of the terms not taken yet, no other chunk can enter the answer,
    /// and ranking stops. `None` when the notes to visit outgrow a share of the
    /// postings an exhaustive pass reads (terms common everywhere, where
    /// bounds prune nothing): the caller then scores exhaustively.
    fn pruned(
        &self,
        query: &[QueryTerm],
        limit: usize,
        path_prefix: Option<&str>,
        (st, dense): (&Stats, &Dense),
        scratch: &mut Scratch,
    ) -> Option<Vec<(f64, u32)>> {
        let bound = |qt: &QueryTerm| {
            let body = idf(st.n, self.terms.body[qt.id as usize].len()).max(0.0);
            let whole = if st.nw > 0.0 {
                st.nw * idf(st.n_notes, self.terms.whole[qt.id as usize].len()).max(0.0)
            } else {
                0.0
            };
            qt.weight * (body + whole)
        };
        let mut order: Vec<(f64, usize)> = query
            .iter()
            .enumerate()
            .map(|(i, qt)| (bound(qt), i))
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        // Scoring a note's chunks here costs a binary search per term and
        // chunk where the exhaustive pass streams through the postings: it
        // pays only while the notes to visit are a small share of them.
        let exhaustive_work: usize = query
            .iter()
            .map(|qt| self.terms.body[qt.id as usize].len())
            .sum();
        let budget = exhaustive_work / (16 * query.len());
        let idfs: Vec<(f64, f64)> = query
            .iter()
            .map(|qt| {
                (
                    idf(st.n, self.terms.body[qt.id as usize].len()),
                    idf(st.n_notes, self.terms.whole[qt.id as usize].len()),
                )
            })
            .collect();

        let mut seen: Vec<u32> = Vec::new();
        let mut scored: Vec<(f64, u32)> = Vec::new();
        let mut work = 0usize;
        let mut result = None;
        for (taken, &(_, term)) in order.iter().enumerate() {
            let qt = &query[term];
            let whole = &self.terms.whole[qt.id as usize];
            let title = &self.terms.title[qt.id as usize];
            work += whole.len() + if st.wt > 0.0 { title.len() } else { 0 };
            if work > budget {
                break;
            }
            let titles = title.iter().filter(|_| st.wt > 0.0);
            for (note_slot, _) in whole.iter().chain(titles) {
                if std::mem::replace(&mut scratch.note_seen[note_slot as usize], true) {
                    continue;
                }
                seen.push(note_slot);
                if self.under_prefix(note_slot, path_prefix, &mut scratch.note_ok) {
                    self.score_note(note_slot, query, &idfs, (st, dense), &mut scored);
                }
            }
            let rest: f64 = order[taken + 1..].iter().map(|&(b, _)| b).sum();
            if taken + 1 == order.len() {
                result = Some(std::mem::take(&mut scored));
                break;
            }
            if scored.len() >= limit {
                let cmp = |a: &(f64, u32), b: &(f64, u32)| b.0.total_cmp(&a.0);
                scored.select_nth_unstable_by(limit - 1, cmp);
                let kth = scored[limit - 1].0;
                // A margin for rounding in the scores' sums.
                if rest * (1.0 + 1e-9) + 1e-12 < kth {
                    scored.truncate(limit);
                    result = Some(std::mem::take(&mut scored));
                    break;
                }
            }
        }
        for note_slot in seen {
            scratch.note_seen[note_slot as usize] = false;
        }
        if path_prefix.is_some() {
            scratch.note_ok.fill(0);
        }
        result
    }

    /// Whether a query [`Index::pruned`] gave up on is ranked by blocks: a
    /// few terms ([`blocks::MAX_TERMS`]) with many postings ([`blocks::MIN_POSTINGS`]).
    fn by_blocks(&self, query: &[QueryTerm]) -> bool {
        let postings: usize = query
            .iter()
            .map(|qt| self.terms.body[qt.id as usize].len())
            .sum();
        query.len() <= blocks::MAX_TERMS && postings >= blocks::MIN_POSTINGS
    }

    /// Block-max ranking, for queries [`Index::pruned`] gives up on (words
    /// common everywhere): blocks of chunk slots are visited by the sum of
    /// their terms' bounds ([`super::blocks`]), highest first, each one's
    /// candidates scored exactly as [`Index::exhaustive`] scores them, until
    /// the answer holds `limit` chunks whose lowest score is above the next
    /// block's bound.
    fn block_max(
        &self,
        query: &[QueryTerm],
        limit: usize,
        path_prefix: Option<&str>,
        st: &Stats,
        dense: &Dense,
        scratch: &mut Scratch,
    ) -> Vec<(f64, u32)> {
        let bounds: Vec<_> = query
            .iter()
            .map(|qt| self.term_blocks(qt.id, st, dense))
            .collect();
        let blocks = self.chunks.len().div_ceil(BLOCK);
        // Positive floats order as their bits do.
        let mut next: BinaryHeap<(u64, u32)> = (0..blocks)
            .filter_map(|block| {
                let bound: f64 = query
                    .iter()
                    .zip(&bounds)
                    .map(|(qt, term)| qt.weight * f64::from(term.maxima[block]))
                    .sum();
                (bound > 0.0).then_some((bound.to_bits(), block as u32))
            })
            .collect();
        let weights: Vec<(f64, f64)> = query
            .iter()
            .map(|qt| {
                let id = qt.id as usize;
                (
                    qt.weight * idf(st.n, self.terms.body[id].len()),
                    idf(st.n_notes, self.terms.whole[id].len()),
                )
            })
            .collect();
        let mut best = Best::new(self, limit);
        scratch.blocks_scored = 0;
        let mut block = Block {
            tfs: vec![0; query.len() * BLOCK],
            start: 0,
        };
        while let Some((bound, at)) = next.pop() {
            // A margin for rounding in the scores' sums, as in pruned.
            let beaten = |kth: f64| f64::from_bits(bound) * (1.0 + 1e-9) + 1e-12 < kth;
            if best.kth().is_some_and(beaten) {
                break;
            }
            block.load(self, at as usize * BLOCK, query, &bounds);
            scratch.blocks_scored += 1;
            let ranking = (query, weights.as_slice(), st, dense);
            self.score_block(
                &block,
                ranking,
                path_prefix,
                &mut scratch.note_ok,
                &mut best,
            );
        }
        if path_prefix.is_some() {
            scratch.note_ok.fill(0);
        }
        best.into_vec()
    }

    /// Scores the candidates of one loaded block into `best`, with the
    /// arithmetic of [`Index::exhaustive`] in the same order, so both give
    /// the same bits. `weights` holds each term's weight times its chunk idf,
    /// and its whole-note idf.
    fn score_block(
        &self,
        block: &Block,
        (query, weights, st, dense): (&[QueryTerm], &[(f64, f64)], &Stats, &Dense),
        path_prefix: Option<&str>,
        note_ok: &mut [u8],
        best: &mut Best<'_>,
    ) {
        let mut note_part: Option<(u32, f64)> = None;
        for (i, slot) in (block.start..(block.start + BLOCK).min(self.chunks.len())).enumerate() {
            let Some(chunk) = dense.chunks[slot] else {
                continue;
            };
            let tf = |term: usize| block.tfs[term * BLOCK + i];
            let candidate = (0..query.len()).any(|term| query[term].original && tf(term) > 0);
            if !candidate || !self.under_prefix(chunk.note, path_prefix, note_ok) {
                continue;
            }
            let Some(note) = self.notes[chunk.note as usize].as_ref() else {
                continue;
            };
            let mut score = 0f64;
            for (term, qt) in query.iter().enumerate() {
                let title = if chunk.extras.title {
                    self.title_field(chunk.note, note, qt.id, st, dense)
                } else {
                    0.0
                };
                let t = match tf(term) {
                    0 => title,
                    tf => f64::from(tf) / chunk.norm + title,
                };
                if t > 0.0 {
                    score += weights[term].0 * t / (st.k1 + t);
                }
            }
            if chunk.extras.note {
                // A note's chunks are mostly neighbours: its part is kept for the next.
                let part = match note_part {
                    Some((of, part)) if of == chunk.note => part,
                    _ => self.whole_note_part(chunk.note, query, weights, st, dense),
                };
                note_part = Some((chunk.note, part));
                score += part;
            }
            best.push((score, slot as u32));
        }
    }

    /// The note's title field frequency of term `id`, normalized and weighted,
    /// as [`Index::exhaustive`] computes it (0 when the title lacks it).
    fn title_field(
        &self,
        slot: u32,
        note: &super::Note,
        id: u32,
        st: &Stats,
        dense: &Dense,
    ) -> f64 {
        let Ok(at) = note.title_terms.binary_search_by_key(&id, |e| e.0) else {
            return 0.0;
        };
        match dense.notes[slot as usize] {
            Some(figures) => st.wt * f64::from(note.title_terms[at].1) / figures.title_norm,
            None => 0.0,
        }
    }

    /// The whole-note score of note `slot`, summed as [`Index::exhaustive`]
    /// does; `weights` holds each term's whole-note idf second.
    fn whole_note_part(
        &self,
        slot: u32,
        query: &[QueryTerm],
        weights: &[(f64, f64)],
        st: &Stats,
        dense: &Dense,
    ) -> f64 {
        let Some(figures) = dense.notes[slot as usize].filter(|_| st.nw > 0.0) else {
            return 0.0;
        };
        let mut part = 0f64;
        for (qt, &(_, note_idf)) in query.iter().zip(weights) {
            let tf = self.terms.whole[qt.id as usize].get(slot);
            if tf > 0 {
                let t = f64::from(tf) / figures.norm;
                part += st.nw * qt.weight * note_idf * t / (st.k1 + t);
            }
        }
        part
    }

    /// Scores the candidate chunks of one note, as [`Index::exhaustive`] does.
    fn score_note(
        &self,
        note_slot: u32,
        query: &[QueryTerm],
        idfs: &[(f64, f64)],
        (st, dense): (&Stats, &Dense),
        out: &mut Vec<(f64, u32)>,
    ) {
        let Some(note) = self.notes[note_slot as usize].as_ref() else {
            return;
        };
        let k1 = st.k1;
        let note_score = self.whole_note_part(note_slot, query, idfs, st, dense);
        for &slot in &note.chunks {
            let Some(chunk) = self.chunks[slot as usize].as_ref() else {
                continue;
            };
            let extras = st.extras(chunk.len, note);
            let mut score = 0f64;
            let mut candidate = false;
            for (qt, &(body_idf, _)) in query.iter().zip(idfs) {
                let tf = self.terms.body[qt.id as usize].get(slot);
                let mut t = 0.0;
                if tf > 0 {
                    candidate |= qt.original;
                    let norm = st.norm(f64::from(chunk.len), st.avg_len);
                    t = f64::from(tf) / norm;
                }
                if extras.title {
                    t += self.title_field(note_slot, note, qt.id, st, dense);
                }
                if t > 0.0 {
                    score += qt.weight * body_idf * t / (k1 + t);
                }
            }
            if candidate {
                if extras.note {
                    score += note_score;
                }
                out.push((score, slot));
            }
        }
    }

    /// The tie-break between two live chunks of equal score: by their notes'
    /// path bytes, then chunk index. Only equal scores ask, so it reads the
    /// paths rather than keeping an order of every chunk that each change
    /// would renumber.
    fn tie_order(&self, a: u32, b: u32) -> std::cmp::Ordering {
        let key = |slot: u32| {
            let chunk = self.chunks[slot as usize].as_ref();
            let path = chunk
                .and_then(|c| self.notes[c.note as usize].as_ref())
                .map_or(&[][..], |n| n.path.as_bytes());
            (path, chunk.map_or(0, |c| c.chunk_index))
        };
        key(a).cmp(&key(b))
    }

    /// Whether a note is under the prefix, remembered in `state`.
    fn under_prefix(&self, note: u32, prefix: Option<&str>, state: &mut [u8]) -> bool {
        let Some(prefix) = prefix else { return true };
        let state = &mut state[note as usize];
        if *state == 0 {
            let inside = self.notes[note as usize]
                .as_ref()
                .is_some_and(|n| path_matches_prefix(&n.path, prefix));
            *state = if inside { 1 } else { 2 };
        }
        *state == 1
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
        // The original's contract: each matched query token once, lowercased, in query order.
        let mut matched_terms: Vec<String> = Vec::new();
        for (q, _) in query.iter().zip(&found).filter(|(_, &f)| f) {
            let token = q.surface.to_lowercase();
            if !matched_terms.contains(&token) {
                matched_terms.push(token);
            }
        }
        Some(Hit {
            content: chunk.content.to_string(),
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
                    original: true,
                });
            }
        });
        out
    }
}

/// The best `limit` of `scored`, best first (see [`Best`]).
fn top(
    index: &Index,
    scored: impl IntoIterator<Item = (f64, u32)>,
    limit: usize,
) -> Vec<(f64, u32)> {
    let mut best = Best::new(index, limit);
    for item in scored {
        best.push(item);
    }
    best.into_vec()
}

/// The best `limit` scored chunks so far, best first: by score, ties by path
/// bytes then chunk index ([`Index::tie_order`]). Only the best are kept, so a
/// large candidate set is neither stored nor sorted.
struct Best<'a> {
    index: &'a Index,
    limit: usize,
    items: Vec<(f64, u32)>,
}

impl<'a> Best<'a> {
    fn new(index: &'a Index, limit: usize) -> Best<'a> {
        Best {
            index,
            limit,
            items: Vec::with_capacity(limit + 1),
        }
    }

    fn cmp(&self, a: &(f64, u32), b: &(f64, u32)) -> std::cmp::Ordering {
        b.0.total_cmp(&a.0)
            .then_with(|| self.index.tie_order(a.1, b.1))
    }

    fn push(&mut self, item: (f64, u32)) {
        if self.items.len() == self.limit {
            match self.items.last() {
                Some(worst) if self.cmp(&item, worst) == std::cmp::Ordering::Less => {}
                _ => return,
            }
            self.items.pop();
        }
        let at = self
            .items
            .partition_point(|b| self.cmp(b, &item) == std::cmp::Ordering::Less);
        self.items.insert(at, item);
    }

    /// The lowest score kept, once `limit` are.
    fn kth(&self) -> Option<f64> {
        match self.items.last() {
            Some(&(score, _)) if self.items.len() == self.limit => Some(score),
            _ => None,
        }
    }

    fn into_vec(self) -> Vec<(f64, u32)> {
        self.items
    }
}

/// One block's term frequencies, per query term, from each term's postings.
struct Block {
    /// `tfs[term * BLOCK + i]`: the frequency of the term at slot `start + i`.
    tfs: Vec<u32>,
    start: usize,
}

impl Block {
    fn load(
        &mut self,
        index: &Index,
        start: usize,
        query: &[QueryTerm],
        bounds: &[Arc<TermBlocks>],
    ) {
        self.start = start;
        self.tfs.fill(0);
        for (term, (qt, bound)) in query.iter().zip(bounds).enumerate() {
            let row = &mut self.tfs[term * BLOCK..(term + 1) * BLOCK];
            let run = index.terms.body[qt.id as usize].sorted_run();
            let block = start / BLOCK;
            let (from, to) = (
                bound.starts[block] as usize,
                bound.starts[block + 1] as usize,
            );
            let tail = &bound.tail[bound.tail.partition_point(|e| (e.0 as usize) < start)..];
            let in_block = tail.iter().take_while(|e| (e.0 as usize) < start + BLOCK);
            // A tombstone in the run holds 0: no entry.
            for &(slot, tf) in run[from..to].iter().chain(in_block) {
                row[slot as usize - start] = tf;
            }
        }
    }
}

#[derive(Debug, Clone)]
struct QueryTerm {
    term: String,
    surface: String,
    id: u32,
    weight: f64,
    /// Typed by the caller, not added by feedback: only such terms make a
    /// chunk a candidate.
    original: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Params;

    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) as usize % n
        }

        /// A word of a 3,000-word vocabulary, Zipf-like: a few words are
        /// everywhere, most are rare.
        fn word(&mut self) -> String {
            let u = (self.below(1 << 20) as f64 + 0.5) / f64::from(1 << 20);
            format!("w{}", (u.powi(4) * 3000.0) as usize)
        }
    }

    /// Notes in nested folders with headings, front-matter titles, several
    /// chunks and repeated notes' words.
    fn vault(seed: u64, count: usize) -> Vec<(String, String)> {
        let mut rng = Rng(seed);
        let folders = ["a", "a/c", "b", "b/d/e", ""];
        (0..count)
            .map(|i| {
                let folder = folders[rng.below(folders.len())];
                let path = if folder.is_empty() {
                    format!("n{i}.md")
                } else {
                    format!("{folder}/n{i}.md")
                };
                let mut text = String::new();
                if rng.below(3) == 0 {
                    text.push_str(&format!("---\ntitle: {} {}\n---\n", rng.word(), rng.word()));
                }
                for section in 0..1 + rng.below(4) {
                    text.push_str(&format!("\n# {} {section}\n", rng.word()));
                    for _ in 0..rng.below(120) {
                        text.push_str(&rng.word());
                        text.push(if rng.below(12) == 0 { '\n' } else { ' ' });
                    }
                }
                (path, text)
            })
            .collect()
    }

    fn queries(seed: u64, count: usize) -> Vec<String> {
        let mut rng = Rng(seed);
        let common = |rng: &mut Rng| format!("w{}", rng.below(20));
        let rare = |rng: &mut Rng| format!("w{}", 1500 + rng.below(1500));
        (0..count)
            .map(|i| match i % 8 {
                0 => rng.word(),
                1 => format!("{} {}", rng.word(), rng.word()),
                2 => format!("{} {}", rare(&mut rng), common(&mut rng)),
                3 => format!(
                    "{} {} {}",
                    common(&mut rng),
                    rare(&mut rng),
                    common(&mut rng)
                ),
                4 => {
                    let w = rng.word();
                    format!("{w} {} {w}", rare(&mut rng))
                }
                5 => format!("{} {}", common(&mut rng), common(&mut rng)),
                6 => format!("{} the {}", rare(&mut rng), rare(&mut rng)),
                // Long enough for the default's feedback.
                _ => (0..6)
                    .map(|k| match k % 3 {
                        0 => rare(&mut rng),
                        1 => common(&mut rng),
                        _ => rng.word(),
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            })
            .collect()
    }

    /// Pruned ranking answers exactly what scoring every candidate does
    /// (hits, order, scores to the bit, ties), over single words, pairs,
    /// rare with common terms, repeated terms, six words (the default's
    /// feedback), prefixes and limits 1..=50;
    /// and it does prune: half or more of the queries of rare with common terms stop early at
    /// the default limit with the default parameters, a third or more with the others
    /// (two rare terms are cheap to score whole).
    const PREFIXES: [Option<&str>; 4] = [None, Some("a"), Some("a/c"), Some("b/d")];

    /// The default ranking, one without the title and note fields, one with
    /// the other levers moved; each with how many queries to try.
    fn levers() -> [(Params, usize); 3] {
        [
            (Params::default(), 700),
            (
                Params {
                    title_weight: 0.0,
                    note_weight: 0.0,
                    ..Params::default()
                },
                150,
            ),
            (
                Params {
                    note_score_one_chunk: false,
                    title_on_title_only: false,
                    min_length_share: 0.5,
                    ..Params::default()
                },
                150,
            ),
        ]
    }

    /// 1,500 notes, then updates that leave free slots, tombstones and unsorted tails.
    fn updated_index(params: Params) -> Index {
        let mut idx = Index::build_with(vault(11, 1500), params);
        for (path, text) in vault(12, 200).into_iter().step_by(3) {
            idx.remove_note(&path);
            idx.upsert_note(&format!("x/{path}"), &text);
        }
        idx
    }

    #[test]
    fn pruned_ranking_equals_exhaustive() {
        for (params, count) in levers() {
            let idx = updated_index(params);
            let mut rng = Rng(5);
            let (mut pruned, mut rare_queries) = (0, 0);
            for (i, q) in queries(3, count).iter().enumerate() {
                let limit = 1 + rng.below(50);
                let prefix = PREFIXES[rng.below(PREFIXES.len())];
                let want = idx.query_exhaustive(q, limit, prefix);
                assert_eq!(
                    idx.query(q, limit, prefix),
                    want,
                    "{q:?} {limit} {prefix:?}"
                );
                assert!(want.len() <= limit);

                let query = idx.analyze_query(q);
                if [2, 3].contains(&(i % 8)) && !query.is_empty() {
                    rare_queries += 1;
                    let mut scratch = Scratch::default();
                    scratch.fit(idx.chunks.len(), idx.notes.len());
                    let stats = idx.stats();
                    // At the server's default limit.
                    let got = idx.pruned(&query, 5, prefix, (&stats, &idx.dense()), &mut scratch);
                    if got.is_some() {
                        pruned += 1;
                    }
                    assert!(scratch.note_seen.iter().all(|&s| !s));
                    assert!(scratch.note_ok.iter().all(|&s| s == 0));
                }
            }
            // The default: at least half (103 of 176 with k1 1.5, b 0.6, note weight
            // 1, a length floor of 0.25); the other lever sets, which only the
            // evaluation uses: at least a third (23 and 15 of 38).
            let share = if params == Params::default() { 2 } else { 3 };
            assert!(
                pruned * share >= rare_queries,
                "{pruned} of {rare_queries} pruned"
            );
        }
    }

    /// Ranking by blocks answers exactly what scoring every candidate does,
    /// for every query shape, limit and prefix (whether or not the query
    /// would be ranked by blocks at this index's size).
    #[test]
    fn block_max_equals_exhaustive() {
        for (params, count) in levers() {
            let idx = updated_index(params);
            let (stats, dense) = (idx.stats(), idx.dense());
            let mut rng = Rng(7);
            for q in queries(4, count) {
                let (limit, prefix) = (1 + rng.below(50), PREFIXES[rng.below(PREFIXES.len())]);
                let query = idx.analyze_query(&q);
                if query.is_empty() {
                    continue;
                }
                let mut scratch = Scratch::default();
                scratch.fit(idx.chunks.len(), idx.notes.len());
                let got = idx.block_max(&query, limit, prefix, &stats, &dense, &mut scratch);
                let want = idx.exhaustive(&query, limit, prefix, &stats, &dense, &mut scratch);
                assert_eq!(got, want, "{q:?} {limit} {prefix:?}");
                assert!(scratch.note_ok.iter().all(|&s| s == 0));
            }
        }
    }

    /// A chunk that gets a query term only through its note's title field
    /// (here the file name: the note has no heading) is bounded with it: the
    /// best chunk is alone in its block with that term, and the block's bound
    /// must still beat the other block's best.
    #[test]
    fn a_term_only_in_the_title_field_counts_in_its_block_bound() {
        let filler = "meadow ".repeat(80);
        let mut notes: Vec<(String, String)> = (0..BLOCK - 1)
            .map(|i| (format!("a/{i:02}.md"), format!("{filler}\n")))
            .collect();
        notes.push(("a/lantern.md".into(), format!("harbor {filler}\n")));
        notes.extend((0..BLOCK).map(|i| {
            let text = format!("lantern harbor {}\n", "meadow ".repeat(160));
            (format!("b/{i:02}.md"), text)
        }));
        let idx = Index::build(notes);
        let (stats, dense) = (idx.stats(), idx.dense());
        let query = idx.analyze_query("lantern harbor");
        let path_of = |slot: u32| {
            let chunk = idx.chunks[slot as usize].as_ref().unwrap();
            idx.notes[chunk.note as usize]
                .as_ref()
                .unwrap()
                .path
                .clone()
        };
        let mut scratch = Scratch::default();
        scratch.fit(idx.chunks.len(), idx.notes.len());
        let want = idx.exhaustive(&query, 1, None, &stats, &dense, &mut scratch);
        assert_eq!(path_of(want[0].1), "a/lantern.md");
        assert!(
            (want[0].1 as usize) < BLOCK,
            "the title-only chunk is in the first block"
        );
        let got = idx.block_max(&query, 1, None, &stats, &dense, &mut scratch);
        assert_eq!(got, want);
    }

    /// Two words common everywhere (which MaxScore over notes gives up on)
    /// are ranked by blocks, exactly, scoring under a third of the blocks (of
    /// 67 here; 0.7-1.9% of 4,202 on a 40,000-note vault); a prefix keeps the
    /// answer exact.
    #[test]
    fn block_max_scores_few_blocks_of_common_words() {
        let mut idx = Index::build_with(vault(21, 2000), Params::default());
        for (path, text) in vault(22, 300).into_iter().step_by(4) {
            idx.upsert_note(&path, &text);
        }
        let stats = idx.stats();
        let dense = idx.dense();
        let blocks = idx.chunks.len().div_ceil(BLOCK);
        let mut scored = Vec::new();
        for (a, b) in (0..12).map(|i| (i % 6, 6 + i)) {
            let q = format!("w{a} w{b}");
            let query = idx.analyze_query(&q);
            for prefix in [None, Some("b")] {
                let mut scratch = Scratch::default();
                scratch.fit(idx.chunks.len(), idx.notes.len());
                assert!(
                    idx.pruned(&query, 5, prefix, (&stats, &idx.dense()), &mut scratch)
                        .is_none(),
                    "{q}"
                );
                let got = idx.block_max(&query, 5, prefix, &stats, &dense, &mut scratch);
                let want = idx.exhaustive(&query, 5, prefix, &stats, &dense, &mut scratch);
                assert_eq!(got, want, "{q} {prefix:?}");
                assert!(scratch.note_ok.iter().all(|&s| s == 0));
                if prefix.is_none() {
                    scored.push(scratch.blocks_scored);
                }
            }
        }
        scored.sort_unstable();
        assert!(
            scored[scored.len() / 2] * 3 < blocks,
            "median {} of {blocks} blocks scored: {scored:?}",
            scored[scored.len() / 2]
        );
    }

    fn with_feedback(min_query_terms: usize) -> Params {
        Params {
            feedback: crate::index::Feedback {
                min_query_terms,
                ..crate::index::Feedback::RM3
            },
            ..Params::default()
        }
    }

    /// With feedback on every query, pruned ranking still equals the
    /// exhaustive one, and feedback changes only the order: the chunks
    /// returned (all of them, limit past the candidates) are those without it.
    #[test]
    fn feedback_reranks_and_never_adds() {
        let notes = vault(21, 400);
        let plain = Index::build_with(
            notes.clone(),
            Params {
                feedback: crate::index::Feedback::OFF,
                ..Params::default()
            },
        );
        let fed = Index::build_with(notes, with_feedback(1));
        let mut rng = Rng(8);
        let mut reordered = 0;
        for q in queries(4, 140) {
            let limit = 1 + rng.below(50);
            assert_eq!(
                fed.query(&q, limit, None),
                fed.query_exhaustive(&q, limit, None),
                "{q:?} {limit}"
            );
            let key = |h: &Hit| (h.path.clone(), h.chunk_index);
            let all_plain = plain.query(&q, 100_000, None);
            let all_fed = fed.query(&q, 100_000, None);
            let mut a: Vec<_> = all_plain.iter().map(key).collect();
            let mut b: Vec<_> = all_fed.iter().map(key).collect();
            if a != b {
                reordered += 1;
            }
            a.sort();
            b.sort();
            assert_eq!(a, b, "{q:?}");
            assert!(all_fed.iter().all(|h| !h.matched_terms.is_empty()));
        }
        assert!(reordered > 70, "feedback reordered only {reordered} of 140");
    }

    /// A chunk sharing the vocabulary of the best chunks rises above one that
    /// holds the query word as often but nothing else of theirs; short queries
    /// (below `min_query_terms`) rank as without feedback.
    #[test]
    fn feedback_promotes_the_best_chunks_neighbours() {
        let mut notes: Vec<(String, String)> = (0..3)
            .map(|i| {
                (
                    format!("t{i}.md"),
                    "jaguar jaguar jaguar predator habitat rainforest prey\n".to_string(),
                )
            })
            .collect();
        notes.push(("a-car.md".into(), "jaguar engine gearbox mileage\n".into()));
        notes.push((
            "b-cat.md".into(),
            "jaguar predator habitat rainforest\n".into(),
        ));
        for i in 0..20 {
            notes.push((format!("filler{i}.md"), format!("engine {i} other words\n")));
        }
        let order = |idx: &Index| {
            idx.query("jaguar", 10, None)
                .into_iter()
                .map(|h| h.path)
                .filter(|p| p.starts_with("a-") || p.starts_with("b-"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            order(&Index::build_with(notes.clone(), with_feedback(1))),
            ["b-cat.md", "a-car.md"]
        );
        assert_eq!(
            order(&Index::build_with(notes, with_feedback(2))),
            ["a-car.md", "b-cat.md"]
        );
    }

    /// The evaluation's levers do what they say: a note that is its title
    /// loses its title field (a longer note keeps it), a one-chunk note loses
    /// the whole-note score (a note of two chunks keeps it), and a length floor
    /// lowers a one-line note's score.
    #[test]
    fn title_only_one_chunk_and_length_floor_levers() {
        let mut notes = vec![
            ("stub.md".to_string(), "# jaguar\n".to_string()),
            (
                "long.md".to_string(),
                "# jaguar\nthe jaguar hunts by night in rainforest and swamp\n".to_string(),
            ),
            (
                "two.md".to_string(),
                format!("# jaguar\n{}\n# more\nrainforest\n", "word ".repeat(400)),
            ),
        ];
        for i in 0..30 {
            notes.push((format!("f{i}.md"), format!("filler {i} words here\n")));
        }
        let score = |params: Params, path: &str| {
            let idx = Index::build_with(notes.clone(), params);
            idx.query("jaguar", 10, None)
                .into_iter()
                .find(|h| h.path == path && h.chunk_index == 0)
                .map(|h| h.score)
                .expect("ranked")
        };
        let base = Params::default();
        let no_title = Params {
            title_on_title_only: false,
            ..base
        };
        assert!(score(no_title, "stub.md") < score(base, "stub.md"));
        assert_eq!(score(no_title, "long.md"), score(base, "long.md"));
        let no_one_chunk = Params {
            note_score_one_chunk: false,
            ..base
        };
        assert!(score(no_one_chunk, "long.md") < score(base, "long.md"));
        assert_eq!(score(no_one_chunk, "two.md"), score(base, "two.md"));
        let floor = Params {
            min_length_share: 1.0,
            ..base
        };
        assert!(score(floor, "stub.md") < score(base, "stub.md"));
    }

    /// Chunks by note path bytes, then chunk index: the tie-break order.
    fn chunk_order(idx: &Index, a: u32, b: u32) -> std::cmp::Ordering {
        let key = |slot: u32| {
            let chunk = idx.chunks[slot as usize].as_ref();
            let path = chunk
                .and_then(|c| idx.notes[c.note as usize].as_ref())
                .map_or("", |n| n.path.as_str());
            (path, chunk.map_or(0, |c| c.chunk_index))
        };
        let (pa, ca) = key(a);
        let (pb, cb) = key(b);
        pa.as_bytes().cmp(pb.as_bytes()).then(ca.cmp(&cb))
    }

    /// Keeping the best so far selects what sorting everything would, ties
    /// (many here) broken by path and chunk.
    #[test]
    fn top_equals_a_full_sort() {
        let idx = Index::build(vault(2, 80));
        let slots: Vec<u32> = (0..idx.chunks.len() as u32)
            .filter(|&s| idx.chunks[s as usize].is_some())
            .collect();
        let mut rng = Rng(9);
        for limit in [1, 2, 5, 17, 50, 1000] {
            let scored: Vec<(f64, u32)> = slots
                .iter()
                .map(|&s| (rng.below(4) as f64 * 0.5, s))
                .collect();
            let mut want = scored.clone();
            want.sort_by(|a, b| {
                b.0.total_cmp(&a.0)
                    .then_with(|| chunk_order(&idx, a.1, b.1))
            });
            want.truncate(limit);
            assert_eq!(top(&idx, scored, limit), want, "{limit}");
        }
    }

    /// A query cut short (a panic mid-way) leaves no trace in the next one.
    #[test]
    fn a_dirty_scratch_is_cleared() {
        let idx = Index::build(vault(1, 50));
        let want = idx.query_exhaustive("w1 w2", 10, None);
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            scratch.fit(idx.chunks.len(), idx.notes.len());
            scratch.scores.iter_mut().for_each(|s| *s = 7.0);
            scratch.is_candidate.iter_mut().for_each(|c| *c = true);
        });
        assert_eq!(idx.query_exhaustive("w1 w2", 10, None), want);
        assert_eq!(idx.query("w1 w2", 10, None), want);
    }
}
