//! `.git/index.lock`, held the way git holds it: created exclusively before the
//! index is read for a commit, kept while mirai works, and released by renaming
//! the new index into place (or by removing it, when the commit fails).
//!
//! A person's `git add` or `git commit` running at the same time either waits
//! for mirai or makes mirai wait (up to [`LOCK_WAIT`]); neither ever writes
//! back a stale copy of the index over the other's change.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

    /// Where the index is (read under the lock with [`super::index_file::Kept::read`]).
    pub fn index_path(&self) -> PathBuf {
        self.git_dir.join("index")
    }

    /// Writes `bytes` (a whole index file) into a fresh temp file with one
    /// `write` and renames it over the lock file, as git writes the new index
    /// into the lock; it replaces the index at [`IndexLock::commit`].
    /// `announce` records the staged file's identity before it becomes the lock.
    pub fn stage(&self, bytes: &[u8], announce: impl FnOnce(FileId) -> Result<()>) -> Result<()> {
        let temp = temp_path(&self.git_dir);
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&temp)
            .and_then(|mut file| {
                file.write_all(bytes)?;
                file.metadata()
            });
        let renamed = written
            .map_err(|e| e.to_string())
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
