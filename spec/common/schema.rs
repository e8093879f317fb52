//! Every answer a row gives the test client is checked here against the
//! answer schema the generated OpenAPI document declares for that row (its
//! 200 response), so a schema that lies fails whichever spec meets the lie.

use std::collections::HashMap;
use std::sync::LazyLock;

use jsonschema::Validator;
use serde_json::{json, Value};

/// (method, path) of each row's route -> the validator of its 200 answer.
static ANSWERS: LazyLock<HashMap<(String, String), Validator>> = LazyLock::new(|| {
    let doc = serde_json::to_value(mirai::http::openapi::document()).expect("document is JSON");
    let components = &doc["components"];
    let mut validators = HashMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let Some(schema) = operation
                .pointer("/responses/200/content/application~1json/schema")
                .filter(|_| operation["x-mirai-class"].is_string())
            else {
                continue;
            };
            // References point into the document: keep its components beside the schema.
            let mut root = schema.clone();
            root["components"] = components.clone();
            let validator = jsonschema::draft202012::new(&root)
                .unwrap_or_else(|e| panic!("{method} {path}: the answer schema compiles: {e}"));
            validators.insert((method.to_uppercase(), path.clone()), validator);
        }
    }
    validators
});

/// Panics, naming every mismatch, when `body` (a 200 answer to `method path`)
/// does not fit the answer schema of the row served there.
pub fn check_answer(method: &str, path: &str, body: &Value) {
    let Some(validator) = ANSWERS.get(&(method.to_string(), path.to_string())) else {
        return;
    };
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {path} answered what its OpenAPI answer schema does not allow:\n{}\nanswer: {}",
        errors.join("\n"),
        json!(body)
    );
}
