//! The rows upstream's datapath repair pass would write, computed from its description, so a
//! test can hold the rows our plugins write against them.
//!
//! Upstream's newest `galactic-cni run` rebuilds, at start and on every GC tick, the rows only
//! CNI ADD writes, into empty slots only (a row that exists is left alone, whoever wrote it).
//! Its inputs are this node's BGPRouter (Block, Node-ID), the BGPVRFInstances on that router
//! (the VPC's Argument, by the instance name `{vpc}-{node}`), the router's BGPAdvertisements
//! (guest prefixes the kernel does not route) and the kernel: every interface named like a host
//! side (`G{vpc:9}{att:3}H`) in a routing domain, whose table is the VPC's table, whose link type
//! (veth, or tun for a tap) is the egress kind, whose pod-subnet routes in that table (unicast,
//! out of it, no gateway, not link scope, not the kernel's) and own non-link-local addresses (as
//! host prefixes: the gateways) are the local pass-through prefixes. Attachments are taken in
//! ascending ifindex order, so a per-VPC row comes from the lowest-numbered attachment.
//!
//! What it writes into the maps of `galactic_core::bpf::abi`: `locator_table`,
//! `function_table`, `node_src_addr_table` (the node's End.DT46 SID with Argument 0) once any
//! attachment is found; per VPC `vrf_table` (table, kind); per attachment `ifindex_vrf_table`
//! and the pass-through rows of `egress_route_table`; and, in the maps only its newest datapath
//! pins, per attachment `ifindex_egress_kind_table` (the link type's kind) and `tenant_gw_table`
//! (the first own address of each family; all zero when the kernel has none but the
//! advertisement lists prefixes, none when it lists none either) and per VPC
//! `vpc_attribution_table` (the VPC and attachment numbers of the lowest-ifindex attachment's
//! name); with the host conflist's egress keys, per opted-in VRF the shard routes of
//! `egress_route_table` (`::/0` and each NAT64 /96 toward the first resolvable shard SID, its
//! Argument rewritten to the VRF id, with the resolved link and MACs). Not modelled: the public
//! uplink (it needs a resolved neighbour), the shard group maps of the very newest datapath
//! (without them it runs in ordered mode, which this is), and the advertisement's no-addressing
//! annotation (this workspace's publishers never write it).

use galactic_core::bpf::abi::{EGRESS_KIND_TAP, EGRESS_KIND_VETH, FAMILY_IPV4, FAMILY_IPV6};
use galactic_core::bpf::usid::Block;
use galactic_core::ident::base62_to_hex;
use galactic_core::net::netlink::{masked, Link, Netlink, RouteKind};
use galactic_core::net::NetError;
use ipnetwork::IpNetwork;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// An `egress_route_table` key as the tests dump it: (prefix bits + 40, table, family, address).
pub type EgressKey = (u32, u32, u8, [u8; 16]);

/// One attachment as the repair pass finds it in the kernel.
#[derive(Debug, Clone)]
pub struct Found {
    /// The host interface (`G…H`).
    pub name: String,
    /// Its ifindex.
    pub ifindex: u32,
    /// [`EGRESS_KIND_VETH`] or [`EGRESS_KIND_TAP`].
    pub kind: u32,
    /// The VPC's routing table.
    pub table: u32,
    /// Pod-subnet routes and own addresses as host prefixes, kernel order.
    pub local: Vec<IpNetwork>,
    /// The first own non-link-local address of each family (the gateways); `None` without any.
    pub gateways: Option<Gateways>,
}

/// A `tenant_gw_table` value: IPv6 and IPv4 gateway bytes (zero: none in that family).
pub type Gateways = ([u8; 16], [u8; 4]);

/// The rows the pass writes, per map.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rows {
    /// `locator_table` keys (the value is a timestamp).
    pub locator: BTreeSet<u64>,
    /// `function_table`: key → behavior.
    pub function: BTreeMap<u64, u32>,
    /// `node_src_addr_table[0]`.
    pub node_src: Option<[u8; 16]>,
    /// `vrf_table`: key → (VRF table, egress kind); counters start at zero.
    pub vrf: BTreeMap<u64, (u32, u32)>,
    /// `ifindex_vrf_table`: ifindex → (Block, Argument).
    pub ifindex: BTreeMap<u32, (u64, u16)>,
    /// `egress_route_table` pass-through rows (the value is 32 zero bytes).
    pub egress: BTreeSet<EgressKey>,
    /// `egress_route_table` shard routes: key → the 32 value bytes.
    pub shard: BTreeMap<EgressKey, Vec<u8>>,
    /// `ifindex_egress_kind_table`: ifindex → egress kind.
    pub egress_kind: BTreeMap<u32, u32>,
    /// `tenant_gw_table`: ifindex → gateways.
    pub gateways: BTreeMap<u32, Gateways>,
    /// `vpc_attribution_table`: VRF key → (VPC, attachment) numbers (the generation is a
    /// timestamp).
    pub attribution: BTreeMap<u64, (u64, u32)>,
}

/// Finds the attachments in the kernel as the pass does; `table_of` is the routing domain's
/// table of a host interface (its VRF's table; `None` outside any domain, which the pass skips).
pub fn discover(
    nl: &Netlink,
    table_of: impl Fn(&Link) -> Option<u32>,
) -> Result<Vec<Found>, NetError> {
    let mut found = Vec::new();
    for link in nl.links()? {
        let host_side = link.name.len() == 14
            && link.name.starts_with('G')
            && link.name.ends_with('H')
            && link.name[1..13].bytes().all(|b| b.is_ascii_alphanumeric());
        let kind = match link.kind.as_deref() {
            Some("veth") => EGRESS_KIND_VETH,
            Some("tun") => EGRESS_KIND_TAP,
            _ => continue,
        };
        let Some(table) = table_of(&link).filter(|_| host_side) else {
            continue;
        };
        let (mut local, mut gateways) = (Vec::new(), None);
        for family in [galactic_core::ip::Family::V6, galactic_core::ip::Family::V4] {
            // A kernel route of this table out of the link would be a connected route of an
            // address with a prefix route; the masters add none (noprefixroute, or /32).
            local.extend(
                nl.routes(family, table)?
                    .into_iter()
                    .filter(|r| r.dev == Some(link.index) && r.gateway.is_none())
                    .filter(|r| r.kind == RouteKind::Unicast && !r.scope_link)
                    .map(|r| r.dst),
            );
        }
        for addr in nl.addresses(link.index)? {
            let ip = addr.ip();
            let link_local = match ip {
                IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
                IpAddr::V4(v4) => v4.is_link_local(),
            };
            if !link_local {
                local.push(IpNetwork::from(ip));
                set_gateway(gateways.get_or_insert(([0; 16], [0; 4])), ip);
            }
        }
        found.push(Found {
            name: link.name.clone(),
            ifindex: link.index,
            kind,
            table,
            local,
            gateways,
        });
    }
    found.sort_by_key(|f| f.ifindex);
    Ok(found)
}

/// `ip` as its family's gateway unless that family has one.
fn set_gateway(gw: &mut Gateways, ip: IpAddr) {
    match ip {
        IpAddr::V6(v6) if gw.0 == [0; 16] => gw.0 = v6.octets(),
        IpAddr::V4(v4) if gw.1 == [0; 4] => gw.1 = v4.octets(),
        _ => {}
    }
}

/// The CRDs the pass reads, as the API server (or the local store) holds them.
pub struct Crds<'a> {
    /// This node's name.
    pub node: &'a str,
    /// Every BGPRouter of the namespace.
    pub routers: &'a [Value],
    /// Every BGPVRFInstance of the namespace.
    pub vrf_instances: &'a [Value],
    /// Every BGPAdvertisement of the namespace.
    pub advertisements: &'a [Value],
}

/// The host conflist's egress keys as the pass uses them, with the next hop it resolves: the
/// VPCs it routes (`vpcs`, base62 as in the interface names, unpadded) get `::/0` and each
/// NAT64 /96 in their table toward `sid` with the Argument set to their VRF id.
pub struct Egress<'a> {
    /// The first configured shard SID that resolves.
    pub sid: std::net::Ipv6Addr,
    /// The NAT64 prefixes (/96).
    pub nat64: &'a [ipnetwork::Ipv6Network],
    /// The output link, next-hop MAC and own MAC.
    pub link: (u32, [u8; 6], [u8; 6]),
    /// The VPCs whose networks opted in.
    pub vpcs: &'a [&'a str],
}

/// The shard routes of a VRF: `::/0` and each NAT64 prefix, the SID's Argument rewritten.
fn shard_routes(rows: &mut Rows, e: &Egress<'_>, table: u32, argument: u16) {
    let mut sid = e.sid.octets();
    sid[8] = (sid[8] & 0xF0) | (argument >> 8) as u8;
    sid[9] = (argument & 0xFF) as u8;
    let mut value = sid.to_vec();
    value.extend_from_slice(&e.link.0.to_ne_bytes());
    value.extend_from_slice(&e.link.1);
    value.extend_from_slice(&e.link.2);
    let default = ipnetwork::Ipv6Network::new(std::net::Ipv6Addr::UNSPECIFIED, 0).ok();
    for prefix in default.iter().chain(e.nat64) {
        rows.shard
            .insert(egress_key(table, IpNetwork::V6(*prefix)), value.clone());
    }
}

/// The rows the pass writes into empty maps for `found`. `None` when the node has no router
/// with an SRv6 identity (the pass writes nothing).
pub fn compute(crds: &Crds<'_>, found: &[Found], egress: Option<&Egress<'_>>) -> Option<Rows> {
    let router = crds
        .routers
        .iter()
        .find(|r| r["spec"]["targetRef"]["name"] == crds.node)?;
    let router_name = router["metadata"]["name"].as_str()?;
    let block = Block::from_locator(router["spec"]["srv6Locator"].as_str()?)
        .ok()?
        .value();
    let node_id = u16::try_from(router["spec"]["nodeID"].as_u64()?).ok()?;
    let on_router = |o: &&Value| o["spec"]["routerRef"]["name"] == router_name;
    let vrf_ids: BTreeMap<&str, u64> = crds
        .vrf_instances
        .iter()
        .filter(on_router)
        .filter_map(|v| {
            Some((
                v["metadata"]["name"].as_str()?,
                v["spec"]["vrfID"].as_u64()?,
            ))
        })
        .collect();
    let mut rows = Rows::default();
    for a in found {
        let (vpc, att) = (unpad(&a.name[1..10]), unpad(&a.name[10..13]));
        let Some(argument) = argument(&vrf_ids, vpc, crds.node) else {
            continue;
        };
        let mut local = a.local.clone();
        let listed = advertised(crds, router_name, vpc, att);
        // ADD had an IPAM result (the advertisement lists its prefixes) but no gateway: an
        // all-zero row.
        let gateways = a
            .gateways
            .or((!listed.is_empty()).then_some(([0; 16], [0; 4])));
        local.extend(listed);
        fill(&mut rows, a, block, argument, &local);
        if let Some(e) = egress.filter(|e| e.vpcs.contains(&vpc)) {
            shard_routes(&mut rows, e, a.table, argument);
        }
        rows.egress_kind.insert(a.ifindex, a.kind);
        if let Some(gw) = gateways {
            rows.gateways.insert(a.ifindex, gw);
        }
        if let Some(id) = identity(vpc, att) {
            let key = (block << 12) | u64::from(argument);
            rows.attribution.entry(key).or_insert(id);
        }
    }
    if !rows.ifindex.is_empty() {
        rows.locator.insert((block << 16) | u64::from(node_id));
        rows.function.insert((block << 4) | 0xE, 1);
        rows.node_src = Some(node_sid_base(block, node_id));
    }
    Some(rows)
}

/// One attachment's rows; a per-VPC row already written (by a lower ifindex) stays.
fn fill(rows: &mut Rows, a: &Found, block: u64, argument: u16, local: &[IpNetwork]) {
    rows.vrf
        .entry((block << 12) | u64::from(argument))
        .or_insert((a.table, a.kind));
    rows.ifindex.insert(a.ifindex, (block, argument));
    for prefix in local {
        rows.egress.insert(egress_key(a.table, *prefix));
    }
}

/// The VPC's Argument on this node: the BGPVRFInstance `{vpc}-{node}`, named by the VPC in hex
/// (the current shape) or base62 (the older one), with a VRF id in the Argument range.
fn argument(vrf_ids: &BTreeMap<&str, u64>, vpc: &str, node: &str) -> Option<u16> {
    let keys = [base62_to_hex(vpc)?, vpc.to_owned()];
    let id = keys
        .iter()
        .find_map(|k| vrf_ids.get(format!("{k}-{node}").as_str()))?;
    u16::try_from(*id)
        .ok()
        .filter(|id| (1..=0xFFF).contains(id))
}

/// The guest prefixes the attachment's BGPAdvertisement (the newest name,
/// `{hexvpc}-{hexatt}-{node}`) lists on this router.
fn advertised(crds: &Crds<'_>, router: &str, vpc: &str, att: &str) -> Vec<IpNetwork> {
    let (Some(vpc), Some(att)) = (base62_to_hex(vpc), base62_to_hex(att)) else {
        return Vec::new();
    };
    let name = format!("{vpc}-{att}-{}", crds.node);
    crds.advertisements
        .iter()
        .filter(|a| a["metadata"]["name"] == name.as_str())
        .filter(|a| a["spec"]["routerRef"]["name"] == router)
        .flat_map(|a| {
            a["spec"]["prefixes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p.as_str()?.parse::<IpNetwork>().ok())
        .collect()
}

/// The VPC (48 bits) and attachment (16 bits) numbers of base62 identifiers, as upstream
/// decodes them for `vpc_attribution_table`.
fn identity(vpc: &str, att: &str) -> Option<(u64, u32)> {
    let vpc = u64::from_str_radix(&base62_to_hex(vpc)?, 16).ok()?;
    let att = u32::from_str_radix(&base62_to_hex(att)?, 16).ok()?;
    (vpc < 1 << 48 && att <= 0xFFFF).then_some((vpc, att))
}

/// An interface name's zero padding removed (CRD names carry none).
fn unpad(s: &str) -> &str {
    match s.trim_start_matches('0') {
        "" => "0",
        t => t,
    }
}

/// The node's End.DT46 SID with Argument 0: Block, Node-ID, function `0xE`, zeros.
pub fn node_sid_base(block: u64, node_id: u16) -> [u8; 16] {
    let mut addr = [0u8; 16];
    addr[..6].copy_from_slice(&block.to_be_bytes()[2..]);
    addr[6..8].copy_from_slice(&node_id.to_be_bytes());
    addr[8] = 0xE0;
    addr
}

/// The dump key of the pass-through row of `prefix` (masked) in `table`.
pub fn egress_key(table: u32, prefix: IpNetwork) -> EgressKey {
    let net = masked(prefix);
    let mut addr = [0u8; 16];
    let family = match net.network() {
        IpAddr::V6(v6) => {
            addr = v6.octets();
            FAMILY_IPV6
        }
        IpAddr::V4(v4) => {
            addr[..4].copy_from_slice(&v4.octets());
            FAMILY_IPV4
        }
    };
    (40 + u32::from(net.prefix()), table, family, addr)
}
