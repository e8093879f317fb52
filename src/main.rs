//! The `mirai` command line: `mirai serve` (the default) runs the HTTP
//! service. Configuration is parsed and validated here, once; a bad value
//! stops start-up with one line on stderr and exit code 2.

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};

use mirai::agent::Agent;
use mirai::bootstrap::{self, Prepared};
use mirai::config::{self, Config};
use mirai::http::{self, AppState};
use mirai::mcp::Mcp;
use mirai::notes::Notes;
use mirai::ops::{self, Context, Input};
use mirai::sandbox::{EvalRequest, Sandbox};

/// A git-backed notes service that people and untrusted AI models can read and change safely.
#[derive(Debug, Parser)]
#[command(name = "mirai", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the notes over HTTP (what runs when no command is given).
    Serve(ServeArgs),
    /// Work with the search index at NOTES_ROOT/.mirai/index.json (for cron and operators).
    Index {
        #[command(subcommand)]
        action: IndexAction,
    },
    /// Run a JavaScript file in the sandbox, as POST /agent/eval would, and
    /// print the evaluation as JSON (exit 1 when the program failed).
    Eval(EvalArgs),
    /// Speak MCP on stdin/stdout (for desktop clients that start mirai
    /// themselves); logs go to stderr.
    Mcp(NotesArgs),
}

#[derive(Debug, Args)]
struct EvalArgs {
    /// The program: JavaScript that may `await mirai.*` and `return` a value; `-` reads stdin.
    file: PathBuf,
    /// Writes land in memory, not on disk or in git; the answer lists the diffs.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Subcommand)]
enum IndexAction {
    /// Rebuild the index artifact and print one summary line.
    Rebuild(NotesArgs),
    /// Print the index status as JSON.
    Status(NotesArgs),
}

#[derive(Debug, Args)]
struct NotesArgs {
    /// The notes folder: a git repository (`serve` creates and initializes it when missing).
    #[arg(long, env = "NOTES_ROOT", default_value = "./notes")]
    notes_root: PathBuf,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    notes: NotesArgs,
    /// Address to listen on.
    #[arg(long, env = "HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on.
    #[arg(long, env = "PORT", default_value_t = 4567)]
    port: u16,
}

/// Exit code for configuration and start-up failures.
const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let result = refuse_root().and_then(|()| match cli.command {
        Some(Command::Serve(args)) => serve(args),
        Some(Command::Index { action }) => index(action),
        Some(Command::Eval(args)) => eval(args),
        Some(Command::Mcp(args)) => mcp_stdio(args),
        None => serve(cli.serve),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("mirai: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// A reason to stop, with the exit code it deserves.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    /// An operation refused or failed: exit 1 with its code and message.
    fn operation(err: mirai::error::Error) -> Failure {
        Failure {
            code: 1,
            message: format!("{}: {}", err.code, err.message),
        }
    }

    fn config(message: impl ToString) -> Failure {
        Failure {
            code: EXIT_CONFIG,
            message: message.to_string(),
        }
    }
}

/// The one way to run mirai as root (CI and the test suite run as root).
const ALLOW_ROOT: &str = "MIRAI_ALLOW_ROOT";

/// mirai never runs as root unless told to with `MIRAI_ALLOW_ROOT=1`: it would
/// write root-owned files into someone's notes (in the container, the
/// entrypoint chooses a user before mirai starts).
fn refuse_root() -> Result<(), Failure> {
    if !rustix::process::geteuid().is_root() || std::env::var(ALLOW_ROOT).as_deref() == Ok("1") {
        return Ok(());
    }
    Err(Failure::config(format!(
        "mirai does not run as root; run it as the user who owns the notes \
         (in the container: docker compose exec --user \"$(id -u)\" mirai mirai ...), \
         or set {ALLOW_ROOT}=1 to run as root anyway"
    )))
}

/// libgit2 refuses a repository whose work tree or .git another user owns,
/// unless `safe.directory` (system or global git config) names it. That check
/// stays on; this says so at start-up, with the fix, before anything is written
/// (DESIGN 6: in the container the service user owns /notes, and the image's
/// /etc/gitconfig names /notes for a MIRAI_UID that does not).
fn trust_notes_root_owner(root: &Path) -> Result<(), Failure> {
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
    Err(Failure::config(format!(
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

/// `mirai index rebuild|status`: the same operations as the HTTP routes, with
/// the same policy (a read_only deployment's cron job sets allow_all itself).
fn index(action: IndexAction) -> Result<(), Failure> {
    let (args, op) = match &action {
        IndexAction::Rebuild(args) => (args, "index.rebuild"),
        IndexAction::Status(args) => (args, "index.status"),
    };
    let (config, notes) = open_notes(args)?;
    let ctx = Context::new(notes, &config);
    if matches!(action, IndexAction::Rebuild(_)) {
        recover(&ctx);
    }
    let started = Instant::now();
    let answer =
        ops::dispatch(&ctx, op, Input::Json(serde_json::json!({}))).map_err(Failure::operation)?;
    match action {
        IndexAction::Rebuild(_) => {
            let elapsed = started.elapsed().as_millis();
            // The artifact's size comes from index.status, like everything the CLI reports.
            let status = ops::dispatch(&ctx, "index.status", Input::Json(serde_json::json!({})))
                .map_err(Failure::operation)?;
            println!(
                "indexed {} notes, {} chunks, {} bytes in {elapsed} ms",
                answer["notes_indexed"], answer["chunks_indexed"], status["artifact_byte_size"]
            );
        }
        IndexAction::Status(_) => {
            let text = serde_json::to_string_pretty(&answer).map_err(|e| Failure {
                code: 1,
                message: e.to_string(),
            })?;
            println!("{text}");
        }
    }
    Ok(())
}

/// The configuration and an existing notes root, for the commands that do not serve.
fn open_notes(args: &NotesArgs) -> Result<(Config, Notes), Failure> {
    let config = Config::new(&args.notes_root)
        .with_environment(&config::process_env)
        .map_err(Failure::config)?;
    trust_notes_root_owner(&config.notes_root)?;
    let meta = std::fs::metadata(&config.notes_root)
        .map_err(|e| Failure::config(format!("notes root {}: {e}", config.notes_root.display())))?;
    if !meta.is_dir() {
        return Err(Failure::config(format!(
            "notes root {} is not a directory",
            config.notes_root.display()
        )));
    }
    let notes = Notes::open(&config.notes_root).map_err(|e| Failure::config(e.message))?;
    Ok((config, notes))
}

/// `mirai eval FILE.js`: the sandbox without HTTP, with the environment's policy.
fn eval(args: EvalArgs) -> Result<(), Failure> {
    let code = if args.file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::config(format!("cannot read the program from stdin: {e}")))?
    } else {
        std::fs::read_to_string(&args.file)
            .map_err(|e| Failure::config(format!("cannot read {}: {e}", args.file.display())))?
    };
    let (config, notes) = open_notes(&args.notes)?;
    let ctx = Context::new(notes, &config);
    if !args.dry_run {
        recover(&ctx);
    }
    let sandbox = start_sandbox(&config)?;
    let request = EvalRequest {
        code,
        dry_run: args.dry_run,
    };
    let evaluation = sandbox.eval(&ctx, &request).map_err(Failure::operation)?;
    // Writes made by the program reach the artifact before the process ends.
    if let Err(e) = ctx.index.flush() {
        log::warn!("could not write the index artifact: {e}");
    }
    let text = serde_json::to_string_pretty(&evaluation).map_err(|e| Failure {
        code: 1,
        message: e.to_string(),
    })?;
    println!("{text}");
    match evaluation.error {
        None => Ok(()),
        Some(err) => Err(Failure::operation(err)),
    }
}

/// `mirai mcp`: one JSON-RPC message per line in, one per line out, with the
/// operator's permissions (no token, DESIGN 7.4) and the environment's policy.
fn mcp_stdio(args: NotesArgs) -> Result<(), Failure> {
    use std::io::{BufRead, Write};
    let (config, notes) = open_notes(&args)?;
    let ctx = Arc::new(Context::new(notes, &config));
    recover(&ctx);
    let sandbox = Arc::new(start_sandbox(&config)?);
    let mcp = Mcp::new(ctx.clone(), sandbox, config.mcp_max_result_bytes);
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Failure::config(format!("cannot read stdin: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let response = match mirai::json::from_str(&line) {
            Ok(message) => mcp.handle(&message),
            Err(e) => Some(serde_json::json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": mirai::mcp::code::PARSE_ERROR, "message": format!("not JSON: {e}")}})),
        };
        if let Some(response) = response {
            let written = writeln!(stdout, "{response}").and_then(|()| stdout.flush());
            if written.is_err() {
                break; // the client went away
            }
        }
    }
    if let Err(e) = ctx.index.flush() {
        log::warn!("could not write the index artifact: {e}");
    }
    Ok(())
}

/// The start-up hook of every command that writes: opening the repository for
/// writes takes this process's intent file (`.mirai/intents/`), finishes what
/// a killed mirai left half-done, frees its locks and sweeps its temp files
/// (logged). A read_only deployment writes nothing, so it skips this; a
/// failure is logged and the command goes on (writes then say what is wrong).
fn recover(ctx: &Context) {
    if ctx.policy == config::PolicyMode::ReadOnly {
        return;
    }
    if let Err(e) = ctx.writer() {
        log::warn!(
            "could not open the notes repository for writes: {}",
            e.message
        );
    }
}

/// Compiles (or loads from the cache) the guest module once for this process.
fn start_sandbox(config: &Config) -> Result<Sandbox, Failure> {
    let cache_dir = config.usable_cache_dir().map_err(Failure::config)?;
    if cache_dir.is_none() && config.cache_dir.is_some() {
        log::warn!("the default module cache folder is inside the notes root, so it is not used; set MIRAI_CACHE_DIR to a folder outside NOTES_ROOT to keep start-up fast");
    }
    let (sandbox, startup) = Sandbox::new(config.sandbox, cache_dir.as_deref())
        .map_err(|e| Failure::config(e.message))?;
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

fn serve(args: ServeArgs) -> Result<(), Failure> {
    let mut config = Config::new(args.notes.notes_root);
    config.host = args.host;
    config.port = args.port;
    let config = config
        .with_environment(&config::process_env)
        .map_err(Failure::config)?;
    trust_notes_root_owner(&config.notes_root)?;
    match bootstrap::prepare_notes_root(&config.notes_root, config.policy, &config.git_identity)
        .map_err(Failure::config)?
    {
        Prepared::Initialized => log::info!(
            "initialized a git repository at {} with a welcome note",
            config.notes_root.display()
        ),
        Prepared::Created => log::info!("created notes root {}", config.notes_root.display()),
        Prepared::Existing => {}
    }
    let notes = Notes::open(&config.notes_root).map_err(|e| Failure::config(e.message))?;
    let sandbox = Arc::new(start_sandbox(&config)?);
    let listener = TcpListener::bind((config.host.as_str(), config.port)).map_err(|e| {
        Failure::config(format!(
            "cannot listen on {}:{}: {e}",
            config.host, config.port
        ))
    })?;
    let address = listener.local_addr().map_err(Failure::config)?;
    log::info!(
        "serving {} on http://{address} (policy {}{})",
        notes.root().display(),
        config.policy.as_str(),
        if config.api_token.is_some() {
            ", bearer token required"
        } else {
            ""
        }
    );

    let ctx = Arc::new(Context::new(notes, &config));
    recover(&ctx);
    ctx.index.warm_up();
    ctx.index.watch(mirai::index::live::WATCH_EVERY);
    let agent = Arc::new(Agent::new(&config, sandbox.clone()));
    if config.llm.is_configured() {
        log::info!(
            "agent: model {} at {}",
            config.llm.model,
            mirai::redact::urls(&config.llm.base_url)
        );
    } else {
        log::info!("agent: no model configured (set MIRAI_LLM_API_KEY or MIRAI_LLM_BASE_URL to enable POST /agent/run)");
    }
    let mcp = Arc::new(Mcp::new(
        ctx.clone(),
        sandbox.clone(),
        config.mcp_max_result_bytes,
    ));
    let state = AppState {
        ctx: ctx.clone(),
        sandbox,
        agent,
        mcp,
        mcp_sessions: Default::default(),
        config,
    };
    let served =
        actix_web::rt::System::new().block_on(async move { http::serve(state, listener)?.await });
    // Applies since the last background persist reach the artifact before we go.
    if let Err(e) = ctx.index.flush() {
        log::warn!("could not write the index artifact at shutdown: {e}");
    }
    served.map_err(|e| Failure {
        code: 1,
        message: format!("server stopped: {e}"),
    })
}
