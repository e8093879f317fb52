//! Note path rules that need no disk: the untrusted path string becomes a
//! normalized relative path, or a precise refusal.
//!
//! Checks run in a fixed order (ARCHITECTURE.md, "Paths"): present, not
//! absolute, inside the root, not hidden, `.md`, exists. This file does the
//! lexical part (and the name rules listing shares); `notes/mod.rs` follows the
//! path on disk through the root handle ([`super::root`]) for symlinks and
//! existence.

use crate::error::{Error, Result};

/// The longest name of one file or folder (Linux's `NAME_MAX`, in bytes).
pub const MAX_NAME_BYTES: usize = 255;

/// The longest note path, in bytes (Linux's `PATH_MAX` less room for the root).
pub const MAX_PATH_BYTES: usize = 3072;

/// A note path that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotePath {
    /// The requested path, normalized: `/`-separated, no `.`, `..` or empty parts.
    pub rel: String,
    /// Where it really is: `rel` with every symlink on the way resolved (inside the root).
    pub real: String,
    /// Whether `rel` passes through a symlink (then mirai reads it but never writes it).
    pub via_link: bool,
}

/// Whether the note must already exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existence {
    MustExist,
    /// For creating a note: everything is checked but existence.
    MayBeMissing,
}

/// The lexical checks, in order: present, no NUL or control characters, no
/// backslashes, not absolute, no `..` above the root, names the file system can hold.
pub fn lexical(raw: &str) -> Result<String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid_path(
            "path is required: give a note path relative to the notes root, like ideas/today.md",
        ));
    }
    if trimmed.contains('\0') {
        return Err(Error::invalid_path("path must not contain NUL bytes"));
    }
    if let Some(c) = trimmed.chars().find(|c| is_forbidden_char(*c)) {
        return Err(Error::invalid_path(format!(
            "path must not contain control characters (found U+{:04X}): {trimmed:?}",
            c as u32
        )));
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
    if rel.trim() != rel {
        // `a /.` would otherwise name "a ": a note no path could ask for again.
        return Err(Error::invalid_path(format!(
            "a note path may not begin or end with whitespace once normalized: {rel:?}"
        )));
    }
    if let Some(long) = rel.split('/').find(|part| part.len() > MAX_NAME_BYTES) {
        return Err(Error::invalid_path(format!(
            "a file or folder name may be at most {MAX_NAME_BYTES} bytes; {:?}... has {}",
            long.chars().take(40).collect::<String>(),
            long.len()
        )));
    }
    if rel.len() > MAX_PATH_BYTES {
        return Err(Error::invalid_path(format!(
            "a note path may be at most {MAX_PATH_BYTES} bytes; this one has {}",
            rel.len()
        )));
    }
    Ok(rel)
}

/// Characters no note name may hold: C0 and C1 controls and DEL (a newline in a
/// name would forge lines of the commit message), and the Unicode line and
/// paragraph separators.
pub fn is_forbidden_char(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// True when a name found on disk could be asked for by its path: the rules
/// [`lexical`] applies to one component (listing uses this, so listing and
/// reading agree).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.contains('\\')
        && !name.chars().any(is_forbidden_char)
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

/// The rules a normalized path must meet to name a note, after the lexical ones
/// and the walk on disk: not hidden (`invalid_path`), then `.md` (`invalid_extension`).
pub fn check_visible_note(rel: &str) -> Result<()> {
    if is_hidden(rel) {
        return Err(Error::invalid_path(format!(
            "hidden files and folders (names starting with a dot, like .git/ and .mirai/) are not notes: {rel:?}"
        )));
    }
    if !has_note_extension(rel) {
        return Err(Error::invalid_extension(format!(
            "only .md files are notes: {rel:?}"
        )));
    }
    Ok(())
}

/// A note's path as git's history knows it: the lexical rules, not hidden,
/// `.md`. Nothing on disk is looked at (the note may be gone, or not yet made).
pub fn in_history(raw: &str) -> Result<String> {
    let rel = lexical(raw)?;
    check_visible_note(&rel)?;
    Ok(rel)
}

/// A note's or an attachment's path as git's history knows it: the lexical
/// rules and not hidden (any visible file has a history).
pub fn file_in_history(raw: &str) -> Result<String> {
    let rel = lexical(raw)?;
    if is_hidden(&rel) {
        return check_visible_note(&rel).map(|()| rel);
    }
    Ok(rel)
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
    fn control_characters_and_overlong_names_are_refused() {
        for bad in [
            "a\nb.md",
            "a\rb.md",
            "\u{1b}[0m.md",
            "x\u{7f}.md",
            "x\u{9b}.md",
            "x\u{2028}.md",
        ] {
            assert!(lexical(bad).is_err(), "{bad:?}");
        }
        let longest = format!("{}.md", "é".repeat(126));
        assert_eq!(longest.len(), 255);
        assert_eq!(lexical(&longest).unwrap(), longest);
        assert!(lexical(&format!("x{longest}")).is_err());
        let deep = vec!["d".repeat(200); 16].join("/") + ".md";
        assert!(lexical(&deep).is_err());
        assert!(is_plain_name("ノート.md"));
        assert!(!is_plain_name("a\tb.md"));
        assert!(!is_plain_name("a\\b.md"));
    }

    #[test]
    fn what_passes_asks_for_itself_again() {
        // Found by the note_path fuzz target: "x /." normalized to "x ".
        assert!(lexical("ܼ /.").is_err());
        assert!(lexical("a/b /..").is_ok());
        for raw in [" a.md ", "a/./b.md", "a//b/../c.md"] {
            let rel = lexical(raw).unwrap();
            assert_eq!(lexical(&rel).unwrap(), rel, "{raw:?}");
        }
    }

    #[test]
    fn hidden_means_any_component_with_a_leading_dot() {
        assert!(is_hidden(".git/config"));
        assert!(is_hidden("a/.mirai/index.json"));
        assert!(is_hidden(".draft.md"));
        assert!(!is_hidden("a/b.c.md"));
    }
}
