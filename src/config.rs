//! Configuration: read from flags and the environment once, at start-up, and
//! validated there, so the rest of the program only ever sees good values.

use std::path::PathBuf;

use thiserror::Error;

/// Default cap on request bodies (`MIRAI_MAX_BODY_BYTES`), and so on a note's content.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// Default cap on a note's size (`MIRAI_MAX_NOTE_BYTES`): larger notes are
/// never loaded whole, and no write makes a note larger.
pub const DEFAULT_MAX_NOTE_BYTES: usize = 8 * 1024 * 1024;

/// Default time a request body may take to arrive (`MIRAI_BODY_TIMEOUT_MS`).
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 10_000;

/// Default cap on the edits of one `notes.edit` (`MIRAI_EDIT_MAX_EDITS`).
pub const DEFAULT_MAX_EDITS: usize = 50;

/// Default cap on the notes one `changes.apply` or `notes.revert` commit
/// changes (`MIRAI_CHANGES_MAX_PATCHES`).
pub const DEFAULT_MAX_CHANGES: usize = 50;

/// Default cap on the notes one `notes.move` rewrites links in
/// (`MIRAI_MOVE_MAX_NOTES`); reverting a move honours it too.
pub const DEFAULT_MAX_MOVE_NOTES: usize = 1000;

/// The highest `MIRAI_CHANGES_MAX_PATCHES` (and `MIRAI_MOVE_MAX_NOTES`) accepted: one commit's crash record
/// names every note, and stays well within what recovery reads.
pub const MAX_CHANGES_LIMIT: u64 = 10_000;
/// The change stream's limits (`MIRAI_EVENTS_BACKLOG`, `MIRAI_EVENTS_MAX_CLIENTS`,
/// `MIRAI_MCP_MAX_SUBSCRIPTIONS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimits {
    /// Events kept for `Last-Event-ID` resumes (default 1,000).
    pub backlog: usize,
    /// Most `GET /events` streams at once (default 64).
    pub max_clients: usize,
    /// Most MCP resource subscriptions across all sessions (default 20,000).
    pub mcp_max_subscriptions: usize,
}

/// The most events `MIRAI_EVENTS_BACKLOG` may keep.
pub const MAX_EVENTS_BACKLOG: u64 = 100_000;

impl Default for EventLimits {
    fn default() -> EventLimits {
        EventLimits {
            backlog: 1000,
            max_clients: 64,
            mcp_max_subscriptions: 20_000,
        }
    }
}

/// Pending proposals allowed at once by default (`MIRAI_PROPOSALS_MAX_PENDING`).
pub const DEFAULT_PROPOSALS_MAX_PENDING: usize = 1000;

/// The sandbox's bounds on one eval (`MIRAI_SANDBOX_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// The guest's linear memory cap (`MIRAI_SANDBOX_MEMORY_MB`, default 64).
    pub memory_bytes: usize,
    /// Wall-clock deadline, host calls included (`MIRAI_SANDBOX_TIMEOUT_MS`, default 2000).
    pub timeout_ms: u64,
    /// CPU bound in wasm fuel, host calls excluded (`MIRAI_SANDBOX_FUEL`).
    pub fuel: u64,
    /// Host calls (`mirai.*`) per eval (`MIRAI_SANDBOX_MAX_CALLS`, default 200).
    pub max_calls: usize,
    /// Console output plus the result, in bytes (`MIRAI_SANDBOX_MAX_OUTPUT_BYTES`, default 64 KiB).
    pub max_output_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 64 * 1024 * 1024,
            timeout_ms: 2_000,
            // About one second of tight JavaScript on this project's reference machine.
            fuel: 10_000_000_000,
            max_calls: 200,
            max_output_bytes: 64 * 1024,
        }
    }
}

/// Where the agent's model is: an OpenAI-compatible chat API (`MIRAI_LLM_*`).
#[derive(Clone, PartialEq, Eq)]
pub struct LlmConfig {
    pub base_url: String,
    pub model: String,
    /// `MIRAI_LLM_API_KEY`, else `OPENAI_API_KEY`. Never logged, never shown.
    pub api_key: Option<String>,
    pub timeout_ms: u64,
    pub max_retries: u32,
    /// The most tokens one answer may take (`max_tokens`): a model that
    /// rambles past its stop sequences costs a bounded time per step.
    pub max_tokens: u32,
}

pub const DEFAULT_LLM_BASE_URL: &str = "https://api.openai.com/v1";

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_url: DEFAULT_LLM_BASE_URL.to_string(),
            model: "gpt-4o-mini".to_string(),
            api_key: None,
            timeout_ms: 120_000,
            max_retries: 3,
            max_tokens: 1024,
        }
    }
}

impl LlmConfig {
    /// A key, or a base URL of the operator's own (a local server needs no key).
    pub fn is_configured(&self) -> bool {
        self.api_key.is_some() || self.base_url != DEFAULT_LLM_BASE_URL
    }
}

/// What a `Debug` form shows of a secret: whether it is set, never its value.
fn secret(value: &Option<String>) -> Option<&'static str> {
    value.as_ref().map(|_| "<set>")
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so a new field cannot be added without deciding how it is shown.
        let LlmConfig {
            base_url,
            model,
            api_key,
            timeout_ms,
            max_retries,
            max_tokens,
        } = self;
        f.debug_struct("LlmConfig")
            .field("base_url", &crate::redact::urls(base_url))
            .field("model", model)
            .field("api_key", &secret(api_key))
            .field("timeout_ms", timeout_ms)
            .field("max_retries", max_retries)
            .field("max_tokens", max_tokens)
            .finish()
    }
}

/// Where chunk embeddings come from: an OpenAI-compatible embeddings API
/// (`MIRAI_EMBED_*`). Absent (no `MIRAI_EMBED_BASE_URL`): search is lexical only.
#[derive(Clone, PartialEq, Eq)]
pub struct EmbedConfig {
    pub base_url: String,
    pub model: String,
    /// `MIRAI_EMBED_API_KEY`. Never logged, never shown.
    pub api_key: Option<String>,
    /// Chunks per request (`MIRAI_EMBED_BATCH`, default 32).
    pub batch: usize,
    /// Send `"input_type": "query"` / `"passage"` (`MIRAI_EMBED_INPUT_TYPE=on`).
    pub input_type: bool,
    pub query_prefix: String,
    pub passage_prefix: String,
    /// One request of the background worker (`MIRAI_EMBED_TIMEOUT_MS`, default 60000).
    pub timeout_ms: u64,
    /// The one request a query makes (`MIRAI_EMBED_QUERY_TIMEOUT_MS`, default 1000).
    pub query_timeout_ms: u64,
    /// Retries of a worker request on 429/5xx (`MIRAI_EMBED_MAX_RETRIES`, default 3).
    pub max_retries: u32,
}

impl EmbedConfig {
    /// The settings for `base_url`, every other one at its default.
    pub fn new(base_url: &str) -> EmbedConfig {
        EmbedConfig {
            base_url: base_url.trim().trim_end_matches('/').to_string(),
            model: "text-embedding-3-small".to_string(),
            api_key: None,
            batch: 32,
            input_type: false,
            query_prefix: String::new(),
            passage_prefix: String::new(),
            timeout_ms: 60_000,
            query_timeout_ms: 1000,
            max_retries: 3,
        }
    }

    /// Reads `MIRAI_EMBED_*`; `None` without a base URL.
    fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<EmbedConfig>, ConfigError> {
        let non_empty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let Some(base) = non_empty("MIRAI_EMBED_BASE_URL") else {
            return Ok(None);
        };
        let mut c = EmbedConfig::new(&base);
        if let Some(model) = non_empty("MIRAI_EMBED_MODEL") {
            c.model = model.trim().to_string();
        }
        c.api_key = non_empty("MIRAI_EMBED_API_KEY").map(|key| key.trim().to_string());
        let number =
            |name: &'static str, expected: &'static str, range: std::ops::RangeInclusive<u64>| {
                let Some(raw) = non_empty(name) else {
                    return Ok(None);
                };
                match raw.trim().parse::<u64>() {
                    Ok(n) if range.contains(&n) => Ok(Some(n)),
                    _ => Err(ConfigError::Value {
                        name,
                        value: raw,
                        expected,
                    }),
                }
            };
        if let Some(n) = number(
            "MIRAI_EMBED_BATCH",
            "a number of chunks from 1 to 2048",
            1..=2048,
        )? {
            c.batch = n as usize;
        }
        let ms = "a positive number of milliseconds";
        if let Some(n) = number("MIRAI_EMBED_TIMEOUT_MS", ms, 1..=u64::MAX)? {
            c.timeout_ms = n;
        }
        if let Some(n) = number("MIRAI_EMBED_QUERY_TIMEOUT_MS", ms, 1..=u64::MAX)? {
            c.query_timeout_ms = n;
        }
        if let Some(n) = number(
            "MIRAI_EMBED_MAX_RETRIES",
            "a number of retries from 0 to 10",
            0..=10,
        )? {
            c.max_retries = n as u32;
        }
        if let Some(raw) = non_empty("MIRAI_EMBED_INPUT_TYPE") {
            c.input_type = match raw.trim().to_ascii_lowercase().as_str() {
                "on" => true,
                "off" => false,
                _ => {
                    return Err(ConfigError::Value {
                        name: "MIRAI_EMBED_INPUT_TYPE",
                        value: raw,
                        expected: "on or off",
                    })
                }
            };
        }
        // Prefixes keep their spaces ("query: "): only unset means none.
        c.query_prefix = env("MIRAI_EMBED_QUERY_PREFIX").unwrap_or_default();
        c.passage_prefix = env("MIRAI_EMBED_PASSAGE_PREFIX").unwrap_or_default();
        Ok(Some(c))
    }
}

impl std::fmt::Debug for EmbedConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so a new field cannot be added without deciding how it is shown.
        let EmbedConfig {
            base_url,
            model,
            api_key,
            batch,
            input_type,
            query_prefix,
            passage_prefix,
            timeout_ms,
            query_timeout_ms,
            max_retries,
        } = self;
        f.debug_struct("EmbedConfig")
            .field("base_url", &crate::redact::urls(base_url))
            .field("model", model)
            .field("api_key", &secret(api_key))
            .field("batch", batch)
            .field("input_type", input_type)
            .field("query_prefix", query_prefix)
            .field("passage_prefix", passage_prefix)
            .field("timeout_ms", timeout_ms)
            .field("query_timeout_ms", query_timeout_ms)
            .field("max_retries", max_retries)
            .finish()
    }
}

/// Bounds on one agent run (`MIRAI_AGENT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLimits {
    /// Steps when a run does not say (`MIRAI_AGENT_MAX_STEPS`, default 8).
    pub default_steps: usize,
    /// Wall time per run (`MIRAI_AGENT_DEADLINE_MS`, default 120000).
    pub deadline_ms: u64,
}

/// No run may take more steps than this, whatever it asks for.
pub const MAX_AGENT_STEPS: usize = 32;

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            default_steps: 8,
            deadline_ms: 120_000,
        }
    }
}

/// Which classes of operation a deployment allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyMode {
    AllowAll,
    ReadOnly,
    /// Every note-changing write becomes a proposal a person approves or rejects.
    Review,
}

impl PolicyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyMode::AllowAll => "allow_all",
            PolicyMode::ReadOnly => "read_only",
            PolicyMode::Review => "review",
        }
    }

    /// Parses `allow_all` / `read_only` / `review` (surrounding whitespace and case ignored).
    pub fn parse(raw: &str) -> Result<PolicyMode, ConfigError> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "allow_all" => Ok(PolicyMode::AllowAll),
            "read_only" => Ok(PolicyMode::ReadOnly),
            "review" => Ok(PolicyMode::Review),
            _ => Err(ConfigError::PolicyMode(raw.to_string())),
        }
    }
}

/// What a write does to a note with someone else's uncommitted changes
/// (`MIRAI_DIRTY_NOTES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirtyNotes {
    /// Refuse with 409 `conflict` (the default).
    Refuse,
    /// Commit the note as it is on disk first, in a snapshot commit of its own,
    /// then write on top: for vaults edited by a person who never commits.
    Snapshot,
}

impl DirtyNotes {
    /// Parses `refuse` / `snapshot` (surrounding whitespace and case ignored).
    pub fn parse(raw: &str) -> Result<DirtyNotes, ConfigError> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "refuse" => Ok(DirtyNotes::Refuse),
            "snapshot" => Ok(DirtyNotes::Snapshot),
            _ => Err(ConfigError::Value {
                name: "MIRAI_DIRTY_NOTES",
                value: raw.to_string(),
                expected: "refuse or snapshot",
            }),
        }
    }
}

/// Which writes the guards against destructive writes check (`MIRAI_GUARDS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardMode {
    /// Writes whose author is a model: the sandbox, agent runs and MCP (the default).
    Models,
    /// Plain HTTP calls too.
    All,
    /// No write is guarded.
    Off,
}

impl GuardMode {
    /// Parses `models` / `all` / `off` (surrounding whitespace and case ignored).
    pub fn parse(raw: &str) -> Result<GuardMode, ConfigError> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "models" => Ok(GuardMode::Models),
            "all" => Ok(GuardMode::All),
            "off" => Ok(GuardMode::Off),
            _ => Err(ConfigError::Value {
                name: "MIRAI_GUARDS",
                value: raw.to_string(),
                expected: "models, all or off",
            }),
        }
    }
}

/// The guards against destructive writes (`MIRAI_GUARD*`): where they apply
/// and their bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guards {
    pub mode: GuardMode,
    /// A write may remove at most this share of a note's lines, net
    /// (`MIRAI_GUARD_MAX_DELETE_RATIO`, default 0.5).
    pub max_delete_ratio: f64,
    /// Notes shorter than this many lines are not held to the ratio
    /// (`MIRAI_GUARD_MIN_LINES`, default 20).
    pub min_lines: usize,
    /// Whether added lines that look like elision placeholders are refused
    /// (`MIRAI_GUARD_PLACEHOLDERS`, `on` by default).
    pub placeholders: bool,
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            mode: GuardMode::Models,
            max_delete_ratio: 0.5,
            min_lines: 20,
            placeholders: true,
        }
    }
}

/// A configuration value that cannot be used. Start-up prints it and exits 2.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("invalid policy mode: {0} (expected allow_all, read_only or review)")]
    PolicyMode(String),
    #[error("invalid {name}: {value} (expected {expected})")]
    Value {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A sync setting that cannot be used (the message names it and the fix).
    #[error("{0}")]
    Sync(String),
    #[error("MIRAI_POLICY_MODE=review needs MIRAI_REVIEWER_TOKEN: approving and rejecting proposals over HTTP takes that second bearer token; set it (or use another policy mode)")]
    NoReviewerToken,
    #[error("MIRAI_CACHE_DIR {0} is inside the notes root: compiled code must never live where notes (and anyone who can push to them) can put files; choose a folder outside NOTES_ROOT")]
    CacheInsideNotes(String),
}

/// Who commits: `MIRAI_GIT_AUTHOR_NAME` / `MIRAI_GIT_AUTHOR_EMAIL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitIdentity {
    pub name: String,
    pub email: String,
}

impl Default for GitIdentity {
    fn default() -> Self {
        GitIdentity {
            name: "mirai".to_string(),
            email: "mirai@localhost".to_string(),
        }
    }
}

/// `path` with its longest existing part canonicalized (symlinks resolved)
/// and the rest appended as it is.
fn real_path_of(path: &std::path::Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |acc, part| acc.join(part));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// Everything the service needs to run, already validated. Its `Debug` form
/// shows whether the token and the model's key are set, never their values.
#[derive(Clone)]
pub struct Config {
    pub notes_root: PathBuf,
    pub host: String,
    pub port: u16,
    pub policy: PolicyMode,
    /// When set, every HTTP route but `/health` needs `Authorization: Bearer <token>`.
    pub api_token: Option<String>,
    /// `MIRAI_REVIEWER_TOKEN`: the bearer token that alone approves and
    /// rejects proposals over HTTP, and opens every route the API token opens.
    pub reviewer_token: Option<String>,
    /// Most pending proposals at once (`MIRAI_PROPOSALS_MAX_PENDING`, default 1000).
    pub proposals_max_pending: usize,
    /// The change stream's limits (`GET /events`, MCP subscriptions).
    pub events: EventLimits,
    pub max_body_bytes: usize,
    /// The largest note mirai reads, indexes or writes (`MIRAI_MAX_NOTE_BYTES`);
    /// never below `max_body_bytes`.
    pub max_note_bytes: usize,
    /// How long a request body may take to arrive, in milliseconds (`MIRAI_BODY_TIMEOUT_MS`).
    pub body_timeout_ms: u64,
    pub max_edits: usize,
    /// Most notes one multi-note commit changes (`MIRAI_CHANGES_MAX_PATCHES`).
    pub max_changes: usize,
    /// Most notes one `notes.move` rewrites links in (`MIRAI_MOVE_MAX_NOTES`).
    pub max_move_notes: usize,
    pub git_identity: GitIdentity,
    /// What writes do to notes with uncommitted changes (`MIRAI_DIRTY_NOTES`).
    pub dirty_notes: DirtyNotes,
    /// The guards against destructive writes (`MIRAI_GUARD*`).
    pub guards: Guards,
    pub sandbox: SandboxLimits,
    pub llm: LlmConfig,
    /// Embeddings for semantic and hybrid search; `None`: lexical only.
    pub embed: Option<EmbedConfig>,
    pub agent: AgentLimits,
    /// Browser origins allowed besides loopback ones (`MIRAI_ALLOWED_ORIGINS`, alias
    /// `MIRAI_MCP_ALLOWED_ORIGINS`; comma-separated), as [`crate::origin::origin_key`] writes them.
    pub allowed_origins: Vec<String>,
    /// `Host` names accepted besides this machine's own while no token is set
    /// (`MIRAI_ALLOWED_HOSTS`, comma-separated), as [`crate::origin::host_of`] writes them.
    pub allowed_hosts: Vec<String>,
    /// Largest MCP tool result text (`MIRAI_MCP_MAX_RESULT_BYTES`, default 64 KiB).
    pub mcp_max_result_bytes: usize,
    /// Where the compiled guest module is cached: `MIRAI_CACHE_DIR`, else the
    /// user's cache folder (`$XDG_CACHE_HOME/mirai`, `$HOME/.cache/mirai`);
    /// never inside the notes root (see [`Config::usable_cache_dir`]).
    /// `None`: no cache, the guest is compiled at every start.
    pub cache_dir: Option<PathBuf>,
    /// Whether `cache_dir` was set by `MIRAI_CACHE_DIR` (then a cache inside
    /// the notes root stops start-up rather than being skipped).
    pub cache_dir_explicit: bool,
    /// The git remote mirai pushes to and pulls from (`MIRAI_GIT_*`); `None`: no sync.
    pub sync: Option<SyncConfig>,
    /// `MIRAI_WEBHOOK_SECRET`: when set (with a remote), `POST /hooks/push` exists and
    /// checks GitHub's `X-Hub-Signature-256` with it. Never logged, never shown.
    pub webhook_secret: Option<String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so a new field cannot be added without deciding how it is shown.
        let Config {
            notes_root,
            host,
            port,
            policy,
            api_token,
            reviewer_token,
            proposals_max_pending,
            events,
            max_body_bytes,
            max_note_bytes,
            body_timeout_ms,
            max_edits,
            max_changes,
            max_move_notes,
            git_identity,
            dirty_notes,
            guards,
            sandbox,
            llm,
            embed,
            agent,
            allowed_origins,
            allowed_hosts,
            mcp_max_result_bytes,
            cache_dir,
            cache_dir_explicit,
            sync,
            webhook_secret,
        } = self;
        f.debug_struct("Config")
            .field("notes_root", notes_root)
            .field("host", host)
            .field("port", port)
            .field("policy", policy)
            .field("api_token", &secret(api_token))
            .field("reviewer_token", &secret(reviewer_token))
            .field("proposals_max_pending", proposals_max_pending)
            .field("events", events)
            .field("max_body_bytes", max_body_bytes)
            .field("max_note_bytes", max_note_bytes)
            .field("body_timeout_ms", body_timeout_ms)
            .field("max_edits", max_edits)
            .field("max_changes", max_changes)
            .field("max_move_notes", max_move_notes)
            .field("git_identity", git_identity)
            .field("dirty_notes", dirty_notes)
            .field("guards", guards)
            .field("sandbox", sandbox)
            .field("llm", llm)
            .field("embed", embed)
            .field("agent", agent)
            .field("allowed_origins", allowed_origins)
            .field("allowed_hosts", allowed_hosts)
            .field("mcp_max_result_bytes", mcp_max_result_bytes)
            .field("cache_dir", cache_dir)
            .field("cache_dir_explicit", cache_dir_explicit)
            .field("sync", sync)
            .field("webhook_secret", &secret(webhook_secret))
            .finish()
    }
}

impl Config {
    /// What `mirai serve` needs besides valid settings: in review mode, a
    /// reviewer token (without one nobody could approve over HTTP). The CLI
    /// and `mirai mcp` on stdio run with the operator's permissions and need none.
    pub fn check_serving(&self) -> Result<(), ConfigError> {
        if self.policy == PolicyMode::Review && self.reviewer_token.is_none() {
            return Err(ConfigError::NoReviewerToken);
        }
        Ok(())
    }

    /// Every secret this configuration holds (the token, the keys, the
    /// webhook secret, the git token and passphrase, and the user information
    /// and query values of every URL), for scrubbing what providers answer.
    pub fn secrets(&self) -> crate::redact::Secrets {
        let mut secrets = crate::redact::Secrets::default();
        let values = [
            &self.api_token,
            &self.reviewer_token,
            &self.llm.api_key,
            &self.webhook_secret,
            &self.embed.as_ref().and_then(|e| e.api_key.clone()),
        ];
        for value in values.into_iter().flatten() {
            secrets.add(value);
        }
        secrets.add_url(&self.llm.base_url);
        if let Some(embed) = &self.embed {
            secrets.add_url(&embed.base_url);
        }
        if let Some(sync) = &self.sync {
            secrets.add_url(&sync.remote);
            match &sync.credentials {
                GitCredentials::Token { token, .. } => secrets.add(token),
                GitCredentials::SshKey {
                    passphrase: Some(passphrase),
                    ..
                } => secrets.add(passphrase),
                _ => {}
            }
        }
        secrets
    }

    /// A configuration with every default, serving `notes_root`.
    pub fn new(notes_root: impl Into<PathBuf>) -> Config {
        let notes_root = notes_root.into();
        Config {
            cache_dir: None,
            cache_dir_explicit: false,
            sync: None,
            webhook_secret: None,
            dirty_notes: DirtyNotes::Refuse,
            guards: Guards::default(),
            sandbox: SandboxLimits::default(),
            llm: LlmConfig::default(),
            embed: None,
            agent: AgentLimits::default(),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            mcp_max_result_bytes: 64 * 1024,
            notes_root,
            host: "127.0.0.1".to_string(),
            port: 4567,
            policy: PolicyMode::AllowAll,
            api_token: None,
            reviewer_token: None,
            proposals_max_pending: DEFAULT_PROPOSALS_MAX_PENDING,
            events: EventLimits::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_note_bytes: DEFAULT_MAX_NOTE_BYTES,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
            max_edits: DEFAULT_MAX_EDITS,
            max_changes: DEFAULT_MAX_CHANGES,
            max_move_notes: DEFAULT_MAX_MOVE_NOTES,
            git_identity: GitIdentity::default(),
        }
    }

    /// Fills in the settings that only come from the environment
    /// (policy, token, body limit, git identity).
    pub fn with_environment(
        mut self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let non_empty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if let Some(mode) = non_empty("MIRAI_POLICY_MODE").or_else(|| non_empty("MCP_POLICY_MODE"))
        {
            self.policy = PolicyMode::parse(&mode)?;
        }
        if let Some(mode) = non_empty("MIRAI_DIRTY_NOTES") {
            self.dirty_notes = DirtyNotes::parse(&mode)?;
        }
        if let Some(mode) = non_empty("MIRAI_GUARDS") {
            self.guards.mode = GuardMode::parse(&mode)?;
        }
        if let Some(raw) = non_empty("MIRAI_GUARD_MAX_DELETE_RATIO") {
            self.guards.max_delete_ratio = match raw.trim().parse::<f64>() {
                Ok(r) if r > 0.0 && r <= 1.0 => r,
                _ => {
                    return Err(ConfigError::Value {
                        name: "MIRAI_GUARD_MAX_DELETE_RATIO",
                        value: raw,
                        expected: "a share of a note's lines above 0 and at most 1, such as 0.5",
                    })
                }
            };
        }
        if let Some(raw) = non_empty("MIRAI_GUARD_PLACEHOLDERS") {
            self.guards.placeholders = match raw.trim().to_ascii_lowercase().as_str() {
                "on" => true,
                "off" => false,
                _ => {
                    return Err(ConfigError::Value {
                        name: "MIRAI_GUARD_PLACEHOLDERS",
                        value: raw,
                        expected: "on or off",
                    })
                }
            };
        }
        self.api_token = non_empty("MIRAI_API_TOKEN").map(|t| t.trim().to_string());
        self.reviewer_token = non_empty("MIRAI_REVIEWER_TOKEN").map(|t| t.trim().to_string());
        let positive =
            |name: &'static str, expected: &'static str| -> Result<Option<u64>, ConfigError> {
                let Some(raw) = non_empty(name) else {
                    return Ok(None);
                };
                match raw.trim().parse::<u64>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => Err(ConfigError::Value {
                        name,
                        value: raw,
                        expected,
                    }),
                }
            };
        let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        if let Some(n) = positive("MIRAI_MAX_BODY_BYTES", "a positive number of bytes")? {
            self.max_body_bytes = as_usize(n);
        }
        if let Some(n) = positive("MIRAI_MAX_NOTE_BYTES", "a positive number of bytes")? {
            self.max_note_bytes = as_usize(n);
        }
        if self.max_note_bytes < self.max_body_bytes {
            return Err(ConfigError::Value {
                name: "MIRAI_MAX_NOTE_BYTES",
                value: format!(
                    "{} (below MIRAI_MAX_BODY_BYTES, {})",
                    self.max_note_bytes, self.max_body_bytes
                ),
                expected:
                    "at least MIRAI_MAX_BODY_BYTES: a note must hold what one request may write",
            });
        }
        if let Some(n) = positive("MIRAI_BODY_TIMEOUT_MS", "a positive number of milliseconds")? {
            self.body_timeout_ms = n;
        }
        if let Some(n) = positive("MIRAI_GUARD_MIN_LINES", "a positive number of lines")? {
            self.guards.min_lines = as_usize(n);
        }
        if let Some(n) = positive("MIRAI_EDIT_MAX_EDITS", "a positive number of edits")? {
            self.max_edits = as_usize(n);
        }
        const CHANGES: &str = "a number of patches from 1 to 10000";
        if let Some(n) = positive("MIRAI_CHANGES_MAX_PATCHES", CHANGES)? {
            if n > MAX_CHANGES_LIMIT {
                return Err(ConfigError::Value {
                    name: "MIRAI_CHANGES_MAX_PATCHES",
                    value: n.to_string(),
                    expected: CHANGES,
                });
            }
            self.max_changes = as_usize(n);
        }
        if let Some(n) = positive(
            "MIRAI_PROPOSALS_MAX_PENDING",
            "a positive number of proposals",
        )? {
            self.proposals_max_pending = as_usize(n);
        }
        const BACKLOG: &str = "a number of events from 1 to 100000";
        if let Some(n) = positive("MIRAI_EVENTS_BACKLOG", BACKLOG)? {
            if n > MAX_EVENTS_BACKLOG {
                return Err(ConfigError::Value {
                    name: "MIRAI_EVENTS_BACKLOG",
                    value: n.to_string(),
                    expected: BACKLOG,
                });
            }
            self.events.backlog = as_usize(n);
        }
        if let Some(n) = positive("MIRAI_EVENTS_MAX_CLIENTS", "a positive number of streams")? {
            self.events.max_clients = as_usize(n);
        }
        if let Some(n) = positive(
            "MIRAI_MCP_MAX_SUBSCRIPTIONS",
            "a positive number of subscriptions",
        )? {
            self.events.mcp_max_subscriptions = as_usize(n);
        }
        if self.reviewer_token.is_some() && self.reviewer_token == self.api_token {
            return Err(ConfigError::Value {
                name: "MIRAI_REVIEWER_TOKEN",
                value: "the same value as MIRAI_API_TOKEN".to_string(),
                expected:
                    "a token of its own: whoever holds the API token must not be able to approve",
            });
        }
        const MOVES: &str = "a number of notes from 1 to 10000";
        if let Some(n) = positive("MIRAI_MOVE_MAX_NOTES", MOVES)? {
            if n > MAX_CHANGES_LIMIT {
                return Err(ConfigError::Value {
                    name: "MIRAI_MOVE_MAX_NOTES",
                    value: n.to_string(),
                    expected: MOVES,
                });
            }
            self.max_move_notes = as_usize(n);
        }
        if let Some(n) = positive("MIRAI_SANDBOX_MEMORY_MB", "a number of MiB from 16 to 4095")? {
            if !(16..4096).contains(&n) {
                return Err(ConfigError::Value {
                    name: "MIRAI_SANDBOX_MEMORY_MB",
                    value: n.to_string(),
                    expected: "a number of MiB from 16 to 4095",
                });
            }
            self.sandbox.memory_bytes = as_usize(n * 1024 * 1024);
        }
        if let Some(n) = positive(
            "MIRAI_SANDBOX_TIMEOUT_MS",
            "a positive number of milliseconds",
        )? {
            self.sandbox.timeout_ms = n;
        }
        if let Some(n) = positive("MIRAI_SANDBOX_FUEL", "a positive amount of wasm fuel")? {
            self.sandbox.fuel = n;
        }
        if let Some(n) = positive("MIRAI_SANDBOX_MAX_CALLS", "a positive number of calls")? {
            self.sandbox.max_calls = as_usize(n);
        }
        if let Some(n) = positive(
            "MIRAI_SANDBOX_MAX_OUTPUT_BYTES",
            "a positive number of bytes",
        )? {
            self.sandbox.max_output_bytes = as_usize(n);
        }
        if let Some(url) = non_empty("MIRAI_LLM_BASE_URL") {
            self.llm.base_url = url.trim().trim_end_matches('/').to_string();
        }
        if let Some(model) = non_empty("MIRAI_LLM_MODEL") {
            self.llm.model = model.trim().to_string();
        }
        self.llm.api_key = non_empty("MIRAI_LLM_API_KEY")
            .or_else(|| non_empty("OPENAI_API_KEY"))
            .map(|key| key.trim().to_string());
        if let Some(n) = positive("MIRAI_LLM_TIMEOUT_MS", "a positive number of milliseconds")? {
            self.llm.timeout_ms = n;
        }
        if let Some(raw) = non_empty("MIRAI_LLM_MAX_RETRIES") {
            self.llm.max_retries = match raw.trim().parse::<u32>() {
                Ok(n) if n <= 10 => n,
                _ => {
                    return Err(ConfigError::Value {
                        name: "MIRAI_LLM_MAX_RETRIES",
                        value: raw,
                        expected: "a number of retries from 0 to 10",
                    })
                }
            };
        }
        if let Some(n) = positive(
            "MIRAI_LLM_MAX_TOKENS",
            "a number of tokens from 64 to 32768",
        )? {
            if !(64..=32768).contains(&n) {
                return Err(ConfigError::Value {
                    name: "MIRAI_LLM_MAX_TOKENS",
                    value: n.to_string(),
                    expected: "a number of tokens from 64 to 32768",
                });
            }
            self.llm.max_tokens = n as u32;
        }
        self.embed = EmbedConfig::from_env(env)?;
        if let Some(n) = positive("MIRAI_AGENT_MAX_STEPS", "a number of steps from 1 to 32")? {
            if n > MAX_AGENT_STEPS as u64 {
                return Err(ConfigError::Value {
                    name: "MIRAI_AGENT_MAX_STEPS",
                    value: n.to_string(),
                    expected: "a number of steps from 1 to 32",
                });
            }
            self.agent.default_steps = as_usize(n);
        }
        if let Some(n) = positive(
            "MIRAI_AGENT_DEADLINE_MS",
            "a positive number of milliseconds",
        )? {
            self.agent.deadline_ms = n;
        }
        if let Some(n) = positive("MIRAI_MCP_MAX_RESULT_BYTES", "a positive number of bytes")? {
            self.mcp_max_result_bytes = as_usize(n);
        }
        let origins = match non_empty("MIRAI_ALLOWED_ORIGINS") {
            Some(origins) => Some(("MIRAI_ALLOWED_ORIGINS", origins)),
            None => {
                non_empty("MIRAI_MCP_ALLOWED_ORIGINS").map(|o| ("MIRAI_MCP_ALLOWED_ORIGINS", o))
            }
        };
        if let Some((name, origins)) = origins {
            self.allowed_origins =
                crate::origin::parse_origins(&origins).map_err(|entry| ConfigError::Value {
                    name,
                    value: entry,
                    expected: "comma-separated origins such as https://notes.example or http://host:8080, without paths or wildcards",
                })?;
        }
        if let Some(hosts) = non_empty("MIRAI_ALLOWED_HOSTS") {
            self.allowed_hosts =
                crate::origin::parse_hosts(&hosts).map_err(|entry| ConfigError::Value {
                    name: "MIRAI_ALLOWED_HOSTS",
                    value: entry,
                    expected: "comma-separated host names or addresses such as notes.example or 10.0.0.5, without schemes or paths",
                })?;
        }
        if let Some(dir) = non_empty("MIRAI_CACHE_DIR") {
            self.cache_dir = Some(PathBuf::from(dir.trim()));
            self.cache_dir_explicit = true;
        } else if let Some(base) = non_empty("XDG_CACHE_HOME") {
            self.cache_dir = Some(PathBuf::from(base.trim()).join("mirai"));
        } else if let Some(home) = non_empty("HOME") {
            self.cache_dir = Some(PathBuf::from(home.trim()).join(".cache").join("mirai"));
        }
        if let Some(name) = non_empty("MIRAI_GIT_AUTHOR_NAME") {
            self.git_identity.name = name.trim().to_string();
        }
        if let Some(email) = non_empty("MIRAI_GIT_AUTHOR_EMAIL") {
            self.git_identity.email = email.trim().to_string();
        }
        self.sync = SyncConfig::from_environment(&non_empty)?;
        self.webhook_secret = non_empty("MIRAI_WEBHOOK_SECRET");
        if self.webhook_secret.is_some() && self.sync.is_none() {
            return Err(ConfigError::Sync(
                "MIRAI_WEBHOOK_SECRET is set but MIRAI_GIT_REMOTE is not: a push webhook has \
                 nothing to pull from; set MIRAI_GIT_REMOTE or unset the secret"
                    .to_string(),
            ));
        }
        Ok(self)
    }

    /// The module cache to use, kept out of the notes root (DESIGN 8.2) once
    /// the root exists: a `MIRAI_CACHE_DIR` inside it is an error; a default one
    /// inside it (`NOTES_ROOT=$HOME`, say) is not used (`None`).
    pub fn usable_cache_dir(&self) -> Result<Option<PathBuf>, ConfigError> {
        let Some(cache) = &self.cache_dir else {
            return Ok(None);
        };
        let root = self
            .notes_root
            .canonicalize()
            .unwrap_or_else(|_| real_path_of(&self.notes_root));
        if !real_path_of(cache).starts_with(&root) {
            return Ok(Some(cache.clone()));
        }
        if self.cache_dir_explicit {
            return Err(ConfigError::CacheInsideNotes(cache.display().to_string()));
        }
        Ok(None)
    }
}

/// Seconds between pulls when `MIRAI_SYNC_INTERVAL` is not set.
pub const DEFAULT_SYNC_INTERVAL_SECS: u64 = 60;

/// The username a token is sent with when `MIRAI_GIT_USERNAME` is not set
/// (what GitHub and Gitea accept with any token).
pub const DEFAULT_GIT_USERNAME: &str = "x-access-token";

/// How a remote URL is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Https,
    /// Plain `http://`; `loopback` when the host is this machine.
    Http {
        loopback: bool,
    },
    /// `ssh://` or scp-like `user@host:path`.
    Ssh,
    /// A path on this machine or `file://`.
    Local,
}

impl Transport {
    /// What `url` is, or why it is not a remote mirai can use.
    pub fn of(url: &str) -> Result<Transport, String> {
        let with_host = |url: &str| -> Result<url::Url, String> {
            let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
            match parsed.host_str() {
                Some(host) if !host.is_empty() => Ok(parsed),
                _ => Err("the URL names no host".to_string()),
            }
        };
        if let Some((scheme, _)) = url.split_once("://") {
            return match scheme.to_ascii_lowercase().as_str() {
                "https" => with_host(url).map(|_| Transport::Https),
                "http" => {
                    let parsed = with_host(url)?;
                    let loopback = parsed
                        .host()
                        .is_some_and(|host| crate::origin::is_loopback(&host.to_owned()));
                    Ok(Transport::Http { loopback })
                }
                "ssh" => with_host(url).map(|_| Transport::Ssh),
                "file" => Ok(Transport::Local),
                other => Err(format!("the scheme {other}:// is not supported")),
            };
        }
        // git's rule: a colon before any slash makes `[user@]host:path` an ssh address.
        match (url.find(':'), url.find('/')) {
            (Some(colon), slash) if colon > 0 && slash.is_none_or(|slash| colon < slash) => {
                Ok(Transport::Ssh)
            }
            _ => Ok(Transport::Local),
        }
    }
}

/// What mirai proves itself to the remote with. Its `Debug` form never shows a secret.
#[derive(Clone, PartialEq, Eq)]
pub enum GitCredentials {
    /// Nothing of mirai's own (a local path, or a URL that carries its own user information).
    None,
    /// HTTPS basic auth: `MIRAI_GIT_USERNAME` (default `x-access-token`) and `MIRAI_GIT_TOKEN`.
    Token { username: String, token: String },
    /// An SSH private key file (`MIRAI_GIT_SSH_KEY`, `MIRAI_GIT_SSH_KEY_PASSPHRASE`); the
    /// server's host key must be listed in `known_hosts` (`MIRAI_GIT_SSH_KNOWN_HOSTS`).
    SshKey {
        key: PathBuf,
        passphrase: Option<String>,
        known_hosts: PathBuf,
    },
}

impl std::fmt::Debug for GitCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitCredentials::None => f.write_str("None"),
            GitCredentials::Token { username, token } => f
                .debug_struct("Token")
                .field("username", username)
                .field("token", &secret(&Some(token.clone())))
                .finish(),
            GitCredentials::SshKey {
                key,
                passphrase,
                known_hosts,
            } => f
                .debug_struct("SshKey")
                .field("key", key)
                .field("passphrase", &secret(passphrase))
                .field("known_hosts", known_hosts)
                .finish(),
        }
    }
}

/// The git remote mirai follows (`MIRAI_GIT_REMOTE` and the settings around it).
#[derive(Clone, PartialEq, Eq)]
pub struct SyncConfig {
    /// The URL as configured: may carry user information, so it is shown only
    /// through [`SyncConfig::shown_remote`].
    pub remote: String,
    pub transport: Transport,
    /// The branch to follow (`MIRAI_GIT_BRANCH`); `None`: the current branch.
    pub branch: Option<String>,
    pub credentials: GitCredentials,
    /// Seconds between pulls (`MIRAI_SYNC_INTERVAL`); 0: only on demand.
    pub interval_secs: u64,
}

impl std::fmt::Debug for SyncConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured, so a new field cannot be added without deciding how it is shown.
        let SyncConfig {
            remote: _,
            transport,
            branch,
            credentials,
            interval_secs,
        } = self;
        f.debug_struct("SyncConfig")
            .field("remote", &self.shown_remote())
            .field("transport", transport)
            .field("branch", branch)
            .field("credentials", credentials)
            .field("interval_secs", interval_secs)
            .finish()
    }
}

impl SyncConfig {
    /// The remote's URL without user information or query (what logs, status and `/config` show).
    pub fn shown_remote(&self) -> String {
        crate::redact::urls(&self.remote).into_owned()
    }

    /// Reads `MIRAI_GIT_REMOTE` and the settings that go with it; `None` when
    /// no remote is set (and then none of them may be).
    fn from_environment(
        non_empty: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<SyncConfig>, ConfigError> {
        let bad = |message: String| ConfigError::Sync(message);
        let Some(remote) = non_empty("MIRAI_GIT_REMOTE").map(|r| r.trim().to_string()) else {
            for name in [
                "MIRAI_GIT_TOKEN",
                "MIRAI_GIT_SSH_KEY",
                "MIRAI_GIT_BRANCH",
                "MIRAI_SYNC_INTERVAL",
            ] {
                if non_empty(name).is_some() {
                    return Err(bad(format!(
                        "{name} is set but MIRAI_GIT_REMOTE is not; set the remote's URL or unset {name}"
                    )));
                }
            }
            return Ok(None);
        };
        let transport = Transport::of(&remote).map_err(|why| {
            bad(format!(
                "invalid MIRAI_GIT_REMOTE: {} ({why}; expected https://, http://, ssh://, \
                 user@host:path, file:// or a local path)",
                crate::redact::urls(&remote)
            ))
        })?;
        let shown = crate::redact::urls(&remote).into_owned();
        let url_has_secret = shown != remote;
        let token = non_empty("MIRAI_GIT_TOKEN").map(|t| t.trim().to_string());
        let key = non_empty("MIRAI_GIT_SSH_KEY").map(|k| PathBuf::from(k.trim()));
        if token.is_some() && key.is_some() {
            return Err(bad(
                "MIRAI_GIT_TOKEN and MIRAI_GIT_SSH_KEY are both set; set the one the remote's URL uses (https: the token, ssh: the key)".to_string(),
            ));
        }
        if let Transport::Http { loopback: false } = transport {
            if token.is_some() || url_has_secret {
                return Err(bad(format!(
                    "refusing to send git credentials over plain http:// to {shown}: use https:// \
                     (plain http is allowed only to a loopback host)"
                )));
            }
        }
        let credentials = match (token, key) {
            (Some(token), None) => {
                if !matches!(transport, Transport::Https | Transport::Http { .. }) {
                    return Err(bad(format!(
                        "MIRAI_GIT_TOKEN is for https:// remotes, but MIRAI_GIT_REMOTE is {shown}; \
                         use MIRAI_GIT_SSH_KEY for ssh, or an https:// URL"
                    )));
                }
                let username = non_empty("MIRAI_GIT_USERNAME")
                    .map(|u| u.trim().to_string())
                    .unwrap_or_else(|| DEFAULT_GIT_USERNAME.to_string());
                GitCredentials::Token { username, token }
            }
            (None, Some(key)) => {
                if transport != Transport::Ssh {
                    return Err(bad(format!(
                        "MIRAI_GIT_SSH_KEY is for ssh remotes, but MIRAI_GIT_REMOTE is {shown}; \
                         use MIRAI_GIT_TOKEN for https, or an ssh URL"
                    )));
                }
                readable_file("MIRAI_GIT_SSH_KEY", &key).map_err(bad)?;
                let Some(known_hosts) =
                    non_empty("MIRAI_GIT_SSH_KNOWN_HOSTS").map(|k| PathBuf::from(k.trim()))
                else {
                    return Err(bad(
                        "MIRAI_GIT_SSH_KNOWN_HOSTS is required with an ssh remote: mirai checks \
                         the server's host key; point it at a known_hosts file (ssh-keyscan HOST > known_hosts)"
                            .to_string(),
                    ));
                };
                readable_file("MIRAI_GIT_SSH_KNOWN_HOSTS", &known_hosts).map_err(bad)?;
                GitCredentials::SshKey {
                    key,
                    passphrase: non_empty("MIRAI_GIT_SSH_KEY_PASSPHRASE"),
                    known_hosts,
                }
            }
            _ => {
                if transport == Transport::Ssh {
                    return Err(bad(format!(
                        "MIRAI_GIT_REMOTE {shown} is an ssh remote: set MIRAI_GIT_SSH_KEY (a private \
                         key file) and MIRAI_GIT_SSH_KNOWN_HOSTS"
                    )));
                }
                GitCredentials::None
            }
        };
        let branch = match non_empty("MIRAI_GIT_BRANCH").map(|b| b.trim().to_string()) {
            Some(branch) if !git2::Branch::name_is_valid(&branch).unwrap_or(false) => {
                return Err(ConfigError::Value {
                    name: "MIRAI_GIT_BRANCH",
                    value: branch,
                    expected: "a valid git branch name such as main",
                })
            }
            branch => branch,
        };
        let interval_secs = match non_empty("MIRAI_SYNC_INTERVAL") {
            None => DEFAULT_SYNC_INTERVAL_SECS,
            Some(raw) => raw.trim().parse::<u64>().map_err(|_| ConfigError::Value {
                name: "MIRAI_SYNC_INTERVAL",
                value: raw,
                expected: "a number of seconds (0: pull only on demand)",
            })?,
        };
        Ok(Some(SyncConfig {
            remote,
            transport,
            branch,
            credentials,
            interval_secs,
        }))
    }
}

/// Start-up's check that a file a setting names can be read.
fn readable_file(name: &str, path: &std::path::Path) -> Result<(), String> {
    match std::fs::File::open(path).and_then(|f| f.metadata()) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(format!("{name} {} is not a file", path.display())),
        Err(e) => Err(format!("{name} {} cannot be read: {e}", path.display())),
    }
}

/// Reads the process environment; the one place that does.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn policy_mode_reads_either_variable_and_prefers_mirai() {
        let c = Config::new("n")
            .with_environment(&env_of(&[("MCP_POLICY_MODE", "read_only")]))
            .unwrap();
        assert_eq!(c.policy, PolicyMode::ReadOnly);
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_POLICY_MODE", "allow_all"),
                ("MCP_POLICY_MODE", "read_only"),
            ]))
            .unwrap();
        assert_eq!(c.policy, PolicyMode::AllowAll);
    }

    #[test]
    fn debug_shows_that_secrets_are_set_but_never_their_values() {
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_API_TOKEN", "tok-s3cret"),
                ("MIRAI_LLM_API_KEY", "sk-s3cret"),
                (
                    "MIRAI_LLM_BASE_URL",
                    "https://me:pw-s3cret@llm.example/v1?api-key=q-s3cret",
                ),
            ]))
            .unwrap();
        assert_eq!(c.api_token.as_deref(), Some("tok-s3cret"));
        for shown in [format!("{c:?}"), format!("{c:#?}"), format!("{:?}", c.llm)] {
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(shown.contains("\"<set>\""), "{shown}");
            assert!(shown.contains("llm.example/v1"), "{shown}");
        }
        assert!(format!("{c:?}").contains("api_token: Some(\"<set>\")"));
        assert!(format!("{:?}", c.llm).contains("api_key: Some(\"<set>\")"));
        assert!(format!("{:?}", Config::new("n")).contains("api_token: None"));
    }

    #[test]
    fn embedding_settings() {
        assert_eq!(
            Config::new("n")
                .with_environment(&env_of(&[]))
                .unwrap()
                .embed,
            None
        );
        let c = Config::new("n")
            .with_environment(&env_of(&[
                (
                    "MIRAI_EMBED_BASE_URL",
                    "https://u:pw-s3cret@embed.example/v1/",
                ),
                ("MIRAI_EMBED_MODEL", "e5-small"),
                ("MIRAI_EMBED_API_KEY", "ek-s3cret"),
                ("MIRAI_EMBED_BATCH", "8"),
                ("MIRAI_EMBED_INPUT_TYPE", "ON"),
                ("MIRAI_EMBED_QUERY_PREFIX", "query: "),
                ("MIRAI_EMBED_QUERY_TIMEOUT_MS", "250"),
            ]))
            .unwrap();
        let e = c.embed.clone().unwrap();
        assert_eq!(e.base_url, "https://u:pw-s3cret@embed.example/v1");
        assert_eq!(
            (e.model.as_str(), e.batch, e.input_type),
            ("e5-small", 8, true)
        );
        assert_eq!(
            (e.query_prefix.as_str(), e.passage_prefix.as_str()),
            ("query: ", "")
        );
        assert_eq!((e.query_timeout_ms, e.timeout_ms), (250, 60_000));
        assert_eq!(e.api_key.as_deref(), Some("ek-s3cret"));
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("embed.example/v1"),
            "{shown}"
        );
        for (name, value) in [
            ("MIRAI_EMBED_INPUT_TYPE", "yes"),
            ("MIRAI_EMBED_BATCH", "0"),
            ("MIRAI_EMBED_QUERY_TIMEOUT_MS", "soon"),
        ] {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
                ("MIRAI_EMBED_BASE_URL", "http://127.0.0.1:1/v1"),
                (name, value),
            ]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[test]
    fn review_mode_reads_its_tokens_and_bound_and_serves_only_with_a_reviewer_token() {
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_POLICY_MODE", "Review"),
                ("MIRAI_REVIEWER_TOKEN", " rev-s3cret "),
                ("MIRAI_PROPOSALS_MAX_PENDING", "7"),
            ]))
            .unwrap();
        assert_eq!(c.policy, PolicyMode::Review);
        assert_eq!(c.reviewer_token.as_deref(), Some("rev-s3cret"));
        assert_eq!(c.proposals_max_pending, 7);
        assert!(c.check_serving().is_ok());
        assert!(format!("{c:?}").contains("reviewer_token: Some(\"<set>\")"));
        assert!(!format!("{c:?}").contains("rev-s3cret"));
        assert_eq!(Config::new("n").proposals_max_pending, 1000);

        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_POLICY_MODE", "review")]))
            .unwrap();
        let err = c.check_serving().unwrap_err().to_string();
        assert!(
            err.starts_with("MIRAI_POLICY_MODE=review needs MIRAI_REVIEWER_TOKEN"),
            "{err}"
        );
        for bad in ["0", "x"] {
            let env =
                move |name: &str| (name == "MIRAI_PROPOSALS_MAX_PENDING").then(|| bad.to_string());
            assert!(Config::new("n").with_environment(&env).is_err());
        }
        let same = Config::new("n").with_environment(&env_of(&[
            ("MIRAI_API_TOKEN", "t"),
            ("MIRAI_REVIEWER_TOKEN", "t"),
        ]));
        assert!(same
            .unwrap_err()
            .to_string()
            .contains("MIRAI_REVIEWER_TOKEN"));
    }

    #[test]
    fn unknown_policy_mode_is_refused_with_its_value() {
        let err = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_POLICY_MODE", "yolo")]))
            .unwrap_err();
        assert!(
            err.to_string().starts_with("invalid policy mode: yolo"),
            "{err}"
        );
    }

    #[test]
    fn body_limit_must_be_a_positive_number() {
        for bad in ["0", "-1", "1MB", "1.5"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_MAX_BODY_BYTES", bad)]));
            assert!(
                Config::new("n").with_environment(&env_of(pairs)).is_err(),
                "{bad}"
            );
        }
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_BODY_BYTES", "2048")]))
            .unwrap();
        assert_eq!(c.max_body_bytes, 2048);
    }

    #[test]
    fn the_note_limit_is_8_mib_and_never_below_the_body_limit() {
        assert_eq!(Config::new("n").max_note_bytes, 8 * 1024 * 1024);
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_NOTE_BYTES", "2000000")]))
            .unwrap();
        assert_eq!(c.max_note_bytes, 2_000_000);
        let err = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_NOTE_BYTES", "1000")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("MIRAI_MAX_NOTE_BYTES") && err.contains("MIRAI_MAX_BODY_BYTES"),
            "{err}"
        );
        let err = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MAX_BODY_BYTES", "9000000")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("below MIRAI_MAX_BODY_BYTES"), "{err}");
    }

    #[test]
    fn changes_max_patches_is_a_number_from_1_to_10000() {
        assert_eq!(Config::new("n").max_changes, 50);
        for bad in ["0", "10001", "many"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_CHANGES_MAX_PATCHES", bad)]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            assert!(
                err.to_string().contains("MIRAI_CHANGES_MAX_PATCHES"),
                "{bad}: {err}"
            );
        }
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_CHANGES_MAX_PATCHES", "10000")]))
            .unwrap();
        assert_eq!(c.max_changes, 10_000);
        assert_eq!(c.max_move_notes, 1000);
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_MOVE_MAX_NOTES", "3")]))
            .unwrap();
        assert_eq!(c.max_move_notes, 3);
        for bad in ["0", "10001"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_MOVE_MAX_NOTES", bad)]));
            let err = Config::new("n").with_environment(&env_of(pairs));
            assert!(err.is_err(), "{bad}");
        }
    }

    #[test]
    fn the_llm_key_comes_from_either_variable_and_is_never_printed() {
        let c = Config::new("n")
            .with_environment(&env_of(&[("OPENAI_API_KEY", "sk-secret")]))
            .unwrap();
        assert_eq!(c.llm.api_key.as_deref(), Some("sk-secret"));
        assert!(c.llm.is_configured());
        assert!(!format!("{c:?}").contains("sk-secret"));
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_LLM_API_KEY", "mine"),
                ("OPENAI_API_KEY", "theirs"),
            ]))
            .unwrap();
        assert_eq!(c.llm.api_key.as_deref(), Some("mine"));
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert!(!c.llm.is_configured());
        let c = Config::new("n")
            .with_environment(&env_of(&[(
                "MIRAI_LLM_BASE_URL",
                "http://127.0.0.1:11434/v1/",
            )]))
            .unwrap();
        assert_eq!(c.llm.base_url, "http://127.0.0.1:11434/v1");
        assert!(c.llm.is_configured(), "a local server needs no key");
    }

    #[test]
    fn agent_steps_are_bounded() {
        for bad in ["0", "33", "many"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_AGENT_MAX_STEPS", bad)]));
            assert!(
                Config::new("n").with_environment(&env_of(pairs)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn llm_answers_are_bounded_from_64_to_32768_tokens() {
        assert_eq!(Config::new("n").llm.max_tokens, 1024);
        for bad in ["0", "63", "32769", "lots"] {
            let pairs: &'static [(&str, &str)] =
                Box::leak(Box::new([("MIRAI_LLM_MAX_TOKENS", bad)]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            assert!(err.to_string().contains("MIRAI_LLM_MAX_TOKENS"), "{bad}");
        }
        let config = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_LLM_MAX_TOKENS", "512")]))
            .unwrap();
        assert_eq!(config.llm.max_tokens, 512);
    }

    #[test]
    fn allowed_origins_and_hosts_are_normalized_and_a_bad_entry_named() {
        let c = Config::new("n")
            .with_environment(&env_of(&[
                (
                    "MIRAI_ALLOWED_ORIGINS",
                    "https://Notes.Example/, http://a.example:8080",
                ),
                ("MIRAI_MCP_ALLOWED_ORIGINS", "http://ignored.example"),
                ("MIRAI_ALLOWED_HOSTS", "Notes.Example:443,10.0.0.5"),
            ]))
            .unwrap();
        assert_eq!(
            c.allowed_origins,
            ["https://notes.example", "http://a.example:8080"]
        );
        assert_eq!(c.allowed_hosts, ["notes.example", "10.0.0.5"]);
        let c = Config::new("n")
            .with_environment(&env_of(&[(
                "MIRAI_MCP_ALLOWED_ORIGINS",
                "http://old.example",
            )]))
            .unwrap();
        assert_eq!(
            c.allowed_origins,
            ["http://old.example"],
            "the old name is an alias"
        );
        for (name, bad, entry) in [
            ("MIRAI_ALLOWED_ORIGINS", "https://ok.example,*", "*"),
            (
                "MIRAI_ALLOWED_ORIGINS",
                "https://ok.example/app",
                "https://ok.example/app",
            ),
            ("MIRAI_MCP_ALLOWED_ORIGINS", "null", "null"),
            (
                "MIRAI_ALLOWED_HOSTS",
                "ok.example,http://x.example",
                "http://x.example",
            ),
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(name, bad)]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            let line = err.to_string();
            assert!(
                line.starts_with(&format!("invalid {name}: {entry} (")),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn body_timeout_defaults_to_ten_seconds_and_must_be_positive() {
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert_eq!(c.body_timeout_ms, 10_000);
        let c = Config::new("n")
            .with_environment(&env_of(&[("MIRAI_BODY_TIMEOUT_MS", "2500")]))
            .unwrap();
        assert_eq!(c.body_timeout_ms, 2500);
        assert!(Config::new("n")
            .with_environment(&env_of(&[("MIRAI_BODY_TIMEOUT_MS", "0")]))
            .is_err());
    }

    #[test]
    fn credentials_in_the_model_url_never_reach_debug_output() {
        let c = Config::new("n")
            .with_environment(&env_of(&[(
                "MIRAI_LLM_BASE_URL",
                "http://alice:hunter2@llm.internal:8000/v1",
            )]))
            .unwrap();
        assert_eq!(c.llm.base_url, "http://alice:hunter2@llm.internal:8000/v1");
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("alice"),
            "{shown}"
        );
        assert!(shown.contains("http://***@llm.internal:8000/v1"), "{shown}");
    }

    #[test]
    fn guards_default_to_models_and_refuse_other_values() {
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert_eq!(c.guards, Guards::default());
        assert_eq!(c.guards.mode, GuardMode::Models);
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GUARDS", " ALL "),
                ("MIRAI_GUARD_MAX_DELETE_RATIO", "0.8"),
                ("MIRAI_GUARD_MIN_LINES", "5"),
                ("MIRAI_GUARD_PLACEHOLDERS", "off"),
            ]))
            .unwrap();
        assert_eq!(
            c.guards,
            Guards {
                mode: GuardMode::All,
                max_delete_ratio: 0.8,
                min_lines: 5,
                placeholders: false,
            }
        );
        for (name, bad) in [
            ("MIRAI_GUARDS", "some"),
            ("MIRAI_GUARD_MAX_DELETE_RATIO", "0"),
            ("MIRAI_GUARD_MAX_DELETE_RATIO", "1.5"),
            ("MIRAI_GUARD_MAX_DELETE_RATIO", "half"),
            ("MIRAI_GUARD_MIN_LINES", "0"),
            ("MIRAI_GUARD_PLACEHOLDERS", "no"),
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(name, bad)]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid {name}: {bad} (")),
                "{err}"
            );
        }
    }

    #[test]
    fn git_identity_defaults_and_overrides() {
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert_eq!(c.git_identity, GitIdentity::default());
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GIT_AUTHOR_NAME", "Ada"),
                ("MIRAI_GIT_AUTHOR_EMAIL", "ada@example.org"),
            ]))
            .unwrap();
        assert_eq!(c.git_identity.name, "Ada");
        assert_eq!(c.git_identity.email, "ada@example.org");
    }

    #[test]
    fn no_remote_means_no_sync_and_its_settings_alone_are_refused() {
        let c = Config::new("n").with_environment(&env_of(&[])).unwrap();
        assert_eq!(c.sync, None);
        for name in [
            "MIRAI_GIT_TOKEN",
            "MIRAI_WEBHOOK_SECRET",
            "MIRAI_SYNC_INTERVAL",
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(name, "5")]));
            let err = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err();
            let line = err.to_string();
            assert!(
                line.contains(name) && line.contains("MIRAI_GIT_REMOTE"),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn remotes_are_classified_as_git_reads_them() {
        for (url, transport) in [
            ("https://github.com/me/notes.git", Transport::Https),
            (
                "http://127.0.0.1:8080/notes.git",
                Transport::Http { loopback: true },
            ),
            ("http://[::1]/n.git", Transport::Http { loopback: true }),
            ("http://git.lan/n.git", Transport::Http { loopback: false }),
            ("ssh://git@host:22/me/notes.git", Transport::Ssh),
            ("git@github.com:me/notes.git", Transport::Ssh),
            ("/srv/notes.git", Transport::Local),
            ("../notes.git", Transport::Local),
            ("file:///srv/notes.git", Transport::Local),
            ("dir/with:colon", Transport::Local),
        ] {
            assert_eq!(Transport::of(url), Ok(transport), "{url}");
        }
        assert!(Transport::of("ftp://host/x").is_err());
        assert!(Transport::of("https://").is_err());
    }

    #[test]
    fn sync_settings_are_read_with_defaults() {
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GIT_REMOTE", "https://github.com/me/notes.git"),
                ("MIRAI_GIT_TOKEN", "ghp-s3cret"),
                ("MIRAI_WEBHOOK_SECRET", "hook-s3cret"),
            ]))
            .unwrap();
        let sync = c.sync.clone().unwrap();
        assert_eq!(sync.interval_secs, 60);
        assert_eq!(sync.branch, None);
        assert_eq!(
            sync.credentials,
            GitCredentials::Token {
                username: "x-access-token".into(),
                token: "ghp-s3cret".into()
            }
        );
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("github.com/me/notes.git"), "{shown}");
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GIT_REMOTE", "/srv/notes.git"),
                ("MIRAI_GIT_BRANCH", "notes"),
                ("MIRAI_SYNC_INTERVAL", "0"),
            ]))
            .unwrap();
        let sync = c.sync.unwrap();
        assert_eq!(
            (sync.interval_secs, sync.branch.as_deref()),
            (0, Some("notes"))
        );
        assert_eq!(sync.credentials, GitCredentials::None);
    }

    #[test]
    fn bad_sync_settings_stop_start_up_with_one_line_and_no_secret() {
        for (pairs, expect) in [
            (
                &[
                    ("MIRAI_GIT_REMOTE", "http://git.lan/n.git"),
                    ("MIRAI_GIT_TOKEN", "t-s3cret"),
                ][..],
                "plain http://",
            ),
            (
                &[("MIRAI_GIT_REMOTE", "http://me:pw-s3cret@git.lan/n.git")][..],
                "plain http://",
            ),
            (&[("MIRAI_GIT_REMOTE", "gopher://x/y")][..], "gopher"),
            (
                &[("MIRAI_GIT_REMOTE", "git@host:n.git")][..],
                "MIRAI_GIT_SSH_KEY",
            ),
            (
                &[
                    ("MIRAI_GIT_REMOTE", "git@host:n.git"),
                    ("MIRAI_GIT_TOKEN", "t-s3cret"),
                ][..],
                "MIRAI_GIT_TOKEN is for https",
            ),
            (
                &[
                    ("MIRAI_GIT_REMOTE", "git@host:n.git"),
                    ("MIRAI_GIT_SSH_KEY", "/nonexistent/key"),
                ][..],
                "cannot be read",
            ),
            (
                &[
                    ("MIRAI_GIT_REMOTE", "/srv/n.git"),
                    ("MIRAI_GIT_BRANCH", "a..b"),
                ][..],
                "MIRAI_GIT_BRANCH",
            ),
            (
                &[
                    ("MIRAI_GIT_REMOTE", "/srv/n.git"),
                    ("MIRAI_SYNC_INTERVAL", "-1"),
                ][..],
                "MIRAI_SYNC_INTERVAL",
            ),
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(pairs.to_vec().into_boxed_slice());
            let line = Config::new("n")
                .with_environment(&env_of(pairs))
                .unwrap_err()
                .to_string();
            assert!(line.contains(expect), "{line}");
            assert!(!line.contains("s3cret") && !line.contains('\n'), "{line}");
        }
        // A token over plain http to this machine is fine (tests, a sidecar forge).
        let c = Config::new("n")
            .with_environment(&env_of(&[
                ("MIRAI_GIT_REMOTE", "http://localhost:3000/n.git"),
                ("MIRAI_GIT_TOKEN", "t"),
                ("MIRAI_GIT_USERNAME", "ada"),
            ]))
            .unwrap();
        assert!(matches!(
            c.sync.unwrap().credentials,
            GitCredentials::Token { username, .. } if username == "ada"
        ));
    }

    #[test]
    fn an_ssh_remote_needs_a_key_and_known_hosts() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("id");
        let hosts = dir.path().join("known_hosts");
        std::fs::write(&key, "k").unwrap();
        std::fs::write(&hosts, "h").unwrap();
        let (key, hosts) = (key.display().to_string(), hosts.display().to_string());
        let env = |known: bool| {
            let (key, hosts) = (key.clone(), hosts.clone());
            move |name: &str| match name {
                "MIRAI_GIT_REMOTE" => Some("ssh://git@host/n.git".to_string()),
                "MIRAI_GIT_SSH_KEY" => Some(key.clone()),
                "MIRAI_GIT_SSH_KEY_PASSPHRASE" => Some("pass-s3cret".to_string()),
                "MIRAI_GIT_SSH_KNOWN_HOSTS" if known => Some(hosts.clone()),
                _ => None,
            }
        };
        let err = Config::new("n").with_environment(&env(false)).unwrap_err();
        assert!(
            err.to_string().contains("MIRAI_GIT_SSH_KNOWN_HOSTS"),
            "{err}"
        );
        let c = Config::new("n").with_environment(&env(true)).unwrap();
        assert!(matches!(
            c.sync.as_ref().unwrap().credentials,
            GitCredentials::SshKey { .. }
        ));
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
