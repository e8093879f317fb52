//! Changing an index one note at a time: a note in (its chunks and title
//! turned into postings, reusing free slots), a note out (its postings
//! dropped, its slots freed), and a note rewritten in place (only the
//! postings whose frequency changed are touched). A build inserts every note
//! this way too.

use super::{chunker, markdown, Chunk, Fingerprint, Index, Note};

impl Index {
    /// Adds or replaces one note, e.g. right after a write was committed.
    pub fn upsert_note(&mut self, path: &str, content: &str) {
        let ranges = chunker::chunk_ranges(content, self.params.chunks);
        let title = title_field(path, content);
        let chunks = cut(content, &ranges);
        let fingerprint = Fingerprint::of(content);
        match self.by_path.get(path) {
            Some(&slot) if self.notes[slot as usize].is_some() => {
                self.rewrite_note(slot, &title, chunks, fingerprint);
            }
            _ => self.insert_chunks(path, &title, chunks, fingerprint, true),
        }
    }

    /// Gives the note at `note_slot` new text in place. The end state is the
    /// one [`Index::remove_note`] then [`Index::insert_chunks`] would leave
    /// (the same note and chunk slots, the same postings), but a chunk whose
    /// text did not change is not looked at again, and a posting is touched
    /// only where its frequency changed: an edit of one line in a note of
    /// common words touches a few lists, not every list of the note's terms
    /// (each a binary search that misses the cache in a large index).
    fn rewrite_note(
        &mut self,
        note_slot: u32,
        title: &str,
        chunks: Vec<String>,
        fingerprint: Fingerprint,
    ) {
        let Some(mut note) = self.notes[note_slot as usize].take() else {
            return;
        };
        self.changed();

        let mut ids: Vec<u32> = Vec::new();
        self.term_ids(title, &mut ids);
        let title_len = ids.len() as u32;
        let title_terms = count_ids(&mut ids);
        let title_lists = &mut self.terms.title;
        for_each_change(&note.title_terms, &title_terms, |term, old, new| {
            title_lists[term as usize].change(note_slot, old, new);
        });

        let old_slots = std::mem::take(&mut note.chunks);
        let (slots, whole) = self.rewrite_chunks(note_slot, &old_slots, chunks);
        self.change_whole(note_slot, whole);

        match (old_slots.is_empty(), slots.is_empty()) {
            (false, true) => self.live_notes -= 1,
            (true, false) => self.live_notes += 1,
            _ => {}
        }
        self.total_title_len -= u64::from(note.title_len) * old_slots.len() as u64;
        self.total_title_len += u64::from(title_len) * slots.len() as u64;
        note.len = slots
            .iter()
            .filter_map(|&slot| self.chunks[slot as usize].as_ref())
            .map(|chunk| u64::from(chunk.len))
            .sum();
        note.chunks = slots;
        note.title_terms = title_terms;
        note.title_len = title_len;
        note.bytes = fingerprint.bytes;
        note.hash = fingerprint.hash;
        note.cut_here = true;
        self.notes[note_slot as usize] = Some(note);
    }

    /// The chunks of a note rewritten in place: each of `chunks` at the
    /// slot its index had (`old_slots`), or a free one; unchanged text is
    /// left alone; old slots past the new last chunk are freed. Answers the
    /// new slots and, per term, how much its count in the whole note changed
    /// (one entry per chunk that changed, came or went).
    fn rewrite_chunks(
        &mut self,
        note_slot: u32,
        old_slots: &[u32],
        chunks: Vec<String>,
    ) -> (Vec<u32>, Vec<(u32, i64)>) {
        let mut whole: Vec<(u32, i64)> = Vec::new();
        let mut ids: Vec<u32> = Vec::new();
        let mut slots = Vec::with_capacity(chunks.len());
        for (chunk_index, text) in chunks.into_iter().enumerate() {
            let reused = old_slots.get(chunk_index).copied();
            if let Some(slot) = reused {
                let same = self.chunks[slot as usize]
                    .as_ref()
                    .is_some_and(|chunk| *chunk.content == *text);
                if same {
                    slots.push(slot);
                    continue;
                }
            }
            ids.clear();
            self.term_ids(&text, &mut ids);
            let len = ids.len() as u32;
            let new_counts = count_ids(&mut ids);
            let slot = match reused {
                Some(slot) => {
                    let old_counts = self.drop_chunk(slot);
                    let body = &mut self.terms.body;
                    for_each_change(&old_counts, &new_counts, |term, old, new| {
                        body[term as usize].change(slot, old, new);
                        whole.push((term, i64::from(new) - i64::from(old)));
                    });
                    slot
                }
                None => {
                    let slot = self.free_chunk_slot();
                    for &(term, tf) in &new_counts {
                        self.terms.body[term as usize].insert(slot, tf);
                        whole.push((term, i64::from(tf)));
                    }
                    slot
                }
            };
            self.put_chunk(
                slot,
                Chunk {
                    note: note_slot,
                    chunk_index: chunk_index as u32,
                    content: text.into(),
                    len,
                },
            );
            slots.push(slot);
        }
        let gone = old_slots.get(slots.len()..).unwrap_or_default();
        for &slot in gone {
            for (term, tf) in self.drop_chunk(slot) {
                self.terms.body[term as usize].remove(slot);
                whole.push((term, -i64::from(tf)));
            }
        }
        // As remove_note pushes them: the first of them is popped first.
        self.free_chunks.extend(gone.iter().rev());

        (slots, whole)
    }

    /// Changes the whole-note counts of `note_slot` by `deltas` (summed per term).
    fn change_whole(&mut self, note_slot: u32, mut deltas: Vec<(u32, i64)>) {
        deltas.sort_unstable_by_key(|&(term, _)| term);
        for group in deltas.chunk_by(|a, b| a.0 == b.0) {
            let term = group[0].0;
            let delta: i64 = group.iter().map(|&(_, d)| d).sum();
            if delta == 0 {
                continue;
            }
            let list = &mut self.terms.whole[term as usize];
            let old = list.get(note_slot);
            let new = i64::from(old) + delta;
            debug_assert!(new >= 0, "term {term} would occur {new} times");
            list.change(note_slot, old, new.max(0) as u32);
        }
    }

    /// Puts `chunk` at `slot` and into the totals; its postings are the
    /// caller's to add.
    fn put_chunk(&mut self, slot: u32, chunk: Chunk) {
        self.live_chunks += 1;
        self.total_len += u64::from(chunk.len);
        self.content_bytes += chunk.content.len() as u64;
        self.chunks[slot as usize] = Some(chunk);
    }

    /// Takes the chunk at `slot` out of the totals and answers its (term,
    /// count) pairs; its postings are the caller's to change.
    fn drop_chunk(&mut self, slot: u32) -> Vec<(u32, u32)> {
        let Some(chunk) = self.chunks[slot as usize].take() else {
            return Vec::new();
        };
        let mut ids = Vec::new();
        // Every term of an indexed chunk is known: this adds none.
        self.term_ids(&chunk.content, &mut ids);
        self.live_chunks -= 1;
        self.total_len -= u64::from(chunk.len);
        self.content_bytes -= chunk.content.len() as u64;
        count_ids(&mut ids)
    }

    /// A free chunk slot, or a new one.
    fn free_chunk_slot(&mut self) -> u32 {
        match self.free_chunks.pop() {
            Some(slot) => slot,
            None => {
                self.chunks.push(None);
                (self.chunks.len() - 1) as u32
            }
        }
    }

    /// Inserts a note whose chunks are already cut (an artifact's chunks are
    /// served as they are, whatever chunker wrote them; `cut_here` says this
    /// chunker cut them), with the text of its title field.
    pub(super) fn insert_chunks(
        &mut self,
        path: &str,
        title: &str,
        chunks: Vec<String>,
        fingerprint: Fingerprint,
        cut_here: bool,
    ) {
        self.changed();
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
            let slot = self.free_chunk_slot();
            for (term, tf) in count_ids(&mut ids) {
                self.terms.body[term as usize].insert(slot, tf);
            }
            self.total_title_len += u64::from(title_len);
            self.put_chunk(
                slot,
                Chunk {
                    note: note_slot,
                    chunk_index: chunk_index as u32,
                    content: text.into(),
                    len,
                },
            );
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
            cut_here,
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
        self.changed();
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
        let mut note_ids: Vec<u32> = Vec::new();
        for &slot in &note.chunks {
            if self.chunks[slot as usize].is_none() {
                continue;
            }
            for (term, _) in self.drop_chunk(slot) {
                self.terms.body[term as usize].remove(slot);
                note_ids.push(term);
            }
            self.total_title_len -= u64::from(note.title_len);
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
}

/// The slices of `content` at `ranges`, as strings.
pub(super) fn cut(content: &str, ranges: &[(usize, usize)]) -> Vec<String> {
    ranges
        .iter()
        .map(|&(s, e)| content[s..e].to_string())
        .collect()
}

/// Calls `f(term, old, new)` for each term whose count differs between two
/// (term, count) lists sorted by term; a term missing from a list counts 0.
fn for_each_change(old: &[(u32, u32)], new: &[(u32, u32)], mut f: impl FnMut(u32, u32, u32)) {
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let a = old.get(i).map_or(u32::MAX, |e| e.0);
        let b = new.get(j).map_or(u32::MAX, |e| e.0);
        if a < b || j == new.len() {
            f(a, old[i].1, 0);
            i += 1;
        } else if b < a || i == old.len() {
            f(b, 0, new[j].1);
            j += 1;
        } else {
            if old[i].1 != new[j].1 {
                f(a, old[i].1, new[j].1);
            }
            i += 1;
            j += 1;
        }
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
pub(super) fn title_field(path: &str, content: &str) -> String {
    let stem = path
        .strip_suffix(".md")
        .or_else(|| path.strip_suffix(".MD"))
        .unwrap_or(path);
    match markdown::title(content) {
        Some(t) => format!("{t}\n{stem}"),
        None => stem.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything an index holds, in a form two indexes can be compared by:
    /// slots, records, free lists, every list of every term, the totals.
    fn state(idx: &Index) -> String {
        let lists = |field: &[super::super::postings::Postings]| {
            field
                .iter()
                .enumerate()
                .filter(|(_, list)| list.len() > 0)
                .map(|(term, list)| format!("{term}:{:?}", list.sorted_entries()))
                .collect::<Vec<_>>()
        };
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            idx.by_path,
            idx.notes,
            idx.free_notes,
            idx.chunks,
            idx.free_chunks,
            lists(&idx.terms.body),
            lists(&idx.terms.title),
            lists(&idx.terms.whole),
            (idx.live_chunks, idx.live_notes, idx.total_len),
            (idx.total_title_len, idx.content_bytes),
        )
    }

    /// Rewriting a note in place leaves exactly what removing it and
    /// inserting it again leaves, through every kind of edit: a line added,
    /// a word changed in one section, sections added and dropped, the title
    /// changed, the note emptied and filled again.
    #[test]
    fn a_rewrite_in_place_equals_a_remove_then_insert() {
        let words = ["fox", "dog", "night", "bark", "alpha", "river", "stone"];
        let mut seed: u64 = 11;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let section = |n: usize, next: &mut dyn FnMut(usize) -> usize| {
            let mut text = format!("\n## Part {n}\n");
            // Up to about 2,000 characters: a note is one chunk or several.
            for _ in 0..1 + next(300) {
                text.push_str(words[next(words.len())]);
                text.push(if next(8) == 0 { '\n' } else { ' ' });
            }
            text.push('\n');
            text
        };
        let mut texts: Vec<String> = (0..12)
            .map(|i| {
                let mut text = format!("# Note {i}\n");
                for n in 0..1 + next(4) {
                    text.push_str(&section(n, &mut next));
                }
                text
            })
            .collect();
        let notes: Vec<(String, String)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("n{i}.md"), t.clone()))
            .collect();
        let mut rewritten = Index::build(notes.clone());
        let mut reinserted = Index::build(notes);
        assert_eq!(state(&rewritten), state(&reinserted));
        let mut most_chunks = 0;
        for round in 0..400 {
            let i = next(texts.len());
            let text = &mut texts[i];
            match next(7) {
                0 => text.push_str(&format!("one more line {round} fox\n")),
                1 => {
                    if let Some(at) = text.find("dog") {
                        text.replace_range(at..at + 3, "wolf");
                    }
                }
                2 => {
                    let n = next(6);
                    text.push_str(&section(n, &mut next));
                }
                3 => {
                    if let Some(at) = text.rfind("\n## ") {
                        text.truncate(at + 1);
                    }
                }
                4 => *text = text.replacen("# Note", "# Renamed note", 1),
                5 => text.clear(),
                _ => *text = format!("# Note {i}\n{}", section(0, &mut next)),
            }
            let path = format!("n{i}.md");
            rewritten.upsert_note(&path, text);
            reinserted.remove_note(&path);
            let ranges = chunker::chunk_ranges(text, reinserted.params.chunks);
            reinserted.insert_chunks(
                &path,
                &title_field(&path, text),
                cut(text, &ranges),
                Fingerprint::of(text),
                true,
            );
            assert_eq!(state(&rewritten), state(&reinserted), "round {round}");
            let chunks = rewritten.notes.iter().flatten().map(|n| n.chunks.len());
            most_chunks = most_chunks.max(chunks.max().unwrap_or(0));
        }
        assert!(most_chunks >= 3, "notes of {most_chunks} chunks at most");
    }

    #[test]
    fn changes_between_two_count_lists_are_found_on_both_sides() {
        let mut seen = Vec::new();
        for_each_change(
            &[(1, 2), (3, 1), (5, 4), (9, 1)],
            &[(0, 1), (3, 1), (5, 2), (7, 3)],
            |term, old, new| seen.push((term, old, new)),
        );
        assert_eq!(
            seen,
            [(0, 0, 1), (1, 2, 0), (5, 4, 2), (7, 0, 3), (9, 1, 0)]
        );
    }

    #[test]
    fn the_title_field_is_the_title_then_the_path_stem() {
        assert_eq!(title_field("d/e.md", "plain"), "d/e");
        assert_eq!(title_field("E.MD", "# Hi\n"), "Hi\nE");
        assert_eq!(
            title_field("a.b.md", "---\ntitle: \"T\"\n---\n# H\n"),
            "T\na.b"
        );
    }
}
