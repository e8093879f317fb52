//! Tags: `notes.tags` (every tag with its note count) and the `tag` filter
//! `notes.list` and `index.query` take. Tags come from the vault the live
//! index keeps ([`crate::vault::facts`] says how they are read).

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Class, Context, Empty, HttpInput, HttpRoute, Operation, PromptDetail};
use crate::error::{Error, ErrorCode, Result};
use crate::vault::facts::normalize_tag;
use crate::vault::Vault;

/// `notes.tags`: every tag with its note count.
pub struct NotesTags;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TagsResponse {
    /// Every tag (lowercased, without #), sorted; a nested tag's parents are
    /// listed too, counting the notes under them.
    pub tags: Vec<TagCount>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TagCount {
    pub tag: String,
    /// Notes carrying it (or a tag nested under it).
    pub count: usize,
}

impl Operation for NotesTags {
    const NAME: &'static str = "notes.tags";
    const EXAMPLE: &'static str = r##"await mirai.notes.tags()"##;
    const CLASS: Class = Class::Read;
    const SUMMARY: &'static str = "Every tag with its note count.";
    const MALFORMED: ErrorCode = ErrorCode::InvalidRequest;
    const HTTP: HttpRoute = HttpRoute::get("/mcp/notes/tags", HttpInput::Nothing);
    const PROMPT: PromptDetail = PromptDetail::Brief;
    type Request = Empty;
    type Response = TagsResponse;

    fn run(ctx: &Context, _request: Empty) -> Result<TagsResponse> {
        let vault = ctx.index.vault_as_if(&ctx.view.as_seen()?)?;
        Ok(TagsResponse {
            tags: vault
                .tag_counts()
                .into_iter()
                .map(|(tag, count)| TagCount { tag, count })
                .collect(),
        })
    }
}

/// The `tag` parameter, normalized (`#Proj/A` is `proj/a`); `None` when absent.
/// Malformed is `invalid_request` (ARCHITECTURE.md, "Bad bodies keep the
/// endpoint's code").
pub(super) fn tag_param(raw: Option<&Value>) -> Result<Option<String>> {
    let text = match raw {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => text,
        Some(other) => {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!(
                    "tag must be a string such as \"project\" or \"#project/alpha\", not {other}"
                ),
            ))
        }
    };
    let tag = normalize_tag(text);
    if tag.is_empty() || tag.chars().any(char::is_whitespace) {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!(
                "tag {text:?} is not a tag: give one tag, such as \"project\" or \"#project/alpha\" (notes.tags lists them)"
            ),
        ));
    }
    Ok(Some(tag))
}

/// The notes of `vault` carrying `tag` (or a tag nested under it).
pub(super) fn tagged(vault: &Vault, tag: &str) -> HashSet<String> {
    vault
        .notes()
        .filter(|(_, facts)| facts.has_tag(tag))
        .map(|(path, _)| path.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_tag_parameter_is_normalized_or_refused() {
        assert_eq!(tag_param(None).unwrap(), None);
        assert_eq!(
            tag_param(Some(&json!(" #Proj/A/ "))).unwrap().as_deref(),
            Some("proj/a")
        );
        for bad in [json!(""), json!("#"), json!("a b"), json!(3)] {
            let err = tag_param(Some(&bad)).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidRequest, "{bad}");
        }
    }
}
