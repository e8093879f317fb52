//! A dry run's notes: writes land here, in memory, instead of on disk and in
//! git; reads made through the same [`crate::ops::Context`] see them.
//!
//! The overlay remembers each note's text from before its first change, so at
//! the end it can answer one combined diff per note ([`Overlay::changes`]) for a
//! person to review and then apply for real.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Serialize;

use super::files;
use crate::patch;

/// Notes changed by a dry run, by normalized relative path.
#[derive(Debug, Default)]
pub struct Overlay {
    notes: Mutex<BTreeMap<String, Change>>,
    /// Attachments the run changed: bytes, never text.
    files: Mutex<BTreeMap<String, Change<Vec<u8>>>>,
}

#[derive(Debug)]
struct Change<T = String> {
    /// The note before the dry run touched it (`None`: it did not exist).
    original: Option<T>,
    /// The note now (`None`: deleted by the dry run).
    current: Option<T>,
}

/// One note's combined change, as a unified diff that `patch.apply` accepts;
/// an attachment's, as [`files::binary_diff`] describes it, with its new bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoteChange {
    pub path: String,
    pub patch: String,
    /// An attachment's bytes after the change (`None`: a note's change, or a
    /// deletion); a proposal keeps them, an answer shows only `patch`.
    #[serde(skip)]
    pub bytes: Option<Vec<u8>>,
}

impl Overlay {
    pub fn new() -> Overlay {
        Overlay::default()
    }

    /// The note as the dry run left it: `None` when the run never wrote it,
    /// `Some(None)` when the run deleted it.
    pub fn get(&self, rel: &str) -> Option<Option<String>> {
        self.lock().get(rel).map(|change| change.current.clone())
    }

    /// Records a write of `rel`, whose text was `before` and is now `after`.
    pub fn write(&self, rel: &str, before: Option<&str>, after: Option<&str>) {
        let mut notes = self.lock();
        let change = notes.entry(rel.to_string()).or_insert_with(|| Change {
            original: before.map(str::to_string),
            current: None,
        });
        change.current = after.map(str::to_string);
    }

    /// The attachment as the dry run left it: `None` when the run never
    /// wrote it, `Some(None)` when the run deleted it.
    pub fn get_file(&self, rel: &str) -> Option<Option<Vec<u8>>> {
        lock(&self.files)
            .get(rel)
            .map(|change| change.current.clone())
    }

    /// Records a write of attachment `rel`, whose bytes were `before` and are now `after`.
    pub fn write_file(&self, rel: &str, before: Option<&[u8]>, after: Option<&[u8]>) {
        let mut files = lock(&self.files);
        let change = files.entry(rel.to_string()).or_insert_with(|| Change {
            original: before.map(<[u8]>::to_vec),
            current: None,
        });
        change.current = after.map(<[u8]>::to_vec);
    }

    /// `committed` (the notes on disk, sorted) as the dry run sees them.
    pub fn list(&self, committed: Vec<String>) -> Vec<String> {
        let notes = self.lock();
        let mut listed: Vec<String> = committed
            .into_iter()
            .filter(|rel| !matches!(notes.get(rel), Some(Change { current: None, .. })))
            .collect();
        listed.extend(
            notes
                .iter()
                .filter(|(_, change)| change.original.is_none() && change.current.is_some())
                .map(|(rel, _)| rel.clone()),
        );
        listed.sort_unstable();
        listed.dedup();
        listed
    }

    /// Every note the dry run changed, with its text now (`None`: deleted).
    pub fn written(&self) -> Vec<(String, Option<String>)> {
        self.lock()
            .iter()
            .map(|(rel, change)| (rel.clone(), change.current.clone()))
            .collect()
    }

    /// One diff per note whose text differs from before the run, and one
    /// per attachment whose bytes do, sorted by path.
    pub fn changes(&self) -> Vec<NoteChange> {
        let mut changes: Vec<NoteChange> = self
            .lock()
            .iter()
            .filter_map(|(rel, change)| {
                patch::make(rel, change.original.as_deref(), change.current.as_deref()).map(
                    |patch| NoteChange {
                        path: rel.clone(),
                        patch,
                        bytes: None,
                    },
                )
            })
            .collect();
        changes.extend(
            lock(&self.files)
                .iter()
                .filter(|(_, change)| change.original != change.current)
                .map(|(rel, change)| NoteChange {
                    path: rel.clone(),
                    patch: files::binary_diff(
                        rel,
                        change.original.as_deref(),
                        change.current.as_deref(),
                    ),
                    bytes: change.current.clone(),
                }),
        );
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        changes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Change>> {
        lock(&self.notes)
    }
}

fn lock<T>(map: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map is consistent after every statement; a panic elsewhere cannot tear it.
    map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_changes_diff_against_the_text_before_the_first_write() {
        let overlay = Overlay::new();
        overlay.write("a.md", Some("one\n"), Some("two\n"));
        overlay.write("a.md", Some("two\n"), Some("three\n"));
        overlay.write("new.md", None, Some("hello\n"));
        overlay.write("gone.md", Some("bye\n"), None);
        overlay.write("same.md", Some("x\n"), Some("y\n"));
        overlay.write("same.md", Some("y\n"), Some("x\n"));

        let changes = overlay.changes();
        let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["a.md", "gone.md", "new.md"]);
        assert!(
            changes[0].patch.contains("-one\n+three\n"),
            "{}",
            changes[0].patch
        );
        assert!(
            changes[1].patch.contains("+++ /dev/null"),
            "{}",
            changes[1].patch
        );
        assert!(
            changes[2].patch.contains("--- /dev/null"),
            "{}",
            changes[2].patch
        );
    }

    #[test]
    fn attachments_change_as_bytes_beside_the_notes() {
        let overlay = Overlay::new();
        overlay.write("b.md", None, Some("new\n"));
        overlay.write_file("a.png", None, Some(&[0, 159, 146]));
        overlay.write_file("c.pdf", Some(b"x"), Some(b"y"));
        overlay.write_file("c.pdf", Some(b"y"), Some(b"x"));
        assert_eq!(overlay.get_file("a.png"), Some(Some(vec![0, 159, 146])));
        assert_eq!(overlay.get_file("b.md"), None);
        let changes = overlay.changes();
        let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["a.png", "b.md"]);
        assert!(changes[0]
            .patch
            .starts_with("Binary file a.png\n--- /dev/null\n+++ binary, 3 bytes"));
        assert_eq!(changes[0].bytes.as_deref(), Some(&[0u8, 159, 146][..]));
    }

    #[test]
    fn listing_adds_created_notes_and_drops_deleted_ones() {
        let overlay = Overlay::new();
        overlay.write("b.md", None, Some("new\n"));
        overlay.write("c.md", Some("old\n"), None);
        let listed = overlay.list(vec!["a.md".into(), "c.md".into(), "d.md".into()]);
        assert_eq!(listed, ["a.md", "b.md", "d.md"]);
        assert_eq!(overlay.get("c.md"), Some(None));
        assert_eq!(overlay.get("b.md"), Some(Some("new\n".into())));
        assert_eq!(overlay.get("a.md"), None);
    }
}
