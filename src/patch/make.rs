//! Making patches: the unified diff (three lines of context, git's headers and
//! name quoting, `\ No newline at end of file`) that turns a note's text into
//! another, so callers that hold whole texts can write through the same
//! validated path as callers that hold diffs.
//!
//! The line diff is imara-diff's Myers with git's own heuristics: lines found on
//! one side only are set aside first, and a middle-snake search that grows too
//! costly settles for a good split instead of the best one. So the diff is
//! minimal for ordinary edits and merely correct (a few more changed lines than
//! needed) for pathological texts, and its cost stays near-linear either way,
//! without any clock.

use std::fmt::Write;

use imara_diff::{Algorithm, Diff, Hunk, InternedInput, Token};

const NO_NEWLINE: &str = "\\ No newline at end of file";
/// Unchanged lines around each change, as git writes by default.
const CONTEXT: u32 = 3;

/// The diff from `old` to `new` for the note at `path` (`None` on either side:
/// the note does not exist / is deleted), or `None` when nothing changes.
pub fn make(path: &str, old: Option<&str>, new: Option<&str>) -> Option<String> {
    if old == new {
        return None;
    }
    let side = |text: Option<&str>, prefix: &str| match text {
        Some(_) => quote(&format!("{prefix}/{path}")),
        None => "/dev/null".to_string(),
    };
    let input = InternedInput::new(old.unwrap_or(""), new.unwrap_or(""));
    let mut diff = Diff::compute(Algorithm::Myers, &input);
    diff.postprocess_lines(&input);
    let mut out = format!("--- {}\n+++ {}\n", side(old, "a"), side(new, "b"));
    let changes: Vec<Hunk> = diff.hunks().collect();
    // Changes closer than twice the context share one hunk, as in git.
    let mut rest = changes.as_slice();
    while let Some(first) = rest.first() {
        let together = 1 + rest
            .windows(2)
            .take_while(|pair| pair[1].before.start - pair[0].before.end <= 2 * CONTEXT)
            .count();
        let (group, after) = rest.split_at(together);
        write_hunk(&mut out, &input, first, group);
        rest = after;
    }
    Some(out)
}

/// One `@@` hunk: the changes of `group` with their context.
fn write_hunk(out: &mut String, input: &InternedInput<&str>, first: &Hunk, group: &[Hunk]) {
    let last = &group[group.len() - 1];
    let lead = first.before.start.min(CONTEXT);
    let tail = (input.before.len() as u32 - last.before.end).min(CONTEXT);
    let before = first.before.start - lead..last.before.end + tail;
    let after = first.after.start - lead..last.after.end + tail;
    let range = |r: &std::ops::Range<u32>| match r.len() {
        0 => format!("{},0", r.start),
        1 => format!("{}", r.start + 1),
        n => format!("{},{n}", r.start + 1),
    };
    let _ = writeln!(out, "@@ -{} +{} @@", range(&before), range(&after));
    let mut line = |sign: char, token: &Token| {
        let text = input.interner[*token];
        out.push(sign);
        out.push_str(text);
        if !text.ends_with('\n') {
            out.push('\n');
            out.push_str(NO_NEWLINE);
            out.push('\n');
        }
    };
    let mut at = before.start;
    for change in group {
        for token in &input.before[at as usize..change.before.start as usize] {
            line(' ', token);
        }
        for token in &input.before[change.before.start as usize..change.before.end as usize] {
            line('-', token);
        }
        for token in &input.after[change.after.start as usize..change.after.end as usize] {
            line('+', token);
        }
        at = change.before.end;
    }
    for token in &input.before[at as usize..before.end as usize] {
        line(' ', token);
    }
}

/// A file name as git writes it in a header: in double quotes with C escapes when
/// it holds a control character, a quote or a backslash.
fn quote(name: &str) -> String {
    let needs = |b: u8| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\';
    if !name.bytes().any(needs) {
        return name.to_string();
    }
    let mut out = String::from("\"");
    for c in name.chars() {
        match c {
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0b' => out.push_str("\\v"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\{:03o}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::{apply, parse};

    fn round_trip(path: &str, old: Option<&str>, new: Option<&str>) {
        let text = make(path, old, new).expect("a change");
        let patch = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(patch.path, path);
        let applied = apply(&patch, old).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(applied.content.as_deref(), new, "{text}");
    }

    #[test]
    fn made_patches_apply_back_exactly() {
        let note = "# Title\n\none\ntwo\nthree\nfour\nfive\nsix\nseven\n";
        round_trip("a.md", Some(note), Some(&note.replace("four", "FOUR")));
        round_trip("a.md", Some(note), Some(&note.replace("one\n", "")));
        round_trip("a.md", Some(note), Some(&format!("{note}eight\n")));
        round_trip("a.md", Some(note), Some("replaced entirely"));
        round_trip("a.md", Some("no newline"), Some("no newline, still"));
        round_trip("a.md", Some("a\r\nb\r\nc\r\n"), Some("a\r\nB\r\nc\r\n"));
        round_trip("a.md", Some(note), Some(""));
        round_trip("dir/new note.md", None, Some("fresh\n"));
        round_trip("gone.md", Some(note), None);
        round_trip("odd\tname.md", Some("x\n"), Some("y\n"));
        round_trip("\"quoted\".md", Some("x\n"), Some("y\n"));
        round_trip("日本/料理.md", Some("x\n"), Some("y\n"));
    }

    #[test]
    fn headers_and_counts_are_git_s() {
        assert_eq!(
            make("a.md", Some("one\n"), Some("two\n")).unwrap(),
            "--- a/a.md\n+++ b/a.md\n@@ -1 +1 @@\n-one\n+two\n"
        );
        assert_eq!(
            make("a.md", Some("one\n"), None).unwrap(),
            "--- a/a.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"
        );
        assert_eq!(
            make("odd\tname.md", None, Some("x")).unwrap(),
            "--- /dev/null\n+++ \"b/odd\\tname.md\"\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
        );
        let ten: String = (1..=10).map(|i| format!("{i}\n")).collect();
        assert_eq!(
            make("a.md", Some(&ten), Some(&ten.replace("5\n", "5\nnew\n"))).unwrap(),
            "--- a/a.md\n+++ b/a.md\n@@ -3,6 +3,7 @@\n 3\n 4\n 5\n+new\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn no_change_is_no_patch() {
        assert_eq!(make("a.md", Some("x\n"), Some("x\n")), None);
        assert_eq!(make("a.md", None, None), None);
    }

    /// Texts that make an exact diff quadratic (every line rewritten, one line
    /// grown to very many, few distinct lines in a new order) still give a diff
    /// that applies back to exactly the new text.
    #[test]
    fn costly_diffs_still_round_trip() {
        let numbered =
            |n: usize, tag: &str| -> String { (0..n).map(|i| format!("{tag} {i}\n")).collect() };
        round_trip(
            "a.md",
            Some(&numbered(40_000, "old")),
            Some(&numbered(40_000, "new")),
        );
        round_trip("a.md", Some("one line\n"), Some(&numbered(120_000, "line")));
        let pattern = |n: usize, seed: u64| -> String {
            let mut x = seed;
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ["a\n", "b\n", "c\n", "\n"][(x % 4) as usize]
                })
                .collect()
        };
        round_trip(
            "a.md",
            Some(&pattern(100_000, 7)),
            Some(&pattern(100_000, 11)),
        );
        let reversed: String = numbered(30_000, "l")
            .lines()
            .rev()
            .map(|l| format!("{l}\n"))
            .collect();
        round_trip("a.md", Some(&numbered(30_000, "l")), Some(&reversed));
    }
}
