//! The guest module: the committed, pre-initialized QuickJS build
//! (`guest/mirai-guest.wasm`), compiled once per process, or loaded from a
//! cache of mirai's own compiled modules (ARCHITECTURE.md, "Notes are data,
//! never code").
//!
//! A compiled module is native code, and loading one trusts its bytes, so the
//! cache is guarded: it lives outside the notes root (configuration refuses a
//! cache inside it), its folder and files must belong to the user mirai runs
//! as and be writable by nobody else, and a module is loaded only when its
//! SHA-256 matches the one recorded beside it when mirai compiled it.
//! Otherwise the guest is compiled again from the embedded bytes.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

/// The guest, as `guest/build.sh` built it.
pub const GUEST_WASM: &[u8] = include_bytes!("../../guest/mirai-guest.wasm");

/// How the module was obtained, for the start-up log line.
#[derive(Debug)]
pub struct Loaded {
    pub module: Module,
    pub from_cache: bool,
    pub ms: f64,
    /// Why the cache was not used, or the compiled module not kept in it.
    pub cache_problem: Option<String>,
}

/// Loads the guest from `cache_dir` when it holds a good compiled copy, else
/// compiles it (and keeps the result there for the next start).
pub fn load(engine: &Engine, cache_dir: Option<&Path>) -> wasmtime::Result<Loaded> {
    let started = Instant::now();
    let mut cache_problem = None;
    let cache = match cache_dir.map(open_cache) {
        Some(Ok(dir)) => Some(dir),
        Some(Err(problem)) => {
            cache_problem = Some(problem);
            None
        }
        None => None,
    };
    if let Some(dir) = &cache {
        let cached = cache_file(engine, dir);
        match read_verified(&cached) {
            Ok(Some(bytes)) => {
                // SAFETY: these bytes are the ones mirai serialized itself with an
                // engine of this exact configuration (the name carries its
                // compatibility hash): the file and its folder belong to this user
                // and nobody else may write them, and their SHA-256 is the one
                // recorded when they were written.
                #[allow(unsafe_code)]
                let loaded = unsafe { Module::deserialize(engine, &bytes) };
                if let Ok(module) = loaded {
                    return Ok(Loaded {
                        module,
                        from_cache: true,
                        ms: elapsed_ms(started),
                        cache_problem: None,
                    });
                }
            }
            Ok(None) => {}
            Err(problem) => cache_problem = Some(problem),
        }
    }
    let module = Module::new(engine, GUEST_WASM)?;
    if let Some(dir) = &cache {
        if let Err(problem) = store(&module, &cache_file(engine, dir)) {
            cache_problem = Some(problem);
        }
    }
    Ok(Loaded {
        module,
        from_cache: false,
        ms: elapsed_ms(started),
        cache_problem,
    })
}

/// Creates the cache folder (private to this user) or checks the one there.
fn open_cache(dir: &Path) -> Result<PathBuf, String> {
    if let Err(e) = fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        return Err(format!("cannot create {}: {e}", dir.display()));
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a folder", dir.display()));
    }
    check_private(&meta).map_err(|why| format!("{} is not used: {why}", dir.display()))?;
    Ok(dir.to_path_buf())
}

/// Only files of this user that nobody else may change are trusted.
fn check_private(meta: &fs::Metadata) -> Result<(), String> {
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "it belongs to uid {}, not to uid {me} that mirai runs as",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "its group or others may write to it (mode {:o}); chmod go-w it",
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

/// `guest-<hash>.cwasm`, where the hash covers everything the compiled code depends on.
fn cache_file(engine: &Engine, cache_dir: &Path) -> PathBuf {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    GUEST_WASM.hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    cache_dir.join(format!("guest-{:016x}.cwasm", hasher.finish()))
}

/// The file beside a compiled module that records its SHA-256 (hex).
fn digest_file(module_file: &Path) -> PathBuf {
    module_file.with_extension("cwasm.sha256")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The cached module's bytes when they are present, private and match their
/// recorded digest; `Ok(None)` when there is nothing (good) to load.
fn read_verified(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let digest_path = digest_file(path);
    for file in [path, digest_path.as_path()] {
        match fs::symlink_metadata(file) {
            Ok(meta) if meta.is_file() => check_private(&meta)
                .map_err(|why| format!("{} is not used: {why}", file.display()))?,
            Ok(_) => return Err(format!("{} is not a regular file", file.display())),
            Err(_) => return Ok(None),
        }
    }
    let (Ok(bytes), Ok(recorded)) = (fs::read(path), fs::read_to_string(&digest_path)) else {
        return Ok(None);
    };
    Ok((sha256_hex(&bytes) == recorded.trim()).then_some(bytes))
}

fn store(module: &Module, path: &Path) -> Result<(), String> {
    let bytes = module.serialize().map_err(|e| e.to_string())?;
    write_private(path, &bytes)?;
    write_private(&digest_file(path), sha256_hex(&bytes).as_bytes())
}

/// Written aside (mode 0600) and renamed, so a concurrent start never reads half a file.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let partial = path.with_extension(format!("{}.partial", std::process::id()));
    let result = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| fs::rename(&partial, path));
    result.map_err(|e| {
        let _ = fs::remove_file(&partial);
        format!("{}: {e}", path.display())
    })
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_used_only_when_private_and_matching_its_digest() {
        use std::os::unix::fs::PermissionsExt;
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let first = load(&engine, Some(&cache)).unwrap();
        assert!(!first.from_cache);
        assert_eq!(first.cache_problem, None);
        assert!(load(&engine, Some(&cache)).unwrap().from_cache);

        // Tampered bytes (a flipped byte, or a file swapped in under the same name)
        // do not match the recorded digest: compiled again, and the cache repaired.
        let file = cache_file(&engine, &cache);
        let mut bytes = fs::read(&file).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        fs::write(&file, &bytes).unwrap();
        let tampered = load(&engine, Some(&cache)).unwrap();
        assert!(!tampered.from_cache);
        assert!(load(&engine, Some(&cache)).unwrap().from_cache);

        // A folder others may write to is not trusted at all.
        fs::set_permissions(&cache, fs::Permissions::from_mode(0o777)).unwrap();
        let shared = load(&engine, Some(&cache)).unwrap();
        assert!(!shared.from_cache);
        let problem = shared.cache_problem.unwrap();
        assert!(problem.contains("group or others may write"), "{problem}");
        // Nor is a cached file others may write to.
        fs::set_permissions(&cache, fs::Permissions::from_mode(0o700)).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        let loose = load(&engine, Some(&cache)).unwrap();
        assert!(!loose.from_cache);
        assert!(loose.cache_problem.is_some());
    }

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
