//! The `table` backend: a VPC table plus policy rules (kernels without VRF).
//!
//! The recipe and its pitfalls are recorded in `docs/routing-domains.md`:
//! - node-wide, once: the `local` rule moves from priority 0 to 32765 (added before the old one is
//!   deleted, so the host is never without it), because the global local table at 0 would let a
//!   pod reach other VPCs' gateways and every host address; `icmp_errors_use_inbound_ifaddr=1` so
//!   ICMP errors about VPC packets are sourced from the gateway and routed back into the VPC; an
//!   input filter so host services bound to the wildcard address are not reachable from pods;
//! - per VPC: `unreachable default` in both families (no fall-through to main);
//! - per gateway: `local <gw> dev lo table T` (ARP/local delivery once the local rule moved) and
//!   `iif lo from <gw> lookup T` at 1001 (host replies go back into the VPC, not out the uplink);
//! - per host interface: `iif <H> lookup T` at 1000, removed explicitly on DEL because rules
//!   outlive their interface.

use super::super::firewall;
use super::super::netlink::{Link, Netlink, RouteKind, RouteSpec, RuleSpec};
use super::super::sysctl;
use super::super::NetError;
use super::Domain;
use crate::ip::Family;
use ipnetwork::IpNetwork;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// Rules steering a host interface's traffic into its VPC table.
pub const ATTACH_PRIORITY: u32 = 1000;
/// Rules steering packets the host sends from a VPC gateway into the VPC table.
pub const GATEWAY_PRIORITY: u32 = 1001;
/// Where the `local` table's rule moves to.
pub const LOCAL_PRIORITY: u32 = 32765;
const LOCAL_TABLE: u32 = 255;

fn unreachable_default(family: Family, table: u32) -> RouteSpec {
    RouteSpec {
        dst: family.default_route(),
        table,
        kind: RouteKind::Unreachable,
        dev: None,
        gateway: None,
        onlink: false,
        scope_link: false,
    }
}

fn local_rule(family: Family, priority: u32) -> RuleSpec {
    RuleSpec {
        family,
        priority,
        iif: None,
        from: None,
        table: LOCAL_TABLE,
    }
}

fn attach_rule(family: Family, table: u32, ifname: &str) -> RuleSpec {
    RuleSpec {
        family,
        priority: ATTACH_PRIORITY,
        iif: Some(ifname.to_owned()),
        from: None,
        table,
    }
}

fn gateway_rule(table: u32, gw: IpAddr) -> RuleSpec {
    RuleSpec {
        family: Family::of(gw),
        priority: GATEWAY_PRIORITY,
        iif: Some("lo".into()),
        from: Some(IpNetwork::from(gw)),
        table,
    }
}

fn gateway_route(nl: &Netlink, table: u32, gw: IpAddr) -> Result<RouteSpec, NetError> {
    let lo = nl.require_link("lo")?;
    Ok(RouteSpec {
        dst: IpNetwork::from(gw),
        table,
        kind: RouteKind::Local,
        dev: Some(lo.index),
        gateway: None,
        onlink: false,
        scope_link: false,
    })
}

/// Node-wide preparation, idempotent: moves the local rule, sets the ICMP source sysctl and the
/// host-service filter.
pub fn prepare_node(nl: &Netlink) -> Result<(), NetError> {
    move_local_rule(nl)?;
    sysctl::set_global("ipv4.icmp_errors_use_inbound_ifaddr", "1")?;
    firewall::protect_host_services()
}

/// Moves the `local` rule from priority 0 to [`LOCAL_PRIORITY`] (both families; the new rule is
/// added before the old one is deleted, so the host is never without it). Idempotent. Both
/// backends need it: a VRF's l3mdev rule (priority 1000) comes after priority 0 too, so with the
/// rule at 0 every host address is local to pods of every VPC.
pub fn move_local_rule(nl: &Netlink) -> Result<(), NetError> {
    for family in Family::ALL {
        let rules = nl.rules(family)?;
        if !rules.contains(&local_rule(family, LOCAL_PRIORITY)) {
            nl.add_rule(&local_rule(family, LOCAL_PRIORITY))?;
        }
        if rules.contains(&local_rule(family, 0)) {
            nl.delete_rule(&local_rule(family, 0))?;
        }
    }
    Ok(())
}

/// `unreachable default` in `table`, both families: a lookup in the VPC table never falls
/// through to later rules (`main`, or `local` once moved). Both backends need it.
pub fn close_table(nl: &Netlink, table: u32) -> Result<(), NetError> {
    for family in Family::ALL {
        nl.replace_route(&unreachable_default(family, table))?;
    }
    Ok(())
}

/// Creates (or repairs) the VPC table's base routes.
pub fn ensure(nl: &Netlink, table: u32) -> Result<(), NetError> {
    prepare_node(nl)?;
    close_table(nl, table)
}

/// Differences from what isolates a VPC on either backend ([`move_local_rule`],
/// [`close_table`]) for one family.
pub fn isolation_problems(
    nl: &Netlink,
    family: Family,
    table: u32,
) -> Result<Vec<String>, NetError> {
    let mut problems = Vec::new();
    if nl.rules(family)?.contains(&local_rule(family, 0)) {
        problems.push(format!(
            "{} local table rule is still at priority 0 (leaks across VPCs)",
            family.label()
        ));
    }
    if !nl
        .routes(family, table)?
        .iter()
        .any(|r| r.kind == RouteKind::Unreachable && r.dst.prefix() == 0)
    {
        problems.push(format!(
            "{} 'unreachable default' is missing from table {table}",
            family.label()
        ));
    }
    Ok(problems)
}

/// Makes `gw` local inside the VPC table and routes host packets sourced from it into the table.
pub fn add_gateway(nl: &Netlink, table: u32, gw: IpAddr) -> Result<(), NetError> {
    nl.replace_route(&gateway_route(nl, table, gw)?)?;
    nl.add_rule(&gateway_rule(table, gw))
}

/// Removes what [`add_gateway`] installed.
pub fn remove_gateway(nl: &Netlink, table: u32, gw: IpAddr) -> Result<(), NetError> {
    nl.delete_rule(&gateway_rule(table, gw))?;
    nl.delete_route(&gateway_route(nl, table, gw)?)
}

/// Steers the host interface's traffic (both families) into the table.
pub fn attach(nl: &Netlink, table: u32, ifname: &str) -> Result<(), NetError> {
    for family in Family::ALL {
        nl.add_rule(&attach_rule(family, table, ifname))?;
    }
    Ok(())
}

/// Removes the host interface's rules.
pub fn detach(nl: &Netlink, table: u32, ifname: &str) -> Result<(), NetError> {
    for family in Family::ALL {
        nl.delete_rule(&attach_rule(family, table, ifname))?;
    }
    Ok(())
}

/// Differences from the recipe for this domain and host interface.
pub fn check(nl: &Netlink, domain: &Domain, host: &Link) -> Result<Vec<String>, NetError> {
    let mut problems = Vec::new();
    for family in Family::ALL {
        let rules = nl.rules(family)?;
        if !rules.contains(&attach_rule(family, domain.table, &host.name)) {
            problems.push(format!(
                "{} rule 'iif {} lookup {}' is missing",
                family.label(),
                host.name,
                domain.table
            ));
        }
        problems.extend(isolation_problems(nl, family, domain.table)?);
        let routes = nl.routes(family, domain.table)?;
        for gw in domain.gateways.iter().filter(|g| Family::of(**g) == family) {
            if !routes
                .iter()
                .any(|r| r.kind == RouteKind::Local && r.dst.ip() == *gw)
            {
                problems.push(format!(
                    "local route for gateway {gw} is missing from table {}",
                    domain.table
                ));
            }
            if !rules.contains(&gateway_rule(domain.table, *gw)) {
                problems.push(format!(
                    "rule 'iif lo from {gw} lookup {}' is missing",
                    domain.table
                ));
            }
        }
    }
    Ok(problems)
}

/// Removes the VPC's rules and every route of its table.
pub fn remove(nl: &Netlink, domain: &Domain) -> Result<(), NetError> {
    for family in Family::ALL {
        for rule in nl
            .rules(family)?
            .into_iter()
            .filter(|r| r.table == domain.table)
        {
            nl.delete_rule(&rule)?;
        }
        for route in nl.routes(family, domain.table)? {
            nl.delete_route(&route)?;
        }
    }
    Ok(())
}

/// Tables any route or rule of the node refers to.
pub fn tables_in_use(nl: &Netlink) -> Result<BTreeSet<u32>, NetError> {
    let mut used = BTreeSet::new();
    for family in Family::ALL {
        used.extend(nl.all_routes(family)?.into_iter().map(|r| r.table));
        used.extend(nl.rules(family)?.into_iter().map(|r| r.table));
    }
    Ok(used)
}
