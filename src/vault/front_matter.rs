//! A note's YAML front matter: a first line that is exactly `---`, closed by
//! a line that is exactly `---` or `...`. The block is parsed with a
//! maintained YAML crate (serde_norway); a block that does not parse to a
//! mapping is body text, and the parser's message (with the note's line
//! number) is kept to be reported, never a failure. An unclosed block is not
//! front matter at all.

use serde_json::{Map, Value};

/// Front matter longer than this is not parsed (it is reported as an error).
pub const MAX_FRONT_MATTER_BYTES: usize = 256 * 1024;

/// What a note's first lines hold.
#[derive(Debug, Clone, PartialEq)]
pub enum FrontMatter {
    /// No front matter block.
    None,
    /// A block that parsed: its keys and values, and where the body starts.
    Parsed {
        fields: Map<String, Value>,
        body_start: usize,
    },
    /// A block that did not parse: it is body text; why, with its line.
    Broken { error: String },
}

impl FrontMatter {
    /// Byte offset where the note's body starts: after a parsed block, else 0.
    pub fn body_start(&self) -> usize {
        match self {
            FrontMatter::Parsed { body_start, .. } => *body_start,
            _ => 0,
        }
    }

    /// The parsed fields (`None` without a parsed block).
    pub fn fields(&self) -> Option<&Map<String, Value>> {
        match self {
            FrontMatter::Parsed { fields, .. } => Some(fields),
            _ => None,
        }
    }

    /// The parser's message, for a broken block.
    pub fn error(&self) -> Option<&str> {
        match self {
            FrontMatter::Broken { error } => Some(error),
            _ => None,
        }
    }

    /// The `title` field, when it is a non-empty string.
    pub fn title(&self) -> Option<&str> {
        let title = self.fields()?.get("title")?.as_str()?.trim();
        (!title.is_empty()).then_some(title)
    }
}

/// The block's YAML text and where the body starts, when the note opens one
/// and closes it.
fn block(content: &str) -> Option<(&str, usize)> {
    let mut lines = content.split_inclusive('\n');
    let first = lines.next()?;
    if first.trim_end_matches(['\n', '\r']) != "---" {
        return None;
    }
    let yaml_start = first.len();
    let mut at = yaml_start;
    for line in lines {
        let text = line.trim_end_matches(['\n', '\r']);
        if text == "---" || text == "..." {
            return Some((&content[yaml_start..at], at + line.len()));
        }
        at += line.len();
    }
    None
}

/// Reads the front matter of `content`.
pub fn parse(content: &str) -> FrontMatter {
    let Some((yaml, body_start)) = block(content) else {
        return FrontMatter::None;
    };
    if yaml.len() > MAX_FRONT_MATTER_BYTES {
        return FrontMatter::Broken {
            error: format!(
                "front matter is longer than {} KiB and is not read; shorten it",
                MAX_FRONT_MATTER_BYTES / 1024
            ),
        };
    }
    if yaml.trim().is_empty() {
        return FrontMatter::Parsed {
            fields: Map::new(),
            body_start,
        };
    }
    match serde_norway::from_str::<serde_norway::Value>(yaml) {
        Ok(serde_norway::Value::Mapping(mapping)) => FrontMatter::Parsed {
            fields: mapping
                .into_iter()
                .map(|(key, value)| (key_text(key), to_json(value)))
                .collect(),
            body_start,
        },
        Ok(serde_norway::Value::Null) => FrontMatter::Parsed {
            fields: Map::new(),
            body_start,
        },
        Ok(_) => FrontMatter::Broken {
            error: "line 2: front matter must be a mapping of keys to values (key: value), \
                    not a list or a single value"
                .to_string(),
        },
        Err(e) => {
            // The block starts on the note's second line.
            let line = e.location().map_or(2, |at| at.line() + 1);
            let message = e.to_string();
            let message = message
                .split(" at line ")
                .next()
                .unwrap_or(&message)
                .to_string();
            FrontMatter::Broken {
                error: format!("line {line}: {message}"),
            }
        }
    }
}

/// A mapping key as JSON object key: strings as they are, anything else in YAML.
fn key_text(key: serde_norway::Value) -> String {
    match key {
        serde_norway::Value::String(s) => s,
        other => serde_norway::to_string(&other)
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default(),
    }
}

/// A YAML value as JSON (tags dropped, non-string keys written as YAML).
fn to_json(value: serde_norway::Value) -> Value {
    use serde_norway::Value as Y;
    match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or_else(|| Value::String(n.to_string()), Value::Number)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Y::Mapping(mapping) => Value::Object(
            mapping
                .into_iter()
                .map(|(key, value)| (key_text(key), to_json(value)))
                .collect(),
        ),
        Y::Tagged(tagged) => to_json(tagged.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_block_parses_and_the_body_follows_it() {
        let note = "---\ntitle: Hi\ntags: [a, b]\n...\nbody\n";
        let fm = parse(note);
        assert_eq!(fm.title(), Some("Hi"));
        assert_eq!(fm.fields().unwrap()["tags"], serde_json::json!(["a", "b"]));
        assert_eq!(&note[fm.body_start()..], "body\n");
        assert_eq!(parse("---\r\n---\r\nx").body_start(), 10);
    }

    #[test]
    fn no_block_or_an_unclosed_one_is_body_text() {
        assert_eq!(parse("# t\n---\na: 1\n---\n"), FrontMatter::None);
        assert_eq!(parse("---\na: 1\n"), FrontMatter::None);
        assert_eq!(parse(" ---\na: 1\n---\n"), FrontMatter::None);
    }

    #[test]
    fn a_broken_block_reports_its_line_in_the_note() {
        let fm = parse("---\ntitle: ok\nbad: [unclosed\n---\nbody\n");
        let error = fm.error().expect("broken");
        assert!(error.starts_with("line "), "{error}");
        assert_eq!(fm.body_start(), 0);
        let fm = parse("---\n- a\n- b\n---\n");
        assert!(fm.error().unwrap().contains("mapping"));
    }
}
