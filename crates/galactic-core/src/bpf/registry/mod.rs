//! Registering an attachment in the pinned maps, removing it, and sweeping what no attachment
//! owns any more.
//!
//! Node-level rows (`locator_table`, `function_table`, `vrf_table`, `node_src_addr_table`,
//! `public_uplink_table`) are shared by every attachment of a Block / VRF / node and are never
//! removed here (`vrf_table` has the datapath's GC; its egress kind is the VPC's, from the
//! records: `kind.rs`). Attachment rows (`ifindex_vrf_table`,
//! pass-through entries of `egress_route_table`) and the per-VPC egress rows of a VPC that opted
//! in (`egress_route_table[(table, ::/0)]` and one per NAT64 prefix) are recorded before they are
//! written, so DEL and GC remove exactly them:
//!
//! ```text
//! <state_dir>/bpf/
//!   lock                         flock: one registration/removal at a time on the node
//!   deferred/G{vpc}{att}H.json   {"hostIfname","error"}: a removal DEL could not finish, retried
//!                                by the next registration or removal (`deferred.rs`)
//!   attachments/G{vpc}{att}H.json {"hostIfname","ifindex","block","argument","vrfTableId",
//!                                  "prefixes":[canonical CIDR…],"pinDir","egressKind"}
//!   nat66/{table}.json           {"vrfTableId","prefix","pinDir","sid","linkIfindex","dmac",
//!                                  "smac","replaces"?:{"sid",…}}: the ::/0 row last written in
//!                                  that table, and the row it replaced ("prefix" absent in
//!                                  records written before NAT64: ::/0)
//!   nat66/{table}-{addr}-{len}.json  the same for a NAT64 prefix (':' written '_')
//! ```
//! A pass-through key (VRF table, prefix) can be shared: masked /96 pool prefixes are the same
//! for every pod of a pool. Removal keeps a key that another record still lists, and never
//! deletes a key whose value is no longer the pass-through (someone routed it since).
//!
//! The rows of the maps only upstream's newest datapath pins (`ifindex_egress_kind_table`,
//! `tenant_gw_table` per interface, `vpc_attribution_table` per VRF) go by the same attachment
//! records and are skipped while those maps are not pinned (`newest.rs`).
//!
//! When the VPC's VRF is re-bound to another table behind the domain record, the VPC's
//! convergence moves each registration's rows to the new table ([`retable_attachment`]).
//!
//! The egress rows serve every attachment of the VPC on the node: they go when the last
//! attachment record of their table goes, or when an ADD of the VPC no longer writes them (it
//! opted out, a prefix left the node config), each only while it still holds what was written or
//! what that replaced (a route someone else put at that prefix since is left alone).

mod deferred;
mod kind;
mod newest;
mod peers;
mod records;
mod removal;
mod retable;
mod verify;

pub use deferred::{deferred, Deferral};
pub use newest::attachment_identity;
pub use records::{
    all_nat66_records, all_records, egress_records, nat66_key, read_nat66_record, read_record,
    vpc_records, AttachmentRecord, Nat66Record, Nat66Row, DEFAULT_ROUTE,
};
pub use removal::{exact_egress, sweep_attachments, unregister_attachment, unregister_or_defer};
pub use retable::retable_attachment;
pub use verify::{verify, Egress, Expected};

use records::*;
use removal::*;

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
use ipnetwork::{IpNetwork, Ipv6Network};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest wait for the registration lock before "try again later".
pub(super) const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// The VPC's egress rows (`::/0` and each NAT64 prefix in its table) when it opted in to
    /// internet egress, else empty. Recorded rows of the table not listed are withdrawn.
    pub egress: &'a [(Ipv6Network, EgressRouteValue)],
    /// The attachment's IPAM gateways for `tenant_gw_table` (a family without one all zero);
    /// `None` without an IPAM result (no row).
    pub gateways: Option<TenantGwValue>,
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

pub(super) fn map_err(map: &'static str, op: &'static str) -> impl FnOnce(MapError) -> BpfError {
    move |source| BpfError::Map {
        map,
        op,
        source: Box::new(source),
    }
}

/// `Ok(None)` for an absent key: a lookup reports it as `KeyNotFound`, a deletion as the
/// system call's `ENOENT` (aya maps only the lookup's).
pub(super) fn absent_ok<V>(r: Result<V, MapError>) -> Result<Option<V>, MapError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(MapError::KeyNotFound) => Ok(None),
        Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The node-level maps a registration writes.
pub(super) struct NodeMaps {
    locator: LocatorTable,
    function: FunctionTable,
    vrf: VrfTable,
    ifindex: IfindexVrfTable,
    egress: EgressRouteTable,
    newest: newest::NewestMaps,
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
            newest: newest::NewestMaps::open(dir)?,
        })
    }
}

/// Registers the VPC's egress rows (withdrawing the ones it no longer has), the VRF's uSID (locator, function, VRF
/// rows) and this attachment's rows (ifindex → VRF, pass-through prefixes). Idempotent;
/// `vrf_table` counters survive. A failed write undoes this registration before returning.
pub fn register_attachment(r: &Registration<'_>) -> Result<AttachmentRecord, BpfError> {
    let mut m = NodeMaps::open(r.pin_dir)?;
    let _lock = lock(r.state_dir)?;
    // Removals an earlier DEL could not finish, before this registration's rows: one readdir
    // when there are none (`deferred.rs`).
    deferred::retry_locked(r.state_dir);
    deferred::supersede_locked(r.state_dir, r.host_ifname);
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
        egress_kind: Some(r.egress_kind),
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

pub(super) fn write_rows(
    m: &mut NodeMaps,
    r: &Registration<'_>,
    record: &AttachmentRecord,
) -> Result<(), BpfError> {
    write_egress(m, r)?;
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
    // The VRF's rows hold its VPC's kind and attribution before this registration; its
    // VPC's records are read only when they cannot tell what this one changes (`peers.rs`).
    let mut peers = peers::Peers::of(r);
    register_vrf(&mut m.vrf, r, &mut peers, now)?;
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
    newest::write_newest(&mut m.newest, r, &mut peers, now)
}

/// The VPC's egress rows. Per VPC, not per attachment: each is recorded before the write (with
/// the row it replaces) so that the removal of the table's last attachment, or GC, finds what
/// to remove whichever of the two the map holds if the write fails or is interrupted. Recorded
/// rows this registration does not list (the network opted out, a NAT64 prefix left the node
/// config) are withdrawn.
fn write_egress(m: &mut NodeMaps, r: &Registration<'_>) -> Result<(), BpfError> {
    for (prefix, value) in r.egress {
        let path = nat66_path(r.state_dir, r.vrf_table_id, *prefix);
        let previous: Option<Nat66Record> = read_json(&path)?;
        let row = Nat66Row::new(value);
        if previous.as_ref().map(|p| &p.row) != Some(&row) {
            let record = Nat66Record {
                vrf_table_id: r.vrf_table_id,
                prefix: *prefix,
                pin_dir: r.pin_dir.to_owned(),
                row,
                replaces: previous.map(|p| p.row),
            };
            write_json(&path, &record)?;
        }
        m.egress
            .insert(&egress_key(r.vrf_table_id, (*prefix).into()), *value, 0)
            .map_err(map_err(maps::EGRESS_ROUTE_TABLE, "insert"))?;
    }
    for stale in egress_records(r.state_dir, r.vrf_table_id)? {
        if !r.egress.iter().any(|(p, _)| *p == stale.prefix) {
            release_row(r.state_dir, &stale)?;
        }
    }
    Ok(())
}

/// `vrf_table` read-modify-write: table set, kind the VPC's (tap while any of its attachments
/// is, [`kind::registered_kind`]), generation stamped, counters kept.
// The datapath may bump counters between our read and write; that window loses at most those
// increments (upstream has the same window; the map has no compare-and-swap).
fn register_vrf(
    vrf: &mut VrfTable,
    r: &Registration<'_>,
    peers: &mut peers::Peers<'_>,
    now: u64,
) -> Result<(), BpfError> {
    let key = r.usid.vrf_key();
    let old = absent_ok(vrf.get(&key, 0)).map_err(map_err(maps::VRF_TABLE, "read"))?;
    let value = VrfValue {
        vrf_table_id: r.vrf_table_id,
        egress_kind: kind::registered_kind(r, old.as_ref(), peers)?,
        generation_ns: now,
        ..old.unwrap_or_default()
    };
    vrf.insert(key, value, 0)
        .map_err(map_err(maps::VRF_TABLE, "insert"))
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

/// `public_uplink_table[0]`, `None` while no uplink was written (the array's slot is zero).
pub fn public_uplink(pin_dir: &Path) -> Result<Option<PublicUplinkValue>, BpfError> {
    let table: PublicUplinkTable = maps::open_typed(pin_dir, maps::PUBLIC_UPLINK_TABLE)?;
    let row = table
        .get(&0, 0)
        .map_err(map_err(maps::PUBLIC_UPLINK_TABLE, "read"))?;
    Ok((row.link_ifindex != 0).then_some(row))
}

/// Writes `public_uplink_table[0]`: this node's public uplink. Node-wide; never removed by the
/// CNI.
pub fn write_public_uplink(pin_dir: &Path, value: PublicUplinkValue) -> Result<(), BpfError> {
    let mut table: PublicUplinkTable = maps::open_typed(pin_dir, maps::PUBLIC_UPLINK_TABLE)?;
    table
        .set(0, value, 0)
        .map_err(map_err(maps::PUBLIC_UPLINK_TABLE, "update"))
}
