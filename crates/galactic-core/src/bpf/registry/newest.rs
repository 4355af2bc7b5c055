//! The rows of the maps only upstream's newest datapath pins ([`maps::NEWEST_MAP_DEFS`]):
//! `ifindex_egress_kind_table` and `tenant_gw_table` per attachment (keyed by its host
//! interface), `vpc_attribution_table` per VRF (Block, Argument).
//!
//! Each is written, removed and checked only while it is pinned: an older datapath has none of
//! them, and an ADD on it must not fail for rows nothing reads. A map pinned with another
//! layout is an error, as for every other map. The rows are the ones upstream's ADD writes,
//! with one choice of ours: the attribution row names the VRF's lowest-ifindex attachment
//! (upstream's ADD names the last one added, its repair pass the lowest), so ADD, DEL and the
//! repair pass agree on it whatever the order of ADDs. No new record is needed: the
//! attachment's record (interface name, ifindex, Block, Argument) is what they go by.

use super::peers::Peers;
use super::records::*;
use super::*;
use crate::bpf::maps::{EgressKindTable, TenantGwTable, VpcAttributionTable};
use crate::ident::{base62_encode, base62_to_hex, host_ifname, AttachmentId, VpcId};

/// The newest datapath's maps that are pinned.
pub(super) struct NewestMaps {
    kind: Option<EgressKindTable>,
    gateways: Option<TenantGwTable>,
    attribution: Option<VpcAttributionTable>,
}

impl NewestMaps {
    pub(super) fn open(dir: &Path) -> Result<Self, BpfError> {
        Ok(Self {
            kind: maps::open_newest(dir, maps::IFINDEX_EGRESS_KIND_TABLE)?,
            gateways: maps::open_newest(dir, maps::TENANT_GW_TABLE)?,
            attribution: maps::open_newest(dir, maps::VPC_ATTRIBUTION_TABLE)?,
        })
    }
}

/// The (VPC, attachment) numbers a host interface `G{vpc:9}{att:3}H` is named after, as
/// upstream decodes them (48 and 16 bits). `None` when the name does not decode.
pub fn attachment_identity(host_ifname: &str) -> Option<(u64, u32)> {
    let number = |s: &str| u64::from_str_radix(&base62_to_hex(s)?, 16).ok();
    let vpc = number(host_ifname.get(1..10)?).filter(|v| *v < 1 << 48)?;
    let att = number(host_ifname.get(10..13)?).and_then(|a| u16::try_from(a).ok())?;
    Some((vpc, u32::from(att)))
}

/// The attribution row of `(block, argument)` from the node's records: the lowest-ifindex
/// attachment of the VRF whose name decodes.
fn attribution(
    records: &[AttachmentRecord],
    block: u64,
    argument: u16,
    now: u64,
) -> Option<VpcAttributionValue> {
    let (vpc, vpc_attachment) = records
        .iter()
        .filter(|r| r.block == block && r.argument == argument)
        .filter_map(|r| Some((r.ifindex, attachment_identity(&r.host_ifname)?)))
        .min_by_key(|(ifindex, _)| *ifindex)?
        .1;
    Some(VpcAttributionValue {
        vpc,
        vpc_attachment,
        _pad: [0; 4],
        generation_ns: now,
    })
}

/// The host interface name of upstream's numbers: the inverse of [`attachment_identity`]
/// (`None` for numbers no VPC or attachment id has).
fn host_ifname_of(vpc: u64, vpc_attachment: u32) -> Option<String> {
    let vpc = VpcId::parse(&base62_encode(vpc)).ok()?;
    let att = AttachmentId::parse(&base62_encode(u64::from(vpc_attachment))).ok()?;
    Some(host_ifname(&vpc, &att))
}

/// The attribution row a registration writes into `table`: the lower ifindex of this
/// attachment and the one the row names, which before this registration is the lowest of the
/// VPC's others (every registration and removal writes it so, under the lock). The VPC's
/// records are read when the row cannot tell (`peers.rs`): no row, a row naming this
/// attachment (its ifindex may be new), another VPC's or one without a record of this VRF.
fn registered_attribution(
    table: &VpcAttributionTable,
    r: &Registration<'_>,
    peers: &mut Peers<'_>,
    now: u64,
) -> Result<Option<VpcAttributionValue>, BpfError> {
    let (block, argument) = (r.usid.block.value(), r.usid.argument.get());
    let row = absent_ok(table.get(&r.usid.vrf_key(), 0))
        .map_err(map_err(maps::VPC_ATTRIBUTION_TABLE, "read"))?;
    // Only a row naming another attachment of this VPC: a VPC's VRF id can be claimed again
    // while the last registration of the VPC that released it is still to be removed (its
    // galactic-bgp DEL runs before its master's), and that removal takes a row naming it.
    let own = attachment_identity(r.host_ifname);
    let named = row
        .filter(|v| own.is_some_and(|(vpc, _)| vpc == v.vpc))
        .and_then(|v| Some((v, host_ifname_of(v.vpc, v.vpc_attachment)?)));
    if let Some((value, name)) = named.filter(|(_, name)| name != r.host_ifname) {
        let holder = peers.record(&name)?;
        if let Some(holder) = holder.filter(|h| h.block == block && h.argument == argument) {
            let (vpc, vpc_attachment) = match own {
                Some(ours) if r.host_ifindex < holder.ifindex => ours,
                _ => (value.vpc, value.vpc_attachment),
            };
            return Ok(Some(VpcAttributionValue {
                vpc,
                vpc_attachment,
                _pad: [0; 4],
                generation_ns: now,
            }));
        }
    }
    Ok(attribution(peers.all()?, block, argument, now))
}

/// ADD: the interface's kind and gateways (no IPAM result: no gateway row, and a row a reused
/// ifindex kept is removed), and the VRF's attribution ([`registered_attribution`]).
pub(super) fn write_newest(
    m: &mut NewestMaps,
    r: &Registration<'_>,
    peers: &mut Peers<'_>,
    now: u64,
) -> Result<(), BpfError> {
    if let Some(kind) = m.kind.as_mut() {
        kind.insert(r.host_ifindex, r.egress_kind, 0)
            .map_err(map_err(maps::IFINDEX_EGRESS_KIND_TABLE, "insert"))?;
    }
    if let Some(gateways) = m.gateways.as_mut() {
        match r.gateways {
            Some(value) => gateways.insert(r.host_ifindex, value, 0),
            None => ignore_absent(gateways.remove(&r.host_ifindex)),
        }
        .map_err(map_err(maps::TENANT_GW_TABLE, "write"))?;
    }
    let Some(table) = m.attribution.as_mut() else {
        return Ok(());
    };
    match registered_attribution(table, r, peers, now)? {
        Some(value) => table
            .insert(r.usid.vrf_key(), value, 0)
            .map_err(map_err(maps::VPC_ATTRIBUTION_TABLE, "insert")),
        None => Ok(()),
    }
}

/// DEL: the interface's rows, unless `keep_interface` (another attachment holds the ifindex).
pub(super) fn remove_interface_rows(
    record: &AttachmentRecord,
    keep_interface: bool,
) -> Result<(), BpfError> {
    if keep_interface {
        return Ok(());
    }
    let m = NewestMaps::open(&record.pin_dir)?;
    if let Some(mut kind) = m.kind {
        ignore_absent(kind.remove(&record.ifindex))
            .map_err(map_err(maps::IFINDEX_EGRESS_KIND_TABLE, "delete"))?;
    }
    if let Some(mut gateways) = m.gateways {
        ignore_absent(gateways.remove(&record.ifindex))
            .map_err(map_err(maps::TENANT_GW_TABLE, "delete"))?;
    }
    Ok(())
}

/// After `removed` left: the VRF's attribution names its lowest remaining attachment. With none
/// of its VPC left on the VRF's key, a row naming `removed` goes, unless another VPC's
/// registration holds the key: a VPC's VRF id can be claimed by another VPC while the last
/// registration of the VPC that released it is still to be removed (its galactic-bgp DEL runs
/// before its master's), and that VPC's attachments are then named instead. Only that last
/// removal reads the node's records (a row another writer put is left).
pub(super) fn settle_attribution(
    state_dir: &Path,
    removed: &AttachmentRecord,
    others: &[AttachmentRecord],
) -> Result<(), BpfError> {
    let m = NewestMaps::open(&removed.pin_dir)?;
    let Some(mut table) = m.attribution else {
        return Ok(());
    };
    let key = crate::bpf::usid::vrf_key(removed.block, removed.argument);
    if let Some(value) = attribution(others, removed.block, removed.argument, monotonic_ns()) {
        return table
            .insert(key, value, 0)
            .map_err(map_err(maps::VPC_ATTRIBUTION_TABLE, "insert"));
    }
    let row =
        absent_ok(table.get(&key, 0)).map_err(map_err(maps::VPC_ATTRIBUTION_TABLE, "read"))?;
    let named = row.map(|v| (v.vpc, v.vpc_attachment));
    if named.is_none() || named != attachment_identity(&removed.host_ifname) {
        return Ok(());
    }
    let node: Vec<AttachmentRecord> = all_records(state_dir)?
        .into_iter()
        .filter(|r| r.host_ifname != removed.host_ifname)
        .collect();
    match attribution(&node, removed.block, removed.argument, monotonic_ns()) {
        Some(value) => table
            .insert(key, value, 0)
            .map_err(map_err(maps::VPC_ATTRIBUTION_TABLE, "insert")),
        None => ignore_absent(table.remove(&key))
            .map_err(map_err(maps::VPC_ATTRIBUTION_TABLE, "delete")),
    }
}

/// CHECK: the interface's kind and gateways as registered, and an attribution row of the VRF
/// naming this VPC.
pub(super) fn verify_newest(m: &NewestMaps, e: &Expected<'_>) -> Result<Vec<String>, BpfError> {
    let mut problems = Vec::new();
    if let Some(kind) = &m.kind {
        let row = absent_ok(kind.get(&e.host_ifindex, 0))
            .map_err(map_err(maps::IFINDEX_EGRESS_KIND_TABLE, "read"))?;
        if row != Some(e.egress_kind) {
            problems.push(format!(
                "ifindex_egress_kind_table[{}] is {}, want {}",
                e.host_ifindex,
                row.map_or("absent".into(), |k| k.to_string()),
                e.egress_kind
            ));
        }
    }
    if let Some(gateways) = &m.gateways {
        let row = absent_ok(gateways.get(&e.host_ifindex, 0))
            .map_err(map_err(maps::TENANT_GW_TABLE, "read"))?;
        if row != e.gateways {
            problems.push(format!(
                "tenant_gw_table[{}] is {}, want {}",
                e.host_ifindex,
                describe_gateways(row),
                describe_gateways(e.gateways)
            ));
        }
    }
    problems.extend(verify_attribution(m, e)?);
    Ok(problems)
}

fn verify_attribution(m: &NewestMaps, e: &Expected<'_>) -> Result<Vec<String>, BpfError> {
    let (Some(table), Some((vpc, _))) = (&m.attribution, attachment_identity(e.host_ifname)) else {
        return Ok(Vec::new());
    };
    let key = e.usid.vrf_key();
    let row =
        absent_ok(table.get(&key, 0)).map_err(map_err(maps::VPC_ATTRIBUTION_TABLE, "read"))?;
    Ok(match row {
        Some(v) if v.vpc == vpc => Vec::new(),
        Some(v) => vec![format!(
            "vpc_attribution_table[{key:#x}] names VPC {:#x}, this attachment's VPC is {vpc:#x}",
            v.vpc
        )],
        None => vec![format!("vpc_attribution_table has no entry for {key:#x}")],
    })
}

fn describe_gateways(row: Option<TenantGwValue>) -> String {
    match row {
        None => "absent".into(),
        Some(v) => format!(
            "{} and {}",
            std::net::Ipv6Addr::from(v.gw6_be),
            std::net::Ipv4Addr::from(v.gw4_be)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interface_name_decodes_to_upstreams_numbers() {
        // "jU" is 0x4d2 (19*62+56), "G" 0x2a; padding zeros change nothing.
        assert_eq!(attachment_identity("G0000000jU00GH"), Some((0x4d2, 0x2a)));
        assert_eq!(attachment_identity("G0000000jU+0GH"), None);
        assert_eq!(attachment_identity("short"), None);
    }

    #[test]
    fn the_attribution_names_the_lowest_ifindex_attachment() {
        let record = |name: &str, ifindex, argument| AttachmentRecord {
            host_ifname: name.into(),
            ifindex,
            block: 7,
            argument,
            vrf_table_id: 100,
            prefixes: Vec::new(),
            pin_dir: PathBuf::new(),
            egress_kind: None,
        };
        let rs = [
            record("G0000000jU00HH", 9, 1),
            record("G0000000jU00GH", 5, 1),
            record("G0000000kV00VH", 2, 2),
        ];
        let v = attribution(&rs, 7, 1, 3).map(|v| (v.vpc, v.vpc_attachment, v.generation_ns));
        assert_eq!(v, Some((0x4d2, 0x2a, 3)));
        assert_eq!(attribution(&rs, 7, 3, 3), None);
    }
}
