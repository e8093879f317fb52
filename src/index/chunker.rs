//! Markdown-aware chunking: a note is cut into consecutive slices at ATX headings
//! outside code fences and outside YAML front matter, and no slice is longer than
//! a cap. Slices are exact byte ranges of the note, so the chunks of a note,
//! concatenated, give the note back, and `snippet_offset`s point into real text.
//!
//! Short neighbouring sections are packed together up to a target size: a
//! heading with two lines under it, ranked alone, has too little text to be
//! found or to be useful to the reader.

use super::markdown::{self, Kind};

/// Chunk size limits, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// Neighbouring sections are packed into one chunk while the chunk stays
    /// within this size. Zero keeps every section on its own.
    pub pack_chars: usize,
    /// No chunk is longer than this; a longer section is cut at a blank line,
    /// else at a line end, else at whitespace, else anywhere on a char boundary.
    pub max_chars: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            pack_chars: 1500,
            max_chars: 3000,
        }
    }
}

/// The byte ranges of `content`'s chunks, in order, covering it exactly.
/// An empty note has no chunks.
pub fn chunk_ranges(content: &str, options: ChunkOptions) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, usize, usize)> = None; // start, end, chars
    for (start, end) in sections(content) {
        let chars = content[start..end].chars().count();
        if let Some((cs, ce, cc)) = current {
            if cc + chars <= options.pack_chars {
                current = Some((cs, end, cc + chars));
                continue;
            }
            split_capped(content, cs, ce, options.max_chars, &mut out);
        }
        current = Some((start, end, chars));
    }
    if let Some((cs, ce, _)) = current {
        split_capped(content, cs, ce, options.max_chars, &mut out);
    }
    out
}

/// Byte ranges of the sections: front matter and anything before the first
/// heading form the first section; every heading ([`markdown`]'s, so never
/// one inside a fence or the front matter) starts another.
fn sections(content: &str) -> Vec<(usize, usize)> {
    if content.is_empty() {
        return Vec::new();
    }
    let mut starts = vec![0usize];
    starts.extend(
        markdown::lines(content)
            .filter(|line| line.start > 0 && matches!(line.kind, Kind::Heading(..)))
            .map(|line| line.start),
    );
    let mut out = Vec::with_capacity(starts.len());
    for (i, &s) in starts.iter().enumerate() {
        let e = starts.get(i + 1).copied().unwrap_or(content.len());
        out.push((s, e));
    }
    out
}

fn split_capped(
    content: &str,
    mut start: usize,
    end: usize,
    max_chars: usize,
    out: &mut Vec<(usize, usize)>,
) {
    let max_chars = max_chars.max(1);
    loop {
        let slice = &content[start..end];
        // The cap's byte position, if the slice is longer than the cap.
        let Some((cap, _)) = slice.char_indices().nth(max_chars) else {
            out.push((start, end));
            return;
        };
        let head = &slice[..cap];
        let half = cap / 2;
        let cut = head
            .rfind("\n\n")
            .map(|i| i + 2)
            .filter(|&i| i > half)
            .or_else(|| head.rfind('\n').map(|i| i + 1).filter(|&i| i > half))
            .or_else(|| {
                head.rfind(char::is_whitespace)
                    .map(|i| i + head[i..].chars().next().map_or(1, char::len_utf8))
                    .filter(|&i| i > half)
            })
            .unwrap_or(cap);
        out.push((start, start + cut));
        start += cut;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(content: &str, options: ChunkOptions) -> Vec<&str> {
        chunk_ranges(content, options)
            .into_iter()
            .map(|(s, e)| &content[s..e])
            .collect()
    }

    const UNPACKED: ChunkOptions = ChunkOptions {
        pack_chars: 0,
        max_chars: 10_000,
    };

    #[test]
    fn empty_note_has_no_chunks() {
        assert!(chunk_ranges("", ChunkOptions::default()).is_empty());
    }

    #[test]
    fn splits_at_headings_and_keeps_exact_slices() {
        let note = "intro\n# One\nbody\r\n## Two\n\nmore\n#nottag\n";
        let got = chunks(note, UNPACKED);
        assert_eq!(
            got,
            vec!["intro\n", "# One\nbody\r\n", "## Two\n\nmore\n#nottag\n"]
        );
        assert_eq!(got.concat(), note);
    }

    #[test]
    fn headings_inside_fences_do_not_split() {
        let note =
            "# A\n```sh\n# comment\n````\n~~~\n# still code\n```\n~~~\n# B\n~~~~\n# x\n~~~~\n";
        let got = chunks(note, UNPACKED);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[1].starts_with("# B"));
        assert_eq!(got.concat(), note);
    }

    #[test]
    fn front_matter_stays_with_the_first_section() {
        let note = "---\ntitle: Hello\n# yaml comment\n---\n# Heading\ntext\n";
        let got = chunks(note, UNPACKED);
        assert_eq!(
            got,
            vec![
                "---\ntitle: Hello\n# yaml comment\n---\n",
                "# Heading\ntext\n"
            ]
        );
    }

    #[test]
    fn small_sections_are_packed_up_to_the_target() {
        let note = "# A\na\n# B\nb\n# C\nccccccccccccccccccccc\n";
        let got = chunks(
            note,
            ChunkOptions {
                pack_chars: 12,
                max_chars: 100,
            },
        );
        assert_eq!(
            got,
            vec!["# A\na\n# B\nb\n", "# C\nccccccccccccccccccccc\n"]
        );
    }

    #[test]
    fn long_sections_are_capped_at_paragraphs_lines_or_spaces() {
        let para = "word ".repeat(30);
        let note = format!("{para}\n\n{para}\n{para}");
        let opts = ChunkOptions {
            pack_chars: 0,
            max_chars: 200,
        };
        let got = chunks(&note, opts);
        assert!(got.iter().all(|c| c.chars().count() <= 200), "{got:?}");
        assert!(got[0].ends_with("\n\n"));
        assert_eq!(got.concat(), note);

        let line = "é".repeat(450);
        let got = chunks(&line, opts);
        assert_eq!(got.len(), 3);
        assert_eq!(got.concat(), line);
    }

    /// Cases where the chunker and the title reader disagreed when each read
    /// the markdown its own way: the title took a heading the chunker
    /// (rightly) saw as code, or cut a heading's text short. Now the title is
    /// the heading the chunker cuts at.
    #[test]
    fn the_chunker_and_the_title_read_a_note_alike() {
        let unpacked = ChunkOptions {
            pack_chars: 0,
            max_chars: 10_000,
        };
        for (note, want) in [
            ("````\n```\n# inside\n````\n# Real\n", "Real"),
            ("~~~\n```\n# inside\n~~~\n# Real\n", "Real"),
            ("intro\n    # indented code\n# Real\n", "Real"),
            ("intro\n```\n# open fence\n", ""),
            ("intro\n# C#\n", "C#"),
        ] {
            let chunks: Vec<&str> = chunk_ranges(note, unpacked)
                .into_iter()
                .map(|(s, e)| &note[s..e])
                .collect();
            let first_cut = chunks.get(1).map_or("", |c| c.lines().next().unwrap_or(""));
            let title = markdown::title(note).unwrap_or("");
            assert_eq!(title, want, "{note:?}");
            assert_eq!(
                first_cut.trim_start_matches('#').trim(),
                want,
                "{note:?}: {chunks:?}"
            );
        }
    }
}
