//! Making patches: the unified diff (three lines of context, git's headers)
//! that turns a note's text into another (diffy quotes unusual names as git does), so callers that hold whole texts
//! can write through the same validated path as callers that hold diffs.

use diffy::DiffOptions;

/// The diff from `old` to `new` for the note at `path` (`None` on either side:
/// the note does not exist / is deleted), or `None` when nothing changes.
pub fn make(path: &str, old: Option<&str>, new: Option<&str>) -> Option<String> {
    if old == new {
        return None;
    }
    let from = match old {
        Some(_) => format!("a/{path}"),
        None => "/dev/null".to_string(),
    };
    let to = match new {
        Some(_) => format!("b/{path}"),
        None => "/dev/null".to_string(),
    };
    let mut options = DiffOptions::new();
    options
        .set_context_len(3)
        .set_original_filename(from)
        .set_modified_filename(to);
    Some(
        options
            .create_patch(old.unwrap_or(""), new.unwrap_or(""))
            .to_string(),
    )
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
    fn no_change_is_no_patch() {
        assert_eq!(make("a.md", Some("x\n"), Some("x\n")), None);
        assert_eq!(make("a.md", None, None), None);
    }
}
