//! Calls to model providers (the agent's chat model, the embeddings API): one
//! JSON POST with the configured key as a bearer token (never logged), a
//! timeout per attempt, and retries with doubling backoff on 429 and 5xx
//! (honouring `Retry-After`), never past a deadline. Failure texts may hold
//! the URL: callers pass them through [`crate::redact::urls`]; the key is cut
//! out of whatever the provider answered before it goes into one.

use std::time::{Duration, Instant};

use serde_json::Value;

/// The first wait after a 429 or 5xx; each retry doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// How long one call may try.
#[derive(Debug, Clone, Copy)]
pub struct Attempts {
    /// The timeout of each attempt (cut to the time left).
    pub per_attempt: Duration,
    /// Attempts after the first, on 429, 5xx, timeouts and unreachable servers.
    pub max_retries: u32,
    pub deadline: Instant,
}

/// Why a call gave no answer.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The deadline passed before an attempt could start.
    Deadline,
    /// What the last attempt met, with the attempt count or why no retry was left.
    Failed(String),
}

/// An HTTP client for provider calls (its own timeouts come per request).
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client with no TLS settings of its own always builds")
}

/// POSTs `body` to `url`; the response of the first attempt answering 2xx.
pub fn post_json(
    http: &reqwest::blocking::Client,
    url: &str,
    key: Option<&str>,
    body: &Value,
    attempts: Attempts,
) -> Result<reqwest::blocking::Response, CallError> {
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let remaining = attempts.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(CallError::Deadline);
        }
        let mut request = http
            .post(url)
            .timeout(remaining.min(attempts.per_attempt))
            .json(body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let (retry_after, failure) = match request.send() {
            Ok(response) if response.status().is_success() => return Ok(response),
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                // A provider may echo what it was sent (the key included).
                let text = without_key(&response.text().unwrap_or_default(), key);
                let failure = format!(
                    "{url} answered {status}: {}",
                    text.chars().take(300).collect::<String>()
                );
                if status != 429 && status < 500 {
                    return Err(CallError::Failed(failure));
                }
                (retry_after, failure)
            }
            Err(e) if e.is_timeout() => (None, format!("{url} did not answer in time: {e}")),
            Err(e) => (None, format!("cannot reach {url}: {e}")),
        };
        if attempt > attempts.max_retries {
            return Err(CallError::Failed(format!(
                "{failure} (after {attempt} attempts)"
            )));
        }
        let wait = retry_after.unwrap_or(backoff).min(MAX_BACKOFF);
        if Instant::now() + wait >= attempts.deadline {
            return Err(CallError::Failed(format!(
                "{failure} (no time left to retry)"
            )));
        }
        std::thread::sleep(wait);
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// `text` with every occurrence of `key` replaced.
fn without_key(text: &str, key: Option<&str>) -> String {
    match key {
        Some(key) if !key.is_empty() => text.replace(key, "<the key>"),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// A provider that answers 400 with every request header in its body.
    fn echoing_server() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/embeddings", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut headers = String::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                headers.push_str(&line);
            }
            let body = format!("bad request; you sent: {headers}");
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 400 Bad Request\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        });
        url
    }

    #[test]
    fn a_key_the_provider_echoes_back_never_reaches_the_failure_text() {
        let url = echoing_server();
        let attempts = Attempts {
            per_attempt: Duration::from_secs(5),
            max_retries: 0,
            deadline: Instant::now() + Duration::from_secs(10),
        };
        let failure = match post_json(&client(), &url, Some("sk-s3cret"), &Value::Null, attempts) {
            Err(CallError::Failed(text)) => text,
            other => panic!("{other:?}"),
        };
        assert!(failure.contains("answered 400"), "{failure}");
        assert!(failure.contains("Bearer <the key>"), "{failure}");
        assert!(!failure.contains("s3cret"), "{failure}");
    }
}
