//! The galactic-bgp stanza: `vpc` and `vpcattachment`, read as every plugin of the chain reads
//! them (`namespace` is a node-config key the resolution already read), and the network's
//! internet egress: `"egress": {"internet": {"mode": "Enabled"}}`.
//!
//! The stanza is tenant input, so egress says only whether the network reaches the internet;
//! where it goes (the shard SIDs, the NAT64 prefixes) is node config. Upstream reads any mode
//! but `Enabled`, and any misspelt key, as "no egress"; a typo there silently leaves a network
//! without internet, so unknown keys and modes are refused here (code 7), naming what is
//! accepted.

use crate::error::BgpError;
use galactic_core::ident::{AttachmentId, ChainIds, VpcId};
use serde_json::Value;

/// The validated stanza.
#[derive(Debug, Clone)]
pub struct Stanza {
    /// The VPC.
    pub vpc: VpcId,
    /// The VPC attachment.
    pub att: AttachmentId,
    /// Whether the network opted in to internet egress (`egress.internet.mode: Enabled`).
    pub internet_egress: bool,
}

/// The `egress` block is not what galactic-bgp accepts (code 7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressStanzaError {
    /// A block is not a JSON object.
    #[error("{at} must be an object")]
    NotObject {
        /// Where, e.g. `egress.internet`.
        at: &'static str,
    },
    /// A key this plugin does not know.
    #[error("unknown key {key:?} in {at} (accepted: {accepted})")]
    UnknownKey {
        /// Where.
        at: &'static str,
        /// The key as written.
        key: String,
        /// The keys accepted there.
        accepted: &'static str,
    },
    /// `mode` is absent or not one of the modes.
    #[error("egress.internet.mode is {found}; accepted: \"Enabled\", \"Disabled\"")]
    Mode {
        /// What was found, quoted JSON or "missing".
        found: String,
    },
}

impl Stanza {
    /// Parses the stanza from the raw configuration (code 7 on any problem).
    pub fn parse(raw: &Value) -> Result<Self, BgpError> {
        let ChainIds { vpc, att } = ChainIds::of(raw)?;
        let internet_egress = internet_egress(raw.get("egress"))?;
        Ok(Self {
            vpc,
            att,
            internet_egress,
        })
    }
}

fn internet_egress(egress: Option<&Value>) -> Result<bool, EgressStanzaError> {
    let Some(egress) = egress.filter(|v| !v.is_null()) else {
        return Ok(false);
    };
    let Some(internet) = object(egress, "egress", &["internet"], "\"internet\"")?.get("internet")
    else {
        return Ok(false);
    };
    let internet = object(internet, "egress.internet", &["mode"], "\"mode\"")?;
    match internet.get("mode") {
        Some(Value::String(m)) if m == "Enabled" => Ok(true),
        Some(Value::String(m)) if m == "Disabled" => Ok(false),
        Some(other) => Err(EgressStanzaError::Mode {
            found: other.to_string(),
        }),
        None => Err(EgressStanzaError::Mode {
            found: "missing".into(),
        }),
    }
}

/// `value` as an object with no keys but `known`.
fn object<'v>(
    value: &'v Value,
    at: &'static str,
    known: &[&str],
    accepted: &'static str,
) -> Result<&'v serde_json::Map<String, Value>, EgressStanzaError> {
    let map = value
        .as_object()
        .ok_or(EgressStanzaError::NotObject { at })?;
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(EgressStanzaError::UnknownKey {
            at,
            key: key.clone(),
            accepted,
        }),
        None => Ok(map),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn egress_is_opt_in_and_strict() {
        let on = json!({"internet": {"mode": "Enabled"}});
        assert_eq!(internet_egress(Some(&on)), Ok(true));
        for off in [
            json!(null),
            json!({}),
            json!({"internet": {"mode": "Disabled"}}),
        ] {
            assert_eq!(internet_egress(Some(&off)), Ok(false), "{off}");
        }
        assert_eq!(internet_egress(None), Ok(false));
        let err = |v: Value| internet_egress(Some(&v)).unwrap_err().to_string();
        assert_eq!(
            err(json!({"internett": {"mode": "Enabled"}})),
            "unknown key \"internett\" in egress (accepted: \"internet\")"
        );
        assert_eq!(
            err(json!({"internet": {"mode": "Enabled", "shardSIDs": ["2001:db8::"]}})),
            "unknown key \"shardSIDs\" in egress.internet (accepted: \"mode\")"
        );
        assert_eq!(
            err(json!({"internet": {"mode": "enabled"}})),
            "egress.internet.mode is \"enabled\"; accepted: \"Enabled\", \"Disabled\""
        );
        assert!(err(json!({"internet": {}})).contains("is missing"));
        assert_eq!(err(json!(true)), "egress must be an object");
        assert_eq!(
            err(json!({"internet": "Enabled"})),
            "egress.internet must be an object"
        );
    }
}
