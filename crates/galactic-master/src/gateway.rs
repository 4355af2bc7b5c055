//! The host gateway of an attachment: gateway addresses on the host interface, the pod's route
//! in the VPC table, and (veth) a permanent neighbour entry, which the eBPF datapath's
//! `bpf_fib_lookup` needs because it never triggers neighbour resolution itself.

use galactic_core::ip::Assignment;
use galactic_core::net::netlink::{masked, AddrFlags, Link, Netlink, RouteSpec};
use galactic_core::net::NetError;
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// The gateway address as configured on the host interface.
pub fn host_address(v4_prefix: u8, gw: IpAddr) -> (IpNetwork, AddrFlags) {
    let prefix = match gw {
        IpAddr::V6(_) => 128,
        IpAddr::V4(_) => v4_prefix,
    };
    let net = IpNetwork::new(gw, prefix).unwrap_or_else(|_| IpNetwork::from(gw));
    // A /128 without noprefixroute would add a route to main per host end; a /32 adds none.
    let flags = AddrFlags {
        nodad: gw.is_ipv6(),
        noprefixroute: gw.is_ipv6() || prefix != 32,
    };
    (net, flags)
}

/// The route that sends the pod's traffic to the host interface: the endpoint prefix for IPv6,
/// the host address for IPv4 (an `addresses` entry's wider prefix must not capture its subnet).
pub fn pod_route(table: u32, host: &Link, a: &Assignment) -> RouteSpec {
    let dst = match a.address.ip() {
        IpAddr::V6(_) => masked(a.address),
        ip @ IpAddr::V4(_) => IpNetwork::from(ip),
    };
    // Universe scope, as upstream's masters install it: upstream's datapath repair takes only a
    // route of another scope than link for a pod-subnet route, and would rebuild no
    // pass-through row for an IPv4 pod otherwise.
    RouteSpec {
        scope_link: false,
        ..RouteSpec::device(dst, table, host.index)
    }
}

/// Configures everything on the host side.
pub fn configure(
    nl: &Netlink,
    v4_prefix: u8,
    host: &Link,
    table: u32,
    assigned: &[Assignment],
    guest_mac: Option<&str>,
) -> Result<(), NetError> {
    for gw in assigned.iter().filter_map(|a| a.gateway) {
        let (net, flags) = host_address(v4_prefix, gw);
        nl.add_address(host.index, net, flags)?;
    }
    for a in assigned {
        nl.replace_route(&pod_route(table, host, a))?;
        if let Some(mac) = guest_mac {
            nl.replace_neighbour(host.index, a.address.ip(), mac)?;
        }
    }
    Ok(())
}

/// What differs on the host side.
pub fn differences(
    nl: &Netlink,
    v4_prefix: u8,
    host: &Link,
    table: u32,
    assigned: &[Assignment],
) -> Result<Vec<String>, NetError> {
    let mut problems = Vec::new();
    let addresses = nl.addresses(host.index)?;
    for gw in assigned.iter().filter_map(|a| a.gateway) {
        let (net, _) = host_address(v4_prefix, gw);
        if !addresses.contains(&net) {
            problems.push(format!("gateway address {net} is not on {}", host.name));
        }
    }
    for a in assigned {
        let want = pod_route(table, host, a);
        // The pod route goes out of the host interface: the kernel's dump filtered by that
        // device holds it if the table does, and is as long as the interface's routes, where
        // the table's whole dump is as long as the VPC's.
        let present = nl
            .routes_via(a.family(), table, host.index)?
            .iter()
            .any(|r| r.dst == want.dst && r.dev == want.dev);
        if !present {
            problems.push(format!(
                "route {} dev {} is missing from table {table}",
                want.dst, host.name
            ));
        }
    }
    Ok(problems)
}
