//! The notes folder: listing and reading markdown notes under one root,
//! through the path rules in [`path`].

pub mod overlay;
pub mod path;

use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use crate::error::{Error, Result};
pub use path::{Existence, NotePath};

/// A notes root, canonicalized once so every containment check compares real paths.
#[derive(Debug, Clone)]
pub struct Notes {
    root: PathBuf,
}

impl Notes {
    /// Opens an existing folder as the notes root.
    pub fn open(root: &Path) -> Result<Notes> {
        let root = root.canonicalize().map_err(|e| {
            Error::internal(format!("cannot open notes root {}: {e}", root.display()))
        })?;
        Ok(Notes { root })
    }

    /// The canonical root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks an untrusted path; see [`path::resolve`].
    pub fn resolve(&self, raw: &str, existence: Existence) -> Result<NotePath> {
        path::resolve(&self.root, raw, existence)
    }

    /// Every note, as normalized relative paths sorted by their bytes.
    ///
    /// A file is listed exactly when [`Notes::resolve`] accepts its path and
    /// answers that same path, so listing and reading always agree (symlinks
    /// leading out, hidden folders, names with backslashes, surrounding spaces or
    /// that are not UTF-8 are all left out). Files reached without a symlink
    /// take a cheaper check with the same verdict: the walk cannot leave the root.
    pub fn list(&self) -> Result<Vec<String>> {
        let walker = WalkDir::new(&self.root)
            .follow_links(true)
            .min_depth(1)
            .into_iter()
            .filter_entry(|entry| !entry.file_name().to_string_lossy().starts_with('.'));
        let mut linked_dirs: Vec<PathBuf> = Vec::new();
        let mut notes = Vec::new();
        for entry in walker {
            // Unreadable folders and symlink loops are skipped: they hold nothing we could serve.
            let Ok(entry) = entry else { continue };
            let via_link =
                entry.path_is_symlink() || linked_dirs.iter().any(|d| entry.path().starts_with(d));
            if entry.file_type().is_dir() {
                if via_link {
                    linked_dirs.push(entry.path().to_path_buf());
                }
                continue;
            }
            if !entry.file_type().is_file() {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&self.root) else {
                continue;
            };
            let Some(rel) = rel.to_str() else { continue };
            let plain = rel == rel.trim() && !rel.contains('\\') && path::has_note_extension(rel);
            let listed = if via_link {
                plain
                    && self
                        .resolve(rel, Existence::MustExist)
                        .is_ok_and(|note| note.rel == rel)
            } else {
                plain
            };
            if listed {
                notes.push(rel.to_string());
            }
        }
        notes.sort_unstable();
        notes.dedup();
        Ok(notes)
    }

    /// Reads a note as text. Bytes that are not UTF-8 come back as U+FFFD.
    pub fn read(&self, raw: &str) -> Result<(NotePath, String)> {
        let note = self.resolve(raw, Existence::MustExist)?;
        let bytes = std::fs::read(&note.abs).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::not_found(format!("note not found: {:?}", note.rel))
            }
            _ => Error::internal(format!("cannot read {:?}: {e}", note.rel)),
        })?;
        let content = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
        };
        Ok((note, content))
    }
}
