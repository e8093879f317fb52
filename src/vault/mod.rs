//! Notes as a vault (Obsidian, Dendron, Foam): links between notes and the
//! graph they make, front matter and tags. Pure text in and out: the live
//! index ([`crate::index::live`]) keeps a [`Vault`] beside the index and
//! updates it wherever the index changes; it is always rebuilt from the
//! notes, never a second source of truth.
//!
//! - [`front_matter`]: the YAML block at the top of a note, parsed (serde_norway).
//! - [`scan`]: one pulldown-cmark pass over a note's body: links and inline `#tags`.
//! - [`resolve`]: which file a link names, by Obsidian's rules.
//! - [`facts`]: what the vault keeps of one note (links, tags, title).
//! - [`graph`]: the [`Vault`]: every note's facts, the files links can reach,
//!   backlinks, broken links, orphans and tag counts.
//! - [`rewrite`]: a move's link rewrite, each link kept in its form.
//! - [`render`]: a note's body as sanitized HTML (pulldown-cmark, ammonia) for the page.
//! - [`sections`]: headings and their sections, named as `A > B`.
//! - [`tokens`]: o200k_base token counts (tiktoken-rs).

pub mod facts;
pub mod front_matter;
pub mod front_matter_edit;
pub mod graph;
pub mod render;
pub mod resolve;
pub mod rewrite;
pub mod scan;
pub mod sections;
pub mod tokens;

pub use graph::Vault;
