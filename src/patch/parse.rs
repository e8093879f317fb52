//! Patch text to [`Patch`]: finds the one file header (with git's extended header
//! lines), reads each hunk by its counts, and refuses anything `git apply` would
//! refuse or, worse, silently misread. Every refusal is a 400 `invalid_patch` whose
//! message names the patch line and says what was found.

use super::{Hunk, HunkLine, LineKind, Patch, Target};
use crate::error::{Error, Result};

const NO_NEWLINE: &str = "\\ No newline at end of file";

/// Parses a single-file unified diff. Text before the file header and after the
/// last hunk is ignored, so prose and markdown fences around a diff are harmless.
pub fn parse(text: &str) -> Result<Patch> {
    if text.trim().is_empty() {
        return Err(invalid("patch is empty"));
    }
    let lines = split_lines(text);
    let mut p = Parser { lines: &lines };
    p.patch()
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid_patch(message)
}

/// The patch's lines without their `\n`. A last line without a newline counts as a
/// full line: patches pasted into JSON often lose the final newline.
fn split_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') {
        lines.pop();
    }
    lines
}

/// Header lines are compared without a trailing `\r`, so a diff pasted with CRLF
/// line endings still has recognisable headers.
fn strip_cr(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

/// Shows a patch line in a message, shortened so one huge line cannot flood it.
fn quote(line: &str) -> String {
    let line = strip_cr(line);
    match line.char_indices().nth(120) {
        Some((cut, _)) => format!("`{}…`", &line[..cut]),
        None => format!("`{line}`"),
    }
}

/// The numbers of a hunk header, parsed as git does: `@@ -a[,b] +c[,d] @@` and
/// anything after (usually a section heading). A missing count means 1.
fn parse_hunk_header(line: &str) -> Option<(usize, usize, usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (old_start, old_count, rest) = parse_range(rest)?;
    let rest = rest.strip_prefix(" +")?;
    let (new_start, new_count, rest) = parse_range(rest)?;
    rest.starts_with(" @@")
        .then_some((old_start, old_count, new_start, new_count))
}

fn parse_range(s: &str) -> Option<(usize, usize, &str)> {
    let (start, rest) = parse_number(s)?;
    match rest.strip_prefix(',') {
        Some(rest) => {
            let (count, rest) = parse_number(rest)?;
            Some((start, count, rest))
        }
        None => Some((start, 1, rest)),
    }
}

fn parse_number(s: &str) -> Option<(usize, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let n = s[..digits].parse().ok()?;
    Some((n, &s[digits..]))
}

/// Undoes git's C-style quoting of unusual file names (`"a/caf\303\251.md"`).
/// Returns the name and the text after the closing quote.
fn unquote(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let name = String::from_utf8(out).ok()?;
                return Some((name, &body[i + 1..]));
            }
            b'\\' => {
                let c = *bytes.get(i + 1)?;
                i += 2;
                let byte = match c {
                    b'a' => 7,
                    b'b' => 8,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'v' => 11,
                    b'f' => 12,
                    b'r' => b'\r',
                    b'"' | b'\\' => c,
                    b'0'..=b'3' => {
                        let digits = bytes.get(i..i + 2)?;
                        if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                            return None;
                        }
                        i += 2;
                        (c - b'0') * 64 + (digits[0] - b'0') * 8 + (digits[1] - b'0')
                    }
                    _ => return None,
                };
                out.push(byte);
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// The hunk body's real shape, for messages about miscounted hunks.
struct BodyShape {
    context: usize,
    removed: usize,
    added: usize,
}

impl BodyShape {
    fn describe(&self, hunk_no: usize, old_start: usize, new_start: usize) -> String {
        format!(
            "the body of hunk {hunk_no} holds {} context, {} removed and {} added lines, \
             so its header would be `@@ -{},{} +{},{} @@`",
            self.context,
            self.removed,
            self.added,
            old_start,
            self.context + self.removed,
            new_start,
            self.context + self.added
        )
    }
}

struct Parser<'a> {
    lines: &'a [&'a str],
}

/// What the extended `diff --git` header said, checked against `---`/`+++` later.
#[derive(Default)]
struct GitHeader {
    line_no: usize,
    names: Option<(String, String)>,
    new_file: bool,
    deleted_file: bool,
}

impl<'a> Parser<'a> {
    fn line(&self, i: usize) -> Option<&'a str> {
        self.lines.get(i).copied()
    }

    fn patch(&mut self) -> Result<Patch> {
        let mut i = self.find_start()?;
        let mut git = None;
        if self.lines[i].starts_with("diff --git ") {
            let (header, next) = self.git_header(i)?;
            git = Some(header);
            i = next;
        }
        let old = self.file_name(i, "--- ")?;
        if !self.line(i + 1).is_some_and(|l| l.starts_with("+++ ")) {
            return Err(invalid(format!(
                "line {}: the `---` line must be followed by a `+++ b/<path>` line",
                i + 1
            )));
        }
        let new = self.file_name(i + 1, "+++ ")?;
        let (path, target) = match (old, new) {
            (Some(old), Some(new)) if old == new => (new, Target::Modify),
            (Some(old), Some(new)) => {
                return Err(invalid(format!(
                    "header names disagree: `---` names `{old}` but `+++` names `{new}`; \
                     renames are not supported, both lines must name the same note"
                )))
            }
            (None, Some(new)) => (new, Target::Create),
            (Some(old), None) => (old, Target::Delete),
            (None, None) => {
                return Err(invalid(format!(
                "line {}: both `---` and `+++` are /dev/null; name the note on at least one side",
                i + 2
            )))
            }
        };
        if let Some(git) = &git {
            check_git_header(git, &path, target)?;
        }
        let hunks = self.hunks(i + 2, target)?;
        Ok(Patch {
            path,
            target,
            hunks,
        })
    }

    /// Index of the first `diff --git` line, or of a `---` line directly followed by
    /// `+++`; everything before it is prose.
    fn find_start(&self) -> Result<usize> {
        let mut lone_minus = None;
        for (i, raw) in self.lines.iter().enumerate() {
            let line = strip_cr(raw);
            if line.starts_with("diff --git ") {
                return Ok(i);
            }
            if line.starts_with("--- ") {
                if self.line(i + 1).is_some_and(|n| n.starts_with("+++ ")) {
                    return Ok(i);
                }
                lone_minus.get_or_insert(i);
            }
            if line.starts_with("@@ -") && parse_hunk_header(line).is_some() {
                return Err(invalid(format!(
                    "line {}: hunk header {} comes before any file header; start the patch \
                     with `--- a/<path>` and `+++ b/<path>` lines",
                    i + 1,
                    quote(line)
                )));
            }
            if is_binary(line) {
                return Err(invalid(format!(
                    "line {}: binary patches are not supported",
                    i + 1
                )));
            }
        }
        Err(invalid(match lone_minus {
            Some(i) => format!(
                "line {}: a `---` line must be followed directly by a `+++` line; no file header found",
                i + 1
            ),
            None => "no file header found: a patch needs a `--- a/<path>` line, a `+++ b/<path>` \
                     line and at least one hunk starting with `@@ -<line>,<count> +<line>,<count> @@`"
                .to_string(),
        }))
    }

    /// Reads `diff --git` and the extended header lines git writes before `---`.
    /// Returns the header and the index of the `---` line.
    fn git_header(&self, start: usize) -> Result<(GitHeader, usize)> {
        let first = strip_cr(self.lines[start]);
        let mut header = GitHeader {
            line_no: start + 1,
            names: split_git_names(&first["diff --git ".len()..]),
            ..GitHeader::default()
        };
        let mut i = start + 1;
        loop {
            let Some(raw) = self.line(i) else {
                return Err(invalid(format!(
                    "line {}: `diff --git` header without `---`/`+++` lines and hunks; \
                     empty files, mode changes and binary files cannot be patched",
                    start + 1
                )));
            };
            let line = strip_cr(raw);
            let refuse = |what: &str| {
                Err(invalid(format!(
                    "line {}: {what} are not supported ({})",
                    i + 1,
                    quote(line)
                )))
            };
            if line.starts_with("--- ") {
                return Ok((header, i));
            } else if line.starts_with("index ") {
            } else if let Some(mode) = line.strip_prefix("new file mode ") {
                if mode != "100644" {
                    return refuse("new files other than regular files (mode 100644)");
                }
                header.new_file = true;
            } else if let Some(mode) = line.strip_prefix("deleted file mode ") {
                if mode != "100644" && mode != "100755" {
                    return refuse("deletions of anything but regular files");
                }
                header.deleted_file = true;
            } else if line.starts_with("old mode ") || line.starts_with("new mode ") {
                return refuse("mode changes");
            } else if line.starts_with("rename ")
                || line.starts_with("similarity index ")
                || line.starts_with("dissimilarity index ")
            {
                return refuse("renames");
            } else if line.starts_with("copy ") {
                return refuse("copies");
            } else if is_binary(line) {
                return refuse("binary patches");
            } else if line.starts_with("diff --git ") {
                return Err(invalid(format!(
                    "line {}: `diff --git` header without `---`/`+++` lines; only one file \
                     with at least one hunk can be patched",
                    start + 1
                )));
            } else {
                return Err(invalid(format!(
                    "line {}: unexpected line {} in the `diff --git` header; expected `index`, \
                     `new file mode`, `deleted file mode` or `---`",
                    i + 1,
                    quote(line)
                )));
            }
            i += 1;
        }
    }

    /// The path on a `---`/`+++` line without its `a/`/`b/` prefix, or `None` for /dev/null.
    fn file_name(&self, i: usize, marker: &str) -> Result<Option<String>> {
        let line = strip_cr(self.lines[i]);
        let raw = &line[marker.len()..];
        let name = if raw.starts_with('"') {
            match unquote(raw) {
                Some((name, _)) => name,
                None => {
                    return Err(invalid(format!(
                        "line {}: malformed quoted file name {}",
                        i + 1,
                        quote(line)
                    )))
                }
            }
        } else {
            // git ends the name at a tab (a timestamp, or padding after names with spaces).
            raw.split('\t').next().unwrap_or("").trim_end().to_string()
        };
        if name == "/dev/null" {
            return Ok(None);
        }
        match name.strip_prefix("a/").or_else(|| name.strip_prefix("b/")) {
            Some(path) if !path.is_empty() => Ok(Some(path.to_string())),
            _ => Err(invalid(format!(
                "line {}: file name `{name}` must start with `a/` or `b/` as git writes it, \
                 e.g. `{}a/notes/today.md`",
                i + 1,
                marker
            ))),
        }
    }

    fn hunks(&self, mut i: usize, target: Target) -> Result<Vec<Hunk>> {
        let mut hunks: Vec<Hunk> = Vec::new();
        while let Some(raw) = self.line(i) {
            let line = strip_cr(raw);
            if !line.starts_with("@@") {
                if hunks.is_empty() {
                    return Err(invalid(format!(
                        "line {}: expected a hunk header like `@@ -1,3 +1,4 @@` after the \
                         `+++` line, found {}",
                        i + 1,
                        quote(line)
                    )));
                }
                self.check_trailer(i, hunks.len())?;
                break;
            }
            let (hunk, next) = self.hunk(i, hunks.len() + 1)?;
            hunks.push(hunk);
            i = next;
        }
        if hunks.is_empty() {
            return Err(invalid(
                "the patch has no hunks: add at least one `@@ -<line>,<count> +<line>,<count> @@` section",
            ));
        }
        self.check_hunks(&hunks, target)?;
        Ok(hunks)
    }

    /// Reads one hunk by its header counts. Returns it and the index after it.
    fn hunk(&self, start: usize, no: usize) -> Result<(Hunk, usize)> {
        let header = strip_cr(self.lines[start]);
        let Some((old_start, old_count, new_start, new_count)) = parse_hunk_header(header) else {
            return Err(invalid(format!(
                "line {}: malformed hunk header {}; expected \
                 `@@ -<line>[,<count>] +<line>[,<count>] @@`",
                start + 1,
                quote(header)
            )));
        };
        let shape = || {
            self.body_shape(start + 1)
                .describe(no, old_start, new_start)
        };
        let counts = format!("-{old_start},{old_count} +{new_start},{new_count}");
        let (mut old_left, mut new_left) = (old_count, new_count);
        let mut lines: Vec<HunkLine> = Vec::new();
        // Once a side's last line is marked "no newline", nothing may follow on that side.
        let (mut old_closed, mut new_closed) = (false, false);
        let mut i = start + 1;
        while old_left > 0 || new_left > 0 {
            let Some(raw) = self.line(i) else {
                return Err(invalid(format!(
                    "hunk {no} (line {}) ends early: its header says {counts} but the patch \
                     ends; {}",
                    start + 1,
                    shape()
                )));
            };
            let (kind, body) = match raw.as_bytes().first() {
                None => (LineKind::Context, ""),
                Some(b' ') => (LineKind::Context, &raw[1..]),
                Some(b'-') => (LineKind::Removed, &raw[1..]),
                Some(b'+') => (LineKind::Added, &raw[1..]),
                Some(b'\\') => {
                    self.no_newline(i, &mut lines, &mut old_closed, &mut new_closed)?;
                    i += 1;
                    continue;
                }
                Some(b'@') => {
                    return Err(invalid(format!(
                        "hunk {no} (line {}) ends early: its header says {counts} but line {} \
                         starts the next hunk; {}",
                        start + 1,
                        i + 1,
                        shape()
                    )))
                }
                Some(_) => {
                    return Err(invalid(format!(
                        "line {} in hunk {no} is not a hunk line: {}; every line must start \
                         with ' ' (context), '-' (removed) or '+' (added)",
                        i + 1,
                        quote(raw)
                    )))
                }
            };
            let (uses_old, uses_new) = match kind {
                LineKind::Context => (true, true),
                LineKind::Removed => (true, false),
                LineKind::Added => (false, true),
            };
            if (uses_old && old_left == 0) || (uses_new && new_left == 0) {
                return Err(invalid(format!(
                    "hunk {no} (line {}) does not match its header {counts}: line {} ({}) \
                     goes past the header's counts; {}",
                    start + 1,
                    i + 1,
                    quote(raw),
                    shape()
                )));
            }
            if (uses_old && old_closed) || (uses_new && new_closed) {
                return Err(misplaced_marker(i));
            }
            old_left -= usize::from(uses_old);
            new_left -= usize::from(uses_new);
            lines.push(HunkLine {
                kind,
                text: format!("{body}\n"),
            });
            i += 1;
        }
        if self
            .line(i)
            .is_some_and(|l| l.starts_with('\\') && strip_cr(l) == NO_NEWLINE)
        {
            self.no_newline(i, &mut lines, &mut old_closed, &mut new_closed)?;
            i += 1;
        }
        if lines.is_empty() {
            return Err(invalid(format!(
                "hunk {no} (line {}) is empty: its header says {counts}",
                start + 1
            )));
        }
        let hunk = Hunk {
            old_start,
            old_count,
            new_start,
            new_count,
            lines,
            header_line: start + 1,
        };
        Ok((hunk, i))
    }

    /// Handles a backslash line: only `\ No newline at end of file` is allowed, and
    /// it takes the newline off the line before it.
    fn no_newline(
        &self,
        i: usize,
        lines: &mut [HunkLine],
        old_closed: &mut bool,
        new_closed: &mut bool,
    ) -> Result<()> {
        let raw = self.lines[i];
        if strip_cr(raw) != NO_NEWLINE {
            return Err(invalid(format!(
                "line {}: unsupported backslash line {}; the only one allowed is \
                 `\\ No newline at end of file`",
                i + 1,
                quote(raw)
            )));
        }
        let Some(last) = lines.last_mut() else {
            return Err(invalid(format!(
                "line {}: `\\ No newline at end of file` must follow the line it applies to",
                i + 1
            )));
        };
        if !last.text.ends_with('\n') {
            return Err(misplaced_marker(i));
        }
        last.text.pop();
        if last.text.is_empty() {
            return Err(invalid(format!(
                "line {}: `\\ No newline at end of file` follows an empty line; an empty \
                 last line cannot lack its newline",
                i + 1
            )));
        }
        match last.kind {
            LineKind::Context => {
                *old_closed = true;
                *new_closed = true;
            }
            LineKind::Removed => *old_closed = true,
            LineKind::Added => *new_closed = true,
        }
        Ok(())
    }

    /// Counts the run of hunk-looking lines from `start`, to tell a sender what a
    /// miscounted body really holds.
    fn body_shape(&self, start: usize) -> BodyShape {
        let mut shape = BodyShape {
            context: 0,
            removed: 0,
            added: 0,
        };
        for (i, raw) in self.lines.iter().enumerate().skip(start) {
            match raw.as_bytes().first() {
                None | Some(b' ') => shape.context += 1,
                Some(b'-') if self.is_file_header(i) => break,
                Some(b'-') => shape.removed += 1,
                Some(b'+') => shape.added += 1,
                Some(b'\\') => {}
                _ => break,
            }
        }
        // Blank lines after the body are usually spacing, not context.
        let trailing_blank = self.lines[start.min(self.lines.len())..]
            .iter()
            .take(shape.context + shape.removed + shape.added)
            .rev()
            .take_while(|l| l.is_empty())
            .count();
        shape.context -= trailing_blank.min(shape.context);
        shape
    }

    fn is_file_header(&self, i: usize) -> bool {
        let line = strip_cr(self.lines[i]);
        line.starts_with("diff --git ")
            || (line.starts_with("--- ") && self.line(i + 1).is_some_and(|n| n.starts_with("+++ ")))
    }

    /// After the last hunk: a line that still looks like hunk content means the
    /// counts are wrong (git would silently drop it); a second file header means a
    /// multi-file patch. Anything else (a closing fence, prose) is ignored.
    fn check_trailer(&self, start: usize, hunks_seen: usize) -> Result<()> {
        let first = (start..self.lines.len()).find(|&i| !strip_cr(self.lines[i]).is_empty());
        if let Some(i) = first {
            let line = self.lines[i];
            let is_signature = strip_cr(line) == "-- ";
            if !self.is_file_header(i)
                && !is_signature
                && matches!(line.as_bytes().first(), Some(b' ' | b'+' | b'-' | b'\\'))
            {
                let (old_start, new_start) = self.last_hunk_starts(start);
                return Err(invalid(format!(
                    "hunk {hunks_seen}'s header counts are used up before line {}, but that \
                     line still looks like hunk content: {}; {}",
                    i + 1,
                    quote(line),
                    self.body_shape(self.last_hunk_header(start) + 1)
                        .describe(hunks_seen, old_start, new_start)
                )));
            }
        }
        for i in start..self.lines.len() {
            if self.is_file_header(i) {
                return Err(invalid(format!(
                    "line {}: a second file header; a patch may change only one note \
                     (send one patch per note)",
                    i + 1
                )));
            }
            let line = strip_cr(self.lines[i]);
            if line.starts_with("@@ -") && parse_hunk_header(line).is_some() {
                return Err(invalid(format!(
                    "line {}: hunk header {} after text that is not part of any hunk",
                    i + 1,
                    quote(line)
                )));
            }
        }
        Ok(())
    }

    fn last_hunk_header(&self, before: usize) -> usize {
        (0..before)
            .rev()
            .find(|&i| parse_hunk_header(strip_cr(self.lines[i])).is_some())
            .unwrap_or(0)
    }

    fn last_hunk_starts(&self, before: usize) -> (usize, usize) {
        let header = strip_cr(self.lines[self.last_hunk_header(before)]);
        parse_hunk_header(header).map_or((0, 0), |(o, _, n, _)| (o, n))
    }

    /// Checks that need every hunk: the /dev/null sides and where a line without a
    /// newline may stand.
    fn check_hunks(&self, hunks: &[Hunk], target: Target) -> Result<()> {
        for (n, hunk) in hunks.iter().enumerate() {
            let no = n + 1;
            if target == Target::Create && hunk.old_count != 0 {
                return Err(invalid(format!(
                    "hunk {no} (line {}): a patch that creates a note (`--- /dev/null`) can \
                     only add lines, but its header {} has old lines",
                    hunk.header_line,
                    hunk.header()
                )));
            }
            if target == Target::Delete && hunk.new_count != 0 {
                return Err(invalid(format!(
                    "hunk {no} (line {}): a patch that deletes a note (`+++ /dev/null`) can \
                     only remove lines, but its header {} has new lines",
                    hunk.header_line,
                    hunk.header()
                )));
            }
            let unterminated = hunk.lines.iter().any(|l| !l.text.ends_with('\n'));
            if unterminated && no < hunks.len() {
                return Err(invalid(format!(
                    "hunk {no} (line {}) marks a line `\\ No newline at end of file`, but \
                     only the last hunk can reach the end of the note",
                    hunk.header_line
                )));
            }
        }
        Ok(())
    }
}

fn misplaced_marker(i: usize) -> Error {
    invalid(format!(
        "line {}: lines follow a line marked `\\ No newline at end of file` on the same \
         side; the marker may only follow the last line of the old or new side",
        i + 1
    ))
}

fn is_binary(line: &str) -> bool {
    line.starts_with("GIT binary patch")
        || (line.starts_with("Binary files ") && line.ends_with(" differ"))
}

/// The two names of a `diff --git` line, prefixes kept. Unquoted names are split in
/// the middle, which works whenever both name the same file (the only case we accept).
fn split_git_names(rest: &str) -> Option<(String, String)> {
    if rest.starts_with('"') {
        let (first, after) = unquote(rest)?;
        let second = after.strip_prefix(' ')?;
        let second = if second.starts_with('"') {
            unquote(second)?.0
        } else {
            second.to_string()
        };
        return Some((first, second));
    }
    if rest.len().is_multiple_of(2) {
        return None;
    }
    let mid = rest.len() / 2;
    if !rest.is_char_boundary(mid) || rest.as_bytes()[mid] != b' ' {
        return None;
    }
    Some((rest[..mid].to_string(), rest[mid + 1..].to_string()))
}

fn check_git_header(git: &GitHeader, path: &str, target: Target) -> Result<()> {
    let strip = |n: &str| {
        n.strip_prefix("a/")
            .or_else(|| n.strip_prefix("b/"))
            .map(str::to_string)
    };
    let same = git
        .names
        .as_ref()
        .and_then(|(a, b)| Some((strip(a)?, strip(b)?)))
        .is_some_and(|(a, b)| a == path && b == path);
    if !same {
        return Err(invalid(format!(
            "line {}: the `diff --git` line must name `a/{path}` and `b/{path}`, the same note \
             as the `---`/`+++` lines; renames and copies are not supported",
            git.line_no
        )));
    }
    if git.new_file && target != Target::Create {
        return Err(invalid(format!(
            "line {}: `new file mode` needs `--- /dev/null`",
            git.line_no
        )));
    }
    if git.deleted_file && target != Target::Delete {
        return Err(invalid(format!(
            "line {}: `deleted file mode` needs `+++ /dev/null`",
            git.line_no
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn err(text: &str) -> String {
        let e = parse(text).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidPatch, "{e}");
        e.message
    }

    #[test]
    fn parses_a_plain_hunk_and_strips_prefixes() {
        let p = parse("--- a/n.md\n+++ b/n.md\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n").unwrap();
        assert_eq!(p.path, "n.md");
        assert_eq!(p.target, Target::Modify);
        assert_eq!(p.hunks.len(), 1);
        let h = &p.hunks[0];
        assert_eq!(
            (h.old_start, h.old_count, h.new_start, h.new_count),
            (1, 2, 1, 2)
        );
        assert_eq!(h.lines[2].text, "c\n");
        assert_eq!(p.net_line_delta(), 0);
    }

    #[test]
    fn counts_default_to_one_and_section_text_is_allowed() {
        let p = parse("--- a/n.md\n+++ b/n.md\n@@ -3 +3 @@ ## Heading\n-x\n+y\n").unwrap();
        assert_eq!(p.hunks[0].old_count, 1);
        assert_eq!(p.hunks[0].new_count, 1);
    }

    #[test]
    fn missing_final_newline_of_the_patch_is_tolerated() {
        let p = parse("--- a/n.md\n+++ b/n.md\n@@ -1 +1 @@\n-x\n+y").unwrap();
        assert_eq!(p.hunks[0].lines[1].text, "y\n");
    }

    #[test]
    fn no_newline_marker_strips_the_newline_of_the_line_before() {
        let p =
            parse("--- a/n.md\n+++ b/n.md\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+y\n")
                .unwrap();
        assert_eq!(p.hunks[0].lines[0].text, "x");
        assert_eq!(p.hunks[0].lines[1].text, "y\n");
    }

    #[test]
    fn quoted_and_tab_terminated_names() {
        let p = parse(
            "diff --git \"a/caf\\303\\251.md\" \"b/caf\\303\\251.md\"\n--- \"a/caf\\303\\251.md\"\n+++ \"b/caf\\303\\251.md\"\n@@ -1 +1 @@\n-x\n+y\n",
        )
        .unwrap();
        assert_eq!(p.path, "café.md");
        let p = parse("--- a/my note.md\t\n+++ b/my note.md\t\n@@ -1 +1 @@\n-x\n+y\n").unwrap();
        assert_eq!(p.path, "my note.md");
    }

    #[test]
    fn dev_null_sides_decide_the_target() {
        let p = parse("--- /dev/null\n+++ b/new.md\n@@ -0,0 +1 @@\n+x\n").unwrap();
        assert_eq!((p.path.as_str(), p.target), ("new.md", Target::Create));
        let p = parse("--- a/old.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n").unwrap();
        assert_eq!((p.path.as_str(), p.target), ("old.md", Target::Delete));
        assert!(err("--- /dev/null\n+++ b/n.md\n@@ -1 +1 @@\n-x\n+y\n").contains("only add"));
        assert!(err("--- a/n.md\n+++ /dev/null\n@@ -1 +1 @@\n-x\n+y\n").contains("only remove"));
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        assert!(err("").contains("empty"));
        assert!(err("hello\n").contains("no file header"));
        assert!(err("--- a/x.md\n+++ b/y.md\n@@ -1 +1 @@\n-a\n+b\n").contains("disagree"));
        assert!(err("--- x.md\n+++ x.md\n@@ -1 +1 @@\n-a\n+b\n").contains("a/"));
        assert!(err("--- a/x.md\n+++ b/x.md\n-a\n+b\n").contains("hunk header"));
        assert!(err("--- a/x.md\n+++ b/x.md\n@@ -1,2 +1,2 @@\n-a\n+b\n").contains("ends early"));
        assert!(err("--- a/x.md\n+++ b/x.md\n@@ -1 +1 @@\n-a\n+b\n+c\n")
            .contains("looks like hunk content"));
        assert!(
            err("--- a/x.md\n+++ b/x.md\n@@ -1 +1 @@\n-a\n\\ nope\n+b\n").contains("backslash")
        );
        assert!(
            err("@@ -1 +1 @@\n--- a/x.md\n+++ b/x.md\n@@ -1 +1 @@\n-a\n+b\n")
                .contains("before any file header")
        );
        assert!(err("--- a/x.md\n+++ b/x.md\n@@ -1 +1 @@\n-a\n+b\n--- a/y.md\n+++ b/y.md\n@@ -1 +1 @@\n-a\n+b\n").contains("one note"));
        assert!(err(
            "diff --git a/x.md b/y.md\nsimilarity index 90%\nrename from x.md\nrename to y.md\n"
        )
        .contains("renames"));
        assert!(
            err("diff --git a/x.md b/x.md\nold mode 100644\nnew mode 100755\n")
                .contains("mode changes")
        );
        assert!(err(
            "diff --git a/x.md b/x.md\nindex 1..2\nBinary files a/x.md and b/x.md differ\n"
        )
        .contains("binary"));
        assert!(err("--- a/x.md\n+++ b/x.md\n@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n-b\n+c\n+d\n").contains("marker"));
    }

    #[test]
    fn miscount_messages_say_what_the_body_holds() {
        let m = err("--- a/x.md\n+++ b/x.md\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n");
        assert!(m.contains("1 context, 1 removed and 1 added"), "{m}");
        assert!(m.contains("@@ -1,2 +1,2 @@"), "{m}");
    }

    #[test]
    fn prose_and_fences_around_the_diff_are_ignored() {
        let p = parse(
            "Here is the change:\n```diff\n--- a/x.md\n+++ b/x.md\n@@ -1 +1 @@\n-a\n+b\n```\nThanks.\n",
        )
        .unwrap();
        assert_eq!(p.hunks.len(), 1);
    }

    #[test]
    fn lines_that_look_like_headers_inside_a_hunk_are_content() {
        let p = parse("--- a/x.md\n+++ b/x.md\n@@ -1,2 +1,2 @@\n--- a\n+++ b\n x\n").unwrap();
        assert_eq!(p.hunks[0].lines[0].text, "-- a\n");
        assert_eq!(p.hunks[0].lines[1].text, "++ b\n");
    }
}
