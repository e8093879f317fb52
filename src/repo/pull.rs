//! A pull's fast-forward, as `impl Repo`: the branch moves to a fetched commit
//! that descends from it, and the index and the working tree follow, holding
//! `index.lock` like every write (ARCHITECTURE.md, "libgit2 touches only
//! `.git`": mirai writes the working-tree bytes itself, through the root
//! handle; libgit2 only reads objects and writes the index and the ref).
//!
//! Only the paths that differ between the two commits are touched. One of them
//! whose file or index entry holds work that is neither side's (a person's
//! uncommitted edit, a staged change, an untracked file in the way) stops the
//! pull before anything is written, as `git merge` stops. A file that already
//! holds the incoming bytes counts as clean, so a pull that died half-way
//! simply runs again. Hidden paths (`.mirai/`, `.obsidian/`, any component
//! starting with a dot), symlinks and submodules a remote tracks are never
//! written: their index entries carry git's skip-worktree bit, so `git status`
//! stays clean and nothing of the remote's choosing lands there
//! (ARCHITECTURE.md, "A remote is as hostile as any caller").
//! A file past `MIRAI_MAX_FILE_BYTES` is kept out the same way (libgit2 reads
//! an object whole, so writing it would hold all of it; its size comes from
//! the object's header).
//! An entry this clone cannot hold at all (a name Linux refuses, a file entry
//! naming a tree: [`super::unheld`]) is left out, file and index entry, with a
//! warning, and never stops the pull.

use std::collections::HashMap;

use git2::{Delta, DiffDelta, DiffOptions, IndexEntry, Oid, Repository};

use super::intent::{NoteIntent, Stage};
use super::{
    blob_id, git_error, index_entry, unheld, unstatted_entry, Author, Repo, Source, SKIP_WORKTREE,
};
use crate::error::{Error, Result};
use crate::notes::root::{Refusal, Slot};
use crate::notes::{path, refused};

/// What a pull found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forward {
    /// The branch already is the remote's commit, or descends from it.
    Nothing,
    /// Both sides have commits the other lacks: a fast-forward cannot join them.
    Diverged,
    /// A path the pull would change holds someone's uncommitted work: nothing moved.
    Blocked(String),
    /// The branch moved from `from` to `to`; `notes` are the visible notes
    /// written (`None`: deleted), for the live index; `too_large` the notes
    /// written past `MIRAI_MAX_NOTE_BYTES` (on disk, never read as text).
    Moved {
        from: Option<String>,
        to: String,
        notes: Vec<(String, Option<String>)>,
        too_large: Vec<String>,
    },
}

/// One path the pull changes.
struct Change {
    path: String,
    old: Option<Oid>,
    new: Option<(Oid, i32)>,
    /// Written to the working tree (else only its index entry changes, skip-worktree).
    visible: bool,
    /// What the index may hold for the old side: `old`, or the old file kept
    /// out of the working tree for its size (then `old` is `None`: no file).
    staged_old: Option<Oid>,
    /// The new file, kept out of the working tree for its size where the old
    /// one was a file: the file goes, the index holds this as skip-worktree.
    kept: Option<(Oid, i32)>,
}

/// What a pull wrote: the index entries to stage, the visible notes (`None`:
/// deleted) and the notes past `MIRAI_MAX_NOTE_BYTES`, for the live index.
struct Written {
    entries: Vec<(String, Option<IndexEntry>)>,
    notes: Vec<(String, Option<String>)>,
    too_large: Vec<String>,
}

/// The index entry of a file kept out of the working tree (skip-worktree).
fn kept_out(rel: &str, id: Oid, mode: i32) -> IndexEntry {
    let mut entry = unstatted_entry(rel, id);
    entry.mode = mode as u32;
    entry.flags_extended = SKIP_WORKTREE;
    entry
}

/// What the pull does at the path where `delta` has the two trees differ
/// (`None`: nothing, as neither side can be held). A side this clone cannot
/// hold counts as absent: never written, never staged. A file past
/// `max_file_bytes` is held in the index only (skip-worktree), never written.
fn change_of(git: &Repository, delta: &DiffDelta, max_file_bytes: u64) -> Option<Change> {
    let (old, new) = (delta.old_file(), delta.new_file());
    let Some(rel) = new.path().or(old.path()).and_then(|p| p.to_str()) else {
        log::warn!("pull: skipped a path that is not UTF-8");
        return None;
    };
    let mut skipped = None;
    let mut side = |there: bool, file: &git2::DiffFile| {
        if !there {
            return None;
        }
        match unheld::unholdable(git, rel, file.mode(), file.id()) {
            Some(reason) => {
                skipped = Some(reason);
                None
            }
            None => Some(file.id()),
        }
    };
    let old_id = side(delta.status() != Delta::Added, &old);
    let new_entry =
        side(delta.status() != Delta::Deleted, &new).map(|id| (id, i32::from(new.mode())));
    if let Some(reason) = skipped {
        log::warn!("pull: skipped {rel:?}, which this clone cannot hold: {reason}");
    }
    if old_id.is_none() && new_entry.is_none() {
        return None;
    }
    let blob = |mode: git2::FileMode| {
        matches!(mode, git2::FileMode::Blob | git2::FileMode::BlobExecutable)
    };
    let plain = |mode: git2::FileMode, there: bool| !there || blob(mode);
    let visible = !path::is_hidden(rel)
        && plain(old.mode(), old_id.is_some())
        && plain(new.mode(), new_entry.is_some());
    let large = |file: &git2::DiffFile, id: Option<Oid>| {
        id.and_then(|id| unheld::past_file_limit(git, rel, (file.mode(), id), max_file_bytes))
    };
    let old_large = large(&old, old_id).is_some();
    let new_large = large(&new, new_entry.map(|(id, _)| id));
    if let Some(reason) = &new_large {
        log::warn!("pull: kept {rel:?} out of the working tree: {reason}");
    }
    let change = |old: Option<Oid>, new, visible, kept| Change {
        path: rel.to_string(),
        old,
        new,
        visible,
        staged_old: old_id,
        kept,
    };
    Some(match (visible, old_large, new_large.is_some()) {
        // The old file goes; the new one is held in the index only.
        (true, false, true) if old_id.is_some() => change(old_id, None, true, new_entry),
        // Nothing on disk before or after: the index entry alone changes.
        (true, _, true) => change(old_id, new_entry, false, None),
        // No file before (kept out for its size): the new file is written, or nothing is.
        (true, true, false) => change(None, new_entry, new_entry.is_some(), None),
        (visible, _, _) => change(old_id, new_entry, visible, None),
    })
}

impl Repo {
    /// The reference HEAD moves (`refs/heads/<branch>`, or `HEAD` when
    /// detached) and the commit it points at (`None`: unborn).
    pub fn branch_head(&self) -> Result<(String, Option<Oid>)> {
        self.head_target().map_err(|e| self.scrub(e))
    }

    /// Moves HEAD's branch to `target` when it descends from HEAD, with the
    /// index and the working tree (see the module's comment); `author` signs the reflog.
    pub fn fast_forward(&self, target: Oid, author: &Author) -> Result<Forward> {
        let mut journal = self.begin_write()?;
        let result = self.fast_forward_locked(&mut journal, target, author);
        journal.idle();
        result.map_err(|e| self.scrub(e))
    }

    fn fast_forward_locked(
        &self,
        journal: &mut super::intent::Journal,
        target: Oid,
        author: &Author,
    ) -> Result<Forward> {
        let git = &self.git;
        self.check_on_branch()?;
        let (reference, head) = self.head_target()?;
        if let Some(head) = head {
            if head == target || git.graph_descendant_of(head, target).unwrap_or(false) {
                return Ok(Forward::Nothing);
            }
            if !git.graph_descendant_of(target, head).unwrap_or(false) {
                return Ok(Forward::Diverged);
            }
        }
        let log = format!("pull: fast-forward to {target}");
        self.advance_locked(
            journal,
            (&reference, head),
            target,
            (author, &log),
            &HashMap::new(),
            &mut || Ok(()),
        )
    }

    /// Moves `reference` from `head` to `target` (any commit: a descendant, or
    /// a replay's new tip), with the index and the working tree, under
    /// `index.lock`: the paths that differ between the two commits are checked
    /// first (someone's work in the way answers [`Forward::Blocked`] with
    /// nothing changed), then `prepare` runs (its failure also changes
    /// nothing here), then the files are written, the index staged and the
    /// reference moved by compare-and-swap. The change stream is told of the
    /// new commits as `sync`, each replayed one with the id it `replaces`
    /// (new id -> old id).
    pub(super) fn advance_locked(
        &self,
        journal: &mut super::intent::Journal,
        (reference, head): (&str, Option<Oid>),
        target: Oid,
        (author, log): (&Author, &str),
        replaces: &HashMap<Oid, Oid>,
        prepare: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Forward> {
        let changes = self.changes_between(head, target)?;
        let lock = self.lock_index(journal)?;
        let index = self.read_index(&lock)?;
        let work = match self.clean(&changes, &index)? {
            Ok(work) => work,
            Err(reason) => return Ok(Forward::Blocked(reason)),
        };
        prepare()?;

        // Every path the pull changes, so a restart after a kill puts the
        // working tree back to HEAD (the branch did not move) or puts the
        // index right (it did): the working tree equals HEAD either way.
        let recorded: Vec<NoteIntent> = changes
            .iter()
            .zip(&work)
            .map(|(change, work_id)| NoteIntent {
                note: change.path.clone(),
                before: change.old.map(|id| id.to_string()),
                after: change.new.map(|(id, _)| id.to_string()),
                index_before: index.get(&change.path, 0).map(|entry| entry.id.to_string()),
                skip_worktree: work_id.is_none(),
                released: None,
            })
            .collect();
        journal.record(|intent| {
            intent.stage = Stage::Committing;
            intent.notes = recorded;
            intent.parent = head.map(|id| id.to_string());
            intent.commit = Some(target.to_string());
            intent.reference = Some(reference.to_string());
        })?;
        let Written {
            entries,
            notes,
            too_large,
        } = self.write_changes(&changes, work)?;
        // As every index mirai writes: racily clean entries of other files are smudged.
        let (paths, new_entries): (Vec<String>, Vec<Option<IndexEntry>>) =
            entries.into_iter().unzip();
        let changed: Vec<(&str, Option<IndexEntry>)> =
            paths.iter().map(String::as_str).zip(new_entries).collect();
        let index = self.carried_entries(index, changed);
        let (bytes, stamp) = super::index_file::encode(&index, self.kept_index().buffer());
        lock.stage(&bytes, |id| {
            journal.record(|intent| intent.index_lock.push(id))
        })?;
        self.move_reference(
            journal,
            (reference, head, target),
            author,
            log,
            (Source::Sync, replaces),
        )?;
        self.releaser.keep_git_file(&lock.index_path());
        match lock.commit() {
            Ok(()) => self.kept_index().keep(stamp, index, bytes),
            Err(e) => log::warn!("pulled {target} but could not replace the index: {e}"),
        }
        Ok(Forward::Moved {
            from: head.map(|id| id.to_string()),
            to: target.to_string(),
            notes,
            too_large,
        })
    }

    /// What the pull changes between `head` and `target`, path by path.
    fn changes_between(&self, head: Option<Oid>, target: Oid) -> Result<Vec<Change>> {
        let git = &self.git;
        let tree_of = |id: Option<Oid>| -> Result<Option<git2::Tree<'_>>> {
            id.map(|id| git.find_commit(id).and_then(|c| c.tree()))
                .transpose()
                .map_err(|e| git_error("cannot read a commit's tree", e))
        };
        let (old_tree, new_tree) = (tree_of(head)?, tree_of(Some(target))?);
        let max_file_bytes = self.notes.max_file_bytes();
        let mut options = DiffOptions::new();
        options.include_typechange(false);
        let diff = git
            .diff_tree_to_tree(old_tree.as_ref(), new_tree.as_ref(), Some(&mut options))
            .map_err(|e| git_error("cannot compare the two commits", e))?;
        Ok(diff
            .deltas()
            .filter_map(|delta| change_of(git, &delta, max_file_bytes))
            .collect())
    }

    /// The working tree's blob of each change (`None`: an index entry alone
    /// changes), once every visible path's file and entry hold one side's
    /// bytes; `Err`: why the pull stops (someone's work is in the way).
    fn clean(
        &self,
        changes: &[Change],
        index: &super::index_file::Entries,
    ) -> Result<std::result::Result<Vec<Option<Option<Oid>>>, String>> {
        let mut work = Vec::with_capacity(changes.len());
        for change in changes {
            if !change.visible {
                work.push(None);
                continue;
            }
            let slot = self.notes.existing_slot(&change.path);
            let bytes = match slot {
                Ok(Some(slot)) => match slot.read() {
                    Ok(bytes) => bytes,
                    // A folder where the pull puts a file (a local commit kept
                    // back made it): clean when the pull removes every file in it.
                    Err(Refusal::Folder) if change.new.is_some() => {
                        if !emptied_by(&slot, &change.path, changes) {
                            return Ok(Err(format!(
                                "{} is a folder holding files of someone's that the pull would \
                                 replace with a file; move them away, then sync again (nothing \
                                 was changed)",
                                change.path
                            )));
                        }
                        None
                    }
                    Err(r) => return Err(refused(&change.path, r)),
                },
                Ok(None) => None,
                Err(e) => return Ok(Err(e.message)),
            };
            let work_id = bytes.as_deref().map(blob_id).transpose()?;
            let new_id = change.new.map(|(id, _)| id);
            let staged = index.get(&change.path, 0).map(|entry| entry.id);
            let conflicted = (1..=3).any(|stage| index.get(&change.path, stage).is_some());
            let clean = !conflicted
                && (staged == change.staged_old || staged == new_id)
                && (work_id == change.old || work_id == new_id);
            if !clean {
                return Ok(Err(format!(
                    "{} has uncommitted changes that the pull would overwrite; commit or discard \
                     them, then sync again (nothing was changed)",
                    change.path
                )));
            }
            work.push(Some(work_id));
        }
        Ok(Ok(work))
    }

    /// Writes each change into the working tree (`work`: what [`Repo::clean`]
    /// found there) and answers the index entries to stage and the notes the
    /// live index is told of.
    fn write_changes(&self, changes: &[Change], work: Vec<Option<Option<Oid>>>) -> Result<Written> {
        let mut entries: Vec<(String, Option<IndexEntry>)> = Vec::with_capacity(changes.len());
        let mut notes = Vec::new();
        let mut too_large = Vec::new();
        // Deletions first, so a folder they empty can become a file.
        let (deletions, writes): (Vec<_>, Vec<_>) = changes
            .iter()
            .zip(work)
            .partition(|(change, _)| change.new.is_none());
        for (change, work_id) in deletions.into_iter().chain(writes) {
            let Some(work_id) = work_id else {
                let entry = change
                    .new
                    .map(|(id, mode)| kept_out(&change.path, id, mode));
                entries.push((change.path.clone(), entry));
                continue;
            };
            let entry = match change.new {
                Some((id, _)) => {
                    let blob = self
                        .git
                        .find_blob(id)
                        .map_err(|e| git_error(&format!("cannot read {}", change.path), e))?;
                    let slot = self.notes.slot(&change.path, true)?;
                    if slot.holds_folder() {
                        slot.remove_empty_folder().map_err(|e| {
                            Error::conflict(format!(
                                "{} is a folder the pull must replace with a file, and it is \
                                 not empty ({e}); move its files away, then sync again",
                                change.path
                            ))
                        })?;
                    }
                    let meta = if work_id == Some(id) {
                        slot.stat().map_err(|r| refused(&change.path, r))?
                    } else {
                        slot.write(blob.content()).map_err(|e| {
                            Error::internal(format!("cannot write {}: {e}", change.path))
                        })?
                    };
                    if path::has_note_extension(&change.path) {
                        // A note past the limit is the person's file, never read as text.
                        if blob.size() as u64 > self.notes.max_note_bytes() {
                            too_large.push(change.path.clone());
                        } else if let Ok(text) = String::from_utf8(blob.content().to_vec()) {
                            notes.push((change.path.clone(), Some(text)));
                        }
                    }
                    Some(index_entry(&change.path, id, &meta))
                }
                None => {
                    if let Some(slot) = self.notes.existing_slot(&change.path)? {
                        if work_id.is_some() {
                            slot.remove().map_err(|r| refused(&change.path, r))?;
                        }
                    }
                    if path::has_note_extension(&change.path) {
                        notes.push((change.path.clone(), None));
                    }
                    change
                        .kept
                        .map(|(id, mode)| kept_out(&change.path, id, mode))
                }
            };
            entries.push((change.path.clone(), entry));
        }
        Ok(Written {
            entries,
            notes,
            too_large,
        })
    }
}

/// Whether the pull's deletions remove every file of the folder `slot`
/// names (`path`), so the file the pull puts there can take its place.
fn emptied_by(slot: &Slot, path: &str, changes: &[Change]) -> bool {
    let prefix = format!("{path}/");
    let deleted = changes
        .iter()
        .filter(|c| c.visible && c.new.is_none() && c.path.starts_with(&prefix))
        .count();
    matches!(slot.files_in_folder(FOLDER_ENTRIES_LIMIT), Ok(Some(files)) if files == deleted)
}

/// The most entries [`emptied_by`] looks at in a folder.
const FOLDER_ENTRIES_LIMIT: usize = 10_000;
