//! The one reader of a note's markdown structure: YAML front matter, code
//! fences and ATX headings, line by line from the top, by CommonMark's rules
//! where they apply. The chunker cuts at the headings it reports and the
//! title field takes the front matter's `title` or the first heading it
//! reports, so the two can never disagree about what is code and what is a
//! heading.
//!
//! - Front matter: the first line is exactly `---`; it ends at a line that
//!   is exactly `---` or `...` (or runs to the end of the note).
//! - Fences: three or more backticks or tildes, indented by at most three
//!   spaces (a backtick fence's info string holds no backtick); closed by a
//!   line of at least as many of the same character and nothing else, or by
//!   the end of the note.
//! - Headings: one to six `#`, indented by at most three spaces, followed by
//!   a space, a tab or the end of the line; the text is trimmed, and a closing
//!   run of `#` is dropped when a space or tab precedes it.

/// What one line of a note is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// YAML front matter, its delimiter lines included.
    FrontMatter,
    /// A code fence's opening or closing line, or a line inside a fence.
    Code,
    /// An ATX heading: its level, 1 to 6, and its text (maybe empty).
    Heading(u8, &'a str),
    /// Anything else.
    Text,
}

/// One line of a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// Byte offset of the line's start in the note.
    pub start: usize,
    /// The line without its line ending (`\n` or `\r\n`).
    pub text: &'a str,
    pub kind: Kind<'a>,
}

/// The lines of `content`, each with what it is, in order.
pub fn lines(content: &str) -> Lines<'_> {
    Lines {
        rest: content.split_inclusive('\n'),
        pos: 0,
        state: State::Start,
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// Before the first line: front matter may open.
    Start,
    FrontMatter,
    Body,
    /// Inside a fence opened by `len` (at least 3) of the byte `ch`.
    Fence {
        ch: u8,
        len: usize,
    },
}

/// The iterator [`lines`] returns.
pub struct Lines<'a> {
    rest: std::str::SplitInclusive<'a, char>,
    pos: usize,
    state: State,
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        let raw = self.rest.next()?;
        let start = self.pos;
        self.pos += raw.len();
        let text = raw.trim_end_matches(['\n', '\r']);
        let kind = match self.state {
            State::Start if text == "---" => {
                self.state = State::FrontMatter;
                Kind::FrontMatter
            }
            State::FrontMatter => {
                if text == "---" || text == "..." {
                    self.state = State::Body;
                }
                Kind::FrontMatter
            }
            State::Fence { ch, len } => {
                if closes_fence(text, ch, len) {
                    self.state = State::Body;
                }
                Kind::Code
            }
            State::Start | State::Body => {
                self.state = State::Body;
                if let Some((ch, len)) = opens_fence(text) {
                    self.state = State::Fence { ch, len };
                    Kind::Code
                } else if let Some((level, heading)) = atx_heading(text) {
                    Kind::Heading(level, heading)
                } else {
                    Kind::Text
                }
            }
        };
        Some(Line { start, text, kind })
    }
}

/// The note's title: the front matter's `title`, else the text of the first
/// heading; `None` when neither is there or both are empty.
pub fn title(content: &str) -> Option<&str> {
    let mut heading = None;
    for line in lines(content) {
        match line.kind {
            Kind::FrontMatter => {
                if let Some(v) = line.text.strip_prefix("title:") {
                    let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
                    if !v.is_empty() {
                        return Some(v);
                    }
                }
            }
            Kind::Heading(_, text) if !text.is_empty() => {
                heading = Some(text);
                break;
            }
            _ => {}
        }
    }
    heading
}

/// `text` without up to three leading spaces; `None` when it has more.
fn indent_ok(text: &str) -> Option<&str> {
    let trimmed = text.trim_start_matches(' ');
    (text.len() - trimmed.len() <= 3).then_some(trimmed)
}

fn atx_heading(text: &str) -> Option<(u8, &str)> {
    let t = indent_ok(text)?;
    let hashes = t.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &t[hashes..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim_matches([' ', '\t']);
    // A closing run of `#` counts only after a space or tab (or alone).
    let body = rest.trim_end_matches('#');
    let text = if body.is_empty() || body.ends_with([' ', '\t']) {
        body.trim_end_matches([' ', '\t'])
    } else {
        rest
    };
    Some((hashes as u8, text))
}

fn opens_fence(text: &str) -> Option<(u8, usize)> {
    let t = indent_ok(text)?;
    let ch = *t.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = t.bytes().take_while(|&b| b == ch).count();
    // A backtick fence's info string may not contain a backtick (CommonMark).
    (len >= 3 && !(ch == b'`' && t[len..].contains('`'))).then_some((ch, len))
}

fn closes_fence(text: &str, ch: u8, len: usize) -> bool {
    let Some(t) = indent_ok(text) else {
        return false;
    };
    let n = t.bytes().take_while(|&b| b == ch).count();
    n >= len && t[n..].trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(content: &str) -> Vec<Kind<'_>> {
        lines(content).map(|l| l.kind).collect()
    }

    #[test]
    fn lines_are_exact_and_classified() {
        let note = "---\ntitle: T\n---\n# One #\r\ntext\n```sh\n# code\n```\n##\n#tag\n";
        let got: Vec<_> = lines(note).collect();
        assert_eq!(
            got.iter().map(|l| l.kind).collect::<Vec<_>>(),
            vec![
                Kind::FrontMatter,
                Kind::FrontMatter,
                Kind::FrontMatter,
                Kind::Heading(1, "One"),
                Kind::Text,
                Kind::Code,
                Kind::Code,
                Kind::Code,
                Kind::Heading(2, ""),
                Kind::Text,
            ]
        );
        assert_eq!(got[3].text, "# One #");
        assert_eq!(got[4].start, note.find("text").unwrap());
    }

    #[test]
    fn heading_text_follows_commonmark() {
        assert_eq!(kinds("   ### C# ##  "), vec![Kind::Heading(3, "C#")]);
        assert_eq!(kinds("# C#"), vec![Kind::Heading(1, "C#")]);
        assert_eq!(kinds("#\tTabbed"), vec![Kind::Heading(1, "Tabbed")]);
        assert_eq!(kinds("# ###"), vec![Kind::Heading(1, "")]);
        assert_eq!(kinds("    # code"), vec![Kind::Text]);
        assert_eq!(kinds("####### seven"), vec![Kind::Text]);
    }

    #[test]
    fn fences_close_only_on_their_own_kind_and_length() {
        let note = "````\n```\n# a\n````\n~~~\n```\n# b\n~~~\n```x`\n# c\n";
        assert_eq!(
            kinds(note),
            vec![
                Kind::Code,
                Kind::Code,
                Kind::Code,
                Kind::Code,
                Kind::Code,
                Kind::Code,
                Kind::Code,
                Kind::Code,
                Kind::Text,
                Kind::Heading(1, "c"),
            ]
        );
        // An unclosed fence runs to the end of the note.
        assert_eq!(kinds("```\n# x\n"), vec![Kind::Code, Kind::Code]);
    }

    #[test]
    fn titles_come_from_front_matter_or_first_heading() {
        assert_eq!(
            title("---\nid: 1\ntitle: 'Hi there'\n---\n# H\n"),
            Some("Hi there")
        );
        assert_eq!(title("---\ntitle:\n---\n#\n## Real ##\n"), Some("Real"));
        assert_eq!(title("```\n# not\n```\n## Real ##\n"), Some("Real"));
        assert_eq!(title("plain\n"), None);
        // Front matter must open on the first line.
        assert_eq!(title("\n---\ntitle: no\n---\n"), None);
    }
}
