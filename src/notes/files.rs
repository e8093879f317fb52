//! Attachments: the vault's files that are not notes (images, PDFs, anything
//! else visible), listed with their sizes, resolved and read through the root
//! handle as notes are (ARCHITECTURE.md, "The root is a wall, not a check"),
//! and named by media type from an allow-list of extensions.

use sha1::{Digest, Sha1};

use super::path;
use super::root::{Kind, Refusal};
use super::{refused, Existence, NotePath, Notes, WALK_LIMITS};
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

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The first line of an attachment's change as a proposal or a dry run shows it.
const BINARY_HEADER: &str = "Binary file ";

/// An attachment's change as text, where a note's change is a unified diff:
/// `Binary file <path>`, then `--- binary, N bytes, sha256 <hex>` (or `---
/// /dev/null`) for the file before and `+++ ...` for after. No patch tool
/// applies it: a proposal carries the new bytes beside it, which these lines
/// name by size and hash.
pub fn binary_diff(rel: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> String {
    let side = |bytes: Option<&[u8]>| bytes.map(|bytes| (bytes.len() as u64, sha256_hex(bytes)));
    binary_diff_sides(rel, side(before), side(after))
}

/// [`binary_diff`] from each side's size and SHA-256 (`None`: no file), for
/// bytes that are not in memory (an upload on disk).
pub fn binary_diff_sides(rel: &str, before: BinarySide, after: BinarySide) -> String {
    let side = |side: BinarySide| match side {
        None => "/dev/null".to_string(),
        Some((size, sha256)) => format!("binary, {size} bytes, sha256 {sha256}"),
    };
    format!(
        "{BINARY_HEADER}{rel}\n--- {}\n+++ {}\n",
        side(before),
        side(after)
    )
}

/// One side of a [`binary_diff`]: the file's size and SHA-256 (`None`: no file).
pub type BinarySide = Option<(u64, String)>;

/// Reads back a [`binary_diff`] of `rel`: its two sides, or `None` when
/// `diff` is not one (a note's diff, or another path's).
pub fn parse_binary_diff(rel: &str, diff: &str) -> Option<(BinarySide, BinarySide)> {
    let mut lines = diff.strip_suffix('\n')?.split('\n');
    if lines.next()? != format!("{BINARY_HEADER}{rel}") {
        return None;
    }
    let side = |line: Option<&str>, mark: &str| -> Option<BinarySide> {
        let rest = line?.strip_prefix(mark)?;
        if rest == "/dev/null" {
            return Some(None);
        }
        let (size, hash) = rest
            .strip_prefix("binary, ")?
            .split_once(" bytes, sha256 ")?;
        let hex = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        hex.then_some(())?;
        Some(Some((size.parse().ok()?, hash.to_string())))
    };
    let before = side(lines.next(), "--- ")?;
    let after = side(lines.next(), "+++ ")?;
    (lines.next().is_none() && (before.is_some() || after.is_some())).then_some((before, after))
}

/// Whether `diff` is an attachment's change ([`binary_diff`]) rather than a note's.
pub fn is_binary_diff(diff: &str) -> bool {
    diff.starts_with(BINARY_HEADER)
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

    /// Resolves an attachment's path for a write: the rules of [`file_path`],
    /// inside the root, and never a symlink or through one (a link is refused
    /// whatever it leads to: mirai replaces files, never writes through a
    /// link). A folder there is `not_found`; with [`Existence::MustExist`],
    /// so is a missing file.
    pub fn resolve_file_for_write(&self, raw: &str, existence: Existence) -> Result<NotePath> {
        let rel = file_path(raw)?;
        let real = self
            .handle
            .resolve_links(&rel)
            .map_err(|r| refused(&rel, r))?;
        let plain = if real.via_link {
            Err(Refusal::Symlink)
        } else {
            self.handle.check_plain(&rel)
        };
        plain.map_err(|r| refused(&rel, r))?;
        match real.kind {
            Kind::Folder => Err(Error::not_found(format!("{rel:?} is a folder, not a file"))),
            Kind::Missing if existence == Existence::MustExist => Err(missing(&rel)),
            Kind::Special => Err(Error::invalid_path(format!(
                "{rel:?} is not a regular file (a FIFO, socket or device)"
            ))),
            _ => Ok(NotePath {
                real: rel.clone(),
                rel,
                via_link: false,
            }),
        }
    }

    /// The bytes of the attachment at `file` (resolved for a write) now
    /// (`None`: there is none), refused past `MIRAI_MAX_FILE_BYTES` from its
    /// size before a byte is read.
    pub fn current_file(&self, file: &NotePath) -> Result<Option<Vec<u8>>> {
        match self.handle.read_real(&file.real, self.max_file_bytes) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(Refusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(Refusal::TooLarge { size, limit }) => Err(file_too_large(&file.rel, size, limit)),
            Err(r) => Err(refused(&file.rel, r)),
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
    fn binary_diffs_read_back_and_name_their_path() {
        let diff = binary_diff("a/x.png", Some(b"one"), Some(b"three"));
        assert!(diff.starts_with("Binary file a/x.png\n--- binary, 3 bytes, sha256 "));
        let (before, after) = parse_binary_diff("a/x.png", &diff).unwrap();
        assert_eq!(before, Some((3, sha256_hex(b"one"))));
        assert_eq!(after, Some((5, sha256_hex(b"three"))));
        assert!(parse_binary_diff("b.png", &diff).is_none());
        let created = binary_diff("n.pdf", None, Some(b""));
        assert_eq!(parse_binary_diff("n.pdf", &created).unwrap().0, None);
        let deleted = binary_diff("n.pdf", Some(b"x"), None);
        assert_eq!(parse_binary_diff("n.pdf", &deleted).unwrap().1, None);
        assert!(
            parse_binary_diff("n.pdf", "Binary file n.pdf\n--- /dev/null\n+++ /dev/null\n")
                .is_none()
        );
        assert!(parse_binary_diff("n.pdf", &format!("{created}extra\n")).is_none());
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
