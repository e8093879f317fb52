//! Runs every case of `fixtures/patch-cases` (real notes, real diffs, real
//! `git apply` results; see `gen.py` there) through parse and apply, and compares
//! the bytes or the error code with what was recorded.

use std::fs;
use std::path::Path;

use super::{apply, parse};

fn read_opt(path: &Path) -> Option<String> {
    fs::read(path)
        .ok()
        .map(|b| String::from_utf8(b).expect("case files are UTF-8"))
}

#[test]
fn every_case_matches_its_oracle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/patch-cases");
    let mut dirs: Vec<_> = fs::read_dir(&root)
        .expect("fixtures/patch-cases exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 60, "only {} cases", dirs.len());

    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let meta: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
        let before = read_opt(&dir.join("before.md"));
        let text = read_opt(&dir.join("patch.diff")).unwrap();
        let expected_error = read_opt(&dir.join("expect.json")).map(|j| {
            let v: serde_json::Value = serde_json::from_str(&j).unwrap();
            v["error"].as_str().unwrap().to_string()
        });
        let expected_after = read_opt(&dir.join("after.md"));

        let outcome = parse(&text).and_then(|patch| {
            if patch.path != meta["path"].as_str().unwrap() {
                return Ok(Err(format!("parsed path {:?}", patch.path)));
            }
            apply(&patch, before.as_deref()).map(|a| Ok(a.content))
        });
        let problem = match (outcome, &expected_error) {
            (Err(e), Some(code)) if e.code.as_str() == code => None,
            (Err(e), _) => Some(format!("error {e}")),
            (Ok(Err(why)), _) => Some(why),
            (Ok(Ok(_)), Some(code)) => Some(format!("applied, expected {code}")),
            (Ok(Ok(content)), None) if content == expected_after => None,
            (Ok(Ok(content)), None) => Some(format!(
                "wrong result: got {:?}, expected {:?}",
                content.map(|c| c.len()),
                expected_after.map(|c| c.len())
            )),
        };
        if let Some(problem) = problem {
            failures.push(format!("{name}: {problem}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}

/// A small deterministic generator (xorshift64*), so the mutations are the same on every run.
struct Mutator(u64);

impl Mutator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// One edit of the kind a careless writer (or a model) makes to a diff.
    fn mutate(&mut self, text: &str) -> String {
        const PIECES: [&str; 12] = [
            " ",
            "+",
            "-",
            "@",
            "\\",
            "\n",
            "\r\n",
            "0",
            "9",
            ",",
            "@@ -1 +1 @@\n",
            "é",
        ];
        let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
        if lines.is_empty() {
            return PIECES[self.below(PIECES.len())].to_string();
        }
        let at = self.below(lines.len());
        match self.below(6) {
            0 => {
                lines.remove(at);
            }
            1 => {
                let copy = lines[at].clone();
                lines.insert(at, copy);
            }
            2 => {
                let other = self.below(lines.len());
                lines.swap(at, other);
            }
            3 => {
                let line = &mut lines[at];
                let chars: Vec<char> = line.chars().collect();
                if !chars.is_empty() {
                    let cut = self.below(chars.len());
                    *line = chars
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != cut)
                        .map(|(_, c)| c)
                        .collect();
                }
            }
            4 => {
                let piece = PIECES[self.below(PIECES.len())];
                let line = &mut lines[at];
                let chars: Vec<char> = line.chars().collect();
                let cut = self.below(chars.len() + 1);
                *line = chars[..cut].iter().collect::<String>()
                    + piece
                    + &chars[cut..].iter().collect::<String>();
            }
            _ => lines.truncate(at),
        }
        lines.concat()
    }
}

/// Nothing a caller sends can panic: thousands of damaged corpus patches, each
/// parsed and applied to its note, end in a result or an error.
#[test]
fn damaged_patches_never_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/patch-cases");
    let mut dirs: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut mutator = Mutator(0x9e37_79b9_7f4a_7c15);
    let mut outcomes = [0usize; 2];
    for dir in &dirs {
        let before = read_opt(&dir.join("before.md"));
        let text = read_opt(&dir.join("patch.diff")).unwrap();
        for _ in 0..40 {
            let mut damaged = text.clone();
            for _ in 0..=mutator.below(3) {
                damaged = mutator.mutate(&damaged);
            }
            let outcome = parse(&damaged).and_then(|patch| apply(&patch, before.as_deref()));
            outcomes[usize::from(outcome.is_ok())] += 1;
        }
    }
    // Both kinds of outcome occur, so the mutations exercise more than the parser's first check.
    assert!(
        outcomes[0] > 100 && outcomes[1] > 100,
        "errors/applied: {outcomes:?}"
    );
}

/// `make` then `parse` then `apply` gives back exactly the new text, for every
/// corpus note against thousands of damaged versions of itself (lines lost,
/// doubled, swapped, cut; the final newline gone; CRLF).
#[test]
fn made_patches_round_trip_on_damaged_notes() {
    use super::make;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/patch-cases");
    let mut mutator = Mutator(0x51_7c_c1_b7_27_22_0a_95);
    let mut checked = 0;
    for dir in fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
    {
        let Some(note) = read_opt(&dir.join("before.md")) else {
            continue;
        };
        for round in 0..25 {
            let mut changed = note.clone();
            for _ in 0..=mutator.below(4) {
                changed = mutator.mutate(&changed);
            }
            if round % 5 == 0 {
                changed = changed.replace('\n', "\r\n");
            }
            let Some(text) = make("n.md", Some(&note), Some(&changed)) else {
                assert_eq!(note, changed);
                continue;
            };
            let patch = parse(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", dir.display()));
            let applied = apply(&patch, Some(&note))
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", dir.display()));
            assert_eq!(
                applied.content.as_deref(),
                Some(changed.as_str()),
                "{}\n{text}",
                dir.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked}");
}
