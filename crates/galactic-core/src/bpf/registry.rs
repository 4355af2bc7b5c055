//! Registering an attachment in the pinned maps, removing it, and sweeping what no attachment
//! owns any more.
//!
//! Node-level rows (`locator_table`, `function_table`, `vrf_table`, `node_src_addr_table`,
//! `public_uplink_table`) are shared by every attachment of a Block / VRF / node and are never
//! removed here (`vrf_table` has the datapath's GC). Attachment rows (`ifindex_vrf_table`,
//! pass-through entries of `egress_route_table`) and the per-VPC NAT66 default
//! (`egress_route_table[(table, ::/0)]`) are recorded before they are written, so DEL and GC
//! remove exactly them:
//!
//! ```text
//! <state_dir>/bpf/
//!   lock                         flock: one registration/removal at a time on the node
//!   attachments/G{vpc}{att}H.json {"hostIfname","ifindex","block","argument","vrfTableId",
//!                                  "prefixes":[canonical CIDR…],"pinDir"}
//!   nat66/{table}.json           {"vrfTableId","pinDir","sid","linkIfindex","dmac","smac",
//!                                  "replaces"?:{"sid",…}}: the ::/0 row last written in that
//!                                  table, and the row it replaced
//! ```
//! A pass-through key (VRF table, prefix) can be shared: masked /96 pool prefixes are the same
//! for every pod of a pool. Removal keeps a key that another record still lists, and never
//! deletes a key whose value is no longer the pass-through (someone routed it since).
//!
//! The ::/0 row serves every attachment of the VPC on the node: it goes when the last
//! attachment record of its table goes, and only while it still holds what was written or what
//! that replaced (a route someone else put at ::/0 since is left alone).

use super::abi::*;
use super::maps::{
    self, EgressRouteTable, FunctionTable, IfindexVrfTable, LocatorTable, NodeSrcAddrTable,
    PublicUplinkTable, VrfTable,
};
use super::usid::Usid;
use super::BpfError;
use crate::lockfile;
use crate::net::netlink::{format_mac, parse_mac};
use crate::state;
use aya::maps::MapError;
use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest wait for the registration lock before "try again later".
const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// What one attachment registers.
#[derive(Debug, Clone)]
pub struct Registration<'a> {
    /// The bpffs directory of the pinned maps.
    pub pin_dir: &'a Path,
    /// The node's state directory (registration records).
    pub state_dir: &'a Path,
    /// The VRF's uSID on this node.
    pub usid: Usid,
    /// The VPC's routing table on this node.
    pub vrf_table_id: u32,
    /// [`EGRESS_KIND_VETH`] or [`EGRESS_KIND_TAP`].
    pub egress_kind: u32,
    /// The host interface (`G…H`).
    pub host_ifname: &'a str,
    /// Its ifindex.
    pub host_ifindex: u32,
    /// The attachment's prefixes (masked on registration).
    pub prefixes: &'a [IpNetwork],
    /// The VPC's NAT66 default egress (`::/0` in its table), when shard SIDs are configured.
    pub nat66_default: Option<EgressRouteValue>,
}

/// The on-disk record of one registered attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentRecord {
    /// Host interface.
    pub host_ifname: String,
    /// Its ifindex at registration.
    pub ifindex: u32,
    /// uSID Block (48-bit value).
    pub block: u64,
    /// uSID Argument.
    pub argument: u16,
    /// VRF table the pass-through keys were written in.
    pub vrf_table_id: u32,
    /// Masked prefixes with pass-through entries.
    pub prefixes: Vec<IpNetwork>,
    /// Where the maps were.
    pub pin_dir: PathBuf,
}

/// The record of the NAT66 default row last written in one VPC table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nat66Record {
    /// The VPC's table.
    pub vrf_table_id: u32,
    /// Where the maps were.
    pub pin_dir: PathBuf,
    /// The row written.
    #[serde(flatten)]
    pub row: Nat66Row,
    /// The row it replaced. The record is written before the map, so after a failed or
    /// interrupted write the map may still hold this one; removal accepts either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<Nat66Row>,
}

/// One NAT66 default row, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nat66Row {
    /// The shard SID.
    pub sid: std::net::Ipv6Addr,
    /// Output link.
    pub link_ifindex: u32,
    /// Next-hop MAC, `aa:bb:…`.
    pub dmac: String,
    /// Source MAC, `aa:bb:…`.
    pub smac: String,
}

impl Nat66Row {
    fn new(value: &EgressRouteValue) -> Self {
        Self {
            sid: std::net::Ipv6Addr::from(value.sid_be),
            link_ifindex: value.link_ifindex,
            dmac: format_mac(&value.dmac),
            smac: format_mac(&value.smac),
        }
    }

    /// The map value it describes; `None` when a MAC does not parse (a hand-edited record).
    pub fn value(&self) -> Option<EgressRouteValue> {
        Some(EgressRouteValue {
            sid_be: self.sid.octets(),
            link_ifindex: self.link_ifindex,
            dmac: parse_mac(&self.dmac)?,
            smac: parse_mac(&self.smac)?,
        })
    }
}

/// The `egress_route_table` key of a VPC's NAT66 default: `(table, ::/0)`.
pub fn nat66_key(table_id: u32) -> EgressRouteKey {
    EgressRouteKey::new(
        EGRESS_KEY_PREFIX_BITS,
        EgressRouteKeyData {
            table_id,
            family: FAMILY_IPV6,
            addr_be: [0; 16],
        },
    )
}

fn nat66_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("bpf").join("nat66")
}

fn nat66_path(state_dir: &Path, table_id: u32) -> PathBuf {
    nat66_dir(state_dir).join(format!("{table_id}.json"))
}

fn records_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("bpf").join("attachments")
}

fn record_path(state_dir: &Path, host_ifname: &str) -> PathBuf {
    records_dir(state_dir).join(format!("{host_ifname}.json"))
}

fn lock(state_dir: &Path) -> Result<lockfile::LockGuard, BpfError> {
    lockfile::acquire(&state_dir.join("bpf").join("lock"), LOCK_TIMEOUT).map_err(BpfError::Busy)
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> BpfError {
    move |source| BpfError::Io { what, source }
}

/// The record of `host_ifname`, if one exists.
pub fn read_record(
    state_dir: &Path,
    host_ifname: &str,
) -> Result<Option<AttachmentRecord>, BpfError> {
    read_json(&record_path(state_dir, host_ifname))
}

/// The NAT66 record of `table_id`, if one exists.
pub fn read_nat66_record(state_dir: &Path, table_id: u32) -> Result<Option<Nat66Record>, BpfError> {
    read_json(&nat66_path(state_dir, table_id))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, BpfError> {
    Ok(state::read_json(path)?)
}

fn write_record(state_dir: &Path, record: &AttachmentRecord) -> Result<(), BpfError> {
    write_json(&record_path(state_dir, &record.host_ifname), record)
}

/// Writes a record (the registration lock is held: temporaries of `path` are killed writers').
fn write_json<T: Serialize>(path: &Path, record: &T) -> Result<(), BpfError> {
    Ok(state::write_json(path, record)?)
}

fn remove_record(state_dir: &Path, host_ifname: &str) -> Result<(), BpfError> {
    Ok(state::remove(&record_path(state_dir, host_ifname))?)
}

/// Every registration record (unparseable ones are skipped: they must not stop GC).
pub fn all_records(state_dir: &Path) -> Result<Vec<AttachmentRecord>, BpfError> {
    let dir = records_dir(state_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(format!("list {}", dir.display()))(e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(host) = name.strip_suffix(".json") {
            if let Ok(Some(record)) = read_record(state_dir, host) {
                out.push(record);
            }
        }
    }
    Ok(out)
}

/// CLOCK_MONOTONIC in nanoseconds: the datapath's clock (`bpf_ktime_get_ns`), which the GC
/// cutoff compares generations against.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusively borrowed timespec; CLOCK_MONOTONIC always exists on
    // Linux, so the call only writes `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// The egress LPM key of `(table, prefix)` (the prefix is masked).
pub fn egress_key(table_id: u32, prefix: IpNetwork) -> EgressRouteKey {
    let net = crate::net::netlink::masked(prefix);
    let mut addr_be = [0u8; 16];
    let family = match net.network() {
        std::net::IpAddr::V6(a) => {
            addr_be = a.octets();
            FAMILY_IPV6
        }
        std::net::IpAddr::V4(a) => {
            addr_be[..4].copy_from_slice(&a.octets());
            FAMILY_IPV4
        }
    };
    EgressRouteKey::new(
        EGRESS_KEY_PREFIX_BITS + u32::from(net.prefix()),
        EgressRouteKeyData {
            table_id,
            family,
            addr_be,
        },
    )
}

fn map_err(map: &'static str, op: &'static str) -> impl FnOnce(MapError) -> BpfError {
    move |source| BpfError::Map {
        map,
        op,
        source: Box::new(source),
    }
}

/// `Ok(None)` for an absent key.
fn absent_ok<V>(r: Result<V, MapError>) -> Result<Option<V>, MapError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(MapError::KeyNotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The node-level maps a registration writes.
struct NodeMaps {
    locator: LocatorTable,
    function: FunctionTable,
    vrf: VrfTable,
    ifindex: IfindexVrfTable,
    egress: EgressRouteTable,
}

impl NodeMaps {
    /// Opens every map before anything is written, so a missing one changes nothing.
    fn open(dir: &Path) -> Result<Self, BpfError> {
        Ok(Self {
            locator: maps::open_typed(dir, maps::LOCATOR_TABLE)?,
            function: maps::open_typed(dir, maps::FUNCTION_TABLE)?,
            vrf: maps::open_typed(dir, maps::VRF_TABLE)?,
            ifindex: maps::open_typed(dir, maps::IFINDEX_VRF_TABLE)?,
            egress: maps::open_typed(dir, maps::EGRESS_ROUTE_TABLE)?,
        })
    }
}

/// Registers the VPC's NAT66 default (when given), the VRF's uSID (locator, function, VRF
/// rows) and this attachment's rows (ifindex → VRF, pass-through prefixes). Idempotent;
/// `vrf_table` counters survive. A failed write undoes this registration before returning.
pub fn register_attachment(r: &Registration<'_>) -> Result<AttachmentRecord, BpfError> {
    let mut m = NodeMaps::open(r.pin_dir)?;
    let _lock = lock(r.state_dir)?;
    let record = AttachmentRecord {
        host_ifname: r.host_ifname.to_owned(),
        ifindex: r.host_ifindex,
        block: r.usid.block.value(),
        argument: r.usid.argument.get(),
        vrf_table_id: r.vrf_table_id,
        prefixes: r
            .prefixes
            .iter()
            .map(|p| crate::net::netlink::masked(*p))
            .collect(),
        pin_dir: r.pin_dir.to_owned(),
    };
    // Intent first: a crash after this leaves a record DEL and GC can remove rows by.
    write_record(r.state_dir, &record)?;
    if let Err(e) = write_rows(&mut m, r, &record) {
        // Undo what this registration may have written, by its record (shared rows stay). If
        // that fails too, the record stays for DEL and GC; the write error is what matters.
        let _ = unregister_locked(r.state_dir, r.host_ifname);
        return Err(e);
    }
    Ok(record)
}

fn write_rows(
    m: &mut NodeMaps,
    r: &Registration<'_>,
    record: &AttachmentRecord,
) -> Result<(), BpfError> {
    if let Some(value) = r.nat66_default {
        // Per VPC, not per attachment: recorded before the write (with the row it replaces) so
        // that the removal of the table's last attachment, or GC, finds what to remove whichever
        // of the two the map holds if the write below fails or is interrupted.
        let path = nat66_path(r.state_dir, r.vrf_table_id);
        let previous = read_nat66_record(r.state_dir, r.vrf_table_id)?;
        let row = Nat66Row::new(&value);
        if previous.as_ref().map(|p| &p.row) != Some(&row) {
            let record = Nat66Record {
                vrf_table_id: r.vrf_table_id,
                pin_dir: r.pin_dir.to_owned(),
                row,
                replaces: previous.map(|p| p.row),
            };
            write_json(&path, &record)?;
        }
        m.egress
            .insert(&nat66_key(r.vrf_table_id), value, 0)
            .map_err(map_err(maps::EGRESS_ROUTE_TABLE, "insert"))?;
    }
    let now = monotonic_ns();
    m.locator
        .insert(r.usid.locator_key(), LocatorValue { generation_ns: now }, 0)
        .map_err(map_err(maps::LOCATOR_TABLE, "insert"))?;
    m.function
        .insert(
            r.usid.function_key(),
            FunctionValue {
                behavior: BEHAVIOR_END_DT46,
            },
            0,
        )
        .map_err(map_err(maps::FUNCTION_TABLE, "insert"))?;
    register_vrf(&mut m.vrf, r, now)?;
    let row = IfindexVrfValue {
        block: record.block,
        argument: record.argument,
        _pad: [0; 6],
    };
    m.ifindex
        .insert(r.host_ifindex, row, 0)
        .map_err(map_err(maps::IFINDEX_VRF_TABLE, "insert"))?;
    for prefix in &record.prefixes {
        m.egress
            .insert(
                &egress_key(r.vrf_table_id, *prefix),
                EgressRouteValue::PASS_THROUGH,
                0,
            )
            .map_err(map_err(maps::EGRESS_ROUTE_TABLE, "insert"))?;
    }
    Ok(())
}

/// `vrf_table` read-modify-write: table and kind set, generation stamped, counters kept.
// The datapath may bump counters between our read and write; that window loses at most those
// increments (upstream has the same window; the map has no compare-and-swap).
fn register_vrf(vrf: &mut VrfTable, r: &Registration<'_>, now: u64) -> Result<(), BpfError> {
    let key = r.usid.vrf_key();
    let old = absent_ok(vrf.get(&key, 0))
        .map_err(map_err(maps::VRF_TABLE, "read"))?
        .unwrap_or_default();
    let value = VrfValue {
        vrf_table_id: r.vrf_table_id,
        egress_kind: r.egress_kind,
        generation_ns: now,
        ..old
    };
    vrf.insert(key, value, 0)
        .map_err(map_err(maps::VRF_TABLE, "insert"))
}

/// Removes the rows of `host_ifname`'s registration, if it has one: its `ifindex_vrf_table`
/// row (only while it still points at the recorded VRF), its pass-through entries (only those
/// no other registration lists) and, when it was its table's last registration, the VPC's
/// NAT66 default. Tolerates a node without the datapath (no record, or no pinned maps).
/// Returns whether a registration was removed.
pub fn unregister_attachment(state_dir: &Path, host_ifname: &str) -> Result<bool, BpfError> {
    let _lock = lock(state_dir)?;
    unregister_locked(state_dir, host_ifname)
}

fn unregister_locked(state_dir: &Path, host_ifname: &str) -> Result<bool, BpfError> {
    let Some(record) = read_record(state_dir, host_ifname)? else {
        return Ok(false);
    };
    let others: Vec<AttachmentRecord> = all_records(state_dir)?
        .into_iter()
        .filter(|r| r.host_ifname != host_ifname)
        .collect();
    let shared: HashSet<(u32, IpNetwork)> = others
        .iter()
        .flat_map(|r| r.prefixes.iter().map(move |p| (r.vrf_table_id, *p)))
        .collect();
    match remove_rows(&record, &shared) {
        // No maps: nothing of this registration can remain in them.
        Err(BpfError::NotLoaded { .. }) => {}
        other => other?,
    }
    remove_record(state_dir, host_ifname)?;
    // The NAT66 default serves the whole VPC: it stays while another attachment of the table
    // is registered. A failure here leaves its record for GC's orphan sweep.
    if !others.iter().any(|o| o.vrf_table_id == record.vrf_table_id) {
        release_nat66(state_dir, record.vrf_table_id)?;
    }
    Ok(true)
}

/// Removes the NAT66 default of `table_id` (when it still holds what its record says was
/// written) and the record.
fn release_nat66(state_dir: &Path, table_id: u32) -> Result<(), BpfError> {
    let Some(record) = read_nat66_record(state_dir, table_id)? else {
        return Ok(());
    };
    match remove_nat66_row(&record) {
        // No maps: the row cannot remain.
        Err(BpfError::NotLoaded { .. }) => {}
        other => other?,
    }
    Ok(state::remove(&nat66_path(state_dir, table_id))?)
}

fn remove_nat66_row(record: &Nat66Record) -> Result<(), BpfError> {
    let mut egress: EgressRouteTable = maps::open_typed(&record.pin_dir, maps::EGRESS_ROUTE_TABLE)?;
    let key = nat66_key(record.vrf_table_id);
    let current = exact_egress(&egress, &key)?;
    // Someone else (a routing daemon) may own ::/0 in this table since: leave theirs.
    let ours =
        |row: Option<&Nat66Row>| current.is_some() && row.and_then(Nat66Row::value) == current;
    if ours(Some(&record.row)) || ours(record.replaces.as_ref()) {
        ignore_absent(egress.remove(&key)).map_err(map_err(maps::EGRESS_ROUTE_TABLE, "delete"))?;
    }
    Ok(())
}

/// Every NAT66 record (unparseable ones are skipped: they must not stop GC).
pub fn all_nat66_records(state_dir: &Path) -> Result<Vec<Nat66Record>, BpfError> {
    let dir = nat66_dir(state_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(format!("list {}", dir.display()))(e)),
    };
    Ok(entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let table = name.strip_suffix(".json")?.parse::<u32>().ok()?;
            read_nat66_record(state_dir, table).ok().flatten()
        })
        .collect())
}

fn remove_rows(
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
        if exact_egress(&egress, &key)? == Some(EgressRouteValue::PASS_THROUGH) {
            ignore_absent(egress.remove(&key))
                .map_err(map_err(maps::EGRESS_ROUTE_TABLE, "delete"))?;
        }
    }
    Ok(())
}

fn ignore_absent(r: Result<(), MapError>) -> Result<(), MapError> {
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
    // NAT66 defaults whose table has no registration left: a removal that failed half-way, or
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

/// What CHECK expects of one attachment.
#[derive(Debug, Clone)]
pub struct Expected<'a> {
    /// The pin directory.
    pub pin_dir: &'a Path,
    /// The VRF's uSID.
    pub usid: Usid,
    /// The VPC's current routing table.
    pub vrf_table_id: u32,
    /// Host interface index.
    pub host_ifindex: u32,
    /// The attachment's prefixes.
    pub prefixes: &'a [IpNetwork],
    /// The node's NAT66 shard SIDs; when any, the VPC's `::/0` row must encapsulate to one.
    pub nat66_sids: &'a [std::net::Ipv6Addr],
}

/// Compares the maps with `e`; returns every difference found (empty = consistent).
pub fn verify(e: &Expected<'_>) -> Result<Vec<String>, BpfError> {
    let m = NodeMaps::open(e.pin_dir)?;
    let mut problems = Vec::new();
    let u = e.usid;
    if absent_ok(m.locator.get(&u.locator_key(), 0))
        .map_err(map_err(maps::LOCATOR_TABLE, "read"))?
        .is_none()
    {
        problems.push(format!(
            "locator_table has no entry for {:#x}",
            u.locator_key()
        ));
    }
    match absent_ok(m.function.get(&u.function_key(), 0))
        .map_err(map_err(maps::FUNCTION_TABLE, "read"))?
    {
        Some(v) if v.behavior == BEHAVIOR_END_DT46 => {}
        other => problems.push(format!(
            "function_table[{:#x}] is {other:?}, want behaviour {BEHAVIOR_END_DT46}",
            u.function_key()
        )),
    }
    match absent_ok(m.vrf.get(&u.vrf_key(), 0)).map_err(map_err(maps::VRF_TABLE, "read"))? {
        Some(v) if v.vrf_table_id == e.vrf_table_id => {}
        Some(v) => problems.push(format!(
            "vrf_table[{:#x}] points at table {}, the VPC's table is {}",
            u.vrf_key(),
            v.vrf_table_id,
            e.vrf_table_id
        )),
        None => problems.push(format!("vrf_table has no entry for {:#x}", u.vrf_key())),
    }
    let want = IfindexVrfValue {
        block: u.block.value(),
        argument: u.argument.get(),
        _pad: [0; 6],
    };
    let row = absent_ok(m.ifindex.get(&e.host_ifindex, 0))
        .map_err(map_err(maps::IFINDEX_VRF_TABLE, "read"))?;
    if row != Some(want) {
        problems.push(format!(
            "ifindex_vrf_table[{}] is {row:?}, want {want:?}",
            e.host_ifindex
        ));
    }
    if !e.nat66_sids.is_empty() {
        match exact_egress(&m.egress, &nat66_key(e.vrf_table_id))? {
            Some(v)
                if v.link_ifindex != 0
                    && e.nat66_sids.contains(&std::net::Ipv6Addr::from(v.sid_be)) => {}
            Some(v) => problems.push(format!(
                "egress_route_table's NAT66 default (::/0) in table {} encapsulates to {} via link {}, not to a configured shard SID",
                e.vrf_table_id,
                std::net::Ipv6Addr::from(v.sid_be),
                v.link_ifindex
            )),
            None => problems.push(format!(
                "egress_route_table has no NAT66 default (::/0) in table {}",
                e.vrf_table_id
            )),
        }
    }
    for prefix in e.prefixes {
        let key = egress_key(e.vrf_table_id, *prefix);
        if exact_egress(&m.egress, &key)?.is_none() {
            problems.push(format!(
                "egress_route_table has no entry for {} in table {}",
                crate::net::netlink::masked(*prefix),
                e.vrf_table_id
            ));
        }
    }
    Ok(problems)
}

/// Writes `node_src_addr_table[0]`: this node's SRv6 source address. Node-wide; never removed
/// by the CNI.
pub fn write_node_src_addr(pin_dir: &Path, addr: std::net::Ipv6Addr) -> Result<(), BpfError> {
    let mut table: NodeSrcAddrTable = maps::open_typed(pin_dir, maps::NODE_SRC_ADDR_TABLE)?;
    table
        .set(
            0,
            NodeSrcAddrValue {
                addr_be: addr.octets(),
            },
            0,
        )
        .map_err(map_err(maps::NODE_SRC_ADDR_TABLE, "update"))
}

/// Writes `public_uplink_table[0]`: this node's public uplink. Node-wide; never removed by the
/// CNI.
pub fn write_public_uplink(pin_dir: &Path, value: PublicUplinkValue) -> Result<(), BpfError> {
    let mut table: PublicUplinkTable = maps::open_typed(pin_dir, maps::PUBLIC_UPLINK_TABLE)?;
    table
        .set(0, value, 0)
        .map_err(map_err(maps::PUBLIC_UPLINK_TABLE, "update"))
}

/// [`unregister_attachment`] for the masters' DEL, which never fails on datapath state: an
/// error is logged and the registration record stays, so the next CNI GC retries it.
pub fn unregister_or_defer(state_dir: &Path, host_ifname: &str) {
    if let Err(e) = unregister_attachment(state_dir, host_ifname) {
        crate::log::warn(
            "DEL: could not remove the attachment's eBPF datapath rows; GC retries",
            serde_json::json!({"hostIfname": host_ifname, "err": e.to_string()}),
        );
    }
}
