//! The notes as one caller sees them: the notes on disk or, in a dry run, the
//! notes on disk with the run's [`Overlay`] on top. Operations resolve, read and
//! list through a [`View`] and never ask which of the two it is; the one place
//! that must know is where a write lands ([`View::landing`]).

use std::sync::Arc;

use super::overlay::Overlay;
use super::{path, suggest, Existence, NotePath, Notes};
use crate::callers::Prefixes;
use crate::error::{Error, ErrorCode, Result};

/// The notes as one context sees them. Cheap to clone.
#[derive(Debug, Clone)]
pub struct View {
    notes: Notes,
    /// Set in a dry run: its writes, which reads see.
    overlay: Option<Arc<Overlay>>,
    /// Set for a named caller with `paths` or `read_paths`: what it may see and change.
    scope: Option<Arc<Scope>>,
}

/// A named caller's reach: notes outside `read` are hidden (listing leaves
/// them out, reading answers `not_found` as for a missing note), a write
/// outside `write` or `read` is 403 `policy_denied`, decided from the path alone.
#[derive(Debug)]
pub struct Scope {
    pub read: Prefixes,
    pub write: Prefixes,
}

/// What a view asks the index and the link graph to answer as if ([`View::as_seen`]).
#[derive(Debug, Default)]
pub struct Seen {
    /// The notes the view holds differently from the disk, with their text
    /// (`None`: deleted), only those it may see.
    pub unsaved: Vec<(String, Option<String>)>,
    /// For a caller whose `read_paths` hide notes: which ones.
    pub hidden: Option<Hidden>,
}

impl Seen {
    /// The disk itself, or a dry run's notes, for a view that sees every note.
    pub fn all(unsaved: Vec<(String, Option<String>)>) -> Seen {
        Seen {
            unsaved,
            hidden: None,
        }
    }
}

/// The notes a scoped caller may not read, decided by path: every note
/// outside `read`, and the symlinked notes inside it that lead outside.
/// Equal values hide the same notes, whatever the notes are now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    read: Prefixes,
    /// Sorted.
    links: Vec<String>,
}

impl Hidden {
    /// Whether note path `rel` (normalized) is hidden.
    pub fn hides(&self, rel: &str) -> bool {
        !self.read.holds(rel) || self.links.binary_search_by(|l| l.as_str().cmp(rel)).is_ok()
    }
}

/// Where a write through a [`View`] lands.
pub enum Landing<'a> {
    /// The notes on disk: the note is written and committed.
    Disk,
    /// A dry run: the write is recorded in memory, and nothing reaches the disk or git.
    Overlay(&'a Overlay),
}

impl View {
    /// The notes on disk as they are.
    pub fn disk(notes: Notes) -> View {
        View {
            notes,
            overlay: None,
            scope: None,
        }
    }

    /// The same notes, with writes landing in `overlay` and reads seeing them.
    pub fn with_overlay(&self, overlay: Arc<Overlay>) -> View {
        View {
            overlay: Some(overlay),
            ..self.clone()
        }
    }

    /// The same notes, as a caller reaching only `read` (reads) and `write`
    /// (writes) sees them; everything when both are.
    pub fn scoped(&self, read: Prefixes, write: Prefixes) -> View {
        let scope = (!read.is_everything() || !write.is_everything())
            .then(|| Arc::new(Scope { read, write }));
        View {
            scope,
            ..self.clone()
        }
    }

    /// Whether note path `rel` (normalized) is visible through this view.
    pub fn sees(&self, rel: &str) -> bool {
        self.scope.as_deref().is_none_or(|s| s.read.holds(rel))
    }

    /// Whether a resolved note is visible: its path, and where a symlink on
    /// the way leads (an operator's link in a visible folder to a hidden note
    /// shows nothing of it).
    fn sees_note(&self, note: &NotePath) -> bool {
        self.sees_listed(&note.rel, note.via_link.then_some(note.real.as_str()))
    }

    /// Whether a listed note is visible: its path, and where it leads when it
    /// is a symlink (`real`).
    fn sees_listed(&self, rel: &str, real: Option<&str>) -> bool {
        self.sees(rel) && real.is_none_or(|real| self.sees(real))
    }

    /// `note`, or the `not_found` of a missing note when it leads somewhere hidden.
    fn visible(&self, note: NotePath) -> Result<NotePath> {
        if self.sees_note(&note) {
            Ok(note)
        } else {
            Err(suggest::missing(&note.rel))
        }
    }

    /// The prefixes this view may read (everything: `None`).
    pub fn read_prefixes(&self) -> Option<&Prefixes> {
        self.scope.as_deref().map(|s| &s.read)
    }

    /// A hidden note answers as a missing one; checked on the path's words
    /// before the disk is asked, so nothing about a hidden note leaks.
    fn check_visible(&self, raw: &str) -> Result<()> {
        match path::lexical(raw) {
            Ok(rel) if !self.sees(&rel) => Err(suggest::missing(&rel)),
            _ => Ok(()),
        }
    }

    /// A write outside the caller's prefixes is 403 `policy_denied` naming
    /// them, before the disk is asked.
    fn check_writable(&self, raw: &str) -> Result<()> {
        let Some(scope) = self.scope.as_deref() else {
            return Ok(());
        };
        let Ok(rel) = path::lexical(raw) else {
            return Ok(()); // the resolve that follows refuses it in its own words
        };
        for (prefixes, what) in [(&scope.write, "write"), (&scope.read, "read")] {
            if !prefixes.holds(&rel) {
                return Err(Error::new(
                    ErrorCode::PolicyDenied,
                    format!(
                        "{rel} is outside the paths this caller may {what} ({}); nothing was \
                         changed: write under one of them",
                        prefixes.list().join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The notes on disk underneath (for the repository and the root folder).
    pub fn disk_notes(&self) -> &Notes {
        &self.notes
    }

    /// Whether writes through this view land in an overlay (a dry run, or a
    /// review mode draft), never on disk.
    pub fn is_dry_run(&self) -> bool {
        self.overlay.is_some()
    }

    /// Where writes through this view land.
    pub fn landing(&self) -> Landing<'_> {
        match self.overlay.as_deref() {
            None => Landing::Disk,
            Some(overlay) => Landing::Overlay(overlay),
        }
    }

    /// Checks an untrusted path (see [`Notes::resolve`]); a note the view
    /// created exists, one it deleted does not. A missing note's `not_found`
    /// suggests the closest notes there are.
    pub fn resolve(&self, raw: &str, existence: Existence) -> Result<NotePath> {
        self.check_visible(raw)?;
        let resolved = self.resolve_with(raw, existence, Notes::resolve);
        self.suggesting(raw, resolved.and_then(|note| self.visible(note)))
    }

    /// Checks the path of a note about to be written: as [`View::resolve`], and
    /// never a symlink or through one (see [`Notes::resolve_for_write`]).
    pub fn resolve_for_write(&self, raw: &str, existence: Existence) -> Result<NotePath> {
        self.check_writable(raw)?;
        self.suggesting(
            raw,
            self.resolve_with(raw, existence, Notes::resolve_for_write),
        )
    }

    /// `result`, with the closest notes this view lists added to a missing
    /// note's `not_found` message (see [`suggest::closest_notes`]), or where
    /// to look when none is close.
    fn suggesting<T>(&self, raw: &str, result: Result<T>) -> Result<T> {
        let Err(err) = result else {
            return result;
        };
        if suggest::missing_note(&err).is_none() {
            return Err(err);
        }
        let (Ok(rel), Ok(notes)) = (path::lexical(raw), self.list()) else {
            return Err(err);
        };
        let closest = suggest::closest_notes(&rel, &notes);
        Err(suggest::amend_missing(err, |note| {
            note.closest = Some(closest.into_iter().map(str::to_string).collect());
        }))
    }

    fn resolve_with(
        &self,
        raw: &str,
        existence: Existence,
        resolve: fn(&Notes, &str, Existence) -> Result<NotePath>,
    ) -> Result<NotePath> {
        let Some(overlay) = self.overlay.as_deref() else {
            return resolve(&self.notes, raw, existence);
        };
        let note = resolve(&self.notes, raw, Existence::MayBeMissing)?;
        match (existence, overlay.get(&note.rel)) {
            (Existence::MayBeMissing, _) | (Existence::MustExist, Some(Some(_))) => Ok(note),
            (Existence::MustExist, Some(None)) => Err(suggest::missing(&note.rel)),
            (Existence::MustExist, None) => resolve(&self.notes, raw, existence),
        }
    }

    /// Reads a note as text (see [`Notes::read`]); a missing note's
    /// `not_found` suggests the closest notes there are.
    pub fn read(&self, raw: &str) -> Result<(NotePath, String)> {
        self.check_visible(raw)?;
        let read = self.read_text(raw);
        self.suggesting(
            raw,
            read.and_then(|(note, text)| Ok((self.visible(note)?, text))),
        )
    }

    fn read_text(&self, raw: &str) -> Result<(NotePath, String)> {
        let Some(overlay) = self.overlay.as_deref() else {
            return self.notes.read(raw);
        };
        let note = self.resolve_with(raw, Existence::MustExist, Notes::resolve)?;
        match overlay.get(&note.rel) {
            Some(Some(content)) => Ok((note, content)),
            _ => self.notes.read(raw),
        }
    }

    /// A resolved note's text now (`None`: no note there yet), for a change to
    /// it: a note that is not UTF-8 is a conflict, never replaced by a lossy copy.
    pub fn current_text(&self, note: &NotePath) -> Result<Option<String>> {
        if let Some(current) = self.overlay.as_deref().and_then(|o| o.get(&note.rel)) {
            return Ok(current);
        }
        match self.notes.read_bytes(note)? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
                crate::error::Error::conflict(format!(
                    "{} is not valid UTF-8 text; mirai changes text notes only",
                    note.rel
                ))
            }),
        }
    }

    /// Checks the path of an attachment about to be written (see
    /// [`Notes::resolve_file_for_write`]), within the caller's paths; one the
    /// view created exists, one it deleted does not.
    pub fn resolve_file_for_write(&self, raw: &str, existence: Existence) -> Result<NotePath> {
        self.check_writable(raw)?;
        let file = self
            .notes
            .resolve_file_for_write(raw, Existence::MayBeMissing)?;
        if existence == Existence::MustExist && self.current_file(&file)?.is_none() {
            return Err(super::files::missing(&file.rel));
        }
        Ok(file)
    }

    /// A resolved attachment's bytes now (`None`: no file there), as this view sees them.
    pub fn current_file(&self, file: &NotePath) -> Result<Option<Vec<u8>>> {
        if let Some(current) = self.overlay.as_deref().and_then(|o| o.get_file(&file.rel)) {
            return Ok(current);
        }
        self.notes.current_file(file)
    }

    /// Every note, as normalized relative paths sorted by their bytes (see [`Notes::list`]).
    pub fn list(&self) -> Result<Vec<String>> {
        let on_disk = self.disk_list()?;
        let mut listed = match self.overlay.as_deref() {
            None => on_disk,
            Some(overlay) => overlay.list(on_disk),
        };
        if self.scope.is_some() {
            listed.retain(|rel| self.sees(rel));
        }
        Ok(listed)
    }

    /// What the index and the link graph are asked to answer as if
    /// (`as_if`): the view's unsaved notes and, for a caller whose
    /// `read_paths` hide notes, which ones, so a hidden note is never found,
    /// counted, linked, tagged or used for a search's feedback.
    pub fn as_seen(&self) -> Result<Seen> {
        let mut unsaved = self.unsaved();
        let Some(scope) = self.scope.as_deref().filter(|s| !s.read.is_everything()) else {
            return Ok(Seen {
                unsaved,
                hidden: None,
            });
        };
        unsaved.retain(|(rel, _)| self.sees(rel));
        // By path, the prefixes decide; a symlinked note inside them that
        // leads outside is hidden too, and only a walk of the folders they
        // reach finds those.
        let mut links: Vec<String> = self
            .notes
            .links_within(|folder| scope.read.reaches(folder))
            .into_iter()
            .filter(|(rel, real)| self.sees(rel) && !self.sees(real))
            .map(|(rel, _)| rel)
            .collect();
        links.sort_unstable();
        Ok(Seen {
            unsaved,
            hidden: Some(Hidden {
                read: scope.read.clone(),
                links,
            }),
        })
    }

    /// The notes on disk this view may see (every one without a scope; else
    /// those inside its `read_paths` whose links, if any, lead inside them too), sorted.
    fn disk_list(&self) -> Result<Vec<String>> {
        if self.scope.is_none() {
            return self.notes.list();
        }
        Ok(self
            .notes
            .list_with_targets()?
            .into_iter()
            .filter(|(rel, real)| self.sees_listed(rel, real.as_deref()))
            .map(|(rel, _)| rel)
            .collect())
    }

    /// The notes this view holds differently from the disk, with their text
    /// (`None`: deleted); empty for the disk itself.
    pub fn unsaved(&self) -> Vec<(String, Option<String>)> {
        self.overlay
            .as_deref()
            .map(Overlay::written)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Notes) {
        let dir = tempfile::tempdir().unwrap();
        for (rel, text) in files {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let notes = Notes::open(dir.path()).unwrap();
        (dir, notes)
    }

    #[test]
    fn a_view_of_the_disk_answers_what_the_disk_holds() {
        let (_dir, notes) = notes_with(&[("a.md", "one\n"), ("b/c.md", "two\n")]);
        let view = View::disk(notes);
        assert_eq!(view.list().unwrap(), ["a.md", "b/c.md"]);
        assert_eq!(view.read("a.md").unwrap().1, "one\n");
        let missing = view.resolve("new.md", Existence::MayBeMissing).unwrap();
        assert_eq!(view.current_text(&missing).unwrap(), None);
        assert!(view.unsaved().is_empty());
        assert!(matches!(view.landing(), Landing::Disk));
    }

    #[test]
    fn a_dry_run_view_sees_its_own_writes_and_leaves_the_disk_alone() {
        let (dir, notes) = notes_with(&[("a.md", "one\n"), ("gone.md", "bye\n")]);
        let overlay = Arc::new(Overlay::new());
        let view = View::disk(notes).with_overlay(Arc::clone(&overlay));
        let Landing::Overlay(landing) = view.landing() else {
            panic!("a dry run's writes land in its overlay");
        };
        landing.write("a.md", Some("one\n"), Some("changed\n"));
        landing.write("new.md", None, Some("fresh\n"));
        landing.write("gone.md", Some("bye\n"), None);

        assert_eq!(view.list().unwrap(), ["a.md", "new.md"]);
        assert_eq!(view.read("a.md").unwrap().1, "changed\n");
        assert_eq!(view.read("new.md").unwrap().1, "fresh\n");
        let err = view.read("gone.md").unwrap_err();
        assert_eq!(
            err.message,
            format!("note not found: \"gone.md\"{}", suggest::NOTHING_CLOSE)
        );
        // A missing note's answer names the closest ones the view holds.
        let err = view.read("nwe.md").unwrap_err();
        assert_eq!(
            err.message,
            "note not found: \"nwe.md\"; did you mean \"new.md\"?"
        );
        let new = view
            .resolve_for_write("new.md", Existence::MustExist)
            .unwrap();
        assert_eq!(view.current_text(&new).unwrap().as_deref(), Some("fresh\n"));
        assert_eq!(view.unsaved().len(), 3);

        // The disk is untouched, and a view of it sees none of the run.
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.md")).unwrap(),
            "one\n"
        );
        assert!(!dir.path().join("new.md").exists());
        let disk = View::disk(view.disk_notes().clone());
        assert_eq!(disk.list().unwrap(), ["a.md", "gone.md"]);
    }
}
