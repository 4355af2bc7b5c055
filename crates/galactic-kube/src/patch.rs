//! JSON merge patch (RFC 7386), as the API server applies `Patch::Merge`: the local publisher
//! applies its documents the same way, and the test API server uses it to answer merge patches.

use serde_json::{Map, Value};

/// Merges `patch` into `target`: objects merge key by key, `null` removes a key, anything else
/// replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in fields {
            if value.is_null() {
                map.remove(key);
            } else {
                merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}}));
        let mut doc = json!({"a": [1]});
        merge_patch(&mut doc, &json!({"a": {"b": 1}}));
        assert_eq!(doc, json!({"a": {"b": 1}}));
        let mut doc = json!("x");
        merge_patch(&mut doc, &json!({"k": 1}));
        assert_eq!(doc, json!({"k": 1}));
    }
}
