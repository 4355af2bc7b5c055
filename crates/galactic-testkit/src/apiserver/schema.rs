//! A CRD's structural schema applied as the API server applies it to a request body: unknown
//! fields pruned, `null`s of non-nullable fields dropped, defaults filled in, then every value
//! checked (type, required, enum, bounds, lengths, item counts, pattern, format, list types).
//! The messages are the API server's (`field.Error` bodies over go-openapi's texts).

use super::failure::FieldError;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Prunes, drops non-nullable `null`s and defaults `object` in place (root schema `schema`).
/// `apiVersion`, `kind` and `metadata` are the server's and stay as sent.
pub fn prune_and_default(schema: &Value, object: &mut Value) {
    if let Some(root) = object.as_object_mut() {
        normalise_object_fields(schema, root, true);
    }
}

fn preserves_unknown(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"] == true
        || schema["x-kubernetes-embedded-resource"] == true
}

fn normalise(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(object) => normalise_object_fields(schema, object, false),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                items.iter_mut().for_each(|i| normalise(item_schema, i));
            }
        }
        _ => {}
    }
}

/// The fields of one object: unknown ones go, nulls of non-nullable ones go, defaults come in,
/// and the rest is normalised below.
fn normalise_object_fields(schema: &Value, object: &mut Map<String, Value>, root: bool) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let server_fields = |k: &str| root && matches!(k, "apiVersion" | "kind" | "metadata");
    if !preserves_unknown(schema) {
        match (properties, additional) {
            (Some(props), None) => object.retain(|k, _| props.contains_key(k) || server_fields(k)),
            (None, None) if schema["type"] == "object" => {
                // `type: object` without properties (like `metadata`) keeps what it is given.
            }
            _ => {}
        }
    }
    for (key, value) in object.iter_mut() {
        if root && server_fields(key) {
            continue;
        }
        let sub = properties.and_then(|p| p.get(key)).or(additional);
        if let Some(sub) = sub {
            normalise(sub, value);
        }
    }
    let Some(props) = properties else {
        return;
    };
    for (key, sub) in props {
        if object.get(key).is_some_and(Value::is_null) && sub["nullable"] != true {
            object.remove(key);
        }
        if let (None, Some(default)) = (object.get(key), sub.get("default")) {
            let mut default = default.clone();
            normalise(sub, &mut default);
            object.insert(key.clone(), default);
        }
    }
}

/// Every schema violation of `value` (the root object); `apiVersion`, `kind` and `metadata`
/// are checked elsewhere.
pub fn validate(schema: &Value, value: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    // The root's own required fields (`spec` of a kind whose Go type requires it): the server
    // answers `spec: Required value`.
    for required in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if value.get(required).is_none() {
            errors.push(FieldError::required(required));
        }
    }
    if let (Some(props), Some(object)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for (key, sub) in props {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(v) = object.get(key) {
                walk(sub, v, key, &mut errors);
            }
        }
    }
    errors
}

/// The JSON type name of `value`, as go-openapi names it.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(schema: &Value, value: &Value) -> bool {
    let actual = type_name(value);
    if schema["x-kubernetes-int-or-string"] == true {
        return matches!(actual, "integer" | "string");
    }
    match schema.get("type").and_then(Value::as_str) {
        None => true,
        Some("number") => matches!(actual, "integer" | "number"),
        Some(want) => want == actual || (actual == "null" && schema["nullable"] == true),
    }
}

fn walk(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if value.is_null() && schema["nullable"] == true {
        return;
    }
    if !type_matches(schema, value) {
        let want = schema["type"].as_str().unwrap_or_default();
        errors.push(FieldError::type_invalid(
            path,
            type_name(value),
            format!(
                "{path} in body must be of type {want}: \"{}\"",
                type_name(value)
            ),
        ));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            errors.push(FieldError::not_supported(path, value, allowed));
        }
    }
    match value {
        Value::String(s) => string(schema, s, path, errors),
        Value::Number(_) => number(schema, value, path, errors),
        Value::Array(items) => array(schema, items, path, errors),
        Value::Object(object) => object_fields(schema, object, path, errors),
        _ => {}
    }
    for part in schema["allOf"].as_array().into_iter().flatten() {
        walk(part, value, path, errors);
    }
    combinators(schema, value, path, errors);
}

/// `anyOf`, `oneOf` and `not` (structural schemas use them for value constraints only).
fn combinators(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let passes = |s: &Value| {
        let mut found = Vec::new();
        walk(s, value, path, &mut found);
        found.is_empty()
    };
    if let Some(any) = schema["anyOf"].as_array() {
        if !any.iter().any(passes) {
            errors.push(FieldError::invalid(
                path,
                value,
                format!("{path} in body must validate at least one schema (anyOf)"),
            ));
        }
    }
    if let Some(one) = schema["oneOf"].as_array() {
        if one.iter().filter(|s| passes(s)).count() != 1 {
            errors.push(FieldError::invalid(
                path,
                value,
                format!("{path} in body must validate one and only one schema (oneOf)"),
            ));
        }
    }
    if let Some(not) = schema.get("not") {
        if passes(not) {
            errors.push(FieldError::invalid(
                path,
                value,
                format!("{path} in body should not validate the schema (not)"),
            ));
        }
    }
}

fn string(schema: &Value, s: &str, path: &str, errors: &mut Vec<FieldError>) {
    let chars = s.chars().count() as u64;
    let value = Value::String(s.to_owned());
    if let Some(max) = schema["maxLength"].as_u64().filter(|max| chars > *max) {
        errors.push(FieldError::too_long(path, max));
    }
    if let Some(min) = schema["minLength"].as_u64().filter(|min| chars < *min) {
        errors.push(FieldError::invalid(
            path,
            &value,
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        if !pattern_matches(pattern, s) {
            errors.push(FieldError::invalid(
                path,
                &value,
                format!("{path} in body should match '{pattern}'"),
            ));
        }
    }
    if let Some(format) = schema["format"].as_str() {
        if !format_matches(format, s) {
            errors.push(FieldError::invalid(
                path,
                &value,
                format!("{path} in body must be of type {format}: \"{s}\""),
            ));
        }
    }
}

/// Whether `s` matches `pattern` (compiled once per pattern; a pattern that does not compile
/// matches nothing, as a CRD with it would not have been accepted).
fn pattern_matches(pattern: &str, s: &str) -> bool {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<regex::Regex>>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    cache
        .entry(pattern.to_owned())
        .or_insert_with(|| regex::Regex::new(pattern).ok())
        .as_ref()
        .is_some_and(|re| re.is_match(s))
}

/// The string formats the API server checks that CRDs here use; others are not checked (as the
/// server ignores unknown formats).
fn format_matches(format: &str, s: &str) -> bool {
    match format {
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.parse::<ipnetwork::IpNetwork>().is_ok() && s.contains('/'),
        "date-time" => humantime::parse_rfc3339(s).is_ok(),
        "uuid" => {
            s.len() == 36
                && s.char_indices().all(|(i, c)| {
                    if [8, 13, 18, 23].contains(&i) {
                        c == '-'
                    } else {
                        c.is_ascii_hexdigit()
                    }
                })
        }
        _ => true,
    }
}

fn number(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let Some(n) = value.as_f64() else {
        return;
    };
    let bound = |key: &str| {
        schema[key]
            .as_f64()
            .map(|b| (b, display_bound(&schema[key])))
    };
    if let Some((max, text)) = bound("maximum") {
        let exclusive = schema["exclusiveMaximum"] == true;
        if n > max || (exclusive && n == max) {
            let relation = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            errors.push(FieldError::invalid(
                path,
                value,
                format!("{path} in body should be {relation} {text}"),
            ));
        }
    }
    if let Some((min, text)) = bound("minimum") {
        let exclusive = schema["exclusiveMinimum"] == true;
        if n < min || (exclusive && n == min) {
            let relation = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errors.push(FieldError::invalid(
                path,
                value,
                format!("{path} in body should be {relation} {text}"),
            ));
        }
    }
    if let Some((step, text)) = bound("multipleOf").filter(|(s, _)| *s > 0.0) {
        if (n / step).fract() != 0.0 {
            errors.push(FieldError::invalid(
                path,
                value,
                format!("{path} in body should be a multiple of {text}"),
            ));
        }
    }
}

fn display_bound(bound: &Value) -> String {
    match bound.as_f64() {
        Some(f) if f.fract() == 0.0 => format!("{}", f as i64),
        _ => bound.to_string(),
    }
}

fn array(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    let count = items.len() as u64;
    if let Some(max) = schema["maxItems"].as_u64().filter(|max| count > *max) {
        errors.push(FieldError::too_many(path, count, max));
    }
    if let Some(min) = schema["minItems"].as_u64().filter(|min| count < *min) {
        errors.push(FieldError::invalid(
            path,
            &Value::from(count),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            walk(item_schema, item, &format!("{path}[{i}]"), errors);
        }
    }
    list_type(schema, items, path, errors);
}

/// `x-kubernetes-list-type: set` (no two equal items) and `map` (no two items with the same
/// key fields).
fn list_type(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let identity = |item: &Value| -> Value {
        match schema["x-kubernetes-list-type"].as_str() {
            Some("map") => Value::Object(
                keys.iter()
                    .map(|k| ((*k).to_owned(), item[*k].clone()))
                    .collect(),
            ),
            _ => item.clone(),
        }
    };
    if !matches!(
        schema["x-kubernetes-list-type"].as_str(),
        Some("set" | "map")
    ) {
        return;
    }
    let mut seen: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let id = identity(item);
        if seen.contains(&id) {
            errors.push(FieldError::duplicate(&format!("{path}[{i}]"), &id));
        } else {
            seen.push(id);
        }
    }
}

fn object_fields(
    schema: &Value,
    object: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    for required in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !object.contains_key(required) {
            errors.push(FieldError::required(&format!("{path}.{required}")));
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (key, value) in object {
        match (properties.and_then(|p| p.get(key)), additional) {
            (Some(sub), _) => walk(sub, value, &format!("{path}.{key}"), errors),
            (None, Some(sub)) => walk(sub, value, &format!("{path}[{key}]"), errors),
            (None, None) => {}
        }
    }
    let count = object.len() as u64;
    if let Some(max) = schema["maxProperties"].as_u64().filter(|max| count > *max) {
        errors.push(FieldError::too_many(path, count, max));
    }
    if let Some(min) = schema["minProperties"].as_u64().filter(|min| count < *min) {
        errors.push(FieldError::invalid(
            path,
            &Value::from(count),
            format!("{path} in body should have at least {min} properties"),
        ));
    }
}

/// The schema of the field at `path` (`spec.a[0].b`, map values as `[key]`), if the schema has
/// one there.
pub fn at<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut schema = root;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            schema = schema
                .get("items")
                .or_else(|| schema.get("additionalProperties"))?;
            rest = &after[end + 1..];
        } else {
            let name = rest.trim_start_matches('.');
            let end = name.find(['.', '[']).unwrap_or(name.len());
            schema = schema.get("properties")?.get(&name[..end])?;
            rest = &name[end..];
        }
    }
    Some(schema)
}
