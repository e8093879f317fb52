//! Ranking: BM25F over the chunk text and the note's title field, plus the
//! whole note's BM25 score, for the chunks that hold a query term in their own
//! text; ties break by path bytes, then chunk index. Also what a hit shows:
//! the matched terms and the snippet offset.

use super::{path_matches_prefix, Hit, Index};

impl Index {
    /// (a prefix already normalized by [`super::validate_path_prefix`]).
    pub fn query(&self, q: &str, limit: usize, path_prefix: Option<&str>) -> Vec<Hit> {
        let query = self.analyze_query(q);
        if query.is_empty() || limit == 0 || self.live_chunks == 0 {
            return Vec::new();
        }
        let n = self.live_chunks as f64;
        let avg_len = (self.total_len as f64 / n).max(1.0);
        let avg_title = (self.total_title_len as f64 / n).max(1.0);
        let (k1, b, wt) = (self.params.k1, self.params.b, self.params.title_weight);
        let nw = self.params.note_weight;
        let n_notes = (self.live_notes as f64).max(1.0);
        let avg_note_len = (self.total_len as f64 / n_notes).max(1.0);

        // Candidates: chunks whose own text holds a query term, under the prefix.
        // Dense per-slot arrays: a query touches a large share of the chunks of
        // a vault with a small vocabulary, where hashing would dominate.
        let mut note_ok: Vec<u8> = Vec::new(); // 0 unknown, 1 in prefix, 2 not
        if path_prefix.is_some() {
            note_ok.resize(self.notes.len(), 0);
        }
        let mut is_candidate = vec![false; self.chunks.len()];
        let mut candidates: Vec<u32> = Vec::new();
        for qt in &query {
            for (slot, _) in self.terms.body[qt.id as usize].iter() {
                if is_candidate[slot as usize] {
                    continue;
                }
                let Some(chunk) = self.chunks[slot as usize].as_ref() else {
                    continue;
                };
                if let Some(prefix) = path_prefix {
                    let state = &mut note_ok[chunk.note as usize];
                    if *state == 0 {
                        let inside = self.notes[chunk.note as usize]
                            .as_ref()
                            .is_some_and(|note| path_matches_prefix(&note.path, prefix));
                        *state = if inside { 1 } else { 2 };
                    }
                    if *state == 2 {
                        continue;
                    }
                }
                is_candidate[slot as usize] = true;
                candidates.push(slot);
            }
        }
        if candidates.is_empty() {
            return Vec::new();
        }
        let cand_notes: Vec<(u32, u32)> = candidates
            .iter()
            .filter_map(|&slot| Some((slot, self.chunks[slot as usize].as_ref()?.note)))
            .collect();

        // Per term, the chunk's BM25F pseudo-frequency (text plus weighted
        // title) is saturated once; the whole note's BM25 is added per note.
        let mut scores = vec![0f64; self.chunks.len()];
        let mut body_tf = vec![0f64; self.chunks.len()];
        let mut title_tf = vec![0f64; self.notes.len()];
        let mut note_score = vec![0f64; self.notes.len()];
        for qt in &query {
            let postings = &self.terms.body[qt.id as usize];
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for (slot, tf) in postings.iter() {
                if is_candidate[slot as usize] {
                    if let Some(chunk) = self.chunks[slot as usize].as_ref() {
                        let norm = 1.0 - b + b * f64::from(chunk.len) / avg_len;
                        body_tf[slot as usize] = f64::from(tf) / norm;
                    }
                }
            }
            let title_postings = &self.terms.title[qt.id as usize];
            let titles = || title_postings.iter().filter(|_| wt > 0.0);
            for (note_slot, tf) in titles() {
                if let Some(note) = self.notes[note_slot as usize].as_ref() {
                    let norm = 1.0 - b + b * f64::from(note.title_len) / avg_title;
                    title_tf[note_slot as usize] = wt * f64::from(tf) / norm;
                }
            }
            for &(slot, note) in &cand_notes {
                let t = std::mem::take(&mut body_tf[slot as usize]) + title_tf[note as usize];
                if t > 0.0 {
                    scores[slot as usize] += qt.weight * idf * t / (k1 + t);
                }
            }
            for (note_slot, _) in titles() {
                title_tf[note_slot as usize] = 0.0;
            }
            if nw > 0.0 {
                let postings = &self.terms.whole[qt.id as usize];
                let df = postings.len() as f64;
                let idf = (1.0 + (n_notes - df + 0.5) / (df + 0.5)).ln();
                for (note_slot, tf) in postings.iter() {
                    if let Some(note) = self.notes[note_slot as usize].as_ref() {
                        let t = f64::from(tf) / (1.0 - b + b * note.len as f64 / avg_note_len);
                        note_score[note_slot as usize] += nw * qt.weight * idf * t / (k1 + t);
                    }
                }
            }
        }
        if nw > 0.0 {
            for &(slot, note) in &cand_notes {
                scores[slot as usize] += note_score[note as usize];
            }
        }

        let mut ranked: Vec<(f64, u32)> = candidates
            .iter()
            .map(|&slot| (scores[slot as usize], slot))
            .collect();
        let cmp = |a: &(f64, u32), b: &(f64, u32)| {
            b.0.total_cmp(&a.0).then_with(|| self.chunk_order(a.1, b.1))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, cmp);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(cmp);
        ranked
            .into_iter()
            .filter_map(|(score, slot)| self.hit(slot, score, &query))
            .collect()
    }

    fn chunk_order(&self, a: u32, b: u32) -> std::cmp::Ordering {
        let key = |slot: u32| {
            let chunk = self.chunks[slot as usize].as_ref();
            let path = chunk
                .and_then(|c| self.notes[c.note as usize].as_ref())
                .map_or("", |n| n.path.as_str());
            (path, chunk.map_or(0, |c| c.chunk_index))
        };
        let (pa, ca) = key(a);
        let (pb, cb) = key(b);
        pa.as_bytes().cmp(pb.as_bytes()).then(ca.cmp(&cb))
    }

    fn hit(&self, slot: u32, score: f64, query: &[QueryTerm]) -> Option<Hit> {
        let chunk = self.chunks[slot as usize].as_ref()?;
        let note = self.notes[chunk.note as usize].as_ref()?;
        let mut found = vec![false; query.len()];
        let mut snippet: Option<(usize, usize)> = None;
        self.tokenizer
            .for_each_token(&chunk.content, |term, start, end| {
                if let Some(i) = query.iter().position(|q| q.term == term) {
                    found[i] = true;
                    // Tokens arrive by start offset; at the same start the
                    // longer one (an ideograph pair over its first ideograph) wins.
                    match snippet {
                        None => snippet = Some((start, end)),
                        Some((s, e)) if s == start && end > e => snippet = Some((start, end)),
                        _ => {}
                    }
                }
            });
        let matched_terms = query
            .iter()
            .zip(&found)
            .filter(|(_, &f)| f)
            .map(|(q, _)| q.surface.clone())
            .collect();
        Some(Hit {
            content: chunk.content.clone(),
            score,
            path: note.path.clone(),
            chunk_index: chunk.chunk_index as usize,
            snippet_offset: snippet,
            matched_terms,
        })
    }

    /// Distinct known query terms in query order, weighted by repetition.
    fn analyze_query(&self, q: &str) -> Vec<QueryTerm> {
        let chars: Vec<char> = q.chars().collect();
        let mut out: Vec<QueryTerm> = Vec::new();
        self.tokenizer.for_each_token(q, |term, start, end| {
            if let Some(existing) = out.iter_mut().find(|t| t.term == term) {
                existing.weight += 1.0;
                return;
            }
            if let Some(&id) = self.terms.ids.get(term) {
                out.push(QueryTerm {
                    term: term.to_string(),
                    surface: chars[start..end].iter().collect(),
                    id,
                    weight: 1.0,
                });
            }
        });
        out
    }
}

#[derive(Debug)]
struct QueryTerm {
    term: String,
    surface: String,
    id: u32,
    weight: f64,
}
