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
use crate::ident::VpcId;
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
/// host-service filter. Returns whether the local rule had to be moved.
pub fn prepare_node(nl: &Netlink) -> Result<bool, NetError> {
    let moved = move_local_rule(nl)?;
    sysctl::set_global("ipv4.icmp_errors_use_inbound_ifaddr", "1")?;
    firewall::protect_host_services()?;
    Ok(moved)
}

/// Moves the `local` rule from priority 0 to [`LOCAL_PRIORITY`] (both families; the new rule is
/// added before the old one is deleted, so the host is never without it). Idempotent; returns
/// whether anything changed. Both backends need it: a VRF's l3mdev rule (priority 1000) comes
/// after priority 0 too, so with the rule at 0 every host address is local to pods of every VPC.
pub fn move_local_rule(nl: &Netlink) -> Result<bool, NetError> {
    let mut changed = false;
    for family in Family::ALL {
        let rules = nl.rules(family)?;
        if !rules.contains(&local_rule(family, LOCAL_PRIORITY)) {
            nl.add_rule(&local_rule(family, LOCAL_PRIORITY))?;
            changed = true;
        }
        if rules.contains(&local_rule(family, 0)) {
            nl.delete_rule(&local_rule(family, 0))?;
            changed = true;
        }
    }
    Ok(changed)
}

/// `unreachable default` in `table` for each family whose table has no default route: a lookup
/// in the VPC table never falls through to later rules (`main`, or `local` once moved). A
/// default route already there (galactic-router's, in an adopted table) is left alone: the route
/// is added with `NLM_F_EXCL`. Returns the families it was added to. Both backends need it.
pub fn close_table(nl: &Netlink, table: u32) -> Result<Vec<Family>, NetError> {
    let mut added = Vec::new();
    for family in Family::ALL {
        match nl.add_route(&unreachable_default(family, table)) {
            Ok(()) => added.push(family),
            Err(e) if e.is_exists() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(added)
}

/// The families whose `table` has no default route ([`close_table`] would add one to each).
pub fn open_families(nl: &Netlink, table: u32) -> Result<Vec<Family>, NetError> {
    let mut open = Vec::new();
    for family in Family::ALL {
        if !has_default(&nl.routes(family, table)?) {
            open.push(family);
        }
    }
    Ok(open)
}

/// Removes the `unreachable default` [`close_table`] added to `family` (undo of an adoption).
pub fn reopen(nl: &Netlink, table: u32, family: Family) -> Result<(), NetError> {
    nl.delete_route(&unreachable_default(family, table))
}

fn has_default(routes: &[RouteSpec]) -> bool {
    routes.iter().any(|r| r.dst.prefix() == 0)
}

/// Creates (or repairs) the VPC's table: node-wide preparation, the table's closing routes and
/// the recorded gateways' routes and rules. Returns what was missing (for the log).
pub fn ensure(nl: &Netlink, domain: &Domain) -> Result<Vec<String>, NetError> {
    let mut restored = Vec::new();
    if prepare_node(nl)? {
        restored.push("moved the local rule after the VPC rules".to_owned());
    }
    for family in close_table(nl, domain.table)? {
        restored.push(format!(
            "{} 'unreachable default' in table {}",
            family.label(),
            domain.table
        ));
    }
    let rules = [nl.rules(Family::V4)?, nl.rules(Family::V6)?].concat();
    for gw in &domain.gateways {
        if !rules.contains(&gateway_rule(domain.table, *gw)) {
            restored.push(format!("the routes and rule of gateway {gw}"));
        }
        add_gateway(nl, domain.table, *gw)?;
    }
    Ok(restored)
}

/// Differences from what isolates a VPC on either backend ([`move_local_rule`],
/// [`close_table`]) for one family; each says what restores it.
pub fn isolation_problems(
    nl: &Netlink,
    family: Family,
    table: u32,
    vpc: &VpcId,
) -> Result<Vec<String>, NetError> {
    Ok(isolation_differences(
        family,
        table,
        vpc,
        &nl.rules(family)?,
        &nl.routes(family, table)?,
    ))
}

/// [`isolation_problems`] on rules and table routes already listed.
fn isolation_differences(
    family: Family,
    table: u32,
    vpc: &VpcId,
    rules: &[RuleSpec],
    routes: &[RouteSpec],
) -> Vec<String> {
    let mut problems = Vec::new();
    if rules.contains(&local_rule(family, 0)) {
        problems.push(format!(
            "{} local table rule is still at priority 0 (leaks across VPCs); the next ADD on this \
             node moves it",
            family.label()
        ));
    }
    if !has_default(routes) {
        problems.push(format!(
            "{} 'unreachable default' is missing from table {table} (VPC {vpc}'s packets fall \
             through to the main table); the next ADD of the VPC on this node restores it",
            family.label()
        ));
    }
    problems
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

/// The families whose `iif <ifname> lookup <table>` rule is not among `rules` (a dump of both
/// families' rules).
pub fn missing_attach_rules(rules: &[RuleSpec], table: u32, ifname: &str) -> Vec<Family> {
    Family::ALL
        .into_iter()
        .filter(|f| !rules.contains(&attach_rule(*f, table, ifname)))
        .collect()
}

/// Adds the host interface's rule of one family (the repair of one [`missing_attach_rules`]
/// names).
pub fn attach_family(
    nl: &Netlink,
    table: u32,
    ifname: &str,
    family: Family,
) -> Result<(), NetError> {
    nl.add_rule(&attach_rule(family, table, ifname))
}

/// Removes the host interface's rules.
pub fn detach(nl: &Netlink, table: u32, ifname: &str) -> Result<(), NetError> {
    for family in Family::ALL {
        nl.delete_rule(&attach_rule(family, table, ifname))?;
    }
    Ok(())
}

/// How the VPC's table and rules differ from the record; each message says what restores it.
pub fn problems(nl: &Netlink, domain: &Domain, vpc: &VpcId) -> Result<Vec<String>, NetError> {
    let mut problems = Vec::new();
    let restores = format!("the next ADD of VPC {vpc} on this node restores it, or CNI GC");
    for family in Family::ALL {
        // Listed once for both checks: the table's size is the VPC's routes.
        let rules = nl.rules(family)?;
        let routes = nl.routes(family, domain.table)?;
        problems.extend(isolation_differences(
            family,
            domain.table,
            vpc,
            &rules,
            &routes,
        ));
        for gw in domain.gateways.iter().filter(|g| Family::of(**g) == family) {
            if !routes
                .iter()
                .any(|r| r.kind == RouteKind::Local && r.dst.ip() == *gw)
            {
                problems.push(format!(
                    "local route for gateway {gw} is missing from table {}; {restores}",
                    domain.table
                ));
            }
            if !rules.contains(&gateway_rule(domain.table, *gw)) {
                problems.push(format!(
                    "rule 'iif lo from {gw} lookup {}' is missing; {restores}",
                    domain.table
                ));
            }
        }
    }
    Ok(problems)
}

/// Whether the host interface's rules steer it into the table.
pub fn membership(
    nl: &Netlink,
    table: u32,
    vpc: &VpcId,
    host: &Link,
) -> Result<Vec<String>, NetError> {
    let mut problems = Vec::new();
    for family in Family::ALL {
        if !nl
            .rules(family)?
            .contains(&attach_rule(family, table, &host.name))
        {
            problems.push(format!(
                "{} rule 'iif {} lookup {table}' is missing; {}",
                family.label(),
                host.name,
                super::restored_by(vpc),
            ));
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
