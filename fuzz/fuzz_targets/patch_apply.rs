//! Parse and apply never panic; what they answer is what git's algorithm, run
//! the plain quadratic way, answers; and every change that applies can be made
//! into a patch again (`make`) that applies back to exactly the same text.
//!
//! The input is `note \0 patch`; without a NUL it is a patch for a note that
//! does not exist.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mirai_fuzz::error::ErrorCode;
use mirai_fuzz::patch::{apply, make, parse, LineKind, Patch, Target};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (note, diff) = match text.split_once('\0') {
        Some((note, diff)) => (Some(note), diff),
        None => (None, text),
    };
    let Ok(patch) = parse(diff) else {
        return;
    };
    let applied = apply(&patch, note);
    let expected = reference(&patch, note);
    match (&applied, &expected) {
        (Ok(a), Ok(content)) => assert_eq!(&a.content, content),
        (Err(e), Err(code)) => assert_eq!(e.code, *code, "{e}"),
        _ => panic!("apply {applied:?} but the reference {expected:?}"),
    }
    if let Ok(a) = applied {
        let remade = make(&patch.path, note, a.content.as_deref()).expect("a change");
        let again = parse(&remade).unwrap_or_else(|e| panic!("{e}\n{remade}"));
        let back = apply(&again, note).unwrap_or_else(|e| panic!("{e}\n{remade}"));
        assert_eq!(back.content, a.content, "{remade}");
    }
});

struct Line<'a> {
    text: &'a str,
    patched: bool,
}

/// git apply's find_pos and match_fragment as git writes them: every place,
/// outward from the anchor, compared line by line.
fn reference(patch: &Patch, current: Option<&str>) -> Result<Option<String>, ErrorCode> {
    let current = match (patch.target, current) {
        (Target::Create, Some(_)) => return Err(ErrorCode::Conflict),
        (Target::Create, None) => "",
        (_, None) => return Err(ErrorCode::NotFound),
        (_, Some(text)) => text,
    };
    let mut img: Vec<Line> = current
        .split_inclusive('\n')
        .map(|text| Line {
            text,
            patched: false,
        })
        .collect();
    for hunk in &patch.hunks {
        let pre: Vec<&str> = hunk
            .lines
            .iter()
            .filter(|l| l.kind != LineKind::Added)
            .map(|l| l.text.as_str())
            .collect();
        let (beginning, end) = (hunk.old_start <= 1, hunk.trailing() == 0);
        let fits = |img: &[Line], at: usize| {
            at + pre.len() <= img.len()
                && (!end || at + pre.len() == img.len())
                && (!beginning || at == 0)
                && img[at..at + pre.len()]
                    .iter()
                    .zip(&pre)
                    .all(|(l, w)| !l.patched && l.text == *w)
        };
        let nr = img.len();
        let start = if beginning {
            0
        } else if end {
            nr.checked_sub(pre.len()).unwrap_or(nr)
        } else {
            hunk.new_start.saturating_sub(1)
        }
        .min(nr);
        let mut found = None;
        for d in 0..=nr {
            let after = start + d;
            if after <= nr && fits(&img, after) {
                found = Some(after);
                break;
            }
            if d > 0 && d <= start && fits(&img, start - d) {
                found = Some(start - d);
                break;
            }
        }
        let Some(at) = found else {
            return Err(ErrorCode::Conflict);
        };
        let post: Vec<Line> = hunk
            .lines
            .iter()
            .filter(|l| l.kind != LineKind::Removed)
            .map(|l| Line {
                text: &l.text,
                patched: true,
            })
            .collect();
        img.splice(at..at + pre.len(), post);
    }
    let content: String = img.iter().map(|l| l.text).collect();
    match patch.target {
        Target::Delete if !content.is_empty() => Err(ErrorCode::Conflict),
        Target::Delete => Ok(None),
        Target::Modify if content == current => Err(ErrorCode::InvalidPatch),
        _ => Ok(Some(content)),
    }
}
