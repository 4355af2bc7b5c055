//! What the IPAM delegate assigned, as the master uses it (one path for both families).

use galactic_core::cni::CniResult;
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// One assigned address and its gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assigned {
    /// The address with its prefix length, as IPAM returned it.
    pub address: IpNetwork,
    /// The gateway, if any.
    pub gateway: Option<IpAddr>,
}

/// The assigned addresses of an IPAM result, IPv6 first.
pub fn from_result(result: &CniResult) -> Vec<Assigned> {
    let mut out: Vec<Assigned> = result
        .ips
        .iter()
        .map(|ip| Assigned {
            address: ip.address,
            gateway: ip.gateway,
        })
        .collect();
    out.sort_by_key(|a| !a.address.is_ipv6());
    out
}

/// The distinct gateways.
pub fn gateways(assigned: &[Assigned]) -> Vec<IpAddr> {
    let mut gws: Vec<IpAddr> = assigned.iter().filter_map(|a| a.gateway).collect();
    gws.dedup();
    gws
}
