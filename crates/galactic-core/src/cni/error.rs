//! CNI error results and the well-known error codes (CNI spec §Error).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A CNI error code. Codes 0–99 are reserved by the spec; a delegate's code is carried through
/// unchanged, so this is a number rather than a closed enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Code(pub u32);

impl Code {
    /// The config's `cniVersion` is not one this plugin supports.
    pub const INCOMPATIBLE_VERSION: Code = Code(1);
    /// A config field is not supported; the message names key and value.
    pub const UNSUPPORTED_FIELD: Code = Code(2);
    /// The container is unknown: tells the runtime no DEL is needed. Never used on DEL.
    pub const UNKNOWN_CONTAINER: Code = Code(3);
    /// A required `CNI_*` variable is missing or invalid; the message names it.
    pub const INVALID_ENVIRONMENT: Code = Code(4);
    /// An I/O failure (stdin, state files).
    pub const IO: Code = Code(5);
    /// stdin, `prevResult` or a delegate's output is not valid JSON for its schema.
    pub const DECODE: Code = Code(6);
    /// The network configuration is invalid.
    pub const INVALID_CONFIG: Code = Code(7);
    /// A transient condition (lock timeout, busy store, unreachable daemon): retry later.
    pub const TRY_AGAIN_LATER: Code = Code(11);
    /// STATUS: the plugin cannot service ADD.
    pub const NOT_AVAILABLE: Code = Code(50);
    /// STATUS: cannot service ADD, and existing containers may have limited connectivity.
    pub const NOT_AVAILABLE_DEGRADED: Code = Code(51);
    /// CHECK: the attachment differs from what ADD created (plugin-specific range, shared by
    /// every Galactic plugin so a runtime sees one code for "this attachment is broken").
    pub const CHECK_FAILED: Code = Code(100);
    /// A failure with no better code (the Go skel's `ErrInternal`).
    pub const INTERNAL: Code = Code(999);
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What every plugin error tells the CNI edge: its code, and the message (and details) a person
/// reads. Each crate's error type implements it once; [`super::run`] turns the error into the
/// CNI error JSON, so codes are decided in one place per plugin and nowhere deeper.
pub trait ErrorCode: std::error::Error {
    /// The CNI error code.
    fn code(&self) -> Code;
    /// The `msg` of the error result (by default the error's `Display`).
    fn message(&self) -> String {
        self.to_string()
    }
    /// The optional `details` of the error result.
    fn details(&self) -> Option<String> {
        None
    }
    /// The CNI error result for this error.
    fn to_cni(&self) -> CniError {
        CniError {
            code: self.code(),
            msg: self.message(),
            details: self.details(),
        }
    }
}

/// A CNI error is its own code: protocol-level errors of the dispatcher, and a delegate's error
/// passed through unchanged.
impl ErrorCode for CniError {
    fn code(&self) -> Code {
        self.code
    }
    fn message(&self) -> String {
        self.msg.clone()
    }
    fn details(&self) -> Option<String> {
        self.details.clone()
    }
    fn to_cni(&self) -> CniError {
        self.clone()
    }
}

/// A CNI error result: what a plugin prints on stdout when an operation fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniError {
    /// The error code (see [`Code`]).
    pub code: Code,
    /// A short message a person can act on.
    pub msg: String,
    /// Optional longer explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
}

impl std::error::Error for CniError {}

impl fmt::Display for CniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.msg, self.code)?;
        if let Some(details) = &self.details {
            write!(f, ": {details}")?;
        }
        Ok(())
    }
}

impl CniError {
    /// An error with `code` and `msg`.
    pub fn new(code: Code, msg: impl Into<String>) -> Self {
        Self {
            code,
            msg: msg.into(),
            details: None,
        }
    }

    /// The same error with `details` attached.
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = Some(details.into());
        self
    }

    /// Code 1.
    pub fn incompatible_version(msg: impl Into<String>) -> Self {
        Self::new(Code::INCOMPATIBLE_VERSION, msg)
    }
    /// Code 4.
    pub fn invalid_env(msg: impl Into<String>) -> Self {
        Self::new(Code::INVALID_ENVIRONMENT, msg)
    }
    /// Code 5.
    pub fn io(msg: impl Into<String>) -> Self {
        Self::new(Code::IO, msg)
    }
    /// Code 6.
    pub fn decode(msg: impl Into<String>) -> Self {
        Self::new(Code::DECODE, msg)
    }
    /// Code 7.
    pub fn invalid_config(msg: impl Into<String>) -> Self {
        Self::new(Code::INVALID_CONFIG, msg)
    }
    /// Code 11.
    pub fn try_again_later(msg: impl Into<String>) -> Self {
        Self::new(Code::TRY_AGAIN_LATER, msg)
    }
    /// Code 999.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(Code::INTERNAL, msg)
    }

    /// The JSON object printed on stdout, with the protocol version of the exchange.
    pub fn to_json(&self, cni_version: &str) -> serde_json::Value {
        let mut value = serde_json::json!({
            "cniVersion": cni_version,
            "code": self.code,
            "msg": self.msg,
        });
        if let (Some(details), Some(map)) = (&self.details, value.as_object_mut()) {
            map.insert("details".into(), details.clone().into());
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_json_has_version_code_msg_and_optional_details() {
        let err = CniError::try_again_later("store busy");
        assert_eq!(
            err.to_json("1.1.0"),
            serde_json::json!({"cniVersion":"1.1.0","code":11,"msg":"store busy"})
        );
        let err = err.with_details("lock held for 5s");
        assert_eq!(err.to_json("1.0.0")["details"], "lock held for 5s");
    }

    #[test]
    fn delegate_error_parses_without_cni_version() {
        // Go's types.Error marshals only code/msg/details (C73).
        let err: CniError = serde_json::from_str(r#"{"code":50,"msg":"pool exhausted"}"#).unwrap();
        assert_eq!(err.code, Code::NOT_AVAILABLE);
    }
}
