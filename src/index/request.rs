//! Validation of `index.query`'s inputs: the query text, `limit` and
//! `path_prefix`. Each refuses at least what the original service refuses, with
//! its code (`invalid_query`, `invalid_limit`), and says what would be accepted.

use crate::error::{Error, ErrorCode, Result};

pub const DEFAULT_LIMIT: usize = 5;
pub const MAX_LIMIT: usize = 50;

/// The `limit` parameter: absent means [`DEFAULT_LIMIT`]; otherwise plain
/// decimal digits without a leading zero or sign, 1..=[`MAX_LIMIT`]. Forms the
/// original accepted by accident (`010` as octal 8, `0x2`, `+3`) are refused.
pub fn parse_limit(raw: Option<&str>) -> Result<usize> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    let digits_only = !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (raw.len() > 1 && raw.starts_with('0')) {
        return Err(Error::new(
            ErrorCode::InvalidLimit,
            format!(
                "limit must be a whole number from 1 to {MAX_LIMIT} in plain digits, got {raw:?}"
            ),
        ));
    }
    match raw.parse::<usize>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(Error::new(
            ErrorCode::InvalidLimit,
            format!("limit must be between 1 and {MAX_LIMIT}, got {raw}"),
        )),
    }
}

/// The `q` parameter, trimmed; missing or blank is `invalid_query`.
pub fn validate_query(raw: Option<&str>) -> Result<String> {
    let trimmed = raw.map(str::trim).unwrap_or_default();
    if trimmed.is_empty() {
        return Err(Error::new(
            ErrorCode::InvalidQuery,
            "query is required: pass the words to search for as q",
        ));
    }
    Ok(trimmed.to_string())
}

/// The `path_prefix` parameter, normalized to `a/b` form (no `.`, `..`, empty or
/// trailing components). `None` when absent or when it names the notes root
/// itself (`.`, `a/..`). Empty, absolute, home-relative (`~`), escaping or
/// NUL-carrying prefixes are `invalid_query`.
pub fn validate_path_prefix(raw: Option<&str>) -> Result<Option<String>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let invalid = |why: &str| Err(Error::new(ErrorCode::InvalidQuery, why.to_string()));
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return invalid("path_prefix must be a non-empty relative path such as \"projects/\"");
    }
    if trimmed.contains('\0') {
        return invalid("path_prefix must not contain NUL bytes");
    }
    if trimmed.starts_with('/') || trimmed.starts_with('\\') {
        return invalid(
            "path_prefix must be relative to the notes root; absolute paths are not allowed",
        );
    }
    if trimmed.starts_with('~') {
        return invalid(
            "path_prefix must be relative to the notes root; home-relative paths are not allowed",
        );
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in trimmed.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return invalid("path_prefix escapes the notes root");
                }
            }
            p => parts.push(p),
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

/// Whether `path` lies under `prefix` by whole components: `nested` matches
/// `nested/a.md` and `nested` itself, never `nested-other.md`.
pub fn path_matches_prefix(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_table() {
        let ok = [(None, 5), (Some("1"), 1), (Some("7"), 7), (Some("50"), 50)];
        for (raw, want) in ok {
            assert_eq!(parse_limit(raw), Ok(want), "{raw:?}");
        }
        let bad = [
            "",
            "0",
            "51",
            "010",
            "05",
            "0x2",
            "1.5",
            "abc",
            "+3",
            "-1",
            " 5",
            "5 ",
            "1e1",
            "99999999999999999999999",
            "５",
        ];
        for raw in bad {
            let err = parse_limit(Some(raw)).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidLimit, "{raw:?}");
            assert!(!err.message.is_empty());
        }
    }

    #[test]
    fn query_is_trimmed_and_required() {
        assert_eq!(
            validate_query(Some("  hello world \n")).unwrap(),
            "hello world"
        );
        for raw in [None, Some(""), Some("   \t\n")] {
            assert_eq!(
                validate_query(raw).unwrap_err().code,
                ErrorCode::InvalidQuery
            );
        }
    }

    #[test]
    fn path_prefix_rules() {
        let ok = [
            (None, None),
            (Some("nested"), Some("nested")),
            (Some("nested/"), Some("nested")),
            (Some(" ./nested//deep/ "), Some("nested/deep")),
            (Some("a/../b"), Some("b")),
            (Some("."), None),
            (Some("a/.."), None),
        ];
        for (raw, want) in ok {
            assert_eq!(
                validate_path_prefix(raw).unwrap(),
                want.map(str::to_string),
                "{raw:?}"
            );
        }
        for raw in [
            "",
            "  ",
            "/etc",
            "\\x",
            "..",
            "../x",
            "a/../../x",
            "a\0b",
            "~/x",
            "~root",
        ] {
            let err = validate_path_prefix(Some(raw)).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidQuery, "{raw:?}");
        }
    }

    #[test]
    fn prefix_matches_whole_components() {
        assert!(path_matches_prefix("nested/a.md", "nested"));
        assert!(path_matches_prefix("nested/deep/a.md", "nested/deep"));
        assert!(path_matches_prefix("a.md", "a.md"));
        assert!(!path_matches_prefix("nested-other.md", "nested"));
        assert!(!path_matches_prefix("nestedx/a.md", "nested"));
    }
}
