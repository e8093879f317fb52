//! `mirai watch`: a running server's change stream (`GET /events`), read as
//! server-sent events and handed on one event at a time as `{"id","type","data"}`
//! (the CLI prints each as one JSON line). A dropped connection is opened
//! again with `Last-Event-ID`, so nothing is missed that the server still
//! keeps (past that, the server's `reset` says so).

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use serde_json::{json, Value};

/// The longest an SSE line may be (an event's data is one line).
const MAX_LINE: usize = 4 * 1024 * 1024;
/// The longest wait between attempts to connect again.
const MAX_RETRY: Duration = Duration::from_secs(10);

/// Where and what to watch.
pub struct Watch {
    /// The server's base URL (`http://127.0.0.1:4567`).
    pub url: String,
    pub token: Option<String>,
    /// Comma-separated event types (`None`: all).
    pub types: Option<String>,
    pub path_prefix: Option<String>,
}

/// How a stream ended.
enum Ended {
    /// The connection dropped: connect again.
    Dropped(String),
    /// The server refused (a bad filter, a wrong token): stop.
    Refused(String),
}

/// One event being read: `id:`, `event:` and `data:` lines until a blank one.
#[derive(Default)]
struct Frame {
    id: Option<String>,
    kind: Option<String>,
    data: String,
}

impl Frame {
    /// Takes one SSE line; a blank line ends the frame and answers it as a line to print.
    fn line(&mut self, line: &str) -> Option<Value> {
        if line.is_empty() {
            let frame = std::mem::take(self);
            if frame.data.is_empty() {
                return None;
            }
            let data = serde_json::from_str(&frame.data).unwrap_or(Value::String(frame.data));
            return Some(json!({
                "id": frame.id,
                "type": frame.kind.unwrap_or_else(|| "message".to_string()),
                "data": data,
            }));
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => self.id = Some(value.to_string()),
            "event" => self.kind = Some(value.to_string()),
            "data" => {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value);
            }
            _ => {}
        }
        None
    }
}

impl Watch {
    /// Reads the stream until the server refuses it, calling `each` per event
    /// and connecting again (with `Last-Event-ID`) whenever the connection drops.
    /// `Err`: why the server refused.
    pub fn run(&self, each: &mut dyn FnMut(&Value)) -> Result<(), String> {
        let client = reqwest::blocking::Client::builder()
            .timeout(None::<Duration>)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        let mut last_id: Option<String> = None;
        let mut wait = Duration::from_millis(500);
        loop {
            match self.once(&client, &mut last_id, each) {
                Ended::Refused(why) => return Err(why),
                Ended::Dropped(why) => {
                    log::warn!(
                        "the change stream at {} dropped ({why}); connecting again in {} ms",
                        crate::redact::urls(&self.url),
                        wait.as_millis()
                    );
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(MAX_RETRY);
                }
            }
        }
    }

    fn once(
        &self,
        client: &reqwest::blocking::Client,
        last_id: &mut Option<String>,
        each: &mut dyn FnMut(&Value),
    ) -> Ended {
        let mut url = match url::Url::parse(&format!("{}/events", self.url.trim_end_matches('/'))) {
            Ok(url) => url,
            Err(e) => return Ended::Refused(format!("--url is not a URL: {e}")),
        };
        {
            let mut query = url.query_pairs_mut();
            if let Some(types) = &self.types {
                query.append_pair("types", types);
            }
            if let Some(prefix) = &self.path_prefix {
                query.append_pair("path_prefix", prefix);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        let mut request = client.get(url).header("Accept", "text/event-stream");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(id) = last_id.as_deref() {
            request = request.header("Last-Event-ID", id);
        }
        let response = match request.send() {
            Ok(response) => response,
            Err(e) => return Ended::Dropped(crate::redact::urls(&e.to_string()).into_owned()),
        };
        let status = response.status();
        if !status.is_success() {
            let body = response.text().unwrap_or_default();
            let refusal = format!("the server answered {status}: {}", body.trim());
            return if status.is_server_error() {
                Ended::Dropped(refusal)
            } else {
                Ended::Refused(refusal)
            };
        }
        let mut reader = BufReader::new(response);
        let mut frame = Frame::default();
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut reader)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
            {
                Ok(0) => return Ended::Dropped("the server closed the stream".to_string()),
                Ok(_) if line.len() > MAX_LINE => {
                    return Ended::Dropped("a line longer than 4 MiB".to_string())
                }
                Ok(_) => {}
                Err(e) => return Ended::Dropped(e.to_string()),
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            if let Some(event) = frame.line(text) {
                if let Some(id) = event["id"].as_str() {
                    *last_id = Some(id.to_string());
                }
                each(&event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_become_lines_and_comments_are_skipped() {
        let mut frame = Frame::default();
        let mut out = Vec::new();
        for line in [
            ": keep-alive",
            "",
            "id: ab-1",
            "event: commit",
            "data: {\"commit\":\"c\"}",
            "",
        ] {
            out.extend(frame.line(line));
        }
        assert_eq!(
            out,
            vec![json!({"id": "ab-1", "type": "commit", "data": {"commit": "c"}})]
        );
    }
}
