//! What a caller may do ([`Rights`]: read, write, propose, review, sync) and
//! where ([`Prefixes`]: folders ending in `/` or single notes).

use std::fmt;

/// One right a caller may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    Read,
    Write,
    Propose,
    Review,
    Sync,
}

impl Right {
    pub const ALL: [Right; 5] = [
        Right::Read,
        Right::Write,
        Right::Propose,
        Right::Review,
        Right::Sync,
    ];

    /// The name in the file and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Right::Read => "read",
            Right::Write => "write",
            Right::Propose => "propose",
            Right::Review => "review",
            Right::Sync => "sync",
        }
    }

    /// The right named `name`.
    pub fn named(name: &str) -> Option<Right> {
        Right::ALL.into_iter().find(|r| r.name() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of rights.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Rights(u8);

impl Rights {
    pub fn all() -> Rights {
        Rights(Right::ALL.iter().fold(0, |bits, r| bits | r.bit()))
    }

    pub fn none() -> Rights {
        Rights(0)
    }

    pub fn has(self, right: Right) -> bool {
        self.0 & right.bit() != 0
    }

    pub fn add(&mut self, right: Right) {
        self.0 |= right.bit();
    }

    pub fn remove(&mut self, right: Right) {
        self.0 &= !right.bit();
    }

    /// The rights both sets hold.
    pub fn and(self, other: Rights) -> Rights {
        Rights(self.0 & other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The rights this set holds and `other` does not.
    pub fn without(self, other: Rights) -> Rights {
        Rights(self.0 & !other.0)
    }

    /// The rights' names, in [`Right::ALL`]'s order.
    pub fn names(self) -> Vec<&'static str> {
        Right::ALL
            .into_iter()
            .filter(|r| self.has(*r))
            .map(Right::name)
            .collect()
    }
}

impl fmt::Debug for Rights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// Prefixes of note paths: a folder (`inbox/`, everything under it) or one
/// note (`todo.md`). Empty means everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prefixes(Vec<String>);

impl Prefixes {
    pub fn everything() -> Prefixes {
        Prefixes(Vec::new())
    }

    /// `prefixes`, each already checked by [`clean_prefix`].
    pub fn of(prefixes: Vec<String>) -> Prefixes {
        Prefixes(prefixes)
    }

    pub fn is_everything(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether note path `path` (relative, normalized) is inside.
    pub fn holds(&self, path: &str) -> bool {
        self.0.is_empty()
            || self.0.iter().any(|prefix| {
                if prefix.ends_with('/') {
                    path.starts_with(prefix.as_str())
                } else {
                    path == prefix
                }
            })
    }

    /// Whether anything under folder `folder` (relative, no trailing slash;
    /// empty for the root) may be inside: for listing folders.
    pub fn reaches(&self, folder: &str) -> bool {
        if self.0.is_empty() || folder.is_empty() {
            return true;
        }
        let folder = format!("{folder}/");
        self.0
            .iter()
            .any(|prefix| prefix.starts_with(&folder) || folder.starts_with(prefix.as_str()))
    }

    /// The prefixes, as written.
    pub fn list(&self) -> &[String] {
        &self.0
    }
}

/// Why `prefix` is not a clean relative prefix (`None`: it is): a folder
/// ending in `/` or a note ending in `.md`, relative, with no empty, `.`,
/// `..` or hidden part, no backslash or control character.
pub fn clean_prefix(prefix: &str) -> Option<&'static str> {
    if prefix.is_empty() {
        return Some("is empty");
    }
    if prefix.starts_with('/') {
        return Some("is absolute: write it relative to the notes root");
    }
    if prefix.chars().any(|c| c.is_control() || c == '\\') {
        return Some("holds a control character or a backslash");
    }
    let (body, is_folder) = match prefix.strip_suffix('/') {
        Some(body) => (body, true),
        None => (prefix, false),
    };
    if !is_folder && !prefix.to_ascii_lowercase().ends_with(".md") {
        return Some("is neither a folder ending in / nor a note ending in .md");
    }
    for part in body.split('/') {
        if part.is_empty() {
            return Some("has an empty part (//)");
        }
        if part == "." || part == ".." {
            return Some("has a . or .. part");
        }
        if part.starts_with('.') {
            return Some("names a hidden part, which mirai never serves");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_hold_what_is_under_them_and_notes_only_themselves() {
        let p = Prefixes::of(vec!["inbox/".into(), "todo.md".into()]);
        assert!(p.holds("inbox/a.md"));
        assert!(p.holds("inbox/deep/a.md"));
        assert!(!p.holds("inbox2/a.md"));
        assert!(p.holds("todo.md"));
        assert!(!p.holds("todo.md.md"));
        assert!(p.reaches("inbox"));
        assert!(p.reaches("inbox/deep"));
        assert!(!p.reaches("secret"));
        assert!(Prefixes::everything().holds("x.md"));
    }

    #[test]
    fn unclean_prefixes_are_named() {
        for bad in [
            "", "/abs/", "a//b/", "../up/", "./x/", ".git/", "inbox", "a\\b/",
        ] {
            assert!(clean_prefix(bad).is_some(), "{bad}");
        }
        for good in ["inbox/", "a/b/", "todo.md", "A/Note.MD"] {
            assert_eq!(clean_prefix(good), None, "{good}");
        }
    }

    #[test]
    fn rights_are_a_set() {
        let mut r = Rights::none();
        r.add(Right::Write);
        r.add(Right::Propose);
        assert_eq!(r.names(), ["write", "propose"]);
        r.remove(Right::Write);
        assert!(!r.has(Right::Write));
        assert_eq!(Rights::all().names().len(), 5);
    }
}
