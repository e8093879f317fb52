//! A fake embedding server: a real OpenAI-compatible HTTP server on loopback
//! (`POST /v1/embeddings`) answering deterministic vectors (a hashed bag of
//! words, with a few synonyms folded together so meaning can differ from
//! words), counting requests and keeping every input and `Authorization`
//! header; it can be told to fail (500) or to hang.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

/// The dimension of the specs' vectors.
pub const DIMENSION: usize = 64;

/// Words the fake treats as one meaning.
const SYNONYMS: &[(&str, &str)] = &[("automobile", "car"), ("vehicle", "car"), ("feline", "cat")];

/// The fake's vector of `text`: each word (after synonyms) adds one to a
/// hashed coordinate.
pub fn vector(text: &str, dimension: usize) -> Vec<f32> {
    let mut v = vec![0f32; dimension];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        let word = SYNONYMS
            .iter()
            .find(|(from, _)| *from == word)
            .map_or(word.as_str(), |(_, to)| to);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        v[(h % dimension as u64) as usize] += 1.0;
    }
    v
}

#[derive(Default)]
struct State {
    dimension: usize,
    requests: AtomicU64,
    inputs: Mutex<Vec<String>>,
    authorization: Mutex<Vec<String>>,
    failing: AtomicBool,
    delay_ms: AtomicU64,
}

pub struct FakeEmbed {
    pub base_url: String,
    state: Arc<State>,
    handle: actix_web::dev::ServerHandle,
}

impl FakeEmbed {
    pub fn start() -> FakeEmbed {
        FakeEmbed::with_dimension(DIMENSION)
    }

    pub fn with_dimension(dimension: usize) -> FakeEmbed {
        let state = Arc::new(State {
            dimension,
            ..State::default()
        });
        let shared = state.clone();
        let (base_url, handle) = super::loopback::serve(move |app| {
            app.app_data(web::Data::from(shared.clone()))
                .route("/v1/embeddings", web::post().to(answer));
        });
        FakeEmbed {
            base_url,
            state,
            handle,
        }
    }

    /// Requests answered or refused so far.
    pub fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Every text sent, in order.
    pub fn inputs(&self) -> Vec<String> {
        self.state.inputs.lock().unwrap().clone()
    }

    /// Every `Authorization` header sent.
    pub fn authorization(&self) -> Vec<String> {
        self.state.authorization.lock().unwrap().clone()
    }

    /// From now on, answer 500 (or answer again).
    pub fn set_failing(&self, failing: bool) {
        self.state.failing.store(failing, Ordering::SeqCst);
    }

    /// From now on, wait this long before answering.
    pub fn set_delay(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Drop for FakeEmbed {
    fn drop(&mut self) {
        drop(self.handle.stop(false));
    }
}

async fn answer(
    state: web::Data<State>,
    request: HttpRequest,
    body: web::Json<Value>,
) -> HttpResponse {
    state.requests.fetch_add(1, Ordering::SeqCst);
    for auth in request.headers().get_all("authorization") {
        let auth = auth.to_str().unwrap_or_default().to_string();
        state.authorization.lock().unwrap().push(auth);
    }
    let delay = state.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        actix_web::rt::time::sleep(Duration::from_millis(delay)).await;
    }
    if state.failing.load(Ordering::SeqCst) {
        return HttpResponse::InternalServerError()
            .json(json!({"error": {"message": "scripted failure"}}));
    }
    let inputs: Vec<String> = body["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    state.inputs.lock().unwrap().extend(inputs.iter().cloned());
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": vector(text, state.dimension)}))
        .collect();
    HttpResponse::Ok().json(json!({"object": "list", "data": data, "model": body["model"]}))
}
