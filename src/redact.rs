//! Credentials inside URLs (`http://user:secret@host/...`) never leave mirai:
//! every URL shown in a log line, an error message, a transcript or `/config`
//! passes through [`urls`] first, which replaces the user information of each
//! URL in a text with `***`.

use std::borrow::Cow;

/// What stands in for the user information of a URL.
pub const MASK: &str = "***";

/// `text` with the user information (`user:password@`) of every URL in it
/// replaced by [`MASK`]; the scheme, host, port and path stay readable.
pub fn urls(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0;
    let mut searched = 0;
    while let Some(found) = text[searched..].find("://") {
        let authority_start = searched + found + 3;
        let authority_len = text[authority_start..]
            .find(ends_authority)
            .unwrap_or(text.len() - authority_start);
        let authority = &text[authority_start..authority_start + authority_len];
        if let Some(at) = authority.rfind('@') {
            out.push_str(&text[copied..authority_start]);
            out.push_str(MASK);
            copied = authority_start + at;
        }
        searched = authority_start + authority_len;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
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
            "http://***@host:8080/v1/chat?x=1"
        );
        assert_eq!(
            urls("cannot reach https://sk-123@api.example/v1 (error sending request for url (https://sk-123@api.example/v1/chat/completions))"),
            "cannot reach https://***@api.example/v1 (error sending request for url (https://***@api.example/v1/chat/completions))"
        );
        // An unencoded @ inside the password: everything before the last @ is masked.
        assert_eq!(urls("\"http://u:p@ss@h\""), "\"http://***@h\"");
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
