//! Propose and apply through HTTP on a large vault, against `git apply` +
//! `git commit` as subprocesses on the same repository in the same run.
//!
//! cargo bench --bench patch_apply -- VAULT   (a vault from the gen-notes example, with --git)

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::json;
use support::{copy_tree, report, time_ms, vault_arg, Server};

const SAMPLES: usize = 100;
const WARMUP: usize = 5;

/// A patch that adds one line at the end of `content`, with three lines of context.
fn append_patch(path: &str, content: &str, tag: &str) -> Option<String> {
    if content.contains('\r') || !content.ends_with('\n') {
        return None;
    }
    let lines: Vec<&str> = content.lines().collect();
    if lines.len() < 3 {
        return None;
    }
    let n = lines.len();
    let mut patch = format!(
        "--- a/{path}\n+++ b/{path}\n@@ -{},3 +{},4 @@\n",
        n - 2,
        n - 2
    );
    for line in &lines[n - 3..] {
        patch.push_str(&format!(" {line}\n"));
    }
    patch.push_str(&format!("+bench {tag}\n"));
    Some(patch)
}

fn git(repo: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    let vault = vault_arg("patch_apply");
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("vault");
    copy_tree(&vault, &root);
    let server = Server::start(&root);

    let notes: Vec<String> = serde_json::from_value(
        server
            .client
            .get(format!("{}/mcp/notes", server.url))
            .send()
            .unwrap()
            .json::<serde_json::Value>()
            .unwrap()["notes"]
            .clone(),
    )
    .unwrap();
    let mut candidates = notes.iter().filter_map(|path| {
        let content = std::fs::read_to_string(root.join(path)).ok()?;
        // Paths git would quote are left out so the baseline's `git apply` reads the same patch.
        if !path.is_ascii() {
            return None;
        }
        Some((path.clone(), content))
    });
    println!("vault: {} notes at {}", notes.len(), vault.display());

    let post = |route: &str, patch: &str| {
        let response = server
            .client
            .post(format!("{}{route}", server.url))
            .json(&json!({ "patch": patch }))
            .send()
            .unwrap();
        assert_eq!(
            response.status().as_u16(),
            200,
            "{}",
            response.text().unwrap()
        );
    };

    let mut run = |tag: &str| {
        let mut propose = Vec::new();
        let mut apply = Vec::new();
        let mut taken = 0;
        while apply.len() < SAMPLES {
            let (path, content) = candidates.next().expect("enough notes");
            let Some(patch) = append_patch(&path, &content, tag) else {
                continue;
            };
            let p = time_ms(|| post("/mcp/patch/propose", &patch));
            let a = time_ms(|| post("/mcp/patch/apply", &patch));
            taken += 1;
            if taken > WARMUP {
                propose.push(p);
                apply.push(a);
            }
        }
        (propose, apply)
    };
    let (mut propose, mut apply) = run("mirai");
    // The same again with the index loaded: every apply also updates it.
    let rebuilt = server
        .client
        .post(format!("{}/mcp/index/rebuild", server.url))
        .send()
        .unwrap();
    assert_eq!(rebuilt.status().as_u16(), 200);
    let (_, mut apply_indexed) = run("indexed");

    let mut baseline = Vec::new();
    let diff_file = work.path().join("bench.diff");
    let mut taken = 0;
    while baseline.len() < SAMPLES {
        let (path, content) = candidates.next().expect("enough notes");
        let Some(patch) = append_patch(&path, &content, "git") else {
            continue;
        };
        std::fs::write(&diff_file, &patch).unwrap();
        let diff = diff_file.to_str().unwrap();
        let message = format!("mcp.patch_apply: {path}");
        let t = time_ms(|| {
            git(&root, &["apply", diff]);
            git(&root, &["commit", "-q", "-m", &message, "--", &path]);
        });
        taken += 1;
        if taken > WARMUP {
            baseline.push(t);
        }
    }

    println!();
    report("patch.propose over HTTP", &mut propose);
    let mirai = report("patch.apply + commit over HTTP", &mut apply);
    report("patch.apply + commit, index loaded", &mut apply_indexed);
    let git_median = report(
        "baseline: git apply + git commit (processes)",
        &mut baseline,
    );
    println!(
        "\napply median / baseline median: {:.2}",
        mirai / git_median
    );
    let fsck = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["fsck", "--no-progress"])
        .output()
        .unwrap();
    println!(
        "git fsck after the run: {}",
        if fsck.status.success() {
            "clean"
        } else {
            "FAILED"
        }
    );
}
