//! One thin, typed, synchronous layer over rtnetlink.
//!
//! A [`Netlink`] owns a netlink socket opened *inside* the namespace it acts on (see
//! [`Netlink::in_netns`]) and a current-thread runtime that drives it, so callers never switch
//! namespaces themselves and never see async code. "Not found" and "already exists" are typed
//! ([`NetError::NotFound`], [`NetError::is_exists`]); each method does one kernel operation.

use super::netns::{run_in, Netns};
use super::NetError;
use futures_util::TryStreamExt;
use ipnetwork::IpNetwork;
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage, AddressScope};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, InfoVrf, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope,
    RouteType,
};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use netlink_packet_route::AddressFamily;
use rtnetlink::{Handle, IpVersion, LinkUnspec, LinkVeth};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use tokio::runtime::{Builder, Runtime};

/// A link as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Hardware address, `aa:bb:…` lower case (absent for some kinds).
    pub mac: Option<String>,
    /// MTU.
    pub mtu: u32,
    /// `IFLA_INFO_KIND` (`veth`, `tun`, `vrf`, …).
    pub kind: Option<String>,
    /// Index of the controller (VRF) it is enslaved to.
    pub controller: Option<u32>,
    /// Administratively up.
    pub up: bool,
    /// For a VRF device: the table it is bound to.
    pub vrf_table: Option<u32>,
}

/// Flags for an address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddrFlags {
    /// Skip duplicate address detection (IPv6): the gateway sits on many links by design.
    pub nodad: bool,
    /// Do not add the prefix route the kernel would derive from the address.
    pub noprefixroute: bool,
}

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

/// A policy rule (`ip rule`): `[iif IIF] [from SRC] lookup TABLE` at `priority`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// IPv4 or IPv6 rule list.
    pub v6: bool,
    /// Priority (`pref`).
    pub priority: u32,
    /// Input interface name.
    pub iif: Option<String>,
    /// Source prefix.
    pub from: Option<IpNetwork>,
    /// Table to look up.
    pub table: u32,
}

/// Synchronous netlink access to one network namespace.
pub struct Netlink {
    runtime: Runtime,
    handle: Handle,
}

fn runtime() -> Result<Runtime, NetError> {
    Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|source| NetError::Io {
            what: "start the netlink runtime".into(),
            source,
        })
}

fn connect() -> Result<Handle, NetError> {
    let (connection, handle, _) = rtnetlink::new_connection().map_err(|source| NetError::Io {
        what: "open a netlink socket".into(),
        source,
    })?;
    tokio::spawn(connection);
    Ok(handle)
}

/// Maps an rtnetlink error to a typed one, saying what was being done.
fn nl(what: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> NetError {
    move |e| match &e {
        rtnetlink::Error::NetlinkError(msg) => {
            let errno = msg.code.map_or(libc::EIO, |c| -c.get());
            NetError::kernel(what, io::Error::from_raw_os_error(errno))
        }
        _ => NetError::Io {
            what: what.into(),
            source: io::Error::other(e.to_string()),
        },
    }
}

/// Treats "already exists" as success.
fn tolerate_exists(result: Result<(), NetError>) -> Result<(), NetError> {
    match result {
        Err(e) if e.is_exists() => Ok(()),
        other => other,
    }
}

/// Treats "not found" as success.
fn tolerate_missing(result: Result<(), NetError>) -> Result<(), NetError> {
    match result {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

impl Netlink {
    /// Netlink for the calling thread's namespace (the plugin's host).
    pub fn current() -> Result<Self, NetError> {
        let runtime = runtime()?;
        let handle = {
            let _entered = runtime.enter();
            connect()?
        };
        Ok(Self { runtime, handle })
    }

    /// Netlink for `ns`: the socket is opened inside it on a dedicated thread, then used from here.
    pub fn in_netns(ns: &Netns) -> Result<Self, NetError> {
        let runtime = runtime()?;
        let rt = runtime.handle().clone();
        let handle = run_in(ns, move || {
            let _entered = rt.enter();
            connect()
        })??;
        Ok(Self { runtime, handle })
    }

    // ---- links ----

    /// The link named `name`, if it exists.
    pub fn link(&self, name: &str) -> Result<Option<Link>, NetError> {
        let mut request = self
            .handle
            .link()
            .get()
            .match_name(name.to_owned())
            .execute();
        match self.runtime.block_on(request.try_next()) {
            Ok(msg) => Ok(msg.map(link_from)),
            Err(e) => match nl(format!("get link {name}"))(e) {
                NetError::NotFound { .. } => Ok(None),
                other => Err(other),
            },
        }
    }

    /// The link named `name`, or `NotFound`.
    pub fn require_link(&self, name: &str) -> Result<Link, NetError> {
        self.link(name)?.ok_or_else(|| NetError::NotFound {
            what: format!("link {name}"),
        })
    }

    /// Every link.
    pub fn links(&self) -> Result<Vec<Link>, NetError> {
        let request = self.handle.link().get().execute();
        let msgs: Vec<LinkMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list links"))?;
        Ok(msgs.into_iter().map(link_from).collect())
    }

    /// Creates a veth pair: `host` here, its peer created directly inside `peer_ns` as `peer`.
    pub fn create_veth(
        &self,
        host: &str,
        peer: &str,
        peer_ns: &Netns,
        mtu: Option<u32>,
    ) -> Result<(), NetError> {
        let mut peer_msg = LinkUnspec::new_with_name(peer).setns_by_fd(peer_ns.file().as_raw_fd());
        let mut host_msg = LinkVeth::new(host, peer);
        if let Some(mtu) = mtu {
            peer_msg = peer_msg.mtu(mtu);
            host_msg = host_msg.mtu(mtu);
        }
        let msg = host_msg
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer_msg.build())))
            .build();
        self.runtime
            .block_on(self.handle.link().add(msg).execute())
            .map_err(nl(format!(
                "create veth {host} with peer {peer} in {}",
                peer_ns.path().display()
            )))
    }

    /// Sets a link administratively up.
    pub fn set_up(&self, index: u32) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(index).up().build();
        self.runtime
            .block_on(self.handle.link().set(msg).execute())
            .map_err(nl(format!("set link {index} up")))
    }

    /// Sets a link's MTU.
    pub fn set_mtu(&self, index: u32, mtu: u32) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(index).mtu(mtu).build();
        self.runtime
            .block_on(self.handle.link().set(msg).execute())
            .map_err(nl(format!("set MTU {mtu} on link {index}")))
    }

    /// Enslaves a link to a controller (VRF).
    pub fn set_controller(&self, index: u32, controller: u32) -> Result<(), NetError> {
        let msg = LinkUnspec::new_with_index(index)
            .controller(controller)
            .build();
        self.runtime
            .block_on(self.handle.link().set(msg).execute())
            .map_err(nl(format!("enslave link {index} to {controller}")))
    }

    /// Creates a VRF device bound to `table`.
    pub fn create_vrf(&self, name: &str, table: u32) -> Result<(), NetError> {
        let msg = rtnetlink::LinkVrf::new(name, table).build();
        self.runtime
            .block_on(self.handle.link().add(msg).execute())
            .map_err(nl(format!("create VRF {name} (table {table})")))
    }

    /// Deletes a link; a missing one is success.
    pub fn delete_link(&self, name: &str) -> Result<(), NetError> {
        let Some(link) = self.link(name)? else {
            return Ok(());
        };
        tolerate_missing(
            self.runtime
                .block_on(self.handle.link().del(link.index).execute())
                .map_err(nl(format!("delete link {name}"))),
        )
    }

    // ---- addresses ----

    /// The address messages of a link (the kernel's filter is advisory, so it is applied here too).
    fn address_messages(&self, index: u32) -> Result<Vec<AddressMessage>, NetError> {
        let request = self
            .handle
            .address()
            .get()
            .set_link_index_filter(index)
            .execute();
        let msgs: Vec<AddressMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl(format!("list addresses of link {index}")))?;
        Ok(msgs
            .into_iter()
            .filter(|m| m.header.index == index)
            .collect())
    }

    /// Addresses on a link.
    pub fn addresses(&self, index: u32) -> Result<Vec<IpNetwork>, NetError> {
        Ok(self
            .address_messages(index)?
            .iter()
            .filter_map(address_from)
            .collect())
    }

    /// Global-scope addresses on a link, in the kernel's order.
    pub fn global_addresses(&self, index: u32) -> Result<Vec<IpNetwork>, NetError> {
        Ok(self
            .address_messages(index)?
            .iter()
            .filter(|m| m.header.scope == AddressScope::Universe)
            .filter_map(address_from)
            .collect())
    }

    /// Adds an address (host bits kept); an identical one already present is success.
    pub fn add_address(
        &self,
        index: u32,
        addr: IpNetwork,
        flags: AddrFlags,
    ) -> Result<(), NetError> {
        let mut request = self.handle.address().add(index, addr.ip(), addr.prefix());
        let mut bits = AddressFlags::empty();
        if flags.nodad {
            bits |= AddressFlags::Nodad;
        }
        if flags.noprefixroute {
            bits |= AddressFlags::Noprefixroute;
        }
        if !bits.is_empty() {
            request
                .message_mut()
                .attributes
                .push(AddressAttribute::Flags(bits));
        }
        tolerate_exists(
            self.runtime
                .block_on(request.execute())
                .map_err(nl(format!("add address {addr} to link {index}"))),
        )
    }

    /// Removes an address; a missing one is success.
    pub fn delete_address(&self, index: u32, addr: IpNetwork) -> Result<(), NetError> {
        for msg in self
            .address_messages(index)?
            .into_iter()
            .filter(|m| address_from(m) == Some(addr))
        {
            tolerate_missing(
                self.runtime
                    .block_on(self.handle.address().del(msg).execute())
                    .map_err(nl(format!("delete address {addr} from link {index}"))),
            )?;
        }
        Ok(())
    }

    // ---- routes ----

    /// Routes of one family in `table`.
    pub fn routes(&self, v6: bool, table: u32) -> Result<Vec<RouteSpec>, NetError> {
        Ok(self
            .all_routes(v6)?
            .into_iter()
            .filter(|r| r.table == table)
            .collect())
    }

    /// Routes of one family in every table.
    pub fn all_routes(&self, v6: bool) -> Result<Vec<RouteSpec>, NetError> {
        let mut filter = RouteMessage::default();
        filter.header.address_family = family(v6);
        let request = self.handle.route().get(filter).execute();
        let msgs: Vec<RouteMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list routes"))?;
        Ok(msgs.iter().filter_map(route_from).collect())
    }

    /// The route the kernel would use for a packet this host sends to `dst` (`RTM_GETROUTE`
    /// for one address, after the policy rules). `None` when the kernel answers that `dst` is
    /// unreachable (no route, or an unreachable, prohibit or blackhole route).
    pub fn route_get(&self, dst: IpAddr) -> Result<Option<RouteLookup>, NetError> {
        let mut msg = RouteMessage::default();
        msg.header.address_family = family(dst.is_ipv6());
        msg.header.destination_prefix_length = if dst.is_ipv6() { 128 } else { 32 };
        // A destination attribute makes rtnetlink send a single lookup instead of a dump.
        msg.attributes
            .push(RouteAttribute::Destination(RouteAddress::from(dst)));
        let mut request = self.handle.route().get(msg).execute();
        match self.runtime.block_on(request.try_next()) {
            Ok(Some(reply)) => Ok(Some(lookup_from(&reply))),
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

    // ---- rules ----

    /// Policy rules of one family.
    pub fn rules(&self, v6: bool) -> Result<Vec<RuleSpec>, NetError> {
        let version = if v6 { IpVersion::V6 } else { IpVersion::V4 };
        let request = self.handle.rule().get(version).execute();
        let msgs: Vec<RuleMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list rules"))?;
        Ok(msgs.iter().map(|m| rule_from(m, v6)).collect())
    }

    /// Adds a rule; an identical one already present is success.
    pub fn add_rule(&self, spec: &RuleSpec) -> Result<(), NetError> {
        let mut request = self.handle.rule().add();
        *request.message_mut() = rule_message(spec);
        tolerate_exists(
            self.runtime
                .block_on(request.execute())
                .map_err(nl(format!("add rule {}", describe_rule(spec)))),
        )
    }

    /// Removes a rule; a missing one is success.
    pub fn delete_rule(&self, spec: &RuleSpec) -> Result<(), NetError> {
        let request = self.handle.rule().del(rule_message(spec));
        tolerate_missing(
            self.runtime
                .block_on(request.execute())
                .map_err(nl(format!("delete rule {}", describe_rule(spec)))),
        )
    }

    // ---- neighbours ----

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

    /// Every IPv4 and IPv6 neighbour entry on a link, in the kernel's order.
    pub fn neighbours(&self, index: u32) -> Result<Vec<Neighbour>, NetError> {
        let request = self.handle.neighbours().get().execute();
        let msgs: Vec<NeighbourMessage> = self
            .runtime
            .block_on(request.try_collect())
            .map_err(nl("list neighbours"))?;
        // The dump covers every link (the kernel filters by ifindex only under strict checking).
        Ok(msgs
            .iter()
            .filter(|m| m.header.ifindex == index)
            .filter_map(neighbour_from)
            .collect())
    }
}

fn family(v6: bool) -> AddressFamily {
    if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    }
}

fn link_from(msg: LinkMessage) -> Link {
    let mut link = Link {
        index: msg.header.index,
        name: String::new(),
        mac: None,
        mtu: 0,
        kind: None,
        controller: None,
        up: msg.header.flags.contains(LinkFlags::Up),
        vrf_table: None,
    };
    for attr in msg.attributes {
        match attr {
            LinkAttribute::IfName(name) => link.name = name,
            LinkAttribute::Address(bytes) if bytes.len() == 6 => {
                link.mac = Some(format_mac(&bytes))
            }
            LinkAttribute::Mtu(mtu) => link.mtu = mtu,
            LinkAttribute::Controller(index) => link.controller = Some(index),
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    match info {
                        LinkInfo::Kind(kind) => link.kind = Some(kind_name(&kind)),
                        LinkInfo::Data(InfoData::Vrf(vrf)) => {
                            link.vrf_table = vrf.iter().find_map(|v| match v {
                                InfoVrf::TableId(t) => Some(*t),
                                _ => None,
                            })
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    link
}

fn kind_name(kind: &InfoKind) -> String {
    match kind {
        InfoKind::Veth => "veth".into(),
        InfoKind::Tun => "tun".into(),
        InfoKind::Vrf => "vrf".into(),
        other => format!("{other:?}").to_ascii_lowercase(),
    }
}

fn address_from(msg: &AddressMessage) -> Option<IpNetwork> {
    // IPv4 carries the interface's own address in IFA_LOCAL; IPv6 only in IFA_ADDRESS.
    let local = msg.attributes.iter().find_map(|a| match a {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    let address = msg.attributes.iter().find_map(|a| match a {
        AddressAttribute::Address(ip) => Some(*ip),
        _ => None,
    });
    IpNetwork::new(local.or(address)?, msg.header.prefix_len).ok()
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
    let v6 = msg.header.address_family == AddressFamily::Inet6;
    let unspecified: IpAddr = if v6 {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
    };
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

fn route_message(spec: &RouteSpec) -> RouteMessage {
    let dst = masked(spec.dst);
    let mut msg = RouteMessage::default();
    msg.header.address_family = family(dst.is_ipv6());
    msg.header.destination_prefix_length = dst.prefix();
    msg.header.table = u8::try_from(spec.table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
    msg.header.protocol = RouteProtocol::Boot;
    msg.header.kind = match spec.kind {
        RouteKind::Unicast => RouteType::Unicast,
        RouteKind::Local => RouteType::Local,
        RouteKind::Unreachable => RouteType::Unreachable,
    };
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

fn rule_from(msg: &RuleMessage, v6: bool) -> RuleSpec {
    let mut spec = RuleSpec {
        v6,
        priority: 0,
        iif: None,
        from: None,
        table: u32::from(msg.header.table),
    };
    for attr in &msg.attributes {
        match attr {
            RuleAttribute::Priority(p) => spec.priority = *p,
            RuleAttribute::Iifname(name) => spec.iif = Some(name.clone()),
            RuleAttribute::Source(ip) => spec.from = IpNetwork::new(*ip, msg.header.src_len).ok(),
            RuleAttribute::Table(t) => spec.table = *t,
            _ => {}
        }
    }
    spec
}

fn rule_message(spec: &RuleSpec) -> RuleMessage {
    let mut msg = RuleMessage::default();
    msg.header.family = family(spec.v6);
    msg.header.table = u8::try_from(spec.table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC);
    msg.header.action = RuleAction::ToTable;
    msg.attributes.push(RuleAttribute::Priority(spec.priority));
    msg.attributes.push(RuleAttribute::Table(spec.table));
    if let Some(iif) = &spec.iif {
        msg.attributes.push(RuleAttribute::Iifname(iif.clone()));
    }
    if let Some(from) = spec.from {
        msg.header.src_len = from.prefix();
        msg.attributes.push(RuleAttribute::Source(from.ip()));
    }
    msg
}

fn describe_rule(spec: &RuleSpec) -> String {
    let mut text = format!("-{} pref {}", if spec.v6 { 6 } else { 4 }, spec.priority);
    if let Some(iif) = &spec.iif {
        text += &format!(" iif {iif}");
    }
    if let Some(from) = spec.from {
        text += &format!(" from {from}");
    }
    text + &format!(" lookup {}", spec.table)
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
