//! A note as HTML for the web page: its body (after the front matter, which
//! stays data) rendered by pulldown-cmark with the options [`super::scan`]
//! reads links with, then sanitized by ammonia, so whatever a note holds
//! (`<script>`, `onerror=`, `javascript:` links, SVG) comes out inert.
//!
//! Links: a wikilink, embed or relative markdown link that resolves to a note
//! becomes a link to the page's view of that note (`/ui/notes/<path>`, each
//! segment percent-encoded); one that resolves to nothing, or to an
//! attachment (which the page cannot fetch with its token), is plain text in a
//! `<span class="unresolved">`. Images are never loaded: each is its alt text
//! in a `<span class="embed">` (a page that loads no image leaks no visit).
//! External links keep their address (ammonia allows only safe schemes) and
//! get `rel="noopener noreferrer"`.

use std::collections::HashMap;
use std::sync::OnceLock;

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
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
    let events =
        Parser::new_ext(body, options)
            .into_offset_iter()
            .map(|(event, range)| match event {
                Event::Start(Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                }) => {
                    let found = links.get(&(range.start + body_start));
                    let wiki = matches!(link_type, LinkType::WikiLink { .. });
                    match (found, wiki) {
                        (Some(Some(note)), _) if note.ends_with(".md") => {
                            closing.push(Event::End(TagEnd::Link));
                            Event::Start(Tag::Link {
                                link_type,
                                dest_url: CowStr::from(note_address(note)),
                                title,
                                id,
                            })
                        }
                        (Some(_), _) | (None, true) => unresolved(&mut closing),
                        (None, false) => {
                            closing.push(Event::End(TagEnd::Link));
                            Event::Start(Tag::Link {
                                link_type,
                                dest_url,
                                title,
                                id,
                            })
                        }
                    }
                }
                Event::Start(Tag::Image { link_type, .. }) => {
                    match links.get(&(range.start + body_start)) {
                        Some(Some(note)) if note.ends_with(".md") => {
                            closing.push(Event::End(TagEnd::Link));
                            Event::Start(Tag::Link {
                                link_type,
                                dest_url: CowStr::from(note_address(note)),
                                title: CowStr::from(""),
                                id: CowStr::from(""),
                            })
                        }
                        _ => {
                            closing.push(Event::InlineHtml(CowStr::from("</span>")));
                            Event::InlineHtml(CowStr::from("<span class=\"embed\">"))
                        }
                    }
                }
                Event::End(TagEnd::Link | TagEnd::Image) => {
                    closing.pop().unwrap_or(Event::InlineHtml(CowStr::from("")))
                }
                other => other,
            });
    let mut html = String::with_capacity(body.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, events);
    sanitizer().clean(&html).to_string()
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
    fn images_are_never_loaded() {
        let html = plain("![a cat](https://tracker.example/cat.png)\n");
        assert!(
            html.contains("<span class=\"embed\">a cat</span>"),
            "{html}"
        );
        assert!(!html.contains("tracker.example"), "{html}");
    }

    #[test]
    fn addresses_encode_each_segment() {
        assert_eq!(note_address("a b/c#d?.md"), "/ui/notes/a%20b/c%23d%3F.md");
    }
}
