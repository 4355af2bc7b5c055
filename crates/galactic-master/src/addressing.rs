//! What the IPAM delegate assigned, as the master uses it (one path for both families).

use galactic_core::cni::CniResult;
use galactic_core::ip::Assignment;
use std::net::IpAddr;

/// The assigned addresses of an IPAM result, IPv6 first.
pub fn from_result(result: &CniResult) -> Vec<Assignment> {
    let mut out: Vec<Assignment> = result
        .ips
        .iter()
        .map(|ip| Assignment {
            address: ip.address,
            gateway: ip.gateway,
        })
        .collect();
    out.sort_by_key(Assignment::family);
    out
}

/// The distinct gateways.
pub fn gateways(assigned: &[Assignment]) -> Vec<IpAddr> {
    let mut gws: Vec<IpAddr> = assigned.iter().filter_map(|a| a.gateway).collect();
    gws.dedup();
    gws
}
