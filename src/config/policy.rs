//! The policy's settings: the mode (`MIRAI_POLICY_MODE`, alias
//! `MCP_POLICY_MODE`), the API and reviewer tokens, the bound on pending
//! proposals, and what serving needs besides them.

use super::error::ConfigError;
use super::read::{as_usize, Env};
use super::settings::Config;
use crate::ops::PolicyMode;

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    if let Some(mode) = env
        .non_empty("MIRAI_POLICY_MODE")
        .or_else(|| env.non_empty("MCP_POLICY_MODE"))
    {
        config.policy = policy_mode(&mode)?;
    }
    config.api_token = env.trimmed("MIRAI_API_TOKEN");
    config.reviewer_token = env.trimmed("MIRAI_REVIEWER_TOKEN");
    if let Some(file) = env.non_empty("MIRAI_CALLERS_FILE") {
        let file = std::path::PathBuf::from(file);
        crate::callers::load(&file).map_err(ConfigError::Callers)?;
        config.callers_file = Some(file);
    }
    if let Some(n) = env.positive(
        "MIRAI_PROPOSALS_MAX_PENDING",
        "a positive number of proposals",
    )? {
        config.proposals_max_pending = as_usize(n);
    }
    if config.reviewer_token.is_some() && config.reviewer_token == config.api_token {
        return Err(ConfigError::Value {
            name: "MIRAI_REVIEWER_TOKEN",
            value: "the same value as MIRAI_API_TOKEN".to_string(),
            expected: "a token of its own: whoever holds the API token must not be able to approve",
        });
    }
    Ok(())
}

/// Parses `allow_all` / `read_only` / `review` (surrounding whitespace and case ignored).
fn policy_mode(raw: &str) -> Result<PolicyMode, ConfigError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "allow_all" => Ok(PolicyMode::AllowAll),
        "read_only" => Ok(PolicyMode::ReadOnly),
        "review" => Ok(PolicyMode::Review),
        _ => Err(ConfigError::PolicyMode(raw.to_string())),
    }
}

impl Config {
    /// What `mirai serve` needs besides valid settings: in review mode, a
    /// reviewer token or a callers file (without either nobody could approve
    /// over HTTP). The CLI
    /// and `mirai mcp` on stdio run with the operator's permissions and need none.
    pub fn check_serving(&self) -> Result<(), ConfigError> {
        if self.policy == PolicyMode::Review
            && self.reviewer_token.is_none()
            && self.callers_file.is_none()
        {
            return Err(ConfigError::NoReviewerToken);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::read::env_of;
    use crate::config::settings::Config;
    use crate::ops::PolicyMode;

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
}
