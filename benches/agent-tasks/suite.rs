//! The agent task suite: tasks on a fixture vault (`vault/`), each with a
//! scripted conversation for the fake model and a checker on the resulting
//! repository (bytes, commits, their messages and trailers) and on the reply.
//!
//! Shared by `spec/agent_tasks.rs` (every task, fake model, in `cargo test`)
//! and `benches/agent-tasks/run.rs` (any OpenAI-compatible model).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
pub struct Task {
    pub name: String,
    pub task: String,
    #[serde(default)]
    pub read_only: bool,
    /// Review mode (MIRAI_POLICY_MODE=review): the run's writes become one proposal.
    #[serde(default)]
    pub review: bool,
    #[serde(default)]
    pub setup: Option<Setup>,
    /// A check of mirai's own behaviour that needs the scripted model's
    /// misbehaviour (a claim with no write): skipped with a real model, which
    /// may well do the task instead.
    #[serde(default)]
    pub scripted_only: bool,
    pub expect: Expect,
    /// The fake model's answers, in order.
    pub script: Vec<String>,
}

/// What happens to the vault after it is committed and before the run.
#[derive(Debug, Clone, Deserialize)]
pub struct Setup {
    /// Another writer's commit, so a `base_commit` from before it is stale.
    pub external_change: Option<FileChange>,
    /// A long note committed with the vault (before the run's base).
    pub long_note: Option<LongNote>,
    /// More notes committed with the vault: path -> text.
    #[serde(default)]
    pub notes: std::collections::BTreeMap<String, String>,
}

/// A generated note of `sections` sections (`## Part N`) of `lines` lines
/// each, with `fact` as the last line of section `fact_in`.
#[derive(Debug, Clone, Deserialize)]
pub struct LongNote {
    pub path: String,
    pub sections: usize,
    pub lines: usize,
    pub fact_in: usize,
    pub fact: String,
}

impl LongNote {
    fn text(&self) -> String {
        let mut text = String::from("# Handbook\n");
        for section in 1..=self.sections {
            text.push_str(&format!("\n## Part {section}\n\n"));
            for line in 1..self.lines {
                text.push_str(&format!(
                    "Rule {section}.{line}: keep the shop tidy and the shelves stocked.\n"
                ));
            }
            if section == self.fact_in {
                text.push_str(&format!("{}\n", self.fact));
            }
        }
        text
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub content: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Expect {
    pub stopped: String,
    /// Commits the run makes; each must carry its `Mirai-Run` trailer.
    pub commits: usize,
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, FileCheck>,
    /// Every string must appear in the reply (case ignored).
    #[serde(default)]
    pub reply_contains: Vec<String>,
    /// HEAD does not move and the working tree stays clean.
    #[serde(default)]
    pub unchanged: bool,
    /// The run's `warnings` (reply checked against what happened): each string
    /// must appear in one of them (case ignored); `[]` means there must be none.
    /// Absent: not checked.
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
    /// The run's `outcome.kind` from mirai's record (committed, proposed, dry_run, nothing).
    #[serde(default)]
    pub outcome: Option<String>,
    /// Notes `outcome.notes` must name (the notes changed, proposed or kept aside).
    #[serde(default)]
    pub outcome_notes: Vec<String>,
    /// Whether the reply must be marked `reply_contradicted`; absent: it must not be.
    #[serde(default)]
    pub contradicted: bool,
    /// Operations the run's code must call, in this order (others may come between).
    #[serde(default)]
    pub calls: Vec<String>,
    /// Every string must appear in the code the run ran.
    #[serde(default)]
    pub code_contains: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FileCheck {
    pub equals: Option<String>,
    #[serde(default)]
    pub contains: Vec<String>,
    #[serde(default)]
    pub lacks: Vec<String>,
    #[serde(default)]
    pub deleted: bool,
}

/// A vault ready for one task.
pub struct Prepared {
    pub root: PathBuf,
    /// HEAD when the run starts.
    pub base: String,
    /// The task and the script with `{base_commit}` filled in.
    pub task: String,
    pub script: Vec<String>,
}

/// The tasks to run: those named in `only` (all when empty), without the
/// `scripted_only` ones when a real model answers (each said skipped).
pub fn selected(tasks: Vec<Task>, only: &[String], real_model: bool) -> Vec<Task> {
    tasks
        .into_iter()
        .filter(|t| only.is_empty() || only.contains(&t.name))
        .filter(|t| {
            let skip = t.scripted_only && real_model;
            if skip {
                println!(
                    "{}: skipped (scripted_only: it needs the scripted model's misbehaviour)",
                    t.name
                );
            }
            !skip
        })
        .collect()
}

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/agent-tasks")
}

/// Every task, by name.
pub fn load_all() -> Vec<Task> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(suite_dir().join("tasks"))
        .expect("benches/agent-tasks/tasks")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect()
}

/// Copies the vault into `dir/notes`, commits it, and applies the task's setup.
pub fn prepare(task: &Task, dir: &Path) -> Prepared {
    let root = dir.join("notes");
    copy_dir(&suite_dir().join("vault"), &root);
    if let Some(long) = task.setup.as_ref().and_then(|s| s.long_note.as_ref()) {
        std::fs::write(root.join(&long.path), long.text()).unwrap();
    }
    for (path, text) in task.setup.iter().flat_map(|s| &s.notes) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(&root, &["init", "-q"]);
    mirai::repo::exclude_mirai_folder(&root.join(".git")).unwrap();
    commit_all(&root, "vault");
    let seeded = head(&root);
    if let Some(change) = task.setup.as_ref().and_then(|s| s.external_change.as_ref()) {
        std::fs::write(root.join(&change.path), &change.content).unwrap();
        commit_all(&root, "someone else's change");
    }
    let fill = |text: &str| text.replace("{base_commit}", &seeded);
    Prepared {
        base: head(&root),
        task: fill(&task.task),
        script: task.script.iter().map(|answer| fill(answer)).collect(),
        root,
    }
}

/// Everything wrong with the outcome of `task`; empty when it passed.
pub fn check(task: &Task, prepared: &Prepared, report: &Value) -> Vec<String> {
    let expect = &task.expect;
    let root = &prepared.root;
    let mut failures = Vec::new();
    if report["stopped"] != expect.stopped.as_str() {
        failures.push(format!(
            "stopped {} (expected {})",
            report["stopped"], expect.stopped
        ));
    }
    let made: Vec<String> = git(
        root,
        &["rev-list", "--reverse", &format!("{}..HEAD", prepared.base)],
    )
    .lines()
    .map(str::to_string)
    .collect();
    if made.len() != expect.commits {
        failures.push(format!(
            "{} commits (expected {})",
            made.len(),
            expect.commits
        ));
    }
    let reported: Vec<String> = report["commits"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if reported != made {
        failures.push(format!(
            "the report lists commits {reported:?}, git has {made:?}"
        ));
    }
    let trailer = format!("Mirai-Run: {}", report["run_id"].as_str().unwrap_or("?"));
    for sha in &made {
        let message = git(root, &["log", "-1", "--format=%B", sha]);
        let mut lines = message.lines();
        let subject_ok = lines.next().is_some_and(|s| {
            s.starts_with("mcp.patch_apply: ") || s.starts_with("mcp.notes_move: ")
        });
        if !subject_ok || !message.contains(&format!("\n\n{trailer}\n")) {
            failures.push(format!("commit {sha} has message {message:?}"));
        }
    }
    for (path, want) in &expect.files {
        match std::fs::read_to_string(root.join(path)) {
            Err(_) if want.deleted => {}
            Err(_) => failures.push(format!("{path} is missing")),
            Ok(_) if want.deleted => failures.push(format!("{path} still exists")),
            Ok(text) => {
                if want.equals.as_ref().is_some_and(|equals| *equals != text) {
                    failures.push(format!("{path} is {text:?}"));
                }
                for needle in &want.contains {
                    if !text.contains(needle.as_str()) {
                        failures.push(format!("{path} lacks {needle:?}: {text:?}"));
                    }
                }
                for needle in &want.lacks {
                    if text.contains(needle.as_str()) {
                        failures.push(format!("{path} still has {needle:?}"));
                    }
                }
            }
        }
    }
    if expect.unchanged {
        if head(root) != prepared.base {
            failures.push("HEAD moved".into());
        }
        let status = git(root, &["status", "--porcelain"]);
        if !status.trim().is_empty() {
            failures.push(format!("the working tree changed: {status}"));
        }
    }
    if let Some(kind) = &expect.outcome {
        if report["outcome"]["kind"] != kind.as_str() {
            failures.push(format!(
                "the outcome is {} (expected {kind})",
                report["outcome"]
            ));
        }
    }
    for note in &expect.outcome_notes {
        let named = report["outcome"]["notes"]
            .as_array()
            .is_some_and(|notes| notes.iter().any(|n| n == note.as_str()));
        if !named {
            failures.push(format!(
                "the outcome does not name {note}: {}",
                report["outcome"]
            ));
        }
    }
    if report["reply_contradicted"].as_bool() != Some(expect.contradicted) {
        failures.push(format!(
            "reply_contradicted is {} (expected {})",
            report["reply_contradicted"], expect.contradicted
        ));
    }
    if let Some(untrue) = untrue_answer(report) {
        failures.push(untrue);
    }
    let reply = report["reply"].as_str().unwrap_or_default().to_lowercase();
    for needle in &expect.reply_contains {
        if !reply.contains(&needle.to_lowercase()) {
            failures.push(format!("the reply lacks {needle:?}: {reply:?}"));
        }
    }
    let steps = report["steps"].as_array().cloned().unwrap_or_default();
    // mirai's opening look is part of the run: its calls count, first.
    let called: Vec<&str> = report
        .get("opening")
        .into_iter()
        .chain(&steps)
        .flat_map(|step| step["calls"].as_array().into_iter().flatten())
        .filter_map(|call| call["op"].as_str())
        .collect();
    let mut left = called.iter();
    for op in &expect.calls {
        if !left.any(|c| c == op) {
            failures.push(format!(
                "the run does not call {op} in order: it called {called:?}"
            ));
            break;
        }
    }
    let code: String = steps
        .iter()
        .filter_map(|step| step["code"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for needle in &expect.code_contains {
        if !code.contains(needle.as_str()) {
            failures.push(format!("the run's code lacks {needle:?}"));
        }
    }
    if let Some(wanted) = &expect.warnings {
        let warnings: Vec<String> = report["warnings"]
            .as_array()
            .map(|w| {
                w.iter()
                    .filter_map(|s| s.as_str().map(str::to_lowercase))
                    .collect()
            })
            .unwrap_or_default();
        if wanted.is_empty() && !warnings.is_empty() {
            failures.push(format!("the run has warnings {warnings:?} (expected none)"));
        }
        for needle in wanted {
            if !warnings.iter().any(|w| w.contains(&needle.to_lowercase())) {
                failures.push(format!("no warning says {needle:?}: {warnings:?}"));
            }
        }
    }
    failures
}

/// Words a reply uses to say something was changed.
const CHANGE_WORDS: [&str; 12] = [
    "added", "appended", "changed", "created", "deleted", "removed", "renamed", "moved", "updated",
    "set ", "replaced", "fixed",
];

/// A final answer that states a change its record does not show, with no
/// outcome leading it (`reply_contradicted` unset): a failure of the system,
/// whatever the model did. Checked apart from mirai's own check, by words.
pub fn untrue_answer(report: &Value) -> Option<String> {
    let reply = report["reply"].as_str()?.to_lowercase();
    let changed_nothing = report["outcome"]["kind"] == "nothing";
    let negated = [
        "not ",
        "n't",
        "nothing",
        "no change",
        "unable",
        "cannot",
        "could not",
    ]
    .iter()
    .any(|word| reply.contains(word));
    let claims = CHANGE_WORDS.iter().any(|word| reply.contains(word));
    (changed_nothing && claims && !negated && report["reply_contradicted"] != true).then(|| {
        format!("UNTRUE ANSWER: the reply states a change, the record shows none, and nothing marks it: {reply:?}")
    })
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let target = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn commit_all(root: &Path, message: &str) {
    git(root, &["add", "-A"]);
    git(
        root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            message,
        ],
    );
}

fn head(root: &Path) -> String {
    git(root, &["rev-parse", "HEAD"]).trim().to_string()
}

fn git(root: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
