//! The scopes an access token may carry and the rights each grants: one
//! scope per right of the named callers.

use serde_json::Value;

use crate::callers::{Right, Rights};

/// Each scope and the right of the same name.
pub const SCOPES: [(&str, Right); 5] = [
    ("notes:read", Right::Read),
    ("notes:write", Right::Write),
    ("notes:propose", Right::Propose),
    ("proposals:review", Right::Review),
    ("repo:sync", Right::Sync),
];

/// The scope that grants `right`.
pub fn scope_of(right: Right) -> &'static str {
    SCOPES
        .iter()
        .find(|(_, granted)| *granted == right)
        .map(|(scope, _)| *scope)
        .unwrap_or("notes:read")
}

/// The rights the token's scopes grant: `scope` (a space-separated string,
/// RFC 9068) or `scp` (a list, as some providers send). Unknown scopes grant
/// nothing.
pub fn rights_of(claims: &Value) -> Rights {
    let mut names: Vec<&str> = Vec::new();
    if let Some(scope) = claims.get("scope").and_then(Value::as_str) {
        names.extend(scope.split_whitespace());
    }
    match claims.get("scp") {
        Some(Value::Array(list)) => names.extend(list.iter().filter_map(Value::as_str)),
        Some(Value::String(scp)) => names.extend(scp.split_whitespace()),
        _ => {}
    }
    let mut rights = Rights::none();
    for name in names {
        if let Some((_, right)) = SCOPES.iter().find(|(scope, _)| *scope == name) {
            rights.add(*right);
        }
    }
    rights
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_scope_grants_its_right_and_nothing_else() {
        let r = rights_of(&json!({"scope": "openid notes:read  proposals:review notes:writ"}));
        assert_eq!(r.names(), ["read", "review"]);
        let r = rights_of(&json!({"scp": ["notes:write", "repo:sync"]}));
        assert_eq!(r.names(), ["write", "sync"]);
        assert_eq!(rights_of(&json!({"scope": 7})), Rights::none());
    }
}
