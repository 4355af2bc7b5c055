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
//! - per VPC: `fwmark <mark>/<mask> lookup T` at 1000 in both families, and per host interface
//!   one element `<H> : <mark>` of the node's VPC-mark map ([`super::marks`]), removed explicitly
//!   on DEL because it outlives its interface. Policy rules grow with VPCs, not attachments: the
//!   kernel walks the rule list for every packet.
//!
//! Releases before the marks steered each host interface by its own rule `iif <H> lookup T` at
//! 1000 ([`legacy_attach_rule`]); the VPC's convergence retires those once the interface's
//! element is in place ([`retire_legacy_rules`]), and DEL removes one left.

use super::super::firewall;
use super::super::netlink::{Link, MarkMatch, Netlink, RouteKind, RouteSpec, RuleSpec};
use super::super::nftables::map::Element;
use super::super::sysctl;
use super::super::NetError;
use super::marks::{self, Mark};
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
        fwmark: None,
        table: LOCAL_TABLE,
    }
}

/// The rule of a previous release steering one host interface into the table.
pub fn legacy_attach_rule(family: Family, table: u32, ifname: &str) -> RuleSpec {
    RuleSpec {
        family,
        priority: ATTACH_PRIORITY,
        iif: Some(ifname.to_owned()),
        from: None,
        fwmark: None,
        table,
    }
}

/// The VPC's rule: packets of its mark look up its table.
fn vpc_rule(family: Family, table: u32, mark: Mark) -> RuleSpec {
    RuleSpec {
        family,
        priority: ATTACH_PRIORITY,
        iif: None,
        from: None,
        fwmark: Some(MarkMatch {
            mark: mark.value,
            mask: mark.mask,
        }),
        table,
    }
}

/// The domain's mark; a table-mode domain without one is a record `Domains::ensure` has not
/// completed.
fn mark_of(domain: &Domain) -> Result<Mark, NetError> {
    domain.mark.ok_or_else(|| NetError::NotFound {
        what: format!(
            "the firewall mark of VPC {}'s routing domain (its next ADD or CNI GC allocates one)",
            domain.vpc
        ),
    })
}

fn gateway_rule(table: u32, gw: IpAddr) -> RuleSpec {
    RuleSpec {
        family: Family::of(gw),
        priority: GATEWAY_PRIORITY,
        iif: Some("lo".into()),
        from: Some(IpNetwork::from(gw)),
        fwmark: None,
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

/// Node-wide preparation, idempotent: moves the local rule, sets the ICMP source sysctl, the
/// host-service filter and the VPC-mark chain. Returns what had to be restored.
pub fn prepare_node(nl: &Netlink) -> Result<Vec<String>, NetError> {
    let mut restored = Vec::new();
    if move_local_rule(nl)? {
        restored.push("moved the local rule after the VPC rules".to_owned());
    }
    sysctl::set_global("ipv4.icmp_errors_use_inbound_ifaddr", "1")?;
    // One chain dump, and on a node's first ADD one `nft` run for both (decision 0082).
    if firewall::prepare_table_mode()?.vpc_marks {
        restored.push("created the VPC-mark chain inet galactic vpc_marks".to_owned());
    }
    Ok(restored)
}

/// Moves the `local` rule from priority 0 to [`LOCAL_PRIORITY`] (both families; the new rule is
/// added before the old one is deleted, so the host is never without it). Idempotent; returns
/// whether anything changed. Both backends need it: a VRF's l3mdev rule (priority 1000) comes
/// after priority 0 too, so with the rule at 0 every host address is local to pods of every VPC.
/// Each step is one request the kernel answers with whether it changed anything: every ADD and
/// every domain a GC converges runs it, and a dump of the node's rules grows with its VPCs.
pub fn move_local_rule(nl: &Netlink) -> Result<bool, NetError> {
    let mut changed = false;
    for family in Family::ALL {
        changed |= nl.ensure_rule(&local_rule(family, LOCAL_PRIORITY))?;
        changed |= nl.remove_rule(&local_rule(family, 0))?;
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

/// Creates (or repairs) the VPC's table: node-wide preparation, the table's closing routes, the
/// VPC's mark rules and the recorded gateways' routes and rules. Returns what was missing (for
/// the log).
pub fn ensure(nl: &Netlink, domain: &Domain) -> Result<Vec<String>, NetError> {
    let mut restored = prepare_node(nl)?;
    for family in close_table(nl, domain.table)? {
        restored.push(format!(
            "{} 'unreachable default' in table {}",
            family.label(),
            domain.table
        ));
    }
    // Each rule is added unless the kernel has it (one request each, no dump of the node's
    // rules, which grow with its VPCs): this runs on every ADD and for every domain a GC
    // converges.
    let mark = mark_of(domain)?;
    for family in Family::ALL {
        if nl.ensure_rule(&vpc_rule(family, domain.table, mark))? {
            restored.push(format!(
                "{} rule 'fwmark {} lookup {}'",
                family.label(),
                mark.label(),
                domain.table
            ));
        }
    }
    for gw in &domain.gateways {
        if restore_gateway(nl, domain.table, *gw)? {
            restored.push(format!("the routes and rule of gateway {gw}"));
        }
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
    restore_gateway(nl, table, gw).map(|_| ())
}

/// [`add_gateway`]; returns whether the gateway's rule was missing.
fn restore_gateway(nl: &Netlink, table: u32, gw: IpAddr) -> Result<bool, NetError> {
    nl.replace_route(&gateway_route(nl, table, gw)?)?;
    nl.ensure_rule(&gateway_rule(table, gw))
}

/// Removes what [`add_gateway`] installed.
pub fn remove_gateway(nl: &Netlink, table: u32, gw: IpAddr) -> Result<(), NetError> {
    nl.delete_rule(&gateway_rule(table, gw))?;
    nl.delete_route(&gateway_route(nl, table, gw)?)
}

/// Steers the host interface's traffic (both families) into the table: its element in the
/// VPC-mark map.
pub fn attach(domain: &Domain, ifname: &str) -> Result<(), NetError> {
    // The interface's own element only: the map holds one per attachment of the node.
    marks::select(marks::element(ifname)?.as_slice(), ifname, mark_of(domain)?)
}

/// Whether the host interface's element is missing from `elements` (a dump of the map, or the
/// interface's own element as [`marks::element`] read it).
pub fn is_detached(elements: &[Element], domain: &Domain, ifname: &str) -> bool {
    domain
        .mark
        .is_none_or(|mark| !marks::is_selected(elements, ifname, mark))
}

/// Adds the host interface's element (the repair [`is_detached`] calls for).
pub fn reattach(elements: &[Element], domain: &Domain, ifname: &str) -> Result<(), NetError> {
    marks::select(elements, ifname, mark_of(domain)?)
}

/// Removes the host interface's element, and its rules of a previous release. Missing is
/// success.
pub fn detach(nl: &Netlink, table: u32, ifname: &str) -> Result<(), NetError> {
    marks::deselect(ifname)?;
    for family in Family::ALL {
        nl.delete_rule(&legacy_attach_rule(family, table, ifname))?;
    }
    Ok(())
}

/// Removes the rules of `table` that no longer select its traffic, now that `migrated` (host
/// interfaces whose elements are in place) are selected by mark: their own `iif` rules of a
/// previous release, and `fwmark` rules of another mark than the domain's (the mask changed).
/// Removed only after the new selection is in place, so the traffic is never cut off. `rules`
/// is a dump of both families. Returns the rules removed.
pub fn retire_legacy_rules(
    nl: &Netlink,
    domain: &Domain,
    rules: &[RuleSpec],
    migrated: &[&str],
) -> Result<Vec<RuleSpec>, NetError> {
    let current = domain.mark.map(|m| MarkMatch {
        mark: m.value,
        mask: m.mask,
    });
    let mut retired = Vec::new();
    for rule in rules
        .iter()
        .filter(|r| r.priority == ATTACH_PRIORITY && r.table == domain.table)
    {
        let legacy = rule.fwmark.is_none()
            && rule.from.is_none()
            && rule.iif.as_deref().is_some_and(|i| migrated.contains(&i));
        let stale_mark = rule.fwmark.is_some() && current.is_some() && rule.fwmark != current;
        if legacy || stale_mark {
            nl.delete_rule(rule)?;
            retired.push(rule.clone());
        }
    }
    Ok(retired)
}

/// How the VPC's table and rules differ from the record; each message says what restores it.
pub fn problems(nl: &Netlink, domain: &Domain, vpc: &VpcId) -> Result<Vec<String>, NetError> {
    let mut problems = Vec::new();
    let restores = format!("the next ADD of VPC {vpc} on this node restores it, or CNI GC");
    problems.extend(marks::node_problem(&restores)?);
    for family in Family::ALL {
        let rules = nl.rules(family)?;
        // The routes the checks look at, by kind: the kernel filters the dumps, so a table full
        // of the VPC's pod and termination routes is not read. Any default route closes the
        // table; only without an unreachable one is the whole table read for another.
        let unreachable = nl.routes_of_kind(family, domain.table, RouteKind::Unreachable)?;
        let closing = match has_default(&unreachable) {
            true => unreachable,
            false => nl.routes(family, domain.table)?,
        };
        let locals = nl.routes_of_kind(family, domain.table, RouteKind::Local)?;
        problems.extend(isolation_differences(
            family,
            domain.table,
            vpc,
            &rules,
            &closing,
        ));
        match domain.mark {
            Some(mark) if !rules.contains(&vpc_rule(family, domain.table, mark)) => {
                problems.push(format!(
                    "{} rule 'fwmark {} lookup {}' (the VPC's traffic) is missing; {restores}",
                    family.label(),
                    mark.label(),
                    domain.table
                ));
            }
            Some(_) => {}
            None => problems.push(format!(
                "VPC {vpc}'s routing domain has no firewall mark recorded (a record of a release \
                 before the VPC marks); {restores}"
            )),
        }
        for gw in domain.gateways.iter().filter(|g| Family::of(**g) == family) {
            if !locals
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

/// Whether the host interface's element steers it into the table.
pub fn membership(domain: &Domain, vpc: &VpcId, host: &Link) -> Result<Vec<String>, NetError> {
    let Some(mark) = domain.mark else {
        // `problems` names the missing mark.
        return Ok(Vec::new());
    };
    if marks::is_selected(marks::element(&host.name)?.as_slice(), &host.name, mark) {
        return Ok(Vec::new());
    }
    Ok(vec![format!(
        "element '{} : {:#x}' is missing from nftables map 'inet galactic vpc_marks' (its \
         packets do not reach table {}); {}",
        host.name,
        mark.value,
        domain.table,
        super::restored_by(vpc),
    )])
}

/// Removes the VPC's rules, every route of its table and the map elements of its mark (a mark
/// is allocated again to another VPC: an element left would steer into that VPC).
pub fn remove(nl: &Netlink, domain: &Domain) -> Result<(), NetError> {
    if let Some(mark) = domain.mark {
        let elements = marks::elements()?;
        let names: Vec<String> = elements
            .iter()
            .filter(|e| e.mark == mark.value)
            .map(|e| e.ifname.clone())
            .collect();
        marks::deselect_all(&elements, &names)?;
    }
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

/// Marks the node's rules and map elements use (a new VPC's mark is none of them).
pub fn marks_in_use(nl: &Netlink) -> Result<BTreeSet<u32>, NetError> {
    let mut used: BTreeSet<u32> = marks::elements()?.into_iter().map(|e| e.mark).collect();
    for family in Family::ALL {
        used.extend(
            nl.rules(family)?
                .into_iter()
                .filter_map(|r| r.fwmark.map(|m| m.mark)),
        );
    }
    Ok(used)
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
