//! The context every row runs against: the notes as this caller sees them,
//! the policy, the live index, history, embeddings, sync, proposals, and the
//! repository that one writer at a time may hold.

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use super::draft::Draft;
use super::settings::{DirtyNotes, Guards, PolicyMode, Settings};
use crate::callers::Caller;
use crate::embed::Embeddings;
use crate::error::{Error, Result};
use crate::events::Events;
use crate::index::live::LiveIndex;
use crate::notes::overlay::Overlay;
use crate::notes::uploads::Upload;
use crate::notes::{Notes, View};
use crate::proposals::Proposals;
use crate::repo::announce::Announcer;
use crate::repo::history::{History, CALLER_TRAILER, RUN_TRAILER};
use crate::repo::{Author, GitIdentity, Repo};
use crate::sync::Syncer;

/// What operations run against: the notes as this context sees them, the
/// policy, the live index, and the repository, which one writer at a time may hold.
///
/// Cloning is cheap and shares everything; [`Context::dry_run`] makes a
/// context whose view has an [`Overlay`] on top, where its writes land.
#[derive(Clone)]
pub struct Context {
    /// The notes: resolve, read and list through it, in a dry run or not.
    pub view: View,
    pub policy: PolicyMode,
    pub index: Arc<LiveIndex>,
    /// The repository's history, walked once per HEAD (reads never take the writer).
    pub history: Arc<History>,
    /// Chunk embeddings for semantic and hybrid queries (`None`: not configured).
    pub embeddings: Option<Arc<Embeddings>>,
    /// Largest note content a write may produce (the request body limit).
    pub max_content_bytes: usize,
    /// Most edits one `notes.edit` may carry.
    pub max_edits: usize,
    /// Most notes one `changes.apply` or `notes.revert` commit may change.
    pub max_changes: usize,
    /// Most notes one `notes.move` rewrites links in (and a revert of a move changes, with the two paths).
    pub max_move_notes: usize,
    /// Whether `files.write` takes files off the media-type allow-list (`MIRAI_FILES_ANY_TYPE`).
    pub files_any_type: bool,
    /// What a write does to a note with someone else's uncommitted changes.
    pub dirty_notes: DirtyNotes,
    /// The guards against destructive writes (see [`guard`]).
    pub guards: Guards,
    pub(super) identity: GitIdentity,
    pub(super) writer: RepoSlot,
    /// Set in an agent run: its commits carry `Mirai-Run: <id>`.
    pub(super) run_id: Option<Arc<str>>,
    /// Set for a sandbox program: a write does not wait for the writer past it.
    pub(super) deadline: Option<Instant>,
    /// Set where a model is the author (the sandbox, agent runs, MCP): the
    /// guards apply by default (`MIRAI_GUARDS=models`).
    pub(super) model_author: bool,
    /// The git remote's sync, when `MIRAI_GIT_REMOTE` is set: told of every commit.
    pub sync: Option<Arc<Syncer>>,
    /// Review mode's proposals (`.mirai/proposals/`).
    pub proposals: Arc<Proposals>,
    /// The change stream every source of change publishes to.
    pub events: Arc<Events>,
    /// Tells the change stream of every move of the branch (the writer's
    /// repository holds it; the watcher asks it to look).
    pub announcer: Arc<Announcer>,
    /// Most pending proposals at once (`MIRAI_PROPOSALS_MAX_PENDING`).
    pub max_pending: usize,
    /// Set where a reviewer acts (the reviewer token over HTTP, the CLI): rows
    /// of class review run only then.
    pub(super) reviewer: bool,
    /// The adapter the calls come through (`http`, `mcp`, `sandbox`, `agent`, `cli`),
    /// as a proposal records who asked.
    pub(super) adapter: &'static str,
    /// Set in review mode while writes gather into one proposal (an eval, an
    /// agent run, one write call), with the row being run.
    pub(super) draft: Option<(Arc<Draft>, &'static str)>,
    /// The named caller the calls are made for (`None`: the operator, or a
    /// server without credentials): its rights, paths and name on commits.
    pub(super) caller: Option<Arc<Caller>>,
    /// A file the adapter streamed to disk for `files.write` (HTTP's raw
    /// body): the row takes its bytes from here instead of `content_base64`.
    pub(super) upload: Option<Arc<Upload>>,
}

/// The services a context shares with every clone of it. The composition
/// root (`app`) builds and starts them; a context only holds them.
pub struct Services {
    pub index: Arc<LiveIndex>,
    pub history: Arc<History>,
    pub embeddings: Option<Arc<Embeddings>>,
    pub sync: Option<Arc<Syncer>>,
    pub proposals: Arc<Proposals>,
    pub events: Arc<Events>,
    pub repo: RepoSlot,
}

impl Context {
    /// A context over `notes` with `settings` and the `services` it shares
    /// (a plain value: nothing is started here).
    pub fn new(notes: Notes, settings: Settings, services: Services) -> Context {
        let Services {
            index,
            history,
            embeddings,
            sync,
            proposals,
            events,
            repo,
        } = services;
        Context {
            events,
            announcer: repo.announcer.clone(),
            proposals,
            max_pending: settings.proposals_max_pending,
            reviewer: false,
            adapter: "cli",
            draft: None,
            caller: None,
            index,
            embeddings,
            history,
            view: View::disk(notes),
            policy: settings.policy,
            max_content_bytes: settings.max_body_bytes,
            max_edits: settings.max_edits,
            max_changes: settings.max_changes,
            max_move_notes: settings.max_move_notes,
            files_any_type: settings.files_any_type,
            dirty_notes: settings.dirty_notes,
            guards: settings.guards,
            identity: settings.git_identity,
            writer: repo,
            run_id: None,
            deadline: None,
            model_author: false,
            sync,
            upload: None,
        }
    }

    /// This context, for calls a model makes (the sandbox, agent runs, MCP):
    /// never a reviewer's.
    pub fn by_model(&self) -> Context {
        Context {
            model_author: true,
            reviewer: false,
            ..self.clone()
        }
    }

    /// This context, acting for a reviewer (who may approve and reject proposals).
    pub fn as_reviewer(&self) -> Context {
        Context {
            reviewer: true,
            ..self.clone()
        }
    }

    /// This context, for calls made for `caller` (from its credential, or
    /// `mirai call --as`): its rights, paths and name from now on; a reviewer's
    /// only when it holds `review`. `None` changes nothing.
    pub fn as_caller(&self, caller: Option<Arc<Caller>>) -> Context {
        match caller {
            None => self.clone(),
            Some(caller) => Context {
                reviewer: caller.can.has(crate::callers::Right::Review),
                view: self
                    .view
                    .scoped(caller.read_paths.clone(), caller.paths.clone()),
                caller: Some(caller),
                ..self.clone()
            },
        }
    }

    /// The named caller these calls are made for, if any.
    pub fn caller(&self) -> Option<&Arc<Caller>> {
        self.caller.as_ref()
    }

    /// This context, for calls through `adapter` (`http`, `mcp`, `sandbox`, `agent`, `cli`).
    /// This context, carrying `upload` (a raw body streamed to disk) for
    /// `files.write`.
    pub fn with_upload(&self, upload: Upload) -> Context {
        Context {
            upload: Some(Arc::new(upload)),
            ..self.clone()
        }
    }

    pub fn via(&self, adapter: &'static str) -> Context {
        Context {
            adapter,
            ..self.clone()
        }
    }

    /// The adapter the calls come through.
    pub fn adapter(&self) -> &'static str {
        self.adapter
    }

    /// The agent run this context works for, if any.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// The draft proposal writes gather into, if any.
    pub fn draft(&self) -> Option<&Arc<Draft>> {
        self.draft.as_ref().map(|(draft, _)| draft)
    }

    /// This context, with writes gathering into `draft` while row `op` runs:
    /// its writes land in the draft's overlay (reads see them) and its commit
    /// messages are recorded without a run's trailer (the draft keeps the run).
    pub fn drafting(&self, draft: &Arc<Draft>, op: &'static str) -> Context {
        Context {
            view: self.view.with_overlay(draft.overlay()),
            draft: Some((Arc::clone(draft), op)),
            run_id: None,
            ..self.clone()
        }
    }

    /// Whether a model makes the calls through this context.
    pub fn is_model_author(&self) -> bool {
        self.model_author
    }

    /// This context, for work that must end by `deadline` (a sandbox program):
    /// a write that cannot get the writer by then fails instead of waiting.
    pub fn with_deadline(&self, deadline: Instant) -> Context {
        Context {
            deadline: Some(deadline),
            ..self.clone()
        }
    }

    /// When work through this context must end (`None`: no deadline).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// This context, for agent run `run_id`: its commits carry the run's trailer.
    pub fn for_run(&self, run_id: &str) -> Context {
        Context {
            run_id: Some(Arc::from(run_id)),
            ..self.clone()
        }
    }

    /// A commit message (ARCHITECTURE.md, "Commit messages have one form"):
    /// `subject`, then `body` after a blank line (when not empty), then, in an
    /// agent run, the run's `Mirai-Run: <run_id>` trailer as a paragraph of its
    /// own; it ends with a newline.
    pub fn commit_message(&self, subject: &str, body: &str) -> String {
        self.commit_message_with(subject, body, &[])
    }

    /// [`Context::commit_message`] with `trailers` (key, value) of the
    /// operation's own before the run's, in the same last paragraph.
    pub fn commit_message_with(
        &self,
        subject: &str,
        body: &str,
        trailers: &[(&str, &str)],
    ) -> String {
        let mut message = format!("{subject}\n");
        let body = body.trim_end_matches('\n');
        if !body.is_empty() {
            message.push('\n');
            message.push_str(body);
            message.push('\n');
        }
        let run = self.run_id.as_deref().map(|run| (RUN_TRAILER, run));
        let caller = self
            .caller
            .as_deref()
            .filter(|c| c.authors_commits())
            .map(|c| (CALLER_TRAILER, c.name.as_str()));
        let all = trailers.iter().copied().chain(run).chain(caller);
        for (i, (key, value)) in all.enumerate() {
            if i == 0 {
                message.push('\n');
            }
            message.push_str(&format!("{key}: {value}\n"));
        }
        message
    }

    /// This context, with writes going to `overlay` instead of disk and git.
    pub fn dry_run(&self, overlay: Arc<Overlay>) -> Context {
        Context {
            view: self.view.with_overlay(overlay),
            ..self.clone()
        }
    }

    /// Takes the repository for one write. Writes are serialized; reads never wait for this.
    pub fn writer(&self) -> Result<Writer<'_>> {
        let guard = match self.deadline {
            None => self.writer.repo.lock().unwrap_or_else(|p| p.into_inner()),
            Some(deadline) => loop {
                match self.writer.repo.try_lock() {
                    Ok(guard) => break guard,
                    Err(TryLockError::Poisoned(poisoned)) => break poisoned.into_inner(),
                    Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(TryLockError::WouldBlock) => return Err(Error::conflict(
                        "other writes held the notes until this program's deadline; nothing was \
                             changed: try again",
                    )),
                }
            },
        };
        self.writer.opened(guard).map(Writer)
    }

    /// mirai alone, author and committer (a snapshot of someone else's edits
    /// is never put on a caller).
    pub fn mirai_author(&self) -> Author {
        Author {
            name: self.identity.name.clone(),
            email: self.identity.email.clone(),
            caller: None,
        }
    }

    /// Who commits: mirai, with a named caller as the author.
    pub fn author(&self) -> Author {
        Author {
            name: self.identity.name.clone(),
            email: self.identity.email.clone(),
            caller: self
                .caller
                .as_deref()
                .and_then(|c| Some((c.name.clone(), c.email.clone()?))),
        }
    }
}

/// The repository one writer at a time holds, opened on first use and
/// telling the change stream of every move of the branch. Cloning shares it.
#[derive(Clone)]
pub struct RepoSlot {
    repo: Arc<Mutex<Option<Repo>>>,
    notes: Notes,
    announcer: Arc<Announcer>,
}

impl RepoSlot {
    /// The slot for the repository of `notes`, announcing through `announcer`.
    pub fn new(notes: Notes, announcer: Arc<Announcer>) -> RepoSlot {
        RepoSlot {
            repo: Arc::new(Mutex::new(None)),
            notes,
            announcer,
        }
    }

    /// Runs `work` with the repository, holding the writer lock as long as
    /// it takes (a pull: [`crate::sync::WithWriter`]).
    pub fn with_repo(&self, work: &mut dyn FnMut(&Repo)) -> Result<()> {
        let guard = self.opened(self.repo.lock().unwrap_or_else(|p| p.into_inner()))?;
        if let Some(repo) = guard.as_ref() {
            work(repo); // opened just now
        }
        Ok(())
    }

    /// `guard` with the repository opened. A panic during an earlier write
    /// left the repository as git left it; carry on.
    fn opened<'a>(
        &self,
        mut guard: MutexGuard<'a, Option<Repo>>,
    ) -> Result<MutexGuard<'a, Option<Repo>>> {
        if guard.is_none() {
            *guard = Some(Repo::open(&self.notes)?.announcing(self.announcer.clone()));
        }
        Ok(guard)
    }
}

/// The repository, held for one write.
pub struct Writer<'a>(MutexGuard<'a, Option<Repo>>);

impl Deref for Writer<'_> {
    type Target = Repo;

    #[expect(
        clippy::expect_used,
        reason = "a Writer is made only by Context::writer, after RepoSlot::opened"
    )]
    fn deref(&self) -> &Repo {
        self.0
            .as_ref()
            .expect("Context::writer opens the repository before handing it out")
    }
}
