//! `.mirai/index.bin`: the index in a compact binary form beside the JSON
//! artifact, so a restart takes the postings as they are instead of parsing
//! the JSON and tokenizing every chunk again. The JSON stays the contract;
//! this file is a cache of it, used only when it provably belongs to the JSON
//! on disk: it records the size, SHA-256 and stamp (inode, modification and
//! change times) of the exact JSON it was written with (the JSON is hashed
//! again at a load only when its stamp differs), a fingerprint of the analyzer
//! that made its postings (the parameters and the tokenizer's output on a
//! probe text), and a CRC-32 of itself. Anything else (no file, another JSON,
//! another analyzer, a truncated or damaged file) means the JSON is read
//! instead, with a log line. It holds no copy of the chunks' text: where each
//! one is in the JSON (the byte range of its string), read from there while
//! the tables are decoded on another core.
//!
//! Parsed defensively, since a repository can carry a hostile one: every count
//! is checked against the bytes left before anything is allocated, every slot
//! and term id against its table, every text's place against the JSON (it
//! must be a JSON string there), postings must be strictly increasing with
//! frequencies above zero, and the tables must agree with each other (each
//! chunk's length with its postings, the title postings with the notes' title
//! terms), so an index loaded from it
//! keeps the invariants updates rely on. Nothing in it panics or allocates more
//! than the file's own size (or the JSON's) allows.
//!
//! Layout, little-endian, `v` a LEB128 varint: magic `MIRAIBIN`, u32 version,
//! u64 analyzer fingerprint, u64 JSON size, the JSON's 32-byte SHA-256, its
//! stamp (u64 inode, i64 modification and i64 change time in nanoseconds),
//! i64 `generated_at` (seconds), `notes_commit` (u8 present, then a string);
//! u64 chunk slots, then per chunk slot the u64 offset and u64 length of its
//! text's JSON string in the JSON (0, 0 for a free slot); v note slots, v
//! chunk slots; the terms (v count, each a string; a term's id is its place);
//! per note slot a u8 live flag, then path, u64 size, u64 FNV-1a, v title
//! length, v chunk count, v title-term count and (v term, v tf) pairs; per
//! chunk slot a u8 live flag, then v note slot, v chunk index and v length;
//! per term its body and title postings (v count, then (v slot gap, v tf)
//! pairs, the gap counted from the previous slot plus one; the whole-note
//! postings are the body's summed per note, made again at a load); last a
//! u32 CRC-32 of everything before it. A string is v length and UTF-8 bytes.
//! Slots are the index's own, free ones included, so a write copies the
//! tables as they are. Everything up to the body is written last, once the
//! JSON beside it is in place.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use chrono::{DateTime, Utc};
use rustc_hash::FxBuildHasher;
use sha2::{Digest, Sha256};

use super::postings::{Postings, Terms};
use super::stored::{is_safe_path, ArtifactMeta};
use super::update::title_field;
use super::{fnv1a, Chunk, Index, Note, Params};
use crate::durable::create_temp;

pub const FILE_NAME: &str = "index.bin";
const MAGIC: &[u8; 8] = b"MIRAIBIN";
const VERSION: u32 = 2;

/// The JSON artifact a binary form belongs to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct JsonId {
    pub(super) size: u64,
    pub(super) sha256: [u8; 32],
    /// The file as it stood once in place (zero until then).
    pub(super) stamp: JsonStamp,
}

/// A file's identity as git's index records it: inode and nanosecond
/// modification and change times. Any write to the file, a rename onto it or
/// a reset of its times moves the change time, which no user can set, so an
/// equal stamp means the very file that was stamped, untouched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct JsonStamp {
    ino: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl JsonStamp {
    pub(super) fn of(meta: &std::fs::Metadata) -> JsonStamp {
        use std::os::unix::fs::MetadataExt;
        let ns = |secs: i64, nanos: i64| secs.saturating_mul(1_000_000_000).saturating_add(nanos);
        JsonStamp {
            ino: meta.ino(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Passes the JSON artifact's bytes through to `inner` while hashing them.
pub(super) struct HashingWriter<W> {
    inner: W,
    sha: Sha256,
    size: u64,
}

impl<W: Write> HashingWriter<W> {
    pub(super) fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            sha: Sha256::new(),
            size: 0,
        }
    }

    pub(super) fn finish(self) -> (W, JsonId) {
        let id = JsonId {
            size: self.size,
            sha256: self.sha.finalize().into(),
            stamp: JsonStamp::default(),
        };
        (self.inner, id)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// What the tokenizer and title field make of a probe, with the parameters:
/// a binary form written by a mirai that analyzed text differently (its
/// postings would not match the terms queries look up now) is not used.
fn analyzer_fingerprint() -> u64 {
    static FINGERPRINT: OnceLock<u64> = OnceLock::new();
    *FINGERPRINT.get_or_init(|| {
        const PROBE: &str = "The Quick brown foxes were running; don't STOP at naïve Café \
             résumés, studies and relational databases. 2024-11-24 v1.2.3 \
             全文検索の評価 かな カタカナ 한국어 emoji 🦀 under_score hyphen-ated \
             http://example.com/a?b=c #tag [[Link|alias]]";
        let params = Params::default();
        let idx = Index::empty(params);
        let mut seen = format!("{params:?}\n");
        idx.tokenizer.for_each_token(PROBE, |term, start, end| {
            seen.push_str(&format!("{term}:{start}:{end} "));
        });
        seen.push_str(&title_field(
            "folder/probe.md",
            "---\ntitle: \"Probe title\"\n---\n# Heading\n",
        ));
        seen.push_str(&title_field(
            "probe.MD",
            "```\n# not a heading\n```\n# Real\n",
        ));
        fnv1a(seen.as_bytes())
    })
}

/// Appends `x` as a LEB128 varint (7 bits a byte, high bit: more follow).
fn put_v(buf: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        buf.push((x as u8) | 0x80);
        x >>= 7;
    }
    buf.push(x as u8);
}

/// Bytes on their way to the file, with their running CRC.
struct Out {
    buf: Vec<u8>,
    file: std::fs::File,
    crc: crc32fast::Hasher,
}

impl Out {
    fn spill(&mut self) -> io::Result<()> {
        self.crc.update(&self.buf);
        self.file.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= 1 << 20 {
            self.spill()?;
        }
        Ok(())
    }

    fn v(&mut self, x: u64) -> io::Result<()> {
        put_v(&mut self.buf, x);
        if self.buf.len() >= 1 << 20 {
            self.spill()?;
        }
        Ok(())
    }

    fn string(&mut self, s: &str) -> io::Result<()> {
        self.v(s.len() as u64)?;
        self.raw(s.as_bytes())
    }
}

/// `index.bin` being written for `idx`: its body (tables and postings) in a
/// temp file after room for the header, written while the JSON artifact is,
/// on another core; [`Pending::finish`] adds the header naming that JSON.
pub(super) struct Pending {
    tmp: String,
    file: std::fs::File,
    header_len: usize,
    chunk_slots: usize,
    body_crc: crc32fast::Hasher,
}

/// Writes the body of `index.bin` for `idx`; `None` when the index is not
/// made with the default analyzer (no binary form is kept then).
pub(super) fn start(
    state: &Dir,
    idx: &Index,
    generated_at: DateTime<Utc>,
    notes_commit: Option<&str>,
) -> io::Result<Option<Pending>> {
    if idx.params != Params::default() {
        remove(state)?;
        return Ok(None);
    }
    let (tmp, file) = create_temp(state, FILE_NAME)?;
    let chunk_slots = idx.chunks.len();
    let header_len = header_bytes(&JsonId::default(), generated_at, notes_commit).len()
        + 8
        + LOCATION_BYTES * chunk_slots;
    let mut out = Out {
        buf: Vec::with_capacity(1 << 21),
        file,
        crc: crc32fast::Hasher::new(),
    };
    let written = out
        .file
        .seek(io::SeekFrom::Start(header_len as u64))
        .and_then(|_| encode_body(&mut out, idx))
        .and_then(|()| out.spill());
    match written {
        Ok(()) => Ok(Some(Pending {
            tmp,
            file: out.file,
            header_len,
            chunk_slots,
            body_crc: out.crc,
        })),
        Err(e) => {
            let _ = state.remove_file(&tmp);
            Err(e)
        }
    }
}

impl Pending {
    /// Writes the header naming `json`, where each chunk's text is in it
    /// (`locations`, by chunk slot: the byte range of its JSON string) and
    /// the checksum, and puts the file in place; on failure the temp file is
    /// removed.
    pub(super) fn finish(
        self,
        state: &Dir,
        json: JsonId,
        locations: &[(u64, u64)],
        generated_at: DateTime<Utc>,
        notes_commit: Option<&str>,
    ) -> io::Result<()> {
        let mut header = header_bytes(&json, generated_at, notes_commit);
        header.extend_from_slice(&(locations.len() as u64).to_le_bytes());
        for &(at, len) in locations {
            header.extend_from_slice(&at.to_le_bytes());
            header.extend_from_slice(&len.to_le_bytes());
        }
        let result = (|| {
            if header.len() != self.header_len || locations.len() != self.chunk_slots {
                return Err(io::Error::other("the header changed length"));
            }
            self.file.write_all_at(&header, 0)?;
            // CRC-32 of header then body, from the two parts' own CRCs.
            let mut crc = crc32fast::Hasher::new();
            crc.update(&header);
            crc.combine(&self.body_crc);
            let mut file = &self.file;
            file.seek(io::SeekFrom::End(0))?;
            file.write_all(&crc.finalize().to_le_bytes())?;
            state.rename(&self.tmp, state, FILE_NAME)
        })();
        if result.is_err() {
            let _ = state.remove_file(&self.tmp);
        }
        result
    }

    /// Gives up: the temp file goes.
    pub(super) fn abandon(self, state: &Dir) {
        let _ = state.remove_file(&self.tmp);
    }
}

/// Deletes `index.bin`, if there is one.
pub(super) fn remove(state: &Dir) -> io::Result<()> {
    match state.remove_file(FILE_NAME) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Bytes per chunk slot in the table of where each chunk's text is in the JSON.
const LOCATION_BYTES: usize = 16;

/// The file's header: what it is, the analyzer, the JSON it belongs to and
/// the artifact's metadata. Its length does not depend on `json`, so the body
/// can be written after a header's worth of room before the JSON is done.
fn header_bytes(json: &JsonId, generated_at: DateTime<Utc>, notes_commit: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&analyzer_fingerprint().to_le_bytes());
    out.extend_from_slice(&json.size.to_le_bytes());
    out.extend_from_slice(&json.sha256);
    out.extend_from_slice(&json.stamp.ino.to_le_bytes());
    out.extend_from_slice(&json.stamp.mtime_ns.to_le_bytes());
    out.extend_from_slice(&json.stamp.ctime_ns.to_le_bytes());
    out.extend_from_slice(&generated_at.timestamp().to_le_bytes());
    match notes_commit {
        Some(commit) => {
            out.push(1);
            put_v(&mut out, commit.len() as u64);
            out.extend_from_slice(commit.as_bytes());
        }
        None => out.push(0),
    }
    out
}

/// Everything after the header: the tables and postings.
fn encode_body(out: &mut Out, idx: &Index) -> io::Result<()> {
    out.v(idx.notes.len() as u64)?;
    out.v(idx.chunks.len() as u64)?;

    let mut names: Vec<&str> = vec![""; idx.terms.body.len()];
    for (term, &id) in &idx.terms.ids {
        names[id as usize] = term;
    }
    out.v(names.len() as u64)?;
    for name in names {
        out.string(name)?;
    }

    for note in &idx.notes {
        let Some(note) = note else {
            out.raw(&[0])?;
            continue;
        };
        out.raw(&[1])?;
        out.string(&note.path)?;
        out.raw(&note.bytes.to_le_bytes())?;
        out.raw(&note.hash.to_le_bytes())?;
        out.v(note.title_len.into())?;
        out.v(note.chunks.len() as u64)?;
        out.v(note.title_terms.len() as u64)?;
        for &(term, tf) in &note.title_terms {
            out.v(term.into())?;
            out.v(tf.into())?;
        }
    }

    for chunk in &idx.chunks {
        let Some(chunk) = chunk else {
            out.raw(&[0])?;
            continue;
        };
        out.raw(&[1])?;
        out.v(chunk.note.into())?;
        out.v(chunk.chunk_index.into())?;
        out.v(chunk.len.into())?;
    }

    // The whole-note postings are the body's summed per note: made again at a load.
    for id in 0..idx.terms.body.len() {
        for list in [&idx.terms.body[id], &idx.terms.title[id]] {
            let entries = list.sorted_entries();
            out.v(entries.len() as u64)?;
            let mut next = 0u32;
            for &(slot, tf) in entries.iter() {
                out.v((slot - next).into())?;
                out.v(tf.into())?;
                next = slot + 1;
            }
        }
    }
    Ok(())
}

/// The index and metadata from `index.bin`, when it belongs to `json` (the
/// JSON artifact, opened by the caller); `None` (after a log line saying why)
/// when the JSON must be read instead.
pub(super) fn read(state: &Dir, json: &std::fs::File) -> Option<(Index, ArtifactMeta)> {
    let json_meta = json.metadata().ok()?;
    let json_size = json_meta.len();
    let bytes = match read_file(state, json_size) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            log::info!("no .mirai/{FILE_NAME} yet; reading the JSON artifact");
            return None;
        }
        Err(e) => {
            log::warn!("not using .mirai/{FILE_NAME} ({e}); reading the JSON artifact");
            return None;
        }
    };
    let loaded: Res<(Index, ArtifactMeta)> = std::thread::scope(|scope| {
        let (mut r, header) = header(&bytes, json_size)?;
        // The JSON is read (and hashed, unless it is the very file this one
        // was written with) and the chunks' texts taken from it on another
        // core while this one decodes the tables.
        let sha = (header.json.stamp != JsonStamp::of(&json_meta)).then_some(header.json.sha256);
        let locations = header.locations;
        let started = std::time::Instant::now();
        let texts = scope.spawn(move || {
            let texts = json_texts(json, json_size, sha, locations);
            (texts, started.elapsed())
        });
        let decoded = body(&mut r);
        let tables = started.elapsed();
        let (texts, texts_took) = texts
            .join()
            .map_err(|_| "reading the JSON artifact failed".to_string())?;
        let texts = texts?;
        log::debug!(
            "index.bin: tables decoded in {} ms; chunk texts read from the JSON{} in {} ms",
            tables.as_millis(),
            if sha.is_some() { " (hashed)" } else { "" },
            texts_took.as_millis()
        );
        let mut idx = decoded?;
        put_texts(&mut idx, texts)?;
        let meta = ArtifactMeta {
            generated_at: header.generated_at,
            notes_commit: header.notes_commit,
            byte_size: json_size,
        };
        Ok((idx, meta))
    });
    match loaded {
        Ok(loaded) => Some(loaded),
        Err(e) => {
            log::warn!("not using .mirai/{FILE_NAME} ({e}); reading the JSON artifact");
            None
        }
    }
}

/// The file's bytes (a regular file, opened without following a link or
/// blocking); `None` when there is none. A binary form is smaller than
/// its JSON: one much larger is refused before it is read.
fn read_file(state: &Dir, json_size: u64) -> io::Result<Option<Vec<u8>>> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .follow(FollowSymlinks::No)
        .custom_flags(libc::O_NONBLOCK);
    let file = match state.open_with(FILE_NAME, &options) {
        Ok(file) => file.into_std(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    let cap = json_size.saturating_mul(2).saturating_add(1 << 20);
    if meta.len() > cap {
        return Err(io::Error::other("it is larger than its JSON could give"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::other("it is larger than its JSON could give"));
    }
    Ok(Some(bytes))
}

/// Each chunk slot's text from the JSON artifact (`None` for a free slot),
/// at the byte ranges `locations` (16 bytes a slot) names. The file is read
/// once, front to back, a megabyte at a time (and hashed on the way: with
/// `sha`, it must hash to that); it must be `size` bytes long.
fn json_texts(
    file: &std::fs::File,
    size: u64,
    sha: Option<[u8; 32]>,
    locations: &[u8],
) -> Res<Vec<Option<String>>> {
    const STEP: usize = 1 << 20;
    let failed = |e: io::Error| format!("the JSON artifact could not be read: {e}");
    let mut texts: Vec<Option<String>> = Vec::new();
    // (offset, length, slot) of each live chunk's text, in file order.
    let mut wanted: Vec<(u64, u64, usize)> = Vec::new();
    for (slot, entry) in locations.chunks_exact(LOCATION_BYTES).enumerate() {
        texts.push(None);
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&entry[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        let (at, len) = (word(0), word(1));
        if len == 0 {
            continue;
        }
        if at.checked_add(len).is_none_or(|end| end > size) {
            return Err("a chunk's text lies outside the JSON artifact".into());
        }
        wanted.push((at, len, slot));
    }
    wanted.sort_unstable();
    let mut hasher = sha.map(|_| Sha256::new());
    // The file from `base` to `read_to`: what texts not yet taken still need.
    let mut buf: Vec<u8> = Vec::with_capacity(2 * STEP);
    let (mut base, mut read_to, mut next) = (0u64, 0u64, 0usize);
    while read_to < size {
        let old = buf.len();
        buf.resize(old + STEP, 0);
        let n = loop {
            match file.read_at(&mut buf[old..], read_to) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other.map_err(failed)?,
            }
        };
        buf.truncate(old + n);
        if n == 0 {
            return Err("the JSON artifact changed while it was read".into());
        }
        if let Some(hasher) = hasher.as_mut() {
            hasher.update(&buf[old..]);
        }
        read_to += n as u64;
        while let Some(&(at, len, slot)) = wanted.get(next) {
            if at + len > read_to {
                break;
            }
            let from = (at - base) as usize;
            let text = json_string(&buf[from..from + len as usize])
                .ok_or("a chunk's text is not a JSON string")?;
            texts[slot] = Some(text);
            next += 1;
        }
        let keep = wanted.get(next).map_or(read_to, |w| w.0).min(read_to);
        buf.drain(..(keep - base) as usize);
        base = keep;
    }
    let mut probe = [0u8; 1];
    if file.read_at(&mut probe, size).map_err(failed)? != 0 {
        return Err("the JSON artifact changed while it was read".into());
    }
    if let (Some(hasher), Some(want)) = (hasher, sha) {
        if <[u8; 32]>::from(hasher.finalize()) != want {
            return Err("it was written with another JSON artifact".into());
        }
    }
    Ok(texts)
}

/// The string a JSON string literal (quotes included) holds. The escapes
/// serde_json writes are undone here, a run at a time; a `\u` escape is left
/// to serde_json.
fn json_string(literal: &[u8]) -> Option<String> {
    let inner = literal.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let mut out = Vec::with_capacity(inner.len());
    let mut rest = inner;
    while let Some(i) = memchr::memchr2(b'\\', b'"', rest) {
        out.extend_from_slice(&rest[..i]);
        if rest[i] == b'"' {
            return None;
        }
        out.push(match rest.get(i + 1)? {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            _ => return serde_json::from_slice(literal).ok(),
        });
        rest = &rest[i + 2..];
    }
    out.extend_from_slice(rest);
    String::from_utf8(out).ok()
}

/// Gives each live chunk of `idx` its text (and counts the bytes).
fn put_texts(idx: &mut Index, texts: Vec<Option<String>>) -> Res<()> {
    if texts.len() != idx.chunks.len() {
        return Err("the chunk tables disagree".into());
    }
    for (chunk, text) in idx.chunks.iter_mut().zip(texts) {
        match (chunk, text) {
            (Some(chunk), Some(text)) => {
                idx.content_bytes += text.len() as u64;
                chunk.content = text.into();
            }
            (None, None) => {}
            _ => return Err("a chunk's text is missing or belongs to no chunk".into()),
        }
    }
    Ok(())
}

type Res<T> = std::result::Result<T, String>;

/// A bounds-checked cursor over the file's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        if n > self.left() {
            return Err("it is truncated".into());
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Res<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn flag(&mut self) -> Res<bool> {
        match self.array::<1>()? {
            [0] => Ok(false),
            [1] => Ok(true),
            _ => Err("a flag is neither 0 nor 1".into()),
        }
    }

    fn u64(&mut self) -> Res<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn v(&mut self) -> Res<u64> {
        varint(self.bytes, &mut self.at).ok_or_else(|| "a number is truncated or too long".into())
    }

    fn v32(&mut self) -> Res<u32> {
        u32::try_from(self.v()?).map_err(|_| "a number is out of range".to_string())
    }

    /// A count of items of at least `min` bytes each, which the bytes left must hold.
    fn count(&mut self, min: usize) -> Res<usize> {
        let n = self.v()?;
        if n > (self.left() / min) as u64 || n > u64::from(u32::MAX) {
            return Err("a count is larger than the file".into());
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Res<&'a str> {
        let n = self.count(1)?;
        std::str::from_utf8(self.take(n)?).map_err(|_| "a string is not UTF-8".to_string())
    }
}

/// The LEB128 varint at `*at` in `bytes` (moving past it); `None` when it
/// runs past the end or over ten bytes. Most numbers (postings' gaps and
/// frequencies) take one byte.
#[inline]
fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let b = *bytes.get(*at)?;
    *at += 1;
    if b < 0x80 {
        return Some(u64::from(b));
    }
    let mut x = u64::from(b & 0x7f);
    for i in 1..10 {
        let b = *bytes.get(*at)?;
        *at += 1;
        x |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(x);
        }
    }
    None
}

struct Header<'a> {
    json: JsonId,
    generated_at: DateTime<Utc>,
    notes_commit: Option<String>,
    /// Per chunk slot, where its text is in the JSON: u64 offset, u64 length.
    locations: &'a [u8],
}

/// Checks the checksum, magic, version, analyzer and JSON size; returns a
/// reader at the tables.
fn header(bytes: &[u8], json_size: u64) -> Res<(Reader<'_>, Header<'_>)> {
    let Some(split) = bytes.len().checked_sub(4) else {
        return Err("it is truncated".into());
    };
    let (payload, crc) = bytes.split_at(split);
    if crc32fast::hash(payload).to_le_bytes() != crc {
        return Err("its checksum does not match (damaged or truncated)".into());
    }
    let mut r = Reader {
        bytes: payload,
        at: 0,
    };
    if r.array::<8>()? != *MAGIC {
        return Err("it is not a mirai index".into());
    }
    let version = u32::from_le_bytes(r.array()?);
    if version != VERSION {
        return Err(format!("version {version} is not {VERSION}"));
    }
    if r.u64()? != analyzer_fingerprint() {
        return Err("it was made by a mirai that analyzes text differently".into());
    }
    if r.u64()? != json_size {
        return Err("it was written with another JSON artifact".into());
    }
    let sha256 = r.array()?;
    let stamp = JsonStamp {
        ino: r.u64()?,
        mtime_ns: i64::from_le_bytes(r.array()?),
        ctime_ns: i64::from_le_bytes(r.array()?),
    };
    let secs = i64::from_le_bytes(r.array()?);
    let generated_at = DateTime::from_timestamp(secs, 0).ok_or("generated_at is out of range")?;
    let notes_commit = if r.flag()? {
        Some(r.string()?.to_string())
    } else {
        None
    };
    let slots = r.u64()?;
    let locations = usize::try_from(slots)
        .ok()
        .and_then(|n| n.checked_mul(LOCATION_BYTES))
        .filter(|&n| n <= r.left())
        .ok_or("a count is larger than the file")?;
    let header = Header {
        json: JsonId {
            size: json_size,
            sha256,
            stamp,
        },
        generated_at,
        notes_commit,
        locations: r.take(locations)?,
    };
    Ok((r, header))
}

/// The tables, checked against each other, as an index.
fn body(r: &mut Reader<'_>) -> Res<Index> {
    let started = std::time::Instant::now();
    let note_slots = r.count(1)?;
    let chunk_slots = r.count(1)?;
    let mut terms = read_terms(r)?;
    let term_count = terms.ids.len();
    let terms_took = started.elapsed();
    let mut idx = Index::empty(Params::default());
    let NoteTable {
        mut notes,
        by_path,
        title_entries,
    } = read_notes(r, (note_slots, chunk_slots), term_count)?;
    let chunks = read_chunks(r, chunk_slots, &mut notes, &mut idx)?;
    let tables_took = started.elapsed();
    read_postings(r, (&notes, &chunks), &mut terms, title_entries)?;
    log::debug!(
        "index.bin: {term_count} terms in {} ms, notes and chunks by {} ms, postings by {} ms",
        terms_took.as_millis(),
        tables_took.as_millis(),
        started.elapsed().as_millis()
    );
    if r.left() != 0 {
        return Err("bytes follow the tables".to_string());
    }

    // Free slots are handed out lowest first, as after a removal.
    idx.free_notes = (0..note_slots as u32)
        .rev()
        .filter(|&s| notes[s as usize].is_none())
        .collect();
    idx.free_chunks = (0..chunk_slots as u32)
        .rev()
        .filter(|&s| chunks[s as usize].is_none())
        .collect();
    idx.by_path = by_path;
    idx.notes = notes;
    idx.chunks = chunks;
    idx.terms = terms;
    Ok(idx)
}

/// What the note table holds: the notes by slot, the live ones by path, and
/// how many title terms they list.
struct NoteTable {
    notes: Vec<Option<Note>>,
    by_path: BTreeMap<String, u32>,
    title_entries: usize,
}

/// The term table: each term once, numbered in order.
fn read_terms(r: &mut Reader<'_>) -> Res<Terms> {
    let bad = |what: &str| Err(what.to_string());
    let term_count = r.count(1)?;
    let mut terms = Terms {
        ids: HashMap::with_capacity_and_hasher(term_count, FxBuildHasher),
        ..Terms::default()
    };
    for id in 0..term_count {
        if terms.ids.insert(r.string()?.into(), id as u32).is_some() {
            return bad("a term is listed twice");
        }
    }

    Ok(terms)
}

/// The note table (`slots`: notes, then chunks): each live note's path,
/// size, hash and title terms, its chunks still to be filled in; the notes
/// by path; and how many title terms the notes list.
fn read_notes(
    r: &mut Reader<'_>,
    (note_slots, chunk_slots): (usize, usize),
    term_count: usize,
) -> Res<NoteTable> {
    let bad = |what: &str| Err(what.to_string());
    let mut notes: Vec<Option<Note>> = Vec::with_capacity(note_slots);
    let mut by_path = BTreeMap::new();
    let mut chunks_claimed = 0usize;
    let mut title_entries = 0usize;
    for slot in 0..note_slots {
        if !r.flag()? {
            notes.push(None);
            continue;
        }
        let path = r.string()?;
        if !is_safe_path(path) {
            return Err(format!("unsafe note path {path:?}"));
        }
        if by_path.insert(path.to_string(), slot as u32).is_some() {
            return bad("a note is listed twice");
        }
        let bytes = r.u64()?;
        let hash = r.u64()?;
        let title_len = r.v32()?;
        let chunk_count = r.v()?;
        chunks_claimed = chunks_claimed.saturating_add(chunk_count as usize);
        if chunks_claimed > chunk_slots {
            return bad("notes claim more chunks than there are");
        }
        let n = r.count(2)?;
        let mut title_terms: Vec<(u32, u32)> = Vec::with_capacity(n);
        for _ in 0..n {
            let term = r.v32()?;
            let tf = r.v32()?;
            if term as usize >= term_count || tf == 0 {
                return bad("a title term is out of range");
            }
            title_terms.push((term, tf));
        }
        title_terms.sort_unstable();
        if title_terms.windows(2).any(|w| w[0].0 == w[1].0) {
            return bad("a title term is listed twice");
        }
        let tf_sum: u64 = title_terms.iter().map(|&(_, tf)| u64::from(tf)).sum();
        if tf_sum != u64::from(title_len) {
            return bad("a title length disagrees with its terms");
        }
        title_entries += n;
        notes.push(Some(Note {
            path: path.to_string(),
            chunks: vec![u32::MAX; chunk_count as usize],
            title_terms,
            title_len,
            len: 0,
            bytes,
            hash,
            // As for an artifact's chunks: reused only when they are what this chunker cuts.
            cut_here: false,
        }));
    }

    Ok(NoteTable {
        notes,
        by_path,
        title_entries,
    })
}

/// The chunk table, each chunk put in its note's place (`idx` counts them).
fn read_chunks(
    r: &mut Reader<'_>,
    chunk_slots: usize,
    notes: &mut [Option<Note>],
    idx: &mut Index,
) -> Res<Vec<Option<Chunk>>> {
    let bad = |what: &str| Err(what.to_string());
    let mut chunks: Vec<Option<Chunk>> = Vec::with_capacity(chunk_slots);
    for slot in 0..chunk_slots {
        if !r.flag()? {
            chunks.push(None);
            continue;
        }
        let note_slot = r.v32()?;
        let chunk_index = r.v32()?;
        let len = r.v32()?;
        let Some(Some(note)) = notes.get_mut(note_slot as usize) else {
            return bad("a chunk belongs to no note");
        };
        match note.chunks.get_mut(chunk_index as usize) {
            Some(place) if *place == u32::MAX => *place = slot as u32,
            _ => return bad("a chunk's number is out of range or taken"),
        }
        note.len += u64::from(len);
        idx.live_chunks += 1;
        idx.total_len += u64::from(len);
        idx.total_title_len += u64::from(note.title_len);
        chunks.push(Some(Chunk {
            note: note_slot,
            chunk_index,
            // From the JSON artifact, once the tables are read.
            content: "".into(),
            len,
        }));
    }
    for note in notes.iter().flatten() {
        if note.chunks.contains(&u32::MAX) {
            return bad("a note misses a chunk");
        }
        if !note.chunks.is_empty() {
            idx.live_notes += 1;
        }
    }

    Ok(chunks)
}

/// The postings of every term into `terms`.
fn read_postings(
    r: &mut Reader<'_>,
    (notes, chunks): (&[Option<Note>], &[Option<Chunk>]),
    terms: &mut Terms,
    title_entries: usize,
) -> Res<()> {
    let bad = |what: &str| Err(what.to_string());
    let (note_slots, chunk_slots, term_count) = (notes.len(), chunks.len(), terms.ids.len());
    // Postings, checked against the tables: the body frequencies of a chunk
    // sum to its length and the title lists are the notes' title terms; the
    // whole-note list of a term is made as the sum of its body list per note.
    let mut chunk_sums = vec![0u64; chunk_slots];
    let mut per_note = vec![0u32; note_slots];
    // Each chunk slot's note (u32::MAX: free), dense: looked up per posting.
    let note_of: Vec<u32> = chunks
        .iter()
        .map(|chunk| chunk.as_ref().map_or(u32::MAX, |c| c.note))
        .collect();
    let mut touched: Vec<u32> = Vec::new();
    let mut title_seen = 0usize;
    for term in 0..term_count as u32 {
        let body = list(r, chunk_slots)?;
        for &(slot, tf) in &body {
            chunk_sums[slot as usize] += u64::from(tf);
            let note = note_of[slot as usize];
            if note == u32::MAX {
                return bad("a posting names a free chunk");
            }
            let sum = &mut per_note[note as usize];
            if *sum == 0 {
                touched.push(note);
            }
            *sum = sum
                .checked_add(tf)
                .ok_or_else(|| "a frequency is out of range".to_string())?;
        }
        let title = list(r, note_slots)?;
        for &(slot, tf) in &title {
            let known = notes[slot as usize]
                .as_ref()
                .and_then(|n| {
                    let at = n.title_terms.binary_search_by_key(&term, |t| t.0).ok()?;
                    Some(n.title_terms[at].1)
                })
                .is_some_and(|want| want == tf);
            if !known {
                return bad("a title posting disagrees with its note");
            }
        }
        title_seen += title.len();
        let whole = whole_note(&mut per_note, &mut touched);
        terms.body.push(Postings::from_sorted(body));
        terms.title.push(Postings::from_sorted(title));
        terms.whole.push(Postings::from_sorted(whole));
    }
    if title_seen != title_entries {
        return bad("the title postings disagree with the notes' titles");
    }
    let lengths_agree = chunks
        .iter()
        .zip(&chunk_sums)
        .all(|(chunk, &sum)| chunk.as_ref().map_or(sum == 0, |c| u64::from(c.len) == sum));
    if !lengths_agree {
        return bad("a chunk's length disagrees with its postings");
    }
    Ok(())
}

/// A term's whole-note postings from its body postings' sums per note
/// (`per_note`, nonzero at the `touched` notes), in note order; both are
/// left cleared.
fn whole_note(per_note: &mut [u32], touched: &mut Vec<u32>) -> Vec<(u32, u32)> {
    let mut whole: Vec<(u32, u32)> = Vec::with_capacity(touched.len());
    if touched.len() * 16 > per_note.len() {
        // Most notes: a pass over all of them beats sorting.
        for (slot, sum) in per_note.iter_mut().enumerate() {
            if *sum > 0 {
                whole.push((slot as u32, std::mem::take(sum)));
            }
        }
    } else {
        touched.sort_unstable();
        whole.extend(
            touched
                .iter()
                .map(|&slot| (slot, std::mem::take(&mut per_note[slot as usize]))),
        );
    }
    touched.clear();
    whole
}

/// One postings list: strictly increasing slots below `slots`, with
/// frequencies above zero (the caller checks the slots are live: a body
/// posting's chunk, a title posting's title terms).
fn list(r: &mut Reader<'_>, slots: usize) -> Res<Vec<(u32, u32)>> {
    let n = r.count(2)?;
    let mut out = Vec::with_capacity(n);
    let (bytes, mut at) = (r.bytes, r.at);
    let mut next = 0u64;
    for _ in 0..n {
        let (Some(gap), Some(tf)) = (varint(bytes, &mut at), varint(bytes, &mut at)) else {
            return Err("a number is truncated or too long".into());
        };
        let slot = next
            .checked_add(gap)
            .filter(|&s| s < slots as u64)
            .ok_or("a posting names a slot out of range")?;
        if tf == 0 || tf > u64::from(u32::MAX) {
            return Err("a posting's frequency is out of range".into());
        }
        out.push((slot as u32, tf as u32));
        next = slot + 1;
    }
    r.at = at;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JSON file holding the texts of `idx`'s chunks (a list of strings)
    /// and `index.bin` beside it naming it, written as the artifact writer
    /// writes them; answers the JSON, opened.
    fn write(dir: &Dir, idx: &Index, at: DateTime<Utc>, commit: Option<&str>) -> std::fs::File {
        let mut json = b"[".to_vec();
        let mut locations = vec![(0u64, 0u64); idx.chunks.len()];
        for (slot, chunk) in idx.chunks.iter().enumerate() {
            if let Some(chunk) = chunk {
                if json.len() > 1 {
                    json.push(b',');
                }
                let literal = serde_json::to_vec(&chunk.content).unwrap();
                locations[slot] = (json.len() as u64, literal.len() as u64);
                json.extend_from_slice(&literal);
            }
        }
        json.push(b']');
        dir.write("texts.json", &json).unwrap();
        let file = dir.open("texts.json").unwrap().into_std();
        let mut hashing = HashingWriter::new(Vec::new());
        hashing.write_all(&json).unwrap();
        let (_, mut id) = hashing.finish();
        id.stamp = JsonStamp::of(&file.metadata().unwrap());
        let pending = start(dir, idx, at, commit).unwrap().unwrap();
        pending.finish(dir, id, &locations, at, commit).unwrap();
        file
    }
    use std::fs;

    fn notes() -> Vec<(String, String)> {
        let mut notes = vec![
            (
                "b.md".to_string(),
                "# B\nbeta \"quoted\" text\n\n## More\nline beta\n".to_string(),
            ),
            ("a/x.md".into(), "---\ntitle: X ray\n---\nalpha\r\n".into()),
            ("empty.md".into(), String::new()),
            ("日本.md".into(), "全文検索\n".into()),
        ];
        for i in 0..30 {
            notes.push((
                format!("d{}/n{i}.md", i % 4),
                format!(
                    "# Note {i}\nbeta alpha {i}\n\n## More\nline {} gamma\n",
                    i * 7
                ),
            ));
        }
        notes
    }

    /// An index that went through updates: free slots, tombstones, tails.
    fn updated() -> Index {
        let mut idx = Index::build(notes());
        idx.remove_note("d1/n5.md");
        idx.remove_note("b.md");
        idx.upsert_note("d2/n6.md", "# Six\ncompletely new words here beta\n");
        idx.upsert_note("late.md", "# Late\nalpha beta delta\n\n## Two\nepsilon\n");
        idx
    }

    fn dir() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        (tmp, dir)
    }

    /// A file of its own holding `bytes`.
    fn copy(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn answers(idx: &Index) -> Vec<Vec<super::super::Hit>> {
        [
            "beta",
            "alpha line",
            "gamma 14",
            "検索",
            "x ray",
            "late epsilon",
            "n3 more",
        ]
        .iter()
        .flat_map(|q| [idx.query(q, 50, None), idx.query(q, 3, Some("d2"))])
        .collect()
    }

    #[test]
    fn a_round_trip_answers_as_the_index_did() {
        let (_tmp, dir) = dir();
        let idx = updated();
        let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let file = write(&dir, &idx, at, Some("abc"));
        let (loaded, meta) = read(&dir, &file).unwrap();
        assert_eq!(meta.generated_at, at);
        assert_eq!(meta.notes_commit.as_deref(), Some("abc"));
        assert_eq!(meta.byte_size, file.metadata().unwrap().len());
        assert_eq!(answers(&loaded), answers(&idx));
        assert_eq!(loaded.notes_indexed(), idx.notes_indexed());
        assert_eq!(loaded.chunks_indexed(), idx.chunks_indexed());
        assert_eq!(loaded.content_bytes(), idx.content_bytes());
        assert_eq!(loaded.fingerprint("late.md"), idx.fingerprint("late.md"));
        assert_eq!(loaded.total_title_len, idx.total_title_len);
        assert_eq!(loaded.live_notes, idx.live_notes);

        // Updated after the load, it still equals the original updated alike.
        let (mut a, mut b) = (loaded, idx);
        for i in [0, 9, 17] {
            let text = format!("# Again {i}\nzeta beta {i}\n");
            a.upsert_note(&format!("d{}/n{i}.md", i % 4), &text);
            b.upsert_note(&format!("d{}/n{i}.md", i % 4), &text);
        }
        a.remove_note("late.md");
        b.remove_note("late.md");
        a.upsert_note("fresh.md", "zeta gamma");
        b.upsert_note("fresh.md", "zeta gamma");
        assert_eq!(answers(&a), answers(&b));
        assert_eq!(a.query("zeta", 50, None), b.query("zeta", 50, None));
    }

    /// The JSON it was written with, in place, is believed by its stamp; a
    /// copy of it (another file: hashed) still serves; other bytes of the same
    /// size, or another size, do not.
    #[test]
    fn another_json_is_refused() {
        let (_tmp, dir) = dir();
        let idx = updated();
        let file = write(&dir, &idx, Utc::now(), None);
        let mut bytes = Vec::new();
        (&file).read_to_end(&mut bytes).unwrap();
        let (same, _) = read(&dir, &copy(&bytes)).unwrap();
        assert_eq!(answers(&same), answers(&idx));
        // One letter of a chunk's text changed: same size, other bytes.
        let at = bytes.windows(5).position(|w| w == b"gamma").unwrap();
        bytes[at] = b'G';
        assert!(read(&dir, &copy(&bytes)).is_none());
        bytes.push(b' ');
        assert!(read(&dir, &copy(&bytes)).is_none());
    }

    /// Truncated, bit-flipped (with the checksum fixed, so the tables' own
    /// checks are reached) and oversized files are refused without a panic.
    #[test]
    fn damaged_files_are_refused_without_panic() {
        let (tmp, dir) = dir();
        let idx = updated();
        let file = write(&dir, &idx, Utc::now(), None);
        let path = tmp.path().join(FILE_NAME);
        let good = fs::read(&path).unwrap();
        assert!(read(&dir, &file).is_some());

        let with_crc = |mut payload: Vec<u8>| {
            let crc = crc32fast::hash(&payload);
            payload.extend_from_slice(&crc.to_le_bytes());
            payload
        };
        let payload = good[..good.len() - 4].to_vec();
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for cut in [0, 3, 4, 11, 40, payload.len() / 2, good.len() - 1] {
            cases.push(good[..cut].to_vec());
            cases.push(with_crc(payload[..cut.min(payload.len() - 1)].to_vec()));
        }
        // A huge count of note slots right after the header (93 bytes here,
        // then the chunks' locations), in place of the real one (one byte).
        assert_eq!(payload[92], 0, "no notes_commit");
        let body = 101 + LOCATION_BYTES * idx.chunks.len();
        let mut huge = payload[..body].to_vec();
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        huge.extend_from_slice(&payload[body + 1..]);
        cases.push(with_crc(huge));
        // A chunk's text placed outside the JSON, or where no string starts.
        for (at, value) in [(101, u64::MAX - 1), (101, 1 << 40), (101, 3), (109, 1)] {
            let mut moved = payload.clone();
            let slot = (0..idx.chunks.len())
                .find(|&s| idx.chunks[s].is_some())
                .unwrap();
            let at = at + LOCATION_BYTES * slot;
            moved[at..at + 8].copy_from_slice(&value.to_le_bytes());
            cases.push(with_crc(moved));
        }
        for case in &cases {
            fs::write(&path, case).unwrap();
            assert!(read(&dir, &file).is_none(), "{} bytes", case.len());
        }

        let mut state: u64 = 99;
        let (mut tried, mut refused) = (0, 0);
        for _ in 0..2000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut flipped = payload.clone();
            let at = (state >> 33) as usize % flipped.len();
            flipped[at] ^= 1 << ((state >> 20) % 8);
            // Without a fixed checksum the flip is always caught.
            let mut unchecked = flipped.clone();
            unchecked.extend_from_slice(&good[good.len() - 4..]);
            fs::write(&path, &unchecked).unwrap();
            assert!(read(&dir, &file).is_none(), "flip at {at}");
            // With it, the tables' own checks catch most; a flip they cannot
            // see (a note's hash, the JSON's stamp) still gives a working index.
            fs::write(&path, with_crc(flipped)).unwrap();
            tried += 1;
            match read(&dir, &file) {
                Some((loaded, _)) => drop(answers(&loaded)),
                None => refused += 1,
            }
        }
        assert!(refused * 2 > tried, "{refused} of {tried} refused");
        // Larger than its JSON could give: refused before it is read.
        fs::write(&path, vec![0u8; (3 << 20) + 10]).unwrap();
        assert!(read(&dir, &file).is_none());
    }

    #[test]
    fn a_symlink_or_folder_is_not_read() {
        let (tmp, dir) = dir();
        let file = write(&dir, &updated(), Utc::now(), None);
        let path = tmp.path().join(FILE_NAME);
        fs::rename(&path, tmp.path().join("real.bin")).unwrap();
        std::os::unix::fs::symlink("real.bin", &path).unwrap();
        assert!(read(&dir, &file).is_none());
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        assert!(read(&dir, &file).is_none());
    }
}
