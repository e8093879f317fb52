//! The sandbox: JavaScript in QuickJS compiled to WebAssembly, hosted in
//! wasmtime, whose only way out is the operation table.
//!
//! One [`Engine`] and one compiled module per process, an [`InstancePre`],
//! and a fresh [`Store`] per eval with every bound set: linear memory, wall
//! clock (epoch deadline; host calls check it too, and one that could not
//! finish by it does not start), CPU (fuel, which host calls do not spend),
//! host calls and output bytes. The guest's imports are `mirai.call` and minimal
//! WASI, both in [`host`]. `mirai.*` in JavaScript is generated per eval from
//! [`crate::ops::TABLE`], so a new operation needs no change here.

mod host;
mod module;
mod outline;
mod settings;

pub use host::CallRecord;
pub use module::GUEST_WASM;
pub use settings::SandboxLimits;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use wasmtime::{Engine, InstancePre, Store, Trap};

use crate::error::{Error, ErrorCode, Result};
use crate::ops::adapters::{NoteChange, Overlay};
use crate::ops::{begin_draft, file_draft, proposes, Context, Proposed, TABLE};
use host::{MemoryLimit, RunState, Stop};

/// How often the wall clock advances the engine's epoch while evals run.
const TICK: Duration = Duration::from_millis(10);

/// What `/agent/eval`, `mirai eval` and the agent send.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalRequest {
    pub code: String,
    #[serde(default)]
    pub dry_run: bool,
}

/// A program's outcome. Its failure is data (`error`), not an HTTP error.
#[derive(Debug, Serialize)]
pub struct Evaluation {
    pub result: Value,
    pub error: Option<Error>,
    pub console: Vec<String>,
    pub calls: Vec<CallRecord>,
    pub stats: Stats,
    /// A dry run's combined diff per note; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<NoteChange>>,
    /// Review mode: the proposal the program's writes made (one for the whole
    /// program, filed when it ended); absent when it proposed nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposal: Option<Proposed>,
    /// Commits the program's writes made, in order (for the agent's report).
    #[serde(skip)]
    pub commits: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Stats {
    pub wall_ms: f64,
    /// Wasm fuel the program burned (host calls spend none).
    pub fuel: u64,
    pub memory_peak_bytes: usize,
}

/// How the sandbox came up, for the start-up log.
#[derive(Debug)]
pub struct Startup {
    pub module_from_cache: bool,
    pub module_ms: f64,
    pub cache_problem: Option<String>,
}

pub struct Sandbox {
    engine: Engine,
    pre: InstancePre<RunState>,
    limits: SandboxLimits,
    /// `{"operations": [...]}` as the guest's `start` reads it, minus the seed.
    operations: Vec<&'static str>,
    ticker: Arc<Ticker>,
}

impl Sandbox {
    /// Builds the engine, loads the guest (from `cache_dir` when it holds a
    /// good compiled copy; see [`module`]) and links it once.
    pub fn new(
        limits: SandboxLimits,
        cache_dir: Option<&std::path::Path>,
    ) -> Result<(Sandbox, Startup)> {
        let fail = |e: wasmtime::Error| Error::internal(format!("the sandbox cannot start: {e:#}"));
        let mut config = wasmtime::Config::new();
        // Threads are not even compiled in (wasmtime's `threads` feature is off).
        config
            .consume_fuel(true)
            .epoch_interruption(true)
            .wasm_memory64(false)
            .wasm_multi_memory(false);
        let engine = Engine::new(&config).map_err(fail)?;
        let loaded = module::load(&engine, cache_dir).map_err(fail)?;
        let pre = host::linker(&engine)
            .and_then(|linker| linker.instantiate_pre(&loaded.module))
            .map_err(fail)?;
        let ticker = Ticker::start(engine.clone());
        let sandbox = Sandbox {
            engine,
            pre,
            limits,
            operations: TABLE.iter().map(|op| op.name).collect(),
            ticker,
        };
        let startup = Startup {
            module_from_cache: loaded.from_cache,
            module_ms: loaded.ms,
            cache_problem: loaded.cache_problem,
        };
        Ok((sandbox, startup))
    }

    pub fn limits(&self) -> SandboxLimits {
        self.limits
    }

    /// Runs one program. Only a request that cannot run is an `Err`; whatever
    /// the program does ends in an [`Evaluation`].
    pub fn eval(&self, ctx: &Context, request: &EvalRequest) -> Result<Evaluation> {
        if request.code.trim().is_empty() {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                "code is empty: send JavaScript that returns a value, e.g. \"return (await mirai.notes.list()).notes.length\"",
            ));
        }
        let ctx = &ctx.via("sandbox");
        let overlay = request.dry_run.then(|| Arc::new(Overlay::new()));
        // Review mode: every write of the program gathers into one proposal.
        let draft = match overlay {
            None if proposes(ctx) => Some(begin_draft(ctx)?),
            _ => None,
        };
        let run_ctx = match (&overlay, &draft) {
            (Some(overlay), _) => ctx.dry_run(Arc::clone(overlay)),
            (None, Some(draft)) => ctx.drafting(draft, "agent.eval"),
            (None, None) => ctx.clone(),
        };
        let mut evaluation = self.run(&run_ctx, &request.code);
        evaluation.changes = overlay.map(|overlay| overlay.changes());
        if let Some(draft) = draft {
            evaluation.proposal = file_draft(&draft, ctx)?;
        }
        Ok(evaluation)
    }

    /// Runs `code` against `ctx` as it is (its policy, overlay and run id).
    pub fn run(&self, ctx: &Context, code: &str) -> Evaluation {
        let started = Instant::now();
        let mut store = Store::new(
            &self.engine,
            RunState {
                // Host calls end by the deadline too, waiting for other writes included;
                // whoever wrote the program, a model may have: the guards apply (MIRAI_GUARDS).
                ctx: ctx
                    .with_deadline(started + Duration::from_millis(self.limits.timeout_ms))
                    .by_model(),
                memory: MemoryLimit {
                    cap: self.limits.memory_bytes,
                    peak: 0,
                    refused: false,
                },
                max_calls: self.limits.max_calls,
                calls: Vec::new(),
                commits: Vec::new(),
                max_output: self.limits.max_output_bytes,
                console: Vec::new(),
                started,
                deadline: started + Duration::from_millis(self.limits.timeout_ms),
                longest: Default::default(),
            },
        );
        store.limiter(|state| &mut state.memory);
        // Fuel is switched on in `new`, so setting it cannot fail.
        let _ = store.set_fuel(self.limits.fuel);
        store.set_epoch_deadline(self.limits.timeout_ms.div_ceil(TICK.as_millis() as u64) + 1);
        store.epoch_deadline_trap();

        let outcome = {
            let _ticking = self.ticker.run();
            self.run_guest(&mut store, code)
        };

        let fuel = self.limits.fuel - store.get_fuel().unwrap_or(0);
        let state = store.data();
        let console = console_lines(&state.console);
        let (result, error) = match outcome {
            Ok(envelope) => self.settle(&envelope, state),
            Err(trap) => (Value::Null, Some(self.explain(&trap, state))),
        };
        Evaluation {
            result,
            error,
            console,
            calls: state.calls.clone(),
            stats: Stats {
                wall_ms: round_ms(started.elapsed()),
                fuel,
                memory_peak_bytes: state.memory.peak,
            },
            changes: None,
            proposal: None,
            commits: state.commits.clone(),
        }
    }

    /// Instantiates the guest in `store`, hands it the program, and answers the
    /// outcome's JSON text as the guest encoded it.
    fn run_guest(&self, store: &mut Store<RunState>, code: &str) -> wasmtime::Result<Vec<u8>> {
        let instance = self.pre.instantiate(&mut *store)?;
        let alloc = instance.get_typed_func::<u32, u32>(&mut *store, "mirai_alloc")?;
        let run =
            instance.get_typed_func::<(u32, u32, u32, u32, u32), u64>(&mut *store, "mirai_run")?;
        let memory = instance
            .get_memory(&mut *store, "memory")
            .ok_or_else(|| wasmtime::Error::msg("the guest exports no memory"))?;

        let seed = host::random_bytes(8);
        let config = json!({
            "operations": self.operations,
            "seed": [
                u32::from_le_bytes([seed[0], seed[1], seed[2], seed[3]]),
                u32::from_le_bytes([seed[4], seed[5], seed[6], seed[7]]),
            ],
        })
        .to_string();
        let hand_over =
            |store: &mut Store<RunState>, bytes: &[u8]| -> wasmtime::Result<(u32, u32)> {
                let len = u32::try_from(bytes.len())?;
                let ptr = alloc.call(&mut *store, len)?;
                memory.write(&mut *store, ptr as usize, bytes)?;
                Ok((ptr, len))
            };
        let (code_ptr, code_len) = hand_over(store, code.as_bytes())?;
        let (config_ptr, config_len) = hand_over(store, config.as_bytes())?;
        let js_heap = u32::try_from(self.js_heap_bytes()).unwrap_or(u32::MAX);
        let packed = run.call(
            &mut *store,
            (code_ptr, code_len, config_ptr, config_len, js_heap),
        )?;
        let (ptr, len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
        memory
            .data(&*store)
            .get(ptr..ptr + len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| wasmtime::Error::new(Stop::BadMemory))
    }

    /// Turns the guest's `{"ok": v}` / `{"error": {code, message}}` into the
    /// evaluation's result and error, enforcing the output cap on the result.
    fn settle(&self, envelope: &[u8], state: &RunState) -> (Value, Option<Error>) {
        let console_bytes = state.console.len();
        let cap = self.limits.max_output_bytes;
        if console_bytes + envelope.len() > cap {
            return (
                Value::Null,
                Some(Error::new(
                    ErrorCode::SandboxOutputLimit,
                    format!(
                        "the program's result is {} bytes; with {console_bytes} bytes of console output that passes the {cap}-byte output cap (MIRAI_SANDBOX_MAX_OUTPUT_BYTES): return less, or page through it",
                        envelope.len()
                    ),
                )),
            );
        }
        // The guest's JSON.stringify writes what the program returned or threw; what
        // serde_json cannot read back (a lone UTF-16 surrogate such as "\ud800", nesting
        // past its limit) is the program's doing.
        let parsed: Value = match serde_json::from_slice(envelope) {
            Ok(value) => value,
            Err(e) => {
                return (
                    Value::Null,
                    Some(Error::new(
                        ErrorCode::SandboxError,
                        format!("the program's outcome cannot be read as JSON ({e}): return well-formed strings (no lone UTF-16 surrogates) nested less than 128 levels deep"),
                    )),
                )
            }
        };
        match parsed {
            Value::Object(mut fields) => match fields.remove("error") {
                Some(error) => (Value::Null, Some(self.guest_error(&error, state))),
                None => (fields.remove("ok").unwrap_or(Value::Null), None),
            },
            _ => (
                Value::Null,
                Some(Error::internal(
                    "the guest answered something other than an outcome",
                )),
            ),
        }
    }

    /// An error the guest reported: a JavaScript failure or an operation's own error.
    fn guest_error(&self, error: &Value, state: &RunState) -> Error {
        let code = error
            .get("code")
            .and_then(Value::as_str)
            .and_then(ErrorCode::from_wire)
            .unwrap_or(ErrorCode::SandboxError);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the program failed");
        // QuickJS rejects with `null` when it cannot even allocate the error for
        // running out of memory, and drops a promise job it cannot allocate (so
        // the awaited promise never settles: the prelude's `pending`); linear
        // memory past the JavaScript heap limit (it never shrinks) says the heap
        // did fill up.
        let starved = message == "uncaught exception: null"
            || message.starts_with("the program awaited a promise that never settles");
        let heap_filled = starved && state.memory.peak >= self.js_heap_bytes();
        if code == ErrorCode::SandboxMemory || heap_filled {
            return self.out_of_memory();
        }
        Error::new(code, message)
    }

    fn out_of_memory(&self) -> Error {
        Error::new(
            ErrorCode::SandboxMemory,
            format!(
                "the program needed more than the sandbox's {} MiB of memory (MIRAI_SANDBOX_MEMORY_MB)",
                self.limits.memory_bytes / (1024 * 1024)
            ),
        )
    }

    /// QuickJS's own heap limit sits below the store's cap, so running out is
    /// usually a JavaScript error the program can see, not a failed grow.
    fn js_heap_bytes(&self) -> usize {
        self.limits.memory_bytes / 4 * 3
    }

    /// Names the bound a trapped program hit.
    fn explain(&self, trap: &wasmtime::Error, state: &RunState) -> Error {
        if let Some(stop) = trap.downcast_ref::<Stop>() {
            let code = match stop {
                Stop::CallLimit(_) => ErrorCode::SandboxCallLimit,
                Stop::OutputLimit(_) => ErrorCode::SandboxOutputLimit,
                Stop::Deadline { .. } | Stop::WouldOverrun { .. } => ErrorCode::SandboxTimeout,
                Stop::Exit(_) | Stop::BadMemory => ErrorCode::SandboxError,
            };
            return Error::new(code, stop.to_string());
        }
        if state.memory.refused {
            return self.out_of_memory();
        }
        match trap.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => Error::new(
                ErrorCode::SandboxTimeout,
                format!(
                    "the program used its whole CPU budget ({} fuel, MIRAI_SANDBOX_FUEL): look for an endless loop",
                    self.limits.fuel
                ),
            ),
            Some(Trap::Interrupt) => Error::new(
                ErrorCode::SandboxTimeout,
                format!(
                    "the program ran past its {} ms deadline (MIRAI_SANDBOX_TIMEOUT_MS)",
                    self.limits.timeout_ms
                ),
            ),
            Some(Trap::StackOverflow) => Error::new(
                ErrorCode::SandboxError,
                "stack overflow: the program recursed too deeply",
            ),
            Some(other) => Error::new(
                ErrorCode::SandboxError,
                format!("the JavaScript engine stopped: {other}"),
            ),
            None => Error::internal(format!("the sandbox failed: {trap:#}")),
        }
    }
}

/// The console buffer holds one JSON string per line (see guest/src/prelude.js).
fn console_lines(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            serde_json::from_slice::<String>(line)
                .unwrap_or_else(|_| String::from_utf8_lossy(line).into_owned())
        })
        .collect()
}

fn round_ms(elapsed: Duration) -> f64 {
    (elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// Advances the engine's epoch every [`TICK`] while at least one eval runs,
/// and sleeps otherwise. Stops when the sandbox is dropped.
struct Ticker {
    running: AtomicUsize,
    thread: std::sync::OnceLock<Thread>,
}

/// Holds the ticker awake for one eval.
struct Ticking<'a>(&'a Ticker);

impl Ticker {
    #[expect(
        clippy::expect_used,
        reason = "as std::thread::spawn: no thread at start-up is not a state to serve in"
    )]
    fn start(engine: Engine) -> Arc<Ticker> {
        let ticker = Arc::new(Ticker {
            running: AtomicUsize::new(0),
            thread: std::sync::OnceLock::new(),
        });
        let weak: Weak<Ticker> = Arc::downgrade(&ticker);
        let handle = std::thread::Builder::new()
            .name("mirai-sandbox-clock".into())
            .spawn(move || loop {
                let Some(ticker) = weak.upgrade() else { return };
                let busy = ticker.running.load(Ordering::Acquire) > 0;
                drop(ticker);
                if busy {
                    std::thread::sleep(TICK);
                    engine.increment_epoch();
                } else {
                    std::thread::park_timeout(Duration::from_secs(1));
                }
            })
            .expect("the sandbox clock thread starts");
        let _ = ticker.thread.set(handle.thread().clone());
        ticker
    }

    fn run(&self) -> Ticking<'_> {
        if self.running.fetch_add(1, Ordering::AcqRel) == 0 {
            if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
        Ticking(self)
    }
}

impl Drop for Ticking<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}
