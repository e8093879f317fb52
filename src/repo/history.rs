//! The notes repository's history, read-only, as `git log --first-parent`
//! sees it: one [`Summary`] per commit (parents, committer time, author,
//! subject, the `Mirai-Run` and `Mirai-Caller` trailers, and every path it changed against its
//! first parent, renames found as `git log` finds them by default), revisions
//! named the few ways mirai accepts ([`Reader::resolve`]), a note's bytes at a
//! commit, and the notes one commit (or two commits) changed.
//!
//! The first-parent chain from HEAD is walked once per HEAD and kept
//! ([`History`]): the one whole-history cost is one tree diff per commit the
//! first time a HEAD is seen, and a HEAD that descends from a walked one only
//! walks its new commits. Reads never wait for the writer: each opens the
//! repository itself, and libgit2 only reads objects and refs in `.git`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, FixedOffset, SecondsFormat};
use git2::{Delta, DiffFindOptions, DiffOptions, ErrorCode, ObjectType, Oid, Repository, Tree};

use crate::error::{Error, ErrorCode as Code, Result};
use crate::notes::path::is_hidden;

/// The trailer that marks an agent run's commits (ARCHITECTURE.md, "The agent's
/// commits are marked").
pub const RUN_TRAILER: &str = "Mirai-Run";
/// The trailer naming the proposal a commit applied (review mode).
pub const PROPOSAL_TRAILER: &str = "Mirai-Proposal";
/// The trailer naming the caller a commit was made for (`MIRAI_CALLERS_FILE`).
pub const CALLER_TRAILER: &str = "Mirai-Caller";

fn invalid_request(message: impl Into<String>) -> Error {
    Error::new(Code::InvalidRequest, message)
}

fn git_error(context: &str, e: git2::Error) -> Error {
    Error::git(format!("{context}: {}", e.message()))
}

/// How a commit changed one path against its first parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Added,
    Modified,
    Deleted,
    /// Moved from [`Change::from`] (with or without edits), as git's rename detection says.
    Renamed,
}

impl Status {
    /// The letter `git log --name-status` prints.
    pub fn letter(self) -> &'static str {
        match self {
            Status::Added => "A",
            Status::Modified => "M",
            Status::Deleted => "D",
            Status::Renamed => "R",
        }
    }
}

/// One path a commit changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub status: Status,
    /// The old path of a rename.
    pub from: Option<String>,
}

/// One commit, as history lists it.
#[derive(Debug, Clone)]
pub struct Summary {
    pub id: Oid,
    pub parents: Vec<Oid>,
    /// Committer time in RFC 3339, in the committer's own offset.
    pub time: String,
    pub author: String,
    pub email: String,
    pub subject: String,
    /// The value of the `Mirai-Run` trailer.
    pub run_id: Option<String>,
    /// The value of the `Mirai-Proposal` trailer.
    pub proposal: Option<String>,
    /// The value of the `Mirai-Caller` trailer.
    pub caller: Option<String>,
    /// Every visible path it changed against its first parent, sorted.
    pub changes: Vec<Change>,
}

impl Summary {
    /// Whether this commit changed `path` (as a rename's old or new path too).
    pub fn touches(&self, path: &str) -> bool {
        self.changes
            .iter()
            .any(|c| c.path == path || c.from.as_deref() == Some(path))
    }
}

/// The first-parent chain of one tip, oldest first.
struct Chain {
    tip: Option<Oid>,
    commits: Vec<Arc<Summary>>,
    at: HashMap<Oid, usize>,
}

impl Chain {
    fn empty() -> Chain {
        Chain {
            tip: None,
            commits: Vec::new(),
            at: HashMap::new(),
        }
    }
}

/// One page of history, newest first.
pub struct Page {
    pub commits: Vec<Arc<Summary>>,
    /// The cursor of the following page (`None`: this was the last page).
    pub next: Option<String>,
}

/// The history of the notes repository at one root, walked once per HEAD.
pub struct History {
    root: PathBuf,
    /// The chain of the HEAD seen last; held while a new HEAD is walked, so
    /// concurrent callers wait for one walk instead of each making their own.
    chain: Mutex<Arc<Chain>>,
    /// First-parent ids from one tip, newest first, as far as a `HEAD~N` has
    /// needed (ids only: what [`History::resolve`] walks when the chain is not
    /// HEAD's). Held while it is extended, so one walk serves concurrent
    /// callers; shared with the thread that goes on with a long walk.
    ancestry: Arc<Mutex<Ancestry>>,
    /// How long one request walks before the rest goes on in the background.
    walk_slice: Duration,
}

/// How long a request spends walking first parents for `HEAD~N` before it
/// answers 503 `not_ready` and the walk goes on in the background: well
/// inside the one second of CPU a request may cost.
pub const WALK_SLICE: Duration = Duration::from_millis(250);

/// First-parent ids from `tip`, newest first (`ids[0]` is the tip); `ended`
/// once the walk reached a commit with no parent (or a shallow end);
/// `walking` while a background thread extends it.
#[derive(Default)]
struct Ancestry {
    tip: Option<Oid>,
    ids: Vec<Oid>,
    ended: bool,
    walking: bool,
}

impl History {
    pub fn new(root: &Path) -> History {
        History {
            root: root.to_path_buf(),
            chain: Mutex::new(Arc::new(Chain::empty())),
            ancestry: Arc::new(Mutex::new(Ancestry::default())),
            walk_slice: WALK_SLICE,
        }
    }

    /// This history with another [`WALK_SLICE`] (tests walk none in the request).
    pub fn with_walk_slice(mut self, slice: Duration) -> History {
        self.walk_slice = slice;
        self
    }

    /// The repository for one read (`None`: the notes root is not a repository,
    /// so nothing has history yet).
    pub fn reader(&self) -> Result<Option<Reader>> {
        match Repository::open(&self.root) {
            Ok(git) => Ok(Some(Reader { git })),
            Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(git_error(
                "cannot open the notes repository (NOTES_ROOT)",
                e,
            )),
        }
    }

    /// The commit HEAD points at (`None`: no repository or no commit yet).
    pub fn head_commit(&self) -> Result<Option<String>> {
        let Some(reader) = self.reader()? else {
            return Ok(None);
        };
        Ok(reader.head()?.map(|id| id.to_string()))
    }

    /// `e` as a caller may see it: no absolute path of the server in it.
    pub fn scrub(&self, e: Error) -> Error {
        super::scrub(&self.root, e)
    }

    /// The chain from HEAD: the kept one when HEAD has not moved, otherwise
    /// walked now (only down to the first commit the kept chain holds).
    fn current(&self, reader: &Reader) -> Result<Arc<Chain>> {
        let head = reader.head()?;
        let mut kept = self
            .chain
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if kept.tip == head {
            return Ok(kept.clone());
        }
        let chain = match head {
            None => Arc::new(Chain::empty()),
            Some(tip) => Arc::new(reader.walk(tip, &kept)?),
        };
        *kept = chain.clone();
        Ok(chain)
    }

    /// The commit `rev` names; a commit that is not there is 404 `not_found`,
    /// an abbreviation more than one object starts with 400 `invalid_request`.
    /// `HEAD~N` is read from the kept chain when it is HEAD's (walked once per
    /// HEAD, as [`History::page`] walks it); otherwise the first parents are
    /// followed from HEAD, N of them and no further, reading each commit's
    /// parents only (no summary, no tree compared), and the ids are kept for
    /// the next `HEAD~N` of the same HEAD. So the first `HEAD~N` on a long
    /// history costs a walk of N commits' headers, not the chain's summaries.
    pub fn resolve(&self, reader: &Reader, rev: &Rev) -> Result<Oid> {
        let steps = match rev {
            Rev::Id(hex) => return reader.by_id(hex),
            Rev::Back(steps) => *steps,
        };
        let head = reader.head()?;
        let kept = self
            .chain
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let Some(tip) = head else {
            return Err(Error::not_found(format!(
                "HEAD~{steps}: the notes repository has no commits yet"
            )));
        };
        if kept.tip != head {
            return self.back(reader, tip, steps);
        }
        let known = kept.commits.len();
        match steps.checked_add(1).and_then(|n| known.checked_sub(n)) {
            Some(at) => Ok(kept.commits[at].id),
            None => Err(too_far(steps, known - 1)),
        }
    }

    /// `HEAD~steps` by first parents from `tip`: walked in this request for
    /// at most the walk slice; a longer walk goes on in a background thread
    /// (one at a time, its ids kept) and the request answers 503 `not_ready`
    /// (the HTTP answer carries `Retry-After`), as does every request for a
    /// step the walk has not reached while it runs.
    fn back(&self, reader: &Reader, tip: Oid, steps: usize) -> Result<Oid> {
        let mut ancestry = match self.ancestry.try_lock() {
            Ok(ancestry) => ancestry,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(not_ready(steps, None)),
        };
        if ancestry.walking {
            return match (ancestry.tip == Some(tip))
                .then(|| ancestry.ids.get(steps))
                .flatten()
            {
                Some(id) => Ok(*id),
                None => Err(not_ready(steps, Some(ancestry.ids.len()))),
            };
        }
        let deadline = Instant::now() + self.walk_slice;
        if walk_back(&reader.git, tip, steps, &mut ancestry, Some(deadline))? {
            return answer_at(&ancestry, steps);
        }
        ancestry.walking = true;
        let walked = ancestry.ids.len();
        drop(ancestry);
        let (shared, root) = (Arc::clone(&self.ancestry), self.root.clone());
        let started = std::thread::Builder::new()
            .name("mirai-history".into())
            .spawn(move || {
                let mut ancestry = shared.lock().unwrap_or_else(|p| p.into_inner());
                if let Ok(git) = Repository::open(&root) {
                    if let Err(e) = walk_back(&git, tip, steps, &mut ancestry, None) {
                        log::warn!("history: the walk to HEAD~{steps} stopped: {}", e.message);
                    }
                }
                ancestry.walking = false;
            });
        if started.is_err() {
            self.ancestry
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .walking = false;
        }
        Err(not_ready(steps, Some(walked)))
    }

    /// Up to `limit` commits that changed `path` (every commit without one),
    /// newest first, from HEAD or from `cursor` (a page's `next`) along first
    /// parents. A path no commit from HEAD changed is 404 `not_found`.
    pub fn page(
        &self,
        reader: Option<&Reader>,
        path: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<Page> {
        let start = cursor.map(parse_cursor).transpose()?;
        let chain = match reader {
            Some(reader) => {
                let chain = self.current(reader)?;
                match start {
                    Some(id) if !chain.at.contains_key(&id) => {
                        // A cursor from before HEAD moved elsewhere: its own chain.
                        reader.commit(id).map_err(|_| {
                            invalid_request(format!(
                                "cursor names commit {id}, which is not in the notes repository \
                                 (any more); ask again without a cursor"
                            ))
                        })?;
                        Arc::new(reader.walk(id, &chain)?)
                    }
                    _ => chain,
                }
            }
            None if start.is_some() => {
                return Err(invalid_request(
                    "this cursor names no commit here: the notes root has no git history; \
                     ask again without a cursor",
                ))
            }
            None => Arc::new(Chain::empty()),
        };
        let end = match start {
            Some(id) => chain.at[&id] + 1,
            None => chain.commits.len(),
        };
        let mut matching = chain.commits[..end]
            .iter()
            .rev()
            .filter(|c| path.is_none_or(|p| c.touches(p)));
        let commits: Vec<Arc<Summary>> = matching.by_ref().take(limit).cloned().collect();
        let next = matching.next().map(|c| c.id.to_string());
        if let (Some(path), true, None) = (path, commits.is_empty(), start) {
            return Err(Error::not_found(format!(
                "no commit in the history of HEAD (following first parents) changed {path:?}: \
                 it was never committed (a note written but not yet committed has no history)"
            )));
        }
        Ok(Page { commits, next })
    }

    /// The commit on HEAD's first-parent chain that applied proposal `id` (its
    /// `Mirai-Proposal` trailer), if one did: the truth about whether it was applied.
    pub fn commit_of_proposal(&self, id: &str) -> Result<Option<String>> {
        let Some(reader) = self.reader()? else {
            return Ok(None);
        };
        let chain = self.current(&reader)?;
        Ok(chain
            .commits
            .iter()
            .rev()
            .find(|c| {
                c.proposal
                    .as_deref()
                    .is_some_and(|p| p.eq_ignore_ascii_case(id))
            })
            .map(|c| c.id.to_string()))
    }

    /// Every proposal a commit on HEAD's first-parent chain applied (its
    /// `Mirai-Proposal` trailer), lowercased, with that commit.
    pub fn proposal_commits(&self) -> Result<std::collections::HashMap<String, String>> {
        let Some(reader) = self.reader()? else {
            return Ok(Default::default());
        };
        let chain = self.current(&reader)?;
        Ok(chain
            .commits
            .iter()
            .filter_map(|c| {
                Some((
                    c.proposal.as_deref()?.to_ascii_lowercase(),
                    c.id.to_string(),
                ))
            })
            .collect())
    }

    /// The commits of agent run `run_id` (their `Mirai-Run` trailer), newest
    /// first, along HEAD's first parents. Empty when there are none, or no
    /// repository.
    pub fn commits_of_run(&self, run_id: &str) -> Result<Vec<Arc<Summary>>> {
        let Some(reader) = self.reader()? else {
            return Ok(Vec::new());
        };
        let chain = self.current(&reader)?;
        Ok(chain
            .commits
            .iter()
            .rev()
            .filter(|c| {
                c.run_id
                    .as_deref()
                    .is_some_and(|id| id.eq_ignore_ascii_case(run_id))
            })
            .cloned()
            .collect())
    }
}

/// A revision as mirai accepts one (docs/src/history.md): a commit id, full or
/// abbreviated to at least 7 hex digits, or `HEAD~N` (N first parents back from HEAD).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rev {
    Id(String),
    Back(usize),
}

impl Rev {
    /// Anything but the accepted forms (branch and tag names, `HEAD`, `HEAD^`,
    /// `@{...}`, `rev:path`, surrounding whitespace) is 400 `invalid_request`.
    pub fn parse(rev: &str) -> Result<Rev> {
        if let Some(steps) = rev.strip_prefix("HEAD~") {
            if !steps.is_empty() && steps.bytes().all(|b| b.is_ascii_digit()) {
                // More steps than any history holds is simply too far back (404).
                return Ok(Rev::Back(steps.parse().unwrap_or(usize::MAX)));
            }
        } else if (7..=40).contains(&rev.len()) && rev.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(Rev::Id(rev.to_ascii_lowercase()));
        }
        Err(invalid_request(format!(
            "revision {rev:?} is not one mirai accepts: give a commit id (7 to 40 hex digits, \
             as notes.history lists them) or HEAD~N (N commits back along first parents; \
             HEAD~0 is HEAD); branch and tag names, HEAD^, @{{...}} and paths are not accepted"
        )))
    }
}

/// A cursor is the id of the commit the next page starts at: the chain of
/// first parents below a commit never changes, so a cursor stays good while
/// HEAD moves on. Callers treat it as opaque.
fn parse_cursor(raw: &str) -> Result<Oid> {
    let malformed = || {
        invalid_request(format!(
            "cursor {raw:?} is not one notes.history gave: pass next_cursor from the previous \
             page as it was, or ask again without a cursor"
        ))
    };
    if raw.len() != 40 || !raw.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(malformed());
    }
    Oid::from_str(raw).map_err(|_| malformed())
}

/// What a tree holds at a note's path.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    /// A regular file (mode 100644 or 100755): a note, with its blob.
    Note(Oid),
    Missing,
    Folder,
    Symlink,
    /// A submodule or anything else that is not a regular file.
    Other,
}

impl Entry {
    fn note(&self) -> Option<Oid> {
        match self {
            Entry::Note(id) => Some(*id),
            _ => None,
        }
    }
}

/// One note a commit (or a pair of commits) changed, with the blobs on either
/// side (`None`: no note there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteDelta {
    pub path: String,
    /// Added, Modified or Deleted; a rename is one deletion and one addition.
    pub status: Status,
    pub old: Option<Oid>,
    pub new: Option<Oid>,
}

/// The repository opened for one read.
pub struct Reader {
    git: Repository,
}

impl Reader {
    /// The commit HEAD points at (`None`: no commits yet).
    fn head(&self) -> Result<Option<Oid>> {
        match self.git.head() {
            Ok(head) => head
                .peel_to_commit()
                .map(|c| Some(c.id()))
                .map_err(|e| git_error("cannot read the HEAD commit", e)),
            Err(e) if matches!(e.code(), ErrorCode::UnbornBranch | ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(git_error("cannot read HEAD", e)),
        }
    }

    /// The commit HEAD points at now (`None`: no commits yet), for the change stream.
    pub fn head_id(&self) -> Result<Option<Oid>> {
        self.head()
    }

    /// One commit's summary, as history lists it.
    pub fn summary(&self, id: Oid) -> Result<Summary> {
        let commit = self.commit(id)?;
        self.summarize(&commit)
    }

    /// The one parent of commit `id` (`None`: a root or merge commit, or none such).
    pub fn only_parent(&self, id: Oid) -> Option<Oid> {
        let commit = self.git.find_commit(id).ok()?;
        match commit.parent_count() {
            1 => commit.parent_id(0).ok(),
            _ => None,
        }
    }

    /// Whether `to` descends from `from` (or is it).
    pub fn descends(&self, from: Oid, to: Oid) -> bool {
        from == to || self.git.graph_descendant_of(to, from).unwrap_or(false)
    }

    /// The commits `to` holds that `from` does not, oldest first (parents
    /// before children), at most `cap` of them (the newest are kept); with
    /// how many more there were.
    pub fn commits_between(
        &self,
        from: Option<Oid>,
        to: Oid,
        cap: usize,
    ) -> Result<(Vec<Oid>, usize)> {
        let walk_error = |e: git2::Error| git_error("cannot walk the new commits", e);
        let mut walk = self.git.revwalk().map_err(walk_error)?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL)
            .map_err(walk_error)?;
        walk.push(to).map_err(walk_error)?;
        if let Some(from) = from {
            // A from that is gone (a shallow clone's edge) hides nothing.
            let _ = walk.hide(from);
        }
        let mut newest_first = Vec::new();
        let mut more = 0;
        for id in walk {
            let id = id.map_err(walk_error)?;
            if newest_first.len() < cap {
                newest_first.push(id);
            } else {
                more += 1;
            }
        }
        newest_first.reverse();
        Ok((newest_first, more))
    }

    fn commit(&self, id: Oid) -> Result<git2::Commit<'_>> {
        self.git.find_commit(id).map_err(|e| match e.code() {
            ErrorCode::NotFound => {
                Error::not_found(format!("no commit {id} in the notes repository"))
            }
            _ => git_error(&format!("cannot read commit {id}"), e),
        })
    }

    /// The first-parent chain from `tip`, joining `known` at the first commit it holds.
    fn walk(&self, tip: Oid, known: &Chain) -> Result<Chain> {
        let mut fresh = Vec::new();
        let mut join = None;
        let mut next = Some(tip);
        while let Some(id) = next {
            if let Some(&at) = known.at.get(&id) {
                join = Some(at);
                break;
            }
            let commit = match self.git.find_commit(id) {
                Ok(commit) => commit,
                // A shallow clone's history ends where its objects do.
                Err(e) if e.code() == ErrorCode::NotFound && id != tip => break,
                Err(e) => return Err(git_error(&format!("cannot read commit {id}"), e)),
            };
            let summary = self.summarize(&commit)?;
            next = summary.parents.first().copied();
            fresh.push(Arc::new(summary));
        }
        let mut commits = match join {
            Some(at) => known.commits[..=at].to_vec(),
            None => Vec::with_capacity(fresh.len()),
        };
        commits.extend(fresh.into_iter().rev());
        let at = commits.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        Ok(Chain {
            tip: Some(tip),
            commits,
            at,
        })
    }

    fn summarize(&self, commit: &git2::Commit<'_>) -> Result<Summary> {
        let parent_tree = self.first_parent_tree(commit)?;
        let tree = commit
            .tree()
            .map_err(|e| git_error("cannot read a commit's tree", e))?;
        let author = commit.author();
        let message = String::from_utf8_lossy(commit.message_raw_bytes());
        Ok(Summary {
            id: commit.id(),
            parents: commit.parent_ids().collect(),
            time: rfc3339(commit.committer().when()),
            author: String::from_utf8_lossy(author.name_bytes()).into_owned(),
            email: String::from_utf8_lossy(author.email_bytes()).into_owned(),
            subject: commit
                .summary_bytes()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .unwrap_or_default(),
            run_id: trailer(&message, RUN_TRAILER),
            proposal: trailer(&message, PROPOSAL_TRAILER),
            caller: trailer(&message, CALLER_TRAILER),
            changes: self.changes(parent_tree.as_ref(), Some(&tree))?,
        })
    }

    fn first_parent_tree(&self, commit: &git2::Commit<'_>) -> Result<Option<Tree<'_>>> {
        let Some(parent) = commit.parent_ids().next() else {
            return Ok(None);
        };
        match self.git.find_commit(parent) {
            Ok(parent) => parent
                .tree()
                .map(Some)
                .map_err(|e| git_error("cannot read a commit's tree", e)),
            Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(git_error(&format!("cannot read commit {parent}"), e)),
        }
    }

    /// Every visible path that differs between two trees, renames detected as
    /// `git log` does by default (50% similar; exact renames always), sorted.
    ///
    /// The trees are compared here, entry by entry, skipping every subtree whose
    /// id did not change (libgit2's tree diff walks whole changed folders, about
    /// ten times slower on a folder of thousands of notes); only a change that
    /// both adds and removes files, where a rename may hide, goes through
    /// libgit2's diff and rename detection.
    fn changes(&self, old: Option<&Tree<'_>>, new: Option<&Tree<'_>>) -> Result<Vec<Change>> {
        let mut files = Vec::new();
        self.compare_trees(old, new, &mut String::new(), &mut files)?;
        let adds = files.iter().any(|(_, old, _)| !old);
        let removes = files.iter().any(|(_, _, new)| !new);
        if adds && removes {
            return self.changes_with_renames(old, new);
        }
        let mut changes: Vec<Change> = files
            .into_iter()
            .filter(|(path, _, _)| !is_hidden(path))
            .map(|(path, old, new)| Change {
                path,
                status: match (old, new) {
                    (false, _) => Status::Added,
                    (_, false) => Status::Deleted,
                    _ => Status::Modified,
                },
                from: None,
            })
            .collect();
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }

    /// The files (anything but folders) that differ between two trees, as
    /// `(path, on the old side, on the new side)`: both trees' entries are in
    /// git's order, so one merge pass pairs them; an unchanged subtree is skipped.
    fn compare_trees(
        &self,
        old: Option<&Tree<'_>>,
        new: Option<&Tree<'_>>,
        prefix: &mut String,
        out: &mut Vec<(String, bool, bool)>,
    ) -> Result<()> {
        let olds: Vec<_> = old.map(|t| t.iter().collect()).unwrap_or_default();
        let news: Vec<_> = new.map(|t| t.iter().collect()).unwrap_or_default();
        let (mut i, mut j) = (0, 0);
        while i < olds.len() || j < news.len() {
            let order = match (olds.get(i), news.get(j)) {
                (Some(a), Some(b)) => git_order(a, b),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            let (a, b) = match order {
                std::cmp::Ordering::Less => (olds.get(i), None),
                std::cmp::Ordering::Greater => (None, news.get(j)),
                std::cmp::Ordering::Equal => (olds.get(i), news.get(j)),
            };
            i += usize::from(a.is_some());
            j += usize::from(b.is_some());
            if let (Some(a), Some(b)) = (a, b) {
                if a.id() == b.id() && a.filemode() == b.filemode() {
                    continue;
                }
            }
            let name = a.or(b).map(|e| e.name_bytes()).unwrap_or_default();
            let mark = prefix.len();
            prefix.push_str(&String::from_utf8_lossy(name));
            let folder = a.or(b).is_some_and(is_folder);
            if folder {
                prefix.push('/');
                let tree = |e: Option<&git2::TreeEntry<'_>>| -> Result<Option<Tree<'_>>> {
                    e.map(|e| self.git.find_tree(e.id()))
                        .transpose()
                        .map_err(|e| git_error("cannot read a folder's tree", e))
                };
                let (old_tree, new_tree) = (tree(a)?, tree(b)?);
                self.compare_trees(old_tree.as_ref(), new_tree.as_ref(), prefix, out)?;
            } else {
                out.push((prefix.clone(), a.is_some(), b.is_some()));
            }
            prefix.truncate(mark);
        }
        Ok(())
    }

    /// [`Reader::changes`] through libgit2's diff and rename detection.
    fn changes_with_renames(
        &self,
        old: Option<&Tree<'_>>,
        new: Option<&Tree<'_>>,
    ) -> Result<Vec<Change>> {
        let mut options = DiffOptions::new();
        options.include_typechange(true);
        let mut diff = self
            .git
            .diff_tree_to_tree(old, new, Some(&mut options))
            .map_err(|e| git_error("cannot compare a commit with its parent", e))?;
        let mut find = DiffFindOptions::new();
        find.renames(true).rename_threshold(50);
        diff.find_similar(Some(&mut find))
            .map_err(|e| git_error("cannot look for renames", e))?;
        let name = |file: git2::DiffFile<'_>| {
            file.path_bytes()
                .map(|p| String::from_utf8_lossy(p).into_owned())
        };
        let mut changes = Vec::new();
        for delta in diff.deltas() {
            let (old_path, new_path) = (name(delta.old_file()), name(delta.new_file()));
            let visible = |p: &Option<String>| p.clone().filter(|p| !is_hidden(p));
            let change = match (delta.status(), visible(&old_path), visible(&new_path)) {
                (Delta::Renamed, Some(from), Some(path)) => Change {
                    path,
                    status: Status::Renamed,
                    from: Some(from),
                },
                (Delta::Renamed | Delta::Added | Delta::Copied, _, Some(path)) => Change {
                    path,
                    status: Status::Added,
                    from: None,
                },
                (Delta::Renamed | Delta::Deleted, Some(path), _) => Change {
                    path,
                    status: Status::Deleted,
                    from: None,
                },
                (Delta::Modified | Delta::Typechange, _, Some(path)) => Change {
                    path,
                    status: Status::Modified,
                    from: None,
                },
                _ => continue,
            };
            changes.push(change);
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(changes)
    }

    fn by_id(&self, rev: &str) -> Result<Oid> {
        let unknown = || Error::not_found(format!("no commit {rev} in the notes repository"));
        let short = Oid::from_str(rev).map_err(|_| unknown())?;
        let odb = self
            .git
            .odb()
            .map_err(|e| git_error("cannot open the object database", e))?;
        let id = odb
            .exists_prefix(short, rev.len())
            .map_err(|e| match e.code() {
                ErrorCode::Ambiguous => invalid_request(format!(
                "{rev} is ambiguous: more than one object's id starts with it; give more digits"
            )),
                ErrorCode::NotFound => unknown(),
                _ => git_error(&format!("cannot look up {rev}"), e),
            })?;
        let object = self.git.find_object(id, None).map_err(|_| unknown())?;
        match object.kind() {
            Some(ObjectType::Commit) => Ok(id),
            kind => Err(Error::not_found(format!(
                "{rev} names a {}, not a commit",
                kind.map_or("object", |kind| kind.str())
            ))),
        }
    }

    /// What `commit`'s tree holds at `rel` (a normalized note path). A path
    /// through a symlinked folder is `Missing`: git's trees are never followed.
    pub fn entry(&self, commit: Oid, rel: &str) -> Result<Entry> {
        let tree = self
            .commit(commit)?
            .tree()
            .map_err(|e| git_error("cannot read a commit's tree", e))?;
        entry_in(&tree, rel)
    }

    /// The first folder on `rel`'s way that HEAD holds as something other
    /// than a folder (a symlink, a file, a submodule), with what it is; `None`
    /// when every folder on the way is a folder in HEAD or not there.
    pub fn blocked_folder(&self, rel: &str) -> Result<Option<(String, Entry)>> {
        let Some(head) = self.head()? else {
            return Ok(None);
        };
        let tree = self
            .commit(head)?
            .tree()
            .map_err(|e| git_error("cannot read a commit's tree", e))?;
        let mut folder = String::new();
        for part in rel
            .split('/')
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if !folder.is_empty() {
                folder.push('/');
            }
            folder.push_str(part);
            match entry_in(&tree, &folder)? {
                Entry::Folder => {}
                Entry::Missing => return Ok(None),
                other => return Ok(Some((folder, other))),
            }
        }
        Ok(None)
    }

    /// The bytes of blob `id`, a version of note `rel`, when it holds at most
    /// `limit` bytes: its size is read from the object's header first, so a
    /// larger one is never loaded (413 `note_too_large`).
    pub fn note_blob(&self, id: Oid, rel: &str, limit: u64) -> Result<Vec<u8>> {
        let cannot = |e: git2::Error| git_error(&format!("cannot read blob {id}"), e);
        let (size, _) = self
            .git
            .odb()
            .and_then(|odb| odb.read_header(id))
            .map_err(cannot)?;
        if size as u64 > limit {
            return Err(crate::notes::too_large(rel, size as u64, limit));
        }
        self.git
            .find_blob(id)
            .map(|blob| blob.content().to_vec())
            .map_err(cannot)
    }

    /// Blob `id`'s bytes when it holds at most `limit` bytes, else its size
    /// (read from the object's header: a larger blob is never loaded).
    pub fn blob_upto(&self, id: Oid, limit: u64) -> Result<std::result::Result<Vec<u8>, u64>> {
        let cannot = |e: git2::Error| git_error(&format!("cannot read blob {id}"), e);
        let (size, _) = self
            .git
            .odb()
            .and_then(|odb| odb.read_header(id))
            .map_err(cannot)?;
        if size as u64 > limit {
            return Ok(Err(size as u64));
        }
        self.git
            .find_blob(id)
            .map(|blob| Ok(blob.content().to_vec()))
            .map_err(cannot)
    }

    /// The notes `commit` changed against its first parent (against nothing for
    /// a root commit), sorted by path; only `path`'s when given. A rename is
    /// the old note's deletion and the new note's creation; a path that is not
    /// a visible regular `.md` file on a side has no note on that side.
    pub fn note_changes(&self, commit: Oid, path: Option<&str>) -> Result<Vec<NoteDelta>> {
        let commit = self.commit(commit)?;
        let old_tree = self.first_parent_tree(&commit)?;
        let new_tree = commit
            .tree()
            .map_err(|e| git_error("cannot read a commit's tree", e))?;
        let mut paths: Vec<String> = self
            .changes(old_tree.as_ref(), Some(&new_tree))?
            .into_iter()
            .flat_map(|c| c.from.into_iter().chain([c.path]))
            .filter(|p| path.is_none_or(|wanted| wanted == p))
            // Notes; an attachment only when it is the path asked for.
            .filter(|p| {
                crate::notes::path::check_visible_note(p).is_ok()
                    || (path == Some(p.as_str()) && !crate::notes::path::is_hidden(p))
            })
            .collect();
        paths.sort_unstable();
        paths.dedup();
        let mut deltas = Vec::with_capacity(paths.len());
        for path in paths {
            let old = match &old_tree {
                Some(tree) => entry_in(tree, &path)?.note(),
                None => None,
            };
            let new = entry_in(&new_tree, &path)?.note();
            deltas.extend(delta(path, old, new));
        }
        Ok(deltas)
    }

    /// How note `rel` differs from commit `from` to commit `to` (`None`: the same
    /// on both, or a note on neither).
    pub fn note_between(&self, from: Oid, to: Oid, rel: &str) -> Result<Option<NoteDelta>> {
        let old = self.entry(from, rel)?.note();
        let new = self.entry(to, rel)?.note();
        Ok(delta(rel.to_string(), old, new))
    }
}

/// Extends `ancestry` (kept for `tip`, started again for another) along
/// first parents until it holds `steps` + 1 ids, the history ends, or
/// `deadline` passes; reads only each commit's parent ids. Answers whether
/// the walk got as far as it can (`false`: the deadline came first).
fn walk_back(
    git: &Repository,
    tip: Oid,
    steps: usize,
    ancestry: &mut Ancestry,
    deadline: Option<Instant>,
) -> Result<bool> {
    let cannot = |e| git_error("cannot read a parent commit", e);
    if ancestry.tip != Some(tip) || ancestry.ids.is_empty() {
        let walking = ancestry.walking;
        *ancestry = Ancestry {
            tip: Some(tip),
            ids: vec![git.find_commit(tip).map_err(cannot)?.id()],
            ended: false,
            walking,
        };
    }
    if ancestry.ids.len() > steps || ancestry.ended {
        return Ok(true);
    }
    let mut current = git
        .find_commit(ancestry.ids[ancestry.ids.len() - 1])
        .map_err(cannot)?;
    while ancestry.ids.len() <= steps && !ancestry.ended {
        // The clock is read every 256 commits: a commit takes microseconds.
        if ancestry.ids.len().is_multiple_of(256) && deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        match current
            .parent_ids()
            .next()
            .map(|parent| git.find_commit(parent))
        {
            Some(Ok(found)) => {
                ancestry.ids.push(found.id());
                current = found;
            }
            // A root commit; or a shallow clone's history, which ends where its objects do.
            None => ancestry.ended = true,
            Some(Err(e)) if e.code() == ErrorCode::NotFound => ancestry.ended = true,
            Some(Err(e)) => return Err(cannot(e)),
        }
    }
    Ok(true)
}

/// `HEAD~steps` from a walk that went as far as it can.
fn answer_at(ancestry: &Ancestry, steps: usize) -> Result<Oid> {
    match ancestry.ids.get(steps) {
        Some(id) => Ok(*id),
        None => Err(too_far(steps, ancestry.ids.len() - 1)),
    }
}

/// 503 `not_ready`: `HEAD~steps` is still being walked to (`walked`: how far).
fn not_ready(steps: usize, walked: Option<usize>) -> Error {
    let so_far = walked.map_or(String::new(), |n| format!(" ({n} commits so far)"));
    Error::new(
        Code::NotReady,
        format!(
            "HEAD~{steps}: mirai is walking the history's first parents that far{so_far}; \
             retry in a second (a commit id instead of HEAD~N answers at once)"
        ),
    )
}

/// `HEAD~steps` when HEAD has only `before` commits before it along first parents.
fn too_far(steps: usize, before: usize) -> Error {
    Error::not_found(format!(
        "HEAD~{steps}: HEAD has only {before} commit(s) before it along first parents"
    ))
}

fn is_folder(entry: &git2::TreeEntry<'_>) -> bool {
    entry.filemode() == 0o040000
}

/// git's order of tree entries: by name, a folder's name as if it ended in `/`.
fn git_order(a: &git2::TreeEntry<'_>, b: &git2::TreeEntry<'_>) -> std::cmp::Ordering {
    let slash = |e: &git2::TreeEntry<'_>| -> &'static [u8] {
        if is_folder(e) {
            b"/"
        } else {
            b""
        }
    };
    let (a_name, b_name) = (a.name_bytes(), b.name_bytes());
    a_name
        .iter()
        .chain(slash(a))
        .cmp(b_name.iter().chain(slash(b)))
}

fn delta(path: String, old: Option<Oid>, new: Option<Oid>) -> Option<NoteDelta> {
    let status = match (old, new) {
        (None, None) => return None,
        (Some(a), Some(b)) if a == b => return None,
        (None, Some(_)) => Status::Added,
        (Some(_), None) => Status::Deleted,
        (Some(_), Some(_)) => Status::Modified,
    };
    Some(NoteDelta {
        path,
        status,
        old,
        new,
    })
}

fn entry_in(tree: &Tree<'_>, rel: &str) -> Result<Entry> {
    let entry = match tree.get_path(Path::new(rel)) {
        Ok(entry) => entry,
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(Entry::Missing),
        Err(e) => return Err(git_error("cannot read a commit's tree", e)),
    };
    Ok(match entry.filemode() {
        0o100644 | 0o100755 => Entry::Note(entry.id()),
        0o040000 => Entry::Folder,
        0o120000 => Entry::Symlink,
        _ => Entry::Other,
    })
}

/// The trailer `key` of a commit message.
pub(super) fn trailer(message: &str, key: &str) -> Option<String> {
    let trailers = git2::message_trailers_strs(message).ok()?;
    let value = trailers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
        .map(|(_, value)| value.trim().to_string());
    value
}

/// A git time in RFC 3339, in its own offset (`Z` for UTC).
fn rfc3339(time: git2::Time) -> String {
    let offset = FixedOffset::east_opt(time.offset_minutes() * 60)
        .unwrap_or_else(|| chrono::Offset::fix(&chrono::Utc));
    DateTime::from_timestamp(time.seconds(), 0)
        .unwrap_or_default()
        .with_timezone(&offset)
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository of `n` commits, one after the other; answers the ids,
    /// newest first.
    fn long_history(dir: &Path, n: usize) -> Vec<Oid> {
        let git = Repository::init(dir).unwrap();
        let who = git2::Signature::now("t", "t@t").unwrap();
        let tree = git
            .find_tree(git.index().unwrap().write_tree().unwrap())
            .unwrap();
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            let parents: Vec<git2::Commit> = ids
                .last()
                .map(|&id| git.find_commit(id).unwrap())
                .into_iter()
                .collect();
            let parents: Vec<&git2::Commit> = parents.iter().collect();
            let id = git
                .commit(Some("HEAD"), &who, &who, &format!("c{i}"), &tree, &parents)
                .unwrap();
            ids.push(id);
        }
        ids.reverse();
        ids
    }

    #[test]
    fn a_long_walk_to_head_n_goes_on_in_the_background_and_answers_not_ready_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let ids = long_history(dir.path(), 1500);
        // A request walks nothing: the whole walk is the background's.
        let history = History::new(dir.path()).with_walk_slice(Duration::ZERO);
        let reader = history.reader().unwrap().unwrap();
        let first = history.resolve(&reader, &Rev::Back(1400)).unwrap_err();
        assert_eq!(first.code, Code::NotReady, "{}", first.message);
        assert!(first.message.contains("HEAD~1400"), "{}", first.message);
        let started = Instant::now();
        let found = loop {
            match history.resolve(&reader, &Rev::Back(1400)) {
                Ok(id) => break id,
                Err(e) if e.code == Code::NotReady => {
                    assert!(started.elapsed() < Duration::from_secs(30), "never ready");
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("{}", e.message),
            }
        };
        assert_eq!(found, ids[1400]);
        // Kept: nearer steps answer at once, and past the end is 404.
        assert_eq!(history.resolve(&reader, &Rev::Back(3)).unwrap(), ids[3]);
        // Past the end: the walk's last 100 commits are read at once (the clock
        // is read every 256), and HEAD~5000 is 404.
        let past = history.resolve(&reader, &Rev::Back(5000)).unwrap_err();
        assert_eq!(past.code, Code::NotFound, "{}", past.message);
    }

    #[test]
    fn a_short_walk_to_head_n_answers_within_the_request() {
        let dir = tempfile::tempdir().unwrap();
        let ids = long_history(dir.path(), 40);
        let history = History::new(dir.path());
        let reader = history.reader().unwrap().unwrap();
        assert_eq!(history.resolve(&reader, &Rev::Back(39)).unwrap(), ids[39]);
        let past = history.resolve(&reader, &Rev::Back(40)).unwrap_err();
        assert_eq!(past.code, Code::NotFound, "{}", past.message);
    }
}
