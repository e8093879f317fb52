//! The OpenAPI 3.1 document, generated: every row of the operation table at
//! its route, with its request (query parameters or JSON body) and answer
//! schemas taken from the row's types, beside the routes of mirai's own and
//! the shared parts written once in `openapi-base.yaml`. `mirai openapi`
//! prints it; `spec/openapi.yaml` is its committed output, and a spec fails
//! when the two differ, so the document cannot drift from the code.

use serde_json::{json, Map, Value};
use serde_norway::{Mapping, Value as Yaml};

use crate::error::ErrorCode;
use crate::ops::{Class, HttpAnswer, HttpInput, OpEntry, Proposed, Verb, TABLE};

/// The hand-written part: `info`, the routes that are not rows, the security
/// scheme, the error response and the schemas those routes use.
const BASE: &str = include_str!("openapi-base.yaml");

/// Where a schema's own definitions go, and where references point.
const COMPONENTS: &str = "#/components/schemas/";

/// The whole document as YAML, as `spec/openapi.yaml` holds it.
#[expect(
    clippy::expect_used,
    reason = "a YAML value of string keys always serializes"
)]
pub fn yaml() -> String {
    serde_norway::to_string(&document()).expect("a YAML value always serializes")
}

/// The whole document.
#[expect(
    clippy::expect_used,
    reason = "the base is compiled in and checked by the OpenAPI spec"
)]
pub fn document() -> Yaml {
    let mut doc: Yaml = serde_norway::from_str(BASE).expect("openapi-base.yaml parses");
    // The base's own schemas first, so a generated one of the same name is caught.
    let mut schemas: Map<String, Value> = doc
        .get("components")
        .and_then(|components| components.get("schemas"))
        .map(|base| serde_json::to_value(base).expect("YAML converts to JSON"))
        .and_then(|base| base.as_object().cloned())
        .unwrap_or_default();
    schemas.insert("Error".into(), error_schema());
    let proposed = hoist(schemars::schema_for!(Proposed).to_value(), &mut schemas);
    named(&proposed, &mut schemas);
    let mut rows = Mapping::new();
    for op in TABLE {
        let operation = operation(op, &mut schemas);
        let item = rows
            .entry(Yaml::from(op.http.path))
            .or_insert_with(|| Yaml::Mapping(Mapping::new()));
        if let Yaml::Mapping(item) = item {
            item.insert(Yaml::from(verb(op.http.verb)), operation);
        }
    }
    let base_paths = match doc.get_mut("paths") {
        Some(Yaml::Mapping(paths)) => std::mem::take(paths),
        _ => Mapping::new(),
    };
    // /health and /config first, then every row in table order, then the rest.
    let mut paths = Mapping::new();
    let (first, rest): (Vec<_>, Vec<_>) = base_paths
        .into_iter()
        .partition(|(path, _)| matches!(path.as_str(), Some("/health" | "/config")));
    paths.extend(first);
    paths.extend(rows);
    paths.extend(rest);
    doc["paths"] = Yaml::Mapping(paths);
    if let Some(Yaml::Mapping(base_schemas)) = doc
        .get_mut("components")
        .and_then(|components| components.get_mut("schemas"))
    {
        for (name, schema) in schemas {
            if !base_schemas.contains_key(name.as_str()) {
                base_schemas.insert(Yaml::from(name), to_yaml(&schema));
            }
        }
    }
    doc
}

fn verb(verb: Verb) -> &'static str {
    match verb {
        Verb::Get => "get",
        Verb::Post => "post",
        Verb::Delete => "delete",
    }
}

/// One row as an OpenAPI operation.
fn operation(op: &OpEntry, schemas: &mut Map<String, Value>) -> Yaml {
    let request = hoist((op.request_schema)().to_value(), schemas);
    // The committed answer; review mode's proposal is the 202 below.
    let response = hoist((op.committed_schema)().to_value(), schemas);
    let mut operation = json!({
        "operationId": op.name,
        "summary": op.summary,
        "x-mirai-class": match op.class {
            Class::Read => "read",
            Class::Write => "write",
            Class::Review => "review",
            Class::Sync => "sync",
        },
        "x-mirai-example": op.example,
    });
    match op.http.input {
        HttpInput::Nothing => {}
        HttpInput::Query(names) => {
            let parameters: Vec<Value> = names
                .iter()
                .map(|name| query_parameter(name, &request))
                .collect();
            operation["parameters"] = Value::Array(parameters);
        }
        HttpInput::Body => {
            operation["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": named(&request, schemas)}},
            });
        }
        HttpInput::BodyOrFile(names) => {
            // With a raw body the fields come from the query string instead.
            let parameters: Vec<Value> = names
                .iter()
                .map(|name| {
                    let mut parameter = query_parameter(name, &request);
                    parameter["required"] = json!(false);
                    parameter["x-mirai-raw-body-only"] = json!(true);
                    parameter
                })
                .collect();
            operation["parameters"] = Value::Array(parameters);
            operation["requestBody"] = json!({
                "required": true,
                "description": "JSON; or the file's raw bytes with their media type as the \
                    Content-Type (up to MIRAI_MAX_FILE_BYTES, refused from Content-Length before \
                    it is read) and the other fields in the query string (path required).",
                "content": {
                    "application/json": {"schema": named(&request, schemas)},
                    "*/*": {"schema": {"type": "string", "format": "binary"}},
                },
            });
        }
    }
    operation["responses"] = json!({
        "200": {
            "description": "The answer.",
            "content": {"application/json": {"schema": named(&response, schemas)}},
        },
        "default": {"$ref": "#/components/responses/Error"},
    });
    if op.http.answer == HttpAnswer::File {
        // HTTP answers the raw bytes; the JSON answer is what the other adapters get.
        operation["x-mirai-json-answer"] = named(&response, schemas);
        operation["responses"]["200"] = file_answer();
        operation["responses"]["304"] =
            json!({"description": "If-None-Match named the file's ETag: unchanged."});
    }
    if op.class == Class::Write && op.reviewed {
        operation["x-mirai-reviewed"] = json!(true);
        operation["responses"]["202"] = json!({"$ref": "#/components/responses/Proposed"});
    }
    to_yaml(&operation)
}

/// A file's raw answer: its bytes, with the headers that keep it from running
/// as a page of mirai's origin.
fn file_answer() -> Value {
    let header =
        |description: &str| json!({"description": description, "schema": {"type": "string"}});
    json!({
        "description": "The file's bytes, with its media type from the extension's allow-list \
            (png, jpg/jpeg, gif, webp, svg, pdf; application/octet-stream otherwise).",
        "headers": {
            "ETag": header("The file's git blob id, quoted."),
            "Cache-Control": header("private"),
            "X-Content-Type-Options": header("nosniff"),
            "Content-Security-Policy": header("sandbox; default-src 'none'"),
            "Content-Disposition": header("inline for raster images (png, jpeg, gif, webp); attachment for everything else, SVG and PDF included."),
        },
        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
    })
}

/// A query parameter from the request schema's property of that name.
fn query_parameter(name: &str, request: &Value) -> Value {
    let mut schema = request["properties"][name].clone();
    let description = schema
        .as_object_mut()
        .and_then(|schema| schema.remove("description"));
    let required = request["required"]
        .as_array()
        .is_some_and(|required| required.iter().any(|n| n == name));
    let mut parameter = json!({
        "name": name,
        "in": "query",
        "required": required,
        "schema": if schema.is_null() { json!({"type": "string"}) } else { schema },
    });
    if let Some(description) = description {
        parameter["description"] = description;
    }
    parameter
}

/// Moves a generated schema's `$defs` into the components and points its
/// references there. Definitions are named after their Rust types; two
/// different types of one name are a mistake the tests catch (rename one with
/// `#[schemars(rename = "...")]`).
fn hoist(mut schema: Value, schemas: &mut Map<String, Value>) -> Value {
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        if let Some(Value::Object(defs)) = object.remove("$defs") {
            for (name, mut def) in defs {
                rewrite_refs(&mut def);
                place(&name, def, schemas);
            }
        }
    }
    rewrite_refs(&mut schema);
    schema
}

/// Puts `schema` in the components under `name`.
fn place(name: &str, schema: Value, schemas: &mut Map<String, Value>) {
    match schemas.get(name) {
        Some(existing) => assert!(
            *existing == schema,
            "two different schemas are both named {name}: rename one with #[schemars(rename = \"...\")]"
        ),
        None => {
            schemas.insert(name.to_string(), schema);
        }
    }
}

/// A root schema placed in the components under its title, as a reference;
/// an untitled one stays inline.
fn named(schema: &Value, schemas: &mut Map<String, Value>) -> Value {
    let mut schema = schema.clone();
    let title = schema
        .as_object_mut()
        .and_then(|object| object.remove("title"))
        .and_then(|title| title.as_str().map(str::to_string));
    match title {
        Some(title) => {
            place(&title, schema, schemas);
            json!({"$ref": format!("{COMPONENTS}{title}")})
        }
        None => schema,
    }
}

/// Points `#/$defs/X` references at `#/components/schemas/X`.
fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(object) => {
            for (key, inner) in object.iter_mut() {
                match (key.as_str(), inner) {
                    ("$ref", Value::String(target)) => {
                        if let Some(name) = target.strip_prefix("#/$defs/") {
                            *target = format!("{COMPONENTS}{name}");
                        }
                    }
                    (_, inner) => rewrite_refs(inner),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// The error body every route answers a refusal with, its codes from [`ErrorCode::ALL`].
fn error_schema() -> Value {
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
    json!({
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {"type": "string", "enum": codes},
                    "message": {
                        "type": "string",
                        "description": "What went wrong and what to do next.",
                    },
                },
            },
        },
    })
}

#[expect(clippy::expect_used, reason = "every JSON value has a YAML form")]
fn to_yaml(value: &Value) -> Yaml {
    serde_norway::to_value(value).expect("JSON converts to YAML")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_points_at_a_component() {
        let doc = serde_json::to_value(document()).unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap().clone();
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        assert!(!refs.is_empty());
        for target in refs {
            if let Some(name) = target.strip_prefix(COMPONENTS) {
                assert!(schemas.contains_key(name), "{target} is not a component");
            } else {
                assert!(
                    [
                        "#/components/responses/Error",
                        "#/components/responses/Proposed"
                    ]
                    .contains(&target.as_str()),
                    "{target}"
                );
            }
        }
    }

    #[test]
    fn every_row_is_documented_at_its_route_with_its_name() {
        let doc = serde_json::to_value(document()).unwrap();
        for op in TABLE {
            let operation = &doc["paths"][op.http.path][verb(op.http.verb)];
            assert_eq!(operation["operationId"], op.name, "{}", op.http.path);
            assert!(operation["responses"]["200"].is_object());
        }
        assert_eq!(doc["openapi"], "3.1.0");
    }

    fn collect_refs(value: &Value, into: &mut Vec<String>) {
        match value {
            Value::Object(object) => {
                for (key, inner) in object {
                    match (key.as_str(), inner) {
                        ("$ref", Value::String(target)) => into.push(target.clone()),
                        _ => collect_refs(inner, into),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| collect_refs(item, into)),
            _ => {}
        }
    }
}
