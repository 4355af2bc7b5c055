//! One convergence of a VPC's whole node state: the routing domain as recorded, then every live
//! attachment of the VPC on it, from the attachment records. Run by every ADD of the VPC (once
//! its domain is ensured, for the attachments other than its own, which it configures itself)
//! and by CNI GC (for every recorded domain whose VPC still has records). Without it, a VRF
//! recreated behind the record, or a rule or route removed behind it, would cut off the VPC's
//! running pods until each was added again, which Kubernetes never does for a running pod.
//!
//! What one convergence brings back, per live attachment whose host interface exists (one whose
//! interface is gone is its DEL's or GC's):
//! - its membership: enslaved to the VPC's VRF (and up), or its element `<host> : <VPC mark>` in
//!   the node's VPC-mark map (table mode); once it is there, the interface's `iif <host> lookup
//!   T` rules of a release before the marks are retired (added before removed: the attachment's
//!   traffic is never cut off);
//! - its host gateway addresses, its pod routes in the VPC table and its permanent neighbours,
//!   from the record's `configured` (a record of a release before it has none: those come back
//!   with the attachment's next ADD, and the convergence says so);
//! - its eBPF rows in the domain's current table, when its VRF was re-bound to another table
//!   (only a registration that has a record is moved).
//!
//! It reads only the VPC's own kernel objects ([`observe`]): the VPC table's routes, and per live
//! attachment its interface, addresses, neighbours and (table mode) map element, each by a
//! request the kernel filters or a lookup (VRF mode: the VRF's members in one dump), plus one
//! dump of the node's policy rules (table mode; they grow with VPCs, not attachments). A healthy VPC costs those reads and set comparisons, whatever the other VPCs
//! of the node hold. GC lists the rules and the attachment records once for all the domains it
//! converges ([`recorded_domain`]), so its convergences together read the node once: each VPC's
//! records are read again under its lock by their files, not by listing the directory.
//!
//! Races. The convergence runs under the VPC's lock (`Records::lock_vpc`) and restores only
//! records in stage `live`: an ADD writes its record `adding` and makes it `live` only once it has
//! configured everything, so the convergence never joins an attachment whose ADD may still roll
//! back; a teardown (DEL, GC, a stale claim) marks the record `removing` under the VPC's lock
//! before it removes anything, so once it starts no convergence re-creates what it removes
//! (table-mode rules outlive interfaces, so a rule re-added after DEL would stay).
//!
//! Lock order, everywhere: an attachment's lock, then its VPC's lock, then the node-wide routing
//! lock (`Domains::lock`). ADD holds its attachment's lock when it takes the VPC's; GC takes
//! the VPC's lock, then the routing lock for the domain's repair, and no attachment lock.

mod observe;
pub mod rotation;

use crate::gateway;
use galactic_core::attachment::{Configured, Listing, Record, Records, Stage};
use galactic_core::ident::{vrf_name, VpcId};
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::domain::{table, Backend, Domain, Domains};
use galactic_core::net::netlink::{Link, Netlink, RuleSpec};
use galactic_core::net::NetError;
use observe::{Gateways, Interface};
use rotation::Identity;
use serde_json::json;
use std::path::Path;

/// What one convergence restored (each named) and what it could not.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Each restoration, named.
    pub restored: Vec<String>,
    /// Each failure, named (the convergence goes on past one).
    pub failed: Vec<String>,
    /// Rules of a previous release retired once the marks select their traffic, each named.
    pub retired: Vec<String>,
}

/// Whether a convergence retires the `iif` rules of a previous release (table mode), and from
/// what listing of the node's rules. They exist only on a node upgraded from a release before
/// the VPC marks, whose domains' first repair allocates their marks: an ADD retires them when
/// it repaired its domain, GC always (from its one listing), and no other ADD pays a dump of
/// the node's rules, which grow with its VPCs.
#[derive(Clone, Copy)]
enum Legacy<'a> {
    /// Not in this convergence.
    Kept,
    /// Retired, from a dump of the node's rules made here.
    Dumped,
    /// Retired, from the node's rules as GC listed them once for every domain it converges.
    Listed(&'a [RuleSpec]),
}

/// What one convergence reads and retires.
struct Scope<'a> {
    /// The VPC's VRF device as the kernel has it (VRF mode).
    vrf: Option<Link>,
    /// Whether the attachments are every live one of the VPC: the VRF's members and the VPC
    /// table are then read in one dump each, else each attachment's by its interface.
    whole: bool,
    legacy: Legacy<'a>,
    /// What the attachments are of the VPC, for the log (`converge::rotation::Whole`).
    covered: &'static str,
}

/// The live attachments of `vpc` other than `except`, by their records.
pub fn live_attachments(records: &[Record], vpc: &VpcId, except: Option<&str>) -> Vec<Record> {
    records
        .iter()
        .filter(|r| r.stage == Stage::Live && Some(r.host_ifname.as_str()) != except)
        .filter(|r| VpcId::parse(&r.vpc).is_ok_and(|v| v.hex() == vpc.hex()))
        .cloned()
        .collect()
}

/// An ADD's convergence of the VPC's attachments other than its own (`except`) on `domain`, the
/// VPC's domain as now recorded and ensured: the whole VPC, or the next [`rotation::WINDOW`]
/// of them
/// ([`rotation`]); `changed` when the ADD created, adopted or repaired the domain. Call with
/// the VPC's lock held.
pub fn others(
    host: &Netlink,
    state_dir: &Path,
    domain: &Domain,
    vpc: &VpcId,
    except: &str,
    changed: bool,
) -> Result<Outcome, NetError> {
    let records = Records::new(state_dir);
    let mut names = records.names_of_vpc(vpc)?;
    names.retain(|n| n != except);
    let vrf = observe::vrf(host, domain, vpc)?;
    let identity = Identity::of(domain, vrf.as_ref());
    let (plan, why) = rotation::plan(state_dir, vpc, names, &identity, changed);
    let read: Vec<Record> = plan
        .names
        .iter()
        .filter_map(|n| records.get(n).ok().flatten())
        .collect();
    let live = live_attachments(&read, vpc, Some(except));
    let scope = Scope {
        vrf,
        whole: plan.whole,
        legacy: if changed {
            Legacy::Dumped
        } else {
            Legacy::Kept
        },
        covered: why.map_or("the next window of the VPC", rotation::Whole::label),
    };
    let out = converge(host, state_dir, domain, vpc, &live, "ADD", scope)?;
    plan.record(state_dir, vpc);
    Ok(out)
}

/// Converges the VPC's `live` attachments within `scope`.
fn converge(
    host: &Netlink,
    state_dir: &Path,
    domain: &Domain,
    vpc: &VpcId,
    live: &[Record],
    by: &str,
    scope: Scope<'_>,
) -> Result<Outcome, NetError> {
    let mut out = Outcome::default();
    if live.is_empty() {
        return Ok(out);
    }
    let vrf = scope.vrf.as_ref();
    let mut present = observe::interfaces(host, domain, vrf, live, scope.whole)?;
    let node = Members {
        host,
        domain,
        vpc,
        vrf,
    };
    let mut selected = Vec::new();
    for interface in &mut present {
        if node.restore(interface, &mut out) {
            selected.push(interface.link.name.clone());
        }
    }
    if domain.backend == Backend::Table && !matches!(scope.legacy, Legacy::Kept) {
        // Between the new selection and the old one's removal: a test holds the convergence
        // here to see the traffic flow with both.
        if let Err(e) = galactic_core::failpoint::hit("converge-before-retire") {
            out.failed.push(e.to_string());
        } else {
            retire_legacy_rules(host, domain, &selected, scope.legacy, &mut out)?;
        }
    }
    // Enslaving a device cycles it down and up, which flushes its IPv6 addresses and its
    // neighbours: those are read after the memberships are restored.
    let gateways = Gateways::read(host, domain, &present, scope.whole)?;
    for Interface { record, link, .. } in &present {
        match &record.configured {
            Some(configured) => host_gateway(host, domain, &gateways, link, configured, &mut out),
            None => log::info(
                "converge: the attachment's addresses are not recorded (a record of an older release); its pod routes come back with its next ADD",
                json!({"hostIfname": record.host_ifname, "vpc": domain.vpc}),
            ),
        }
        datapath(state_dir, domain, record, &mut out);
    }
    report(domain, by, scope.covered, &out);
    Ok(out)
}

/// What the memberships are restored against: the domain and, VRF mode, its device.
struct Members<'a> {
    host: &'a Netlink,
    domain: &'a Domain,
    vpc: &'a VpcId,
    vrf: Option<&'a Link>,
}

/// Table mode: the `iif` rules of a previous release (and `fwmark` rules of a former mask) of
/// the attachments `selected` by their elements, removed: only an interface the map selects
/// loses its old rule. `rules` lists the node's rules (GC's listing), or they are dumped here.
fn retire_legacy_rules(
    host: &Netlink,
    domain: &Domain,
    selected: &[String],
    legacy: Legacy<'_>,
    out: &mut Outcome,
) -> Result<(), NetError> {
    let dumped;
    let rules = match legacy {
        Legacy::Kept => return Ok(()),
        Legacy::Listed(rules) => rules,
        Legacy::Dumped => {
            dumped = [host.rules(Family::V4)?, host.rules(Family::V6)?].concat();
            &dumped
        }
    };
    let migrated: Vec<&str> = selected.iter().map(String::as_str).collect();
    match table::retire_legacy_rules(host, domain, rules, &migrated) {
        Ok(retired) => out.retired.extend(retired.iter().map(|r| {
            format!(
                "{} rule at {} {} lookup {}",
                r.family.label(),
                r.priority,
                r.iif.as_deref().map_or_else(
                    || r.fwmark.map_or(String::new(), |m| format!(
                        "fwmark {:#x}/{:#x}",
                        m.mark, m.mask
                    )),
                    |i| format!("iif {i}")
                ),
                r.table
            )
        })),
        Err(e) => out
            .failed
            .push(format!("retire the rules of a previous release: {e}")),
    }
    Ok(())
}

impl Members<'_> {
    /// The attachment's membership of the domain: enslaved to the VRF and up, or its map
    /// element. Returns whether the map selects the interface now (table mode).
    fn restore(&self, interface: &mut Interface<'_>, out: &mut Outcome) -> bool {
        let Self {
            host,
            domain,
            vpc,
            vrf,
        } = *self;
        let link = &mut interface.link;
        match domain.backend {
            Backend::Vrf => {
                let name = vrf_name(vpc);
                let Some(vrf) = vrf else {
                    // `ensure` ran just before: a VRF missing now is a failure of that repair.
                    out.failed
                        .push(format!("VRF {name} is missing: {} not enslaved", link.name));
                    return false;
                };
                if link.controller != Some(vrf.index) {
                    let (index, controller) = (link.index, vrf.index);
                    if attempt(out, format!("enslaved {} to {name}", link.name), || {
                        host.set_controller(index, controller)
                    }) {
                        link.controller = Some(controller);
                    }
                }
                if !link.up {
                    let index = link.index;
                    if attempt(out, format!("set {} up", link.name), || host.set_up(index)) {
                        link.up = true;
                    }
                }
                false
            }
            Backend::Table => {
                let elements = interface.element.as_slice();
                if !table::is_detached(elements, domain, &link.name) {
                    return true;
                }
                let mark = domain
                    .mark
                    .map_or_else(String::new, |m| format!("{:#x}", m.value));
                attempt(
                    out,
                    format!(
                        "element '{} : {mark}' of map inet galactic vpc_marks",
                        link.name
                    ),
                    || table::reattach(elements, domain, &link.name),
                )
            }
        }
    }
}

/// The attachment's host gateway addresses, pod routes and permanent neighbours.
fn host_gateway(
    host: &Netlink,
    domain: &Domain,
    dumps: &Gateways,
    link: &Link,
    configured: &Configured,
    out: &mut Outcome,
) {
    let assigned = configured.assignments();
    for gw in assigned.iter().filter_map(|a| a.gateway) {
        let (net, flags) = gateway::host_address(configured.v4_gateway_prefix, gw);
        if !dumps.addresses.contains(&(link.index, net)) {
            attempt(
                out,
                format!("gateway address {net} on {}", link.name),
                || host.add_address(link.index, net, flags),
            );
        }
    }
    for a in &assigned {
        let want = gateway::pod_route(domain.table, link, a);
        let present = dumps
            .routes
            .iter()
            .any(|r| r.dst == want.dst && r.dev == want.dev);
        if !present {
            let what = format!(
                "route {} dev {} in table {}",
                want.dst, link.name, domain.table
            );
            attempt(out, what, || host.replace_route(&want));
        }
        let Some(mac) = configured.guest_mac.as_deref() else {
            continue;
        };
        let ip = a.address.ip();
        if !dumps
            .neighbours
            .contains(&(link.index, ip, mac.to_ascii_lowercase()))
        {
            attempt(
                out,
                format!("permanent neighbour {ip} on {}", link.name),
                || host.replace_neighbour(link.index, ip, mac),
            );
        }
    }
}

/// The attachment's eBPF rows, moved to the domain's table if they name another.
fn datapath(state_dir: &Path, domain: &Domain, record: &Record, out: &mut Outcome) {
    use galactic_core::bpf::registry::{read_record, retable_attachment};
    // Read without the registration lock first: a registration already in the table (the
    // usual case) costs one file read, not a lock.
    match read_record(state_dir, &record.host_ifname) {
        Ok(Some(r)) if r.vrf_table_id != domain.table => {}
        Ok(_) => return,
        Err(e) => {
            out.failed
                .push(format!("eBPF rows of {}: {e}", record.host_ifname));
            return;
        }
    }
    match retable_attachment(state_dir, &record.host_ifname, domain.table) {
        Ok(true) => out.restored.push(format!(
            "eBPF rows of {} moved to table {}",
            record.host_ifname, domain.table
        )),
        Ok(false) => {}
        Err(e) => out.failed.push(format!(
            "eBPF rows of {} in table {}: {e}",
            record.host_ifname, domain.table
        )),
    }
}

/// Runs one restoration, naming it in `out` as restored or failed; whether it succeeded.
fn attempt(
    out: &mut Outcome,
    what: String,
    restore: impl FnOnce() -> Result<(), NetError>,
) -> bool {
    match restore() {
        Ok(()) => {
            out.restored.push(what);
            true
        }
        Err(e) => {
            out.failed.push(format!("{what}: {e}"));
            false
        }
    }
}

/// One info line when something was restored, one warning when something could not be.
fn report(domain: &Domain, by: &str, covered: &str, out: &Outcome) {
    if !out.restored.is_empty() {
        log::info(
            "converge: restored the VPC's attachments' state removed behind their records",
            json!({"vpc": domain.vpc, "table": domain.table, "by": by, "covered": covered,
                   "restored": out.restored}),
        );
    }
    if !out.retired.is_empty() {
        log::info(
            "converge: retired rules of a previous release: the VPC's firewall mark selects these interfaces now",
            json!({"vpc": domain.vpc, "table": domain.table, "by": by, "retired": out.retired}),
        );
    }
    if !out.failed.is_empty() {
        log::warn(
            "converge: could not restore some of the VPC's attachments' state; the next ADD of the VPC or CNI GC retries",
            json!({"vpc": domain.vpc, "table": domain.table, "by": by, "covered": covered,
                   "failed": out.failed}),
        );
    }
}

/// What GC read of the node once for all the domains it converges.
pub struct Listed<'a> {
    /// The node's attachment records, listed once ([`Records::list`]).
    pub records: &'a Listing,
    /// The node's policy rules of both families (a rule another convergence adds or removes
    /// meanwhile is that VPC's own, which this one neither lists nor touches).
    pub rules: &'a [RuleSpec],
}

/// GC's convergence of one recorded domain whose VPC has records: under the VPC's lock, the
/// domain repaired (under the routing lock), then its attachments; nothing when the VPC's last
/// record went since GC listed them. The VPC's records are the ones GC listed, read again
/// under the lock (`retire::current`).
pub fn recorded_domain(
    host: &Netlink,
    state_dir: &Path,
    domains: &Domains,
    recorded: &Domain,
    listed: &Listed<'_>,
) -> Result<Outcome, NetError> {
    let vpc = VpcId::parse(&recorded.vpc)
        .map_err(|e| NetError::Conflict(format!("recorded VPC id {}: {e}", recorded.vpc)))?;
    let records = Records::new(state_dir);
    let _vpc = records
        .lock_vpc(&vpc)
        .map_err(|e| NetError::Busy(e.to_string()))?;
    // GC listed the VPC's records before it took the lock: a DEL of the VPC's last attachment
    // may have removed the domain since (`retire.rs`), and ensuring it would recreate a domain
    // no attachment uses.
    let now = crate::retire::current(&records, listed.records, &vpc)?;
    if now.is_empty() {
        return Ok(Outcome::default());
    }
    let ensured = {
        let _routing = domains.lock()?;
        domains.ensure(host, &vpc, recorded.backend)?
    };
    if let galactic_core::net::domain::Change::Healed(restored) = &ensured.change {
        log::warn(
            "GC: routing domain repaired: objects were missing behind its record",
            json!({"vpc": ensured.domain.vpc, "table": ensured.domain.table, "restored": restored}),
        );
    }
    let domain = &ensured.domain;
    let vrf = observe::vrf(host, domain, &vpc)?;
    let identity = Identity::of(domain, vrf.as_ref());
    let live = live_attachments(&now, &vpc, None);
    let scope = Scope {
        vrf,
        whole: true,
        legacy: Legacy::Listed(listed.rules),
        covered: "the whole VPC",
    };
    let out = converge(host, state_dir, domain, &vpc, &live, "GC", scope)?;
    rotation::converged_whole(state_dir, &vpc, &identity, live.len());
    Ok(out)
}
