//! GC for both masters.
//!
//! GC removes the host side of every attachment of this network that the runtime no longer
//! lists (with its kind's published state, e.g. a tap's RA record), sweeps published state of
//! attachments that are gone, delegates GC to IPAM, then removes routing domains no attachment
//! uses. Ownership comes from the attachment records, never from interface names; the one
//! attachment without a record it removes is the upstream chain's of this network, once no listed
//! attachment can be it ([`super::legacy::collect`]). Last, every VPC that still has attachments
//! is converged (`converge.rs`): its domain repaired, its live attachments' host side restored.
//! Past the stale attachments' removal, GC lists the attachment records once: the sweeps, the
//! unused domains' removal and the convergences all work from that listing, each VPC's records
//! read again by their files where a decision is taken under the VPC's lock (`retire.rs`).
//! Without a valid-attachments list GC removes nothing (`docs/decisions/0002`).

use super::conf::MasterConf;
use super::del::{mark_removing, teardown_host};
use crate::converge;
use crate::delegate::Delegate;
use crate::device::Device;
use crate::error::MasterError;
use crate::retire::{self, Retired};
use galactic_core::attachment::{Listing, Records};
use galactic_core::cni::{Command, Request};
use galactic_core::ident::VpcId;
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::domain::table::ATTACH_PRIORITY;
use galactic_core::net::domain::{marks, Domains};
use galactic_core::net::netlink::Netlink;
use galactic_core::net::nftables::map::Element;
use galactic_core::net::{firewall, NetError};
use serde_json::json;
use std::collections::HashSet;
use std::path::Path;

pub fn gc<D: Device>(req: &Request) -> Result<(), MasterError> {
    let Some(valid) = req.conf.valid_attachments()? else {
        log::info("GC: no valid-attachments list; nothing removed", json!({}));
        return delegate_gc::<D>(req);
    };
    let valid: HashSet<(String, String)> = valid
        .into_iter()
        .map(|a| (a.container_id, a.ifname))
        .collect();
    let host = Netlink::current().map_err(MasterError::node("open the host netlink socket"))?;
    let records = Records::new(&req.node.state_dir);
    let domains = Domains::for_node(&req.node);
    // 1. The attachments of this network the runtime no longer lists: ours by their records,
    //    the upstream chain's when no listed attachment can be it (decision 0061).
    let mut failures = remove_stale::<D>(req, &valid, &host, &records, &domains)?;
    if let Err(e) = super::legacy::collect::<D>(req, &records, &valid) {
        failures.push(e.part("the upstream chain's attachment"));
    }
    // 2. What no record owns any more, IPAM's allocations, then the routing domains no
    //    attachment uses. Every phase from here on works from one listing of the records (a
    //    listing per phase and three per recorded domain made GC cost the node's records times
    //    its VPCs); each VPC's own records are read again under its lock, by their files.
    let elements = marks::elements();
    let listing = records.list();
    let listed = listing.as_ref().ok();
    if let Some(listing) = listed {
        failures.extend(sweep_unowned::<D>(req, &host, &domains, elements, listing));
    }
    if let Err(e) = delegate_gc::<D>(req) {
        failures.push(e.part("IPAM GC"));
    }
    failures.extend(remove_unused_domains(
        &host,
        &req.node.state_dir,
        &domains,
        listed,
    ));
    // 3. The VPCs that still have attachments, each converged: its domain as recorded, then
    //    its live attachments on it (`converge.rs`).
    match listing {
        Ok(listing) => failures.extend(converge_domains(req, &host, &domains, &listing)),
        Err(e) => failures.push(MasterError::node("list attachment records")(e)),
    }
    finish(&req.node.state_dir, &records, &domains, failures)
}

/// Sweeps the temporary state files of writers that died, and the convergence rotations of
/// VPCs without a domain; GC's answer with every failure.
fn finish(
    state_dir: &Path,
    records: &Records,
    domains: &Domains,
    mut failures: Vec<MasterError>,
) -> Result<(), MasterError> {
    for swept in [
        records.sweep_temporaries().map_err(NetError::from),
        domains.sweep_temporaries(),
        sweep_rotations(state_dir, domains),
    ] {
        if let Err(e) = swept {
            failures.push(MasterError::node("sweep temporary state files")(e));
        }
    }
    match failures.is_empty() {
        true => Ok(()),
        false => Err(MasterError::Incomplete {
            what: "GC could not remove everything",
            failures,
        }),
    }
}

/// Removes the rotations of VPCs with no recorded domain (`converge::rotation`). A rotation an
/// ADD records after the domains are listed here is of a domain created meanwhile: removing it
/// only costs that VPC's next ADD a whole convergence.
fn sweep_rotations(state_dir: &Path, domains: &Domains) -> Result<usize, NetError> {
    let kept: HashSet<String> = domains
        .all()?
        .iter()
        .filter_map(|d| VpcId::parse(&d.vpc).ok().map(|v| v.hex()))
        .collect();
    Ok(converge::rotation::sweep(state_dir, &kept)?)
}

/// Tears down every attachment of this network whose (container, ifname) is not in `valid`;
/// returns what could not be removed.
fn remove_stale<D: Device>(
    req: &Request,
    valid: &HashSet<(String, String)>,
    host: &Netlink,
    records: &Records,
    domains: &Domains,
) -> Result<Vec<MasterError>, MasterError> {
    let mut failures = Vec::new();
    for record in records
        .all()
        .map_err(MasterError::node("list attachment records"))?
    {
        if record.network != req.conf.name
            || valid.contains(&(record.container_id.clone(), record.ifname.clone()))
        {
            continue;
        }
        // The attachment's lock, and its record again under it: an ADD of the same VPC
        // attachment in flight finishes first, and a record it replaced is not torn down.
        let _lock = match records.lock(&record.host_ifname) {
            Ok(lock) => lock,
            Err(e) => {
                failures.push(MasterError::lock(e).part(&record.host_ifname));
                continue;
            }
        };
        if records.get(&record.host_ifname).ok().flatten().as_ref() != Some(&record) {
            continue;
        }
        mark_removing(records, &record);
        let mut removed = teardown_host::<D>(&req.node, host, domains, &record);
        if removed.is_empty() {
            if let Err(e) = records.remove(&record.host_ifname) {
                removed.push(MasterError::node("remove the attachment record")(e));
            }
        }
        match removed.is_empty() {
            true => log::info(
                "GC: removed stale attachment",
                json!({"hostIfname": record.host_ifname, "containerID": record.container_id}),
            ),
            false => failures.extend(removed.into_iter().map(|e| e.part(&record.host_ifname))),
        }
    }
    Ok(failures)
}

/// What no record of `listing` owns: the kind's published state ([`Device::sweep`]), the eBPF
/// datapath rows, then the orphaned rules and elements ([`sweep_orphans`]). `elements` were
/// listed before the records, the published state and the rows are listed after them (each
/// sweep's order against an ADD in flight, which writes its record first).
fn sweep_unowned<D: Device>(
    req: &Request,
    host: &Netlink,
    domains: &Domains,
    elements: Result<Vec<Element>, NetError>,
    listing: &Listing,
) -> Vec<MasterError> {
    let owned: HashSet<String> = listing
        .records()
        .iter()
        .map(|r| r.host_ifname.clone())
        .collect();
    let mut failures = D::sweep(&req.node, &owned);
    if let Err(e) = galactic_core::bpf::sweep_attachments(&req.node.state_dir, &owned) {
        failures.push(MasterError::Datapath { source: e });
    }
    if let Err(e) = elements.and_then(|elements| sweep_orphans(host, domains, &elements, &owned)) {
        failures.push(MasterError::node("sweep orphaned rules")(e));
    }
    failures
}

fn delegate_gc<D: Device>(req: &Request) -> Result<(), MasterError> {
    let Some(plugin_type) = MasterConf::<D::Options>::parse(&req.conf.raw)
        .ok()
        .and_then(|c| c.ipam_type)
    else {
        return Ok(());
    };
    Ok(Delegate::new(&plugin_type, &req.env.path).call(Command::Gc, &req.stdin)?)
}

/// Removes policy rules, VPC-mark map elements and forward-accept rules of host interfaces no
/// record owns (`owned`): they outlive their interface (a crash between the link deletion and
/// their deletion leaves them "detached"). Ours are recognised by their table (one of our
/// domains'), our map or our comment tag. The elements were listed before the records: an ADD
/// writes its record before its element, so every element listed of an attachment in flight
/// has its record among `owned`.
fn sweep_orphans(
    host: &Netlink,
    domains: &Domains,
    elements: &[Element],
    owned: &HashSet<String>,
) -> Result<(), galactic_core::net::NetError> {
    let tables: HashSet<u32> = domains.all()?.into_iter().map(|d| d.table).collect();
    for family in Family::ALL {
        for rule in host.rules(family)? {
            let orphan = rule.priority == ATTACH_PRIORITY
                && tables.contains(&rule.table)
                && rule.iif.as_ref().is_some_and(|i| !owned.contains(i));
            if orphan {
                host.delete_rule(&rule)?;
            }
        }
    }
    let unowned: Vec<String> = elements
        .iter()
        .filter(|e| !owned.contains(&e.ifname))
        .map(|e| e.ifname.clone())
        .collect();
    marks::deselect_all(elements, &unowned)?;
    for ifname in firewall::owned_interfaces()?
        .into_iter()
        .filter(|i| !owned.contains(i))
    {
        firewall::remove(&ifname)?;
    }
    Ok(())
}

/// Converges every recorded domain whose VPC has attachment records in `listing`; the
/// failures, by VPC.
fn converge_domains(
    req: &Request,
    host: &Netlink,
    domains: &Domains,
    listing: &Listing,
) -> Vec<MasterError> {
    let recorded = match domains.all() {
        Ok(recorded) => recorded,
        Err(e) => return vec![MasterError::node("list routing domains")(e)],
    };
    let in_use: HashSet<String> = listing
        .records()
        .iter()
        .filter_map(|r| VpcId::parse(&r.vpc).ok().map(|v| v.hex()))
        .collect();
    // Only ever armed as `:pause`: holds GC between its listing and the convergences, so a
    // test can remove a listed VPC's last attachment meanwhile (`converge::recorded_domain`
    // then finds no record and leaves the domain removed).
    let _ = galactic_core::failpoint::hit("gc-before-converge");
    // Listed once for every domain: the node's rules grow with its VPCs, and a listing per
    // domain made GC's convergences cost the VPCs' square.
    let rules = match Family::ALL
        .into_iter()
        .map(|family| host.rules(family))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(rules) => rules.concat(),
        Err(e) => return vec![MasterError::node("list the node's policy rules")(e)],
    };
    let listed = converge::Listed {
        records: listing,
        rules: &rules,
    };
    let mut failures = Vec::new();
    for d in recorded {
        if !VpcId::parse(&d.vpc).is_ok_and(|v| in_use.contains(&v.hex())) {
            continue;
        }
        let part = format!("VPC {}", d.vpc);
        match converge::recorded_domain(host, &req.node.state_dir, domains, &d, &listed) {
            Ok(out) if out.failed.is_empty() => {}
            Ok(out) => failures.push(MasterError::Converge {
                vpc: d.vpc.clone(),
                failed: out.failed,
            }),
            Err(e) => failures.push(MasterError::node("converge the VPC")(e).part(part)),
        }
    }
    failures
}

/// Removes every recorded domain whose VPC has no attachment record left ([`retire::if_unused`],
/// the decision DEL makes for its VPC: GC is the safety net for a DEL that could not, or an
/// older release's domains); with GC's `listing` when it has one
/// ([`retire::if_unused_listed`]).
fn remove_unused_domains(
    host: &Netlink,
    state_dir: &Path,
    domains: &Domains,
    listing: Option<&Listing>,
) -> Vec<MasterError> {
    let recorded = match domains.all() {
        Ok(recorded) => recorded,
        Err(e) => return vec![MasterError::node("list routing domains")(e)],
    };
    let mut failures = Vec::new();
    for d in recorded {
        let Ok(vpc) = VpcId::parse(&d.vpc) else {
            continue;
        };
        let retired = match listing {
            Some(listing) => retire::if_unused_listed(host, state_dir, &vpc, listing),
            None => retire::if_unused(host, state_dir, &vpc, None),
        };
        match retired {
            Ok(Retired::InUse | Retired::NotRecorded) => {}
            Ok(Retired::Removed { table }) => log::info(
                "GC: removed unused routing domain",
                json!({"vpc": d.vpc, "table": table}),
            ),
            Ok(Retired::LeftInPlace { table, enslaved }) => log::warn(
                "GC: forgot an unused routing domain but left its VRF and table: interfaces \
                 without an attachment record (another chain's pods) are enslaved to it",
                json!({"vpc": d.vpc, "table": table, "enslaved": enslaved}),
            ),
            Err(e) => failures.push(
                MasterError::node("remove an unused routing domain")(e)
                    .part(format!("VPC {}", d.vpc)),
            ),
        }
    }
    failures
}
