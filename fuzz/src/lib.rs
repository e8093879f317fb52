//! mirai's pure text code, compiled from mirai's own source files: the error
//! vocabulary and the patch module (parse, apply, conflict, make, edit). They use
//! nothing else of mirai, so the fuzz build leaves out the server, wasmtime and
//! libgit2, which would otherwise be rebuilt with coverage instrumentation.

#[path = "../../src/error.rs"]
pub mod error;

#[path = "../../src/patch/mod.rs"]
pub mod patch;
