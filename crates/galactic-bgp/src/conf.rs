//! The galactic-bgp stanza: `vpc` and `vpcattachment`, read as every plugin of the chain reads
//! them (`namespace` is a node-config key the resolution already read).

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
}

impl Stanza {
    /// Parses the stanza from the raw configuration (code 7 on any problem).
    pub fn parse(raw: &Value) -> Result<Self, BgpError> {
        let ChainIds { vpc, att } = ChainIds::of(raw)?;
        Ok(Self { vpc, att })
    }
}
