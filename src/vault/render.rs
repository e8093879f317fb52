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
    // What each open link or image closes with, innermost last.
    let mut closing: Vec<Event<'static>> = Vec::new();
    // The events of the top-level block being read, and whether it holds raw HTML.
    let mut block: Vec<Event> = Vec::new();
    let mut raw = false;
    let mut depth = 0usize;
    let mut shown_events: Vec<Event> = Vec::new();
    for (event, range) in Parser::new_ext(body, options).into_offset_iter() {
        match event {
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Html(_) | Event::InlineHtml(_) => raw = true,
            _ => {}
        }
        let found = links.get(&(range.start + body_start));
        block.push(shown(event, found, &mut closing));
        if depth == 0 {
            settle(&mut block, raw, &mut shown_events);
            raw = false;
        }
    }
    settle(&mut block, raw, &mut shown_events);
    let mut html = String::with_capacity(body.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, shown_events.into_iter());
    html
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
            Some(_) => unresolved(closing),
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
            _ => {
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
}
