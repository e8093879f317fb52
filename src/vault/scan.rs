//! One pass of pulldown-cmark over a note's body (after its front matter):
//! its links and its inline `#tags`. The parser decides what is code (fences,
//! indented blocks, inline code spans) and what is a link, so nothing inside
//! code is ever taken for either.
//!
//! Links: `[[target]]`, `[[target|alias]]`, `[[target#heading]]`,
//! `[[target#^block]]`, `![[embed]]`, and markdown links and images whose
//! destination is a relative path (`[text](path.md#heading)`,
//! `(<path with spaces.md>)`), percent-decoded. External URLs (any scheme:
//! `https:`, `mailto:`, ...), autolinks and links to a heading of the same
//! note (`#heading`, `[[#heading]]`) are not links to another file and are
//! left out.
//!
//! Tags: `#` at the start of a text or after whitespace, then letters,
//! digits, `_`, `-` and `/`, with at least one character that is not a digit
//! (Obsidian's rule); lowercased.

use std::ops::Range;

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Longest `context` a link keeps of its line, in characters.
pub const MAX_CONTEXT_CHARS: usize = 200;

/// How a link is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `[[target]]`
    Wikilink,
    /// `![[target]]`, or a markdown image `![alt](path)`.
    Embed,
    /// `[text](path)`
    Markdown,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Wikilink => "wikilink",
            Kind::Embed => "embed",
            Kind::Markdown => "markdown",
        }
    }
}

/// One link of a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub kind: Kind,
    /// Written in the wikilink form (`[[...]]`, `![[...]]`), where the target
    /// is a name or a path from the vault's root; else a markdown path,
    /// relative to the linking note.
    pub wiki: bool,
    /// The target as written (a markdown link's percent-decoded), with its
    /// `#heading` or `#^block`: `trips/lisbon#Day two`.
    pub target: String,
    /// The file part of the target, without `#...`: what resolution looks up.
    pub path: String,
    /// The alias or the link's text (a plain wikilink's is its target).
    pub text: String,
    /// 1-based line of the link's start.
    pub line: u32,
    /// The link's bytes in the note, `[[` or `[` (or `!`) to the end.
    pub span: Range<usize>,
    /// The linking line, trimmed, at most [`MAX_CONTEXT_CHARS`] characters.
    pub context: String,
    /// Where the file part of the target is written in the note (a
    /// wikilink's name or path; a markdown destination's path, without `<>`
    /// and `#...`), for rewriting it; `None` for a reference-style link,
    /// whose path is written in its definition (see [`Scan::definitions`]).
    pub path_span: Option<Range<usize>>,
    /// A markdown destination written in angle brackets: `(<a b.md>)`.
    pub angle: bool,
}

/// What one pass over a note finds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    pub links: Vec<Link>,
    /// Inline tags, lowercased, without `#`, in order of first appearance, once each.
    pub tags: Vec<String>,
    /// Reference definitions (`[label]: path.md`) naming a relative path, as
    /// markdown links whose `text` is the label: where reference-style links
    /// write their destination.
    pub definitions: Vec<Link>,
}

/// A link whose text is still being read.
struct Open {
    link_type: LinkType,
    dest: String,
    image: bool,
    span: Range<usize>,
    text: String,
    /// Where the link's text ends at the latest (the end of the last event
    /// inside it): the destination is after it.
    inner_end: usize,
}

/// Scans `content` from byte `body_start` (where its front matter ends).
pub fn scan(content: &str, body_start: usize) -> Scan {
    let body = &content[body_start..];
    let line_starts = line_starts(content);
    let options = Options::ENABLE_WIKILINKS
        | Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    let mut found = Scan::default();
    let mut contexts = Contexts::default();
    let mut open: Vec<Open> = Vec::new();
    let mut in_code = false;
    let parser = Parser::new_ext(body, options);
    for (label, def) in parser.reference_definitions().iter() {
        let span = def.span.start + body_start..def.span.end + body_start;
        if let Some(link) = definition(label, &def.dest, span, content, &line_starts, &mut contexts)
        {
            found.definitions.push(link);
        }
    }
    for (event, range) in parser.into_offset_iter() {
        let span = range.start + body_start..range.end + body_start;
        let closes = matches!(event, Event::End(TagEnd::Link | TagEnd::Image));
        if let Some(top) = open.last_mut().filter(|_| !closes) {
            top.inner_end = top.inner_end.max(span.end);
        }
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code = true,
            Event::End(TagEnd::CodeBlock) => in_code = false,
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            }) => open.push(Open {
                link_type,
                dest: dest_url.into_string(),
                image: false,
                inner_end: span.start + 1,
                span,
                text: String::new(),
            }),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                ..
            }) => open.push(Open {
                link_type,
                dest: dest_url.into_string(),
                image: true,
                inner_end: span.start + 2,
                span,
                text: String::new(),
            }),
            Event::End(TagEnd::Link | TagEnd::Image) => {
                if let Some(done) = open.pop() {
                    if let Some(parent) = open.last_mut() {
                        parent.text.push_str(&done.text);
                        parent.inner_end = parent.inner_end.max(done.span.end);
                    }
                    if let Some(link) = finish(done, content, &line_starts, &mut contexts) {
                        found.links.push(link);
                    }
                }
            }
            Event::Text(text) if !in_code => match open.last_mut() {
                Some(link) => link.text.push_str(&text),
                None => {
                    let after_space = span.start == body_start
                        || content[..span.start]
                            .chars()
                            .next_back()
                            .is_none_or(|c| c.is_whitespace() || !is_tag_char(c));
                    inline_tags(&text, after_space, &mut found.tags);
                }
            },
            Event::Code(code) => {
                if let Some(link) = open.last_mut() {
                    link.text.push_str(&code);
                }
            }
            _ => {}
        }
    }
    found
}

/// The context of the last line a link was found on, so many links on one
/// long line cost one look at it.
#[derive(Default)]
struct Contexts {
    line: usize,
    text: String,
}

impl Contexts {
    /// Line `line` (1-based) of `content`, trimmed, cut to [`MAX_CONTEXT_CHARS`].
    fn of(&mut self, line: usize, content: &str, line_starts: &[usize]) -> &str {
        if self.line != line {
            let start = line_starts[line - 1];
            let end = line_starts.get(line).map_or(content.len(), |next| next - 1);
            let whole = content[start..end].trim();
            let cut = whole
                .char_indices()
                .nth(MAX_CONTEXT_CHARS)
                .map_or(whole.len(), |(at, _)| at);
            self.text.clear();
            self.text.push_str(&whole[..cut]);
            self.line = line;
        }
        &self.text
    }
}

/// The link `open` makes, or `None` when it names no other file.
fn finish(
    open: Open,
    content: &str,
    line_starts: &[usize],
    contexts: &mut Contexts,
) -> Option<Link> {
    let (wiki, target, path) = match open.link_type {
        LinkType::WikiLink { .. } => {
            let target = open.dest.trim().trim_end_matches('\\').trim().to_string();
            let path = target
                .split('#')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string();
            (true, target, path)
        }
        LinkType::Inline
        | LinkType::Reference
        | LinkType::Collapsed
        | LinkType::Shortcut
        | LinkType::ReferenceUnknown
        | LinkType::CollapsedUnknown
        | LinkType::ShortcutUnknown => {
            let dest = open.dest.trim();
            if is_external(dest) {
                return None;
            }
            let (raw_path, fragment) = match dest.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (dest, None),
            };
            let path = decode(raw_path);
            let target = match fragment {
                Some(fragment) => format!("{path}#{}", decode(fragment)),
                None => path.clone(),
            };
            (false, target, path)
        }
        LinkType::Autolink | LinkType::Email => return None,
    };
    if path.is_empty() {
        return None;
    }
    let kind = match (open.image, wiki) {
        (true, _) => Kind::Embed,
        (false, true) => Kind::Wikilink,
        (false, false) => Kind::Markdown,
    };
    let text = match open.link_type {
        LinkType::WikiLink { has_pothole: false } => target.clone(),
        _ => open.text,
    };
    let (path_span, angle) = match open.link_type {
        LinkType::WikiLink { has_pothole } => {
            (wiki_path_span(content, &open.span, has_pothole), false)
        }
        LinkType::Inline => {
            let text_end = content[open.inner_end..open.span.end]
                .find("](")
                .map(|at| open.inner_end + at + 2);
            match text_end.and_then(|at| destination(content, at, open.span.end)) {
                Some((range, angle)) => (Some(range), angle),
                None => (None, false),
            }
        }
        _ => (None, false),
    };
    let path_span = path_span.filter(|range| written_path(&content[range.clone()], wiki) == path);
    let line = line_starts.partition_point(|&start| start <= open.span.start);
    let context = contexts.of(line, content, line_starts).to_string();
    Some(Link {
        kind,
        wiki,
        target,
        path,
        text,
        line: u32::try_from(line).unwrap_or(u32::MAX),
        span: open.span,
        context,
        path_span,
        angle,
    })
}

/// The reference definition `[label]: dest` at `span`, as a markdown link
/// (`None`: its destination is external or empty, or cannot be located).
fn definition(
    label: &str,
    dest: &str,
    span: Range<usize>,
    content: &str,
    line_starts: &[usize],
    contexts: &mut Contexts,
) -> Option<Link> {
    let dest = dest.trim();
    if dest.is_empty() || is_external(dest) || dest.starts_with('#') {
        return None;
    }
    let raw = content.get(span.clone())?;
    let colon = label_end(raw)?;
    let (path_span, angle) = destination(content, span.start + colon, span.end)?;
    let path = written_path(&content[path_span.clone()], false);
    if path.is_empty() {
        return None;
    }
    let target = match dest.split_once('#') {
        Some((_, fragment)) => format!("{path}#{}", decode(fragment)),
        None => path.clone(),
    };
    let line = line_starts.partition_point(|&start| start <= span.start);
    let context = contexts.of(line, content, line_starts).to_string();
    Some(Link {
        kind: Kind::Markdown,
        wiki: false,
        target,
        path,
        text: label.to_string(),
        line: u32::try_from(line).unwrap_or(u32::MAX),
        span,
        context,
        path_span: Some(path_span),
        angle,
    })
}

/// Where the `]:` after a definition's label ends in `raw` (the definition's
/// text), past escaped brackets.
fn label_end(raw: &str) -> Option<usize> {
    let bytes = raw.as_bytes();
    let mut at = raw.find('[')? + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b']' if bytes.get(at + 1) == Some(&b':') => return Some(at + 2),
            _ => at += 1,
        }
    }
    None
}

/// The file part of a wikilink's target in `span` (`[[`, or `![[`, to `]]`):
/// before `|` (an alias) and `#`, trimmed.
fn wiki_path_span(content: &str, span: &Range<usize>, has_pothole: bool) -> Option<Range<usize>> {
    let raw = content.get(span.clone())?;
    let open = if raw.starts_with("![[") {
        3
    } else if raw.starts_with("[[") {
        2
    } else {
        return None;
    };
    let inner = raw.get(open..raw.len().checked_sub(2)?)?;
    if !raw.ends_with("]]") {
        return None;
    }
    let dest = match has_pothole {
        true => inner.split_once('|').map_or(inner, |(dest, _)| dest),
        false => inner,
    };
    let file = dest.split('#').next().unwrap_or_default();
    let trimmed = file.trim_start();
    let lead = file.len() - trimmed.len();
    let kept = trimmed.trim_end().trim_end_matches('\\').trim_end();
    let start = span.start + open + lead;
    Some(start..start + kept.len())
}

/// A markdown destination starting at or after `at` (spaces and one line
/// break skipped), before `end`: the range of its file part (inside `<>`,
/// before `#`) and whether it is in angle brackets.
fn destination(content: &str, at: usize, end: usize) -> Option<(Range<usize>, bool)> {
    let bytes = &content.as_bytes()[..end];
    let mut at = at;
    let mut breaks = 0;
    while at < bytes.len() && matches!(bytes[at], b' ' | b'\t' | b'\n' | b'\r') {
        if bytes[at] == b'\n' {
            breaks += 1;
        }
        at += 1;
    }
    if breaks > 1 || at >= bytes.len() {
        return None;
    }
    let angle = bytes[at] == b'<';
    let start = if angle { at + 1 } else { at };
    let mut i = start;
    let mut depth = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'>' | b'\n' if angle => break,
            b'#' => break,
            b' ' | b'\t' | b'\n' | b'\r' if !angle => break,
            b'(' if !angle => depth += 1,
            b')' if !angle => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => break,
            },
            _ => {}
        }
        i += 1;
    }
    let i = i.min(bytes.len());
    content.get(start..i)?;
    Some((start..i, angle))
}

/// The path a link's written file part names: a wikilink's trimmed; a
/// markdown one's with backslash escapes and percent-encoding undone.
fn written_path(raw: &str, wiki: bool) -> String {
    if wiki {
        return raw.trim().trim_end_matches('\\').trim().to_string();
    }
    let mut unescaped = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(&next)) if next.is_ascii_punctuation() => {
                unescaped.push(next);
                chars.next();
            }
            _ => unescaped.push(c),
        }
    }
    decode(unescaped.trim())
}

/// A destination with a scheme (`https:`, `mailto:`, `obsidian:`) or a
/// network path (`//host/...`): not a file of the vault.
pub fn is_external(dest: &str) -> bool {
    if dest.starts_with("//") {
        return true;
    }
    let Some((scheme, _)) = dest.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Percent-decoded, when the result is UTF-8; else as written.
fn decode(raw: &str) -> String {
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_or_else(|_| raw.to_string(), |s| s.into_owned())
}

/// Byte offsets where each line of `content` starts.
fn line_starts(content: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(content.match_indices('\n').map(|(at, _)| at + 1))
        .collect()
}

fn is_tag_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '/')
}

/// Adds the `#tags` of one text run to `tags`; `after_space`: whether the
/// run's start may begin a tag.
fn inline_tags(text: &CowStr<'_>, after_space: bool, tags: &mut Vec<String>) {
    if !text.contains('#') {
        return; // most runs: no tag can start in them
    }
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let may_start = match previous {
            None => after_space,
            Some(p) => p.is_whitespace(),
        };
        previous = Some(c);
        if c != '#' || !may_start {
            continue;
        }
        let rest = &text[at + 1..];
        let len: usize = rest
            .chars()
            .take_while(|&c| is_tag_char(c))
            .map(char::len_utf8)
            .sum();
        let tag = rest[..len].trim_matches('/');
        if tag.chars().any(|c| !c.is_ascii_digit()) {
            let tag = tag.to_lowercase();
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        while chars.peek().is_some_and(|&(i, _)| i < at + 1 + len) {
            previous = chars.next().map(|(_, c)| c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(note: &str) -> Vec<(Kind, String, String, String, u32)> {
        scan(note, 0)
            .links
            .into_iter()
            .map(|l| (l.kind, l.target, l.path, l.text, l.line))
            .collect()
    }

    fn one(
        kind: Kind,
        target: &str,
        path: &str,
        text: &str,
        line: u32,
    ) -> (Kind, String, String, String, u32) {
        (kind, target.into(), path.into(), text.into(), line)
    }

    #[test]
    fn every_link_form_is_found() {
        let note = "See [[a]] and [[b|Bee]].\n[[c#Head]] ![[pic.png]]\n[[d#^blk]]\n\
                    [t](x/y.md#h) [u](<with space.md>) [v](sp%20ace.md) ![i](img/p.png)\n";
        assert_eq!(
            links(note),
            vec![
                one(Kind::Wikilink, "a", "a", "a", 1),
                one(Kind::Wikilink, "b", "b", "Bee", 1),
                one(Kind::Wikilink, "c#Head", "c", "c#Head", 2),
                one(Kind::Embed, "pic.png", "pic.png", "pic.png", 2),
                one(Kind::Wikilink, "d#^blk", "d", "d#^blk", 3),
                one(Kind::Markdown, "x/y.md#h", "x/y.md", "t", 4),
                one(Kind::Markdown, "with space.md", "with space.md", "u", 4),
                one(Kind::Markdown, "sp ace.md", "sp ace.md", "v", 4),
                one(Kind::Embed, "img/p.png", "img/p.png", "i", 4),
            ]
        );
    }

    #[test]
    fn code_externals_and_self_links_are_not_links() {
        let note = "```\n[[fenced]]\n```\n    [[indented]]\n\n`[[inline]]` [w](https://x.org) \
                    [m](mailto:a@b.c) <https://auto.link> [s](#here) [[#Here]] [[real]]\n";
        assert_eq!(
            links(note),
            vec![one(Kind::Wikilink, "real", "real", "real", 6)]
        );
    }

    #[test]
    fn the_body_starts_after_front_matter_and_spans_are_exact() {
        let note = "---\nup: \"[[not]]\"\n---\nx [[yes|Y]] y\n";
        let found = scan(note, 21);
        assert_eq!(found.links.len(), 1);
        let link = &found.links[0];
        assert_eq!(&note[link.span.clone()], "[[yes|Y]]");
        assert_eq!(link.line, 4);
        assert_eq!(link.context, "x [[yes|Y]] y");
    }

    #[test]
    fn inline_tags_follow_obsidians_rule() {
        let note = "#Top and #nested/Deep, not a#b or #123 or `#code`\n# Heading #inhead\n\
                    ```\n#fenced\n```\nurl https://x.org/#frag #top again\n";
        assert_eq!(scan(note, 0).tags, vec!["top", "nested/deep", "inhead"]);
    }
}
