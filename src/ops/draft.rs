//! A [`Draft`]: writes gathering into one proposal, not yet filed. Plain
//! data under a lock, below the context that carries it; [`super::proposing`]
//! begins, admits and files drafts.

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::notes::overlay::Overlay;
use crate::proposals::{self, Change, Operation, Proposal, Requester, Status};

/// A proposed write's answer: the proposal's id and its diffs so far.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Proposed {
    /// The proposal's id (a UUID): approve or reject it with proposals.approve / proposals.reject.
    pub proposal: String,
    /// One diff per note, as the write would have committed them.
    pub changes: Vec<Change>,
}

/// Writes gathering into one proposal, not yet filed.
pub struct Draft {
    id: String,
    overlay: Arc<Overlay>,
    /// HEAD when the draft began.
    base_commit: Option<String>,
    requester: Mutex<Requester>,
    /// Each landed write: the row and the commit subject and body it would have made.
    landed: Mutex<Vec<Operation>>,
    /// Whether the pending bound was checked for this draft.
    admitted: Mutex<bool>,
}

impl Draft {
    /// An empty draft from `base_commit` for `requester`, with a fresh UUID v7 id.
    pub fn new(base_commit: Option<String>, requester: Requester) -> Arc<Draft> {
        Arc::new(Draft {
            id: uuid::Uuid::now_v7().to_string(),
            overlay: Arc::new(Overlay::new()),
            base_commit,
            requester: Mutex::new(requester),
            landed: Mutex::new(Vec::new()),
            admitted: Mutex::new(false),
        })
    }

    /// The proposal's id, once filed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The overlay its writes land in.
    pub fn overlay(&self) -> Arc<Overlay> {
        Arc::clone(&self.overlay)
    }

    /// Records a write that landed in the overlay: row `op` and the commit
    /// message it would have made (`subject`, a blank line, the body).
    pub(super) fn landed(&self, op: &'static str, message: &str) {
        let message = message.trim_end_matches('\n');
        let (subject, body) = message.split_once("\n\n").unwrap_or((message, ""));
        lock(&self.landed).push(Operation {
            name: op.to_string(),
            subject: subject.trim().to_string(),
            body: body.trim_end().to_string(),
        });
    }

    pub(super) fn landings(&self) -> usize {
        lock(&self.landed).len()
    }

    /// Keeps the first request message a write of the draft gave.
    pub(super) fn keep_message(&self, message: Option<String>) {
        if let Some(message) = message {
            lock(&self.requester).message.get_or_insert(message);
        }
    }

    /// The diffs so far, one per note, as `patch.apply` accepts them.
    pub fn changes(&self) -> Vec<Change> {
        self.overlay
            .changes()
            .into_iter()
            .map(|change| Change {
                path: change.path,
                diff: change.patch,
                content_base64: change.bytes.map(|bytes| {
                    use base64::Engine;
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                }),
            })
            .collect()
    }

    /// The answer a write gathered into this draft gets.
    pub(super) fn answer(&self) -> Value {
        json!(Proposed {
            proposal: self.id.clone(),
            changes: self.changes(),
        })
    }

    /// Runs `check` for the draft's first write only (the pending bound).
    pub(super) fn admit_once(
        &self,
        check: impl FnOnce() -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        let mut admitted = lock(&self.admitted);
        if !*admitted {
            check()?;
            *admitted = true;
        }
        Ok(())
    }

    /// The pending proposal these `changes` (of [`Draft::changes`]) make.
    pub(super) fn proposal(&self, changes: Vec<Change>) -> Proposal {
        let landed = lock(&self.landed).clone();
        let operation = match landed.as_slice() {
            [only] => only.clone(),
            _ => Operation {
                name: "changes.apply".to_string(),
                subject: match changes.len() {
                    1 => "mcp.changes_apply: 1 note".to_string(),
                    n => format!("mcp.changes_apply: {n} notes"),
                },
                body: status_lines(&changes).trim_end().to_string(),
            },
        };
        Proposal {
            id: self.id.clone(),
            status: Status::Pending,
            created_at: proposals::now(),
            base_commit: self.base_commit.clone(),
            requested_by: lock(&self.requester).clone(),
            operation,
            changes,
            commit: None,
            reason: None,
            decided_at: None,
            decided_by: None,
        }
    }
}

/// One `M|A|D <path>` line per change, as a multi-note commit's body lists its notes.
fn status_lines(changes: &[Change]) -> String {
    changes
        .iter()
        .map(|change| {
            let status = if change.diff.starts_with("--- /dev/null") {
                'A'
            } else if change.diff.contains("\n+++ /dev/null") {
                'D'
            } else {
                'M'
            };
            format!("{status} {}\n", change.path)
        })
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
