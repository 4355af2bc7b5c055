//! The galactic-bgp stanza: `vpc` and `vpcattachment` (and `namespace`, which the node config
//! resolution already reads from the stanza first).

use crate::error::BgpError;
use galactic_core::ident::{AttachmentId, VpcId};
use serde_json::Value;

/// The validated stanza.
#[derive(Debug, Clone)]
pub struct Stanza {
    /// The VPC.
    pub vpc: VpcId,
    /// The VPC attachment.
    pub att: AttachmentId,
}

impl Stanza {
    /// Parses the stanza from the raw configuration (code 7 on any problem).
    pub fn parse(raw: &Value) -> Result<Self, BgpError> {
        let field = |key: &str| match raw.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(BgpError::Config(format!(
                "{key:?} must be a string, got {other}"
            ))),
        };
        let vpc = VpcId::parse(&field("vpc")?).map_err(|e| BgpError::Config(e.to_string()))?;
        let att = AttachmentId::parse(&field("vpcattachment")?)
            .map_err(|e| BgpError::Config(e.to_string()))?;
        Ok(Self { vpc, att })
    }
}
