//! The operation table: every capability mirai offers, by dotted name, with its
//! request and response types, policy class and one function.
//!
//! Adapters (HTTP, the CLI, the sandbox, agent runs and MCP) call [`dispatch`]
//! and nothing else, so validation, policy and errors exist exactly once.
//!
//! The floors: [`context`] (what rows run against) and [`operation`] (what a
//! row is) at the bottom, one file per area of rows above them, and [`table`]
//! (the table and `dispatch`, which name every row) on top.

pub mod adapters;
mod change;
mod changes;
mod context;
mod draft;
mod fields;
mod files;
mod files_write;
mod front_matter;
mod grouped;
pub mod guard;
mod history;
mod index;
mod links;
mod moves;
mod notes;
mod operation;
mod outline;
mod patch;
mod proposals;
mod proposing;
mod render;
mod repo;
mod revert;
mod settings;
mod shortcuts;
mod structure;
mod table;
mod tags;
mod write;

pub use changes::*;
pub use context::*;
pub use draft::*;
pub use files::*;
pub use files_write::*;
pub use front_matter::*;
pub use grouped::{Passage, TermSpan};
pub use history::*;
pub use index::*;
pub use links::*;
pub use moves::*;
pub use notes::*;
pub use operation::*;
pub use outline::*;
pub use patch::*;
pub use proposals::*;
pub use proposing::*;
pub use render::*;
pub use repo::*;
pub use revert::*;
pub use settings::*;
pub use shortcuts::*;
pub use table::*;
pub use tags::*;
pub use write::*;
