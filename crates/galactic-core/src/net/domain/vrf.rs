//! The `vrf` backend: a VRF device `G{vpc:9}V` bound to the VPC table.
//!
//! As the kernel's VRF documentation recommends, the `local` rule moves after the l3mdev rule and
//! the VRF table ends in `unreachable default`: otherwise a lookup for a pod's packet to any host
//! address (default VRF) hits the `local` table at priority 0, and the host answers it.

use super::super::netlink::{Link, Netlink};
use super::super::sysctl;
use super::super::NetError;
use super::table;
use crate::ident::{vrf_name, VpcId};
use crate::ip::Family;
use std::collections::BTreeSet;

/// A scratch table id for the probe; the probe device never carries routes.
const PROBE_TABLE: u32 = 0x7fff_fff0;

/// Whether the kernel can create VRF devices (creates and deletes a scratch one).
pub fn supported(nl: &Netlink) -> Result<bool, NetError> {
    let name = format!("Gprobe{}", std::process::id() % 100_000);
    match nl.create_vrf(&name, PROBE_TABLE) {
        Ok(()) => {
            nl.delete_link(&name)?;
            Ok(true)
        }
        Err(NetError::Unsupported { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Creates the VPC's VRF device bound to `table` if it does not exist, closes its table and
/// sets it up.
pub fn ensure(nl: &Netlink, vpc: &VpcId, table: u32) -> Result<(), NetError> {
    table::move_local_rule(nl)?;
    let name = vrf_name(vpc);
    let link = match nl.link(&name)? {
        Some(link) if link.kind.as_deref() == Some("vrf") => link,
        Some(link) => {
            return Err(NetError::Conflict(format!(
                "{name} exists but is a {} device, not a VRF",
                link.kind.unwrap_or_default()
            )))
        }
        None => {
            nl.create_vrf(&name, table)?;
            nl.require_link(&name)?
        }
    };
    table::close_table(nl, table)?;
    sysctl::set_interface(Family::V4, &name, "rp_filter", "0")?;
    sysctl::set_interface(Family::V4, &name, "forwarding", "1")?;
    sysctl::set_interface(Family::V6, &name, "forwarding", "1")?;
    nl.set_up(link.index)
}

/// Enslaves the host interface to the VPC's VRF.
pub fn attach(nl: &Netlink, vpc: &VpcId, host: &Link) -> Result<(), NetError> {
    let vrf = nl.require_link(&vrf_name(vpc))?;
    if host.controller != Some(vrf.index) {
        nl.set_controller(host.index, vrf.index)?;
    }
    Ok(())
}

/// Differences: the VRF exists with its table and the host interface is enslaved to it.
pub fn check(nl: &Netlink, vpc: &VpcId, table: u32, host: &Link) -> Result<Vec<String>, NetError> {
    let name = vrf_name(vpc);
    let Some(vrf) = nl.link(&name)? else {
        return Ok(vec![format!("VRF {name} does not exist")]);
    };
    let mut problems = Vec::new();
    if vrf.vrf_table != Some(table) {
        problems.push(match vrf.vrf_table {
            Some(bound) => format!("VRF {name} is bound to table {bound}, expected {table}"),
            None => format!("VRF {name} is bound to no table, expected {table}"),
        });
    }
    if host.controller != Some(vrf.index) {
        problems.push(format!("{} is not enslaved to VRF {name}", host.name));
    }
    for family in Family::ALL {
        problems.extend(table::isolation_problems(nl, family, table)?);
    }
    Ok(problems)
}

/// Deletes the VRF device and the routes left in its table.
pub fn remove(nl: &Netlink, vpc: &VpcId, table: u32) -> Result<(), NetError> {
    nl.delete_link(&vrf_name(vpc))?;
    for family in Family::ALL {
        for route in nl.routes(family, table)? {
            nl.delete_route(&route)?;
        }
    }
    Ok(())
}

/// Tables bound to VRF devices on the node.
pub fn tables_in_use(nl: &Netlink) -> Result<BTreeSet<u32>, NetError> {
    Ok(nl
        .links()?
        .into_iter()
        .filter_map(|l| l.vrf_table)
        .collect())
}
