//! The index and link graph as scoped callers see them, kept for reuse.
//! A caller whose `read_paths` hide notes searches an index without them
//! ([`Index::without`]) and links through a graph without them
//! ([`Vault::without`]); both are made from the whole on first need and kept
//! while the index does not change (its generation), for the few scopes
//! asked most recently. A write makes the next scoped request make them again.

use std::sync::{Arc, Mutex};

use super::Index;
use crate::notes::Hidden;
use crate::vault::Vault;

/// How many scopes are kept: each copy holds what its caller may read of
/// the index (up to a whole copy), so few. Deployments name a handful of callers.
const KEPT: usize = 4;

/// Copies made for scoped callers, for one generation of the index.
#[derive(Debug, Default)]
pub(super) struct ScopedCopies(Mutex<Vec<Kept>>);

#[derive(Debug)]
struct Kept {
    generation: u64,
    hidden: Hidden,
    index: Option<Arc<Index>>,
    vault: Option<Arc<Vault>>,
}

impl ScopedCopies {
    /// The index kept for `hidden` at `generation`.
    pub(super) fn index(&self, generation: u64, hidden: &Hidden) -> Option<Arc<Index>> {
        self.find(generation, hidden, |copy| copy.index.clone())
    }

    /// The link graph kept for `hidden` at `generation`.
    pub(super) fn vault(&self, generation: u64, hidden: &Hidden) -> Option<Arc<Vault>> {
        self.find(generation, hidden, |copy| copy.vault.clone())
    }

    pub(super) fn keep_index(&self, generation: u64, hidden: &Hidden, index: Arc<Index>) {
        self.keep(generation, hidden, |copy| copy.index = Some(index));
    }

    pub(super) fn keep_vault(&self, generation: u64, hidden: &Hidden, vault: Arc<Vault>) {
        self.keep(generation, hidden, |copy| copy.vault = Some(vault));
    }

    fn find<T>(
        &self,
        generation: u64,
        hidden: &Hidden,
        get: impl Fn(&Kept) -> Option<T>,
    ) -> Option<T> {
        let mut copies = self.lock();
        let at = copies
            .iter()
            .position(|c| c.generation == generation && c.hidden == *hidden)?;
        // Most recently used last.
        let copy = copies.remove(at);
        let found = get(&copy);
        copies.push(copy);
        found
    }

    fn keep(&self, generation: u64, hidden: &Hidden, set: impl FnOnce(&mut Kept)) {
        let mut copies = self.lock();
        // Copies of an older index are never asked for again.
        copies.retain(|c| c.generation >= generation);
        let at = match copies
            .iter()
            .position(|c| c.generation == generation && c.hidden == *hidden)
        {
            Some(at) => at,
            None => {
                if copies.len() == KEPT {
                    copies.remove(0);
                }
                copies.push(Kept {
                    generation,
                    hidden: hidden.clone(),
                    index: None,
                    vault: None,
                });
                copies.len() - 1
            }
        };
        set(&mut copies[at]);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Kept>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
