//! Which file a link names, as Obsidian resolves it:
//!
//! - A wikilink without a folder (`[[Name]]`, `![[diagram.png]]`) names the
//!   file with that name anywhere in the vault, case-insensitively: a note by
//!   its name without `.md` (or with it), any other file by its whole name.
//!   Of several, the one with the fewest folders wins; among those equally
//!   short, one in the linking note's own folder; then the first by bytes.
//! - A wikilink with folders (`[[trips/Lisbon]]`) is a path from the vault's
//!   root.
//! - A markdown link is a path relative to the linking note's folder (`/` at
//!   its start: from the root).
//!
//! A path is looked up as written, then with `.md` added; an exact match of
//! case wins over a case-insensitive one. `..` that climbs above the root
//! leaves a link unresolved.

use std::collections::HashMap;

use super::scan::Link;

/// The files links can reach (notes and attachments), keyed for lookup.
#[derive(Debug, Clone, Default)]
pub struct Files {
    /// Lowercased path (and a note's path without `.md`) -> paths, sorted.
    by_path: HashMap<String, Vec<String>>,
    /// Lowercased file name (and a note's name without `.md`) -> paths, sorted.
    by_name: HashMap<String, Vec<String>>,
}

/// The lookup keys of a link: where the files it may resolve to are filed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A bare name, lowercased.
    Name(String),
    /// A path from the root, normalized and lowercased.
    Path(String),
}

impl Files {
    /// Files `path` (a note when it ends in `.md`).
    pub fn insert(&mut self, path: &str) {
        for key in keys_of(path) {
            let slot = match &key {
                Key::Name(name) => self.by_name.entry(name.clone()).or_default(),
                Key::Path(path) => self.by_path.entry(path.clone()).or_default(),
            };
            if let Err(at) = slot.binary_search_by(|p| p.as_str().cmp(path)) {
                slot.insert(at, path.to_string());
            }
        }
    }

    /// These files without those `leave_out` holds.
    pub fn without(&self, leave_out: impl Fn(&str) -> bool) -> Files {
        let only = |map: &HashMap<String, Vec<String>>| -> HashMap<String, Vec<String>> {
            map.iter()
                .filter_map(|(key, paths)| {
                    let kept: Vec<String> =
                        paths.iter().filter(|p| !leave_out(p)).cloned().collect();
                    (!kept.is_empty()).then(|| (key.clone(), kept))
                })
                .collect()
        };
        Files {
            by_path: only(&self.by_path),
            by_name: only(&self.by_name),
        }
    }

    /// These files as they are once `from` is moved to `to`: what links
    /// resolve against after a move (a view: nothing is copied).
    pub fn moved<'a>(&'a self, from: &'a str, to: &'a str) -> Moved<'a> {
        Moved {
            files: self,
            from,
            to,
            to_keys: keys_of(to),
        }
    }

    /// Takes `path` out.
    pub fn remove(&mut self, path: &str) {
        for key in keys_of(path) {
            let map = match &key {
                Key::Name(_) => &mut self.by_name,
                Key::Path(_) => &mut self.by_path,
            };
            let k = match &key {
                Key::Name(k) | Key::Path(k) => k,
            };
            if let Some(slot) = map.get_mut(k) {
                slot.retain(|p| p != path);
                if slot.is_empty() {
                    map.remove(k);
                }
            }
        }
    }

    /// The file `link` in note `from` names, or `None`.
    pub fn resolve(&self, from: &str, link: &Link) -> Option<&str> {
        let key = link_key(from, link)?;
        pick(
            from,
            link,
            &key,
            self.filed(&key)?.iter().map(String::as_str),
        )
    }

    /// The files filed under `key`, sorted.
    fn filed(&self, key: &Key) -> Option<&Vec<String>> {
        match key {
            Key::Name(name) => self.by_name.get(name),
            Key::Path(path) => self.by_path.get(path),
        }
    }
}

/// [`Files`] with one note moved: see [`Files::moved`].
pub struct Moved<'a> {
    files: &'a Files,
    from: &'a str,
    to: &'a str,
    to_keys: Vec<Key>,
}

impl<'a> Moved<'a> {
    /// The file `link` in note `from` names once the move is made, or `None`.
    pub fn resolve(&self, from: &str, link: &Link) -> Option<&'a str> {
        let key = link_key(from, link)?;
        let filed = self.files.filed(&key).map_or(&[][..], Vec::as_slice);
        let mut found: Vec<&'a str> = filed
            .iter()
            .map(String::as_str)
            .filter(|path| *path != self.from)
            .collect();
        if self.to_keys.contains(&key) {
            if let Err(at) = found.binary_search(&self.to) {
                found.insert(at, self.to);
            }
        }
        if found.is_empty() {
            return None;
        }
        pick(from, link, &key, found.into_iter())
    }
}

/// Of `candidates` (sorted, all filed under `key`, the key of `link` in note
/// `from`), the file the link names.
fn pick<'a>(
    from: &str,
    link: &Link,
    key: &Key,
    candidates: impl Iterator<Item = &'a str> + Clone,
) -> Option<&'a str> {
    match key {
        Key::Name(_) => {
            let folder = folder_of(from);
            candidates.min_by(|a, b| {
                let rank = |p: &str| (p.matches('/').count(), folder_of(p) != folder);
                rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
            })
        }
        Key::Path(lower) => {
            let written = written_path(from, link)?;
            let with_md = format!("{written}.md");
            let first = candidates.clone().next()?;
            candidates
                .clone()
                .find(|p| *p == written)
                .or_else(|| candidates.clone().find(|p| *p == with_md))
                .or_else(|| candidates.clone().find(|p| p.to_lowercase() == *lower))
                .or(Some(first))
        }
    }
}

/// The keys under which `path` is filed.
pub fn keys_of(path: &str) -> Vec<Key> {
    let lower = path.to_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower).to_string();
    let mut keys = vec![Key::Path(lower.clone()), Key::Name(name.clone())];
    if let (Some(stem_path), Some(stem)) = (lower.strip_suffix(".md"), name.strip_suffix(".md")) {
        if !stem.is_empty() {
            keys.push(Key::Path(stem_path.to_string()));
            keys.push(Key::Name(stem.to_string()));
        }
    }
    keys
}

/// The key a link looks its target up by (`None`: it climbs above the root).
pub fn link_key(from: &str, link: &Link) -> Option<Key> {
    if link.wiki && !link.path.contains('/') {
        return Some(Key::Name(link.path.to_lowercase()));
    }
    written_path(from, link).map(|path| Key::Path(path.to_lowercase()))
}

/// The link's path from the root, normalized, with the case it was written in.
fn written_path(from: &str, link: &Link) -> Option<String> {
    let path = link.path.as_str();
    if link.wiki || path.starts_with('/') {
        normalize("", path)
    } else {
        normalize(folder_of(from), path)
    }
}

/// The folder of `path` (`""` for the root).
pub fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// `path` joined to `folder`, `.` and `..` taken out; `None` above the root
/// or when nothing is left.
pub fn normalize(folder: &str, path: &str) -> Option<String> {
    let mut parts: Vec<&str> = folder.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::scan::scan;

    fn files(paths: &[&str]) -> Files {
        let mut files = Files::default();
        for path in paths {
            files.insert(path);
        }
        files
    }

    fn resolve<'a>(files: &'a Files, from: &str, note: &str) -> Option<&'a str> {
        let found = scan(note, 0);
        files.resolve(from, &found.links[0])
    }

    #[test]
    fn a_bare_name_takes_the_shortest_path_then_the_own_folder() {
        let f = files(&["deep/x/Note.md", "a/note.md", "b/note.md", "c.md"]);
        assert_eq!(resolve(&f, "c.md", "[[note]]"), Some("a/note.md"));
        assert_eq!(resolve(&f, "b/other.md", "[[NOTE]]"), Some("b/note.md"));
        assert_eq!(resolve(&f, "b/other.md", "[[note.md]]"), Some("b/note.md"));
        assert_eq!(resolve(&f, "x.md", "[[missing]]"), None);
        let f = files(&["x/y/Note.md", "top/note.md"]);
        assert_eq!(resolve(&f, "x/y/z.md", "[[note]]"), Some("top/note.md"));
    }

    #[test]
    fn folders_are_from_the_root_for_wikilinks_and_relative_for_markdown() {
        let f = files(&["a/b.md", "x/a/b.md", "img/p.png"]);
        assert_eq!(resolve(&f, "x/n.md", "[[a/b]]"), Some("a/b.md"));
        assert_eq!(resolve(&f, "x/n.md", "[t](a/b.md)"), Some("x/a/b.md"));
        assert_eq!(resolve(&f, "x/n.md", "[t](../a/b.md)"), Some("a/b.md"));
        assert_eq!(resolve(&f, "x/n.md", "[t](/a/b)"), Some("a/b.md"));
        assert_eq!(resolve(&f, "x/n.md", "[t](../../a/b.md)"), None);
        assert_eq!(resolve(&f, "n.md", "![[P.PNG]]"), Some("img/p.png"));
        assert_eq!(resolve(&f, "n.md", "![i](img/p.png)"), Some("img/p.png"));
    }

    /// The moved view answers what a copy of the files with the note moved
    /// answers, for every link form, whichever way the move changes them.
    #[test]
    fn the_moved_view_resolves_as_a_moved_copy_does() {
        let paths = [
            "a/note.md",
            "b/note.md",
            "deep/x/Note.md",
            "c.md",
            "img/p.png",
        ];
        let links = "[[note]] [[NOTE.md]] [[c]] [[a/note]] [[b/note.md]] [t](note.md) \
                     [u](../c.md) [v](/deep/x/note) ![[p.png]] [[gone]]\n";
        let found = scan(links, 0).links;
        let before = files(&paths);
        for (from, to) in [
            ("a/note.md", "z/note.md"),
            ("a/note.md", "note.md"),
            ("c.md", "b/c.md"),
            ("deep/x/Note.md", "a/x.md"),
            ("b/note.md", "gone.md"),
        ] {
            let mut copy = before.clone();
            copy.remove(from);
            copy.insert(to);
            let view = before.moved(from, to);
            for note in ["a/n.md", "b/n.md", "n.md", "deep/x/n.md"] {
                for link in &found {
                    assert_eq!(
                        view.resolve(note, link),
                        copy.resolve(note, link),
                        "{from} -> {to}: {} in {note}",
                        link.target
                    );
                }
            }
        }
    }

    #[test]
    fn exact_case_wins_and_removal_forgets() {
        let mut f = files(&["A.md", "a.md"]);
        assert_eq!(resolve(&f, "n.md", "[t](a.md)"), Some("a.md"));
        assert_eq!(resolve(&f, "n.md", "[t](A.md)"), Some("A.md"));
        f.remove("a.md");
        assert_eq!(resolve(&f, "n.md", "[t](a.md)"), Some("A.md"));
        f.remove("A.md");
        assert_eq!(resolve(&f, "n.md", "[[a]]"), None);
    }
}
