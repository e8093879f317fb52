//! The notes repository through git2: HEAD, whether a note changed since a given
//! commit, and committing exactly one note, so that the file, the commit and the
//! index entry change together or not at all. Nothing here knows about HTTP.
//!
//! A commit touches only the one path: its tree is HEAD's tree with that entry
//! replaced (other staged or unstaged changes stay where they are), the index
//! entry is rewritten so `git status` is clean for it, and HEAD moves by
//! compare-and-swap. The index is written before HEAD moves, so when another git
//! process holds `index.lock` the commit fails with nothing visible changed.
//!
//! Git's own lock is held the way git holds it ([`index_lock`]): `index.lock`
//! is taken before the index is read and released by renaming the new index
//! into place, so a person's `git add` racing with mirai is waited for or
//! refused, never undone. A note with someone else's uncommitted changes is
//! never written or committed ([`write_and_commit`] refuses; [`snapshot`]
//! commits them first, when the operator opted in).
//!
//! libgit2 touches only `.git` (DESIGN 8.7): the note's bytes are written and
//! read by mirai through the root handle ([`crate::notes::root`]); the blob is
//! made from those bytes and the index entry from the written file's `fstat`,
//! so git never reads a working-tree file by name.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use git2::build::TreeUpdateBuilder;
use git2::{FileMode, Index, IndexEntry, IndexTime, Oid, Repository, Signature};

use crate::error::{Error, Result};
use crate::notes::{refused, Notes};
use index_lock::{IndexLock, LOCK_WAIT};

mod index_lock;

/// Who a commit is by (author and committer alike).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    pub name: String,
    pub email: String,
}

/// The notes repository, opened at exactly the notes root.
pub struct Repo {
    git: Repository,
    /// The root handle every working-tree file is written through.
    notes: Notes,
}

fn git_error(context: &str, e: git2::Error) -> Error {
    Error::git(format!("{context}: {}", e.message()))
}

impl Repo {
    /// Opens the repository whose work tree is `root` itself; a parent repository
    /// is never used (libgit2's plain open does not search upwards).
    pub fn open(root: &Path) -> Result<Repo> {
        // Messages name NOTES_ROOT, never the server's absolute path (DESIGN 8.5).
        let git = Repository::open(root)
            .map_err(|e| git_error("cannot open the notes repository (NOTES_ROOT)", e))?;
        if git.workdir().is_none() {
            return Err(Error::git(
                "the notes root (NOTES_ROOT) is a bare repository; it needs a work tree",
            ));
        }
        let notes = Notes::open(root)?;
        Ok(Repo { git, notes })
    }

    /// The commit HEAD points at, or `None` on an unborn branch.
    pub fn head(&self) -> Result<Option<String>> {
        self.head_target()
            .map(|(_, oid)| oid.map(|oid| oid.to_string()))
            .map_err(|e| self.scrub(e))
    }

    /// libgit2's messages name files by absolute path; callers see them
    /// relative to the notes root (DESIGN 8.5).
    fn scrub(&self, mut e: Error) -> Error {
        let root = self.notes.root().display().to_string();
        e.message = e
            .message
            .replace(&format!("{root}/"), "")
            .replace(&root, "NOTES_ROOT");
        e
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

    /// Commits `rel_path` as `written` says (the bytes mirai wrote and the
    /// file's metadata after writing them; `None`: deleted) on top of HEAD,
    /// holding `lock`, and returns the new commit's id. Only that path changes,
    /// in the commit and in the index (`index`, read under the lock). The new
    /// index waits in `index.lock` while HEAD moves by compare-and-swap, and
    /// replaces the index only once HEAD has moved; a failure on the way
    /// leaves HEAD and the index as they were.
    fn commit_locked(
        &self,
        lock: IndexLock,
        index: &Index,
        rel_path: &str,
        written: Option<(&[u8], &std::fs::Metadata)>,
        message: &str,
        author: &Author,
    ) -> Result<String> {
        let git = &self.git;
        let path = Path::new(rel_path);
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
        let new_entry = match written {
            Some((bytes, meta)) => {
                let id = git
                    .blob(bytes)
                    .map_err(|e| git_error(&format!("cannot store {rel_path}"), e))?;
                let entry = index_entry(rel_path, id, meta);
                update.upsert(rel_path, id, file_mode(entry.mode));
                Some(entry)
            }
            None => {
                if base_tree.get_path(path).is_ok() {
                    update.remove(rel_path);
                }
                None
            }
        };
        let commit_id = update
            .create_updated(git, &base_tree)
            .and_then(|tree_id| git.find_tree(tree_id))
            .and_then(|tree| {
                let sig = Signature::now(&author.name, &author.email)?;
                let parents: Vec<_> = parent.iter().collect();
                git.commit(None, &sig, &sig, message, &tree, &parents)
            })
            .map_err(|e| git_error("cannot create the commit", e))?;

        // Every other entry (staged work of others included) as it is, ours replaced.
        let others = index
            .iter()
            .filter(|entry| entry.path != rel_path.as_bytes());
        let mut entries: Vec<IndexEntry> = others.chain(new_entry).collect();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        lock.stage(index.version(), entries.into_iter())?;

        let subject = message.lines().next().unwrap_or("");
        let log = match parent_id {
            Some(_) => format!("commit: {subject}"),
            None => format!("commit (initial): {subject}"),
        };
        let moved = match parent_id {
            Some(old) => git.reference_matching(&reference, commit_id, true, old, &log),
            None => git.reference(&reference, commit_id, false, &log),
        };
        if let Err(e) = moved {
            // Dropping the lock discards the staged index: nothing changed.
            return Err(Error::git(format!(
                "cannot move {reference} to the new commit (did another process commit                  meanwhile?): {}",
                e.message()
            )));
        }
        if let Err(e) = lock.commit() {
            // HEAD has the commit; only git's index is behind (a later write or
            // `git status` shows it). The commit is not taken back.
            log::warn!("committed {rel_path} but could not replace the index: {e}");
        }
        Ok(commit_id.to_string())
    }

    /// Whether `rel_path` holds changes that are not in HEAD: a staged entry
    /// that differs from HEAD's (or a merge conflict), or working-tree bytes
    /// (`work`; `None`: no file) that differ from HEAD's blob.
    fn has_uncommitted(&self, index: &Index, rel_path: &str, work: Option<&[u8]>) -> Result<bool> {
        let path = Path::new(rel_path);
        let head = match self.head_target()?.1 {
            Some(id) => self
                .git
                .find_commit(id)
                .and_then(|c| c.tree())
                .map_err(|e| git_error("cannot read the HEAD tree", e))?
                .get_path(path)
                .ok()
                .map(|entry| entry.id()),
            None => None,
        };
        if (1..=3).any(|stage| index.get_path(path, stage).is_some()) {
            return Ok(true);
        }
        if index.get_path(path, 0).map(|entry| entry.id) != head {
            return Ok(true);
        }
        let work = work
            .map(|bytes| Oid::hash_object(git2::ObjectType::Blob, bytes))
            .transpose()
            .map_err(|e| git_error("cannot hash a note", e))?;
        Ok(work != head)
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
        walk.hide(base.id()).ok()?;
        let path = Path::new(rel_path);
        let entry = |commit: &git2::Commit| {
            commit
                .tree()
                .ok()
                .and_then(|tree| tree.get_path(path).ok().map(|e| (e.id(), e.filemode())))
        };
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
        let head = self
            .git
            .find_commit(head_id)
            .map_err(|e| git_error("cannot read the HEAD commit", e))?;
        let entry_at = |commit: &git2::Commit| -> Result<Option<(Oid, i32)>> {
            let tree = commit
                .tree()
                .map_err(|e| git_error("cannot read a commit's tree", e))?;
            Ok(tree
                .get_path(Path::new(rel_path))
                .ok()
                .map(|e| (e.id(), e.filemode())))
        };
        Ok(entry_at(&base)? != entry_at(&head)?)
    }
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

fn file_mode(mode: u32) -> FileMode {
    match mode {
        0o100755 => FileMode::BlobExecutable,
        0o120000 => FileMode::Link,
        _ => FileMode::Blob,
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

/// Writes (or, with `None`, deletes) the note at `rel_path` through the root
/// handle and commits it, holding git's index lock from before the index is
/// read until the new one is in place. A note with someone else's uncommitted
/// changes (staged, or in the working tree) is refused with 409 `conflict` and
/// left exactly as it is. If the commit fails, the note is put back exactly as
/// it was (a created note removed with the folders made for it, a deleted one
/// recreated) and the commit's error is returned. A note that is, or passes
/// through, a symlink is refused (`invalid_path`), never written through.
pub fn write_and_commit(
    repo: &Repo,
    rel_path: &str,
    new_content: Option<&str>,
    message: &str,
    author: &Author,
) -> Result<String> {
    write_and_commit_inner(repo, rel_path, new_content, message, author).map_err(|e| repo.scrub(e))
}

fn write_and_commit_inner(
    repo: &Repo,
    rel_path: &str,
    new_content: Option<&str>,
    message: &str,
    author: &Author,
) -> Result<String> {
    let lock = IndexLock::acquire(repo.git.path(), LOCK_WAIT)?;
    let index = lock.read()?;
    let slot = repo.notes.slot(rel_path, new_content.is_some())?;
    let before = match slot.read() {
        Ok(before) => before,
        Err(r) => {
            slot.remove_created_folders();
            return Err(refused(rel_path, r));
        }
    };
    if repo.has_uncommitted(&index, rel_path, before.as_deref())? {
        slot.remove_created_folders();
        return Err(Error::conflict(format!(
            "{rel_path} has uncommitted changes in the working tree or the index; commit or              discard them first (mirai never commits or overwrites someone else's work; an \
             operator may set MIRAI_DIRTY_NOTES=snapshot to commit such edits first)"
        )));
    }
    let written = match new_content {
        Some(content) => match slot.write(content.as_bytes()) {
            Ok(meta) => Some((content.as_bytes(), meta)),
            Err(e) => {
                slot.remove_created_folders();
                return Err(Error::internal(format!("cannot write {rel_path}: {e}")));
            }
        },
        None => {
            slot.remove().map_err(|r| refused(rel_path, r))?;
            None
        }
    };
    let staged = written.as_ref().map(|(bytes, meta)| (*bytes, meta));
    match repo.commit_locked(lock, &index, rel_path, staged, message, author) {
        Ok(sha) => Ok(sha),
        Err(mut e) => {
            let restored = slot.restore(before.as_deref());
            slot.remove_created_folders();
            if let Err(r) = restored {
                e.message
                    .push_str(&format!("; restoring {rel_path} also failed: {r}"));
            }
            Err(e)
        }
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
    let lock = IndexLock::acquire(repo.git.path(), LOCK_WAIT)?;
    let index = lock.read()?;
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
    if !repo.has_uncommitted(&index, rel_path, work.as_deref())? {
        return Ok(None);
    }
    let message = format!("mirai: snapshot of uncommitted edits to {rel_path}\n");
    let staged = work.as_deref().zip(meta.as_ref());
    repo.commit_locked(lock, &index, rel_path, staged, &message, author)
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

    fn new_repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
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

        let repo = Repo::open(root).unwrap();
        let before = repo.head().unwrap().unwrap();
        let sha = write_and_commit(
            &repo,
            "a.md",
            Some("alpha 2\n"),
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
        let repo = Repo::open(root).unwrap();
        assert_eq!(repo.head().unwrap(), None);
        let sha = write_and_commit(
            &repo,
            "x/y/z.md",
            Some("new\n"),
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
        let repo = Repo::open(root).unwrap();
        write_and_commit(&repo, "a.md", None, "mcp.patch_apply: a.md\n", &author()).unwrap();
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

        let repo = Repo::open(root).unwrap();
        let err = write_and_commit(&repo, "a.md", Some("changed\n"), "m\n", &author()).unwrap_err();
        assert_eq!(err.code, ErrorCode::GitError, "{err}");
        assert_eq!(fs::read(root.join("a.md")).unwrap(), original);
        assert_eq!(git(root, &["rev-parse", "HEAD"]), head_before);
        assert_eq!(fs::read(root.join(".git/index")).unwrap(), index_before);

        // A created note is removed again, with the folders made for it.
        let err =
            write_and_commit(&repo, "new/deep/n.md", Some("x\n"), "m\n", &author()).unwrap_err();
        assert_eq!(err.code, ErrorCode::GitError);
        assert!(!root.join("new").exists());
        // A deleted note comes back.
        let err = write_and_commit(&repo, "b.md", None, "m\n", &author()).unwrap_err();
        assert_eq!(err.code, ErrorCode::GitError);
        assert_eq!(
            fs::read_to_string(root.join("b.md")).unwrap(),
            "beta staged\n"
        );

        // Once the lock is gone, the next commit carries only its own change.
        fs::remove_file(root.join(".git/index.lock")).unwrap();
        fs::write(root.join("a.md"), "alpha\n").unwrap();
        write_and_commit(&repo, "a.md", Some("alpha 3\n"), "m\n", &author()).unwrap();
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
        let repo = Repo::open(root).unwrap();
        fs::write(root.join("b.md"), "beta 2\n").unwrap();
        git(root, &["commit", "-qam", "outside"]);
        let outside = git(root, &["rev-parse", "HEAD"]);
        write_and_commit(&repo, "a.md", Some("alpha 2\n"), "m\n", &author()).unwrap();
        assert_eq!(git(root, &["rev-parse", "HEAD~1"]), outside);
        assert_eq!(git(root, &["show", "HEAD:b.md"]), "beta 2\n");
    }

    #[test]
    fn changed_since_compares_the_path_between_commits() {
        let dir = seeded();
        let root = dir.path();
        let repo = Repo::open(root).unwrap();
        let base = repo.head().unwrap().unwrap();
        assert!(!repo.changed_since(&base, "a.md").unwrap());
        write_and_commit(&repo, "b.md", Some("beta 2\n"), "m\n", &author()).unwrap();
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
        let repo = Repo::open(&root).unwrap();
        // A ref lock left behind makes libgit2 fail with the lock's absolute path.
        fs::write(root.join(".git/refs/heads/main.lock"), "").unwrap();
        let err = write_and_commit(&repo, "a.md", Some("x\n"), "m\n", &author()).unwrap_err();
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
    fn never_opens_a_parent_repository() {
        let dir = seeded();
        fs::create_dir(dir.path().join("inner")).unwrap();
        let err = Repo::open(&dir.path().join("inner")).err().unwrap();
        assert_eq!(err.code, ErrorCode::GitError);
    }
}
