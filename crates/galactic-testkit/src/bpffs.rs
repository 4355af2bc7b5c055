//! Private bpffs mounts and the uplink fixture (galactic-testns), and readers of the maps the
//! plugins pin there.

pub use galactic_testns::bpffs::{uplink, PrivateBpffs};

/// An egress key as (prefix length, table, family, address bytes), for comparisons in tests.
pub type EgressRowKey = (u32, u32, u8, [u8; 16]);

/// Every `egress_route_table` entry: key → value bytes.
pub fn egress_rows(
    map: &galactic_core::bpf::maps::EgressRouteTable,
) -> std::collections::BTreeMap<EgressRowKey, Vec<u8>> {
    map.iter()
        .map(|entry| {
            let (k, v) = entry.expect("read an egress_route_table entry");
            let d = k.data();
            (
                (k.prefix_len(), d.table_id, d.family, d.addr_be),
                galactic_core::bpf::abi::bytes_of(&v).to_vec(),
            )
        })
        .collect()
}
