//! Safe note paths: the one function that turns an untrusted path string into
//! a file inside the notes root, or says precisely why it will not.
//!
//! Checks run in a fixed order (DESIGN 7.5): present, not absolute, inside the
//! root (after `..` and symlinks), not hidden, `.md`, exists. Listing uses the
//! same function, so what listing shows can be read and what it hides cannot.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A note path that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotePath {
    /// The requested path, normalized: `/`-separated, no `.`, `..` or empty parts.
    pub rel: String,
    /// Where it lives on disk (under the root; symlinks not resolved).
    pub abs: PathBuf,
}

/// Whether the note must already exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existence {
    MustExist,
    /// For creating a note: everything is checked but existence.
    MayBeMissing,
}

/// Resolves `raw` against `root`, which must already be canonical.
pub fn resolve(root: &Path, raw: &str, existence: Existence) -> Result<NotePath> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid_path(
            "path is required: give a note path relative to the notes root, like ideas/today.md",
        ));
    }
    if trimmed.contains('\0') {
        return Err(Error::invalid_path("path must not contain NUL bytes"));
    }
    if trimmed.contains('\\') {
        return Err(Error::invalid_path(format!(
            "path must not contain backslashes: {trimmed:?} (separate folders with /)"
        )));
    }
    if trimmed.starts_with('/') {
        return Err(Error::invalid_path(format!(
            "absolute paths are not allowed: {trimmed:?} (give a path relative to the notes root)"
        )));
    }

    let rel = normalize(trimmed)?;
    let abs = root.join(&rel);
    check_contained(root, &abs, &rel)?;

    if is_hidden(&rel) {
        return Err(Error::invalid_path(format!(
            "hidden files and folders (names starting with a dot, like .git/ and .mirai/) are not notes: {rel:?}"
        )));
    }
    if !has_note_extension(&rel) {
        return Err(Error::invalid_extension(format!(
            "only .md files are notes: {rel:?}"
        )));
    }

    if existence == Existence::MustExist {
        match std::fs::metadata(&abs) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => return Err(Error::not_found(format!("{rel:?} is a folder, not a note"))),
            Err(_) => return Err(Error::not_found(format!("note not found: {rel:?}"))),
        }
    }
    Ok(NotePath { rel, abs })
}

/// True when the path names a markdown note (`.md`, any case).
pub fn has_note_extension(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel).as_bytes();
    // Bytes, not a str slice: the last three bytes may fall inside a multi-byte character.
    name.len() > 3 && name[name.len() - 3..].eq_ignore_ascii_case(b".md")
}

/// True when any component starts with a dot.
pub fn is_hidden(rel: &str) -> bool {
    rel.split('/').any(|part| part.starts_with('.'))
}

/// Drops `.` and empty components and applies `..`, refusing to climb above the root.
fn normalize(path: &str) -> Result<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(Error::invalid_path(format!(
                        "path escapes the notes root: {path:?}"
                    )));
                }
            }
            _ => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err(Error::invalid_path(format!(
            "path names the notes root itself, not a note: {path:?}"
        )));
    }
    Ok(parts.join("/"))
}

/// Resolves symlinks along `abs` and requires the result to stay inside `root`
/// and to land on a visible note, so a link cannot smuggle out a file that the
/// path rules would refuse by name.
fn check_contained(root: &Path, abs: &Path, rel: &str) -> Result<()> {
    let escapes = || Error::invalid_path(format!("path leads outside the notes root: {rel:?}"));
    let (existing, rest) = deepest_existing(abs).map_err(|_| escapes())?;
    let real = existing.canonicalize().map_err(|_| escapes())?;
    let inside = real.strip_prefix(root).map_err(|_| escapes())?;
    if rest.is_empty() && existing == abs && real != abs {
        // The note itself is (or passes through) a symlink: its target must be a note by our rules too.
        let target = inside.to_string_lossy();
        if target.is_empty() || is_hidden(&target) || !has_note_extension(&target) {
            return Err(Error::invalid_path(format!(
                "{rel:?} is a symlink to something that is not a visible note"
            )));
        }
    } else if !inside.as_os_str().is_empty() && is_hidden(&inside.to_string_lossy()) {
        return Err(Error::invalid_path(format!(
            "{rel:?} leads into a hidden folder"
        )));
    }
    Ok(())
}

/// Splits `abs` into its longest prefix that exists and the components after it.
fn deepest_existing(abs: &Path) -> io::Result<(PathBuf, Vec<std::ffi::OsString>)> {
    let mut current = abs.to_path_buf();
    let mut rest = Vec::new();
    loop {
        match std::fs::symlink_metadata(&current) {
            Ok(_) => {
                rest.reverse();
                return Ok((current, rest));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let name = current.file_name().map(|n| n.to_os_string());
                match (name, current.parent()) {
                    (Some(name), Some(parent)) => {
                        rest.push(name);
                        current = parent.to_path_buf();
                    }
                    _ => return Err(err),
                }
            }
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_drops_dots_and_applies_parent_steps() {
        assert_eq!(normalize("a/./b/../c.md").unwrap(), "a/c.md");
        assert_eq!(normalize("a//b.md").unwrap(), "a/b.md");
        assert!(normalize("../a.md").is_err());
        assert!(normalize("a/../../a.md").is_err());
        assert!(normalize("a/..").is_err());
    }

    #[test]
    fn extension_is_case_insensitive_and_needs_a_name() {
        assert!(has_note_extension("a/b.MD"));
        assert!(has_note_extension("b.md"));
        assert!(!has_note_extension("b.markdown"));
        assert!(!has_note_extension("b.md.txt"));
        assert!(!has_note_extension(".md"));
        assert!(!has_note_extension("¾ìÔËÖÿ"));
        assert!(!has_note_extension("a/Ö"));
        assert!(has_note_extension("日本/料理.md"));
    }

    #[test]
    fn hidden_means_any_component_with_a_leading_dot() {
        assert!(is_hidden(".git/config"));
        assert!(is_hidden("a/.mirai/index.json"));
        assert!(is_hidden(".draft.md"));
        assert!(!is_hidden("a/b.c.md"));
    }
}
