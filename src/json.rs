//! Strict JSON for everything a caller sends: serde_json's parser, except that
//! an object naming the same key twice, at any depth, is refused. serde_json
//! itself keeps the last value, so two readers of one body could disagree on
//! what it says; mirai answers the endpoint's malformed-body code instead.
//!
//! The value is built through `serde_json::Deserializer`, so its nesting limit
//! (128 levels) still applies and no input can make the parser recurse without
//! bound.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses `bytes` as one JSON value; a repeated key in any object is an error
/// that names the key and where it is.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// [`from_slice`] for text.
pub fn from_str(text: &str) -> Result<Value, serde_json::Error> {
    from_slice(text.as_bytes())
}

/// Deserializes one value, refusing repeated keys in it.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(StrictValue)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // serde_json's own Value does the same for the (unreachable) non-finite case.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        StrictValue.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {key:?}: each key may appear once in an object"
                )));
            }
            let value = map.next_value_seed(StrictValue)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_what_serde_json_parses() {
        let text =
            r#"{"a": [1, -2, 3.5, 18446744073709551615, true, null, "x\u00e9"], "b": {"c": {}}}"#;
        assert_eq!(
            from_str(text).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn a_repeated_key_is_refused_at_any_depth_with_its_name() {
        for text in [
            r#"{"path": "a.md", "path": "b.md"}"#,
            r#"{"outer": {"k": 1, "k": 2}}"#,
            r#"[{"ok": 1}, {"k": 1, "j": 2, "k": 3}]"#,
        ] {
            let err = from_str(text).unwrap_err().to_string();
            assert!(err.contains("duplicate key"), "{text}: {err}");
            assert!(err.contains("line 1 column"), "{text}: {err}");
        }
        // The same key in sibling objects is not a repetition.
        assert_eq!(
            from_str(r#"[{"k": 1}, {"k": 2}]"#).unwrap(),
            json!([{"k": 1}, {"k": 2}])
        );
    }

    #[test]
    fn nesting_is_bounded_and_trailing_text_refused() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let err = from_str(&deep).unwrap_err().to_string();
        assert!(err.contains("recursion limit"), "{err}");
        assert!(from_str(r#"{"a": 1} x"#).is_err());
        assert!(from_str("").is_err());
    }
}
