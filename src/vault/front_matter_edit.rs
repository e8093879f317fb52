//! Front matter fields set or removed in a note's text, touching nothing else:
//! a named top-level key's lines (the key line and its value's continuation
//! lines) are replaced or dropped; every other byte (comments, the other keys
//! in their order and quoting, the body) stays as it was. A key not there yet
//! is added at the block's end; a note without front matter gets a block.
//! The result is parsed again and must hold exactly the asked-for fields.

use serde_json::{Map, Value};

use super::front_matter::{self, FrontMatter};

/// Most characters of a key.
const MAX_KEY_CHARS: usize = 100;

/// `content` with the fields of `set` set and those of `remove` removed;
/// `Err` says, for the caller's message, why it cannot be done.
pub fn edit(content: &str, set: &Map<String, Value>, remove: &[String]) -> Result<String, String> {
    if set.is_empty() && remove.is_empty() {
        return Err("give `set` (fields and values) or `remove` (field names), or both".into());
    }
    for key in set.keys().chain(remove) {
        check_key(key)?;
    }
    if let Some(both) = remove.iter().find(|key| set.contains_key(*key)) {
        return Err(format!(
            "{both:?} is both in `set` and in `remove`: name it in one"
        ));
    }
    let before = front_matter::parse(content);
    let newline = if content
        .split('\n')
        .next()
        .is_some_and(|l| l.ends_with('\r'))
    {
        "\r\n"
    } else {
        "\n"
    };
    let edited = match &before {
        FrontMatter::Broken { error } => {
            return Err(format!(
                "its front matter does not parse ({error}): fix the block with notes.edit first"
            ))
        }
        FrontMatter::None if set.is_empty() => return Ok(content.to_string()),
        FrontMatter::None => {
            let mut block = format!("---{newline}");
            for (key, value) in set {
                block.push_str(&line(key, value, newline)?);
            }
            block.push_str(&format!("---{newline}"));
            format!("{block}{content}")
        }
        FrontMatter::Parsed { body_start, .. } => {
            let yaml_start = content.find('\n').map_or(content.len(), |at| at + 1);
            let closing = closing_line_start(content, *body_start);
            let yaml = &content[yaml_start..closing];
            let edited = edit_block(yaml, set, remove, newline)?;
            format!("{}{edited}{}", &content[..yaml_start], &content[closing..])
        }
    };
    verify(&before, &edited, set, remove)?;
    Ok(edited)
}

/// Where the closing `---` line starts, given where the body starts after it.
fn closing_line_start(content: &str, body_start: usize) -> usize {
    let head = &content[..body_start];
    let without_end = head.strip_suffix('\n').unwrap_or(head);
    without_end.rfind('\n').map_or(0, |at| at + 1)
}

fn check_key(key: &str) -> Result<(), String> {
    let simple = !key.is_empty()
        && key.chars().count() <= MAX_KEY_CHARS
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ' '))
        && !key.starts_with([' ', '-', '.'])
        && !key.ends_with(' ');
    if simple {
        Ok(())
    } else {
        Err(format!(
            "{key:?} is not a field name this row sets: use letters, digits, `_`, `-`, `.` and \
             inner spaces, up to {MAX_KEY_CHARS} characters (edit other keys with notes.edit)"
        ))
    }
}

/// A top-level key's lines in the block: from its key line to its last
/// continuation line (indented, or a `- ` item under it), blank lines between
/// them included.
struct Entry {
    key: String,
    /// The key as written, up to its colon (its quoting kept).
    written: String,
    start: usize,
    end: usize,
}

fn entries(lines: &[&str]) -> Vec<Entry> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some((key, written)) = key_of(lines[i]) else {
            i += 1;
            continue;
        };
        let mut end = i + 1;
        let mut j = i + 1;
        while j < lines.len() {
            let text = lines[j].trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                j += 1;
                continue;
            }
            let continues = text.starts_with([' ', '\t']) || text == "-" || text.starts_with("- ");
            if !continues {
                break;
            }
            j += 1;
            end = j;
        }
        found.push(Entry {
            key,
            written,
            start: i,
            end,
        });
        i = end.max(i + 1);
    }
    found
}

/// The key of a top-level `key: value` line, and the key as written.
fn key_of(line: &str) -> Option<(String, String)> {
    if line.starts_with([' ', '\t', '#', '-']) {
        return None;
    }
    let text = line.trim_end_matches(['\n', '\r']);
    for quote in ['"', '\''] {
        if let Some(rest) = text.strip_prefix(quote) {
            let close = rest.find(quote)?;
            let after = &rest[close + 1..];
            let after = after.trim_start();
            if after.starts_with(':') {
                return Some((rest[..close].to_string(), text[..close + 2].to_string()));
            }
            return None;
        }
    }
    let colon = text
        .match_indices(':')
        .map(|(at, _)| at)
        .find(|&at| text[at + 1..].is_empty() || text[at + 1..].starts_with([' ', '\t']))?;
    let key = text[..colon].trim_end();
    (!key.is_empty()).then(|| (key.to_string(), key.to_string()))
}

fn edit_block(
    yaml: &str,
    set: &Map<String, Value>,
    remove: &[String],
    newline: &str,
) -> Result<String, String> {
    let lines: Vec<&str> = yaml.split_inclusive('\n').collect();
    let entries = entries(&lines);
    // What replaces each key's lines: None drops them.
    let mut replaced: Vec<(usize, usize, Option<String>)> = Vec::new();
    let mut added = String::new();
    for (key, value) in set {
        match entries.iter().find(|e| e.key == *key) {
            Some(entry) => {
                let rendered = format!("{}: {}{newline}", entry.written, scalar_or_flow(value)?);
                replaced.push((entry.start, entry.end, Some(rendered)));
            }
            None => added.push_str(&line(key, value, newline)?),
        }
    }
    for key in remove {
        if let Some(entry) = entries.iter().find(|e| e.key == *key) {
            replaced.push((entry.start, entry.end, None));
        }
    }
    let mut out = String::with_capacity(yaml.len() + added.len());
    let mut i = 0;
    while i < lines.len() {
        match replaced.iter().find(|(start, _, _)| *start == i) {
            Some((_, end, with)) => {
                if let Some(with) = with {
                    out.push_str(with);
                }
                i = *end;
            }
            None => {
                out.push_str(lines[i]);
                i += 1;
            }
        }
    }
    if !added.is_empty() && !out.is_empty() && !out.ends_with('\n') {
        out.push_str(newline);
    }
    out.push_str(&added);
    Ok(out)
}

fn line(key: &str, value: &Value, newline: &str) -> Result<String, String> {
    Ok(format!("{key}: {}{newline}", scalar_or_flow(value)?))
}

/// `value` as YAML on one line: a plain string when YAML reads it back as that
/// same string, else a double-quoted one (JSON's quoting is YAML's); lists and
/// mappings in flow form.
fn scalar_or_flow(value: &Value) -> Result<String, String> {
    match value {
        Value::String(text) => {
            let plain = format!("k: {text}");
            let reads_back = !text.is_empty()
                && !text.contains(['\n', '\r', '\t'])
                && matches!(
                    serde_norway::from_str::<serde_norway::Value>(&plain),
                    Ok(serde_norway::Value::Mapping(ref m))
                        if m.get("k").and_then(serde_norway::Value::as_str) == Some(text.as_str())
                );
            Ok(if reads_back {
                text.clone()
            } else {
                json(value)?
            })
        }
        Value::Array(items) => {
            let items: Result<Vec<String>, String> = items.iter().map(scalar_or_flow).collect();
            Ok(format!("[{}]", items?.join(", ")))
        }
        Value::Object(_) => json(value),
        other => json(other),
    }
}

fn json(value: &Value) -> Result<String, String> {
    serde_json::to_string(value).map_err(|e| format!("the value cannot be written: {e}"))
}

/// The edited text's front matter holds the fields asked for, none of those
/// removed, and every other field as it was.
fn verify(
    before: &FrontMatter,
    edited: &str,
    set: &Map<String, Value>,
    remove: &[String],
) -> Result<(), String> {
    let after = front_matter::parse(edited);
    let Some(fields) = after.fields() else {
        return Err(format!(
            "the edited front matter would not parse ({}): set these fields with notes.edit",
            after.error().unwrap_or("no block")
        ));
    };
    let mut expected = before.fields().cloned().unwrap_or_default();
    for key in remove {
        expected.remove(key);
    }
    for (key, value) in set {
        expected.insert(key.clone(), value.clone());
    }
    if *fields != expected {
        return Err(
            "the edited front matter would not read back as asked (a value YAML reads otherwise): \
             set these fields with notes.edit"
                .to_string(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(pairs: Value) -> Map<String, Value> {
        pairs.as_object().unwrap().clone()
    }

    const NOTE: &str = "---\n# how the recipe stands\ntitle: 'Sourdough'\nstatus: draft   # for now\ntags:\n  - bread\n  - baking\nserves: 4\n---\n# Sourdough\n\n  Body  with  odd   spacing \n";

    #[test]
    fn only_the_named_key_changes_byte_for_byte() {
        let edited = edit(NOTE, &set(json!({"status": "tested"})), &[]).unwrap();
        assert_eq!(
            edited,
            NOTE.replace("status: draft   # for now\n", "status: tested\n")
        );
        let edited = edit(NOTE, &set(json!({"tags": ["bread", "rye"]})), &[]).unwrap();
        assert_eq!(
            edited,
            NOTE.replace("tags:\n  - bread\n  - baking\n", "tags: [bread, rye]\n")
        );
    }

    #[test]
    fn new_keys_go_last_and_removed_keys_take_their_lines() {
        let edited = edit(
            NOTE,
            &set(json!({"rating": 5, "note": "yes: really"})),
            &["tags".to_string()],
        )
        .unwrap();
        assert_eq!(
            edited,
            NOTE.replace("tags:\n  - bread\n  - baking\n", "").replace(
                "serves: 4\n",
                "serves: 4\nnote: \"yes: really\"\nrating: 5\n"
            )
        );
        // Removing a key that is not there changes nothing.
        assert_eq!(edit(NOTE, &Map::new(), &["nope".into()]).unwrap(), NOTE);
    }

    #[test]
    fn a_note_without_front_matter_gets_a_block() {
        let body = "# Plain\r\n\r\ntext\r\n";
        let edited = edit(body, &set(json!({"status": "true"})), &[]).unwrap();
        assert_eq!(edited, format!("---\r\nstatus: \"true\"\r\n---\r\n{body}"));
        assert_eq!(edit(body, &Map::new(), &["status".into()]).unwrap(), body);
    }

    #[test]
    fn bad_requests_and_broken_blocks_are_refused() {
        assert!(edit(NOTE, &Map::new(), &[]).is_err());
        assert!(edit(NOTE, &set(json!({"a: b": 1})), &[]).is_err());
        assert!(edit(NOTE, &set(json!({"a": 1})), &["a".into()]).is_err());
        let broken = "---\ntitle: [unclosed\n---\nbody\n";
        let err = edit(broken, &set(json!({"a": 1})), &[]).unwrap_err();
        assert!(err.contains("does not parse"), "{err}");
    }
}
