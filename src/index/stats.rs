//! What ranking computes from the index rather than from the query: the
//! collection statistics ([`Stats`]) and, once per state of the index, the
//! dense per-slot figures the scoring loops read ([`Dense`]): each chunk's
//! BM25 length normalization, note and fields, and each note's
//! normalizations. Reading them from small arrays in slot order, not from the
//! chunk and note records, is most of what makes scoring a common term's
//! hundred thousand postings fast.
//!
//! The figures are exactly what ranking would compute on the fly (the same
//! functions of the same numbers), so answers do not change by a bit. They
//! are made by the first query after a change: every change to the notes or
//! chunks ([`Index::changed`]) drops them. What they hold is [`super::dense`].

use super::dense::{Dense, DenseCell, DenseChunk, DenseNote, Extras, Shape};
use super::{Index, Note};

/// The collection statistics and parameters one query ranks with.
pub(super) struct Stats {
    pub(super) n: f64,
    pub(super) avg_len: f64,
    pub(super) avg_title: f64,
    pub(super) n_notes: f64,
    pub(super) avg_note_len: f64,
    pub(super) k1: f64,
    pub(super) b: f64,
    pub(super) wt: f64,
    pub(super) nw: f64,
    pub(super) note_one_chunk: bool,
    pub(super) title_on_title_only: bool,
    pub(super) min_share: f64,
}

impl Stats {
    /// BM25's length normalization of a text of `len` terms where texts
    /// average `avg`, short texts counted as [`super::Params::min_length_share`] of it.
    pub(super) fn norm(&self, len: f64, avg: f64) -> f64 {
        1.0 - self.b + self.b * (len / avg).max(self.min_share)
    }

    /// What of the note's fields a chunk of `chunk_len` terms gets besides its own text.
    pub(super) fn extras(&self, chunk_len: u32, note: &Note) -> Extras {
        Extras {
            title: self.wt > 0.0 && (self.title_on_title_only || chunk_len > note.title_len),
            note: self.nw > 0.0 && (self.note_one_chunk || note.chunks.len() > 1),
        }
    }
}

/// BM25's inverse document frequency of a term in `df` of `n` documents.
pub(super) fn idf(n: f64, df: usize) -> f64 {
    let df = df as f64;
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

impl Index {
    fn shape(&self) -> Shape {
        Shape {
            chunk_slots: self.chunks.len(),
            note_slots: self.notes.len(),
            live_chunks: self.live_chunks,
            live_notes: self.live_notes,
            total_len: self.total_len,
            total_title_len: self.total_title_len,
        }
    }

    /// The collection statistics ranking uses now.
    pub(super) fn stats(&self) -> Stats {
        let n = self.live_chunks as f64;
        let n_notes = (self.live_notes as f64).max(1.0);
        Stats {
            n,
            avg_len: (self.total_len as f64 / n).max(1.0),
            avg_title: (self.total_title_len as f64 / n).max(1.0),
            n_notes,
            avg_note_len: (self.total_len as f64 / n_notes).max(1.0),
            k1: self.params.k1,
            b: self.params.b,
            wt: self.params.title_weight,
            nw: self.params.note_weight,
            note_one_chunk: self.params.note_score_one_chunk,
            title_on_title_only: self.params.title_on_title_only,
            min_share: self.params.min_length_share,
        }
    }

    /// The dense figures of the index as it is, made on first use.
    pub(super) fn dense(&self) -> std::sync::Arc<Dense> {
        let made = self
            .dense
            .0
            .get_or_init(|| std::sync::Arc::new(self.make_dense()));
        if made.made_from == self.shape() {
            return std::sync::Arc::clone(made);
        }
        // A change that forgot to drop them: correct answers over speed.
        debug_assert!(false, "the index changed without Index::changed");
        std::sync::Arc::new(self.make_dense())
    }

    /// Drops the dense figures: every change to the notes or chunks calls this.
    pub(super) fn changed(&mut self) {
        self.dense = DenseCell::default();
    }

    fn make_dense(&self) -> Dense {
        let st = self.stats();
        let chunks = self
            .chunks
            .iter()
            .map(|chunk| {
                let chunk = chunk.as_ref()?;
                let note = self.notes[chunk.note as usize].as_ref()?;
                Some(DenseChunk {
                    norm: st.norm(f64::from(chunk.len), st.avg_len),
                    note: chunk.note,
                    extras: st.extras(chunk.len, note),
                })
            })
            .collect();
        let notes = self
            .notes
            .iter()
            .map(|note| {
                let note = note.as_ref()?;
                Some(DenseNote {
                    norm: st.norm(note.len as f64, st.avg_note_len),
                    title_norm: st.norm(f64::from(note.title_len), st.avg_title),
                })
            })
            .collect();
        Dense {
            chunks,
            notes,
            made_from: self.shape(),
            blocks: Default::default(),
        }
    }
}
