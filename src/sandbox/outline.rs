//! A short outline of a call's JSON answer, in the TypeScript-like notation the
//! agent's prompt uses: `{notes: string[6]}`, `{chunks: {content, metadata,
//! score}[3], limit: number}`. Kept with each call so a model whose program
//! returned nothing can be told what its calls did answer (small models write
//! `notes.length` for `(await mirai.notes.list()).notes.length`).

use serde_json::Value;

/// The longest outline kept, in bytes; longer ones end in `…`.
const MAX_LEN: usize = 300;

/// `value`'s outline: the top level's fields with their types, a nested
/// object's field names, and every array's length.
pub fn outline(value: &Value) -> String {
    let mut text = render(value, 0);
    if text.len() > MAX_LEN {
        let mut end = MAX_LEN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

fn render(value: &Value, depth: usize) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(_) => "boolean".to_string(),
        Value::Number(_) => "number".to_string(),
        Value::String(_) => "string".to_string(),
        Value::Array(items) => match items.first() {
            None => "[] (empty)".to_string(),
            Some(first) => format!("{}[{}]", render(first, depth + 1), items.len()),
        },
        Value::Object(fields) if depth == 0 => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, value)| format!("{name}: {}", render(value, depth + 1)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        Value::Object(fields) => {
            let names: Vec<&str> = fields.keys().map(String::as_str).collect();
            format!("{{{}}}", names.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outlines_say_field_names_types_and_lengths() {
        assert_eq!(
            outline(&json!({"notes": ["a.md", "b.md", "c.md"]})),
            "{notes: string[3]}"
        );
        assert_eq!(
            outline(
                &json!({"chunks": [{"content": "x", "score": 1.5}], "limit": 5, "stale": false, "degraded": null})
            ),
            "{chunks: {content, score}[1], degraded: null, limit: number, stale: boolean}"
        );
        assert_eq!(outline(&json!({"notes": []})), "{notes: [] (empty)}");
        assert_eq!(outline(&json!([[1, 2], [3]])), "number[2][2]");
    }

    #[test]
    fn a_long_outline_is_cut_at_a_character() {
        let fields: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("féld{i}"), json!("x"))).collect();
        let text = outline(&Value::Object(fields));
        assert!(text.ends_with('…'));
        assert!(text.len() <= MAX_LEN + '…'.len_utf8());
    }
}
