//! A client for OpenAI-compatible embeddings (`POST {base}/embeddings`), with
//! the request discipline of [`crate::outbound`]: the key from the
//! configuration only, never logged; a timeout per attempt; retries on 429
//! and 5xx. Answers are checked: one finite vector per input, all of one
//! dimension.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::vectors::MAX_DIMENSION;
use crate::config::EmbedConfig;
use crate::outbound::{self, Attempts, CallError};

/// What is embedded: a query or a passage (a chunk), which some models
/// embed differently (`input_type`, prefixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Query,
    Passage,
}

pub struct Client {
    http: reqwest::blocking::Client,
    config: EmbedConfig,
    url: String,
}

impl Client {
    pub fn new(config: EmbedConfig) -> Client {
        Client {
            http: outbound::client(),
            url: format!("{}/embeddings", config.base_url.trim_end_matches('/')),
            config,
        }
    }

    pub fn config(&self) -> &EmbedConfig {
        &self.config
    }

    /// How passages are sent, beside the model: vectors made otherwise are
    /// not comparable with new ones.
    pub fn recipe(&self) -> String {
        format!(
            "input_type={};passage_prefix={:?};query_prefix={:?}",
            if self.config.input_type { "on" } else { "off" },
            self.config.passage_prefix,
            self.config.query_prefix
        )
    }

    /// One vector per text, in order. A passage call retries as configured;
    /// a query call tries once within `MIRAI_EMBED_QUERY_TIMEOUT_MS`.
    /// The error text carries no credentials.
    pub fn embed(&self, texts: &[&str], kind: Kind) -> Result<Vec<Vec<f32>>, String> {
        let (prefix, input_type, timeout, retries) = match kind {
            Kind::Query => (
                &self.config.query_prefix,
                "query",
                self.config.query_timeout_ms,
                0,
            ),
            Kind::Passage => (
                &self.config.passage_prefix,
                "passage",
                self.config.timeout_ms,
                self.config.max_retries,
            ),
        };
        let input: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let mut body = json!({"model": self.config.model, "input": input});
        if self.config.input_type {
            body["input_type"] = json!(input_type);
        }
        let per_attempt = Duration::from_millis(timeout);
        // Retries and their waits fit in a bound of the attempts' own time.
        let deadline =
            Instant::now() + per_attempt * (retries + 1) + Duration::from_secs(30) * retries;
        let attempts = Attempts {
            per_attempt,
            max_retries: retries,
            deadline,
        };
        let redact = |text: String| crate::redact::urls(&text).into_owned();
        let response = outbound::post_json(
            &self.http,
            &self.url,
            self.config.api_key.as_deref(),
            &body,
            attempts,
        )
        .map_err(|e| match e {
            CallError::Deadline => redact(format!("{} did not answer in time", self.url)),
            CallError::Failed(failure) => redact(failure),
        })?;
        let value: Value = response
            .json()
            .map_err(|e| redact(format!("the answer of {} is not JSON: {e}", self.url)))?;
        vectors(&value, texts.len()).map_err(|e| redact(format!("{} answered {e}", self.url)))
    }
}

/// The vectors of an embeddings answer, in input order (by `index` when
/// the entries carry one).
fn vectors(value: &Value, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = value["data"].as_array().ok_or("no data array")?;
    if data.len() != expected {
        return Err(format!("{} vectors for {expected} inputs", data.len()));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (i, entry) in data.iter().enumerate() {
        let at = match entry.get("index") {
            Some(index) => index
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n < expected)
                .ok_or("an entry with a bad index")?,
            None => i,
        };
        let numbers = entry["embedding"]
            .as_array()
            .ok_or("an entry without an embedding array")?;
        if numbers.is_empty() || numbers.len() > MAX_DIMENSION {
            return Err(format!("an embedding of {} numbers", numbers.len()));
        }
        let vector: Option<Vec<f32>> = numbers
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32).filter(|x| x.is_finite()))
            .collect();
        let vector = vector.ok_or("an embedding with a value that is not a finite number")?;
        if out[at].replace(vector).is_some() {
            return Err("two entries with the same index".into());
        }
    }
    let out: Vec<Vec<f32>> = out.into_iter().map(|v| v.unwrap_or_default()).collect();
    if out.iter().any(|v| v.len() != out[0].len()) {
        return Err("embeddings of different dimensions".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_and_put_in_input_order() {
        let ok = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]}
        ]});
        assert_eq!(
            vectors(&ok, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        for (bad, why) in [
            (json!({}), "no data"),
            (json!({"data": [{"embedding": [1.0]}]}), "1 vectors for 2"),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}),
                "same index",
            ),
            (
                json!({"data": [{"index": 5, "embedding": [1.0]}, {"embedding": [2.0]}]}),
                "bad index",
            ),
            (
                json!({"data": [{"embedding": [1.0]}, {"embedding": [2.0, 3.0]}]}),
                "different dimensions",
            ),
            (
                json!({"data": [{"embedding": [1.0]}, {"embedding": ["x"]}]}),
                "finite",
            ),
            (
                json!({"data": [{"embedding": []}, {"embedding": []}]}),
                "of 0 numbers",
            ),
        ] {
            let err = vectors(&bad, 2).unwrap_err();
            assert!(err.contains(why), "{err} / {why}");
        }
    }
}
