//! Removing an attachment's rows (DEL, rollback) and sweeping rows no attachment owns (GC).

use super::records::*;
use super::*;

/// Removes the rows of `host_ifname`'s registration, if it has one: its `ifindex_vrf_table`
/// row (only while it still points at the recorded VRF), its pass-through entries (only those
/// no other registration lists) and, when it was its table's last registration, the VPC's
/// NAT66 default. Tolerates a node without the datapath (no record, or no pinned maps).
/// Returns whether a registration was removed.
pub fn unregister_attachment(state_dir: &Path, host_ifname: &str) -> Result<bool, BpfError> {
    let _lock = lock(state_dir)?;
    unregister_locked(state_dir, host_ifname)
}

pub(super) fn unregister_locked(state_dir: &Path, host_ifname: &str) -> Result<bool, BpfError> {
    let Some(record) = read_record(state_dir, host_ifname)? else {
        return Ok(false);
    };
    // What the removal decides from other records is the VPC's (`vpc_records`): the keys of
    // its table, its VRF's kind and attribution, its table's egress rows.
    let others: Vec<AttachmentRecord> = vpc_records(state_dir, host_ifname)?
        .into_iter()
        .filter(|r| r.host_ifname != host_ifname)
        .collect();
    let shared: HashSet<(u32, IpNetwork)> = others
        .iter()
        .flat_map(|r| r.prefixes.iter().map(move |p| (r.vrf_table_id, *p)))
        .collect();
    // A later attachment of ours on the same ifindex owns the interface's rows now: one of the
    // VPC's, or another VPC's, whose registration wrote the interface's row for its own VRF.
    let reused =
        others.iter().any(|o| o.ifindex == record.ifindex) || ifindex_row_of_another_vrf(&record)?;
    match remove_rows(&record, &shared) {
        // No maps: nothing of this registration can remain in them.
        Err(BpfError::NotLoaded { .. }) => {}
        other => other?,
    }
    newest::remove_interface_rows(&record, reused)?;
    remove_record(state_dir, host_ifname)?;
    newest::settle_attribution(state_dir, &record, &others)?;
    // A VPC whose last tap went serves its veth attachments with the veth redirect again.
    match kind::settle_after_removal(&record, &others) {
        Err(BpfError::NotLoaded { .. }) => {}
        other => other?,
    }
    // The egress rows serve the whole VPC: it stays while another attachment of the table
    // is registered. A failure here leaves its record for GC's orphan sweep.
    if !others.iter().any(|o| o.vrf_table_id == record.vrf_table_id) {
        release_nat66(state_dir, record.vrf_table_id)?;
    }
    Ok(true)
}

/// Whether `record`'s interface's `ifindex_vrf_table` row is another VRF's: a registration of
/// another VPC on the same ifindex wrote it since (the row of the last registration on an
/// ifindex is its; a removal deletes it only while it is the removed registration's VRF's).
/// `false` without the maps or the row.
fn ifindex_row_of_another_vrf(record: &AttachmentRecord) -> Result<bool, BpfError> {
    let ifindex: IfindexVrfTable = match maps::open_typed(&record.pin_dir, maps::IFINDEX_VRF_TABLE)
    {
        Ok(map) => map,
        Err(BpfError::NotLoaded { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    let row = absent_ok(ifindex.get(&record.ifindex, 0))
        .map_err(map_err(maps::IFINDEX_VRF_TABLE, "read"))?;
    Ok(row.is_some_and(|v| (v.block, v.argument) != (record.block, record.argument)))
}

/// Removes every egress row of `table_id` (each while it still holds what its record says was
/// written) and their records.
pub(super) fn release_nat66(state_dir: &Path, table_id: u32) -> Result<(), BpfError> {
    for record in egress_records(state_dir, table_id)? {
        release_row(state_dir, &record)?;
    }
    Ok(())
}

/// Removes one recorded egress row and its record.
pub(super) fn release_row(state_dir: &Path, record: &Nat66Record) -> Result<(), BpfError> {
    match remove_nat66_row(record) {
        // No maps: the row cannot remain.
        Err(BpfError::NotLoaded { .. }) => {}
        other => other?,
    }
    let path = nat66_path(state_dir, record.vrf_table_id, record.prefix);
    Ok(state::remove(&path)?)
}

pub(super) fn remove_nat66_row(record: &Nat66Record) -> Result<(), BpfError> {
    let mut egress: EgressRouteTable = maps::open_typed(&record.pin_dir, maps::EGRESS_ROUTE_TABLE)?;
    let key = egress_key(record.vrf_table_id, record.prefix.into());
    // Someone else (a routing daemon) may own the prefix in this table since: leave theirs.
    let ours = |current: &EgressRouteValue| {
        [Some(&record.row), record.replaces.as_ref()]
            .into_iter()
            .any(|row| row.and_then(Nat66Row::value).as_ref() == Some(current))
    };
    remove_if_ours(&mut egress, &key, ours)
}

/// Removes exactly `key` when the value the map gives its prefix is `ours`. The longest match
/// of a key's prefix is the key's own value whenever the key is there, and deleting a key that
/// is not there (a covering key matched) changes nothing: one lookup and one delete, where
/// telling the key from a covering one first ([`exact_egress`]) walked every key of the map, one
/// system call each, on every removal (decision 0079).
pub(super) fn remove_if_ours(
    egress: &mut EgressRouteTable,
    key: &EgressRouteKey,
    ours: impl Fn(&EgressRouteValue) -> bool,
) -> Result<(), BpfError> {
    let found = absent_ok(egress.get(key, 0)).map_err(map_err(maps::EGRESS_ROUTE_TABLE, "read"))?;
    if !found.as_ref().is_some_and(ours) {
        return Ok(());
    }
    ignore_absent(egress.remove(key)).map_err(map_err(maps::EGRESS_ROUTE_TABLE, "delete"))
}

pub(super) fn remove_rows(
    record: &AttachmentRecord,
    shared: &HashSet<(u32, IpNetwork)>,
) -> Result<(), BpfError> {
    let mut ifindex: IfindexVrfTable = maps::open_typed(&record.pin_dir, maps::IFINDEX_VRF_TABLE)?;
    let mut egress: EgressRouteTable = maps::open_typed(&record.pin_dir, maps::EGRESS_ROUTE_TABLE)?;
    let row = absent_ok(ifindex.get(&record.ifindex, 0))
        .map_err(map_err(maps::IFINDEX_VRF_TABLE, "read"))?;
    // The ifindex may have been reused by a later attachment of another VRF: leave its row.
    if row.is_some_and(|v| v.block == record.block && v.argument == record.argument) {
        ignore_absent(ifindex.remove(&record.ifindex))
            .map_err(map_err(maps::IFINDEX_VRF_TABLE, "delete"))?;
    }
    for prefix in &record.prefixes {
        if shared.contains(&(record.vrf_table_id, *prefix)) {
            continue;
        }
        let key = egress_key(record.vrf_table_id, *prefix);
        remove_if_ours(&mut egress, &key, |v| *v == EgressRouteValue::PASS_THROUGH)?;
    }
    Ok(())
}

pub(super) fn ignore_absent(r: Result<(), MapError>) -> Result<(), MapError> {
    absent_ok(r).map(|_| ())
}

/// The value stored under exactly `key` (an LPM lookup would return a covering prefix).
pub fn exact_egress(
    egress: &EgressRouteTable,
    key: &EgressRouteKey,
) -> Result<Option<EgressRouteValue>, BpfError> {
    let found = absent_ok(egress.get(key, 0)).map_err(map_err(maps::EGRESS_ROUTE_TABLE, "read"))?;
    // The longest match is exact only when it has the same length; same-length matches of a
    // masked key are the key itself.
    let exact = egress
        .keys()
        .filter_map(Result::ok)
        .any(|k| k.prefix_len() == key.prefix_len() && k.data() == key.data());
    Ok(found.filter(|_| exact))
}

/// Removes the registrations of host interfaces not in `live` (CNI GC). Returns the removed
/// interface names; errors of single records are collected, not fatal to the others.
pub fn sweep_attachments(
    state_dir: &Path,
    live: &HashSet<String>,
) -> Result<Vec<String>, BpfError> {
    let _lock = lock(state_dir)?;
    deferred::retry_locked(state_dir);
    let mut removed = Vec::new();
    let mut first_error = None;
    for record in all_records(state_dir)? {
        if live.contains(&record.host_ifname) {
            continue;
        }
        match unregister_locked(state_dir, &record.host_ifname) {
            Ok(_) => removed.push(record.host_ifname),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    // Egress rows whose table has no registration left: a removal that failed half-way, or
    // a crash between the record and the first attachment's.
    let tables: HashSet<u32> = all_records(state_dir)?
        .iter()
        .map(|r| r.vrf_table_id)
        .collect();
    for nat66 in all_nat66_records(state_dir)? {
        if !tables.contains(&nat66.vrf_table_id) {
            if let Err(e) = release_nat66(state_dir, nat66.vrf_table_id) {
                first_error.get_or_insert(e);
            }
        }
    }
    // What writers killed between their write and their rename left behind.
    for dir in [records_dir(state_dir), nat66_dir(state_dir)] {
        if let Err(e) = crate::state::sweep_temporaries(&dir) {
            first_error.get_or_insert(io(format!("sweep {}", dir.display()))(
                std::io::Error::other(e),
            ));
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// [`unregister_attachment`] for the masters' DEL, which never fails on datapath state: the
/// removals an earlier DEL deferred are retried first; an error is logged and the removal
/// deferred (a marker in `<state_dir>/bpf/deferred/`, `deferred.rs`), so the next registration
/// or removal on the node retries it, and the next CNI GC too.
pub fn unregister_or_defer(state_dir: &Path, host_ifname: &str) {
    let outcome = lock(state_dir).and_then(|_lock| {
        deferred::retry_locked(state_dir);
        unregister_locked(state_dir, host_ifname).inspect_err(|e| {
            // Best effort: without the marker GC is still the fallback.
            if let Err(marker) = deferred::defer_locked(state_dir, host_ifname, &e.to_string()) {
                warn_defer(host_ifname, &marker);
            }
        })
    });
    if let Err(e) = outcome {
        crate::log::warn(
            "DEL: could not remove the attachment's eBPF datapath rows; the next registration or removal on the node retries",
            serde_json::json!({"hostIfname": host_ifname, "err": e.to_string()}),
        );
    }
}

fn warn_defer(host_ifname: &str, e: &BpfError) {
    crate::log::warn(
        "DEL: could not record the deferred eBPF removal; GC retries",
        serde_json::json!({"hostIfname": host_ifname, "err": e.to_string()}),
    );
}
