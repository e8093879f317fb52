//! The embeddings' settings (`MIRAI_EMBED_*`), read and validated by
//! `config::embed`.

use crate::redact::presence;

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
            .field("api_key", &presence(api_key))
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
