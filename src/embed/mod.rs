//! Semantic search: chunk embeddings from an OpenAI-compatible API
//! ([`client`]), kept in `.mirai/vectors.bin` ([`vectors`]), searched exactly
//! and fused with the lexical ranking ([`search`]).
//!
//! [`Embeddings`] owns a background worker that embeds new and changed
//! chunks in batches after every change of the live index (applies,
//! rebuilds, outside edits), so no write or rebuild waits for the embedding
//! server; a chunk whose text is unchanged is never embedded twice (vectors
//! are keyed by a hash of the text). A query embeds its text with a short
//! timeout of its own, behind a circuit breaker and an LRU cache; whenever
//! that cannot give a vector, or no chunk has one yet, a semantic or hybrid
//! query answers lexical results and says why (`degraded`).

pub mod client;
pub mod search;
mod settings;
pub mod vectors;

pub use settings::EmbedConfig;

use std::collections::{BTreeSet, HashSet};
use std::num::NonZeroUsize;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use client::{Client, Kind};
use search::{fuse, Fused, KeyCache, Matrix, DEFAULT_FUSION};
use vectors::{Key, Vectors};

use crate::index::live::LiveIndex;
use crate::index::{ChunkRef, Hit, Index};
use crate::notes::Notes;

/// How many chunks each side of a hybrid query ranks before fusing.
pub const FUSION_DEPTH: usize = 100;
/// Query vectors kept (by query text).
const CACHE_ENTRIES: usize = 1024;
const CACHE_SIZE: NonZeroUsize = match NonZeroUsize::new(CACHE_ENTRIES) {
    Some(size) => size,
    None => panic!("CACHE_ENTRIES is positive"),
};
/// Consecutive failed query embeddings that open the circuit breaker.
const BREAKER_FAILURES: u32 = 3;
/// How long an open breaker answers without calling the server.
const BREAKER_OPEN: Duration = Duration::from_secs(30);
/// The worker's waits after a failed batch: doubling from the first to the last.
const RETRY_FIRST: Duration = Duration::from_secs(2);
const RETRY_MAX: Duration = Duration::from_secs(120);
/// How often the worker wakes without a change: to retry after a failure,
/// and to end once the embeddings are dropped.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// While embedding a large backlog, search sees new vectors this often.
const PUBLISH_EVERY: Duration = Duration::from_secs(2);

/// How a query ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Lexical,
    Semantic,
    Hybrid,
}

impl Mode {
    pub fn parse(raw: &str) -> Option<Mode> {
        match raw.trim() {
            "lexical" => Some(Mode::Lexical),
            "semantic" => Some(Mode::Semantic),
            "hybrid" => Some(Mode::Hybrid),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Lexical => "lexical",
            Mode::Semantic => "semantic",
            Mode::Hybrid => "hybrid",
        }
    }
}

/// A query's answer: the mode that ranked it (lexical when semantic ranking
/// was asked for but could not be had, with why in `degraded`).
#[derive(Debug, Clone)]
pub struct Answer {
    pub mode: Mode,
    pub degraded: Option<String>,
    pub hits: Vec<Ranked>,
}

/// One hit and why it is there.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub hit: Hit,
    pub semantic_score: Option<f64>,
    pub lexical_rank: Option<usize>,
    pub semantic_rank: Option<usize>,
}

/// A lexical answer (`degraded`: why it is not the semantic one asked for).
pub fn lexical(
    index: &Index,
    q: &str,
    limit: usize,
    path_prefix: Option<&str>,
    degraded: Option<String>,
) -> Answer {
    Answer {
        mode: Mode::Lexical,
        degraded,
        hits: index
            .query(q, limit, path_prefix)
            .into_iter()
            .map(|hit| Ranked {
                hit,
                semantic_score: None,
                lexical_rank: None,
                semantic_rank: None,
            })
            .collect(),
    }
}

/// What `index.status` reports about embeddings.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub model: String,
    pub chunks_embedded: usize,
    pub chunks_pending: usize,
    pub last_error: Option<String>,
}

/// The worker's own state: only it (or a CLI run in its place) takes it.
struct Work {
    /// `None` until the file has been read.
    vectors: Option<Vectors>,
    keys: KeyCache,
    /// The index generation the matrix was built for.
    matrix_generation: Option<u64>,
    /// Vectors arrived since the matrix was built.
    matrix_behind: bool,
    /// Vectors differ from the file.
    dirty: bool,
}

/// The worker's wake-up: set by every change of the index.
#[derive(Default)]
struct Wake {
    poked: Mutex<Option<()>>,
    signal: Condvar,
}

impl Wake {
    fn poke(&self) {
        *lock(&self.poked) = Some(());
        self.signal.notify_all();
    }

    /// Waits up to `timeout` for a poke; whether one came (and clears it).
    fn wait(&self, timeout: Duration) -> bool {
        let guard = lock(&self.poked);
        let (mut guard, _) = self
            .signal
            .wait_timeout_while(guard, timeout, |poked| poked.is_none())
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        guard.take().is_some()
    }
}

/// The circuit breaker of query embeddings.
#[derive(Debug, Default)]
struct Breaker {
    failures: u32,
    open_until: Option<Instant>,
}

pub struct Embeddings {
    client: Client,
    index: Arc<LiveIndex>,
    notes: Notes,
    /// False when `.mirai/vectors.bin` is tracked in git: then it is neither
    /// read (anyone who can push could have written it) nor written.
    file_trusted: bool,
    work: Mutex<Work>,
    status: Mutex<Status>,
    matrix: RwLock<Arc<Matrix>>,
    /// Set by a change of the index; the worker waits on it.
    wake: Arc<Wake>,
    cache: Mutex<lru::LruCache<String, Arc<[f32]>>>,
    breaker: Mutex<Breaker>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Embeddings {
    pub fn new(
        config: EmbedConfig,
        secrets: crate::redact::Secrets,
        notes: Notes,
        index: Arc<LiveIndex>,
    ) -> Embeddings {
        let tracked = crate::repo::tracked_under(notes.root(), ".mirai/");
        let file_trusted = !tracked
            .iter()
            .any(|p| *p == format!(".mirai/{}", vectors::FILE_NAME));
        Embeddings {
            status: Mutex::new(Status {
                model: config.model.clone(),
                chunks_embedded: 0,
                chunks_pending: 0,
                last_error: None,
            }),
            client: Client::new(config, secrets),
            index,
            notes,
            file_trusted,
            work: Mutex::new(Work {
                vectors: None,
                keys: KeyCache::default(),
                matrix_generation: None,
                matrix_behind: false,
                dirty: false,
            }),
            matrix: RwLock::new(Arc::new(Matrix::default())),
            wake: Arc::new(Wake::default()),
            cache: Mutex::new(lru::LruCache::new(CACHE_SIZE)),
            breaker: Mutex::new(Breaker::default()),
        }
    }

    pub fn status(&self) -> Status {
        lock(&self.status).clone()
    }

    /// Starts the background worker: woken by every change of the index,
    /// retrying failed batches with a growing wait. It holds the embeddings
    /// only while it works, and ends once they are dropped.
    pub fn start(self: &Arc<Self>) {
        let wake = self.wake.clone();
        self.index.on_change(move || wake.poke());
        let weak = Arc::downgrade(self);
        let wake = self.wake.clone();
        // The first look, at start-up.
        wake.poke();
        std::thread::spawn(move || {
            let mut retry = RETRY_FIRST;
            let mut wait_until: Option<Instant> = None;
            loop {
                let poked = wake.wait(LOOK_EVERY);
                let Some(embeddings) = weak.upgrade() else {
                    return;
                };
                if !poked && wait_until.is_none_or(|t| Instant::now() < t) {
                    continue;
                }
                wait_until = match embeddings.step(&mut |_| {}) {
                    Ok(()) => {
                        retry = RETRY_FIRST;
                        None
                    }
                    Err(e) => {
                        log::warn!(
                            "embedding chunks failed (trying again in {} s): {e}",
                            retry.as_secs()
                        );
                        let at = Instant::now() + retry;
                        retry = (retry * 2).min(RETRY_MAX);
                        Some(at)
                    }
                };
            }
        });
    }

    /// Embeds every chunk of the index that has no vector yet (the CLI's
    /// rebuild waits here), calling `progress(embedded, total)` as batches land.
    pub fn embed_all(&self, progress: &mut dyn FnMut(&Status)) -> Result<(), String> {
        loop {
            self.step(progress)?;
            if self.status().chunks_pending == 0 {
                return Ok(());
            }
        }
    }

    /// One round of the worker: the chunks of the index now, those without a
    /// vector embedded batch by batch (stopping early when the index changes),
    /// the matrix search uses rebuilt, vectors of chunks that are gone
    /// dropped and the file written.
    fn step(&self, progress: &mut dyn FnMut(&Status)) -> Result<(), String> {
        let mut work = lock(&self.work);
        let work = &mut *work;
        if work.vectors.is_none() {
            work.vectors = Some(self.load());
        }
        let generation = self.index.generation();
        // Nothing loaded yet (no artifact, no query so far): the first load pokes again.
        let Some(index) = self.index.current() else {
            return Ok(());
        };
        let keyed = work.keys.keyed(&index);
        let Some(vectors) = work.vectors.as_mut() else {
            return Ok(()); // loaded above: never here
        };
        let mut missing: Vec<(Key, &str)> = Vec::new();
        let mut wanted: HashSet<Key> = HashSet::new();
        for k in &keyed {
            if !vectors.map.contains_key(&k.key) && wanted.insert(k.key) {
                missing.push((k.key, k.text));
            }
        }
        let count = |vectors: &Vectors| {
            keyed
                .iter()
                .filter(|k| vectors.map.contains_key(&k.key))
                .count()
        };
        self.set_counts(count(vectors), keyed.len());
        progress(&self.status());
        let publish = |work_generation: &mut Option<u64>, vectors: &Vectors| {
            *self.matrix.write().unwrap_or_else(|p| p.into_inner()) =
                Arc::new(Matrix::build(&keyed, vectors));
            *work_generation = Some(generation);
        };
        if work.matrix_generation != Some(generation) || work.matrix_behind {
            publish(&mut work.matrix_generation, vectors);
            work.matrix_behind = false;
        }
        let mut published = Instant::now();
        let mut failure = None;
        for batch in missing.chunks(self.client.config().batch) {
            if self.index.generation() != generation {
                break;
            }
            let texts: Vec<&str> = batch.iter().map(|(_, text)| *text).collect();
            match self.client.embed(&texts, Kind::Passage) {
                Ok(got) => {
                    for ((key, _), vector) in batch.iter().zip(got) {
                        vectors.insert(*key, vector);
                    }
                    work.dirty = true;
                    work.matrix_behind = true;
                    lock(&self.status).last_error = None;
                    self.set_counts(count(vectors), keyed.len());
                    progress(&self.status());
                }
                Err(e) => {
                    lock(&self.status).last_error = Some(e.clone());
                    failure = Some(e);
                    break;
                }
            }
            if published.elapsed() >= PUBLISH_EVERY {
                publish(&mut work.matrix_generation, vectors);
                work.matrix_behind = false;
                published = Instant::now();
            }
        }
        if work.matrix_behind {
            publish(&mut work.matrix_generation, vectors);
            work.matrix_behind = false;
        }
        if self.index.generation() == generation {
            // Only the vectors of chunks the index holds are kept.
            let live: BTreeSet<Key> = keyed.iter().map(|k| k.key).collect();
            let before = vectors.map.len();
            vectors.map.retain(|key, _| live.contains(key));
            work.dirty |= vectors.map.len() != before;
        }
        if work.dirty && self.file_trusted {
            match self.notes.state_dir(true) {
                Ok(Some(state)) => match vectors.write(&state) {
                    Ok(()) => work.dirty = false,
                    Err(e) => log::warn!("could not write .mirai/{}: {e}", vectors::FILE_NAME),
                },
                Ok(None) => {}
                Err(e) => log::warn!("{}", e.message),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn set_counts(&self, embedded: usize, total: usize) {
        let mut status = lock(&self.status);
        status.chunks_embedded = embedded;
        status.chunks_pending = total - embedded;
    }

    /// The vectors file, when it was made by this model and recipe; else none.
    fn load(&self) -> Vectors {
        let config = self.client.config();
        let recipe = self.client.recipe();
        let fresh = Vectors::new(&config.model, &recipe);
        if !self.file_trusted {
            log::warn!(
                ".mirai/{} is tracked in git; mirai neither reads nor writes it (git rm --cached it)",
                vectors::FILE_NAME
            );
            return fresh;
        }
        let state = match self.notes.state_dir(false) {
            Ok(Some(state)) => state,
            _ => return fresh,
        };
        match Vectors::read(&state) {
            Ok(Some(found)) if found.model == config.model && found.recipe == recipe => found,
            Ok(Some(found)) => {
                log::info!(
                    "the stored chunk vectors were made by {} ({}); embedding again with {}",
                    found.model,
                    found.recipe,
                    config.model
                );
                fresh
            }
            Ok(None) => fresh,
            Err(e) => {
                log::warn!(
                    ".mirai/{} cannot be used ({e}); embedding again",
                    vectors::FILE_NAME
                );
                fresh
            }
        }
    }

    /// The query's vector: cached, else one call within the query timeout,
    /// unless the breaker is open.
    fn query_vector(&self, q: &str) -> Result<Arc<[f32]>, String> {
        if let Some(v) = lock(&self.cache).get(q) {
            return Ok(v.clone());
        }
        {
            let breaker = lock(&self.breaker);
            if let Some(until) = breaker.open_until {
                let left = until.saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    return Err(format!(
                        "the embedding server failed {} times in a row; it is tried again in {} s",
                        breaker.failures,
                        left.as_secs() + 1
                    ));
                }
            }
        }
        match self.client.embed(&[q], Kind::Query) {
            Ok(mut got) => {
                *lock(&self.breaker) = Breaker::default();
                let vector: Arc<[f32]> = got.swap_remove(0).into();
                lock(&self.cache).put(q.to_string(), vector.clone());
                Ok(vector)
            }
            Err(e) => {
                let mut breaker = lock(&self.breaker);
                breaker.failures += 1;
                if breaker.failures >= BREAKER_FAILURES {
                    breaker.open_until = Some(Instant::now() + BREAKER_OPEN);
                }
                Err(e)
            }
        }
    }

    /// Ranks `q` over `index` (the live one, or a dry run's copy) in `mode`.
    pub fn search(
        &self,
        index: &Index,
        q: &str,
        limit: usize,
        path_prefix: Option<&str>,
        mode: Mode,
    ) -> Answer {
        if mode == Mode::Lexical {
            return lexical(index, q, limit, path_prefix, None);
        }
        let matrix = self
            .matrix
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if matrix.is_empty() {
            let pending = self.status().chunks_pending;
            let why = format!(
                "no chunk has a vector yet ({pending} waiting for the embedding server; index.status shows progress)"
            );
            return lexical(index, q, limit, path_prefix, Some(why));
        }
        let query = match self.query_vector(q) {
            Ok(query) => query,
            Err(e) => {
                let why = format!("the query could not be embedded: {e}");
                return lexical(index, q, limit, path_prefix, Some(why));
            }
        };
        if query.len() != matrix.dimension() {
            let why = format!(
                "the embedding server answers vectors of {} dimensions, the stored ones have {}; chunks are being embedded again",
                query.len(),
                matrix.dimension()
            );
            return lexical(index, q, limit, path_prefix, Some(why));
        }
        let depth = FUSION_DEPTH.max(limit);
        let fused: Vec<Fused> = match mode {
            Mode::Semantic => matrix
                .nearest(index, &query, depth, path_prefix)
                .into_iter()
                .take(limit)
                .enumerate()
                .map(|(rank, (score, chunk))| Fused {
                    chunk,
                    score,
                    lexical_rank: None,
                    semantic_rank: Some(rank + 1),
                    semantic_score: Some(score),
                })
                .collect(),
            _ => {
                // The two sides on two cores: the scan of the vectors beside the lexical ranking.
                let (semantic, lexical) = std::thread::scope(|scope| {
                    let semantic =
                        scope.spawn(|| matrix.nearest(index, &query, depth, path_prefix));
                    let lexical = index.ranked(q, depth, path_prefix);
                    let semantic = semantic
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    (semantic, lexical)
                });
                fuse(&lexical, &semantic, DEFAULT_FUSION, limit, |chunk| {
                    matrix.has(index, chunk)
                })
            }
        };
        let refs: Vec<(f64, ChunkRef)> = fused.iter().map(|f| (f.score, f.chunk)).collect();
        let hits = index.hits(q, &refs);
        Answer {
            mode,
            degraded: None,
            hits: hits
                .into_iter()
                .zip(fused)
                .filter_map(|(hit, f)| {
                    Some(Ranked {
                        hit: hit?,
                        semantic_score: f.semantic_score,
                        lexical_rank: f.lexical_rank,
                        semantic_rank: f.semantic_rank,
                    })
                })
                .collect(),
        }
    }
}
