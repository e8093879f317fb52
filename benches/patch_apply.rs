//! Propose and apply through HTTP on large vaults, one keep-alive connection,
//! against baselines measured in the same run: a `GET /health` round trip
//! before each sample, propose of the same patch, and `git apply` +
//! `git commit` as subprocesses on the same repository. After mirai's applies
//! `git status --porcelain` must be empty (the bench fails otherwise).
//!
//! Then what a client sees: `SUSTAINED` applies back to back (no propose or
//! health between them) to notes of about 2 KB, the index loaded, as a client
//! writing in a loop does. A short interleaved run leaves the server idle
//! between applies and deletes few files; a sustained one does not. On an
//! ext4 file system without a journal (this machine's disk) every file
//! created skips the inodes deleted in the last one to six minutes, one by
//! one, so the cost of each of a commit's new files (its loose objects, the
//! note's temp file, the index and ref locks) grows with the files deleted
//! recently: the bench prints the time to create a file in the vault's `.git`
//! before and after, beside the first and the last applies.
//!
//! cargo bench --bench patch_apply -- VAULT [VAULT...]   (git vaults from the gen-notes example, e.g. 1,000 and 10,000 notes)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use support::{copy_tree, fsck, git, median_p95, report, time_ms, vault_arg, Server};

const SAMPLES: usize = 100;
const WARMUP: usize = 5;
/// Applies back to back in the sustained run.
const SUSTAINED: usize = 1000;
/// Notes the sustained run writes to: about 2 KB, as a client's typical note.
const TYPICAL_BYTES: std::ops::RangeInclusive<usize> = 1500..=2600;

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
        "{:<10} {:>8} {:>9} {:>9} {:>15} {:>11} {:>10} {:>10}",
        "notes",
        "health",
        "propose",
        "apply",
        "apply, indexed",
        "git baseline",
        "sustained",
        "(p95)"
    );
    for row in summary {
        println!(
            "{:<10} {:>8.3} {:>9.3} {:>9.3} {:>15.3} {:>11.3} {:>10.3} {:>10.3}",
            row.notes,
            row.health,
            row.propose,
            row.apply,
            row.apply_indexed,
            row.git,
            row.sustained,
            row.sustained_p95
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
    sustained: f64,
    sustained_p95: f64,
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
    let (sustained, sustained_p95) = sustained_run(&server, &root, &notes);
    Row {
        notes: notes.len(),
        health,
        propose,
        apply,
        apply_indexed,
        git: git_median,
        sustained,
        sustained_p95,
    }
}

/// `SUSTAINED` applies back to back to notes of about 2 KB (each appended
/// to in turn), the index loaded; answers the median and p95.
fn sustained_run(server: &Server, root: &Path, notes: &[String]) -> (f64, f64) {
    let mut typical: Vec<&String> = notes
        .iter()
        .filter(|path| {
            path.is_ascii()
                && std::fs::read_to_string(root.join(path)).is_ok_and(|content| {
                    TYPICAL_BYTES.contains(&content.len())
                        && append_patch(path, &content, "probe").is_some()
                })
        })
        .collect();
    // A fixed shuffle, so notes of every folder take turns.
    let mut rng = fastrand::Rng::with_seed(1);
    rng.shuffle(&mut typical);
    let created_before = create_us(root);
    let mut times = Vec::with_capacity(SUSTAINED);
    for i in 0..SUSTAINED {
        let path = typical[i % typical.len()];
        let content = std::fs::read_to_string(root.join(path)).unwrap();
        let patch = append_patch(path, &content, &format!("sustained {i}")).unwrap();
        times.push(time_ms(|| {
            let response = server
                .client
                .post(format!("{}/mcp/patch/apply", server.url))
                .json(&json!({ "patch": patch }))
                .send()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
        }));
    }
    let created_after = create_us(root);
    let first = median_p95(&mut times[..100].to_vec()).0;
    let last = median_p95(&mut times[SUSTAINED - 100..].to_vec()).0;
    println!(
        "\nsustained: {SUSTAINED} applies back to back to {} notes of {}-{} bytes, index loaded",
        typical.len(),
        TYPICAL_BYTES.start(),
        TYPICAL_BYTES.end()
    );
    let (median, p95) = median_p95(&mut times);
    println!(
        "{:<44} median {median:>9.3} ms   p95 {p95:>9.3} ms   (n={SUSTAINED})",
        "patch.apply + commit, back to back"
    );
    println!("  the first 100: median {first:.3} ms; the last 100: median {last:.3} ms");
    println!(
        "  creating a file in the vault's .git: {created_before:.0} us before, {created_after:.0} us after"
    );
    (median, p95)
}

/// Microseconds to create (and keep, so nothing is deleted) an empty file in
/// the vault's `.git`, the median of 20.
fn create_us(root: &Path) -> f64 {
    let git_dir = root.join(".git");
    let taken = std::fs::read_dir(&git_dir).unwrap().count();
    let mut times: Vec<f64> = (0..20)
        .map(|i| {
            let file = git_dir.join(format!("bench-probe-{}", taken + i));
            time_ms(|| drop(std::fs::File::create_new(&file).unwrap())) * 1000.0
        })
        .collect();
    median_p95(&mut times).0
}
