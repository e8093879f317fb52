//! The sandbox's settings: its bounds on one eval (`MIRAI_SANDBOX_*`), read
//! and validated by `config::sandbox`.

/// The sandbox's bounds on one eval (`MIRAI_SANDBOX_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// The guest's linear memory cap (`MIRAI_SANDBOX_MEMORY_MB`, default 64).
    pub memory_bytes: usize,
    /// Wall-clock deadline, host calls included (`MIRAI_SANDBOX_TIMEOUT_MS`, default 2000).
    pub timeout_ms: u64,
    /// CPU bound in wasm fuel, host calls excluded (`MIRAI_SANDBOX_FUEL`).
    pub fuel: u64,
    /// Host calls (`mirai.*`) per eval (`MIRAI_SANDBOX_MAX_CALLS`, default 200).
    pub max_calls: usize,
    /// Console output plus the result, in bytes (`MIRAI_SANDBOX_MAX_OUTPUT_BYTES`, default 64 KiB).
    pub max_output_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 64 * 1024 * 1024,
            timeout_ms: 2_000,
            // About one second of tight JavaScript on this project's reference machine.
            fuel: 10_000_000_000,
            max_calls: 200,
            max_output_bytes: 64 * 1024,
        }
    }
}
