//! The composition root: everything `mirai serve` runs on, wired in one place
//! from a validated [`Config`]. `main.rs` (every command), the specs' test
//! server and anything else that serves in-process build the service here, so
//! the tests exercise the wiring the server runs with, index warm-up included.
//!
//! The pieces the other commands share (opening the notes root, recovering a
//! killed process's half-done write, starting the sandbox) are public too.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use crate::agent::Agent;
use crate::bootstrap::{self, Prepared};
use crate::callers::CallerBook;
use crate::config::Config;
use crate::embed::Embeddings;
use crate::events::Events;
use crate::index::live::LiveIndex;
use crate::index::live::{AlsoWatched, WATCH_EVERY};
use crate::mcp::Mcp;
use crate::notes::Notes;
use crate::oauth::Resource;
use crate::ops::{Context, PolicyMode, RepoSlot, Services};
use crate::proposals::Proposals;
use crate::repo::announce::Announcer;
use crate::repo::history::History;
use crate::repo::Author;
use crate::sandbox::Sandbox;
use crate::sync::Syncer;

/// Why the service cannot start: one line for the operator (the CLI exits 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(String);

impl StartError {
    fn new(message: impl ToString) -> StartError {
        StartError(message.to_string())
    }
}

/// The running service, minus the listener: what every adapter serves from.
pub struct App {
    pub config: Config,
    /// The named callers (`MIRAI_CALLERS_FILE` and the token shorthands),
    /// reloaded on SIGHUP.
    pub callers: Arc<CallerBook>,
    /// The OAuth resource server (`MIRAI_OAUTH_ISSUER`): access tokens
    /// verified and mapped onto the callers.
    pub oauth: Option<Arc<Resource>>,
    pub ctx: Arc<Context>,
    pub sandbox: Arc<Sandbox>,
    pub agent: Arc<Agent>,
    pub mcp: Arc<Mcp>,
}

/// A context over `notes` with `config`, its services built but not started:
/// the live index, the embeddings and sync workers when configured,
/// proposals, the writer's repository, every source of change publishing to
/// `events`. [`build_on`] starts them for a server; a one-shot command uses
/// [`context`].
pub fn context_with(notes: Notes, config: &Config, events: Arc<Events>) -> Context {
    let notes = notes
        .with_max_note_bytes(config.max_note_bytes)
        .with_max_file_bytes(config.max_file_bytes);
    let index = Arc::new(LiveIndex::new(notes.clone(), events.clone()));
    let embeddings = config.embed.clone().map(|embed| {
        Arc::new(Embeddings::new(
            embed,
            config.secrets(),
            notes.clone(),
            index.clone(),
        ))
    });
    let announcer = Arc::new(Announcer::new(events.clone(), notes.root().to_path_buf()));
    let repo = RepoSlot::new(notes.clone(), announcer);
    let sync = config.sync.clone().map(|sync| {
        let slot = repo.clone();
        let with_writer: crate::sync::WithWriter = Box::new(move |work| slot.with_repo(work));
        let author = Author {
            name: config.git_identity.name.clone(),
            email: config.git_identity.email.clone(),
            caller: None,
        };
        Arc::new(Syncer::new(
            sync,
            notes.clone(),
            index.clone(),
            with_writer,
            author,
            config.policy != PolicyMode::ReadOnly,
            events.clone(),
        ))
    });
    let services = Services {
        history: Arc::new(History::new(notes.root())),
        proposals: Arc::new(Proposals::new(
            notes.clone(),
            config.max_body_bytes,
            events.clone(),
        )),
        index,
        embeddings,
        sync,
        events,
        repo,
    };
    Context::new(notes, config.ops_settings(), services)
}

/// [`context_with`] a change stream of its own: a one-shot command's
/// context (nobody listens to its stream; its workers never start).
pub fn context(notes: Notes, config: &Config) -> Context {
    let events = Arc::new(Events::new(
        config.events.backlog,
        config.events.max_clients,
    ));
    context_with(notes, config, events)
}

/// Builds what `mirai serve` runs: the notes root prepared (created and
/// git-initialized when missing), a context over it with a killed process's
/// work recovered, the live index loading in the background and watching the
/// disk, the sandbox, the agent and MCP. Logs what start-up did.
pub fn build(config: Config) -> Result<App, StartError> {
    let notes = prepare_notes(&config)?;
    build_on(config, notes)
}

/// [`build`] over a notes root that is already open (`mirai mcp` on stdio
/// serves an existing root and never creates one): the same services, so a
/// client over stdio gets what one over HTTP gets (outside edits reach
/// search, commits are pushed, the remote is pulled).
pub fn build_on(config: Config, notes: Notes) -> Result<App, StartError> {
    let callers = Arc::new(callers(&config)?);
    let sandbox = Arc::new(sandbox(&config)?);
    let events = Arc::new(Events::new(
        config.events.backlog,
        config.events.max_clients,
    ));
    let ctx = Arc::new(context_with(notes, &config, events));
    recover(&ctx);
    ctx.index.warm_up();
    let (announcer, proposals) = (ctx.announcer.clone(), ctx.proposals.clone());
    ctx.index.watch(
        WATCH_EVERY,
        AlsoWatched {
            refs: Box::new(move || announcer.look()),
            proposals: Box::new(move || proposals.look()),
        },
    );
    if let (Some(embeddings), Some(embed)) = (&ctx.embeddings, &config.embed) {
        embeddings.start();
        log::info!(
            "search: embeddings by {} at {} (hybrid by default)",
            embed.model,
            crate::redact::origin(&embed.base_url)
        );
    }
    start_sync(&ctx, &config)?;
    let agent = Arc::new(Agent::new(
        config.llm.clone(),
        config.agent,
        config.secrets(),
        &config.notes_root,
        sandbox.clone(),
    ));
    if config.llm.is_configured() {
        log::info!(
            "agent: model {} at {}",
            config.llm.model,
            crate::redact::origin(&config.llm.base_url)
        );
    } else {
        log::info!("agent: no model configured (set MIRAI_LLM_API_KEY or MIRAI_LLM_BASE_URL to enable POST /agent/run)");
    }
    let mcp = Arc::new(Mcp::new(
        ctx.clone(),
        sandbox.clone(),
        config.mcp_max_result_bytes,
        config.events.mcp_max_subscriptions,
    ));
    let oauth = config.oauth.clone().map(|settings| {
        log::info!(
            "oauth: access tokens from {} for {} (unlisted subjects may {})",
            crate::redact::origin(&settings.issuer),
            settings.audience,
            match settings.default_can.names() {
                names if names.is_empty() => "nothing".to_string(),
                names => names.join(", "),
            }
        );
        Arc::new(Resource::new(settings))
    });
    Ok(App {
        config,
        callers,
        oauth,
        ctx,
        sandbox,
        agent,
        mcp,
    })
}

/// The callers `config` names: `MIRAI_CALLERS_FILE` (read and checked
/// again: the file may have changed since the configuration was read) and the
/// token shorthands; logged by number, never by token.
pub fn callers(config: &Config) -> Result<CallerBook, StartError> {
    let book = CallerBook::open(
        config.callers_file.as_deref(),
        config.api_token.as_deref(),
        config.reviewer_token.as_deref(),
    )
    .map_err(StartError::new)?;
    if let Some(file) = book.file() {
        log::info!(
            "callers: {} from {} (reloaded on SIGHUP)",
            book.current().iter().count(),
            file.display()
        );
    }
    Ok(book)
}

/// With a remote: checks that HEAD is on the followed branch, then starts
/// the pusher and the interval puller (logged).
fn start_sync(ctx: &Context, config: &Config) -> Result<(), StartError> {
    let (Some(sync), Some(settings)) = (&ctx.sync, &config.sync) else {
        return Ok(());
    };
    crate::sync::set_transport_timeouts();
    if let Some(branch) = &settings.branch {
        let git = crate::sync::open_repository(&config.notes_root)
            .map_err(|e| StartError::new(e.message))?;
        let current = crate::sync::local_status(git.as_ref(), config.max_file_bytes as u64)
            .map_err(|e| StartError::new(e.message))?
            .branch;
        if current.as_deref() != Some(branch.as_str()) {
            return Err(StartError::new(format!(
                "MIRAI_GIT_BRANCH is {branch} but NOTES_ROOT has {} checked out; check out {branch} there (git switch {branch}) or change MIRAI_GIT_BRANCH",
                current.as_deref().unwrap_or("no branch (a detached HEAD)")
            )));
        }
    }
    sync.start();
    log::info!(
        "sync: remote {}{}, {}",
        sync.shown_remote(),
        if sync.pushes() {
            ", pushing after every commit"
        } else {
            " (read_only: pull only)"
        },
        match settings.interval_secs {
            0 => "pulling on demand only".to_string(),
            n => format!("pulling every {n} s"),
        }
    );
    Ok(())
}

/// The notes root for serving: checked for an owner git trusts, then created
/// and git-initialized with a welcome note when missing (logged); with a
/// remote, an empty or missing root is cloned from it instead.
pub fn prepare_notes(config: &Config) -> Result<Notes, StartError> {
    trust_notes_root_owner(&config.notes_root)?;
    let root = &config.notes_root;
    if let Some(sync) = &config.sync {
        if let Some(branch) = bootstrap::clone_into_empty(root, sync).map_err(StartError::new)? {
            log::info!(
                "cloned {} (branch {branch}) into {}",
                sync.shown_remote(),
                root.display()
            );
            let notes = Notes::open(root).map_err(|e| StartError::new(e.message))?;
            let ctx = context(notes.clone(), config);
            if let Some(sync) = &ctx.sync {
                crate::sync::set_transport_timeouts();
                sync.pull().map_err(|e| {
                    StartError::new(format!("cloning {}: {}", sync.shown_remote(), e.message))
                })?;
            }
            return Ok(notes);
        }
    }
    match bootstrap::prepare_notes_root(root, config.policy, &config.git_identity)
        .map_err(StartError::new)?
    {
        Prepared::Initialized => log::info!(
            "initialized a git repository at {} with a welcome note",
            root.display()
        ),
        Prepared::Created => log::info!("created notes root {}", root.display()),
        Prepared::Existing => {}
    }
    Notes::open(root).map_err(|e| StartError::new(e.message))
}

/// An existing notes root, for the commands that do not serve (they never create one).
pub fn open_notes(config: &Config) -> Result<Notes, StartError> {
    let root = &config.notes_root;
    trust_notes_root_owner(root)?;
    let meta = std::fs::metadata(root)
        .map_err(|e| StartError::new(format!("notes root {}: {e}", root.display())))?;
    if !meta.is_dir() {
        return Err(StartError::new(format!(
            "notes root {} is not a directory",
            root.display()
        )));
    }
    Notes::open(root).map_err(|e| StartError::new(e.message))
}

/// The start-up hook of every command that writes: opening the repository for
/// writes takes this process's intent file (`.mirai/intents/`), finishes what
/// a killed mirai left half-done, frees its locks and sweeps its temp files
/// (logged). A read_only deployment writes nothing, so it skips this; a
/// failure is logged and the command goes on (writes then say what is wrong).
pub fn recover(ctx: &Context) {
    if ctx.policy == PolicyMode::ReadOnly {
        return;
    }
    if let Err(e) = ctx.writer() {
        log::warn!(
            "could not open the notes repository for writes: {}",
            e.message
        );
    }
}

/// For a command about to exit: with a remote, pushes what it committed
/// (within 20 s); a failed push is said on stderr and left for the next sync.
pub fn push_before_exit(ctx: &Context) {
    let Some(sync) = &ctx.sync else { return };
    crate::sync::set_transport_timeouts();
    match sync.push_before_exit(std::time::Duration::from_secs(20)) {
        Ok(true) => log::info!("sync: pushed to {}", sync.shown_remote()),
        Ok(false) => {}
        Err(e) => log::warn!(
            "sync: not pushed to {} before exit ({e}); the next sync (mirai serve, mirai sync) pushes it",
            sync.shown_remote()
        ),
    }
}

/// Writes applies made since the last background persist to the index
/// artifact, before the process ends (`when` names the moment in the warning).
pub fn persist_index(ctx: &Context, when: &str) {
    if let Err(e) = ctx.index.flush() {
        log::warn!("could not write the index artifact {when}: {e}");
    }
}

/// Compiles (or loads from the cache) the guest module once for this process (logged).
pub fn sandbox(config: &Config) -> Result<Sandbox, StartError> {
    let cache_dir = config.usable_cache_dir().map_err(StartError::new)?;
    if cache_dir.is_none() && config.cache_dir.is_some() {
        log::warn!("the default module cache folder is inside the notes root, so it is not used; set MIRAI_CACHE_DIR to a folder outside NOTES_ROOT to keep start-up fast");
    }
    let (sandbox, startup) = Sandbox::new(config.sandbox, cache_dir.as_deref())
        .map_err(|e| StartError::new(e.message))?;
    if startup.module_from_cache {
        log::info!(
            "sandbox ready: guest module loaded from cache in {:.1} ms",
            startup.module_ms
        );
    } else {
        log::info!(
            "sandbox ready: guest module compiled in {:.0} ms",
            startup.module_ms
        );
    }
    if let Some(problem) = startup.cache_problem {
        log::warn!("the module cache was not used ({problem}); the guest was compiled instead (MIRAI_CACHE_DIR)");
    }
    Ok(sandbox)
}

/// libgit2 refuses a repository whose work tree or .git another user owns,
/// unless `safe.directory` (system or global git config) names it. That check
/// stays on; this says so at start-up, with the fix, before anything is written
/// (in the container the service user owns /notes, and the image's
/// /etc/gitconfig names /notes for a MIRAI_UID that does not).
fn trust_notes_root_owner(root: &Path) -> Result<(), StartError> {
    let Ok(meta) = std::fs::metadata(root) else {
        return Ok(()); // `serve` creates it, owned by this user
    };
    let trusted = match git2::Repository::open(root) {
        Ok(_) => true,
        Err(e) if e.code() == git2::ErrorCode::Owner => false,
        // Not a repository yet: the one `serve` creates would be refused later.
        Err(_) => meta.uid() == rustix::process::geteuid().as_raw() || listed_safe(root),
    };
    if trusted {
        return Ok(());
    }
    let shown = root.display();
    Err(StartError::new(format!(
        "git does not trust notes root {shown}: it (or its .git) belongs to another user \
         than the one running mirai (uid {}); run mirai as its owner (uid {}), \
         or trust it with: git config --global --add safe.directory {shown}",
        rustix::process::geteuid().as_raw(),
        meta.uid()
    )))
}

/// Whether the system or global git config lists `root` (or `*`) under
/// `safe.directory`, read as libgit2 reads it: the last empty value resets the list.
fn listed_safe(root: &Path) -> bool {
    let (Ok(config), Ok(root)) = (git2::Config::open_default(), root.canonicalize()) else {
        return false;
    };
    let Ok(mut entries) = config.multivar("safe.directory", None) else {
        return false;
    };
    let mut safe = false;
    while let Some(Ok(entry)) = entries.next() {
        match entry.value() {
            None | Some("") => safe = false,
            Some("*") => safe = true,
            Some(value) => {
                let value = value.strip_prefix("%(prefix)/").unwrap_or(value);
                if !value.ends_with('/') && Path::new(value) == root.as_path() {
                    safe = true;
                }
            }
        }
    }
    safe
}
