//! The postings store: the term dictionary and, per term, one list per field
//! of (slot, term frequency) pairs, built to be updated in place.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

/// The term dictionary and its postings, one list per field, indexed by term id.
/// Ids are never reused: a term whose notes are all gone keeps empty lists.
#[derive(Debug, Clone, Default)]
pub(super) struct Terms {
    pub(super) ids: HashMap<Box<str>, u32, FxBuildHasher>,
    /// (chunk slot, term frequency in the chunk text).
    pub(super) body: Vec<Postings>,
    /// (note slot, term frequency in the note's title field).
    pub(super) title: Vec<Postings>,
    /// (note slot, term frequency in the whole note).
    pub(super) whole: Vec<Postings>,
}

impl Terms {
    /// The id of `term`, adding it when new.
    pub(super) fn intern(&mut self, term: &str) -> u32 {
        match self.ids.get(term) {
            Some(&id) => id,
            None => self.intern_owned(term.into()),
        }
    }

    pub(super) fn intern_owned(&mut self, term: Box<str>) -> u32 {
        // Ids follow the lists, which a subset's dictionary may be shorter than.
        let next = self.body.len() as u32;
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
pub(super) struct Postings {
    entries: Vec<(u32, u32)>,
    sorted: u32,
    tombstones: u32,
}

impl Postings {
    /// Live entries: the term's document frequency in this field.
    pub(super) fn len(&self) -> usize {
        self.entries.len() - self.tombstones as usize
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.entries.iter().copied().filter(|&(_, tf)| tf > 0)
    }

    /// A list of `entries`, which hold strictly increasing slots and
    /// frequencies above zero (the binary artifact checks both).
    pub(super) fn from_sorted(entries: Vec<(u32, u32)>) -> Postings {
        Postings {
            sorted: entries.len() as u32,
            entries,
            tombstones: 0,
        }
    }

    /// The live entries sorted by slot; a copy only when the list has
    /// tombstones or an unsorted tail.
    pub(super) fn sorted_entries(&self) -> std::borrow::Cow<'_, [(u32, u32)]> {
        if self.tombstones == 0 && self.sorted as usize == self.entries.len() {
            return std::borrow::Cow::Borrowed(&self.entries);
        }
        let mut live: Vec<(u32, u32)> = self.iter().collect();
        live.sort_unstable_by_key(|e| e.0);
        std::borrow::Cow::Owned(live)
    }

    /// The live entries whose slot `keep` marks, as a compact list.
    pub(super) fn only(&self, keep: &[bool]) -> Postings {
        let kept = |&(slot, tf): &(u32, u32)| tf > 0 && keep.get(slot as usize) == Some(&true);
        let mut entries: Vec<(u32, u32)> = self.entries.iter().copied().filter(kept).collect();
        if (self.sorted as usize) < self.entries.len() {
            entries.sort_unstable_by_key(|e| e.0);
        }
        entries.shrink_to_fit();
        Postings::from_sorted(entries)
    }

    /// The run of entries sorted by slot; a removed entry there is a
    /// tombstone, of frequency 0.
    pub(super) fn sorted_run(&self) -> &[(u32, u32)] {
        &self.entries[..self.sorted as usize]
    }

    /// The live entries after the sorted run, sorted by slot.
    pub(super) fn sorted_tail(&self) -> Vec<(u32, u32)> {
        let mut tail = self.entries[self.sorted as usize..].to_vec();
        tail.sort_unstable_by_key(|e| e.0);
        tail
    }

    /// The term frequency at `slot`, 0 when the slot is not in the list: a
    /// binary search of the sorted run, then a look at the short tail.
    pub(super) fn get(&self, slot: u32) -> u32 {
        let sorted = self.sorted as usize;
        match self.entries[..sorted].binary_search_by_key(&slot, |e| e.0) {
            Ok(pos) => self.entries[pos].1,
            Err(_) => self.entries[sorted..]
                .iter()
                .find(|e| e.0 == slot)
                .map_or(0, |e| e.1),
        }
    }

    /// Adds `slot`, which must not be live in the list.
    pub(super) fn insert(&mut self, slot: u32, tf: u32) {
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
    pub(super) fn remove(&mut self, slot: u32) {
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

    /// Changes `slot`'s frequency from `old` to `new` (0: not in the list).
    pub(super) fn change(&mut self, slot: u32, old: u32, new: u32) {
        if old > 0 {
            self.remove(slot);
        }
        if new > 0 {
            self.insert(slot, new);
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
    pub(super) fn append_shifted(&mut self, other: &Postings, base: u32) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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
                for probe in [0, 1, 7, 150, 299, step, step + 1] {
                    assert_eq!(postings.get(probe), plain.get(&probe).copied().unwrap_or(0));
                }
                assert_eq!(postings.len(), plain.len());
            }
        }
        postings.remove(1_000_000);
        assert_eq!(postings.len(), plain.len());
    }
}
