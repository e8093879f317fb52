//! Where to look when a named note is not there and no note has a close name:
//! the notes whose text holds the words of the name, found by the
//! `index.query` row itself (lexical, so no embedding server is asked). A
//! small model that guessed `recipes/sourdough.md` is told about
//! `recipes/bread.md` instead of being left to guess again.

use serde_json::json;

use super::{dispatch, Context, Input};
use crate::error::{Error, ErrorCode};
use crate::notes::suggest::{self, MAX_SUGGESTIONS, NOTHING_CLOSE};

/// `err`, with the notes holding the words of the missing note's name added
/// when it is a missing note's `not_found` with no close name.
pub(super) fn hinted(ctx: &Context, mut err: Error) -> Error {
    if err.code != ErrorCode::NotFound || !err.message.starts_with(suggest::MISSING) {
        return err;
    }
    let Some(before) = err.message.strip_suffix(NOTHING_CLOSE) else {
        return err;
    };
    let Some(words) = name_words(before) else {
        return err;
    };
    let found = notes_holding(ctx, &words);
    if !found.is_empty() {
        let quoted: Vec<String> = found.iter().map(|path| format!("{path:?}")).collect();
        err.message = format!(
            "{before}; no note has a close name, but these notes hold its words: {}",
            quoted.join(", ")
        );
    }
    err
}

/// The words of the path in a missing note's message (`note not found:
/// "recipes/sourdough.md"` gives `recipes sourdough`).
fn name_words(message: &str) -> Option<String> {
    let quoted = message.strip_prefix(suggest::MISSING)?;
    let path: String = serde_json::from_str(quoted).ok()?;
    let path = path.strip_suffix(".md").unwrap_or(&path);
    let words: Vec<&str> = path
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// Up to [`MAX_SUGGESTIONS`] notes, best first, whose text matches `words`.
fn notes_holding(ctx: &Context, words: &str) -> Vec<String> {
    let request = json!({"q": words, "limit": 10, "mode": "lexical"});
    let Ok(answer) = dispatch(ctx, "index.query", Input::Json(request)) else {
        return Vec::new();
    };
    let mut paths: Vec<String> = Vec::new();
    for chunk in answer["chunks"].as_array().into_iter().flatten() {
        if let Some(path) = chunk["metadata"]["path"].as_str().map(str::to_string) {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        if paths.len() == MAX_SUGGESTIONS {
            break;
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_paths_words_are_its_folders_and_name() {
        assert_eq!(
            name_words("note not found: \"recipes/sour-dough_bread.md\"").as_deref(),
            Some("recipes sour dough bread")
        );
        assert_eq!(name_words("note not found: \"--.md\""), None);
        assert_eq!(name_words("unknown operation: x"), None);
    }
}
