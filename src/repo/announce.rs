//! The branch's moves, told to the change stream: `commit` for every commit
//! that reaches the branch (once, in order, parents first) and `head_moved`
//! when it moves other than forward.
//!
//! One [`Announcer`] per server remembers the tip it last told. mirai's own
//! moves of the branch (a write's commit, a pull, a replay) all pass through
//! `Repo::move_reference`, which holds the announcer ([`Announcer::hold`])
//! across the reference update and then says what landed, with its source;
//! anything else that moved HEAD (a person's commit, amend, reset, another
//! process) is found by [`Announcer::look`], which the watcher calls when
//! the ref files change and on its fallback walk, and is told as `outside`.
//! Holding the same lock on both sides means no move is told twice or
//! under the wrong source.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use git2::Oid;
use serde_json::{json, Value};

use super::history::{History, Reader, Summary};
use super::{Announce, Landing, Source};
use crate::events::Events;

/// Most paths one `commit` event lists (`paths_omitted` counts the rest).
pub const MAX_EVENT_PATHS: usize = 1000;
/// Most commits told for one move of the branch (the newest are told; a
/// larger jump is logged, and clients resuming past it get a `reset` anyway).
const MAX_COMMITS_TOLD: usize = 10_000;

/// Tells the change stream how the branch moved.
pub struct Announcer {
    events: Arc<Events>,
    root: PathBuf,
    state: Mutex<State>,
}

struct State {
    reader: Option<Reader>,
    /// The tip last told (`None`: no commit yet).
    tip: Option<Oid>,
}

impl Announcer {
    /// Starts from the tip the repository at `root` has now (nothing before it is told).
    pub fn new(events: Arc<Events>, root: PathBuf) -> Announcer {
        let reader = History::new(&root).reader().ok().flatten();
        let tip = reader
            .as_ref()
            .and_then(|reader| reader.head_id().ok().flatten());
        Announcer {
            events,
            root,
            state: Mutex::new(State { reader, tip }),
        }
    }

    fn hold_state(&self) -> Holding<'_> {
        Holding {
            announcer: self,
            state: self.state.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Tells what moved HEAD since the last look or move, as `outside`.
    pub fn look(&self) {
        let mut held = self.hold_state();
        let Some(now) = held.reader().and_then(|r| r.head_id().ok()) else {
            return;
        };
        if let Some(now) = now {
            let from = held.state.tip;
            held.tell(from, now, Source::Outside, &HashMap::new());
        }
    }
}

/// The announcer held while mirai moves the branch.
pub struct Holding<'a> {
    announcer: &'a Announcer,
    state: MutexGuard<'a, State>,
}

impl Holding<'_> {
    fn reader(&mut self) -> Option<&Reader> {
        if self.state.reader.is_none() {
            self.state.reader = History::new(&self.announcer.root).reader().ok().flatten();
        }
        self.state.reader.as_ref()
    }

    /// The branch moved from `from` to `to` by `source`; `replaces` maps a
    /// replayed commit's new id to the id it had before. A move nobody told
    /// before `from` (a person's commit under mirai's) is told first, as `outside`.
    pub fn landed(
        mut self,
        from: Option<Oid>,
        to: Oid,
        source: Source,
        replaces: &HashMap<Oid, Oid>,
    ) {
        if self.state.tip != from {
            if let Some(from) = from {
                let told = self.state.tip;
                self.tell(told, from, Source::Outside, &HashMap::new());
            }
        }
        self.tell(from, to, source, replaces);
    }

    /// Publishes the move from `from` to `to` and remembers `to`.
    fn tell(&mut self, from: Option<Oid>, to: Oid, source: Source, replaces: &HashMap<Oid, Oid>) {
        if from == Some(to) {
            return;
        }
        self.state.tip = Some(to);
        let events = self.announcer.events.clone();
        let Some(reader) = self.reader() else { return };
        // The common move (a write's commit, a fast-forward of one commit):
        // `to` is `from`'s child, the one new commit, with no walk of history.
        if let Some(from) = from {
            if reader.only_parent(to) == Some(from) {
                match reader.summary(to) {
                    Ok(summary) => {
                        let (data, paths) = commit_event(&summary, source, replaces.get(&to));
                        events.publish("commit", data, Some(paths));
                    }
                    Err(e) => log::warn!("change stream: cannot read commit {to}: {e}"),
                }
                return;
            }
            if !reader.descends(from, to) {
                events.publish(
                    "head_moved",
                    json!({"from": from.to_string(), "to": to.to_string(), "source": source.as_str()}),
                    None,
                );
            }
        }
        let (commits, more) = match reader.commits_between(from, to, MAX_COMMITS_TOLD) {
            Ok(found) => found,
            Err(e) => {
                log::warn!("change stream: cannot list the commits that reached the branch: {e}");
                return;
            }
        };
        if more > 0 {
            log::warn!(
                "change stream: {more} older commits of a move of {} were not told one by one",
                commits.len() + more
            );
        }
        for id in commits {
            match reader.summary(id) {
                Ok(summary) => {
                    let (data, paths) = commit_event(&summary, source, replaces.get(&id));
                    events.publish("commit", data, Some(paths));
                }
                Err(e) => log::warn!("change stream: cannot read commit {id}: {e}"),
            }
        }
    }
}

impl Announce for Announcer {
    fn hold(&self) -> Box<dyn Landing + '_> {
        Box::new(self.hold_state())
    }
}

impl Landing for Holding<'_> {
    /// A move nobody told before `from` (a person's commit under mirai's) is
    /// told first, as `outside`.
    fn landed(
        self: Box<Self>,
        from: Option<Oid>,
        to: Oid,
        source: Source,
        replaces: &HashMap<Oid, Oid>,
    ) {
        Holding::landed(*self, from, to, source, replaces);
    }
}

/// A `commit` event's data and the paths it touches.
fn commit_event(summary: &Summary, source: Source, replaces: Option<&Oid>) -> (Value, Vec<String>) {
    let total = summary.changes.len();
    let listed: Vec<Value> = summary
        .changes
        .iter()
        .take(MAX_EVENT_PATHS)
        .map(|c| match &c.from {
            Some(from) => json!({"path": c.path, "status": c.status.letter(), "from": from}),
            None => json!({"path": c.path, "status": c.status.letter()}),
        })
        .collect();
    let mut touched = Vec::with_capacity(total.min(MAX_EVENT_PATHS) + 1);
    for change in &summary.changes {
        touched.push(change.path.clone());
        touched.extend(change.from.clone());
    }
    let mut data = json!({
        "commit": summary.id.to_string(),
        "parents": summary.parents.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        "author": summary.author,
        "subject": summary.subject,
        "run_id": summary.run_id,
        "caller": summary.caller,
        "paths": listed,
        "paths_omitted": total.saturating_sub(MAX_EVENT_PATHS),
        "source": source.as_str(),
    });
    if let Some(old) = replaces {
        data["replaces"] = json!(old.to_string());
    }
    (data, touched)
}
