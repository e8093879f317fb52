//! A pull's replay of a local `notes.move` commit, as `impl Repo`: rather
//! than re-applying the move's diffs (which would fail, or bring back the
//! note's old text, when the remote changed the note or its linkers), the
//! move is run again on the remote's tree: the note's text as the remote
//! has it moves to the new path, then every link that resolves to it at that
//! point (the remote's own new links included) is rewritten as `notes.move`
//! rewrites them ([`crate::vault::rewrite`]). The commit keeps its message
//! and author; like every replayed commit it is only an object until the
//! replay lands (see [`super::replay`]).

use std::path::Path;

use git2::build::TreeUpdateBuilder;
use git2::{Commit, Delta, ObjectType, Oid, Tree, TreeWalkMode, TreeWalkResult};

use super::commits::MOVE_SUBJECT;
use super::{git_error, Author, Repo};
use crate::error::{Error, Result};
use crate::notes::path;
use crate::vault::resolve::Files;
use crate::vault::rewrite::Move;

impl Repo {
    /// `(from, to)` when `commit` is a move mirai made: its subject names
    /// them and it deletes `from` and adds `to`.
    pub(super) fn move_of(&self, commit: &Commit<'_>) -> Result<Option<(String, String)>> {
        let Some(rest) = commit.summary().and_then(|s| s.strip_prefix(MOVE_SUBJECT)) else {
            return Ok(None);
        };
        let cannot = |e| git_error("cannot read a move's commit", e);
        let tree = commit.tree().map_err(cannot)?;
        let parent_tree = match commit.parent(0) {
            Ok(parent) => Some(parent.tree().map_err(cannot)?),
            Err(_) => return Ok(None),
        };
        let diff = self
            .git
            .diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), None)
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
        // A path may hold " -> " itself: the split whose sides the commit deleted and added.
        Ok(rest.match_indices(" -> ").find_map(|(at, arrow)| {
            let (from, to) = (&rest[..at], &rest[at + arrow.len()..]);
            (deleted.iter().any(|d| d == from) && added.iter().any(|a| a == to))
                .then(|| (from.to_string(), to.to_string()))
        }))
    }

    /// Runs the move `from` -> `to` of `commit` again on `onto`'s tree. The
    /// remote having deleted `from` or made `to` is a 409 `conflict`.
    pub(super) fn replay_move(
        &self,
        commit: &Commit<'_>,
        (from, to): (&str, &str),
        onto: &Commit<'_>,
        committer: &Author,
    ) -> Result<Oid> {
        let git = &self.git;
        let cannot = |e| git_error(&format!("cannot replay the move of {from}"), e);
        let base = onto.tree().map_err(cannot)?;
        let entry = base
            .get_path(Path::new(from))
            .map_err(|_| Error::conflict(format!("the remote deleted or moved {from}")))?;
        if base.get_path(Path::new(to)).is_ok() {
            return Err(Error::conflict(format!("the remote made {to} too")));
        }
        let (paths, notes) = self.files_of(&base)?;
        let before = files(&paths);
        let after = before.moved(from, to);
        let mv = Move {
            from,
            to,
            before: &before,
            after: &after,
        };
        let names = [stem(from), stem(to)];
        let mut update = TreeUpdateBuilder::new();
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
            if rel != from && !mentions(text, &names) {
                continue;
            }
            let rewritten = mv.rewrite(&rel, text).map_err(|bad| {
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
        let text =
            moved.ok_or_else(|| Error::conflict(format!("{from} is not a note on the remote")))?;
        let id = git.blob(text.as_bytes()).map_err(cannot)?;
        update.remove(from);
        update.upsert(to, id, super::replay::file_mode(entry.filemode()));
        self.commit_replayed(
            commit,
            onto,
            committer,
            update,
            &format!("{to} and its links"),
        )
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

/// Whether `text` may hold a link to a note named by one of `names`.
fn mentions(text: &str, names: &[String]) -> bool {
    let lower = text.to_lowercase();
    names
        .iter()
        .any(|name| lower.contains(name.as_str()) || lower.contains(&name.replace(' ', "%20")))
}
