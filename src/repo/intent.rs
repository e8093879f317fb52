//! Intent records: what a write in progress may leave behind, so that a later
//! mirai can finish or undo it and free the git locks it held.
//!
//! Each process that writes keeps one file of its own, `.mirai/intents/<pid>-<uuid>.jsonl`
//! (JSON lines; `.json`, the name earlier versions gave them, is read too),
//! and holds an exclusive `flock` on it for its whole life (pids are reused in
//! containers; the lock, not the pid, says whether the owner is alive). Before
//! each step of a commit one JSON line is appended to it (one `write`, no new
//! file) with what the step may leave behind: every note of the commit with its
//! blob before and after, the commit's parent and, once made, the commit; the lock files by
//! inode and mtime (`index.lock` is made by linking a file whose identity was
//! recorded first, so no instant exists where the lock is ours and
//! unrecorded). The last line is the record in force; a line cut short (a
//! failed write) does not count. Past [`COMPACT_AT`] bytes the file is
//! replaced by one holding only the newest line (temp file, lock, rename).
//!
//! Recovery (recover.rs) reads the others' files: one whose `flock` is free
//! belongs to a dead mirai ([`open_dead`]). Files tracked by git or malformed
//! are ignored (ARCHITECTURE.md, "mirai's own state is read as hostile").

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::notes::root::open_folder;
use crate::notes::Notes;

/// The folder under `.mirai/` that holds the intent files.
pub const INTENTS_DIR: &str = "intents";

/// The format of an intent record: version 2 lists every note of a commit;
/// version 1 (one note, in fields of the record itself) is still read.
const VERSION: u32 = 2;

/// An intent file longer than this is replaced by one holding only its newest
/// record instead of growing by another line.
const COMPACT_AT: u64 = 16 * 1024;

/// A file longer than this is not a mirai intent file (files are compacted
/// past [`COMPACT_AT`]; one record of a commit of thousands of notes with long
/// paths stays well within it).
const MAX_FILE: usize = 64 * 1024 * 1024;

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

/// One note of a commit, as an intent record names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoteIntent {
    /// The note, relative to the root.
    pub note: String,
    /// Its blob before the write (HEAD's, the note being clean); `None`: no note.
    pub before: Option<String>,
    /// Its blob after the write; `None`: deleted.
    pub after: Option<String>,
    /// The note's index entry before the write (what a roll forward replaces).
    pub index_before: Option<String>,
    /// The name in `.mirai/released/` of the hard link holding the note's old
    /// version (what a roll back renames back, needing no free space).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<String>,
    /// A path a pull keeps out of the working tree (hidden, a symlink, a
    /// submodule): its index entry carries git's skip-worktree bit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_worktree: bool,
}

/// What one process is doing, as its intent file says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    pub version: u32,
    pub pid: u32,
    pub stage: Stage,
    /// The notes the commit writes, in the order they are written.
    pub notes: Vec<NoteIntent>,
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

/// A version 1 record, as a mirai from before multi-note commits left it:
/// one note, named in the record's own fields.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IntentV1 {
    version: u32,
    pid: u32,
    stage: Stage,
    note: Option<String>,
    before: Option<String>,
    after: Option<String>,
    index_before: Option<String>,
    parent: Option<String>,
    reference: Option<String>,
    commit: Option<String>,
    index_lock: Vec<FileId>,
    ref_lock: Option<FileId>,
    recorded_ns: u64,
}

impl From<IntentV1> for Intent {
    fn from(old: IntentV1) -> Intent {
        let notes = old
            .note
            .map(|note| NoteIntent {
                note,
                before: old.before,
                after: old.after,
                index_before: old.index_before,
                ..NoteIntent::default()
            })
            .into_iter()
            .collect();
        Intent {
            version: old.version,
            pid: old.pid,
            stage: old.stage,
            notes,
            parent: old.parent,
            reference: old.reference,
            commit: old.commit,
            index_lock: old.index_lock,
            ref_lock: old.ref_lock,
            recorded_ns: old.recorded_ns,
        }
    }
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
    /// A failed write could not put every note back: its record stays in
    /// force until [`Journal::take_pending`] hands it to recovery.
    pending: bool,
}

/// A journal that ends between writes leaves nothing to recover: its file is
/// removed (still locked, so no other mirai is reading it), and the next
/// start-up finds no dead record of a process that ended cleanly (a
/// `mirai call` from cron, a server stopped). A record in force stays.
impl Drop for Journal {
    fn drop(&mut self) {
        if !self.pending && self.current.stage == Stage::Idle {
            if let Err(e) = self.dir.remove_file(&self.name) {
                log::debug!("could not remove .mirai/{INTENTS_DIR}/{}: {e}", self.name);
            }
        }
    }
}

pub(super) fn intents_dir(notes: &Notes) -> Result<Dir> {
    let state = notes
        .state_dir(true)?
        .ok_or_else(|| Error::internal("cannot create .mirai/ in the notes root"))?;
    open_folder(&state, INTENTS_DIR, true)
        .map_err(|e| {
            Error::internal(format!(
                "cannot open .mirai/{INTENTS_DIR}/ (it must be a real folder, not a symlink): {e}"
            ))
        })?
        .map(|(dir, _)| dir)
        .ok_or_else(|| Error::internal(format!("cannot create .mirai/{INTENTS_DIR}/")))
}

impl Journal {
    /// Creates this process's intent file (idle) and locks it.
    pub fn open(notes: &Notes) -> Result<Journal> {
        let dir = intents_dir(notes)?;
        let name = format!("{}-{}.jsonl", std::process::id(), uuid::Uuid::new_v4());
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
            pending: false,
        })
    }

    /// Makes sure the intent file is still where a later mirai will look for
    /// it, before a write relies on it: `.mirai/intents/` opened again from the
    /// root (a real folder, not a symlink) must hold this very file. A file
    /// removed from a real folder is made again; an unusable `.mirai` refuses
    /// the write, since its crash records could not be found after a crash.
    pub fn ensure_reachable(&mut self, notes: &Notes) -> Result<()> {
        let dir = intents_dir(notes)?;
        let held = self.held.metadata().map_err(|e| {
            Error::internal(format!(
                "cannot stat mirai's intent file .mirai/{INTENTS_DIR}/{}: {e}",
                self.name
            ))
        })?;
        let same = dir.symlink_metadata(&self.name).is_ok_and(|found| {
            cap_std::fs::MetadataExt::dev(&found) == held.dev()
                && cap_std::fs::MetadataExt::ino(&found) == held.ino()
        });
        if same {
            return Ok(());
        }
        log::warn!(
            "mirai's intent file .mirai/{INTENTS_DIR}/{} was gone; made it again",
            self.name
        );
        let line = record_line(&self.current)?;
        self.held = write_locked(&dir, &self.name, &line)?;
        self.len = Some(line.len() as u64);
        self.dir = dir;
        Ok(())
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

    /// Keeps the record in force past [`Journal::idle`]: a failed write left
    /// notes it could not put back, which the record lets recovery put back
    /// (the next write does it first; a restart does it if none comes).
    pub fn keep_for_recovery(&mut self) {
        self.pending = true;
    }

    /// The record a failed write left for recovery, if any (and the journal
    /// no longer holds it back from idling).
    pub fn take_pending(&mut self) -> Option<Intent> {
        std::mem::take(&mut self.pending).then(|| self.current.clone())
    }

    /// Back to idle after a write, whatever its outcome. A failure is only
    /// logged: the record it leaves names locks that are gone. A record kept
    /// for recovery stays.
    pub fn idle(&mut self) {
        if self.current.stage == Stage::Idle || self.pending {
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

/// Opens and locks `name` when its owner is dead and it is well formed.
pub(super) fn open_dead(dir: &Dir, name: &str, done: &mut Recovery) -> Option<(fs::File, Intent)> {
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
        let value: serde_json::Value = crate::json::from_slice(line).ok()?;
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(2) => serde_json::from_value::<Intent>(value).ok(),
            Some(1) => serde_json::from_value::<IntentV1>(value)
                .ok()
                .map(Intent::from),
            _ => None,
        }
    };
    let mut lines = bytes.split(|b| *b == b'\n').filter(|line| !line.is_empty());
    let last = lines.next_back()?;
    match parse(last) {
        Some(intent) => Some(intent),
        None if !bytes.ends_with(b"\n") => lines.next_back().and_then(parse),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn intent_path(root: &Path, journal: &Journal) -> std::path::PathBuf {
        root.join(".mirai").join(INTENTS_DIR).join(journal.name())
    }

    #[test]
    fn a_removed_intent_file_is_made_again_and_an_unusable_state_folder_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let notes = Notes::open(dir.path()).unwrap();
        let mut journal = Journal::open(&notes).unwrap();
        let path = intent_path(dir.path(), &journal);
        journal.ensure_reachable(&notes).unwrap();
        fs::remove_dir_all(dir.path().join(".mirai")).unwrap();
        journal.ensure_reachable(&notes).unwrap();
        assert_eq!(
            last_record(&fs::read(&path).unwrap()).as_ref(),
            Some(journal.current())
        );
        // A file of its own again, locked: another opener cannot take it.
        let other = fs::File::open(&path).unwrap();
        assert!(other.try_lock().is_err());
        // .mirai swapped for a link to elsewhere: refused, nothing written there.
        let outside = tempfile::tempdir().unwrap();
        fs::remove_dir_all(dir.path().join(".mirai")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(".mirai")).unwrap();
        let err = journal.ensure_reachable(&notes).unwrap_err();
        assert!(err.message.contains(".mirai"), "{}", err.message);
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
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
                intent.notes = vec![NoteIntent {
                    note: "a.md".into(),
                    ..NoteIntent::default()
                }];
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
    fn a_journal_ended_between_writes_leaves_no_record_and_one_in_force_stays() {
        let dir = tempfile::tempdir().unwrap();
        let notes = Notes::open(dir.path()).unwrap();
        let mut journal = Journal::open(&notes).unwrap();
        let path = intent_path(dir.path(), &journal);
        journal
            .record(|intent| intent.stage = Stage::Writing)
            .unwrap();
        journal.idle();
        drop(journal);
        assert!(
            !path.exists(),
            "an idle journal's file is removed when it ends"
        );

        let mut journal = Journal::open(&notes).unwrap();
        let path = intent_path(dir.path(), &journal);
        journal
            .record(|intent| intent.stage = Stage::Writing)
            .unwrap();
        journal.keep_for_recovery();
        journal.idle();
        drop(journal);
        assert!(path.exists(), "a record recovery needs stays");
        let mut journal = Journal::open(&notes).unwrap();
        let path = intent_path(dir.path(), &journal);
        journal
            .record(|intent| intent.stage = Stage::Committing)
            .unwrap();
        drop(journal);
        assert!(path.exists(), "a write cut off leaves its record");
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

    #[test]
    fn a_version_1_record_is_read_as_a_write_of_one_note() {
        let old = br#"{"version":1,"pid":7,"stage":"writing","note":"a.md","before":"b1","after":"a1","index_before":"b1","parent":null,"reference":"refs/heads/main","commit":null,"index_lock":[],"ref_lock":null,"recorded_ns":5}"#;
        let intent = last_record(old).unwrap();
        assert_eq!(intent.stage, Stage::Writing);
        assert_eq!(
            intent.notes,
            [NoteIntent {
                note: "a.md".into(),
                before: Some("b1".into()),
                after: Some("a1".into()),
                index_before: Some("b1".into()),
                ..NoteIntent::default()
            }]
        );
        assert_eq!(intent.reference.as_deref(), Some("refs/heads/main"));
        // Fields of one version in a record of the other make it not mirai's.
        let mixed = br#"{"version":2,"pid":7,"stage":"idle","note":"a.md","notes":[],"parent":null,"reference":null,"commit":null,"index_lock":[],"ref_lock":null,"recorded_ns":5}"#;
        assert_eq!(last_record(mixed), None);
        let unknown = br#"{"version":3,"pid":7,"stage":"idle","notes":[],"parent":null,"reference":null,"commit":null,"index_lock":[],"ref_lock":null,"recorded_ns":5}"#;
        assert_eq!(last_record(unknown), None);
    }
}
