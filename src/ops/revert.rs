//! `notes.revert`: takes back a commit, or every commit of an agent run, as
//! one new commit through `changes.apply`'s path ([`land_all`]).
//!
//! Each reverted commit's change to a note is its diff against its first
//! parent, reversed and applied strictly to the note as it is now, as
//! `git apply -R` would: it lands where its context is, and where the note has
//! changed so that it no longer applies the answer is 409 with the patch's
//! line-numbered diagnostics, never a three-way merge. A run's commits are
//! taken back newest first, one note at a time, and each note's result lands
//! as one change. A note that stands as the commit left it is put back as the
//! commit found it, with no diff work; the work of placing inverses in notes
//! that moved is the request's patch budget ([`crate::patch::Budget`]), past
//! which the answer is 409 saying so. An attachment (any path that is not a
//! note) is never merged: it must hold the bytes the commit left, and gets
//! back the bytes the commit found ([`plan_file`]); otherwise 409.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::change::{land_all, plan_file, plan_text, status_lines, Plan};
use super::files_write::check_writable_type;
use super::guard::GuardPolicy;
use super::patch::{summary, PatchSummary};
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::files;
use crate::notes::path::has_note_extension;
use crate::notes::{Existence, NotePath};
use crate::patch::{self, Budget};
use crate::repo::{CommitChanges, FileBound};

/// `notes.revert`'s request: exactly one of `commit` and `run_id`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RevertRequest {
    /// The commit to take back: its sha, full or abbreviated (4 to 40 hex digits), HEAD or HEAD~N.
    #[serde(default)]
    pub commit: Option<String>,
    /// The agent run to take back: every commit carrying `Mirai-Run: <run_id>`.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Take back only this note's part.
    #[serde(default)]
    pub path: Option<String>,
    /// Refuse (conflict) when a note to change changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
}

/// What a revert did: the new commit, the commits it took back (newest
/// first) and each note's change.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Reverted {
    /// `null` in a dry run, and when taking the commits back changes nothing.
    pub commit: Option<String>,
    pub reverted: Vec<String>,
    pub changes: Vec<PatchSummary>,
}

/// `notes.revert`: take back a commit or an agent run, as a new commit.
pub struct NotesRevert;

impl Operation for NotesRevert {
    const NAME: &'static str = "notes.revert";
    const EXAMPLE: &'static str = r##"await mirai.notes.revert({commit: "3f2a9c1"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str =
        "Take back a commit ({commit}) or agent run ({run_id}), or one path of it ({path}), as ONE new commit; 409 if it no longer applies.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/revert", HttpInput::Body);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = RevertRequest;
    type Response = Reverted;

    fn run(ctx: &Context, request: RevertRequest) -> Result<Reverted> {
        let only = request
            .path
            .as_deref()
            .map(|raw| named_path(ctx, raw))
            .transpose()?;
        let (subject, commits) = match (request.commit.as_deref(), request.run_id.as_deref()) {
            (Some(sha), None) => {
                let commit = {
                    let repo = ctx.writer()?;
                    repo.commit_changes(sha, only.as_deref(), file_bound(ctx))?
                };
                (format!("mcp.revert: {}", commit.short), vec![commit])
            }
            (None, Some(run_id)) => {
                let run_id = run_id.trim();
                (
                    format!("mcp.revert: run {run_id}"),
                    run(ctx, run_id, only.as_deref())?,
                )
            }
            _ => {
                return Err(Error::new(
                    ErrorCode::InvalidRequest,
                    "give exactly one of `commit` (a sha, HEAD or HEAD~N) and `run_id` (an agent run's id)",
                ))
            }
        };
        let commits: Vec<CommitChanges> = commits
            .into_iter()
            .filter(|commit| !commit.files.is_empty())
            .collect();
        if commits.is_empty() {
            let what = match (&request.commit, &only) {
                (Some(sha), Some(path)) => format!("commit {} did not change {path}", sha.trim()),
                (Some(sha), None) => format!("commit {} changed nothing", sha.trim()),
                (None, Some(path)) => format!("no commit of the run changed {path}"),
                (None, None) => "the run's commits changed nothing".to_string(),
            };
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!("{what}: there is nothing to take back"),
            ));
        }
        check_notes(ctx, &commits)?;
        let (plans, commit) = land_all(
            ctx,
            request.base_commit.as_deref(),
            |ctx, budget| plan_inverse(ctx, &commits, budget),
            |plans| {
                let reverts: String = commits
                    .iter()
                    .map(|c| format!("This reverts commit {}.\n", c.id))
                    .collect();
                ctx.commit_message(&subject, &format!("{reverts}\n{}", status_lines(plans)))
            },
        )?;
        Ok(Reverted {
            commit,
            reverted: commits.into_iter().map(|c| c.id).collect(),
            changes: plans
                .iter()
                .filter(|plan| !plan.is_noop())
                .map(summary)
                .collect(),
        })
    }
}

/// The note's or attachment's path `raw` names, when this context sees it.
fn named_path(ctx: &Context, raw: &str) -> Result<String> {
    if has_note_extension(raw.trim()) {
        return Ok(ctx.view.resolve(raw, Existence::MayBeMissing)?.rel);
    }
    let rel = files::file_path(raw)?;
    if !ctx.view.sees(&rel) {
        return Err(files::missing(&rel));
    }
    Ok(rel)
}

/// Every commit of agent run `run_id`, newest first, with what each changed.
fn run(ctx: &Context, run_id: &str, only: Option<&str>) -> Result<Vec<CommitChanges>> {
    if uuid::Uuid::parse_str(run_id).is_err() {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!("run_id {run_id:?} is not a run id: give the UUID /agent/run answered"),
        ));
    }
    let ids = ctx
        .history
        .commits_of_run(run_id)
        .map_err(|e| ctx.history.scrub(e))?;
    if ids.is_empty() {
        return Err(Error::not_found(format!(
            "no commit on the branch carries Mirai-Run: {run_id}; the run changed nothing, or \
             its commits are not in this branch's history"
        )));
    }
    let repo = ctx.writer()?;
    ids.iter()
        .map(|c| repo.commit_changes(&c.id.to_string(), only, file_bound(ctx)))
        .collect()
}

/// The bound on the paths one commit taken back may change.
fn file_bound(ctx: &Context) -> FileBound {
    FileBound {
        changes: ctx.max_changes,
        move_notes: ctx.max_move_notes,
    }
}

/// Refuses a revert that would write what mirai may not (a path that is not
/// a note, a symlink, a submodule) or more notes than one commit may change.
fn check_notes(ctx: &Context, commits: &[CommitChanges]) -> Result<()> {
    let mut notes = std::collections::HashSet::new();
    for commit in commits {
        for file in &commit.files {
            let refuse = |why: String| {
                Error::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "commit {} changes {}, {why}; give `path` to take back its notes one at \
                         a time, or revert it with git",
                        commit.short, file.path
                    ),
                )
            };
            if !file.regular {
                return Err(refuse(
                    "which is not a regular file (a symlink, a submodule or a change of type) \
                     that mirai can write"
                        .to_string(),
                ));
            }
            let writable = if has_note_extension(&file.path) {
                ctx.view
                    .resolve(&file.path, Existence::MayBeMissing)
                    .map(drop)
            } else {
                ctx.view
                    .resolve_file_for_write(&file.path, Existence::MayBeMissing)
                    .and_then(|_| check_writable_type(ctx, &file.path))
            };
            if let Err(e) = writable {
                return Err(refuse(format!(
                    "which is not a note or file mirai may write ({})",
                    e.message
                )));
            }
            notes.insert(file.path.as_str());
        }
    }
    check_text(ctx, commits, notes.len())?;
    // The largest bound of the commits taken back: a move's is its own.
    let (max, setting) = commits
        .iter()
        .map(|commit| file_bound(ctx).of(&commit.subject))
        .max_by_key(|(max, _)| *max)
        .unwrap_or((ctx.max_changes, "MIRAI_CHANGES_MAX_PATCHES"));
    if notes.len() > max {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!(
                "taking this back changes {} notes; at most {max} change in one commit \
                 ({setting}): give `path` to take back one note at a time",
                notes.len(),
            ),
        ));
    }
    Ok(())
}

/// How many times the request body limit of text (each changed note before
/// and after, summed over the commits taken back) one revert of several notes
/// may rewrite. The work of a revert grows with that text (the diffs, the
/// index's update, hashing); this keeps it within about a second of CPU.
const REVERT_TEXT_BODIES: usize = 8;

/// Refuses, before any work, a revert of several notes whose text passes
/// [`REVERT_TEXT_BODIES`] request bodies: one note at a time (`path`) is the
/// way. A single note is never refused for its size (no smaller unit exists;
/// MIRAI_MAX_NOTE_BYTES bounds it).
fn check_text(ctx: &Context, commits: &[CommitChanges], notes: usize) -> Result<()> {
    if notes <= 1 {
        return Ok(());
    }
    let bytes: usize = commits
        .iter()
        .flat_map(|commit| &commit.files)
        .map(|file| {
            file.before.as_ref().map_or(0, Vec::len) + file.after.as_ref().map_or(0, Vec::len)
        })
        .sum();
    let max = ctx.max_content_bytes.saturating_mul(REVERT_TEXT_BODIES);
    if bytes <= max {
        return Ok(());
    }
    Err(Error::new(
        ErrorCode::InvalidRequest,
        format!(
            "taking this back rewrites {notes} notes holding {} of text (before and after);              one revert of several notes may rewrite at most {} ({REVERT_TEXT_BODIES} times              MIRAI_MAX_BODY_BYTES): give `path` to take back one note at a time",
            megabytes(bytes),
            megabytes(max)
        ),
    ))
}

/// `bytes` in MiB, one decimal.
fn megabytes(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// One note while the inverses apply: its text now, and as the inverses leave it.
struct Working {
    note: NotePath,
    current: Option<String>,
    text: Option<String>,
    /// An attachment instead: its bytes now, and as the inverses leave them.
    file: Option<(Bytes, Bytes)>,
}

/// An attachment's bytes at one moment (`None`: no file).
type Bytes = Option<Vec<u8>>;

/// Applies each commit's inverse, newest first, to the notes as this context
/// sees them, then plans each note's whole change (one plan per note, in the
/// order the notes were first met). A note that stands as the commit left it
/// gets back what the commit found, which is what its inverse gives where it
/// was made, without diffing or searching; only a note that moved since has
/// its inverse made and applied, all of it drawn from the request's `budget`.
fn plan_inverse(ctx: &Context, commits: &[CommitChanges], budget: &Budget) -> Result<Vec<Plan>> {
    let mut notes: Vec<Working> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for commit in commits {
        for file in &commit.files {
            if file.before == file.after {
                continue; // only the mode changed: no text to take back
            }
            let attachment = !has_note_extension(&file.path);
            let slot = match at.get(file.path.as_str()) {
                Some(&slot) => slot,
                None if attachment => {
                    let note = ctx
                        .view
                        .resolve_file_for_write(&file.path, Existence::MayBeMissing)?;
                    let current = ctx.view.current_file(&note)?;
                    at.insert(file.path.as_str(), notes.len());
                    notes.push(Working {
                        note,
                        text: None,
                        current: None,
                        file: Some((current.clone(), current)),
                    });
                    notes.len() - 1
                }
                None => {
                    let note = ctx
                        .view
                        .resolve_for_write(&file.path, Existence::MayBeMissing)?;
                    let current = ctx.view.current_text(&note)?;
                    at.insert(file.path.as_str(), notes.len());
                    notes.push(Working {
                        note,
                        text: current.clone(),
                        current,
                        file: None,
                    });
                    notes.len() - 1
                }
            };
            let working = &mut notes[slot];
            if let Some((_, bytes)) = &mut working.file {
                // Bytes are not merged: the file must stand as the commit left it.
                if *bytes != file.after {
                    return Err(Error::conflict(format!(
                        "cannot take back commit {} ({}) in {}: the file changed since, and                          mirai does not merge a file's bytes; write the version you want with                          files.write instead",
                        commit.short, commit.subject, working.note.rel
                    )));
                }
                *bytes = file.before.clone();
                continue;
            }
            let as_text = |bytes: &Option<Vec<u8>>| -> Result<Option<String>> {
                bytes
                    .as_ref()
                    .map(|b| String::from_utf8(b.clone()))
                    .transpose()
                    .map_err(|_| {
                        Error::conflict(format!(
                            "{} is not UTF-8 text in commit {}; mirai takes back changes to \
                             text notes only: revert it with git",
                            file.path, commit.short
                        ))
                    })
            };
            let (before, after) = (as_text(&file.before)?, as_text(&file.after)?);
            if working.text == after {
                working.text = before;
                continue;
            }
            let empty = |text: &Option<String>| text.as_deref().unwrap_or_default().is_empty();
            if empty(&before) && empty(&after) && before != after {
                // An empty note created or deleted that changed since: no diff has a
                // hunk for it to take back.
                return Err(Error::conflict(format!(
                    "cannot take back commit {} ({}) in {}: the note changed since; change \
                     it by hand instead",
                    commit.short, commit.subject, working.note.rel
                )));
            }
            let Some(forward) =
                patch::make_within(&file.path, before.as_deref(), after.as_deref(), budget)
            else {
                continue;
            };
            let inverse = patch::parse(&forward)?.reversed();
            let applied =
                patch::apply_within(&inverse, working.text.as_deref(), budget).map_err(|e| {
                    let why = if budget.exhausted() {
                        "the notes moved since, and placing the inverses where they moved to \
                         takes more work than one request may do; take back fewer notes at a \
                         time (`path`)"
                    } else {
                        "the note changed since in a way its inverse no longer applies to \
                         (mirai applies it strictly, as `git apply -R` would); change the note \
                         by hand instead"
                    };
                    Error::conflict(format!(
                        "cannot take back commit {} ({}) in {}: {why}. {}",
                        commit.short, commit.subject, working.note.rel, e.message
                    ))
                })?;
            working.text = applied.content;
        }
    }
    notes
        .into_iter()
        .map(|working| {
            if let Some((current, bytes)) = working.file {
                return plan_file(ctx, working.note, current, bytes);
            }
            plan_text(
                ctx,
                working.note,
                working.current,
                working.text.as_deref(),
                &GuardPolicy::UNGUARDED,
                budget,
            )
        })
        .collect()
}
