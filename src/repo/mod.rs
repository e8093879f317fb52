//! The notes repository through git2: HEAD, whether a note changed since a given
//! commit, and committing one or several notes in one commit, so that the files,
//! the commit and the index entries change together or not at all. Nothing here
//! knows about HTTP.
//!
//! A commit touches only its own paths: its tree is HEAD's tree with those
//! entries replaced (other staged or unstaged changes stay where they are), their
//! index entries are rewritten so `git status` is clean for them, and HEAD moves
//! by compare-and-swap. The index is written before HEAD moves, so when another git
//! process holds `index.lock` the commit fails with nothing visible changed.
//!
//! Git's own lock is held the way git holds it ([`index_lock`]): `index.lock`
//! is taken before the index is read and released by renaming the new index
//! into place, so a person's `git add` racing with mirai is waited for or
//! refused, never undone. A note with someone else's uncommitted changes is
//! never written or committed ([`write_and_commit`] refuses; [`snapshot`]
//! commits them first, when the operator opted in).
//!
//! libgit2 touches only `.git` (an invariant of ARCHITECTURE.md): the note's
//! bytes are written and read by mirai through the root handle
//! ([`crate::notes::root`]); the blob is made from those bytes and the index
//! entry from the written file's `fstat`, so git never reads a working-tree
//! file by name.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use git2::build::TreeUpdateBuilder;
use git2::{FileMode, IndexEntry, IndexTime, Oid, Repository, Signature};

use crate::error::{Error, ErrorCode, Result};
use crate::notes::root::{Expected, Prepared, Refusal, Slot};
pub use crate::notes::uploads::Upload;
use crate::notes::{refused, Notes};
pub use commits::{
    CommitChanges, FileBound, FileChange, LINKS_UNCHANGED, MOVE_LINKS_TRAILER, MOVE_SUBJECT,
};
use index_file::{Entries, Kept};
use index_lock::{held_error, IndexLock, LOCK_WAIT};
use intent::{Journal, NoteIntent, Recovery, Stage};
use release::{Held, Releaser};

pub mod announce;
mod commits;
pub mod history;
mod index_file;
mod index_lock;
pub mod intent;
pub mod pull;
mod recover;
mod release;
pub mod replay;
mod replay_move;
pub mod replayed;
pub mod unheld;

/// The skip-worktree bit of an index entry's extended flags.
const SKIP_WORKTREE: u16 = 0x4000;

/// Where a move of the branch came from, for the change stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// mirai's own write.
    Mirai,
    /// Not mirai in this process: a person's git, another process.
    Outside,
    /// A pull or replay from the git remote.
    Sync,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Mirai => "mirai",
            Source::Outside => "outside",
            Source::Sync => "sync",
        }
    }
}

/// Told of every move of the branch ([`announce::Announcer`]): held across
/// the reference update, so nothing else tells the same move.
pub trait Announce: Send + Sync {
    fn hold(&self) -> Box<dyn Landing + '_>;
}

/// An [`Announce`] held while the branch moves.
pub trait Landing {
    /// The branch moved from `from` to `to`; `replaces`: a replayed commit's new id -> old id.
    fn landed(
        self: Box<Self>,
        from: Option<Oid>,
        to: Oid,
        source: Source,
        replaces: &HashMap<Oid, Oid>,
    );
}

/// Who a commit is by: mirai commits (`name`, `email`) and is the author
/// too, unless the commit is made for a named `caller` (name, email), who is
/// then its author.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    pub name: String,
    pub email: String,
    pub caller: Option<(String, String)>,
}

/// Who mirai commits as, when no person is the author:
/// `MIRAI_GIT_AUTHOR_NAME` / `MIRAI_GIT_AUTHOR_EMAIL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitIdentity {
    pub name: String,
    pub email: String,
}

impl Default for GitIdentity {
    fn default() -> Self {
        GitIdentity {
            name: "mirai".to_string(),
            email: "mirai@localhost".to_string(),
        }
    }
}

/// The notes repository, opened at exactly the notes root.
pub struct Repo {
    git: Repository,
    /// The root handle every working-tree file is written through.
    notes: Notes,
    /// This process's intent file, locked for the repository's life; held
    /// for a whole write, so writes record their steps one at a time.
    journal: Mutex<Journal>,
    /// The index entries mirai wrote last, reused while `.git/index` is that file.
    kept_index: Mutex<Kept>,
    /// Replaced files are freed after the answer, not inside the rename.
    releaser: Releaser,
    /// Told of every move of the branch (the change stream), when serving.
    announcer: Option<Arc<dyn Announce>>,
}

fn git_error(context: &str, e: git2::Error) -> Error {
    Error::git(format!("{context}: {}", e.message()))
}

impl Repo {
    /// Opens the repository whose work tree is the notes root itself, writing
    /// through that root's handle; a parent repository is never used
    /// (libgit2's plain open does not search upwards).
    pub fn open(notes: &Notes) -> Result<Repo> {
        // Messages name NOTES_ROOT, never the server's absolute path
        // (ARCHITECTURE.md, "Secrets and server paths stay home").
        let git = Repository::open(notes.root())
            .map_err(|e| git_error("cannot open the notes repository (NOTES_ROOT)", e))?;
        if git.workdir().is_none() {
            return Err(Error::git(
                "the notes root (NOTES_ROOT) is a bare repository; it needs a work tree",
            ));
        }
        // Every command that writes keeps its state out of a person's `git status`.
        exclude_mirai_folder(git.path()).map_err(|e| {
            Error::internal(format!(
                "cannot keep .mirai/ out of git (.git/info/exclude): {e}"
            ))
        })?;
        let journal = Journal::open(notes)?;
        let releaser = Releaser::open(git.path(), notes);
        let repo = Repo {
            git,
            notes: notes.clone(),
            journal: Mutex::new(journal),
            kept_index: Mutex::new(Kept::default()),
            releaser,
            announcer: None,
        };
        match repo.recover(true) {
            Ok(done) if done != Recovery::default() => log::info!(
                "recovery at start-up: {} dead mirai intent(s), {} lock(s) removed, {} write(s) \
                 rolled forward, {} rolled back, {} temp file(s) removed, {} intent file(s) ignored",
                done.dead,
                done.locks_removed,
                done.rolled_forward,
                done.rolled_back,
                done.temps_removed,
                done.ignored
            ),
            Ok(_) => {}
            Err(e) => log::warn!("recovery at start-up failed: {}", repo.scrub(e).message),
        }
        Ok(repo)
    }

    /// Finishes what dead mirai processes left (their intent files whose
    /// `flock` is free): stale locks, half-done writes; with `sweep` and no
    /// other mirai alive, stray temp files too. See [`intent`].
    pub fn recover(&self, sweep: bool) -> Result<Recovery> {
        self.recover_dead(&mut self.journal(), sweep)
    }

    fn journal(&self) -> MutexGuard<'_, Journal> {
        // A panic mid-write leaves the record as it was; it still names our locks.
        self.journal
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The journal, ready for a write: its file where a later mirai looks
    /// for it, and whatever an earlier failed write of this process could not
    /// put back put back first.
    fn begin_write(&self) -> Result<MutexGuard<'_, Journal>> {
        let mut journal = self.journal();
        journal.ensure_reachable(&self.notes)?;
        if let Some(intent) = journal.take_pending() {
            self.recover_own(&mut journal, &intent);
        }
        Ok(journal)
    }

    /// Takes `index.lock`; when it stays held for the whole wait, frees a dead
    /// mirai's lock (finishing its write) and tries once more.
    fn lock_index(&self, journal: &mut Journal) -> Result<IndexLock> {
        if let Some(lock) = IndexLock::acquire(self.git.path(), LOCK_WAIT, journal)? {
            return Ok(lock);
        }
        match self.recover_dead(journal, false) {
            Ok(done) if done.locks_removed > 0 => {
                if let Some(lock) = IndexLock::acquire(self.git.path(), Duration::ZERO, journal)? {
                    return Ok(lock);
                }
            }
            Ok(_) => {}
            Err(e) => log::warn!("recovery after a lock wait failed: {}", e.message),
        }
        Err(held_error(LOCK_WAIT))
    }

    /// After a dead mirai's commit reached the branch: puts each note's index
    /// entry from `index_before` (as that write found it) to `after`, holding
    /// `index.lock`, in one write of the index. Answers the notes put right;
    /// the others had nothing to do (already right, or someone has staged
    /// something else there since, which stays).
    fn roll_index_forward<'a>(
        &self,
        journal: &mut Journal,
        notes: &[Landed<'a>],
    ) -> Result<Vec<&'a str>> {
        let Some(lock) = IndexLock::acquire(self.git.path(), LOCK_WAIT, journal)? else {
            return Err(held_error(LOCK_WAIT));
        };
        let index = self.read_index(&lock)?;
        let mut changes = Vec::new();
        for note in notes {
            let current = index.get(note.rel, 0).map(|entry| entry.id);
            if current == note.after || current != note.index_before {
                continue;
            }
            let new_entry = match note.after {
                Some(id) if note.skip_worktree.is_some() => {
                    let mut entry = unstatted_entry(note.rel, id);
                    entry.mode = note.skip_worktree.unwrap_or(entry.mode);
                    entry.flags_extended = SKIP_WORKTREE;
                    Some(entry)
                }
                Some(id) => {
                    let matches = note.work.map(blob_id).transpose()? == Some(id);
                    let meta = match self.notes.existing_slot(note.rel)? {
                        Some(slot) if matches => slot.stat().ok(),
                        _ => None,
                    };
                    Some(match meta {
                        Some(meta) => index_entry(note.rel, id, &meta),
                        // Not mirai's bytes on disk (edited since): git re-reads the file.
                        None => unstatted_entry(note.rel, id),
                    })
                }
                None => None,
            };
            changes.push((note.rel, new_entry));
        }
        if changes.is_empty() {
            journal.idle();
            return Ok(Vec::new());
        }
        let rolled: Vec<&str> = changes.iter().map(|(rel, _)| *rel).collect();
        let entries = self.carried_entries(index, changes);
        let (bytes, stamp) = index_file::encode(&entries, self.kept_index().buffer());
        let staged = lock.stage(&bytes, |id| {
            journal.record(|intent| intent.index_lock.push(id))
        });
        let committed = staged.and_then(|()| lock.commit());
        journal.idle();
        committed.map(|()| {
            self.kept_index().keep(stamp, entries, bytes);
            rolled
        })
    }

    /// Refuses to write while a person's git operation is under way (a
    /// rebase, merge, cherry-pick, revert or bisect, by git's own markers in
    /// `.git/`) or HEAD is detached: a commit then would land on no branch, or
    /// in the middle of their work. 409 `conflict` saying what to do.
    pub fn check_on_branch(&self) -> Result<()> {
        use git2::RepositoryState as S;
        let doing = match self.git.state() {
            S::Clean => None,
            S::Merge => Some(("a merge", "git merge --continue (or git merge --abort)")),
            S::Revert | S::RevertSequence => {
                Some(("a revert", "git revert --continue (or git revert --abort)"))
            }
            S::CherryPick | S::CherryPickSequence => Some((
                "a cherry-pick",
                "git cherry-pick --continue (or git cherry-pick --abort)",
            )),
            S::Bisect => Some(("a bisect", "git bisect reset")),
            S::Rebase | S::RebaseInteractive | S::RebaseMerge | S::ApplyMailboxOrRebase => {
                Some(("a rebase", "git rebase --continue (or git rebase --abort)"))
            }
            S::ApplyMailbox => Some(("git am", "git am --continue (or git am --abort)")),
        };
        if let Some((what, finish)) = doing {
            return Err(Error::conflict(format!(
                "{what} is in progress in NOTES_ROOT; mirai writes nothing until it ends, so                  nothing lands in the middle of it: finish it ({finish}), then retry                  (reads and search go on meanwhile)"
            )));
        }
        if self.head_target()?.0 == "HEAD" {
            return Err(Error::conflict(
                "HEAD is detached in NOTES_ROOT, so a commit would land on no branch; check out                  a branch (git switch <branch>), then retry (reads and search go on meanwhile)",
            ));
        }
        Ok(())
    }

    /// The commit HEAD points at, or `None` on an unborn branch.
    pub fn head(&self) -> Result<Option<String>> {
        self.head_target()
            .map(|(_, oid)| oid.map(|oid| oid.to_string()))
            .map_err(|e| self.scrub(e))
    }

    /// libgit2's messages name files by absolute path; callers see them
    /// relative to the notes root (ARCHITECTURE.md, "Secrets and server paths
    /// stay home").
    fn scrub(&self, e: Error) -> Error {
        scrub(self.notes.root(), e)
    }

    /// The reference a commit moves (the branch HEAD names, or HEAD itself when
    /// detached) and the commit it points at now.
    fn head_target(&self) -> Result<(String, Option<Oid>)> {
        let head = self
            .git
            .find_reference("HEAD")
            .map_err(|e| git_error("cannot read HEAD", e))?;
        let Some(branch) = head.symbolic_target() else {
            return Ok(("HEAD".to_string(), head.target()));
        };
        match self.git.refname_to_id(branch) {
            Ok(oid) => Ok((branch.to_string(), Some(oid))),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok((branch.to_string(), None)),
            Err(e) => Err(git_error(&format!("cannot resolve {branch}"), e)),
        }
    }

    /// The index as it is now, read under `lock` (the entries mirai wrote
    /// last when the file is still theirs; empty when there is none yet).
    fn read_index(&self, lock: &IndexLock) -> Result<Entries> {
        self.kept_index().read(&lock.index_path())
    }

    fn kept_index(&self) -> MutexGuard<'_, Kept> {
        self.kept_index
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The new index's entries: every other entry (staged work of others
    /// included) as it is, ours (`changes`) replaced. As git does when it
    /// writes an index, an entry as new as the index it was read from ("racily
    /// clean": its file may have changed within the same clock tick without its
    /// stat data showing it) whose file now differs gets its size zeroed, so git
    /// looks at the content again instead of calling the change clean.
    fn carried_entries(
        &self,
        mut index: Entries,
        changes: Vec<(&str, Option<IndexEntry>)>,
    ) -> Entries {
        let ours: HashSet<&[u8]> = changes.iter().map(|(rel, _)| rel.as_bytes()).collect();
        index.set_all(changes);
        if let Some(read_at) = index.mtime {
            for entry in &mut index.list {
                let stamp = (i64::from(entry.mtime.seconds()), entry.mtime.nanoseconds());
                if read_at <= stamp
                    && entry.file_size != 0
                    && !ours.contains(entry.path.as_slice())
                    && self.differs(entry)
                {
                    entry.file_size = 0;
                }
            }
        }
        index
    }

    /// Whether the working-tree file of `entry` no longer holds its blob
    /// (read through the root handle; unreadable counts as differing).
    fn differs(&self, entry: &IndexEntry) -> bool {
        let Ok(path) = std::str::from_utf8(&entry.path) else {
            return true;
        };
        match self.notes.read_plain(path) {
            Some(bytes) => !blob_id(&bytes).is_ok_and(|id| id == entry.id),
            None => true,
        }
    }

    /// Makes the commit of `notes` (each path with its new bytes; `None`:
    /// deleted) on top of HEAD as objects only: blobs, tree and commit. Nothing
    /// visible changes, so this is where a write may run out of space.
    fn build_commit(
        &self,
        notes: &[NewNote<'_>],
        (message, author): (&str, &Author),
    ) -> Result<Built> {
        let git = &self.git;
        let (reference, parent_id) = self.head_target()?;
        let parent = parent_id
            .map(|id| git.find_commit(id))
            .transpose()
            .map_err(|e| git_error("cannot read the HEAD commit", e))?;
        let base_tree = match &parent {
            Some(commit) => commit.tree(),
            None => git
                .treebuilder(None)
                .and_then(|b| b.write())
                .and_then(|id| git.find_tree(id)),
        }
        .map_err(|e| git_error("cannot read the HEAD tree", e))?;

        let mut update = TreeUpdateBuilder::new();
        let mut blobs = Vec::with_capacity(notes.len());
        for &(rel_path, bytes) in notes {
            match bytes {
                Some((bytes, mode)) => {
                    let cannot = |e| git_error(&format!("cannot store {rel_path}"), e);
                    let id = match bytes {
                        NewBytes::Mem(bytes) => git.blob(bytes).map_err(cannot)?,
                        NewBytes::Upload(upload) => stream_blob(git, rel_path, upload)?,
                    };
                    update.upsert(rel_path, id, mode);
                    blobs.push(Some(id));
                }
                None => {
                    if base_tree.get_path(Path::new(rel_path)).is_ok() {
                        update.remove(rel_path);
                    }
                    blobs.push(None);
                }
            }
        }
        let commit = update
            .create_updated(git, &base_tree)
            .and_then(|tree_id| git.find_tree(tree_id))
            .and_then(|tree| {
                let sig = Signature::now(&author.name, &author.email)?;
                let by = match &author.caller {
                    Some((name, email)) => Signature::now(name, email)?,
                    None => sig.clone(),
                };
                let parents: Vec<_> = parent.iter().collect();
                git.commit(None, &by, &sig, message, &tree, &parents)
            })
            .map_err(|e| git_error("cannot create the commit", e))?;
        Ok(Built {
            reference,
            parent: parent_id,
            commit,
            blobs,
        })
    }

    /// Lands a built commit, holding `lock`: the index entries of `staged`
    /// (each path with its blob and the file's metadata after writing it;
    /// `None`: deleted) replace theirs in `index` (read under the lock), the
    /// new index waits in `index.lock` while HEAD moves by compare-and-swap
    /// from the commit's parent, and replaces the index only once HEAD has
    /// moved; a failure on the way leaves HEAD and the index as they were.
    fn land_commit(
        &self,
        journal: &mut Journal,
        lock: IndexLock,
        index: Entries,
        built: &Built,
        staged: &[Staged<'_>],
        (subject, author): (&str, &Author),
    ) -> Result<String> {
        let commit_id = built.commit;
        let changes: Vec<(&str, Option<IndexEntry>)> = staged
            .iter()
            .map(|&(rel, written)| (rel, written.map(|(id, meta)| index_entry(rel, id, meta))))
            .collect();
        let entries = self.carried_entries(index, changes);
        let (bytes, stamp) = index_file::encode(&entries, self.kept_index().buffer());
        lock.stage(&bytes, |id| {
            journal.record(|intent| {
                intent.stage = Stage::Committing;
                intent.commit = Some(commit_id.to_string());
                intent.index_lock.push(id);
            })
        })?;

        let log = match built.parent {
            Some(_) => format!("commit: {subject}"),
            None => format!("commit (initial): {subject}"),
        };
        self.move_reference(
            journal,
            (&built.reference, built.parent, commit_id),
            author,
            &log,
            (Source::Mirai, &HashMap::new()),
        )?;
        self.releaser.keep_git_file(&lock.index_path());
        match lock.commit() {
            Ok(()) => self.kept_index().keep(stamp, entries, bytes),
            // HEAD has the commit; only git's index is behind (a later write or
            // `git status` shows it). The commit is not taken back.
            Err(e) => {
                log::warn!("committed {commit_id} ({subject}) but could not replace the index: {e}")
            }
        }
        Ok(commit_id.to_string())
    }

    /// Moves `reference` from `parent` to `commit` by compare-and-swap under
    /// its own lock (a libgit2 transaction, so the lock file's identity can be
    /// recorded while it is held); the reflog is written as git writes it.
    ///
    /// The one place the branch moves: the change stream is told here of
    /// what landed (`source`, and a replay's new id -> old id), after the
    /// move, with the announcer held across it (see [`announce`]).
    fn move_reference(
        &self,
        journal: &mut Journal,
        (reference, parent, commit): (&str, Option<Oid>, Oid),
        author: &Author,
        log: &str,
        (source, replaces): (Source, &HashMap<Oid, Oid>),
    ) -> Result<()> {
        let git = &self.git;
        let cannot = |e: git2::Error| {
            Error::git(format!(
                "cannot move {reference} to the new commit (is another git process updating it?): {}",
                e.message()
            ))
        };
        let mut transaction = git.transaction().map_err(cannot)?;
        transaction.lock_ref(reference).map_err(cannot)?;
        if let Ok(meta) = std::fs::symlink_metadata(git.path().join(format!("{reference}.lock"))) {
            journal.record(|intent| intent.ref_lock = Some(intent::FileId::of(&meta)))?;
        }
        let now = match git.refname_to_id(reference) {
            Ok(id) => Some(id),
            Err(e) if e.code() == git2::ErrorCode::NotFound => None,
            Err(e) => return Err(cannot(e)),
        };
        if now != parent {
            // Dropping the transaction releases the ref lock; nothing moved.
            return Err(Error::git(format!(
                "cannot move {reference} to the new commit: another process committed meanwhile; \
                 nothing was changed: retry"
            )));
        }
        let sig = Signature::now(&author.name, &author.email)
            .map_err(|e| git_error("cannot sign the reflog entry", e))?;
        self.releaser.keep_git_file(&git.path().join(reference));
        let holding = self.announcer.as_ref().map(|a| a.hold());
        transaction
            .set_target(reference, commit, Some(&sig), log)
            .and_then(|()| transaction.commit())
            .map_err(cannot)?;
        if let Some(holding) = holding {
            holding.landed(parent, commit, source, replaces);
        }
        Ok(())
    }

    /// This repository, telling `announcer` of every move of the branch.
    pub fn announcing(mut self, announcer: Arc<dyn Announce>) -> Repo {
        self.announcer = Some(announcer);
        self
    }

    /// HEAD's tree, or `None` on an unborn branch.
    fn head_tree(&self) -> Result<Option<git2::Tree<'_>>> {
        match self.head_target()?.1 {
            Some(id) => self
                .git
                .find_commit(id)
                .and_then(|commit| commit.tree())
                .map(Some)
                .map_err(|e| git_error("cannot read the HEAD commit", e)),
            None => Ok(None),
        }
    }

    /// Whether `rel_path` holds changes that are not in HEAD (whose tree is
    /// `head`): a staged entry that differs from HEAD's (or a merge conflict),
    /// or working-tree bytes (`work`; `None`: no file) that differ from HEAD's blob.
    fn has_uncommitted(
        &self,
        index: &Entries,
        head: Option<&git2::Tree<'_>>,
        rel_path: &str,
        work: Option<&[u8]>,
    ) -> Result<bool> {
        let head = head.and_then(|tree| tree.get_path(Path::new(rel_path)).ok().map(|e| e.id()));
        if (1..=3).any(|stage| index.get(rel_path, stage).is_some()) {
            return Ok(true);
        }
        if index.get(rel_path, 0).map(|entry| entry.id) != head {
            return Ok(true);
        }
        Ok(work.map(blob_id).transpose()? != head)
    }

    /// The newest commit after `base_commit` (up to HEAD) that changed
    /// `rel_path`: its short id, author and subject, for a 409 that says who
    /// moved the note on. Looks at most 1,000 commits back (bounded work);
    /// `None` when none of those changed it.
    pub fn last_change_since(&self, base_commit: &str, rel_path: &str) -> Option<String> {
        let git = &self.git;
        let base = git
            .revparse_single(base_commit)
            .ok()?
            .peel_to_commit()
            .ok()?;
        let head = self.head_target().ok()?.1?;
        let mut walk = git.revwalk().ok()?;
        walk.push(head).ok()?;
        walk.hide(self.replaced_by(base.id()).unwrap_or(base.id()))
            .ok()?;
        let path = Path::new(rel_path);
        let entry = |commit: &git2::Commit| entry_at(commit, path).ok().flatten();
        for id in walk.take(1000).flatten() {
            let commit = git.find_commit(id).ok()?;
            let before = commit.parent(0).ok().and_then(|p| entry(&p));
            if entry(&commit) != before {
                let author = commit.author();
                return Some(format!(
                    "{} by {} <{}>: {}",
                    &id.to_string()[..12],
                    author.name().unwrap_or("?"),
                    author.email().unwrap_or("?"),
                    commit.summary().unwrap_or("")
                ));
            }
        }
        None
    }

    /// Whether `rel_path` differs between `base_commit` and HEAD. A commit that is
    /// not in the repository is a 409 conflict, so the caller re-reads and retries.
    pub fn changed_since(&self, base_commit: &str, rel_path: &str) -> Result<bool> {
        self.changed_since_inner(base_commit, rel_path)
            .map_err(|e| self.scrub(e))
    }

    fn changed_since_inner(&self, base_commit: &str, rel_path: &str) -> Result<bool> {
        let unknown = || {
            Error::conflict(format!(
                "base_commit {base_commit} is not a commit in the notes repository; read the \
                 note again and use the current HEAD"
            ))
        };
        let is_sha = (4..=40).contains(&base_commit.len())
            && base_commit.bytes().all(|b| b.is_ascii_hexdigit());
        if !is_sha {
            return Err(unknown());
        }
        let base = self
            .git
            .revparse_single(base_commit)
            .and_then(|o| o.peel_to_commit())
            .map_err(|_| unknown())?;
        let Some(head_id) = self.head_target()?.1 else {
            return Err(unknown());
        };
        if head_id == base.id() {
            return Ok(false);
        }
        let path = Path::new(rel_path);
        // A commit a pull replayed stands for its replacement on the branch;
        // the note must also be as the caller saw it there (the remote may
        // have changed it underneath).
        let base = match self.replaced_by(base.id()) {
            Some(new) => {
                let new = self
                    .git
                    .find_commit(new)
                    .map_err(|e| git_error("cannot read a replayed commit", e))?;
                if entry_at(&base, path)? != entry_at(&new, path)? {
                    return Ok(true);
                }
                new
            }
            None => base,
        };
        let head = self
            .git
            .find_commit(head_id)
            .map_err(|e| git_error("cannot read the HEAD commit", e))?;
        Ok(entry_at(&base, path)? != entry_at(&head, path)?)
    }

    /// The commit that replaced `id` when a pull replayed it onto the
    /// remote's commits (`.mirai/replayed.json`), when `id` is no longer on
    /// the branch and its replacement is. `None` otherwise: an id on the
    /// branch stands for itself, and a map naming a commit that is not on
    /// the branch is not believed.
    pub fn replaced_by(&self, id: Oid) -> Option<Oid> {
        let head = self.head_target().ok()?.1?;
        let on_branch =
            |id: Oid| id == head || self.git.graph_descendant_of(head, id).unwrap_or(false);
        if on_branch(id) {
            return None;
        }
        replayed::Replayed::load(&self.notes)
            .get(id)
            .filter(|new| on_branch(*new))
    }
}

/// `e` with the notes root's absolute path taken out of its message: libgit2
/// names files by absolute path, callers see them relative to the root
/// (ARCHITECTURE.md, "Secrets and server paths stay home").
pub(crate) fn scrub(root: &Path, mut e: Error) -> Error {
    let root = root.display().to_string();
    e.message = e
        .message
        .replace(&format!("{root}/"), "")
        .replace(&root, "NOTES_ROOT");
    e
}

/// The blob id and mode of `path` in `commit`'s tree (`None`: not there).
fn entry_at(commit: &git2::Commit, path: &Path) -> Result<Option<(Oid, i32)>> {
    let tree = commit
        .tree()
        .map_err(|e| git_error("cannot read a commit's tree", e))?;
    Ok(tree.get_path(path).ok().map(|e| (e.id(), e.filemode())))
}

/// The index entry git would write after `git add` of a file with this
/// metadata and content id (stat fields truncated to 32 bits, as git does).
fn index_entry(rel_path: &str, id: Oid, meta: &std::fs::Metadata) -> IndexEntry {
    let executable = meta.mode() & 0o100 != 0;
    IndexEntry {
        ctime: IndexTime::new(meta.ctime() as i32, meta.ctime_nsec() as u32),
        mtime: IndexTime::new(meta.mtime() as i32, meta.mtime_nsec() as u32),
        dev: meta.dev() as u32,
        ino: meta.ino() as u32,
        mode: if executable { 0o100755 } else { 0o100644 },
        uid: meta.uid(),
        gid: meta.gid(),
        file_size: meta.size() as u32,
        id,
        flags: rel_path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: rel_path.as_bytes().to_vec(),
    }
}

/// An index entry with no stat data: git compares the file's bytes next time.
fn unstatted_entry(rel_path: &str, id: Oid) -> IndexEntry {
    let zero = IndexTime::new(0, 0);
    IndexEntry {
        ctime: zero,
        mtime: zero,
        dev: 0,
        ino: 0,
        mode: 0o100644,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: rel_path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: rel_path.as_bytes().to_vec(),
    }
}

/// The tree mode git gives a file with this metadata.
fn blob_mode(meta: &std::fs::Metadata) -> FileMode {
    if meta.mode() & 0o100 != 0 {
        FileMode::BlobExecutable
    } else {
        FileMode::Blob
    }
}

/// The paths under `prefix` (like `.mirai/`) that git tracks in the notes
/// repository at `root`: its index or HEAD's tree. Empty when there is no
/// repository (yet).
pub fn tracked_under(root: &Path, prefix: &str) -> Vec<String> {
    let Ok(git) = Repository::open(root) else {
        return Vec::new();
    };
    let mut tracked: Vec<String> = Vec::new();
    if let Ok(index) = git.index() {
        tracked.extend(
            index
                .iter()
                .filter_map(|entry| String::from_utf8(entry.path).ok())
                .filter(|path| path.starts_with(prefix)),
        );
    }
    if let Ok(tree) = git.head().and_then(|head| head.peel_to_tree()) {
        let _ = tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if let Some(name) = entry.name() {
                let path = format!("{dir}{name}");
                if path.starts_with(prefix) && entry.kind() == Some(git2::ObjectType::Blob) {
                    tracked.push(path);
                }
            }
            // Only descend into folders on the prefix's way.
            let dir_path = format!("{dir}{}/", entry.name().unwrap_or(""));
            if entry.kind() == Some(git2::ObjectType::Tree)
                && !(prefix.starts_with(&dir_path) || dir_path.starts_with(prefix))
            {
                git2::TreeWalkResult::Skip
            } else {
                git2::TreeWalkResult::Ok
            }
        });
    }
    tracked.sort_unstable();
    tracked.dedup();
    tracked
}

/// `.mirai/` holds the index and run logs: local state that must never be
/// committed, so it goes in the repository's `info/exclude` (`git_dir` is `.git`).
pub fn exclude_mirai_folder(git_dir: &Path) -> std::io::Result<()> {
    let info = git_dir.join("info");
    std::fs::create_dir_all(&info)?;
    let exclude = info.join("exclude");
    let current = std::fs::read_to_string(&exclude).unwrap_or_default();
    if current.lines().any(|line| line.trim() == ".mirai/") {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&exclude)?;
    if !current.is_empty() && !current.ends_with('\n') {
        std::io::Write::write_all(&mut file, b"\n")?;
    }
    std::io::Write::write_all(&mut file, b".mirai/\n")
}

/// One note of a commit as [`Repo::land_commit`] takes it: its path, and
/// its blob with the file's metadata after writing it (`None`: deleted).
type Staged<'a> = (&'a str, Option<(Oid, &'a std::fs::Metadata)>);

/// A note of a commit to build: its path, and its new bytes with their tree
/// mode (`None`: deleted).
type NewNote<'a> = (&'a str, Option<(NewBytes<'a>, FileMode)>);

/// A file's new bytes in a write: in memory, or an upload streamed to disk
/// (moved into place and into git's object database from its file, never
/// held whole).
#[derive(Debug, Clone, Copy)]
pub enum NewBytes<'a> {
    Mem(&'a [u8]),
    Upload(&'a Upload),
}

impl<'a> NewBytes<'a> {
    /// What the file holds once written, as the undo compares it.
    fn expected(self) -> Expected<'a> {
        match self {
            NewBytes::Mem(bytes) => Expected::Bytes(bytes),
            NewBytes::Upload(upload) => Expected::Digest {
                size: upload.size(),
                sha256: upload.sha256(),
            },
        }
    }

    /// Git's blob id of the bytes.
    fn blob_id(self) -> Result<Oid> {
        match self {
            NewBytes::Mem(bytes) => blob_id(bytes),
            NewBytes::Upload(upload) => Oid::from_str(upload.blob_id())
                .map_err(|e| git_error("cannot read an upload's blob id", e)),
        }
    }
}

/// A commit made as objects, not yet on the branch: the reference it moves
/// and from where, and each note's blob (`None`: deleted), in order.
struct Built {
    reference: String,
    parent: Option<Oid>,
    commit: Oid,
    blobs: Vec<Option<Oid>>,
}

/// One note of a dead mirai's commit that reached the branch, for
/// [`Repo::roll_index_forward`]: its index entry before the write, its blob
/// after it, and the bytes on disk now.
struct Landed<'a> {
    rel: &'a str,
    index_before: Option<Oid>,
    after: Option<Oid>,
    work: Option<&'a [u8]>,
    /// A path kept out of the working tree (a pull's hidden path, symlink or
    /// submodule): its entry gets this mode and git's skip-worktree bit.
    skip_worktree: Option<u32>,
}

/// Writes (or, with `None`, deletes) each note of `changes` through the root
/// handle and commits them all in one commit, holding git's index lock from
/// before the index is read until the new one is in place. One note is the
/// case of a single write; a path may appear once. A note with someone else's
/// uncommitted changes (staged, or in the working tree) is refused with 409
/// `conflict` and nothing is written. If any write or the commit fails, every
/// note is put back exactly as it was (a created note removed with the folders
/// made for it, a deleted one recreated) and the error is returned: HEAD and
/// the index are as before. A note that is, or passes through, a symlink is
/// refused (`invalid_path`), never written through.
pub fn write_and_commit(
    repo: &Repo,
    changes: &[(&str, Option<&[u8]>)],
    message: &str,
    author: &Author,
) -> Result<String> {
    let changes: Vec<(&str, Option<NewBytes<'_>>)> = changes
        .iter()
        .map(|&(rel, bytes)| (rel, bytes.map(NewBytes::Mem)))
        .collect();
    write_files_and_commit(repo, &changes, message, author)
}

/// [`write_and_commit`] of bytes in memory or uploads on disk: an upload's
/// file is renamed into place and streamed into git's object database.
pub fn write_files_and_commit(
    repo: &Repo,
    changes: &[(&str, Option<NewBytes<'_>>)],
    message: &str,
    author: &Author,
) -> Result<String> {
    write_and_commit_inner(repo, changes, message, author).map_err(|e| repo.scrub(e))
}

fn write_and_commit_inner(
    repo: &Repo,
    changes: &[(&str, Option<NewBytes<'_>>)],
    message: &str,
    author: &Author,
) -> Result<String> {
    let mut journal = repo.begin_write()?;
    let result = write_and_commit_recorded(repo, &mut journal, changes, message, author);
    journal.idle();
    result.map_err(storage)
}

/// The blob id git gives `bytes`.
/// Blob `id` when it holds at most `limit` bytes (`None`: larger; its size
/// is read from the object's header, so a larger one is never loaded).
fn blob_within(git: &Repository, id: Oid, limit: u64) -> Result<Option<git2::Blob<'_>>> {
    let cannot = |e| git_error(&format!("cannot read object {id}"), e);
    let (size, _) = git
        .odb()
        .and_then(|odb| odb.read_header(id))
        .map_err(cannot)?;
    if size as u64 > limit {
        return Ok(None);
    }
    git.find_blob(id).map(Some).map_err(cannot)
}

/// Writes an upload into git's object database from its file, piece by
/// piece (`Odb::writer`), and checks the id against the one hashed as it came.
fn stream_blob(git: &Repository, rel_path: &str, upload: &Upload) -> Result<Oid> {
    let cannot = |e| git_error(&format!("cannot store {rel_path}"), e);
    let odb = git.odb().map_err(cannot)?;
    let size = usize::try_from(upload.size())
        .map_err(|_| Error::internal(format!("{rel_path} is too large for this machine")))?;
    let mut writer = odb.writer(size, git2::ObjectType::Blob).map_err(cannot)?;
    std::io::copy(&mut upload.reader(), &mut writer)
        .map_err(|e| io_failure(&format!("cannot store {rel_path}"), &e))?;
    let id = writer.finalize().map_err(cannot)?;
    if id.to_string() != upload.blob_id() {
        return Err(Error::internal(format!(
            "{rel_path}: the uploaded file changed on disk before it was committed; nothing was written, send it again"
        )));
    }
    Ok(id)
}

pub(super) fn blob_id(bytes: &[u8]) -> Result<Oid> {
    Oid::hash_object(git2::ObjectType::Blob, bytes).map_err(|e| git_error("cannot hash a note", e))
}

/// A note of a commit in progress: its folder held open and its bytes before.
struct Opened<'a> {
    rel: &'a str,
    content: Option<NewBytes<'a>>,
    slot: Slot,
    before: Option<Vec<u8>>,
}

/// What a note's write has ready before any note is touched: its new bytes
/// in a temp file beside it, and its old version held by a hard link (so
/// putting it back needs no free space).
#[derive(Default)]
struct Ready {
    temp: Option<Prepared>,
    /// The temp file's metadata (its mode goes into the tree).
    meta: Option<std::fs::Metadata>,
    held: Option<Held>,
}

/// Writes a commit of several notes in three phases, so that a full disk can
/// only stop it before the first note is touched:
/// 1. everything that takes space: each note's new bytes in a temp file
///    beside it, its old version hard-linked into `.mirai/released/`, the
///    commit's objects, the crash record naming all of it;
/// 2. the notes change by renames and unlinks, which need no space;
/// 3. the index is staged and HEAD moves; a failure here puts every note
///    back by renaming its held link back (again no space needed).
fn write_and_commit_recorded(
    repo: &Repo,
    journal: &mut Journal,
    changes: &[(&str, Option<NewBytes<'_>>)],
    message: &str,
    author: &Author,
) -> Result<String> {
    repo.check_on_branch()?;
    let lock = repo.lock_index(journal)?;
    let index = repo.read_index(&lock)?;
    let mut opened = Vec::with_capacity(changes.len());
    let mut ready: Vec<Ready> = Vec::with_capacity(changes.len());
    let prepared = open_all(repo, &index, changes, &mut opened)
        .and_then(|()| prepare_all(repo, &opened, &mut ready))
        .and_then(|()| {
            let notes: Vec<NewNote<'_>> = opened
                .iter()
                .zip(&ready)
                .map(|(note, ready)| {
                    let mode = ready.meta.as_ref().map_or(FileMode::Blob, blob_mode);
                    (note.rel, note.content.map(|c| (c, mode)))
                })
                .collect();
            repo.build_commit(&notes, (message, author))
        })
        .and_then(|built| record_writing(repo, journal, &opened, &ready).map(|()| built));
    let built = match prepared {
        Ok(built) => built,
        Err(e) => {
            finish_undo(repo, &opened, ready, 0);
            return Err(e);
        }
    };
    let mut written = Vec::with_capacity(opened.len());
    for (touched, note) in opened.iter().enumerate() {
        // Each note is replaced (or deleted) only while it still holds the
        // bytes read under the lock: a save made since is never overwritten.
        let before = note.before.as_deref();
        let result = match (ready[touched].temp.take(), before) {
            (Some(temp), _) => note
                .slot
                .install_checked(temp, before.map(Expected::Bytes))
                .map(Some),
            (None, Some(before)) => note
                .slot
                .remove_checked(Expected::Bytes(before))
                .map(|()| None),
            (None, None) => note.slot.remove().map(|()| None),
        }
        .map_err(|r| match r {
            Refusal::Io(e) => io_failure(&format!("cannot write {}", note.rel), &e),
            r => refused(note.rel, r),
        });
        match result {
            Ok(meta) => written.push(meta),
            Err(e) => return Err(undo_or_keep(repo, journal, &opened, ready, touched, e)),
        }
    }
    let staged: Vec<Staged<'_>> = opened
        .iter()
        .zip(&written)
        .zip(&built.blobs)
        .map(|((note, meta), blob)| (note.rel, (*blob).zip(meta.as_ref())))
        .collect();
    let subject = message.lines().next().unwrap_or("");
    match repo.land_commit(journal, lock, index, &built, &staged, (subject, author)) {
        Ok(sha) => {
            for held in ready.into_iter().filter_map(|r| r.held) {
                repo.releaser.release(held);
            }
            Ok(sha)
        }
        Err(e) => Err(undo_or_keep(repo, journal, &opened, ready, opened.len(), e)),
    }
}

/// Opens each note's folder (made when a created note needs it) and reads its
/// bytes, refusing a note with uncommitted changes. Whatever was opened is in
/// `opened`, for [`finish_undo`], when this fails.
fn open_all<'a>(
    repo: &Repo,
    index: &Entries,
    changes: &[(&'a str, Option<NewBytes<'a>>)],
    opened: &mut Vec<Opened<'a>>,
) -> Result<()> {
    let head = repo.head_tree()?;
    let mut seen = HashSet::with_capacity(changes.len());
    for &(rel, content) in changes {
        if !seen.insert(rel) {
            return Err(Error::internal(format!(
                "{rel} is given twice in one commit; each note may change once"
            )));
        }
        let slot = repo.notes.slot(rel, content.is_some())?;
        let before = match slot.read() {
            Ok(before) => before,
            Err(r) => {
                slot.remove_created_folders();
                return Err(refused(rel, r));
            }
        };
        let dirty = repo.has_uncommitted(index, head.as_ref(), rel, before.as_deref());
        opened.push(Opened {
            rel,
            content,
            slot,
            before,
        });
        if dirty? {
            return Err(Error::conflict(format!(
                "{rel} has uncommitted changes in the working tree or the index; commit or \
                 discard them first (mirai never commits or overwrites someone else's work; an \
                 operator may set MIRAI_DIRTY_NOTES=snapshot to commit such edits first)"
            )));
        }
    }
    Ok(())
}

/// Phase 1 of a write, for each opened note: its new bytes in a temp file
/// beside it, its old version held by a hard link. What was made is in
/// `ready` (for [`finish_undo`]) when this fails.
fn prepare_all(repo: &Repo, opened: &[Opened<'_>], ready: &mut Vec<Ready>) -> Result<()> {
    for note in opened {
        let mut next = Ready::default();
        let made = (|| -> std::io::Result<()> {
            if let Some(content) = note.content {
                let temp = match content {
                    NewBytes::Mem(bytes) => note.slot.prepare(bytes)?,
                    NewBytes::Upload(upload) => note
                        .slot
                        .prepare_with(|dir, temp| upload.move_to(dir, temp))?,
                };
                next.meta = Some(temp.metadata()?);
                next.temp = Some(temp);
            }
            if note.before.is_some() {
                next.held = repo
                    .releaser
                    .hold_note(|into, name| note.slot.link_into(into, name))?;
            }
            Ok(())
        })();
        ready.push(next);
        made.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                // The note went while it was linked aside: someone deleted it,
                // or saved it by renaming a new file over it (link(2) then
                // finds the old file gone).
                refused(note.rel, Refusal::Changed)
            } else {
                io_failure(&format!("cannot prepare the write of {}", note.rel), &e)
            }
        })?;
    }
    Ok(())
}

/// Records what a restart needs to finish or undo the write, before any note
/// changes: each note's blobs and the link holding its old version.
fn record_writing(
    repo: &Repo,
    journal: &mut Journal,
    opened: &[Opened<'_>],
    ready: &[Ready],
) -> Result<()> {
    let hex = |bytes: Option<&[u8]>| -> Result<Option<String>> {
        Ok(bytes.map(blob_id).transpose()?.map(|id| id.to_string()))
    };
    let mut notes = Vec::with_capacity(opened.len());
    for (note, ready) in opened.iter().zip(ready) {
        let before = hex(note.before.as_deref())?;
        notes.push(NoteIntent {
            note: note.rel.to_string(),
            index_before: before.clone(),
            before,
            after: note
                .content
                .map(NewBytes::blob_id)
                .transpose()?
                .map(|id| id.to_string()),
            released: ready.held.as_ref().map(|held| held.name().to_string()),
            ..NoteIntent::default()
        });
    }
    let (reference, parent) = repo.head_target()?;
    journal.record(|intent| {
        intent.stage = Stage::Writing;
        intent.notes = notes;
        intent.parent = parent.map(|id| id.to_string());
        intent.reference = Some(reference);
    })
}

/// After a failure: puts the first `touched` notes back as they were (newest
/// first; from the held link by a rename where there is one, which needs no
/// space), drops every temp file and link left, then removes the folders made
/// for the notes. Answers what could not be put back.
fn finish_undo(
    repo: &Repo,
    opened: &[Opened<'_>],
    mut ready: Vec<Ready>,
    touched: usize,
) -> String {
    let mut failed = String::new();
    for (i, note) in opened.iter().enumerate().take(touched).rev() {
        // Each note goes back only while it holds what the write put there: a
        // save someone made since stays (uncommitted, as any edit of theirs).
        let installed = note.content.map(NewBytes::expected);
        let held = ready.get_mut(i).and_then(|r| r.held.take());
        let restored = match held {
            Some(held) => match held.put_back(&note.slot, installed) {
                Ok(None) => Ok(()),
                Ok(Some(kept)) => {
                    repo.releaser.release(kept);
                    Ok(())
                }
                Err((held, e)) => {
                    let again = note.slot.restore_checked(note.before.as_deref(), installed);
                    repo.releaser.release(held);
                    again
                        .map(drop)
                        .map_err(|again| format!("{e}; then {again}"))
                }
            },
            None => note
                .slot
                .restore_checked(note.before.as_deref(), installed)
                .map(drop)
                .map_err(|e| e.to_string()),
        };
        if let Err(e) = restored {
            failed.push_str(&format!("; restoring {} also failed: {e}", note.rel));
        }
    }
    for (note, ready) in opened.iter().zip(ready) {
        if let Some(temp) = ready.temp {
            note.slot.discard(temp);
        }
        if let Some(held) = ready.held {
            repo.releaser.release(held);
        }
    }
    for note in opened.iter().rev() {
        note.slot.remove_created_folders();
    }
    failed
}

/// [`finish_undo`]; when a note could not be put back, the crash record stays
/// in force (the next write, or the next start, rolls it back) and the error
/// says so.
fn undo_or_keep(
    repo: &Repo,
    journal: &mut Journal,
    opened: &[Opened<'_>],
    ready: Vec<Ready>,
    touched: usize,
    mut e: Error,
) -> Error {
    let failed = finish_undo(repo, opened, ready, touched);
    if !failed.is_empty() {
        e.message.push_str(&failed);
        e.message.push_str(
            "; mirai keeps its crash record and puts the notes back before its next write",
        );
        journal.keep_for_recovery();
    }
    e
}

/// An I/O failure as an error: 507 `insufficient_storage` when the disk (or
/// the user's quota) is full, else `internal`.
fn io_failure(context: &str, e: &std::io::Error) -> Error {
    if is_storage_full(e) {
        full_disk(format!("{context}: {e}"))
    } else {
        Error::internal(format!("{context}: {e}"))
    }
}

/// Whether `e` says the file system (or the quota) has no room left.
fn is_storage_full(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// 507 `insufficient_storage`, naming the disk and what to do.
fn full_disk(detail: String) -> Error {
    Error::new(
        ErrorCode::InsufficientStorage,
        format!(
            "the disk holding NOTES_ROOT is full, so the write was not made and the notes are as \
             they were: free some space, then retry ({detail})"
        ),
    )
}

/// A write's failure as the caller sees it: one that the disk being full
/// caused, which libgit2 reports only in its own words, is 507
/// `insufficient_storage`.
fn storage(e: Error) -> Error {
    let full = ["No space left on device", "Disk quota exceeded"]
        .iter()
        .any(|said| e.message.contains(said));
    if full && e.code != ErrorCode::InsufficientStorage {
        full_disk(e.message)
    } else {
        e
    }
}

/// Commits someone's uncommitted edits to `rel_path` as they are on disk, in a
/// commit of their own (`mirai: snapshot of uncommitted edits to <path>`, never
/// with a `Mirai-Run` trailer), so a write on top keeps both in history
/// (`MIRAI_DIRTY_NOTES=snapshot`). `None` when the note had nothing uncommitted.
pub fn snapshot(repo: &Repo, rel_path: &str, author: &Author) -> Result<Option<String>> {
    snapshot_inner(repo, rel_path, author).map_err(|e| repo.scrub(e))
}

fn snapshot_inner(repo: &Repo, rel_path: &str, author: &Author) -> Result<Option<String>> {
    let mut journal = repo.begin_write()?;
    let result = snapshot_recorded(repo, &mut journal, rel_path, author);
    journal.idle();
    result.map_err(storage)
}

fn snapshot_recorded(
    repo: &Repo,
    journal: &mut Journal,
    rel_path: &str,
    author: &Author,
) -> Result<Option<String>> {
    repo.check_on_branch()?;
    let lock = repo.lock_index(journal)?;
    let index = repo.read_index(&lock)?;
    let slot = repo.notes.existing_slot(rel_path)?;
    let (work, meta) = match &slot {
        Some(slot) => {
            let work = slot.read().map_err(|r| refused(rel_path, r))?;
            let meta = match &work {
                Some(_) => Some(slot.stat().map_err(|r| refused(rel_path, r))?),
                None => None,
            };
            (work, meta)
        }
        None => (None, None),
    };
    let head = repo.head_tree()?;
    if !repo.has_uncommitted(&index, head.as_ref(), rel_path, work.as_deref())? {
        return Ok(None);
    }
    // Nothing is written to the note: a restart never rolls a snapshot back
    // (before = after), only puts the index entry right if the commit landed.
    let work_id = work.as_deref().map(blob_id).transpose()?;
    let (reference, parent) = repo.head_target()?;
    journal.record(|intent| {
        let before = work_id.map(|id| id.to_string());
        intent.stage = Stage::Writing;
        intent.notes = vec![NoteIntent {
            note: rel_path.to_string(),
            after: before.clone(),
            before,
            index_before: index.get(rel_path, 0).map(|entry| entry.id.to_string()),
            ..NoteIntent::default()
        }];
        intent.parent = parent.map(|id| id.to_string());
        intent.reference = Some(reference);
    })?;
    let message = format!("mirai: snapshot of uncommitted edits to {rel_path}\n");
    let mode = meta.as_ref().map_or(FileMode::Blob, blob_mode);
    let built = repo.build_commit(
        &[(
            rel_path,
            work.as_deref().map(|bytes| (NewBytes::Mem(bytes), mode)),
        )],
        (&message, author),
    )?;
    let staged = [(rel_path, work_id.zip(meta.as_ref()))];
    let subject = message.lines().next().unwrap_or("");
    repo.land_commit(journal, lock, index, &built, &staged, (subject, author))
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use std::fs;
    use std::process::Command;

    fn author() -> Author {
        Author {
            caller: None,
            name: "mirai".into(),
            email: "mirai@localhost".into(),
        }
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn open_repo(root: &Path) -> Result<Repo> {
        Repo::open(&Notes::open(root)?)
    }

    fn new_repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        // As `serve` prepares a root: mirai's own state is never a change.
        exclude_mirai_folder(&dir.path().join(".git")).unwrap();
        dir
    }

    fn seeded() -> tempfile::TempDir {
        let dir = new_repo();
        fs::write(dir.path().join("a.md"), "alpha\n").unwrap();
        fs::write(dir.path().join("b.md"), "beta\n").unwrap();
        git(dir.path(), &["add", "."]);
        git(dir.path(), &["commit", "-qm", "seed"]);
        dir
    }

    fn assert_fsck_clean(dir: &Path) {
        git(dir, &["fsck", "--strict", "--no-progress"]);
    }

    #[test]
    fn commits_only_the_path_and_keeps_other_changes() {
        let dir = seeded();
        let root = dir.path();
        // Another file staged, and another one modified but not staged.
        fs::write(root.join("b.md"), "beta staged\n").unwrap();
        git(root, &["add", "b.md"]);
        fs::write(root.join("b.md"), "beta unstaged\n").unwrap();
        fs::write(root.join("c.md"), "untracked\n").unwrap();

        let repo = open_repo(root).unwrap();
        let before = repo.head().unwrap().unwrap();
        let sha = write_and_commit(
            &repo,
            &[("a.md", Some(&b"alpha 2\n"[..]))],
            "mcp.patch_apply: a.md\n",
            &author(),
        )
        .unwrap();
        assert_eq!(repo.head().unwrap().unwrap(), sha);
        assert_eq!(git(root, &["rev-parse", "HEAD~1"]).trim(), before);
        assert_eq!(
            git(root, &["show", "--name-only", "--format=", "HEAD"]).trim(),
            "a.md"
        );
        assert_eq!(git(root, &["show", "HEAD:a.md"]), "alpha 2\n");
        assert_eq!(git(root, &["show", "HEAD:b.md"]), "beta\n");
        assert_eq!(
            git(
                root,
                &["log", "-1", "--format=%an <%ae>%n%cn <%ce>%n%B", "HEAD"]
            ),
            "mirai <mirai@localhost>\nmirai <mirai@localhost>\nmcp.patch_apply: a.md\n\n"
        );
        let status = git(root, &["status", "--porcelain"]);
        assert_eq!(status, "MM b.md\n?? c.md\n");
        assert_eq!(git(root, &["show", ":b.md"]), "beta staged\n");
        assert_eq!(
            fs::read_to_string(root.join("b.md")).unwrap(),
            "beta unstaged\n"
        );
        assert_fsck_clean(root);
    }

    #[test]
    fn first_commit_on_an_unborn_branch_and_nested_creation() {
        let dir = new_repo();
        let root = dir.path();
        let repo = open_repo(root).unwrap();
        assert_eq!(repo.head().unwrap(), None);
        let sha = write_and_commit(
            &repo,
            &[("x/y/z.md", Some(&b"new\n"[..]))],
            "mcp.patch_apply: x/y/z.md\n",
            &author(),
        )
        .unwrap();
        assert_eq!(git(root, &["rev-parse", "main"]).trim(), sha);
        assert_eq!(git(root, &["rev-list", "--count", "HEAD"]).trim(), "1");
        assert_eq!(git(root, &["show", "HEAD:x/y/z.md"]), "new\n");
        assert_eq!(git(root, &["status", "--porcelain"]), "");
        assert_fsck_clean(root);
    }

    #[test]
    fn deletion_is_committed_and_the_index_follows() {
        let dir = seeded();
        let root = dir.path();
        let repo = open_repo(root).unwrap();
        write_and_commit(
            &repo,
            &[("a.md", None)],
            "mcp.patch_apply: a.md\n",
            &author(),
        )
        .unwrap();
        assert!(!root.join("a.md").exists());
        assert_eq!(git(root, &["ls-tree", "--name-only", "HEAD"]), "b.md\n");
        assert_eq!(git(root, &["status", "--porcelain"]), "");
        assert_fsck_clean(root);
    }

    #[test]
    fn held_index_lock_is_a_git_error_and_changes_nothing() {
        let dir = seeded();
        let root = dir.path();
        fs::write(root.join("b.md"), "beta staged\n").unwrap();
        git(root, &["add", "b.md"]);
        let index_before = fs::read(root.join(".git/index")).unwrap();
        let head_before = git(root, &["rev-parse", "HEAD"]);
        let original = b"alpha\r\nno newline \xe2\x9c\x93".to_vec();
        fs::write(root.join("a.md"), &original).unwrap();
        fs::write(root.join(".git/index.lock"), "").unwrap();

        let repo = open_repo(root).unwrap();
        let err = write_and_commit(
            &repo,
            &[("a.md", Some(&b"changed\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::GitError, "{err}");
        assert_eq!(fs::read(root.join("a.md")).unwrap(), original);
        assert_eq!(git(root, &["rev-parse", "HEAD"]), head_before);
        assert_eq!(fs::read(root.join(".git/index")).unwrap(), index_before);

        // A created note is removed again, with the folders made for it.
        let err = write_and_commit(
            &repo,
            &[("new/deep/n.md", Some(&b"x\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::GitError);
        assert!(!root.join("new").exists());
        // A deleted note comes back.
        let err = write_and_commit(&repo, &[("b.md", None)], "m\n", &author()).unwrap_err();
        assert_eq!(err.code, ErrorCode::GitError);
        assert_eq!(
            fs::read_to_string(root.join("b.md")).unwrap(),
            "beta staged\n"
        );

        // Once the lock is gone, the next commit carries only its own change.
        fs::remove_file(root.join(".git/index.lock")).unwrap();
        fs::write(root.join("a.md"), "alpha\n").unwrap();
        write_and_commit(
            &repo,
            &[("a.md", Some(&b"alpha 3\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap();
        assert_eq!(
            git(root, &["show", "--name-only", "--format=", "HEAD"]).trim(),
            "a.md"
        );
        assert_eq!(git(root, &["status", "--porcelain"]), "M  b.md\n");
        assert_fsck_clean(root);
    }

    #[test]
    fn head_moves_by_compare_and_swap_even_after_an_outside_commit() {
        let dir = seeded();
        let root = dir.path();
        let repo = open_repo(root).unwrap();
        fs::write(root.join("b.md"), "beta 2\n").unwrap();
        git(root, &["commit", "-qam", "outside"]);
        let outside = git(root, &["rev-parse", "HEAD"]);
        write_and_commit(
            &repo,
            &[("a.md", Some(&b"alpha 2\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap();
        assert_eq!(git(root, &["rev-parse", "HEAD~1"]), outside);
        assert_eq!(git(root, &["show", "HEAD:b.md"]), "beta 2\n");
    }

    #[test]
    fn changed_since_compares_the_path_between_commits() {
        let dir = seeded();
        let root = dir.path();
        let repo = open_repo(root).unwrap();
        let base = repo.head().unwrap().unwrap();
        assert!(!repo.changed_since(&base, "a.md").unwrap());
        write_and_commit(&repo, &[("b.md", Some(&b"beta 2\n"[..]))], "m\n", &author()).unwrap();
        assert!(!repo.changed_since(&base, "a.md").unwrap());
        assert!(repo.changed_since(&base, "b.md").unwrap());
        assert!(repo.changed_since(&base[..10], "b.md").unwrap());
        let unknown = repo.changed_since("0123456789abcdef0123456789abcdef01234567", "a.md");
        assert_eq!(unknown.unwrap_err().code, ErrorCode::Conflict);
        assert_eq!(
            repo.changed_since("HEAD~1", "a.md").unwrap_err().code,
            ErrorCode::Conflict
        );
    }

    #[test]
    fn git_errors_name_files_relative_to_the_root() {
        let dir = seeded();
        let root = dir.path().canonicalize().unwrap();
        let repo = open_repo(&root).unwrap();
        // A ref lock left behind makes libgit2 fail with the lock's absolute path.
        fs::write(root.join(".git/refs/heads/main.lock"), "").unwrap();
        let err =
            write_and_commit(&repo, &[("a.md", Some(&b"x\n"[..]))], "m\n", &author()).unwrap_err();
        assert_eq!(err.code, ErrorCode::GitError, "{err}");
        assert!(err.message.contains(".git/refs/heads/main.lock"), "{err}");
        assert!(
            !err.message.contains(root.to_str().unwrap()),
            "{}",
            err.message
        );
        assert_eq!(fs::read_to_string(root.join("a.md")).unwrap(), "alpha\n");
    }

    #[test]
    fn a_dead_fetchs_shallow_lock_is_swept_only_where_git_would_not_hold_one() {
        let dir = seeded();
        let root = dir.path();
        // A killed fetch leaves libgit2's shallow.lock; git never takes it in a
        // repository that is not shallow, so the start-up sweep removes it.
        fs::write(root.join(".git/shallow.lock"), "").unwrap();
        let repo = open_repo(root).unwrap();
        repo.recover(true).unwrap();
        assert!(!root.join(".git/shallow.lock").exists());
        drop(repo);
        // In a shallow repository a person's git may hold it: it stays.
        let head = git(root, &["rev-parse", "HEAD"]);
        fs::write(root.join(".git/shallow"), head).unwrap();
        fs::write(root.join(".git/shallow.lock"), "").unwrap();
        let repo = open_repo(root).unwrap();
        repo.recover(true).unwrap();
        assert!(root.join(".git/shallow.lock").exists());
    }

    #[test]
    fn replaced_files_are_released_after_the_commit_and_leftovers_swept_at_start() {
        let dir = seeded();
        let root = dir.path();
        let repo = open_repo(root).unwrap();
        for n in 0..5 {
            let text = format!("alpha {n}\n");
            write_and_commit(&repo, &[("a.md", Some(text.as_bytes()))], "m\n", &author()).unwrap();
        }
        write_and_commit(&repo, &[("b.md", None)], "m\n", &author()).unwrap();
        drop(repo); // waits for the links still queued
        let listing = |folder: &str| -> Vec<String> {
            fs::read_dir(root.join(folder))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        };
        assert_eq!(listing(".mirai/released"), Vec::<String>::new());
        assert_eq!(listing(".git/mirai-released"), Vec::<String>::new());
        assert_eq!(git(root, &["status", "--porcelain"]), "");
        assert_eq!(fs::read_to_string(root.join("a.md")).unwrap(), "alpha 4\n");

        // What a killed mirai leaves: extra links to old versions, removed at start-up.
        fs::hard_link(root.join("a.md"), root.join(".mirai/released/999999-1")).unwrap();
        fs::hard_link(
            root.join(".git/index"),
            root.join(".git/mirai-released/999999-2"),
        )
        .unwrap();
        let repo = open_repo(root).unwrap();
        assert_eq!(listing(".mirai/released"), Vec::<String>::new());
        assert_eq!(listing(".git/mirai-released"), Vec::<String>::new());
        write_and_commit(
            &repo,
            &[("a.md", Some(&b"alpha 5\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap();
        assert_eq!(git(root, &["status", "--porcelain"]), "");
        assert_fsck_clean(root);
    }

    #[test]
    fn a_person_staging_between_two_writes_is_read_from_disk_and_kept() {
        let dir = seeded();
        let root = dir.path();
        let repo = open_repo(root).unwrap();
        write_and_commit(
            &repo,
            &[("a.md", Some(&b"alpha 2\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap();
        // The index is no longer the file mirai wrote: its kept entries must not be used.
        fs::write(root.join("b.md"), "beta staged\n").unwrap();
        git(root, &["add", "b.md"]);
        fs::write(root.join("c.md"), "new\n").unwrap();
        git(root, &["add", "-N", "c.md"]);
        write_and_commit(
            &repo,
            &[("a.md", Some(&b"alpha 3\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap();
        assert_eq!(git(root, &["status", "--porcelain"]), "M  b.md\n A c.md\n");
        assert_eq!(git(root, &["show", ":b.md"]), "beta staged\n");
        // And the entries mirai kept from that write serve the next one.
        write_and_commit(
            &repo,
            &[("a.md", Some(&b"alpha 4\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap();
        assert_eq!(git(root, &["status", "--porcelain"]), "M  b.md\n A c.md\n");
        assert_eq!(
            git(root, &["show", "--name-only", "--format=", "HEAD"]).trim(),
            "a.md"
        );
    }

    #[test]
    fn never_opens_a_parent_repository() {
        let dir = seeded();
        fs::create_dir(dir.path().join("inner")).unwrap();
        let err = open_repo(&dir.path().join("inner")).err().unwrap();
        assert_eq!(err.code, ErrorCode::GitError);
    }

    #[test]
    fn several_notes_change_in_one_commit_and_the_index_follows_all() {
        let dir = seeded();
        let root = dir.path();
        fs::write(root.join("c.md"), "untracked\n").unwrap();
        let repo = open_repo(root).unwrap();
        let before = repo.head().unwrap().unwrap();
        let sha = write_and_commit(
            &repo,
            &[
                ("b.md", None),
                ("x/y/new.md", Some(&b"new\n"[..])),
                ("a.md", Some(&b"alpha 2\n"[..])),
            ],
            "several\n",
            &author(),
        )
        .unwrap();
        assert_eq!(git(root, &["rev-parse", "HEAD~1"]).trim(), before);
        assert_eq!(repo.head().unwrap().unwrap(), sha);
        assert_eq!(
            git(root, &["show", "--name-status", "--format=", "HEAD"]),
            "M\ta.md\nD\tb.md\nA\tx/y/new.md\n"
        );
        assert_eq!(git(root, &["show", "HEAD:a.md"]), "alpha 2\n");
        assert_eq!(git(root, &["show", "HEAD:x/y/new.md"]), "new\n");
        assert!(!root.join("b.md").exists());
        assert_eq!(git(root, &["status", "--porcelain"]), "?? c.md\n");
        assert_eq!(git(root, &["ls-files"]), "a.md\nx/y/new.md\n");
        assert_fsck_clean(root);
    }

    #[test]
    fn a_failed_commit_of_several_notes_puts_every_one_back() {
        let dir = seeded();
        let root = dir.path();
        let original = b"alpha\r\nno newline \xe2\x9c\x93".to_vec();
        fs::write(root.join("a.md"), &original).unwrap();
        git(root, &["commit", "-qam", "crlf"]);
        let index_before = fs::read(root.join(".git/index")).unwrap();
        let head_before = git(root, &["rev-parse", "HEAD"]);
        let repo = open_repo(root).unwrap();
        // The branch's lock is held: the notes are written, then the commit fails.
        fs::write(root.join(".git/refs/heads/main.lock"), "").unwrap();
        let err = write_and_commit(
            &repo,
            &[
                ("a.md", Some(&b"changed\n"[..])),
                ("new/deep/n.md", Some(&b"x\n"[..])),
                ("b.md", None),
            ],
            "m\n",
            &author(),
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::GitError, "{err}");
        assert_eq!(fs::read(root.join("a.md")).unwrap(), original);
        assert_eq!(fs::read_to_string(root.join("b.md")).unwrap(), "beta\n");
        assert!(!root.join("new").exists());
        assert_eq!(git(root, &["rev-parse", "HEAD"]), head_before);
        assert_eq!(fs::read(root.join(".git/index")).unwrap(), index_before);
        fs::remove_file(root.join(".git/refs/heads/main.lock")).unwrap();
        assert_eq!(git(root, &["status", "--porcelain"]), "");

        // A note with someone's edit among them: refused before anything is written.
        fs::write(root.join("b.md"), "a person's beta\n").unwrap();
        let err = write_and_commit(
            &repo,
            &[
                ("made/n.md", Some(&b"x\n"[..])),
                ("b.md", Some(&b"mirai's\n"[..])),
            ],
            "m\n",
            &author(),
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict, "{err}");
        assert!(
            err.message.contains("b.md has uncommitted changes"),
            "{err}"
        );
        assert!(!root.join("made").exists());
        assert_eq!(
            fs::read_to_string(root.join("b.md")).unwrap(),
            "a person's beta\n"
        );
        assert_eq!(git(root, &["rev-parse", "HEAD"]), head_before);

        // The same note twice is refused.
        let err = write_and_commit(
            &repo,
            &[("a.md", Some(&b"1\n"[..])), ("a.md", Some(&b"2\n"[..]))],
            "m\n",
            &author(),
        )
        .unwrap_err();
        assert!(err.message.contains("given twice"), "{err}");
        assert_eq!(fs::read(root.join("a.md")).unwrap(), original);
        assert_eq!(git(root, &["rev-parse", "HEAD"]), head_before);
        assert_fsck_clean(root);
    }
}
