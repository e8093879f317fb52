//! The [`Vault`]: every note's [`NoteFacts`], the files links can reach
//! (notes and attachments), and a reverse index from lookup keys to the notes
//! whose links are filed under them, so a note's backlinks are found without
//! looking at every link of the vault.
//!
//! Links are kept as written and resolved when asked: a note added, renamed
//! or removed changes what other notes' links resolve to without touching
//! them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use super::facts::NoteFacts;
use super::resolve::{self, Files, Key};
use super::scan::Link;

/// Every note of the vault and the links between them.
#[derive(Debug, Clone, Default)]
pub struct Vault {
    notes: BTreeMap<String, Arc<NoteFacts>>,
    attachments: BTreeSet<String>,
    files: Files,
    /// A lookup key -> the notes holding a link filed under it (one shared
    /// copy of each note's path).
    linking: HashMap<Key, BTreeSet<Arc<str>>>,
    /// Broken links and orphans, worked out once per version of the vault
    /// (every change starts a new one), so paging through them is cheap.
    summary: OnceLock<Arc<Summary>>,
}

/// What `notes.graph` pages through: every broken link, by note path and
/// place, then every orphan note, sorted.
#[derive(Debug)]
pub struct Summary {
    pub broken: Vec<Broken>,
    pub orphans: Vec<String>,
}

/// A link into a note, from another (or the same) note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backlink {
    pub path: String,
    pub line: u32,
    pub context: String,
}

/// A link that resolves to no file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub path: String,
    /// Its place among the note's links (0 is the first), for paging.
    pub seq: usize,
    pub line: u32,
    pub target: String,
}

impl Vault {
    /// The vault of `notes` (path, text) and `attachments` (every other
    /// visible file). The notes are read on up to two threads; the vault is
    /// the same whichever thread read which note.
    pub fn build(notes: &[(String, String)], attachments: Vec<String>) -> Vault {
        let mut vault = Vault::default();
        for ((path, _), (facts, keys)) in notes.iter().zip(facts_of_all(notes)) {
            vault.take_in(path, facts, keys);
        }
        vault.set_attachments(attachments);
        vault
    }

    /// Takes in note `path` with its text `content` (new or changed).
    pub fn upsert(&mut self, path: &str, content: &str) {
        let facts = NoteFacts::of(path, content);
        let keys = link_keys(path, &facts);
        self.take_in(path, facts, keys);
    }

    /// Takes in note `path` with the facts read from its text and the keys
    /// its links are filed under ([`link_keys`]).
    fn take_in(&mut self, path: &str, facts: NoteFacts, keys: Vec<Key>) {
        self.summary = OnceLock::new();
        self.forget_links(path);
        let source: Arc<str> = Arc::from(path);
        for key in keys {
            self.linking
                .entry(key)
                .or_default()
                .insert(Arc::clone(&source));
        }
        if self
            .notes
            .insert(path.to_string(), Arc::new(facts))
            .is_none()
        {
            self.files.insert(path);
        }
    }

    /// Takes note `path` out.
    pub fn remove(&mut self, path: &str) {
        self.summary = OnceLock::new();
        self.forget_links(path);
        if self.notes.remove(path).is_some() {
            self.files.remove(path);
        }
    }

    /// This vault without the notes whose path `leave_out` holds: the same
    /// as removing each ([`Vault::remove`]), in one pass.
    pub fn without(&self, leave_out: impl Fn(&str) -> bool) -> Vault {
        // Every source of a link is a note; of the files, the attachments stay.
        let gone = |path: &str| leave_out(path) && !self.attachments.contains(path);
        Vault {
            notes: self
                .notes
                .iter()
                .filter(|(path, _)| !leave_out(path))
                .map(|(path, facts)| (path.clone(), Arc::clone(facts)))
                .collect(),
            attachments: self.attachments.clone(),
            files: self.files.without(gone),
            linking: self
                .linking
                .iter()
                .filter_map(|(key, sources)| {
                    let kept: BTreeSet<Arc<str>> =
                        sources.iter().filter(|s| !leave_out(s)).cloned().collect();
                    (!kept.is_empty()).then(|| (key.clone(), kept))
                })
                .collect(),
            summary: OnceLock::new(),
        }
    }

    /// Takes the links of note `path` out of the reverse index.
    fn forget_links(&mut self, path: &str) {
        let Some(facts) = self.notes.get(path) else {
            return;
        };
        for key in link_keys(path, facts) {
            if let Some(sources) = self.linking.get_mut(&key) {
                sources.remove(path);
                if sources.is_empty() {
                    self.linking.remove(&key);
                }
            }
        }
    }

    /// Whether `attachments` (sorted) differs from the vault's.
    pub fn attachments_differ(&self, attachments: &[String]) -> bool {
        !self.attachments.iter().eq(attachments.iter())
    }

    /// Adds (`present`) or removes attachment `path`; `true` when that
    /// changed anything.
    pub fn attachment_changed(&mut self, path: &str, present: bool) -> bool {
        let changed = if present {
            self.attachments.insert(path.to_string())
        } else {
            self.attachments.remove(path)
        };
        if changed {
            if present {
                self.files.insert(path);
            } else {
                self.files.remove(path);
            }
            self.summary = OnceLock::new();
        }
        changed
    }

    /// Makes `attachments` the vault's files that are not notes; `true` when
    /// that changed anything.
    pub fn set_attachments(&mut self, attachments: Vec<String>) -> bool {
        let new: BTreeSet<String> = attachments.into_iter().collect();
        if new == self.attachments {
            return false;
        }
        for gone in self.attachments.difference(&new) {
            self.files.remove(gone);
        }
        for added in new.difference(&self.attachments) {
            self.files.insert(added);
        }
        self.attachments = new;
        self.summary = OnceLock::new();
        true
    }

    /// How many notes the vault holds.
    pub fn len(&self) -> usize {
        self.notes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.notes.is_empty()
    }

    /// The facts of note `path`.
    pub fn note(&self, path: &str) -> Option<&NoteFacts> {
        self.notes.get(path).map(Arc::as_ref)
    }

    /// Every note with its facts, by path.
    pub fn notes(&self) -> impl Iterator<Item = (&str, &NoteFacts)> {
        self.notes
            .iter()
            .map(|(path, facts)| (path.as_str(), facts.as_ref()))
    }

    /// The file `link` in note `from` names, or `None`.
    pub fn resolve(&self, from: &str, link: &Link) -> Option<&str> {
        self.files.resolve(from, link)
    }

    /// The files links can reach.
    pub fn files(&self) -> &Files {
        &self.files
    }

    /// The notes whose links a move of `from` to `to` changes, by the links
    /// the vault holds: those with a link filed under a key of either path
    /// (what resolves to `from` now, and what `to` could take) for which
    /// `changes(note, link)` holds, and `from` itself, sorted. A note whose
    /// links only name other notes of the same name is left out unread.
    pub fn move_candidates(
        &self,
        from: &str,
        to: &str,
        changes: impl Fn(&str, &Link) -> bool,
    ) -> BTreeSet<String> {
        let keys: Vec<Key> = resolve::keys_of(from)
            .into_iter()
            .chain(resolve::keys_of(to))
            .collect();
        let mut found: BTreeSet<String> = BTreeSet::new();
        for key in &keys {
            for source in self.linking.get(key).into_iter().flatten() {
                if found.contains(&**source) {
                    continue;
                }
                let Some(facts) = self.notes.get(&**source) else {
                    continue;
                };
                let changed = facts.links.iter().any(|link| {
                    resolve::link_key(source, link).is_some_and(|k| keys.contains(&k))
                        && changes(source, link)
                });
                if changed {
                    found.insert(source.to_string());
                }
            }
        }
        found.insert(from.to_string());
        found
    }

    /// Every link that resolves to `path`, by linking note and line. Only
    /// the links filed under one of `path`'s keys are resolved: a link
    /// filed elsewhere cannot reach it.
    pub fn backlinks(&self, path: &str) -> Vec<Backlink> {
        let keys = resolve::keys_of(path);
        let mut sources: BTreeSet<&str> = BTreeSet::new();
        for key in &keys {
            if let Some(found) = self.linking.get(key) {
                sources.extend(found.iter().map(|source| &**source));
            }
        }
        let mut found = Vec::new();
        for source in sources {
            let Some(facts) = self.notes.get(source) else {
                continue;
            };
            for link in &facts.links {
                let filed_here =
                    resolve::link_key(source, link).is_some_and(|key| keys.contains(&key));
                if filed_here && self.resolve(source, link) == Some(path) {
                    found.push(Backlink {
                        path: source.to_string(),
                        line: link.line,
                        context: link.context.clone(),
                    });
                }
            }
        }
        found
    }

    /// Every link that resolves to no file, by note path and place.
    pub fn broken(&self) -> &[Broken] {
        &self.summary().broken
    }

    /// Notes with no resolved link to another file and none from another
    /// note, sorted.
    pub fn orphans(&self) -> &[String] {
        &self.summary().orphans
    }

    /// Broken links and orphans, from one pass over every link (resolving
    /// each once), kept until the vault changes.
    fn summary(&self) -> &Summary {
        self.summary.get_or_init(|| {
            let mut broken = Vec::new();
            let mut linked: HashSet<&str> = HashSet::new();
            for (path, facts) in &self.notes {
                for (seq, link) in facts.links.iter().enumerate() {
                    match self.resolve(path, link) {
                        None => broken.push(Broken {
                            path: path.clone(),
                            seq,
                            line: link.line,
                            target: link.target.clone(),
                        }),
                        Some(target) if target != path => {
                            linked.insert(path);
                            linked.insert(target);
                        }
                        Some(_) => {}
                    }
                }
            }
            let orphans = self
                .notes
                .keys()
                .filter(|path| !linked.contains(path.as_str()))
                .cloned()
                .collect();
            Arc::new(Summary { broken, orphans })
        })
    }

    /// Every tag with the number of notes carrying it (a nested tag `a/b`
    /// counts for `a` too, as a `tag=a` filter finds it).
    pub fn tag_counts(&self) -> BTreeMap<String, usize> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for facts in self.notes.values() {
            let mut own: BTreeSet<&str> = BTreeSet::new();
            for tag in &facts.tags {
                own.insert(tag);
                for (at, _) in tag.match_indices('/') {
                    own.insert(&tag[..at]);
                }
            }
            for tag in own {
                *counts.entry(tag.to_string()).or_default() += 1;
            }
        }
        counts
    }
}

/// The keys the links of note `path` are filed under, each once.
fn link_keys(path: &str, facts: &NoteFacts) -> Vec<Key> {
    let mut keys: Vec<Key> = facts
        .links
        .iter()
        .filter_map(|link| resolve::link_key(path, link))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Notes below this many are read on one thread: a second is not worth starting.
const MIN_NOTES_TO_SPLIT: usize = 64;

/// The facts of each of `notes` and the keys its links are filed under, in
/// the notes' order: on two threads when the machine has two cores and there
/// are enough notes, each reading a contiguous half (by bytes) of them.
fn facts_of_all(notes: &[(String, String)]) -> Vec<(NoteFacts, Vec<Key>)> {
    let of_each = |part: &[(String, String)]| -> Vec<(NoteFacts, Vec<Key>)> {
        part.iter()
            .map(|(path, content)| {
                let facts = NoteFacts::of(path, content);
                let keys = link_keys(path, &facts);
                (facts, keys)
            })
            .collect()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 || notes.len() < MIN_NOTES_TO_SPLIT {
        return of_each(notes);
    }
    let total: usize = notes.iter().map(|(_, content)| content.len()).sum();
    let mut seen = 0;
    let middle = notes
        .iter()
        .position(|(_, content)| {
            seen += content.len();
            seen * 2 >= total
        })
        .map_or(notes.len() / 2, |at| at + 1)
        .clamp(1, notes.len() - 1);
    let (first, second) = notes.split_at(middle);
    std::thread::scope(|scope| {
        // No thread to be had (a process limit, say): this one reads them all.
        let Ok(other) = std::thread::Builder::new()
            .name("mirai-vault".into())
            .spawn_scoped(scope, || of_each(second))
        else {
            return of_each(notes);
        };
        let mut facts = of_each(first);
        match other.join() {
            Ok(rest) => facts.extend(rest),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        facts
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault(notes: &[(&str, &str)], attachments: &[&str]) -> Vault {
        let notes: Vec<(String, String)> = notes
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        Vault::build(&notes, attachments.iter().map(|a| a.to_string()).collect())
    }

    #[test]
    fn a_vault_without_notes_is_the_vault_with_each_removed() {
        let notes: &[(&str, &str)] = &[
            ("a.md", "[[b]] and [[hidden/c]] ![[pic.png]] #tag/x\n"),
            ("b.md", "[up](hidden/c.md) [[a]] #tag\n"),
            ("hidden/c.md", "[[a]] [[b]] [[d]] #secret\n"),
            ("hidden/d.md", "[[c]] ![[hidden/plan.pdf]]\n"),
            ("e.md", "[[c]] [[nowhere]]\n"),
        ];
        let full = vault(notes, &["pic.png", "hidden/plan.pdf"]);
        let hides = |path: &str| path.starts_with("hidden/");
        let subset = full.without(hides);
        let mut removed = full.clone();
        for (path, _) in notes.iter().filter(|(p, _)| hides(p)) {
            removed.remove(path);
        }
        let paths = |v: &Vault| v.notes().map(|(p, _)| p.to_string()).collect::<Vec<_>>();
        assert_eq!(paths(&subset), ["a.md", "b.md", "e.md"]);
        assert_eq!(paths(&subset), paths(&removed));
        for path in [
            "a.md",
            "b.md",
            "e.md",
            "hidden/c.md",
            "pic.png",
            "hidden/plan.pdf",
        ] {
            assert_eq!(subset.backlinks(path), removed.backlinks(path), "{path}");
        }
        assert!(subset.backlinks("a.md").iter().all(|b| !hides(&b.path)));
        assert_eq!(subset.broken(), removed.broken());
        assert!(
            subset.broken().iter().any(|b| b.path == "e.md"),
            "a link into a hidden note is broken"
        );
        assert_eq!(subset.orphans(), removed.orphans());
        assert_eq!(subset.tag_counts(), removed.tag_counts());
        assert!(!subset.tag_counts().contains_key("secret"));
    }

    #[test]
    fn backlinks_follow_resolution_as_notes_come_and_go() {
        let mut v = vault(
            &[
                ("a.md", "[[b]] and [[b|again]]\n"),
                ("x/c.md", "see [up](../b.md)\n"),
                ("b.md", "alone\n"),
            ],
            &[],
        );
        let back: Vec<(String, u32)> = v
            .backlinks("b.md")
            .into_iter()
            .map(|b| (b.path, b.line))
            .collect();
        assert_eq!(
            back,
            [("a.md".into(), 1), ("a.md".into(), 1), ("x/c.md".into(), 1)]
        );
        // A closer `b` elsewhere does not take a bare name from the root one.
        v.upsert("x/b.md", "nested\n");
        assert_eq!(v.backlinks("b.md").len(), 3);
        v.remove("b.md");
        assert_eq!(v.backlinks("x/b.md").len(), 2, "[[b]] now names x/b.md");
        assert_eq!(
            v.broken().len(),
            1,
            "the relative link to ../b.md is broken"
        );
        v.upsert("a.md", "no links\n");
        assert!(v.backlinks("x/b.md").is_empty());
    }

    /// A move's candidates are the notes whose links it changes: not every
    /// note naming a note of the same name.
    #[test]
    fn move_candidates_are_the_notes_whose_links_the_move_changes() {
        let mut notes: Vec<(String, String)> = vec![
            ("x.md".into(), "root x\n".into()),
            ("deep/x.md".into(), "deep x\n".into()),
            ("deep/near.md".into(), "[here](x.md)\n".into()),
        ];
        notes.extend((0..50).map(|i| (format!("n{i}.md"), "see [[x]]\n".to_string())));
        let v = Vault::build(&notes, Vec::new());
        let candidates = |from: &str, to: &str| {
            let after = v.files().moved(from, to);
            let mv = crate::vault::rewrite::Move {
                from,
                to,
                before: v.files(),
                after: &after,
            };
            v.move_candidates(from, to, |path, link| mv.wanted(path, link).is_some())
        };
        let unlinked: Vec<String> = candidates("deep/x.md", "deep/y.md").into_iter().collect();
        assert_eq!(unlinked, ["deep/near.md", "deep/x.md"]);
        let linked = candidates("x.md", "z.md");
        assert_eq!(linked.len(), 51, "{linked:?}");
        assert!(linked.contains("n7.md") && linked.contains("x.md"));
    }

    #[test]
    fn orphans_broken_links_and_attachments() {
        let mut v = vault(
            &[
                ("a.md", "![[pic.png]] [[nowhere]] [[a]]\n"),
                ("lonely.md", "[[lonely]]\n"),
            ],
            &["img/pic.png"],
        );
        assert_eq!(v.orphans(), ["lonely.md"]);
        let broken = v.broken();
        assert_eq!(broken.len(), 1);
        assert_eq!(broken[0].target, "nowhere");
        v.set_attachments(Vec::new());
        assert_eq!(v.broken().len(), 2);
        assert_eq!(v.orphans(), ["a.md", "lonely.md"]);
    }

    /// Notes read on two threads make the vault that taking them in one by
    /// one makes: the same facts, backlinks, broken links and orphans.
    #[test]
    fn a_vault_built_on_two_threads_equals_one_built_note_by_note() {
        let notes: Vec<(String, String)> = (0..300)
            .map(|i| {
                let text = format!(
                    "# N{i}\n[[n{}]] [up](../n{}.md) [[gone{}]] #t{}\n{}",
                    (i * 7) % 300,
                    (i + 1) % 300,
                    i % 5,
                    i % 3,
                    "words ".repeat(i % 40)
                );
                (format!("f{}/n{i}.md", i % 4), text)
            })
            .collect();
        let built = Vault::build(&notes, Vec::new());
        let mut one_by_one = Vault::default();
        for (path, content) in &notes {
            one_by_one.upsert(path, content);
        }
        assert!(built.notes().eq(one_by_one.notes()));
        let linked = notes
            .iter()
            .filter(|(path, _)| built.backlinks(path).len() == 1)
            .count();
        assert_eq!(linked, notes.len(), "each note is named by one [[n..]]");
        for (path, _) in &notes {
            assert_eq!(built.backlinks(path), one_by_one.backlinks(path), "{path}");
        }
        assert!(!built.broken().is_empty());
        assert_eq!(built.broken(), one_by_one.broken());
        assert_eq!(built.orphans(), one_by_one.orphans());
        assert_eq!(
            built.move_candidates("f0/n0.md", "x.md", |_, _| true),
            one_by_one.move_candidates("f0/n0.md", "x.md", |_, _| true)
        );
    }

    #[test]
    fn tag_counts_include_parents() {
        let v = vault(
            &[("a.md", "#p/x #q\n"), ("b.md", "---\ntags: p\n---\n")],
            &[],
        );
        let counts: Vec<(String, usize)> = v.tag_counts().into_iter().collect();
        assert_eq!(
            counts,
            [("p".into(), 2), ("p/x".into(), 1), ("q".into(), 1)]
        );
    }
}
