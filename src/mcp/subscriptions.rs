//! MCP resource subscriptions: which `mirai://notes/<path>` URIs a session
//! (an HTTP session from `initialize`, or the stdio connection) follows, and
//! the notifications the change stream makes of them.
//!
//! A session's [`Subscribed`] holds its URIs (at most [`PER_SESSION`]; all
//! sessions together at most `MIRAI_MCP_MAX_SUBSCRIPTIONS`, counted in
//! [`Subscriptions`]) and gives its count back when dropped (the session
//! ends). A [`Notifier`] reads the hub and turns events into
//! `notifications/resources/updated` (a subscribed note changed, from any
//! source, or was deleted) and `notifications/resources/list_changed` (notes
//! created, deleted or moved), held in a set until the transport takes them:
//! while a client is slow, notifications for one URI coalesce into one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};

use super::rpc::{code, RpcError};
use crate::events::{Events, Filter, Item, Subscription};

/// Most subscriptions one session holds.
pub const PER_SESSION: usize = 1000;

/// Every session's subscriptions, counted against one limit.
pub struct Subscriptions {
    events: Arc<Events>,
    total: Arc<AtomicUsize>,
    max_total: usize,
}

impl Subscriptions {
    pub fn new(events: Arc<Events>, max_total: usize) -> Subscriptions {
        Subscriptions {
            events,
            total: Arc::new(AtomicUsize::new(0)),
            max_total,
        }
    }

    /// A new session's (empty) subscriptions.
    pub fn session(&self) -> Arc<Subscribed> {
        Arc::new(Subscribed {
            uris: Mutex::new(BTreeMap::new()),
            total: self.total.clone(),
            max_total: self.max_total,
        })
    }

    /// A notifier for `session`, from now on.
    pub fn notifier(&self, session: Arc<Subscribed>) -> Notifier {
        Notifier {
            sub: self.events.subscribe(Filter {
                types: Some(
                    ["commit", "head_moved", "notes_changed"]
                        .map(String::from)
                        .to_vec(),
                ),
                path_prefix: None,
                ..Filter::default()
            }),
            session,
            updated: BTreeSet::new(),
            list_changed: false,
            events: self.events.clone(),
        }
    }
}

/// One session's subscriptions: note path -> the URI the client subscribed with.
pub struct Subscribed {
    uris: Mutex<BTreeMap<String, String>>,
    total: Arc<AtomicUsize>,
    max_total: usize,
}

impl Subscribed {
    fn uris(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        self.uris.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `resources/subscribe` of `uri` (a note's path, lexically valid: the note need not exist yet).
    /// A note the caller does not `sees` (its read_paths hide it) is answered as
    /// any subscription is, and never told of: as a note that never changes.
    pub fn subscribe(&self, uri: &str, sees: &dyn Fn(&str) -> bool) -> Result<Value, RpcError> {
        let path = note_path(uri)?;
        if !sees(&path) {
            return Ok(json!({}));
        }
        let mut uris = self.uris();
        if uris.contains_key(&path) {
            return Ok(json!({}));
        }
        if uris.len() >= PER_SESSION {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "this session already holds {PER_SESSION} subscriptions, the most one may; \
                     resources/unsubscribe some first"
                ),
            ));
        }
        let taken = self
            .total
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_total).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "the server holds {} subscriptions, as many as MIRAI_MCP_MAX_SUBSCRIPTIONS allows; try later",
                    self.max_total
                ),
            ));
        }
        uris.insert(path, uri.to_string());
        Ok(json!({}))
    }

    /// `resources/unsubscribe` of `uri` (one not subscribed is no error).
    pub fn unsubscribe(&self, uri: &str) -> Result<Value, RpcError> {
        let path = note_path(uri)?;
        if self.uris().remove(&path).is_some() {
            self.total.fetch_sub(1, Ordering::AcqRel);
        }
        Ok(json!({}))
    }

    /// How many URIs this session follows.
    pub fn count(&self) -> usize {
        self.uris().len()
    }
}

impl Drop for Subscribed {
    fn drop(&mut self) {
        let held = self.uris().len();
        self.total.fetch_sub(held, Ordering::AcqRel);
    }
}

/// The path a subscribable URI names.
fn note_path(uri: &str) -> Result<String, RpcError> {
    let bad = |why: String| {
        RpcError::new(
            code::INVALID_PARAMS,
            format!("cannot subscribe to {uri:?}: {why}; use mirai://notes/<path of a .md note>"),
        )
    };
    let path = super::resources::path_of(uri).ok_or_else(|| bad("not a note URI".into()))?;
    crate::ops::adapters::note_path(&path).map_err(|e| bad(e.message))
}

/// Turns the change stream into one session's notifications.
pub struct Notifier {
    sub: Subscription,
    session: Arc<Subscribed>,
    /// URIs with an update not yet sent (each once, however many changes).
    updated: BTreeSet<String>,
    list_changed: bool,
    events: Arc<Events>,
}

impl Notifier {
    /// Folds one item of the hub into what is pending.
    fn fold(&mut self, item: Item) {
        let everything = |this: &mut Notifier| {
            this.updated.extend(this.session.uris().values().cloned());
            this.list_changed = true;
        };
        let event = match item {
            Item::Event(event) => event,
            Item::Reset { .. } => {
                // Too far behind: anything may have changed; follow again from now.
                everything(self);
                self.sub = self.events.subscribe(Filter {
                    types: Some(
                        ["commit", "head_moved", "notes_changed"]
                            .map(String::from)
                            .to_vec(),
                    ),
                    path_prefix: None,
                    ..Filter::default()
                });
                return;
            }
        };
        if event.kind == "head_moved" {
            everything(self);
            return;
        }
        if event.kind == "commit" {
            let paths = event.data["paths"].as_array().cloned().unwrap_or_default();
            if paths.iter().any(|p| p["status"] != "M")
                || event.data["paths_omitted"].as_u64().unwrap_or(0) > 0
            {
                self.list_changed = true;
            }
        }
        let uris = self.session.uris();
        for path in event.paths().unwrap_or_default() {
            if let Some(uri) = uris.get(path) {
                self.updated.insert(uri.clone());
            }
        }
    }

    /// The next pending notification, if any.
    fn pending(&mut self) -> Option<Value> {
        if self.list_changed {
            self.list_changed = false;
            return Some(
                json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}),
            );
        }
        let uri = self.updated.pop_first()?;
        Some(
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}),
        )
    }

    /// Takes in whatever the hub holds now, without waiting.
    fn drain(&mut self) {
        while let Some(item) = self.sub.try_next() {
            self.fold(item);
        }
    }

    /// The next notification, waiting for one (HTTP's GET stream).
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            self.drain();
            if let Some(note) = self.pending() {
                return Some(note);
            }
            let item = self.sub.next().await?;
            self.fold(item);
        }
    }

    /// The next notification, waiting on this thread for one (stdio).
    pub fn next_blocking(&mut self) -> Option<Value> {
        loop {
            self.drain();
            if let Some(note) = self.pending() {
                return Some(note);
            }
            let item = self.sub.next_blocking()?;
            self.fold(item);
        }
    }
}

/// Where 2026-07-28 notifications name the `subscriptions/listen` request they belong to.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// One 2026-07-28 `subscriptions/listen` stream: its own subscriptions (the
/// request's `resourceSubscriptions`), ending with the stream.
pub struct Listen {
    id: Value,
    list_changed: bool,
    notifier: Notifier,
}

impl Listen {
    /// Opens a listen for request `id` with `params`: the URIs subscribed (or
    /// the request's JSON-RPC error), and the acknowledgement to send first,
    /// naming what was accepted (tools and prompts never change here, so their
    /// list notifications are not offered).
    pub fn open(
        subscriptions: &Subscriptions,
        id: Value,
        params: &Value,
        sees: &dyn Fn(&str) -> bool,
    ) -> Result<(Value, Listen), RpcError> {
        let asked = params.get("notifications").cloned().unwrap_or(json!({}));
        if !asked.is_object() {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                "params.notifications must be an object: {\"resourcesListChanged\"?: bool, \"resourceSubscriptions\"?: [uri]}",
            ));
        }
        let uris = match asked.get("resourceSubscriptions") {
            None => Vec::new(),
            Some(Value::Array(uris)) => uris
                .iter()
                .map(|u| {
                    u.as_str().map(str::to_string).ok_or_else(|| {
                        RpcError::new(
                            code::INVALID_PARAMS,
                            "resourceSubscriptions holds URIs (strings)",
                        )
                    })
                })
                .collect::<Result<Vec<String>, RpcError>>()?,
            Some(_) => {
                return Err(RpcError::new(
                    code::INVALID_PARAMS,
                    "resourceSubscriptions must be an array of mirai://notes/<path> URIs",
                ))
            }
        };
        let session = subscriptions.session();
        for uri in &uris {
            session.subscribe(uri, sees)?;
        }
        let list_changed = asked.get("resourcesListChanged") == Some(&json!(true));
        let mut accepted = json!({});
        if list_changed {
            accepted["resourcesListChanged"] = json!(true);
        }
        if !uris.is_empty() {
            accepted["resourceSubscriptions"] = json!(uris);
        }
        let ack = json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {META_SUBSCRIPTION_ID: id}, "notifications": accepted},
        });
        let notifier = subscriptions.notifier(session);
        Ok((
            ack,
            Listen {
                id,
                list_changed,
                notifier,
            },
        ))
    }

    /// The next notification of this listen, tagged with its subscription id.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let note = self.notifier.next().await?;
            if let Some(note) = self.tagged(note) {
                return Some(note);
            }
        }
    }

    /// [`Listen::next`], waiting on this thread (stdio).
    pub fn next_blocking(&mut self) -> Option<Value> {
        loop {
            let note = self.notifier.next_blocking()?;
            if let Some(note) = self.tagged(note) {
                return Some(note);
            }
        }
    }

    /// `note` with this listen's id, unless it is a kind the listen did not ask for.
    fn tagged(&self, mut note: Value) -> Option<Value> {
        if note["method"] == "notifications/resources/list_changed" && !self.list_changed {
            return None;
        }
        let params = note.as_object_mut()?.entry("params").or_insert(json!({}));
        params["_meta"] = json!({ META_SUBSCRIPTION_ID: self.id });
        Some(note)
    }
}
