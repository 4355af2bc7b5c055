//! The `vrf` backend: a VRF device `G{vpc:9}V` bound to the VPC table.
//!
//! As the kernel's VRF documentation recommends, the `local` rule moves after the l3mdev rule and
//! the VRF table ends in `unreachable default`: otherwise a lookup for a pod's packet to any host
//! address (default VRF) hits the `local` table at priority 0, and the host answers it.
//!
//! The device is the truth galactic-router works from (it resolves a VPC's table through the
//! device named `G{vpc}V`), so the domain record follows the device: a device that exists when a
//! domain is first needed (left by the upstream Go chain) is adopted with its table, and one
//! recreated behind the record with another table is adopted again.

use super::super::netlink::{Link, Netlink};
use super::super::netns;
use super::super::sysctl;
use super::super::NetError;
use super::table;
use crate::failpoint;
use crate::ident::{vrf_name, VpcId};
use crate::ip::Family;
use std::collections::BTreeSet;

/// A table id for the probe device (in its own namespace, it never carries routes).
const PROBE_TABLE: u32 = 0x7fff_fff0;
/// Tables a VRF must never be bound to for us to use it: unspecified, default, main, local.
const RESERVED_TABLES: [u32; 4] = [0, 253, 254, 255];

/// Whether the kernel can create VRF devices: creates one in a scratch network namespace, so
/// the node keeps nothing (not even the l3mdev rules the kernel adds with a namespace's first
/// VRF); loading the `vrf` module on demand is the only lasting effect.
pub fn supported() -> Result<bool, NetError> {
    netns::run_in_scratch(|| {
        let nl = Netlink::current()?;
        match nl.create_vrf("Gprobe", PROBE_TABLE) {
            Ok(()) => Ok(true),
            Err(NetError::Unsupported { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    })?
}

/// The VPC's VRF device, if a link of that name exists; a link of another kind is a conflict
/// (it is not ours to replace).
pub fn device(nl: &Netlink, vpc: &VpcId) -> Result<Option<Link>, NetError> {
    let name = vrf_name(vpc);
    match nl.link(&name)? {
        Some(link) if link.kind.as_deref() == Some("vrf") => Ok(Some(link)),
        Some(link) => Err(NetError::Conflict(format!(
            "{name} exists but is a {} device, not the VRF of VPC {vpc}; it is not ours to replace: \
             remove it (ip link del {name}) and add the attachment again",
            link.kind.unwrap_or_else(|| "kind-less".into())
        ))),
        None => Ok(None),
    }
}

/// The table an existing VRF device is bound to, if we may route a VPC through it.
pub fn adoptable_table(device: &Link) -> Result<u32, NetError> {
    match device.vrf_table {
        Some(t) if !RESERVED_TABLES.contains(&t) => Ok(t),
        bound => Err(NetError::Conflict(format!(
            "VRF {} is bound to table {}, which cannot be a VPC's table; remove the device \
             (ip link del {}) and add the attachment again",
            device.name,
            bound.map_or_else(|| "none".into(), |t| t.to_string()),
            device.name
        ))),
    }
}

/// Creates the VPC's VRF bound to `table` and readies it. On failure the device may exist: the
/// caller removes the domain.
pub fn create(nl: &Netlink, vpc: &VpcId, table: u32) -> Result<(), NetError> {
    let name = vrf_name(vpc);
    nl.create_vrf(&name, table)?;
    failpoint::hit("after-vrf-device")?;
    ready(nl, vpc, table).map(|_| ())
}

/// What [`ready`] may change on a device it did not create, as found before it ran: its
/// sysctls and its link state. An adoption that fails (or whose ADD rolls back) puts them back
/// ([`restore`]), so the device is left as it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `(family, key, value)` of each sysctl [`ready`] sets.
    sysctls: Vec<(Family, &'static str, String)>,
    /// Whether the device was up.
    up: bool,
}

/// The sysctls [`ready`] sets on the device, and the value it sets.
const READY_SYSCTLS: [(Family, &str, &str); 3] = [
    (Family::V4, "rp_filter", "0"),
    (Family::V4, "forwarding", "1"),
    (Family::V6, "forwarding", "1"),
];

/// The VPC's device's state as [`ready`] would change it.
pub fn observe(nl: &Netlink, vpc: &VpcId) -> Result<Found, NetError> {
    let name = vrf_name(vpc);
    let mut sysctls = Vec::new();
    for (family, key, _) in READY_SYSCTLS {
        sysctls.push((family, key, sysctl::get_interface(family, &name, key)?));
    }
    Ok(Found {
        sysctls,
        up: nl.require_link(&name)?.up,
    })
}

/// Puts back what [`observe`] found, where it differs now (a device gone meanwhile has
/// nothing to put back). Every step runs; the first failure is returned.
pub fn restore(nl: &Netlink, vpc: &VpcId, found: &Found) -> Result<(), NetError> {
    let name = vrf_name(vpc);
    let Some(link) = nl.link(&name)? else {
        return Ok(());
    };
    let mut first = None;
    for (family, key, value) in &found.sysctls {
        let now = sysctl::get_interface(*family, &name, key);
        if now.as_deref().ok() != Some(value.as_str()) {
            if let Err(e) = sysctl::set_interface(*family, &name, key, value) {
                first.get_or_insert(e);
            }
        }
    }
    if link.up && !found.up {
        if let Err(e) = nl.set_down(link.index) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Readies the VPC's VRF bound to `table`, idempotently: the `local` rule after the l3mdev rule,
/// the table closed, rp_filter off and forwarding on, the device up. Returns what was missing.
pub fn ready(nl: &Netlink, vpc: &VpcId, table: u32) -> Result<Vec<String>, NetError> {
    let name = vrf_name(vpc);
    let mut restored = Vec::new();
    if table::move_local_rule(nl)? {
        restored.push("moved the local rule after the VRF rules".to_owned());
    }
    for family in table::close_table(nl, table)? {
        restored.push(format!(
            "{} 'unreachable default' in table {table}",
            family.label()
        ));
    }
    for (family, key, value) in READY_SYSCTLS {
        sysctl::set_interface(family, &name, key, value)?;
    }
    failpoint::hit("after-vrf-sysctls")?;
    let link = nl.require_link(&name)?;
    if !link.up {
        nl.set_up(link.index)?;
        restored.push(format!("set {name} up"));
    }
    Ok(restored)
}

/// Enslaves the host interface to the VPC's VRF.
pub fn attach(nl: &Netlink, vpc: &VpcId, host: &Link) -> Result<(), NetError> {
    let vrf = nl.require_link(&vrf_name(vpc))?;
    if host.controller != Some(vrf.index) {
        nl.set_controller(host.index, vrf.index)?;
    }
    Ok(())
}

/// How the VPC's device differs from the record (it exists, is a VRF, is bound to `table`) and
/// what isolates the VPC; each message says what restores it.
pub fn problems(nl: &Netlink, vpc: &VpcId, table: u32) -> Result<Vec<String>, NetError> {
    let name = vrf_name(vpc);
    let rejoin = "with the VPC's attachments rejoined (CNI GC does the same)";
    let mut problems = match nl.link(&name)? {
        None => vec![format!(
            "VRF {name} does not exist, though this node's record holds it for VPC {vpc} with table \
             {table}: it was removed behind the record (galactic-router's GC does this); the next ADD \
             of the VPC on this node recreates it, {rejoin}"
        )],
        Some(link) if link.kind.as_deref() != Some("vrf") => vec![format!(
            "{name} is a {} device, not the VRF of VPC {vpc}: remove it (ip link del {name}); the \
             next ADD of the VPC then creates the VRF, {rejoin}",
            link.kind.unwrap_or_else(|| "kind-less".into())
        )],
        Some(link) if link.vrf_table != Some(table) => vec![format!(
            "VRF {name} is bound to table {}, but this node's record says table {table}: it was \
             recreated behind the record; the next ADD of VPC {vpc} on this node adopts its table, {rejoin}",
            link.vrf_table
                .map_or_else(|| "none".into(), |t| t.to_string())
        )],
        Some(_) => Vec::new(),
    };
    for family in Family::ALL {
        problems.extend(table::isolation_problems(nl, family, table, vpc)?);
    }
    Ok(problems)
}

/// Whether the host interface is enslaved to the VPC's VRF.
pub fn membership(nl: &Netlink, vpc: &VpcId, host: &Link) -> Result<Vec<String>, NetError> {
    let name = vrf_name(vpc);
    let vrf = nl.link(&name)?.filter(|l| l.kind.as_deref() == Some("vrf"));
    if vrf.is_some_and(|v| host.controller == Some(v.index)) {
        return Ok(Vec::new());
    }
    Ok(vec![format!(
        "{} is not enslaved to VRF {name}; {}",
        host.name,
        super::restored_by(vpc)
    )])
}

/// What [`remove`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// The device is gone and the table flushed.
    Removed,
    /// Interfaces no attachment of ours holds are still enslaved (pods of the upstream chain on
    /// an adopted VRF): the device and its table stay for them.
    LeftInPlace(Vec<String>),
}

/// Deletes the VRF device and the routes left in its table, unless interfaces are still enslaved
/// to it (only attachments without a record are left when a domain is removed, so those belong
/// to someone else). The table is flushed only when no VRF device is bound to it any more.
pub fn remove(nl: &Netlink, vpc: &VpcId, table: u32) -> Result<Removal, NetError> {
    let links = nl.links()?;
    if let Some(vrf) = links
        .iter()
        .find(|l| l.name == vrf_name(vpc) && l.kind.as_deref() == Some("vrf"))
    {
        let slaves: Vec<String> = links
            .iter()
            .filter(|l| l.controller == Some(vrf.index))
            .map(|l| l.name.clone())
            .collect();
        if !slaves.is_empty() {
            return Ok(Removal::LeftInPlace(slaves));
        }
        nl.delete_link(&vrf.name)?;
    }
    if !tables_in_use(nl)?.contains(&table) {
        for family in Family::ALL {
            for route in nl.routes(family, table)? {
                nl.delete_route(&route)?;
            }
        }
    }
    Ok(Removal::Removed)
}

/// Tables bound to VRF devices on the node.
pub fn tables_in_use(nl: &Netlink) -> Result<BTreeSet<u32>, NetError> {
    Ok(nl
        .links()?
        .into_iter()
        .filter_map(|l| l.vrf_table)
        .collect())
}
