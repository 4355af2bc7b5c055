//! The node's uplink as the datapath needs it, read from the host namespace's kernel state
//! (upstream §6.7 steps 6, 12 and 13):
//!
//! - the NAT66 default egress of a VPC: the first configured shard SID that has a unicast route,
//!   an output link with a MAC, and a neighbour entry with a MAC for the route's next hop;
//! - the node's public uplink (link, next-hop MAC, own MAC), from the first eBPF interface
//!   (configured, or auto-detected from every table's IPv6 default and BGP-learned routes, as
//!   upstream's datapath detects its uplinks). The node's source address is its SID base
//!   (`Usid::node_sid_base`), not an interface's.
//!
//! Everything here only reads; the registry writes.

use super::abi::{EgressRouteValue, PublicUplinkValue};
use super::BpfError;
use crate::net::netlink::{parse_mac, Link, Netlink, RouteKind};
use crate::net::NetError;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// Why a shard SID (or the uplink) does not resolve.
#[derive(Debug)]
pub enum Unresolved {
    /// The kernel has no usable route to it.
    NoRoute,
    /// The route does not forward (local, blackhole, …).
    NotForwarded(RouteKind),
    /// The route names no output link.
    NoOutputLink,
    /// The output link has vanished since the lookup.
    LinkGone(u32),
    /// The output link has no Ethernet MAC (e.g. a tun or a VRF device).
    NoLinkMac(String),
    /// No neighbour entry with a MAC for the next hop on that link.
    NoNeighbour {
        /// The next hop.
        next_hop: IpAddr,
        /// The link.
        link: String,
    },
    /// A netlink read failed.
    Lookup(NetError),
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoRoute => f.write_str("no route"),
            Self::NotForwarded(kind) => write!(f, "the route is {kind:?}, not a forwarding route"),
            Self::NoOutputLink => f.write_str("the route has no output link"),
            Self::LinkGone(index) => write!(f, "output link {index} no longer exists"),
            Self::NoLinkMac(link) => write!(f, "output link {link} has no MAC address"),
            Self::NoNeighbour { next_hop, link } => write!(
                f,
                "no neighbour entry with a MAC for next hop {next_hop} on {link}"
            ),
            Self::Lookup(e) => write!(f, "{e}"),
        }
    }
}

impl From<NetError> for Unresolved {
    fn from(e: NetError) -> Self {
        Self::Lookup(e)
    }
}

fn link_by_index(nl: &Netlink, index: u32) -> Result<Link, Unresolved> {
    nl.link_at(index)?.ok_or(Unresolved::LinkGone(index))
}

fn mac_of(link: &Link) -> Result<[u8; 6], Unresolved> {
    link.mac
        .as_deref()
        .and_then(parse_mac)
        .ok_or_else(|| Unresolved::NoLinkMac(link.name.clone()))
}

/// The encapsulation towards `sid`: `ip route get` gives link and next hop (the SID itself
/// when on-link); smac is the link's MAC, dmac the next hop's neighbour entry on that link.
pub fn resolve_sid(nl: &Netlink, sid: Ipv6Addr) -> Result<EgressRouteValue, Unresolved> {
    let route = nl.route_get(IpAddr::V6(sid))?.ok_or(Unresolved::NoRoute)?;
    if route.kind != RouteKind::Unicast {
        return Err(Unresolved::NotForwarded(route.kind));
    }
    let link = link_by_index(nl, route.oif.ok_or(Unresolved::NoOutputLink)?)?;
    let smac = mac_of(&link)?;
    let next_hop = route.next_hop(IpAddr::V6(sid));
    // A lookup of the one entry: a dump, even filtered by link, walks the node's whole
    // neighbour table in the kernel (two permanent entries per attachment).
    let dmac = nl
        .neighbour(link.index, next_hop)?
        .and_then(|n| n.usable_mac())
        .ok_or_else(|| Unresolved::NoNeighbour {
            next_hop,
            link: link.name.clone(),
        })?;
    Ok(EgressRouteValue {
        sid_be: sid.octets(),
        link_ifindex: link.index,
        dmac,
        smac,
    })
}

/// The egress row value: the first of `sids` (shard SIDs) that resolves. None resolving is
/// [`BpfError::NoShardSidResolvable`] listing each SID and why.
pub fn resolve_nat66(nl: &Netlink, sids: &[Ipv6Addr]) -> Result<EgressRouteValue, BpfError> {
    let mut reasons = Vec::with_capacity(sids.len());
    for sid in sids {
        match resolve_sid(nl, *sid) {
            Ok(value) => return Ok(value),
            Err(why) => reasons.push(format!("{sid}: {why}")),
        }
    }
    Err(BpfError::NoShardSidResolvable {
        configured: sids.len(),
        reasons,
    })
}

/// The eBPF interfaces: `configured` as given (missing ones included, so the first one is the
/// one the node config names), else auto-detected as upstream's newest datapath does, from the
/// IPv6 routes of **every** table (an underlay whose default lives in a table of its own is
/// found): first the devices of default routes, then those of BGP-learned routes (where a
/// fabric peer's SRv6 traffic arrives when locators travel over another segment), each in the
/// kernel's order, every next hop of a multipath route counted. Never a candidate: a route
/// that does not forward, a WireGuard link (a mesh's own default would make the outer source
/// a mesh address), a VRF member (tenant and sidecar interfaces pick up defaults in their
/// VRF's table) and the loopback.
pub fn ebpf_interfaces(nl: &Netlink, configured: &[String]) -> Result<Vec<String>, NetError> {
    if !configured.is_empty() {
        return Ok(configured.to_vec());
    }
    let routes = nl.uplink_routes(crate::ip::Family::V6)?;
    // The routes' devices are looked up one by one (and each once): a link dump would read
    // every pod's interface of the node for the few devices routes name.
    let mut links = LinksByIndex::new(nl);
    let mut out: Vec<String> = Vec::new();
    let defaults = routes.iter().filter(|r| r.default);
    let learned = routes.iter().filter(|r| r.bgp && !r.default);
    for route in defaults.chain(learned).filter(|r| r.forwards) {
        for index in &route.devs {
            if let Some(name) = links.candidate(*index)? {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    Ok(out)
}

/// Links read by index, each once, for the uplink detection.
struct LinksByIndex<'n> {
    nl: &'n Netlink,
    read: std::collections::HashMap<u32, Option<Link>>,
}

impl<'n> LinksByIndex<'n> {
    fn new(nl: &'n Netlink) -> Self {
        Self {
            nl,
            read: std::collections::HashMap::new(),
        }
    }

    fn get(&mut self, index: u32) -> Result<Option<&Link>, NetError> {
        if !self.read.contains_key(&index) {
            let link = self.nl.link_at(index)?;
            self.read.insert(index, link);
        }
        Ok(self.read.get(&index).and_then(Option::as_ref))
    }

    /// The name of link `index` when it can be an uplink: not the loopback, not a WireGuard
    /// link, not a VRF's member.
    fn candidate(&mut self, index: u32) -> Result<Option<String>, NetError> {
        let Some(link) = self.get(index)? else {
            return Ok(None);
        };
        let excluded = link.loopback || link.kind.as_deref() == Some("wireguard");
        let (name, controller) = (link.name.clone(), link.controller);
        let in_vrf = match controller {
            Some(c) => self
                .get(c)?
                .is_some_and(|m| m.kind.as_deref() == Some("vrf")),
            None => false,
        };
        Ok((!excluded && !in_vrf).then_some(name))
    }
}

/// What the public uplink row would hold, and where it came from.
#[derive(Debug)]
pub struct NodeRows {
    /// The interface it came from, when one was found.
    pub interface: Option<String>,
    /// `public_uplink_table[0]`.
    pub uplink: Result<PublicUplinkValue, String>,
}

/// Resolves the public uplink from the first eBPF interface (`configured`, else auto-detected).
pub fn resolve_node_rows(nl: &Netlink, configured: &[String]) -> NodeRows {
    let failed = |why: String| NodeRows {
        interface: None,
        uplink: Err(why),
    };
    let first = match ebpf_interfaces(nl, configured) {
        Ok(names) => names.into_iter().next(),
        Err(e) => return failed(format!("detect the eBPF interfaces: {e}")),
    };
    let Some(name) = first else {
        return failed(
            "no eBPF interface: ebpf_interfaces is empty and no table has an IPv6 default or BGP-learned route"
                .into(),
        );
    };
    let link = match nl.link(&name) {
        Ok(Some(link)) => link,
        Ok(None) => return failed(format!("eBPF interface {name} does not exist")),
        Err(e) => return failed(e.to_string()),
    };
    NodeRows {
        interface: Some(name),
        uplink: public_uplink(nl, &link),
    }
}

fn public_uplink(nl: &Netlink, link: &Link) -> Result<PublicUplinkValue, String> {
    let smac = mac_of(link).map_err(|e| e.to_string())?;
    let dmac = nl
        .neighbours(link.index)
        .map_err(|e| e.to_string())?
        .iter()
        .filter(|n| matches!(n.ip, IpAddr::V6(v6) if !v6.is_multicast()))
        .find_map(|n| n.usable_mac())
        .ok_or_else(|| format!("{} has no IPv6 neighbour with a MAC address", link.name))?;
    Ok(PublicUplinkValue {
        link_ifindex: link.index,
        dmac,
        smac,
    })
}

#[cfg(test)]
mod tests;
