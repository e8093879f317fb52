//! Uploads: a file sent to mirai (a raw-body `files.write` over HTTP) streamed
//! to `.mirai/uploads/<random>.part` as it arrives, never held whole in memory.
//!
//! The folder and the file are made through the root handle (no symlink
//! followed); the file is `flock`ed for its whole life, so the start-up sweep
//! ([`Root::remove_stale_uploads`]) removes only the parts of a process that
//! died. [`UploadWriter`] takes the bytes piece by piece, refuses them past
//! its cap as they arrive, and hashes them as it goes (SHA-256, and git's blob
//! id when the size was declared up front). Finished, it is an [`Upload`]:
//! the write path moves its file into place ([`Upload::move_to`], through
//! `Slot::prepare_with`) and
//! streams it into git's object database; dropped unused (a failure, a
//! refusal, a client gone), either one removes its file.

use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use rustix::fs::{flock, FlockOperation};
use sha1::Digest;

use super::root::{open_folder, remove_matching, Root};

/// The folder of uploads under `.mirai/`.
const UPLOADS: &str = "uploads";
/// The ending of an upload's file name.
const PART: &str = ".part";

/// Why an upload stopped taking bytes.
#[derive(Debug)]
pub enum UploadError {
    /// More than the cap arrived (`size`: what had arrived, past `limit`).
    TooLarge {
        size: u64,
        limit: u64,
    },
    Io(io::Error),
}

impl From<io::Error> for UploadError {
    fn from(e: io::Error) -> UploadError {
        UploadError::Io(e)
    }
}

/// An upload's file, removed when dropped unless it was moved into place.
#[derive(Debug)]
struct PartFile {
    dir: Dir,
    name: String,
    file: std::fs::File,
}

impl Drop for PartFile {
    fn drop(&mut self) {
        // Gone already when the write moved it into place: nothing to do.
        let _ = self.dir.remove_file(&self.name);
    }
}

/// An upload in progress: bytes go in with [`UploadWriter::write`].
pub struct UploadWriter {
    part: PartFile,
    size: u64,
    limit: u64,
    declared: Option<u64>,
    sha256: sha2::Sha256,
    /// Git's blob id, hashed as the bytes come when their size was declared.
    blob: Option<sha1::Sha1>,
}

impl std::fmt::Debug for UploadWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadWriter")
            .field("part", &self.part.name)
            .field("size", &self.size)
            .finish()
    }
}

/// A whole upload on disk: its file (still open and locked), size, SHA-256
/// and git blob id.
#[derive(Debug)]
pub struct Upload {
    part: PartFile,
    size: u64,
    sha256: [u8; 32],
    blob: String,
}

impl PartialEq for Upload {
    fn eq(&self, other: &Upload) -> bool {
        self.size == other.size && self.sha256 == other.sha256
    }
}

impl Eq for Upload {}

impl Root {
    /// Starts an upload of at most `limit` bytes (`declared`: the size the
    /// sender announced, when it did): a new file under `.mirai/uploads/`,
    /// made through the root handle, locked for as long as it lives.
    pub fn begin_upload(&self, limit: u64, declared: Option<u64>) -> io::Result<UploadWriter> {
        let state = self
            .state_dir(true)?
            .ok_or_else(|| io::Error::other("cannot make .mirai/ in the notes root"))?;
        let (dir, _) = open_folder(&state, UPLOADS, true)?
            .ok_or_else(|| io::Error::other("cannot make .mirai/uploads/"))?;
        let name = format!("{}{PART}", uuid::Uuid::new_v4().simple());
        let file = create_new(&dir, &name, 0o600)?;
        let part = PartFile { dir, name, file };
        flock(&part.file, FlockOperation::NonBlockingLockExclusive)?;
        let blob = declared.map(|size| {
            let mut hasher = sha1::Sha1::new();
            hasher.update(format!("blob {size}\0").as_bytes());
            hasher
        });
        Ok(UploadWriter {
            part,
            size: 0,
            limit,
            declared,
            sha256: sha2::Sha256::new(),
            blob,
        })
    }

    /// Removes the uploads a process that died left in `.mirai/uploads/`
    /// (a live one's are locked and stay). Answers how many went.
    pub fn remove_stale_uploads(&self) -> usize {
        let Ok(Some(state)) = self.state_dir(false) else {
            return 0;
        };
        let Ok(Some((dir, _))) = open_folder(&state, UPLOADS, false) else {
            return 0;
        };
        remove_matching(&dir, |name| {
            let mut options = OpenOptions::new();
            options.read(true).follow(FollowSymlinks::No);
            // Unlocked: its process died. Locked: a live upload, which stays.
            name.ends_with(PART)
                && dir.open_with(name, &options).is_ok_and(|file| {
                    flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok()
                })
        })
    }
}

impl UploadWriter {
    /// Appends `bytes`; past the cap nothing more is written and the upload
    /// is refused (dropping the writer removes its file).
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), UploadError> {
        let size = self.size + bytes.len() as u64;
        if size > self.limit || self.declared.is_some_and(|declared| size > declared) {
            return Err(UploadError::TooLarge {
                size,
                limit: self.limit,
            });
        }
        self.part.file.write_all(bytes)?;
        self.sha256.update(bytes);
        if let Some(blob) = &mut self.blob {
            blob.update(bytes);
        }
        self.size = size;
        Ok(())
    }

    /// How many bytes arrived so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The upload, whole: its git blob id is the one hashed on the way when
    /// the declared size came, else the file is read through once for it.
    pub fn finish(self) -> io::Result<Upload> {
        let UploadWriter {
            part,
            size,
            declared,
            sha256,
            blob,
            ..
        } = self;
        let blob = match blob {
            Some(hasher) if declared == Some(size) => hasher.finalize(),
            _ => {
                let mut hasher = sha1::Sha1::new();
                hasher.update(format!("blob {size}\0").as_bytes());
                let mut reader = OffsetReader {
                    file: &part.file,
                    at: 0,
                };
                io::copy(&mut reader, &mut HashWriter(&mut hasher))?;
                hasher.finalize()
            }
        };
        Ok(Upload {
            part,
            size,
            sha256: sha256.finalize().into(),
            blob: blob.iter().map(|b| format!("{b:02x}")).collect(),
        })
    }
}

/// Feeds what is written into a SHA-1.
struct HashWriter<'a>(&'a mut sha1::Sha1);

impl Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads a file from its start by position (`pread`), whatever its offset.
pub struct OffsetReader<'a> {
    file: &'a std::fs::File,
    at: u64,
}

impl Read for OffsetReader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buffer, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl Upload {
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn sha256(&self) -> &[u8; 32] {
        &self.sha256
    }

    /// The SHA-256 in lowercase hex.
    pub fn sha256_hex(&self) -> String {
        self.sha256.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Git's blob id of the bytes, in hex.
    pub fn blob_id(&self) -> &str {
        &self.blob
    }

    /// The bytes from the start, read from the file piece by piece (the
    /// file's own descriptor: it reads the same bytes after the file moved).
    pub fn reader(&self) -> OffsetReader<'_> {
        OffsetReader {
            file: &self.part.file,
            at: 0,
        }
    }

    /// The bytes whole (a dry run's or a proposal's copy: bounded by the cap
    /// the upload was taken under).
    pub fn read_all(&self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(usize::try_from(self.size).unwrap_or(0));
        self.reader()
            .take(self.size.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 != self.size {
            return Err(io::Error::other(
                "the uploaded file changed size on disk after it arrived",
            ));
        }
        Ok(bytes)
    }

    /// Renames the upload's file to `name` in `into` (a note's folder: the
    /// same file system, so no byte is copied); where a rename cannot cross
    /// (another file system under `.mirai/`), the bytes are copied. Answers
    /// the file now at `name`, open.
    pub fn move_to(&self, into: &Dir, name: &str) -> io::Result<std::fs::File> {
        match self.part.dir.rename(&self.part.name, into, name) {
            Ok(()) => self.part.file.try_clone(),
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                let mut file = create_new(into, name, 0o644)?;
                let copied = io::copy(&mut self.reader(), &mut file);
                match copied {
                    Ok(n) if n == self.size => Ok(file),
                    Ok(_) => {
                        let _ = into.remove_file(name);
                        Err(io::Error::other(
                            "the uploaded file changed size while copied",
                        ))
                    }
                    Err(e) => {
                        let _ = into.remove_file(name);
                        Err(e)
                    }
                }
            }
            Err(e) => Err(e),
        }
    }
}

/// A new file `name` in `dir` (never one already there, never through a
/// symlink), open for reading and writing, with `mode`.
fn create_new(dir: &Dir, name: &str, mode: u32) -> io::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .create_new(true)
        .follow(FollowSymlinks::No)
        .mode(mode);
    Ok(dir.open_with(name, &options)?.into_std())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(&dir.path().canonicalize().unwrap()).unwrap();
        (dir, root)
    }

    fn parts(dir: &std::path::Path) -> Vec<String> {
        std::fs::read_dir(dir.join(".mirai/uploads"))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn hashes_as_it_goes_and_matches_git_with_or_without_a_declared_size() {
        let (dir, root) = root();
        for declared in [Some(11), None] {
            let mut writer = root.begin_upload(100, declared).unwrap();
            writer.write(b"hello ").unwrap();
            writer.write(b"world").unwrap();
            let upload = writer.finish().unwrap();
            assert_eq!(upload.size(), 11);
            assert_eq!(
                upload.blob_id(),
                "95d09f2b10159347eece71399a7e2e907ea3df4f" // git hash-object
            );
            assert_eq!(
                upload.sha256_hex(),
                "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9" // sha256sum
            );
            assert_eq!(upload.read_all().unwrap(), b"hello world");
            assert_eq!(parts(dir.path()).len(), 1);
            drop(upload);
            assert!(parts(dir.path()).is_empty());
        }
    }

    #[test]
    fn refuses_past_the_cap_and_leaves_no_part() {
        let (dir, root) = root();
        let mut writer = root.begin_upload(8, None).unwrap();
        writer.write(b"12345").unwrap();
        match writer.write(b"6789") {
            Err(UploadError::TooLarge { size: 9, limit: 8 }) => {}
            other => panic!("{other:?}"),
        }
        drop(writer);
        assert!(parts(dir.path()).is_empty());
    }

    #[test]
    fn the_sweep_removes_a_dead_upload_and_keeps_a_live_one() {
        let (dir, root) = root();
        let live = root.begin_upload(8, None).unwrap();
        std::fs::write(dir.path().join(".mirai/uploads/dead.part"), b"x").unwrap();
        assert_eq!(root.remove_stale_uploads(), 1);
        assert_eq!(parts(dir.path()), vec![live.part.name.clone()]);
    }
}
