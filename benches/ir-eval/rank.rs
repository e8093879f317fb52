//! Ranks queries against a folder of notes with one or more index variants, for
//! `benches/ir-eval/eval.py`, which runs the peers (FTS5, bm25s, tantivy) on the
//! same notes and queries and scores them all.
//!
//! Usage: `rank NOTES_DIR QUERIES_TSV DEPTH VARIANT...` where QUERIES_TSV lines are
//! `qid<TAB>query` and a VARIANT is `name` or `name:key=value,...` with keys
//! k1, b, tw (title weight), nw (note weight), n1 (0/1: the note weight for notes of one chunk
//! too), tt (0/1: the title field for a chunk no longer than it), minlen (the shortest length
//! normalization counts, as a share of the average), stem, stop, fold, cjk (0/1), pack, max (chars),
//! rm3 (1: the heavier `Feedback::RM3`, 0: no feedback; the default is `Feedback::LIGHT`; put
//! it before the keys below), fbd, fbt, fbw, fbq, fbdf (RM3 feedback: chunks, terms, the
//! original query's weight, the fewest query terms it applies to, the largest share of chunks
//! an expansion term may be in; fbd=0 turns it off).
//! Semantic and hybrid variants add `mode=semantic|hybrid`, and for hybrid
//! `fusion=rrf|weighted` with `rrfk` or `alpha` (the lexical weight), `depth` (each
//! side's list) and `fill` (0/1: a chunk missing from one side's list gets its exact
//! score there instead of that list's lowest), `miss` (a share of the chunks, picked by a hash
//! of path and chunk index, treated as not embedded yet, as while the server's worker catches
//! up) and `missfill` (0/1: a chunk without a vector counts 0 on the semantic side, or its
//! normalized lexical score there, as the server's `fuse` does, so it is neither pushed down
//! nor lifted by having no vector); they embed with the embedding server configured as the server's
//! `MIRAI_EMBED_*` settings say, keeping chunk vectors in the file `RANK_VECTORS` names.
//! Prints `variant<TAB>qid<TAB>rank<TAB>path<TAB>chunk_index<TAB>score` lines; with
//! `RANK_QLEN` set, writes `qid<TAB>distinct indexed terms` per query (the first
//! variant's index) to the file it names.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failed step fails the run

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use mirai::config::Config;
use mirai::embed::client::{Client, Kind};
use mirai::embed::search::{fuse, Fusion, KeyCache, Matrix};
use mirai::embed::vectors::{Key, Vectors};
use mirai::index::{ChunkRef, Index, Params};

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("notes folder")
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            collect(root, &p, out);
        } else if name.to_lowercase().ends_with(".md") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            if let Ok(content) = std::fs::read_to_string(&p) {
                out.push((rel, content));
            }
        }
    }
}

/// How a variant ranks beyond the lexical index's parameters.
struct Ranking {
    mode: String,
    fusion: Fusion,
    depth: usize,
    /// Weighted fusion only: a chunk in one side's list but not the other's
    /// gets its exact score on the other side (its cosine; its lexical score,
    /// 0 without a query term), normalized by that side's list like the rest,
    /// instead of counting as that list's lowest.
    fill: bool,
    /// The share of chunks treated as having no vector yet.
    miss: f64,
    /// Weighted fusion: a chunk without a vector scores its lexical part on
    /// the semantic side too, instead of 0.
    missfill: bool,
}

fn params(spec: &str) -> (String, Params, Ranking) {
    let (name, kv) = spec.split_once(':').unwrap_or((spec, ""));
    let mut p = Params::default();
    let mut r = Ranking {
        mode: "lexical".into(),
        fusion: mirai::embed::search::DEFAULT_FUSION,
        depth: mirai::embed::FUSION_DEPTH,
        fill: false,
        miss: 0.0,
        missfill: false,
    };
    for pair in kv.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').expect("key=value");
        match (k, v) {
            ("mode", _) => {
                r.mode = v.to_string();
                continue;
            }
            ("fusion", "rrf") => {
                r.fusion = Fusion::Rrf { k: 60.0 };
                continue;
            }
            ("fusion", "weighted") => {
                r.fusion = mirai::embed::search::DEFAULT_FUSION;
                continue;
            }
            _ => {}
        }
        let f: f64 = v.parse().expect("number");
        match k {
            "rrfk" => r.fusion = Fusion::Rrf { k: f },
            "alpha" => r.fusion = Fusion::Weighted { lexical_weight: f },
            "depth" => r.depth = f as usize,
            "fill" => r.fill = f != 0.0,
            "miss" => r.miss = f,
            "missfill" => r.missfill = f != 0.0,
            "k1" => p.k1 = f,
            "b" => p.b = f,
            "tw" => p.title_weight = f,
            "nw" => p.note_weight = f,
            "n1" => p.note_score_one_chunk = f != 0.0,
            "tt" => p.title_on_title_only = f != 0.0,
            "minlen" => p.min_length_share = f,
            "stem" => p.tokenizer.stem = f != 0.0,
            "stop" => p.tokenizer.stop_words = f != 0.0,
            "fold" => p.tokenizer.fold_diacritics = f != 0.0,
            "cjk" => p.tokenizer.cjk_bigrams = f != 0.0,
            "pack" => p.chunks.pack_chars = f as usize,
            "max" => p.chunks.max_chars = f as usize,
            "rm3" => {
                p.feedback = if f != 0.0 {
                    mirai::index::Feedback::RM3
                } else {
                    mirai::index::Feedback::OFF
                }
            }
            "fbd" => p.feedback.docs = f as usize,
            "fbt" => p.feedback.terms = f as usize,
            "fbw" => p.feedback.original_weight = f,
            "fbq" => p.feedback.min_query_terms = f as usize,
            "fbdf" => p.feedback.max_df_share = f,
            other => panic!("unknown key {other}"),
        }
    }
    (name.to_string(), p, r)
}

/// Whether a chunk counts as not embedded yet when a share `miss` of them does:
/// an FNV-1a hash of its path and index, so the same chunks for every variant.
fn unembedded(path: &str, chunk_index: usize, miss: f64) -> bool {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.bytes().chain(chunk_index.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    ((h >> 11) as f64 / (1u64 << 53) as f64) < miss
}

/// The embedding client and the vectors of every chunk of `idx`, embedded
/// where the cache file has none; the search's matrix leaves out the share
/// `miss` of the chunks (see [`unembedded`]).
fn embedded(idx: &Index, client: &Client, miss: f64) -> Matrix {
    let cache = std::env::var("RANK_VECTORS").expect("RANK_VECTORS: where to keep chunk vectors");
    let model = &client.config().model;
    let mut vectors = std::fs::read(&cache)
        .ok()
        .and_then(|bytes| Vectors::decode(&bytes).ok())
        .filter(|v| &v.model == model && v.recipe == client.recipe())
        .unwrap_or_else(|| Vectors::new(model, &client.recipe()));
    let keyed = KeyCache::default().keyed(idx);
    let mut missing: Vec<(Key, &str)> = keyed
        .iter()
        .filter(|k| !vectors.map.contains_key(&k.key))
        .map(|k| (k.key, k.text))
        .collect();
    missing.sort();
    missing.dedup();
    if !missing.is_empty() {
        let started = Instant::now();
        for batch in missing.chunks(client.config().batch) {
            let texts: Vec<&str> = batch.iter().map(|b| b.1).collect();
            let got = client
                .embed(&texts, Kind::Passage)
                .expect("embedding server");
            for ((key, _), v) in batch.iter().zip(got) {
                vectors.insert(*key, v);
            }
        }
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "embedded {} chunks in {secs:.1} s ({:.1} chunks/s)",
            missing.len(),
            missing.len() as f64 / secs
        );
        std::fs::write(&cache, vectors.encode()).expect("write RANK_VECTORS");
    }
    let kept: Vec<_> = keyed
        .into_iter()
        .filter(|k| !unembedded(k.path, k.chunk_index, miss))
        .collect();
    Matrix::build(&kept, &vectors)
}

/// Weighted fusion of each side's best `ranking.depth` chunks where a chunk
/// missing from one side's list gets its exact score there (see [`Ranking::fill`]).
fn filled(
    idx: &Index,
    matrix: &Matrix,
    q: &str,
    qv: &[f32],
    ranking: &Ranking,
    limit: usize,
) -> Vec<(f64, ChunkRef)> {
    let Fusion::Weighted { lexical_weight } = ranking.fusion else {
        panic!("fill=1 is for weighted fusion");
    };
    let all_lexical: HashMap<ChunkRef, f64> = idx
        .ranked(q, idx.chunks_indexed(), None)
        .into_iter()
        .map(|(s, c)| (c, s))
        .collect();
    let all_semantic: Vec<(f64, ChunkRef)> = matrix.nearest(idx, qv, matrix.len(), None);
    let cosine: HashMap<ChunkRef, f64> = all_semantic.iter().map(|&(s, c)| (c, s)).collect();
    let mut lexical = idx.ranked(q, ranking.depth, None);
    let semantic: Vec<(f64, ChunkRef)> = all_semantic.into_iter().take(ranking.depth).collect();
    let range = |list: &[(f64, ChunkRef)]| {
        let max = list.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
        let min = list.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
        (min, if max > min { max - min } else { 1.0 })
    };
    let (lmin, lspan) = range(&lexical);
    let (smin, sspan) = range(&semantic);
    lexical.extend(semantic.iter().copied());
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<(f64, ChunkRef)> = lexical
        .into_iter()
        .filter(|(_, c)| seen.insert(*c))
        .map(|(_, c)| {
            let lex = (all_lexical.get(&c).copied().unwrap_or(0.0) - lmin) / lspan;
            let sem = cosine.get(&c).map_or(0.0, |s| (s - smin) / sspan);
            (lexical_weight * lex + (1.0 - lexical_weight) * sem, c)
        })
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    out.truncate(limit);
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: rank NOTES_DIR QUERIES_TSV DEPTH VARIANT...");
        std::process::exit(2);
    }
    let root = Path::new(&args[1]);
    let mut notes = Vec::new();
    collect(root, root, &mut notes);
    let queries: Vec<(String, String)> = std::fs::read_to_string(&args[2])
        .expect("queries file")
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let depth: usize = args[3].parse().expect("depth");
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let client = || {
        let config = Config::new(root)
            .with_environment(&mirai::config::process_env)
            .expect("settings");
        let secrets = config.secrets();
        Client::new(
            config
                .embed
                .expect("MIRAI_EMBED_BASE_URL for a semantic variant"),
            secrets,
        )
    };
    let mut query_vectors: HashMap<String, Vec<f32>> = HashMap::new();
    for (v, spec) in args[4..].iter().enumerate() {
        let (name, p, ranking) = params(spec);
        let idx = Index::build_with(notes.clone(), p);
        if let (0, Ok(file)) = (v, std::env::var("RANK_QLEN")) {
            let lengths: String = queries
                .iter()
                .map(|(qid, q)| format!("{qid}\t{}\n", idx.query_terms(q)))
                .collect();
            std::fs::write(file, lengths).expect("write RANK_QLEN");
        }
        let semantic = (ranking.mode != "lexical").then(|| {
            let client = client();
            let matrix = embedded(&idx, &client, ranking.miss);
            (client, matrix)
        });
        for (qid, q) in &queries {
            let hits = match &semantic {
                None => idx.query(q, depth, None),
                Some((client, matrix)) => {
                    let qv = query_vectors.entry(q.clone()).or_insert_with(|| {
                        client
                            .embed(&[q], Kind::Query)
                            .expect("embedding server")
                            .remove(0)
                    });
                    let near = matrix.nearest(&idx, qv, ranking.depth, None);
                    let ranked: Vec<(f64, ChunkRef)> = if ranking.mode == "semantic" {
                        near.into_iter().take(depth).collect()
                    } else if ranking.fill {
                        filled(&idx, matrix, q, qv, &ranking, depth)
                    } else {
                        let lexical = idx.ranked(q, ranking.depth, None);
                        let missfill = ranking.missfill;
                        fuse(&lexical, &near, ranking.fusion, depth, |c| {
                            !missfill || matrix.has(&idx, c)
                        })
                        .into_iter()
                        .map(|f| (f.score, f.chunk))
                        .collect()
                    };
                    idx.hits(q, &ranked).into_iter().flatten().collect()
                }
            };
            for (rank, h) in hits.iter().enumerate() {
                writeln!(
                    out,
                    "{name}\t{qid}\t{}\t{}\t{}\t{}",
                    rank + 1,
                    h.path,
                    h.chunk_index,
                    h.score
                )
                .unwrap();
            }
        }
    }
}
