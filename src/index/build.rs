//! Building an index whole: from notes' texts (a rebuild, an on-demand index)
//! or from an artifact's chunks (a load). The notes are cut into slices of
//! about equal size, each indexed on its own thread into an index of its own,
//! and the parts are appended in path order.

use std::sync::Arc;

use super::update::{cut, title_field};
use super::{chunker, Fingerprint, Index, Params};

/// A note to index: its text, or (loading an artifact) its chunks as cut
/// then, with the fingerprint the artifact recorded if it has one.
pub(super) enum Source {
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
pub(super) fn parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Sorts `notes` by path, keeping the last of any path given twice: the
/// stable sort keeps duplicates in input order, and each later one is swapped
/// into the place of the earlier one that `dedup_by` keeps.
fn sort_keeping_last<T>(notes: &mut Vec<(String, T)>) {
    notes.sort_by(|a, b| a.0.cmp(&b.0));
    notes.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
}

impl Index {
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

    /// Indexes `notes` as [`Index::build`] does, reusing from `previous` each
    /// note it indexed from the same text (same size and content hash) with
    /// the chunks this chunker cuts from it: an unchanged vault costs one hash
    /// per note, a few changed notes a copy of the index and their updates.
    /// The result answers every query and writes its artifact exactly as a
    /// build from the same notes would (different slots, nothing observable).
    pub fn refreshed(previous: &Arc<Index>, mut notes: Vec<(String, String)>) -> Arc<Index> {
        sort_keeping_last(&mut notes);
        let reusable = previous.reusable(&notes);
        let kept = reusable.iter().filter(|&&r| r).count();
        let changed = notes.len() - kept;
        let removed = previous.notes_indexed() - kept;
        if changed == 0 && removed == 0 {
            return Arc::clone(previous);
        }
        // Replacing a note costs about twice what indexing it does, on one
        // thread: past a quarter of the notes a build on every core is faster.
        if (changed + removed) * 4 > notes.len() {
            return Arc::new(Index::build_with(notes, previous.params));
        }
        let mut idx = Index::clone(previous);
        let gone: Vec<String> = previous
            .paths()
            .filter(|path| {
                notes
                    .binary_search_by(|(p, _)| p.as_str().cmp(path))
                    .is_err()
            })
            .map(str::to_string)
            .collect();
        for path in gone {
            idx.remove_note(&path);
        }
        for ((path, content), reuse) in notes.iter().zip(reusable) {
            if !reuse {
                idx.upsert_note(path, content);
            }
        }
        Arc::new(idx)
    }

    /// Whether this index holds exactly `notes`, each as a build from that
    /// text would: what [`Index::refreshed`] answers with the same index for.
    /// `notes` are sorted by path on the way (a later copy of a path kept).
    pub fn reusable_all(&self, notes: &mut Vec<(String, String)>) -> bool {
        sort_keeping_last(notes);
        notes.len() == self.notes_indexed() && self.reusable(notes).into_iter().all(|r| r)
    }

    /// For each of `notes` (sorted, distinct paths), whether this index holds
    /// it as a build from that text would: hashed on one thread per core.
    fn reusable(&self, notes: &[(String, String)]) -> Vec<bool> {
        let per_part = notes.len().div_ceil(parallelism()).max(1);
        std::thread::scope(|scope| {
            let parts: Vec<_> = notes
                .chunks(per_part)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|(path, content)| self.holds(path, content))
                            .collect::<Vec<bool>>()
                    })
                })
                .collect();
            parts
                .into_iter()
                .flat_map(|p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    }

    /// Whether the note at `path` was indexed from `content`, cut as this
    /// chunker cuts it.
    fn holds(&self, path: &str, content: &str) -> bool {
        let Some(note) = self
            .by_path
            .get(path)
            .and_then(|&slot| self.notes[slot as usize].as_ref())
        else {
            return false;
        };
        if Fingerprint::of(content)
            != (Fingerprint {
                bytes: note.bytes,
                hash: note.hash,
            })
        {
            return false;
        }
        if note.cut_here {
            return true;
        }
        let ranges = chunker::chunk_ranges(content, self.params.chunks);
        ranges.len() == note.chunks.len()
            && ranges.iter().zip(&note.chunks).all(|(&(s, e), &slot)| {
                self.chunks[slot as usize]
                    .as_ref()
                    .is_some_and(|chunk| *chunk.content == content[s..e])
            })
    }

    /// Indexes `notes` on `parts` threads: each indexes a slice of about
    /// equal size into an index of its own, and the parts are appended to the
    /// first in order. Slots and term ids differ from a one-thread build, but
    /// nothing observable depends on them: scores are computed per slot, ties
    /// break by path, and the artifact is written in path order.
    pub(super) fn from_sources(
        mut notes: Vec<(String, Source)>,
        params: Params,
        parts: usize,
    ) -> Index {
        // After this, no part replaces a note, and no two parts hold the same path.
        sort_keeping_last(&mut notes);
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
        self.changed();
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
                // Sorted by term again: the ids changed order.
                n.title_terms.sort_unstable();
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

    /// Indexes one note of a build, from its text or its chunks.
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
                self.insert_chunks(path, &title, chunks, fingerprint, true);
            }
            Source::Chunks(chunks, fingerprint) => {
                let content = chunks.concat();
                let fingerprint = fingerprint.unwrap_or_else(|| Fingerprint::of(&content));
                let title = title_field(path, &content);
                self.insert_chunks(path, &title, chunks, fingerprint, false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
