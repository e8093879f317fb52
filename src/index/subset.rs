//! An index of some of another index's notes, made in one pass over its
//! postings: what a caller whose `read_paths` hide notes searches. It ranks
//! exactly as the index with each left-out note removed (the same slots,
//! live postings and totals, see [`Index::remove_note`]), but tokenizes
//! nothing: removing notes one by one reads each one's text again to find
//! its terms, seconds for tens of thousands of notes. The chunks' text is
//! shared with the whole index (`Arc<str>`), so a copy costs its postings and
//! tables, not the notes' words again.

use std::collections::BTreeMap;

use super::postings::{Postings, Terms};
use super::{Chunk, Index, Note};

impl Index {
    /// This index without the notes whose path `leave_out` holds.
    pub fn without(&self, leave_out: impl Fn(&str) -> bool) -> Index {
        let mut keep_note = vec![false; self.notes.len()];
        let mut keep_chunk = vec![false; self.chunks.len()];
        let mut notes: Vec<Option<Note>> = vec![None; self.notes.len()];
        let mut chunks: Vec<Option<Chunk>> = vec![None; self.chunks.len()];
        let mut by_path = BTreeMap::new();
        let mut free_notes = self.free_notes.clone();
        let mut free_chunks = self.free_chunks.clone();
        let (mut live_notes, mut live_chunks) = (self.live_notes, self.live_chunks);
        let (mut total_len, mut total_title_len) = (self.total_len, self.total_title_len);
        let mut content_bytes = self.content_bytes;
        for (path, &slot) in &self.by_path {
            let note = self.notes[slot as usize].as_ref();
            if !leave_out(path) {
                by_path.insert(path.clone(), slot);
                if let Some(note) = note {
                    keep_note[slot as usize] = true;
                    for &c in &note.chunks {
                        keep_chunk[c as usize] = true;
                        chunks[c as usize] = self.chunks[c as usize].clone();
                    }
                    notes[slot as usize] = Some(note.clone());
                }
                continue;
            }
            // What `remove_note` takes away, in the same order.
            let Some(note) = note else { continue };
            free_notes.push(slot);
            if !note.chunks.is_empty() {
                live_notes -= 1;
            }
            for chunk in note
                .chunks
                .iter()
                .filter_map(|&c| self.chunks[c as usize].as_ref())
            {
                live_chunks -= 1;
                total_len -= u64::from(chunk.len);
                content_bytes -= chunk.content.len() as u64;
                total_title_len -= u64::from(note.title_len);
            }
            free_chunks.extend(note.chunks.iter().rev());
        }
        let body: Vec<Postings> = self
            .terms
            .body
            .iter()
            .map(|p| p.only(&keep_chunk))
            .collect();
        let title: Vec<Postings> = self
            .terms
            .title
            .iter()
            .map(|p| p.only(&keep_note))
            .collect();
        let whole: Vec<Postings> = self
            .terms
            .whole
            .iter()
            .map(|p| p.only(&keep_note))
            .collect();
        // The dictionary keeps only the terms of the notes kept (a caller
        // reading one folder of a large vault needs a small part of it); the
        // others keep their ids and empty lists, as a term whose notes are
        // all gone does.
        let live = |id: u32| {
            [&body, &title, &whole]
                .iter()
                .any(|lists| lists[id as usize].len() > 0)
        };
        let ids = self
            .terms
            .ids
            .iter()
            .filter(|&(_, &id)| live(id))
            .map(|(term, &id)| (term.clone(), id))
            .collect();
        let terms = Terms {
            ids,
            body,
            title,
            whole,
        };
        Index {
            params: self.params,
            tokenizer: self.tokenizer.clone(),
            by_path,
            notes,
            free_notes,
            chunks,
            free_chunks,
            terms,
            words: Default::default(),
            live_chunks,
            live_notes,
            total_len,
            total_title_len,
            content_bytes,
            dense: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Notes of words from a small vocabulary, in three folders, some long
    /// enough for several chunks.
    fn notes(count: usize, seed: u64) -> Vec<(String, String)> {
        const WORDS: [&str; 12] = [
            "fox", "dog", "river", "garden", "lisbon", "coffee", "budget", "meeting", "tomato",
            "recipe", "deploy", "kernel",
        ];
        let mut state = seed;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        (0..count)
            .map(|i| {
                let folder = ["inbox", "work", "home"][i % 3];
                let lines = 1 + next() % 40;
                let text: String = (0..lines)
                    .map(|_| {
                        let words: Vec<&str> = (0..1 + next() % 12)
                            .map(|_| WORDS[next() % WORDS.len()])
                            .collect();
                        format!("{}\n\n", words.join(" "))
                    })
                    .collect();
                (
                    format!("{folder}/n{i}.md"),
                    format!("# {}\n\n{text}", WORDS[i % WORDS.len()]),
                )
            })
            .collect()
    }

    fn ranked(index: &Index, q: &str) -> Vec<(String, usize, String)> {
        index
            .query_exhaustive(q, 50, None)
            .iter()
            .map(|h| (h.path.clone(), h.chunk_index, format!("{:.9}", h.score)))
            .collect()
    }

    #[test]
    fn an_index_without_notes_ranks_as_the_index_with_each_removed() {
        let mut index = Index::build(notes(300, 7));
        // Edits and removals first, so the lists hold tombstones and unsorted tails.
        for (path, text) in notes(60, 11).into_iter().step_by(3) {
            index.upsert_note(&path, &text);
        }
        for i in (0..300).step_by(17) {
            index.remove_note(&format!("{}/n{i}.md", ["inbox", "work", "home"][i % 3]));
        }
        let hidden = |path: &str| !path.starts_with("inbox/") || path.ends_with("5.md");
        let subset = index.without(hidden);
        let mut removed = index.clone();
        let paths: Vec<String> = index.paths().map(str::to_string).collect();
        for path in paths.iter().filter(|p| hidden(p)) {
            removed.remove_note(path);
        }
        assert!(subset.notes_indexed() > 0 && subset.notes_indexed() < index.notes_indexed());
        assert_eq!(subset.notes_indexed(), removed.notes_indexed());
        assert_eq!(subset.chunks_indexed(), removed.chunks_indexed());
        assert_eq!(subset.content_bytes(), removed.content_bytes());
        assert!(subset.paths().all(|p| !hidden(p)));
        for q in [
            "fox",
            "garden river",
            "lisbon coffee budget",
            "kernel deploy tomato recipe",
            "meeting",
        ] {
            let want = ranked(&removed, q);
            assert!(!want.is_empty(), "{q}");
            assert_eq!(ranked(&subset, q), want, "{q}");
            assert_eq!(
                subset.query(q, 10, None).len(),
                removed.query(q, 10, None).len(),
                "{q}"
            );
        }
        // A dry run's note on top of either ranks the same too.
        let (mut subset, mut removed) = (subset, removed);
        // (A new word gets an id of its own, past every list, though the
        // subset's dictionary is shorter.)
        for (path, text) in [
            ("inbox/new.md", "fox fox garden zanzibar\n"),
            ("inbox/n3.md", "kernel zanzibar quartz\n"),
        ] {
            subset.upsert_note(path, text);
            removed.upsert_note(path, text);
        }
        for q in ["fox garden", "zanzibar", "quartz kernel", "lisbon"] {
            assert_eq!(ranked(&subset, q), ranked(&removed, q), "{q}");
        }
        assert_eq!(ranked(&subset, "quartz").len(), 1);
    }
}
