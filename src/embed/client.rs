//! A client for OpenAI-compatible embeddings (`POST {base}/embeddings`), with
//! the request discipline of [`crate::outbound`]: the key from the
//! configuration only, never logged; a timeout per attempt; retries on 429
//! and 5xx. Answers are read up to [`answer_cap`] bytes (what the inputs can
//! need at twice the dimension the server last answered, or at the largest
//! dimension mirai keeps before it has answered) and checked: one finite
//! vector per input, all of one dimension. Error texts hold no configured secret.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::settings::EmbedConfig;
use super::vectors::MAX_DIMENSION;
use crate::outbound::{self, Attempts, CallError};
use crate::redact::Secrets;

/// What an answer may hold besides its numbers (model, usage, the envelope).
const ANSWER_ENVELOPE_BYTES: usize = 64 * 1024;
/// The most bytes one number of a vector takes in an answer, with its
/// separator and the indentation of a pretty-printed answer.
const BYTES_PER_NUMBER: usize = 32;

/// The largest answer a request embedding `inputs` texts can get back, when
/// the server last answered vectors of `dimension` numbers (0: not yet).
/// Twice that dimension leaves room for a change of model.
pub fn answer_cap(inputs: usize, dimension: usize) -> usize {
    let dimension = match dimension {
        0 => MAX_DIMENSION,
        known => (known * 2).min(MAX_DIMENSION),
    };
    ANSWER_ENVELOPE_BYTES + inputs * (dimension * BYTES_PER_NUMBER + 256)
}

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
    secrets: Secrets,
    /// The dimension of the last good answer (0: none yet, or an answer was
    /// refused for its size, so the next may be of a new, larger model).
    dimension: AtomicUsize,
}

impl Client {
    /// A client for `config`; `secrets` are cut out of every error text.
    pub fn new(config: EmbedConfig, secrets: Secrets) -> Client {
        Client {
            http: outbound::client(),
            url: outbound::endpoint(&config.base_url, "embeddings"),
            config,
            secrets,
            dimension: AtomicUsize::new(0),
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
        let redact = |text: String| self.secrets.scrub(&text);
        let answer = outbound::post_json(
            &self.http,
            &self.url,
            self.config.api_key.as_deref(),
            &body,
            attempts,
            answer_cap(texts.len(), self.dimension.load(Ordering::Relaxed)),
            &self.secrets,
        )
        .map_err(|e| match e {
            CallError::Deadline => redact(format!("{} did not answer in time", self.url)),
            CallError::Failed(failure) => redact(failure),
            CallError::TooLong(failure) => {
                // A new model may answer longer vectors: the next call allows the largest.
                self.dimension.store(0, Ordering::Relaxed);
                redact(failure)
            }
        })?;
        let value: Answer = serde_json::from_slice(&answer).map_err(|e| {
            redact(format!(
                "the answer of {} is not an embeddings answer: {e}",
                self.url
            ))
        })?;
        let vectors = vectors(value, texts.len())
            .map_err(|e| redact(format!("{} answered {e}", self.url)))?;
        let dimension = vectors.first().map_or(0, Vec::len);
        self.dimension.store(dimension, Ordering::Relaxed);
        Ok(vectors)
    }
}

/// An embeddings answer, parsed straight into numbers (no tree of JSON
/// values is built for a large answer).
#[derive(Debug, serde::Deserialize)]
struct Answer {
    data: Vec<Entry>,
}

#[derive(Debug, serde::Deserialize)]
struct Entry {
    #[serde(default)]
    index: Option<u64>,
    /// Numbers too large for an f32 become infinite and are refused below.
    embedding: Vec<f32>,
}

/// The vectors of an embeddings answer, in input order (by `index` when
/// the entries carry one).
fn vectors(answer: Answer, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = answer.data;
    if data.len() != expected {
        return Err(format!("{} vectors for {expected} inputs", data.len()));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (i, entry) in data.into_iter().enumerate() {
        let at = match entry.index {
            Some(index) => usize::try_from(index)
                .ok()
                .filter(|&n| n < expected)
                .ok_or("an entry with a bad index")?,
            None => i,
        };
        let vector = entry.embedding;
        if vector.is_empty() || vector.len() > MAX_DIMENSION {
            return Err(format!("an embedding of {} numbers", vector.len()));
        }
        if vector.iter().any(|x| !x.is_finite()) {
            return Err("an embedding with a value that is not a finite number".into());
        }
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
    use serde_json::Value;

    /// What `embed` does with an answer's bytes.
    fn parse(answer: &Value, expected: usize) -> Result<Vec<Vec<f32>>, String> {
        let answer: Answer = serde_json::from_value(answer.clone()).map_err(|e| e.to_string())?;
        vectors(answer, expected)
    }

    #[test]
    fn answers_are_checked_and_put_in_input_order() {
        let ok = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]}
        ]});
        assert_eq!(parse(&ok, 2).unwrap(), vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        for (bad, why) in [
            (json!({}), "missing field `data`"),
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
                "invalid type: string",
            ),
            (
                json!({"data": [{"embedding": [1.0]}, {"embedding": [1e39]}]}),
                "finite",
            ),
            (
                json!({"data": [{"embedding": []}, {"embedding": []}]}),
                "of 0 numbers",
            ),
        ] {
            let err = parse(&bad, 2).unwrap_err();
            assert!(err.contains(why), "{err} / {why}");
        }
    }
}
