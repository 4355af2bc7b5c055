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
//! It is cheap: one dump per object kind (links; rules and map elements; routes of the VPC table;
//! addresses; neighbours), then set comparisons; a healthy VPC costs the dumps and nothing else.
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

use crate::gateway;
use galactic_core::attachment::{Configured, Record, Records, Stage};
use galactic_core::ident::{vrf_name, VpcId};
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::domain::{marks, table, Backend, Domain, Domains};
use galactic_core::net::netlink::{Link, Netlink, RouteSpec};
use galactic_core::net::nftables::map::Element;
use galactic_core::net::NetError;
use ipnetwork::IpNetwork;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
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

/// The node's objects the host gateways are compared against, each kind dumped once.
struct Dumps {
    routes: Vec<RouteSpec>,
    addresses: HashSet<(u32, IpNetwork)>,
    neighbours: HashSet<(u32, IpAddr, String)>,
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

/// Brings every live attachment of `vpc` (but `except`) back on `domain`, the VPC's domain as
/// now recorded and ensured. Call with the VPC's lock held. `by` names the caller in the log.
pub fn attachments(
    host: &Netlink,
    state_dir: &Path,
    domain: &Domain,
    vpc: &VpcId,
    except: Option<&str>,
    by: &str,
) -> Result<Outcome, NetError> {
    let live = live_attachments(&Records::new(state_dir).of_vpc(vpc)?, vpc, except);
    let mut out = Outcome::default();
    if live.is_empty() {
        return Ok(out);
    }
    let links: HashMap<String, Link> = host
        .links()?
        .into_iter()
        .map(|l| (l.name.clone(), l))
        .collect();
    let present: Vec<(&Record, &Link)> = live
        .iter()
        .filter_map(|r| links.get(&r.host_ifname).map(|l| (r, l)))
        .collect();
    let elements = match domain.backend {
        Backend::Table => marks::elements()?,
        Backend::Vrf => Vec::new(),
    };
    let node = Members {
        host,
        domain,
        vpc,
        links: &links,
        elements: &elements,
    };
    for (record, link) in &present {
        node.restore(record, link, &mut out);
    }
    if domain.backend == Backend::Table {
        // Between the new selection and the old one's removal: a test holds the convergence
        // here to see the traffic flow with both.
        if let Err(e) = galactic_core::failpoint::hit("converge-before-retire") {
            out.failed.push(e.to_string());
        } else {
            retire_legacy_rules(host, domain, &present, &mut out)?;
        }
    }
    // Enslaving a device cycles it down and up, which flushes its IPv6 addresses and its
    // neighbours: those are dumped after the memberships are restored.
    let dumps = Dumps::read(host, domain)?;
    for (record, link) in &present {
        match &record.configured {
            Some(configured) => host_gateway(host, domain, &dumps, link, configured, &mut out),
            None => log::info(
                "converge: the attachment's addresses are not recorded (a record of an older release); its pod routes come back with its next ADD",
                json!({"hostIfname": record.host_ifname, "vpc": domain.vpc}),
            ),
        }
        datapath(state_dir, domain, record, &mut out);
    }
    report(domain, by, &out);
    Ok(out)
}

/// What the memberships are compared against: the domain and the node's links and (table
/// mode) map elements, each dumped once.
struct Members<'a> {
    host: &'a Netlink,
    domain: &'a Domain,
    vpc: &'a VpcId,
    links: &'a HashMap<String, Link>,
    elements: &'a [Element],
}

/// Table mode: the `iif` rules of a previous release (and `fwmark` rules of a former mask) of
/// the attachments whose elements are now in place, removed. The elements are dumped again:
/// only an interface the map selects loses its old rule.
fn retire_legacy_rules(
    host: &Netlink,
    domain: &Domain,
    present: &[(&Record, &Link)],
    out: &mut Outcome,
) -> Result<(), NetError> {
    let elements = marks::elements()?;
    let migrated: Vec<&str> = present
        .iter()
        .map(|(_, link)| link.name.as_str())
        .filter(|name| !table::is_detached(&elements, domain, name))
        .collect();
    let rules = [host.rules(Family::V4)?, host.rules(Family::V6)?].concat();
    match table::retire_legacy_rules(host, domain, &rules, &migrated) {
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
    /// element.
    fn restore(&self, record: &Record, link: &Link, out: &mut Outcome) {
        let Self {
            host,
            domain,
            vpc,
            links,
            elements,
        } = *self;
        match domain.backend {
            Backend::Vrf => {
                let name = vrf_name(vpc);
                let Some(vrf) = links
                    .get(&name)
                    .filter(|l| l.kind.as_deref() == Some("vrf"))
                else {
                    // `ensure` ran just before: a VRF missing now is a failure of that repair.
                    out.failed
                        .push(format!("VRF {name} is missing: {} not enslaved", link.name));
                    return;
                };
                if link.controller != Some(vrf.index) {
                    attempt(out, format!("enslaved {} to {name}", link.name), || {
                        host.set_controller(link.index, vrf.index)
                    });
                }
                if !link.up {
                    attempt(out, format!("set {} up", link.name), || {
                        host.set_up(link.index)
                    });
                }
            }
            Backend::Table => {
                if table::is_detached(elements, domain, &record.host_ifname) {
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
                    );
                }
            }
        }
    }
}

impl Dumps {
    fn read(host: &Netlink, domain: &Domain) -> Result<Self, NetError> {
        Ok(Self {
            routes: [
                host.routes(Family::V4, domain.table)?,
                host.routes(Family::V6, domain.table)?,
            ]
            .concat(),
            addresses: host.all_addresses()?.into_iter().collect(),
            neighbours: host
                .all_permanent_neighbours()?
                .into_iter()
                .map(|(i, ip, mac)| (i, ip, mac.to_ascii_lowercase()))
                .collect(),
        })
    }
}

/// The attachment's host gateway addresses, pod routes and permanent neighbours.
fn host_gateway(
    host: &Netlink,
    domain: &Domain,
    dumps: &Dumps,
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

/// Runs one restoration, naming it in `out` as restored or failed.
fn attempt(out: &mut Outcome, what: String, restore: impl FnOnce() -> Result<(), NetError>) {
    match restore() {
        Ok(()) => out.restored.push(what),
        Err(e) => out.failed.push(format!("{what}: {e}")),
    }
}

/// One info line when something was restored, one warning when something could not be.
fn report(domain: &Domain, by: &str, out: &Outcome) {
    if !out.restored.is_empty() {
        log::info(
            "converge: restored the VPC's attachments' state removed behind their records",
            json!({"vpc": domain.vpc, "table": domain.table, "by": by, "restored": out.restored}),
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
            json!({"vpc": domain.vpc, "table": domain.table, "by": by, "failed": out.failed}),
        );
    }
}

/// GC's convergence of one recorded domain whose VPC has records: under the VPC's lock, the
/// domain repaired (under the routing lock), then its attachments; nothing when the VPC's last
/// record went since GC listed them.
pub fn recorded_domain(
    host: &Netlink,
    state_dir: &Path,
    domains: &Domains,
    recorded: &Domain,
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
    if !crate::retire::in_use(&records, &vpc, None)? {
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
    attachments(host, state_dir, &ensured.domain, &vpc, None, "GC")
}
