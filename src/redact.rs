//! Credentials inside URLs (`http://user:secret@host/...`, `...?api-key=...`)
//! never leave mirai: every URL shown in an error message, a transcript or a
//! `Debug` form passes through [`urls`] first, which replaces the user
//! information and the query string of each URL in a text with `***`; a log
//! line that only needs to say where a server is shows its [`origin`].
//! [`Secrets`] are every secret of a configuration (keys, tokens, and the
//! query values and user information of its URLs), cut out of whatever a
//! provider answers before it is stored or shown, URL or not.

use std::borrow::Cow;

/// What stands in for the user information of a URL.
pub const MASK: &str = "***";

/// What a `Debug` form shows of a secret: whether it is set, never its value.
pub fn presence(value: &Option<String>) -> Option<&'static str> {
    value.as_ref().map(|_| "<set>")
}

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

/// What stands in for a configured secret found in a text.
pub const SECRET_MASK: &str = "<secret>";

/// Values shorter than this are never treated as secrets (a query value
/// `v=1` would otherwise cut every `1` out of a text).
const SHORTEST_SECRET: usize = 4;

/// The secrets of a configuration, longest first. `Debug` shows how many.
#[derive(Clone, Default)]
pub struct Secrets(Vec<String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} values)", self.0.len())
    }
}

impl Secrets {
    /// Adds a secret value (ignored when shorter than 4 bytes).
    pub fn add(&mut self, value: &str) {
        let value = value.trim();
        if value.len() >= SHORTEST_SECRET && !self.0.iter().any(|s| s == value) {
            self.0.push(value.to_string());
            self.0.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        }
    }

    /// Adds the user name, password and query values of `url`, as written
    /// and percent-decoded (a provider may echo either).
    pub fn add_url(&mut self, url: &str) {
        let Ok(parsed) = url::Url::parse(url) else {
            return;
        };
        let mut raw = vec![parsed.username().to_string()];
        raw.extend(parsed.password().map(str::to_string));
        if let Some(query) = parsed.query() {
            for pair in query.split('&') {
                raw.push(pair.split_once('=').map_or(pair, |(_, v)| v).to_string());
            }
        }
        for value in raw {
            let decoded = percent_decode(&value);
            self.add(&value);
            self.add(&decoded);
        }
    }

    /// `text` with the user information and query string of every URL masked
    /// ([`urls`]), then every secret left replaced by [`SECRET_MASK`].
    pub fn scrub(&self, text: &str) -> String {
        // URLs first, while their credentials still read as user information.
        let mut out = urls(text).into_owned();
        for secret in &self.0 {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), SECRET_MASK);
            }
        }
        out
    }
}

/// `value` with `%XX` escapes (and `+`, as forms write a space) decoded;
/// bytes that are not UTF-8 stay escaped.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| value.to_string())
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
    fn configured_secrets_are_cut_out_of_any_text_url_or_not() {
        let mut secrets = Secrets::default();
        secrets.add("sk-s3cret-key");
        secrets.add("abc"); // too short to be a secret
        secrets.add_url("https://bobby:pw%21s3cret@llm.example/v1?key=q%2Fs3cret&v=1");
        let text = "invalid key sk-s3cret-key for bobby (password pw!s3cret, query q/s3cret or q%2Fs3cret), \
                    see https://llm.example/v1?key=other abc v=1";
        let scrubbed = secrets.scrub(text);
        assert!(!scrubbed.contains("s3cret"), "{scrubbed}");
        assert!(!scrubbed.contains("bobby"), "{scrubbed}");
        assert!(
            scrubbed.contains("https://llm.example/v1?***"),
            "{scrubbed}"
        );
        assert!(scrubbed.ends_with("abc v=1"), "{scrubbed}");
        assert_eq!(format!("{secrets:?}"), "Secrets(6 values)");
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
