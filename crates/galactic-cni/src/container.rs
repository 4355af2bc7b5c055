//! The container end of a veth attachment, configured through a netlink socket opened inside
//! the container's namespace: its addresses, an on-link route to each gateway and the default
//! routes through them.

use galactic_core::ip::{Assignment, Family};
use galactic_core::net::netlink::{AddrFlags, Link, Netlink, RouteKind, RouteSpec};
use galactic_core::net::NetError;
use galactic_master::Container;
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// The main routing table.
const MAIN_TABLE: u32 = 254;

/// The veth's container end.
pub struct ContainerEnd;

impl Container for ContainerEnd {
    fn configure(
        &self,
        nl: &Netlink,
        link: &Link,
        assigned: &[Assignment],
    ) -> Result<(), NetError> {
        configure(nl, link, assigned)
    }

    fn differences(
        &self,
        nl: &Netlink,
        link: &Link,
        assigned: &[Assignment],
    ) -> Result<Vec<String>, NetError> {
        differences(nl, link, assigned)
    }
}

/// Adds the addresses, an on-link route to each gateway and a default route via it.
fn configure(nl: &Netlink, guest: &Link, assigned: &[Assignment]) -> Result<(), NetError> {
    nl.set_up(guest.index)?;
    for a in assigned {
        // DAD is pointless here (the address is unique by allocation) and would leave it tentative.
        nl.add_address(
            guest.index,
            a.address,
            AddrFlags {
                nodad: a.address.is_ipv6(),
                noprefixroute: false,
            },
        )?;
    }
    for gw in assigned.iter().filter_map(|a| a.gateway) {
        nl.replace_route(&RouteSpec::device(
            IpNetwork::from(gw),
            MAIN_TABLE,
            guest.index,
        ))?;
        install_default(nl, guest, gw)?;
    }
    Ok(())
}

/// A default route via `gw` on the guest link, unless one exists; one via another gateway or
/// device is refused rather than silently replaced.
fn install_default(nl: &Netlink, guest: &Link, gw: IpAddr) -> Result<(), NetError> {
    let existing = nl
        .routes(Family::of(gw), MAIN_TABLE)?
        .into_iter()
        .find(|r| r.dst.prefix() == 0 && r.kind == RouteKind::Unicast);
    match existing {
        Some(r) if r.gateway == Some(gw) && r.dev == Some(guest.index) => Ok(()),
        Some(r) => Err(NetError::Conflict(format!(
            "the container already has a default route {}; refusing to replace it with one via {gw} on {}",
            describe_default(nl, &r),
            guest.name
        ))),
        None => nl.replace_route(&default_via(guest, gw)),
    }
}

/// An existing default route as `ip route` would show it: `via GW dev NAME`.
fn describe_default(nl: &Netlink, route: &RouteSpec) -> String {
    let mut text = String::new();
    if let Some(gw) = route.gateway {
        text += &format!("via {gw}");
    }
    if let Some(index) = route.dev {
        let name = nl
            .links()
            .ok()
            .and_then(|links| links.into_iter().find(|l| l.index == index))
            .map_or_else(|| format!("index {index}"), |l| l.name);
        text += &format!("{}dev {name}", if text.is_empty() { "" } else { " " });
    }
    if text.is_empty() {
        text = "without a gateway or device".into();
    }
    text
}

fn default_via(guest: &Link, gw: IpAddr) -> RouteSpec {
    RouteSpec {
        dst: Family::of(gw).default_route(),
        table: MAIN_TABLE,
        kind: RouteKind::Unicast,
        dev: Some(guest.index),
        gateway: Some(gw),
        onlink: true,
        scope_link: false,
    }
}

/// What differs between the guest link and the expected addresses and default routes.
fn differences(
    nl: &Netlink,
    guest: &Link,
    assigned: &[Assignment],
) -> Result<Vec<String>, NetError> {
    let present = nl.addresses(guest.index)?;
    let mut problems = Vec::new();
    for a in assigned {
        if !present.contains(&a.address) {
            problems.push(format!(
                "address {} is not on {} in the container",
                a.address, guest.name
            ));
        }
        if let Some(gw) = a.gateway {
            let has_default = nl.routes(Family::of(gw), MAIN_TABLE)?.iter().any(|r| {
                r.dst.prefix() == 0 && r.gateway == Some(gw) && r.dev == Some(guest.index)
            });
            if !has_default {
                problems.push(format!(
                    "default route via {gw} on {} is missing in the container",
                    guest.name
                ));
            }
        }
    }
    Ok(problems)
}
