//! git's index file (`.git/index`) as mirai reads and writes it under
//! `index.lock`: the entries, sorted by path and stage, encoded in git's own
//! format (gitformat-index(5), versions 2, 3 and 4) with its SHA-1 trailer,
//! into one buffer that is written with one `write`.
//!
//! No extensions are written (git rebuilds its cache-tree when it needs one),
//! as libgit2 wrote none for mirai before: the bytes are the ones libgit2's
//! writer gives for the same entries (a unit test compares them).
//!
//! Reading goes through libgit2, except when the file is still the one mirai
//! wrote last (same size and trailer checksum, read under the lock): then the
//! entries mirai kept are used as they are, without reading 1 MB again.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use git2::{Index, IndexEntry};
use sha1::{Digest, Sha1};

use crate::error::{Error, Result};

/// The on-disk flag bits kept from an entry: assume-valid and the stage.
const KEPT_FLAGS: u16 = 0x8000 | 0x3000;
/// The flag saying extended flags follow (versions 3 and 4).
const EXTENDED: u16 = 0x4000;
/// The extended flags git stores on disk: intent-to-add and skip-worktree.
const EXTENDED_FLAGS: u16 = 0x2000 | 0x4000;
/// The longest name length the flags can hold.
const NAME_MASK: u16 = 0x0fff;
/// The size of the SHA-1 trailer.
const TRAILER: usize = 20;
/// An entry's fixed part: ten 32-bit stat fields, the object id, the flags.
const HEADER: usize = 62;

/// The index's entries, sorted as git keeps them (path bytes, then stage).
#[derive(Debug, Default)]
pub struct Entries {
    /// The format version the file had (2, 3 or 4).
    pub version: u32,
    pub list: Vec<IndexEntry>,
    /// The file's modification time (seconds, nanoseconds) when read:
    /// entries at least this new are "racily clean" (git's racy-git rules).
    pub mtime: Option<(i64, u32)>,
}

fn stage_of(entry: &IndexEntry) -> u16 {
    (entry.flags >> 12) & 0x3
}

impl Entries {
    /// The position of `path` at `stage`, or where it would go.
    fn find(&self, path: &[u8], stage: u16) -> std::result::Result<usize, usize> {
        self.list.binary_search_by(|entry| {
            entry
                .path
                .as_slice()
                .cmp(path)
                .then(stage_of(entry).cmp(&stage))
        })
    }

    /// The entry of `path` at `stage` (0: merged; 1-3: a conflict's sides).
    pub fn get(&self, path: &str, stage: u16) -> Option<&IndexEntry> {
        self.find(path.as_bytes(), stage)
            .ok()
            .map(|at| &self.list[at])
    }

    /// Replaces every entry (all stages) of each path in `changes` with its
    /// new entry (`None`: none), in one pass over the list however many paths
    /// change. A path must appear once in `changes`.
    pub fn set_all(&mut self, mut changes: Vec<(&str, Option<IndexEntry>)>) {
        changes.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut old = std::mem::take(&mut self.list).into_iter().peekable();
        let mut list = Vec::with_capacity(old.len() + changes.len());
        for (path, entry) in changes {
            let path = path.as_bytes();
            while let Some(kept) = old.next_if(|e| e.path.as_slice() < path) {
                list.push(kept);
            }
            while old.next_if(|e| e.path == path).is_some() {}
            list.extend(entry);
        }
        list.extend(old);
        self.list = list;
    }
}

/// The file's size and trailer, the identity a kept copy is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    size: u64,
    checksum: [u8; TRAILER],
}

/// The entries mirai wrote last, with the stamp of the file it wrote, and
/// the buffer it was encoded in, for the next.
#[derive(Debug, Default)]
pub struct Kept(Option<(Stamp, Entries)>, Vec<u8>);

impl Kept {
    /// Remembers what was written (`bytes`), once the file is in place.
    pub fn keep(&mut self, stamp: Stamp, entries: Entries, bytes: Vec<u8>) {
        self.0 = Some((stamp, entries));
        self.1 = bytes;
    }

    /// The buffer the last index was encoded in, to encode the next one.
    pub fn buffer(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.1)
    }

    /// Reads the index at `path` (under its lock): the kept entries when the
    /// file is still the one they were written to, else through libgit2. A
    /// missing file is an empty index.
    pub fn read(&mut self, path: &Path) -> Result<Entries> {
        let cannot = |e: io::Error| Error::git(format!("cannot read the index: {e}"));
        let kept = self.0.take();
        let mut file = match fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Entries {
                    version: 2,
                    ..Entries::default()
                })
            }
            Err(e) => return Err(cannot(e)),
        };
        let meta = file.metadata().map_err(cannot)?;
        let mtime = Some((meta.mtime(), meta.mtime_nsec() as u32));
        if let Some((stamp, mut entries)) = kept {
            if meta.len() == stamp.size && trailer(&mut file).ok() == Some(stamp.checksum) {
                entries.mtime = mtime;
                return Ok(entries);
            }
        }
        let index = Index::open(path)
            .map_err(|e| Error::git(format!("cannot read the index: {}", e.message())))?;
        Ok(Entries {
            version: index.version(),
            list: index.iter().collect(),
            mtime,
        })
    }
}

/// The last [`TRAILER`] bytes of `file`.
fn trailer(file: &mut fs::File) -> io::Result<[u8; TRAILER]> {
    let mut checksum = [0; TRAILER];
    file.seek(SeekFrom::End(-(TRAILER as i64)))?;
    file.read_exact(&mut checksum)?;
    Ok(checksum)
}

/// git's varint for the number of bytes a v4 entry drops from the previous path.
fn push_varint(out: &mut Vec<u8>, mut value: usize) {
    let mut bytes = [0u8; 16];
    let mut at = bytes.len() - 1;
    bytes[at] = (value & 127) as u8;
    loop {
        value >>= 7;
        if value == 0 {
            break;
        }
        value -= 1;
        at -= 1;
        bytes[at] = 128 | (value & 127) as u8;
    }
    out.extend_from_slice(&bytes[at..]);
}

/// The index file for `entries`: header, entries, SHA-1 trailer. Version 4
/// stays 4; otherwise it is 3 when an entry has extended flags, else 2 (as
/// git and libgit2 write it). Answers the bytes, in `out` (its old contents
/// dropped; a buffer reused from the last write is already in memory, where
/// a fresh megabyte would be faulted in page by page), and their stamp.
pub fn encode(entries: &Entries, mut out: Vec<u8>) -> (Vec<u8>, Stamp) {
    let extended = |entry: &IndexEntry| entry.flags_extended & EXTENDED_FLAGS != 0;
    let version: u32 = match entries.version {
        4 => 4,
        _ if entries.list.iter().any(extended) => 3,
        _ => 2,
    };
    // Room for every entry at its longest (a v4 varint is at most ten
    // bytes), so the buffer is never copied as it grows.
    let room: usize = entries
        .list
        .iter()
        .map(|e| HEADER + 2 + e.path.len() + 10)
        .sum();
    out.clear();
    out.reserve(12 + room + TRAILER);
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&(entries.list.len() as u32).to_be_bytes());
    let mut previous: &[u8] = &[];
    for entry in &entries.list {
        let start = out.len();
        let ext = extended(entry);
        let mut header = [0u8; HEADER + 2];
        let fields = [
            entry.ctime.seconds() as u32,
            entry.ctime.nanoseconds(),
            entry.mtime.seconds() as u32,
            entry.mtime.nanoseconds(),
            entry.dev,
            entry.ino,
            entry.mode,
            entry.uid,
            entry.gid,
            entry.file_size,
        ];
        for (at, field) in fields.iter().enumerate() {
            header[at * 4..at * 4 + 4].copy_from_slice(&field.to_be_bytes());
        }
        header[40..60].copy_from_slice(entry.id.as_bytes());
        let flags = (entry.flags & KEPT_FLAGS)
            | if ext { EXTENDED } else { 0 }
            | entry.path.len().min(NAME_MASK as usize) as u16;
        header[60..62].copy_from_slice(&flags.to_be_bytes());
        let header_len = if ext {
            header[62..64].copy_from_slice(&(entry.flags_extended & EXTENDED_FLAGS).to_be_bytes());
            HEADER + 2
        } else {
            HEADER
        };
        out.extend_from_slice(&header[..header_len]);
        if version == 4 {
            let same = previous
                .iter()
                .zip(&entry.path)
                .take_while(|(a, b)| a == b)
                .count();
            push_varint(&mut out, previous.len() - same);
            out.extend_from_slice(&entry.path[same..]);
            out.push(0);
            previous = &entry.path;
        } else {
            out.extend_from_slice(&entry.path);
            // One to eight NULs, to a multiple of eight bytes.
            let len = out.len() - start;
            out.resize(start + (len + 8) / 8 * 8, 0);
        }
    }
    let checksum: [u8; TRAILER] = Sha1::digest(&out).into();
    out.extend_from_slice(&checksum);
    let stamp = Stamp {
        size: out.len() as u64,
        checksum,
    };
    (out, stamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use git2::{IndexTime, Oid};
    use std::process::Command;

    fn entry(path: &str, seed: u8, flags_extended: u16) -> IndexEntry {
        IndexEntry {
            ctime: IndexTime::new(1_700_000_000 + i32::from(seed), 123_456_789),
            mtime: IndexTime::new(1_700_000_100 + i32::from(seed), 987_654_321),
            dev: 2049,
            ino: 1000 + u32::from(seed),
            mode: if seed.is_multiple_of(3) {
                0o100755
            } else {
                0o100644
            },
            uid: 1000,
            gid: 100,
            file_size: 40 + u32::from(seed),
            id: Oid::from_bytes(&[seed; 20]).unwrap(),
            flags: 0,
            flags_extended,
            path: path.as_bytes().to_vec(),
        }
    }

    /// Paths of every padding length, shared prefixes (v4), nesting and a
    /// name longer than the flags can hold.
    fn entries(flags_extended: u16) -> Vec<IndexEntry> {
        let long = format!("deep/{}.md", "x".repeat(5000));
        let mut paths: Vec<String> = (0..9)
            .map(|n| format!("notes/{}.md", "n".repeat(n)))
            .chain(["a.md", "notes/a/b/c.md", "notes/a/b.md", "zz.md"].map(String::from))
            .chain([long])
            .collect();
        paths.sort();
        paths
            .iter()
            .enumerate()
            .map(|(n, path)| entry(path, n as u8, if n == 3 { flags_extended } else { 0 }))
            .collect()
    }

    /// What libgit2's own writer makes of the same entries.
    fn libgit2_bytes(version: u32, list: &[IndexEntry]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let mut index = Index::open(&path).unwrap();
        index.set_version(version).unwrap();
        for entry in list {
            index.add(entry).unwrap();
        }
        index.write().unwrap();
        fs::read(&path).unwrap()
    }

    #[test]
    fn bytes_are_libgit2s_for_every_version() {
        // intent-to-add and skip-worktree make a version 3 file with extended flags.
        for (version, flags_extended) in [(2, 0), (3, 0), (2, 0x2000), (3, 0x4000), (4, 0)] {
            // Into a buffer of an earlier index, whose bytes must not show.
            let (bytes, stamp) = encode(
                &Entries {
                    version,
                    list: entries(flags_extended),
                    mtime: None,
                },
                b"stale bytes of an earlier index ".repeat(300),
            );
            assert_eq!(
                bytes,
                libgit2_bytes(version, &entries(flags_extended)),
                "version {version}, extended flags {flags_extended:#x}"
            );
            assert_eq!(stamp.size, bytes.len() as u64);
            assert_eq!(stamp.checksum[..], bytes[bytes.len() - TRAILER..]);
        }
    }

    #[test]
    fn git_reads_what_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        git(&["init", "-q"]);
        let list = || -> Vec<IndexEntry> { entries(0x2000).into_iter().take(12).collect() };
        for version in [2, 4] {
            let (bytes, _) = encode(
                &Entries {
                    version,
                    list: list(),
                    mtime: None,
                },
                Vec::new(),
            );
            fs::write(dir.path().join(".git/index"), bytes).unwrap();
            let staged = git(&["ls-files", "--stage"]);
            let expected: String = list()
                .iter()
                .map(|e| {
                    format!(
                        "{:o} {} 0\t{}\n",
                        e.mode,
                        e.id,
                        String::from_utf8_lossy(&e.path)
                    )
                })
                .collect();
            assert_eq!(staged, expected, "version {version}");
            let debug = git(&["ls-files", "--debug", "a.md"]);
            assert!(debug.contains("ctime: 1700000000:123456789"), "{debug}");
            assert!(debug.contains("size: 40\t"), "{debug}");
        }
    }

    #[test]
    fn set_all_replaces_every_stage_of_each_path_in_order() {
        let mut index = Entries {
            version: 2,
            list: ["a.md", "b.md", "b.md", "b.md", "c.md"]
                .iter()
                .enumerate()
                .map(|(n, path)| {
                    let mut e = entry(path, n as u8, 0);
                    e.flags = if path == &"b.md" { (n as u16) << 12 } else { 0 };
                    e
                })
                .collect(),
            mtime: None,
        };
        assert!(index.get("b.md", 0).is_none());
        assert_eq!(index.get("b.md", 2).unwrap().ino, 1002);
        index.set_all(vec![("b.md", Some(entry("b.md", 9, 0)))]);
        let paths: Vec<_> = index.list.iter().map(|e| (e.path.clone(), e.ino)).collect();
        assert_eq!(
            paths,
            [
                (b"a.md".to_vec(), 1000),
                (b"b.md".to_vec(), 1009),
                (b"c.md".to_vec(), 1004)
            ]
        );
        // Several at once, given in any order: added, removed, replaced, and
        // a path that was not there removed (nothing happens).
        index.set_all(vec![
            ("zz.md", Some(entry("zz.md", 8, 0))),
            ("bb.md", Some(entry("bb.md", 7, 0))),
            ("a.md", None),
            ("0.md", Some(entry("0.md", 6, 0))),
            ("c.md", Some(entry("c.md", 5, 0))),
            ("missing.md", None),
        ]);
        let paths: Vec<_> = index.list.iter().map(|e| (e.path.clone(), e.ino)).collect();
        assert_eq!(
            paths,
            [
                (b"0.md".to_vec(), 1006),
                (b"b.md".to_vec(), 1009),
                (b"bb.md".to_vec(), 1007),
                (b"c.md".to_vec(), 1005),
                (b"zz.md".to_vec(), 1008)
            ]
        );
    }

    #[test]
    fn kept_entries_are_used_only_while_the_file_is_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let mut kept = Kept::default();
        assert!(kept.read(&path).unwrap().list.is_empty());
        let written = || Entries {
            version: 2,
            list: entries(0),
            mtime: None,
        };
        let (bytes, stamp) = encode(&written(), Vec::new());
        fs::write(&path, &bytes).unwrap();
        // A marker libgit2 would never read back: the kept copy is what answers.
        let mut marked = written();
        marked.list[0].uid = 4242;
        kept.keep(stamp, marked, Vec::new());
        let read = kept.read(&path).unwrap();
        assert_eq!(read.list[0].uid, 4242);
        assert!(read.mtime.is_some());
        // Taken by the read: a second read goes to the file.
        assert_eq!(kept.read(&path).unwrap().list[0].uid, 1000);

        // Another writer's file of the same size: read from disk.
        kept.keep(stamp, read, Vec::new());
        let mut other = written();
        other.list[1].gid = 7;
        let (other_bytes, _) = encode(&other, Vec::new());
        assert_eq!(other_bytes.len(), bytes.len());
        fs::write(&path, &other_bytes).unwrap();
        let read = kept.read(&path).unwrap();
        assert_eq!((read.list[0].uid, read.list[1].gid), (1000, 7));
    }
}
