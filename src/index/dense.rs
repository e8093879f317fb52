//! The dense per-slot figures ranking reads, as data: what they hold, and the
//! cell an index keeps them in. [`super::stats`] makes them from the index;
//! [`super::blocks`] makes the per-term block bounds kept beside them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Whether a chunk's score adds its note's title field and its whole-note score.
#[derive(Debug, Clone, Copy)]
pub(super) struct Extras {
    pub(super) title: bool,
    pub(super) note: bool,
}

/// The dense figures of one state of the index, by slot.
#[derive(Debug)]
pub(super) struct Dense {
    /// Per chunk slot; `None` for a free slot.
    pub(super) chunks: Vec<Option<DenseChunk>>,
    /// Per note slot; `None` for a free slot.
    pub(super) notes: Vec<Option<DenseNote>>,
    /// What the figures were made from, to catch a change that did not drop them.
    pub(super) made_from: Shape,
    /// Block bounds of the terms queried in this state, made on first use
    /// (they depend on the same statistics as the figures).
    pub(super) blocks: Mutex<KeptBlocks>,
}

/// The block bounds kept for one state of the index.
#[derive(Debug, Default)]
pub(super) struct KeptBlocks {
    /// By term id.
    pub(super) terms: HashMap<u32, Arc<TermBlocks>>,
    /// What they take, in bytes.
    pub(super) bytes: usize,
}

/// One term's block bounds in one state of the index.
#[derive(Debug)]
pub(super) struct TermBlocks {
    /// Per block of [`super::blocks::BLOCK`] chunk slots: the most the term
    /// adds to the score of any chunk in it, for a query weight of 1 (rounded up).
    pub(super) maxima: Vec<f32>,
    /// Per block, and one past the last: where its entries start in the
    /// term's sorted run of chunk postings.
    pub(super) starts: Vec<u32>,
    /// The live entries of the term's chunk postings outside their sorted
    /// run, sorted by slot, so a block's entries are found by binary search.
    pub(super) tail: Vec<(u32, u32)>,
}

impl TermBlocks {
    /// What the bounds take, in bytes.
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of_val(&self.maxima[..])
            + std::mem::size_of_val(&self.starts[..])
            + std::mem::size_of_val(&self.tail[..])
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct DenseChunk {
    /// The length normalization of its text.
    pub(super) norm: f64,
    pub(super) note: u32,
    pub(super) extras: Extras,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct DenseNote {
    /// The length normalization of the whole note.
    pub(super) norm: f64,
    /// The length normalization of its title field.
    pub(super) title_norm: f64,
}

/// The sizes and totals of a state of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) chunk_slots: usize,
    pub(super) note_slots: usize,
    pub(super) live_chunks: u64,
    pub(super) live_notes: u64,
    pub(super) total_len: u64,
    pub(super) total_title_len: u64,
}

/// Where an index keeps its dense figures: empty until a query needs them.
#[derive(Debug, Clone, Default)]
pub(super) struct DenseCell(pub(super) OnceLock<Arc<Dense>>);
