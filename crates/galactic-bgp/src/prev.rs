//! What galactic-bgp learns from `prevResult` alone: the interface kind, the host interface and
//! the attachment's addresses.

use crate::error::{BgpError, PrevResultError};
use galactic_core::cni::CniResult;
use ipnetwork::{IpNetwork, Ipv6Network};
use std::net::{IpAddr, Ipv4Addr};

/// How the master attached the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterfaceKind {
    /// A veth pair: a host interface plus one sandboxed guest interface.
    Veth,
    /// A tap device: one host interface, nothing sandboxed.
    Tap,
}

/// The attachment as the master reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// veth or tap.
    pub kind: InterfaceKind,
    /// The host-side interface name (`G…H`).
    pub host_ifname: String,
    /// The IPv6 address with its prefix length as assigned (host bits kept).
    pub v6: Option<Ipv6Network>,
    /// The IPv4 address.
    pub v4: Option<Ipv4Addr>,
    /// The gateways of those addresses (the host interface's own addresses).
    pub gateways: Vec<IpAddr>,
}

/// Infers [`Facts`] from `prev` (code 6 when absent or inconsistent).
pub fn infer(prev: Option<&CniResult>) -> Result<Facts, BgpError> {
    let prev = prev.ok_or(PrevResultError::Missing)?;
    if prev.interfaces.is_empty() {
        return Err(PrevResultError::NoInterfaces.into());
    }
    let sandboxed: Vec<usize> = prev
        .interfaces
        .iter()
        .enumerate()
        .filter(|(_, i)| i.sandbox.as_deref().is_some_and(|s| !s.is_empty()))
        .map(|(n, _)| n)
        .collect();
    let kind = match sandboxed.len() {
        0 => InterfaceKind::Tap,
        1 => InterfaceKind::Veth,
        n => return Err(PrevResultError::Sandboxes(n).into()),
    };
    let host_ifname = prev
        .interfaces
        .iter()
        .find(|i| i.sandbox.as_deref().is_none_or(str::is_empty))
        .map(|i| i.name.clone())
        .ok_or(PrevResultError::NoHostInterface)?;
    let mut v6 = None;
    let mut v4 = None;
    let mut gateways = Vec::new();
    for ip in &prev.ips {
        if let Some(index) = ip.interface {
            if index >= prev.interfaces.len() {
                return Err(PrevResultError::InterfaceIndex {
                    address: ip.address.to_string(),
                    index,
                    count: prev.interfaces.len(),
                }
                .into());
            }
        }
        let first = match ip.address {
            IpNetwork::V6(net) if v6.is_none() => {
                v6 = Some(net);
                true
            }
            IpNetwork::V4(net) if v4.is_none() => {
                v4 = Some(net.ip());
                true
            }
            // Masters assign one address per family; a second one is not published.
            _ => false,
        };
        gateways.extend(ip.gateway.filter(|_| first));
    }
    Ok(Facts {
        kind,
        host_ifname,
        v6,
        v4,
        gateways,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(v: serde_json::Value) -> CniResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn veth_and_tap_are_told_apart_by_sandboxes() {
        let veth = result(json!({"cniVersion": "1.1.0",
            "interfaces": [{"name": "G000000001001H"}, {"name": "eth0", "sandbox": "/run/netns/a"}],
            "ips": [{"address": "fd20::100:0/96", "interface": 1}, {"address": "10.1.0.5/24", "interface": 1}]}));
        let facts = infer(Some(&veth)).unwrap();
        assert_eq!(facts.kind, InterfaceKind::Veth);
        assert_eq!(facts.host_ifname, "G000000001001H");
        assert_eq!(facts.v6.unwrap().to_string(), "fd20::100:0/96");
        assert_eq!(facts.v4.unwrap().to_string(), "10.1.0.5");
        let tap = result(
            json!({"interfaces": [{"name": "G000000001001H"}], "ips": [{"address": "10.1.0.5/25", "interface": 0}]}),
        );
        assert_eq!(infer(Some(&tap)).unwrap().kind, InterfaceKind::Tap);
        let bare = result(json!({"interfaces": [{"name": "G000000001001H"}]}));
        let bare = infer(Some(&bare)).unwrap();
        assert!(bare.v6.is_none() && bare.v4.is_none(), "no addresses");
    }

    #[test]
    fn absent_or_inconsistent_results_are_code_6() {
        let two = result(
            json!({"interfaces": [{"name": "h"}, {"name": "a", "sandbox": "/x"}, {"name": "b", "sandbox": "/y"}]}),
        );
        let out_of_range = result(
            json!({"interfaces": [{"name": "h"}], "ips": [{"address": "10.0.0.1/32", "interface": 3}]}),
        );
        let only_guest = result(json!({"interfaces": [{"name": "a", "sandbox": "/x"}]}));
        for prev in [
            None,
            Some(result(json!({}))),
            Some(two),
            Some(out_of_range),
            Some(only_guest),
        ] {
            use galactic_core::cni::ErrorCode;
            let err = infer(prev.as_ref()).unwrap_err();
            assert_eq!(err.code(), galactic_core::cni::Code::DECODE, "{err}");
        }
    }
}
