//! The VPC's BGP route target (decision 0015).
//!
//! The Galactic API's BGPVRFInstance accepts `^(D.D.D.D|D):D$` in 21 characters, with `D` at
//! most 9 digits in the schema the Go chain `c4c2d06` pins (`45d0ff9`) and at most 10 on either
//! side of the colon in the newest one (`6afcb61`); the same text must pass the advertisement's
//! community rule (`D{1,10}:D{1,10}` or `D{1,3}.D{1,3}.D{1,3}.D{1,3}:D{1,10}`). The Go chain
//! writes `<ASN>:<low 32 bits of the VPC>`, which the older schema refuses for a 10-digit ASN
//! (every 4-byte private ASN) or VPC value, and which names two VPCs with the same low 32 bits
//! alike. The 9-digit bound below stays with the newer schema: both schemas accept what it
//! gives, and a VPC's route target, which every node of the VPC must agree on, does not change
//! under a running cluster. So:
//!
//! - ASN and VPC both at most 999 999 999: `<ASN>:<VPC>`, the Go chain's text (nodes of both
//!   chains agree during an upgrade);
//! - otherwise, or when the router's ASN is unknown: `<a.b.c.d>:<n>`, the VPC's 48 bits split as
//!   an IPv4-address-specific route target (high 32 bits as the address, low 16 as the number),
//!   which is what a BGP extended community can carry (6 bytes).
//!
//! Both forms are at most 21 characters and decode back to the VPC, so no two VPCs share a route
//! target on a router; the two forms never look alike (one has dots), and on the wire they are
//! different extended-community types (two-octet-AS and IPv4-address specific).

use super::VpcId;
use std::net::Ipv4Addr;

/// The largest number every schema's route-target rule accepts on either side (9 digits).
const MAX_9_DIGITS: u64 = 999_999_999;

/// The ASN a BGPRouter's `localASN` speaks as: its low 32 bits. The schema allows any value
/// ≥ 1; galactic-router configures its speaker with the low 32 bits, and the Go chain builds its
/// route targets from the same, so they are the ASN here too.
pub fn speaking_asn(local_asn: i64) -> u32 {
    // Truncation to 32 bits is the definition (as the router does it).
    local_asn as u32
}

/// The VPC's route target on a router speaking `asn` (`None` when no router says), identical on
/// every node with that ASN.
pub fn route_target(asn: Option<u32>, vpc: &VpcId) -> String {
    let value = vpc.value();
    match asn {
        Some(asn) if u64::from(asn) <= MAX_9_DIGITS && value <= MAX_9_DIGITS => {
            format!("{asn}:{value}")
        }
        _ => {
            // A VPC is at most 48 bits: the shift leaves at most 32, the mask 16.
            let address = Ipv4Addr::from((value >> 16) as u32);
            format!("{address}:{}", value & 0xffff)
        }
    }
}
