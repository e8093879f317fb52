//! Recovery: what mirai does at start-up with the intent files of processes
//! that died (see intent.rs for the records). A dead mirai's lock files are
//! removed only while they are still the ones it recorded; its write (of one
//! note or several in one commit) is rolled forward (the commit is on the
//! branch: the index entries are put right, in one write of the index) or back
//! (notes were renamed into place, the commit is missing: each goes back to
//! HEAD's bytes), and a note is never touched when the working tree holds bytes
//! that are not mirai's (a person's edit since). With no other live mirai, mirai's stray
//! temp files are removed too.
//!
//! Written as `impl Repo` so that the repository calls it as a method: the
//! records (intent.rs) know nothing of the repository.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use cap_std::fs::Dir;
use git2::{Oid, Repository};

use super::intent::*;
use super::{blob_id, tracked_under, Landed, Repo};
use crate::error::{Error, Result};
use crate::notes::root::Expected;
use crate::notes::{Existence, Notes};

/// How long after a dead mirai recorded that it was taking the branch's ref
/// lock an empty ref lock may appear and still be taken for its own (libgit2
/// creates it a few microseconds after the record).
const REF_LOCK_WINDOW_NS: u64 = 1_000_000_000;

/// File times come from the kernel's coarse clock, up to a few ticks behind
/// the clock the record's time is read from.
const COARSE_CLOCK_SLACK_NS: u64 = 50_000_000;

impl Repo {
    /// Deals with every dead mirai's intent file (not `own`); with `sweep` and no
    /// other live mirai, also removes mirai's stray temp files.
    pub(super) fn recover_dead(&self, journal: &mut Journal, sweep: bool) -> Result<Recovery> {
        let (git, notes) = (&self.git, &self.notes);
        let own = journal.name().to_string();
        let own = own.as_str();
        let dir = intents_dir(notes)?;
        let mut done = Recovery::default();
        let mut names: Vec<String> = dir
            .entries()
            .map_err(|e| Error::internal(format!("cannot list .mirai/{INTENTS_DIR}/: {e}")))?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| (name.ends_with(".jsonl") || name.ends_with(".json")) && name != own)
            .collect();
        names.sort_unstable();
        // Read only when there are records: git's index of a large vault takes a while.
        let tracked: HashSet<String> = if names.is_empty() {
            HashSet::new()
        } else {
            tracked_under(notes.root(), &format!(".mirai/{INTENTS_DIR}/"))
                .into_iter()
                .collect()
        };
        for name in names {
            if tracked.contains(&format!(".mirai/{INTENTS_DIR}/{name}")) {
                log::warn!(
                    "ignoring .mirai/{INTENTS_DIR}/{name}: it is tracked by git, so it is not mirai's record"
                );
                done.ignored += 1;
                continue;
            }
            let Some((file, intent)) = open_dead(&dir, &name, &mut done) else {
                continue;
            };
            done.dead += 1;
            recover_one(self, journal, &name, &intent, &mut done);
            // Still holding its lock, so nobody else is working on it.
            if let Err(e) = dir.remove_file(&name) {
                log::warn!("could not remove .mirai/{INTENTS_DIR}/{name}: {e}");
            }
            drop(file);
        }
        if sweep && done.live == 0 {
            done.temps_removed = sweep_temps(git, notes, &dir, own) + self.releaser.sweep();
        }
        Ok(done)
    }
}

impl Repo {
    /// Puts back what this process's own failed write could not (its record
    /// kept for recovery), before the next write replaces the record.
    pub(super) fn recover_own(&self, journal: &mut Journal, intent: &Intent) {
        let mut done = Recovery::default();
        if let Err(e) = finish_write(self, journal, intent, &mut done) {
            log::warn!(
                "recovery: could not finish this process's failed write: {}",
                e.message
            );
        }
        journal.idle();
    }
}

fn recover_one(
    repo: &Repo,
    journal: &mut Journal,
    name: &str,
    intent: &Intent,
    done: &mut Recovery,
) {
    let git_dir = repo.git.path();
    let index_lock = git_dir.join("index.lock");
    if let Ok(meta) = fs::symlink_metadata(&index_lock) {
        if meta.is_file() && intent.index_lock.contains(&FileId::of(&meta)) {
            remove_lock(&index_lock, ".git/index.lock", intent, done);
        }
    }
    if let Some(reference) = intent.reference.as_deref().filter(|r| valid_reference(r)) {
        let lock = git_dir.join(format!("{reference}.lock"));
        if let Ok(meta) = fs::symlink_metadata(&lock) {
            if meta.is_file() && ref_lock_is_ours(&lock, &meta, intent) {
                remove_lock(&lock, &format!(".git/{reference}.lock"), intent, done);
            }
        }
    }
    if matches!(intent.stage, Stage::Writing | Stage::Committing) {
        if let Err(e) = finish_write(repo, journal, intent, done) {
            log::warn!(
                "recovery: could not finish the write recorded in .mirai/{INTENTS_DIR}/{name}: {}",
                e.message
            );
        }
    }
}

fn remove_lock(path: &Path, shown: &str, intent: &Intent, done: &mut Recovery) {
    match fs::remove_file(path) {
        Ok(()) => {
            log::info!(
                "recovery: removed {shown} left by a mirai that died (pid {})",
                intent.pid
            );
            done.locks_removed += 1;
        }
        Err(e) => log::warn!("recovery: could not remove {shown}: {e}"),
    }
}

/// `refs/heads/<name>` (a valid name) or `HEAD`: never a path of the record's choosing.
fn valid_reference(reference: &str) -> bool {
    reference == "HEAD"
        || (reference.starts_with("refs/heads/") && git2::Reference::is_valid_name(reference))
}

/// The ref lock is the dead mirai's when it is the file it recorded (or that
/// file with the new commit written into it, an instant before the rename),
/// or, when it died between announcing the lock and recording it, an empty
/// lock made within [`REF_LOCK_WINDOW_NS`] of the announcement.
fn ref_lock_is_ours(path: &Path, meta: &fs::Metadata, intent: &Intent) -> bool {
    let id = FileId::of(meta);
    match intent.ref_lock {
        Some(recorded) if recorded == id => true,
        Some(recorded) if recorded.ino == id.ino => match &intent.commit {
            Some(commit) => {
                fs::read(path).is_ok_and(|bytes| bytes == format!("{commit}\n").as_bytes())
            }
            None => false,
        },
        Some(_) => false,
        None => {
            let made = id.mtime_ns.max(0) as u64;
            intent.stage == Stage::Committing
                && meta.len() == 0
                && made + COARSE_CLOCK_SLACK_NS >= intent.recorded_ns
                && made <= intent.recorded_ns + REF_LOCK_WINDOW_NS
        }
    }
}

fn parse_oid(text: &Option<String>) -> Result<Option<Oid>> {
    text.as_deref()
        .map(|t| Oid::from_str(t).map_err(|_| Error::internal(format!("not an object id: {t:?}"))))
        .transpose()
}

/// One note of the recorded write, as it is on disk now.
struct OnDisk {
    rel: String,
    released: Option<String>,
    skip_worktree: bool,
    before: Option<Oid>,
    index_before: Option<Oid>,
    after: Option<Oid>,
    work: Option<Vec<u8>>,
}

/// Reads the note `recorded` names, as it is now (its path must pass the rules
/// for a write, whatever the record says).
fn on_disk(repo: &Repo, recorded: &NoteIntent) -> Result<OnDisk> {
    let rel = match repo
        .notes
        .resolve_for_write(&recorded.note, Existence::MayBeMissing)
    {
        Ok(note) => note.rel,
        // A pull also writes visible files that are not notes (an image).
        Err(_) if recorded.skip_worktree || plain_visible(&recorded.note) => recorded.note.clone(),
        Err(e) => return Err(e),
    };
    // A path a pull keeps out of the working tree has nothing on disk to read.
    let work = match repo.notes.existing_slot(&rel) {
        _ if recorded.skip_worktree => None,
        Ok(Some(slot)) => slot.read().map_err(|r| crate::notes::refused(&rel, r))?,
        Ok(None) => None,
        Err(e) => return Err(e),
    };
    Ok(OnDisk {
        before: parse_oid(&recorded.before)?,
        index_before: parse_oid(&recorded.index_before)?,
        after: parse_oid(&recorded.after)?,
        work,
        rel,
        released: recorded.released.clone(),
        skip_worktree: recorded.skip_worktree,
    })
}

/// A path by the rules every caller's path meets (normalized, no `..`, no
/// control characters), none of it hidden: what a pull writes into the
/// working tree besides notes (the root handle still confines it).
fn plain_visible(rel: &str) -> bool {
    crate::notes::path::lexical(rel).is_ok_and(|normal| normal == rel)
        && !crate::notes::path::is_hidden(rel)
}

/// Rolls the recorded write forward or back, for each note that holds what mirai wrote.
fn finish_write(
    repo: &Repo,
    journal: &mut Journal,
    intent: &Intent,
    done: &mut Recovery,
) -> Result<()> {
    let git = &repo.git;
    let commit = parse_oid(&intent.commit)?;
    let reference = intent.reference.as_deref().filter(|r| valid_reference(r));
    let head = match reference {
        Some(reference) => match git.refname_to_id(reference) {
            Ok(id) => Some(id),
            Err(e) if e.code() == git2::ErrorCode::NotFound => None,
            Err(e) => return Err(Error::git(e.message().to_string())),
        },
        None => None,
    };
    let landed = match (commit, head) {
        (Some(commit), Some(head)) => {
            head == commit || git.graph_descendant_of(head, commit).unwrap_or(false)
        }
        _ => false,
    };
    let mut notes = Vec::with_capacity(intent.notes.len());
    for recorded in &intent.notes {
        match on_disk(repo, recorded) {
            Ok(note) => notes.push(note),
            Err(e) => log::warn!(
                "recovery: {:?} of the write of pid {} is left as it is: {}",
                recorded.note,
                intent.pid,
                e.message
            ),
        }
    }
    if landed {
        let tree = commit
            .and_then(|id| git.find_commit(id).ok())
            .and_then(|c| c.tree().ok());
        let landed: Vec<Landed> = notes
            .iter()
            .map(|note| Landed {
                rel: &note.rel,
                index_before: note.index_before,
                after: note.after,
                work: note.work.as_deref(),
                skip_worktree: note.skip_worktree.then(|| {
                    tree.as_ref()
                        .and_then(|t| t.get_path(Path::new(&note.rel)).ok())
                        .map_or(0o100644, |entry| entry.filemode() as u32)
                }),
            })
            .collect();
        let rolled = repo.roll_index_forward(journal, &landed)?;
        for rel in &rolled {
            log::info!(
                "recovery: rolled forward {rel}: commit {} is on the branch; its index entry is now put right (pid {} died)",
                intent.commit.as_deref().unwrap_or(""),
                intent.pid
            );
        }
        done.rolled_forward += usize::from(!rolled.is_empty());
        return Ok(());
    }
    // HEAD still has the notes as they were: what mirai wrote goes back.
    let head_tree = head
        .and_then(|id| git.find_commit(id).ok())
        .and_then(|c| c.tree().ok());
    let mut rolled_back = false;
    for note in notes.iter().filter(|note| !note.skip_worktree) {
        match roll_back(repo, head_tree.as_ref(), note, intent.pid) {
            Ok(rolled) => rolled_back |= rolled,
            Err(e) => log::warn!(
                "recovery: could not roll back {} (pid {} died): {}",
                note.rel,
                intent.pid,
                e.message
            ),
        }
    }
    done.rolled_back += usize::from(rolled_back);
    Ok(())
}

/// Puts `note` back to its bytes before the write when it holds what mirai
/// wrote and HEAD still has it as it was; `false` when it is left as it is.
fn roll_back(repo: &Repo, head: Option<&git2::Tree>, note: &OnDisk, pid: u32) -> Result<bool> {
    let rel = note.rel.as_str();
    let work_id = note.work.as_deref().map(blob_id).transpose()?;
    if work_id == note.before || work_id != note.after {
        if work_id != note.before {
            log::warn!(
                "recovery: {rel} holds bytes mirai did not write (someone's edit since pid {pid} died); left as it is"
            );
        }
        return Ok(false);
    }
    // The note is mirai's unacknowledged write; HEAD still has the note as it was.
    let head_blob =
        head.and_then(|tree| tree.get_path(Path::new(rel)).ok().map(|entry| entry.id()));
    if head_blob != note.before {
        log::warn!(
            "recovery: {rel} changed in HEAD since pid {pid} died; its half-done write is left as it is"
        );
        return Ok(false);
    }
    let slot = repo.notes.slot(rel, true)?;
    // The old version's hard link, when it is still there and holds those
    // bytes, goes back by a rename (no free space needed).
    let held = note
        .released
        .as_deref()
        .and_then(|name| repo.releaser.reclaim(name))
        .filter(|held| {
            held.read()
                .ok()
                .and_then(|bytes| blob_id(&bytes).ok())
                .is_some_and(|id| Some(id) == note.before)
        });
    // Only while the note still holds mirai's write: an edit made since stays.
    let installed = note.work.as_deref().map(Expected::Bytes);
    let put_back = match held {
        Some(held) => match held.put_back(&slot, installed) {
            Ok(None) => Ok(()),
            Ok(Some(kept)) => {
                repo.releaser.release(kept);
                log::warn!("recovery: {rel} was edited while mirai started; the edit is kept");
                return Ok(false);
            }
            Err((held, e)) => {
                repo.releaser.release(held);
                Err(e)
            }
        },
        None => Err(std::io::Error::other("no held link")),
    };
    if put_back.is_err() {
        match note.before {
            Some(blob) => {
                let blob = repo.git.find_blob(blob).map_err(|e| {
                    Error::git(format!("cannot read {rel} from HEAD: {}", e.message()))
                })?;
                slot.write(blob.content())
                    .map_err(|e| Error::internal(format!("cannot restore {rel}: {e}")))?;
            }
            None => slot.remove().map_err(|r| crate::notes::refused(rel, r))?,
        }
    }
    log::info!(
        "recovery: rolled back {rel} to HEAD's bytes: its write was never committed (pid {pid} died)"
    );
    Ok(true)
}

/// Removes mirai's stray temp files: the artifact's
/// `.mirai/index.json.tmp-*`, git's `.git/mirai-index-*.tmp` and intent files'
/// own temps; and notes' `.mirai-<pid>-<n>.tmp` on a thread of its own (it
/// walks every folder, and start-up need not wait for it; it never takes this
/// process's temp files). Only when no other mirai is alive. Answers how many
/// went, the notes' temps not counted.
fn sweep_temps(git: &Repository, notes: &Notes, intents: &Dir, own: &str) -> usize {
    let walked = notes.clone();
    let spawned = std::thread::Builder::new()
        .name("mirai-sweep".into())
        .spawn(move || {
            let removed = walked.remove_note_temps();
            if removed > 0 {
                log::info!(
                    "recovery: removed {removed} temporary note file(s) left by a mirai that died"
                );
            }
        });
    if let Err(e) = spawned {
        log::warn!("recovery: notes' temp files not swept: cannot start a thread: {e}");
    }
    let mut removed = notes.remove_state_temps();
    if let Ok(entries) = fs::read_dir(git.path()) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("mirai-index-")
                && name.ends_with(".tmp")
                && fs::remove_file(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
    }
    if let Ok(entries) = intents.entries() {
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if (name.contains(".jsonl.tmp-") || name.contains(".json.tmp-"))
                && !name.starts_with(own)
                && intents.remove_file(&name).is_ok()
            {
                removed += 1;
            }
        }
    }
    // Locks in mirai's own remote-tracking namespace (nobody else writes there).
    removed += remove_locks_under(&git.path().join("refs/remotes/mirai"), 8);
    // libgit2 takes `shallow.lock` in every fetch; git itself only in a shallow
    // repository. So in one that is not shallow, the lock is a dead mirai's
    // fetch, and left there it would fail every fetch after it.
    let shallow_lock = git.path().join("shallow.lock");
    if !git.path().join("shallow").exists()
        && fs::symlink_metadata(&shallow_lock).is_ok_and(|meta| meta.is_file())
        && fs::remove_file(&shallow_lock).is_ok()
    {
        removed += 1;
    }
    if removed > 0 {
        log::info!("recovery: removed {removed} temporary file(s) left by a mirai that died");
    }
    removed
}

/// Removes the `*.lock` files under `dir` (not following symlinks, at most
/// `depth` folders down); answers how many.
fn remove_locks_under(dir: &Path, depth: usize) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth > 0 {
            removed += remove_locks_under(&entry.path(), depth - 1);
        } else if kind.is_file()
            && entry.file_name().to_string_lossy().ends_with(".lock")
            && fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}
