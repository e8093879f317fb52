//! Review mode's choke point: a write of notes runs against a [`Draft`]
//! instead of the disk, and the draft becomes a proposal.
//!
//! [`super::dispatch`] sends every row of class write whose `REVIEWED` is set
//! here when the policy is `review` (so a new write row is proposed without
//! code of its own). The row runs as it always does (parse, guards, plan: a
//! refused write is refused, not proposed) against a context whose view has
//! the draft's overlay on top, the same path a dry run takes, so the diffs are
//! exactly the ones the write would have committed; `land_all` records the
//! commit message it would have made in the draft. One write call drafts and
//! files its own proposal; an eval or an agent run makes one draft that every
//! write of it gathers into ([`Draft::begin`], [`Draft::file`]), so later calls
//! see what earlier ones proposed. A dry run files nothing.

use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{Class, Context, OpEntry};
use crate::config::PolicyMode;
use crate::error::{Error, ErrorCode, Result};
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
    /// A draft for the writes made through `ctx` (its adapter and run), with a
    /// fresh UUID v7 id.
    pub fn begin(ctx: &Context) -> Result<Arc<Draft>> {
        let base_commit = ctx
            .history
            .head_commit()
            .map_err(|e| ctx.history.scrub(e))?;
        Ok(Arc::new(Draft {
            id: uuid::Uuid::now_v7().to_string(),
            overlay: Arc::new(Overlay::new()),
            base_commit,
            requester: Mutex::new(Requester {
                adapter: ctx.adapter().to_string(),
                run_id: ctx.run_id().map(str::to_string),
                message: None,
            }),
            landed: Mutex::new(Vec::new()),
            admitted: Mutex::new(false),
        }))
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

    fn landings(&self) -> usize {
        lock(&self.landed).len()
    }

    /// The diffs so far, one per note, as `patch.apply` accepts them.
    pub fn changes(&self) -> Vec<Change> {
        self.overlay
            .changes()
            .into_iter()
            .map(|change| Change {
                path: change.path,
                diff: change.patch,
            })
            .collect()
    }

    /// The answer a write gathered into this draft gets.
    fn answer(&self) -> Value {
        json!(Proposed {
            proposal: self.id.clone(),
            changes: self.changes(),
        })
    }

    /// Refuses the first write of a draft when the pending proposals are at
    /// the bound (429 `too_many_proposals`).
    fn admit(&self, ctx: &Context) -> Result<()> {
        let mut admitted = lock(&self.admitted);
        if *admitted {
            return Ok(());
        }
        let pending = ctx.proposals.pending()?;
        if pending >= ctx.max_pending {
            return Err(Error::new(
                ErrorCode::TooManyProposals,
                format!(
                    "{pending} proposals are pending, as many as MIRAI_PROPOSALS_MAX_PENDING allows; \
                     nothing was proposed: a reviewer must approve or reject some first \
                     (proposals.list shows them)"
                ),
            ));
        }
        *admitted = true;
        Ok(())
    }

    /// Files the draft as a pending proposal, unless its writes changed nothing
    /// in the end (`None`). Bounded as `changes.apply` is: at most
    /// `MIRAI_CHANGES_MAX_PATCHES` notes and the body limit's bytes of diffs.
    pub fn file(&self, ctx: &Context) -> Result<Option<Proposed>> {
        let changes = self.changes();
        if changes.is_empty() {
            return Ok(None);
        }
        if changes.len() > ctx.max_changes {
            return Err(Error::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "these writes change {} notes; one proposal holds at most {} \
                     (MIRAI_CHANGES_MAX_PATCHES): nothing was proposed, change fewer notes at once",
                    changes.len(),
                    ctx.max_changes
                ),
            ));
        }
        let bytes: usize = changes.iter().map(|c| c.diff.len()).sum();
        if bytes > ctx.max_content_bytes {
            return Err(Error::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "these writes' diffs are {bytes} bytes; one proposal holds at most {} \
                     (MIRAI_MAX_BODY_BYTES): nothing was proposed, change less at once",
                    ctx.max_content_bytes
                ),
            ));
        }
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
        let proposal = Proposal {
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
        };
        ctx.proposals.save(&proposal)?;
        Ok(Some(Proposed {
            proposal: proposal.id,
            changes: proposal.changes,
        }))
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

/// Whether `op` run through `ctx` is proposed rather than committed: review
/// mode, a write of notes, and not a dry run (whose writes stay in its own overlay).
pub(super) fn is_proposed(ctx: &Context, op: &OpEntry) -> bool {
    ctx.policy == PolicyMode::Review
        && op.class == Class::Write
        && op.reviewed
        && (ctx.draft().is_some() || !ctx.view.is_dry_run())
}

/// Runs row `op` with `request` against a draft: the context's own (an eval's
/// or a run's, answering the proposal so far) or one of its own, filed when
/// the row is done. A write that changes nothing answers as it always does.
pub(super) fn propose(
    ctx: &Context,
    op: &OpEntry,
    request: Value,
    run: impl FnOnce(&Context, Value) -> Result<Value>,
) -> Result<Value> {
    let message = request
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(draft) = ctx.draft() {
        draft.admit(ctx)?;
        let before = draft.landings();
        let answer = run(&ctx.drafting(draft, op.name), request)?;
        if draft.landings() == before {
            return Ok(answer);
        }
        if let Some(message) = message {
            lock(&draft.requester).message.get_or_insert(message);
        }
        return Ok(draft.answer());
    }
    let draft = Draft::begin(ctx)?;
    draft.admit(ctx)?;
    lock(&draft.requester).message = message;
    let answer = run(&ctx.drafting(&draft, op.name), request)?;
    match draft.file(ctx)? {
        Some(proposed) => Ok(json!(proposed)),
        None => Ok(answer),
    }
}

/// Called where a write lands in an overlay: records the commit message the
/// write would have made when the overlay is a draft's.
pub(super) fn record_landing(ctx: &Context, message: impl FnOnce() -> String) {
    if let Some((draft, op)) = &ctx.draft {
        draft.landed(op, &message());
    }
}
