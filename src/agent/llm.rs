//! A client for OpenAI-compatible chat completions (`{base}/chat/completions`):
//! one request per step, a timeout per request, retries with backoff on 429
//! and 5xx (honouring `Retry-After`), never past the run's deadline; the
//! request discipline is [`crate::outbound`]'s, shared with the embeddings client.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use super::protocol::STOP_SEQUENCES;
use crate::config::LlmConfig;
use crate::outbound::{self, Attempts, CallError};

/// One chat message. Contents are plain strings (DESIGN 7.11).
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

/// Why no completion came back. Its text shows URLs without their
/// credentials (`MIRAI_LLM_BASE_URL` may carry `user:password@`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct LlmError(String);

impl LlmError {
    fn new(message: impl AsRef<str>) -> LlmError {
        LlmError(crate::redact::urls(message.as_ref()).into_owned())
    }
}

pub struct Llm {
    http: reqwest::blocking::Client,
    config: LlmConfig,
}

impl Llm {
    pub fn new(config: LlmConfig) -> Llm {
        Llm {
            http: outbound::client(),
            config,
        }
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
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
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
        let response = outbound::post_json(
            &self.http,
            &url,
            self.config.api_key.as_deref(),
            &body,
            attempts,
        )
        .map_err(|e| match e {
            CallError::Deadline => {
                LlmError::new("the run's deadline passed while waiting for the model")
            }
            CallError::Failed(failure) => LlmError::new(failure),
        })?;
        let value: Value = response
            .json()
            .map_err(|e| LlmError::new(format!("the model's answer is not JSON: {e}")))?;
        completion(&value, started)
    }
}

fn completion(value: &Value, started: Instant) -> Result<Completion, LlmError> {
    let content = value["choices"][0]["message"]["content"]
        .as_str()
        .ok_or_else(|| {
            LlmError::new(format!(
                "the model's answer has no choices[0].message.content: {}",
                value.to_string().chars().take(300).collect::<String>()
            ))
        })?
        .to_string();
    Ok(Completion {
        content,
        prompt_tokens: value["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
        completion_tokens: value["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}
