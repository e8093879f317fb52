//! `notes.move`: renames a note and rewrites every link that resolved to it
//! (and every link the move would otherwise turn elsewhere), each in its own
//! form ([`crate::vault::rewrite`]), as ONE commit that git sees as a rename:
//! the note's deletion, its creation at the new path and the linking notes'
//! changes, planned and landed on the one write path ([`land_all`]) like
//! `changes.apply`'s, so guards, dirty notes, `base_commit`, dry runs and
//! crash records behave the same.
//!
//! Which notes need a rewrite comes from the live index's link graph first
//! (the notes holding a link filed under either path's names whose target
//! the move changes, by the links the graph holds, and the moved note); only
//! those are read as they are now and their links found again, so the
//! rewrite works on the current text. At most `MIRAI_MOVE_MAX_NOTES` notes
//! besides the moved one are read (and so rewritten).
//!
//! An attachment (a `from` that is not a `.md` path) moves the same way, as
//! bytes ([`plan_file`]), to a path that is not a note and whose extension
//! `files.write` would take; every `![[x.png]]`, `![](assets/x.png)` and
//! reference definition reaching it is rewritten in the same commit. One row
//! rather than a `files.move`: the rules (links, `MIRAI_MOVE_MAX_NOTES`,
//! `update_links`, `base_commit`, the subject a replay and a revert know)
//! are the same, and a second row would have to copy them.

use std::borrow::Cow;
use std::cell::RefCell;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::change::{land_all, plan_delete, plan_file, plan_text, status_lines, Plan};
use super::files_write::check_writable_type;
use super::guard::GuardPolicy;
use super::{Class, Context, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::path::has_note_extension;
use crate::notes::{Existence, Seen, View};
use crate::patch::Budget;
use crate::repo::{LINKS_UNCHANGED, MOVE_LINKS_TRAILER, MOVE_SUBJECT};
use crate::vault::resolve::Files;
use crate::vault::rewrite::Move;

/// `notes.move`'s request.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MoveRequest {
    /// The note (or attachment) to move, relative to the notes root.
    pub from: String,
    /// Its new path; must not exist.
    pub to: String,
    /// Rewrite the links to the note (default true); false renames only.
    #[serde(default = "yes")]
    #[schemars(extend("default" = true))]
    pub update_links: bool,
    /// Refuse (conflict) when any note the move changes changed between this commit and HEAD.
    #[serde(default)]
    pub base_commit: Option<String>,
}

fn yes() -> bool {
    true
}

/// What a move did.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Moved {
    pub from: String,
    pub to: String,
    /// `null` only in a dry run, where nothing is committed.
    pub commit: Option<String>,
    /// The notes whose links were rewritten (by their paths after the move), sorted.
    pub rewritten: Vec<RewrittenNote>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RewrittenNote {
    pub path: String,
    /// How many of its links changed.
    pub links: usize,
}

/// `notes.move`: rename a note, rewriting the links to it.
pub struct NotesMove;

impl Operation for NotesMove {
    const NAME: &'static str = "notes.move";
    const EXAMPLE: &'static str =
        r##"await mirai.notes.move({from: "trips/porto.md", to: "trips/2024/porto.md"})"##;
    const CLASS: Class = Class::Write;
    const SUMMARY: &'static str = "Move a note or file; links to it follow.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/notes/move", HttpInput::Body);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = MoveRequest;
    type Response = Moved;

    fn run(ctx: &Context, request: MoveRequest) -> Result<Moved> {
        let rewritten: RefCell<Vec<RewrittenNote>> = RefCell::new(Vec::new());
        let names: RefCell<(String, String)> = RefCell::new(Default::default());
        let (_, commit) = land_all(
            ctx,
            request.base_commit.as_deref(),
            |ctx, budget| {
                let (plans, notes) = plan_move(ctx, &request, budget)?;
                *names.borrow_mut() = (plans[0].note.rel.clone(), plans[1].note.rel.clone());
                *rewritten.borrow_mut() = notes;
                Ok(plans)
            },
            |plans| {
                let (from, to) = &*names.borrow();
                // A move that left links alone says so, so a replay does too.
                let trailers: &[(&str, &str)] = if request.update_links {
                    &[]
                } else {
                    &[(MOVE_LINKS_TRAILER, LINKS_UNCHANGED)]
                };
                ctx.commit_message_with(
                    &format!("{MOVE_SUBJECT}{from} -> {to}"),
                    &status_lines(plans),
                    trailers,
                )
            },
        )?;
        let (from, to) = names.into_inner();
        Ok(Moved {
            from,
            to,
            commit,
            rewritten: rewritten.into_inner(),
        })
    }
}

/// The notes a move of `from` to `to` would change now: the two paths and
/// every note whose links it would rewrite (an approval compares them with
/// what a move proposal shows).
pub(super) fn paths_changed_now(
    ctx: &Context,
    (from, to): (&str, &str),
    update_links: bool,
    budget: &Budget,
) -> Result<Vec<String>> {
    let request = MoveRequest {
        from: from.to_string(),
        to: to.to_string(),
        update_links,
        base_commit: None,
    };
    let (plans, _) = plan_move(ctx, &request, budget)?;
    Ok(plans.into_iter().map(|plan| plan.note.rel).collect())
}

/// The refusal of a move whose links reach more than `max` other notes.
fn too_many(from: &str, max: usize) -> Error {
    Error::new(
        ErrorCode::InvalidRequest,
        format!(
            "moving {from} rewrites links in more than {max} notes (MIRAI_MOVE_MAX_NOTES); \
             move with update_links: false and fix the links in smaller steps"
        ),
    )
}

/// The move's plans (the deletion of `from`, the creation of `to`, then each
/// rewritten note by path) and the notes whose links changed.
fn plan_move(
    ctx: &Context,
    request: &MoveRequest,
    budget: &Budget,
) -> Result<(Vec<Plan>, Vec<RewrittenNote>)> {
    // An attachment moves as bytes; the links to it are rewritten as a note's.
    let attachment = !has_note_extension(request.from.trim());
    let resolve = if attachment {
        View::resolve_file_for_write
    } else {
        View::resolve_for_write
    };
    let from = resolve(&ctx.view, &request.from, Existence::MustExist)?;
    let to = resolve(&ctx.view, &request.to, Existence::MayBeMissing)?;
    if attachment {
        check_writable_type(ctx, &to.rel)?;
    }
    if from.rel == to.rel {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!(
                "from and to are both {}: give the note's new path as `to`",
                from.rel
            ),
        ));
    }
    let exists = if attachment {
        ctx.view.current_file(&to)?.is_some()
    } else {
        ctx.view.current_text(&to)?.is_some()
    };
    if exists {
        return Err(Error::conflict(format!(
            "{} already exists; a move never replaces a note or file: choose another `to`, or \
             delete it first",
            to.rel
        )));
    }
    let (text, bytes) = if attachment {
        let bytes = ctx
            .view
            .current_file(&from)?
            .ok_or_else(|| crate::notes::files::missing(&from.rel))?;
        (String::new(), Some(bytes))
    } else {
        let text = ctx
            .view
            .current_text(&from)?
            .ok_or_else(|| crate::notes::suggest::missing(&from.rel))?;
        (text, None)
    };
    let mut moved_text = text.clone();
    let mut rewritten: Vec<RewrittenNote> = Vec::new();
    let mut others: Vec<Plan> = Vec::new();
    if request.update_links {
        let vault = ctx.index.vault_as_if(&Seen::all(ctx.view.unsaved()))?;
        // The graph may lag the disk by a moment; the two notes are as the disk says.
        let before: Cow<'_, Files> = match (vault.note(&from.rel), vault.note(&to.rel)) {
            (Some(_), None) => Cow::Borrowed(vault.files()),
            _ => {
                let mut files = vault.files().clone();
                files.insert(&from.rel);
                files.remove(&to.rel);
                Cow::Owned(files)
            }
        };
        let after = before.moved(&from.rel, &to.rel);
        let mv = Move {
            from: &from.rel,
            to: &to.rel,
            before: &before,
            after: &after,
        };
        let mut read = 0usize;
        for path in vault.move_candidates(&from.rel, &to.rel, |path, link| {
            mv.wanted(path, link).is_some()
        }) {
            let (note, current) = if path == from.rel {
                (from.clone(), text.clone())
            } else {
                // Every note read counts, rewritten or not.
                read += 1;
                if read > ctx.max_move_notes {
                    return Err(too_many(&from.rel, ctx.max_move_notes));
                }
                let Ok(note) = ctx.view.resolve_for_write(&path, Existence::MustExist) else {
                    continue; // gone since the graph saw it
                };
                match ctx.view.current_text(&note)? {
                    Some(current) => (note, current),
                    None => continue,
                }
            };
            let done = mv.rewrite(&path, &current).map_err(|bad| {
                Error::conflict(format!(
                    "{path} line {}: the link {} cannot be written to reach its note after the \
                     move (wikilinks cannot name a path holding [ ] | # ^); edit that link \
                     first, or move with update_links: false",
                    bad.line, bad.link
                ))
            })?;
            let Some(done) = done else { continue };
            rewritten.push(RewrittenNote {
                path: mv.new_path(&path).to_string(),
                links: done.links,
            });
            if path == from.rel {
                moved_text = done.content;
                continue;
            }
            others.push(plan_text(
                ctx,
                note,
                Some(current),
                Some(&done.content),
                &GuardPolicy::UNGUARDED,
                budget,
            )?);
        }
    }
    rewritten.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(bytes) = bytes {
        let mut plans = vec![
            plan_file(ctx, from, Some(bytes.clone()), None)?,
            plan_file(ctx, to, None, Some(bytes))?,
        ];
        plans.extend(others);
        return Ok((plans, rewritten));
    }
    let mut plans = vec![
        plan_delete(ctx, &from.rel, budget)?,
        plan_text(
            ctx,
            to,
            None,
            Some(&moved_text),
            &GuardPolicy::UNGUARDED,
            budget,
        )?,
    ];
    plans.extend(others);
    Ok((plans, rewritten))
}
