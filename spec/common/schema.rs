//! Every answer a row gives the test client is checked here against the
//! answer schema the generated OpenAPI document declares for that row (its
//! 200 response, and review mode's 202 proposal), so a schema that lies fails
//! whichever spec meets the lie.

use std::collections::HashMap;
use std::sync::LazyLock;

use jsonschema::Validator;
use serde_json::{json, Value};

/// (method, path, status) of each row's answers -> the validator of that answer.
static ANSWERS: LazyLock<HashMap<(String, String, u16), Validator>> = LazyLock::new(|| {
    let doc = serde_json::to_value(mirai::http::openapi::document()).expect("document is JSON");
    let components = &doc["components"];
    let mut validators = HashMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            if !operation["x-mirai-class"].is_string() {
                continue;
            }
            let answers = [
                (
                    200,
                    operation.pointer("/responses/200/content/application~1json/schema"),
                ),
                (
                    202,
                    doc.pointer("/components/responses/Proposed/content/application~1json/schema")
                        .filter(|_| operation["responses"]["202"].is_object()),
                ),
            ];
            for (status, schema) in answers {
                let Some(schema) = schema else { continue };
                // References point into the document: keep its components beside the schema.
                let mut root = schema.clone();
                root["components"] = components.clone();
                let validator = jsonschema::draft202012::new(&root).unwrap_or_else(|e| {
                    panic!("{method} {path}: the {status} answer schema compiles: {e}")
                });
                validators.insert((method.to_uppercase(), path.clone(), status), validator);
            }
        }
    }
    validators
});

/// Panics, naming every mismatch, when `body` (a `status` answer to `method
/// path`) does not fit the answer schema of the row served there.
pub fn check_answer(method: &str, path: &str, status: u16, body: &Value) {
    let Some(validator) = ANSWERS.get(&(method.to_string(), path.to_string(), status)) else {
        return;
    };
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {path} answered {status} with what its OpenAPI answer schema does not allow:\n{}\nanswer: {}",
        errors.join("\n"),
        json!(body)
    );
}
