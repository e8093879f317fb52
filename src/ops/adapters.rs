//! What the adapters (HTTP, MCP, the sandbox, the agent) need of the notes
//! besides the rows, so that they import `ops` and never the domain below it
//! (`spec/modules.rs` holds that wall): a dry run's overlay and its changes,
//! a note path's check, the closest note names, token counts, a folder under
//! the notes root opened without following a symlink, and the git remote's
//! sync tickets and webhook signature.

use std::io;

use cap_std::fs::Dir;

use crate::error::Result;

pub use crate::notes::overlay::{NoteChange, Overlay};
pub use crate::sync::webhook::SIGNATURE_HEADER as WEBHOOK_SIGNATURE_HEADER;
pub use crate::sync::{Synced, Ticket};

/// `raw` as a note path (trimmed, relative, no `..` above the root, no hidden
/// part): the same lexical rules every row applies.
pub fn note_path(raw: &str) -> Result<String> {
    let path = crate::notes::path::lexical(raw)?;
    crate::notes::path::check_visible_note(&path)?;
    Ok(path)
}

/// The note paths of `notes` closest to `wanted` (file name first, then edit
/// distance), best first, and the "; did you mean ...?" that names them.
pub fn did_you_mean(wanted: &str, notes: &[String]) -> String {
    crate::notes::suggest::did_you_mean(&crate::notes::suggest::closest_notes(wanted, notes))
}

/// `text`'s o200k_base token count, as notes.read and notes.outline count.
pub fn count_tokens(text: &str) -> usize {
    crate::vault::tokens::count(text)
}

/// Opens folder `name` in `dir` without following a symlink, making it first
/// with `create`; `None` when it is missing and `create` is false.
pub fn open_folder(dir: &Dir, name: &str, create: bool) -> io::Result<Option<Dir>> {
    Ok(crate::notes::root::open_folder(dir, name, create)?.map(|(folder, _)| folder))
}

/// Whether `signature` (the webhook's header) signs `body` with `secret`.
pub fn webhook_verified(secret: &str, body: &[u8], signature: Option<&str>) -> bool {
    crate::sync::webhook::verify(secret, body, signature)
}
