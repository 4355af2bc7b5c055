//! CHECK: every row of an attachment against what its registration wrote.

use super::records::*;
use super::*;
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
    /// The node state directory (where the egress rows are recorded).
    pub state_dir: &'a Path,
    /// When the network opted in to internet egress: the VPC's egress prefixes (`::/0`, each
    /// NAT64 prefix) and the shard SIDs, Argument rewritten, they may encapsulate to. `None`
    /// when it did not: then no egress row recorded in the table may remain.
    pub egress: Option<Egress<'a>>,
    /// The host interface's name (`G{vpc}{att}H`: the VRF's attribution names its VPC).
    pub host_ifname: &'a str,
    /// The interface's egress kind ([`EGRESS_KIND_VETH`] or [`EGRESS_KIND_TAP`]).
    pub egress_kind: u32,
    /// The `tenant_gw_table` row the registration writes (`None`: none).
    pub gateways: Option<TenantGwValue>,
}

/// The egress rows CHECK expects of an opted-in VPC.
#[derive(Debug, Clone, Copy)]
pub struct Egress<'a> {
    /// `::/0` and each NAT64 prefix.
    pub prefixes: &'a [Ipv6Network],
    /// The tenant's shard SIDs (any one may win).
    pub sids: &'a [std::net::Ipv6Addr],
}

/// Compares the maps with `e`; returns every difference found (empty = consistent).
pub fn verify(e: &Expected<'_>) -> Result<Vec<String>, BpfError> {
    let m = NodeMaps::open(e.pin_dir)?;
    let mut problems = usid_rows(&m, e)?;
    problems.extend(attachment_rows(&m, e)?);
    problems.extend(super::newest::verify_newest(&m.newest, e)?);
    Ok(problems)
}

/// The rows of the VPC's uSID on this node: locator, End.DT46 function, VRF table.
fn usid_rows(m: &NodeMaps, e: &Expected<'_>) -> Result<Vec<String>, BpfError> {
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
        Some(v) => problems.push(format!(
            "function_table[{:#x}] has behaviour {}, want {BEHAVIOR_END_DT46} (End.DT46)",
            u.function_key(),
            v.behavior
        )),
        None => problems.push(format!(
            "function_table has no entry for {:#x}",
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
    Ok(problems)
}

/// The attachment's own rows: its interface's uSID, the VPC's egress rows, its prefixes.
fn attachment_rows(m: &NodeMaps, e: &Expected<'_>) -> Result<Vec<String>, BpfError> {
    let mut problems = Vec::new();
    let u = e.usid;
    let want = IfindexVrfValue {
        block: u.block.value(),
        argument: u.argument.get(),
        _pad: [0; 6],
    };
    let row = absent_ok(m.ifindex.get(&e.host_ifindex, 0))
        .map_err(map_err(maps::IFINDEX_VRF_TABLE, "read"))?;
    match row {
        Some(row) if row == want => {}
        Some(row) => problems.push(format!(
            "ifindex_vrf_table[{}] is block {:#x} argument {:#x}, want block {:#x} argument {:#x}",
            e.host_ifindex, row.block, row.argument, want.block, want.argument
        )),
        None => problems.push(format!(
            "ifindex_vrf_table has no entry for interface index {}",
            e.host_ifindex
        )),
    }
    problems.extend(egress_rows(m, e)?);
    for prefix in e.prefixes {
        let key = egress_key(e.vrf_table_id, *prefix);
        if !passes_through(&m.egress, &key)? {
            problems.push(format!(
                "egress_route_table has no entry for {} in table {}",
                crate::net::netlink::masked(*prefix),
                e.vrf_table_id
            ));
        }
    }
    Ok(problems)
}

/// Whether the map passes the attachment's prefix `key` through: its longest match is the
/// pass-through (the key's own row, or a covering key's that routes every address of it the
/// same way), or, failing that, the key itself is there with another value (someone routed it
/// since). The walk over every key of the map that tells an exact key from a covering one is
/// made only in that second case, not on every CHECK of every prefix (decision 0079).
fn passes_through(egress: &EgressRouteTable, key: &EgressRouteKey) -> Result<bool, BpfError> {
    let found = absent_ok(egress.get(key, 0)).map_err(map_err(maps::EGRESS_ROUTE_TABLE, "read"))?;
    if found == Some(EgressRouteValue::PASS_THROUGH) {
        return Ok(true);
    }
    Ok(exact_egress(egress, key)?.is_some())
}

/// The VPC's egress rows: each expected prefix encapsulates to one of the tenant's shard SIDs;
/// opted out, none of ours remains.
fn egress_rows(m: &NodeMaps, e: &Expected<'_>) -> Result<Vec<String>, BpfError> {
    let table = e.vrf_table_id;
    let Some(want) = e.egress else {
        return Ok(egress_records(e.state_dir, table)?
            .iter()
            .map(|r| {
                format!(
                    "egress_route_table still routes {} in table {table} toward {}, but the network has no internet egress",
                    r.prefix, r.row.sid
                )
            })
            .collect());
    };
    let mut problems = Vec::new();
    for prefix in want.prefixes {
        match exact_egress(&m.egress, &egress_key(table, (*prefix).into()))? {
            Some(v)
                if v.link_ifindex != 0
                    && want.sids.contains(&std::net::Ipv6Addr::from(v.sid_be)) => {}
            Some(v) => problems.push(format!(
                "egress_route_table's egress row {prefix} in table {table} encapsulates to {} via link {}, not to one of the tenant's shard SIDs ({})",
                std::net::Ipv6Addr::from(v.sid_be),
                v.link_ifindex,
                want.sids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            )),
            None => problems.push(format!(
                "egress_route_table has no egress row {prefix} in table {table}"
            )),
        }
    }
    Ok(problems)
}
