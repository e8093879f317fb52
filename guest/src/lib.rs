//! The JavaScript engine mirai's sandbox runs: QuickJS (through rquickjs),
//! compiled to `wasm32-wasip1` and pre-initialized by `guest/build.sh`.
//!
//! The host (`src/sandbox/` in the mirai crate) sees three exports and gives
//! one import:
//! - `wizer-initialize`: builds the runtime and evaluates `prelude.js`; run
//!   once at build time, then snapshotted into the module, so every eval
//!   starts from a ready engine.
//! - `mirai_alloc(len) -> ptr`: a buffer the host fills (inputs, call answers).
//! - `mirai_run(code, config, memory_limit) -> (ptr << 32 | len)`: runs one
//!   program and answers its outcome as JSON, `{"ok": value}` or
//!   `{"error": {"code", "message"}}`.
//! - import `mirai.call(name, request) -> (ptr << 32 | len)`: one operation
//!   of mirai's table; the answer sits in a buffer from `mirai_alloc`.
//!
//! Console lines go to stdout (WASI `fd_write` on fd 1), one JSON string per
//! line, where the host counts them against the output cap.

use std::cell::RefCell;
use std::io::Write;

use rquickjs::context::EvalOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Function, Object, Persistent, Promise, Runtime, Value};

#[link(wasm_import_module = "mirai")]
extern "C" {
    /// Runs operation `name` with the JSON `request`; answers a buffer made by
    /// [`mirai_alloc`] holding `{"ok": response}` or `{"error": {code, message}}`.
    #[link_name = "call"]
    fn host_call(name_ptr: *const u8, name_len: usize, req_ptr: *const u8, req_len: usize) -> u64;
}

/// The engine, made once by `wizer-initialize` and kept in the snapshot.
struct Engine {
    runtime: Runtime,
    context: Context,
    /// The prelude's `start`, `ok`, `fail` and `pending`, out of the program's reach.
    hooks: Persistent<Object<'static>>,
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// The JavaScript half of the guest: console, `mirai.*`, outcome encoding.
const PRELUDE: &str = include_str!("prelude.js");

/// What a program's outcome is when even encoding it failed (memory is gone).
const ENCODING_FAILED: &str = r#"{"error":{"code":"sandbox_memory","message":"the program's outcome could not be encoded: the sandbox ran out of memory"}}"#;

#[export_name = "wizer-initialize"]
pub extern "C" fn initialize() {
    let runtime = Runtime::new().expect("a QuickJS runtime");
    let context = Context::full(&runtime).expect("a QuickJS context");
    let hooks = context.with(|ctx| {
        let native = Object::new(ctx.clone()).expect("an object");
        native
            .set("call", Function::new(ctx.clone(), call).expect("call"))
            .expect("native.call");
        native
            .set("out", Function::new(ctx.clone(), out).expect("out"))
            .expect("native.out");
        let install: Function = ctx
            .eval_with_options(PRELUDE, options("prelude.js"))
            .expect("prelude.js evaluates to a function");
        let hooks: Object = install
            .call((native,))
            .expect("prelude.js answers its hooks");
        Persistent::save(&ctx, hooks)
    });
    ENGINE.with(|engine| {
        *engine.borrow_mut() = Some(Engine {
            runtime,
            context,
            hooks,
        })
    });
}

/// A buffer of `len` bytes the host writes into; ownership passes to whoever
/// the host hands the pointer to.
#[export_name = "mirai_alloc"]
pub extern "C" fn mirai_alloc(len: usize) -> *mut u8 {
    Box::into_raw(vec![0u8; len].into_boxed_slice()) as *mut u8
}

#[export_name = "mirai_run"]
pub extern "C" fn mirai_run(
    code_ptr: *mut u8,
    code_len: usize,
    config_ptr: *mut u8,
    config_len: usize,
    memory_limit: usize,
) -> u64 {
    let code = take_string(code_ptr, code_len);
    let config = take_string(config_ptr, config_len);
    let outcome = ENGINE.with(|engine| {
        let engine = engine.borrow();
        let engine = engine.as_ref().expect("wizer-initialize ran");
        engine.runtime.set_memory_limit(memory_limit);
        engine
            .context
            .with(|ctx| match engine.hooks.clone().restore(&ctx) {
                Ok(hooks) => run(&ctx, &hooks, &code, &config),
                Err(_) => ENCODING_FAILED.to_string(),
            })
    });
    let bytes = outcome.into_bytes().into_boxed_slice();
    let len = bytes.len() as u64;
    let ptr = Box::into_raw(bytes) as *mut u8 as usize as u64;
    (ptr << 32) | len
}

fn run<'js>(ctx: &Ctx<'js>, hooks: &Object<'js>, code: &str, config: &str) -> String {
    let started = hooks
        .get::<_, Function>("start")
        .and_then(|start| start.call::<_, ()>((config,)));
    if started.is_err() {
        return fail(ctx, hooks, ctx.catch());
    }
    // Line 1 of the program stays line 1; `return` and top-level `await` work
    // because the program runs as the body of an async function.
    let wrapped = format!("(async () => {{{code}\n}})()");
    let promise = match ctx.eval_with_options::<Promise, _>(wrapped, options("program.js")) {
        Ok(promise) => promise,
        Err(_) => return fail(ctx, hooks, ctx.catch()),
    };
    // Host calls answer synchronously, so every promise the program can wait
    // for settles while the job queue drains.
    while ctx.execute_pending_job() {}
    match promise.state() {
        PromiseState::Resolved => match promise.result::<Value>() {
            Some(Ok(value)) => encode(ctx, hooks, "ok", value),
            _ => fail(ctx, hooks, ctx.catch()),
        },
        PromiseState::Rejected => {
            // `result` raises the rejection reason as the pending exception.
            let _ = promise.result::<Value>();
            fail(ctx, hooks, ctx.catch())
        }
        PromiseState::Pending => encode(ctx, hooks, "pending", Value::new_undefined(ctx.clone())),
    }
}

fn fail<'js>(ctx: &Ctx<'js>, hooks: &Object<'js>, thrown: Value<'js>) -> String {
    encode(ctx, hooks, "fail", thrown)
}

/// Calls hook `name` to turn a value into the outcome's JSON text.
fn encode<'js>(ctx: &Ctx<'js>, hooks: &Object<'js>, name: &str, value: Value<'js>) -> String {
    let encoded = hooks
        .get::<_, Function>(name)
        .and_then(|hook| hook.call::<_, String>((value,)));
    match encoded {
        Ok(text) => text,
        // Encoding threw (a getter, a toJSON, memory): report that instead.
        Err(_) => {
            let thrown = ctx.catch();
            hooks
                .get::<_, Function>("fail")
                .and_then(|fail| fail.call::<_, String>((thrown,)))
                .unwrap_or_else(|_| ENCODING_FAILED.to_string())
        }
    }
}

fn options(file: &str) -> EvalOptions {
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.promise = false;
    options.filename = Some(file.to_string());
    options
}

/// `native.call(name, request)`: one host call, answered as JSON text.
fn call(name: String, request: String) -> String {
    let packed = unsafe { host_call(name.as_ptr(), name.len(), request.as_ptr(), request.len()) };
    take_string(
        (packed >> 32) as usize as *mut u8,
        (packed & 0xffff_ffff) as usize,
    )
}

/// `native.out(line)`: one console line, already encoded by the prelude.
fn out(line: String) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(line.as_bytes());
    let _ = stdout.flush();
}

/// Takes back a buffer made by [`mirai_alloc`] and filled by the host.
fn take_string(ptr: *mut u8, len: usize) -> String {
    if len == 0 {
        return String::new();
    }
    let bytes = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) };
    String::from_utf8(bytes.into_vec())
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}
