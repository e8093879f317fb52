//! A client for OpenAI-compatible chat completions (`{base}/chat/completions`):
//! one request per step, a timeout per request, retries with backoff on 429
//! and 5xx (honouring `Retry-After`), never past the run's deadline.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use super::protocol::STOP_SEQUENCES;
use crate::config::LlmConfig;

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

/// The first wait after a 429 or 5xx; each retry doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

impl Llm {
    pub fn new(config: LlmConfig) -> Llm {
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("an HTTP client with no TLS settings of its own always builds");
        Llm { http, config }
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// Asks for the next answer; gives up at `deadline`.
    pub fn complete(
        &self,
        messages: &[Message],
        deadline: Instant,
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
            "temperature": 0,
        });
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(LlmError::new(
                    "the run's deadline passed while waiting for the model",
                ));
            }
            let mut request = self
                .http
                .post(&url)
                .timeout(remaining.min(Duration::from_millis(self.config.timeout_ms)))
                .json(&body);
            if let Some(key) = &self.config.api_key {
                request = request.bearer_auth(key);
            }
            let (retry_after, failure) = match request.send() {
                Ok(response) if response.status().is_success() => {
                    let value: Value = response.json().map_err(|e| {
                        LlmError::new(format!("the model's answer is not JSON: {e}"))
                    })?;
                    return completion(&value, started);
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let retry_after = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let text = response.text().unwrap_or_default();
                    let failure = format!(
                        "{url} answered {status}: {}",
                        text.chars().take(300).collect::<String>()
                    );
                    if status != 429 && status < 500 {
                        return Err(LlmError::new(failure));
                    }
                    (retry_after, failure)
                }
                Err(e) if e.is_timeout() => (None, format!("{url} did not answer in time: {e}")),
                Err(e) => (None, format!("cannot reach {url}: {e}")),
            };
            if attempt > self.config.max_retries {
                return Err(LlmError::new(format!(
                    "{failure} (after {attempt} attempts)"
                )));
            }
            let wait = retry_after.unwrap_or(backoff).min(MAX_BACKOFF);
            if Instant::now() + wait >= deadline {
                return Err(LlmError::new(format!("{failure} (no time left to retry)")));
            }
            std::thread::sleep(wait);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
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
