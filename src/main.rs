//! The `mirai` command line: `mirai serve` (the default) runs the HTTP
//! service. Configuration is parsed and validated here, once; a bad value
//! stops start-up with one line on stderr and exit code 2.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};

use mirai::app;
use mirai::config::{self, Config};
use mirai::http;
use mirai::notes::Notes;
use mirai::ops::{self, Input};
use mirai::sandbox::EvalRequest;

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
    /// Run an agent task against the configured model (MIRAI_LLM_*), as POST
    /// /agent/run does, with the environment's policy: each step on stderr,
    /// then the report as JSON, led by `outcome` (mirai's record of what
    /// changed). Exit 0 when the model replied and the reply agrees with the
    /// record; 1 when the run stopped without a reply or its reply is
    /// contradicted.
    Run(RunArgs),
    /// Print the commits that changed PATH (or every commit), newest first along
    /// first parents: one line each with the short id, time, subject and run id.
    Log(LogArgs),
    /// Speak MCP on stdin/stdout (for desktop clients that start mirai
    /// themselves); logs go to stderr. `--as NAME`: the session has that
    /// caller's rights, paths and name instead of the operator's.
    Mcp(McpArgs),
    /// Pull from the git remote (MIRAI_GIT_REMOTE), then push (read_only: pull
    /// only), print the outcome as JSON; exit 1 when either fails (for cron).
    Sync(NotesArgs),
    /// Take back a commit, or every commit of an agent run, as one new commit
    /// (as POST /mcp/notes/revert does) and print the new commit.
    Revert(RevertArgs),
    /// Run any operation of the table (see `mirai ops`) with a JSON request,
    /// with the environment's policy and the operator's permissions; print its
    /// answer as JSON. On a refusal the error's JSON is printed and the exit code
    /// says what kind: 3 bad request, 4 not found, 5 conflict, 6 denied by policy,
    /// 7 the disk or the remote (try later), 1 anything else.
    Call(CallArgs),
    /// List the operations `mirai call` (and HTTP, MCP, the sandbox) serve:
    /// name, class (read, write, sync, review) and summary.
    Ops,
    /// Print the HTTP API's OpenAPI 3.1 document (YAML), generated from the
    /// operation table; spec/openapi.yaml is this output.
    Openapi,
    /// Print a running server's change stream (GET /events), one JSON line per
    /// event ({"id","type","data"}); reconnects with Last-Event-ID when dropped.
    Watch(WatchArgs),
    /// The named callers of MIRAI_CALLERS_FILE: add one (its new token printed
    /// once) or list them (names and rights, never hashes).
    Callers {
        #[command(subcommand)]
        action: CallersAction,
    },
    /// Review mode's proposals, with the operator's permissions (a reviewer's):
    /// list, show, approve or reject them.
    Proposals {
        #[command(subcommand)]
        action: ProposalsAction,
    },
}

#[derive(Debug, Subcommand)]
enum ProposalsAction {
    /// One line per proposal, newest first: id, time, who asked, subject.
    List(ProposalsListArgs),
    /// One proposal as JSON, with its diffs and whether they still apply.
    Show(ProposalArgs),
    /// Apply a pending proposal as one commit; print the commit.
    Approve(ApproveArgs),
    /// Reject a pending proposal.
    Reject(RejectArgs),
}

#[derive(Debug, Args)]
struct ProposalsListArgs {
    /// pending, applied or rejected.
    #[arg(long, default_value = "pending")]
    status: String,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Args)]
struct ProposalArgs {
    /// The proposal's id.
    id: String,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Args)]
struct ApproveArgs {
    /// The proposal's id.
    id: String,
    /// Said in the commit's body after the original one.
    #[arg(long)]
    message: Option<String>,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Args)]
struct RejectArgs {
    /// The proposal's id.
    id: String,
    /// Why (kept with the proposal).
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Args)]
struct WatchArgs {
    /// The server's base URL; without it, http://HOST:PORT as `serve` reads them.
    #[arg(long)]
    url: Option<String>,
    /// Only these event types, comma-separated (commit, head_moved, notes_changed,
    /// proposal, run, index, sync).
    #[arg(long)]
    types: Option<String>,
    /// Only events touching notes under this path (and those carrying no paths).
    #[arg(long)]
    path_prefix: Option<String>,
    /// Address the server listens on (for the default URL).
    #[arg(long, env = "HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port the server listens on (for the default URL).
    #[arg(long, env = "PORT", default_value_t = 4567)]
    port: u16,
}

#[derive(Debug, Args)]
struct CallArgs {
    /// The operation's dotted name, e.g. notes.read.
    operation: String,
    /// The request as JSON (`{"path":"a.md"}`); `-` reads it from stdin; none: `{}`.
    request: Option<String>,
    /// Run with the rights, paths and name of this caller of MIRAI_CALLERS_FILE
    /// (or `api` / `reviewer`, the tokens' shorthands) instead of the operator's.
    #[arg(long = "as", value_name = "NAME")]
    as_caller: Option<String>,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Args)]
struct McpArgs {
    /// Serve the session with the rights, paths and name of this caller of
    /// MIRAI_CALLERS_FILE (or `api` / `reviewer`) instead of the operator's.
    #[arg(long = "as", value_name = "NAME")]
    as_caller: Option<String>,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Subcommand)]
enum CallersAction {
    /// Append a caller with a new random token, printed once (only its SHA-256 is kept).
    Add(CallersAddArgs),
    /// Print each caller's name, rights and paths, one line each.
    List(CallersFileArgs),
}

#[derive(Debug, Args)]
struct CallersFileArgs {
    /// The callers file (created mode 600 by `add` when missing).
    #[arg(long, env = "MIRAI_CALLERS_FILE")]
    file: PathBuf,
}

#[derive(Debug, Args)]
struct CallersAddArgs {
    /// The new caller's name (letters, digits, `.`, `_`, `-`).
    name: String,
    /// Its rights, comma-separated: read, write, propose, review, sync.
    #[arg(long, value_delimiter = ',', required = true)]
    can: Vec<String>,
    /// Prefixes it may write or propose under (folders end in /); none: everything.
    #[arg(long, value_delimiter = ',')]
    paths: Vec<String>,
    /// Prefixes it may read; none: everything.
    #[arg(long = "read-paths", value_delimiter = ',')]
    read_paths: Vec<String>,
    #[command(flatten)]
    file: CallersFileArgs,
}

#[derive(Debug, Args)]
struct RevertArgs {
    /// The commit to take back: its sha (full or abbreviated), HEAD or HEAD~N.
    #[arg(required_unless_present = "run", conflicts_with = "run")]
    commit: Option<String>,
    /// Take back every commit of this agent run (its run id) instead.
    #[arg(long)]
    run: Option<String>,
    /// Take back only this note's part.
    #[arg(long)]
    path: Option<String>,
    #[command(flatten)]
    notes: NotesArgs,
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

#[derive(Debug, Args)]
struct RunArgs {
    /// What the agent should do with the notes, in words.
    task: String,
    /// Most model answers before the run stops (default MIRAI_AGENT_MAX_STEPS).
    #[arg(long)]
    max_steps: Option<usize>,
    /// Writes land in memory, not on disk or in git; the report lists the diffs.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Args)]
struct LogArgs {
    /// A note's path relative to the notes root; without it, every commit.
    path: Option<String>,
    /// How many commits to print.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    limit: u64,
    #[command(flatten)]
    notes: NotesArgs,
}

#[derive(Debug, Subcommand)]
enum IndexAction {
    /// Rebuild the index artifact and print one summary line; with an embedding
    /// server configured, wait until every chunk has its vector (a progress bar on a terminal).
    Rebuild(RebuildArgs),
    /// Print the index status as JSON.
    Status(NotesArgs),
}

#[derive(Debug, Args)]
struct RebuildArgs {
    #[command(flatten)]
    notes: NotesArgs,
    /// Do not wait for chunk embeddings (the server's worker makes them later).
    #[arg(long)]
    no_embed: bool,
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
    // Listing the table or printing the API's document touches no notes.
    let touches_notes = !matches!(
        cli.command,
        Some(Command::Ops | Command::Openapi | Command::Watch(_) | Command::Callers { .. })
    );
    let allowed = if touches_notes { refuse_root() } else { Ok(()) };
    let result = allowed.and_then(|()| match cli.command {
        Some(Command::Serve(args)) => serve(args),
        Some(Command::Index { action }) => index(action),
        Some(Command::Eval(args)) => eval(args),
        Some(Command::Run(args)) => run_task(args),
        Some(Command::Log(args)) => log_lines(args),
        Some(Command::Mcp(args)) => mcp_stdio(args),
        Some(Command::Sync(args)) => sync(args),
        Some(Command::Revert(args)) => revert(args),
        Some(Command::Call(args)) => call(args),
        Some(Command::Ops) => {
            list_ops();
            Ok(())
        }
        Some(Command::Openapi) => {
            print!("{}", mirai::http::openapi::yaml());
            Ok(())
        }
        Some(Command::Proposals { action }) => proposals(action),
        Some(Command::Callers { action }) => callers(action),
        Some(Command::Watch(args)) => watch(args),
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

/// `mirai watch`: one JSON line per event of a running server's change
/// stream, until the server refuses it (exit 1 with its answer).
fn watch(args: WatchArgs) -> Result<(), Failure> {
    use std::io::Write;
    let host = match args.host.as_str() {
        "0.0.0.0" | "" => "127.0.0.1".to_string(),
        "::" => "[::1]".to_string(),
        host if host.contains(':') && !host.starts_with('[') => format!("[{host}]"),
        host => host.to_string(),
    };
    let watch = mirai::watch::Watch {
        url: args
            .url
            .unwrap_or_else(|| format!("http://{host}:{}", args.port)),
        token: std::env::var("MIRAI_API_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty()),
        types: args.types,
        path_prefix: args.path_prefix,
    };
    let stdout = std::io::stdout();
    let mut print = |event: &serde_json::Value| {
        let mut out = stdout.lock();
        let _ = writeln!(out, "{event}");
        let _ = out.flush();
    };
    watch
        .run(&mut print)
        .map_err(|message| Failure { code: 1, message })
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

/// `mirai index rebuild|status`: the same operations as the HTTP routes, with
/// the same policy (a read_only deployment's cron job sets allow_all itself).
fn index(action: IndexAction) -> Result<(), Failure> {
    let (args, op) = match &action {
        IndexAction::Rebuild(args) => (&args.notes, "index.rebuild"),
        IndexAction::Status(args) => (args, "index.status"),
    };
    let (config, notes) = open_notes(args)?;
    let ctx = app::context(notes, &config);
    if matches!(action, IndexAction::Rebuild(_)) {
        app::recover(&ctx);
    }
    let started = Instant::now();
    let answer =
        ops::dispatch(&ctx, op, Input::Json(serde_json::json!({}))).map_err(Failure::operation)?;
    match action {
        IndexAction::Rebuild(args) => {
            let elapsed = started.elapsed().as_millis();
            // The artifact's size comes from index.status, like everything the CLI reports.
            let status = ops::dispatch(&ctx, "index.status", Input::Json(serde_json::json!({})))
                .map_err(Failure::operation)?;
            println!(
                "indexed {} notes, {} chunks, {} bytes in {elapsed} ms",
                answer["notes_indexed"], answer["chunks_indexed"], status["artifact_byte_size"]
            );
            if let (Some(embeddings), false) = (&ctx.embeddings, args.no_embed) {
                embed_all(embeddings)?;
            }
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

/// Waits until every chunk has its vector, with a progress bar when stderr
/// is a terminal; prints one summary line.
fn embed_all(embeddings: &mirai::embed::Embeddings) -> Result<(), Failure> {
    let started = Instant::now();
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "embedding chunks {bar:40} {pos}/{len} ({eta} left)",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut first = None;
    let done = embeddings.embed_all(&mut |status| {
        let total = (status.chunks_embedded + status.chunks_pending) as u64;
        first.get_or_insert(status.chunks_embedded);
        bar.set_length(total);
        bar.set_position(status.chunks_embedded as u64);
    });
    bar.finish_and_clear();
    let status = embeddings.status();
    match done {
        Ok(()) => {
            println!(
                "embedded {} chunks with {} ({} already had vectors) in {} ms",
                status.chunks_embedded - first.unwrap_or(0),
                status.model,
                first.unwrap_or(0),
                started.elapsed().as_millis()
            );
            Ok(())
        }
        Err(e) => Err(Failure {
            code: 1,
            message: format!(
                "the index was rebuilt, but embedding its chunks failed ({} of {} done): {e}; \
                 queries stay lexical for the chunks without a vector until the server's worker \
                 embeds them (or pass --no-embed)",
                status.chunks_embedded,
                status.chunks_embedded + status.chunks_pending
            ),
        }),
    }
}

/// The configuration and an existing notes root, for the commands that do not serve.
fn open_notes(args: &NotesArgs) -> Result<(Config, Notes), Failure> {
    let config = Config::new(&args.notes_root)
        .with_environment(&config::process_env)
        .map_err(Failure::config)?;
    let notes = app::open_notes(&config).map_err(Failure::config)?;
    Ok((config, notes))
}

/// `mirai sync`: one pull and push, as `POST /mcp/repo/sync` does.
fn sync(args: NotesArgs) -> Result<(), Failure> {
    let (config, notes) = open_notes(&args)?;
    if config.sync.is_none() {
        return Err(Failure::config(
            "no git remote is configured; set MIRAI_GIT_REMOTE to sync",
        ));
    }
    let ctx = app::context(notes, &config);
    app::recover(&ctx);
    mirai::sync::set_transport_timeouts();
    let answer = ops::dispatch(&ctx, "repo.sync", Input::Json(serde_json::json!({})))
        .map_err(Failure::operation)?;
    // Notes the pull brought in reach the artifact before the process ends.
    app::persist_index(&ctx, "before exit");
    println!("{answer}");
    Ok(())
}

/// `mirai revert (COMMIT|--run ID) [--path P]`: the `notes.revert` row with
/// the operator's permissions and the environment's policy; prints the new
/// commit (nothing when taking the changes back changed nothing).
fn revert(args: RevertArgs) -> Result<(), Failure> {
    let (config, notes) = open_notes(&args.notes)?;
    let ctx = app::context(notes, &config);
    app::recover(&ctx);
    let request = serde_json::json!({
        "commit": args.commit,
        "run_id": args.run,
        "path": args.path,
    });
    let answer =
        ops::dispatch(&ctx, "notes.revert", Input::Json(request)).map_err(Failure::operation)?;
    app::persist_index(&ctx, "before exit");
    app::push_before_exit(&ctx);
    match (answer["commit"].as_str(), answer["proposal"].as_str()) {
        (Some(commit), _) => println!("{commit}"),
        // Review mode: the revert waits for a reviewer (`mirai proposals approve ID`).
        (None, Some(proposal)) => println!("proposed {proposal}"),
        (None, None) => {
            eprintln!("mirai: nothing changed: the notes already are as before those commits")
        }
    }
    Ok(())
}

/// `mirai call OP [JSON|-]`: one row of the table through `ops::dispatch`, as
/// every adapter calls it (policy first, the row's own malformed-request code),
/// so a new row needs no CLI code. A write recovers a killed process's work
/// first, and persists the index and pushes (with a remote) before exiting.
fn call(args: CallArgs) -> Result<(), Failure> {
    let text = match args.request.as_deref() {
        None => "{}".to_string(),
        Some("-") => std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::config(format!("cannot read the request from stdin: {e}")))?,
        Some(text) => text.to_string(),
    };
    let (config, notes) = open_notes(&args.notes)?;
    // The operator's permissions (a reviewer's), or the named caller's.
    let caller = named_caller(&config, args.as_caller.as_deref())?;
    let ctx = app::context(notes, &config).as_reviewer().as_caller(caller);
    let writes = ops::find(&args.operation).is_some_and(|op| op.class != ops::Class::Read);
    if writes {
        app::recover(&ctx);
        mirai::sync::set_transport_timeouts();
    }
    let answer = ops::dispatch(&ctx, &args.operation, Input::Body(text.as_bytes()));
    if writes {
        app::persist_index(&ctx, "before exit");
        app::push_before_exit(&ctx);
    }
    match answer {
        Ok(answer) => {
            println!("{answer}");
            Ok(())
        }
        Err(err) => {
            println!(
                "{}",
                serde_json::json!({"error": {"code": err.code, "message": err.message}})
            );
            Err(Failure {
                code: call_exit_code(err.code),
                message: format!("{}: {}", err.code, err.message),
            })
        }
    }
}

/// `mirai callers add|list`: the callers file, without serving.
fn callers(action: CallersAction) -> Result<(), Failure> {
    match action {
        CallersAction::Add(args) => {
            let token = mirai::callers::append_caller(
                &args.file.file,
                &args.name,
                &args.can,
                &args.paths,
                &args.read_paths,
            )
            .map_err(Failure::config)?;
            eprintln!(
                "caller {} added to {}; its token (shown once, only its SHA-256 is kept; \
                 a running server takes it on SIGHUP):",
                args.name,
                args.file.file.display()
            );
            println!("{token}");
        }
        CallersAction::List(args) => {
            for caller in mirai::callers::load(&args.file).map_err(Failure::config)? {
                let or_all = |p: &mirai::callers::Prefixes| {
                    if p.is_everything() {
                        "everything".to_string()
                    } else {
                        p.list().join(",")
                    }
                };
                println!(
                    "{}\tcan={}\tpaths={}\tread_paths={}{}",
                    caller.name,
                    caller.can.names().join(","),
                    or_all(&caller.paths),
                    or_all(&caller.read_paths),
                    if caller.self_review {
                        "\tself_review"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    Ok(())
}

/// `mirai proposals list|show|approve|reject`: the proposals rows with the
/// operator's permissions (a reviewer's), exit codes as `mirai call`'s.
fn proposals(action: ProposalsAction) -> Result<(), Failure> {
    use serde_json::json;
    let (notes, op, request) = match &action {
        ProposalsAction::List(args) => (
            &args.notes,
            "proposals.list",
            json!({"status": args.status, "limit": ops::MAX_PROPOSALS_LIMIT}),
        ),
        ProposalsAction::Show(args) => (&args.notes, "proposals.get", json!({"id": args.id})),
        ProposalsAction::Approve(args) => (
            &args.notes,
            "proposals.approve",
            json!({"id": args.id, "message": args.message}),
        ),
        ProposalsAction::Reject(args) => (
            &args.notes,
            "proposals.reject",
            json!({"id": args.id, "reason": args.reason}),
        ),
    };
    let (config, notes) = open_notes(notes)?;
    let ctx = app::context(notes, &config).as_reviewer();
    let approving = matches!(action, ProposalsAction::Approve(_));
    if approving {
        app::recover(&ctx);
        mirai::sync::set_transport_timeouts();
    }
    let refused = |err: mirai::error::Error| Failure {
        code: call_exit_code(err.code),
        message: format!("{}: {}", err.code, err.message),
    };
    let mut answer = ops::dispatch(&ctx, op, Input::Json(request.clone())).map_err(refused)?;
    if approving {
        app::persist_index(&ctx, "before exit");
        app::push_before_exit(&ctx);
    }
    match action {
        ProposalsAction::List(_) => {
            let mut out = std::io::stdout().lock();
            let mut request = request;
            loop {
                let page: ops::ProposalsPage =
                    serde_json::from_value(answer).map_err(|e| Failure {
                        code: 1,
                        message: e.to_string(),
                    })?;
                for p in &page.proposals {
                    let who = match &p.requested_by.run_id {
                        Some(run) => format!("{} run {run}", p.requested_by.adapter),
                        None => p.requested_by.adapter.clone(),
                    };
                    let line = format!("{}  {}  {who}  {}\n", p.id, p.created_at, p.subject);
                    if std::io::Write::write_all(&mut out, line.as_bytes()).is_err() {
                        return Ok(()); // the reader went away
                    }
                }
                let Some(next) = page.next_cursor else {
                    break;
                };
                request["cursor"] = next.into();
                answer = ops::dispatch(&ctx, "proposals.list", Input::Json(request.clone()))
                    .map_err(refused)?;
            }
        }
        ProposalsAction::Show(_) => {
            let text = serde_json::to_string_pretty(&answer).map_err(|e| Failure {
                code: 1,
                message: e.to_string(),
            })?;
            println!("{text}");
        }
        ProposalsAction::Approve(_) => println!("{}", answer["commit"].as_str().unwrap_or("")),
        ProposalsAction::Reject(args) => println!("rejected {}", args.id),
    }
    Ok(())
}

/// The exit code of a refused `mirai call`, from the error's kind.
fn call_exit_code(code: mirai::error::ErrorCode) -> u8 {
    use mirai::error::ErrorCode as C;
    match code {
        C::NotFound => 4,
        C::Conflict => 5,
        C::PolicyDenied => 6,
        C::InsufficientStorage | C::RemoteUnavailable | C::LlmUnavailable => 7,
        _ => match code.http_status() {
            400..=499 => 3,
            _ => 1,
        },
    }
}

/// `mirai ops`: the table, one row per line.
fn list_ops() {
    let width = ops::TABLE.iter().map(|op| op.name.len()).max().unwrap_or(0);
    for op in ops::TABLE {
        let class = match op.class {
            ops::Class::Read => "read",
            ops::Class::Write => "write",
            ops::Class::Sync => "sync",
            ops::Class::Review => "review",
        };
        println!("{:width$}  {class:5}  {}", op.name, op.summary);
    }
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
    let ctx = app::context(notes, &config);
    if !args.dry_run {
        app::recover(&ctx);
    }
    let sandbox = app::sandbox(&config).map_err(Failure::config)?;
    let request = EvalRequest {
        code,
        dry_run: args.dry_run,
    };
    let evaluation = sandbox.eval(&ctx, &request).map_err(Failure::operation)?;
    // Writes made by the program reach the artifact (and the remote) before the process ends.
    app::persist_index(&ctx, "before exit");
    if !request.dry_run {
        app::push_before_exit(&ctx);
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

/// `mirai run TASK`: one agent run, told step by step on stderr; the report
/// (outcome first) on stdout.
fn run_task(args: RunArgs) -> Result<(), Failure> {
    let (config, notes) = open_notes(&args.notes)?;
    let ctx = app::context(notes, &config);
    if !args.dry_run {
        app::recover(&ctx);
    }
    let sandbox = std::sync::Arc::new(app::sandbox(&config).map_err(Failure::config)?);
    let agent = mirai::agent::Agent::new(
        config.llm.clone(),
        config.agent,
        config.secrets(),
        &config.notes_root,
        sandbox,
    );
    let request = mirai::agent::RunRequest {
        task: args.task,
        max_steps: args.max_steps,
        dry_run: args.dry_run,
    };
    let mut told = |event: &mirai::agent::transcript::Event| {
        let step = event
            .data
            .get("step")
            .map(|s| s.to_string())
            .unwrap_or_default();
        match event.kind {
            "llm_response" => eprintln!("step {step}: the model answered"),
            "code_end" => eprintln!("step {step}: its code ran"),
            "reply_held" | "reply_contested" => {
                eprintln!("step {step}: its reply was held back ({})", event.kind)
            }
            _ => {}
        }
    };
    let report = agent
        .run(&ctx, &request, &mut told)
        .map_err(Failure::operation)?;
    // The run's writes reach the artifact (and the remote) before the process ends.
    app::persist_index(&ctx, "before exit");
    if !args.dry_run {
        app::push_before_exit(&ctx);
    }
    eprintln!("{}", report.outcome.summary);
    let text = serde_json::to_string_pretty(&report).map_err(|e| Failure {
        code: 1,
        message: e.to_string(),
    })?;
    println!("{text}");
    match (report.stopped, report.reply_contradicted) {
        (mirai::agent::Stopped::Reply, false) => Ok(()),
        (_, true) => Err(Failure {
            code: 1,
            message: "the reply contradicts mirai's record: read outcome".into(),
        }),
        (stopped, false) => Err(Failure {
            code: 1,
            message: format!(
                "the run stopped without a reply ({}): read stop_detail",
                serde_json::to_value(stopped)
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            ),
        }),
    }
}

/// `mirai log [PATH]`: `notes.history` page by page until `--limit` commits,
/// one line each, like `git log --oneline` with the time and the agent run.
fn log_lines(args: LogArgs) -> Result<(), Failure> {
    let (config, notes) = open_notes(&args.notes)?;
    let ctx = app::context(notes, &config);
    let mut left = args.limit;
    let mut cursor = serde_json::Value::Null;
    let mut out = std::io::stdout().lock();
    while left > 0 {
        let page_size = left.min(ops::MAX_HISTORY_LIMIT as u64);
        let mut request = serde_json::json!({"limit": page_size, "cursor": cursor});
        if let Some(path) = &args.path {
            request["path"] = path.as_str().into();
        }
        let page = ops::dispatch(&ctx, "notes.history", Input::Json(request))
            .map_err(Failure::operation)?;
        let page: ops::HistoryResponse = serde_json::from_value(page).map_err(|e| Failure {
            code: 1,
            message: e.to_string(),
        })?;
        for commit in &page.commits {
            let run = match &commit.run_id {
                Some(run) => format!("  [run {run}]"),
                None => String::new(),
            };
            let line = format!(
                "{} {} {}{run}",
                &commit.commit[..12],
                commit.time,
                commit.subject
            );
            if std::io::Write::write_all(&mut out, format!("{line}\n").as_bytes()).is_err() {
                return Ok(()); // the reader went away (`mirai log | head`)
            }
        }
        left -= page.commits.len() as u64;
        match page.next_cursor {
            Some(next) => cursor = next.into(),
            None => break,
        }
    }
    Ok(())
}

/// `mirai mcp`: one JSON-RPC message per line in, one per line out, with the
/// operator's permissions (no token: ARCHITECTURE.md, "The token guards the
/// network") and the environment's policy.
/// The caller `--as NAME` names (`None`: the operator), from the callers of
/// MIRAI_CALLERS_FILE and the tokens' shorthands; an unknown name stops with
/// exit 2.
fn named_caller(
    config: &Config,
    name: Option<&str>,
) -> Result<Option<std::sync::Arc<mirai::callers::Caller>>, Failure> {
    let Some(name) = name else { return Ok(None) };
    let book = app::callers(config).map_err(Failure::config)?;
    let caller = book.current().named(name).ok_or_else(|| {
        Failure::config(format!(
            "no caller named {name:?}: `mirai callers list` shows them (MIRAI_CALLERS_FILE)"
        ))
    })?;
    Ok(Some(caller))
}

fn mcp_stdio(args: McpArgs) -> Result<(), Failure> {
    use std::io::{BufRead, Write};
    let (config, notes) = open_notes(&args.notes)?;
    let caller = named_caller(&config, args.as_caller.as_deref())?;
    // Wired as `serve` is: index warm-up and watcher, sync, the sandbox.
    let app = app::build_on(config, notes).map_err(Failure::config)?;
    let (ctx, mcp) = (app.ctx.clone(), app.mcp.clone());
    // Responses and the subscriptions' notifications share stdout, one whole line at a time.
    let stdout = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let session = mcp.session();
    // Notifications start with the first subscription: a client that never
    // subscribes reads responses only.
    let mut notifying = false;
    // The open listens, by their request id (JSON text), each with its cancel.
    let mut listens = std::collections::HashMap::new();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Failure::config(format!("cannot read stdin: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let response = match mirai::json::from_str(&line) {
            // 2026-07-28's listen: its acknowledgement now, its notifications between responses.
            Ok(message) if is_listen(&message) => {
                match mcp.listen(message["id"].clone(), &message["params"], caller.as_ref()) {
                    Ok((ack, listen)) => {
                        let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
                        if writeln!(out, "{ack}").and_then(|()| out.flush()).is_err() {
                            break;
                        }
                        let (cancel, cancelled) = tokio::sync::oneshot::channel();
                        listens.retain(|_, cancel: &mut tokio::sync::oneshot::Sender<()>| {
                            !cancel.is_closed()
                        });
                        listens.insert(message["id"].to_string(), cancel);
                        spawn_listen(message["id"].clone(), listen, cancelled, stdout.clone());
                        None
                    }
                    Err(error) => Some(error),
                }
            }
            // On stdio a listen ends when the client cancels its request.
            Ok(message) if message["method"] == "notifications/cancelled" => {
                let named = message["params"]["requestId"].to_string();
                if let Some(cancel) = listens.remove(&named) {
                    let _ = cancel.send(());
                }
                None
            }
            Ok(message) => mcp.handle(&message, Some(&session), caller.as_ref()),
            Err(e) => Some(serde_json::json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": mirai::mcp::code::PARSE_ERROR, "message": format!("not JSON: {e}")}})),
        };
        if !notifying && session.count() > 0 {
            notifying = true;
            let mut notifier = mcp.notifier(session.clone());
            let notes_out = stdout.clone();
            std::thread::spawn(move || {
                while let Some(note) = notifier.next_blocking() {
                    let mut out = notes_out.lock().unwrap_or_else(|p| p.into_inner());
                    if writeln!(out, "{note}").and_then(|()| out.flush()).is_err() {
                        return; // the client went away
                    }
                }
            });
        }
        if let Some(response) = response {
            let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
            let written = writeln!(out, "{response}").and_then(|()| out.flush());
            if written.is_err() {
                break; // the client went away
            }
        }
    }
    app::persist_index(&ctx, "before exit");
    app::push_before_exit(&ctx);
    Ok(())
}

/// Writes a stdio listen's notifications, one line each, on a thread of its
/// own, until the client cancels it (`notifications/cancelled` naming its
/// request), goes away, or the listen ends on the server's side (a client
/// that fell too far behind), which the server tells with its own
/// `notifications/cancelled` naming the request, as 2026-07-28 asks.
fn spawn_listen(
    id: serde_json::Value,
    mut listen: mirai::mcp::Listen,
    mut cancelled: tokio::sync::oneshot::Receiver<()>,
    stdout: std::sync::Arc<std::sync::Mutex<std::io::Stdout>>,
) {
    use futures_util::future::{select, Either};
    use std::io::Write;
    let write = move |line: &serde_json::Value| {
        let mut out = stdout.lock().unwrap_or_else(|p| p.into_inner());
        writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
    };
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            loop {
                let next = std::pin::pin!(listen.next());
                // The cancel is looked at first: nothing is written after it.
                match select(&mut cancelled, next).await {
                    // Cancelled by the client (or the connection's end): its subscriptions go.
                    Either::Left(_) => return,
                    Either::Right((Some(note), _)) => {
                        if !write(&note) {
                            return; // the client went away
                        }
                    }
                    Either::Right((None, _)) => {
                        write(&serde_json::json!({"jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": id, "reason": "the server ended this listen: \
                                it fell too far behind; re-read the notes and listen again"}}));
                        return;
                    }
                }
            }
        });
    });
}

/// Whether `message` is a 2026-07-28 `subscriptions/listen` request.
fn is_listen(message: &serde_json::Value) -> bool {
    message["method"] == "subscriptions/listen"
        && message.get("id").is_some()
        && mirai::mcp::requested_version(&message["params"]).is_some()
}

fn serve(args: ServeArgs) -> Result<(), Failure> {
    let mut config = Config::new(args.notes.notes_root);
    config.host = args.host;
    config.port = args.port;
    let config = config
        .with_environment(&config::process_env)
        .map_err(Failure::config)?;
    config.check_serving().map_err(Failure::config)?;
    let app = app::build(config).map_err(Failure::config)?;
    let config = &app.config;
    let listener = TcpListener::bind((config.host.as_str(), config.port)).map_err(|e| {
        Failure::config(format!(
            "cannot listen on {}:{}: {e}",
            config.host, config.port
        ))
    })?;
    let address = listener.local_addr().map_err(Failure::config)?;
    log::info!(
        "serving {} on http://{address} (policy {}{})",
        app.ctx.view.disk_notes().root().display(),
        config.policy.as_str(),
        if app.callers.current().guards_network() {
            ", bearer token required"
        } else {
            ""
        }
    );
    let ctx = app.ctx.clone();
    let callers = app.callers.clone();
    let served = actix_web::rt::System::new().block_on(async move {
        actix_web::rt::spawn(http::hangup::reload_on_hangup(callers));
        http::stop::serve_until_signal(http::serve(app, listener)?).await
    });
    // Applies since the last background persist reach the artifact before we go.
    app::persist_index(&ctx, "at shutdown");
    served.map_err(|e| Failure {
        code: 1,
        message: format!("server stopped: {e}"),
    })
}
