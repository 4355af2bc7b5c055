//! The SRv6 uSID of a VRF (uFMT 48+16): Block (48 bits, from the router's locator) | Node-ID (16)
//! | Function 0xE (End.DT46, 4 bits) | Argument = VRF id (12 bits) | zeros.
//!
//! The eBPF uSID datapath registration (upstream `registerEBPFDatapath`) arrives with a later
//! issue; [`UsidDatapath`] is where it plugs in.

use crate::prev::InterfaceKind;
use std::net::Ipv6Addr;

/// End.DT46 function nibble.
const END_DT46: u8 = 0xE;

/// Why a uSID cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsidError {
    /// The locator is not an IPv6 /48.
    #[error("SRv6 locator {0:?} must be an IPv6 /48 prefix")]
    Locator(String),
    /// The node id is outside 1..0xDFFF.
    #[error("nodeID {0} out of range [0x1,0xdfff]")]
    NodeId(i64),
    /// The VRF id does not fit the 12-bit argument.
    #[error("VRF id {0} out of range [0x1,0xfff] for a uSID argument")]
    Argument(u32),
}

/// Computes the uSID for `vrf_id` on the node with `locator` and `node_id`. The Block is taken
/// from the locator address as written (upstream does not mask it either).
pub fn compute_sid(locator: &str, node_id: i64, vrf_id: u32) -> Result<Ipv6Addr, UsidError> {
    let (addr, len) = locator
        .split_once('/')
        .ok_or_else(|| UsidError::Locator(locator.into()))?;
    let addr: Ipv6Addr = addr
        .parse()
        .map_err(|_| UsidError::Locator(locator.into()))?;
    if len != "48" {
        return Err(UsidError::Locator(locator.into()));
    }
    let node = u16::try_from(node_id)
        .ok()
        .filter(|n| (1..=0xDFFF).contains(n))
        .ok_or(UsidError::NodeId(node_id))?;
    if !(1..=0xFFF).contains(&vrf_id) {
        return Err(UsidError::Argument(vrf_id));
    }
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&addr.octets()[..6]);
    bytes[6..8].copy_from_slice(&node.to_be_bytes());
    bytes[8] = (END_DT46 << 4) | ((vrf_id >> 8) & 0xF) as u8;
    bytes[9] = (vrf_id & 0xFF) as u8;
    Ok(Ipv6Addr::from(bytes))
}

/// What a uSID datapath registration needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration<'a> {
    /// The VRF's uSID.
    pub sid: Ipv6Addr,
    /// The VRF id (uSID argument).
    pub vrf_id: u32,
    /// veth (peer redirect) or tap (plain redirect).
    pub kind: InterfaceKind,
    /// The host interface the egress program attaches to.
    pub host_ifname: &'a str,
    /// The attachment's canonical prefixes (local pass-through entries).
    pub prefixes: &'a [String],
}

/// A uSID datapath: registers a VRF's SID and the attachment's egress state. The implementation
/// (pinned eBPF maps) is a later issue; until then no registration happens and the ADD says so
/// in the log.
pub trait UsidDatapath {
    /// Registers `registration`; an error fails the ADD.
    fn register(&self, registration: &Registration<'_>) -> Result<(), String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_vector() {
        assert_eq!(
            compute_sid("2001:db8:ff03::/48", 1, 1).unwrap().to_string(),
            "2001:db8:ff03:1:e001::"
        );
        assert_eq!(
            compute_sid("2001:db8:ff03::/48", 0xDFFF, 0xFFF)
                .unwrap()
                .to_string(),
            "2001:db8:ff03:dfff:efff::"
        );
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert!(matches!(
            compute_sid("2001:db8::/64", 1, 1),
            Err(UsidError::Locator(_))
        ));
        assert!(matches!(
            compute_sid("10.0.0.0/48", 1, 1),
            Err(UsidError::Locator(_))
        ));
        assert_eq!(
            compute_sid("2001:db8:ff03::/48", 0x10001, 1),
            Err(UsidError::NodeId(0x10001))
        );
        assert_eq!(
            compute_sid("2001:db8:ff03::/48", 0, 1),
            Err(UsidError::NodeId(0))
        );
        assert_eq!(
            compute_sid("2001:db8:ff03::/48", 1, 4096),
            Err(UsidError::Argument(4096))
        );
    }
}
