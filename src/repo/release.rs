//! Deferred release of the files a commit replaces (the note, `.git/index`,
//! the branch's ref file): each is hard-linked into a folder of mirai's just
//! before the rename that replaces it, so the rename frees nothing, and a
//! background thread removes those links after the answer has gone out.
//!
//! Why: where freeing a file's blocks waits for the disk (ext4 without a
//! journal mounted with `discard`, as on the machines the benches ran on,
//! issues the discard inside the `rename` or `unlink` that frees them), each
//! replaced file cost 1.3 to 4 ms inside the request. Nothing about what is
//! written changes: renames stay atomic, and a kill leaves only extra links to
//! old versions, which the start-up sweep removes (`.mirai/released/` for notes,
//! `.git/mirai-released/` for git's files; both hold only mirai's names).
//! When the thread falls behind (more than [`BACKLOG`] waiting), links are
//! removed at once, so the folders stay small.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use cap_std::fs::Dir;

use crate::notes::root::{open_folder, open_regular_in, Expected, Refusal, Slot};
use crate::notes::Notes;

/// The folder under `.mirai/` that holds released notes.
pub const NOTES_DIR: &str = "released";
/// The folder under `.git/` that holds released git files.
pub const GIT_DIR: &str = "mirai-released";
/// How many links may wait for the thread before they are removed at once.
const BACKLOG: usize = 256;

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn fresh_name() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A link waiting to be removed.
enum Link {
    Git(PathBuf),
    Note(Arc<Dir>, String),
}

impl Link {
    fn remove(self) {
        let _ = match self {
            Link::Git(path) => fs::remove_file(path),
            Link::Note(dir, name) => dir.remove_file(name),
        };
    }
}

/// A note's old version, hard-linked into the release folder while a write is
/// undecided.
#[derive(Debug)]
pub struct Held {
    dir: Arc<Dir>,
    name: String,
}

impl Held {
    /// The link's name in `.mirai/released/` (what a crash record names).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The held bytes.
    pub fn read(&self) -> io::Result<Vec<u8>> {
        let mut file = open_regular_in(&self.dir, &self.name).map_err(|r| match r {
            Refusal::Io(e) => e,
            other => io::Error::other(format!("{other:?}")),
        })?;
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut file, &mut bytes)?;
        Ok(bytes)
    }

    /// Renames the old version back into the note's place (no free space
    /// needed), but only while the note still holds `installed`, what the
    /// write put there (`None`: it deleted the note), so a save someone made
    /// over the write is kept ([`Slot::take_back_checked`]). `Ok(None)`: it
    /// went back; `Ok(Some(held))`: the note keeps someone's save and the
    /// link is the caller's to release, as it is on failure.
    pub fn put_back(
        self,
        slot: &Slot,
        installed: Option<Expected<'_>>,
    ) -> Result<Option<Held>, (Held, io::Error)> {
        match slot.take_back_checked(&self.dir, &self.name, installed) {
            Ok(true) => Ok(None),
            Ok(false) => Ok(Some(self)),
            Err(e) => Err((self, e)),
        }
    }
}

/// The release folders and the thread that empties them.
#[derive(Debug)]
pub struct Releaser {
    git: PathBuf,
    notes: Option<Arc<Dir>>,
    queue: Option<SyncSender<Link>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::Git(path) => write!(f, "Git({})", path.display()),
            Link::Note(_, name) => write!(f, "Note({name})"),
        }
    }
}

impl Releaser {
    /// Prepares the folders for the repository at `git_dir` and the notes
    /// root; a folder that cannot be made only means its files are freed
    /// in place, as before.
    pub fn open(git_dir: &Path, notes: &Notes) -> Releaser {
        let git = git_dir.join(GIT_DIR);
        if let Err(e) = fs::create_dir(&git) {
            if e.kind() != io::ErrorKind::AlreadyExists {
                log::debug!("cannot make .git/{GIT_DIR}/: {e}");
            }
        }
        let notes = notes
            .state_dir(true)
            .ok()
            .flatten()
            .and_then(|state| open_folder(&state, NOTES_DIR, true).ok().flatten())
            .map(|(folder, _)| folder)
            .map(Arc::new);
        let (queue, waiting) = sync_channel::<Link>(BACKLOG);
        let thread = std::thread::Builder::new()
            .name("mirai-release".into())
            .spawn(move || {
                for link in waiting {
                    link.remove();
                }
            })
            .ok();
        Releaser {
            git,
            notes,
            queue: thread.as_ref().map(|_| queue),
            thread,
        }
    }

    fn defer(&self, link: Link) {
        match &self.queue {
            Some(queue) => match queue.try_send(link) {
                Ok(()) => {}
                Err(TrySendError::Full(link) | TrySendError::Disconnected(link)) => link.remove(),
            },
            None => link.remove(),
        }
    }

    /// Keeps the git file at `path` (`.git/index`, a loose ref) alive past
    /// the rename that is about to replace it. Missing: nothing to keep.
    pub fn keep_git_file(&self, path: &Path) {
        let link = self.git.join(fresh_name());
        if fs::hard_link(path, &link).is_ok() {
            self.defer(Link::Git(link));
        }
    }

    /// Hard-links a note (with `link`, into the folder it is given under the
    /// name) and keeps the link until [`Releaser::release`] or
    /// [`Held::put_back`]: the note's old version, which a failed write puts
    /// back by a rename that needs no free space. `Ok(None)`: there is no
    /// release folder here (restoring falls back to writing the bytes again).
    pub fn hold_note(
        &self,
        link: impl FnOnce(&Dir, &str) -> io::Result<()>,
    ) -> io::Result<Option<Held>> {
        let Some(released) = &self.notes else {
            return Ok(None);
        };
        let name = fresh_name();
        link(released, &name)?;
        Ok(Some(Held {
            dir: Arc::clone(released),
            name,
        }))
    }

    /// The link `name` a dead mirai's record names, when it is still a
    /// regular file in the release folder (a name with a `/` or a dot first is
    /// never mirai's).
    pub fn reclaim(&self, name: &str) -> Option<Held> {
        let released = self.notes.as_ref()?;
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return None;
        }
        let meta = released.symlink_metadata(name).ok()?;
        meta.is_file().then(|| Held {
            dir: Arc::clone(released),
            name: name.to_string(),
        })
    }

    /// The write is decided: the old version's link goes with the next
    /// background sweep.
    pub fn release(&self, held: Held) {
        self.defer(Link::Note(held.dir, held.name));
    }

    /// Removes every link in both folders (at start-up, with no other mirai
    /// alive); answers how many.
    pub fn sweep(&self) -> usize {
        let mut removed = 0;
        if let Ok(entries) = fs::read_dir(&self.git) {
            for entry in entries.flatten() {
                removed += usize::from(fs::remove_file(entry.path()).is_ok());
            }
        }
        if let Some(dir) = &self.notes {
            if let Ok(entries) = dir.entries() {
                for entry in entries.flatten() {
                    removed += usize::from(dir.remove_file(entry.file_name()).is_ok());
                }
            }
        }
        removed
    }
}

impl Drop for Releaser {
    /// Lets the thread remove what is waiting, then ends it.
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
