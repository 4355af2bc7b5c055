//! The configuration envelope every plugin receives on stdin.
//!
//! Only the fields the protocol defines are typed here; each plugin parses its own stanza from
//! [`NetConf::raw`]. Unknown keys (`capabilities`, `runtimeConfig`, `args`, `cni.dev/*`, …) are
//! tolerated (C19–C21).

use super::env::validate_id;
use super::error::CniError;
use super::result::CniResult;
use super::version::SpecVersion;
use serde::Deserialize;
use serde_json::Value;

/// A network name may be used in file paths by runtimes, so it follows the container-id rule.
const MAX_NETWORK_NAME_LEN: usize = 255;

/// The decoded request configuration.
#[derive(Debug, Clone)]
pub struct NetConf {
    /// The negotiated spec version (the config's `cniVersion`).
    pub version: SpecVersion,
    /// The network name.
    pub name: String,
    /// The plugin `type`.
    pub plugin_type: String,
    /// The whole stdin object, for the plugin's own stanza parsing.
    pub raw: Value,
}

/// One entry of `cni.dev/valid-attachments`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
pub struct Attachment {
    /// The container id.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// The interface name.
    pub ifname: String,
}

impl NetConf {
    /// Decodes stdin: a JSON object (code 6 otherwise) with a supported `cniVersion` (code 1)
    /// and a valid `name` and `type` (code 7).
    pub fn decode(stdin: &[u8]) -> Result<Self, CniError> {
        let raw = decode_object(stdin)?;
        let version = SpecVersion::parse(raw.get("cniVersion").and_then(Value::as_str))?;
        let name = string_field(&raw, "name")?;
        validate_id(&name, MAX_NETWORK_NAME_LEN).map_err(|why| {
            CniError::invalid_config(format!("network name {name:?} is invalid: {why}"))
        })?;
        let plugin_type = string_field(&raw, "type")?;
        Ok(Self {
            version,
            name,
            plugin_type,
            raw,
        })
    }

    /// `prevResult`, parsed; `None` when absent or `null`. A malformed one is code 6.
    pub fn prev_result(&self) -> Result<Option<CniResult>, CniError> {
        match self.raw.get("prevResult") {
            None | Some(Value::Null) => Ok(None),
            Some(value) => serde_json::from_value(value.clone())
                .map(Some)
                .map_err(|e| {
                    CniError::decode(format!("prevResult is not a valid CNI result: {e}"))
                }),
        }
    }

    /// GC's still-valid attachments: `cni.dev/valid-attachments`, or the older
    /// `cni.dev/attachments`. `None` when the runtime sent neither (see `docs/decisions`).
    pub fn valid_attachments(&self) -> Result<Option<Vec<Attachment>>, CniError> {
        for key in ["cni.dev/valid-attachments", "cni.dev/attachments"] {
            if let Some(value) = self.raw.get(key).filter(|v| !v.is_null()) {
                return serde_json::from_value(value.clone())
                    .map(Some)
                    .map_err(|e| {
                        CniError::decode(format!(
                            "{key} must be a list of {{\"containerID\", \"ifname\"}} objects: {e}"
                        ))
                    });
            }
        }
        Ok(None)
    }
}

/// Parses stdin as one JSON object.
pub fn decode_object(stdin: &[u8]) -> Result<Value, CniError> {
    if stdin.iter().all(u8::is_ascii_whitespace) {
        return Err(CniError::decode(
            "stdin is empty: the runtime must pass the network configuration as JSON",
        ));
    }
    let value: Value = serde_json::from_slice(stdin)
        .map_err(|e| CniError::decode(format!("stdin is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(CniError::decode(
            "stdin must be a JSON object (the network configuration)",
        ));
    }
    Ok(value)
}

fn string_field(raw: &Value, key: &str) -> Result<String, CniError> {
    match raw.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) | None | Some(Value::Null) => Err(CniError::invalid_config(
            format!("the network configuration has no {key:?}"),
        )),
        Some(other) => Err(CniError::invalid_config(format!(
            "{key:?} must be a string, got {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Code;

    #[test]
    fn decodes_the_envelope_and_tolerates_runtime_keys() {
        let conf = NetConf::decode(
            br#"{"cniVersion":"1.1.0","name":"net1","type":"galactic-ipam",
                "capabilities":{"ips":true},"runtimeConfig":{"ips":["10.0.0.1/32"]},
                "args":{"cni":{"labels":[]}},"cni.dev/x":1}"#,
        )
        .unwrap();
        assert_eq!(conf.version, SpecVersion::V1_1);
        assert_eq!(conf.name, "net1");
        assert!(conf.prev_result().unwrap().is_none());
    }

    #[test]
    fn bad_input_gets_the_right_code() {
        let cases: &[(&[u8], Code)] = &[
            (b"", Code::DECODE),
            (b"  \n", Code::DECODE),
            (b"{", Code::DECODE),
            (b"[1]", Code::DECODE),
            (br#"{"name":"n","type":"t"}"#, Code::INCOMPATIBLE_VERSION),
            (
                br#"{"cniVersion":"0.4.0","name":"n","type":"t"}"#,
                Code::INCOMPATIBLE_VERSION,
            ),
            (
                br#"{"cniVersion":"1.0.0","type":"t"}"#,
                Code::INVALID_CONFIG,
            ),
            (
                br#"{"cniVersion":"1.0.0","name":"../x","type":"t"}"#,
                Code::INVALID_CONFIG,
            ),
            (
                br#"{"cniVersion":"1.0.0","name":"n","type":5}"#,
                Code::INVALID_CONFIG,
            ),
            (
                br#"{"cniVersion":"1.0.0","name":"n","type":"t","prevResult":[]}"#,
                Code::DECODE,
            ),
        ];
        for (input, code) in cases {
            let err = NetConf::decode(input).and_then(|c| c.prev_result().map(|_| c));
            assert_eq!(
                err.unwrap_err().code,
                *code,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn gc_accepts_both_attachment_keys() {
        let new = NetConf::decode(
            br#"{"cniVersion":"1.1.0","name":"n","type":"t",
                "cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}]}"#,
        )
        .unwrap();
        assert_eq!(new.valid_attachments().unwrap().unwrap().len(), 1);
        let old = NetConf::decode(
            br#"{"cniVersion":"1.1.0","name":"n","type":"t","cni.dev/attachments":[]}"#,
        )
        .unwrap();
        assert_eq!(old.valid_attachments().unwrap(), Some(vec![]));
        let none = NetConf::decode(br#"{"cniVersion":"1.1.0","name":"n","type":"t"}"#).unwrap();
        assert_eq!(none.valid_attachments().unwrap(), None);
    }
}
