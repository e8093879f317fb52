//! Sync with a git remote (`MIRAI_GIT_REMOTE`): every commit pushed in the
//! background, the remote's commits pulled on an interval, on a webhook and on
//! demand, and the state of both for `repo.status`.
//!
//! - **Push**: [`Syncer::committed`] only marks that a push is wanted and wakes
//!   the pusher thread, so a write's answer never waits for the network. The
//!   pusher pushes whatever the branch holds when it gets to it, so a burst of
//!   commits becomes a few pushes; a failure is retried with backoff (1 s,
//!   doubling, at most 5 min); a push is never forced. `read_only` never pushes.
//! - **Pull**: fetch into `refs/remotes/mirai/<branch>` (no lock held), then,
//!   holding the writer lock every write holds, fast-forward HEAD, the index and
//!   the working tree ([`crate::repo::pull`]); the live index takes in the notes
//!   the pull wrote before the pull answers. Uncommitted edits in the way stop
//!   the pull with the reason in status. When both sides moved, the local
//!   commits are replayed on top of the remote's ([`crate::repo::replay`]);
//!   those that no longer apply stay on a `mirai/unmerged/<UTC time>` branch,
//!   which status lists.
//! - Network work (fetch, push) is one at a time ([`Syncer::network`]).
//! - Requested syncs (`repo.sync`, the push webhook) are coalesced and run
//!   on a thread of their own ([`queue`], [`Syncer::request`]).

pub mod known_hosts;
pub mod queue;
pub mod remote;
mod settings;
mod vet;
pub mod webhook;

pub use settings::{
    GitCredentials, SyncConfig, Transport, DEFAULT_GIT_USERNAME, DEFAULT_SYNC_INTERVAL_SECS,
};

/// A caller's place in the next requested sync ([`queue`]).
pub type Ticket = queue::Ticket<Synced>;

use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use git2::{Oid, Repository};
use serde::Serialize;

use crate::error::{Error, ErrorCode, Result};
use crate::events::Events;
use crate::index::live::LiveIndex;
use crate::notes::Notes;
use crate::repo::pull::Forward;
use crate::repo::replay::Replay;
use crate::repo::unheld::{self, Skipped};
use crate::repo::{Author, Repo};

/// Runs a closure with the repository while holding the writer lock that every
/// write holds (the operation context supplies it), so no apply interleaves
/// with a pull moving HEAD, the index and the working tree.
pub type WithWriter = Box<dyn Fn(&mut dyn FnMut(&Repo)) -> Result<()> + Send + Sync>;

pub use crate::repo::replay::UNMERGED_PREFIX;

/// The first wait after a failed push; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long the pusher lets a burst of commits gather before it pushes.
const GATHER: Duration = Duration::from_millis(20);
/// How often the pusher looks for commits nobody told it about (a person's in this clone).
const PUSH_CHECK_EVERY: Duration = Duration::from_secs(30);

/// What sync remembers between operations.
#[derive(Debug, Default)]
struct State {
    last_push: Option<DateTime<Utc>>,
    last_pull: Option<DateTime<Utc>>,
    last_error: Option<String>,
    /// A commit landed since the pusher last looked.
    push_wanted: bool,
}

/// The answer of `repo.status` (`GET /mcp/repo/status`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(rename = "RepoStatus")]
pub struct Status {
    /// The branch HEAD names (null when detached).
    pub branch: Option<String>,
    /// The commit HEAD points at (null on an unborn branch).
    pub head: Option<String>,
    /// The remote's URL without credentials (null when sync is off).
    pub remote: Option<String>,
    /// Commits on the branch the remote does not have, as of the last fetch or push.
    pub ahead: Option<usize>,
    /// Commits on the remote the branch does not have, as of the last fetch.
    pub behind: Option<usize>,
    /// When the last push succeeded (RFC 3339).
    pub last_push: Option<String>,
    /// When the last pull succeeded (RFC 3339).
    pub last_pull: Option<String>,
    /// Why the last pull or push did not happen (null once one succeeds).
    pub last_error: Option<String>,
    /// Branches holding local commits that could not be replayed on the remote's.
    pub unmerged: Vec<Unmerged>,
    /// Entries of HEAD this clone cannot hold (a name Linux refuses, a file
    /// entry naming a folder), left out of the working tree and the index
    /// with the reason; at most 100.
    pub skipped_paths: Vec<Skipped>,
}

/// One `mirai/unmerged/<UTC timestamp>` branch.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Unmerged {
    pub branch: String,
    pub commit: String,
}

/// The answer of `repo.sync`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Synced {
    /// Whether the pull brought commits in.
    pub pulled: bool,
    /// Whether a push sent commits out.
    pub pushed: bool,
    /// HEAD after both.
    pub head: Option<String>,
    pub unmerged: Vec<Unmerged>,
}

/// The sync of one notes repository with its remote.
pub struct Syncer {
    config: SyncConfig,
    notes: Notes,
    index: Arc<LiveIndex>,
    with_writer: WithWriter,
    author: Author,
    /// False in `read_only` mode: nothing is ever pushed.
    pushes: bool,
    state: Mutex<State>,
    /// Wakes the pusher (paired with `state`).
    wake: Condvar,
    /// One fetch or push at a time.
    network: Mutex<()>,
    /// Requested syncs: one running, one waiting.
    queue: Arc<queue::Queue<Synced>>,
    /// The change stream: told after each round (the commits a pull brings
    /// are told where the branch moves, in `repo`).
    events: Arc<Events>,
}

fn rfc3339(time: Option<DateTime<Utc>>) -> Option<String> {
    time.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

impl Syncer {
    pub fn new(
        config: SyncConfig,
        notes: Notes,
        index: Arc<LiveIndex>,
        with_writer: WithWriter,
        author: Author,
        pushes: bool,
        events: Arc<Events>,
    ) -> Syncer {
        Syncer {
            events,
            config,
            notes,
            index,
            with_writer,
            author,
            pushes,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            network: Mutex::new(()),
            queue: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The remote's URL as it may be shown.
    pub fn shown_remote(&self) -> String {
        self.config.shown_remote()
    }

    /// Whether this deployment pushes (not `read_only`).
    pub fn pushes(&self) -> bool {
        self.pushes
    }

    /// A commit landed: the pusher pushes soon. Never waits.
    pub fn committed(&self) {
        if !self.pushes {
            return;
        }
        self.state().push_wanted = true;
        self.wake.notify_all();
    }

    /// The repository, opened for network work and reading refs (`.git` only).
    fn git(&self) -> Result<Repository> {
        open_repository(self.notes.root())?.ok_or_else(|| {
            Error::git("NOTES_ROOT is not a git repository; start mirai serve once to prepare it")
        })
    }

    /// The branch sync follows: `MIRAI_GIT_BRANCH`, else the one HEAD names.
    fn branch(&self, git: &Repository) -> Result<String> {
        if let Some(branch) = &self.config.branch {
            return Ok(branch.clone());
        }
        let head = git
            .find_reference("HEAD")
            .map_err(|e| Error::git(format!("cannot read HEAD: {}", e.message())))?;
        match head
            .symbolic_target()
            .and_then(|t| t.strip_prefix("refs/heads/"))
        {
            Some(branch) => Ok(branch.to_string()),
            None => Err(Error::git(
                "HEAD is detached in NOTES_ROOT; check out a branch (or set MIRAI_GIT_BRANCH) to sync",
            )),
        }
    }

    /// Records the outcome of a pull or push for status, and logs a failure.
    fn note_error(&self, error: Option<&Error>) {
        let mut state = self.state();
        match error {
            Some(e) => {
                if state.last_error.as_deref() != Some(e.message.as_str()) {
                    log::warn!("sync: {}", e.message);
                }
                state.last_error = Some(e.message.clone());
            }
            None => state.last_error = None,
        }
    }

    /// Fetches and fast-forwards, or replays the local commits on top of the
    /// remote's when both moved. `Ok(true)`: commits came in. A pull that
    /// cannot join the two sides (uncommitted edits in the way) is a 409
    /// `conflict` with the reason, also kept for status.
    pub fn pull(&self) -> Result<bool> {
        let result = self.pull_inner();
        self.note_error(result.as_ref().err());
        if result.is_ok() {
            self.state().last_pull = Some(Utc::now());
        }
        result
    }

    fn pull_inner(&self) -> Result<bool> {
        let git = self.git()?;
        let branch = self.branch(&git)?;
        let fetched = {
            let _network = self.network.lock().unwrap_or_else(|p| p.into_inner());
            remote::fetch(&git, &self.config, &branch, self.notes.max_file_bytes())?
        };
        let Some(target) = fetched else {
            return Ok(false); // an empty remote: the first push creates the branch
        };
        let mut outcome = None;
        (self.with_writer)(&mut |repo: &Repo| {
            outcome = Some(self.forward_under_writer(repo, &branch, target));
        })?;
        let (outcome, replay) =
            outcome.unwrap_or_else(|| Err(Error::internal("the pull did not run")))?;
        match outcome {
            Forward::Nothing => Ok(false),
            Forward::Moved {
                notes,
                to,
                from,
                too_large,
            } => {
                let replayed = match &replay {
                    Some(replay) => format!(
                        ", {} local commit(s) replayed on top",
                        replay.replayed.len()
                    ),
                    None => String::new(),
                };
                log::info!(
                    "sync: pulled {} ({} note(s) changed{}{replayed}) from {}",
                    match &from {
                        Some(from) => format!("{}..{}", short(from), short(&to)),
                        None => short(&to).to_string(),
                    },
                    notes.len() + too_large.len(),
                    match too_large.len() {
                        0 => String::new(),
                        n => format!(", {n} past MIRAI_MAX_NOTE_BYTES and not indexed"),
                    },
                    self.shown_remote()
                );
                if let Some(unmerged) = replay.and_then(|r| r.unmerged) {
                    log::warn!(
                        "sync: {}; they are on branch {} (commit {}) and nothing of them is lost: \
                         join them by hand, then delete the branch",
                        unmerged.reason,
                        unmerged.branch,
                        unmerged.commit
                    );
                }
                Ok(true)
            }
            Forward::Blocked(reason) => Err(Error::conflict(format!("the pull stopped: {reason}"))),
            Forward::Diverged => Err(Error::internal(format!(
                "{branch} and the remote's {branch} both moved and the replay did not join them"
            ))),
        }
    }

    /// The fast-forward (or, when both sides moved, the replay of the local
    /// commits on top of the remote's), under the writer lock, and the live
    /// index told of every note it wrote before the lock is let go.
    fn forward_under_writer(
        &self,
        repo: &Repo,
        branch: &str,
        target: Oid,
    ) -> Result<(Forward, Option<Replay>)> {
        // A person's rebase, merge or detached HEAD: the pull waits for it to end.
        repo.check_on_branch()?;
        let (reference, _) = repo.branch_head()?;
        if reference != format!("refs/heads/{branch}") {
            return Err(Error::git(format!(
                "HEAD in NOTES_ROOT is {reference}, not the followed branch {branch}; check out {branch} (MIRAI_GIT_BRANCH) to sync"
            )));
        }
        let mut forward = repo.fast_forward(target, &self.author)?;
        let mut replay = None;
        if forward == Forward::Diverged {
            let replayed = repo.replay(target, &self.author)?;
            forward = replayed.forward.clone();
            replay = Some(replayed);
        }
        if let Forward::Moved {
            notes,
            to,
            too_large,
            ..
        } = &forward
        {
            let changes: Vec<(&str, Option<&str>)> = notes
                .iter()
                .map(|(path, content)| (path.as_str(), content.as_deref()))
                .collect();
            self.index.notes_changed(&changes, too_large, to);
        }
        Ok((forward, replay))
    }

    /// Pushes the branch when it has commits the remote lacks. `Ok(true)`:
    /// something was pushed. Refused in `read_only` mode.
    pub fn push(&self) -> Result<bool> {
        if !self.pushes {
            return Ok(false);
        }
        let result = self.push_inner();
        match &result {
            Ok(true) => {
                self.note_error(None);
                self.state().last_push = Some(Utc::now());
            }
            // Nothing to push (no network): what status says stays.
            Ok(false) => {}
            Err(e) => self.note_error(Some(e)),
        }
        result
    }

    fn push_inner(&self) -> Result<bool> {
        let git = self.git()?;
        let branch = self.branch(&git)?;
        let _network = self.network.lock().unwrap_or_else(|p| p.into_inner());
        let local = match git.refname_to_id(&format!("refs/heads/{branch}")) {
            Ok(id) => id,
            Err(_) => return Ok(false), // nothing committed yet
        };
        let tracking = git.refname_to_id(&remote::tracking_ref(&branch)).ok();
        if let Some(tracking) = tracking {
            if tracking == local || git.graph_descendant_of(tracking, local).unwrap_or(false) {
                return Ok(false);
            }
            if !git.graph_descendant_of(local, tracking).unwrap_or(false) {
                return Err(Error::conflict(format!(
                    "{branch} and the remote's {branch} have both moved; nothing is pushed until a pull joins them"
                )));
            }
        }
        remote::push(&git, &self.config, &branch, local, tracking)?;
        Ok(true)
    }

    /// Pushes what the branch holds now, for a command about to exit,
    /// waiting at most `wait` (the push goes on in its own thread; past the
    /// wait the process may end it, and the next sync pushes). `Ok(false)`:
    /// nothing to push; `Err`: why it was not pushed.
    pub fn push_before_exit(self: &Arc<Self>, wait: Duration) -> std::result::Result<bool, String> {
        if !self.pushes {
            return Ok(false);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let sync = Arc::clone(self);
        std::thread::Builder::new()
            .name("mirai-push-exit".into())
            .spawn(move || {
                let _ = tx.send(sync.push());
            })
            .map_err(|e| format!("cannot start the push: {e}"))?;
        match rx.recv_timeout(wait) {
            Ok(Ok(pushed)) => Ok(pushed),
            Ok(Err(e)) => Err(e.message),
            Err(_) => Err(format!(
                "the remote did not answer within {} s",
                wait.as_secs()
            )),
        }
    }

    /// A place in the next sync ([`queue`]): the caller joins the one waiting
    /// to run (or makes it) and gets its answer through the ticket.
    pub fn request(self: &Arc<Self>) -> Ticket {
        let syncer = Arc::downgrade(self);
        self.queue.join(move || match syncer.upgrade() {
            Some(syncer) => syncer.sync_now(),
            None => Err(Error::internal("sync stopped: mirai is shutting down")),
        })
    }

    /// `repo.sync`: a pull, then (unless `read_only`) a push.
    pub fn sync_now(&self) -> Result<Synced> {
        let pulled = self.pull();
        let pushed = match pulled {
            Ok(_) => self.push(),
            Err(_) => Ok(false),
        };
        self.round_done(matches!(pulled, Ok(true)), matches!(pushed, Ok(true)));
        let (pulled, pushed) = (pulled?, pushed?);
        let status = self.status()?;
        Ok(Synced {
            pulled,
            pushed,
            head: status.head,
            unmerged: status.unmerged,
        })
    }

    /// Tells the change stream a round ended: what it did, the unmerged
    /// branches and the last error.
    fn round_done(&self, pulled: bool, pushed: bool) {
        let unmerged: Vec<Unmerged> = self
            .git()
            .ok()
            .and_then(|git| local_status(Some(&git), self.notes.max_file_bytes()).ok())
            .map(|status| status.unmerged)
            .unwrap_or_default();
        let last_error = self.state().last_error.clone();
        self.events.publish(
            "sync",
            serde_json::json!({
                "pushed": pushed,
                "pulled": pulled,
                "unmerged": unmerged,
                "last_error": last_error,
            }),
            None,
        );
    }

    /// `repo.status`, from what is on disk and what sync remembers (no network).
    pub fn status(&self) -> Result<Status> {
        let git = self.git()?;
        let mut status = local_status(Some(&git), self.notes.max_file_bytes())?;
        status.remote = Some(self.shown_remote());
        if let Ok(branch) = self.branch(&git) {
            let local = git.refname_to_id(&format!("refs/heads/{branch}")).ok();
            let tracking = git.refname_to_id(&remote::tracking_ref(&branch)).ok();
            let (ahead, behind) = match (local, tracking) {
                (Some(local), Some(tracking)) => git
                    .graph_ahead_behind(local, tracking)
                    .map(|(a, b)| (Some(a), Some(b)))
                    .unwrap_or((None, None)),
                (Some(local), None) => (count_commits(&git, local), Some(0)),
                (None, Some(tracking)) => (Some(0), count_commits(&git, tracking)),
                (None, None) => (Some(0), Some(0)),
            };
            status.ahead = ahead;
            status.behind = behind;
        }
        let state = self.state();
        status.last_push = rfc3339(state.last_push);
        status.last_pull = rfc3339(state.last_pull);
        status.last_error = state.last_error.clone();
        Ok(status)
    }

    /// Starts the pusher (unless `read_only`) and the interval puller (unless
    /// the interval is 0), which pulls once at once. Both end with the last `Arc`.
    pub fn start(self: &Arc<Self>) {
        if self.pushes {
            let weak = Arc::downgrade(self);
            std::thread::Builder::new()
                .name("mirai-push".into())
                .spawn(move || pusher(weak))
                .map_err(|e| log::warn!("sync: cannot start the pusher: {e}"))
                .ok();
            // Commits made while mirai was down (or by a person in this clone) go out too.
            self.committed();
        }
        if self.config.interval_secs > 0 {
            let weak = Arc::downgrade(self);
            let every = Duration::from_secs(self.config.interval_secs);
            std::thread::Builder::new()
                .name("mirai-pull".into())
                .spawn(move || puller(weak, every))
                .map_err(|e| log::warn!("sync: cannot start the puller: {e}"))
                .ok();
        }
    }
}

/// The pusher: waits for a commit (or a periodic look), lets a burst gather,
/// pushes, and on failure waits with backoff before trying again.
fn pusher(weak: Weak<Syncer>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let Some(sync) = weak.upgrade() else { return };
        {
            let state = sync.state();
            let (mut state, _) = sync
                .wake
                .wait_timeout_while(state, PUSH_CHECK_EVERY, |s| !s.push_wanted)
                .unwrap_or_else(|p| p.into_inner());
            state.push_wanted = false;
        }
        drop(sync);
        std::thread::sleep(GATHER);
        let Some(sync) = weak.upgrade() else { return };
        let pushed = sync.push();
        if !matches!(pushed, Ok(false)) {
            sync.round_done(false, pushed.is_ok());
        }
        match pushed {
            Ok(_) => backoff = FIRST_BACKOFF,
            Err(e) if e.code == ErrorCode::Conflict => {
                // Retrying cannot help until a pull joins the two sides.
                backoff = FIRST_BACKOFF;
            }
            Err(_) => {
                drop(sync);
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                let Some(sync) = weak.upgrade() else { return };
                sync.state().push_wanted = true;
            }
        }
    }
}

/// The interval puller: a pull now, then one every `every`.
fn puller(weak: Weak<Syncer>, every: Duration) {
    loop {
        let Some(sync) = weak.upgrade() else { return };
        let pulled = sync.pull();
        sync.round_done(matches!(pulled, Ok(true)), false);
        if matches!(pulled, Ok(true)) {
            sync.committed(); // nothing to push after a fast-forward, but a person's commits may wait
        }
        drop(sync);
        std::thread::sleep(every);
    }
}

/// The notes repository at exactly `root` (`None`: it is not one yet);
/// messages name NOTES_ROOT, never the server's path (ARCHITECTURE.md, "Secrets
/// and server paths stay home").
pub fn open_repository(root: &std::path::Path) -> Result<Option<Repository>> {
    match Repository::open(root) {
        Ok(git) => Ok(Some(git)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => {
            let shown = root.display().to_string();
            Err(Error::git(format!(
                "cannot open the notes repository (NOTES_ROOT): {}",
                e.message().replace(&shown, "NOTES_ROOT")
            )))
        }
    }
}

/// Branch, head and unmerged branches: what status shows with or without a
/// remote (all null and empty when `git` is `None`: no repository yet).
/// `max_file_bytes` is the pull's file limit, the reason some paths were skipped.
pub fn local_status(git: Option<&Repository>, max_file_bytes: u64) -> Result<Status> {
    let empty = Status {
        branch: None,
        head: None,
        remote: None,
        ahead: None,
        behind: None,
        last_push: None,
        last_pull: None,
        last_error: None,
        unmerged: Vec::new(),
        skipped_paths: Vec::new(),
    };
    let Some(git) = git else {
        return Ok(empty);
    };
    let head_ref = git
        .find_reference("HEAD")
        .map_err(|e| Error::git(format!("cannot read HEAD: {}", e.message())))?;
    let branch = head_ref
        .symbolic_target()
        .and_then(|t| t.strip_prefix("refs/heads/"))
        .map(str::to_string);
    let head = git
        .head()
        .ok()
        .and_then(|h| h.target())
        .map(|id| id.to_string());
    let mut unmerged = Vec::new();
    if let Ok(refs) = git.references_glob(&format!("refs/heads/{UNMERGED_PREFIX}*")) {
        for reference in refs.flatten() {
            if let (Some(name), Some(id)) = (reference.shorthand(), reference.target()) {
                unmerged.push(Unmerged {
                    branch: name.to_string(),
                    commit: id.to_string(),
                });
            }
        }
    }
    Ok(Status {
        branch,
        head,
        unmerged,
        skipped_paths: unheld::skipped_paths(git, max_file_bytes)?,
        ..empty
    })
}

/// The commits reachable from `id` (when the other side has none).
fn count_commits(git: &Repository, id: Oid) -> Option<usize> {
    let mut walk = git.revwalk().ok()?;
    walk.push(id).ok()?;
    Some(walk.count())
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Caps how long libgit2 waits to connect (10 s) and for a server's answer
/// (60 s), so a dead remote fails a sync instead of hanging it. Process-wide;
/// set once, before any transport is used.
pub fn set_transport_timeouts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: libgit2's global options are written once, here, before any
        // sync thread starts, so no transport reads them concurrently.
        #[allow(unsafe_code)]
        unsafe {
            let _ = git2::opts::set_server_connect_timeout_in_milliseconds(10_000);
            let _ = git2::opts::set_server_timeout_in_milliseconds(60_000);
        }
    });
}
