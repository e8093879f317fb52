//! A pull's replay of a local `notes.move` commit, as `impl Repo`: rather
//! than re-applying the move's diffs (which would fail, or bring back the
//! note's old text, when the remote changed the note or its linkers), the
//! move is run again on the remote's tree: the note's text as the remote
//! has it moves to the new path, then every link that resolves to it at that
//! point (the remote's own new links included) is rewritten as `notes.move`
//! rewrites them ([`crate::vault::rewrite`]); a move made with
//! `update_links: false` (its `Mirai-Move-Links: unchanged` trailer) only
//! moves the note. Whatever else the commit holds (a person's edit folded in
//! before the push) is its tree against the pure move of its parent, and is
//! replayed on top as any commit's change is, so nothing of it is lost. The
//! commit keeps its message and author; like every replayed commit it is
//! only an object until the replay lands (see [`super::replay`]).

use std::path::Path;

use git2::build::TreeUpdateBuilder;
use git2::{Commit, Delta, ObjectType, Oid, Tree, TreeWalkMode, TreeWalkResult};

use super::commits::{LINKS_UNCHANGED, MOVE_LINKS_TRAILER, MOVE_SUBJECT};
use super::history::trailer;
use super::{git_error, Author, Repo};
use crate::error::{Error, Result};
use crate::notes::path;
use crate::vault::resolve::Files;
use crate::vault::rewrite::Move;

/// A move mirai made, as its commit records it.
pub(super) struct MoveOf {
    from: String,
    to: String,
    /// Whether the move rewrote links (false: made with `update_links: false`,
    /// which its commit's trailer says).
    links: bool,
}

impl Repo {
    /// The move `commit` is, when mirai made it: its subject names `from`
    /// and `to`, and it deletes the one and adds the other.
    pub(super) fn move_of(&self, commit: &Commit<'_>) -> Result<Option<MoveOf>> {
        let Some(rest) = commit.summary().and_then(|s| s.strip_prefix(MOVE_SUBJECT)) else {
            return Ok(None);
        };
        let cannot = |e| git_error("cannot read a move's commit", e);
        let tree = commit.tree().map_err(cannot)?;
        let parent_tree = match commit.parent(0) {
            Ok(parent) => parent.tree().map_err(cannot)?,
            Err(_) => return Ok(None),
        };
        let diff = self
            .git
            .diff_tree_to_tree(Some(&parent_tree), Some(&tree), None)
            .map_err(cannot)?;
        let mut deleted = Vec::new();
        let mut added = Vec::new();
        for delta in diff.deltas() {
            let path =
                |file: git2::DiffFile<'_>| file.path().and_then(Path::to_str).map(str::to_string);
            match delta.status() {
                Delta::Deleted => deleted.extend(path(delta.old_file())),
                Delta::Added => added.extend(path(delta.new_file())),
                _ => {}
            }
        }
        let message = String::from_utf8_lossy(commit.message_raw_bytes());
        let links = trailer(&message, MOVE_LINKS_TRAILER).as_deref() != Some(LINKS_UNCHANGED);
        // A path may hold " -> " itself: the split whose sides the commit deleted and added.
        Ok(rest.match_indices(" -> ").find_map(|(at, arrow)| {
            let (from, to) = (&rest[..at], &rest[at + arrow.len()..]);
            (deleted.iter().any(|d| d == from) && added.iter().any(|a| a == to)).then(|| MoveOf {
                from: from.to_string(),
                to: to.to_string(),
                links,
            })
        }))
    }

    /// Runs the move of `commit` again on `onto`'s tree, then whatever else
    /// the commit changed: its tree against what the pure move makes of its
    /// parent's (an edit a person folded into the move's commit with `git
    /// commit --amend` or a `fixup!`), applied as any replayed commit's
    /// change is. The remote having deleted `from` or made `to`, or the rest
    /// no longer applying, is a 409 `conflict` (the commit is kept back
    /// whole). A commit that is not the move its subject says at all (the
    /// move cannot be made again on its own parent) replays by its diffs.
    pub(super) fn replay_move(
        &self,
        commit: &Commit<'_>,
        mv: &MoveOf,
        onto: &Commit<'_>,
        committer: &Author,
    ) -> Result<Oid> {
        let git = &self.git;
        let cannot = |e| git_error(&format!("cannot replay the move of {}", mv.from), e);
        let tree = commit.tree().map_err(cannot)?;
        let parent_tree = commit
            .parent(0)
            .and_then(|parent| parent.tree())
            .map_err(cannot)?;
        let Some(pure) = self
            .move_update(mv, &parent_tree)
            .ok()
            .and_then(|mut update| update.create_updated(git, &parent_tree).ok())
            .and_then(|id| git.find_tree(id).ok())
        else {
            return self.replay_one(commit, onto, committer);
        };
        let base = onto.tree().map_err(cannot)?;
        let moved = self
            .move_update(mv, &base)?
            .create_updated(git, &base)
            .and_then(|id| git.find_tree(id))
            .map_err(|e| {
                Error::conflict(format!(
                    "{} and its links do not fit the remote's folders: {}",
                    mv.to,
                    e.message()
                ))
            })?;
        let rest = self.changes_onto(Some(&pure), &tree, &moved)?;
        self.commit_replayed(
            commit,
            onto,
            committer,
            (&moved, rest),
            "what the move's commit also changed",
        )
    }

    /// The changes the move `mv` makes to `base`: the note's text there
    /// moves (its own relative links rewritten to still reach their notes),
    /// and every note of `base` with a link resolving to it is rewritten; a
    /// move that left links alone only moves the note.
    fn move_update(&self, mv: &MoveOf, base: &Tree<'_>) -> Result<TreeUpdateBuilder> {
        let git = &self.git;
        let (from, to) = (mv.from.as_str(), mv.to.as_str());
        let cannot = |e| git_error(&format!("cannot replay the move of {from}"), e);
        let entry = base
            .get_path(Path::new(from))
            .map_err(|_| Error::conflict(format!("the remote deleted or moved {from}")))?;
        if base.get_path(Path::new(to)).is_ok() {
            return Err(Error::conflict(format!("the remote made {to} too")));
        }
        let mut update = TreeUpdateBuilder::new();
        if !path::has_note_extension(from) {
            // An attachment moves as the remote holds it; only notes are rewritten.
            if mv.links {
                self.rewrite_links(mv, base, &mut update)?;
            }
            update.remove(from);
            update.upsert(to, entry.id(), super::replay::file_mode(entry.filemode()));
            return Ok(update);
        }
        let text = if mv.links {
            self.rewrite_links(mv, base, &mut update)?
                .ok_or_else(|| Error::conflict(format!("{from} is not a note on the remote")))?
        } else {
            let blob = super::blob_within(git, entry.id(), self.notes.max_note_bytes())?
                .ok_or_else(|| {
                    Error::conflict(format!("{from} is past MIRAI_MAX_NOTE_BYTES on the remote"))
                })?;
            std::str::from_utf8(blob.content())
                .map_err(|_| Error::conflict(format!("{from} is not UTF-8 text on the remote")))?
                .to_string()
        };
        let id = git.blob(text.as_bytes()).map_err(cannot)?;
        update.remove(from);
        update.upsert(to, id, super::replay::file_mode(entry.filemode()));
        Ok(update)
    }

    /// Rewrites, into `update`, every note of `base` whose links reach the
    /// moved note or attachment, and answers the moved note's own text with
    /// its links rewritten (`None`: `from` is not a note of `base`).
    fn rewrite_links(
        &self,
        mv: &MoveOf,
        base: &Tree<'_>,
        update: &mut TreeUpdateBuilder,
    ) -> Result<Option<String>> {
        let git = &self.git;
        let (from, to) = (mv.from.as_str(), mv.to.as_str());
        let cannot = |e| git_error(&format!("cannot replay the move of {from}"), e);
        let (paths, notes) = self.files_of(base)?;
        let before = files(&paths);
        let after = before.moved(from, to);
        let rewrite = Move {
            from,
            to,
            before: &before,
            after: &after,
        };
        let names = [stem(from), stem(to)];
        let mut moved = None;
        for (rel, id) in notes {
            // A note past MIRAI_MAX_NOTE_BYTES is never parsed for links.
            let Some(blob) = super::blob_within(git, id, self.notes.max_note_bytes())? else {
                if rel == from {
                    return Err(Error::conflict(format!(
                        "{from} is past MIRAI_MAX_NOTE_BYTES on the remote"
                    )));
                }
                continue;
            };
            let Ok(text) = std::str::from_utf8(blob.content()) else {
                if rel == from {
                    return Err(Error::conflict(format!(
                        "{from} is not UTF-8 text on the remote"
                    )));
                }
                continue;
            };
            if rel != from && !may_link(text, &names) {
                continue;
            }
            let rewritten = rewrite.rewrite(&rel, text).map_err(|bad| {
                Error::conflict(format!(
                    "{rel} line {}: the link {} cannot be written to reach its note after the move",
                    bad.line, bad.link
                ))
            })?;
            if rel == from {
                moved = Some(rewritten.map_or_else(|| text.to_string(), |r| r.content));
            } else if let Some(done) = rewritten {
                let new = git.blob(done.content.as_bytes()).map_err(cannot)?;
                let mode = base.get_path(Path::new(&rel)).map_err(cannot)?.filemode();
                update.upsert(&rel, new, super::replay::file_mode(mode));
            }
        }
        Ok(moved)
    }

    /// Every visible file of `tree` (what links may reach), and its notes
    /// with their blobs.
    fn files_of(&self, tree: &Tree<'_>) -> Result<(Vec<String>, Vec<Blob>)> {
        let mut paths = Vec::new();
        let mut notes = Vec::new();
        tree.walk(TreeWalkMode::PreOrder, |folder, entry| {
            let Some(name) = entry.name() else {
                return TreeWalkResult::Skip;
            };
            if name.starts_with('.') {
                return TreeWalkResult::Skip;
            }
            if entry.kind() != Some(ObjectType::Blob) {
                return TreeWalkResult::Ok;
            }
            let rel = format!("{folder}{name}");
            if path::has_note_extension(&rel) {
                notes.push((rel.clone(), entry.id()));
            }
            paths.push(rel);
            TreeWalkResult::Ok
        })
        .map_err(|e| git_error("cannot list the remote's files", e))?;
        Ok((paths, notes))
    }
}

/// A note of a tree: its path and blob.
type Blob = (String, Oid);

fn files(paths: &[String]) -> Files {
    let mut files = Files::default();
    for path in paths {
        files.insert(path);
    }
    files
}

/// A path's file name without `.md`, lowercased: what every link that may
/// name it holds (as written, or with spaces percent-encoded).
fn stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
    name.strip_suffix(".md").map(str::to_string).unwrap_or(name)
}

/// Whether `text` may hold a link to a note named by one of `names`: it holds
/// a name, or a percent escape (a link may spell any of a name's characters
/// as one, as `notes.move` itself writes `p%20%281%29.md`), which the rewrite
/// then resolves for certain.
fn may_link(text: &str, names: &[String]) -> bool {
    if text.contains('%') {
        return true;
    }
    let lower = text.to_lowercase();
    names.iter().any(|name| lower.contains(name.as_str()))
}
