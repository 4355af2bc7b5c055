//! Neighbour entries (ARP/NDP).

use super::{counted, counted_one, nl, NetError, Netlink};
use futures_util::{StreamExt, TryStreamExt};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
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
            .iter()
            .filter_map(permanent)
            .collect())
    }

    /// The entry for `ip` on link `index`, if there is one: one lookup the kernel answers from
    /// its hash table (a non-dump `RTM_GETNEIGH`, Linux 5.0), whatever the node's other entries.
    /// A dump filtered by link walks every entry of the node in the kernel, so a lookup per
    /// expected entry is what keeps a VPC's convergence independent of the node. On a kernel
    /// without the lookup the link's dump answers.
    pub fn neighbour(&self, index: u32, ip: IpAddr) -> Result<Option<Neighbour>, NetError> {
        let mut msg = NeighbourMessage::default();
        msg.header.family = match ip {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        msg.header.ifindex = index;
        msg.attributes
            .push(NeighbourAttribute::Destination(match ip {
                IpAddr::V4(v4) => NeighbourAddress::Inet(v4),
                IpAddr::V6(v6) => NeighbourAddress::Inet6(v6),
            }));
        let mut request = NetlinkMessage::from(RouteNetlinkMessage::GetNeighbour(msg));
        request.header.flags = NLM_F_REQUEST;
        let what = format!("look up neighbour {ip} on link {index}");
        let mut handle = self.handle.clone();
        let answer = self.runtime.block_on(async move {
            let mut replies = handle.request(request)?;
            match replies.next().await.map(NetlinkMessage::into_parts) {
                Some((_, NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewNeighbour(m)))) => {
                    Ok(Some(m))
                }
                Some((_, NetlinkPayload::Error(e))) => Err(rtnetlink::Error::NetlinkError(e)),
                _ => Ok(None),
            }
        });
        match answer.map_err(nl(what)) {
            Ok(found) => Ok(counted_one(found).as_ref().and_then(neighbour_from)),
            Err(NetError::NotFound { .. }) => Ok(None),
            Err(NetError::Unsupported { .. }) => {
                Ok(self.neighbours(index)?.into_iter().find(|n| n.ip == ip))
            }
            Err(e) => Err(e),
        }
    }

    /// Every IPv4 and IPv6 neighbour entry on a link, in the kernel's order.
    pub fn neighbours(&self, index: u32) -> Result<Vec<Neighbour>, NetError> {
        let msgs = self.neighbour_messages(
            NeighbourAttribute::IfIndex(index),
            &format!("list the neighbours of link {index}"),
        )?;
        // Checked again: kernels before 4.20 ignore the filter and send every link's.
        Ok(msgs
            .iter()
            .filter(|m| m.header.ifindex == index)
            .filter_map(neighbour_from)
            .collect())
    }

    /// A neighbour dump of both families the kernel filters by `filter` (`NDA_IFINDEX`), so the
    /// answer holds those entries only, however many the node's other links have (the kernel
    /// still walks them all: [`Netlink::neighbour`] looks one up). A link that does not exist
    /// has none.
    fn neighbour_messages(
        &self,
        filter: NeighbourAttribute,
        what: &str,
    ) -> Result<Vec<NeighbourMessage>, NetError> {
        let mut request = self.filtered.neighbours().get();
        request.message_mut().attributes.push(filter);
        match self.runtime.block_on(request.execute().try_collect()) {
            Ok(msgs) => Ok(counted(msgs)),
            Err(e) => match nl(what)(e) {
                NetError::NotFound { .. } => Ok(Vec::new()),
                other => Err(other),
            },
        }
    }
}

/// The address and MAC of a permanent entry with an Ethernet address.
fn permanent(n: &Neighbour) -> Option<(IpAddr, String)> {
    match n.lladdr.as_deref() {
        Some(bytes) if n.state == NeighState::Permanent && bytes.len() == 6 => {
            Some((n.ip, format_mac(bytes)))
        }
        _ => None,
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
