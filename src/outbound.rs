//! Calls to model providers (the agent's chat model, the embeddings API): one
//! JSON POST with the configured key as a bearer token (never logged), a
//! timeout per attempt, and retries with doubling backoff on 429 and 5xx
//! (honouring `Retry-After`), never past a deadline. An answer is read with a
//! byte cap the caller derives from what it asked for, and within the
//! attempt's time: a provider cannot make mirai hold or wait for more. Every
//! failure text is scrubbed of the configuration's secrets and of URLs'
//! credentials ([`Secrets::scrub`]) before a caller sees it.

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::redact::Secrets;

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

/// How much of an error answer is read (its first 300 characters are shown).
const ERROR_BODY_BYTES: u64 = 4096;
/// The piece read at a time, between deadline checks.
const READ_PIECE: usize = 64 * 1024;

/// `{base}/{path}`, with the path put before a query string the base URL
/// carries (`https://h/v1?key=k` gives `https://h/v1/chat/completions?key=k`).
pub fn endpoint(base: &str, path: &str) -> String {
    match base.split_once('?') {
        Some((before, query)) => format!("{}/{path}?{query}", before.trim_end_matches('/')),
        None => format!("{}/{path}", base.trim_end_matches('/')),
    }
}

/// Why a call gave no answer.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The deadline passed before an attempt could start.
    Deadline,
    /// What the last attempt met, with the attempt count or why no retry was left.
    Failed(String),
    /// The answer was longer than the request's cap (never retried).
    TooLong(String),
}

/// An HTTP client for provider calls (its own timeouts come per request).
#[expect(
    clippy::expect_used,
    reason = "a client with no TLS settings of its own always builds"
)]
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client with no TLS settings of its own always builds")
}

/// POSTs `body` to `url`: the body of the first attempt answering 2xx, read
/// up to `cap` bytes (a longer answer is a failure, never retried).
pub fn post_json(
    http: &reqwest::blocking::Client,
    url: &str,
    key: Option<&str>,
    body: &Value,
    attempts: Attempts,
    cap: usize,
    secrets: &Secrets,
) -> Result<Vec<u8>, CallError> {
    let scrub = |text: String| secrets.scrub(&without_key(&text, key));
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let remaining = attempts.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(CallError::Deadline);
        }
        let timeout = remaining.min(attempts.per_attempt);
        let attempt_deadline = Instant::now() + timeout;
        let mut request = http.post(url).timeout(timeout).json(body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let (retry_after, failure) = match request.send() {
            Ok(response) if response.status().is_success() => {
                return read_capped(response, cap, attempt_deadline).map_err(|e| match e {
                    CallError::TooLong(why) => CallError::TooLong(scrub(format!("{url} {why}"))),
                    CallError::Failed(why) => CallError::Failed(scrub(format!("{url} {why}"))),
                    CallError::Deadline => CallError::Deadline,
                });
            }
            Ok(mut response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                let mut start = Vec::new();
                let _ = response
                    .by_ref()
                    .take(ERROR_BODY_BYTES)
                    .read_to_end(&mut start);
                // A provider may echo what it was sent (the key included).
                let text = String::from_utf8_lossy(&start);
                let failure = scrub(format!(
                    "{url} answered {status}: {}",
                    text.chars().take(300).collect::<String>()
                ));
                if status != 429 && status < 500 {
                    return Err(CallError::Failed(failure));
                }
                (retry_after, failure)
            }
            Err(e) if e.is_timeout() => (None, scrub(format!("{url} did not answer in time: {e}"))),
            Err(e) => (None, scrub(format!("cannot reach {url}: {e}"))),
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

/// GETs `url` once (no retries): the body of a 2xx answer, read up to `cap`
/// bytes and before `deadline` (an identity provider's metadata and keys).
pub fn get_capped(
    http: &reqwest::blocking::Client,
    url: &str,
    deadline: Instant,
    cap: usize,
) -> Result<Vec<u8>, CallError> {
    let timeout = deadline.saturating_duration_since(Instant::now());
    if timeout.is_zero() {
        return Err(CallError::Deadline);
    }
    let shown = crate::redact::urls(url);
    match http.get(url).timeout(timeout).send() {
        Ok(response) if response.status().is_success() => read_capped(response, cap, deadline)
            .map_err(|e| match e {
                CallError::TooLong(why) => CallError::TooLong(format!("{shown} {why}")),
                CallError::Failed(why) => CallError::Failed(format!("{shown} {why}")),
                CallError::Deadline => CallError::Deadline,
            }),
        Ok(response) => Err(CallError::Failed(format!(
            "{shown} answered {}",
            response.status().as_u16()
        ))),
        Err(e) if e.is_timeout() => {
            Err(CallError::Failed(format!("{shown} did not answer in time")))
        }
        Err(e) => Err(CallError::Failed(
            crate::redact::urls(&format!("cannot reach {shown}: {e}")).into_owned(),
        )),
    }
}

/// The body of `response`, refused past `cap` bytes or once `deadline` passes
/// (an endless or trickling answer ends there; the rest is never read).
fn read_capped(
    mut response: reqwest::blocking::Response,
    cap: usize,
    deadline: Instant,
) -> Result<Vec<u8>, CallError> {
    let too_long = || {
        CallError::TooLong(format!(
            "answered more than {cap} bytes, more than this request can need"
        ))
    };
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(too_long());
    }
    let mut body = Vec::new();
    let mut piece = vec![0u8; READ_PIECE];
    loop {
        if Instant::now() >= deadline {
            return Err(CallError::Failed(
                "did not finish its answer in time".to_string(),
            ));
        }
        match response.read(&mut piece) {
            Ok(0) => return Ok(body),
            Ok(n) if body.len() + n > cap => return Err(too_long()),
            Ok(n) => body.extend_from_slice(&piece[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CallError::Failed(format!("broke off its answer: {e}"))),
        }
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
            let body = format!("bad request; you sent: {headers} (trace trace-s3cret)");
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
        let mut secrets = Secrets::default();
        secrets.add("trace-s3cret");
        let sent = post_json(
            &client(),
            &url,
            Some("sk-s3cret"),
            &Value::Null,
            attempts,
            1024,
            &secrets,
        );
        let failure = match sent {
            Err(CallError::Failed(text)) => text,
            other => panic!("{other:?}"),
        };
        assert!(failure.contains("answered 400"), "{failure}");
        assert!(failure.contains("Bearer <the key>"), "{failure}");
        assert!(!failure.contains("s3cret"), "{failure}");
    }
}

#[cfg(test)]
mod bounded {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// A provider that answers 200 with a chunked body that never ends.
    fn endless_server() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/embeddings", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
            );
            let chunk = format!("{:x}\r\n{}\r\n", 8192, "[".repeat(8192));
            while stream.write_all(chunk.as_bytes()).is_ok() {}
        });
        url
    }

    #[test]
    fn an_endless_answer_is_refused_at_the_cap() {
        let attempts = Attempts {
            per_attempt: Duration::from_secs(20),
            max_retries: 3,
            deadline: Instant::now() + Duration::from_secs(30),
        };
        let started = Instant::now();
        let sent = post_json(
            &client(),
            &endless_server(),
            None,
            &Value::Null,
            attempts,
            100_000,
            &Secrets::default(),
        );
        match sent {
            Err(CallError::TooLong(why)) => {
                assert!(why.contains("more than 100000 bytes"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn the_path_goes_before_the_base_urls_query() {
        assert_eq!(
            endpoint("https://h/v1?key=k&x=1", "chat/completions"),
            "https://h/v1/chat/completions?key=k&x=1"
        );
        assert_eq!(
            endpoint("http://h/v1/", "embeddings"),
            "http://h/v1/embeddings"
        );
    }
}
