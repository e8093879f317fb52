//! Configuration: read from flags and the environment once, at start-up, and
//! validated there, so the rest of the program only ever sees good values.

use std::path::PathBuf;

use thiserror::Error;

/// Default cap on request bodies (`MIRAI_MAX_BODY_BYTES`), and so on a note's content.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// Default cap on the edits of one `notes.edit` (`MIRAI_EDIT_MAX_EDITS`).
pub const DEFAULT_MAX_EDITS: usize = 50;

/// Which classes of operation a deployment allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyMode {
    AllowAll,
    ReadOnly,
}

impl PolicyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyMode::AllowAll => "allow_all",
            PolicyMode::ReadOnly => "read_only",
        }
    }

    /// Parses `allow_all` / `read_only` (surrounding whitespace and case ignored).
    pub fn parse(raw: &str) -> Result<PolicyMode, ConfigError> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "allow_all" => Ok(PolicyMode::AllowAll),
            "read_only" => Ok(PolicyMode::ReadOnly),
            _ => Err(ConfigError::PolicyMode(raw.to_string())),
        }
    }
}

/// A configuration value that cannot be used. Start-up prints it and exits 2.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("invalid policy mode: {0} (expected allow_all or read_only)")]
    PolicyMode(String),
    #[error("invalid {name}: {value} (expected {expected})")]
    Value {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
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

/// Everything the service needs to run, already validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub notes_root: PathBuf,
    pub host: String,
    pub port: u16,
    pub policy: PolicyMode,
    /// When set, every HTTP route but `/health` needs `Authorization: Bearer <token>`.
    pub api_token: Option<String>,
    pub max_body_bytes: usize,
    pub max_edits: usize,
    pub git_identity: GitIdentity,
}

impl Config {
    /// A configuration with every default, serving `notes_root`.
    pub fn new(notes_root: impl Into<PathBuf>) -> Config {
        Config {
            notes_root: notes_root.into(),
            host: "127.0.0.1".to_string(),
            port: 4567,
            policy: PolicyMode::AllowAll,
            api_token: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_edits: DEFAULT_MAX_EDITS,
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
        self.api_token = non_empty("MIRAI_API_TOKEN").map(|t| t.trim().to_string());
        if let Some(raw) = non_empty("MIRAI_MAX_BODY_BYTES") {
            self.max_body_bytes = match raw.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(ConfigError::Value {
                        name: "MIRAI_MAX_BODY_BYTES",
                        value: raw,
                        expected: "a positive number of bytes",
                    })
                }
            };
        }
        if let Some(raw) = non_empty("MIRAI_EDIT_MAX_EDITS") {
            self.max_edits = match raw.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(ConfigError::Value {
                        name: "MIRAI_EDIT_MAX_EDITS",
                        value: raw,
                        expected: "a positive number of edits",
                    })
                }
            };
        }
        if let Some(name) = non_empty("MIRAI_GIT_AUTHOR_NAME") {
            self.git_identity.name = name.trim().to_string();
        }
        if let Some(email) = non_empty("MIRAI_GIT_AUTHOR_EMAIL") {
            self.git_identity.email = email.trim().to_string();
        }
        Ok(self)
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
}
