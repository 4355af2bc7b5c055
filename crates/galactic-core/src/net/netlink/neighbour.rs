//! Neighbour entries (ARP/NDP).

use super::{counted, nl, NetError, Netlink};
use futures_util::TryStreamExt;
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use std::net::IpAddr;

/// A neighbour entry's NUD state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighState {
    /// Resolution in progress.
    Incomplete,
    /// Confirmed reachable.
    Reachable,
    /// Not confirmed recently, still used.
    Stale,
    /// Waiting before probing.
    Delay,
    /// Being probed.
    Probe,
    /// Resolution failed.
    Failed,
    /// No resolution needed (e.g. multicast).
    Noarp,
    /// Set by an administrator; never expires.
    Permanent,
    /// No state, or one this layer does not name.
    Other,
}

/// A neighbour entry as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// The neighbour's address.
    pub ip: IpAddr,
    /// Its link-layer address, when the kernel has one.
    pub lladdr: Option<Vec<u8>>,
    /// NUD state.
    pub state: NeighState,
}

impl Neighbour {
    /// The Ethernet MAC, when the entry has a 6-byte link-layer address and is in a state the
    /// kernel itself would send to (an incomplete or failed entry's address is not trusted).
    pub fn usable_mac(&self) -> Option<[u8; 6]> {
        if matches!(self.state, NeighState::Incomplete | NeighState::Failed) {
            return None;
        }
        self.lladdr.as_deref()?.try_into().ok()
    }
}

impl Netlink {
    /// Sets a permanent neighbour entry `ip → mac` on a link.
    pub fn replace_neighbour(&self, index: u32, ip: IpAddr, mac: &str) -> Result<(), NetError> {
        let lladdr = parse_mac(mac)
            .ok_or_else(|| NetError::Conflict(format!("invalid MAC address {mac:?}")))?;
        let request = self
            .handle
            .neighbours()
            .add(index, ip)
            .link_layer_address(&lladdr)
            .state(NeighbourState::Permanent)
            .replace();
        self.runtime
            .block_on(request.execute())
            .map_err(nl(format!("set neighbour {ip} on link {index}")))
    }

    /// Permanent neighbour entries on a link: (address, MAC).
    pub fn permanent_neighbours(&self, index: u32) -> Result<Vec<(IpAddr, String)>, NetError> {
        Ok(self
            .neighbours(index)?
            .into_iter()
            .filter(|n| n.state == NeighState::Permanent)
            .filter_map(|n| match n.lladdr.as_deref() {
                Some(bytes) if bytes.len() == 6 => Some((n.ip, format_mac(bytes))),
                _ => None,
            })
            .collect())
    }

    /// Every permanent neighbour entry of every link, as (link index, address, MAC): one dump
    /// for a node-wide comparison.
    pub fn all_permanent_neighbours(&self) -> Result<Vec<(u32, IpAddr, String)>, NetError> {
        let request = self.handle.neighbours().get().execute();
        let msgs: Vec<NeighbourMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list neighbours"))?;
        Ok(counted(msgs)
            .iter()
            .filter_map(|m| neighbour_from(m).map(|n| (m.header.ifindex, n)))
            .filter(|(_, n)| n.state == NeighState::Permanent)
            .filter_map(|(index, n)| match n.lladdr.as_deref() {
                Some(bytes) if bytes.len() == 6 => Some((index, n.ip, format_mac(bytes))),
                _ => None,
            })
            .collect())
    }

    /// Every IPv4 and IPv6 neighbour entry on a link, in the kernel's order.
    pub fn neighbours(&self, index: u32) -> Result<Vec<Neighbour>, NetError> {
        let request = self.handle.neighbours().get().execute();
        let msgs: Vec<NeighbourMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list neighbours"))?;
        // The dump covers every link (the kernel filters by ifindex only under strict checking).
        Ok(counted(msgs)
            .iter()
            .filter(|m| m.header.ifindex == index)
            .filter_map(neighbour_from)
            .collect())
    }
}

fn neighbour_from(msg: &NeighbourMessage) -> Option<Neighbour> {
    let ip = msg.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
        NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    })?;
    let lladdr = msg.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::LinkLayerAddress(bytes) => Some(bytes.clone()),
        _ => None,
    });
    let state = match msg.header.state {
        NeighbourState::Incomplete => NeighState::Incomplete,
        NeighbourState::Reachable => NeighState::Reachable,
        NeighbourState::Stale => NeighState::Stale,
        NeighbourState::Delay => NeighState::Delay,
        NeighbourState::Probe => NeighState::Probe,
        NeighbourState::Failed => NeighState::Failed,
        NeighbourState::Noarp => NeighState::Noarp,
        NeighbourState::Permanent => NeighState::Permanent,
        _ => NeighState::Other,
    };
    Some(Neighbour { ip, lladdr, state })
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `aa:bb:cc:dd:ee:ff` (any case).
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for byte in out.iter_mut() {
        *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}
