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
//! write of it gathers into ([`begin_draft`], [`file_draft`]), so later calls
//! see what earlier ones proposed. A dry run files nothing.

use std::sync::Arc;

use serde_json::{json, Value};

use super::context::Context;
use super::draft::{Draft, Proposed};
use super::operation::{Class, OpEntry};
use super::settings::PolicyMode;
use crate::callers::Right;
use crate::error::{Error, ErrorCode, Result};
use crate::proposals::{Requester, MAX_MESSAGE_BYTES};

/// A draft for the writes made through `ctx` (its adapter and run), from HEAD.
pub fn begin_draft(ctx: &Context) -> Result<Arc<Draft>> {
    let base_commit = ctx
        .history
        .head_commit()
        .map_err(|e| ctx.history.scrub(e))?;
    Ok(Draft::new(
        base_commit,
        Requester {
            adapter: ctx.adapter().to_string(),
            run_id: ctx.run_id().map(str::to_string),
            message: None,
            caller: ctx.caller().map(|c| c.name.clone()),
            caller_email: ctx.caller().and_then(|c| c.email.clone()),
        },
    ))
}

/// Refuses the first write of `draft` when the pending proposals are at the
/// bound (429 `too_many_proposals`).
fn admit(draft: &Draft, ctx: &Context) -> Result<()> {
    draft.admit_once(|| {
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
        Ok(())
    })
}

/// Files `draft` as a pending proposal, unless its writes changed nothing in
/// the end (`None`). Bounded as `changes.apply` is: at most
/// `MIRAI_CHANGES_MAX_PATCHES` notes and the body limit's bytes of diffs.
pub fn file_draft(draft: &Draft, ctx: &Context) -> Result<Option<Proposed>> {
    let changes = draft.changes();
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
    let bytes: usize = changes
        .iter()
        .map(|c| c.diff.len() + c.content_base64.as_ref().map_or(0, String::len))
        .sum();
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
    let proposal = draft.proposal(changes);
    ctx.proposals.save(&proposal)?;
    Ok(Some(Proposed {
        proposal: proposal.id,
        changes: proposal.changes,
    }))
}

/// Whether `op` run through `ctx` is proposed rather than committed: review
/// mode, a write of notes, and not a dry run (whose writes stay in its own overlay).
pub(super) fn is_proposed(ctx: &Context, op: &OpEntry) -> bool {
    proposes(ctx)
        && op.class == Class::Write
        && op.reviewed
        && (ctx.draft().is_some() || !ctx.view.is_dry_run())
}

/// Whether writes of notes through `ctx` are proposed: review mode, or a
/// caller that may propose but not write, whatever the mode (review is per
/// caller, not only per server).
pub fn proposes(ctx: &Context) -> bool {
    ctx.policy == PolicyMode::Review
        || ctx
            .caller()
            .is_some_and(|c| c.can.has(Right::Propose) && !c.can.has(Right::Write))
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
    if let Some(long) = message.as_ref().filter(|m| m.len() > MAX_MESSAGE_BYTES) {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!(
                "message is {} bytes; a proposal keeps at most {MAX_MESSAGE_BYTES}: nothing was \
                 proposed, shorten the message",
                long.len()
            ),
        ));
    }
    if let Some(draft) = ctx.draft() {
        admit(draft, ctx)?;
        let before = draft.landings();
        let answer = run(&ctx.drafting(draft, op.name), request)?;
        if draft.landings() == before {
            return Ok(answer);
        }
        draft.keep_message(message);
        return Ok(draft.answer());
    }
    let draft = begin_draft(ctx)?;
    admit(&draft, ctx)?;
    draft.keep_message(message);
    let answer = run(&ctx.drafting(&draft, op.name), request)?;
    match file_draft(&draft, ctx)? {
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
