//! Semantic ranking and fusion. [`Matrix`]: the vectors of an index's chunks
//! in one flat array, searched exactly (every row's cosine with the query,
//! the best kept); its rows name chunks by note path, the note's content hash
//! and chunk index, so a row of a note changed since it was built is dropped,
//! never shown as another chunk. [`fuse`]: reciprocal rank fusion or a
//! weighted sum of min-max normalized scores, where a chunk with no vector
//! yet (a note the embedder has not caught up with) is scored by its lexical
//! side on both.

use std::collections::HashMap;

use super::vectors::{key_of, Key, Vectors};
use crate::index::{path_matches_prefix, ChunkRef, Index};

/// One row: which chunk it is.
#[derive(Debug, Clone)]
struct Row {
    /// Into [`Matrix::paths`].
    note: u32,
    note_hash: u64,
    chunk_index: u32,
}

/// The vectors of the chunks that have one, row by row.
#[derive(Debug, Default)]
pub struct Matrix {
    dimension: usize,
    /// Sorted by bytes (rows are built in path order).
    paths: Vec<String>,
    /// Where each path's rows begin in `rows`.
    starts: Vec<u32>,
    rows: Vec<Row>,
    /// `rows.len() x dimension`, normalized.
    values: Vec<f32>,
}

/// Chunk keys of an index's notes, kept between builds: a note whose content
/// hash did not change keeps its keys without hashing its text again.
#[derive(Debug, Default)]
pub struct KeyCache {
    notes: HashMap<String, (u64, Vec<Key>)>,
}

/// One chunk of an index with its key.
#[derive(Debug, Clone)]
pub struct Keyed<'a> {
    pub path: &'a str,
    pub note_hash: u64,
    pub chunk_index: usize,
    pub text: &'a str,
    pub key: Key,
}

impl KeyCache {
    /// Every chunk of `index` with its key, in path then chunk order; notes
    /// no longer in the index are forgotten.
    pub fn keyed<'a>(&mut self, index: &'a Index) -> Vec<Keyed<'a>> {
        let mut out: Vec<Keyed<'a>> = Vec::with_capacity(index.chunks_indexed());
        let mut seen: HashMap<&str, ()> = HashMap::with_capacity(index.notes_indexed());
        let mut start = 0;
        let all: Vec<(&str, u64, usize, &str)> = index.chunk_texts().collect();
        while start < all.len() {
            let (path, hash, _, _) = all[start];
            let end = start + all[start..].iter().take_while(|c| c.0 == path).count();
            let texts = &all[start..end];
            let cached = self
                .notes
                .get(path)
                .filter(|(h, keys)| *h == hash && keys.len() == texts.len());
            let keys: Vec<Key> = match cached {
                Some((_, keys)) => keys.clone(),
                None => {
                    let keys: Vec<Key> = texts.iter().map(|c| key_of(c.3)).collect();
                    self.notes.insert(path.to_string(), (hash, keys.clone()));
                    keys
                }
            };
            for (c, key) in texts.iter().zip(keys) {
                out.push(Keyed {
                    path: c.0,
                    note_hash: c.1,
                    chunk_index: c.2,
                    text: c.3,
                    key,
                });
            }
            seen.insert(path, ());
            start = end;
        }
        self.notes
            .retain(|path, _| seen.contains_key(path.as_str()));
        out
    }
}

impl Matrix {
    /// The rows of `chunks` that `vectors` has a vector for.
    pub fn build(chunks: &[Keyed<'_>], vectors: &Vectors) -> Matrix {
        let Some(dimension) = vectors.dimension else {
            return Matrix::default();
        };
        let mut matrix = Matrix {
            dimension,
            ..Matrix::default()
        };
        let mut last_path: Option<&str> = None;
        for chunk in chunks {
            let Some(vector) = vectors.map.get(&chunk.key) else {
                continue;
            };
            if last_path != Some(chunk.path) {
                matrix.paths.push(chunk.path.to_string());
                matrix.starts.push(matrix.rows.len() as u32);
                last_path = Some(chunk.path);
            }
            matrix.rows.push(Row {
                note: (matrix.paths.len() - 1) as u32,
                note_hash: chunk.note_hash,
                chunk_index: chunk.chunk_index as u32,
            });
            matrix.values.extend_from_slice(vector);
        }
        matrix
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Whether chunk `chunk` of `index` has a vector here: a row of its note
    /// at the note's current content hash.
    pub fn has(&self, index: &Index, chunk: ChunkRef) -> bool {
        let Some((path, note_hash, chunk_index)) = index.identify(chunk) else {
            return false;
        };
        let Ok(note) = self
            .paths
            .binary_search_by(|p| p.as_bytes().cmp(path.as_bytes()))
        else {
            return false;
        };
        let start = self.starts[note] as usize;
        let end = self
            .starts
            .get(note + 1)
            .map_or(self.rows.len(), |&end| end as usize);
        self.rows[start..end]
            .iter()
            .any(|row| row.note_hash == note_hash && row.chunk_index as usize == chunk_index)
    }

    /// The `limit` chunks of `index` nearest to `query` by cosine, best
    /// first (ties by path, then chunk index), under `path_prefix`. `query`
    /// must have the matrix's dimension; it is normalized here.
    pub fn nearest(
        &self,
        index: &Index,
        query: &[f32],
        limit: usize,
        path_prefix: Option<&str>,
    ) -> Vec<(f64, ChunkRef)> {
        if query.len() != self.dimension || limit == 0 || self.rows.is_empty() {
            return Vec::new();
        }
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let q: Vec<f32> = query
            .iter()
            .map(|x| x / norm.max(f32::MIN_POSITIVE))
            .collect();
        let allowed: Vec<bool> = self
            .paths
            .iter()
            .map(|p| path_prefix.is_none_or(|prefix| path_matches_prefix(p, prefix)))
            .collect();
        // Rows of notes changed since the matrix was built do not resolve;
        // keep a margin of extra rows so they rarely shorten the answer.
        let keep = limit + limit / 2 + 8;
        let mut best: Vec<(f32, u32)> = Vec::with_capacity(keep + 1);
        let mut floor = f32::NEG_INFINITY;
        for (i, (row, values)) in self
            .rows
            .iter()
            .zip(self.values.chunks_exact(self.dimension))
            .enumerate()
        {
            if !allowed[row.note as usize] {
                continue;
            }
            let score = dot(&q, values);
            if best.len() == keep && score <= floor {
                continue;
            }
            let at = best.partition_point(|b| b.0 >= score);
            best.insert(at, (score, i as u32));
            if best.len() > keep {
                best.pop();
            }
            if best.len() == keep {
                floor = best[keep - 1].0;
            }
        }
        let mut out: Vec<(f64, ChunkRef, &str, u32)> = best
            .into_iter()
            .filter_map(|(score, i)| {
                let row = &self.rows[i as usize];
                let path = self.paths[row.note as usize].as_str();
                let found = index.locate(path, row.note_hash, row.chunk_index as usize)?;
                Some((f64::from(score), found, path, row.chunk_index))
            })
            .collect();
        out.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.2.as_bytes().cmp(b.2.as_bytes()))
                .then(a.3.cmp(&b.3))
        });
        out.truncate(limit);
        out.into_iter()
            .map(|(score, found, _, _)| (score, found))
            .collect()
    }
}

/// A dot product in eight independent lanes, which the compiler turns into
/// vector instructions.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a8, a_rest) = a.split_at(a.len() / 8 * 8);
    let (b8, b_rest) = b.split_at(a8.len());
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + tail
}

/// How a lexical and a semantic ranking become one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion: the sum of `1 / (k + rank)` over both lists.
    Rrf { k: f64 },
    /// `lexical_weight * lexical + (1 - lexical_weight) * semantic`, each
    /// score min-max normalized over its list (0 when absent from it; a
    /// chunk with no vector yet takes its lexical score as its semantic one).
    Weighted { lexical_weight: f64 },
}

/// The measured default (benches/ir-eval/README.md, issue 48: the largest
/// smallest ratio to the best lexical peer over the eight judged collections
/// with multilingual-e5-small, on the lexical ranking with feedback; 0.75 puts
/// ADI-stubs under the lexical peers, 0.9 leaves TIME at 1.01x).
pub const DEFAULT_FUSION: Fusion = Fusion::Weighted {
    lexical_weight: 0.8,
};

/// One fused chunk, with where it stood in each list (1-based).
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub chunk: ChunkRef,
    pub score: f64,
    pub lexical_rank: Option<usize>,
    pub semantic_rank: Option<usize>,
    pub semantic_score: Option<f64>,
}

/// Fuses two rankings (each best first) into the best `limit`; ties keep the
/// lexical list's order, then the semantic list's. `embedded` says whether a
/// chunk has a vector: one without (not embedded yet) is no evidence against
/// its meaning, so a weighted sum scores its semantic side as its lexical one
/// (measured against counting it 0 in benches/ir-eval/README.md, issue 48).
pub fn fuse(
    lexical: &[(f64, ChunkRef)],
    semantic: &[(f64, ChunkRef)],
    fusion: Fusion,
    limit: usize,
    embedded: impl Fn(ChunkRef) -> bool,
) -> Vec<Fused> {
    let mut all: Vec<Fused> = Vec::with_capacity(lexical.len() + semantic.len());
    let mut at: HashMap<ChunkRef, usize> = HashMap::new();
    for (rank, &(_, chunk)) in lexical.iter().enumerate() {
        at.insert(chunk, all.len());
        all.push(Fused {
            chunk,
            score: 0.0,
            lexical_rank: Some(rank + 1),
            semantic_rank: None,
            semantic_score: None,
        });
    }
    for (rank, &(score, chunk)) in semantic.iter().enumerate() {
        let i = *at.entry(chunk).or_insert_with(|| {
            all.push(Fused {
                chunk,
                score: 0.0,
                lexical_rank: None,
                semantic_rank: None,
                semantic_score: None,
            });
            all.len() - 1
        });
        all[i].semantic_rank = Some(rank + 1);
        all[i].semantic_score = Some(score);
    }
    let normalizer = |list: &[(f64, ChunkRef)]| {
        let max = list.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
        let min = list.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
        move |score: f64| {
            if max > min {
                (score - min) / (max - min)
            } else {
                1.0
            }
        }
    };
    let lex_norm = normalizer(lexical);
    let sem_norm = normalizer(semantic);
    for f in &mut all {
        f.score = match fusion {
            Fusion::Rrf { k } => {
                f.lexical_rank.map_or(0.0, |r| 1.0 / (k + r as f64))
                    + f.semantic_rank.map_or(0.0, |r| 1.0 / (k + r as f64))
            }
            Fusion::Weighted { lexical_weight } => {
                let lex = f.lexical_rank.map_or(0.0, |r| lex_norm(lexical[r - 1].0));
                let sem = match f.semantic_score {
                    Some(score) => sem_norm(score),
                    None if !embedded(f.chunk) => lex,
                    None => 0.0,
                };
                lexical_weight * lex + (1.0 - lexical_weight) * sem
            }
        };
    }
    // A stable sort: equal scores keep the order they were gathered in.
    all.sort_by(|a, b| b.score.total_cmp(&a.score));
    all.truncate(limit);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Index {
        Index::build(vec![
            (
                "a.md".into(),
                "# A\nalpha apples\n\n# B\nbeta bananas\n".into(),
            ),
            ("b/c.md".into(), "gamma grapes\n".into()),
            ("d.md".into(), "delta dates\n".into()),
        ])
    }

    /// A vector per chunk from its first letter, so nearness is known.
    fn vectors(index: &Index) -> (Vectors, Vec<(String, usize)>) {
        let mut v = Vectors::new("m", "r");
        let mut order = Vec::new();
        for (path, _, chunk_index, text) in index.chunk_texts() {
            let mut vector = vec![0.0f32; 4];
            let letter = text.trim_start_matches(['#', ' ']).as_bytes()[0];
            vector[(letter % 4) as usize] = 1.0;
            vector[((letter + 1) % 4) as usize] = 0.25;
            v.insert(key_of(text), vector);
            order.push((path.to_string(), chunk_index));
        }
        (v, order)
    }

    #[test]
    fn nearest_finds_by_vector_and_drops_changed_notes() {
        let mut idx = index();
        let (v, _) = vectors(&idx);
        let mut keys = KeyCache::default();
        let matrix = Matrix::build(&keys.keyed(&idx), &v);
        assert_eq!(matrix.len(), idx.chunks_indexed());
        let target = v.map[&key_of("gamma grapes\n")].to_vec();
        let found = matrix.nearest(&idx, &target, 2, None);
        let hits = idx
            .hits("unrelated", &found)
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
        assert_eq!(hits[0].path, "b/c.md");
        assert!((found[0].0 - 1.0).abs() < 1e-6);
        assert!(hits[0].matched_terms.is_empty());
        // Under a prefix only its notes; a changed note's rows are dropped.
        let under = matrix.nearest(&idx, &target, 5, Some("a.md"));
        assert!(idx
            .hits("x", &under)
            .iter()
            .flatten()
            .all(|h| h.path == "a.md"));
        idx.upsert_note("b/c.md", "gamma grapes, changed\n");
        let after = matrix.nearest(&idx, &target, 5, None);
        assert!(idx
            .hits("x", &after)
            .iter()
            .flatten()
            .all(|h| h.path != "b/c.md"));
        // The cache re-keys only the changed note.
        let keyed = keys.keyed(&idx);
        assert!(keyed
            .iter()
            .any(|k| k.key == key_of("gamma grapes, changed\n")));
    }

    #[test]
    fn fusion_by_ranks_and_by_scores() {
        let idx = index();
        let all = idx.ranked("alpha beta gamma delta apples", 10, None);
        let r: Vec<ChunkRef> = all.iter().map(|a| a.1).collect();
        assert!(r.len() >= 3);
        let lexical = vec![(9.0, r[0]), (3.0, r[1])];
        let semantic = vec![(0.9, r[2]), (0.8, r[1])];
        let rrf = fuse(&lexical, &semantic, Fusion::Rrf { k: 60.0 }, 10, |_| true);
        assert_eq!(rrf[0].chunk, r[1]); // in both lists
        assert_eq!(rrf[0].lexical_rank, Some(2));
        assert_eq!(rrf[0].semantic_rank, Some(2));
        assert_eq!(rrf[0].semantic_score, Some(0.8));
        assert_eq!(rrf.len(), 3);
        let weighted = fuse(
            &lexical,
            &semantic,
            Fusion::Weighted {
                lexical_weight: 0.7,
            },
            2,
            |_| true,
        );
        // r0: 0.7 * 1; r1: 0.7 * 0 + 0.3 * 0; r2: 0.3 * 1.
        assert_eq!(
            weighted.iter().map(|f| f.chunk).collect::<Vec<_>>(),
            vec![r[0], r[2]]
        );
        assert!((weighted[0].score - 0.7).abs() < 1e-12);
    }

    /// The default fusion is the weighted sum at the measured lexical weight:
    /// the semantic list's best, absent from the lexical one, scores 0.2; the
    /// lexical list's best, near the semantic best, between 0.8 and 1.
    #[test]
    fn the_default_fusion_is_weighted_at_the_measured_weight() {
        let idx = index();
        let all = idx.ranked("alpha beta gamma delta apples", 10, None);
        let r: Vec<ChunkRef> = all.iter().map(|a| a.1).collect();
        let lexical = vec![(9.0, r[0]), (3.0, r[1])];
        let semantic = vec![(0.9, r[0]), (0.95, r[2]), (0.1, r[1])];
        let fused = fuse(&lexical, &semantic, DEFAULT_FUSION, 10, |_| true);
        let score = |c: ChunkRef| fused.iter().find(|f| f.chunk == c).map(|f| f.score);
        assert_eq!(
            DEFAULT_FUSION,
            Fusion::Weighted {
                lexical_weight: 0.8
            }
        );
        assert!((score(r[2]).unwrap() - 0.2).abs() < 1e-12);
        assert!(score(r[0]).unwrap() > 0.8 && score(r[0]).unwrap() < 1.0);
        assert!(score(r[1]).unwrap().abs() < 1e-12);
    }

    /// A chunk not embedded yet is scored by its lexical side on both: it is
    /// not put under every embedded chunk for a vector it does not have yet.
    /// The matrix says which chunks have one, at their note's current text.
    #[test]
    fn a_chunk_without_a_vector_yet_is_scored_by_its_lexical_side() {
        let mut idx = index();
        let (mut v, _) = vectors(&idx);
        v.map.remove(&key_of("delta dates\n"));
        let matrix = Matrix::build(&KeyCache::default().keyed(&idx), &v);
        let all = idx.ranked("alpha beta gamma delta apples", 10, None);
        let r: Vec<ChunkRef> = all.iter().map(|a| a.1).collect();
        let path_of = |c: ChunkRef| idx.identify(c).unwrap().0.to_string();
        let missing = *r.iter().find(|&&c| path_of(c) == "d.md").unwrap();
        let embedded = *r.iter().find(|&&c| path_of(c) == "b/c.md").unwrap();
        assert!(!matrix.has(&idx, missing));
        assert!(matrix.has(&idx, embedded));
        // Both at the lexical list's middle; only `embedded` has a vector, far from the query.
        let top = *r.iter().find(|&&c| c != missing && c != embedded).unwrap();
        let lexical = vec![
            (9.0, top),
            (5.0, missing),
            (5.0, embedded),
            (1.0, r[r.len() - 1]),
        ];
        let semantic = vec![(0.9, top)];
        let fused = fuse(&lexical, &semantic, DEFAULT_FUSION, 10, |c| {
            matrix.has(&idx, c)
        });
        let score = |c: ChunkRef| fused.iter().find(|f| f.chunk == c).unwrap().score;
        let lex = 0.5; // (5 - 1) / (9 - 1)
        assert!((score(missing) - lex).abs() < 1e-12);
        assert!((score(embedded) - 0.8 * lex).abs() < 1e-12);
        // Once the note changes its old vector is no longer its own.
        idx.upsert_note("b/c.md", "gamma grapes, changed\n");
        let now = idx.ranked("gamma", 1, None)[0].1;
        assert!(!matrix.has(&idx, now));
    }
}
