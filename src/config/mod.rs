//! Configuration: read from flags and the environment once, at start-up, and
//! validated there, so the rest of the program only ever sees good values.
//!
//! [`Config`] is the one entry: [`Config::with_environment`] calls each area's
//! reader in turn, and each reader (one module per area) reads and validates
//! its own settings. The settings' types live with the areas that use them
//! (`ops`, `sandbox`, `agent`, `embed`, `sync`, `repo`); this module depends
//! on them, never the other way round, and re-exports them for the entry
//! points. A new setting is a field of `Config` in `settings.rs` (with its
//! default in `new` and its line in `Debug`) and a few lines in its area's
//! reader (`server.rs` for what the HTTP and MCP adapters serve with).

mod agent;
mod embed;
mod error;
mod guards;
mod limits;
mod oauth;
mod policy;
mod read;
mod sandbox;
mod server;
mod settings;
mod sync;

pub use crate::agent::{AgentLimits, LlmConfig, DEFAULT_LLM_BASE_URL, MAX_AGENT_STEPS};
pub use crate::embed::EmbedConfig;
pub use crate::events::EventLimits;
pub use crate::oauth::OAuthSettings;
pub use crate::ops::{DirtyNotes, GuardMode, Guards, PolicyMode};
pub use crate::repo::GitIdentity;
pub use crate::sandbox::SandboxLimits;
pub use crate::sync::{
    GitCredentials, SyncConfig, Transport, DEFAULT_GIT_USERNAME, DEFAULT_SYNC_INTERVAL_SECS,
};
pub use limits::MAX_CHANGES_LIMIT;
pub use settings::{
    DEFAULT_BODY_TIMEOUT_MS, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CHANGES, DEFAULT_MAX_EDITS,
    DEFAULT_MAX_MOVE_NOTES, DEFAULT_PROPOSALS_MAX_PENDING,
};

pub use error::ConfigError;
pub use settings::Config;

use read::Env;

impl Config {
    /// Fills in the settings that come from the environment, area by area;
    /// the first value that cannot be used stops start-up.
    pub fn with_environment(
        mut self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let env = Env(env);
        policy::read(env, &mut self)?;
        guards::read(env, &mut self)?;
        limits::read(env, &mut self)?;
        sandbox::read(env, &mut self)?;
        agent::read(env, &mut self)?;
        embed::read(env, &mut self)?;
        server::read(env, &mut self)?;
        sync::read(env, &mut self)?;
        oauth::read(env, &mut self)?;
        Ok(self)
    }
}

/// Reads the process environment; the one place that does.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;

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
}
