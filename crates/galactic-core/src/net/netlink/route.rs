//! Routes: dumps per family and table, single lookups, install (replace or exclusive), removal.

use super::{address_family, counted, counted_one, nl, tolerate_missing, NetError, Netlink};
use crate::ip::Family;
use futures_util::TryStreamExt;
use ipnetwork::IpNetwork;
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope,
    RouteType,
};
use std::io;
use std::net::IpAddr;

/// What a route does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// Forward (via a device and/or gateway).
    Unicast,
    /// Deliver locally.
    Local,
    /// Reject with "unreachable".
    Unreachable,
}

/// A route to install or remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    /// Destination (masked when installed).
    pub dst: IpNetwork,
    /// Routing table.
    pub table: u32,
    /// Route type.
    pub kind: RouteKind,
    /// Output device index.
    pub dev: Option<u32>,
    /// Next hop.
    pub gateway: Option<IpAddr>,
    /// Treat the gateway as on-link.
    pub onlink: bool,
    /// Link scope (a device route without gateway).
    pub scope_link: bool,
}

impl RouteSpec {
    /// A unicast route to `dst` in `table` out of `dev`.
    pub fn device(dst: IpNetwork, table: u32, dev: u32) -> Self {
        Self {
            dst: masked(dst),
            table,
            kind: RouteKind::Unicast,
            dev: Some(dev),
            gateway: None,
            onlink: false,
            scope_link: true,
        }
    }
}

/// The network address of `net` with its prefix (host bits cleared).
pub fn masked(net: IpNetwork) -> IpNetwork {
    IpNetwork::new(net.network(), net.prefix()).unwrap_or(net)
}

/// A route of any table as uplink detection reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UplinkRoute {
    /// The destination is the default (`::/0`, `0.0.0.0/0`).
    pub default: bool,
    /// Installed by a BGP daemon (`RTPROT_BGP`).
    pub bgp: bool,
    /// Forwards (not blackhole, unreachable, prohibit or local).
    pub forwards: bool,
    /// The output devices: the route's own, or each next hop's of a multipath route.
    pub devs: Vec<u32>,
}

/// Where the kernel sends a packet for one destination (`ip route get`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteLookup {
    /// What the matching route does.
    pub kind: RouteKind,
    /// Output interface.
    pub oif: Option<u32>,
    /// Gateway; `None` when the destination is on-link (then it is its own next hop).
    pub gateway: Option<IpAddr>,
    /// Routing table the route was found in.
    pub table: u32,
}

impl RouteLookup {
    /// The next hop for `dst`: the gateway, or `dst` itself when on-link.
    pub fn next_hop(&self, dst: IpAddr) -> IpAddr {
        self.gateway.unwrap_or(dst)
    }
}

impl Netlink {
    /// Routes of one family in `table`. The kernel filters the dump (a strictly checked request
    /// naming the table), so the answer holds that table's routes only, however many routes the
    /// node's other tables hold; a table that does not exist (yet) has none.
    pub fn routes(&self, family: Family, table: u32) -> Result<Vec<RouteSpec>, NetError> {
        self.table_dump(family, table, None, None)
    }

    /// Routes of one family in `table` of one `kind` (the table's closing `unreachable` routes,
    /// its `local` ones): the kernel filters by table and type, so the answer is as long as
    /// those, however many unicast routes the table holds.
    pub fn routes_of_kind(
        &self,
        family: Family,
        table: u32,
        kind: RouteKind,
    ) -> Result<Vec<RouteSpec>, NetError> {
        self.table_dump(family, table, None, Some(kind))
    }

    /// Routes of one family in `table` out of the device `oif` (its own routes; a multipath
    /// route names its devices only in its next hops and is not among them). The kernel filters
    /// by table and device, so the answer is as long as the device's routes, however many the
    /// table holds.
    pub fn routes_via(
        &self,
        family: Family,
        table: u32,
        oif: u32,
    ) -> Result<Vec<RouteSpec>, NetError> {
        self.table_dump(family, table, Some(oif), None)
    }

    fn table_dump(
        &self,
        family: Family,
        table: u32,
        oif: Option<u32>,
        kind: Option<RouteKind>,
    ) -> Result<Vec<RouteSpec>, NetError> {
        let mut filter = RouteMessage::default();
        filter.header.address_family = address_family(family);
        // Ids above 255 are only in the attribute; the kernel takes the attribute over the header.
        filter.header.table = u8::try_from(table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
        filter.attributes.push(RouteAttribute::Table(table));
        if let Some(oif) = oif {
            filter.attributes.push(RouteAttribute::Oif(oif));
        }
        if let Some(kind) = kind {
            filter.header.kind = route_type(kind);
        }
        let request = self.filtered.route().get(filter).execute();
        let msgs: Vec<RouteMessage> = match self.runtime.block_on(request.try_collect()) {
            Ok(msgs) => msgs,
            Err(e) => match nl(format!("list routes of table {table}"))(e) {
                NetError::NotFound { .. } => Vec::new(),
                other => return Err(other),
            },
        };
        // The filter is the kernel's; checking the table (and device) again costs nothing and
        // keeps the answer exact should a kernel ever ignore it.
        Ok(counted(msgs)
            .iter()
            .filter_map(route_from)
            .filter(|r| r.table == table && oif.is_none_or(|oif| r.dev == Some(oif)))
            .filter(|r| kind.is_none_or(|kind| r.kind == kind))
            .collect())
    }

    /// Routes of one family in every table.
    pub fn all_routes(&self, family: Family) -> Result<Vec<RouteSpec>, NetError> {
        Ok(self.dump(family)?.iter().filter_map(route_from).collect())
    }

    /// Routes of one family in every table, with the protocol and every next hop's device
    /// (an ECMP route names its devices only in its next hops).
    pub fn uplink_routes(&self, family: Family) -> Result<Vec<UplinkRoute>, NetError> {
        Ok(self.dump(family)?.iter().map(uplink_route_from).collect())
    }

    /// Every route message of one family, all tables.
    fn dump(&self, family: Family) -> Result<Vec<RouteMessage>, NetError> {
        let mut filter = RouteMessage::default();
        filter.header.address_family = address_family(family);
        let request = self.handle.route().get(filter).execute();
        let msgs: Vec<RouteMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list routes"))?;
        Ok(counted(msgs))
    }

    /// The route the kernel would use for a packet this host sends to `dst` (`RTM_GETROUTE`
    /// for one address, after the policy rules). `None` when the kernel answers that `dst` is
    /// unreachable (no route, or an unreachable, prohibit or blackhole route).
    pub fn route_get(&self, dst: IpAddr) -> Result<Option<RouteLookup>, NetError> {
        let mut msg = RouteMessage::default();
        msg.header.address_family = address_family(Family::of(dst));
        msg.header.destination_prefix_length = Family::of(dst).bits();
        // A destination attribute makes rtnetlink send a single lookup instead of a dump.
        msg.attributes
            .push(RouteAttribute::Destination(RouteAddress::from(dst)));
        let mut request = self.handle.route().get(msg).execute();
        match self.runtime.block_on(request.try_next()) {
            Ok(Some(reply)) => Ok(counted_one(Some(reply)).as_ref().map(lookup_from)),
            Ok(None) => Err(NetError::Io {
                what: format!("route get {dst}"),
                source: io::Error::other("the kernel sent no answer"),
            }),
            Err(e) => match nl(format!("route get {dst}"))(e) {
                NetError::Kernel { source, .. }
                    if matches!(
                        source.raw_os_error(),
                        // unreachable, prohibit; IPv6 blackhole routes answer EINVAL.
                        Some(libc::ENETUNREACH | libc::EHOSTUNREACH | libc::EACCES | libc::EINVAL)
                    ) =>
                {
                    Ok(None)
                }
                other => Err(other),
            },
        }
    }

    /// Installs `spec`, replacing a route with the same destination, table and type.
    pub fn replace_route(&self, spec: &RouteSpec) -> Result<(), NetError> {
        let msg = route_message(spec);
        self.runtime
            .block_on(self.handle.route().add(msg).replace().execute())
            .map_err(nl(format!(
                "install route {} in table {}",
                spec.dst, spec.table
            )))
    }

    /// Installs `spec` only when the table has no route with the same destination and metric
    /// (`NLM_F_EXCL`): an existing one, whatever it points at, is reported as "already exists"
    /// ([`NetError::is_exists`]) and left untouched. For routes that must never overwrite
    /// someone else's (galactic-route's terminations).
    pub fn add_route(&self, spec: &RouteSpec) -> Result<(), NetError> {
        let msg = route_message(spec);
        self.runtime
            .block_on(self.handle.route().add(msg).execute())
            .map_err(nl(format!(
                "add route {} to table {}",
                spec.dst, spec.table
            )))
    }

    /// Removes `spec`; a missing route is success.
    pub fn delete_route(&self, spec: &RouteSpec) -> Result<(), NetError> {
        let msg = route_message(spec);
        tolerate_missing(
            self.runtime
                .block_on(self.handle.route().del(msg).execute())
                .map_err(nl(format!(
                    "delete route {} from table {}",
                    spec.dst, spec.table
                ))),
        )
    }
}

fn route_table(msg: &RouteMessage) -> u32 {
    msg.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(msg.header.table))
}

fn ip_of(addr: &RouteAddress) -> Option<IpAddr> {
    match addr {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn route_from(msg: &RouteMessage) -> Option<RouteSpec> {
    let family = match msg.header.address_family {
        netlink_packet_route::AddressFamily::Inet6 => Family::V6,
        _ => Family::V4,
    };
    let unspecified = family.unspecified();
    let mut spec = RouteSpec {
        dst: IpNetwork::new(unspecified, msg.header.destination_prefix_length).ok()?,
        table: route_table(msg),
        kind: match msg.header.kind {
            RouteType::Local => RouteKind::Local,
            RouteType::Unreachable => RouteKind::Unreachable,
            _ => RouteKind::Unicast,
        },
        dev: None,
        gateway: None,
        onlink: msg.header.flags.contains(RouteFlags::Onlink),
        scope_link: msg.header.scope == RouteScope::Link,
    };
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Destination(addr) => {
                spec.dst =
                    IpNetwork::new(ip_of(addr)?, msg.header.destination_prefix_length).ok()?
            }
            RouteAttribute::Gateway(addr) => spec.gateway = ip_of(addr),
            RouteAttribute::Oif(index) => spec.dev = Some(*index),
            _ => {}
        }
    }
    Some(spec)
}

fn uplink_route_from(msg: &RouteMessage) -> UplinkRoute {
    let mut devs = Vec::new();
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Oif(index) => devs.push(*index),
            RouteAttribute::MultiPath(hops) => devs.extend(hops.iter().map(|h| h.interface_index)),
            _ => {}
        }
    }
    UplinkRoute {
        default: msg.header.destination_prefix_length == 0,
        bgp: msg.header.protocol == RouteProtocol::Bgp,
        // Some kernels report a plain unicast route as unspecified.
        forwards: matches!(msg.header.kind, RouteType::Unicast | RouteType::Unspec),
        devs: devs.into_iter().filter(|d| *d > 0).collect(),
    }
}

fn route_message(spec: &RouteSpec) -> RouteMessage {
    let dst = masked(spec.dst);
    let mut msg = RouteMessage::default();
    msg.header.address_family = address_family(Family::of_net(dst));
    msg.header.destination_prefix_length = dst.prefix();
    msg.header.table = u8::try_from(spec.table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
    msg.header.protocol = RouteProtocol::Boot;
    msg.header.kind = route_type(spec.kind);
    msg.header.scope = match spec.kind {
        RouteKind::Local => RouteScope::Host,
        _ if spec.scope_link && spec.gateway.is_none() => RouteScope::Link,
        _ => RouteScope::Universe,
    };
    if spec.onlink {
        msg.header.flags |= RouteFlags::Onlink;
    }
    msg.attributes.push(RouteAttribute::Table(spec.table));
    if dst.prefix() > 0 {
        msg.attributes
            .push(RouteAttribute::Destination(RouteAddress::from(dst.ip())));
    }
    if let Some(dev) = spec.dev {
        msg.attributes.push(RouteAttribute::Oif(dev));
    }
    if let Some(gw) = spec.gateway {
        msg.attributes
            .push(RouteAttribute::Gateway(RouteAddress::from(gw)));
    }
    msg
}

fn route_type(kind: RouteKind) -> RouteType {
    match kind {
        RouteKind::Unicast => RouteType::Unicast,
        RouteKind::Local => RouteType::Local,
        RouteKind::Unreachable => RouteType::Unreachable,
    }
}

fn lookup_from(msg: &RouteMessage) -> RouteLookup {
    let mut lookup = RouteLookup {
        kind: match msg.header.kind {
            RouteType::Unicast => RouteKind::Unicast,
            RouteType::Local => RouteKind::Local,
            // Blackhole, prohibit, throw, …: nothing leaves towards the destination.
            _ => RouteKind::Unreachable,
        },
        oif: None,
        gateway: None,
        table: route_table(msg),
    };
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Oif(index) => lookup.oif = Some(*index),
            RouteAttribute::Gateway(addr) => lookup.gateway = ip_of(addr),
            _ => {}
        }
    }
    lookup
}
