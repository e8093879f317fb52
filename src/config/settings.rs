//! [`Config`]: every setting's value and default, its `Debug` form (which
//! never shows a secret), and the parts each area is built from.

use std::path::PathBuf;

use crate::agent::{AgentLimits, LlmConfig};
use crate::embed::EmbedConfig;
use crate::notes::{DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_NOTE_BYTES};
use crate::oauth::OAuthSettings;
use crate::ops::{DirtyNotes, Guards, PolicyMode};
use crate::redact::presence;
use crate::repo::GitIdentity;
use crate::sandbox::SandboxLimits;
use crate::sync::{GitCredentials, SyncConfig};

/// Default cap on request bodies (`MIRAI_MAX_BODY_BYTES`), and so on a note's content.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

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

/// Pending proposals allowed at once by default (`MIRAI_PROPOSALS_MAX_PENDING`).
pub const DEFAULT_PROPOSALS_MAX_PENDING: usize = 1000;

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
    /// `MIRAI_CALLERS_FILE`: the named callers, checked when read.
    pub callers_file: Option<PathBuf>,
    /// Most pending proposals at once (`MIRAI_PROPOSALS_MAX_PENDING`, default 1000).
    pub proposals_max_pending: usize,
    /// The change stream's limits (`GET /events`, MCP subscriptions).
    pub events: crate::events::EventLimits,
    pub max_body_bytes: usize,
    /// The largest note mirai reads, indexes or writes (`MIRAI_MAX_NOTE_BYTES`);
    /// never below `max_body_bytes`.
    pub max_note_bytes: usize,
    /// The largest file a pull writes into the working tree
    /// (`MIRAI_MAX_FILE_BYTES`); never below `max_note_bytes`.
    pub max_file_bytes: usize,
    /// Whether `files.write` takes any extension, not only the allow-list's
    /// (`MIRAI_FILES_ANY_TYPE`, default off).
    pub files_any_type: bool,
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
    /// mirai as an OAuth resource server (`MIRAI_OAUTH_*`, `MIRAI_PUBLIC_URL`);
    /// `None`: access tokens are not taken.
    pub oauth: Option<OAuthSettings>,
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
            callers_file,
            proposals_max_pending,
            events,
            max_body_bytes,
            max_note_bytes,
            max_file_bytes,
            files_any_type,
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
            oauth,
        } = self;
        f.debug_struct("Config")
            .field("notes_root", notes_root)
            .field("host", host)
            .field("port", port)
            .field("policy", policy)
            .field("api_token", &presence(api_token))
            .field("reviewer_token", &presence(reviewer_token))
            .field("callers_file", callers_file)
            .field("proposals_max_pending", proposals_max_pending)
            .field("events", events)
            .field("max_body_bytes", max_body_bytes)
            .field("max_note_bytes", max_note_bytes)
            .field("max_file_bytes", max_file_bytes)
            .field("files_any_type", files_any_type)
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
            .field("webhook_secret", &presence(webhook_secret))
            .field("oauth", oauth)
            .finish()
    }
}

impl Config {
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
            oauth: None,
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
            callers_file: None,
            proposals_max_pending: DEFAULT_PROPOSALS_MAX_PENDING,
            events: crate::events::EventLimits::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_note_bytes: DEFAULT_MAX_NOTE_BYTES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            files_any_type: false,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
            max_edits: DEFAULT_MAX_EDITS,
            max_changes: DEFAULT_MAX_CHANGES,
            max_move_notes: DEFAULT_MAX_MOVE_NOTES,
            git_identity: GitIdentity::default(),
        }
    }

    /// The settings the rows honour ([`crate::ops::Context::new`]).
    pub fn ops_settings(&self) -> crate::ops::Settings {
        crate::ops::Settings {
            policy: self.policy,
            max_body_bytes: self.max_body_bytes,
            max_note_bytes: self.max_note_bytes,
            max_file_bytes: self.max_file_bytes,
            files_any_type: self.files_any_type,
            max_edits: self.max_edits,
            max_changes: self.max_changes,
            max_move_notes: self.max_move_notes,
            proposals_max_pending: self.proposals_max_pending,
            dirty_notes: self.dirty_notes,
            guards: self.guards,
            git_identity: self.git_identity.clone(),
        }
    }
}
