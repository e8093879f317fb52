//! Credentials inside URLs (`http://user:secret@host/...`, `...?api-key=...`)
//! never leave mirai: every URL shown in an error message, a transcript or a
//! `Debug` form passes through [`urls`] first, which replaces the user
//! information and the query string of each URL in a text with `***`; a log
//! line that only needs to say where a server is shows its [`origin`].

use std::borrow::Cow;

/// What stands in for the user information of a URL.
pub const MASK: &str = "***";

/// `text` with the user information (`user:password@`) and the query string
/// (`?key=...`) of every URL in it replaced by [`MASK`]; the scheme, host,
/// port, path and fragment stay readable.
pub fn urls(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0;
    let mut searched = 0;
    while let Some(found) = text[searched..].find("://") {
        let authority_start = searched + found + 3;
        let authority_end = authority_start
            + text[authority_start..]
                .find(ends_authority)
                .unwrap_or(text.len() - authority_start);
        if let Some(at) = text[authority_start..authority_end].rfind('@') {
            out.push_str(&text[copied..authority_start]);
            out.push_str(MASK);
            copied = authority_start + at;
        }
        let url_end = authority_end
            + text[authority_end..]
                .find(ends_url)
                .unwrap_or(text.len() - authority_end);
        if let Some(mark) = text[authority_end..url_end].find('?') {
            let query_start = authority_end + mark + 1;
            let query_end = text[query_start..url_end]
                .find('#')
                .map_or(url_end, |hash| query_start + hash);
            if query_end > query_start {
                out.push_str(&text[copied..query_start]);
                out.push_str(MASK);
                copied = query_end;
            }
        }
        searched = url_end;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Where the server at `url` is, and nothing else: `scheme://host[:port]`
/// (no user information, path or query, any of which may carry a key).
pub fn origin(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => match (parsed.host_str(), parsed.port()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}", parsed.scheme()),
            (Some(host), None) => format!("{}://{host}", parsed.scheme()),
            (None, _) => format!("a {} URL without a host", parsed.scheme()),
        },
        Err(_) => "an unparseable URL".to_string(),
    }
}

/// Characters that end a URL in a text: what cannot appear in one unencoded,
/// and the quotes and brackets a URL is often shown between.
fn ends_url(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c, '\\' | '"' | '\'' | '`' | '<' | '>' | '(' | ')')
}

/// Characters that end a URL's authority (user information cannot hold them
/// unencoded), including the quotes and brackets a URL is often shown between.
fn ends_authority(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            '/' | '?' | '#' | '\\' | '"' | '\'' | '`' | '<' | '>' | '(' | ')'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_is_masked_and_the_rest_kept() {
        assert_eq!(
            urls("http://user:pa%40ss@host:8080/v1/chat?x=1"),
            "http://***@host:8080/v1/chat?***"
        );
        assert_eq!(
            urls("cannot reach https://sk-123@api.example/v1 (error sending request for url (https://sk-123@api.example/v1/chat/completions))"),
            "cannot reach https://***@api.example/v1 (error sending request for url (https://***@api.example/v1/chat/completions))"
        );
        // An unencoded @ inside the password: everything before the last @ is masked.
        assert_eq!(urls("\"http://u:p@ss@h\""), "\"http://***@h\"");
    }

    #[test]
    fn query_strings_are_masked_wherever_the_url_stands() {
        assert_eq!(
            urls("https://x.openai.azure.com/openai/v1?api-key=s3cret"),
            "https://x.openai.azure.com/openai/v1?***"
        );
        assert_eq!(
            urls("error sending request for url (https://h/v1/chat/completions?key=k&x=1#top): refused"),
            "error sending request for url (https://h/v1/chat/completions?***#top): refused"
        );
        assert_eq!(
            urls("http://h?k=v \"http://u:p@g/?q=1\""),
            "http://h?*** \"http://***@g/?***\""
        );
        assert!(matches!(urls("http://h/path?"), Cow::Borrowed(_)));
    }

    #[test]
    fn origin_keeps_only_scheme_host_and_port() {
        assert_eq!(
            origin("https://user:pw@api.example:8443/v1?api-key=s3cret#x"),
            "https://api.example:8443"
        );
        assert_eq!(
            origin("http://127.0.0.1:11434/v1"),
            "http://127.0.0.1:11434"
        );
        assert_eq!(
            origin("https://api.openai.com/v1"),
            "https://api.openai.com"
        );
        assert_eq!(origin("http://[::1]:8080/v1?k=1"), "http://[::1]:8080");
        assert_eq!(origin("not a url ?key=s3cret"), "an unparseable URL");
    }

    #[test]
    fn text_without_credentials_is_returned_as_it_is() {
        for text in [
            "http://127.0.0.1:11434/v1",
            "mail me at a@b.example, see https://x.example/@user",
            "no url at all",
            "trailing ://",
        ] {
            assert!(
                matches!(urls(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
    }
}
