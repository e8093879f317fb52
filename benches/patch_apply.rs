//! Propose and apply through HTTP on large vaults, one keep-alive connection,
//! against baselines measured in the same run: a `GET /health` round trip
//! before each sample, propose of the same patch, and `git apply` +
//! `git commit` as subprocesses on the same repository. After mirai's applies
//! `git status --porcelain` must be empty (the bench fails otherwise).
//!
//! cargo bench --bench patch_apply -- VAULT [VAULT...]   (git vaults from the gen-notes example, e.g. 1,000 and 10,000 notes)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use support::{copy_tree, fsck, git, report, time_ms, vault_arg, Server};

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

fn main() {
    let vaults: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .collect();
    if vaults.is_empty() || vaults.iter().any(|v| !v.is_dir()) {
        // Prints how to make a vault, and exits.
        vault_arg("patch_apply");
    }
    let mut summary = Vec::new();
    for vault in &vaults {
        summary.push(bench_vault(vault));
    }
    println!("\nsummary (medians, ms)");
    println!(
        "{:<10} {:>8} {:>9} {:>9} {:>15} {:>11}",
        "notes", "health", "propose", "apply", "apply, indexed", "git baseline"
    );
    for row in summary {
        println!(
            "{:<10} {:>8.3} {:>9.3} {:>9.3} {:>15.3} {:>11.3}",
            row.notes, row.health, row.propose, row.apply, row.apply_indexed, row.git
        );
    }
}

/// One vault's medians.
struct Row {
    notes: usize,
    health: f64,
    propose: f64,
    apply: f64,
    apply_indexed: f64,
    git: f64,
}

fn bench_vault(vault: &Path) -> Row {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("vault");
    copy_tree(vault, &root);
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
    println!("\nvault: {} notes at {}", notes.len(), vault.display());

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

    // Each sample: a /health round trip (the floor of any request), a propose
    // and an apply of the same patch, one after the other on one connection.
    let mut run = |tag: &str| {
        let (mut health, mut propose, mut apply) = (Vec::new(), Vec::new(), Vec::new());
        let mut taken = 0;
        while apply.len() < SAMPLES {
            let (path, content) = candidates.next().expect("enough notes");
            let Some(patch) = append_patch(&path, &content, tag) else {
                continue;
            };
            let h = server.health_ms();
            let p = time_ms(|| post("/mcp/patch/propose", &patch));
            let a = time_ms(|| post("/mcp/patch/apply", &patch));
            taken += 1;
            if taken > WARMUP {
                health.push(h);
                propose.push(p);
                apply.push(a);
            }
        }
        (health, propose, apply)
    };
    let (_, mut propose, mut apply) = run("mirai");
    // The same again with the index loaded: every apply also updates it.
    let rebuilt = server
        .client
        .post(format!("{}/mcp/index/rebuild", server.url))
        .send()
        .unwrap();
    assert_eq!(rebuilt.status().as_u16(), 200);
    let (mut health, mut propose_indexed, mut apply_indexed) = run("indexed");
    let porcelain = |root: &Path| {
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["status", "--porcelain"])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    // mirai's commits leave nothing for git to report.
    let status = porcelain(&root);
    assert_eq!(status, "", "git status after mirai's applies");

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
    let health = report("baseline: GET /health", &mut health);
    let propose = report("patch.propose over HTTP", &mut propose);
    report("patch.propose, index loaded", &mut propose_indexed);
    let apply = report("patch.apply + commit over HTTP", &mut apply);
    let apply_indexed = report("patch.apply + commit, index loaded", &mut apply_indexed);
    let git_median = report(
        "baseline: git apply + git commit (processes)",
        &mut baseline,
    );
    println!(
        "\napply (index loaded) / propose: {:.2}   apply / git baseline: {:.2}",
        apply_indexed / propose,
        apply / git_median
    );
    println!(
        "git status after mirai's applies: clean; git fsck after the run: {}",
        fsck(&root)
    );
    Row {
        notes: notes.len(),
        health,
        propose,
        apply,
        apply_indexed,
        git: git_median,
    }
}
