//! The notes root as a directory handle: the wall every file operation on notes
//! goes through (ARCHITECTURE.md, "The root is a wall, not a check").
//!
//! Nothing here opens a note by its absolute path. Each path component is
//! opened relative to the handle of its parent folder, without following a
//! symlink (cap-std: `openat` with `O_NOFOLLOW`, checked to stay beneath the
//! root), so whatever another process renames or swaps meanwhile, a handle can
//! only ever lead to a file inside the root. Symlinks inside the root are
//! followed for reads by [`Root::resolve_links`], one link at a time, with the
//! links' targets resolved against the root; the real path it finds is then
//! opened the same way, component by component. Only regular files are read:
//! a FIFO, socket or device is never opened for reading (files are opened
//! non-blocking and checked with `fstat` before a byte is read).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, FileType, OpenOptions, OpenOptionsExt};
use rustix::fs::{renameat_with, RenameFlags};
use rustix::io::Errno;

/// What a write expects a file to hold: bytes in memory, or the size and
/// SHA-256 of an upload streamed to disk (never held whole: compared by
/// reading the file through once).
#[derive(Debug, Clone, Copy)]
pub enum Expected<'a> {
    Bytes(&'a [u8]),
    Digest { size: u64, sha256: &'a [u8; 32] },
}

impl<'a> From<&'a [u8]> for Expected<'a> {
    fn from(bytes: &'a [u8]) -> Expected<'a> {
        Expected::Bytes(bytes)
    }
}

/// How many symlinks one lookup may pass through before it is called a loop.
const MAX_LINK_HOPS: usize = 40;

/// Why a path could not be followed.
#[derive(Debug)]
pub enum Refusal {
    /// A symlink on the way leads outside the root.
    Escapes,
    /// Symlinks on the way form a loop (or a chain longer than 40).
    Loop,
    /// A write's path is (or passes through) a symlink.
    Symlink,
    /// The file is not a regular file (a FIFO, socket or device).
    NotRegular,
    /// A write's target is a folder.
    Folder,
    /// A file stands where the path needs a folder (`note.md/x.md`).
    NotAFolder,
    /// The path kept changing while it was followed (renamed under our feet).
    Raced,
    /// A note larger than the read limit (its size, from `fstat`): never read.
    TooLarge { size: u64, limit: u64 },
    /// The note changed on disk while a write was under way (someone saved
    /// it, in place or by rename, or deleted or created it): the write put it
    /// back and left their version in place.
    Changed,
    /// Anything else the file system said.
    Io(io::Error),
}

impl From<io::Error> for Refusal {
    /// cap-std reports a path that would leave the root as `PermissionDenied`
    /// with no OS error behind it (a real `EACCES` carries one).
    fn from(e: io::Error) -> Refusal {
        if e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none() {
            Refusal::Escapes
        } else {
            Refusal::Io(e)
        }
    }
}

/// What a path names, once every symlink on the way is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Missing,
    File,
    Folder,
    /// A FIFO, socket or device: never a note.
    Special,
}

/// Where a path really leads, inside the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Real {
    /// The path with every symlink resolved, `/`-separated, relative to the root.
    pub path: String,
    pub kind: Kind,
    /// Whether a symlink was passed on the way.
    pub via_link: bool,
}

/// The notes root, opened once.
#[derive(Debug)]
pub struct Root {
    dir: Dir,
    /// The root's canonical absolute path: symlinks whose target is absolute
    /// are followed only when the target lies under it.
    canonical: PathBuf,
}

impl Root {
    /// Opens `canonical` (already canonicalized) as the root handle.
    pub fn open(canonical: &Path) -> io::Result<Root> {
        let dir = Dir::open_ambient_dir(canonical, cap_std::ambient_authority())?;
        Ok(Root {
            dir,
            canonical: canonical.to_path_buf(),
        })
    }

    /// Resolves every symlink along `rel` (normalized, `/`-separated), as the
    /// kernel would, but refusing any step that would leave the root. A link
    /// that changes while it is read makes the lookup start again (a few times).
    pub fn resolve_links(&self, rel: &str) -> Result<Real, Refusal> {
        for _ in 0..4 {
            match self.resolve_once(rel) {
                Err(Refusal::Raced) => continue,
                other => return other,
            }
        }
        Err(Refusal::Raced)
    }

    fn resolve_once(&self, rel: &str) -> Result<Real, Refusal> {
        let mut done: Vec<String> = Vec::new();
        let mut todo: VecDeque<String> = rel.split('/').map(str::to_string).collect();
        let mut hops = 0;
        let mut kind = Kind::Folder;
        while let Some(part) = todo.pop_front() {
            match part.as_str() {
                "" | "." => continue,
                ".." => {
                    if done.pop().is_none() {
                        return Err(Refusal::Escapes);
                    }
                    kind = Kind::Folder;
                    continue;
                }
                _ => {}
            }
            done.push(part);
            let here = done.join("/");
            let meta = match self.dir.symlink_metadata(&here) {
                Ok(meta) => meta,
                Err(e) if is_missing(&e) => {
                    done.extend(todo.drain(..));
                    return Ok(Real {
                        path: normalize_parts(&done)?,
                        kind: Kind::Missing,
                        via_link: hops > 0,
                    });
                }
                Err(e) => return Err(e.into()),
            };
            if meta.file_type().is_symlink() {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(Refusal::Loop);
                }
                let target = match self.dir.read_link_contents(&here) {
                    Ok(target) => target,
                    // No longer a link (EINVAL) or gone: it changed since the lstat.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) || is_missing(&e) => {
                        return Err(Refusal::Raced)
                    }
                    Err(e) => return Err(e.into()),
                };
                done.pop();
                let parts = self.link_parts(&target)?;
                if target.is_absolute() {
                    done.clear();
                }
                for part in parts.into_iter().rev() {
                    todo.push_front(part);
                }
                kind = Kind::Folder;
                continue;
            }
            kind = kind_of(meta.file_type());
            if kind != Kind::Folder && !todo.is_empty() {
                // `note.md/x.md`: nothing can be under a file.
                done.extend(todo.drain(..));
                return Ok(Real {
                    path: normalize_parts(&done)?,
                    kind: Kind::Missing,
                    via_link: hops > 0,
                });
            }
        }
        Ok(Real {
            path: done.join("/"),
            kind,
            via_link: hops > 0,
        })
    }

    /// The components of a link's target: relative ones as they are, absolute
    /// ones only when they lie under the root (then relative to it).
    fn link_parts(&self, target: &Path) -> Result<Vec<String>, Refusal> {
        let inside = if target.is_absolute() {
            target
                .strip_prefix(&self.canonical)
                .map_err(|_| Refusal::Escapes)?
        } else {
            target
        };
        let mut parts = Vec::new();
        for component in inside.components() {
            match component {
                Component::Normal(name) => match name.to_str() {
                    Some(name) => parts.push(name.to_string()),
                    // Not UTF-8: no note can be named through it.
                    None => return Err(Refusal::Io(io::ErrorKind::NotFound.into())),
                },
                Component::ParentDir => parts.push("..".to_string()),
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return Err(Refusal::Escapes),
            }
        }
        Ok(parts)
    }

    /// Opens the folder at `parts` (no symlinks on the way), from the root down.
    fn folder(&self, parts: &[&str]) -> Result<Folder<'_>, Refusal> {
        let mut folder = Folder::Root(&self.dir);
        for part in parts {
            let next = folder
                .open_dir_nofollow(part)
                .map_err(|e| refusal_on_the_way(&folder, part, e))?;
            folder = Folder::Sub(next);
        }
        Ok(folder)
    }

    /// The `.mirai` folder (mirai's own state), opened from the root without
    /// following a symlink; with `create`, made when missing. `None`: there is
    /// none (and `create` was false).
    pub fn state_dir(&self, create: bool) -> io::Result<Option<Dir>> {
        Ok(open_folder(&self.dir, ".mirai", create)?.map(|(dir, _)| dir))
    }

    /// Reads the regular file at `real`, a path with no symlinks on it (as
    /// [`Root::resolve_links`] answers), if it holds at most `limit` bytes. A
    /// symlink swapped in meanwhile makes this fail rather than follow it.
    pub fn read_real(&self, real: &str, limit: u64) -> Result<Vec<u8>, Refusal> {
        let (parents, name) = split(real);
        let dir = self.folder(&parents)?;
        let file = open_regular(&dir, name)?;
        read_all(file, limit)
    }

    /// Reads the regular file `name` in `dir`, a folder handle a [`Root::walk`]
    /// gave, without following a symlink, if it holds at most `limit` bytes.
    pub fn read_in(dir: &Dir, name: &str, limit: u64) -> Result<Vec<u8>, Refusal> {
        read_all(open_regular(dir, name)?, limit)
    }

    /// The metadata of the regular file at `real` (no symlinks on the way).
    pub fn stat_real(&self, real: &str) -> Result<std::fs::Metadata, Refusal> {
        let (parents, name) = split(real);
        let dir = self.folder(&parents)?;
        let file = open_regular(&dir, name)?;
        Ok(file.into_std().metadata()?)
    }

    /// Checks that `rel` could be written without passing a symlink: each
    /// folder on the way is a real folder or missing, and the note itself is
    /// missing or a regular file.
    pub fn check_plain(&self, rel: &str) -> Result<(), Refusal> {
        let (parents, name) = split(rel);
        let mut dir = Folder::Root(&self.dir);
        for part in parents {
            match dir.open_dir_nofollow(part) {
                Ok(next) => dir = Folder::Sub(next),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(refusal_on_the_way(&dir, part, e)),
            }
        }
        match dir.symlink_metadata(name) {
            Ok(meta) => match kind_of(meta.file_type()) {
                _ if meta.file_type().is_symlink() => Err(Refusal::Symlink),
                Kind::Special => Err(Refusal::NotRegular),
                _ => Ok(()),
            },
            Err(e) if is_missing(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The folder of `rel` for a write, reached without following a symlink;
    /// with `create`, missing folders are made (and remembered, so a failed
    /// write can remove exactly those).
    pub fn slot(&self, rel: &str, create: bool) -> Result<Slot, Refusal> {
        let (parents, name) = split(rel);
        let mut dir = Folder::Root(&self.dir);
        let mut created = Vec::new();
        for part in parents {
            let next = match open_folder(&dir, part, create) {
                Ok(Some((next, made))) => {
                    if made {
                        created.push((dir.try_clone()?, part.to_string()));
                    }
                    next
                }
                opened => {
                    let refusal = match opened {
                        Err(e) => refusal_on_the_way(&dir, part, e),
                        _ => Refusal::Io(io::ErrorKind::NotFound.into()),
                    };
                    created.reverse();
                    remove_created(&created);
                    return Err(refusal);
                }
            };
            dir = Folder::Sub(next);
        }
        created.reverse();
        Ok(Slot {
            dir: dir.into_owned()?,
            name: name.to_string(),
            created,
        })
    }

    /// Lists the root's real folders (each once: symlinked folders are not
    /// entered) and calls `visit` with each entry's relative path and type and
    /// the handle of the folder it is in, skipping hidden names. Depth and the
    /// number of entries are bounded.
    pub fn walk(&self, limits: WalkLimits, visit: impl FnMut(&str, FileType, &Dir)) -> WalkEnd {
        self.walk_pruned(limits, |_| true, visit)
    }

    /// [`Root::walk`], entering only the folders `enter` holds (their
    /// relative paths); the others are still visited, not listed.
    pub fn walk_pruned(
        &self,
        limits: WalkLimits,
        enter: impl Fn(&str) -> bool,
        mut visit: impl FnMut(&str, FileType, &Dir),
    ) -> WalkEnd {
        let Ok(root) = self.dir.try_clone() else {
            return WalkEnd::Complete;
        };
        let mut stack = vec![(root, String::new(), 0usize)];
        let mut seen = 0usize;
        let mut end = WalkEnd::Complete;
        while let Some((dir, prefix, depth)) = stack.pop() {
            let Ok(entries) = dir.entries() else { continue };
            let mut names: Vec<(String, FileType)> = entries
                .filter_map(|entry| {
                    let entry = entry.ok()?;
                    let name = entry.file_name().into_string().ok()?;
                    let file_type = entry.file_type().ok()?;
                    (!name.starts_with('.')).then_some((name, file_type))
                })
                .collect();
            names.sort_unstable_by(|a, b| b.0.cmp(&a.0));
            for (name, file_type) in names {
                seen += 1;
                if seen > limits.max_entries {
                    return WalkEnd::TooManyEntries;
                }
                let rel = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}/{name}")
                };
                if file_type.is_dir() && enter(&rel) {
                    if depth + 1 >= limits.max_depth {
                        end = WalkEnd::TooDeep;
                        continue;
                    }
                    if let Ok(sub) = dir.open_dir_nofollow(&name) {
                        stack.push((sub, rel.clone(), depth + 1));
                    }
                }
                visit(&rel, file_type, &dir);
            }
        }
        end
    }
}

impl Root {
    /// Removes notes' stray temp files, `.mirai-<pid>-<n>.tmp`, in the root and
    /// every real folder under it (hidden folders are not entered), but never
    /// one of this process or of a process alive: a sweep may run beside this
    /// process's writes (only start it when no other mirai was alive). Answers
    /// how many went.
    pub fn remove_note_temps(&self) -> usize {
        let mut folders = vec![String::new()];
        self.walk(WALK_LIMITS, |rel, file_type, _| {
            if file_type.is_dir() {
                folders.push(rel.to_string());
            }
        });
        let own = std::process::id();
        let stray = |name: &str| note_temp_pid(name).is_some_and(|pid| pid != own && !alive(pid));
        let mut removed = 0;
        for folder in folders {
            let parts: Vec<&str> = folder.split('/').filter(|p| !p.is_empty()).collect();
            if let Ok(dir) = self.folder(&parts) {
                removed += remove_matching(&dir, stray);
            }
        }
        removed
    }

    /// Removes the stray temp files of `.mirai/`'s index, vector and
    /// replay-map files and of its proposals (only call this when no other
    /// mirai is alive). Answers how many went.
    pub fn remove_state_temps(&self) -> usize {
        let mut removed = 0;
        if let Ok(Some(state)) = self.state_dir(false) {
            removed += remove_matching(&state, |name| {
                name.starts_with("index.json.tmp-")
                    || name.starts_with("index.bin.tmp-")
                    || name.starts_with("vectors.bin.tmp-")
                    || name.starts_with("replayed.json.tmp-")
            });
            // A proposal being saved: `<id>.json.tmp-*` (crate::durable's names).
            if let Ok(Some((proposals, _))) = open_folder(&state, "proposals", false) {
                removed += remove_matching(&proposals, |name| name.contains(".json.tmp-"));
            }
        }
        removed
    }
}

/// Whether process `pid` is alive (one of another user's counts as alive).
fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// How deep a walk of the notes goes, and how many entries it looks at, at
/// most (listing and the temp-file sweep alike).
pub const WALK_LIMITS: WalkLimits = WalkLimits {
    max_depth: 64,
    max_entries: 1_000_000,
};

/// The pid in `.mirai-<pid>-<n>.tmp`, as [`Slot::write`] names its temp
/// files; `None` for any other name.
fn note_temp_pid(name: &str) -> Option<u32> {
    let middle = name.strip_prefix(TEMP_PREFIX)?.strip_suffix(".tmp")?;
    let (pid, n) = middle.split_once('-')?;
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(n) {
        return None;
    }
    // Digits beyond u32 are no pid of ours, but still mirai's name.
    Some(pid.parse().unwrap_or(u32::MAX))
}

/// The mode a new note gets from `open` (0644 less the process's umask),
/// for a file made elsewhere (an upload, private while it arrived) that
/// becomes one: read once from `/proc/self/status`, since asking `umask(2)`
/// means changing it; 022 where that line is missing.
fn new_file_mode() -> u32 {
    static MODE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| {
        let umask = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
                u32::from_str_radix(line.trim(), 8).ok()
            })
            .unwrap_or(0o022);
        0o644 & !umask
    })
}

/// Removes the regular files in `dir` whose names `matches`; answers how many.
pub(super) fn remove_matching(dir: &Dir, matches: impl Fn(&str) -> bool) -> usize {
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if regular && matches(&name) && dir.remove_file(&name).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Bounds on one listing.
#[derive(Debug, Clone, Copy)]
pub struct WalkLimits {
    pub max_depth: usize,
    pub max_entries: usize,
}

/// How a listing ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkEnd {
    Complete,
    /// Folders deeper than the bound were skipped.
    TooDeep,
    /// The walk stopped at the bound on entries.
    TooManyEntries,
}

/// A note's folder, open for one write, and the note's name in it.
#[derive(Debug)]
pub struct Slot {
    dir: Dir,
    name: String,
    /// Folders made for this write, deepest first, as (parent, name).
    created: Vec<(Dir, String)>,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A note's next bytes in a temp file beside it, not yet renamed into place.
#[derive(Debug)]
pub struct Prepared {
    temp: String,
    file: std::fs::File,
}

impl Prepared {
    /// The temp file's metadata (the note's permissions, its new size).
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        self.file.metadata()
    }
}

/// The prefix of mirai's temporary files in the notes folder (hidden, so never
/// listed; short, so a note name of any allowed length still fits beside it).
pub const TEMP_PREFIX: &str = ".mirai-";

impl Slot {
    /// The note's bytes now (`None`: no note there). A symlink or a special
    /// file at the note's name is refused, never followed or opened.
    pub fn read(&self) -> Result<Option<Vec<u8>>, Refusal> {
        match self.dir.symlink_metadata(&self.name) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(Refusal::Symlink),
            Ok(meta) if meta.is_dir() => return Err(Refusal::Folder),
            Ok(_) => {}
            Err(e) if is_missing(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let file = open_regular(&self.dir, &self.name)?;
        // A write's own read-back and restore: the whole note, whatever its size.
        read_all(file, u64::MAX).map(Some)
    }

    /// The metadata of the note, a regular file (for git's index entry).
    pub fn stat(&self) -> Result<std::fs::Metadata, Refusal> {
        let file = open_regular(&self.dir, &self.name)?;
        Ok(file.into_std().metadata()?)
    }

    /// Replaces the note with `bytes` through a temp file in the same folder and
    /// a rename, so readers see the old note or the new one, never half of
    /// either; an existing note keeps its permissions. Answers the new file's
    /// metadata (taken after the rename, as git would stat it). No fsync: this
    /// guards against torn reads and the death of the process, not power loss.
    pub fn write(&self, bytes: &[u8]) -> io::Result<std::fs::Metadata> {
        let prepared = self.prepare(bytes)?;
        self.install(prepared)
    }

    /// Writes `bytes` into a temp file beside the note (with the note's
    /// permissions when it exists) and leaves the note as it is: everything a
    /// write needs space for happens here, so [`Slot::install`] needs none.
    pub fn prepare(&self, bytes: &[u8]) -> io::Result<Prepared> {
        let keep = match self.dir.symlink_metadata(&self.name) {
            Ok(meta) if meta.is_file() => Some(meta.permissions()),
            _ => None,
        };
        let temp = temp_name();
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create_new(true)
            .follow(FollowSymlinks::No)
            .mode(0o644);
        let mut file = self.dir.open_with(&temp, &options)?;
        let written = (|| {
            file.write_all(bytes)?;
            if let Some(permissions) = keep {
                file.set_permissions(permissions)?;
            }
            Ok(())
        })();
        match written {
            Ok(()) => Ok(Prepared {
                temp,
                file: file.into_std(),
            }),
            Err(e) => {
                let _ = self.dir.remove_file(&temp);
                Err(e)
            }
        }
    }

    /// [`Slot::prepare`] of a file made elsewhere: `place` puts it beside
    /// the note under the temp name it is given (an upload's file renamed
    /// there: no byte copied) and answers it open; it gets the note's
    /// permissions when the note exists.
    pub fn prepare_with(
        &self,
        place: impl FnOnce(&Dir, &str) -> io::Result<std::fs::File>,
    ) -> io::Result<Prepared> {
        let keep = match self.dir.symlink_metadata(&self.name) {
            Ok(meta) if meta.is_file() => Some(meta.permissions()),
            _ => None,
        };
        let temp = temp_name();
        let file = place(&self.dir, &temp)?;
        let permissions = match keep {
            Some(permissions) => permissions.into_std(&file),
            None => Ok(std::os::unix::fs::PermissionsExt::from_mode(new_file_mode())),
        };
        match permissions.and_then(|permissions| file.set_permissions(permissions)) {
            Ok(()) => Ok(Prepared { temp, file }),
            Err(e) => {
                let _ = self.dir.remove_file(&temp);
                Err(e)
            }
        }
    }

    /// Renames a prepared temp file over the note (no new space needed) and
    /// answers the note's metadata after the rename.
    pub fn install(&self, prepared: Prepared) -> io::Result<std::fs::Metadata> {
        let Prepared { temp, file } = prepared;
        match self.dir.rename(&temp, &self.dir, &self.name) {
            Ok(()) => file.metadata(),
            Err(e) => {
                let _ = self.dir.remove_file(&temp);
                Err(e)
            }
        }
    }

    /// Puts `prepared` in the note's place only if the note still holds
    /// `expected` (`None`: there is still no note), closing the window
    /// between reading a note and replacing it: the two files are swapped in
    /// one step (`renameat2(RENAME_EXCHANGE)`), what came out is compared
    /// with `expected` byte for byte, and on any difference they are swapped
    /// back, so a save made before the swap, in place or by rename (a new
    /// inode), is never overwritten ([`Refusal::Changed`]; the temp file is
    /// removed). A note created meanwhile is never replaced (a new note is
    /// renamed in with `RENAME_NOREPLACE`). Answers the new file's metadata.
    pub fn install_checked(
        &self,
        prepared: Prepared,
        expected: Option<Expected<'_>>,
    ) -> Result<std::fs::Metadata, Refusal> {
        let Prepared { temp, file } = prepared;
        let swapped = match expected {
            Some(expected) => self.swap_in(&self.dir, &temp, expected),
            None => rename_new(&self.dir, &temp, &self.dir, &self.name),
        };
        match swapped {
            Ok(()) => Ok(file.metadata()?),
            Err(refusal) => {
                let _ = self.dir.remove_file(&temp);
                Err(refusal)
            }
        }
    }

    /// Swaps the file `ours` (in `from`) with the note and keeps the swap
    /// only when what came out holds `expected`: the old file is then removed
    /// under `ours`'s name. Otherwise the swap is undone and the note, which
    /// someone changed, stays as they left it.
    fn swap_in(&self, from: &Dir, ours: &str, expected: Expected<'_>) -> Result<(), Refusal> {
        match renameat_with(from, ours, &self.dir, &self.name, RenameFlags::EXCHANGE) {
            Ok(()) => {}
            // The note is gone: someone deleted or moved it.
            Err(e) if e == Errno::NOENT => return Err(Refusal::Changed),
            Err(e) if exchange_unsupported(e) => {
                // A file system without the atomic swap: compare, then rename
                // (a window of one comparison rather than none).
                if !holds(&self.dir, &self.name, expected) {
                    return Err(Refusal::Changed);
                }
                return Ok(from.rename(ours, &self.dir, &self.name)?);
            }
            Err(e) => return Err(Refusal::Io(e.into())),
        }
        if holds(from, ours, expected) {
            let _ = from.remove_file(ours);
            return Ok(());
        }
        match renameat_with(from, ours, &self.dir, &self.name, RenameFlags::EXCHANGE) {
            Ok(()) => Err(Refusal::Changed),
            Err(e) => Err(Refusal::Io(io::Error::other(format!(
                "the note changed during the write, and putting the changed version back \
                 failed ({e}); it is kept as {ours} beside the note"
            )))),
        }
    }

    /// Deletes the note only if it still holds `expected`: it is renamed
    /// aside in one step, compared, and renamed back on any difference
    /// ([`Refusal::Changed`]). A symlink, folder or special file at the
    /// note's name is refused, never removed.
    pub fn remove_checked(&self, expected: Expected<'_>) -> Result<(), Refusal> {
        self.check_removable()?;
        let aside = temp_name();
        match rename_new(&self.dir, &self.name, &self.dir, &aside) {
            Ok(()) => {}
            Err(Refusal::Io(e)) if is_missing(&e) => return Err(Refusal::Changed),
            Err(refusal) => return Err(refusal),
        }
        if holds(&self.dir, &aside, expected) {
            let _ = self.dir.remove_file(&aside);
            return Ok(());
        }
        match rename_new(&self.dir, &aside, &self.dir, &self.name) {
            Ok(()) => Err(Refusal::Changed),
            Err(_) => Err(Refusal::Io(io::Error::other(format!(
                "the note changed during the write and a new file took its name meanwhile; \
                 the changed version is kept as {aside} beside it"
            )))),
        }
    }

    /// A failed write's undo of one note, without taking anyone's save: the
    /// old version `name` in `from` (a hard link) goes back in the note's
    /// place only while the note still holds `installed`, what the write put
    /// there (`None`: the write deleted it, and the old version comes back
    /// only while no new file took the name). Answers whether it went back;
    /// when it did not, the note keeps what someone saved over the write, and
    /// the old version stays at `name` for the caller to release.
    pub fn take_back_checked(
        &self,
        from: &Dir,
        name: &str,
        installed: Option<Expected<'_>>,
    ) -> io::Result<bool> {
        let done = match installed {
            Some(installed) => self.swap_in(from, name, installed),
            None => rename_new(from, name, &self.dir, &self.name),
        };
        went_back(done)
    }

    /// Removes a prepared temp file that will not be installed.
    pub fn discard(&self, prepared: Prepared) {
        let _ = self.dir.remove_file(&prepared.temp);
    }

    /// Deletes the note (a regular file; anything else is refused).
    pub fn remove(&self) -> Result<(), Refusal> {
        self.check_removable()?;
        Ok(self.dir.remove_file(&self.name)?)
    }

    /// Whether the note's name holds a regular file (the only kind of file
    /// a write deletes).
    fn check_removable(&self) -> Result<(), Refusal> {
        match self.dir.symlink_metadata(&self.name) {
            Ok(meta) if meta.file_type().is_symlink() => Err(Refusal::Symlink),
            Ok(meta) if meta.is_dir() => Err(Refusal::Folder),
            Ok(meta) if !meta.is_file() => Err(Refusal::NotRegular),
            Ok(_) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Hard-links the note (not following a symlink) into `into` as `name`,
    /// so replacing or removing it frees nothing (`repo`'s deferred release).
    pub fn link_into(&self, into: &Dir, name: &str) -> io::Result<()> {
        self.dir.hard_link(&self.name, into, name)
    }

    /// Puts the note back as it was (`before`'s bytes, or no file) while it
    /// still holds `installed`, what a failed write put there (`None`: it
    /// deleted the note); a save someone made over the write is kept.
    /// Answers whether the note went back.
    pub fn restore_checked(
        &self,
        before: Option<&[u8]>,
        installed: Option<Expected<'_>>,
    ) -> io::Result<bool> {
        let done = match (before, installed) {
            (Some(bytes), installed) => {
                let prepared = self.prepare(bytes)?;
                self.install_checked(prepared, installed).map(|_| ())
            }
            (None, Some(installed)) => self.remove_checked(installed),
            (None, None) => Ok(()),
        };
        went_back(done)
    }

    /// Whether a folder (not a symlink to one) stands at the note's name.
    pub fn holds_folder(&self) -> bool {
        self.dir
            .symlink_metadata(&self.name)
            .is_ok_and(|meta| meta.is_dir())
    }

    /// How many files (anything but a folder: regular files, symlinks,
    /// special files) the folder at the note's name holds, at any depth,
    /// counted without following a symlink; `None` past `limit` entries.
    pub fn files_in_folder(&self, limit: usize) -> io::Result<Option<usize>> {
        let folder = self.dir.open_dir_nofollow(&self.name)?;
        let (mut files, mut seen) = (0, 0);
        let mut pending = vec![folder];
        while let Some(dir) = pending.pop() {
            for entry in dir.entries()? {
                let entry = entry?;
                seen += 1;
                if seen > limit {
                    return Ok(None);
                }
                if entry.file_type()?.is_dir() {
                    pending.push(dir.open_dir_nofollow(entry.file_name())?);
                } else {
                    files += 1;
                }
            }
        }
        Ok(Some(files))
    }

    /// Removes the folder at the note's name when it holds folders alone (a
    /// file whose folder a pull makes a file again: its files were removed
    /// first); any file left in it stops this, and nothing of it is removed
    /// but empty folders.
    pub fn remove_empty_folder(&self) -> io::Result<()> {
        fn empty_out(dir: &Dir) -> io::Result<()> {
            for entry in dir.entries()? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    let name = entry.file_name();
                    empty_out(&dir.open_dir_nofollow(&name)?)?;
                    dir.remove_dir(&name)?;
                }
            }
            Ok(())
        }
        empty_out(&self.dir.open_dir_nofollow(&self.name)?)?;
        self.dir.remove_dir(&self.name)
    }

    /// Removes the folders this write made, if they are still empty.
    pub fn remove_created_folders(&self) {
        remove_created(&self.created);
    }
}

/// A fresh name for a temp file beside a note (the start-up sweep knows its
/// form: [`TEMP_PREFIX`], the process id, a counter).
fn temp_name() -> String {
    format!(
        "{TEMP_PREFIX}{}-{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Renames `from`/`old` to `to`/`new` unless `new` exists
/// (`RENAME_NOREPLACE`: [`Refusal::Changed`] when it does). Where the file
/// system lacks the flag, the name is checked first, then renamed.
fn rename_new(from: &Dir, old: &str, to: &Dir, new: &str) -> Result<(), Refusal> {
    match renameat_with(from, old, to, new, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if e == Errno::EXIST => Err(Refusal::Changed),
        Err(e) if exchange_unsupported(e) => match to.symlink_metadata(new) {
            Ok(_) => Err(Refusal::Changed),
            Err(missing) if is_missing(&missing) => Ok(from.rename(old, to, new)?),
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(Refusal::Io(e.into())),
    }
}

/// An undo's step as its caller sees it: done (`true`), or not done because
/// someone changed the note meanwhile (`false`), or an I/O failure.
fn went_back(done: Result<(), Refusal>) -> io::Result<bool> {
    match done {
        Ok(()) => Ok(true),
        Err(Refusal::Changed) => Ok(false),
        Err(Refusal::Io(e)) => Err(e),
        Err(other) => Err(io::Error::other(format!("{other:?}"))),
    }
}

/// Whether `renameat2` refused a flag this file system does not support.
fn exchange_unsupported(e: Errno) -> bool {
    e == Errno::INVAL || e == Errno::NOSYS || e == Errno::NOTSUP
}

/// Whether `name` in `dir` is a regular file holding exactly `expected`
/// (read no further than one byte past it; a digest's file is read through
/// in pieces, never whole).
fn holds(dir: &Dir, name: &str, expected: Expected<'_>) -> bool {
    match expected {
        Expected::Bytes(expected) => open_regular(dir, name)
            .and_then(|file| read_all(file, expected.len() as u64))
            .is_ok_and(|bytes| bytes == expected),
        Expected::Digest { size, sha256 } => open_regular(dir, name)
            .map_err(|_| ())
            .and_then(|file| {
                let file = file.into_std();
                if file.metadata().map_err(|_| ())?.len() != size {
                    return Err(());
                }
                sha256_of(file.take(size.saturating_add(1))).map_err(|_| ())
            })
            .is_ok_and(|(read, digest)| read == size && &digest == sha256),
    }
}

/// The SHA-256 of everything `reader` gives, and how many bytes that was,
/// read in pieces of 64 KiB.
pub fn sha256_of(mut reader: impl Read) -> io::Result<(u64, [u8; 32])> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buffer[..n]);
                total += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((total, hasher.finalize().into()))
}

/// Removes `created` (parent, name), deepest first, each only if still empty:
/// anything someone else put there stays.
fn remove_created(created: &[(Dir, String)]) {
    for (parent, name) in created {
        let _ = parent.remove_dir(name);
    }
}

/// A folder reached from the root: the root's own handle (borrowed, not
/// duplicated) or a folder opened beneath it.
enum Folder<'a> {
    Root(&'a Dir),
    Sub(Dir),
}

impl Folder<'_> {
    /// A handle of one's own (the root's is duplicated).
    fn into_owned(self) -> io::Result<Dir> {
        match self {
            Folder::Root(dir) => dir.try_clone(),
            Folder::Sub(dir) => Ok(dir),
        }
    }
}

impl std::ops::Deref for Folder<'_> {
    type Target = Dir;

    fn deref(&self) -> &Dir {
        match self {
            Folder::Root(dir) => dir,
            Folder::Sub(dir) => dir,
        }
    }
}

/// Opens the folder `name` in `dir` without following a symlink; with
/// `create`, makes it first when it is missing (one someone made meanwhile is
/// used as it is). `None`: missing, and `create` is false. The flag says
/// whether this call made it.
pub fn open_folder(dir: &Dir, name: &str, create: bool) -> io::Result<Option<(Dir, bool)>> {
    match dir.open_dir_nofollow(name) {
        Ok(folder) => Ok(Some((folder, false))),
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
            let made = match dir.create_dir(name) {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(e),
            };
            dir.open_dir_nofollow(name)
                .map(|folder| Some((folder, made)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens `name` in `dir` for reading without following a symlink and without
/// blocking (a FIFO would otherwise hang), and only if it is a regular file.
/// Opens the regular file `name` in `dir` (a folder of mirai's state) for
/// reading, without following a symlink; anything but a regular file is refused.
pub fn open_regular_in(dir: &Dir, name: &str) -> Result<std::fs::File, Refusal> {
    open_regular(dir, name).map(File::into_std)
}

fn open_regular(dir: &Dir, name: &str) -> Result<File, Refusal> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .follow(FollowSymlinks::No)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    let file = dir.open_with(name, &options).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            Refusal::Symlink
        } else {
            e.into()
        }
    })?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(Refusal::Folder);
    }
    if !meta.is_file() {
        return Err(Refusal::NotRegular);
    }
    Ok(file)
}

/// The file's bytes, refused from its size before any is read when it holds
/// more than `limit` (and, should it grow meanwhile, at `limit` + 1 bytes).
fn read_all(file: File, limit: u64) -> Result<Vec<u8>, Refusal> {
    let file = file.into_std();
    let size = file.metadata()?.len();
    if size > limit {
        return Err(Refusal::TooLarge { size, limit });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(Refusal::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

fn kind_of(file_type: FileType) -> Kind {
    if file_type.is_file() {
        Kind::File
    } else if file_type.is_dir() {
        Kind::Folder
    } else {
        Kind::Special
    }
}

/// Why a folder on the way could not be opened without following a link:
/// it is a symlink, a file, leads outside, or something else went wrong.
fn refusal_on_the_way(dir: &Dir, part: &str, e: io::Error) -> Refusal {
    if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) {
        return match dir.symlink_metadata(part) {
            Ok(meta) if meta.file_type().is_symlink() => Refusal::Symlink,
            Ok(meta) if !meta.is_dir() => Refusal::NotAFolder,
            // It changed again since: a folder now, or gone.
            _ => Refusal::Raced,
        };
    }
    e.into()
}

/// Missing, or something on the way is not a folder.
fn is_missing(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

fn split(rel: &str) -> (Vec<&str>, &str) {
    let mut parts: Vec<&str> = rel.split('/').collect();
    let name = parts.pop().unwrap_or("");
    (parts, name)
}

/// Applies `..` left in a path after a missing component (`missing/../x`).
fn normalize_parts(parts: &[String]) -> Result<String, Refusal> {
    let mut out: Vec<&str> = Vec::new();
    for part in parts {
        match part.as_str() {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Err(Refusal::Escapes);
                }
            }
            name => out.push(name),
        }
    }
    Ok(out.join("/"))
}
