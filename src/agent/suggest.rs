//! What the agent's observations suggest after a small model's mistake, in
//! the model's own words where they can be: a failed write's own call,
//! mended (never a write's example from the table, whose text a small model
//! writes into the note), and the plain reading of a few JavaScript errors.

use serde_json::{Map, Value};

use crate::ops::adapters::heading_level;
use crate::ops::{Class, OpEntry};
use crate::sandbox::CallRecord;

/// For a failed call of a write row: the observation's sentence handing
/// back its own call, mended ([`own_call`]); `None` for a read, or when
/// nothing can be mended.
pub fn mended(call: &CallRecord) -> Option<String> {
    let entry = crate::ops::find(&call.op).filter(|entry| entry.class == Class::Write)?;
    let request = serde_json::from_str::<Value>(&call.request).ok()?;
    let own = own_call(entry, &request)?;
    Some(format!(
        " Your call, mended (your own path and text): {own}"
    ))
}

/// The call of write row `entry` the model's failed `request` meant, when
/// mirai can mend it: the fields the row does not take dropped, a missing
/// `content` made of the text the model sent (its `edits`' `new`, or
/// `text`), and an edit of nothing but new text (every `old` empty) made the
/// `notes.append` it is, and a heading renamed to a plain line given its
/// marks back. `None` when nothing was mended or a field the row
/// requires is still missing.
pub fn own_call(entry: &OpEntry, request: &Value) -> Option<String> {
    let sent = request.as_object()?;
    let path = sent.get("path").and_then(Value::as_str);
    let edits = sent.get("edits").and_then(Value::as_array);
    let new_text = edits.and_then(|edits| {
        let news: Vec<&str> = edits
            .iter()
            .map(|e| e.get("new").and_then(Value::as_str))
            .collect::<Option<_>>()?;
        (!news.is_empty()).then(|| news.join("\n"))
    });
    if entry.name == "notes.edit" {
        if let (Some(path), Some(kept)) = (path, edits.and_then(|e| heading_marks_kept(e))) {
            let mut call = sent.clone();
            call.insert("path".into(), Value::from(path));
            call.insert("edits".into(), Value::Array(kept));
            call.remove("allow_large_delete");
            return Some(format!("mirai.notes.edit({})", Value::Object(call)));
        }
        let all_new = edits.is_some_and(|edits| {
            edits
                .iter()
                .all(|e| e.get("old").and_then(Value::as_str) == Some(""))
        });
        let (Some(path), Some(text), true) = (path, &new_text, all_new) else {
            return None;
        };
        let mut call = Map::new();
        call.insert("path".into(), Value::from(path));
        call.insert("text".into(), Value::from(text.as_str()));
        return Some(format!("mirai.notes.append({})", Value::Object(call)));
    }
    let schema = (entry.request_schema)().to_value();
    let takes = schema["properties"].as_object()?;
    let mut call: Map<String, Value> = sent
        .iter()
        .filter(|(field, _)| takes.contains_key(*field))
        .map(|(field, value)| (field.clone(), value.clone()))
        .collect();
    if takes.contains_key("content") && !call.contains_key("content") {
        let meant = sent
            .get("text")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or(new_text);
        if let Some(meant) = meant {
            call.insert("content".into(), Value::String(meant));
        }
    }
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    let complete = required
        .iter()
        .filter_map(Value::as_str)
        .all(|field| call.contains_key(field));
    let mended = call.len() != sent.len() || call.iter().any(|(k, v)| sent.get(k) != Some(v));
    (complete && mended).then(|| format!("mirai.{}({})", entry.name, Value::Object(call)))
}

/// The edits with each heading line renamed to a plain line given the
/// heading's marks back (`{old: "## Plans", new: "Spring plans"}` becomes
/// `new: "## Spring plans"`: the structure guard refuses the first); `None`
/// when no edit is one.
fn heading_marks_kept(edits: &[Value]) -> Option<Vec<Value>> {
    let mut mended = false;
    let kept = edits
        .iter()
        .map(|edit| {
            let old = edit.get("old").and_then(Value::as_str).unwrap_or_default();
            let new = edit.get("new").and_then(Value::as_str).unwrap_or_default();
            let one_line = |text: &str| !text.trim().is_empty() && !text.trim().contains('\n');
            match heading_level(old.trim()) {
                Some(n)
                    if one_line(old) && one_line(new) && heading_level(new.trim()).is_none() =>
                {
                    mended = true;
                    let mut edit = edit.clone();
                    edit["new"] = Value::from(format!("{} {}", "#".repeat(n.into()), new.trim()));
                    edit
                }
                _ => edit.clone(),
            }
        })
        .collect();
    mended.then_some(kept)
}

/// A JavaScript error small models make and misread, in plain words:
/// assigning to a `const`.
pub fn js_mistake(message: &str) -> Option<String> {
    // QuickJS: "TypeError: 'name' is read-only".
    let (_, rest) = message.split_once("TypeError: '")?;
    let (name, rest) = rest.split_once('\'')?;
    rest.trim_start().starts_with("is read-only").then(|| {
        format!(
            "`{name}` was declared with const, so it cannot be given a new value: declare it \
             with let (let {name} = ...), or keep the changed value under a new name."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(name: &str) -> &'static OpEntry {
        crate::ops::find(name).unwrap()
    }

    #[test]
    fn a_write_sent_with_another_rows_fields_becomes_the_call_it_meant() {
        let sent =
            json!({"path": "ideas/tea.md", "edits": [{"old": "", "new": "# Tea\nTry oolong."}]});
        assert_eq!(
            own_call(row("notes.write"), &sent).unwrap(),
            r##"mirai.notes.write({"content":"# Tea\nTry oolong.","path":"ideas/tea.md"})"##
        );
        // An edit of nothing but new text is an append.
        let sent = json!({"path": "log.md", "edits": [{"old": "", "new": "Fed the cat."}]});
        assert_eq!(
            own_call(row("notes.edit"), &sent).unwrap(),
            r#"mirai.notes.append({"path":"log.md","text":"Fed the cat."})"#
        );
    }

    #[test]
    fn a_heading_renamed_to_a_plain_line_gets_its_marks_back() {
        let sent = serde_json::json!({"path": "garden.md", "allow_large_delete": true,
            "edits": [{"old": "## Plans", "new": "Spring plans"}]});
        assert_eq!(
            own_call(row("notes.edit"), &sent).unwrap(),
            r###"mirai.notes.edit({"edits":[{"new":"## Spring plans","old":"## Plans"}],"path":"garden.md"})"###
        );
        let fine = serde_json::json!({"path": "garden.md", "edits": [{"old": "## Plans", "new": "## Spring plans"}]});
        assert_eq!(own_call(row("notes.edit"), &fine), None);
    }

    #[test]
    fn nothing_is_suggested_when_nothing_was_mended_or_a_field_is_missing() {
        // The same call again would fail the same way.
        let sent = json!({"path": "a.md", "content": "x"});
        assert_eq!(own_call(row("notes.write"), &sent), None);
        let sent = json!({"path": "a.md", "edits": [{"old": "teh", "new": "the"}]});
        assert_eq!(own_call(row("notes.edit"), &sent), None);
        // No text to make the content of.
        let sent = json!({"path": "a.md", "mode": "x"});
        assert_eq!(own_call(row("notes.write"), &sent), None);
    }

    #[test]
    fn assigning_to_a_const_is_told_in_plain_words() {
        let told = js_mistake("TypeError: 'journalContent' is read-only (line 3)").unwrap();
        assert!(told.contains("let journalContent = "), "{told}");
        assert_eq!(js_mistake("TypeError: x is not a function"), None);
    }
}
