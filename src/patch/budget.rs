//! The work one request's patches may take together. Each patch has its own
//! limits ([`super::apply`]'s steps, [`super::make`]'s exact diffing); a
//! request that makes or applies many patches (a revert of a commit that
//! changed fifty large notes, `changes.apply`) draws them all from one
//! [`Budget`], so the request as a whole stays bounded: applying past it is a
//! conflict that says why, and making a diff past it gives a coarser diff,
//! never a long computation.

use std::cell::Cell;

/// Steps (a line compared or moved, a line of a whole-note search) one patch may
/// take: about a quarter of a second of CPU, dozens of passes over the largest note.
pub(super) const WORK_LIMIT: u64 = 60_000_000;

/// How much exact diffing one diff may do, as the sum of the squares of the
/// sizes of the regions diffed (a pathological region costs about that): a
/// region of 20,000 changed lines, a tenth of a second at worst.
pub(super) const EXACT_WORK: u64 = 20_000 * 20_000;

/// Steps the patches of one request may take in all: what one patch may.
pub const REQUEST_STEPS: u64 = WORK_LIMIT;

/// Exact diffing the diffs made for one request may do in all: twice what one
/// diff may, about a fifth of a second at worst.
pub const REQUEST_EXACT: u64 = 2 * EXACT_WORK;

/// What is left of one request's work. Not shared between threads: a request
/// plans its patches on one.
#[derive(Debug)]
pub struct Budget {
    steps: Cell<u64>,
    exact: Cell<u64>,
}

impl Budget {
    /// A request's whole budget.
    pub fn request() -> Budget {
        Budget::with(REQUEST_STEPS, REQUEST_EXACT)
    }

    /// A budget of `steps` apply steps and `exact` units of exact diffing.
    pub fn with(steps: u64, exact: u64) -> Budget {
        Budget {
            steps: Cell::new(steps),
            exact: Cell::new(exact),
        }
    }

    /// Apply steps left.
    pub fn steps_left(&self) -> u64 {
        self.steps.get()
    }

    /// Takes `steps` apply steps; false (and nothing taken) when fewer are left.
    pub(super) fn spend_steps(&self, steps: u64) -> bool {
        match self.steps.get().checked_sub(steps) {
            Some(left) => {
                self.steps.set(left);
                true
            }
            None => {
                self.steps.set(0);
                false
            }
        }
    }

    /// Exact diffing left.
    pub(super) fn exact_left(&self) -> u64 {
        self.exact.get()
    }

    /// Takes `units` of exact diffing (the caller checked [`Budget::exact_left`]).
    pub(super) fn spend_exact(&self, units: u64) {
        self.exact.set(self.exact.get().saturating_sub(units));
    }

    /// True once applying has used every step: a refusal then names the
    /// request's limit, not the note.
    pub fn exhausted(&self) -> bool {
        self.steps.get() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_taken_until_none_are_left() {
        let budget = Budget::with(10, 5);
        assert!(budget.spend_steps(4));
        assert_eq!(budget.steps_left(), 6);
        assert!(!budget.exhausted());
        assert!(!budget.spend_steps(7));
        assert!(budget.exhausted());
        budget.spend_exact(9);
        assert_eq!(budget.exact_left(), 0);
    }
}
