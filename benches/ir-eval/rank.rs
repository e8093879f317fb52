//! Ranks queries against a folder of notes with one or more index variants, for
//! `benches/ir-eval/eval.py`, which runs the peers (FTS5, bm25s, tantivy) on the
//! same notes and queries and scores them all.
//!
//! Usage: `rank NOTES_DIR QUERIES_TSV DEPTH VARIANT...` where QUERIES_TSV lines are
//! `qid<TAB>query` and a VARIANT is `name` or `name:key=value,...` with keys
//! k1, b, tw (title weight), nw (note weight), stem, stop, fold, cjk (0/1), pack, max (chars),
//! fbd, fbt, fbw, fbq (RM3 feedback: chunks, terms, the original query's weight, the fewest query
//! terms it applies to; fbd=0 turns it off).
//! Prints `variant<TAB>qid<TAB>rank<TAB>path<TAB>chunk_index<TAB>score` lines.

use std::io::Write;
use std::path::Path;

use mirai::index::{Index, Params};

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

fn params(spec: &str) -> (String, Params) {
    let (name, kv) = spec.split_once(':').unwrap_or((spec, ""));
    let mut p = Params::default();
    for pair in kv.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').expect("key=value");
        let f: f64 = v.parse().expect("number");
        match k {
            "k1" => p.k1 = f,
            "b" => p.b = f,
            "tw" => p.title_weight = f,
            "nw" => p.note_weight = f,
            "stem" => p.tokenizer.stem = f != 0.0,
            "stop" => p.tokenizer.stop_words = f != 0.0,
            "fold" => p.tokenizer.fold_diacritics = f != 0.0,
            "cjk" => p.tokenizer.cjk_bigrams = f != 0.0,
            "pack" => p.chunks.pack_chars = f as usize,
            "max" => p.chunks.max_chars = f as usize,
            "fbd" => p.feedback.docs = f as usize,
            "fbt" => p.feedback.terms = f as usize,
            "fbw" => p.feedback.original_weight = f,
            "fbq" => p.feedback.min_query_terms = f as usize,
            other => panic!("unknown key {other}"),
        }
    }
    (name.to_string(), p)
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
    for spec in &args[4..] {
        let (name, p) = params(spec);
        let idx = Index::build_with(notes.clone(), p);
        for (qid, q) in &queries {
            for (rank, h) in idx.query(q, depth, None).iter().enumerate() {
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
