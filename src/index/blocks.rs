//! Block-max bounds: for one term, the most it can add to the score of any
//! chunk in each block of [`BLOCK`] consecutive chunk slots. Ranking
//! ([`super::rank`]) visits blocks by the sum of their query terms' bounds,
//! highest first, and stops once no block left can beat the answer so far:
//! for two words common everywhere, a few dozen blocks instead of every chunk.
//!
//! A bound holds a term's whole part of a chunk's score: its BM25F
//! saturation over the chunk text and the note's title field, and its part of
//! the whole-note score. It is made from one state of the index (the same
//! statistics as [`Dense`]) and kept beside its figures, so every change drops it.

use std::sync::{Arc, MutexGuard, PoisonError};

use super::dense::{Dense, KeptBlocks, TermBlocks};
use super::stats::{idf, Stats};
use super::Index;

/// Chunk slots per block. Measured on a 40,000-note vault (134,455 chunks):
/// for two common words, blocks of 32 left 0.7-1.9% of the candidates to
/// score, blocks of 128 left 6-19%.
pub(super) const BLOCK: usize = 32;

/// The most distinct terms a query ranked by blocks has. A block's bound sums
/// its terms' maxima, and with more terms it beats fewer blocks: on a
/// 40,000-note vault (`benches/index_query.rs`), common words as typed ranked
/// by blocks took 0.60 of the exhaustive pass's time for three words, 1.58
/// for four, 5.2 for six and 7.5 for eight. Longer queries (feedback's among
/// them) are scored in one exhaustive pass.
pub(super) const MAX_TERMS: usize = 3;

/// The fewest postings (of all the query's terms) a query ranked by blocks
/// has: below this the one pass over them costs less than visiting blocks
/// (1,000 notes: 0.16 ms exhaustive, 0.28 ms by blocks; 10,000 notes: 0.60
/// against 0.30 ms).
pub(super) const MIN_POSTINGS: usize = 16 * 1024;

/// How much of the terms' bounds one state of the index keeps (a term takes
/// about 26 KB per 100,000 chunks: some 480 terms of a 40,000-note vault);
/// past that the kept ones are dropped and made again as queries need them.
const KEPT_BYTES: usize = 16 << 20;

impl Index {
    /// The block bounds of term `id` in this state, made on first use.
    pub(super) fn term_blocks(&self, id: u32, st: &Stats, dense: &Dense) -> Arc<TermBlocks> {
        if let Some(made) = kept(dense).terms.get(&id) {
            return Arc::clone(made);
        }
        // Made outside the lock: two queries may both make it, to the same end.
        let made = Arc::new(self.make_term_blocks(id, st, dense));
        let mut kept = kept(dense);
        if kept.bytes + made.bytes() > KEPT_BYTES {
            *kept = KeptBlocks::default();
        }
        if let Some(old) = kept.terms.insert(id, Arc::clone(&made)) {
            kept.bytes -= old.bytes();
        }
        kept.bytes += made.bytes();
        made
    }

    /// Each chunk's part of the score for term `id` at query weight 1, in the
    /// arithmetic of the exhaustive ranking, then its maximum per block.
    fn make_term_blocks(&self, id: u32, st: &Stats, dense: &Dense) -> TermBlocks {
        let id = id as usize;
        let mut value = vec![0f64; self.chunks.len()];
        let body = &self.terms.body[id];
        let body_idf = idf(st.n, body.len());
        // The title field's frequency, normalized, of each note whose title holds the term.
        let mut title = vec![0f64; self.notes.len()];
        let titles = || self.terms.title[id].iter().filter(|_| st.wt > 0.0);
        for (note_slot, tf) in titles() {
            if let Some(note) = dense.notes[note_slot as usize] {
                title[note_slot as usize] = st.wt * f64::from(tf) / note.title_norm;
            }
        }
        let mut in_text = vec![false; self.chunks.len()];
        for (slot, tf) in body.iter() {
            let Some(chunk) = dense.chunks[slot as usize] else {
                continue;
            };
            let mut t = f64::from(tf) / chunk.norm;
            if chunk.extras.title {
                t += title[chunk.note as usize];
            }
            value[slot as usize] += body_idf * t / (st.k1 + t);
            in_text[slot as usize] = true;
        }
        // Chunks that get the term only through their note's title.
        for (note_slot, _) in titles() {
            let t = title[note_slot as usize];
            let Some(note) = self.notes[note_slot as usize].as_ref().filter(|_| t > 0.0) else {
                continue;
            };
            for &slot in &note.chunks {
                let gets_title = dense.chunks[slot as usize].is_some_and(|c| c.extras.title);
                if gets_title && !in_text[slot as usize] {
                    value[slot as usize] += body_idf * t / (st.k1 + t);
                }
            }
        }
        if st.nw > 0.0 {
            // The term's part of each note's whole-note score, then added to
            // its chunks in one pass in slot order (a note's chunk list is a
            // cache miss of its own).
            let whole = &self.terms.whole[id];
            let note_idf = idf(st.n_notes, whole.len());
            let mut part = vec![0f64; self.notes.len()];
            for (note_slot, tf) in whole.iter() {
                if let Some(figures) = dense.notes[note_slot as usize] {
                    let t = f64::from(tf) / figures.norm;
                    part[note_slot as usize] = st.nw * note_idf * t / (st.k1 + t);
                }
            }
            for (value, chunk) in value.iter_mut().zip(&dense.chunks) {
                if let Some(chunk) = chunk.filter(|c| c.extras.note) {
                    *value += part[chunk.note as usize];
                }
            }
        }
        let run = body.sorted_run();
        let mut starts = Vec::with_capacity(value.len().div_ceil(BLOCK) + 1);
        let mut at = 0;
        for block in 0..=value.len().div_ceil(BLOCK) {
            while run.get(at).is_some_and(|e| (e.0 as usize) < block * BLOCK) {
                at += 1;
            }
            starts.push(at as u32);
        }
        TermBlocks {
            maxima: value
                .chunks(BLOCK)
                .map(|block| rounded_up(block.iter().copied().fold(0.0, f64::max)))
                .collect(),
            starts,
            tail: body.sorted_tail(),
        }
    }
}

fn kept(dense: &Dense) -> MutexGuard<'_, KeptBlocks> {
    // The map holds only finished bounds: a panic elsewhere leaves it sound.
    dense.blocks.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The nearest `f32` at or above `x`, so a stored bound never undercuts.
fn rounded_up(x: f64) -> f32 {
    let near = x as f32;
    if f64::from(near) < x {
        near.next_up()
    } else {
        near
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rounded_bound_never_undercuts() {
        for x in [0.0, 1e-30, 0.1, 1.0 / 3.0, 0.8775825618903728, 2.5, 1e30] {
            assert!(f64::from(rounded_up(x)) >= x, "{x}");
            assert!(f64::from(rounded_up(x)) - x <= x * 1e-7, "{x}");
        }
    }
}
