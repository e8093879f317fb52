//! Everything the guest can reach: one `mirai.call` import that dispatches
//! through [`crate::ops`], and the handful of WASI preview-1 functions QuickJS
//! links against, implemented here with nothing granted: no files, no
//! environment, no arguments, no sockets. Standard output is the console.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use wasmtime::{Caller, Extern, Linker, Memory, ResourceLimiter};

use crate::ops::{self, Context, Input};

const WASI: &str = "wasi_snapshot_preview1";
const ERRNO_SUCCESS: i32 = 0;
const ERRNO_BADF: i32 = 8;
const ERRNO_FAULT: i32 = 21;
const ERRNO_INVAL: i32 = 28;
const ERRNO_SPIPE: i32 = 70;
const CLOCK_REALTIME: i32 = 0;
const CLOCK_MONOTONIC: i32 = 1;
/// The clocks the guest sees tick in whole milliseconds: enough for dates and
/// durations, too coarse to time the host.
const CLOCK_GRAIN_NS: u64 = 1_000_000;

/// Why the host stopped a program (carried inside the trap).
#[derive(Debug, thiserror::Error)]
pub enum Stop {
    #[error("the program made more than {0} host calls (MIRAI_SANDBOX_MAX_CALLS)")]
    CallLimit(usize),
    #[error("the program's console output passed the {0}-byte output cap (MIRAI_SANDBOX_MAX_OUTPUT_BYTES)")]
    OutputLimit(usize),
    #[error("the program called exit({0})")]
    Exit(i32),
    #[error("the guest handed the host memory it does not have")]
    BadMemory,
    #[error("the program ran past its {deadline_ms} ms deadline (MIRAI_SANDBOX_TIMEOUT_MS) before it called mirai.{op}")]
    Deadline { deadline_ms: u64, op: String },
    #[error("the program would run past its {deadline_ms} ms deadline (MIRAI_SANDBOX_TIMEOUT_MS): mirai.{op} was not started with {left_ms} ms left, as it took {took_ms} ms earlier in this program")]
    WouldOverrun {
        deadline_ms: u64,
        op: String,
        left_ms: u128,
        took_ms: u128,
    },
}

/// One `mirai.*` call, as the response reports it.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub op: String,
    pub ok: bool,
    pub ms: f64,
    /// The answer's [`outline`](super::outline::outline) when the call
    /// succeeded: for the agent's observations, not the response.
    #[serde(skip)]
    pub answered: Option<String>,
    /// The request as the program sent it (JSON), cut at [`CALL_TEXT_CAP`]
    /// bytes: for the agent's transcript, not the response.
    #[serde(skip)]
    pub request: String,
    /// The answer as the program got it (`{"ok":...}` or `{"error":...}`),
    /// cut at [`CALL_TEXT_CAP`] bytes: for the agent's transcript.
    #[serde(skip)]
    pub answer: String,
}

/// The most bytes of a call's request and of its answer a [`CallRecord`]
/// keeps: the agent's observation cap (`agent::OBSERVATION_CAP`), so a run's
/// transcript holds each call as the model could have seen it at most.
pub const CALL_TEXT_CAP: usize = 4096;

/// `bytes` as text, cut at a character boundary at [`CALL_TEXT_CAP`] bytes,
/// saying how much was left out.
fn cut(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= CALL_TEXT_CAP {
        return text.into_owned();
    }
    let mut end = CALL_TEXT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes]", &text[..end], text.len() - end)
}

/// A Store's data: the run's context, its bounds and what it has used.
pub struct RunState {
    pub ctx: Context,
    pub memory: MemoryLimit,
    pub max_calls: usize,
    pub calls: Vec<CallRecord>,
    /// Commits made by the run's writes.
    pub commits: Vec<String>,
    pub max_output: usize,
    /// Console bytes written so far: one JSON string per line.
    pub console: Vec<u8>,
    pub started: Instant,
    /// When the wall-clock deadline passes; no host call starts after it.
    pub deadline: Instant,
    /// The longest each operation has taken in this run, to tell whether it can
    /// still finish by the deadline.
    pub longest: HashMap<String, Duration>,
}

impl RunState {
    /// The program's deadline, in milliseconds from its start.
    fn deadline_ms(&self) -> u64 {
        self.deadline.duration_since(self.started).as_millis() as u64
    }

    /// Refuses a call that starts after the deadline, or that could not finish by
    /// it because the same operation took longer than what is left earlier in
    /// this run. A call that starts always finishes: a commit is never cut short.
    fn may_start(&self, op: &str) -> Result<(), Stop> {
        let now = Instant::now();
        let deadline_ms = self.deadline_ms();
        let left = self.deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(Stop::Deadline {
                deadline_ms,
                op: op.to_string(),
            });
        }
        match self.longest.get(op) {
            Some(took) if *took > left => Err(Stop::WouldOverrun {
                deadline_ms,
                op: op.to_string(),
                left_ms: left.as_millis(),
                took_ms: took.as_millis(),
            }),
            _ => Ok(()),
        }
    }
}

/// Caps the guest's linear memory and remembers the peak and any refusal.
pub struct MemoryLimit {
    pub cap: usize,
    pub peak: usize,
    pub refused: bool,
}

impl ResourceLimiter for MemoryLimit {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.refused = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // QuickJS's function table is fixed at link time; a little room, no more.
        Ok(desired <= 65_536)
    }

    fn instances(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        1
    }

    fn memories(&self) -> usize {
        1
    }
}

/// The linker every run instantiates through.
pub fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<RunState>> {
    let mut linker = Linker::new(engine);
    linker.func_wrap("mirai", "call", host_call)?;
    linker.func_wrap(WASI, "fd_write", fd_write)?;
    linker.func_wrap(WASI, "fd_close", |_: i32| ERRNO_BADF)?;
    linker.func_wrap(WASI, "fd_seek", |fd: i32, _: i64, _: i32, _: i32| {
        if is_console(fd) {
            ERRNO_SPIPE
        } else {
            ERRNO_BADF
        }
    })?;
    linker.func_wrap(WASI, "fd_fdstat_get", fd_fdstat_get)?;
    linker.func_wrap(
        WASI,
        "environ_sizes_get",
        |mut caller: Caller<'_, RunState>, count: i32, size: i32| {
            let zeros = 0u32.to_le_bytes();
            errno(write(&mut caller, count, &zeros).and_then(|()| write(&mut caller, size, &zeros)))
        },
    )?;
    linker.func_wrap(WASI, "environ_get", |_: i32, _: i32| ERRNO_SUCCESS)?;
    linker.func_wrap(WASI, "clock_time_get", clock_time_get)?;
    linker.func_wrap(WASI, "random_get", random_get)?;
    linker.func_wrap(WASI, "proc_exit", |code: i32| -> wasmtime::Result<()> {
        Err(wasmtime::Error::new(Stop::Exit(code)))
    })?;
    Ok(linker)
}

/// `mirai.call(name, request) -> (ptr << 32 | len)`: one operation, dispatched
/// with the run's context (policy, overlay) exactly as HTTP would.
fn host_call(
    mut caller: Caller<'_, RunState>,
    name_ptr: u32,
    name_len: u32,
    request_ptr: u32,
    request_len: u32,
) -> wasmtime::Result<u64> {
    let state = caller.data();
    if state.calls.len() >= state.max_calls {
        return Err(wasmtime::Error::new(Stop::CallLimit(state.max_calls)));
    }
    let memory = memory(&mut caller)?;
    let name = read(&caller, memory, name_ptr, name_len)?;
    let name = String::from_utf8_lossy(&name).into_owned();
    let request = read(&caller, memory, request_ptr, request_len)?;
    caller
        .data()
        .may_start(&name)
        .map_err(wasmtime::Error::new)?;

    let started = Instant::now();
    let outcome = ops::dispatch(&caller.data().ctx, &name, Input::Body(&request));
    let took = started.elapsed();
    // A call that failed once the deadline had passed (it waited for other
    // writes, say) ends the program as a timeout; nothing was written.
    if outcome.is_err() && Instant::now() >= caller.data().deadline {
        return Err(wasmtime::Error::new(Stop::Deadline {
            deadline_ms: caller.data().deadline_ms(),
            op: name,
        }));
    }
    let ms = took.as_secs_f64() * 1000.0;
    let answer = match &outcome {
        Ok(value) => json!({ "ok": value }),
        Err(err) => err.to_json(),
    };
    let state = caller.data_mut();
    let longest = state.longest.entry(name.clone()).or_default();
    *longest = (*longest).max(took);
    if let Some(commit) = outcome
        .as_ref()
        .ok()
        .and_then(|value| value.get("commit"))
        .and_then(|commit| commit.as_str())
    {
        state.commits.push(commit.to_string());
    }
    let bytes = serde_json::to_vec(&answer)?;
    state.calls.push(CallRecord {
        op: name,
        ok: outcome.is_ok(),
        ms: (ms * 1000.0).round() / 1000.0,
        answered: outcome.as_ref().ok().map(super::outline::outline),
        request: cut(&request),
        answer: cut(&bytes),
    });

    let len = u32::try_from(bytes.len()).map_err(|_| wasmtime::Error::new(Stop::BadMemory))?;
    let alloc = caller
        .get_export("mirai_alloc")
        .and_then(Extern::into_func)
        .ok_or_else(|| wasmtime::Error::msg("the guest exports no mirai_alloc"))?
        .typed::<u32, u32>(&caller)?;
    let ptr = alloc.call(&mut caller, len)?;
    memory
        .write(&mut caller, ptr as usize, &bytes)
        .map_err(|_| wasmtime::Error::new(Stop::BadMemory))?;
    Ok((u64::from(ptr) << 32) | u64::from(len))
}

/// Console output: fd 1 and 2 append to the run's capped buffer.
fn fd_write(
    mut caller: Caller<'_, RunState>,
    fd: i32,
    iovs: u32,
    iovs_len: u32,
    written_ptr: i32,
) -> wasmtime::Result<i32> {
    if !is_console(fd) {
        return Ok(ERRNO_BADF);
    }
    let memory = memory(&mut caller)?;
    let vectors = read(&caller, memory, iovs, iovs_len.saturating_mul(8))?;
    let mut bytes = Vec::new();
    for vector in vectors.chunks_exact(8) {
        let ptr = u32::from_le_bytes([vector[0], vector[1], vector[2], vector[3]]);
        let len = u32::from_le_bytes([vector[4], vector[5], vector[6], vector[7]]);
        bytes.extend(read(&caller, memory, ptr, len)?);
    }
    let state = caller.data_mut();
    if state.console.len() + bytes.len() > state.max_output {
        return Err(wasmtime::Error::new(Stop::OutputLimit(state.max_output)));
    }
    state.console.extend_from_slice(&bytes);
    let written = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    Ok(errno(write(
        &mut caller,
        written_ptr,
        &written.to_le_bytes(),
    )))
}

/// Describes fd 1 and 2 as character devices; every other descriptor is bad.
fn fd_fdstat_get(mut caller: Caller<'_, RunState>, fd: i32, stat_ptr: i32) -> i32 {
    if !is_console(fd) {
        return ERRNO_BADF;
    }
    const CHARACTER_DEVICE: u8 = 2;
    const RIGHT_FD_WRITE: u64 = 1 << 6;
    let mut stat = [0u8; 24];
    stat[0] = CHARACTER_DEVICE;
    stat[8..16].copy_from_slice(&RIGHT_FD_WRITE.to_le_bytes());
    errno(write(&mut caller, stat_ptr, &stat))
}

fn clock_time_get(mut caller: Caller<'_, RunState>, clock: i32, _precision: i64, out: i32) -> i32 {
    let ns = match clock {
        CLOCK_REALTIME => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        CLOCK_MONOTONIC => caller.data().started.elapsed().as_nanos() as u64,
        _ => return ERRNO_INVAL,
    };
    let coarse = ns - ns % CLOCK_GRAIN_NS;
    errno(write(&mut caller, out, &coarse.to_le_bytes()))
}

fn random_get(mut caller: Caller<'_, RunState>, buf: i32, len: i32) -> i32 {
    let Ok(len) = usize::try_from(len) else {
        return ERRNO_INVAL;
    };
    let bytes = random_bytes(len);
    errno(write(&mut caller, buf, &bytes))
}

/// Unpredictable bytes from the standard library's randomly keyed SipHash:
/// enough for QuickJS's hash seeds and `Math.random`, which is all the guest uses them for.
pub fn random_bytes(len: usize) -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    let keys = std::collections::hash_map::RandomState::new();
    let mut bytes = Vec::with_capacity(len + 8);
    let mut counter = 0u64;
    while bytes.len() < len {
        let mut hasher = keys.build_hasher();
        hasher.write_u64(counter);
        bytes.extend_from_slice(&hasher.finish().to_le_bytes());
        counter += 1;
    }
    bytes.truncate(len);
    bytes
}

fn is_console(fd: i32) -> bool {
    fd == 1 || fd == 2
}

fn errno(written: Result<(), ()>) -> i32 {
    match written {
        Ok(()) => ERRNO_SUCCESS,
        Err(()) => ERRNO_FAULT,
    }
}

fn memory(caller: &mut Caller<'_, RunState>) -> wasmtime::Result<Memory> {
    caller
        .get_export("memory")
        .and_then(Extern::into_memory)
        .ok_or_else(|| wasmtime::Error::msg("the guest exports no memory"))
}

/// Copies `len` bytes at `ptr` out of the guest, refusing ranges it does not have.
fn read(
    caller: &Caller<'_, RunState>,
    memory: Memory,
    ptr: u32,
    len: u32,
) -> wasmtime::Result<Vec<u8>> {
    let start = ptr as usize;
    let end = start.saturating_add(len as usize);
    memory
        .data(caller)
        .get(start..end)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| wasmtime::Error::new(Stop::BadMemory))
}

fn write(caller: &mut Caller<'_, RunState>, ptr: i32, bytes: &[u8]) -> Result<(), ()> {
    let memory = memory(caller).map_err(|_| ())?;
    memory
        .write(caller, ptr as u32 as usize, bytes)
        .map_err(|_| ())
}
