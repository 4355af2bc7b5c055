//! What the kernel holds of a VPC's live attachments, read for those attachments alone: every
//! request names the VPC's VRF, its table, or one of its interfaces, and the kernel filters the
//! answer (`NETLINK_GET_STRICT_CHK`, see `galactic_core::net::netlink`). An ADD's convergence
//! then costs its own VPC's size whatever else the node holds, and a GC's convergences together
//! cost the node's size once, not once per VPC (a node-wide dump of links, addresses,
//! neighbours and map elements per convergence made an ADD at 1 000 attachments over 250 VPCs
//! read every one of them, and its GC read them 250 times).
//!
//! - VRF mode: the VRF's members in one dump (`IFLA_MASTER`); an interface not among them (one
//!   to enslave again) is looked up by name.
//! - Table mode has no device that groups a VPC's interfaces, so each is looked up by name, with
//!   its element of the VPC-mark map (by key).
//! - Both: the VPC table's routes (by table), each interface's addresses (by interface;
//!   addresses have no controller filter) and each of its permanent neighbours (by interface
//!   and address: a neighbour dump walks the node's every entry in the kernel, even filtered).

use galactic_core::attachment::Record;
use galactic_core::ident::{vrf_name, VpcId};
use galactic_core::ip::Family;
use galactic_core::net::domain::{marks, Backend, Domain};
use galactic_core::net::netlink::{format_mac, Link, NeighState, Netlink, RouteSpec};
use galactic_core::net::nftables::map::Element;
use galactic_core::net::NetError;
use ipnetwork::IpNetwork;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// A live attachment whose host interface exists.
pub(super) struct Interface<'r> {
    /// Its record.
    pub record: &'r Record,
    /// Its host interface as the kernel has it.
    pub link: Link,
    /// Table mode: its element of the node's VPC-mark map, if it has one.
    pub element: Option<Element>,
}

/// The VPC's VRF device, when the domain is a VRF's and the device exists.
pub(super) fn vrf(host: &Netlink, domain: &Domain, vpc: &VpcId) -> Result<Option<Link>, NetError> {
    if domain.backend != Backend::Vrf {
        return Ok(None);
    }
    Ok(host
        .link(&vrf_name(vpc))?
        .filter(|l| l.kind.as_deref() == Some("vrf")))
}

/// The live attachments whose host interface exists, with it (an attachment whose interface is
/// gone is its DEL's or GC's). `whole` when `live` is every live attachment of the VPC: a
/// VRF's members are then read in one dump, else each interface by its name (a window of a
/// few attachments costs a few lookups, not the VRF's every member).
pub(super) fn interfaces<'r>(
    host: &Netlink,
    domain: &Domain,
    vrf: Option<&Link>,
    live: &'r [Record],
    whole: bool,
) -> Result<Vec<Interface<'r>>, NetError> {
    let members: HashMap<String, Link> = match vrf.filter(|_| whole) {
        Some(vrf) => host
            .controller_links(vrf.index)?
            .into_iter()
            .map(|l| (l.name.clone(), l))
            .collect(),
        None => HashMap::new(),
    };
    let mut found = Vec::new();
    for record in live {
        let link = match members.get(&record.host_ifname) {
            Some(link) => link.clone(),
            None => match host.link(&record.host_ifname)? {
                Some(link) => link,
                None => continue,
            },
        };
        let element = match domain.backend {
            Backend::Table => marks::element(&link.name)?,
            Backend::Vrf => None,
        };
        found.push(Interface {
            record,
            link,
            element,
        });
    }
    Ok(found)
}

/// What the host gateways are compared against, read once the memberships are restored
/// (enslaving a device cycles it down and up, which flushes its IPv6 addresses and its
/// neighbours).
pub(super) struct Gateways {
    /// The VPC table's routes, both families.
    pub routes: Vec<RouteSpec>,
    /// (link index, address) of the interfaces.
    pub addresses: HashSet<(u32, IpNetwork)>,
    /// (link index, address, MAC in lower case) of the interfaces' permanent neighbours.
    pub neighbours: HashSet<(u32, IpAddr, String)>,
}

impl Gateways {
    /// Reads them for `present`, the interfaces that exist: the VPC table's routes in one dump
    /// per family when `present` is the whole VPC (else each interface's routes in the table,
    /// by a dump the kernel filters by device), each interface's addresses in one dump the
    /// kernel filters, and each expected permanent neighbour by one lookup (a neighbour dump,
    /// filtered or not, walks every entry of the node in the kernel).
    pub(super) fn read(
        host: &Netlink,
        domain: &Domain,
        present: &[Interface<'_>],
        whole: bool,
    ) -> Result<Self, NetError> {
        let mut routes = Vec::new();
        for family in Family::ALL {
            if whole {
                routes.extend(host.routes(family, domain.table)?);
                continue;
            }
            for Interface { link, .. } in present {
                routes.extend(host.routes_via(family, domain.table, link.index)?);
            }
        }
        let mut addresses = HashSet::new();
        let mut neighbours = HashSet::new();
        for Interface { record, link, .. } in present {
            let Some(configured) = &record.configured else {
                continue;
            };
            addresses.extend(
                host.addresses(link.index)?
                    .into_iter()
                    .map(|a| (link.index, a)),
            );
            if configured.guest_mac.is_none() {
                continue;
            }
            for a in configured.assignments() {
                let ip = a.address.ip();
                if let Some(mac) = host
                    .neighbour(link.index, ip)?
                    .filter(|n| n.state == NeighState::Permanent)
                    .and_then(|n| n.lladdr.filter(|b| b.len() == 6))
                {
                    neighbours.insert((link.index, ip, format_mac(&mac)));
                }
            }
        }
        Ok(Self {
            routes,
            addresses,
            neighbours,
        })
    }
}
