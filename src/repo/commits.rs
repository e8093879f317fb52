//! Reading commits back for `notes.revert`: what one commit changed, path by
//! path, against its first parent (no rename detection: a rename is a deletion
//! and a creation, each of which mirai can take back). A run's commits are
//! found in the history cache (`history::History::commits_of_run`).

use std::path::Path;

use git2::{Commit, Delta, DiffOptions, FileMode, Oid};

use super::{git_error, Repo};
use crate::error::{Error, ErrorCode, Result};

/// The subject of every `notes.move` commit starts with this: taking one
/// back is bound by `MIRAI_MOVE_MAX_NOTES`, not `MIRAI_CHANGES_MAX_PATCHES`.
pub const MOVE_SUBJECT: &str = "mcp.notes_move: ";

/// The trailer of a move made with `update_links: false` (value
/// [`LINKS_UNCHANGED`]): a replay of it moves the note and rewrites nothing.
pub const MOVE_LINKS_TRAILER: &str = "Mirai-Move-Links";
/// [`MOVE_LINKS_TRAILER`]'s one value.
pub const LINKS_UNCHANGED: &str = "unchanged";

/// How many paths a commit taken back may change: `changes` for any commit,
/// `move_notes` rewritten notes (plus the moved note's two paths) for a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileBound {
    pub changes: usize,
    pub move_notes: usize,
}

impl FileBound {
    /// The bound for a commit whose subject is `subject`, and the setting
    /// that sets it.
    pub fn of(&self, subject: &str) -> (usize, &'static str) {
        if subject.starts_with(MOVE_SUBJECT) {
            (self.move_notes.saturating_add(2), "MIRAI_MOVE_MAX_NOTES")
        } else {
            (self.changes, "MIRAI_CHANGES_MAX_PATCHES")
        }
    }
}

/// What one commit did to one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    /// The bytes in the first parent (`None`: not there).
    pub before: Option<Vec<u8>>,
    /// The bytes in the commit (`None`: deleted).
    pub after: Option<Vec<u8>>,
    /// Both sides are regular files (not a symlink, a submodule or a type change).
    pub regular: bool,
}

/// A commit and the paths it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitChanges {
    /// The full id.
    pub id: String,
    /// The id abbreviated as git abbreviates it (unique in this repository).
    pub short: String,
    pub subject: String,
    pub files: Vec<FileChange>,
}

impl Repo {
    /// What commit `sha` (4 to 40 hex digits; a commit a pull replayed
    /// stands for its replacement, see [`Repo::replaced_by`]) changed against its first
    /// parent (or, for a root commit, against nothing), only at `only` when
    /// given. Refused: anything but hex (`invalid_request`), a commit this
    /// repository does not have (`not_found`), an abbreviation that names
    /// several, a merge, and a commit changing more paths than `bound` allows
    /// a commit with its subject.
    pub fn commit_changes(
        &self,
        sha: &str,
        only: Option<&str>,
        bound: FileBound,
    ) -> Result<CommitChanges> {
        self.commit_changes_inner(sha, only, bound)
            .map_err(|e| self.scrub(e))
    }

    fn commit_changes_inner(
        &self,
        sha: &str,
        only: Option<&str>,
        bound: FileBound,
    ) -> Result<CommitChanges> {
        let mut commit = self.find_commit_by_sha(sha)?;
        // A commit a pull replayed: its replacement on the branch.
        if let Some(new) = self.replaced_by(commit.id()) {
            commit = self
                .git
                .find_commit(new)
                .map_err(|e| git_error("cannot read a replayed commit", e))?;
        }
        let short = commit
            .as_object()
            .short_id()
            .ok()
            .and_then(|buf| buf.as_str().map(str::to_string))
            .unwrap_or_else(|| commit.id().to_string()[..7].to_string());
        if commit.parent_count() > 1 {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!(
                    "commit {short} is a merge; mirai does not revert merges (git revert -m \
                     chooses a side): revert the commits it brought in instead"
                ),
            ));
        }
        let cannot = |e| git_error(&format!("cannot read what commit {short} changed"), e);
        let tree = commit.tree().map_err(cannot)?;
        let parent_tree = match commit.parent(0) {
            Ok(parent) => Some(parent.tree().map_err(cannot)?),
            Err(_) => None,
        };
        let mut options = DiffOptions::new();
        options.include_typechange(true);
        if let Some(path) = only {
            options.pathspec(path).disable_pathspec_match(true);
        }
        let diff = self
            .git
            .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), Some(&mut options))
            .map_err(cannot)?;
        let subject = commit.summary().unwrap_or("").to_string();
        let (max_files, setting) = bound.of(&subject);
        if diff.deltas().len() > max_files {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!(
                    "commit {short} changes {} paths; at most {max_files} notes change in one \
                     commit ({setting}): give `path` to take back one note at a time, or revert \
                     it with git",
                    diff.deltas().len()
                ),
            ));
        }
        let mut files = Vec::with_capacity(diff.deltas().len());
        for delta in diff.deltas() {
            let (old, new) = (delta.old_file(), delta.new_file());
            let path = new
                .path()
                .or_else(|| old.path())
                .and_then(Path::to_str)
                .ok_or_else(|| {
                    Error::new(
                        ErrorCode::InvalidRequest,
                        format!("commit {short} changes a path that is not UTF-8"),
                    )
                })?
                .to_string();
            let regular =
                |mode: FileMode| matches!(mode, FileMode::Blob | FileMode::BlobExecutable);
            let side = |present: bool, id: Oid| -> Result<Option<Vec<u8>>> {
                if !present {
                    return Ok(None);
                }
                // A note past MIRAI_MAX_NOTE_BYTES (an attachment past
                // MIRAI_MAX_FILE_BYTES) is never loaded: its size is in the header.
                let (size, _) = self
                    .git
                    .odb()
                    .and_then(|odb| odb.read_header(id))
                    .map_err(cannot)?;
                if !crate::notes::path::has_note_extension(&path) {
                    let limit = self.notes.max_file_bytes();
                    if size as u64 > limit {
                        return Err(crate::notes::files::file_too_large(
                            &path,
                            size as u64,
                            limit,
                        ));
                    }
                }
                let limit = self.notes.max_note_bytes();
                if size as u64 > limit && crate::notes::path::has_note_extension(&path) {
                    return Err(crate::notes::too_large(&path, size as u64, limit));
                }
                let blob = self.git.find_blob(id).map_err(cannot)?;
                Ok(Some(blob.content().to_vec()))
            };
            let had = delta.status() != Delta::Added;
            let has = delta.status() != Delta::Deleted;
            let both_regular = (!had || regular(old.mode())) && (!has || regular(new.mode()));
            files.push(FileChange {
                before: if both_regular {
                    side(had, old.id())?
                } else {
                    None
                },
                after: if both_regular {
                    side(has, new.id())?
                } else {
                    None
                },
                regular: both_regular,
                path,
            });
        }
        Ok(CommitChanges {
            id: commit.id().to_string(),
            subject,
            short,
            files,
        })
    }

    /// The commit `sha` names: 4 to 40 hex digits, a unique prefix of a commit.
    fn find_commit_by_sha(&self, sha: &str) -> Result<Commit<'_>> {
        let sha = sha.trim();
        if let Some(steps) = head_steps(sha) {
            return self.head_back(sha, steps);
        }
        if !(4..=40).contains(&sha.len()) || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!(
                    "{sha:?} is not a commit id: give 4 to 40 hex digits of a commit's sha, \
                     HEAD, or HEAD~N (N commits back along first parents)"
                ),
            ));
        }
        // By prefix only: a branch or tag that happens to be named like hex is never taken.
        self.git
            .find_commit_by_prefix(sha)
            .map_err(|e| match e.code() {
                git2::ErrorCode::Ambiguous => Error::new(
                    ErrorCode::InvalidRequest,
                    format!("{sha} names more than one object; give more digits"),
                ),
                _ => Error::not_found(format!("no commit {sha} in the notes repository")),
            })
    }

    /// The commit `steps` first parents back from HEAD (`rev`, as the caller wrote it).
    fn head_back(&self, rev: &str, steps: u64) -> Result<Commit<'_>> {
        let mut commit = self
            .git
            .head()
            .and_then(|head| head.peel_to_commit())
            .map_err(|_| {
                Error::not_found(format!("{rev}: the notes repository has no commits yet"))
            })?;
        for taken in 0..steps {
            commit = commit.parent(0).map_err(|_| {
                Error::not_found(format!(
                    "{rev}: HEAD has only {taken} commit(s) before it along first parents"
                ))
            })?;
        }
        Ok(commit)
    }
}

/// `HEAD` (0) or `HEAD~N` (N), the revisions a person types; `None` for anything else.
fn head_steps(rev: &str) -> Option<u64> {
    if rev == "HEAD" {
        return Some(0);
    }
    let steps = rev.strip_prefix("HEAD~")?;
    if steps.is_empty() || !steps.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // More steps than any history holds is simply too far back (404).
    Some(steps.parse().unwrap_or(u64::MAX))
}
