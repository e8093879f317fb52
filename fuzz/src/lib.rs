//! mirai's pure text code, compiled from mirai's own source files: the error
//! vocabulary, the patch module (parse, apply, conflict, make, edit) and the
//! note path rules. They use
//! nothing else of mirai, so the fuzz build leaves out the server, wasmtime and
//! libgit2, which would otherwise be rebuilt with coverage instrumentation.

#[path = "../../src/error.rs"]
pub mod error;

#[path = "../../src/patch/mod.rs"]
pub mod patch;

/// The lexical note path rules (`src/notes/path.rs`), without the rest of `notes/`.
#[doc(hidden)]
#[path = "../../src/notes/path.rs"]
pub mod note_path;

/// `notes::path` as in mirai, so the file's own `crate::` paths and the
/// targets' imports read the same.
pub mod notes {
    pub use super::note_path as path;
}
