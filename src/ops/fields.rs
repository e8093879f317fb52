//! No field is silently ignored: a request's keys are checked against its
//! row's JSON Schema (the one generated from the request type, which the
//! OpenAPI document and MCP's tool list show), at every depth, before the row
//! reads it. A misspelt `base_commit` would otherwise drop the optimistic
//! check without a word. The refusal names the field and the closest known
//! one: "unknown field `mesage`; did you mean `message`?".
//!
//! [`strict`] marks the same schemas `additionalProperties: false`, so what
//! the document says and what [`unknown`] refuses are one rule.

use serde_json::{Map, Value};

use crate::notes::suggest;

/// How many `$ref`s may be followed without descending into the value (a
/// schema referring to itself in a loop never reaches a value).
const MAX_REF_HOPS: usize = 16;

/// `schema` with `additionalProperties: false` on every object schema that
/// names its properties (or is a struct without any) and says nothing of
/// others (its `$defs` included).
pub fn strict(mut schema: Value) -> Value {
    close(&mut schema);
    schema
}

fn close(node: &mut Value) {
    let Some(object) = node.as_object_mut() else {
        return;
    };
    // A struct without fields is `{"type": "object"}` alone (a map says
    // `additionalProperties`): it names its properties too, none.
    let fieldless =
        object.get("type") == Some(&Value::from("object")) && !object.contains_key("properties");
    if (fieldless || object.contains_key("properties"))
        && !object.contains_key("additionalProperties")
    {
        object.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (key, child) in object.iter_mut() {
        match (key.as_str(), child) {
            // Names to schemas.
            ("properties" | "$defs", Value::Object(named)) => named.values_mut().for_each(close),
            // Lists of schemas.
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(list)) => {
                list.iter_mut().for_each(close)
            }
            // One schema.
            ("items" | "additionalProperties" | "not", schema) => close(schema),
            _ => {}
        }
    }
}

/// The first key of `request`, at any depth, that `schema` (a request schema
/// with its `$defs`) does not name, as the message to answer; `None` when
/// every key is known. Objects whose schema names no properties (a map) are
/// not checked, and neither is a value that is not of the schema's shape: the
/// row's own parsing refuses that with its own words.
pub fn unknown(schema: &Value, request: &Value) -> Option<String> {
    walk(schema, schema, request, "")
}

fn walk(root: &Value, schema: &Value, value: &Value, at: &str) -> Option<String> {
    let branches = branches(root, schema);
    match value {
        Value::Object(object) => {
            static NONE: std::sync::LazyLock<Map<String, Value>> =
                std::sync::LazyLock::new(Map::new);
            // Each branch that names its properties, or is closed with none.
            let shapes: Vec<&Map<String, Value>> = branches
                .iter()
                .filter_map(|branch| match branch.get("properties") {
                    Some(properties) => properties.as_object(),
                    None => (branch.get("additionalProperties") == Some(&Value::Bool(false)))
                        .then_some(&*NONE),
                })
                .collect();
            if shapes.is_empty() {
                return None;
            }
            for (key, child) in object {
                let Some(property) = shapes.iter().find_map(|shape| shape.get(key)) else {
                    let known: Vec<&str> = shapes
                        .iter()
                        .flat_map(|shape| shape.keys().map(String::as_str))
                        .collect();
                    return Some(refusal(key, at, &known));
                };
                let inner = format!("{at}{}{key}", if at.is_empty() { "" } else { "." });
                if let Some(why) = walk(root, property, child, &inner) {
                    return Some(why);
                }
            }
            None
        }
        Value::Array(items) => {
            let item = branches.iter().find_map(|branch| branch.get("items"))?;
            items
                .iter()
                .enumerate()
                .find_map(|(i, child)| walk(root, item, child, &format!("{at}[{i}]")))
        }
        _ => None,
    }
}

/// `schema` and the alternatives it allows (`anyOf`, `oneOf`, `allOf`), with
/// every `$ref` into `$defs` followed.
fn branches<'a>(root: &'a Value, schema: &'a Value) -> Vec<&'a Value> {
    let mut out = Vec::new();
    let mut pending = vec![(schema, 0)];
    while let Some((node, hops)) = pending.pop() {
        let Some(object) = node.as_object() else {
            continue;
        };
        if let Some(target) = object.get("$ref").and_then(Value::as_str) {
            if hops < MAX_REF_HOPS {
                if let Some(found) = resolve(root, target) {
                    pending.push((found, hops + 1));
                }
            }
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            for alternative in object
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                pending.push((alternative, hops));
            }
        }
        out.push(node);
    }
    out
}

/// A local reference (`#/$defs/Name`) in `root`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    root.pointer(reference.strip_prefix('#')?)
}

/// "unknown field `mesage`; did you mean `message`?", or the fields there are
/// when none is close.
fn refusal(key: &str, at: &str, known: &[&str]) -> String {
    let place = if at.is_empty() {
        String::new()
    } else {
        format!(" in `{at}`")
    };
    let key_shown: String = key.chars().take(64).collect();
    if known.is_empty() {
        return format!("unknown field `{key_shown}`{place}: this request takes no fields");
    }
    match suggest::closest(key, known.iter().copied()).first() {
        Some(near) => format!("unknown field `{key_shown}`{place}; did you mean `{near}`?"),
        None => {
            let list: Vec<String> = known.iter().map(|name| format!("`{name}`")).collect();
            format!(
                "unknown field `{key_shown}`{place}; the fields are {}",
                list.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "message": {"type": ["string", "null"]},
                "edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}},
                "one": {"anyOf": [{"$ref": "#/$defs/Edit"}, {"type": "null"}]},
                "map": {"type": "object", "additionalProperties": {"type": "string"}},
                "mode": {"type": "string", "enum": ["a", "b"]}
            },
            "$defs": {
                "Edit": {
                    "type": "object",
                    "properties": {"old": {"type": "string"}, "new": {"type": "string"}}
                }
            }
        })
    }

    #[test]
    fn known_fields_pass_at_every_depth() {
        let request = json!({"path": "a.md", "message": null, "edits": [{"old": "x", "new": "y"}],
            "one": {"old": "x"}, "map": {"anything": "goes"}, "mode": "a"});
        assert_eq!(unknown(&schema(), &request), None);
        // Not the schema's shape at all: the row's parsing says so, not this.
        assert_eq!(unknown(&schema(), &json!("text")), None);
        assert_eq!(unknown(&schema(), &json!({"edits": "no"})), None);
    }

    #[test]
    fn an_unknown_field_is_named_with_the_closest_known_one() {
        assert_eq!(
            unknown(&schema(), &json!({"path": "a.md", "mesage": "typo"})).as_deref(),
            Some("unknown field `mesage`; did you mean `message`?")
        );
        assert_eq!(
            unknown(
                &schema(),
                &json!({"edits": [{"old": "x", "new": "y"}, {"old": "x", "nwe": "y"}]})
            )
            .as_deref(),
            Some("unknown field `nwe` in `edits[1]`; did you mean `new`?")
        );
        assert_eq!(
            unknown(&schema(), &json!({"one": {"olde": "x"}})).as_deref(),
            Some("unknown field `olde` in `one`; did you mean `old`?")
        );
        let far = unknown(&schema(), &json!({"zzzzzzzz": 1})).unwrap();
        assert!(
            far.starts_with("unknown field `zzzzzzzz`; the fields are `"),
            "{far}"
        );
        assert!(far.contains("`message`"), "{far}");
    }

    #[test]
    fn a_request_without_fields_refuses_any() {
        let empty = strict(json!({"type": "object"}));
        assert_eq!(empty["additionalProperties"], json!(false));
        assert_eq!(unknown(&empty, &json!({})), None);
        assert_eq!(
            unknown(&empty, &json!({"path": "a.md"})).as_deref(),
            Some("unknown field `path`: this request takes no fields")
        );
    }

    #[test]
    fn strict_closes_every_object_schema_that_names_its_properties() {
        let closed = strict(schema());
        assert_eq!(closed["additionalProperties"], json!(false));
        assert_eq!(
            closed["$defs"]["Edit"]["additionalProperties"],
            json!(false)
        );
        // A map keeps its own rule.
        assert_eq!(
            closed["properties"]["map"]["additionalProperties"],
            json!({"type": "string"})
        );
    }
}
