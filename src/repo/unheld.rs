//! Tree entries a remote may send that this clone cannot hold: a name Linux
//! or the note rules refuse (longer than `NAME_MAX`, absolute, with empty,
//! `.` or control-character parts: [`crate::notes::path::lexical`]'s rules), and
//! a file entry whose object is not a file's bytes (a blob mode pointing at a
//! tree). A pull leaves such an entry out (no file, no index entry; the commit
//! keeps it, and so do the commits mirai makes on top), with a warning, and
//! takes in the notes around it; `repo.status` lists them as `skipped_paths`:
//! the entries HEAD holds that the index does not, each with its reason.
//! Hidden paths are not this module's: a pull keeps them out of the working
//! tree as git's skip-worktree entries. A file past `MIRAI_MAX_FILE_BYTES` is
//! kept out the same way ([`past_file_limit`]: libgit2 reads an object whole to
//! write it), so `git status` stays clean and a person's commit keeps it;
//! `skipped_paths` lists it too.

use git2::{Delta, DiffOptions, FileMode, ObjectType, Oid, Repository};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::notes::path;

/// The most skipped paths `repo.status` lists.
pub const MAX_LISTED: usize = 100;

/// One tree entry a pull left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// Why no file may be made at `rel` (`None`: one may, or the path is hidden).
pub fn unholdable_path(rel: &str) -> Option<String> {
    if path::is_hidden(rel) {
        return None;
    }
    match path::lexical(rel) {
        Err(e) => Some(e.message),
        Ok(normal) if normal != rel => Some(format!(
            "the name is not in its plain form (it would be {normal:?}): empty or `.` parts, or \
             spaces around it"
        )),
        Ok(_) => None,
    }
}

/// Why the entry at `rel` with `mode` and object `id` cannot be held
/// (`None`: it can): its path, or a file mode naming an object that is no
/// file's bytes. The object's kind comes from its header; nothing is read.
pub fn unholdable(git: &Repository, rel: &str, mode: FileMode, id: Oid) -> Option<String> {
    if let Some(reason) = unholdable_path(rel) {
        return Some(reason);
    }
    if !matches!(mode, FileMode::Blob | FileMode::BlobExecutable) || path::is_hidden(rel) {
        return None;
    }
    match git.odb().and_then(|odb| odb.read_header(id)) {
        Ok((_, ObjectType::Blob)) => None,
        Ok((_, kind)) => Some(format!(
            "a file entry whose object {id} is a {kind}, not a file's bytes"
        )),
        Err(_) => Some(format!("a file entry whose object {id} is missing")),
    }
}

/// Why the file at `rel` with `mode` and object `id` is kept out of the
/// working tree for its size (`None`: it is not a visible file, or not past
/// `max_file_bytes`). The size comes from the object's header; nothing is read.
pub fn past_file_limit(
    git: &Repository,
    rel: &str,
    (mode, id): (FileMode, Oid),
    max_file_bytes: u64,
) -> Option<String> {
    if !matches!(mode, FileMode::Blob | FileMode::BlobExecutable) || path::is_hidden(rel) {
        return None;
    }
    match git.odb().and_then(|odb| odb.read_header(id)) {
        Ok((size, ObjectType::Blob)) if size as u64 > max_file_bytes => Some(format!(
            "a file of {size} bytes, past MIRAI_MAX_FILE_BYTES ({max_file_bytes}): it stays in \
             git (skip-worktree) and out of the working tree; to have it, raise the limit or run \
             `git update-index --no-skip-worktree {rel} && git checkout -- {rel}`"
        )),
        _ => None,
    }
}

/// The entries HEAD holds that the index leaves out and that cannot be held,
/// then the files kept out for their size (skip-worktree entries past
/// `max_file_bytes`), each with its reason: at most [`MAX_LISTED`].
pub fn skipped_paths(git: &Repository, max_file_bytes: u64) -> Result<Vec<Skipped>> {
    let Ok(head) = git.head().and_then(|h| h.peel_to_tree()) else {
        return Ok(Vec::new()); // unborn
    };
    let cannot = |e: git2::Error| Error::git(format!("cannot list skipped paths: {}", e.message()));
    let index = git.index().map_err(cannot)?;
    let mut options = DiffOptions::new();
    options.include_typechange(true);
    let diff = git
        .diff_tree_to_index(Some(&head), Some(&index), Some(&mut options))
        .map_err(cannot)?;
    let mut skipped = Vec::new();
    for delta in diff.deltas() {
        if delta.status() != Delta::Deleted {
            continue;
        }
        let old = delta.old_file();
        let Some(rel) = old.path().and_then(|p| p.to_str()) else {
            continue;
        };
        if let Some(reason) = unholdable(git, rel, old.mode(), old.id()) {
            skipped.push(Skipped {
                path: rel.to_string(),
                reason,
            });
            if skipped.len() == MAX_LISTED {
                break;
            }
        }
    }
    for entry in index.iter() {
        if skipped.len() >= MAX_LISTED {
            break;
        }
        if entry.flags_extended & super::SKIP_WORKTREE == 0 {
            continue;
        }
        let Ok(rel) = std::str::from_utf8(&entry.path) else {
            continue;
        };
        let mode = match entry.mode {
            0o100644 => FileMode::Blob,
            0o100755 => FileMode::BlobExecutable,
            _ => continue,
        };
        if let Some(reason) = past_file_limit(git, rel, (mode, entry.id), max_file_bytes) {
            skipped.push(Skipped {
                path: rel.to_string(),
                reason,
            });
        }
    }
    Ok(skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_linux_or_the_note_rules_refuse_cannot_be_held() {
        assert_eq!(unholdable_path("notes/a.md"), None);
        assert_eq!(unholdable_path(".obsidian/x.json"), None);
        for bad in [
            format!("{}.md", "x".repeat(300)),
            "/abs.md".to_string(),
            "a//b.md".to_string(),
            " a.md".to_string(),
            "a\u{7}.md".to_string(),
        ] {
            assert!(unholdable_path(&bad).is_some(), "{bad:?}");
        }
    }
}
