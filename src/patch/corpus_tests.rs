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
