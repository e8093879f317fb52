//! The proposal store: review mode's proposals as files under
//! `NOTES_ROOT/.mirai/proposals/<id>.json` (local state: never committed,
//! never pushed). Ids are UUID v7, so names sort by time. Each file is written
//! whole (temp file, fsync, rename) and read back as hostile input: opened from
//! the root handle without following a symlink, a regular file under a size
//! cap, strict JSON (no repeated or unknown keys), its id equal to its name,
//! every path a plain note path whose diff names that path and no other, its
//! status consistent. Only a file's [`Summary`] (no diffs, its message cut
//! short) is kept in memory, by the file's identity (inode, size, mtime), so
//! listing a thousand pending proposals reads only the files that changed and
//! holds none of their diffs; [`Proposals::load`] reads one whole from its
//! file when it is asked for. Knows nothing of operations.
//!
//! The change stream hears of each proposal filed, applied or rejected from
//! here: in this process when a file is saved, from another process (the CLI
//! deciding) when the watcher sees the folder change ([`Proposals::look`]);
//! the status last told per proposal keeps each change told once.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use crate::durable;
use crate::error::{Error, ErrorCode, Result};
use crate::events::Events;
use crate::notes::root::{open_folder, open_regular_in};
use crate::notes::Notes;

/// The folder in `.mirai/`.
const FOLDER: &str = "proposals";
/// The most proposal files one listing looks at (newest first); older ones are left alone.
pub const MAX_FILES: usize = 20_000;
/// Room in a proposal file beyond its diffs and message (ids, times, names).
const FILE_SLACK: u64 = 64 * 1024;
/// The longest request message a proposal keeps, in bytes (as a rejection's reason).
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// The most characters of a message, subject or reason a [`Summary`] keeps.
pub const SUMMARY_CHARS: usize = 200;

/// Where a proposal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "ProposalStatus")]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Applied,
    Rejected,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Applied => "applied",
            Status::Rejected => "rejected",
        }
    }
}

/// Who asked for the writes a proposal holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Requester {
    /// `http`, `mcp`, `sandbox`, `agent` or `cli`.
    pub adapter: String,
    /// The agent run, when a run made it.
    pub run_id: Option<String>,
    /// The request's `message`, if it had one.
    pub message: Option<String>,
    /// The named caller that asked (MIRAI_CALLERS_FILE), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// That caller's email: the author of the commit that applies it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_email: Option<String>,
}

/// The operation a proposal stands for, with the commit it would have made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// The row's name (`notes.write`); `changes.apply` for a run's or eval's several writes.
    pub name: String,
    /// The commit's subject (ARCHITECTURE.md, "Commit messages have one form").
    pub subject: String,
    /// The commit's body, without trailers (may be empty).
    pub body: String,
}

/// One note's change: a unified diff `patch.apply` accepts. Or an
/// attachment's: `Binary file <path>` with both sides' size and SHA-256, and
/// the new bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub path: String,
    pub diff: String,
    /// An attachment's new bytes, base64 (absent for a note, or a file deleted);
    /// approving commits exactly these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
}

/// A proposal as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    pub id: String,
    pub status: Status,
    /// When it was made, RFC 3339 UTC.
    pub created_at: String,
    /// HEAD when the diffs were made (null: no commit yet).
    pub base_commit: Option<String>,
    pub requested_by: Requester,
    pub operation: Operation,
    pub changes: Vec<Change>,
    /// The commit that applied it (status `applied`).
    #[serde(default)]
    pub commit: Option<String>,
    /// Why it was rejected (status `rejected`; may be null).
    #[serde(default)]
    pub reason: Option<String>,
    /// When it was applied or rejected, RFC 3339 UTC.
    #[serde(default)]
    pub decided_at: Option<String>,
    /// The caller that applied or rejected it (`reviewer`, a named caller, or
    /// `operator` on the command line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

/// A proposal as a listing shows it: everything but its diffs, its message,
/// subject and reason cut at 200 characters (`…` where cut; proposals.get has them whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "ProposalSummary")]
pub struct Summary {
    pub id: String,
    /// pending, applied or rejected.
    pub status: Status,
    pub created_at: String,
    pub base_commit: Option<String>,
    pub requested_by: Requester,
    /// The row that asked (`changes.apply` for a run's or eval's several writes).
    pub operation: String,
    /// The subject of the commit it makes.
    pub subject: String,
    /// The notes it changes.
    pub paths: Vec<String>,
    pub commit: Option<String>,
    pub reason: Option<String>,
    pub decided_at: Option<String>,
    pub decided_by: Option<String>,
}

impl Summary {
    pub fn of(p: &Proposal) -> Summary {
        Summary {
            id: p.id.clone(),
            status: p.status,
            created_at: p.created_at.clone(),
            base_commit: p.base_commit.clone(),
            requested_by: Requester {
                adapter: short(&p.requested_by.adapter),
                run_id: p.requested_by.run_id.as_deref().map(short),
                message: p.requested_by.message.as_deref().map(short),
                caller: p.requested_by.caller.clone(),
                caller_email: p.requested_by.caller_email.clone(),
            },
            operation: short(&p.operation.name),
            subject: short(&p.operation.subject),
            paths: p.changes.iter().map(|c| c.path.clone()).collect(),
            commit: p.commit.clone(),
            reason: p.reason.as_deref().map(short),
            decided_at: p.decided_at.clone(),
            decided_by: p.decided_by.clone(),
        }
    }
}

/// `text` cut after [`SUMMARY_CHARS`] characters, with `…` where it was cut.
fn short(text: &str) -> String {
    match text.char_indices().nth(SUMMARY_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Why `change` cannot stand in a proposal: its diff is not one file's diff
/// whose headers (both of them) name `change.path`. What a proposal lists is
/// then exactly what approving it changes.
pub fn check_change(change: &Change) -> std::result::Result<(), String> {
    if crate::notes::files::is_binary_diff(&change.diff) {
        return check_file_change(change);
    }
    if change.content_base64.is_some() {
        return Err(format!(
            "the change of {:?} carries bytes but its diff is a note's",
            change.path
        ));
    }
    // An empty note created or deleted: the headers alone, naming the path.
    if crate::patch::empty_note_change(&change.path, &change.diff).is_some() {
        return Ok(());
    }
    let patch = crate::patch::parse(&change.diff)
        .map_err(|e| format!("the diff of {:?} is not a diff: {}", change.path, e.message))?;
    match crate::notes::path::lexical(&patch.path) {
        Ok(named) if named == change.path => Ok(()),
        _ => Err(format!(
            "the change listed as {:?} has a diff whose headers name {:?}: a change's diff must \
             name its own path and no other",
            change.path,
            short(&patch.path)
        )),
    }
}

/// An attachment's change: a plain path, its description naming that path,
/// and bytes exactly when the file remains.
fn check_file_change(change: &Change) -> std::result::Result<(), String> {
    let plain = crate::notes::files::file_path(&change.path).is_ok_and(|rel| rel == change.path);
    let described = crate::notes::files::parse_binary_diff(&change.path, &change.diff);
    match described {
        Some((_, after)) if plain && after.is_some() == change.content_base64.is_some() => Ok(()),
        _ => Err(format!(
            "the change of {:?} is not an attachment's change naming its own path, with its \
             bytes when the file remains",
            short(&change.path)
        )),
    }
}

/// Now, as proposals record times.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The proposal files of one notes root.
pub struct Proposals {
    notes: Notes,
    /// The largest file believed: the diffs are bounded by the body limit.
    read_cap: u64,
    /// What each file said, summed up, by name, while its identity stays the same.
    cache: Mutex<HashMap<String, (Stamp, Arc<Summary>)>>,
    /// The change stream, and the status last told of each proposal (`None`:
    /// not read yet; filled from the files before the first change is told).
    events: Arc<Events>,
    told: Mutex<Option<HashMap<String, Status>>>,
}

/// A file's identity: a rewrite (temp + rename) changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    size: u64,
    modified: Option<std::time::SystemTime>,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            ino: meta.ino(),
            size: meta.len(),
            modified: meta.modified().ok(),
        }
    }

    /// The stamp of `name` in `dir` from `lstat` (a symlink is never followed):
    /// `None` unless it is a regular file.
    fn lstat(dir: &Dir, name: &str) -> Option<Stamp> {
        use cap_fs_ext::MetadataExt as _;
        let meta = dir.symlink_metadata(name).ok()?;
        meta.is_file().then(|| Stamp {
            ino: meta.ino(),
            size: meta.len(),
            modified: meta.modified().ok().map(|t| t.into_std()),
        })
    }
}

/// A listing: the proposals that could be read, newest first, and how many files could not.
pub struct Listing {
    pub proposals: Vec<Arc<Summary>>,
    pub unreadable: usize,
}

/// Held while a proposal is decided: an exclusive `flock` on
/// `.mirai/proposals/.lock`, so two processes never approve the same one.
pub struct Decision {
    _file: File,
}

impl Proposals {
    /// The store of `notes`; a file larger than `max_body_bytes` (twice: diffs
    /// and message) plus some room is refused unread.
    pub fn new(notes: Notes, max_body_bytes: usize, events: Arc<Events>) -> Proposals {
        Proposals {
            notes,
            read_cap: (max_body_bytes as u64).saturating_mul(2) + FILE_SLACK,
            cache: Mutex::new(HashMap::new()),
            events,
            told: Mutex::new(None),
        }
    }

    /// The statuses told so far, read from the files the first time.
    fn told(&self) -> std::sync::MutexGuard<'_, Option<HashMap<String, Status>>> {
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        if told.is_none() {
            let known = self.list().map(|listing| {
                listing
                    .proposals
                    .iter()
                    .map(|p| (p.id.clone(), p.status))
                    .collect()
            });
            *told = Some(known.unwrap_or_default());
        }
        told
    }

    /// Tells the change stream of `proposal` when its status is news.
    fn tell(&self, told: &mut HashMap<String, Status>, proposal: &Summary) {
        if told.get(&proposal.id) == Some(&proposal.status) {
            return;
        }
        told.insert(proposal.id.clone(), proposal.status);
        let paths = proposal.paths.clone();
        self.events.publish(
            "proposal",
            serde_json::json!({"id": proposal.id, "status": proposal.status.as_str(), "paths": paths}),
            Some(paths),
        );
    }

    /// Tells the change stream of proposals another process filed or decided.
    pub fn look(&self) {
        let mut told = self.told();
        let Ok(listing) = self.list() else { return };
        let known = told.get_or_insert_with(HashMap::new);
        // Oldest first, as they were filed.
        for proposal in listing.proposals.iter().rev() {
            self.tell(known, proposal);
        }
    }

    /// `.mirai/proposals/`, reached from the root without following a symlink.
    fn folder(&self, create: bool) -> Result<Option<Dir>> {
        let Some(state) = self.notes.state_dir(create)? else {
            return Ok(None);
        };
        open_folder(&state, FOLDER, create)
            .map(|found| found.map(|(dir, _)| dir))
            .map_err(|e| {
                Error::internal(format!(
                    "cannot open .mirai/{FOLDER}/ (it must be a real folder, not a symlink): {e}"
                ))
            })
    }

    /// Writes `proposal` whole: a temp file beside it, synced, renamed into place.
    /// A change whose diff names another path is refused (500: mirai made it).
    pub fn save(&self, proposal: &Proposal) -> Result<()> {
        let name = file_name(&proposal.id)?;
        for change in &proposal.changes {
            check_change(change).map_err(|why| {
                Error::internal(format!("proposal {} was not written: {why}", proposal.id))
            })?;
        }
        let mut told = self.told();
        let dir = self
            .folder(true)?
            .ok_or_else(|| Error::internal(format!("cannot create .mirai/{FOLDER}/")))?;
        let bytes = serde_json::to_vec_pretty(proposal)
            .map_err(|e| Error::internal(format!("cannot encode proposal {}: {e}", proposal.id)))?;
        let failed = |e: std::io::Error| {
            let code = if e.raw_os_error() == Some(libc::ENOSPC) {
                ErrorCode::InsufficientStorage
            } else {
                ErrorCode::Internal
            };
            Error::new(
                code,
                format!(
                    "cannot write .mirai/{FOLDER}/{name}: {e}; nothing was proposed or decided"
                ),
            )
        };
        durable::replace(&dir, &name, &bytes).map_err(failed)?;
        self.tell(
            told.get_or_insert_with(HashMap::new),
            &Summary::of(proposal),
        );
        Ok(())
    }

    /// Proposal `id` whole, read from its file: 404 when there is none (or
    /// `id` is no UUID), 409 when its file cannot be believed.
    pub fn load(&self, id: &str) -> Result<Proposal> {
        let name = file_name(id).map_err(|_| missing(id))?;
        let Some(dir) = self.folder(false)? else {
            return Err(missing(id));
        };
        match self.read_whole(&dir, &name) {
            Ok(Some((proposal, _))) => Ok(proposal),
            Ok(None) => Err(missing(id)),
            Err(why) => Err(Error::conflict(format!(
                "the file of proposal {id} (.mirai/{FOLDER}/{name}) cannot be used: {why}; \
                 it was left as it is: remove it, or put back what mirai wrote"
            ))),
        }
    }

    /// Every proposal that can be read, newest first (the newest [`MAX_FILES`] files).
    pub fn list(&self) -> Result<Listing> {
        let Some(dir) = self.folder(false)? else {
            return Ok(Listing {
                proposals: Vec::new(),
                unreadable: 0,
            });
        };
        let entries = dir
            .entries()
            .map_err(|e| Error::internal(format!("cannot list .mirai/{FOLDER}/: {e}")))?;
        let mut names: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| {
                name.strip_suffix(".json")
                    .is_some_and(|id| file_name(id).as_deref() == Ok(name.as_str()))
            })
            .collect();
        names.sort_unstable_by(|a, b| b.cmp(a));
        names.truncate(MAX_FILES);
        let mut listing = Listing {
            proposals: Vec::with_capacity(names.len()),
            unreadable: 0,
        };
        for name in &names {
            match self.read(&dir, name) {
                Ok(Some(proposal)) => listing.proposals.push(proposal),
                Ok(None) => {}
                Err(why) => {
                    log::warn!("skipped .mirai/{FOLDER}/{name}: {why}");
                    listing.unreadable += 1;
                }
            }
        }
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain(|name, _| names.binary_search_by(|n| name.cmp(n)).is_ok());
        Ok(listing)
    }

    /// How many proposals are pending.
    pub fn pending(&self) -> Result<usize> {
        Ok(self
            .list()?
            .proposals
            .iter()
            .filter(|p| p.status == Status::Pending)
            .count())
    }

    /// Takes the store's decision lock (waiting for another process's decision to end).
    pub fn decide(&self) -> Result<Decision> {
        let dir = self
            .folder(true)?
            .ok_or_else(|| Error::internal(format!("cannot create .mirai/{FOLDER}/")))?;
        let mut options = cap_std::fs::OpenOptions::new();
        cap_fs_ext::OpenOptionsFollowExt::follow(&mut options, cap_fs_ext::FollowSymlinks::No);
        options.read(true).write(true).create(true);
        let file = dir
            .open_with(".lock", &options)
            .map_err(|e| Error::internal(format!("cannot open .mirai/{FOLDER}/.lock: {e}")))?
            .into_std();
        file.lock()
            .map_err(|e| Error::internal(format!("cannot lock .mirai/{FOLDER}/.lock: {e}")))?;
        Ok(Decision { _file: file })
    }

    /// The summary of file `name` in `dir` (`None`: no such file), from the
    /// cache while its identity is unchanged; `Err` says why it cannot be believed.
    fn read(&self, dir: &Dir, name: &str) -> std::result::Result<Option<Arc<Summary>>, String> {
        // A file read before and unchanged since (same inode, size and time) is
        // not opened again: its checked summary is cached.
        if let (Some(stamp), Some((cached, summary))) = (Stamp::lstat(dir, name), self.cached(name))
        {
            if cached == stamp {
                return Ok(Some(summary));
            }
        }
        Ok(self.read_whole(dir, name)?.map(|(_, summary)| summary))
    }

    /// The file `name` in `dir` read whole and checked (`None`: no such
    /// file), its summary cached; `Err` says why it cannot be believed.
    fn read_whole(
        &self,
        dir: &Dir,
        name: &str,
    ) -> std::result::Result<Option<(Proposal, Arc<Summary>)>, String> {
        let mut file = match open_regular_in(dir, name) {
            Ok(file) => file,
            Err(crate::notes::root::Refusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None)
            }
            Err(refusal) => return Err(format!("not a regular file ({refusal:?})")),
        };
        let meta = file.metadata().map_err(|e| e.to_string())?;
        let stamp = Stamp::of(&meta);
        if meta.len() > self.read_cap {
            return Err(format!(
                "{} bytes, more than a proposal may hold ({})",
                meta.len(),
                self.read_cap
            ));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        (&mut file)
            .take(self.read_cap + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| e.to_string())?;
        if bytes.len() as u64 > self.read_cap {
            return Err("it grew past what a proposal may hold".to_string());
        }
        let proposal = parse(&bytes, name)?;
        drop(bytes);
        let summary = Arc::new(Summary::of(&proposal));
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(name.to_string(), (stamp, Arc::clone(&summary)));
        Ok(Some((proposal, summary)))
    }

    fn cached(&self, name: &str) -> Option<(Stamp, Arc<Summary>)> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(name)
            .cloned()
    }
}

/// A proposal file's bytes, checked: strict JSON of the stored shape, the id
/// its name says, plain note paths (each once), a status with what it needs.
fn parse(bytes: &[u8], name: &str) -> std::result::Result<Proposal, String> {
    let value = crate::json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    let proposal: Proposal =
        serde_json::from_value(value).map_err(|e| format!("not a proposal: {e}"))?;
    if file_name(&proposal.id).as_deref() != Ok(name) {
        return Err(format!("its id {:?} is not its file name", proposal.id));
    }
    if proposal.changes.is_empty() {
        return Err("it holds no change".to_string());
    }
    let mut seen = std::collections::HashSet::new();
    for change in &proposal.changes {
        let rel = crate::notes::path::lexical(&change.path)
            .map_err(|e| format!("change path {:?}: {}", change.path, e.message))?;
        if rel != change.path || !seen.insert(rel) {
            return Err(format!(
                "change path {:?} is not a plain note path named once",
                change.path
            ));
        }
        check_change(change)?;
    }
    let commit_ok = |c: &Option<String>| {
        c.as_deref()
            .is_some_and(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if proposal.base_commit.is_some() && !commit_ok(&proposal.base_commit) {
        return Err("its base_commit is not a commit id".to_string());
    }
    let consistent = match proposal.status {
        Status::Pending => proposal.commit.is_none() && proposal.decided_at.is_none(),
        Status::Applied => commit_ok(&proposal.commit) && proposal.decided_at.is_some(),
        Status::Rejected => proposal.commit.is_none() && proposal.decided_at.is_some(),
    };
    if !consistent {
        return Err(format!(
            "status {} does not match its commit and decision time",
            proposal.status.as_str()
        ));
    }
    Ok(proposal)
}

/// `<id>.json` for a proposal id: a UUID in its lowercase hyphenated form.
fn file_name(id: &str) -> Result<String> {
    match uuid::Uuid::parse_str(id) {
        Ok(uuid) if uuid.hyphenated().to_string() == id => Ok(format!("{id}.json")),
        _ => Err(missing(id)),
    }
}

fn missing(id: &str) -> Error {
    Error::not_found(format!(
        "no proposal {id:?}: ids are UUIDs as a proposed write answers them; \
         list them with proposals.list"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Proposals) {
        let dir = tempfile::tempdir().unwrap();
        let notes = Notes::open(dir.path()).unwrap();
        let events = Arc::new(crate::events::Events::new(10, 1));
        (dir, Proposals::new(notes, 1024, events))
    }

    fn proposal(id: &str) -> Proposal {
        Proposal {
            id: id.to_string(),
            status: Status::Pending,
            created_at: now(),
            base_commit: None,
            requested_by: Requester {
                adapter: "http".into(),
                run_id: None,
                message: None,
                caller: None,
                caller_email: None,
            },
            operation: Operation {
                name: "notes.write".into(),
                subject: "mcp.patch_apply: a.md".into(),
                body: String::new(),
            },
            changes: vec![Change {
                path: "a.md".into(),
                diff: "--- /dev/null\n+++ b/a.md\n@@ -0,0 +1 @@\n+x\n".into(),
                content_base64: None,
            }],
            commit: None,
            reason: None,
            decided_at: None,
            decided_by: None,
        }
    }

    #[test]
    fn saved_proposals_read_back_newest_first_and_changes_are_seen() {
        let (_dir, store) = store();
        let (old, new) = (
            uuid::Uuid::now_v7().to_string(),
            uuid::Uuid::now_v7().to_string(),
        );
        store.save(&proposal(&old)).unwrap();
        store.save(&proposal(&new)).unwrap();
        let listed: Vec<String> = store
            .list()
            .unwrap()
            .proposals
            .iter()
            .map(|p| p.id.clone())
            .collect();
        assert_eq!(listed, [new.clone(), old.clone()]);
        assert_eq!(store.pending().unwrap(), 2);
        let mut rejected = proposal(&old);
        rejected.status = Status::Rejected;
        rejected.decided_at = Some(now());
        store.save(&rejected).unwrap();
        assert_eq!(store.load(&old).unwrap().status, Status::Rejected);
        assert_eq!(store.pending().unwrap(), 1);
        assert_eq!(store.load("nope").unwrap_err().code, ErrorCode::NotFound);
        assert_eq!(
            store
                .load(&uuid::Uuid::now_v7().to_string())
                .unwrap_err()
                .code,
            ErrorCode::NotFound
        );
    }

    #[test]
    fn an_attachments_change_names_its_path_and_carries_bytes_only_when_a_file_remains() {
        let change = |path: &str, diff: String, bytes: Option<&str>| Change {
            path: path.into(),
            diff,
            content_base64: bytes.map(str::to_string),
        };
        let written = crate::notes::files::binary_diff("x.png", None, Some(b"ab"));
        let deleted = crate::notes::files::binary_diff("x.png", Some(b"ab"), None);
        assert!(check_change(&change("x.png", written.clone(), Some("YWI="))).is_ok());
        assert!(check_change(&change("x.png", deleted.clone(), None)).is_ok());
        assert!(check_change(&change("x.png", written.clone(), None)).is_err());
        assert!(check_change(&change("x.png", deleted, Some("YWI="))).is_err());
        assert!(check_change(&change("y.png", written.clone(), Some("YWI="))).is_err());
        let note = "--- /dev/null\n+++ b/a.md\n@@ -0,0 +1 @@\n+x\n".to_string();
        assert!(check_change(&change("a.md", note, Some("YWI="))).is_err());
        let as_note = crate::notes::files::binary_diff("a.md", None, Some(b"ab"));
        assert!(check_change(&change("a.md", as_note, Some("YWI="))).is_err());
    }

    #[test]
    fn hostile_files_are_refused_and_skipped() {
        let (dir, store) = store();
        let good = uuid::Uuid::now_v7().to_string();
        store.save(&proposal(&good)).unwrap();
        let folder = dir.path().join(".mirai/proposals");
        let write =
            |id: &str, text: &str| std::fs::write(folder.join(format!("{id}.json")), text).unwrap();
        let ids: Vec<String> = (0..6).map(|_| uuid::Uuid::now_v7().to_string()).collect();
        let mut other_id = proposal(&ids[0]);
        other_id.id = good.clone();
        write(&ids[0], &serde_json::to_string(&other_id).unwrap());
        let mut escaping = proposal(&ids[1]);
        escaping.changes[0].path = "../../etc/passwd.md".into();
        write(&ids[1], &serde_json::to_string(&escaping).unwrap());
        write(&ids[2], "{\"id\": 1, \"id\": 2}");
        write(&ids[3], &"x".repeat(3 * 1024 + 64 * 1024));
        let mut applied_without_commit = proposal(&ids[4]);
        applied_without_commit.status = Status::Applied;
        applied_without_commit.decided_at = Some(now());
        write(
            &ids[4],
            &serde_json::to_string(&applied_without_commit).unwrap(),
        );
        std::os::unix::fs::symlink(
            folder.join(format!("{good}.json")),
            folder.join(format!("{}.json", ids[5])),
        )
        .unwrap();
        for id in &ids {
            let err = store.load(id).unwrap_err();
            assert_eq!(err.code, ErrorCode::Conflict, "{id}: {}", err.message);
        }
        let listing = store.list().unwrap();
        assert_eq!(listing.unreadable, 6);
        assert_eq!(listing.proposals.len(), 1);
        assert_eq!(listing.proposals[0].id, good);
    }
}
