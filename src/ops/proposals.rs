//! The proposals rows: `proposals.list` and `proposals.get` (reads, for
//! anyone), `proposals.approve` and `proposals.reject` (class review: a
//! reviewer's decisions). Approval lands every diff as ONE commit through the
//! one write path ([`land_all`]) with the subject and body the original
//! operation would have made and a `Mirai-Proposal: <id>` trailer. That
//! trailer on the branch is the truth about whether a proposal was applied:
//! a pending proposal it names is marked applied wherever one is read, so a
//! kill between the commit and the file's update never applies it twice.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::change::{land_all, plan_recorded, Plan};
use super::changes::check_message;
use super::guard::GuardPolicy;
use super::history::page_limit;
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::patch::Budget;
use crate::proposals::{self, check_change, Change, Proposal, Status, Summary};
use crate::repo::history::{CALLER_TRAILER, PROPOSAL_TRAILER, RUN_TRAILER};
use crate::repo::{LINKS_UNCHANGED, MOVE_LINKS_TRAILER};

/// Proposals one page lists by default.
pub const DEFAULT_PROPOSALS_LIMIT: usize = 20;
/// The most proposals one page may list.
pub const MAX_PROPOSALS_LIMIT: usize = 100;
/// The longest reason a rejection keeps, in bytes.
pub const MAX_REASON_BYTES: usize = 4096;

/// A proposal as a listing shows it: the store's in-memory summary.
pub use crate::proposals::Summary as ProposalSummary;

/// `proposals.list`'s request.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProposalsListRequest {
    /// pending (the default), applied or rejected.
    #[serde(default)]
    pub status: Option<String>,
    /// How many, 1 to 100 (default 20). A number, or a decimal string.
    #[serde(default)]
    #[schemars(with = "Option<u32>", extend("default" = DEFAULT_PROPOSALS_LIMIT))]
    pub limit: Option<Value>,
    /// The `next_cursor` of the previous page, to go on from there.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// A page of proposals, newest first.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ProposalsPage {
    pub proposals: Vec<ProposalSummary>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// Proposal files that could not be believed (skipped; the server log names them).
    pub unreadable: usize,
}

/// `proposals.list`: proposals with one status, newest first.
pub struct ProposalsList;

impl Operation for ProposalsList {
    const NAME: &'static str = "proposals.list";
    const EXAMPLE: &'static str = r##"await mirai.proposals.list({status: "pending", limit: 10})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str = "Proposals, newest first (pending by default).";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get(
        "/mcp/proposals",
        HttpInput::Query(&["status", "limit", "cursor"]),
    );
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = ProposalsListRequest;
    type Response = ProposalsPage;

    fn run(ctx: &Context, request: ProposalsListRequest) -> Result<ProposalsPage> {
        let status = match request.status.as_deref().map(str::trim) {
            None | Some("") | Some("pending") => Status::Pending,
            Some("applied") => Status::Applied,
            Some("rejected") => Status::Rejected,
            Some(other) => {
                return Err(Error::new(
                    ErrorCode::InvalidRequest,
                    format!("status must be pending, applied or rejected, not {other:?}"),
                ))
            }
        };
        let limit = page_limit(
            request.limit.as_ref(),
            DEFAULT_PROPOSALS_LIMIT,
            MAX_PROPOSALS_LIMIT,
        )?;
        let listing = ctx.proposals.list()?;
        let applied = reconcile_all(ctx, &listing.proposals)?;
        let cursor = request.cursor.as_deref().map(str::trim);
        let mut page: Vec<ProposalSummary> = Vec::with_capacity(limit + 1);
        for proposal in &listing.proposals {
            if cursor.is_some_and(|after| proposal.id.as_str() >= after) {
                continue;
            }
            let proposal = applied
                .iter()
                .find(|p| p.id == proposal.id)
                .unwrap_or(proposal.as_ref());
            if proposal.status != status || !proposal.paths.iter().all(|p| ctx.view.sees(p)) {
                continue;
            }
            page.push(proposal.clone());
            if page.len() > limit {
                break;
            }
        }
        let next_cursor = (page.len() > limit).then(|| {
            page.truncate(limit);
            page[limit - 1].id.clone()
        });
        Ok(ProposalsPage {
            proposals: page,
            next_cursor,
            unreadable: listing.unreadable,
        })
    }
}

/// `proposals.get`'s and `proposals.reject`'s id.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProposalId {
    /// The proposal's id, as the proposed write answered it.
    pub id: String,
}

/// A diff that no longer applies to the notes now, and why (the line-numbered 409 diagnostics).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ProposalConflict {
    pub path: String,
    pub code: String,
    pub message: String,
}

/// One proposal in full.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProposalDetail {
    #[serde(flatten)]
    pub proposal: Proposal,
    /// Whether every diff still applies to the notes now (a pending proposal; false otherwise).
    pub applies: bool,
    /// The diffs that do not, with why.
    pub conflicts: Vec<ProposalConflict>,
}

/// `proposals.get`: a proposal with its diffs, and whether they still apply.
pub struct ProposalsGet;

impl Operation for ProposalsGet {
    const NAME: &'static str = "proposals.get";
    const EXAMPLE: &'static str =
        r##"await mirai.proposals.get({id: "0192f0c4-5b3e-7c11-8d2a-4f3b2a1c0d9e"})"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str = "One proposal, its diffs, whether they apply.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/proposals/get", HttpInput::Query(&["id"]));
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = ProposalId;
    type Response = ProposalDetail;

    fn run(ctx: &Context, request: ProposalId) -> Result<ProposalDetail> {
        let proposal = reconcile(ctx, seen(ctx, ctx.proposals.load(request.id.trim())?)?)?;
        let mut conflicts = Vec::new();
        if proposal.status == Status::Pending {
            let disk = on_disk(ctx);
            let budget = Budget::request();
            for change in &proposal.changes {
                if let Err(e) = plan_recorded(&disk, change, &GuardPolicy::UNGUARDED, &budget) {
                    conflicts.push(ProposalConflict {
                        path: change.path.clone(),
                        code: e.code.as_str().to_string(),
                        message: e.message,
                    });
                }
            }
        }
        Ok(ProposalDetail {
            applies: proposal.status == Status::Pending && conflicts.is_empty(),
            proposal,
            conflicts,
        })
    }
}

/// `proposals.approve`'s request.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ApproveRequest {
    pub id: String,
    /// Said in the commit's body after the original one (no control
    /// characters, no line that looks like a git trailer).
    #[serde(default)]
    pub message: Option<String>,
}

/// `proposals.reject`'s request.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RejectRequest {
    pub id: String,
    /// Why, kept with the proposal (at most 4096 bytes, no control characters but newlines and tabs).
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a decision did.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Decided {
    pub id: String,
    /// applied or rejected.
    pub status: Status,
    /// The commit that applied it (approve).
    pub commit: Option<String>,
}

/// `proposals.approve`: apply a pending proposal as one commit.
pub struct ProposalsApprove;

impl Operation for ProposalsApprove {
    const NAME: &'static str = "proposals.approve";
    const EXAMPLE: &'static str =
        r##"await mirai.proposals.approve({id: "0192f0c4-5b3e-7c11-8d2a-4f3b2a1c0d9e"})"##;
    const CLASS: Class = Class::Review;
    const SUMMARY: &'static str =
        "A reviewer applies a pending proposal: every diff as ONE commit with the original subject and body and a Mirai-Proposal trailer; a diff that no longer applies is a 409 and it stays pending.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/proposals/approve", HttpInput::Body);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = ApproveRequest;
    type Response = Decided;

    fn run(ctx: &Context, request: ApproveRequest) -> Result<Decided> {
        let note = request.message.as_deref().map(check_message).transpose()?;
        let _decision = ctx.proposals.decide()?;
        let proposal = pending(ctx, request.id.trim(), "approved")?;
        check_not_own(ctx, &proposal)?;
        let message = commit_message(&proposal, note.as_deref());
        let disk = Context {
            caller: requester(&proposal),
            ..on_disk(ctx)
        };
        check_move_still_whole(&disk, &proposal)?;
        let (_, commit) = land_all(
            &disk,
            None,
            |ctx, budget| plan_all(ctx, &proposal.changes, budget),
            |_| message,
        )?;
        let commit = commit.ok_or_else(|| {
            Error::conflict(format!(
                "proposal {} changes nothing now: the notes already hold what it proposes; \
                 reject it",
                proposal.id
            ))
        })?;
        let mut applied = proposal;
        applied.status = Status::Applied;
        applied.commit = Some(commit.clone());
        applied.decided_at = Some(proposals::now());
        applied.decided_by = Some(decider(ctx));
        // The commit landed, and its Mirai-Proposal trailer is the truth about
        // it: a file that cannot be updated now (a full disk) is marked
        // applied when it is next read, and the approval stands.
        if let Err(e) = ctx.proposals.save(&applied) {
            log::warn!(
                "proposal {} was applied in commit {commit}, but its file could not be updated \
                 ({}); it is marked applied when next read",
                applied.id,
                e.message
            );
        }
        Ok(Decided {
            id: applied.id,
            status: Status::Applied,
            commit: Some(commit),
        })
    }
}

/// `proposals.reject`: decide a pending proposal will not be applied.
pub struct ProposalsReject;

impl Operation for ProposalsReject {
    const NAME: &'static str = "proposals.reject";
    const EXAMPLE: &'static str = r##"await mirai.proposals.reject({id: "0192f0c4-5b3e-7c11-8d2a-4f3b2a1c0d9e", reason: "wrong note"})"##;
    const CLASS: Class = Class::Review;
    const SUMMARY: &'static str =
        "A reviewer rejects a pending proposal (with a reason, kept); nothing is written to the notes.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/proposals/reject", HttpInput::Body);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = RejectRequest;
    type Response = Decided;

    fn run(ctx: &Context, request: RejectRequest) -> Result<Decided> {
        let reason = request.reason.as_deref().map(check_reason).transpose()?;
        let _decision = ctx.proposals.decide()?;
        let proposal = pending(ctx, request.id.trim(), "rejected")?;
        let mut rejected = proposal;
        rejected.status = Status::Rejected;
        rejected.reason = reason.filter(|r| !r.is_empty());
        rejected.decided_at = Some(proposals::now());
        rejected.decided_by = Some(decider(ctx));
        ctx.proposals.save(&rejected)?;
        Ok(Decided {
            id: rejected.id,
            status: Status::Rejected,
            commit: None,
        })
    }
}

/// `proposal`, when every note it changes is one `ctx`'s caller may read;
/// else 404 as for a proposal that does not exist (`read_paths` hide).
fn seen(ctx: &Context, proposal: Proposal) -> Result<Proposal> {
    if proposal.changes.iter().all(|c| ctx.view.sees(&c.path)) {
        return Ok(proposal);
    }
    Err(Error::not_found(format!(
        "no proposal {}: proposals.list shows the ones there are",
        proposal.id
    )))
}

/// Who decides through `ctx`: its caller's name, or `operator` (the command line).
fn decider(ctx: &Context) -> String {
    ctx.caller()
        .map_or_else(|| "operator".to_string(), |c| c.name.clone())
}

/// A caller never approves a proposal it asked for itself, unless its
/// `self_review` says it may (403 `policy_denied`).
fn check_not_own(ctx: &Context, proposal: &Proposal) -> Result<()> {
    let Some(caller) = ctx.caller() else {
        return Ok(());
    };
    if proposal.requested_by.caller.as_deref() == Some(caller.name.as_str()) && !caller.self_review
    {
        return Err(Error::new(
            ErrorCode::PolicyDenied,
            format!(
                "proposal {} was asked for by {} itself: another caller with the review right \
                 must approve it (or set self_review = true for {} in MIRAI_CALLERS_FILE)",
                proposal.id, caller.name, caller.name
            ),
        ));
    }
    Ok(())
}

/// The caller an approval's commit is made for: the one who asked (its name
/// and email as the proposal recorded them), so the commit names its author.
fn requester(proposal: &Proposal) -> Option<std::sync::Arc<crate::callers::Caller>> {
    let name = proposal.requested_by.caller.clone()?;
    let email = proposal.requested_by.caller_email.clone()?;
    Some(std::sync::Arc::new(crate::callers::Caller::author(
        name, email,
    )))
}

/// This context's notes as they are on disk (a decision or a check never
/// sees an eval's draft).
fn on_disk(ctx: &Context) -> Context {
    Context {
        view: crate::notes::View::disk(ctx.view.disk_notes().clone()),
        draft: None,
        run_id: None,
        ..ctx.clone()
    }
}

/// Proposal `id`, once it is known to be pending (409 otherwise, saying what
/// it is), under the decision lock.
fn pending(ctx: &Context, id: &str, verb: &str) -> Result<Proposal> {
    let proposal = reconcile(ctx, seen(ctx, ctx.proposals.load(id)?)?)?;
    match proposal.status {
        Status::Pending => Ok(proposal),
        Status::Applied => Err(Error::conflict(format!(
            "proposal {id} was already applied in commit {}; only a pending proposal can be {verb}",
            proposal.commit.as_deref().unwrap_or("?")
        ))),
        Status::Rejected => Err(Error::conflict(format!(
            "proposal {id} was rejected; only a pending proposal can be {verb}"
        ))),
    }
}

/// `proposal` as the branch tells it, saved so when that changed it: the
/// `Mirai-Proposal` trailer on the branch is the truth ([`follow`]).
fn reconcile(ctx: &Context, proposal: Proposal) -> Result<Proposal> {
    if proposal.status == Status::Rejected {
        return Ok(proposal);
    }
    let on_branch = ctx
        .history
        .commit_of_proposal(&proposal.id)
        .map_err(|e| ctx.history.scrub(e))?;
    Ok(follow(ctx, proposal, on_branch)?.unwrap_or_else(|same| same))
}

/// The proposals of `listing` whose status the branch contradicts, as
/// [`follow`] corrected (and saved) them, each read whole from its file.
fn reconcile_all(ctx: &Context, listing: &[Arc<Summary>]) -> Result<Vec<Summary>> {
    if listing.iter().all(|p| p.status == Status::Rejected) {
        return Ok(Vec::new());
    }
    let applied = ctx
        .history
        .proposal_commits()
        .map_err(|e| ctx.history.scrub(e))?;
    let mut changed = Vec::new();
    for proposal in listing.iter().filter(|p| p.status != Status::Rejected) {
        let on_branch = applied.get(&proposal.id);
        let agrees = match proposal.status {
            Status::Pending => on_branch.is_none(),
            _ => on_branch.is_some() && on_branch == proposal.commit.as_ref(),
        };
        if agrees {
            continue;
        }
        let whole = ctx.proposals.load(&proposal.id)?;
        if let Ok(corrected) = follow(ctx, whole, on_branch.cloned())? {
            changed.push(Summary::of(&corrected));
        }
    }
    Ok(changed)
}

/// `proposal` corrected by where its commit is (`on_branch`: the commit on
/// the branch carrying its trailer) and saved, or `Err(proposal)` when it
/// already agrees: a pending one whose commit is on the branch was applied
/// (an approval killed before its file was updated); an applied one whose
/// commit is not is pending again, saying why (a sync kept the commit back on
/// a `mirai/unmerged/` branch, or someone reset the branch), since the
/// change is not in the notes; an applied one whose commit was replayed names
/// the replayed commit.
fn follow(
    ctx: &Context,
    mut proposal: Proposal,
    on_branch: Option<String>,
) -> Result<std::result::Result<Proposal, Proposal>> {
    match (proposal.status, on_branch) {
        (Status::Pending, Some(commit)) => {
            proposal.status = Status::Applied;
            proposal.commit = Some(commit);
            proposal.decided_at = Some(proposals::now());
        }
        (Status::Applied, None) => {
            proposal.reason = Some(format!(
                "approved in commit {}, which is no longer on the branch (a sync kept it back on \
                 a mirai/unmerged/ branch, or the branch was reset): pending again; approve it \
                 to apply it to the notes as they are now",
                proposal.commit.as_deref().unwrap_or("?")
            ));
            proposal.status = Status::Pending;
            proposal.commit = None;
            proposal.decided_at = None;
        }
        (Status::Applied, Some(commit)) if proposal.commit.as_ref() != Some(&commit) => {
            proposal.commit = Some(commit);
        }
        _ => return Ok(Err(proposal)),
    }
    ctx.proposals.save(&proposal)?;
    Ok(Ok(proposal))
}

/// A move proposal is approved only while the move it shows is still the
/// whole move: a note that gained a link to the moved note since would be
/// left with a broken link by the old diffs, so the approval is refused (409)
/// naming those notes, and the reviewer rejects it and moves again.
fn check_move_still_whole(ctx: &Context, proposal: &Proposal) -> Result<()> {
    if proposal.operation.name != super::NotesMove::NAME {
        return Ok(());
    }
    let side = |marker: &str| {
        proposal
            .changes
            .iter()
            .find(|change| change.diff.lines().any(|line| line == marker))
            .map(|change| change.path.as_str())
    };
    let (Some(from), Some(to)) = (side("+++ /dev/null"), side("--- /dev/null")) else {
        return Ok(());
    };
    let update_links = !proposal
        .operation
        .body
        .lines()
        .any(|line| line == format!("{MOVE_LINKS_TRAILER}: {LINKS_UNCHANGED}"));
    let now = super::moves::paths_changed_now(ctx, (from, to), update_links, &Budget::request())?;
    let gained: Vec<&str> = now
        .iter()
        .map(String::as_str)
        .filter(|path| !proposal.changes.iter().any(|change| change.path == *path))
        .collect();
    if gained.is_empty() {
        return Ok(());
    }
    Err(Error::conflict(format!(
        "since this move was proposed, {} gained links to {from}; the proposed diffs would leave \
         them broken: reject the proposal and move the note again (the proposal stays pending)",
        gained.join(", ")
    )))
}

/// Plans every diff as `patch.apply` would (unguarded: the guards ran when it
/// was proposed, and a person approves what they read), naming the failing
/// one; a diff that names another path than its change lists is refused.
fn plan_all(ctx: &Context, changes: &[Change], budget: &Budget) -> Result<Vec<Plan>> {
    changes
        .iter()
        .map(|change| {
            check_change(change).map_err(|why| {
                Error::conflict(format!(
                    "{why}; the proposal stays pending: reject it"
                ))
            })?;
            plan_recorded(ctx, change, &GuardPolicy::UNGUARDED, budget).map_err(|e| {
                Error::new(
                    e.code,
                    format!(
                        "{}: {}; the proposal stays pending (reject it, or propose the change again \
                         against the notes now)",
                        change.path, e.message
                    ),
                )
            })
        })
        .collect()
}

/// The commit message the original operation would have made, the reviewer's
/// note after its body, then the trailers: the run's `Mirai-Run` (kept) and
/// `Mirai-Proposal: <id>`.
fn commit_message(proposal: &Proposal, note: Option<&str>) -> String {
    let mut message = format!("{}\n", proposal.operation.subject);
    for part in [Some(proposal.operation.body.as_str()), note] {
        if let Some(part) = part.map(str::trim).filter(|p| !p.is_empty()) {
            message.push('\n');
            message.push_str(part);
            message.push('\n');
        }
    }
    message.push('\n');
    if let Some(run) = &proposal.requested_by.run_id {
        message.push_str(&format!("{RUN_TRAILER}: {run}\n"));
    }
    message.push_str(&format!("{PROPOSAL_TRAILER}: {}\n", proposal.id));
    if let Some(caller) = &proposal.requested_by.caller {
        message.push_str(&format!("{CALLER_TRAILER}: {caller}\n"));
    }
    message
}

/// A rejection's reason: trimmed, bounded, no control characters but newlines and tabs.
fn check_reason(reason: &str) -> Result<String> {
    if reason.len() > MAX_REASON_BYTES {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!(
                "reason is {} bytes; give at most {MAX_REASON_BYTES}",
                reason.len()
            ),
        ));
    }
    if let Some(c) = reason
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
    {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!(
                "reason holds the control character U+{:04X}; only newlines and tabs are allowed",
                u32::from(c)
            ),
        ));
    }
    Ok(reason.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proposals::Operation as Op;
    use crate::proposals::Requester;

    #[test]
    fn an_approval_keeps_the_original_subject_and_body_and_adds_the_trailers() {
        let mut proposal = Proposal {
            id: "0192f0c4-5b3e-7c11-8d2a-4f3b2a1c0d9e".into(),
            status: Status::Pending,
            created_at: proposals::now(),
            base_commit: None,
            requested_by: Requester {
                adapter: "agent".into(),
                run_id: Some("0192f0c4-0000-7000-8000-000000000001".into()),
                message: None,
                caller: None,
                caller_email: None,
            },
            operation: Op {
                name: "changes.apply".into(),
                subject: "mcp.changes_apply: 2 notes".into(),
                body: "M a.md\nA b.md".into(),
            },
            changes: Vec::new(),
            commit: None,
            reason: None,
            decided_at: None,
            decided_by: None,
        };
        assert_eq!(
            commit_message(&proposal, Some("Looks right.")),
            "mcp.changes_apply: 2 notes\n\nM a.md\nA b.md\n\nLooks right.\n\n\
             Mirai-Run: 0192f0c4-0000-7000-8000-000000000001\n\
             Mirai-Proposal: 0192f0c4-5b3e-7c11-8d2a-4f3b2a1c0d9e\n"
        );
        proposal.requested_by.run_id = None;
        proposal.operation.body.clear();
        let message = commit_message(&proposal, None);
        assert_eq!(
            message,
            "mcp.changes_apply: 2 notes\n\nMirai-Proposal: 0192f0c4-5b3e-7c11-8d2a-4f3b2a1c0d9e\n"
        );
        let trailers = git2::message_trailers_strs(&message).unwrap();
        assert_eq!(trailers.iter().count(), 1);
    }

    #[test]
    fn a_proposals_detail_schema_admits_its_own_fields() {
        let schema = schemars::schema_for!(ProposalDetail).to_value();
        let text = schema.to_string();
        assert!(schema["properties"]["applies"].is_object(), "{text}");
        assert!(schema["properties"]["changes"].is_object(), "{text}");
        assert_ne!(schema["additionalProperties"], false, "{text}");
    }

    #[test]
    fn reasons_are_bounded_and_plain() {
        assert_eq!(check_reason("  wrong note \n").unwrap(), "wrong note");
        assert!(check_reason("bell\u{7}").is_err());
        assert!(check_reason(&"x".repeat(MAX_REASON_BYTES + 1)).is_err());
    }
}
