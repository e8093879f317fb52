//! Chunk vectors and their file, `.mirai/vectors.bin`: a map from a chunk's
//! key (the first 16 bytes of the SHA-256 of its text) to its vector, under a
//! header naming the model (and how passages were sent to it) and the
//! dimension. The file's bytes are a function of that map: entries sorted by
//! key, little-endian numbers, a CRC-32 last. It is read as hostile data
//! (ARCHITECTURE.md, "mirai's own state is read as hostile"): every length is
//! checked against the bytes present before anything is allocated for it, keys
//! must strictly increase, every number must be finite, and any fault refuses
//! the whole file.
//!
//! ```text
//! "MIRAIVEC" | u32 version (1) | u32 len + model | u32 len + recipe
//! | u32 dimension | u64 count | count x (16-byte key | dimension x f32) | u32 CRC-32
//! ```

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::sync::Arc;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions};
use sha2::{Digest, Sha256};

use crate::durable;

pub const FILE_NAME: &str = "vectors.bin";
const MAGIC: &[u8; 8] = b"MIRAIVEC";
const VERSION: u32 = 1;
/// Longest model or recipe string a file may name.
const MAX_NAME: usize = 4096;
/// Largest dimension accepted from a server or a file.
pub const MAX_DIMENSION: usize = 65_536;

/// A chunk's identity for embeddings: its text's SHA-256, first 16 bytes.
pub type Key = [u8; 16];

/// The key of a chunk's text.
pub fn key_of(text: &str) -> Key {
    let digest = Sha256::digest(text.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// Vectors made by one model (and one recipe: how passages were sent), all
/// of one dimension, L2-normalized, so a dot product is the cosine.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    pub model: String,
    pub recipe: String,
    /// `None` until the first vector arrives.
    pub dimension: Option<usize>,
    pub map: BTreeMap<Key, Arc<[f32]>>,
}

impl Vectors {
    pub fn new(model: &str, recipe: &str) -> Vectors {
        Vectors {
            model: model.to_string(),
            recipe: recipe.to_string(),
            dimension: None,
            map: BTreeMap::new(),
        }
    }

    /// Adds a vector (normalized here). A vector of another dimension than
    /// the ones held means the model changed: everything held goes first.
    pub fn insert(&mut self, key: Key, mut vector: Vec<f32>) {
        if self.dimension != Some(vector.len()) {
            self.map.clear();
            self.dimension = Some(vector.len());
        }
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|x| *x /= norm);
        }
        self.map.insert(key, vector.into());
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let dimension = self.dimension.unwrap_or(0);
        let mut out = Vec::with_capacity(64 + self.map.len() * (16 + 4 * dimension));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        for text in [&self.model, &self.recipe] {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        out.extend_from_slice(&(dimension as u32).to_le_bytes());
        out.extend_from_slice(&(self.map.len() as u64).to_le_bytes());
        for (key, vector) in &self.map {
            out.extend_from_slice(key);
            for x in vector.iter() {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses a file's bytes; `Err` says what is wrong with them.
    pub fn decode(bytes: &[u8]) -> Result<Vectors, String> {
        let body_len = bytes
            .len()
            .checked_sub(4)
            .ok_or("shorter than its checksum")?;
        let (body, crc) = bytes.split_at(body_len);
        if crc32fast::hash(body).to_le_bytes() != crc {
            return Err("its checksum does not match".into());
        }
        let mut r = Reader { bytes: body, at: 0 };
        if r.take(8)? != MAGIC {
            return Err("not a mirai vector file".into());
        }
        let version = r.u32()?;
        if version != VERSION {
            return Err(format!("version {version}, not {VERSION}"));
        }
        let model = r.text()?;
        let recipe = r.text()?;
        let dimension = r.u32()? as usize;
        let count = r.u64()?;
        if dimension > MAX_DIMENSION || (dimension == 0 && count > 0) {
            return Err(format!("dimension {dimension} is out of range"));
        }
        let entry = 16 + 4 * dimension;
        let left = (body.len() - r.at) as u64;
        if count.checked_mul(entry as u64) != Some(left) {
            return Err(format!(
                "{count} vectors of dimension {dimension} do not fill its {left} bytes"
            ));
        }
        let mut vectors = Vectors::new(&model, &recipe);
        vectors.dimension = (dimension > 0).then_some(dimension);
        let mut previous: Option<Key> = None;
        for _ in 0..count {
            let key: Key = r.take(16)?.try_into().map_err(|_| "a short key")?;
            if previous.is_some_and(|p| p >= key) {
                return Err("its keys are not in strictly increasing order".into());
            }
            previous = Some(key);
            let raw = r.take(4 * dimension)?;
            let vector: Vec<f32> = raw
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            if vector.iter().any(|x| !x.is_finite()) {
                return Err("a vector holds a number that is not finite".into());
            }
            vectors.map.insert(key, vector.into());
        }
        Ok(vectors)
    }

    /// Writes the file whole and durably ([`durable::replace`]).
    pub fn write(&self, state: &Dir) -> io::Result<()> {
        durable::replace(state, FILE_NAME, &self.encode())
    }

    /// Reads the file: `Ok(None)` when there is none, `Err` when it cannot be
    /// used (the caller starts over).
    pub fn read(state: &Dir) -> Result<Option<Vectors>, String> {
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        let mut file = match state.open_with(FILE_NAME, &options) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot open it: {e}")),
        };
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if !meta.is_file() {
            return Err("not a regular file".into());
        }
        // The size read up front only sizes the buffer; the parse checks the bytes.
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0).min(1 << 30));
        file.read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read it: {e}"))?;
        Vectors::decode(&bytes).map(Some)
    }
}

/// A cursor over a file's bytes: every read checked against what is left.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or("it ends early")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| "short")?))
    }

    fn text(&mut self) -> Result<String, String> {
        let len = self.u32()? as usize;
        if len > MAX_NAME {
            return Err(format!("a name of {len} bytes"));
        }
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| "a name is not UTF-8".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vectors {
        let mut v = Vectors::new("e5-small", "input_type=on");
        for (i, text) in ["alpha", "beta", "gamma"].iter().enumerate() {
            v.insert(key_of(text), vec![1.0 + i as f32, -2.0, 0.5]);
        }
        v
    }

    #[test]
    fn round_trips_and_the_bytes_depend_only_on_the_map() {
        let v = sample();
        let bytes = v.encode();
        assert_eq!(Vectors::decode(&bytes).unwrap(), v);
        // Inserted in another order: the same bytes.
        let mut w = Vectors::new("e5-small", "input_type=on");
        for (i, text) in ["gamma", "alpha", "beta"].iter().enumerate() {
            let i = [2, 0, 1][i];
            w.insert(key_of(text), vec![1.0 + i as f32, -2.0, 0.5]);
        }
        assert_eq!(w.encode(), bytes);
        let norm: f32 = v.map.values().next().unwrap().iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_new_dimension_discards_the_old_vectors() {
        let mut v = sample();
        v.insert(key_of("delta"), vec![1.0; 5]);
        assert_eq!(v.map.len(), 1);
        assert_eq!(v.dimension, Some(5));
    }

    /// Every truncation, every single-byte change and lying counts are refused
    /// with a reason, never a panic or a huge allocation.
    #[test]
    fn damaged_files_are_refused() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(Vectors::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x41;
            assert!(Vectors::decode(&bad).is_err(), "byte {at}");
        }
        // A count claiming billions of vectors, with a valid checksum.
        let mut lying = bytes[..bytes.len() - 4].to_vec();
        let count_at = 8 + 4 + 4 + 8 + 4 + 13 + 4;
        lying[count_at..count_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let crc = crc32fast::hash(&lying);
        lying.extend_from_slice(&crc.to_le_bytes());
        let err = Vectors::decode(&lying).unwrap_err();
        assert!(err.contains("do not fill"), "{err}");
        // Keys out of order, with a valid checksum.
        let v = sample();
        let mut swapped = v.encode();
        let first = 8 + 4 + 4 + 8 + 4 + 13 + 4 + 8;
        let entry = 16 + 12;
        let (a, b) = (first, first + entry);
        let tmp: Vec<u8> = swapped[a..a + entry].to_vec();
        swapped.copy_within(b..b + entry, a);
        swapped[b..b + entry].copy_from_slice(&tmp);
        let len = swapped.len() - 4;
        let crc = crc32fast::hash(&swapped[..len]);
        swapped[len..].copy_from_slice(&crc.to_le_bytes());
        assert!(Vectors::decode(&swapped)
            .unwrap_err()
            .contains("increasing"));
    }
}
