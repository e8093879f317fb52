//! The server's live index: the artifact loaded once and kept in memory,
//! reloaded only when another process rewrites the file (noticed by inode,
//! size and nanosecond mtime), updated in place after every apply, and
//! persisted again in the background so an apply never waits for the disk.
//!
//! Without an artifact, queries index on demand and keep that index while
//! the notes stay as they were; nothing is written.
//!
//! The link graph ([`Vault`]) lives beside the index, in the same slot and
//! under the same lock: built from the notes the first time it is asked for
//! (or with the index when the notes are read anyway), then changed wherever
//! the index changes (applies, outside changes taken in, rebuilds), and
//! dropped with it. It is never a second source of truth.

use cap_std::fs::MetadataExt;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, SubsecRound, Utc};

use super::artifact::{self, ArtifactMeta, NoteStat};
use super::scoped::ScopedCopies;
use super::Index;
use crate::error::{Error, Result};
use crate::events::Events;
use crate::notes::path::has_note_extension;
use crate::notes::{Hidden, Notes, Seen};
use crate::vault::Vault;

/// How long applies must pause before the artifact is rewritten.
const PERSIST_QUIET: Duration = Duration::from_millis(300);
/// The longest a stream of applies can keep the artifact from being rewritten.
const PERSIST_MAX_DELAY: Duration = Duration::from_secs(10);
/// After a persist, the next waits this many times as long as it took: the
/// whole artifact is rewritten each time (a second or more for a large
/// vault), so writes going on meanwhile share the machine with it for at most
/// about a tenth of the time.
const PERSIST_SPACING: u32 = 10;

/// How often the server compares the index with the notes on disk, so changes
/// made outside mirai are found within about this long.
pub const WATCH_EVERY: Duration = Duration::from_secs(2);

/// A walk of every note waits at least this many times as long as the last
/// one took: in a large vault a walk every [`WATCH_EVERY`] would keep a core
/// busy a quarter of the time (40,000 notes: about 0.45 s per walk), taking
/// it from queries; spaced, it takes at most a twentieth. File events still
/// arrive at once; only changes no event tells of (a bind mount, a network
/// share) wait for the longer walk, never longer than [`WALK_AT_MOST`].
const WALK_SPACING: u32 = 20;
/// The longest a walk of every note waits, however long the last one took
/// (one that took in a branch switch's thousands of changed notes, say).
const WALK_AT_MOST: Duration = Duration::from_secs(60);

/// How long a burst of file events may go on before the index looks again.
pub const WATCH_SETTLE: Duration = Duration::from_millis(300);

/// How long the watcher waits for the start-up load before it sets its
/// watches up anyway.
const WARM_UP_WAIT: Duration = Duration::from_secs(60);

/// Identity of the artifact file on disk, to notice a rewrite by another process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileStamp {
    fn of(meta: &cap_std::fs::Metadata) -> FileStamp {
        FileStamp {
            inode: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// Where the index in memory came from.
#[derive(Debug, Clone)]
enum Source {
    /// Loaded from (or written to) the artifact with this stamp.
    Artifact {
        stamp: FileStamp,
        meta: ArtifactMeta,
    },
    /// Built from the notes at `built_at` because there was no artifact.
    OnDemand { built_at: DateTime<Utc> },
}

struct Loaded {
    index: Arc<Index>,
    /// The link graph of the same notes (`None`: not asked for yet).
    vault: Option<Arc<Vault>>,
    source: Source,
    /// Notes modified at or after this time may differ from the index and are
    /// read when the index is reconciled with the disk ([`LiveIndex::sync_with_disk`]).
    checked: SystemTime,
}

/// What `index.status` reports about the artifact.
#[derive(Debug, Clone)]
pub struct ArtifactStatus {
    pub generated_at: DateTime<Utc>,
    pub notes_indexed: usize,
    pub chunks_indexed: usize,
    pub stale: bool,
    /// How many notes differ between the artifact and the notes on disk.
    pub notes_changed_since: usize,
    pub byte_size: u64,
    pub content_bytes: u64,
    pub notes_commit: Option<String>,
}

/// Counts from a rebuild.
#[derive(Debug, Clone, Copy)]
pub struct Rebuilt {
    pub notes_indexed: usize,
    pub chunks_indexed: usize,
    pub artifact_bytes: u64,
}

/// The index a server (or one CLI run) works with.
pub struct LiveIndex {
    notes: Notes,
    loaded: RwLock<Option<Loaded>>,
    persist_pending: AtomicBool,
    /// One persist at a time, so each starts from the stamp the previous one left.
    persisting: Mutex<()>,
    /// The in-memory index holds applies the artifact does not have yet.
    dirty: AtomicBool,
    /// The notes the in-memory index changed since the artifact was written
    /// (mirai's writes and outside changes taken in), for an honest `stale`.
    unpersisted: Mutex<BTreeSet<String>>,
    /// When the last apply changed the index: persisting waits for a quiet moment,
    /// because an apply during a persist has to copy the whole index.
    last_change: Mutex<Instant>,
    /// The earliest the next background persist may start (see [`PERSIST_SPACING`]).
    next_persist: Mutex<Instant>,
    /// How many of this process's writes of the artifact are under way (a
    /// rebuild, a persist after applies): between the rename and the new stamp
    /// being recorded, the file is ours, not another process's, and is not
    /// read back.
    own_write: AtomicUsize,
    /// Which of the artifact's files may be loaded: looked up in git on first
    /// need (reading git's index of a large vault takes a while, and start-up
    /// need not wait for it).
    trust: OnceLock<Trust>,
    /// Counts the changes of the index in memory (loads, builds, applies,
    /// outside changes taken in, rebuilds, invalidation).
    generation: AtomicU64,
    /// Called after each such change (the embedding worker's wake-up).
    on_change: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// The change stream: outside changes taken in (`notes_changed`) and the
    /// index rebuilt or invalidated (`index`).
    events: Arc<Events>,
    /// Notes mirai is writing now (from before their files change until the
    /// index has them): the watcher may see them first, and must not tell
    /// them as outside edits.
    writing: Mutex<HashMap<String, usize>>,
    /// Set while [`LiveIndex::follow`] loads the index.
    following: AtomicBool,
    /// Set while [`LiveIndex::warm_up`] loads the index at start-up.
    warming: AtomicBool,
    /// Held while the link graph is built without the index's lock (one build at a time).
    vault_building: Mutex<()>,
    /// The index and link graph as scoped callers see them.
    scoped: ScopedCopies,
}

/// Holds notes in [`LiveIndex::writing`] for one write.
pub struct Writing<'a> {
    live: &'a LiveIndex,
    paths: Vec<String>,
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        let mut writing = self.live.writing_now();
        for path in &self.paths {
            if let Some(n) = writing.get_mut(path) {
                *n -= 1;
                if *n == 0 {
                    writing.remove(path);
                }
            }
        }
    }
}

/// What the watcher also looks at besides the notes, each called on its own
/// thread after a burst of file events there settles, and on every fallback walk.
pub struct AlsoWatched {
    /// HEAD, the branch refs or packed-refs changed (`.git/`).
    pub refs: Box<dyn Fn() + Send>,
    /// A proposal file changed (`.mirai/proposals/`).
    pub proposals: Box<dyn Fn() + Send>,
}

/// What a burst of file events touched.
const NOTES: u8 = 1;
const REFS: u8 = 2;
const PROPOSALS: u8 = 4;
/// A folder to watch appeared (a note folder at the top, `.mirai`, its proposals).
const NEW_FOLDER: u8 = 8;
/// The most notes a burst of events names before the watcher walks them all instead.
const MAX_NAMED: usize = 1000;

/// What a burst of file events touched: the watched parts, and the notes
/// they named, so that a note saved is looked at alone, not with every other.
#[derive(Debug, Default)]
struct Touched {
    parts: u8,
    named: BTreeSet<String>,
    /// Every note must be looked at: an event named a folder or a file that
    /// is not a note (an attachment), the kernel's queue overflowed, or too
    /// many notes were named.
    all_notes: bool,
}

impl Touched {
    /// What the fallback walk looks at: everything.
    fn everything() -> Touched {
        Touched {
            parts: NOTES | REFS | PROPOSALS,
            named: BTreeSet::new(),
            all_notes: true,
        }
    }

    /// What one event touched (`root`: the notes root, which its paths are under).
    fn of(event: &notify::Event, root: &std::path::Path) -> Touched {
        let mut touched = Touched::default();
        if event.need_rescan() {
            return Touched::everything();
        }
        for rel in event
            .paths
            .iter()
            .filter_map(|path| path.strip_prefix(root).ok())
        {
            let part = watched_part(rel);
            if part == NOTES {
                match rel.to_str().filter(|rel| has_note_extension(rel)) {
                    Some(note) => {
                        touched.named.insert(note.to_string());
                    }
                    None => touched.all_notes = true,
                }
            }
            touched.parts |= part;
        }
        touched
    }

    fn merge(mut self, other: Touched) -> Touched {
        self.parts |= other.parts;
        self.all_notes |= other.all_notes;
        if !self.all_notes {
            self.named.extend(other.named);
        }
        if self.all_notes || self.named.len() > MAX_NAMED {
            self.all_notes = true;
            self.named.clear();
        }
        self
    }
}

/// Which of the artifact's files may be loaded: one tracked in git is a file
/// anyone who can push to the notes could have written, so it is never loaded
/// (ARCHITECTURE.md, "Notes are data, never code"); without `artifact` the
/// index is built from the notes instead.
#[derive(Debug, Clone, Copy)]
struct Trust {
    /// `.mirai/index.json` is not tracked.
    artifact: bool,
    /// `.mirai/index.bin`, the artifact's binary form, is not tracked.
    binary: bool,
}

/// Which notes a comparison with the disk looked at.
#[derive(Debug, Clone, Copy)]
enum Looked<'a> {
    /// Every note, walked from this moment on.
    All(SystemTime),
    /// Only these, which file events named.
    Named(&'a BTreeSet<String>),
}

/// Whether a path created or moved in under the root is a folder the watcher
/// must add a watch for: the root itself is watched alone, so each folder at
/// its top is watched with what is under it, and mirai's own state only where
/// proposals live.
fn folder_to_watch(rel: &std::path::Path) -> bool {
    let Some(rel) = rel.to_str() else {
        return false;
    };
    rel == ".mirai" || rel == ".mirai/proposals" || (!rel.contains('/') && !rel.starts_with('.'))
}

/// Adds the watches the index needs, from `root`: the root itself (notes at
/// the top), each visible folder at the top with everything under it, and of
/// the hidden ones only what [`watched_part`] looks at: `.git` itself (HEAD,
/// packed-refs), `.git/refs/heads`, `.mirai` and `.mirai/proposals`. Git's
/// objects, logs and index are never watched: every write makes and opens
/// files there, and each would be an event to read and drop. `only` limits
/// this to the folders named (appeared since the last call). A folder that
/// cannot be watched is left to the fallback walk.
fn add_watches(
    watcher: &mut notify::RecommendedWatcher,
    root: &std::path::Path,
    only: Option<&[std::path::PathBuf]>,
) -> notify::Result<()> {
    use notify::{RecursiveMode, Watcher};
    let mut folders: Vec<(std::path::PathBuf, RecursiveMode)> = Vec::new();
    let mut add = |rel: &std::path::Path| {
        let path = root.join(rel);
        // Never through a link: a link at the top is not a note folder.
        if !std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir()) {
            return;
        }
        let mode = match rel.to_str() {
            Some(".git" | ".mirai" | ".mirai/proposals") => RecursiveMode::NonRecursive,
            _ => RecursiveMode::Recursive,
        };
        folders.push((path, mode));
    };
    match only {
        Some(appeared) => {
            for rel in appeared {
                add(rel);
                if rel.as_os_str() == ".mirai" {
                    add(std::path::Path::new(".mirai/proposals"));
                }
            }
        }
        None => {
            watcher.watch(root, RecursiveMode::NonRecursive)?;
            for rel in [".git", ".git/refs/heads", ".mirai", ".mirai/proposals"] {
                add(std::path::Path::new(rel));
            }
            for entry in std::fs::read_dir(root)?.flatten() {
                let name = entry.file_name();
                if !name.to_string_lossy().starts_with('.') {
                    add(std::path::Path::new(&name));
                }
            }
        }
    }
    for (path, mode) in folders {
        if let Err(e) = watcher.watch(&path, mode) {
            log::debug!("cannot watch {}: {e}", path.display());
        }
    }
    Ok(())
}

/// Which of the watched things a path under the notes root is part of (0: none).
fn watched_part(rel: &std::path::Path) -> u8 {
    let Some(rel) = rel.to_str() else { return 0 };
    if let Some(git) = rel.strip_prefix(".git/") {
        let git = git.strip_suffix(".lock").unwrap_or(git);
        return if git == "HEAD" || git == "packed-refs" || git.starts_with("refs/heads/") {
            REFS
        } else {
            0
        };
    }
    if rel.starts_with(".mirai/proposals/") {
        return PROPOSALS;
    }
    // mirai's own state, git's internals and hidden files are not notes.
    if rel.split('/').any(|c| c.starts_with('.')) {
        0
    } else {
        NOTES
    }
}

/// Counts one write of the artifact in [`LiveIndex::own_write`] until it
/// ends, however it ends.
struct OwnWrite<'a>(&'a AtomicUsize);

impl<'a> OwnWrite<'a> {
    fn begin(writes: &'a AtomicUsize) -> OwnWrite<'a> {
        writes.fetch_add(1, Ordering::AcqRel);
        OwnWrite(writes)
    }
}

impl Drop for OwnWrite<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl LiveIndex {
    pub fn new(notes: Notes, events: Arc<Events>) -> LiveIndex {
        LiveIndex {
            trust: OnceLock::new(),
            notes,
            loaded: RwLock::new(None),
            persist_pending: AtomicBool::new(false),
            persisting: Mutex::new(()),
            own_write: AtomicUsize::new(0),
            dirty: AtomicBool::new(false),
            unpersisted: Mutex::new(BTreeSet::new()),
            last_change: Mutex::new(Instant::now()),
            next_persist: Mutex::new(Instant::now()),
            generation: AtomicU64::new(0),
            on_change: Mutex::new(Vec::new()),
            events,
            writing: Mutex::new(HashMap::new()),
            following: AtomicBool::new(false),
            warming: AtomicBool::new(false),
            vault_building: Mutex::new(()),
            scoped: ScopedCopies::default(),
        }
    }

    fn writing_now(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.writing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `changes`' notes as being written by mirai until the guard drops
    /// (after [`LiveIndex::notes_changed`]), so the watcher does not tell them.
    pub fn writing(&self, paths: &[&str]) -> Writing<'_> {
        let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        let mut writing = self.writing_now();
        for path in &paths {
            *writing.entry(path.clone()).or_default() += 1;
        }
        Writing { live: self, paths }
    }

    /// How many times the index in memory has changed: equal numbers, the
    /// same index.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Calls `hook` after every change of the index in memory, on the thread
    /// that made it: it must be quick and must not call back into the index.
    pub fn on_change(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.on_change
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(Box::new(hook));
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        for hook in self
            .on_change
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
        {
            hook();
        }
    }

    /// The index in memory, if one is loaded (nothing is loaded or built here:
    /// a caller that only follows the index, like the embedding worker, must
    /// not make a rebuild or an invalidation read every note).
    pub fn current(&self) -> Option<Arc<Index>> {
        self.read_lock().as_ref().map(|loaded| loaded.index.clone())
    }

    /// Which of the artifact's files may be loaded, looked up once.
    fn trust(&self) -> Trust {
        *self.trust.get_or_init(|| {
            let tracked = crate::repo::tracked_under(self.notes.root(), ".mirai/");
            for path in &tracked {
                log::warn!("{path} is tracked in git; mirai ignores it (files under .mirai/ are mirai's own state and are never committed: git rm --cached it)");
            }
            Trust {
                artifact: !tracked.iter().any(|p| p == ".mirai/index.json"),
                binary: !tracked.iter().any(|p| p == ".mirai/index.bin"),
            }
        })
    }

    /// The `.mirai` folder, through the root handle (`None`: there is none yet).
    fn state(&self) -> Option<cap_std::fs::Dir> {
        self.notes.state_dir(false).ok().flatten()
    }

    /// The artifact's stamp, or `None` when there is none to load (or it is
    /// not trusted).
    fn stamp(&self) -> Option<FileStamp> {
        if !self.trust().artifact {
            return None;
        }
        let state = self.state()?;
        artifact::stat(&state).map(|meta| FileStamp::of(&meta))
    }

    fn read_lock(&self) -> RwLockReadGuard<'_, Option<Loaded>> {
        self.loaded
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write_lock(&self) -> RwLockWriteGuard<'_, Option<Loaded>> {
        self.loaded
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Loads the artifact, if there is one, on a background thread, so the first
    /// query after start-up does not wait for it.
    pub fn warm_up(self: &Arc<Self>) {
        let live = Arc::clone(self);
        self.warming.store(true, Ordering::Release);
        std::thread::spawn(move || {
            // Cleared however the load ends, a panic included.
            struct Warmed<'a>(&'a AtomicBool);
            impl Drop for Warmed<'_> {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let warmed = Warmed(&live.warming);
            let stamp = live.stamp();
            if stamp.is_some() {
                let mut guard = live.write_lock();
                if let Err(e) = live.refresh(&mut guard, stamp) {
                    log::warn!("the index artifact could not be loaded: {e}");
                }
                drop(guard);
                // The watcher need not wait for the link graph too.
                drop(warmed);
                if let Err(e) = live.vault() {
                    log::warn!("the link graph could not be built: {e}");
                }
            }
        });
    }

    /// Runs `f` on the index (loading or reloading the artifact when needed,
    /// or indexing on demand when there is none) as a view sees it: without
    /// the notes its caller may not read, and as if its unsaved notes held
    /// that text (`None`: deleted), which costs a copy of the index. With
    /// neither, on the index itself.
    pub fn as_if<R>(&self, seen: &Seen, f: impl FnOnce(&Index) -> R) -> Result<R> {
        let scoped = match &seen.hidden {
            Some(hidden) => Some(self.scoped_index(hidden)?),
            None => None,
        };
        if seen.unsaved.is_empty() {
            return match scoped {
                Some(index) => Ok(f(&index)),
                None => self.with_index(f),
            };
        }
        let mut index = match scoped {
            Some(index) => Index::clone(&index),
            None => self.with_index(Index::clone)?,
        };
        for (path, content) in &seen.unsaved {
            match content {
                Some(content) => index.upsert_note(path, content),
                None => index.remove_note(path),
            }
        }
        Ok(f(&index))
    }

    /// The index without the notes `hidden` hides: kept from an earlier
    /// request of the same scope while the index has not changed.
    fn scoped_index(&self, hidden: &Hidden) -> Result<Arc<Index>> {
        let generation = self.generation();
        if let Some(index) = self.scoped.index(generation, hidden) {
            return Ok(index);
        }
        let index = Arc::new(self.with_index(|full| full.without(|path| hidden.hides(path)))?);
        // Kept only when made from the index of that generation.
        if self.generation() == generation {
            self.scoped
                .keep_index(generation, hidden, Arc::clone(&index));
        }
        Ok(index)
    }

    /// The link graph of the notes the index answers for (built from the
    /// notes the first time) as a view sees it, as [`LiveIndex::as_if`] does
    /// for the index.
    pub fn vault_as_if(&self, seen: &Seen) -> Result<Arc<Vault>> {
        let mut vault = match &seen.hidden {
            Some(hidden) => self.scoped_vault(hidden)?,
            None => self.vault()?,
        };
        if !seen.unsaved.is_empty() {
            let copy = Arc::make_mut(&mut vault);
            for (path, content) in &seen.unsaved {
                match content {
                    Some(content) => copy.upsert(path, content),
                    None => copy.remove(path),
                }
            }
        }
        Ok(vault)
    }

    /// The link graph without the notes `hidden` hides, kept as [`LiveIndex::scoped_index`] keeps its index.
    fn scoped_vault(&self, hidden: &Hidden) -> Result<Arc<Vault>> {
        let generation = self.generation();
        if let Some(vault) = self.scoped.vault(generation, hidden) {
            return Ok(vault);
        }
        let vault = Arc::new(self.vault()?.without(|path| hidden.hides(path)));
        if self.generation() == generation {
            self.scoped
                .keep_vault(generation, hidden, Arc::clone(&vault));
        }
        Ok(vault)
    }

    /// Whether the link graph is built (asking never builds it).
    pub fn vault_built(&self) -> bool {
        self.read_lock()
            .as_ref()
            .is_some_and(|loaded| loaded.vault.is_some())
    }

    /// The link graph, beside an index that matches the artifact (or the
    /// notes when there is none); built from the notes when it is not yet.
    pub fn vault(&self) -> Result<Arc<Vault>> {
        let stamp = self.stamp();
        {
            let guard = self.read_lock();
            if let Some(loaded) = guard.as_ref() {
                if let Some(vault) = &loaded.vault {
                    if self.is_current(loaded, stamp)? {
                        return Ok(vault.clone());
                    }
                }
            }
        }
        let mut guard = self.write_lock();
        self.refresh(&mut guard, stamp)?;
        let Some(loaded) = guard.as_mut() else {
            return Ok(Arc::new(Vault::default()));
        };
        if let Some(vault) = &loaded.vault {
            return Ok(vault.clone());
        }
        // Built without the lock, so queries and writes go on meanwhile (one
        // build at a time), and kept only when the index did not change while
        // the notes were read: a write or an outside change taken in meanwhile
        // could be older in what was read than in the index.
        let generation = self.generation();
        drop(guard);
        let building = self
            .vault_building
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(vault) = self.read_lock().as_ref().and_then(|l| l.vault.clone()) {
            return Ok(vault);
        }
        let started = Instant::now();
        let notes = self.notes.read_all()?;
        let vault = Arc::new(Vault::build(&notes, self.notes.list_files()));
        let mut guard = self.write_lock();
        drop(building);
        if self.generation() == generation {
            if let Some(loaded) = guard.as_mut() {
                log::debug!(
                    "link graph of {} notes built in {} ms",
                    vault.len(),
                    started.elapsed().as_millis()
                );
                return Ok(loaded.vault.get_or_insert(vault).clone());
            }
        }
        self.refresh(&mut guard, stamp)?;
        let Some(loaded) = guard.as_mut() else {
            return Ok(Arc::new(Vault::default()));
        };
        if let Some(vault) = &loaded.vault {
            return Ok(vault.clone());
        }
        // The index changed meanwhile: read under the lock, so a write landing
        // now waits to change the vault until it is in place, and is never
        // overtaken by older text.
        let started = Instant::now();
        let notes = self.notes.read_all()?;
        let vault = Arc::new(Vault::build(&notes, self.notes.list_files()));
        log::debug!(
            "link graph of {} notes built in {} ms",
            vault.len(),
            started.elapsed().as_millis()
        );
        loaded.vault = Some(vault.clone());
        Ok(vault)
    }

    /// Runs `f` on an index that matches the artifact (or the notes when there is none).
    fn with_index<R>(&self, f: impl FnOnce(&Index) -> R) -> Result<R> {
        let stamp = self.stamp();
        {
            let guard = self.read_lock();
            if let Some(loaded) = guard.as_ref() {
                if self.is_current(loaded, stamp)? {
                    return Ok(f(&loaded.index));
                }
            }
        }
        let mut guard = self.write_lock();
        self.refresh(&mut guard, stamp)?;
        // refresh leaves an index loaded whenever it succeeds
        Ok(match guard.as_ref() {
            Some(loaded) => f(&loaded.index),
            None => f(&Index::default()),
        })
    }

    /// Whether `loaded` may answer, given the artifact's stamp now.
    fn is_current(&self, loaded: &Loaded, stamp: Option<FileStamp>) -> Result<bool> {
        Ok(match (&loaded.source, stamp) {
            (Source::Artifact { stamp: ours, .. }, Some(now)) => {
                *ours == now || self.own_write.load(Ordering::Acquire) > 0
            }
            (Source::OnDemand { built_at }, None) => {
                !self.notes_changed_since(&loaded.index, *built_at)?
            }
            _ => false,
        })
    }

    /// Makes `slot` hold an index that matches the artifact (or the notes when there is none).
    fn refresh(&self, slot: &mut Option<Loaded>, stamp: Option<FileStamp>) -> Result<()> {
        if let Some(loaded) = slot.as_ref() {
            if self.is_current(loaded, stamp)? {
                return Ok(());
            }
        }
        if stamp.is_some() {
            let started = Instant::now();
            // The notes are walked while the artifact is read: both take a
            // while in a large vault, and the first query waits for both.
            let looked = SystemTime::now();
            let (loaded, stats) = std::thread::scope(|scope| {
                let stats = scope.spawn(|| self.note_stats());
                let loaded = match self.state() {
                    Some(state) => artifact::read(&state, self.trust().binary),
                    None => Ok(None),
                };
                let stats = stats
                    .join()
                    .unwrap_or_else(|_| Err(Error::internal("the walk of the notes failed")));
                (loaded, stats)
            });
            if let Some((index, meta)) = loaded? {
                // Stat again after reading: the stamp must describe the bytes we loaded.
                if let Some(stamp) = self.stamp() {
                    let read_ms = started.elapsed().as_secs_f64() * 1000.0;
                    let mut fresh = Loaded {
                        index: Arc::new(index),
                        vault: None,
                        checked: meta.generated_at.into(),
                        source: Source::Artifact { stamp, meta },
                    };
                    // Notes written after the artifact (acknowledged writes a killed
                    // process had not persisted yet, or edits made while mirai was not
                    // running) are taken in before the index answers anything.
                    let stats = stats?;
                    self.unpersisted().clear();
                    // Changes made while no index looked are not news: not told.
                    let _ = self.apply_drift(&mut fresh, &stats, Looked::All(looked));
                    log::info!(
                        "index: {} notes loaded from the artifact in {read_ms:.0} ms (the notes walked meanwhile), compared with them in {:.0} ms",
                        fresh.index.notes_indexed(),
                        started.elapsed().as_secs_f64() * 1000.0 - read_ms
                    );
                    *slot = Some(fresh);
                    self.changed();
                    return Ok(());
                }
            }
        }
        let built_at = Utc::now();
        let notes = self.notes.read_all()?;
        let vault = Vault::build(&notes, self.notes.list_files());
        let index = Index::build(notes);
        *slot = Some(Loaded {
            index: Arc::new(index),
            vault: Some(Arc::new(vault)),
            checked: built_at.into(),
            source: Source::OnDemand { built_at },
        });
        self.changed();
        Ok(())
    }

    fn note_stats(&self) -> Result<Vec<NoteStat>> {
        Ok(self
            .notes
            .list_stats()?
            .into_iter()
            .map(|(path, bytes, modified)| NoteStat {
                path,
                bytes,
                modified,
            })
            .collect())
    }

    fn notes_changed_since(&self, index: &Index, since: DateTime<Utc>) -> Result<bool> {
        let stats = self.note_stats()?;
        Ok(artifact::is_stale(index, since, &stats, |path| {
            self.notes.read(path).ok().map(|(_, content)| content)
        }))
    }

    /// Rebuilds from the notes and writes the artifact. The caller holds the
    /// write lock of the repository, so no apply lands in between. Every note
    /// is read; those the index in memory holds with the same content hash are
    /// reused from it rather than indexed again ([`Index::refreshed`]).
    pub fn rebuild(&self, notes_commit: Option<&str>) -> Result<Rebuilt> {
        let started = Instant::now();
        let (previous, previous_vault) = self
            .read_lock()
            .as_ref()
            .map(|loaded| (Some(loaded.index.clone()), loaded.vault.clone()))
            .unwrap_or_default();
        // The files beside the notes are listed while the notes are read:
        // two walks of the same folders, one per core.
        let (notes, attachments) = std::thread::scope(|scope| {
            let files = scope.spawn(|| self.notes.list_files());
            let notes = self.notes.read_all();
            let files = files.join().unwrap_or_else(|_| self.notes.list_files());
            (notes, files)
        });
        let mut notes = notes?;
        let read = started.elapsed();
        // The link graph is built from the notes, as the index is, before the
        // notes go to the index (which keeps them).
        let built = |notes: &[(String, String)], attachments: Vec<String>| {
            Arc::new(Vault::build(notes, attachments))
        };
        let (index, vault) = match &previous {
            Some(previous) => {
                let unchanged = previous.reusable_all(&mut notes);
                match previous_vault {
                    // Every note as the index and the link graph hold it, the
                    // same files beside them: both are kept as they are.
                    Some(vault)
                        if unchanged
                            && vault.len() == notes.len()
                            && !vault.attachments_differ(&attachments) =>
                    {
                        (Arc::clone(previous), vault)
                    }
                    _ => {
                        let vault = built(&notes, attachments);
                        (Index::refreshed(previous, notes), vault)
                    }
                }
            }
            None => {
                let vault = built(&notes, attachments);
                (Arc::new(Index::build(notes)), vault)
            }
        };
        let reused = previous
            .as_ref()
            .is_some_and(|previous| Arc::ptr_eq(previous, &index));
        drop(previous);
        let indexed = started.elapsed();
        if reused {
            if let Some(kept) = self.kept_artifact(&index, notes_commit) {
                // The link graph, when it was built here, is kept beside it.
                if let Some(loaded) = self.write_lock().as_mut() {
                    if Arc::ptr_eq(&loaded.index, &index) && loaded.vault.is_none() {
                        loaded.vault = Some(vault);
                    }
                }
                self.events.publish(
                    "index",
                    serde_json::json!({"stale": false, "notes_indexed": kept.notes_indexed}),
                    None,
                );
                log::debug!(
                    "index rebuilt: {} notes read in {} ms, all as the artifact holds them: kept as it is, done in {} ms",
                    kept.notes_indexed,
                    read.as_millis(),
                    started.elapsed().as_millis()
                );
                return Ok(kept);
            }
        }
        // The artifact stores whole seconds; keep the same value in memory.
        let generated_at = Utc::now().trunc_subsecs(0);
        let own_write = OwnWrite::begin(&self.own_write);
        let state = self.state_for_writing()?;
        let artifact_bytes = artifact::write(&state, &index, generated_at, notes_commit)?;
        let rebuilt = Rebuilt {
            notes_indexed: index.notes_indexed(),
            chunks_indexed: index.chunks_indexed(),
            artifact_bytes,
        };
        let written = started.elapsed();
        let mut guard = self.write_lock();
        self.unpersisted().clear();
        // Keep the index we built rather than reading back what we just wrote.
        let replaced = std::mem::replace(
            &mut *guard,
            self.stamp().map(|stamp| Loaded {
                index,
                vault: Some(vault),
                checked: generated_at.into(),
                source: Source::Artifact {
                    stamp,
                    meta: ArtifactMeta {
                        generated_at,
                        notes_commit: notes_commit.map(str::to_string),
                        byte_size: artifact_bytes,
                    },
                },
            }),
        );
        drop(guard);
        self.changed();
        self.events.publish(
            "index",
            serde_json::json!({"stale": false, "notes_indexed": rebuilt.notes_indexed}),
            None,
        );
        drop(own_write);
        drop(replaced);
        release_freed_memory();
        log::debug!(
            "index rebuilt: {} notes read in {} ms, {} by {} ms, artifact ({} bytes) written by {} ms, done in {} ms",
            rebuilt.notes_indexed,
            read.as_millis(),
            if reused { "all reused" } else { "indexed" },
            indexed.as_millis(),
            artifact_bytes,
            written.as_millis(),
            started.elapsed().as_millis()
        );
        Ok(rebuilt)
    }

    /// What a rebuild that found every note as `index` holds them answers
    /// without writing: when the artifact on disk is still the one that index
    /// was loaded from or last wrote (same stamp, same commit, its binary form
    /// beside it) and no change waits to be persisted, writing would give the
    /// same bytes but for `generated_at`, which keeps the time it was written.
    /// `None`: write it.
    fn kept_artifact(&self, index: &Arc<Index>, notes_commit: Option<&str>) -> Option<Rebuilt> {
        let guard = self.read_lock();
        let loaded = guard.as_ref()?;
        let Source::Artifact { stamp, meta } = &loaded.source else {
            return None;
        };
        let kept = Arc::ptr_eq(&loaded.index, index)
            && self.stamp() == Some(*stamp)
            && meta.notes_commit.as_deref() == notes_commit
            && self.unpersisted().is_empty()
            && self
                .state()
                .is_some_and(|state| artifact::has_binary(&state));
        kept.then(|| Rebuilt {
            notes_indexed: index.notes_indexed(),
            chunks_indexed: index.chunks_indexed(),
            artifact_bytes: meta.byte_size,
        })
    }

    /// Deletes the artifact; `false` when there was none. Queries then index on demand.
    pub fn invalidate(&self) -> Result<bool> {
        let mut guard = self.write_lock();
        let dropped = guard.take();
        self.unpersisted().clear();
        drop(guard);
        self.changed();
        drop(dropped);
        release_freed_memory();
        let removed = match self.state() {
            Some(state) => artifact::remove(&state),
            None => Ok(false),
        };
        self.events.publish(
            "index",
            serde_json::json!({"stale": true, "notes_indexed": 0}),
            None,
        );
        removed
    }

    /// The `.mirai` folder, made when missing.
    fn state_for_writing(&self) -> Result<cap_std::fs::Dir> {
        self.notes
            .state_dir(true)?
            .ok_or_else(|| crate::error::Error::internal("cannot create .mirai/ in the notes root"))
    }

    /// The artifact's status, or `None` when there is none.
    pub fn status(&self) -> Result<Option<ArtifactStatus>> {
        let stamp = self.stamp();
        if stamp.is_none() {
            return Ok(None);
        }
        let mut guard = self.write_lock();
        self.refresh(&mut guard, stamp)?;
        let Some(Loaded {
            index,
            source: Source::Artifact { meta, .. },
            checked,
            ..
        }) = guard.as_ref()
        else {
            // The artifact vanished while we looked.
            return Ok(None);
        };
        let index = index.clone();
        let meta = meta.clone();
        let checked = *checked;
        drop(guard);
        // The artifact differs from the notes where the index took in changes it
        // has not written yet, and where the notes moved on since the index looked.
        let stats = self.note_stats()?;
        let drift = self.drift(&index, checked, &stats);
        let mut changed = self.unpersisted().clone();
        changed.extend(drift.changed.into_iter().map(|(path, _)| path));
        changed.extend(drift.removed);
        let stale = !changed.is_empty();
        Ok(Some(ArtifactStatus {
            notes_changed_since: changed.len(),
            generated_at: meta.generated_at,
            notes_indexed: index.notes_indexed(),
            chunks_indexed: index.chunks_indexed(),
            stale,
            byte_size: meta.byte_size,
            content_bytes: index.content_bytes(),
            notes_commit: meta.notes_commit,
        }))
    }

    /// How many notes are present now, and how many of them are larger than
    /// `MIRAI_MAX_NOTE_BYTES` (never read, so never indexed), for status with
    /// or without an artifact.
    pub fn note_counts(&self) -> Result<(usize, usize)> {
        let stats = self.notes.list_stats()?;
        let limit = self.notes.max_note_bytes();
        let too_large = stats.iter().filter(|(_, bytes, _)| *bytes > limit).count();
        Ok((stats.len(), too_large))
    }

    /// Keeps the index fresh after an apply changed `changes` (each a path
    /// and its new text; `None`: deleted) and committed `commit`: one update
    /// of the index for all of them. When the index came from the artifact,
    /// the artifact is rewritten in the background.
    pub fn notes_changed(
        self: &Arc<Self>,
        changes: &[(&str, Option<&str>)],
        too_large: &[String],
        commit: &str,
    ) {
        let stamp = self.stamp();
        let mut guard = self.write_lock();
        if stamp.is_some() && self.refresh(&mut guard, stamp).is_err() {
            // A corrupt artifact keeps answering invalid_index_artifact until rebuilt;
            // the rebuild will read these notes from disk.
            return;
        }
        let Some(loaded) = guard.as_mut() else { return };
        // Past MIRAI_MAX_NOTE_BYTES: never indexed, and in the link graph a
        // file links reach, with no links of its own read.
        let limit = self.notes.max_note_bytes();
        let index = Arc::make_mut(&mut loaded.index);
        for &(path, content) in changes {
            match content {
                Some(text) if text.len() as u64 <= limit => index.upsert_note(path, text),
                _ => index.remove_note(path),
            }
        }
        for path in too_large {
            index.remove_note(path);
        }
        if let Some(vault) = loaded.vault.as_mut() {
            let vault = Arc::make_mut(vault);
            for &(path, content) in changes {
                match content {
                    Some(text) if text.len() as u64 <= limit => vault.upsert(path, text),
                    Some(_) => vault.upsert(path, ""),
                    None => vault.remove(path),
                }
            }
            for path in too_large {
                vault.upsert(path, "");
            }
        }
        self.changed();
        match &mut loaded.source {
            Source::Artifact { meta, .. } => {
                meta.notes_commit = Some(commit.to_string());
                self.unpersisted().extend(
                    changes
                        .iter()
                        .map(|(path, _)| path.to_string())
                        .chain(too_large.iter().cloned()),
                );
                drop(guard);
                self.schedule_persist();
            }
            Source::OnDemand { .. } => {}
        }
    }

    /// Attachments mirai wrote (`true`) or deleted (`false`): the link graph's
    /// files follow at once, so links resolve to them (they are never indexed).
    pub fn files_changed(&self, files: &[(&str, bool)]) {
        let mut guard = self.write_lock();
        let Some(vault) = guard.as_mut().and_then(|loaded| loaded.vault.as_mut()) else {
            return;
        };
        let vault = Arc::make_mut(vault);
        let mut changed = false;
        for &(path, present) in files {
            changed |= vault.attachment_changed(path, present);
        }
        if changed {
            self.changed();
        }
    }

    /// Keeps the index in step with notes changed outside mirai (a person's
    /// editor, `git pull`, `reset`, a branch switch). The notes folder is
    /// watched (inotify, through `notify`): a change makes the index look
    /// again within [`WATCH_SETTLE`]. Where events do not arrive (bind mounts,
    /// network shares) a metadata walk every `every` finds the same changes.
    /// Either way only the notes that differ are read. The thread ends when the
    /// index is dropped.
    pub fn watch(self: &Arc<Self>, every: Duration, also: AlsoWatched) {
        let weak = Arc::downgrade(self);
        let (tx, rx) = std::sync::mpsc::channel::<Touched>();
        // Folders that appeared and need a watch of their own.
        let (appeared_tx, appeared) = std::sync::mpsc::channel::<std::path::PathBuf>();
        let root = self.notes.root().to_path_buf();
        let handler = move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            // Opening and reading change nothing (and the index's own walks open
            // folders: counting those would start the next walk, forever).
            if event.kind.is_access() {
                return;
            }
            let arrived = matches!(
                event.kind,
                notify::EventKind::Create(_)
                    | notify::EventKind::Modify(notify::event::ModifyKind::Name(_))
            );
            let mut touched = Touched::of(&event, &root);
            if arrived {
                for rel in event
                    .paths
                    .iter()
                    .filter_map(|path| path.strip_prefix(&root).ok())
                    .filter(|rel| folder_to_watch(rel))
                {
                    let _ = appeared_tx.send(rel.to_path_buf());
                    touched.parts |= NEW_FOLDER;
                }
            }
            if touched.parts != 0 {
                let _ = tx.send(touched);
            }
        };
        let root = self.notes.root().to_path_buf();
        std::thread::spawn(move || {
            // A watch per folder takes a while in a large vault: here, not in
            // start-up's way, and after the start-up load, whose first query
            // waits for it (on two cores, the two would share them).
            let started = Instant::now();
            while weak
                .upgrade()
                .is_some_and(|l| l.warming.load(Ordering::Acquire))
                && started.elapsed() < WARM_UP_WAIT
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            let watched = notify::recommended_watcher(handler).and_then(|mut watcher| {
                add_watches(&mut watcher, &root, None)?;
                Ok(watcher)
            });
            // Lives as long as this thread.
            let mut watcher = match watched {
                Ok(watcher) => Some(watcher),
                Err(e) => {
                    log::warn!(
                        "cannot watch the notes folder for changes ({e}); they are found by a walk every {} s instead",
                        every.as_secs()
                    );
                    None
                }
            };
            // What changed while the watches were being set up: an index
            // loaded by now compared the notes before they were all in place.
            if let Some(live) = weak.upgrade() {
                if let Err(e) = live.sync_with_disk() {
                    log::warn!("could not compare the index with the notes: {e}");
                }
            }
            let mut walked = Instant::now();
            let mut period = every;
            loop {
                let mut touched = match rx.recv_timeout(period) {
                    // Let a burst of events (a checkout, a pull) settle, then look once.
                    Ok(first) => {
                        std::thread::sleep(WATCH_SETTLE);
                        rx.try_iter().fold(first, Touched::merge)
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Touched::everything(),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        std::thread::sleep(period);
                        Touched::everything()
                    }
                };
                // Events from one folder must not keep the walk from another
                // whose events do not arrive.
                if walked.elapsed() >= period {
                    touched = touched.merge(Touched::everything());
                }
                let parts = touched.parts;
                if parts & NEW_FOLDER != 0 {
                    let folders: Vec<std::path::PathBuf> = appeared.try_iter().collect();
                    if let Some(watcher) = watcher.as_mut() {
                        let _ = add_watches(watcher, &root, Some(&folders));
                    }
                }
                let Some(live) = weak.upgrade() else { return };
                if parts & NOTES != 0 {
                    let synced = if touched.all_notes {
                        walked = Instant::now();
                        let synced = live.sync_with_disk();
                        period = every.max((walked.elapsed() * WALK_SPACING).min(WALK_AT_MOST));
                        log::debug!("walked the notes in {} ms", walked.elapsed().as_millis());
                        synced
                    } else {
                        live.sync_notes(&touched.named)
                    };
                    if let Err(e) = synced {
                        log::warn!("could not compare the index with the notes: {e}");
                    }
                }
                drop(live);
                if parts & REFS != 0 {
                    (also.refs)();
                }
                if parts & PROPOSALS != 0 {
                    (also.proposals)();
                }
            }
        });
    }

    /// Loads (or builds) the index in the background when none is loaded, so
    /// that outside edits are compared, taken in and told from now on (a
    /// change stream or an MCP subscription opened: someone listens).
    pub fn follow(self: &Arc<Self>) {
        if self.read_lock().is_some() || self.following.swap(true, Ordering::AcqRel) {
            return;
        }
        let live = Arc::clone(self);
        std::thread::spawn(move || {
            if let Err(e) = live.with_index(|_| ()) {
                log::warn!("could not load the index to follow the notes: {e}");
            }
            live.following.store(false, Ordering::Release);
        });
    }

    /// Takes in notes added, changed or deleted on disk since the index last
    /// looked; `true` when anything changed. Nothing is loaded: nothing to do
    /// (the first query builds or loads a fresh index).
    pub fn sync_with_disk(self: &Arc<Self>) -> Result<bool> {
        if self.read_lock().is_none() {
            return Ok(false);
        }
        let started = SystemTime::now();
        let stats = self.note_stats()?;
        let has_vault = self.read_lock().as_ref().is_some_and(|l| l.vault.is_some());
        let attachments = has_vault.then(|| self.notes.list_files());
        self.take_in(&stats, Looked::All(started), attachments)
    }

    /// [`LiveIndex::sync_with_disk`] for the notes at `named` only (file
    /// events named them): each is looked at alone. A name that is a folder
    /// now, or was one the index holds notes under, is walked with the rest.
    pub fn sync_notes(self: &Arc<Self>, named: &BTreeSet<String>) -> Result<bool> {
        let Some(index) = self.read_lock().as_ref().map(|l| Arc::clone(&l.index)) else {
            return Ok(false);
        };
        let mut stats = Vec::with_capacity(named.len());
        for path in named {
            match self.notes.note_stat(path) {
                Some((bytes, modified)) => stats.push(NoteStat {
                    path: path.clone(),
                    bytes,
                    modified,
                }),
                None if index.has_notes_under(path) || self.notes.is_folder(path) => {
                    drop(index);
                    return self.sync_with_disk();
                }
                None => {}
            }
        }
        drop(index);
        self.take_in(&stats, Looked::Named(named), None)
    }

    /// Takes what differs between the index and `stats` into the index (and
    /// the link graph, with `attachments` when they were listed), then tells it.
    fn take_in(
        self: &Arc<Self>,
        stats: &[NoteStat],
        looked: Looked<'_>,
        attachments: Option<Vec<String>>,
    ) -> Result<bool> {
        if let Looked::Named(named) = looked {
            // Most bursts are mirai's own writes, which the index holds
            // already: found under the read lock, so no apply waits for it.
            let guard = self.read_lock();
            let Some(loaded) = guard.as_ref() else {
                return Ok(false);
            };
            let names = named.iter().map(String::as_str);
            if self
                .drift_among(&loaded.index, loaded.checked, stats, names)
                .is_empty()
            {
                return Ok(false);
            }
        }
        let mut guard = self.write_lock();
        let Some(loaded) = guard.as_mut() else {
            return Ok(false);
        };
        let changed = self
            .apply_drift(loaded, stats, looked)
            .and_then(|mut paths| {
                // Still under the index's lock: a note mirai is writing is mirai's change.
                let writing = self.writing_now();
                paths.retain(|p| !writing.contains_key(p));
                (!paths.is_empty()).then_some(paths)
            });
        if let (Some(vault), Some(attachments)) = (loaded.vault.as_mut(), attachments) {
            if vault.attachments_differ(&attachments)
                && Arc::make_mut(vault).set_attachments(attachments)
            {
                // What links resolve to changed: copies made for scoped callers are stale.
                self.changed();
            }
        }
        let from_artifact = matches!(loaded.source, Source::Artifact { .. });
        let notes_indexed = loaded.index.notes_indexed();
        drop(guard);
        let Some(paths) = changed else {
            return Ok(false);
        };
        // Told after the index holds them: a client that searches on the event finds them.
        self.events.publish(
            "notes_changed",
            serde_json::json!({"paths": paths, "source": "outside"}),
            Some(paths.clone()),
        );
        if from_artifact {
            self.events.publish(
                "index",
                serde_json::json!({"stale": true, "notes_indexed": notes_indexed}),
                None,
            );
            self.schedule_persist();
        }
        Ok(true)
    }

    /// What differs between `index`, last compared with the disk at `checked`,
    /// and the notes as `stats` describe them; notes that may differ are read.
    fn drift(&self, index: &Index, checked: SystemTime, stats: &[NoteStat]) -> artifact::Drift {
        self.drift_among(index, checked, stats, index.paths())
    }

    /// [`LiveIndex::drift`] where `stats` describe only the notes in `named`.
    fn drift_among<'a>(
        &self,
        index: &Index,
        checked: SystemTime,
        stats: &[NoteStat],
        named: impl IntoIterator<Item = &'a str>,
    ) -> artifact::Drift {
        // A second of margin: file times may be coarser than the clock.
        let since = checked - Duration::from_secs(1);
        artifact::drift_among(index, since, stats, named, |path| {
            self.notes.read(path).ok().map(|(_, content)| content)
        })
    }

    /// Applies to `loaded` what differs between it and `stats` (taken at
    /// `started`); notes are read here, under the caller's write lock, so a
    /// write by mirai that lands meanwhile is never overtaken by older text.
    /// Answers the paths that changed, sorted (`None`: none).
    fn apply_drift(
        &self,
        loaded: &mut Loaded,
        stats: &[NoteStat],
        looked: Looked<'_>,
    ) -> Option<Vec<String>> {
        let drift = match looked {
            Looked::All(started) => {
                let drift = self.drift(&loaded.index, loaded.checked, stats);
                loaded.checked = started;
                drift
            }
            // The notes not named were not looked at: `checked` stays.
            Looked::Named(named) => self.drift_among(
                &loaded.index,
                loaded.checked,
                stats,
                named.iter().map(String::as_str),
            ),
        };
        if drift.is_empty() {
            return None;
        }
        let mut paths: Vec<String> = drift
            .changed
            .iter()
            .map(|(path, _)| path.clone())
            .chain(drift.removed.iter().cloned())
            .collect();
        paths.sort();
        log::info!(
            "the index took in {} changed and {} removed notes from outside mirai",
            drift.changed.len(),
            drift.removed.len()
        );
        let index = Arc::make_mut(&mut loaded.index);
        for (path, content) in &drift.changed {
            index.upsert_note(path, content);
        }
        for path in &drift.removed {
            index.remove_note(path);
        }
        if let Some(vault) = loaded.vault.as_mut() {
            let vault = Arc::make_mut(vault);
            for (path, content) in &drift.changed {
                vault.upsert(path, content);
            }
            for path in &drift.removed {
                vault.remove(path);
            }
        }
        self.changed();
        if matches!(loaded.source, Source::Artifact { .. }) {
            let mut unpersisted = self.unpersisted();
            unpersisted.extend(drift.changed.into_iter().map(|(path, _)| path));
            unpersisted.extend(drift.removed);
        }
        Some(paths)
    }

    fn unpersisted(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.unpersisted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn schedule_persist(self: &Arc<Self>) {
        self.dirty.store(true, Ordering::Release);
        *self
            .last_change
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
        if self.persist_pending.swap(true, Ordering::AcqRel) {
            return; // a persist is already on its way and will include this change
        }
        let live = Arc::clone(self);
        std::thread::spawn(move || {
            live.wait_for_quiet();
            live.persist_pending.store(false, Ordering::Release);
            if let Err(e) = live.flush() {
                log::warn!("could not persist the index after an apply: {e}");
            }
        });
    }

    /// Sleeps until no apply has come for [`PERSIST_QUIET`], or [`PERSIST_MAX_DELAY`]
    /// passed, and the last persist's spacing is over.
    fn wait_for_quiet(&self) {
        let spaced = *self
            .next_persist
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::thread::sleep(spaced.saturating_duration_since(Instant::now()));
        let started = Instant::now();
        loop {
            let last = *self
                .last_change
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let quiet_for = last.elapsed();
            if quiet_for >= PERSIST_QUIET || started.elapsed() >= PERSIST_MAX_DELAY {
                return;
            }
            std::thread::sleep(PERSIST_QUIET - quiet_for);
        }
    }

    /// Writes applies the artifact does not have yet, now (also at shutdown).
    pub fn flush(&self) -> Result<()> {
        let _one_at_a_time = self
            .persisting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let started = Instant::now();
        let persisted = self.persist();
        *self
            .next_persist
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Instant::now() + started.elapsed() * PERSIST_SPACING;
        persisted
    }

    /// Writes the in-memory index to the artifact, keeping its `generated_at`:
    /// the notes were scanned then, and every change since came through mirai.
    fn persist(&self) -> Result<()> {
        let (index, meta, stamp, written) = {
            let guard = self.read_lock();
            match guard.as_ref() {
                Some(Loaded {
                    index,
                    source: Source::Artifact { meta, stamp },
                    ..
                }) => (
                    index.clone(),
                    meta.clone(),
                    *stamp,
                    self.unpersisted().clone(),
                ),
                _ => return Ok(()),
            }
        };
        if self.stamp() != Some(stamp) {
            return Ok(()); // rewritten or removed by someone else meanwhile: theirs wins
        }
        // Until the new stamp is recorded below, a reader that sees the new
        // file must not take it for another process's and load it back.
        let _own_write = OwnWrite::begin(&self.own_write);
        artifact::write(
            &self.state_for_writing()?,
            &index,
            meta.generated_at,
            meta.notes_commit.as_deref(),
        )?;
        self.unpersisted().retain(|path| !written.contains(path));
        let new_stamp = self.stamp();
        let mut guard = self.write_lock();
        if let (Some(loaded), Some(new_stamp)) = (guard.as_mut(), new_stamp) {
            // The file now holds what we wrote; the index in memory holds that and
            // maybe a later apply, whose own persist is queued behind this one.
            if let Source::Artifact {
                stamp: ours,
                meta: our_meta,
            } = &mut loaded.source
            {
                if *ours == stamp {
                    *ours = new_stamp;
                    our_meta.byte_size = new_stamp.size;
                }
            }
        }
        Ok(())
    }
}

/// Hands memory freed by a dropped index back to the system. glibc's malloc
/// keeps freed memory in the arena of the thread that allocated it (each
/// builder thread and each blocking-pool thread a rebuild runs on has its
/// own), where it would sit unused and grow the process with every rebuild;
/// `malloc_trim` returns the free pages of every arena.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system; it touches no
    // memory in use and is safe to call from any thread at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Filter, Item};
    use crate::index::Fingerprint;
    use serde_json::{json, Value};
    use std::fs;

    fn named(paths: &[&str]) -> BTreeSet<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    fn told(sub: &mut crate::events::Subscription) -> Vec<Value> {
        std::iter::from_fn(|| sub.try_next())
            .map(|item| match item {
                Item::Event(event) => event.data.clone(),
                Item::Reset { reason, .. } => panic!("reset: {reason}"),
            })
            .collect()
    }

    /// The notes file events name are looked at alone and taken in, told as
    /// outside changes; a name that is a folder (or was one the index holds
    /// notes under) is looked at with every note.
    #[test]
    fn named_notes_are_taken_in_alone_and_a_folder_by_a_walk() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::write(root.join("a.md"), "apple\n").unwrap();
        fs::write(root.join("b.md"), "banana\n").unwrap();
        let events = Arc::new(Events::new(100, 4));
        let live = Arc::new(LiveIndex::new(Notes::open(root).unwrap(), events.clone()));
        live.rebuild(None).unwrap();
        let mut sub = events.subscribe(Filter::default());
        let hash = |path: &str| live.current().unwrap().fingerprint(path);

        // Unchanged: nothing taken in, nothing told.
        assert!(!live.sync_notes(&named(&["a.md"])).unwrap());
        // Edited, added, and one edited but not named: only the named change.
        fs::write(root.join("a.md"), "apricot\n").unwrap();
        fs::write(root.join("c.md"), "cherry\n").unwrap();
        fs::write(root.join("b.md"), "blueberry\n").unwrap();
        let b_before = hash("b.md");
        assert!(live.sync_notes(&named(&["a.md", "c.md"])).unwrap());
        assert_eq!(hash("a.md"), Some(Fingerprint::of("apricot\n")));
        assert_eq!(hash("c.md"), Some(Fingerprint::of("cherry\n")));
        assert_eq!(
            hash("b.md"),
            b_before,
            "a note no event named is left to the walk"
        );
        // Deleted.
        fs::remove_file(root.join("c.md")).unwrap();
        assert!(live.sync_notes(&named(&["c.md"])).unwrap());
        assert_eq!(hash("c.md"), None);
        assert_eq!(
            told(&mut sub),
            [
                json!({"paths": ["a.md", "c.md"], "source": "outside"}),
                json!({"stale": true, "notes_indexed": 3}),
                json!({"paths": ["c.md"], "source": "outside"}),
                json!({"stale": true, "notes_indexed": 2}),
            ]
        );

        // A folder with a note's name, moved in: walked, with the rest.
        fs::create_dir(root.join("d.md")).unwrap();
        fs::write(root.join("d.md/inner.md"), "damson\n").unwrap();
        assert!(live.sync_notes(&named(&["d.md"])).unwrap());
        assert_eq!(hash("d.md/inner.md"), Some(Fingerprint::of("damson\n")));
        assert_eq!(hash("b.md"), Some(Fingerprint::of("blueberry\n")));
        // Moved out again: the index held notes under it, so walked again.
        fs::rename(root.join("d.md"), tmp.path().join(".gone")).unwrap();
        assert!(live.sync_notes(&named(&["d.md"])).unwrap());
        assert_eq!(hash("d.md/inner.md"), None);
    }

    /// Events that name notes keep their names; a folder, a file that is not a
    /// note, an overflow or too many names mean every note.
    #[test]
    fn a_burst_names_its_notes_or_asks_for_every_note() {
        let root = std::path::Path::new("/notes");
        let event = |paths: &[&str]| {
            let mut event = notify::Event::new(notify::EventKind::Any);
            for path in paths {
                event = event.add_path(root.join(path));
            }
            event
        };
        let one = Touched::of(&event(&["a/b.md", ".git/HEAD", "a/.tmp-x"]), root);
        assert_eq!(one.parts, NOTES | REFS);
        assert_eq!(one.named, named(&["a/b.md"]));
        assert!(!one.all_notes);
        let folder = Touched::of(&event(&["a"]), root);
        assert!(folder.all_notes);
        let attachment = Touched::of(&event(&["a/img.png"]), root);
        assert!(attachment.all_notes);
        let overflow = Touched::of(&event(&[]).set_flag(notify::event::Flag::Rescan), root);
        assert!(overflow.all_notes);
        assert_eq!(overflow.parts, NOTES | REFS | PROPOSALS);

        let merged = one.merge(Touched::of(&event(&["c.md"]), root));
        assert_eq!(merged.named, named(&["a/b.md", "c.md"]));
        let merged = merged.merge(folder);
        assert!(merged.all_notes && merged.named.is_empty());
        let many = (0..=MAX_NAMED)
            .map(|i| Touched::of(&event(&[&format!("n{i}.md")]), root))
            .fold(Touched::default(), Touched::merge);
        assert!(many.all_notes && many.named.is_empty());
    }
}
