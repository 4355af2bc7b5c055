//! Moving an existing registration to its VPC's new routing table: the VPC's VRF was re-bound to
//! another table behind the domain record (`galactic_core::net::domain`'s repair adopts the
//! device's table), and the rows written for the attachment still name the old one.
//!
//! Only a registration that has a record is moved (one that never registered stays
//! unregistered: galactic-bgp's next ADD writes its rows). New rows go in first, then the
//! record, then the old rows: a crash in between leaves a record naming the new table whose old
//! rows GC's sweep cannot find, but those are only pass-through rows of a table no VRF routes
//! with any more.

use super::records::*;
use super::removal::{release_row, remove_if_ours};
use super::*;
use crate::bpf::usid::vrf_key;

/// Re-writes the rows of `host_ifname`'s registration for table `table`: its pass-through
/// entries, the `vrf_table` row of its VRF and, when it is the old table's last registration,
/// the VPC's egress rows; then its record. Returns whether the registration was moved (`false`:
/// no registration, or it is in `table` already). A node without pinned maps has only the
/// record to move.
pub fn retable_attachment(
    state_dir: &Path,
    host_ifname: &str,
    table: u32,
) -> Result<bool, BpfError> {
    let _lock = lock(state_dir)?;
    let Some(old) = read_record(state_dir, host_ifname)? else {
        return Ok(false);
    };
    if old.vrf_table_id == table {
        return Ok(false);
    }
    let moved = AttachmentRecord {
        vrf_table_id: table,
        ..old.clone()
    };
    // The table's other registrations are the VPC's (`vpc_records`).
    let others: Vec<AttachmentRecord> = vpc_records(state_dir, host_ifname)?
        .into_iter()
        .filter(|r| r.host_ifname != host_ifname)
        .collect();
    match write_moved_rows(&moved) {
        Err(BpfError::NotLoaded { .. }) => {}
        other => other?,
    }
    write_record(state_dir, &moved)?;
    match remove_old_rows(&old, &others) {
        Err(BpfError::NotLoaded { .. }) => {}
        other => other?,
    }
    if !others.iter().any(|o| o.vrf_table_id == old.vrf_table_id) {
        move_egress_rows(state_dir, old.vrf_table_id, table)?;
    }
    Ok(true)
}

/// The pass-through entries in the new table and the VRF's `vrf_table` row naming it
/// (counters and generation kept: the VRF is the same).
fn write_moved_rows(moved: &AttachmentRecord) -> Result<(), BpfError> {
    let mut egress: EgressRouteTable = maps::open_typed(&moved.pin_dir, maps::EGRESS_ROUTE_TABLE)?;
    let mut vrf: VrfTable = maps::open_typed(&moved.pin_dir, maps::VRF_TABLE)?;
    for prefix in &moved.prefixes {
        egress
            .insert(
                &egress_key(moved.vrf_table_id, *prefix),
                EgressRouteValue::PASS_THROUGH,
                0,
            )
            .map_err(map_err(maps::EGRESS_ROUTE_TABLE, "insert"))?;
    }
    let key = vrf_key(moved.block, moved.argument);
    if let Some(row) = absent_ok(vrf.get(&key, 0)).map_err(map_err(maps::VRF_TABLE, "read"))? {
        let value = VrfValue {
            vrf_table_id: moved.vrf_table_id,
            ..row
        };
        vrf.insert(key, value, 0)
            .map_err(map_err(maps::VRF_TABLE, "insert"))?;
    }
    Ok(())
}

/// The old table's pass-through entries no other registration of that table lists, each only
/// while it is still the pass-through (someone may have routed the prefix since).
fn remove_old_rows(old: &AttachmentRecord, others: &[AttachmentRecord]) -> Result<(), BpfError> {
    let mut egress: EgressRouteTable = maps::open_typed(&old.pin_dir, maps::EGRESS_ROUTE_TABLE)?;
    for prefix in &old.prefixes {
        let shared = others
            .iter()
            .any(|o| o.vrf_table_id == old.vrf_table_id && o.prefixes.contains(prefix));
        if shared {
            continue;
        }
        let key = egress_key(old.vrf_table_id, *prefix);
        remove_if_ours(&mut egress, &key, |v| *v == EgressRouteValue::PASS_THROUGH)?;
    }
    Ok(())
}

/// The VPC's egress rows (`::/0`, NAT64 prefixes) of table `from`, re-written in table `to`
/// (record first, then the row) and then released from `from`.
fn move_egress_rows(state_dir: &Path, from: u32, to: u32) -> Result<(), BpfError> {
    for record in egress_records(state_dir, from)? {
        let moved = Nat66Record {
            vrf_table_id: to,
            replaces: None,
            ..record.clone()
        };
        write_json(&nat66_path(state_dir, to, record.prefix), &moved)?;
        if let Some(value) = record.row.value() {
            match maps::open_typed::<EgressRouteTable>(&record.pin_dir, maps::EGRESS_ROUTE_TABLE) {
                Ok(mut egress) => egress
                    .insert(&egress_key(to, record.prefix.into()), value, 0)
                    .map_err(map_err(maps::EGRESS_ROUTE_TABLE, "insert"))?,
                Err(BpfError::NotLoaded { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        release_row(state_dir, &record)?;
    }
    Ok(())
}
