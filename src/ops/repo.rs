//! Repository operations: `repo.status` (branch, HEAD and the sync with the
//! git remote) and `repo.sync` (pull, then push, now), over [`crate::sync`].
//! A sync is requested, not run, on the caller's thread: requests are
//! coalesced and run on the syncer's own thread ([`crate::sync::queue`]).

use super::{Class, Context, Empty, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::notes::Landing;
use crate::sync::{self, Status, Synced, Ticket};

/// `repo.status`: where the branch is, and how it stands with the remote.
pub struct RepoStatus;

impl Operation for RepoStatus {
    const NAME: &'static str = "repo.status";
    const EXAMPLE: &'static str = r##"await mirai.repo.status()"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str =
        "Branch, HEAD and, with a remote, ahead/behind, last push, pull, error, unmerged branches.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/repo/status", HttpInput::Nothing);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = Empty;
    type Response = Status;

    fn run(ctx: &Context, _request: Empty) -> Result<Status> {
        match &ctx.sync {
            Some(sync) => sync.status(),
            None => {
                let git = sync::open_repository(ctx.view.disk_notes().root())?;
                sync::local_status(git.as_ref(), ctx.view.disk_notes().max_file_bytes())
            }
        }
    }
}

/// `repo.sync`: pull from the remote now, then push (only pull in `read_only`
/// mode: ARCHITECTURE.md, "A read replica keeps itself current").
pub struct RepoSync;

impl Operation for RepoSync {
    const NAME: &'static str = "repo.sync";
    const EXAMPLE: &'static str = r##"await mirai.repo.sync()"##;
    // Allowed in read_only mode, where it only pulls (a write class would deny it).
    const CLASS: Class = Class::Sync;
    const SUMMARY: &'static str =
        "Pull now (local commits replayed; failures kept on mirai/unmerged), then push.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::post("/mcp/repo/sync", HttpInput::Nothing);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = Empty;
    type Response = Synced;

    /// Waits for the answer on this thread (the sandbox, MCP on stdio), up
    /// to the context's deadline: a sandbox program's sync holds its thread no
    /// longer than the program may run. HTTP and MCP over HTTP await the
    /// ticket instead ([`crate::ops::dispatch_sync`]).
    fn run(ctx: &Context, _request: Empty) -> Result<Synced> {
        RepoSync::ticket(ctx)?
            .wait_until(ctx.deadline())
            .unwrap_or_else(|| {
                Err(Error::new(
                    ErrorCode::RequestTimeout,
                    "the sync did not finish by this program's deadline \
                     (MIRAI_SANDBOX_TIMEOUT_MS); the program gave up its place in it. A sync \
                     already running goes on: read repo.status later, or sync over HTTP",
                ))
            })
    }
}

impl RepoSync {
    /// The row's checks, then the caller's place in the next sync: its answer
    /// comes through the ticket ([`Ticket::wait`] or [`Ticket::answer`]).
    pub fn ticket(ctx: &Context) -> Result<Ticket> {
        if let Landing::Overlay(_) = ctx.view.landing() {
            return Err(Error::new(
                ErrorCode::PolicyDenied,
                "action repo.sync is denied in a dry run: it changes the notes on disk, and a dry run writes nothing",
            ));
        }
        let Some(sync) = &ctx.sync else {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                "no git remote is configured; set MIRAI_GIT_REMOTE to sync",
            ));
        };
        Ok(sync.request())
    }
}
