//! Intent records: how mirai finishes or undoes a write that a killed process
//! left half-done, and frees the git locks it left behind.
//!
//! Each process that writes keeps one file of its own, `.mirai/intents/<pid>-<uuid>.json`,
//! and holds an exclusive `flock` on it for its whole life (pids are reused in
//! containers; the lock, not the pid, says whether the owner is alive). Before
//! each step of a commit one JSON line is appended to it (one `write`, no new
//! file) with what the step may leave behind: the note, its blob before and
//! after, the commit's parent and, once made, the commit; the lock files by
//! inode and mtime (`index.lock` is made by linking a file whose identity was
//! recorded first, so no instant exists where the lock is ours and
//! unrecorded). The last line is the record in force; a line cut short (a
//! failed write) does not count. Past [`COMPACT_AT`] bytes the file is
//! replaced by one holding only the newest line (temp file, lock, rename).
//!
//! [`recover`] reads the others' files: one whose `flock` is free belongs to a
//! dead mirai. Its lock files are removed only while they are still the ones
//! it recorded; its write is rolled forward (the commit is on the branch: the
//! index entry is put right) or back (the note was renamed into place, the
//! commit is missing: the note goes back to HEAD's bytes), and never when the
//! working tree holds bytes that are not mirai's (a person's edit since).
//! Files tracked by git or malformed are ignored (DESIGN 8.2). With no other
//! live mirai, mirai's stray temp files are removed too.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::Dir;
use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};

use super::Repo;
use crate::error::{Error, Result};
use crate::notes::{Existence, Notes};

/// The folder under `.mirai/` that holds the intent files.
pub const INTENTS_DIR: &str = "intents";

/// The format of an intent file.
const VERSION: u32 = 1;

/// How long after a dead mirai recorded that it was taking the branch's ref
/// lock an empty ref lock may appear and still be taken for its own (libgit2
/// creates it a few microseconds after the record).
const REF_LOCK_WINDOW_NS: u64 = 1_000_000_000;

/// An intent file longer than this is replaced by one holding only its newest
/// record instead of growing by another line.
const COMPACT_AT: u64 = 16 * 1024;

/// A file longer than this is not a mirai intent file (records are compacted
/// well before it).
const MAX_FILE: usize = 64 * 1024;

/// File times come from the kernel's coarse clock, up to a few ticks behind
/// the clock the record's time is read from.
const COARSE_CLOCK_SLACK_NS: u64 = 50_000_000;

/// How far a commit has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Between writes: nothing held, nothing half-done.
    #[default]
    Idle,
    /// `index.lock` is being taken (its identity is recorded).
    Locking,
    /// The lock is held; the note is being renamed into place.
    Writing,
    /// The commit exists; the new index is staged and the branch is moving.
    Committing,
}

/// A lock file's identity: a file that replaced it since has another inode,
/// or (inode reused) another modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileId {
    pub ino: u64,
    pub mtime_ns: i64,
}

impl FileId {
    pub fn of(meta: &fs::Metadata) -> FileId {
        FileId {
            ino: meta.ino(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        }
    }
}

/// What one process is doing, as its intent file says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    pub version: u32,
    pub pid: u32,
    pub stage: Stage,
    /// The note being written, relative to the root.
    pub note: Option<String>,
    /// Its blob before the write (HEAD's, the note being clean); `None`: no note.
    pub before: Option<String>,
    /// Its blob after the write; `None`: deleted.
    pub after: Option<String>,
    /// The note's index entry before the write (what a roll forward replaces).
    pub index_before: Option<String>,
    /// The commit the branch pointed at (the new commit's parent).
    pub parent: Option<String>,
    /// The reference that moves (`refs/heads/<branch>`, or `HEAD` when detached).
    pub reference: Option<String>,
    /// The new commit, once it exists.
    pub commit: Option<String>,
    /// The files that are, or are about to become, `.git/index.lock`.
    pub index_lock: Vec<FileId>,
    /// The reference's `.lock`, once libgit2 made it.
    pub ref_lock: Option<FileId>,
    /// When this record was written (nanoseconds since the epoch).
    pub recorded_ns: u64,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// This process's intent file, locked for as long as the journal lives.
#[derive(Debug)]
pub struct Journal {
    dir: Dir,
    name: String,
    /// The open file holding the `flock`, appended to (replaced when compacted).
    held: fs::File,
    /// Its length; `None` after a failed append, so the next record compacts.
    len: Option<u64>,
    current: Intent,
}

fn intents_dir(notes: &Notes) -> Result<Dir> {
    let state = notes
        .state_dir(true)?
        .ok_or_else(|| Error::internal("cannot create .mirai/ in the notes root"))?;
    match state.create_dir(INTENTS_DIR) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            return Err(Error::internal(format!(
                "cannot create .mirai/{INTENTS_DIR}/: {e}"
            )))
        }
        _ => {}
    }
    cap_fs_ext::DirExt::open_dir_nofollow(&state, INTENTS_DIR).map_err(|e| {
        Error::internal(format!(
            "cannot open .mirai/{INTENTS_DIR}/ (it must be a real folder, not a symlink): {e}"
        ))
    })
}

impl Journal {
    /// Creates this process's intent file (idle) and locks it.
    pub fn open(notes: &Notes) -> Result<Journal> {
        let dir = intents_dir(notes)?;
        let name = format!("{}-{}.json", std::process::id(), uuid::Uuid::new_v4());
        let current = Intent {
            version: VERSION,
            pid: std::process::id(),
            ..Intent::default()
        };
        let line = record_line(&current)?;
        let held = write_locked(&dir, &name, &line)?;
        Ok(Journal {
            dir,
            name,
            held,
            len: Some(line.len() as u64),
            current,
        })
    }

    /// The file's name in `.mirai/intents/`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The record as last written.
    pub fn current(&self) -> &Intent {
        &self.current
    }

    /// Records the intent with `change` applied: one line appended to the
    /// intent file, in force once the write returns. A file grown past
    /// [`COMPACT_AT`] (or left with a cut-short line) is replaced atomically
    /// by one holding only this record; the new file is locked before it
    /// replaces the old one, so the path always names a locked file.
    pub fn record(&mut self, change: impl FnOnce(&mut Intent)) -> Result<()> {
        let mut next = self.current.clone();
        change(&mut next);
        next.recorded_ns = now_ns();
        let line = record_line(&next)?;
        match self.len {
            Some(len) if len + line.len() as u64 <= COMPACT_AT => {
                if let Err(e) = (&self.held).write_all(&line) {
                    self.len = None;
                    return Err(Error::internal(format!(
                        "cannot record mirai's intent in .mirai/{INTENTS_DIR}/{}: {e}",
                        self.name
                    )));
                }
                self.len = Some(len + line.len() as u64);
            }
            _ => {
                self.held = write_locked(&self.dir, &self.name, &line)?;
                self.len = Some(line.len() as u64);
            }
        }
        self.current = next;
        Ok(())
    }

    /// Back to idle after a write, whatever its outcome. A failure is only
    /// logged: the record it leaves names locks that are gone.
    pub fn idle(&mut self) {
        if self.current.stage == Stage::Idle {
            return;
        }
        let result = self.record(|intent| {
            *intent = Intent {
                version: VERSION,
                pid: std::process::id(),
                ..Intent::default()
            }
        });
        if let Err(e) = result {
            log::warn!("could not mark the intent file idle: {e}");
        }
    }
}

/// One record as a line of the intent file.
fn record_line(intent: &Intent) -> Result<Vec<u8>> {
    let mut line = serde_json::to_vec(intent)
        .map_err(|e| Error::internal(format!("cannot encode mirai's intent: {e}")))?;
    line.push(b'\n');
    Ok(line)
}

/// Writes `line` into a temp file in `dir`, locks it, and renames it to
/// `name`; answers the file, open for appending.
fn write_locked(dir: &Dir, name: &str, line: &[u8]) -> Result<fs::File> {
    let temp = format!(
        "{name}.tmp-{}",
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let result = (|| -> io::Result<fs::File> {
        let mut options = cap_std::fs::OpenOptions::new();
        options.append(true).create_new(true);
        let mut file = dir.open_with(&temp, &options)?.into_std();
        file.write_all(line)?;
        file.try_lock().map_err(io::Error::other)?;
        dir.rename(&temp, dir, name)?;
        Ok(file)
    })();
    result.map_err(|e| {
        let _ = dir.remove_file(&temp);
        Error::internal(format!(
            "cannot record mirai's intent in .mirai/{INTENTS_DIR}/{name}: {e}"
        ))
    })
}

/// What a recovery did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Intent files of dead processes read (and removed).
    pub dead: usize,
    /// Intent files of live processes (left alone).
    pub live: usize,
    /// Malformed or git-tracked intent files (ignored).
    pub ignored: usize,
    pub locks_removed: usize,
    pub rolled_forward: usize,
    pub rolled_back: usize,
    pub temps_removed: usize,
}

/// Deals with every dead mirai's intent file (not `own`); with `sweep` and no
/// other live mirai, also removes mirai's stray temp files.
pub(super) fn recover(repo: &Repo, journal: &mut Journal, sweep: bool) -> Result<Recovery> {
    let (git, notes) = (&repo.git, &repo.notes);
    let own = journal.name().to_string();
    let own = own.as_str();
    let dir = intents_dir(notes)?;
    let tracked: HashSet<String> =
        super::tracked_under(notes.root(), &format!(".mirai/{INTENTS_DIR}/"))
            .into_iter()
            .collect();
    let mut done = Recovery::default();
    let mut names: Vec<String> = dir
        .entries()
        .map_err(|e| Error::internal(format!("cannot list .mirai/{INTENTS_DIR}/: {e}")))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".json") && name != own)
        .collect();
    names.sort_unstable();
    for name in names {
        if tracked.contains(&format!(".mirai/{INTENTS_DIR}/{name}")) {
            log::warn!(
                "ignoring .mirai/{INTENTS_DIR}/{name}: it is tracked by git, so it is not mirai's record"
            );
            done.ignored += 1;
            continue;
        }
        let Some((file, intent)) = open_dead(&dir, &name, &mut done) else {
            continue;
        };
        done.dead += 1;
        recover_one(repo, journal, &name, &intent, &mut done);
        // Still holding its lock, so nobody else is working on it.
        if let Err(e) = dir.remove_file(&name) {
            log::warn!("could not remove .mirai/{INTENTS_DIR}/{name}: {e}");
        }
        drop(file);
    }
    if sweep && done.live == 0 {
        done.temps_removed = sweep_temps(git, notes, &dir, own) + repo.releaser.sweep();
    }
    Ok(done)
}

/// Opens and locks `name` when its owner is dead and it is well formed.
fn open_dead(dir: &Dir, name: &str, done: &mut Recovery) -> Option<(fs::File, Intent)> {
    let mut options = cap_std::fs::OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No);
    let mut file = dir.open_with(name, &options).ok()?.into_std();
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            done.live += 1;
            return None;
        }
        Err(fs::TryLockError::Error(e)) => {
            log::warn!("cannot lock .mirai/{INTENTS_DIR}/{name}: {e}");
            return None;
        }
    }
    // Its owner may have replaced it between our open and our lock: then the
    // one we locked is an old copy, and the owner is alive.
    let now = dir.symlink_metadata(name).ok()?;
    let ours = file.metadata().ok()?;
    if cap_std::fs::MetadataExt::ino(&now) != ours.ino() || !now.is_file() {
        done.live += 1;
        return None;
    }
    let mut bytes = Vec::new();
    if (&mut file)
        .take(MAX_FILE as u64 + 1)
        .read_to_end(&mut bytes)
        .is_err()
        || bytes.len() > MAX_FILE
    {
        done.ignored += 1;
        return None;
    }
    match last_record(&bytes) {
        Some(intent) => Some((file, intent)),
        None => {
            log::warn!("ignoring .mirai/{INTENTS_DIR}/{name}: it is not a mirai intent record");
            done.ignored += 1;
            None
        }
    }
}

/// The record in force in an intent file's bytes: its last line, or the one
/// before when the last was cut short (no newline after it) and does not parse.
/// `None`: not a mirai intent file.
fn last_record(bytes: &[u8]) -> Option<Intent> {
    let parse = |line: &[u8]| {
        crate::json::from_slice(line)
            .ok()
            .and_then(|value| serde_json::from_value::<Intent>(value).ok())
            .filter(|intent| intent.version == VERSION)
    };
    let mut lines = bytes.split(|b| *b == b'\n').filter(|line| !line.is_empty());
    let last = lines.next_back()?;
    match parse(last) {
        Some(intent) => Some(intent),
        None if !bytes.ends_with(b"\n") => lines.next_back().and_then(parse),
        None => None,
    }
}

fn recover_one(
    repo: &Repo,
    journal: &mut Journal,
    name: &str,
    intent: &Intent,
    done: &mut Recovery,
) {
    let git_dir = repo.git.path();
    let index_lock = git_dir.join("index.lock");
    if let Ok(meta) = fs::symlink_metadata(&index_lock) {
        if meta.is_file() && intent.index_lock.contains(&FileId::of(&meta)) {
            remove_lock(&index_lock, ".git/index.lock", intent, done);
        }
    }
    if let Some(reference) = intent.reference.as_deref().filter(|r| valid_reference(r)) {
        let lock = git_dir.join(format!("{reference}.lock"));
        if let Ok(meta) = fs::symlink_metadata(&lock) {
            if meta.is_file() && ref_lock_is_ours(&lock, &meta, intent) {
                remove_lock(&lock, &format!(".git/{reference}.lock"), intent, done);
            }
        }
    }
    if matches!(intent.stage, Stage::Writing | Stage::Committing) {
        if let Err(e) = finish_write(repo, journal, intent, done) {
            log::warn!(
                "recovery: could not finish the write recorded in .mirai/{INTENTS_DIR}/{name}: {}",
                e.message
            );
        }
    }
}

fn remove_lock(path: &Path, shown: &str, intent: &Intent, done: &mut Recovery) {
    match fs::remove_file(path) {
        Ok(()) => {
            log::info!(
                "recovery: removed {shown} left by a mirai that died (pid {})",
                intent.pid
            );
            done.locks_removed += 1;
        }
        Err(e) => log::warn!("recovery: could not remove {shown}: {e}"),
    }
}

/// `refs/heads/<name>` (a valid name) or `HEAD`: never a path of the record's choosing.
fn valid_reference(reference: &str) -> bool {
    reference == "HEAD"
        || (reference.starts_with("refs/heads/") && git2::Reference::is_valid_name(reference))
}

/// The ref lock is the dead mirai's when it is the file it recorded (or that
/// file with the new commit written into it, an instant before the rename),
/// or, when it died between announcing the lock and recording it, an empty
/// lock made within [`REF_LOCK_WINDOW_NS`] of the announcement.
fn ref_lock_is_ours(path: &Path, meta: &fs::Metadata, intent: &Intent) -> bool {
    let id = FileId::of(meta);
    match intent.ref_lock {
        Some(recorded) if recorded == id => true,
        Some(recorded) if recorded.ino == id.ino => match &intent.commit {
            Some(commit) => {
                fs::read(path).is_ok_and(|bytes| bytes == format!("{commit}\n").as_bytes())
            }
            None => false,
        },
        Some(_) => false,
        None => {
            let made = id.mtime_ns.max(0) as u64;
            intent.stage == Stage::Committing
                && meta.len() == 0
                && made + COARSE_CLOCK_SLACK_NS >= intent.recorded_ns
                && made <= intent.recorded_ns + REF_LOCK_WINDOW_NS
        }
    }
}

fn parse_oid(text: &Option<String>) -> Result<Option<Oid>> {
    text.as_deref()
        .map(|t| Oid::from_str(t).map_err(|_| Error::internal(format!("not an object id: {t:?}"))))
        .transpose()
}

/// Rolls the recorded write forward or back, when the note holds what mirai wrote.
fn finish_write(
    repo: &Repo,
    journal: &mut Journal,
    intent: &Intent,
    done: &mut Recovery,
) -> Result<()> {
    let (git, notes) = (&repo.git, &repo.notes);
    let Some(raw) = intent.note.as_deref() else {
        return Ok(());
    };
    let note = notes.resolve_for_write(raw, Existence::MayBeMissing)?;
    let rel = note.rel.as_str();
    let before = parse_oid(&intent.before)?;
    let index_before = parse_oid(&intent.index_before)?;
    let after = parse_oid(&intent.after)?;
    let commit = parse_oid(&intent.commit)?;
    let reference = intent.reference.as_deref().filter(|r| valid_reference(r));
    let head = match reference {
        Some(reference) => match git.refname_to_id(reference) {
            Ok(id) => Some(id),
            Err(e) if e.code() == git2::ErrorCode::NotFound => None,
            Err(e) => return Err(Error::git(e.message().to_string())),
        },
        None => None,
    };
    let landed = match (commit, head) {
        (Some(commit), Some(head)) => {
            head == commit || git.graph_descendant_of(head, commit).unwrap_or(false)
        }
        _ => false,
    };
    let slot = notes.existing_slot(rel)?;
    let work = match &slot {
        Some(slot) => slot.read().map_err(|r| crate::notes::refused(rel, r))?,
        None => None,
    };
    let work_id = work.as_deref().map(super::blob_id).transpose()?;
    if landed {
        if repo.roll_index_forward(journal, rel, index_before, after, work.as_deref())? {
            log::info!(
                "recovery: rolled forward {rel}: commit {} is on the branch; its index entry is now put right (pid {} died)",
                intent.commit.as_deref().unwrap_or(""),
                intent.pid
            );
            done.rolled_forward += 1;
        }
        return Ok(());
    }
    if work_id == before || work_id != after {
        if work_id != before {
            log::warn!(
                "recovery: {rel} holds bytes mirai did not write (someone's edit since pid {} died); left as it is",
                intent.pid
            );
        }
        return Ok(());
    }
    // The note is mirai's unacknowledged write; HEAD still has the note as it was.
    let head_blob = head
        .and_then(|id| git.find_commit(id).ok())
        .and_then(|c| c.tree().ok())
        .and_then(|tree| tree.get_path(Path::new(rel)).ok().map(|entry| entry.id()));
    if head_blob != before {
        log::warn!(
            "recovery: {rel} changed in HEAD since pid {} died; its half-done write is left as it is",
            intent.pid
        );
        return Ok(());
    }
    let slot = match slot {
        Some(slot) => slot,
        None => notes.slot(rel, true)?,
    };
    match before {
        Some(blob) => {
            let blob = git
                .find_blob(blob)
                .map_err(|e| Error::git(format!("cannot read {rel} from HEAD: {}", e.message())))?;
            slot.write(blob.content())
                .map_err(|e| Error::internal(format!("cannot restore {rel}: {e}")))?;
        }
        None => slot.remove().map_err(|r| crate::notes::refused(rel, r))?,
    }
    log::info!(
        "recovery: rolled back {rel} to HEAD's bytes: its write was never committed (pid {} died)",
        intent.pid
    );
    done.rolled_back += 1;
    Ok(())
}

/// Removes mirai's stray temp files: notes' `.mirai-<pid>-<n>.tmp`, the
/// artifact's `.mirai/index.json.tmp-*`, git's `.git/mirai-index-*.tmp` and
/// intent files' own temps. Only when no other mirai is alive.
fn sweep_temps(git: &Repository, notes: &Notes, intents: &Dir, own: &str) -> usize {
    let mut removed = notes.remove_temp_files();
    if let Ok(entries) = fs::read_dir(git.path()) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("mirai-index-")
                && name.ends_with(".tmp")
                && fs::remove_file(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
    }
    if let Ok(entries) = intents.entries() {
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.contains(".json.tmp-")
                && !name.starts_with(own)
                && intents.remove_file(&name).is_ok()
            {
                removed += 1;
            }
        }
    }
    if removed > 0 {
        log::info!("recovery: removed {removed} temporary file(s) left by a mirai that died");
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent_path(root: &Path, journal: &Journal) -> std::path::PathBuf {
        root.join(".mirai").join(INTENTS_DIR).join(journal.name())
    }

    #[test]
    fn records_are_appended_to_the_locked_file_and_compacted_when_long() {
        let dir = tempfile::tempdir().unwrap();
        let notes = Notes::open(dir.path()).unwrap();
        let mut journal = Journal::open(&notes).unwrap();
        let path = intent_path(dir.path(), &journal);
        let inode = fs::metadata(&path).unwrap().ino();
        journal
            .record(|intent| intent.stage = Stage::Locking)
            .unwrap();
        journal
            .record(|intent| {
                intent.stage = Stage::Writing;
                intent.note = Some("a.md".into());
            })
            .unwrap();
        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 3);
        assert_eq!(fs::metadata(&path).unwrap().ino(), inode, "no new file");
        assert_eq!(last_record(&bytes).as_ref(), Some(journal.current()));

        while fs::metadata(&path).unwrap().ino() == inode {
            journal
                .record(|intent| intent.stage = Stage::Committing)
                .unwrap();
            journal.idle();
            assert!(fs::metadata(&path).unwrap().len() <= COMPACT_AT);
        }
        // The compacted file holds the record that replaced it (and the idle one after).
        let bytes = fs::read(&path).unwrap();
        assert!(bytes.iter().filter(|b| **b == b'\n').count() <= 2);
        assert_eq!(last_record(&bytes).as_ref(), Some(journal.current()));
        // The file the path names now is the one locked.
        let other = fs::File::open(&path).unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(fs::TryLockError::WouldBlock)
        ));
    }

    #[test]
    fn the_last_whole_line_is_the_record_in_force() {
        let record = |stage| Intent {
            version: VERSION,
            pid: 7,
            stage,
            ..Intent::default()
        };
        let mut bytes = record_line(&record(Stage::Locking)).unwrap();
        bytes.extend(record_line(&record(Stage::Writing)).unwrap());
        assert_eq!(last_record(&bytes).unwrap().stage, Stage::Writing);
        // A line cut short by a failed write does not count.
        let cut = record_line(&record(Stage::Committing)).unwrap();
        bytes.extend_from_slice(&cut[..cut.len() / 2]);
        assert_eq!(last_record(&bytes).unwrap().stage, Stage::Writing);
        // One record without a newline (as older mirai wrote it) is read.
        assert_eq!(
            last_record(&cut[..cut.len() - 1]).unwrap().stage,
            Stage::Committing
        );
        // A whole last line that is not a record makes the file not mirai's.
        bytes.truncate(bytes.len() - cut.len() / 2);
        bytes.extend_from_slice(b"{\"stage\":\"idle\"}\n");
        assert_eq!(last_record(&bytes), None);
        assert_eq!(last_record(b"not json"), None);
        assert_eq!(last_record(b""), None);
    }
}
