//! `index.query`'s `group=note`: ranked chunks folded into one entry per note
//! (its best chunk, and how many of its other chunks the ranking holds), and
//! a context snippet of the best chunk for a reader: about 200 characters on
//! whole words around the densest run of matched terms, markdown marks left
//! out, with each matched term's place in the snippet for highlighting.

use std::collections::{BTreeSet, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::embed::Ranked;
use crate::error::{Error, ErrorCode, Result};
use crate::index::Tokenizer;

/// Characters of chunk text a context snippet spans, at most (before marks
/// are dropped and spaces folded; a cut word may take it a little past).
pub const CONTEXT_CHARS: usize = 220;
/// How far before the first term a snippet starts, when it can.
const LEAD_CHARS: usize = 50;
/// The most matched terms a snippet weighs when choosing where to stand.
const MAX_WEIGHED: usize = 400;
/// The most characters a snippet's edge moves to land on a word's boundary.
const MAX_WORD_SHIFT: usize = 30;

/// The `group` parameter: absent (one entry per chunk) or `note`.
pub fn parse_group(raw: Option<&Value>) -> Result<bool> {
    match raw {
        None | Some(Value::Null) => Ok(false),
        Some(Value::String(s)) if s == "note" => Ok(true),
        Some(Value::String(s)) if s == "chunk" => Ok(false),
        Some(other) => Err(Error::new(
            ErrorCode::InvalidRequest,
            format!("group must be \"note\" (one result per note) or \"chunk\" (the default), not {other}"),
        )),
    }
}

/// Distinct notes among `hits`.
pub fn notes_in(hits: &[Ranked]) -> usize {
    hits.iter()
        .map(|r| r.hit.path.as_str())
        .collect::<BTreeSet<_>>()
        .len()
}

/// Each note's best hit, best note first, with the count of its other hits.
pub fn by_note(hits: Vec<Ranked>) -> Vec<(Ranked, usize)> {
    let mut place: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<(Ranked, usize)> = Vec::new();
    for ranked in hits {
        match place.get(&ranked.hit.path) {
            Some(&i) => out[i].1 += 1,
            None => {
                place.insert(ranked.hit.path.clone(), out.len());
                out.push((ranked, 0));
            }
        }
    }
    out
}

/// A passage of a chunk for a reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Passage {
    /// The passage: whole words, spaces folded, markdown marks (`*`, `` ` ``,
    /// `[`, `]`, a heading's `#`, a quote's `>`) left out.
    pub text: String,
    /// Where it starts in the chunk's `content`, in characters.
    pub start: usize,
    /// Where it ends in `content`, in characters, exclusive: less than the
    /// content's length when the chunk goes on.
    pub end: usize,
    /// Each matched query term in `text`, in characters, end exclusive.
    pub terms: Vec<TermSpan>,
    /// The heading above the passage within the chunk (its text without `#`),
    /// or null when the chunk has none before it: where the page scrolls to.
    pub heading: Option<String>,
}

/// A span of characters, end exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TermSpan {
    pub start: usize,
    pub end: usize,
}

/// The passage of `content` a reader should see for query `q`.
pub fn context(tokenizer: &Tokenizer, q: &str, content: &str) -> Passage {
    let wanted: BTreeSet<String> = tokenizer.tokenize(q).into_iter().map(|t| t.term).collect();
    let mut found: Vec<(usize, usize, usize)> = Vec::new(); // start, end, which term
    let names: Vec<&String> = wanted.iter().collect();
    tokenizer.for_each_token(content, |term, start, end| {
        if found.len() < MAX_WEIGHED {
            if let Some(i) = names.iter().position(|n| n.as_str() == term) {
                // At one start (an ideograph pair over its first) keep the longer.
                match found.last_mut() {
                    Some(last) if last.0 == start => last.1 = last.1.max(end),
                    _ => found.push((start, end, i)),
                }
            }
        }
    });
    let chars: Vec<char> = content.chars().collect();
    let (start, end) = window(&chars, &found);
    let first_inside = found.iter().find(|f| f.0 >= start).map_or(start, |f| f.0);
    // The line holding the first term counts: it may be the heading itself.
    let line_end = chars[first_inside..]
        .iter()
        .position(|&c| c == '\n')
        .map_or(chars.len(), |at| first_inside + at);
    let heading = heading_before(&chars[..line_end]);
    let inside: Vec<(usize, usize)> = found
        .iter()
        .filter(|f| f.0 >= start && f.1 <= end)
        .map(|f| (f.0, f.1))
        .collect();
    let (text, terms) = cleaned(&chars, start, end, &inside);
    Passage {
        text,
        start,
        end,
        terms,
        heading,
    }
}

/// The characters to show: the window of [`CONTEXT_CHARS`] holding the most
/// distinct matched terms (then the most matches, then the earliest), its
/// edges moved onto word boundaries.
fn window(chars: &[char], found: &[(usize, usize, usize)]) -> (usize, usize) {
    let len = chars.len();
    if len <= CONTEXT_CHARS {
        return (0, len);
    }
    let mut best = (0usize, 0usize, 0usize); // distinct, matches, start
    for anchor in found {
        let start = anchor.0.saturating_sub(LEAD_CHARS);
        let end = (start + CONTEXT_CHARS).min(len);
        let start = end.saturating_sub(CONTEXT_CHARS);
        let within: Vec<&(usize, usize, usize)> = found
            .iter()
            .filter(|f| f.0 >= start && f.1 <= end)
            .collect();
        let distinct = within.iter().map(|f| f.2).collect::<BTreeSet<_>>().len();
        if (distinct, within.len()) > (best.0, best.1) {
            best = (distinct, within.len(), start);
        }
    }
    let start = best.2;
    let end = (start + CONTEXT_CHARS).min(len);
    let first = found.iter().find(|f| f.0 >= start).map_or(end, |f| f.0);
    let last = found
        .iter()
        .filter(|f| f.1 <= end)
        .map(|f| f.1)
        .max()
        .unwrap_or(start);
    let word = |i: usize| chars.get(i).is_some_and(|c| c.is_alphanumeric());
    // A start inside a word moves on to the next word (never past the first term).
    let mut s = start;
    if s > 0 && word(s - 1) && word(s) {
        let mut t = s;
        while t < first && t - s <= MAX_WORD_SHIFT && !chars[t].is_whitespace() {
            t += 1;
        }
        while t < first && chars[t].is_whitespace() {
            t += 1;
        }
        if t <= first && t - s <= MAX_WORD_SHIFT + 1 && !word(t.saturating_sub(1)) {
            s = t;
        }
    }
    // An end inside a word moves back to the word before (never before the last term).
    let mut e = end;
    if e < len && word(e - 1) && word(e) {
        let mut t = e;
        while t > last && e - t <= MAX_WORD_SHIFT && !chars[t - 1].is_whitespace() {
            t -= 1;
        }
        if t > last || (t == last && e - t <= MAX_WORD_SHIFT) {
            e = t;
        }
    }
    (s, e.max(s))
}

/// The last heading line in `chars` (its text, `#`s and spaces trimmed).
fn heading_before(chars: &[char]) -> Option<String> {
    let text: String = chars.iter().collect();
    text.lines()
        .rev()
        .map(str::trim_start)
        .find(|line| {
            let hashes = line.chars().take_while(|&c| c == '#').count();
            (1..=6).contains(&hashes) && line[hashes..].starts_with(' ')
        })
        .map(|line| line.trim_start_matches('#').trim().to_string())
        .filter(|heading| !heading.is_empty())
}

/// `chars[start..end]` with spaces folded and markdown marks left out, and
/// the spans `terms` (in `chars`) moved into the result.
fn cleaned(
    chars: &[char],
    start: usize,
    end: usize,
    terms: &[(usize, usize)],
) -> (String, Vec<TermSpan>) {
    let mut out: Vec<char> = Vec::with_capacity(end - start);
    // Where each input character landed in `out` (or would have).
    let mut at: Vec<usize> = Vec::with_capacity(end - start + 1);
    let mut line_start = true;
    for &c in &chars[start..end] {
        at.push(out.len());
        if c == '\n' {
            line_start = true;
        }
        if c.is_whitespace() {
            if out.last().is_some_and(|l| *l != ' ') {
                out.push(' ');
            }
            continue;
        }
        let mark = matches!(c, '*' | '`' | '[' | ']') || (line_start && matches!(c, '#' | '>'));
        if !mark {
            out.push(c);
            line_start = false;
        }
    }
    at.push(out.len());
    let mut lead = 0;
    while out.get(lead) == Some(&' ') {
        lead += 1;
    }
    while out.last() == Some(&' ') {
        out.pop();
    }
    let kept = out.len();
    let spans = terms
        .iter()
        .map(|&(s, e)| TermSpan {
            start: at[s - start]
                .saturating_sub(lead)
                .min(kept - lead.min(kept)),
            end: at[e - start]
                .saturating_sub(lead)
                .min(kept - lead.min(kept)),
        })
        .filter(|span| span.end > span.start)
        .collect();
    (out[lead.min(kept)..].iter().collect(), spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(ctx: &Passage) -> Vec<String> {
        let chars: Vec<char> = ctx.text.chars().collect();
        ctx.terms
            .iter()
            .map(|t| chars[t.start..t.end].iter().collect())
            .collect()
    }

    #[test]
    fn a_short_chunk_is_shown_whole_with_its_terms() {
        let t = Tokenizer::default();
        let ctx = context(
            &t,
            "graph view",
            "## The **Graph** view\n\nShows `links` as a graph.",
        );
        assert_eq!(ctx.text, "The Graph view Shows links as a graph.");
        assert_eq!(shown(&ctx), ["Graph", "view", "graph"]);
        assert_eq!(ctx.heading.as_deref(), Some("The **Graph** view"));
        assert_eq!((ctx.start, ctx.end), (0, 48));
    }

    #[test]
    fn a_long_chunk_is_cut_on_whole_words_around_the_densest_match() {
        let t = Tokenizer::default();
        let filler = "lorem ipsum dolor sit amet ".repeat(20);
        let content = format!("# Top\n\n{filler}tomatoes here. {filler}the tomatoes and basil grow by the wall. {filler}");
        let ctx = context(&t, "basil tomatoes", &content);
        assert_eq!(shown(&ctx), ["tomatoes", "basil"]);
        let count = ctx.text.chars().count();
        assert!(
            (150..=CONTEXT_CHARS).contains(&count),
            "{count}: {}",
            ctx.text
        );
        let words: Vec<&str> = ctx.text.split(' ').collect();
        for w in [words[0], words[words.len() - 1]] {
            assert!(
                ["lorem", "ipsum", "dolor", "sit", "amet", "the", "wall."].contains(&w),
                "{w}: {}",
                ctx.text
            );
        }
        assert!(ctx.start > 0 && ctx.end < content.chars().count());
        assert_eq!(ctx.heading.as_deref(), Some("Top"));
    }

    #[test]
    fn a_chunk_without_a_term_shows_its_start() {
        let t = Tokenizer::default();
        let ctx = context(&t, "zebra", &"word ".repeat(100));
        assert!(ctx.terms.is_empty());
        assert_eq!(ctx.start, 0);
        assert!(ctx.text.starts_with("word word"));
        assert!(ctx.text.ends_with("word"));
    }

    #[test]
    fn group_is_note_chunk_or_absent() {
        assert!(!parse_group(None).unwrap());
        assert!(parse_group(Some(&Value::from("note"))).unwrap());
        assert!(!parse_group(Some(&Value::from("chunk"))).unwrap());
        for bad in [Value::from("notes"), Value::from(1), Value::from("")] {
            assert_eq!(
                parse_group(Some(&bad)).unwrap_err().code,
                ErrorCode::InvalidRequest
            );
        }
    }
}
