//! A note as HTML for the web page: its body (after the front matter, which
//! stays data) rendered by pulldown-cmark with the options [`super::scan`]
//! reads links with, then sanitized by ammonia, so whatever a note holds
//! (`<script>`, `onerror=`, `javascript:` links, SVG) comes out inert.
//!
//! Links: a wikilink, embed or relative markdown link that resolves to a note
//! becomes a link to the page's view of that note (`/ui/notes/<path>`, each
//! segment percent-encoded); one that resolves to nothing, or to an
//! attachment (which the page cannot fetch with its token), is plain text in a
//! `<span class="unresolved">`. A link's `#heading` stays on its address; an
//! embed of a note (`![[note]]`) is a link marked `class="note-embed"`, which
//! the page shows inline. Images are never loaded: each is its alt text
//! in a `<span class="embed">` (a page that loads no image leaks no visit).
//! External links keep their address when it is `http:`, `https:`, `mailto:`
//! or relative (any other scheme, `javascript:` first, makes the link text).
//!
//! Each top-level block (a paragraph, a list, an HTML block...) where the
//! note wrote raw HTML is rendered alone and sanitized by ammonia
//! (`rel="noopener noreferrer"` on links); the pieces ammonia gives back are
//! whole, balanced HTML. The other blocks skip it: their HTML is only what
//! pulldown-cmark writes (text and attributes escaped), with every link's
//! address checked here, which is as safe and many times cheaper for a long note.
//!
//! Bounded whatever a note holds: nesting deeper than [`MAX_DEPTH`] (markdown
//! blocks and inlines inside each other, plus the raw HTML elements open in a
//! block) or HTML past [`output_budget`] (eight times the body, plus 256 KiB) is not
//! rendered: what came before is, its open elements closed, then a plain
//! paragraph saying the rest is too deep or too large to show (see the
//! source). So ammonia never sees deep nesting, where its cost grows with the
//! square of the depth, and a note of `>` or of table rows the header pads
//! answers a page, not a flood.
//!
//! Footnote names become element ids and fragment links: each is prefixed
//! ([`FOOTNOTE_PREFIX`]) so no id a note brings can equal one of the page's own.

use std::collections::HashMap;
use std::sync::OnceLock;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// What a path segment of a page address must encode: the URL's delimiters,
/// spaces, quotes and `%` itself.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'\'')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'\\')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// The page's address of note `path`: `/ui/notes/` and each segment percent-encoded.
pub fn note_address(path: &str) -> String {
    let segments: Vec<String> = path
        .split('/')
        .map(|segment| utf8_percent_encode(segment, SEGMENT).to_string())
        .collect();
    format!("/ui/notes/{}", segments.join("/"))
}

/// The deepest nesting rendered: markdown elements inside each other plus
/// the raw HTML elements open in a top-level block.
pub const MAX_DEPTH: usize = 64;
/// What every id a note's footnotes make starts with (the page's own ids never do).
pub const FOOTNOTE_PREFIX: &str = "note-fn-";
/// What an event costs beside its text: its tag, about.
const EVENT_COST: usize = 10;

/// The most HTML (by [`cost`]) a body of `len` bytes renders to: eight times
/// its length, plus 256 KiB (a note's HTML is rarely twice its length).
pub fn output_budget(len: usize) -> usize {
    len.saturating_mul(8).saturating_add(256 * 1024)
}

/// Why the rest of a note was not rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    TooDeep,
    TooLarge,
}

impl Cut {
    /// The plain block that stands for the rest of the note.
    fn notice(self) -> &'static str {
        match self {
            Cut::TooDeep => {
                "<p class=\"render-cut\">The rest of this note is nested too deeply to render \
                 here; see its source.</p>\n"
            }
            Cut::TooLarge => {
                "<p class=\"render-cut\">The rest of this note is too large to render here; \
                 see its source.</p>\n"
            }
        }
    }
}

/// `content`'s body from byte `body_start`, as sanitized HTML. `links` maps
/// the byte where each link of the note starts (as [`super::scan`] found it,
/// in `content`) to the file it resolves to, if any.
pub fn render(content: &str, body_start: usize, links: &HashMap<usize, Option<String>>) -> String {
    let body = &content[body_start..];
    let options = Options::ENABLE_WIKILINKS
        | Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    let budget = output_budget(body.len());
    let mut spent = 0usize;
    // What each open link or image closes with, innermost last.
    let mut closing: Vec<Event<'static>> = Vec::new();
    // The events of the top-level block being read, whether it holds raw
    // HTML, and how deep the raw HTML in it nests.
    let mut block: Vec<Event> = Vec::new();
    let mut raw = false;
    let mut raw_depth = 0usize;
    // The markdown elements open now, innermost last.
    let mut open: Vec<TagEnd> = Vec::new();
    let mut shown_events: Vec<Event> = Vec::new();
    let mut cut = None;
    for (event, range) in Parser::new_ext(body, options).into_offset_iter() {
        match &event {
            Event::Start(_) if open.len() + 1 + raw_depth > MAX_DEPTH => {
                cut = Some(Cut::TooDeep);
                break;
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                let (after, deepest) = raw_nesting(html, raw_depth);
                if open.len() + deepest > MAX_DEPTH {
                    cut = Some(Cut::TooDeep);
                    break;
                }
                raw_depth = after;
                raw = true;
            }
            _ => {}
        }
        let starts_link = matches!(event, Event::Start(Tag::Link { .. } | Tag::Image { .. }));
        let tag = match &event {
            Event::Start(tag) => Some(tag.to_end()),
            _ => None,
        };
        let ends = matches!(event, Event::End(_));
        let found = links.get(&(range.start + body_start));
        let event = footnote_prefixed(shown(event, found, &mut closing));
        spent = spent.saturating_add(cost(&event));
        if spent > budget {
            if starts_link {
                closing.pop();
            }
            cut = Some(Cut::TooLarge);
            break;
        }
        if let Some(tag) = tag {
            open.push(tag);
        } else if ends {
            open.pop();
        }
        block.push(event);
        if open.is_empty() {
            settle(&mut block, raw, &mut shown_events);
            raw = false;
            raw_depth = 0;
        }
    }
    if cut.is_some() {
        // Close what is open, innermost first, as the parser would have.
        while let Some(end) = open.pop() {
            block.push(shown(Event::End(end), None, &mut closing));
        }
    }
    settle(&mut block, raw, &mut shown_events);
    let mut html = String::with_capacity(body.len().min(budget) * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, shown_events.into_iter());
    if let Some(cut) = cut {
        html.push_str(cut.notice());
    }
    html
}

/// What `event` adds to the HTML, about: its text and its tags.
fn cost(event: &Event) -> usize {
    let text = match event {
        Event::Text(t)
        | Event::Code(t)
        | Event::Html(t)
        | Event::InlineHtml(t)
        | Event::InlineMath(t)
        | Event::DisplayMath(t)
        | Event::FootnoteReference(t) => t.len(),
        Event::Start(Tag::Link {
            dest_url, title, ..
        }) => dest_url.len() + title.len(),
        Event::Start(Tag::FootnoteDefinition(name)) => name.len(),
        _ => 0,
    };
    text.saturating_add(EVENT_COST)
}

/// HTML elements that never hold themselves (a browser closes the open one
/// first) or hold nothing: they do not deepen the nesting.
const FLAT: &[&str] = &[
    "area", "base", "br", "col", "colgroup", "dd", "dt", "embed", "hr", "img", "input", "li",
    "link", "meta", "option", "p", "param", "rp", "rt", "source", "tbody", "td", "tfoot", "th",
    "thead", "tr", "track", "wbr",
];

/// The raw HTML `html` read from nesting `depth`: the depth after it and the
/// deepest it reached. Every start tag of an element that can hold others
/// opens one, every end tag closes one; comments and declarations count for
/// nothing. An overestimate is safe: it only cuts sooner.
fn raw_nesting(html: &str, mut depth: usize) -> (usize, usize) {
    let mut deepest = depth;
    let bytes = html.as_bytes();
    let mut i = 0;
    while let Some(at) = bytes[i..].iter().position(|&b| b == b'<') {
        i += at + 1;
        let closing = bytes.get(i) == Some(&b'/');
        let name_start = if closing { i + 1 } else { i };
        let name_len = bytes[name_start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        if name_len == 0 || !bytes[name_start].is_ascii_alphabetic() {
            continue;
        }
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        let end = bytes[name_start..]
            .iter()
            .position(|&b| b == b'>')
            .map_or(bytes.len(), |at| name_start + at);
        let self_closing = end > 0 && bytes.get(end - 1) == Some(&b'/');
        if FLAT.contains(&name.as_str()) || (self_closing && !closing) {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
        } else {
            depth += 1;
            deepest = deepest.max(depth);
        }
        i = end.min(bytes.len());
    }
    (depth, deepest)
}

/// `event` with a footnote's name prefixed ([`FOOTNOTE_PREFIX`]): the name
/// becomes the definition's id and the reference's `#` link.
fn footnote_prefixed(event: Event<'_>) -> Event<'_> {
    let prefixed = |name: &str| CowStr::from(format!("{FOOTNOTE_PREFIX}{name}"));
    match event {
        Event::FootnoteReference(name) => Event::FootnoteReference(prefixed(&name)),
        Event::Start(Tag::FootnoteDefinition(name)) => {
            Event::Start(Tag::FootnoteDefinition(prefixed(&name)))
        }
        other => other,
    }
}

/// Moves a finished top-level block's events to `out`: as they are, or,
/// when the note wrote raw HTML in it, as that block rendered alone and
/// sanitized by ammonia (one piece of finished HTML), so ammonia's work
/// follows the raw HTML a note holds, not its length.
fn settle<'a>(block: &mut Vec<Event<'a>>, raw: bool, out: &mut Vec<Event<'a>>) {
    if !raw {
        out.append(block);
        return;
    }
    let mut piece = String::new();
    pulldown_cmark::html::push_html(&mut piece, block.drain(..));
    out.push(Event::Html(CowStr::from(
        sanitizer().clean(&piece).to_string(),
    )));
}

/// One event as the page shows it. `found`: the file the link starting
/// there resolves to (`Some(None)`: none), if the vault's scan found one.
fn shown<'a>(
    event: Event<'a>,
    found: Option<&Option<String>>,
    closing: &mut Vec<Event<'static>>,
) -> Event<'a> {
    let to_note =
        |note: &str, dest: &str, link_type, title, id, closing: &mut Vec<Event<'static>>| {
            closing.push(Event::End(TagEnd::Link));
            Event::Start(Tag::Link {
                link_type,
                dest_url: CowStr::from(note_address(note) + &fragment(dest)),
                title,
                id,
            })
        };
    match event {
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => match found {
            Some(Some(note)) if note.ends_with(".md") => {
                to_note(note, &dest_url, link_type, title, id, closing)
            }
            Some(Some(file)) => vault_file("file-link", file, closing),
            Some(None) => unresolved(closing),
            None if matches!(link_type, LinkType::WikiLink { .. }) || !safe_href(&dest_url) => {
                unresolved(closing)
            }
            None => {
                closing.push(Event::End(TagEnd::Link));
                Event::Start(Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                })
            }
        },
        Event::Start(Tag::Image { dest_url, .. }) => match found {
            Some(Some(note)) if note.ends_with(".md") => {
                // The address is percent-encoded but for `&`: escaped for the attribute.
                let href = (note_address(note) + &fragment(&dest_url)).replace('&', "&amp;");
                closing.push(Event::InlineHtml(CowStr::from("</a>")));
                Event::InlineHtml(CowStr::from(format!(
                    "<a class=\"note-embed\" href=\"{href}\">"
                )))
            }
            Some(Some(file)) if crate::notes::files::media_type(file).raster => {
                vault_file("file-embed", file, closing)
            }
            Some(Some(file)) => vault_file("file-link", file, closing),
            // An embed of a vault file that is not there: marked as a broken link is.
            Some(None) => {
                closing.push(Event::InlineHtml(CowStr::from("</span>")));
                Event::InlineHtml(CowStr::from("<span class=\"embed unresolved\">"))
            }
            None => {
                closing.push(Event::InlineHtml(CowStr::from("</span>")));
                Event::InlineHtml(CowStr::from("<span class=\"embed\">"))
            }
        },
        Event::End(TagEnd::Link | TagEnd::Image) => {
            closing.pop().unwrap_or(Event::InlineHtml(CowStr::from("")))
        }
        other => other,
    }
}

/// The `#heading` (or `#^block`) of a link's target, percent-encoded for the
/// page's address ("" when it has none).
fn fragment(dest: &str) -> String {
    match dest.split_once('#') {
        Some((_, place)) if !place.is_empty() => {
            let place = percent_decode_str(place).decode_utf8_lossy();
            format!("#{}", utf8_percent_encode(&place, SEGMENT))
        }
        _ => String::new(),
    }
}

/// Whether a link's address may stand in the page: `http:`, `https:`,
/// `mailto:`, or one with no scheme (relative, `#anchor`, `//host`). Read as
/// a browser reads it: tabs and newlines dropped, leading spaces and
/// control characters trimmed, the scheme in any case.
fn safe_href(dest: &str) -> bool {
    let cleaned: String = dest
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let before_path = cleaned.split(['/', '?', '#']).next().unwrap_or_default();
    match before_path.split_once(':') {
        None => true,
        Some((scheme, _)) => ["http", "https", "mailto"]
            .iter()
            .any(|safe| scheme.eq_ignore_ascii_case(safe)),
    }
}

/// A link or embed that reaches a file of the vault that is not a note: its
/// text in a span naming the file (`file-embed`: a raster image the page may
/// fetch and show; `file-link`: anything else, which the page offers as a
/// download). Nothing is loaded by the HTML itself.
fn vault_file(class: &str, file: &str, closing: &mut Vec<Event<'static>>) -> Event<'static> {
    let escaped = file
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    closing.push(Event::InlineHtml(CowStr::from("</span>")));
    Event::InlineHtml(CowStr::from(format!(
        "<span class=\"{class}\" data-file=\"{escaped}\">"
    )))
}

/// A link that reaches no note: its text in a span.
fn unresolved(closing: &mut Vec<Event<'static>>) -> Event<'static> {
    closing.push(Event::InlineHtml(CowStr::from("</span>")));
    Event::InlineHtml(CowStr::from("<span class=\"unresolved\">"))
}

/// ammonia's defaults (safe tags and attributes, http/https/mailto and
/// relative links, `<script>` and `<style>` dropped with their content),
/// with no images at all and only the classes this module writes (and
/// pulldown-cmark's task list checkboxes).
fn sanitizer() -> &'static ammonia::Builder<'static> {
    static BUILDER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    BUILDER.get_or_init(|| {
        let mut builder = ammonia::Builder::default();
        builder
            .rm_tags(&["img"])
            .add_tags(&["input"])
            .add_tag_attributes("input", &["type", "checked", "disabled"])
            .add_allowed_classes("span", &["unresolved", "embed"])
            .add_allowed_classes("a", &["note-embed"])
            .link_rel(Some("noopener noreferrer"));
        builder
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(content: &str) -> String {
        render(content, 0, &HashMap::new())
    }

    #[test]
    fn markdown_becomes_html() {
        let html =
            plain("# Title\n\nSome *words* and `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<em>words</em>"), "{html}");
        assert!(html.contains("<table>"), "{html}");
    }

    #[test]
    fn hostile_html_comes_out_inert() {
        let html = plain(
            "<script>window.pwned=1</script>\n\n<img src=x onerror=\"window.pwned=1\">\n\n\
             [click](javascript:window.pwned=1)\n\n\
             <svg onload=\"window.pwned=1\"><script>window.pwned=1</script></svg>\n\n\
             <a href=\"javascript:alert(1)\">a</a> <iframe src=\"https://evil.example\"></iframe>\n",
        );
        for bad in [
            "<script",
            "onerror",
            "javascript:",
            "<svg",
            "onload",
            "<iframe",
            "<img",
        ] {
            assert!(!html.contains(bad), "{bad} in {html}");
        }
    }

    #[test]
    fn resolved_links_point_at_the_page_and_others_are_text() {
        let content =
            "---\ntitle: x\n---\nSee [[Other note]], [[Missing]] and [f](sub/a%20b.md).\n";
        let body_start = content.find("See").unwrap();
        let links = HashMap::from([
            (
                content.find("[[Other").unwrap(),
                Some("notes/Other note.md".to_string()),
            ),
            (content.find("[[Missing").unwrap(), None),
            (content.find("[f]").unwrap(), Some("sub/a b.md".to_string())),
        ]);
        let html = render(content, body_start, &links);
        assert!(
            html.contains("href=\"/ui/notes/notes/Other%20note.md\""),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"unresolved\">Missing</span>"),
            "{html}"
        );
        assert!(html.contains("href=\"/ui/notes/sub/a%20b.md\""), "{html}");
        assert!(!html.contains("title: x"), "{html}");
    }

    #[test]
    fn only_safe_schemes_stay_links_with_or_without_raw_html() {
        for extra in ["", "\n\n<b>raw</b>\n"] {
            let html = plain(&format!(
                "[a](javascript:alert(1)) [b](JavaScript&colon;x) [c](<java\tscript:x>) \
                 <vbscript:x> [d](data:text/html,x) [e](https://ok.example/) [f](#here) \
                 [g](sub/page.md) <mailto:me@example.com>{extra}"
            ));
            let hrefs: Vec<&str> = html
                .split("href=\"")
                .skip(1)
                .filter_map(|rest| rest.split('"').next())
                .collect();
            assert_eq!(
                hrefs,
                [
                    "https://ok.example/",
                    "#here",
                    "sub/page.md",
                    "mailto:me@example.com"
                ],
                "{html}"
            );
            for good in [
                "https://ok.example/",
                "href=\"#here\"",
                "href=\"sub/page.md\"",
                "mailto:me@example.com",
            ] {
                assert!(html.contains(good), "{good} missing from {html}");
            }
        }
    }

    #[test]
    fn raw_html_is_sanitized_block_by_block_and_stays_inert_across_blocks() {
        let html = plain(
            "<div onclick=\"x()\">\n\nopen *md* [a](javascript:x)\n\n</div>\n\n\
             Some <b>bold</b> and <i onmouseover=\"y()\">it</i>.\n\n<scr\n\nipt>z()</script>\n\n\
             [^1]: note\n\nRef[^1] and [[Other]].\n",
        );
        for bad in ["onclick", "onmouseover", "javascript", "<script", "ipt>"] {
            assert!(!html.contains(bad), "{bad} in {html}");
        }
        assert!(html.contains("<b>bold</b>"), "{html}");
        assert!(html.contains("<em>md</em>"), "{html}");
    }

    #[test]
    fn images_are_never_loaded() {
        let html = plain("![a cat](https://tracker.example/cat.png)\n");
        assert!(
            html.contains("<span class=\"embed\">a cat</span>"),
            "{html}"
        );
        assert!(!html.contains("tracker.example"), "{html}");
    }

    /// The probe's shapes at the note limit: nested block HTML, `>`, lists
    /// and a table whose rows the header pads. Each renders what fits, then
    /// the plain notice; the HTML stays within the budget.
    #[test]
    fn deep_or_huge_notes_render_what_fits_then_a_notice() {
        const LIMIT: usize = 1024 * 1024;
        let fill = |unit: &str| unit.repeat(LIMIT / unit.len());
        let deep = [
            fill("<div>"),
            fill("<ul><li>"),
            fill("<dl><dd>"),
            fill("<blockquote>"),
            fill("<section>"),
            format!("<div>\n{}", fill("<div>a")),
            fill(">"),
            fill("+ "),
            fill("1. "),
            fill("> - "),
        ];
        for (n, note) in deep.iter().enumerate() {
            let html = plain(note);
            assert!(
                html.ends_with(Cut::TooDeep.notice()),
                "shape {n}: {}",
                &html[html.len().saturating_sub(300)..]
            );
            assert!(html.len() < 64 * 1024, "shape {n}: {} bytes", html.len());
        }
        let columns = 2000;
        let mut table = format!("{}|\n{}|\n", "|a".repeat(columns), "|-".repeat(columns));
        table.push_str(&"|b\n".repeat((LIMIT - table.len()) / 3));
        let html = plain(&table);
        assert!(
            html.ends_with(Cut::TooLarge.notice()),
            "{}",
            &html[html.len() - 200..]
        );
        assert!(
            html.len() <= output_budget(table.len()) * 2,
            "{} bytes",
            html.len()
        );
        assert!(html.contains("<td>"), "the rows that fit are rendered");
    }

    #[test]
    fn nesting_within_the_bound_renders_whole() {
        let note = format!(
            "{}deep{}\n\n{} quoted\n\n- a\n  - b\n    - c\n",
            "<div>".repeat(MAX_DEPTH - 2),
            "</div>".repeat(MAX_DEPTH - 2),
            ">".repeat(MAX_DEPTH - 2)
        );
        let html = plain(&note);
        assert!(!html.contains("render-cut"), "{html}");
        assert!(html.contains("deep") && html.contains("quoted") && html.contains("<li>c</li>"));
        assert_eq!(
            raw_nesting("<p>a<br><img src=x/><div><span>x</span>", 0),
            (1, 2)
        );
    }

    #[test]
    fn footnote_ids_never_equal_the_pages_own() {
        let html = plain("See[^token-form] and[^main].\n\n[^token-form]: one\n[^main]: two\n");
        assert!(
            html.contains(&format!("id=\"{FOOTNOTE_PREFIX}token-form\"")),
            "{html}"
        );
        assert!(
            html.contains(&format!("href=\"#{FOOTNOTE_PREFIX}main\"")),
            "{html}"
        );
        let ids: Vec<&str> = html
            .split(" id=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert_eq!(ids.len(), 2, "{html}");
        assert!(
            ids.iter().all(|id| id.starts_with(FOOTNOTE_PREFIX)),
            "{html}"
        );
    }

    #[test]
    fn headings_stay_on_links_and_note_embeds_are_marked() {
        let content =
            "See [[Plans#Later on]] and [x](plans.md#later%20on).\n\n![[Plans#Later on]]\n";
        let at = |needle: &str| content.find(needle).unwrap();
        let links = HashMap::from([
            (at("[[Plans"), Some("garden/plans.md".to_string())),
            (at("[x]"), Some("garden/plans.md".to_string())),
            (at("![["), Some("garden/plans.md".to_string())),
        ]);
        let html = render(content, 0, &links);
        assert_eq!(
            html.matches("href=\"/ui/notes/garden/plans.md#Later%20on\"")
                .count(),
            2,
            "{html}"
        );
        assert!(
            html.contains("href=\"/ui/notes/garden/plans.md#later%20on\""),
            "{html}"
        );
        assert!(
            html.contains("<a class=\"note-embed\" href=\"/ui/notes/garden/plans.md#Later%20on\">"),
            "{html}"
        );
    }

    #[test]
    fn addresses_encode_each_segment() {
        assert_eq!(note_address("a b/c#d?.md"), "/ui/notes/a%20b/c%23d%3F.md");
    }

    #[test]
    fn embeds_and_links_of_vault_files_are_marked_and_load_nothing() {
        let content = "![[a \"b\".png]] ![plot](x.svg) [paper](docs/p.pdf) ![gone](gone.png)\n";
        let at = |needle: &str| content.find(needle).unwrap();
        let links = HashMap::from([
            (at("![[a"), Some("img/a \"b\".png".to_string())),
            (at("![plot]"), Some("x.svg".to_string())),
            (at("[paper]"), Some("docs/p.pdf".to_string())),
            (at("![gone]"), None),
        ]);
        let html = render(content, 0, &links);
        assert!(
            html.contains("<span class=\"file-embed\" data-file=\"img/a &quot;b&quot;.png\">"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"file-link\" data-file=\"x.svg\">plot</span>"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"file-link\" data-file=\"docs/p.pdf\">paper</span>"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"embed unresolved\">gone</span>"),
            "{html}"
        );
        assert!(!html.contains("<img"), "{html}");
    }
}
