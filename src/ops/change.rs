//! The one write path: every write operation plans its changes here, one
//! [`Plan`] per note, and lands them here, so `patch.propose`, `patch.apply`,
//! `notes.write`, `notes.edit`, `changes.apply` and `notes.revert` accept and
//! refuse exactly the same changes.
//!
//! A [`Plan`] is made from a unified diff ([`plan_patch`]) or from a note's whole
//! new text ([`plan_text`], which makes the diff and plans that). [`land_all`]
//! checks the plans again under the writer lock and writes them where the
//! context's view says writes land: one commit on disk, or a dry run's overlay.
//! [`land`] is the case of one note. An attachment's change ([`plan_file`])
//! is a plan of bytes on the same path: the same locks, crash record, commit
//! and change stream; only its "diff" is a description ([`files::binary_diff`]).

use super::guard::{self, GuardPolicy};
use super::settings::DirtyNotes;
use super::Context;
use crate::error::{Error, ErrorCode, Result};
use crate::notes::files;
use crate::notes::{Existence, Landing, NotePath};
use crate::patch::{self, Budget, Patch, Target};
use crate::proposals::Change;
use crate::repo::history::Entry;
use crate::repo::{self, NewBytes, Repo, Upload};
use std::sync::Arc;

/// A change to one note, planned: its path passed the rules, and the patch
/// applies to the note as it is. Or an attachment's change ([`plan_file`]).
pub(super) struct Plan {
    pub note: NotePath,
    /// The note's text before the change (`None`: it does not exist yet).
    pub before: Option<Body>,
    /// The note's text after it (`None`: the change deletes it).
    pub content: Option<Body>,
    /// The unified diff of the change (empty: it changes nothing); an
    /// attachment's is [`files::binary_diff`]'s description.
    pub patch: String,
    pub hunk_count: usize,
    pub net_line_delta: i64,
    /// Whether `note` is an attachment (its versions are bytes).
    pub file: bool,
}

/// A version of what a plan changes: a note's text or an attachment's
/// bytes, in memory or (an upload HTTP streamed to disk) in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Body {
    Text(String),
    Bytes(Vec<u8>),
    Upload(Arc<Upload>),
}

impl Body {
    /// The bytes as the write path takes them.
    fn new_bytes(&self) -> NewBytes<'_> {
        match self {
            Body::Text(text) => NewBytes::Mem(text.as_bytes()),
            Body::Bytes(bytes) => NewBytes::Mem(bytes),
            Body::Upload(upload) => NewBytes::Upload(upload),
        }
    }

    /// The bytes in memory: an upload's are read whole (a dry run's or a
    /// proposal's copy, within `MIRAI_MAX_FILE_BYTES`).
    fn to_bytes(&self) -> Result<std::borrow::Cow<'_, [u8]>> {
        Ok(match self {
            Body::Text(text) => text.as_bytes().into(),
            Body::Bytes(bytes) => bytes.as_slice().into(),
            Body::Upload(upload) => upload
                .read_all()
                .map_err(|e| Error::internal(format!("cannot read the uploaded file back: {e}")))?
                .into(),
        })
    }

    /// The size and SHA-256 of an attachment's bytes, as a binary diff names them.
    fn side(&self) -> (u64, String) {
        match self.new_bytes() {
            NewBytes::Mem(bytes) => (bytes.len() as u64, files::sha256_hex(bytes)),
            NewBytes::Upload(upload) => (upload.size(), upload.sha256_hex()),
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Body::Text(text) => Some(text),
            Body::Bytes(_) | Body::Upload(_) => None,
        }
    }
}

impl Plan {
    /// A plan for a write whose result equals the note (docs/src/patches.md).
    fn unchanged(note: NotePath, text: Option<String>) -> Plan {
        Plan {
            note,
            before: text.clone().map(Body::Text),
            content: text.map(Body::Text),
            patch: String::new(),
            hunk_count: 0,
            net_line_delta: 0,
            file: false,
        }
    }

    pub fn is_noop(&self) -> bool {
        self.patch.is_empty()
    }
}

/// Plans a unified diff: parse, resolve the path for a write, read the note,
/// apply the hunks, check the size and the new text against `guard` (a
/// deletion has no new text and is never guarded). Its work comes out of the
/// request's `budget`.
pub(super) fn plan_patch(
    ctx: &Context,
    text: &str,
    guard: &GuardPolicy,
    budget: &Budget,
) -> Result<Plan> {
    let parsed = patch::parse(text)?;
    let existence = match parsed.target {
        Target::Create => Existence::MayBeMissing,
        Target::Modify | Target::Delete => Existence::MustExist,
    };
    let note = ctx.view.resolve_for_write(&parsed.path, existence)?;
    let before = ctx.view.current_text(&note)?;
    plan_parsed(ctx, text, &parsed, note, before, guard, budget)
}

/// Plans the parsed diff `text` on `note` (resolved for a write), whose text
/// is `before` now: apply the hunks, check the size and the new text
/// against `guard`.
fn plan_parsed(
    ctx: &Context,
    text: &str,
    parsed: &Patch,
    note: NotePath,
    before: Option<String>,
    guard: &GuardPolicy,
    budget: &Budget,
) -> Result<Plan> {
    if before.is_none() {
        check_folders_in_git(ctx, &note.rel)?;
    }
    let applied = patch::apply_within(parsed, before.as_deref(), budget)?;
    if let Some(content) = &applied.content {
        check_size(ctx, &note, content)?;
        guard::check(&note.rel, before.as_deref(), content, guard)?;
    }
    Ok(Plan {
        note,
        before: before.map(Body::Text),
        content: applied.content.map(Body::Text),
        patch: text.to_string(),
        hunk_count: applied.hunk_count,
        net_line_delta: applied.net_line_delta,
        file: false,
    })
}

/// Plans turning `note` (resolved for a write), whose text is `current` now,
/// into `content` (`None`: deleting it): by the diff between them, planned as
/// [`plan_patch`] plans any diff (which counts its hunks), on the note and
/// text the caller has (not resolved and read again: [`land_all`] reads every
/// note again under the writer lock, and the write refuses a symlink itself). The same text makes a plan that changes
/// nothing; creating or deleting an empty note, a plan of the diff's headers.
pub(super) fn plan_text(
    ctx: &Context,
    note: NotePath,
    current: Option<String>,
    content: Option<&str>,
    guard: &GuardPolicy,
    budget: &Budget,
) -> Result<Plan> {
    let Some(diff) = patch::make_within(&note.rel, current.as_deref(), content, budget) else {
        return Ok(Plan::unchanged(note, current));
    };
    if current.as_deref().unwrap_or_default().is_empty() && content.unwrap_or_default().is_empty() {
        // An empty note created or deleted: no diff has a hunk for it, so the
        // plan is the diff's headers alone (nothing to apply or guard).
        if current.is_none() {
            check_folders_in_git(ctx, &note.rel)?;
        }
        return Ok(Plan {
            note,
            before: current.map(Body::Text),
            content: content.map(|c| Body::Text(c.to_string())),
            patch: diff,
            hunk_count: 0,
            net_line_delta: 0,
            file: false,
        });
    }
    let parsed = patch::parse(&diff)?;
    plan_parsed(ctx, &diff, &parsed, note, current, guard, budget)
}

/// Plans a diff mirai recorded (a proposal's) as [`plan_patch`] does, except
/// the diff of headers alone that [`plan_text`] makes when an empty note is
/// created or deleted, which no patch can carry (it has no hunk): that is
/// planned as the creation (the note must still be missing) or the deletion
/// (the note must still be there and empty), as `notes.write` would.
pub(super) fn plan_recorded(
    ctx: &Context,
    change: &Change,
    guard: &GuardPolicy,
    budget: &Budget,
) -> Result<Plan> {
    let (path, diff) = (change.path.as_str(), change.diff.as_str());
    if files::is_binary_diff(diff) {
        return plan_recorded_file(ctx, change);
    }
    let Some(creates) = patch::empty_note_change(path, diff) else {
        return plan_patch(ctx, diff, guard, budget);
    };
    let existence = if creates {
        Existence::MayBeMissing
    } else {
        Existence::MustExist
    };
    let note = ctx.view.resolve_for_write(path, existence)?;
    match (creates, ctx.view.current_text(&note)?) {
        (true, None) => plan_text(ctx, note, None, Some(""), guard, budget),
        (false, Some(current)) if current.is_empty() => {
            plan_text(ctx, note, Some(current), None, guard, budget)
        }
        (true, Some(_)) => Err(Error::conflict(format!(
            "{path} exists now, and this change creates it (empty)"
        ))),
        (false, _) => Err(Error::conflict(format!(
            "{path} is no longer empty, and this change deletes it as an empty note"
        ))),
    }
}

/// Plans an attachment's recorded change (a proposal's): the file must still
/// hold what the change's description says it held (size and SHA-256, or no
/// file), and the new bytes must be the ones it names; then [`plan_file`].
fn plan_recorded_file(ctx: &Context, change: &Change) -> Result<Plan> {
    let path = change.path.as_str();
    let (before, after) = files::parse_binary_diff(path, &change.diff).ok_or_else(|| {
        Error::conflict(format!(
            "the change of {path} is not an attachment's change of that path"
        ))
    })?;
    let bytes = match (&after, change.content_base64.as_deref()) {
        (None, None) => None,
        (Some((size, sha)), Some(text)) => {
            use base64::Engine;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .ok()
                .filter(|b| b.len() as u64 == *size && files::sha256_hex(b) == *sha)
                .ok_or_else(|| {
                    Error::conflict(format!(
                        "the bytes recorded for {path} are not the ones its change names"
                    ))
                })?;
            Some(bytes)
        }
        _ => {
            return Err(Error::conflict(format!(
                "the change of {path} and its recorded bytes disagree"
            )))
        }
    };
    let file = ctx
        .view
        .resolve_file_for_write(path, Existence::MayBeMissing)?;
    let current = ctx.view.current_file(&file)?;
    let now = current
        .as_deref()
        .map(|b| (b.len() as u64, files::sha256_hex(b)));
    if now != before {
        let shown = |side: &Option<(u64, String)>| match side {
            None => "no file".to_string(),
            Some((size, sha)) => format!("{size} bytes, sha256 {}", short(sha)),
        };
        return Err(Error::conflict(format!(
            "{path} holds {} now, and this change was made against {}",
            shown(&now),
            shown(&before)
        )));
    }
    plan_file(ctx, file, current, bytes)
}

/// Plans deleting the note at `raw_path`: the `+++ /dev/null` diff, planned as
/// any diff is (deletions are never guarded). An empty note, which no diff can
/// delete, gets the diff's headers alone.
pub(super) fn plan_delete(ctx: &Context, raw_path: &str, budget: &Budget) -> Result<Plan> {
    let note = ctx.view.resolve_for_write(raw_path, Existence::MustExist)?;
    let current = ctx
        .view
        .current_text(&note)?
        .ok_or_else(|| crate::notes::suggest::missing(&note.rel))?;
    let diff = patch::make_within(&note.rel, Some(&current), None, budget)
        .ok_or_else(|| Error::internal("a deletion made no diff"))?;
    if current.is_empty() {
        return Ok(Plan {
            note,
            before: Some(Body::Text(current)),
            content: None,
            patch: diff,
            hunk_count: 0,
            net_line_delta: 0,
            file: false,
        });
    }
    let mut plan = plan_patch(ctx, &diff, &GuardPolicy::UNGUARDED, budget)?;
    plan.note = note;
    Ok(plan)
}

/// Plans turning attachment `file` (resolved for a write), whose bytes are
/// `current` now, into `content` (`None`: deleting it). Equal bytes make a
/// plan that changes nothing. The new bytes may not pass
/// `MIRAI_MAX_FILE_BYTES`; a new file's folders are checked against git as a
/// note's are.
pub(super) fn plan_file(
    ctx: &Context,
    file: NotePath,
    current: Option<Vec<u8>>,
    content: Option<Vec<u8>>,
) -> Result<Plan> {
    plan_file_body(ctx, file, current, content.map(Body::Bytes))
}

/// [`plan_file`] of new bytes in memory or an upload on disk (`content`:
/// [`Body::Bytes`] or [`Body::Upload`]; an upload is compared with the file
/// now by size and SHA-256, never read whole).
pub(super) fn plan_file_body(
    ctx: &Context,
    file: NotePath,
    current: Option<Vec<u8>>,
    content: Option<Body>,
) -> Result<Plan> {
    let same = match (&current, content.as_ref().map(Body::new_bytes)) {
        (None, None) => true,
        (Some(now), Some(NewBytes::Mem(new))) => now.as_slice() == new,
        (Some(now), Some(NewBytes::Upload(upload))) => {
            now.len() as u64 == upload.size() && files::sha256_hex(now) == upload.sha256_hex()
        }
        _ => false,
    };
    if same {
        return Ok(Plan {
            note: file,
            before: current.clone().map(Body::Bytes),
            content: current.map(Body::Bytes),
            patch: String::new(),
            hunk_count: 0,
            net_line_delta: 0,
            file: true,
        });
    }
    let after = content.as_ref().map(Body::side);
    if let Some((size, _)) = &after {
        let limit = ctx.view.disk_notes().max_file_bytes();
        if *size > limit {
            return Err(files::file_too_large(&file.rel, *size, limit));
        }
    }
    if current.is_none() {
        check_folders_in_git(ctx, &file.rel)?;
    }
    let before = current
        .as_deref()
        .map(|now| (now.len() as u64, files::sha256_hex(now)));
    Ok(Plan {
        patch: files::binary_diff_sides(&file.rel, before, after),
        note: file,
        before: current.map(Body::Bytes),
        content,
        hunk_count: 0,
        net_line_delta: 0,
        file: true,
    })
}

/// What `plan`'s note or attachment holds now, as the context's view sees it.
fn current(ctx: &Context, plan: &Plan) -> Result<Option<Body>> {
    Ok(if plan.file {
        ctx.view.current_file(&plan.note)?.map(Body::Bytes)
    } else {
        ctx.view.current_text(&plan.note)?.map(Body::Text)
    })
}

/// A new note's folders must be folders in git too: a folder the repository
/// holds as a symlink (a remote's, never written to disk) or as a file would
/// make the note and that entry collide in git's index.
fn check_folders_in_git(ctx: &Context, rel: &str) -> Result<()> {
    let Some(reader) = ctx.history.reader()? else {
        return Ok(());
    };
    match reader
        .blocked_folder(rel)
        .map_err(|e| ctx.history.scrub(e))?
    {
        None => Ok(()),
        Some((folder, Entry::Symlink)) => Err(Error::invalid_path(format!(
            "{rel:?} passes through {folder:?}, which the repository holds as a symlink; \
             mirai never writes through symlinks: write the note at its real path"
        ))),
        Some((folder, _)) => Err(Error::invalid_path(format!(
            "{rel:?} passes through {folder:?}, which the repository holds as a file, not a \
             folder: choose another folder"
        ))),
    }
}

/// A note may not grow past `MIRAI_MAX_NOTE_BYTES`, whichever way it is
/// written (one request stays within the body limit; appends add up).
pub(super) fn check_size(ctx: &Context, note: &NotePath, content: &str) -> Result<()> {
    let limit = ctx.view.disk_notes().max_note_bytes();
    if content.len() as u64 > limit {
        return Err(crate::notes::too_large(
            &note.rel,
            content.len() as u64,
            limit,
        ));
    }
    Ok(())
}

/// Plans a change to one note and lands it as `mcp.patch_apply: <path>` (see
/// [`land_all`]). A plan that changes nothing answers `None` and lands nowhere.
pub(super) fn land(
    ctx: &Context,
    base_commit: Option<&str>,
    planner: impl Fn(&Context, &Budget) -> Result<Plan>,
) -> Result<(Plan, Option<String>)> {
    let (plans, commit) = land_all(
        ctx,
        base_commit,
        |ctx, budget| planner(ctx, budget).map(|plan| vec![plan]),
        |plans| ctx.commit_message(&format!("mcp.patch_apply: {}", plans[0].note.rel), ""),
    )?;
    let plan = plans.into_iter().next().ok_or_else(|| {
        Error::internal("a write of one note planned no change; nothing was written")
    })?;
    Ok((plan, commit))
}

/// Plans changes to several notes (one plan per note) and lands them together:
/// every write operation ends here.
///
/// `planner` makes the changes (parse, resolve, read, apply: the work that grows
/// with the request) without the writer lock, so a costly request never makes
/// other writes wait; all its patches, in every pass, share one [`Budget`]. Under the lock every note is read again; if any changed
/// meanwhile (or the first pass found a conflict), all are planned again
/// against the notes as they are. Plans that
/// change nothing are left out (answered, never landed). Then the base commit is
/// checked for each note and the changes land: written and committed in one
/// commit whose message `message` makes from the plans that land, or recorded
/// in a dry run's overlay (answering no commit; a review mode draft keeps the
/// message too). When no plan changes anything,
/// nothing lands and the answer is `None`.
pub(super) fn land_all(
    ctx: &Context,
    base_commit: Option<&str>,
    planner: impl Fn(&Context, &Budget) -> Result<Vec<Plan>>,
    message: impl FnOnce(&[&Plan]) -> String,
) -> Result<(Vec<Plan>, Option<String>)> {
    // One budget for every pass: a request that spent it is not planned again for free.
    let budget = Budget::request();
    let planner = |ctx: &Context| planner(ctx, &budget);
    // A conflict found before the lock may only mean that another write
    // changed the note meanwhile: it is planned again under the lock, so a
    // change without a base (an append, an insert) fails only for a reason its
    // caller can act on.
    let first = match planner(ctx) {
        Ok(plans) if plans.iter().all(Plan::is_noop) => return Ok((plans, None)),
        Ok(plans) => Some(plans),
        Err(e) if e.code == ErrorCode::Conflict => None,
        Err(e) => return Err(e),
    };
    let repo = ctx.writer()?;
    let mut plans = match first {
        Some(plans) => plans,
        None => planner(ctx)?,
    };
    for plan in &plans {
        if current(ctx, plan)? != plan.before {
            plans = planner(ctx)?;
            break;
        }
    }
    let changing: Vec<&Plan> = plans.iter().filter(|plan| !plan.is_noop()).collect();
    if changing.is_empty() {
        return Ok((plans, None));
    }
    if let Some(base) = base_commit.map(str::trim).filter(|b| !b.is_empty()) {
        for plan in &changing {
            check_base(&repo, base, &plan.note.rel)?;
        }
    }
    let commit = match ctx.view.landing() {
        Landing::Overlay(overlay) => {
            for plan in &changing {
                let (before, after) = (plan.before.as_ref(), plan.content.as_ref());
                if plan.file {
                    if let (Some(_), Some(Body::Upload(upload))) = (&ctx.draft, after) {
                        check_proposable(ctx, &plan.note.rel, upload.size())?;
                    }
                    let before = before.map(Body::to_bytes).transpose()?;
                    let after = after.map(Body::to_bytes).transpose()?;
                    overlay.write_file(&plan.note.rel, before.as_deref(), after.as_deref());
                } else {
                    overlay.write(
                        &plan.note.rel,
                        before.and_then(Body::text),
                        after.and_then(Body::text),
                    );
                }
            }
            // In review mode the draft keeps the commit this write would have made.
            super::record_landing(ctx, || message(&changing));
            None
        }
        Landing::Disk => Some(commit(ctx, &repo, &changing, &message(&changing))?),
    };
    Ok((plans, commit))
}

/// A proposal carries an attachment's new bytes as base64 within
/// `MIRAI_MAX_BODY_BYTES`: an upload that cannot fit is refused before its
/// file is read back into memory for the proposal.
fn check_proposable(ctx: &Context, rel: &str, size: u64) -> Result<()> {
    let base64 = size.div_ceil(3) * 4;
    if base64 <= ctx.max_content_bytes as u64 {
        return Ok(());
    }
    Err(Error::new(
        ErrorCode::PayloadTooLarge,
        format!(
            "{rel} is {size} bytes, {base64} as base64; one proposal holds at most {} bytes of \
             diffs and bytes (MIRAI_MAX_BODY_BYTES): nothing was proposed; in review mode send a \
             smaller file, or ask the operator to raise MIRAI_MAX_BODY_BYTES",
            ctx.max_content_bytes
        ),
    ))
}

/// Refuses a change to `rel` made against `base` when the note changed between
/// that commit and HEAD.
fn check_base(repo: &Repo, base: &str, rel: &str) -> Result<()> {
    if !repo.changed_since(base, rel)? {
        return Ok(());
    }
    let head = repo.head()?.unwrap_or_default();
    let by = repo
        .last_change_since(base, rel)
        .map(|change| format!(" (last changed in {change})"))
        .unwrap_or_default();
    Err(Error::conflict(format!(
        "{rel} changed between base_commit {} and HEAD {}{by}; read the note again and rebuild the change against HEAD",
        short(base),
        short(&head)
    )))
}

/// Writes the plans' notes and commits them in one commit with `message`
/// (snapshotting someone else's uncommitted changes to each first, when the
/// operator chose that), then tells the live index.
fn commit(ctx: &Context, repo: &Repo, plans: &[&Plan], message: &str) -> Result<String> {
    if ctx.dirty_notes == DirtyNotes::Snapshot {
        for plan in plans {
            if let Some(snapshot) = repo::snapshot(repo, &plan.note.rel, &ctx.mirai_author())? {
                if !plan.file {
                    let before = plan.before.as_ref().and_then(Body::text);
                    ctx.index
                        .notes_changed(&[(plan.note.rel.as_str(), before)], &[], &snapshot);
                }
            }
        }
    }
    let changes: Vec<(&str, Option<NewBytes<'_>>)> = plans
        .iter()
        .map(|plan| {
            (
                plan.note.rel.as_str(),
                plan.content.as_ref().map(Body::new_bytes),
            )
        })
        .collect();
    let paths: Vec<&str> = changes.iter().map(|(path, _)| *path).collect();
    // Until the index has them, the watcher must not tell these files as outside edits.
    let _writing = ctx.index.writing(&paths);
    let commit = repo::write_files_and_commit(repo, &changes, message, &ctx.author())?;
    // Notes are indexed and linked; attachments are only what links reach.
    let (files, notes): (Vec<&&Plan>, Vec<&&Plan>) = plans.iter().partition(|plan| plan.file);
    let notes: Vec<(&str, Option<&str>)> = notes
        .iter()
        .map(|plan| {
            (
                plan.note.rel.as_str(),
                plan.content.as_ref().and_then(Body::text),
            )
        })
        .collect();
    let files: Vec<(&str, bool)> = files
        .iter()
        .map(|plan| (plan.note.rel.as_str(), plan.content.is_some()))
        .collect();
    ctx.index.notes_changed(&notes, &[], &commit);
    if !files.is_empty() {
        ctx.index.files_changed(&files);
    }
    if let Some(sync) = &ctx.sync {
        sync.committed();
    }
    Ok(commit)
}

/// One `M|A|D <path>` line per plan (modified, added, deleted), as a
/// multi-note commit's body lists its notes.
pub(super) fn status_lines(plans: &[&Plan]) -> String {
    plans
        .iter()
        .map(|plan| {
            let status = match (&plan.before, &plan.content) {
                (None, _) => 'A',
                (_, None) => 'D',
                _ => 'M',
            };
            format!("{status} {}\n", plan.note.rel)
        })
        .collect()
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}
