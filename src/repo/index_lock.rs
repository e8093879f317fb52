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
    /// Creates `index.lock` exclusively, waiting up to `wait` for another git
    /// process to release it.
    pub fn acquire(git_dir: &Path, wait: Duration) -> Result<IndexLock> {
        let lock = git_dir.join("index.lock");
        let started = Instant::now();
        loop {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
            {
                Ok(_) => {
                    return Ok(IndexLock {
                        git_dir: git_dir.to_path_buf(),
                        lock,
                        held: true,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if started.elapsed() >= wait {
                        return Err(Error::git(format!(
                            "another git process holds .git/index.lock (a commit or `git add` in \
                             progress?) and did not release it within {} ms; nothing was changed: \
                             retry in a moment",
                            wait.as_millis()
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    return Err(Error::git(format!("cannot create .git/index.lock: {e}")));
                }
            }
        }
    }

    /// The index as it is now, read under the lock (empty when there is none yet).
    pub fn read(&self) -> Result<Index> {
        Index::open(&self.git_dir.join("index"))
            .map_err(|e| Error::git(format!("cannot read the index: {}", e.message())))
    }

    /// Writes `entries` (sorted as the index keeps them) as the new index into
    /// the lock file, as git does; it replaces the index at [`IndexLock::commit`].
    pub fn stage(&self, version: u32, entries: impl Iterator<Item = IndexEntry>) -> Result<()> {
        let temp = self.git_dir.join(format!(
            "mirai-index-{}-{}.tmp",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
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

impl Drop for IndexLock {
    fn drop(&mut self) {
        if self.held {
            // Ours: created exclusively above, so removing it frees only what we took.
            let _ = fs::remove_file(&self.lock);
        }
    }
}
