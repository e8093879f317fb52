//! The index artifact `.mirai/index.json`: writing it atomically and
//! deterministically, reading it back into an [`Index`], and telling whether the
//! notes changed since it was written.
//!
//! Layout (docs/src/search.md), compact JSON, keys in this order:
//! `{"version":1,"generated_at","notes_indexed","chunks_indexed","chunks":[{"path",
//! "chunk_index","content"}],"notes_commit","notes":[{"path","bytes","fnv1a64"}]}`.
//! Chunks are sorted by path bytes, then chunk index; `notes` lists every indexed
//! note (empty ones too, which have no chunks) with its size and content hash,
//! which is what makes `stale` cheap and exact. Apart from `generated_at`, the
//! bytes depend only on the notes (and `notes_commit`).

use std::cell::{Cell, RefCell};
use std::io::{BufWriter, Read, Write};
use std::time::SystemTime;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize, Serializer};

use super::binary::{self, HashingWriter};
use super::build::{parallelism, Source};
use super::stored::is_safe_path;
pub use super::stored::ArtifactMeta;
use super::{Fingerprint, Index, Params};
use crate::durable::create_temp;
use crate::error::{Error, ErrorCode, Result};

pub const VERSION: u64 = 1;
pub const FILE_NAME: &str = "index.json";
/// The artifact as messages name it: relative to the notes root, never the
/// server's absolute path (ARCHITECTURE.md, "Secrets and server paths stay
/// home").
pub const SHOWN_PATH: &str = ".mirai/index.json";

/// The artifact's metadata (not following a symlink), `None` when there is none.
pub fn stat(state: &Dir) -> Option<cap_std::fs::Metadata> {
    state
        .symlink_metadata(FILE_NAME)
        .ok()
        .filter(|meta| meta.is_file())
}

#[derive(Serialize)]
struct ChunkOut<'a> {
    path: &'a str,
    chunk_index: usize,
    content: Located<'a>,
}

/// Where the bytes written so far end, and where each chunk's text went
/// (by chunk slot: the byte range of its JSON string), for the binary form.
struct Positions {
    at: Cell<u64>,
    locations: RefCell<Vec<(u64, u64)>>,
}

/// A chunk's text, noting where in the file it is written.
struct Located<'a> {
    text: &'a str,
    slot: u32,
    positions: &'a Positions,
}

impl Serialize for Located<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let start = self.positions.at.get();
        let done = s.serialize_str(self.text)?;
        let end = self.positions.at.get();
        if let Some(place) = self
            .positions
            .locations
            .borrow_mut()
            .get_mut(self.slot as usize)
        {
            *place = (start, end - start);
        }
        Ok(done)
    }
}

/// Passes bytes through, counting them in `positions`.
struct Counting<'a, W> {
    inner: W,
    positions: &'a Positions,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.positions.at.set(self.positions.at.get() + n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[derive(Serialize)]
struct NoteOut<'a> {
    path: &'a str,
    bytes: u64,
    fnv1a64: String,
}

struct Chunks<'a>(&'a Index, &'a Positions);

impl Serialize for Chunks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(
            self.0
                .sorted_chunks()
                .map(|(path, slot, chunk_index, text)| ChunkOut {
                    path,
                    chunk_index,
                    content: Located {
                        text,
                        slot,
                        positions: self.1,
                    },
                }),
        )
    }
}

struct Notes<'a>(&'a Index);

impl Serialize for Notes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.0.paths().filter_map(|path| {
            let fp = self.0.fingerprint(path)?;
            Some(NoteOut {
                path,
                bytes: fp.bytes,
                fnv1a64: format!("{:016x}", fp.hash),
            })
        }))
    }
}

#[derive(Serialize)]
struct ArtifactOut<'a> {
    version: u64,
    generated_at: String,
    notes_indexed: usize,
    chunks_indexed: usize,
    chunks: Chunks<'a>,
    notes_commit: Option<&'a str>,
    notes: Notes<'a>,
}

/// Writes `index.json` in `state` (the `.mirai` folder, opened through the
/// notes root's handle, so a symlink swapped in for it leads nowhere) through
/// a temporary file in the same folder and a rename, so readers see the old or
/// the new artifact, never a mix. Returns the artifact's size in bytes.
pub fn write(
    state: &Dir,
    idx: &Index,
    generated_at: DateTime<Utc>,
    notes_commit: Option<&str>,
) -> Result<u64> {
    let io_err = |what: &str, e: std::io::Error| {
        Error::internal(format!(
            "could not {what} the index artifact {SHOWN_PATH}: {e}"
        ))
    };
    let (tmp, file) = create_temp(state, FILE_NAME).map_err(|e| io_err("create", e))?;
    let positions = Positions {
        at: Cell::new(0),
        locations: RefCell::new(vec![(0, 0); idx.chunks.len()]),
    };
    let doc = ArtifactOut {
        version: VERSION,
        generated_at: generated_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        notes_indexed: idx.notes_indexed(),
        chunks_indexed: idx.chunks_indexed(),
        chunks: Chunks(idx, &positions),
        notes_commit,
        notes: Notes(idx),
    };
    // The binary form's body is written on another core meanwhile; it is a
    // cache: without it, the next load reads the JSON.
    let (result, pending) = std::thread::scope(|scope| {
        let pending = scope.spawn(|| binary::start(state, idx, generated_at, notes_commit));
        let result = write_json(state, &tmp, file, &doc, &positions, io_err);
        let pending = pending
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("its writer panicked")));
        (result, pending)
    });
    let warn = |e: std::io::Error| {
        log::warn!(
            "could not write .mirai/{} (the next start reads the JSON artifact instead): {e}",
            binary::FILE_NAME
        );
    };
    match result {
        Ok((size, json)) => {
            match pending {
                Ok(Some(pending)) => {
                    let locations = positions.locations.into_inner();
                    if let Err(e) =
                        pending.finish(state, json, &locations, generated_at, notes_commit)
                    {
                        warn(e);
                    }
                }
                Ok(None) => {}
                Err(e) => warn(e),
            }
            Ok(size)
        }
        Err(e) => {
            if let Ok(Some(pending)) = pending {
                pending.abandon(state);
            }
            let _ = state.remove_file(&tmp);
            Err(e)
        }
    }
}

/// Writes the JSON artifact through `tmp` and renames it into place: durable
/// before visible. Answers its size and identity (stamped once in place).
fn write_json(
    state: &Dir,
    tmp: &str,
    file: std::fs::File,
    doc: &ArtifactOut<'_>,
    positions: &Positions,
    io_err: impl Fn(&str, std::io::Error) -> Error,
) -> Result<(u64, binary::JsonId)> {
    let mut out = Counting {
        inner: BufWriter::with_capacity(1 << 20, HashingWriter::new(file)),
        positions,
    };
    serde_json::to_writer(&mut out, doc)
        .map_err(|e| Error::internal(format!("could not encode the index artifact: {e}")))?;
    let (file, mut json) = out
        .inner
        .into_inner()
        .map_err(|e| io_err("write", e.into_error()))?
        .finish();
    // Durable before visible: a crash must not leave a renamed, empty file.
    file.sync_all().map_err(|e| io_err("flush", e))?;
    let size = file.metadata().map_err(|e| io_err("measure", e))?.len();
    state
        .rename(tmp, state, FILE_NAME)
        .map_err(|e| io_err("replace", e))?;
    // A rename moves the file's change time: stamped after it.
    if let Ok(meta) = file.metadata() {
        json.stamp = binary::JsonStamp::of(&meta);
    }
    Ok((size, json))
}

/// Whether the binary form is beside the artifact (a regular file).
pub fn has_binary(state: &Dir) -> bool {
    state
        .symlink_metadata(binary::FILE_NAME)
        .is_ok_and(|meta| meta.is_file())
}

/// Deletes the artifact (and its binary form); `false` when there was none.
pub fn remove(state: &Dir) -> Result<bool> {
    if let Err(e) = binary::remove(state) {
        log::warn!("could not delete .mirai/{}: {e}", binary::FILE_NAME);
    }
    match state.remove_file(FILE_NAME) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::internal(format!(
            "could not delete the index artifact {SHOWN_PATH}: {e}"
        ))),
    }
}

/// The artifact, opened as a regular file without following a link and
/// without blocking (a FIFO put there would otherwise hang the reader).
fn open(state: &Dir) -> std::io::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .follow(FollowSymlinks::No)
        .custom_flags(libc::O_NONBLOCK);
    let file = state.open_with(FILE_NAME, &options)?.into_std();
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

#[derive(Deserialize)]
struct ChunkIn {
    path: String,
    chunk_index: u64,
    content: String,
}

#[derive(Deserialize)]
struct NoteIn {
    path: String,
    bytes: u64,
    fnv1a64: String,
}

#[derive(Deserialize)]
struct ArtifactIn {
    version: u64,
    generated_at: String,
    notes_indexed: u64,
    chunks_indexed: u64,
    chunks: Vec<ChunkIn>,
    #[serde(default)]
    notes_commit: Option<String>,
    /// Absent in artifacts written by the original service: then every note is
    /// taken from the chunks and fingerprinted from their concatenation.
    #[serde(default)]
    notes: Option<Vec<NoteIn>>,
}

#[derive(Deserialize)]
struct VersionOnly {
    version: serde_json::Value,
}

fn invalid(why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::InvalidIndexArtifact,
        format!(
            "index artifact {SHOWN_PATH} is invalid ({why}); rebuild it with POST /mcp/index/rebuild or `mirai index rebuild`"
        ),
    )
}

/// Reads an artifact into an index ranked with the default parameters.
/// `Ok(None)` when the file does not exist. Anything malformed, truncated,
/// inconsistent or of another version is `invalid_index_artifact`.
///
/// With `use_binary`, the binary form beside it (`index.bin`, see
/// [`binary`]) is loaded instead when it belongs to exactly this JSON.
pub fn read(state: &Dir, use_binary: bool) -> Result<Option<(Index, ArtifactMeta)>> {
    let mut file = match open(state) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(invalid(format_args!("cannot be read: {e}"))),
    };
    if use_binary {
        if let Some(loaded) = binary::read(state, &file) {
            return Ok(Some(loaded));
        }
    }
    let mut bytes = Vec::new();
    if let Err(e) = file.read_to_end(&mut bytes) {
        return Err(invalid(format_args!("cannot be read: {e}")));
    }
    let doc = parse(&bytes)?;
    let generated_at = DateTime::parse_from_rfc3339(&doc.generated_at)
        .map_err(|e| invalid(format_args!("generated_at: {e}")))?
        .with_timezone(&Utc);
    if doc.chunks_indexed != doc.chunks.len() as u64 {
        return Err(invalid(format_args!(
            "chunks_indexed is {} but {} chunks are present",
            doc.chunks_indexed,
            doc.chunks.len()
        )));
    }

    let groups = group_chunks(doc.chunks)?;
    let sources = sources_of(doc.notes, groups)?;
    let idx = Index::from_sources(sources, Params::default(), parallelism());
    if doc.notes_indexed != idx.notes_indexed() as u64 {
        return Err(invalid(format_args!(
            "notes_indexed is {} but {} notes are present",
            doc.notes_indexed,
            idx.notes_indexed()
        )));
    }
    let meta = ArtifactMeta {
        generated_at,
        notes_commit: doc.notes_commit,
        byte_size: bytes.len() as u64,
    };
    Ok(Some((idx, meta)))
}

/// The artifact's document, its version checked (a wrong version is named
/// as such, not by the parse error it causes).
fn parse(bytes: &[u8]) -> Result<ArtifactIn> {
    let doc: ArtifactIn = match serde_json::from_slice(bytes) {
        Ok(doc) => doc,
        Err(e) => {
            // Name the version when that is the real problem, not its symptom.
            if let Ok(v) = serde_json::from_slice::<VersionOnly>(bytes) {
                if v.version != VERSION {
                    return Err(invalid(format_args!(
                        "version {} is not {VERSION}",
                        v.version
                    )));
                }
            }
            return Err(invalid(e));
        }
    };
    if doc.version != VERSION {
        return Err(invalid(format_args!(
            "version {} is not {VERSION}",
            doc.version
        )));
    }
    Ok(doc)
}

/// The chunks grouped by note, checking order and numbering on the way.
fn group_chunks(chunks: Vec<ChunkIn>) -> Result<Vec<(String, Vec<String>)>> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for chunk in chunks {
        check_path(&chunk.path)?;
        match groups.last_mut() {
            Some((p, contents)) if *p == chunk.path => {
                if chunk.chunk_index != contents.len() as u64 {
                    return Err(invalid(format_args!(
                        "chunks of {} are not numbered 0, 1, ...",
                        p
                    )));
                }
                contents.push(chunk.content);
            }
            last => {
                if last.is_some_and(|(p, _)| p.as_bytes() >= chunk.path.as_bytes()) {
                    return Err(invalid("chunks are not sorted by path"));
                }
                if chunk.chunk_index != 0 {
                    return Err(invalid(format_args!(
                        "chunks of {} are not numbered 0, 1, ...",
                        chunk.path
                    )));
                }
                groups.push((chunk.path, vec![chunk.content]));
            }
        }
    }

    Ok(groups)
}

/// What the index is built from: each listed note with its chunks and
/// fingerprint, or (an artifact without a note list) each group of chunks.
fn sources_of(
    notes: Option<Vec<NoteIn>>,
    groups: Vec<(String, Vec<String>)>,
) -> Result<Vec<(String, Source)>> {
    let mut sources: Vec<(String, Source)> = Vec::new();
    match notes {
        Some(notes) => {
            if notes
                .windows(2)
                .any(|w| w[0].path.as_bytes() >= w[1].path.as_bytes())
            {
                return Err(invalid("notes are not sorted by path"));
            }
            let mut groups = groups.into_iter().peekable();
            for note in notes {
                check_path(&note.path)?;
                let hash = u64::from_str_radix(&note.fnv1a64, 16)
                    .ok()
                    .filter(|_| note.fnv1a64.len() == 16)
                    .ok_or_else(|| invalid(format_args!("bad hash for {}", note.path)))?;
                let chunks = match groups.peek() {
                    Some((p, _)) if *p == note.path => {
                        groups.next().map(|(_, c)| c).unwrap_or_default()
                    }
                    _ => Vec::new(),
                };
                let fingerprint = Fingerprint {
                    bytes: note.bytes,
                    hash,
                };
                sources.push((note.path, Source::Chunks(chunks, Some(fingerprint))));
            }
            if let Some((p, _)) = groups.next() {
                return Err(invalid(format_args!(
                    "chunks of {p} belong to no listed note"
                )));
            }
        }
        None => {
            sources.extend(
                groups
                    .into_iter()
                    .map(|(note_path, chunks)| (note_path, Source::Chunks(chunks, None))),
            );
        }
    }
    Ok(sources)
}

fn check_path(p: &str) -> Result<()> {
    if !is_safe_path(p) {
        return Err(invalid(format_args!("unsafe note path {p:?}")));
    }
    Ok(())
}

/// One note as it is on disk now, for [`is_stale`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteStat {
    pub path: String,
    pub bytes: u64,
    pub modified: SystemTime,
}

/// Whether the notes differ from what `idx` (loaded from an artifact written at
/// `generated_at`) indexed: a note added, deleted, resized, or rewritten with
/// other content. Only notes modified at or after `generated_at` are read (via
/// `read`, which returns `None` for a note that vanished) and hashed, so a check
/// over an unchanged vault reads nothing; a note merely touched is not stale.
pub fn is_stale(
    idx: &Index,
    generated_at: DateTime<Utc>,
    current: &[NoteStat],
    read: impl FnMut(&str) -> Option<String>,
) -> bool {
    !drift(idx, generated_at.into(), current, read).is_empty()
}

/// How the notes on disk differ from an index of them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Drift {
    /// Added, or changed since the index saw them: (path, content now).
    pub changed: Vec<(String, String)>,
    /// Indexed, but no longer on disk.
    pub removed: Vec<String>,
}

impl Drift {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.removed.is_empty()
    }
}

/// The notes that differ between `idx` and the disk (`current`): new ones,
/// resized ones, ones modified at or after `since` whose content hash
/// differs (read through `read`), and indexed ones that are gone.
pub fn drift(
    idx: &Index,
    since: SystemTime,
    current: &[NoteStat],
    read: impl FnMut(&str) -> Option<String>,
) -> Drift {
    drift_among(idx, since, current, idx.paths(), read)
}

/// [`drift`] over some notes only: `current` describes those of them on disk,
/// and only the indexed ones among `named` can be found gone (a file
/// watcher's events name the notes that may have changed).
pub fn drift_among<'a>(
    idx: &Index,
    since: SystemTime,
    current: &[NoteStat],
    named: impl IntoIterator<Item = &'a str>,
    mut read: impl FnMut(&str) -> Option<String>,
) -> Drift {
    let mut drift = Drift::default();
    let mut on_disk = std::collections::HashSet::with_capacity(current.len());
    for note in current {
        on_disk.insert(note.path.as_str());
        let known = idx.fingerprint(&note.path);
        let suspect = match known {
            None => true,
            Some(fp) => fp.bytes != note.bytes || note.modified >= since,
        };
        if !suspect {
            continue;
        }
        match read(&note.path) {
            Some(content) if known != Some(Fingerprint::of(&content)) => {
                drift.changed.push((note.path.clone(), content));
            }
            Some(_) => {}
            None => {
                if known.is_some() {
                    drift.removed.push(note.path.clone());
                }
            }
        }
    }
    // A note missing from `current` may have been written after the walk
    // that made it (by mirai, whose index already has it): gone only when
    // it cannot be read now.
    for path in named {
        if !on_disk.contains(path) && idx.fingerprint(path).is_some() && read(path).is_none() {
            drift.removed.push(path.to_string());
        }
    }
    drift
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::fs;
    use std::path::PathBuf;

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "mirai-artifact-{name}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl TempDir {
        fn handle(&self) -> Dir {
            Dir::open_ambient_dir(&self.0, cap_std::ambient_authority()).unwrap()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn notes() -> Vec<(String, String)> {
        vec![
            (
                "b.md".into(),
                "# B\nbeta \"quoted\" text\n\n## More\nline\n".into(),
            ),
            ("a/x.md".into(), "---\ntitle: X\n---\nalpha\r\n".into()),
            ("empty.md".into(), String::new()),
            ("日本.md".into(), "全文検索\n".into()),
        ]
    }

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(secs, 0).unwrap()
    }

    #[test]
    fn two_builds_write_identical_bytes_apart_from_generated_at() {
        let dir = TempDir::new("det");
        let mut reversed = notes();
        reversed.reverse();
        write(
            &dir.handle(),
            &Index::build(notes()),
            at(1_700_000_000),
            Some("abc"),
        )
        .unwrap();
        let first = fs::read_to_string(dir.0.join(FILE_NAME)).unwrap();
        write(
            &dir.handle(),
            &Index::build(reversed),
            at(1_800_000_000),
            Some("abc"),
        )
        .unwrap();
        let second = fs::read_to_string(dir.0.join(FILE_NAME)).unwrap();
        assert_ne!(first, second);
        let strip = |s: &str| {
            let v: serde_json::Value = serde_json::from_str(s).unwrap();
            let ts = v["generated_at"].as_str().unwrap().to_string();
            s.replace(&ts, "")
        };
        assert_eq!(strip(&first), strip(&second));
        assert!(first.starts_with(r#"{"version":1,"generated_at":"2023-11-14T22:13:20Z","notes_indexed":4,"chunks_indexed":"#));
        let mut left: Vec<String> = fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [binary::FILE_NAME, FILE_NAME],
            "temporary file left behind"
        );
    }

    /// Building on several threads changes slots and term ids only: the
    /// artifact is the same, byte for byte, and so is every answer.
    #[test]
    fn a_parallel_build_equals_a_sequential_one() {
        let dir = TempDir::new("par");
        let mut many = notes();
        for i in 0..40 {
            many.push((
                format!("d{}/n{i}.md", i % 3),
                format!("# N{i}\nbeta alpha {i}\n\n## More\nline {}\n", i * 7),
            ));
        }
        let sources = || {
            many.iter()
                .map(|(p, c)| (p.clone(), Source::Text(c.clone())))
                .collect::<Vec<_>>()
        };
        let sequential = Index::from_sources(sources(), Params::default(), 1);
        write(&dir.handle(), &sequential, at(1_700_000_000), Some("abc")).unwrap();
        let want = fs::read(dir.0.join(FILE_NAME)).unwrap();
        for parts in [2, 3, 7] {
            let parallel = Index::from_sources(sources(), Params::default(), parts);
            write(&dir.handle(), &parallel, at(1_700_000_000), Some("abc")).unwrap();
            assert!(
                fs::read(dir.0.join(FILE_NAME)).unwrap() == want,
                "{parts} parts"
            );
            for q in ["beta", "alpha line", "more 14", "検索", "n3"] {
                assert_eq!(
                    parallel.query(q, 50, None),
                    sequential.query(q, 50, None),
                    "{parts} parts: {q}"
                );
            }
        }
        let (loaded, _) = read(&dir.handle(), false).unwrap().unwrap();
        for q in ["beta", "alpha line", "d1"] {
            assert_eq!(loaded.query(q, 50, None), sequential.query(q, 50, None));
        }
    }

    #[test]
    fn round_trip_gives_the_same_index() {
        let dir = TempDir::new("rt");
        let built = Index::build(notes());
        let size = write(&dir.handle(), &built, at(1_700_000_000), None).unwrap();
        let (loaded, meta) = read(&dir.handle(), false).unwrap().unwrap();
        assert_eq!(meta.byte_size, size);
        assert_eq!(meta.generated_at, at(1_700_000_000));
        assert_eq!(meta.notes_commit, None);
        assert_eq!(loaded.notes_indexed(), 4);
        assert_eq!(loaded.chunks_indexed(), built.chunks_indexed());
        assert_eq!(loaded.content_bytes(), built.content_bytes());
        assert_eq!(
            loaded.fingerprint("empty.md"),
            built.fingerprint("empty.md")
        );
        for q in ["beta", "alpha x", "検索", "more line"] {
            assert_eq!(loaded.query(q, 10, None), built.query(q, 10, None), "{q}");
        }
        // The binary form written beside it loads the same.
        assert!(dir.0.join(binary::FILE_NAME).is_file());
        let (cached, cached_meta) = read(&dir.handle(), true).unwrap().unwrap();
        assert_eq!(cached_meta, meta);
        for q in ["beta", "alpha x", "検索", "more line"] {
            assert_eq!(cached.query(q, 10, None), built.query(q, 10, None), "{q}");
        }
        assert!(remove(&dir.handle()).unwrap());
        assert!(!dir.0.join(binary::FILE_NAME).exists());
    }

    /// The artifact's bytes for `idx`, written at a fixed time.
    fn bytes_of(dir: &TempDir, idx: &Index) -> Vec<u8> {
        write(&dir.handle(), idx, at(1_700_000_000), Some("abc")).unwrap();
        fs::read(dir.0.join(FILE_NAME)).unwrap()
    }

    /// A rebuild that reuses the index in memory (all of it, a few notes
    /// changed, or most changed) writes exactly what a cold build writes and
    /// answers alike.
    #[test]
    fn a_refreshed_index_writes_the_bytes_a_cold_build_writes() {
        use std::sync::Arc;
        let dir = TempDir::new("refresh");
        let mut before = notes();
        for i in 0..40 {
            before.push((
                format!("d{}/n{i}.md", i % 3),
                format!("# N{i}\nbeta alpha {i}\n\n## More\nline {}\n", i * 7),
            ));
        }
        let previous = Arc::new(Index::build(before.clone()));
        let same = Index::refreshed(&previous, before.clone());
        assert!(
            Arc::ptr_eq(&same, &previous),
            "nothing changed: reused whole"
        );

        let mut few = before.clone();
        few[0].1 = "# B\nbeta rewritten\n".into();
        few.remove(7);
        few.push((
            "new.md".into(),
            "# New\nfresh alpha\n\n# Two\nmore\n".into(),
        ));
        let mut most = before.clone();
        for note in most.iter_mut().take(30) {
            note.1.push_str("\n# Appended\ngamma\n");
        }
        for notes in [few, most] {
            let refreshed = Index::refreshed(&previous, notes.clone());
            assert!(!Arc::ptr_eq(&refreshed, &previous));
            let cold = Index::build(notes);
            assert!(bytes_of(&dir, &refreshed) == bytes_of(&dir, &cold));
            for q in ["beta", "alpha line", "fresh", "gamma", "検索", "n3"] {
                assert_eq!(refreshed.query(q, 50, None), cold.query(q, 50, None), "{q}");
            }
        }
    }

    /// A loaded artifact's chunks are reused only when they are what this
    /// chunker cuts from the note: chunks cut another way (here by the
    /// original service) are cut again, so the rebuild equals a cold one.
    #[test]
    fn an_artifacts_chunks_are_reused_only_when_cut_alike() {
        use std::sync::Arc;
        let dir = TempDir::new("reuse-loaded");
        write(
            &dir.handle(),
            &Index::build(notes()),
            at(1_700_000_000),
            None,
        )
        .unwrap();
        let (loaded, _) = read(&dir.handle(), false).unwrap().unwrap();
        let loaded = Arc::new(loaded);
        assert!(Arc::ptr_eq(&Index::refreshed(&loaded, notes()), &loaded));

        let doc = r#"{"version":1,"generated_at":"2024-01-01T00:00:00Z","notes_indexed":1,"chunks_indexed":2,"chunks":[{"path":"a.md","chunk_index":0,"content":"hello "},{"path":"a.md","chunk_index":1,"content":"world"}]}"#;
        fs::write(dir.0.join(FILE_NAME), doc).unwrap();
        let (foreign, _) = read(&dir.handle(), false).unwrap().unwrap();
        let foreign = Arc::new(foreign);
        let disk = vec![("a.md".to_string(), "hello world".to_string())];
        let refreshed = Index::refreshed(&foreign, disk.clone());
        assert!(!Arc::ptr_eq(&refreshed, &foreign));
        assert_eq!(refreshed.chunks_indexed(), 1);
        assert!(bytes_of(&dir, &refreshed) == bytes_of(&dir, &Index::build(disk)));
    }

    #[test]
    fn missing_artifact_is_none_and_remove_reports_it() {
        let dir = TempDir::new("missing");
        assert!(read(&dir.handle(), false).unwrap().is_none());
        assert!(!remove(&dir.handle()).unwrap());
        write(&dir.handle(), &Index::build(notes()), at(0), None).unwrap();
        assert!(remove(&dir.handle()).unwrap());
    }

    #[test]
    fn bad_artifacts_are_invalid_index_artifact() {
        let dir = TempDir::new("bad");
        write(
            &dir.handle(),
            &Index::build(notes()),
            at(1_700_000_000),
            None,
        )
        .unwrap();
        let good = fs::read_to_string(dir.0.join(FILE_NAME)).unwrap();
        let cases = vec![
            String::new(),
            "null".to_string(),
            "[]".to_string(),
            "{}".to_string(),
            good[..good.len() / 2].to_string(),
            good[..good.len() - 1].to_string(),
            good.replacen("\"version\":1", "\"version\":2", 1),
            good.replacen("\"version\":1", "\"version\":\"1\"", 1),
            good.replacen("2023-11-14T22:13:20Z", "yesterday", 1),
            good.replacen("\"notes_indexed\":4", "\"notes_indexed\":5", 1),
            good.replacen("\"notes_indexed\":4", "\"notes_indexed\":-4", 1),
            good.replacen("\"chunk_index\":0", "\"chunk_index\":7", 1),
            good.replacen("\"path\":\"a/x.md\"", "\"path\":\"../x.md\"", 1),
            good.replacen("\"path\":\"a/x.md\"", "\"path\":\"zz.md\"", 1),
            good.replacen("\"content\":", "\"content\":1,\"x\":", 1),
            "\u{feff}\u{0}garbage".to_string(),
        ];
        for (i, case) in cases.iter().enumerate() {
            fs::write(dir.0.join(FILE_NAME), case).unwrap();
            let err = read(&dir.handle(), true).unwrap_err();
            assert_eq!(
                err.code,
                ErrorCode::InvalidIndexArtifact,
                "case {i}: {case:.80}"
            );
            assert!(err.message.contains("rebuild"), "{}", err.message);
            assert!(err.message.contains(SHOWN_PATH), "{}", err.message);
            assert!(
                !err.message.contains(dir.0.to_str().unwrap()),
                "no absolute path: {}",
                err.message
            );
        }
        fs::write(
            dir.0.join(FILE_NAME),
            good.replacen("\"version\":1", "\"version\":2", 1),
        )
        .unwrap();
        let err = read(&dir.handle(), true).unwrap_err();
        assert!(err.message.contains("version 2"), "{}", err.message);
    }

    #[test]
    fn original_service_artifacts_without_notes_still_load() {
        let dir = TempDir::new("orig");
        let doc = r#"{"version":1,"generated_at":"2024-01-01T00:00:00Z","notes_indexed":1,"chunks_indexed":2,"chunks":[{"path":"a.md","chunk_index":0,"content":"hello"},{"path":"a.md","chunk_index":1,"content":"world"}]}"#;
        fs::write(dir.0.join(FILE_NAME), doc).unwrap();
        let (idx, meta) = read(&dir.handle(), false).unwrap().unwrap();
        assert_eq!(idx.chunks_indexed(), 2);
        assert_eq!(meta.notes_commit, None);
        assert_eq!(idx.query("world", 5, None)[0].chunk_index, 1);
    }

    #[test]
    fn staleness_on_change_add_delete_but_not_touch() {
        let idx = Index::build(notes());
        let built = at(1_700_000_000);
        let before = SystemTime::from(at(1_600_000_000));
        let after = SystemTime::from(at(1_700_000_100));
        let stats = |modified: SystemTime| -> Vec<NoteStat> {
            notes()
                .into_iter()
                .map(|(path, c)| NoteStat {
                    path,
                    bytes: c.len() as u64,
                    modified,
                })
                .collect()
        };
        let contents = |p: &str| notes().into_iter().find(|(q, _)| q == p).map(|(_, c)| c);
        assert!(!is_stale(&idx, built, &stats(before), |_| panic!(
            "no read needed"
        )));
        assert!(!is_stale(&idx, built, &stats(after), contents));

        // Same size, other content, written after the build.
        assert!(is_stale(&idx, built, &stats(after), |p| {
            contents(p).map(|c| {
                if p == "b.md" {
                    c.replace("beta", "BETA")
                } else {
                    c
                }
            })
        }));
        let mut added = stats(before);
        added.push(NoteStat {
            path: "new.md".into(),
            bytes: 1,
            modified: after,
        });
        let with_new = |p: &str| match p {
            "new.md" => Some("x".to_string()),
            _ => contents(p),
        };
        assert!(is_stale(&idx, built, &added, with_new));
        // A note listed but gone by the time it is read was not added.
        assert!(!is_stale(&idx, built, &added, contents));
        let mut deleted = stats(before);
        let gone = deleted.pop().unwrap().path;
        let without = |p: &str| (p != gone).then(|| contents(p)).flatten();
        assert!(is_stale(&idx, built, &deleted, without));
        // A note the walk missed but that is there now (written after the walk) is not gone.
        assert!(!is_stale(&idx, built, &deleted, contents));
        let mut resized = stats(before);
        resized[0].bytes += 1;
        let grown = |p: &str| contents(p).map(|c| format!("{c}!"));
        assert!(is_stale(&idx, built, &resized, grown));
        // A size that disagrees with content that did not change is not a change.
        assert!(!is_stale(&idx, built, &resized, contents));
        let mut renamed = stats(before);
        let old_path = std::mem::replace(&mut renamed[0].path, "renamed.md".into());
        let moved = |p: &str| match p {
            "renamed.md" => contents(&old_path),
            p if p == old_path => None,
            p => contents(p),
        };
        assert!(is_stale(&idx, built, &renamed, moved));
    }
}
