//! The change stream's hub: every source of change (mirai's commits, the
//! watcher, sync, proposals, agent runs, the index) publishes here, and every
//! stream (`GET /events`, MCP subscriptions) reads from here.
//!
//! Each event gets an id unique across restarts: a per-start prefix and a
//! counter that only grows (`<prefix>-<n>`). The last events are kept in a
//! ring (the backlog) for `Last-Event-ID` resumes; an id from an earlier
//! start, older than the backlog or never issued gets a `reset` first. Each
//! subscriber has a bounded queue of its own: publishing never waits, and a
//! subscriber whose queue is full is dropped and told `reset`. Knows nothing
//! of git, HTTP or MCP.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::callers::Prefixes;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// The least a subscriber's queue holds.
pub const MIN_QUEUE: usize = 1000;

/// One event as published.
#[derive(Debug)]
pub struct Event {
    /// `<prefix>-<n>`.
    pub id: String,
    seq: u64,
    /// The SSE event name: `commit`, `head_moved`, `notes_changed`, ...
    pub kind: &'static str,
    pub data: Value,
    /// `data` as one JSON line, written once for every subscriber.
    pub data_line: String,
    /// The note paths it touches, for `path_prefix` (`None`: it carries none).
    paths: Option<Vec<String>>,
    /// Set for an event of one caller's own doing (an agent run): the caller
    /// that started it (`Some(None)`: the operator). Sent only to subscribers
    /// that see everyone's runs, and to that caller.
    started_by: Option<Option<String>>,
}

impl Event {
    /// `{"id","type","data"}`, as `mirai watch` prints it.
    pub fn line(&self) -> Value {
        json!({"id": self.id, "type": self.kind, "data": self.data})
    }

    /// The note paths the event touches (`None`: none, such as `index` and `sync`).
    pub fn paths(&self) -> Option<&[String]> {
        self.paths.as_deref()
    }
}

/// What a subscriber receives.
#[derive(Debug, Clone)]
pub enum Item {
    Event(Arc<Event>),
    /// Events were lost to this subscriber (a resume past the backlog, an id
    /// from an earlier start, an overflowing queue): re-read what you show.
    /// `id` is the newest event's id, to resume from after re-reading.
    Reset {
        id: String,
        reason: String,
    },
}

impl Item {
    /// The SSE `id:`, `event:` and `data:` (one JSON line) of this item.
    pub fn parts(&self) -> (&str, &str, std::borrow::Cow<'_, str>) {
        match self {
            Item::Event(event) => (&event.id, event.kind, event.data_line.as_str().into()),
            Item::Reset { id, reason } => {
                (id, "reset", json!({ "reason": reason }).to_string().into())
            }
        }
    }
}

/// Which events a subscriber wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only these types (`None`: all).
    pub types: Option<Vec<String>>,
    /// Only events touching a path starting with this, and those carrying no paths.
    pub path_prefix: Option<String>,
    /// A caller's `read_paths`: an event touching any note outside them is
    /// never sent (its data names the note, a commit's subject its words).
    pub sees: Prefixes,
    /// Set for a caller that sees only its own runs (its name): another's
    /// run is never told of.
    pub own_runs_only: Option<String>,
}

impl Filter {
    fn keeps(&self, event: &Event) -> bool {
        if let Some(types) = &self.types {
            if !types.iter().any(|t| t == event.kind) {
                return false;
            }
        }
        if let Some(paths) = &event.paths {
            if !paths.iter().all(|p| self.sees.holds(p)) {
                return false;
            }
        }
        if let (Some(me), Some(starter)) = (&self.own_runs_only, &event.started_by) {
            if starter.as_deref() != Some(me.as_str()) {
                return false;
            }
        }
        match (&self.path_prefix, &event.paths) {
            (Some(prefix), Some(paths)) => paths.iter().any(|p| p.starts_with(prefix.as_str())),
            _ => true,
        }
    }
}

/// The change stream's limits (`MIRAI_EVENTS_BACKLOG`, `MIRAI_EVENTS_MAX_CLIENTS`,
/// `MIRAI_MCP_MAX_SUBSCRIPTIONS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimits {
    /// Events kept for `Last-Event-ID` resumes (default 1,000).
    pub backlog: usize,
    /// Most `GET /events` streams at once (default 64).
    pub max_clients: usize,
    /// Most MCP resource subscriptions across all sessions (default 20,000).
    pub mcp_max_subscriptions: usize,
}

/// The most events `MIRAI_EVENTS_BACKLOG` may keep.
pub const MAX_EVENTS_BACKLOG: u64 = 100_000;

impl Default for EventLimits {
    fn default() -> EventLimits {
        EventLimits {
            backlog: 1000,
            max_clients: 64,
            mcp_max_subscriptions: 20_000,
        }
    }
}

/// Why a subscription was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct TooManyClients(pub usize);

/// The hub.
pub struct Events {
    prefix: String,
    backlog_cap: usize,
    queue_cap: usize,
    max_clients: usize,
    /// Counted streams open now (each holds a [`Slot`]).
    open: Arc<AtomicUsize>,
    inner: Mutex<Inner>,
}

/// One counted stream's place under `MIRAI_EVENTS_MAX_CLIENTS`, given back
/// when dropped: held by whatever serves the stream for as long as its
/// connection lives, whether or not the hub still feeds it (a stream dropped
/// for falling behind keeps its place until its socket is gone).
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Inner {
    /// The counter of the next event.
    next: u64,
    backlog: VecDeque<Arc<Event>>,
    subscribers: Vec<Subscriber>,
}

struct Subscriber {
    filter: Filter,
    tx: mpsc::Sender<Arc<Event>>,
    /// The counter of the event that did not fit (0: none yet).
    overflowed: Arc<AtomicU64>,
}

impl Events {
    /// A hub keeping `backlog` events and allowing `max_clients` counted streams.
    pub fn new(backlog: usize, max_clients: usize) -> Events {
        let backlog_cap = backlog.max(1);
        let prefix = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        Events {
            prefix,
            backlog_cap,
            queue_cap: MIN_QUEUE.max(backlog_cap),
            max_clients,
            open: Arc::new(AtomicUsize::new(0)),
            inner: Mutex::new(Inner {
                next: 1,
                backlog: VecDeque::with_capacity(backlog_cap.min(4096)),
                subscribers: Vec::new(),
            }),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hub's state, without the subscribers whose streams are gone.
    fn pruned(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.inner();
        inner.subscribers.retain(|sub| !sub.tx.is_closed());
        inner
    }

    /// The id of the newest event (`<prefix>-0` before the first).
    pub fn last_id(&self) -> String {
        format!("{}-{}", self.prefix, self.inner().next - 1)
    }

    /// Publishes one event to the backlog and every subscriber that wants it;
    /// never waits: a subscriber whose queue is full is dropped (it gets `reset`).
    pub fn publish(&self, kind: &'static str, data: Value, paths: Option<Vec<String>>) {
        self.publish_event(kind, data, paths, None);
    }

    /// Publishes an event of one caller's own doing (`starter`: `None` for
    /// the operator), told only to those who see that caller's runs.
    pub fn publish_started_by(&self, kind: &'static str, data: Value, starter: Option<String>) {
        self.publish_event(kind, data, None, Some(starter));
    }

    fn publish_event(
        &self,
        kind: &'static str,
        data: Value,
        paths: Option<Vec<String>>,
        started_by: Option<Option<String>>,
    ) {
        let mut inner = self.inner();
        let seq = inner.next;
        inner.next += 1;
        let event = Arc::new(Event {
            id: format!("{}-{seq}", self.prefix),
            seq,
            kind,
            data_line: data.to_string(),
            data,
            paths,
            started_by,
        });
        if inner.backlog.len() == self.backlog_cap {
            inner.backlog.pop_front();
        }
        inner.backlog.push_back(event.clone());
        inner.subscribers.retain(|sub| {
            if !sub.filter.keeps(&event) {
                return !sub.tx.is_closed();
            }
            match sub.tx.try_send(event.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    sub.overflowed.store(seq, Ordering::Release);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    /// A place for one more counted stream (`GET /events`, MCP's streams
    /// over HTTP), or the limit when every place is taken.
    pub fn slot(&self) -> Result<Slot, TooManyClients> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_clients).then_some(n + 1)
            })
            .map(|_| Slot(self.open.clone()))
            .map_err(|_| TooManyClients(self.max_clients))
    }

    /// A stream counted against the client limit (`GET /events`), starting
    /// after `last_id` when given (from the backlog, or with a `reset`); its
    /// place is held until the subscription is dropped.
    pub fn stream(
        &self,
        filter: Filter,
        last_id: Option<&str>,
    ) -> Result<Subscription, TooManyClients> {
        let slot = self.slot()?;
        let mut inner = self.pruned();
        let mut sub = self.subscriber(&mut inner, filter, last_id);
        sub.slot = Some(slot);
        Ok(sub)
    }

    /// A subscription not counted against the client limit (what serves it
    /// takes a [`Slot`] where it must), from now on.
    pub fn subscribe(&self, filter: Filter) -> Subscription {
        let mut inner = self.pruned();
        self.subscriber(&mut inner, filter, None)
    }

    /// A new subscriber, with the backlog after `last_id` (or a reset) first.
    fn subscriber(&self, inner: &mut Inner, filter: Filter, last_id: Option<&str>) -> Subscription {
        let newest = format!("{}-{}", self.prefix, inner.next - 1);
        let mut pending = VecDeque::new();
        if let Some(last) = last_id {
            match self.resume_point(inner, last) {
                Ok(after) => pending.extend(
                    inner
                        .backlog
                        .iter()
                        .filter(|e| e.seq > after && filter.keeps(e))
                        .map(|e| Item::Event(e.clone())),
                ),
                Err(reason) => pending.push_back(Item::Reset { id: newest, reason }),
            }
        }
        let (tx, rx) = mpsc::channel(self.queue_cap);
        let overflowed = Arc::new(AtomicU64::new(0));
        inner.subscribers.push(Subscriber {
            filter,
            tx,
            overflowed: overflowed.clone(),
        });
        Subscription {
            pending,
            rx,
            overflowed,
            ended: false,
            prefix: self.prefix.clone(),
            slot: None,
        }
    }

    /// The counter after which a resume from `last` starts, or why it cannot.
    fn resume_point(&self, inner: &Inner, last: &str) -> Result<u64, String> {
        let Some((prefix, n)) = last.trim().rsplit_once('-') else {
            return Err(format!(
                "Last-Event-ID {last:?} is not an id this server issued; re-read what you show"
            ));
        };
        if prefix != self.prefix {
            return Err("Last-Event-ID is from an earlier start of the server; events since are not kept: re-read what you show".to_string());
        }
        let n: u64 = n.parse().map_err(|_| {
            format!("Last-Event-ID {last:?} is not an id this server issued; re-read what you show")
        })?;
        if n >= inner.next {
            return Err(format!(
                "Last-Event-ID {last:?} was never issued; re-read what you show"
            ));
        }
        let oldest = inner.backlog.front().map_or(inner.next, |e| e.seq);
        if n + 1 < oldest {
            return Err(format!(
                "Last-Event-ID {last:?} is older than the {} events kept (MIRAI_EVENTS_BACKLOG); re-read what you show",
                self.backlog_cap
            ));
        }
        Ok(n)
    }
}

/// One subscriber's end: the backlog's events (or a reset) first, then what is published.
pub struct Subscription {
    pending: VecDeque<Item>,
    rx: mpsc::Receiver<Arc<Event>>,
    overflowed: Arc<AtomicU64>,
    ended: bool,
    prefix: String,
    /// A counted stream's place, given back with the subscription.
    slot: Option<Slot>,
}

impl Subscription {
    /// The overflow's reset, once, when this subscriber fell too far behind.
    /// Its id is the one before the event that did not fit, so a client that
    /// re-reads and resumes from it misses nothing still in the backlog.
    fn overflow(&mut self) -> Option<Item> {
        let at = self.overflowed.load(Ordering::Acquire);
        if self.ended || at == 0 {
            return None;
        }
        self.ended = true;
        self.rx.close();
        Some(Item::Reset {
            id: format!("{}-{}", self.prefix, at - 1),
            reason: format!(
                "this stream fell more than {} events behind and was closed; re-read what you show and reconnect",
                self.rx.max_capacity()
            ),
        })
    }

    /// What comes before the queue: a backlog item, the overflow's reset, or
    /// the end (`Some(None)`). `None`: the answer is in the queue.
    fn before_queue(&mut self) -> Option<Option<Item>> {
        if let Some(item) = self.pending.pop_front() {
            return Some(Some(item));
        }
        if let Some(reset) = self.overflow() {
            return Some(Some(reset));
        }
        self.ended.then_some(None)
    }

    /// The item for what the queue gave (`None`: the hub is gone).
    fn received(&mut self, event: Option<Arc<Event>>) -> Option<Item> {
        match event {
            Some(event) if self.overflowed.load(Ordering::Acquire) == 0 => Some(Item::Event(event)),
            Some(_) => self.overflow(),
            None => self.overflow().or_else(|| {
                self.ended = true;
                None
            }),
        }
    }

    /// The next item, waiting for one; `None` once the subscription ended
    /// (after an overflow's reset, or when the hub is gone).
    pub async fn next(&mut self) -> Option<Item> {
        if let Some(answer) = self.before_queue() {
            return answer;
        }
        let event = self.rx.recv().await;
        self.received(event)
    }

    /// [`Subscription::next`], waiting on this thread (never inside an async runtime).
    pub fn next_blocking(&mut self) -> Option<Item> {
        if let Some(answer) = self.before_queue() {
            return answer;
        }
        let event = self.rx.blocking_recv();
        self.received(event)
    }

    /// The next item if one is there now, without waiting.
    pub fn try_next(&mut self) -> Option<Item> {
        if let Some(answer) = self.before_queue() {
            return answer;
        }
        match self.rx.try_recv() {
            Ok(event) => self.received(Some(event)),
            Err(_) => self.overflow(),
        }
    }

    /// Whether the subscription has ended (no more items will come).
    pub fn ended(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(sub: &mut Subscription) -> Vec<Item> {
        std::iter::from_fn(|| sub.try_next()).collect()
    }

    fn ids(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .map(|item| match item {
                Item::Event(e) => e.id.clone(),
                Item::Reset { .. } => "reset".to_string(),
            })
            .collect()
    }

    #[test]
    fn ids_carry_the_start_prefix_and_a_growing_counter() {
        let (a, b) = (Events::new(10, 4), Events::new(10, 4));
        assert_ne!(a.prefix, b.prefix, "a new start, a new prefix");
        let mut sub = a.subscribe(Filter::default());
        a.publish("index", json!({}), None);
        a.publish("sync", json!({}), None);
        let got = ids(&drain(&mut sub));
        assert_eq!(
            got,
            vec![format!("{}-1", a.prefix), format!("{}-2", a.prefix)]
        );
        assert_eq!(a.last_id(), format!("{}-2", a.prefix));
    }

    #[test]
    fn a_resume_inside_the_backlog_replays_what_came_after() {
        let hub = Events::new(5, 4);
        for _ in 0..8 {
            hub.publish("index", json!({}), None);
        }
        let mut sub = hub
            .stream(Filter::default(), Some(&format!("{}-6", hub.prefix)))
            .unwrap();
        assert_eq!(
            ids(&drain(&mut sub)),
            vec![format!("{}-7", hub.prefix), format!("{}-8", hub.prefix)]
        );
        // The oldest kept is 4: resuming after 3 loses nothing.
        let mut edge = hub
            .stream(Filter::default(), Some(&format!("{}-3", hub.prefix)))
            .unwrap();
        assert_eq!(drain(&mut edge).len(), 5);
    }

    #[test]
    fn a_resume_past_the_backlog_or_from_another_start_is_a_reset() {
        let hub = Events::new(5, 8);
        for _ in 0..8 {
            hub.publish("index", json!({}), None);
        }
        for last in [
            format!("{}-2", hub.prefix),
            "0123456789ab-3".to_string(),
            format!("{}-99", hub.prefix),
            "junk".to_string(),
        ] {
            let mut sub = hub.stream(Filter::default(), Some(&last)).unwrap();
            let items = drain(&mut sub);
            assert_eq!(ids(&items), vec!["reset"], "{last}");
            let Item::Reset { id, .. } = &items[0] else {
                unreachable!()
            };
            assert_eq!(id, &hub.last_id(), "the reset names where to resume from");
            hub.publish("sync", json!({}), None);
            assert_eq!(drain(&mut sub).len(), 1, "the stream goes on after a reset");
        }
    }

    #[test]
    fn a_callers_read_paths_keep_back_every_event_touching_a_hidden_note() {
        let hub = Events::new(10, 4);
        let mut sub = hub.subscribe(Filter {
            sees: Prefixes::of(vec!["public/".into()]),
            ..Filter::default()
        });
        hub.publish("commit", json!(1), Some(vec!["secret/a.md".into()]));
        hub.publish(
            "commit",
            json!(2),
            Some(vec!["public/b.md".into(), "secret/a.md".into()]),
        );
        hub.publish("commit", json!(3), Some(vec!["public/b.md".into()]));
        hub.publish("index", json!(4), None);
        let got: Vec<Value> = std::iter::from_fn(|| sub.try_next())
            .map(|item| match item {
                Item::Event(event) => event.data.clone(),
                Item::Reset { .. } => Value::Null,
            })
            .collect();
        assert_eq!(got, vec![json!(3), json!(4)]);
    }

    #[test]
    fn a_caller_that_sees_only_its_own_runs_is_told_of_no_other() {
        let hub = Events::new(10, 4);
        let mut sub = hub.subscribe(Filter {
            own_runs_only: Some("ann".into()),
            ..Filter::default()
        });
        let mut all = hub.subscribe(Filter::default());
        hub.publish_started_by("run", json!(1), Some("bob".into()));
        hub.publish_started_by("run", json!(2), None);
        hub.publish_started_by("run", json!(3), Some("ann".into()));
        hub.publish("index", json!(4), None);
        let data = |sub: &mut Subscription| -> Vec<Value> {
            std::iter::from_fn(|| sub.try_next())
                .map(|item| match item {
                    Item::Event(event) => event.data.clone(),
                    Item::Reset { .. } => Value::Null,
                })
                .collect()
        };
        assert_eq!(data(&mut sub), vec![json!(3), json!(4)]);
        assert_eq!(data(&mut all).len(), 4);
    }

    #[test]
    fn filters_keep_types_and_paths_under_a_prefix() {
        let hub = Events::new(10, 4);
        let mut sub = hub.subscribe(Filter {
            types: Some(vec!["commit".into(), "index".into()]),
            path_prefix: Some("work/".into()),
            ..Filter::default()
        });
        hub.publish("commit", json!(1), Some(vec!["home/a.md".into()]));
        hub.publish(
            "commit",
            json!(2),
            Some(vec!["home/b.md".into(), "work/c.md".into()]),
        );
        hub.publish("notes_changed", json!(3), Some(vec!["work/d.md".into()]));
        hub.publish("index", json!(4), None);
        let data: Vec<Value> = drain(&mut sub)
            .into_iter()
            .map(|item| serde_json::from_str(&item.parts().2).unwrap())
            .collect();
        assert_eq!(data, vec![json!(2), json!(4)]);
    }

    #[test]
    fn an_overflowing_subscriber_gets_reset_and_is_dropped_without_stopping_the_writer() {
        let hub = Events::new(10, 4);
        let mut slow = hub.subscribe(Filter::default());
        let mut quick = hub.subscribe(Filter::default());
        for i in 0..MIN_QUEUE {
            hub.publish("index", json!(i), None);
            drain(&mut quick);
        }
        assert!(!slow.ended());
        hub.publish("index", json!("one too many"), None);
        assert_eq!(hub.inner().subscribers.len(), 1, "the slow one is dropped");
        let items = drain(&mut slow);
        assert_eq!(
            ids(&items),
            vec!["reset"],
            "reset at once, the queue skipped"
        );
        let Item::Reset { id, .. } = &items[0] else {
            unreachable!()
        };
        assert_eq!(
            id,
            &format!("{}-{MIN_QUEUE}", hub.prefix),
            "resume after the last it had"
        );
        assert!(slow.ended());
        assert_eq!(drain(&mut quick).len(), 1, "the others go on");
    }

    #[test]
    fn streams_past_the_limit_are_refused_until_one_ends() {
        let hub = Events::new(10, 2);
        let first = hub.stream(Filter::default(), None).unwrap();
        let _second = hub.stream(Filter::default(), None).unwrap();
        let _mcp = hub.subscribe(Filter::default());
        assert_eq!(
            hub.stream(Filter::default(), None).err(),
            Some(TooManyClients(2))
        );
        drop(first);
        let slot = hub.slot().unwrap();
        assert_eq!(hub.slot().err(), Some(TooManyClients(2)));
        drop(slot);
        assert!(hub.stream(Filter::default(), None).is_ok());
    }

    /// A stream dropped for falling behind keeps its place until whatever
    /// serves it lets the subscription go.
    #[test]
    fn an_overflowed_stream_is_counted_until_it_is_dropped() {
        let hub = Events::new(10, 1);
        let slow = hub.stream(Filter::default(), None).unwrap();
        for i in 0..=MIN_QUEUE {
            hub.publish("index", json!(i), None);
        }
        assert!(
            hub.inner().subscribers.is_empty(),
            "the hub feeds it no more"
        );
        assert_eq!(
            hub.stream(Filter::default(), None).err(),
            Some(TooManyClients(1))
        );
        drop(slow);
        assert!(hub.stream(Filter::default(), None).is_ok());
    }
}
