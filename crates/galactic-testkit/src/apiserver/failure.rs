//! Failed requests as the API server answers them: a `Status` body, and for 422 `Invalid` one
//! cause per field error (`details.causes[]` with `reason`, `message`, `field`), worded like
//! apimachinery's `field.Error`.

use serde_json::{json, Value};

/// A failed request, answered as a `Status`.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// HTTP status.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, …).
    pub reason: &'static str,
    /// Message.
    pub message: String,
    /// `details`, when there are any (422: the object and its causes).
    pub details: Option<Value>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl Failure {
    /// A failure.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 422 `Invalid` for `errors` of the object `name` of `kind` in `group`.
    pub fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let listed: Vec<String> = errors.iter().map(FieldError::to_string).collect();
        let aggregate = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.kind.cause(), "message": e.body(), "field": e.field}))
            .collect();
        Self {
            code: 422,
            reason: "Invalid",
            message: format!("{qualified} \"{name}\" is invalid: {aggregate}"),
            details: Some(json!({"name": name, "group": group, "kind": kind, "causes": causes})),
        }
    }

    /// 400 `BadRequest` for a body with fields the schema of `kind` `version` does not have,
    /// under strict field validation (`kubectl`'s default): the server refuses instead of
    /// pruning, naming each field (`spec.roles`).
    pub fn unknown_fields(kind: &str, version: &str, fields: &[String]) -> Self {
        let listed: Vec<String> = fields
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        Self::new(
            400,
            "BadRequest",
            format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                listed.join(", ")
            ),
        )
    }

    /// The `Status` body.
    pub fn body(&self) -> Value {
        let mut body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(details) = &self.details {
            body["details"] = details.clone();
        }
        body
    }
}

/// The kind of a field error (`field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A required field is missing.
    Required,
    /// A value is not acceptable.
    Invalid,
    /// A value has the wrong JSON type.
    TypeInvalid,
    /// A value is not in the enum.
    NotSupported,
    /// A set or map list repeats an item.
    Duplicate,
    /// A string is too long.
    TooLong,
    /// A list or map has too many entries.
    TooMany,
    /// A value may not be set.
    Forbidden,
}

impl ErrorKind {
    /// The `details.causes[].reason`.
    pub fn cause(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Duplicate => "FieldValueDuplicate",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Forbidden => "FieldValueForbidden",
        }
    }

    /// The kind for a `details.causes[].reason` (a CEL rule's `reason`), `Invalid` when unknown.
    pub fn from_cause(cause: &str) -> Self {
        match cause {
            "FieldValueRequired" => Self::Required,
            "FieldValueDuplicate" => Self::Duplicate,
            "FieldValueForbidden" => Self::Forbidden,
            _ => Self::Invalid,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Duplicate => "Duplicate value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Forbidden => "Forbidden",
        }
    }
}

/// One field's problem.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field path (`spec.importRouteTargets[0]`).
    pub field: String,
    /// What kind of problem.
    pub kind: ErrorKind,
    /// The offending value as the server prints it, if it prints one.
    pub bad: Option<Value>,
    /// The explanation after the value.
    pub detail: String,
}

impl FieldError {
    fn new(field: &str, kind: ErrorKind, bad: Option<Value>, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            kind,
            bad,
            detail: detail.into(),
        }
    }

    /// A missing required field.
    pub fn required(field: &str) -> Self {
        Self::new(field, ErrorKind::Required, None, "")
    }

    /// An unacceptable `value`.
    pub fn invalid(field: &str, value: &Value, detail: impl Into<String>) -> Self {
        Self::new(field, ErrorKind::Invalid, Some(value.clone()), detail)
    }

    /// A value of JSON type `actual`.
    pub fn type_invalid(field: &str, actual: &str, detail: impl Into<String>) -> Self {
        Self::new(
            field,
            ErrorKind::TypeInvalid,
            Some(Value::from(actual)),
            detail,
        )
    }

    /// A value outside `allowed`.
    pub fn not_supported(field: &str, value: &Value, allowed: &[Value]) -> Self {
        let listed: Vec<String> = allowed.iter().map(|v| v.to_string()).collect();
        Self::new(
            field,
            ErrorKind::NotSupported,
            Some(value.clone()),
            format!("supported values: {}", listed.join(", ")),
        )
    }

    /// A repeated list item.
    pub fn duplicate(field: &str, value: &Value) -> Self {
        Self::new(field, ErrorKind::Duplicate, Some(value.clone()), "")
    }

    /// A string longer than `max`.
    pub fn too_long(field: &str, max: u64) -> Self {
        Self::new(
            field,
            ErrorKind::TooLong,
            None,
            format!("may not be more than {max} bytes"),
        )
    }

    /// `actual` entries where at most `max` are allowed.
    pub fn too_many(field: &str, actual: u64, max: u64) -> Self {
        Self::new(
            field,
            ErrorKind::TooMany,
            Some(Value::from(actual)),
            format!("must have at most {max} items"),
        )
    }

    /// A CEL rule's failure at `field` of schema type `type_name` (the server prints the type,
    /// not the value).
    pub fn rule(field: &str, kind: ErrorKind, type_name: &str, message: &str) -> Self {
        let bad = (kind != ErrorKind::Required && kind != ErrorKind::Forbidden)
            .then(|| Value::from(type_name));
        Self::new(field, kind, bad, message)
    }

    /// The cause message: the error without its field.
    pub fn body(&self) -> String {
        let mut body = match (&self.bad, self.kind) {
            (Some(bad), ErrorKind::Invalid | ErrorKind::TypeInvalid | ErrorKind::NotSupported)
            | (Some(bad), ErrorKind::Duplicate | ErrorKind::TooMany) => {
                format!("{}: {bad}", self.kind.text())
            }
            _ => self.kind.text().to_owned(),
        };
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}
