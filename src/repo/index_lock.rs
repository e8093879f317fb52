//! `.git/index.lock`, held the way git holds it: created exclusively before the
//! index is read for a commit, kept while mirai works, and released by renaming
//! the new index into place (or by removing it, when the commit fails).
//!
//! A person's `git add` or `git commit` running at the same time either waits
//! for mirai or makes mirai wait (up to [`LOCK_WAIT`]); neither ever writes
//! back a stale copy of the index over the other's change.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use git2::{Index, IndexEntry};

use super::intent::{FileId, Journal, Stage};
use crate::error::{Error, Result};

/// How long a write waits for another process's `index.lock` before failing:
/// long enough for a person's `git commit`, short enough for an HTTP answer.
pub const LOCK_WAIT: Duration = Duration::from_secs(1);

/// The held lock. Dropping it without [`IndexLock::commit`] removes it, leaving
/// the index as it was.
#[derive(Debug)]
pub struct IndexLock {
    git_dir: PathBuf,
    lock: PathBuf,
    held: bool,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl IndexLock {
    /// Takes `index.lock` exclusively, waiting up to `wait` for another git
    /// process to release it; `None` when it is still held after the wait.
    ///
    /// The lock is made by hard-linking a file of ours whose identity the
    /// `journal` recorded first, so a kill at any instant leaves no lock that
    /// the intent file does not name. Where the file system has no hard links,
    /// the lock is created directly and recorded right after.
    pub fn acquire(
        git_dir: &Path,
        wait: Duration,
        journal: &mut Journal,
    ) -> Result<Option<IndexLock>> {
        let lock = git_dir.join("index.lock");
        let temp = temp_path(git_dir);
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|file| file.metadata())
            .map_err(|e| Error::git(format!("cannot prepare .git/index.lock: {e}")))?;
        let announced = journal.record(|intent| {
            intent.stage = Stage::Locking;
            intent.index_lock = vec![FileId::of(&file)];
        });
        if let Err(e) = announced {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        let started = Instant::now();
        let mut direct = false;
        let taken = loop {
            let attempt = if direct {
                create_directly(&lock, journal)
            } else {
                match fs::hard_link(&temp, &lock) {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                    Err(_) => {
                        direct = true;
                        continue;
                    }
                }
            };
            match attempt {
                Ok(false) if started.elapsed() < wait => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                done => break done,
            }
        };
        let _ = fs::remove_file(&temp);
        match taken {
            Ok(true) => Ok(Some(IndexLock {
                git_dir: git_dir.to_path_buf(),
                lock,
                held: true,
            })),
            Ok(false) => {
                journal.idle();
                Ok(None)
            }
            Err(e) => {
                journal.idle();
                Err(e)
            }
        }
    }

    /// The index as it is now, read under the lock (empty when there is none yet).
    /// The index file's modification time (seconds, nanoseconds) as read under
    /// the lock: entries at least this new are "racily clean" (see git's
    /// racy-git rules).
    pub fn index_mtime(&self) -> Option<(i64, u32)> {
        use std::os::unix::fs::MetadataExt;
        let meta = fs::metadata(self.git_dir.join("index")).ok()?;
        Some((meta.mtime(), meta.mtime_nsec() as u32))
    }

    pub fn read(&self) -> Result<Index> {
        Index::open(&self.git_dir.join("index"))
            .map_err(|e| Error::git(format!("cannot read the index: {}", e.message())))
    }

    /// Writes `entries` (sorted as the index keeps them) as the new index into
    /// the lock file, as git does; it replaces the index at [`IndexLock::commit`].
    /// `announce` records the staged file's identity before it becomes the lock.
    pub fn stage(
        &self,
        version: u32,
        entries: impl Iterator<Item = IndexEntry>,
        announce: impl FnOnce(FileId) -> Result<()>,
    ) -> Result<()> {
        let temp = temp_path(&self.git_dir);
        let written = (|| -> std::result::Result<(), git2::Error> {
            let mut out = Index::open(&temp)?;
            out.set_version(version)?;
            for entry in entries {
                out.add(&entry)?;
            }
            out.write()
        })();
        let renamed = written
            .map_err(|e| e.message().to_string())
            .and_then(|()| fs::metadata(&temp).map_err(|e| e.to_string()))
            .and_then(|meta| announce(FileId::of(&meta)).map_err(|e| e.message))
            .and_then(|()| fs::rename(&temp, &self.lock).map_err(|e| e.to_string()));
        if let Err(e) = renamed {
            let _ = fs::remove_file(&temp);
            return Err(Error::git(format!("cannot write the new index: {e}")));
        }
        Ok(())
    }

    /// Renames the staged index into place, releasing the lock.
    pub fn commit(mut self) -> Result<()> {
        fs::rename(&self.lock, self.git_dir.join("index"))
            .map_err(|e| Error::git(format!("cannot replace the index: {e}")))?;
        self.held = false;
        Ok(())
    }
}

/// A fresh `.git/mirai-index-<pid>-<n>.tmp` (swept at start-up when left behind).
fn temp_path(git_dir: &Path) -> PathBuf {
    git_dir.join(format!(
        "mirai-index-{}-{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Without hard links: create the lock itself, then record it (a kill in
/// between leaves a lock only a person can remove, as before intents).
fn create_directly(lock: &Path, journal: &mut Journal) -> Result<bool> {
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(lock)
    {
        Ok(file) => {
            let id = file
                .metadata()
                .map_err(|e| Error::git(format!("cannot stat .git/index.lock: {e}")))?;
            journal.record(|intent| intent.index_lock.push(FileId::of(&id)))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::git(format!("cannot create .git/index.lock: {e}"))),
    }
}

/// The answer when another process kept `index.lock` for the whole wait.
pub fn held_error(wait: Duration) -> Error {
    Error::git(format!(
        "another git process holds .git/index.lock (a commit or `git add` in progress?) and did \
         not release it within {} ms; nothing was changed: retry in a moment",
        wait.as_millis()
    ))
}

impl Drop for IndexLock {
    fn drop(&mut self) {
        if self.held {
            // Ours: created exclusively above, so removing it frees only what we took.
            let _ = fs::remove_file(&self.lock);
        }
    }
}
