//! Coalesced syncs: at most one sync runs and one waits to run. A request
//! while one runs joins the waiting one (creating it if there is none) and
//! gets its answer, so a flood of `repo.sync` requests or push webhooks costs
//! two syncs, not one each. Syncs run on a thread of their own, started when
//! work arrives and ended when none is left, never on a caller's thread; a
//! caller waits on its [`Ticket`], by blocking ([`Ticket::wait`]; up to a
//! deadline, [`Ticket::wait_until`], for a sandbox program) or as a future
//! ([`Ticket::answer`], for the HTTP workers and MCP over HTTP). A waiting sync whose
//! callers all gave up (dropped their tickets) is taken off the queue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::error::{Error, Result};

/// The queue of one syncer; `T` is what a sync answers.
pub struct Queue<T> {
    state: Mutex<State<T>>,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            state: Mutex::new(State {
                running: false,
                pending: None,
            }),
        }
    }
}

struct State<T> {
    /// A thread is running syncs.
    running: bool,
    /// The sync that runs next, with the callers waiting for it.
    pending: Option<Arc<Batch<T>>>,
}

/// One sync and the callers who get its answer.
struct Batch<T> {
    waiters: AtomicUsize,
    answer: Mutex<Option<Result<T>>>,
    done: Condvar,
    finished: tokio::sync::watch::Sender<bool>,
}

/// A caller's place in a sync; dropping it gives the place up.
pub struct Ticket<T> {
    batch: Arc<Batch<T>>,
    queue: Arc<Queue<T>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T: Clone + Send + 'static> Queue<T> {
    /// Joins the waiting sync (or makes one) and starts the thread that runs
    /// syncs if none runs; `work` is one sync. Never waits for a sync.
    pub fn join(self: &Arc<Self>, work: impl Fn() -> Result<T> + Send + 'static) -> Ticket<T> {
        let mut state = lock(&self.state);
        let batch = state
            .pending
            .get_or_insert_with(|| {
                Arc::new(Batch {
                    waiters: AtomicUsize::new(0),
                    answer: Mutex::new(None),
                    done: Condvar::new(),
                    finished: tokio::sync::watch::channel(false).0,
                })
            })
            .clone();
        batch.waiters.fetch_add(1, Ordering::SeqCst);
        if !state.running {
            let queue = self.clone();
            let started = std::thread::Builder::new()
                .name("mirai-sync".into())
                .spawn(move || queue.run(work));
            match started {
                Ok(_) => state.running = true,
                Err(e) => {
                    state.pending = None;
                    batch.finish(Err(Error::internal(format!(
                        "cannot start a thread to sync: {e}"
                    ))));
                }
            }
        }
        Ticket {
            batch,
            queue: self.clone(),
        }
    }

    /// Runs waiting syncs until none is left.
    fn run(&self, work: impl Fn() -> Result<T>) {
        loop {
            let batch = {
                let mut state = lock(&self.state);
                match state.pending.take() {
                    Some(batch) => batch,
                    None => {
                        state.running = false;
                        return;
                    }
                }
            };
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&work))
                .unwrap_or_else(|_| Err(Error::internal("the sync failed unexpectedly")));
            batch.finish(outcome);
        }
    }
}

impl<T: Clone> Batch<T> {
    fn finish(&self, outcome: Result<T>) {
        *lock(&self.answer) = Some(outcome);
        self.done.notify_all();
        self.finished.send_replace(true);
    }

    fn answer(&self) -> Option<Result<T>> {
        lock(&self.answer).clone()
    }
}

impl<T: Clone> Ticket<T> {
    /// The sync's answer, blocking this thread until it comes.
    pub fn wait(self) -> Result<T> {
        let mut answer = lock(&self.batch.answer);
        loop {
            if let Some(outcome) = answer.as_ref() {
                return outcome.clone();
            }
            answer = self
                .batch
                .done
                .wait(answer)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The sync's answer, blocking this thread until it comes or `deadline`
    /// passes (`None`: no deadline). Past it the ticket is given up (a waiting
    /// sync no one else wants is taken off the queue) and the answer is
    /// `None`, so a caller with a deadline holds its thread no longer than that.
    pub fn wait_until(self, deadline: Option<Instant>) -> Option<Result<T>> {
        let Some(deadline) = deadline else {
            return Some(self.wait());
        };
        let mut answer = lock(&self.batch.answer);
        loop {
            if let Some(outcome) = answer.as_ref() {
                return Some(outcome.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            answer = self
                .batch
                .done
                .wait_timeout(answer, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The sync's answer, as a future that holds no thread while it waits.
    pub async fn answer(self) -> Result<T> {
        let mut finished = self.batch.finished.subscribe();
        // The sender lives in the batch this ticket holds, so it cannot close first.
        let _ = finished.wait_for(|done| *done).await;
        self.batch
            .answer()
            .unwrap_or_else(|| Err(Error::internal("the sync ended without an answer")))
    }
}

impl<T> Drop for Ticket<T> {
    fn drop(&mut self) {
        let mut state = lock(&self.queue.state);
        let left = self.batch.waiters.fetch_sub(1, Ordering::SeqCst) - 1;
        let waiting = state
            .pending
            .as_ref()
            .is_some_and(|pending| Arc::ptr_eq(pending, &self.batch));
        if left == 0 && waiting {
            state.pending = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    /// What the test syncs answer: their number.
    type Ticket = super::Ticket<usize>;
    type Queue = super::Queue<usize>;

    /// Syncs that wait until released, each answering its number.
    #[derive(Clone, Default)]
    struct Slow {
        release: Arc<AtomicBool>,
        runs: Arc<AtomicUsize>,
    }

    impl Slow {
        fn join(&self, queue: &Arc<Queue>) -> Ticket {
            let slow = self.clone();
            queue.join(move || {
                let n = slow.runs.fetch_add(1, Ordering::SeqCst) + 1;
                while !slow.release.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(n)
            })
        }

        fn runs(&self) -> usize {
            self.runs.load(Ordering::SeqCst)
        }

        fn running(&self) {
            while self.runs() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    #[test]
    fn requests_during_a_sync_share_the_one_after_it() {
        let (queue, slow) = (Arc::new(Queue::default()), Slow::default());
        let first = slow.join(&queue);
        slow.running();
        let later: Vec<Ticket> = (0..50).map(|_| slow.join(&queue)).collect();
        slow.release.store(true, Ordering::SeqCst);
        assert_eq!(first.wait().unwrap(), 1);
        for ticket in later {
            assert_eq!(ticket.wait().unwrap(), 2);
        }
        assert_eq!(slow.runs(), 2);
    }

    #[test]
    fn a_wait_with_a_deadline_gives_up_its_place_when_it_passes() {
        let (queue, slow) = (Arc::new(Queue::default()), Slow::default());
        let first = slow.join(&queue);
        slow.running();
        let late = slow.join(&queue);
        let deadline = std::time::Instant::now() + Duration::from_millis(50);
        assert!(late.wait_until(Some(deadline)).is_none());
        slow.release.store(true, Ordering::SeqCst);
        assert_eq!(first.wait_until(None).unwrap().unwrap(), 1);
        std::thread::sleep(Duration::from_millis(50));
        // The waiting sync had no one left: it never ran.
        assert_eq!(slow.runs(), 1);
    }

    #[test]
    fn a_waiting_sync_whose_callers_gave_up_never_runs() {
        let (queue, slow) = (Arc::new(Queue::default()), Slow::default());
        let first = slow.join(&queue);
        slow.running();
        let gave_up: Vec<Ticket> = (0..5).map(|_| slow.join(&queue)).collect();
        drop(gave_up);
        slow.release.store(true, Ordering::SeqCst);
        first.wait().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(slow.runs(), 1);
        // The queue still serves later callers.
        assert_eq!(slow.join(&queue).wait().unwrap(), 2);
    }
}
