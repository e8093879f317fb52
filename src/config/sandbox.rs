//! The sandbox's settings: its bounds on one eval (`MIRAI_SANDBOX_*`) and
//! where the compiled guest is cached (`MIRAI_CACHE_DIR`), never inside the
//! notes root.

use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::read::{as_usize, Env};
use super::settings::Config;

pub(super) fn read(env: Env, config: &mut Config) -> Result<(), ConfigError> {
    let limits = &mut config.sandbox;
    let memory = "a number of MiB from 16 to 4095";
    if let Some(n) = env.positive_in("MIRAI_SANDBOX_MEMORY_MB", 16..=4095, memory)? {
        limits.memory_bytes = as_usize(n * 1024 * 1024);
    }
    if let Some(n) = env.positive(
        "MIRAI_SANDBOX_TIMEOUT_MS",
        "a positive number of milliseconds",
    )? {
        limits.timeout_ms = n;
    }
    if let Some(n) = env.positive("MIRAI_SANDBOX_FUEL", "a positive amount of wasm fuel")? {
        limits.fuel = n;
    }
    if let Some(n) = env.positive("MIRAI_SANDBOX_MAX_CALLS", "a positive number of calls")? {
        limits.max_calls = as_usize(n);
    }
    if let Some(n) = env.positive(
        "MIRAI_SANDBOX_MAX_OUTPUT_BYTES",
        "a positive number of bytes",
    )? {
        limits.max_output_bytes = as_usize(n);
    }
    if let Some(dir) = env.trimmed("MIRAI_CACHE_DIR") {
        config.cache_dir = Some(PathBuf::from(dir));
        config.cache_dir_explicit = true;
    } else if let Some(base) = env.trimmed("XDG_CACHE_HOME") {
        config.cache_dir = Some(PathBuf::from(base).join("mirai"));
    } else if let Some(home) = env.trimmed("HOME") {
        config.cache_dir = Some(PathBuf::from(home).join(".cache").join("mirai"));
    }
    Ok(())
}

impl Config {
    /// The module cache to use, kept out of the notes root (ARCHITECTURE.md,
    /// "Notes are data, never code") once the root exists: a `MIRAI_CACHE_DIR`
    /// inside it is an error; a default one inside it (`NOTES_ROOT=$HOME`,
    /// say) is not used (`None`).
    pub fn usable_cache_dir(&self) -> Result<Option<PathBuf>, ConfigError> {
        let Some(cache) = &self.cache_dir else {
            return Ok(None);
        };
        let root = self
            .notes_root
            .canonicalize()
            .unwrap_or_else(|_| real_path_of(&self.notes_root));
        if !real_path_of(cache).starts_with(&root) {
            return Ok(Some(cache.clone()));
        }
        if self.cache_dir_explicit {
            return Err(ConfigError::CacheInsideNotes(cache.display().to_string()));
        }
        Ok(None)
    }
}

/// `path` with its longest existing part canonicalized (symlinks resolved)
/// and the rest appended as it is.
fn real_path_of(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |acc, part| acc.join(part));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}
