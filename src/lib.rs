//! mirai: a git-backed notes service that people and untrusted AI models can
//! read and change safely.
//!
//! The domain (`notes`, `ops`, `bootstrap`) knows nothing of HTTP; adapters
//! (`http`, `sandbox`, the CLI in `main.rs`) parse input, call [`ops::dispatch`] and
//! render the answer. See ARCHITECTURE.md for the codemap.

pub mod agent;
pub mod app;
pub mod bootstrap;
pub mod callers;
pub mod config;
pub mod durable;
pub mod embed;
pub mod error;
pub mod events;
pub mod http;
pub mod index;
pub mod json;
pub mod mcp;
pub mod notes;
pub mod oauth;
pub mod ops;
pub mod origin;
pub mod outbound;
pub mod patch;
pub mod proposals;
pub mod redact;
pub mod repo;
pub mod sandbox;
pub mod sync;
pub mod vault;
pub mod watch;
