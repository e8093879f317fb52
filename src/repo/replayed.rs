//! The map from the ids of local commits a pull replayed onto the remote's
//! commits to the ids of their replacements, kept in `.mirai/replayed.json`
//! so a `base_commit`, a `notes.revert` or anything else that names an old id
//! finds the commit that now holds its change.
//!
//! The file is mirai's own state, but it is read as hostile data
//! (ARCHITECTURE.md, "mirai's own state is read as hostile"):
//! through the root handle without following a symlink, at most
//! [`MAX_BYTES`], parsed strictly, every id exactly 40 lowercase hex digits;
//! anything else and the whole file is ignored (with a warning), never
//! half-believed. It is written through a temp file and a rename, so a reader
//! sees the old map or the new one. Replaying a replayed commit again keeps
//! one step: every old id maps to the newest replacement. The oldest entries
//! go past [`MAX_ENTRIES`].

use std::collections::HashMap;
use std::io::Read;

use git2::Oid;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::notes::root::{open_regular_in, Refusal};
use crate::notes::Notes;

/// The map's file in `.mirai/`.
pub const FILE_NAME: &str = "replayed.json";
/// How many replaced commits the map remembers (the newest).
pub const MAX_ENTRIES: usize = 100_000;
/// A map file larger than this is not read (100,000 entries take about 8.5 MB).
const MAX_BYTES: u64 = 16 << 20;
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    version: u32,
    /// `[old, new]` pairs, oldest first.
    replayed: Vec<(String, String)>,
}

/// The old → new ids, oldest first.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replayed {
    pairs: Vec<(Oid, Oid)>,
}

impl Replayed {
    /// The map as `.mirai/replayed.json` holds it; empty when there is none,
    /// or when the file is not exactly what mirai writes.
    pub fn load(notes: &Notes) -> Replayed {
        match read(notes) {
            Ok(map) => map,
            Err(why) => {
                log::warn!(".mirai/{FILE_NAME} is ignored: {why}");
                Replayed::default()
            }
        }
    }

    /// The commit that replaced `old` (`None`: it was never replayed).
    pub fn get(&self, old: Oid) -> Option<Oid> {
        self.pairs
            .iter()
            .rev()
            .find(|(from, _)| *from == old)
            .map(|(_, to)| *to)
    }

    /// Adds `pairs` (old → new). An entry whose new id is now itself replaced
    /// follows it, so every lookup is one step.
    pub fn record(&mut self, pairs: &[(Oid, Oid)]) {
        let now: HashMap<Oid, Oid> = pairs.iter().copied().collect();
        for (_, to) in &mut self.pairs {
            if let Some(newer) = now.get(to) {
                *to = *newer;
            }
        }
        self.pairs.retain(|(from, _)| !now.contains_key(from));
        self.pairs.extend_from_slice(pairs);
        let excess = self.pairs.len().saturating_sub(MAX_ENTRIES);
        self.pairs.drain(..excess);
    }

    /// Writes the map to `.mirai/replayed.json`: a temp file beside it,
    /// flushed, then renamed over it.
    pub fn save(&self, notes: &Notes) -> Result<()> {
        let failed = |what: &str, e: std::io::Error| {
            Error::internal(format!("cannot {what} .mirai/{FILE_NAME}: {e}"))
        };
        let state = notes
            .state_dir(true)?
            .ok_or_else(|| Error::internal("cannot make .mirai/ for the replayed commits' map"))?;
        let stored = Stored {
            version: VERSION,
            replayed: self
                .pairs
                .iter()
                .map(|(from, to)| (from.to_string(), to.to_string()))
                .collect(),
        };
        let bytes = serde_json::to_vec(&stored)
            .map_err(|e| Error::internal(format!("cannot encode .mirai/{FILE_NAME}: {e}")))?;
        crate::durable::replace(&state, FILE_NAME, &bytes).map_err(|e| failed("write", e))
    }
}

/// Reads and checks the map file (`Err`: why it is not believed).
fn read(notes: &Notes) -> std::result::Result<Replayed, String> {
    let Some(state) = notes.state_dir(false).map_err(|e| e.message)? else {
        return Ok(Replayed::default());
    };
    let file = match open_regular_in(&state, FILE_NAME) {
        Ok(file) => file,
        Err(Refusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Replayed::default())
        }
        Err(Refusal::Io(e)) => return Err(format!("cannot open it ({e})")),
        Err(_) => return Err("it is not a regular file".to_string()),
    };
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it ({e})"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("it is larger than {MAX_BYTES} bytes"));
    }
    let stored: Stored = crate::json::from_slice(&bytes)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("it is not the map mirai writes ({e})"))?;
    if stored.version != VERSION {
        return Err(format!("version {} is not {VERSION}", stored.version));
    }
    if stored.replayed.len() > MAX_ENTRIES {
        return Err(format!("it holds more than {MAX_ENTRIES} entries"));
    }
    let id = |hex: &str| -> std::result::Result<Oid, String> {
        let plain = hex.len() == 40 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        plain
            .then(|| Oid::from_str(hex).ok())
            .flatten()
            .ok_or_else(|| format!("{hex:?} is not a commit id"))
    };
    let pairs = stored
        .replayed
        .iter()
        .map(|(from, to)| Ok((id(from)?, id(to)?)))
        .collect::<std::result::Result<Vec<_>, String>>()?;
    Ok(Replayed { pairs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn oid(n: u8) -> Oid {
        Oid::from_bytes(&[n; 20]).unwrap()
    }

    fn notes() -> (tempfile::TempDir, Notes) {
        let dir = tempfile::tempdir().unwrap();
        let notes = Notes::open(dir.path()).unwrap();
        (dir, notes)
    }

    #[test]
    fn saved_maps_load_back_and_chains_keep_one_step() {
        let (dir, notes) = notes();
        assert_eq!(Replayed::load(&notes), Replayed::default());
        let mut map = Replayed::default();
        map.record(&[(oid(1), oid(2)), (oid(3), oid(4))]);
        map.save(&notes).unwrap();
        let mut loaded = Replayed::load(&notes);
        assert_eq!(loaded, map);
        // 2 and 4 are replayed again: 1 and 3 follow them.
        loaded.record(&[(oid(2), oid(5)), (oid(4), oid(6))]);
        assert_eq!(loaded.get(oid(1)), Some(oid(5)));
        assert_eq!(loaded.get(oid(2)), Some(oid(5)));
        assert_eq!(loaded.get(oid(3)), Some(oid(6)));
        assert_eq!(loaded.get(oid(7)), None);
        loaded.save(&notes).unwrap();
        assert_eq!(Replayed::load(&notes), loaded);
        let leftovers: Vec<_> = fs::read_dir(dir.path().join(".mirai"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(leftovers, vec![FILE_NAME.to_string()]);
    }

    #[test]
    fn the_oldest_entries_go_past_the_cap() {
        let mut map = Replayed::default();
        let pairs: Vec<(Oid, Oid)> = (0..MAX_ENTRIES as u32 + 5)
            .map(|n| {
                let mut old = [0u8; 20];
                old[..4].copy_from_slice(&n.to_be_bytes());
                let mut new = old;
                new[19] = 1;
                (
                    Oid::from_bytes(&old).unwrap(),
                    Oid::from_bytes(&new).unwrap(),
                )
            })
            .collect();
        map.record(&pairs);
        assert_eq!(map.pairs.len(), MAX_ENTRIES);
        assert_eq!(map.get(pairs[0].0), None);
        assert_eq!(map.get(pairs[5].0), Some(pairs[5].1));
    }

    #[test]
    fn a_hostile_map_file_is_ignored_whole() {
        let (dir, notes) = notes();
        let state = dir.path().join(".mirai");
        fs::create_dir_all(&state).unwrap();
        let good = "a".repeat(40);
        let hostile = [
            "not json".to_string(),
            format!(r#"{{"version":1,"replayed":[["{good}","HEAD"]]}}"#),
            format!(
                r#"{{"version":1,"replayed":[["{good}","{}"]]}}"#,
                "A".repeat(40)
            ),
            format!(
                r#"{{"version":1,"replayed":[["{good}","{}"]]}}"#,
                "b".repeat(41)
            ),
            r#"{"version":2,"replayed":[]}"#.to_string(),
            r#"{"version":1,"replayed":[],"extra":true}"#.to_string(),
            r#"{"version":1,"version":1,"replayed":[]}"#.to_string(),
        ];
        for text in hostile {
            fs::write(state.join(FILE_NAME), &text).unwrap();
            assert_eq!(Replayed::load(&notes), Replayed::default(), "{text}");
        }
        // Too large: not even parsed.
        let big = vec![b' '; MAX_BYTES as usize + 10];
        fs::write(state.join(FILE_NAME), big).unwrap();
        assert_eq!(Replayed::load(&notes), Replayed::default());
        // A symlink in its place is not followed.
        fs::remove_file(state.join(FILE_NAME)).unwrap();
        let elsewhere = dir.path().join("elsewhere.json");
        fs::write(
            &elsewhere,
            format!(
                r#"{{"version":1,"replayed":[["{good}","{}"]]}}"#,
                "b".repeat(40)
            ),
        )
        .unwrap();
        std::os::unix::fs::symlink(&elsewhere, state.join(FILE_NAME)).unwrap();
        assert_eq!(Replayed::load(&notes), Replayed::default());
        // The same text as a plain file is believed.
        fs::remove_file(state.join(FILE_NAME)).unwrap();
        fs::rename(&elsewhere, state.join(FILE_NAME)).unwrap();
        let map = Replayed::load(&notes);
        assert_eq!(
            map.get(Oid::from_str(&good).unwrap()),
            Some(Oid::from_str(&"b".repeat(40)).unwrap())
        );
    }
}
