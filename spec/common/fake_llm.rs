//! A fake LLM: a real OpenAI-compatible HTTP server on loopback that replays
//! scripted answers from `fixtures/agent/*.json` and keeps every request it
//! got, so specs can assert what mirai sent.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Scripted {
    /// The assistant's message; absent for an error status.
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default = "ok")]
    pub status: u16,
    #[serde(default)]
    pub retry_after: Option<u64>,
    #[serde(default)]
    pub delay_ms: u64,
}

fn ok() -> u16 {
    200
}

/// A conversation: answers in order; the last one repeats when `repeat_last` is set.
#[derive(Debug, Clone, Deserialize)]
pub struct Script {
    pub answers: Vec<Scripted>,
    #[serde(default)]
    pub repeat_last: bool,
}

impl Script {
    /// Answers `contents` in order, each at once with status 200.
    pub fn answering(contents: &[String]) -> Script {
        Script {
            answers: contents
                .iter()
                .map(|content| Scripted {
                    content: Some(content.clone()),
                    status: 200,
                    retry_after: None,
                    delay_ms: 0,
                })
                .collect(),
            repeat_last: false,
        }
    }

    pub fn fixture(name: &str) -> Script {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/agent")
            .join(format!("{name}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

struct State {
    answers: Mutex<VecDeque<Scripted>>,
    repeat_last: bool,
    requests: Mutex<Vec<Value>>,
}

pub struct FakeLlm {
    pub base_url: String,
    state: Arc<State>,
    handle: actix_web::dev::ServerHandle,
}

impl FakeLlm {
    pub fn start(script: Script) -> FakeLlm {
        let state = Arc::new(State {
            answers: Mutex::new(script.answers.into()),
            repeat_last: script.repeat_last,
            requests: Mutex::new(Vec::new()),
        });
        let shared = state.clone();
        let (base_url, handle) = super::loopback::serve(move |app| {
            app.app_data(web::Data::from(shared.clone()))
                .route("/v1/chat/completions", web::post().to(answer));
        });
        FakeLlm {
            base_url,
            state,
            handle,
        }
    }

    pub fn fixture(name: &str) -> FakeLlm {
        FakeLlm::start(Script::fixture(name))
    }

    /// Every request body mirai sent, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        drop(self.handle.stop(false));
    }
}

async fn answer(state: web::Data<State>, body: web::Json<Value>) -> HttpResponse {
    state.requests.lock().unwrap().push(body.into_inner());
    let next = {
        let mut answers = state.answers.lock().unwrap();
        if answers.len() == 1 && state.repeat_last {
            answers.front().cloned()
        } else {
            answers.pop_front()
        }
    };
    let Some(next) = next else {
        return HttpResponse::InternalServerError()
            .json(json!({"error": "the script has no more answers"}));
    };
    if next.delay_ms > 0 {
        actix_web::rt::time::sleep(Duration::from_millis(next.delay_ms)).await;
    }
    let status = actix_web::http::StatusCode::from_u16(next.status).unwrap();
    let mut response = HttpResponse::build(status);
    if let Some(seconds) = next.retry_after {
        response.insert_header(("Retry-After", seconds.to_string()));
    }
    match next.content {
        Some(content) => response.json(json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        })),
        None => response.json(json!({"error": {"message": "scripted failure"}})),
    }
}
