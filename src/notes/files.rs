//! Attachments: the vault's files that are not notes (images, PDFs, anything
//! else visible), listed with their sizes, resolved and read through the root
//! handle as notes are (ARCHITECTURE.md, "The root is a wall, not a check"),
//! and named by media type from an allow-list of extensions.

use sha1::{Digest, Sha1};

use super::path;
use super::root::{Kind, Refusal};
use super::{refused, Notes, WALK_LIMITS};
use crate::error::{Error, ErrorCode, Result};

/// What the extension of an attachment says it is, from the allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaType {
    /// The media type served (`application/octet-stream` off the list).
    pub mime: &'static str,
    /// A raster image (PNG, JPEG, GIF, WebP): the one kind a browser may show
    /// inline; everything else (SVG and PDF included) is only ever downloaded.
    pub raster: bool,
    /// Whether the extension is on the allow-list at all.
    pub allowed: bool,
}

/// The media type of an attachment, by its extension (any case).
pub fn media_type(rel: &str) -> MediaType {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let ext = name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    let (mime, raster) = match ext.as_str() {
        "png" => ("image/png", true),
        "jpg" | "jpeg" => ("image/jpeg", true),
        "gif" => ("image/gif", true),
        "webp" => ("image/webp", true),
        "svg" => ("image/svg+xml", false),
        "pdf" => ("application/pdf", false),
        _ => {
            return MediaType {
                mime: "application/octet-stream",
                raster: false,
                allowed: false,
            }
        }
    };
    MediaType {
        mime,
        raster,
        allowed: true,
    }
}

/// Git's blob id of `bytes` (SHA-1 of `blob <len>\0` and the bytes), as a
/// file's version is named in ETags and history.
pub fn blob_id(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An attachment's path as callers name it: the lexical rules, not hidden
/// (`invalid_path`), not a note (`invalid_extension`: notes have their own rows).
pub fn file_path(raw: &str) -> Result<String> {
    let rel = path::lexical(raw)?;
    check_visible_file(&rel)?;
    Ok(rel)
}

fn check_visible_file(rel: &str) -> Result<()> {
    if path::is_hidden(rel) {
        return Err(Error::invalid_path(format!(
            "hidden files and folders (names starting with a dot, like .git/ and .mirai/) are not attachments: {rel:?}"
        )));
    }
    if path::has_note_extension(rel) {
        return Err(Error::invalid_extension(format!(
            "{rel:?} is a note, not an attachment: use the notes.* operations for .md files"
        )));
    }
    Ok(())
}

/// 404 for an attachment that is not there.
pub fn missing(rel: &str) -> Error {
    Error::not_found(format!(
        "no file {rel:?} in the notes root; files.list lists the vault's attachments"
    ))
}

/// 413 `payload_too_large`: the attachment `rel` holds `size` bytes, past
/// `MIRAI_MAX_FILE_BYTES`; it is never read whole.
pub fn file_too_large(rel: &str, size: u64, limit: u64) -> Error {
    Error::new(
        ErrorCode::PayloadTooLarge,
        format!(
            "{rel:?} is {size} bytes, more than the {limit} bytes mirai reads of a file \
             (MIRAI_MAX_FILE_BYTES); read it with git or from the disk, or raise MIRAI_MAX_FILE_BYTES"
        ),
    )
}

impl Notes {
    /// Every attachment (visible regular file that is not a note) with its
    /// size, sorted by path: one walk, each looked at through its folder's
    /// handle (nothing opened, no symlink followed or listed).
    pub fn list_file_sizes(&self) -> Vec<(String, u64)> {
        let mut files = Vec::new();
        self.handle.walk(WALK_LIMITS, |rel, file_type, dir| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            if !file_type.is_file()
                || !path::is_plain_name(name)
                || rel != rel.trim()
                || path::has_note_extension(rel)
            {
                return;
            }
            if let Ok(meta) = dir.symlink_metadata(name) {
                if meta.is_file() {
                    files.push((rel.to_string(), meta.len()));
                }
            }
        });
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        files
    }

    /// Resolves an attachment's path as [`Notes::resolve`] resolves a note's:
    /// symlinks followed inside the root only, to a visible attachment; it
    /// must exist and be a regular file. Answers the path and the real path.
    fn resolve_file(&self, raw: &str) -> Result<(String, String)> {
        let rel = file_path(raw)?;
        let real = self
            .handle
            .resolve_links(&rel)
            .map_err(|r| refused(&rel, r))?;
        if real.via_link && check_visible_file(&real.path).is_err() {
            return Err(Error::invalid_path(format!(
                "{rel:?} is a symlink to something that is not a visible attachment"
            )));
        }
        match real.kind {
            Kind::File => Ok((rel, real.path)),
            Kind::Missing => Err(missing(&rel)),
            Kind::Folder => Err(Error::not_found(format!("{rel:?} is a folder, not a file"))),
            Kind::Special => Err(Error::invalid_path(format!(
                "{rel:?} is not a regular file (a FIFO, socket or device)"
            ))),
        }
    }

    /// An attachment's bytes, whole, refused from its size (`fstat`) before
    /// a byte is read when it holds more than `MIRAI_MAX_FILE_BYTES`. One
    /// whose real path (past any symlink) a caller does not `sees` is missing,
    /// before a byte is read.
    pub fn read_file(&self, raw: &str, sees: &dyn Fn(&str) -> bool) -> Result<(String, Vec<u8>)> {
        let mut tries = 0;
        loop {
            let (rel, real) = self.resolve_file(raw)?;
            if !sees(&real) {
                return Err(missing(&rel));
            }
            match self.handle.read_real(&real, self.max_file_bytes) {
                Ok(bytes) => return Ok((rel, bytes)),
                // A folder on the real path became a link since it was resolved: look again.
                Err(Refusal::Symlink | Refusal::Escapes) if tries < 3 => tries += 1,
                Err(Refusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(missing(&rel))
                }
                Err(Refusal::TooLarge { size, limit }) => {
                    return Err(file_too_large(&rel, size, limit))
                }
                Err(r) => return Err(refused(&rel, r)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_come_from_the_allow_list_only() {
        assert_eq!(media_type("a/x.PNG").mime, "image/png");
        assert!(media_type("x.jpeg").raster && media_type("x.jpg").raster);
        assert_eq!(media_type("x.svg").mime, "image/svg+xml");
        assert!(!media_type("x.svg").raster && !media_type("x.pdf").raster);
        let other = media_type("page.html");
        assert_eq!(other.mime, "application/octet-stream");
        assert!(!other.allowed && !other.raster);
        assert!(!media_type("noext").allowed);
    }

    #[test]
    fn blob_ids_are_gits() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }

    #[test]
    fn notes_and_hidden_files_are_not_attachments() {
        assert_eq!(
            file_path("a.md").unwrap_err().code,
            ErrorCode::InvalidExtension
        );
        assert_eq!(
            file_path(".git/config").unwrap_err().code,
            ErrorCode::InvalidPath
        );
        assert_eq!(file_path(" img/x.png ").unwrap(), "img/x.png");
    }
}
