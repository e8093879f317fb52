//! The notes folder: resolving, listing and reading markdown notes under one
//! root, through the path rules in [`path`] and the root handle in [`root`].
//!
//! Every file operation goes through [`root::Root`], a handle on the root
//! folder that cannot reach outside it (ARCHITECTURE.md, "The root is a wall,
//! not a check"); nothing here opens a note by an absolute path.

pub mod files;
pub mod overlay;
pub mod path;
pub mod root;
pub mod suggest;
pub mod uploads;
pub mod view;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use cap_std::fs::FileType;

use crate::error::{Error, Result};
pub use path::{Existence, NotePath};
use root::{Kind, Real, Refusal, Root, Slot, WalkEnd, WALK_LIMITS};
pub use view::{Hidden, Landing, Seen, View};

/// Default cap on a note's size (`MIRAI_MAX_NOTE_BYTES`): larger notes are
/// never loaded whole, and no write makes a note larger.
pub const DEFAULT_MAX_NOTE_BYTES: usize = 8 * 1024 * 1024;

/// Default cap on a file a pull writes into the working tree
/// (`MIRAI_MAX_FILE_BYTES`): a larger one stays in git and out of the tree.
pub const DEFAULT_MAX_FILE_BYTES: usize = 64 * 1024 * 1024;

/// A notes root, canonicalized and opened once. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Notes {
    root: PathBuf,
    handle: Arc<Root>,
    /// Notes larger than this are never read (`MIRAI_MAX_NOTE_BYTES`).
    max_note_bytes: u64,
    /// Files larger than this are never written from git (`MIRAI_MAX_FILE_BYTES`).
    max_file_bytes: u64,
}

impl Notes {
    /// Opens an existing folder as the notes root.
    pub fn open(root: &Path) -> Result<Notes> {
        let cannot = |e: std::io::Error| {
            Error::internal(format!("cannot open the notes root (NOTES_ROOT): {e}"))
        };
        let root = root.canonicalize().map_err(cannot)?;
        let handle = Root::open(&root).map_err(cannot)?;
        Ok(Notes {
            root,
            handle: Arc::new(handle),
            max_note_bytes: DEFAULT_MAX_NOTE_BYTES as u64,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES as u64,
        })
    }

    /// The same notes, read only up to `bytes` a note (`MIRAI_MAX_NOTE_BYTES`).
    pub fn with_max_note_bytes(mut self, bytes: usize) -> Notes {
        self.max_note_bytes = bytes as u64;
        self
    }

    /// The largest note that is read.
    pub fn max_note_bytes(&self) -> u64 {
        self.max_note_bytes
    }

    /// The same notes, taking files from git (a pull) only up to `bytes`
    /// (`MIRAI_MAX_FILE_BYTES`).
    pub fn with_max_file_bytes(mut self, bytes: usize) -> Notes {
        self.max_file_bytes = bytes as u64;
        self
    }

    /// The largest file a pull writes into the working tree: git's object is
    /// read whole to write it, so this bounds what a remote can make mirai hold.
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// The canonical root folder (for git and the operator's log lines; never
    /// shown to callers, and never used to open a note).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks an untrusted path: the lexical rules, then the path as it is on
    /// disk (symlinks followed inside the root only, to a visible note), then
    /// whether it is hidden, a `.md` file, and exists.
    pub fn resolve(&self, raw: &str, existence: Existence) -> Result<NotePath> {
        let rel = path::lexical(raw)?;
        let real = self
            .handle
            .resolve_links(&rel)
            .map_err(|r| refused(&rel, r))?;
        if real.via_link {
            check_link_target(&rel, &real)?;
        }
        path::check_visible_note(&rel)?;
        match real.kind {
            Kind::Special => {
                return Err(Error::invalid_path(format!(
                    "{rel:?} is not a regular file (a FIFO, socket or device); only regular files are notes"
                )))
            }
            Kind::Folder if existence == Existence::MustExist => {
                return Err(Error::not_found(format!("{rel:?} is a folder, not a note")))
            }
            Kind::Missing if existence == Existence::MustExist => {
                return Err(suggest::missing(&rel))
            }
            _ => {}
        }
        Ok(NotePath {
            rel,
            real: real.path,
            via_link: real.via_link,
        })
    }

    /// Like [`Notes::resolve`], for a note about to be written: it must not be,
    /// or pass through, a symlink (mirai replaces files; it never writes
    /// through a link or turns one into a file).
    pub fn resolve_for_write(&self, raw: &str, existence: Existence) -> Result<NotePath> {
        let note = self.resolve(raw, existence)?;
        let plain = if note.via_link {
            Err(Refusal::Symlink)
        } else {
            self.handle.check_plain(&note.rel)
        };
        plain.map_err(|r| refused(&note.rel, r))?;
        Ok(note)
    }

    /// Every note, as normalized relative paths sorted by their bytes.
    ///
    /// Each real folder is visited once; symlinked folders are not entered
    /// (their notes are listed under their real paths), symlinked notes are
    /// listed when they lead to a visible note inside the root. A file is
    /// listed only when [`Notes::resolve`] would accept its path, so listing
    /// and reading agree.
    pub fn list(&self) -> Result<Vec<String>> {
        Ok(self
            .list_with_targets()?
            .into_iter()
            .map(|(rel, _)| rel)
            .collect())
    }

    /// [`Notes::list`], each symlinked note with the real path it leads to
    /// (`None` for a regular file): what a caller's `read_paths` are checked
    /// against, so a link in a visible folder never shows a hidden note.
    pub fn list_with_targets(&self) -> Result<Vec<(String, Option<String>)>> {
        let mut notes = Vec::new();
        let links = self.walk_notes(|rel, _| notes.push((rel.to_string(), None)));
        notes.extend(links.into_iter().filter_map(|link| {
            let note = self.resolve(&link, Existence::MustExist).ok()?;
            (note.rel == link).then_some((link, Some(note.real)))
        }));
        notes.sort_unstable();
        notes.dedup_by(|a, b| a.0 == b.0);
        Ok(notes)
    }

    /// The symlinked notes in the folders `enter` holds (and the root), each
    /// with the real path it leads to: what a caller reading only those
    /// folders must check beyond its prefixes, found without walking the rest.
    pub fn links_within(&self, enter: impl Fn(&str) -> bool) -> Vec<(String, String)> {
        self.walk_notes_in(enter, |_, _| {})
            .into_iter()
            .filter_map(|link| {
                let note = self.resolve(&link, Existence::MustExist).ok()?;
                (note.rel == link).then_some((link, note.real))
            })
            .collect()
    }

    /// Every note as [`Notes::list`] lists them, with its size and modification
    /// time, in one walk: a regular file is looked at through its folder's
    /// handle (nothing followed, nothing opened), a symlinked note as
    /// [`Notes::stat`] does. A note gone meanwhile is left out.
    pub fn list_stats(&self) -> Result<Vec<(String, u64, SystemTime)>> {
        let mut notes = Vec::new();
        let links = self.walk_notes(|rel, dir| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            let stat = dir.symlink_metadata(name).ok().filter(|m| m.is_file());
            if let Some((meta, modified)) = stat.and_then(|m| Some((m.len(), m.modified().ok()?))) {
                notes.push((rel.to_string(), meta, modified.into_std()));
            }
        });
        for link in self.notes_behind(links) {
            if let Some(meta) = self.stat(&link) {
                if let Ok(modified) = meta.modified() {
                    notes.push((link, meta.len(), modified));
                }
            }
        }
        notes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        notes.dedup_by(|a, b| a.0 == b.0);
        Ok(notes)
    }

    /// The size and modification time of the note at `rel`, as
    /// [`Notes::list_stats`] would list it (`None`: no note there now, or a
    /// path the listing leaves out).
    pub fn note_stat(&self, rel: &str) -> Option<(u64, SystemTime)> {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if !path::is_plain_name(name)
            || rel != rel.trim()
            || !path::has_note_extension(rel)
            || rel.split('/').any(|part| part.starts_with('.'))
        {
            return None;
        }
        // Reached as the walk reaches it: through real folders only.
        let slot = self.existing_slot(rel).ok()??;
        let meta = match slot.stat() {
            Ok(meta) => meta,
            // A symlinked note, listed under its own path (see `notes_behind`).
            Err(Refusal::Symlink) if self.resolve(rel, Existence::MustExist).ok()?.rel == rel => {
                self.stat(rel).filter(std::fs::Metadata::is_file)?
            }
            Err(_) => return None,
        };
        Some((meta.len(), meta.modified().ok()?))
    }

    /// Whether `rel` is a folder, reached through real folders.
    pub fn is_folder(&self, rel: &str) -> bool {
        matches!(self.existing_slot(rel), Ok(Some(slot)) if matches!(slot.stat(), Err(Refusal::Folder)))
    }

    /// Every note with its text, sorted by path: what [`Notes::list`] and then
    /// [`Notes::read`] of each would give, in one walk. A note is opened from
    /// the handle of the folder the walk found it in (never following a
    /// symlink), so reading a vault costs one open per note, not one per
    /// folder on its path. A note deleted meanwhile is left out.
    pub fn read_all(&self) -> Result<Vec<(String, String)>> {
        let mut notes = Vec::new();
        let mut again = Vec::new();
        let links = self.walk_notes(|rel, dir| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            match Root::read_in(dir, name, self.max_note_bytes) {
                Ok(bytes) => notes.push((rel.to_string(), text(bytes))),
                Err(Refusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                // Never loaded: index.status counts it.
                Err(Refusal::TooLarge { .. }) => {}
                // Replaced since the folder was listed (by a link, say): read
                // it the careful way, as a single read would.
                Err(_) => again.push(rel.to_string()),
            }
        });
        again.extend(self.notes_behind(links));
        for rel in again {
            match self.read(&rel) {
                Ok((_, content)) => notes.push((rel, content)),
                Err(e)
                    if matches!(
                        e.code,
                        crate::error::ErrorCode::NotFound | crate::error::ErrorCode::NoteTooLarge
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        notes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        notes.dedup_by(|a, b| a.0 == b.0);
        Ok(notes)
    }

    /// Every visible regular file that is not a note (attachments: images,
    /// PDFs), sorted: what a link may name besides notes. Nothing is opened;
    /// symlinks are not files here.
    pub fn list_files(&self) -> Vec<String> {
        let mut files = Vec::new();
        self.handle
            .walk(WALK_LIMITS, |rel, file_type: FileType, _| {
                let name = rel.rsplit('/').next().unwrap_or(rel);
                if file_type.is_file()
                    && path::is_plain_name(name)
                    && rel == rel.trim()
                    && !path::has_note_extension(rel)
                {
                    files.push(rel.to_string());
                }
            });
        files.sort_unstable();
        files
    }

    /// Walks the real folders and calls `file` with each regular file whose
    /// name makes it a note, and the handle of its folder; answers the
    /// symlinks with note names, for [`Notes::notes_behind`].
    fn walk_notes(&self, file: impl FnMut(&str, &cap_std::fs::Dir)) -> Vec<String> {
        self.walk_notes_in(|_| true, file)
    }

    /// [`Notes::walk_notes`], entering only the folders `enter` holds.
    fn walk_notes_in(
        &self,
        enter: impl Fn(&str) -> bool,
        mut file: impl FnMut(&str, &cap_std::fs::Dir),
    ) -> Vec<String> {
        let mut links = Vec::new();
        let end = self
            .handle
            .walk_pruned(WALK_LIMITS, enter, |rel, file_type: FileType, dir| {
                let name = rel.rsplit('/').next().unwrap_or(rel);
                if !path::is_plain_name(name) || rel != rel.trim() || !path::has_note_extension(rel)
                {
                    return;
                }
                if file_type.is_file() {
                    file(rel, dir);
                } else if file_type.is_symlink() {
                    links.push(rel.to_string());
                }
            });
        match end {
            WalkEnd::Complete => {}
            WalkEnd::TooDeep => log::warn!(
                "listing skipped folders nested deeper than {} levels",
                WALK_LIMITS.max_depth
            ),
            WalkEnd::TooManyEntries => log::warn!(
                "listing stopped after {} entries; notes beyond them are not listed",
                WALK_LIMITS.max_entries
            ),
        }
        links
    }

    /// The symlinks among `links` that lead to a visible note inside the root.
    fn notes_behind(&self, links: Vec<String>) -> impl Iterator<Item = String> + '_ {
        links.into_iter().filter(|link| {
            self.resolve(link, Existence::MustExist)
                .is_ok_and(|note| note.rel == *link)
        })
    }

    /// Reads a note as text. Bytes that are not UTF-8 come back as U+FFFD.
    pub fn read(&self, raw: &str) -> Result<(NotePath, String)> {
        let mut tries = 0;
        let (note, bytes) = loop {
            let note = self.resolve(raw, Existence::MustExist)?;
            match self.handle.read_real(&note.real, self.max_note_bytes) {
                Ok(bytes) => break (note, bytes),
                // A folder on the real path became a link since it was resolved: look again.
                Err(Refusal::Symlink | Refusal::Escapes) if tries < 3 => tries += 1,
                Err(Refusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(suggest::missing(&note.rel))
                }
                Err(r) => return Err(refused(&note.rel, r)),
            }
        };
        Ok((note, text(bytes)))
    }

    /// A resolved note's bytes (`None`: there is no note there now).
    pub fn read_bytes(&self, note: &NotePath) -> Result<Option<Vec<u8>>> {
        match self.handle.read_real(&note.real, self.max_note_bytes) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(Refusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(r) => Err(refused(&note.rel, r)),
        }
    }

    /// The bytes of a regular file at `rel` with no symlink on the way (any
    /// tracked file, not only notes), or `None`.
    pub fn read_plain(&self, rel: &str) -> Option<Vec<u8>> {
        self.handle.read_real(rel, self.max_note_bytes).ok()
    }

    /// The size and modification time of a note (following links inside the root).
    pub fn stat(&self, rel: &str) -> Option<std::fs::Metadata> {
        let real = self.handle.resolve_links(rel).ok()?;
        self.handle.stat_real(&real.path).ok()
    }

    /// mirai's own state folder `.mirai`, through the root handle (a symlink
    /// there is refused, never followed); with `create`, made when missing.
    pub fn state_dir(&self, create: bool) -> Result<Option<cap_std::fs::Dir>> {
        self.handle.state_dir(create).map_err(|e| {
            Error::internal(format!(
                "cannot open .mirai/ (mirai's state folder in the notes root; it must be a real folder, not a symlink): {e}"
            ))
        })
    }

    /// Removes notes' stray temp files, never this process's or a live
    /// one's (see [`Root::remove_note_temps`]); only when no other mirai was
    /// alive. It walks every folder, so start-up runs it in the background.
    pub fn remove_note_temps(&self) -> usize {
        self.handle.remove_note_temps()
    }

    /// Removes `.mirai/`'s stray temp files (see [`Root::remove_state_temps`]);
    /// only when no other mirai is alive.
    pub fn remove_state_temps(&self) -> usize {
        self.handle.remove_state_temps() + self.handle.remove_stale_uploads()
    }

    /// Starts an upload of at most `MIRAI_MAX_FILE_BYTES` into
    /// `.mirai/uploads/` ([`uploads`]); `declared`: the size the sender announced.
    pub fn begin_upload(&self, declared: Option<u64>) -> std::io::Result<uploads::UploadWriter> {
        self.handle.begin_upload(self.max_file_bytes, declared)
    }

    /// The folder of a note for one write, reached without symlinks; with
    /// `create`, missing folders are made.
    pub fn slot(&self, rel: &str, create: bool) -> Result<Slot> {
        self.handle.slot(rel, create).map_err(|r| refused(rel, r))
    }

    /// The folder of a note, when every folder on the way exists (`None`: the
    /// note cannot exist either).
    pub fn existing_slot(&self, rel: &str) -> Result<Option<Slot>> {
        match self.handle.slot(rel, false) {
            Ok(slot) => Ok(Some(slot)),
            Err(Refusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(r) => Err(refused(rel, r)),
        }
    }
}

/// A path that passes through a symlink must land on a visible note by our
/// rules too, so a link cannot smuggle out what the rules refuse by name.
fn check_link_target(rel: &str, real: &Real) -> Result<()> {
    if path::is_hidden(&real.path) {
        return Err(Error::invalid_path(format!(
            "{rel:?} leads into a hidden folder or file"
        )));
    }
    let is_file = matches!(real.kind, Kind::File | Kind::Special);
    if is_file && !path::has_note_extension(&real.path) {
        return Err(Error::invalid_path(format!(
            "{rel:?} is a symlink to something that is not a visible note"
        )));
    }
    Ok(())
}

/// 413 `note_too_large`: the note `rel` (now, or a version of it in git) holds
/// `size` bytes, past `limit` (`MIRAI_MAX_NOTE_BYTES`).
pub fn too_large(rel: &str, size: u64, limit: u64) -> Error {
    Error::new(
        crate::error::ErrorCode::NoteTooLarge,
        format!(
            "{rel:?} is {size} bytes, more than the {limit} bytes a note may hold \
             (MIRAI_MAX_NOTE_BYTES); mirai does not read, index, diff or change notes this \
             large: split it into smaller notes, or raise MIRAI_MAX_NOTE_BYTES"
        ),
    )
}

/// The error a refusal from the root handle becomes, naming the note by its
/// relative path only.
pub fn refused(rel: &str, refusal: Refusal) -> Error {
    match refusal {
        Refusal::Escapes => {
            Error::invalid_path(format!("path leads outside the notes root: {rel:?}"))
        }
        Refusal::Loop => Error::invalid_path(format!(
            "{rel:?} passes through a loop of symlinks (or more than 40 of them)"
        )),
        Refusal::Symlink => Error::invalid_path(format!(
            "{rel:?} is a symlink or passes through one; mirai reads notes through symlinks \
             but never writes through them: write the note at its real path"
        )),
        Refusal::NotRegular => Error::invalid_path(format!(
            "{rel:?} is not a regular file (a FIFO, socket or device); only regular files are notes"
        )),
        Refusal::Raced => Error::conflict(format!(
            "{rel:?} was being renamed while mirai followed it; try again"
        )),
        Refusal::NotAFolder => Error::conflict(format!(
            "a file stands where {rel:?} needs a folder; choose another path"
        )),
        Refusal::Folder => {
            Error::conflict(format!("{rel} is a folder; a note cannot be written there"))
        }
        Refusal::Changed => Error::conflict(format!(
            "{rel} was changed on disk by someone else while mirai was writing it (a save \
             during the write); nothing was written and their version is kept: read the note \
             again and retry"
        )),
        Refusal::TooLarge { size, limit } => too_large(rel, size, limit),
        Refusal::Io(e) => Error::internal(format!("cannot access {rel:?}: {e}")),
    }
}

/// A note's bytes as text: invalid UTF-8 becomes U+FFFD.
fn text(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// One walk gives what listing and then stat-ing each note gives: the same
    /// notes (symlinked ones included, hidden ones and links out left out),
    /// sizes and times.
    #[test]
    fn list_stats_equals_list_then_stat() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(root.join(".hidden")).unwrap();
        fs::write(root.join("top.md"), "top").unwrap();
        fs::write(root.join("a/one.md"), "one!").unwrap();
        fs::write(root.join("a/b/two.MD"), "two two").unwrap();
        fs::write(root.join("a/not-a-note.txt"), "x").unwrap();
        fs::write(root.join(".hidden/h.md"), "h").unwrap();
        fs::write(outside.path().join("out.md"), "out").unwrap();
        std::os::unix::fs::symlink("one.md", root.join("a/link.md")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("out.md"), root.join("escape.md")).unwrap();
        std::os::unix::fs::symlink("a", root.join("folder-link")).unwrap();

        let notes = Notes::open(root).unwrap();
        let listed = notes.list().unwrap();
        assert_eq!(listed, ["a/b/two.MD", "a/link.md", "a/one.md", "top.md"]);
        let want: Vec<(String, u64, SystemTime)> = listed
            .iter()
            .map(|p| {
                let meta = notes.stat(p).unwrap();
                (p.clone(), meta.len(), meta.modified().unwrap())
            })
            .collect();
        assert_eq!(notes.list_stats().unwrap(), want);
        assert_eq!(want[1].1, 4, "a symlinked note has its target's size");
        // One note looked at alone is what the walk lists for it.
        for (path, bytes, modified) in &want {
            assert_eq!(notes.note_stat(path), Some((*bytes, *modified)), "{path}");
        }
        for left_out in [
            ".hidden/h.md",
            "a/not-a-note.txt",
            "escape.md",
            "folder-link/one.md",
            "a",
            "gone.md",
        ] {
            assert_eq!(notes.note_stat(left_out), None, "{left_out}");
        }
        assert!(notes.is_folder("a") && notes.is_folder("a/b"));
        assert!(!notes.is_folder("folder-link") && !notes.is_folder("top.md"));
    }
}
