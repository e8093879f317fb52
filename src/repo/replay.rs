//! A pull's replay, as `impl Repo`: when the branch and the remote's branch
//! both have commits the other lacks, every local commit is made again on top
//! of the remote's tip, oldest first, and the branch moves there once, at the
//! end, with the index and the working tree (the fast-forward's
//! [`Repo::advance_locked`]).
//!
//! - **Which commits**: the branch's first-parent chain down to the first
//!   commit the remote's branch already has. A merge among them is replayed as
//!   one commit of its first-parent diff (what it brought in), so the result is
//!   linear; the side branch's own commits are not replayed one by one.
//! - **How**: each commit's change against its first parent, path by path (no
//!   rename detection: a rename is a deletion and a creation). A path the
//!   remote left as the commit's parent had it simply takes the commit's
//!   version (any file: notes, `.gitignore`, attachments). A path both sides
//!   changed is merged only when it is a visible note (`.md`, not hidden)
//!   holding UTF-8 text on every side: the commit's diff (as [`patch::make`]
//!   writes it) is applied to the remote's text by git apply's rules, offsets
//!   included, as `changes.apply` applies a caller's diff; no fuzz, no
//!   three-way merge, no guards (a person's commit was already accepted by
//!   git). A path that already holds the commit's version is left alone, so a
//!   change both sides made is not a conflict. A commit keeps its message
//!   (trailers included), its author and author date; the committer is mirai.
//!   A multi-note commit stays one commit; one that becomes empty stays too
//!   (its message and trailer are part of the history a run is found by).
//! - **A move** (`notes.move`'s commit) is not re-applied by its diffs but
//!   run again on the remote's tree ([`super::replay_move`]): the note's text
//!   as the remote has it moves, then every link resolving to it there
//!   (links the remote added included) is rewritten.
//! - **A commit that no longer applies** is kept back, and so is every later
//!   local commit that changes one of the notes a kept-back commit changes
//!   (it may depend on it); later commits that touch other notes still replay,
//!   in order. The kept-back commits stay, as the original commits on the
//!   parents they were made on, on a new branch `mirai/unmerged/<UTC time>`
//!   pointing at the newest of them; the branch follows the remote plus what
//!   replayed.
//! - **Crash safety**: the new commits are only objects until the very end;
//!   the unmerged branch is made and the map of old to new ids
//!   ([`super::replayed`]) written after the working tree was found clean and
//!   before any file is written, then the files, the index and (by
//!   compare-and-swap) the branch move as a fast-forward's do. A kill before
//!   the branch moves leaves HEAD on the old commits (the next pull replays
//!   them again: files already holding the new bytes count as clean); a map or
//!   branch naming commits that never landed misleads nobody (a lookup
//!   believes a new id only when it is on the branch).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use chrono::Utc;
use git2::build::TreeUpdateBuilder;
use git2::{Commit, Delta, DiffOptions, FileMode, Oid, Signature};

use super::intent::Journal;
use super::pull::Forward;
use super::replayed::Replayed;
use super::{git_error, Author, Repo};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::path;
use crate::patch;

/// The prefix of the branches that keep local commits a replay could not apply.
pub const UNMERGED_PREFIX: &str = "mirai/unmerged/";

/// What a replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// [`Forward::Moved`] (to the new tip), or [`Forward::Blocked`] with nothing changed.
    pub forward: Forward,
    /// Each replayed commit: its old id and its new one, oldest first.
    pub replayed: Vec<(Oid, Oid)>,
    /// The commits that did not apply, kept on a branch of their own.
    pub unmerged: Option<Unmerged>,
}

/// Local commits a replay could not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmerged {
    /// `mirai/unmerged/<UTC time>` (without `refs/heads/`).
    pub branch: String,
    /// The newest local commit that did not replay (the branch points at it:
    /// each kept commit on the parent it was made on).
    pub commit: Oid,
    /// Which commit stopped the replay, and why.
    pub reason: String,
}

/// A path's entry in a tree: blob id and mode (`None`: not there).
type Entry = Option<(Oid, i32)>;

impl Repo {
    /// Replays the branch's local commits onto `target`, the remote's tip,
    /// when neither descends from the other (see the module's comment);
    /// `committer` commits and signs the reflog.
    pub fn replay(&self, target: Oid, committer: &Author) -> Result<Replay> {
        let mut journal = self.begin_write()?;
        let result = self.replay_locked(&mut journal, target, committer);
        journal.idle();
        result.map_err(|e| self.scrub(e))
    }

    fn replay_locked(
        &self,
        journal: &mut Journal,
        target: Oid,
        committer: &Author,
    ) -> Result<Replay> {
        let git = &self.git;
        self.check_on_branch()?;
        let (reference, head) = self.head_target()?;
        let Some(head) = head.filter(|_| reference != "HEAD") else {
            return Err(Error::git(
                "HEAD is detached or unborn in NOTES_ROOT; check out the branch mirai follows, then sync again",
            ));
        };
        let local = self.local_commits(head, target)?;
        let cannot = |e| git_error("cannot read a commit to replay", e);
        let mut tip = git.find_commit(target).map_err(cannot)?;
        let mut replayed = Vec::with_capacity(local.len());
        // Commits that did not apply, and the notes they (and the later
        // commits that touch those notes, which depend on them) change.
        let mut kept_back: Vec<Oid> = Vec::new();
        let mut blocked: HashSet<String> = HashSet::new();
        let mut first_reason = None;
        for &id in &local {
            let commit = git.find_commit(id).map_err(cannot)?;
            let paths = self.changed_paths(&commit)?;
            if paths.iter().any(|p| blocked.contains(p)) {
                blocked.extend(paths);
                kept_back.push(id);
                continue;
            }
            let again = match self.move_of(&commit)? {
                Some(mv) => self.replay_move(&commit, &mv, &tip, committer),
                None => self.replay_one(&commit, &tip, committer),
            };
            match again {
                Ok(new) => {
                    replayed.push((id, new));
                    tip = git.find_commit(new).map_err(cannot)?;
                }
                Err(e) if e.code == ErrorCode::Conflict => {
                    first_reason.get_or_insert_with(|| {
                        format!(
                            "local commit {} ({}) no longer applies on the remote's commits: {}",
                            short(id),
                            commit.summary().unwrap_or(""),
                            e.message
                        )
                    });
                    blocked.extend(paths);
                    kept_back.push(id);
                }
                Err(e) => return Err(e),
            }
        }

        let unmerged = match (first_reason, kept_back.last()) {
            (Some(reason), Some(&newest)) => {
                let others = kept_back.len() - 1;
                Some(Unmerged {
                    branch: self.unmerged_name()?,
                    commit: newest,
                    reason: format!(
                        "{reason}{}",
                        match others {
                            0 => String::new(),
                            1 => "; 1 later local commit that changes the same notes is kept with it".to_string(),
                            n => format!("; {n} later local commits that change the same notes are kept with it"),
                        }
                    ),
                })
            }
            _ => None,
        };
        let mut made_branch = false;
        let log = format!(
            "pull: replayed {} local commit(s) onto {target}",
            replayed.len()
        );
        let replaces: HashMap<Oid, Oid> = replayed.iter().map(|&(old, new)| (new, old)).collect();
        let moved = self.advance_locked(
            journal,
            (&reference, Some(head)),
            tip.id(),
            (committer, &log),
            &replaces,
            &mut || {
                if let Some(unmerged) = &unmerged {
                    git.reference(
                        &format!("refs/heads/{}", unmerged.branch),
                        unmerged.commit,
                        false,
                        "mirai: local commits a replay could not apply",
                    )
                    .map_err(|e| git_error("cannot keep the commits that did not replay", e))?;
                    made_branch = true;
                }
                if !replayed.is_empty() {
                    let mut map = Replayed::load(&self.notes);
                    map.record(&replayed);
                    map.save(&self.notes)?;
                }
                Ok(())
            },
        );
        let kept = matches!(moved, Ok(Forward::Moved { .. }));
        if made_branch && !kept {
            // The branch did not move: the commits are still on it.
            if let Some(unmerged) = &unmerged {
                if let Ok(mut branch) =
                    git.find_reference(&format!("refs/heads/{}", unmerged.branch))
                {
                    let _ = branch.delete();
                }
            }
        }
        Ok(Replay {
            forward: moved?,
            replayed,
            unmerged,
        })
    }

    /// The local commits to replay, oldest first: the first-parent chain from
    /// `head` down to the first commit `target` has.
    fn local_commits(&self, head: Oid, target: Oid) -> Result<Vec<Oid>> {
        let git = &self.git;
        git.merge_base(head, target).map_err(|_| {
            Error::conflict(
                "the branch and the remote's branch share no commit (unrelated histories); \
                 mirai does not replay them: join them with git in NOTES_ROOT, then sync again",
            )
        })?;
        let cannot = |e| git_error("cannot list the local commits", e);
        let mut walk = git.revwalk().map_err(cannot)?;
        walk.push(head).map_err(cannot)?;
        walk.hide(target).map_err(cannot)?;
        let only_local: HashSet<Oid> = walk
            .collect::<std::result::Result<_, _>>()
            .map_err(cannot)?;
        let mut chain = Vec::new();
        let mut at = Some(head);
        while let Some(id) = at.filter(|id| only_local.contains(id)) {
            chain.push(id);
            at = git.find_commit(id).map_err(cannot)?.parent_id(0).ok();
        }
        chain.reverse();
        Ok(chain)
    }

    /// The paths `commit` changes against its first parent.
    fn changed_paths(&self, commit: &Commit<'_>) -> Result<Vec<String>> {
        let cannot = |e| git_error(&format!("cannot read commit {}", short(commit.id())), e);
        let tree = commit.tree().map_err(cannot)?;
        let parent_tree = match commit.parent(0) {
            Ok(parent) => Some(parent.tree().map_err(cannot)?),
            Err(_) => None,
        };
        let diff = self
            .git
            .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)
            .map_err(cannot)?;
        Ok(diff
            .deltas()
            .filter_map(|delta| {
                delta
                    .new_file()
                    .path()
                    .or_else(|| delta.old_file().path())
                    .and_then(Path::to_str)
                    .map(str::to_string)
            })
            .collect())
    }

    /// A name for a new unmerged branch: the UTC time, made unique.
    fn unmerged_name(&self) -> Result<String> {
        let stamp = Utc::now().format("%Y%m%dT%H%M%SZ");
        let base = format!("{UNMERGED_PREFIX}{stamp}");
        for n in 1..1000 {
            let name = match n {
                1 => base.clone(),
                n => format!("{base}-{n}"),
            };
            if self
                .git
                .find_reference(&format!("refs/heads/{name}"))
                .is_err()
            {
                return Ok(name);
            }
        }
        Err(Error::git(format!(
            "too many branches named {base}-N; delete some of the mirai/unmerged branches"
        )))
    }

    /// Makes `commit` again on top of `onto`: its change against its first
    /// parent applied to `onto`'s tree. A path that cannot take it is a 409
    /// `conflict` naming it.
    pub(super) fn replay_one(
        &self,
        commit: &Commit<'_>,
        onto: &Commit<'_>,
        committer: &Author,
    ) -> Result<Oid> {
        let cannot = |e| git_error(&format!("cannot replay commit {}", short(commit.id())), e);
        let tree = commit.tree().map_err(cannot)?;
        let parent_tree = match commit.parent(0) {
            Ok(parent) => Some(parent.tree().map_err(cannot)?),
            Err(_) => None,
        };
        let base = onto.tree().map_err(cannot)?;
        let update = self.changes_onto(parent_tree.as_ref(), &tree, &base)?;
        self.commit_replayed(commit, onto, committer, (&base, update), "its paths")
    }

    /// The change from `old` to `new`, path by path, as an update of `base`:
    /// a path `base` holds as `old` did takes `new`'s version, one already
    /// holding `new`'s is left alone, and a note both changed is merged
    /// ([`Repo::merge_note`]); anything else is a 409 `conflict`.
    pub(super) fn changes_onto(
        &self,
        old: Option<&git2::Tree<'_>>,
        new: &git2::Tree<'_>,
        base: &git2::Tree<'_>,
    ) -> Result<TreeUpdateBuilder> {
        let cannot = |e| git_error("cannot compare the trees of a commit to replay", e);
        let mut options = DiffOptions::new();
        options.include_typechange(true);
        let diff = self
            .git
            .diff_tree_to_tree(old, Some(new), Some(&mut options))
            .map_err(cannot)?;
        let mut update = TreeUpdateBuilder::new();
        for delta in diff.deltas() {
            let (old_file, new_file) = (delta.old_file(), delta.new_file());
            let rel = new_file
                .path()
                .or_else(|| old_file.path())
                .and_then(Path::to_str)
                .ok_or_else(|| Error::conflict("it changes a path that is not UTF-8"))?
                .to_string();
            let side = |present: bool, file: &git2::DiffFile<'_>| {
                present.then(|| (file.id(), i32::from(file.mode())))
            };
            let old = side(delta.status() != Delta::Added, &old_file);
            let new = side(delta.status() != Delta::Deleted, &new_file);
            let current: Entry = base
                .get_path(Path::new(&rel))
                .ok()
                .map(|entry| (entry.id(), entry.filemode()));
            if current == new {
                continue; // already there
            }
            let result = if current == old {
                new
            } else {
                self.merge_note(&rel, old, new, current)?
            };
            match result {
                Some((id, mode)) => {
                    update.upsert(&rel, id, file_mode(mode));
                }
                None if current.is_some() => {
                    update.remove(&rel);
                }
                None => {}
            }
        }
        Ok(update)
    }

    /// Commits `update` applied to `base` (`onto`'s tree, or one made from it)
    /// as `commit` replayed there: its author and message, `committer` now,
    /// `onto` the one parent. Paths
    /// that do not fit the remote's folders (`what`, e.g. "its paths") are a
    /// 409 `conflict`.
    pub(super) fn commit_replayed(
        &self,
        commit: &Commit<'_>,
        onto: &Commit<'_>,
        committer: &Author,
        (base, mut update): (&git2::Tree<'_>, TreeUpdateBuilder),
        what: &str,
    ) -> Result<Oid> {
        let git = &self.git;
        let cannot = |e| git_error(&format!("cannot replay commit {}", short(commit.id())), e);
        let new_tree = update
            .create_updated(git, base)
            .and_then(|id| git.find_tree(id))
            .map_err(|e| {
                Error::conflict(format!(
                    "{what} do not fit the remote's folders: {}",
                    e.message()
                ))
            })?;
        let committer = Signature::now(&committer.name, &committer.email).map_err(cannot)?;
        let message = String::from_utf8_lossy(commit.message_raw_bytes());
        git.commit(
            None,
            &commit.author(),
            &committer,
            &message,
            &new_tree,
            &[onto],
        )
        .map_err(cannot)
    }

    /// A note both sides changed: the commit's diff (`old` → `new`) applied
    /// to the remote's version (`current`) by git apply's rules. Anything but
    /// a visible note of UTF-8 text on every side is a conflict.
    fn merge_note(&self, rel: &str, old: Entry, new: Entry, current: Entry) -> Result<Entry> {
        let refuse =
            |why: &str| Error::conflict(format!("{rel} changed on the remote too, and {why}"));
        if path::in_history(rel).as_deref() != Ok(rel) {
            return Err(refuse(
                "it is not a note mirai merges by its diff (only visible .md notes are)",
            ));
        }
        let regular = |entry: Entry| {
            entry.is_none_or(|(_, mode)| {
                matches!(file_mode(mode), FileMode::Blob | FileMode::BlobExecutable)
            })
        };
        if !(regular(old) && regular(new) && regular(current)) {
            return Err(refuse("it is not a regular file on every side"));
        }
        let text = |entry: Entry| -> Result<Option<String>> {
            let Some((id, _)) = entry else {
                return Ok(None);
            };
            let limit = self.notes.max_note_bytes();
            let blob = super::blob_within(&self.git, id, limit)?.ok_or_else(|| {
                refuse(&format!(
                    "a side of it is past MIRAI_MAX_NOTE_BYTES ({limit} bytes), never merged"
                ))
            })?;
            String::from_utf8(blob.content().to_vec())
                .map(Some)
                .map_err(|_| refuse("it is not UTF-8 text"))
        };
        let (before, after, theirs) = (text(old)?, text(new)?, text(current)?);
        let content = match patch::make(rel, before.as_deref(), after.as_deref()) {
            // Only the mode changed: the remote's text, with the new mode.
            None => theirs,
            Some(diff) => {
                let parsed = patch::parse(&diff).map_err(|e| refuse(&e.message))?;
                patch::apply(&parsed, theirs.as_deref())
                    .map_err(|e| {
                        refuse(&format!(
                            "the commit's diff does not apply to it: {}",
                            e.message
                        ))
                    })?
                    .content
            }
        };
        let Some(content) = content else {
            return Ok(None);
        };
        let id = self
            .git
            .blob(content.as_bytes())
            .map_err(|e| git_error(&format!("cannot store {rel}"), e))?;
        let mode = match (old, new, current) {
            (Some((_, was)), Some((_, is)), Some((_, _))) if was != is => is,
            (_, _, Some((_, theirs))) => theirs,
            (_, Some((_, is)), None) => is,
            _ => i32::from(FileMode::Blob),
        };
        Ok(Some((id, mode)))
    }
}

pub(super) fn file_mode(mode: i32) -> FileMode {
    match mode {
        0o100755 => FileMode::BlobExecutable,
        0o120000 => FileMode::Link,
        0o160000 => FileMode::Commit,
        0o040000 => FileMode::Tree,
        _ => FileMode::Blob,
    }
}

fn short(id: Oid) -> String {
    id.to_string()[..12].to_string()
}
