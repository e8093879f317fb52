//! Changing an index one note at a time: a note in (its chunks and title
//! turned into postings, reusing free slots) and a note out (its postings
//! dropped, its slots freed). A build inserts every note this way too.

use super::{chunker, markdown, Chunk, Fingerprint, Index, Note};

impl Index {
    /// Adds or replaces one note, e.g. right after a write was committed.
    pub fn upsert_note(&mut self, path: &str, content: &str) {
        let ranges = chunker::chunk_ranges(content, self.params.chunks);
        let title = title_field(path, content);
        self.insert_chunks(
            path,
            &title,
            cut(content, &ranges),
            Fingerprint::of(content),
            true,
        );
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
}

/// The slices of `content` at `ranges`, as strings.
pub(super) fn cut(content: &str, ranges: &[(usize, usize)]) -> Vec<String> {
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
