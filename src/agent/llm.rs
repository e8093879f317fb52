//! A client for OpenAI-compatible chat completions (`{base}/chat/completions`):
//! one request per step, a timeout per request, retries with backoff on 429
//! and 5xx (honouring `Retry-After`), never past the run's deadline; the
//! request discipline is [`crate::outbound`]'s, shared with the embeddings client.
//! An answer is read up to [`answer_cap`] bytes (what `max_tokens` allows), and
//! every text from the provider is scrubbed of the configuration's secrets.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use super::protocol::STOP_SEQUENCES;
use super::settings::LlmConfig;
use crate::outbound::{self, Attempts, CallError};
use crate::redact::Secrets;

/// What an answer may hold besides its content (ids, usage, the envelope).
const ANSWER_ENVELOPE_BYTES: usize = 64 * 1024;
/// The most bytes one token can take in an answer: a long token of
/// characters JSON escapes as `\uXXXX`.
const BYTES_PER_TOKEN: usize = 128;

/// The largest answer a request for `max_tokens` can get back.
pub fn answer_cap(max_tokens: u32) -> usize {
    ANSWER_ENVELOPE_BYTES + max_tokens as usize * BYTES_PER_TOKEN
}

/// One chat message. Contents are plain strings (docs/src/agent.md).
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: "system",
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: "user",
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Message {
        Message {
            role: "assistant",
            content: content.into(),
        }
    }
}

/// The model's answer to one request.
#[derive(Debug, Clone)]
pub struct Completion {
    pub content: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Time spent on the request, retries and waits included.
    pub ms: f64,
}

/// Why no completion came back. Its text holds no secret of the
/// configuration and shows URLs without their credentials
/// (`MIRAI_LLM_BASE_URL` may carry `user:password@` or `?key=`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct LlmError(String);

pub struct Llm {
    http: reqwest::blocking::Client,
    config: LlmConfig,
    secrets: Secrets,
}

impl Llm {
    /// A client for `config`; `secrets` are cut out of everything the provider answers.
    pub fn new(config: LlmConfig, secrets: Secrets) -> Llm {
        Llm {
            http: outbound::client(),
            config,
            secrets,
        }
    }

    fn error(&self, message: impl AsRef<str>) -> LlmError {
        LlmError(self.secrets.scrub(message.as_ref()))
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// Asks for the next answer, sampled at `temperature`; gives up at `deadline`.
    pub fn complete(
        &self,
        messages: &[Message],
        deadline: Instant,
        temperature: f64,
    ) -> Result<Completion, LlmError> {
        let started = Instant::now();
        let url = outbound::endpoint(&self.config.base_url, "chat/completions");
        let body = json!({
            "model": self.config.model,
            "messages": messages,
            "stop": STOP_SEQUENCES,
            "temperature": temperature,
            "max_tokens": self.config.max_tokens,
        });
        let attempts = Attempts {
            per_attempt: Duration::from_millis(self.config.timeout_ms),
            max_retries: self.config.max_retries,
            deadline,
        };
        let answer = outbound::post_json(
            &self.http,
            &url,
            self.config.api_key.as_deref(),
            &body,
            attempts,
            answer_cap(self.config.max_tokens),
            &self.secrets,
        )
        .map_err(|e| match e {
            CallError::Deadline => {
                self.error("the run's deadline passed while waiting for the model")
            }
            CallError::Failed(failure) | CallError::TooLong(failure) => self.error(failure),
        })?;
        let value: Value = serde_json::from_slice(&answer)
            .map_err(|e| self.error(format!("the model's answer is not JSON: {e}")))?;
        self.completion(&value, started)
    }

    fn completion(&self, value: &Value, started: Instant) -> Result<Completion, LlmError> {
        let content = value["choices"][0]["message"]["content"]
            .as_str()
            .ok_or_else(|| {
                self.error(format!(
                    "the model's answer has no choices[0].message.content: {}",
                    value.to_string().chars().take(300).collect::<String>()
                ))
            })?;
        Ok(Completion {
            content: self.secrets.scrub(content),
            prompt_tokens: value["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
            completion_tokens: value["usage"]["completion_tokens"].as_u64().unwrap_or(0),
            ms: started.elapsed().as_secs_f64() * 1000.0,
        })
    }
}
