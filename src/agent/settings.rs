//! The agent's settings: where its model is (`MIRAI_LLM_*`) and the bounds on
//! one run (`MIRAI_AGENT_*`), read and validated by `config::agent`.

use crate::redact::presence;

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
            .field("api_key", &presence(api_key))
            .field("timeout_ms", timeout_ms)
            .field("max_retries", max_retries)
            .field("max_tokens", max_tokens)
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
