//! The abbreviated IPAM result (no interfaces): IPv6 first, then IPv4, each with its gateway,
//! and one default route per family present (not for `static_ip`, as upstream).
//!
//! Reachability of the gateway: a pool's gateway sits in the prefix that is never handed out, so
//! it is outside the endpoint's own prefix. The master plugin installs the default route with
//! `onlink` and puts the gateway address on the host side of the link as a /128 (/32), which is
//! what makes it reachable; see docs/ipam.md.

use crate::store::Lease;
use galactic_core::cni::{CniResult, IpConfig, Route};
use galactic_core::ip::{Assignment, Family};
use ipnetwork::IpNetwork;
use serde_json::Map;
use std::net::{IpAddr, Ipv6Addr};

impl From<&Lease> for Assignment {
    fn from(lease: &Lease) -> Self {
        Self {
            address: lease.address,
            gateway: lease.gateway,
        }
    }
}

/// The result for `assigned`, with default routes when `routes` is set.
pub fn build(mut assigned: Vec<Assignment>, routes: bool) -> CniResult {
    assigned.sort_by_key(|a| Family::of(a.address.ip()));
    let mut families: Vec<Family> = assigned
        .iter()
        .map(|a| Family::of(a.address.ip()))
        .collect();
    families.dedup();
    CniResult {
        ips: assigned
            .into_iter()
            .map(|a| IpConfig {
                address: a.address,
                gateway: a.gateway,
                interface: None,
                extra: Map::new(),
            })
            .collect(),
        routes: if routes {
            families
                .into_iter()
                .map(|f| Route::to(f.default_route()))
                .collect()
        } else {
            Vec::new()
        },
        ..CniResult::default()
    }
}

/// The `static_ip` result: the address as /64, no gateway, no routes.
pub fn static_ip(ip: Ipv6Addr) -> Vec<Assignment> {
    let address = IpNetwork::new(IpAddr::V6(ip), 64).unwrap_or(IpNetwork::V6(ip.into()));
    vec![Assignment {
        address,
        gateway: None,
    }]
}

/// Compares what is recorded with `prevResult`'s addresses (by IP; the master may report a
/// different mask, e.g. a tap's IPv4 /25). Returns every difference, empty when they agree.
pub fn differences(expected: &[Assignment], prev: &CniResult) -> Vec<String> {
    let mut out = Vec::new();
    let prev_ips: Vec<IpAddr> = prev.ips.iter().map(|c| c.address.ip()).collect();
    for want in expected {
        if !prev_ips.contains(&want.address.ip()) {
            out.push(format!("prevResult lacks {}", want.address));
        }
    }
    for got in &prev_ips {
        let family = Family::of(*got);
        let recorded: Vec<String> = expected
            .iter()
            .filter(|e| Family::of(e.address.ip()) == family)
            .map(|e| e.address.to_string())
            .collect();
        if !expected.iter().any(|e| e.address.ip() == *got) {
            out.push(if recorded.is_empty() {
                format!("prevResult has {got}, but no {family} address is allocated")
            } else {
                format!(
                    "prevResult has {got}, the allocation is {}",
                    recorded.join(", ")
                )
            });
        }
    }
    out
}
