//! The one test binary: every black-box spec is a module of it, so the suite
//! links once (wasmtime makes each test binary large and slow to link) and the
//! shared harness in `common/` is compiled once. Each module tests one area
//! against the real server on loopback, real git repositories in temp folders,
//! the real wasm sandbox and real transports. Run one area with
//! `cargo test --test spec <module>::`, e.g. `cargo test --test spec crash::`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test harness: a failed step fails the run

mod common;

mod agent;
mod agent_outcome;
mod agent_tasks;
mod agentops;
mod bounded;
mod callers;
mod changes;
mod confinement;
mod cowriters;
mod crash;
mod docs;
mod edges;
mod events;
mod fields;
mod files;
mod files_write;
mod foundation;
mod front_matter;
mod history;
mod index;
mod mcp;
mod modules;
mod oauth;
mod oauth_mcp_sdk;
mod oauth_page;
mod openapi;
mod page;
mod patch;
mod revert;
mod review;
mod sandbox;
mod saves;
mod search;
mod sync;
mod vault;
mod writes;
