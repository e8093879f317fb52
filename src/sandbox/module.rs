//! The guest module: the committed, pre-initialized QuickJS build
//! (`guest/mirai-guest.wasm`), compiled once per process, or loaded from a
//! cache of mirai's own compiled modules keyed by the guest's bytes and the
//! engine's compatibility hash.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Instant;

use wasmtime::{Engine, Module};

/// The guest, as `guest/build.sh` built it.
pub const GUEST_WASM: &[u8] = include_bytes!("../../guest/mirai-guest.wasm");

/// How the module was obtained, for the start-up log line.
#[derive(Debug)]
pub struct Loaded {
    pub module: Module,
    pub from_cache: bool,
    pub ms: f64,
    /// Why the compiled module could not be cached (the next start compiles again).
    pub cache_problem: Option<String>,
}

pub fn load(engine: &Engine, cache_dir: &Path) -> wasmtime::Result<Loaded> {
    let started = Instant::now();
    let cached = cache_file(engine, cache_dir);
    if cached.is_file() {
        // SAFETY: the file is one mirai serialized itself with an engine of this
        // exact configuration (the name carries its compatibility hash), in the
        // operator's cache folder, which no caller can write to. A file that does
        // not deserialize is replaced below.
        if let Ok(module) = unsafe { Module::deserialize_file(engine, &cached) } {
            return Ok(Loaded {
                module,
                from_cache: true,
                ms: elapsed_ms(started),
                cache_problem: None,
            });
        }
    }
    let module = Module::new(engine, GUEST_WASM)?;
    let cache_problem = store(&module, &cached).err();
    Ok(Loaded {
        module,
        from_cache: false,
        ms: elapsed_ms(started),
        cache_problem,
    })
}

/// `guest-<hash>.cwasm`, where the hash covers everything the compiled code depends on.
fn cache_file(engine: &Engine, cache_dir: &Path) -> PathBuf {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    GUEST_WASM.hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    cache_dir.join(format!("guest-{:016x}.cwasm", hasher.finish()))
}

fn store(module: &Module, path: &Path) -> Result<(), String> {
    let bytes = module.serialize().map_err(|e| e.to_string())?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Written aside and renamed, so a concurrent start never reads half a file.
    let partial = path.with_extension(format!("{}.partial", std::process::id()));
    std::fs::write(&partial, bytes)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            format!("{}: {e}", path.display())
        })
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wall: the guest reaches the host through `mirai.call` and these
    /// nine WASI functions, all implemented in `host.rs` with nothing granted.
    #[test]
    fn the_guest_imports_one_host_call_and_minimal_wasi_only() {
        let engine = Engine::default();
        let module = Module::new(&engine, GUEST_WASM).expect("the committed guest compiles");
        let mut imports: Vec<String> = module
            .imports()
            .map(|import| format!("{}.{}", import.module(), import.name()))
            .collect();
        imports.sort();
        let wasi = |name: &str| format!("wasi_snapshot_preview1.{name}");
        let mut expected = vec!["mirai.call".to_string()];
        expected.extend(
            [
                "clock_time_get",
                "environ_get",
                "environ_sizes_get",
                "fd_close",
                "fd_fdstat_get",
                "fd_seek",
                "fd_write",
                "proc_exit",
                "random_get",
            ]
            .map(wasi),
        );
        assert_eq!(imports, expected);
    }
}
