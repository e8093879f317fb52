//! A move's link rewrite, pure text in and out: given the files links can
//! reach before and after note `from` becomes `to`, each note's links that
//! resolved to `from` are rewritten to reach `to`, and links whose meaning the
//! move would change (a bare `[[name]]` that `to` would take, a relative
//! path in the moved note itself) are rewritten to keep reaching what they
//! reached, each in its own form:
//!
//! - a wikilink keeps its alias, `#heading` or `#^block`, its `!` and a
//!   written `.md`; a bare name stays a bare name while that name is
//!   unambiguous, else it becomes the path from the vault's root (without
//!   `.md`); a path stays a path;
//! - a markdown link (inline, image, or a reference definition
//!   `[x]: path.md`) keeps its fragment, its title and its angle brackets; a
//!   relative path stays relative to the linking note's folder (after the
//!   move, for the moved note), one from the root (`/a.md`) stays so, and a
//!   path written without `.md` stays without; spaces and what a destination
//!   cannot hold are percent-encoded unless the link is in angle brackets.
//!
//! Only the bytes of each link's path change ([`Link::path_span`], found by
//! pulldown-cmark in [`super::scan`]); code, front matter and everything
//! else stay byte for byte. Reference-style links are rewritten through
//! their definition.

use std::ops::Range;

use super::front_matter;
use super::resolve::{folder_of, Files, Moved};
use super::scan::{self, Link};

/// One move: the note's path before and after, and the files links can
/// reach on either side of it.
pub struct Move<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub before: &'a Files,
    pub after: &'a Moved<'a>,
}

/// A link the move would break that cannot be written to reach its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwritable {
    pub line: u32,
    pub link: String,
}

/// A note's new text and how many of its links changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    pub content: String,
    pub links: usize,
}

impl Move<'_> {
    /// Where note `path` is after the move.
    pub fn new_path<'p>(&'p self, path: &'p str) -> &'p str {
        if path == self.from {
            self.to
        } else {
            path
        }
    }

    /// Where `link` of note `path` (its path before the move) must reach after
    /// the move when the move would change what it reaches (`None`: it was
    /// broken before, or it reaches the same file after): its file's new path.
    pub fn wanted(&self, path: &str, link: &Link) -> Option<&str> {
        let reached = self.before.resolve(path, link)?;
        let want = self.new_path(reached);
        (self.after.resolve(self.new_path(path), link) != Some(want)).then_some(want)
    }

    /// Note `path` (its path before the move), whose text is `content`,
    /// with every link the move would break rewritten; `None` when no link
    /// needs it.
    pub fn rewrite(&self, path: &str, content: &str) -> Result<Option<Rewritten>, Unwritable> {
        let body_start = front_matter::parse(content).body_start();
        let found = scan::scan(content, body_start);
        let new_path = self.new_path(path);
        let mut edits: Vec<(Range<usize>, String)> = Vec::new();
        for link in found.links.iter().chain(&found.definitions) {
            let Some(span) = link.path_span.clone() else {
                continue; // reference-style: its definition is rewritten
            };
            let Some(want) = self.wanted(path, link) else {
                continue; // broken before the move, or it still reaches its file
            };
            let written = self
                .candidates(link, &content[span.clone()], want, new_path)
                .into_iter()
                .find(|(as_path, _)| {
                    let probe = Link {
                        path: as_path.clone(),
                        ..link.clone()
                    };
                    self.after.resolve(new_path, &probe) == Some(want)
                })
                .ok_or_else(|| Unwritable {
                    line: link.line,
                    link: content[link.span.clone()].to_string(),
                })?;
            edits.push((span, written.1));
        }
        if edits.is_empty() {
            return Ok(None);
        }
        edits.sort_by_key(|(span, _)| span.start);
        let mut out = String::with_capacity(content.len() + 64 * edits.len());
        let mut at = 0;
        for (span, text) in &edits {
            out.push_str(&content[at..span.start]);
            out.push_str(text);
            at = span.end;
        }
        out.push_str(&content[at..]);
        Ok(Some(Rewritten {
            content: out,
            links: edits.len(),
        }))
    }

    /// The ways `link` (its file part written as `raw`) may name `want`
    /// from note `new_path`, in the order they are tried: (the path as
    /// resolution reads it, the text to write).
    fn candidates(
        &self,
        link: &Link,
        raw: &str,
        want: &str,
        new_path: &str,
    ) -> Vec<(String, String)> {
        let is_note = has_md(want);
        let keeps_md = has_md(&link.path) || !is_note;
        let named = if keeps_md {
            want.to_string()
        } else {
            want[..want.len() - 3].to_string()
        };
        if link.wiki {
            if wiki_unsafe(&named) {
                return Vec::new();
            }
            let mut found = Vec::new();
            if !link.path.contains('/') {
                let name = named.rsplit('/').next().unwrap_or(&named).to_string();
                found.push((name.clone(), name));
            }
            found.push((named.clone(), named));
            return found;
        }
        let as_path = if raw.trim_start().starts_with('/') {
            format!("/{named}")
        } else {
            relative(folder_of(new_path), &named)
        };
        let text = if link.angle {
            if as_path.contains(['<', '>', '\n', '\r']) {
                return Vec::new();
            }
            as_path.clone()
        } else {
            encode(&as_path)
        };
        vec![(as_path, text)]
    }
}

fn has_md(path: &str) -> bool {
    path.len() >= 3
        && path.is_char_boundary(path.len() - 3)
        && path[path.len() - 3..].eq_ignore_ascii_case(".md")
}

/// Characters a wikilink's target cannot hold.
fn wiki_unsafe(path: &str) -> bool {
    path.contains(['[', ']', '|', '#', '^', '\n', '\r'])
}

/// `target` (from the root) as a path relative to `folder`.
fn relative(folder: &str, target: &str) -> String {
    let from: Vec<&str> = folder.split('/').filter(|p| !p.is_empty()).collect();
    let to: Vec<&str> = target.split('/').collect();
    let (to_folders, name) = to.split_at(to.len() - 1);
    let common = from
        .iter()
        .zip(to_folders)
        .take_while(|(a, b)| a == b)
        .count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to_folders[common..]);
    parts.extend(name);
    parts.join("/")
}

/// A path as a markdown destination: percent-encoded where a destination
/// outside angle brackets cannot hold a character as it is.
fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            ' ' | '%' | '(' | ')' | '<' | '>' | '#' | '?' | '\\' | '[' | ']' | '"' | '\'' => {
                out.push_str(&format!("%{:02X}", c as u32));
            }
            c if c.is_control() => {
                let mut buf = [0u8; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(paths: &[&str]) -> Files {
        let mut files = Files::default();
        for path in paths {
            files.insert(path);
        }
        files
    }

    /// `content` of note `path` after moving `from` to `to` in a vault of `paths`.
    fn moved(paths: &[&str], from: &str, to: &str, path: &str, content: &str) -> String {
        let before = files(paths);
        let after = before.moved(from, to);
        let mv = Move {
            from,
            to,
            before: &before,
            after: &after,
        };
        match mv.rewrite(path, content).unwrap() {
            Some(done) => done.content,
            None => content.to_string(),
        }
    }

    #[test]
    fn every_form_is_kept() {
        let paths = ["a.md", "n.md", "x/y.md"];
        let note =
            "---\nup: \"[[a]]\"\n---\n[[a]] [[a|Alias]] [[a#Head]] [[a#^blk]] ![[a]] [[a.md]]\n\
                    [t](a.md) [t](a.md#h \"title\") [t](<a.md>) ![i](./a.md) [t](a)\n\
                    [ref][r] [r]\n\n`[[a]]` and\n```\n[[a]] [t](a.md)\n```\n\n[r]: a.md \"T\"\n";
        let out = moved(&paths, "a.md", "b/new name.md", "n.md", note);
        assert_eq!(
            out,
            "---\nup: \"[[a]]\"\n---\n[[new name]] [[new name|Alias]] [[new name#Head]] \
             [[new name#^blk]] ![[new name]] [[new name.md]]\n\
             [t](b/new%20name.md) [t](b/new%20name.md#h \"title\") [t](<b/new name.md>) \
             ![i](b/new%20name.md) [t](b/new%20name)\n\
             [ref][r] [r]\n\n`[[a]]` and\n```\n[[a]] [t](a.md)\n```\n\n[r]: b/new%20name.md \"T\"\n"
        );
    }

    #[test]
    fn paths_stay_paths_and_relative_links_follow_the_moved_note() {
        let paths = ["a/one.md", "a/two.md", "b/three.md", "pic.png"];
        let out = moved(
            &paths,
            "a/one.md",
            "c/d/one.md",
            "b/three.md",
            "[[a/one]] [x](../a/one.md)\n",
        );
        assert_eq!(out, "[[c/d/one]] [x](../c/d/one.md)\n");
        // The moved note's own relative links keep reaching their files.
        let out = moved(
            &paths,
            "a/one.md",
            "c/d/one.md",
            "a/one.md",
            "[t](two.md) [s](one.md) ![p](../pic.png) [[two]]\n",
        );
        assert_eq!(
            out,
            "[t](../../a/two.md) [s](one.md) ![p](../../pic.png) [[two]]\n"
        );
    }

    #[test]
    fn a_bare_name_the_move_would_make_ambiguous_gets_its_path() {
        // [[note]] reached deep/x/note.md; moving a.md to top/note.md would take it.
        let paths = ["a.md", "deep/x/note.md", "n.md"];
        let out = moved(&paths, "a.md", "top/note.md", "n.md", "[[note]] [[a]]\n");
        assert_eq!(out, "[[deep/x/note]] [[note]]\n");
        // Two equally short names: the moved one gets its path.
        let paths = ["a.md", "p/note.md", "n.md"];
        let out = moved(&paths, "a.md", "q/note.md", "n.md", "[[note]] [[a|A]]\n");
        assert_eq!(out, "[[note]] [[q/note|A]]\n");
    }

    #[test]
    fn untouched_notes_answer_none() {
        let before = files(&["a.md", "n.md"]);
        let after = before.moved("a.md", "b.md");
        let mv = Move {
            from: "a.md",
            to: "b.md",
            before: &before,
            after: &after,
        };
        assert_eq!(mv.rewrite("n.md", "[[other]] `[[a]]`\n"), Ok(None));
        assert_eq!(relative("x/y", "x/z/n.md"), "../z/n.md");
        assert_eq!(relative("", "n.md"), "n.md");
    }
}
