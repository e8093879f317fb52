//! Pre-initializes mirai's guest: instantiates the freshly built QuickJS
//! module, runs its `wizer-initialize` export (runtime, context, prelude.js),
//! and writes the initialized state out as a new module with wasmtime-wizer,
//! so every eval starts from a ready engine instead of building one.
//!
//! Run by `guest/build.sh`: `cargo run --example guest-preinit -- IN.wasm OUT.wasm`.
//! The clock reads zero and randomness is all zeros during initialization, so
//! the output bytes depend only on the input.

#![allow(clippy::expect_used)] // a build step run by hand: a failed step fails the build

use futures_util::FutureExt;
use wasmtime::{Caller, Engine, Extern, Instance, Linker, Module, Store, Val};
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

const WASI: &str = "wasi_snapshot_preview1";

fn main() -> wasmtime::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: guest-preinit IN.wasm OUT.wasm");
        std::process::exit(2);
    };
    let wasm = std::fs::read(input)?;
    let wizer = Wizer::new();
    let (cx, instrumented) = wizer.instrument(&wasm)?;

    let engine = Engine::default();
    let module = Module::new(&engine, &instrumented)?;
    let mut linker = Linker::new(&engine);
    linker.func_wrap(
        WASI,
        "clock_time_get",
        |mut caller: Caller<'_, ()>, _clock: i32, _precision: i64, out: i32| -> i32 {
            write_guest(&mut caller, out, &0u64.to_le_bytes())
        },
    )?;
    linker.func_wrap(
        WASI,
        "random_get",
        |mut caller: Caller<'_, ()>, buf: i32, len: i32| -> i32 {
            write_guest(&mut caller, buf, &vec![0u8; len as usize])
        },
    )?;
    // Initialization needs nothing else; any other import it reached would trap.
    linker.define_unknown_imports_as_traps(&module)?;

    let mut store = Store::new(&engine, ());
    let instance = linker.instantiate(&mut store, &module)?;
    if let Ok(reactor_init) = instance.get_typed_func::<(), ()>(&mut store, "_initialize") {
        reactor_init.call(&mut store, ())?;
    }
    instance
        .get_typed_func::<(), ()>(&mut store, wizer.get_init_func())?
        .call(&mut store, ())?;

    let mut state = Snapshot {
        store: &mut store,
        instance,
    };
    let initialized = wizer
        .snapshot(&cx, &mut state)
        .now_or_never()
        .expect("reading a wasmtime instance completes at once")?;
    std::fs::write(output, initialized)?;
    Ok(())
}

/// Writes `bytes` into the guest's memory at `at`; WASI's errno 0 or EFAULT (21).
fn write_guest(caller: &mut Caller<'_, ()>, at: i32, bytes: &[u8]) -> i32 {
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        return 21;
    };
    match memory.write(caller, at as u32 as usize, bytes) {
        Ok(()) => 0,
        Err(_) => 21,
    }
}

/// The instance's state, as wasmtime-wizer reads it to write the snapshot.
struct Snapshot<'a> {
    store: &'a mut Store<()>,
    instance: Instance,
}

impl InstanceState for Snapshot<'_> {
    async fn global_get(&mut self, name: &str, _type_hint: ValType) -> SnapshotVal {
        let global = self
            .instance
            .get_global(&mut *self.store, name)
            .expect("wizer asks only for globals it exported");
        match global.get(&mut *self.store) {
            Val::I32(x) => SnapshotVal::I32(x),
            Val::I64(x) => SnapshotVal::I64(x),
            Val::F32(x) => SnapshotVal::F32(x),
            Val::F64(x) => SnapshotVal::F64(x),
            Val::V128(x) => SnapshotVal::V128(x.as_u128()),
            other => panic!("global {name} holds a reference ({other:?}); the guest has none"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        let memory = self
            .instance
            .get_memory(&mut *self.store, name)
            .expect("wizer asks only for memories it exported");
        contents(memory.data(&*self.store))
    }
}
