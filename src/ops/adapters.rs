//! What the adapters (HTTP, MCP, the sandbox, the agent) need of the notes
//! besides the rows, so that they import `ops` and never the domain below it
//! (`spec/modules.rs` holds that wall): a dry run's overlay and its changes,
//! a note path's check, the closest note names, token counts, a folder under
//! the notes root opened without following a symlink, an upload streamed to
//! `.mirai/uploads/`, and the git remote's sync tickets and webhook signature.

use std::io;

use cap_std::fs::Dir;

use crate::error::Result;

pub use crate::notes::overlay::{NoteChange, Overlay};
pub use crate::notes::uploads::{Upload, UploadError, UploadWriter};
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

/// The index's terms of `text`, in order (stemmed, diacritics folded, past
/// the stop list): the words a search of it matches, for an adapter that
/// weighs a task's words against what a search found.
pub fn index_terms(text: &str) -> Vec<String> {
    crate::index::tokenizer::Tokenizer::default()
        .tokenize(text)
        .into_iter()
        .map(|token| token.term)
        .collect()
}

/// The level (1 to 6) of `line` when it is an ATX heading, read as the
/// index reads a note's lines (`#hashtag` is none).
pub fn heading_level(line: &str) -> Option<u8> {
    use crate::index::markdown::{lines, Kind};
    match lines(line).next()?.kind {
        Kind::Heading(level, _) => Some(level),
        _ => None,
    }
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

/// Starts streaming a file to `.mirai/uploads/` for `files.write`, capped
/// by `MIRAI_MAX_FILE_BYTES` (`declared`: the size the sender announced);
/// hand it to the row with [`Context::with_upload`](super::Context::with_upload).
pub fn begin_upload(ctx: &super::Context, declared: Option<u64>) -> io::Result<UploadWriter> {
    ctx.view.disk_notes().begin_upload(declared)
}

/// The largest file `files.write` takes (`MIRAI_MAX_FILE_BYTES`).
pub fn max_file_bytes(ctx: &super::Context) -> u64 {
    ctx.view.disk_notes().max_file_bytes()
}

/// Whether `signature` (the webhook's header) signs `body` with `secret`.
pub fn webhook_verified(secret: &str, body: &[u8], signature: Option<&str>) -> bool {
    crate::sync::webhook::verify(secret, body, signature)
}
