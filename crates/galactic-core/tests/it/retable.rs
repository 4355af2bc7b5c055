//! Moving a registration's eBPF rows to its VPC's new table (the VRF re-bound to another table
//! behind the domain record), on real maps in a private bpffs: pass-through entries and the
//! VRF's `vrf_table` row follow, shared entries stay while another registration of the old table
//! lists them, the VPC's egress rows move with the old table's last registration, and removal
//! afterwards finds every row by the moved record.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::bpf::abi::{EgressRouteValue, EGRESS_KIND_VETH};
use galactic_core::bpf::maps::{self, pin_empty_maps};
use galactic_core::bpf::registry::{
    egress_key, exact_egress, nat66_key, read_nat66_record, read_record, register_attachment,
    retable_attachment, unregister_attachment, Registration, DEFAULT_ROUTE,
};
use galactic_core::bpf::usid::Usid;
use galactic_testns::bpffs::PrivateBpffs;
use ipnetwork::IpNetwork;
use std::path::Path;

const OLD: u32 = 1000;
const NEW: u32 = 2000;

fn row(dir: &Path, table: u32, prefix: &str) -> Option<EgressRouteValue> {
    let egress: maps::EgressRouteTable = maps::open_typed(dir, maps::EGRESS_ROUTE_TABLE).unwrap();
    exact_egress(&egress, &egress_key(table, prefix.parse().unwrap())).unwrap()
}

fn nat66(dir: &Path, table: u32) -> Option<EgressRouteValue> {
    let egress: maps::EgressRouteTable = maps::open_typed(dir, maps::EGRESS_ROUTE_TABLE).unwrap();
    exact_egress(&egress, &nat66_key(table)).unwrap()
}

#[test]
fn a_registration_moved_to_a_new_table_takes_its_rows_along() {
    galactic_testns::privileged!();
    let bpffs = PrivateBpffs::mount();
    let dir = bpffs.pin_dir();
    pin_empty_maps(&dir).unwrap();
    let state = tempfile::tempdir().unwrap();
    let usid = Usid::compute("2001:db8:ff03::/48", 1, 7).unwrap();
    let exit = EgressRouteValue {
        sid_be: "2001:db8:ff03:2::"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
        link_ifindex: 3,
        dmac: [2, 0, 0, 0, 0, 1],
        smac: [2, 0, 0, 0, 0, 2],
    };
    let own: IpNetwork = "10.9.0.5/32".parse().unwrap();
    let shared: IpNetwork = "fd20:10:ff01::1:0:5/96".parse().unwrap();
    let register = |host: &str, ifindex: u32, prefixes: &[IpNetwork]| {
        register_attachment(&Registration {
            pin_dir: &dir,
            state_dir: state.path(),
            usid,
            vrf_table_id: OLD,
            egress_kind: EGRESS_KIND_VETH,
            host_ifname: host,
            host_ifindex: ifindex,
            prefixes,
            egress: &[(DEFAULT_ROUTE, exit)],
            gateways: None,
        })
        .unwrap()
    };
    register("GaH", 41, &[own, shared]);
    register("GbH", 42, &[shared]);
    let pass = Some(EgressRouteValue::PASS_THROUGH);

    // The first one moves: its rows go to the new table, the shared one stays in the old table
    // for the other, and the VRF's row names the new table.
    assert!(retable_attachment(state.path(), "GaH", NEW).unwrap());
    assert_eq!(
        read_record(state.path(), "GaH")
            .unwrap()
            .unwrap()
            .vrf_table_id,
        NEW
    );
    assert_eq!(row(&dir, NEW, "10.9.0.5/32"), pass);
    assert_eq!(row(&dir, NEW, "fd20:10:ff01::1:0:0/96"), pass);
    assert_eq!(
        row(&dir, OLD, "10.9.0.5/32"),
        None,
        "its own old row is gone"
    );
    assert_eq!(
        row(&dir, OLD, "fd20:10:ff01::1:0:0/96"),
        pass,
        "GbH still lists it"
    );
    let vrf: maps::VrfTable = maps::open_typed(&dir, maps::VRF_TABLE).unwrap();
    assert_eq!(vrf.get(&usid.vrf_key(), 0).unwrap().vrf_table_id, NEW);
    assert_eq!(
        nat66(&dir, OLD),
        Some(exit),
        "GbH's table keeps the egress row"
    );

    // The last one of the old table moves: the VPC's egress row moves with it.
    assert!(retable_attachment(state.path(), "GbH", NEW).unwrap());
    assert_eq!(row(&dir, OLD, "fd20:10:ff01::1:0:0/96"), None);
    assert_eq!(nat66(&dir, OLD), None);
    assert_eq!(nat66(&dir, NEW), Some(exit));
    assert!(read_nat66_record(state.path(), OLD).unwrap().is_none());
    assert_eq!(
        read_nat66_record(state.path(), NEW)
            .unwrap()
            .unwrap()
            .vrf_table_id,
        NEW
    );

    // Idempotent; a registration that does not exist is not created.
    assert!(!retable_attachment(state.path(), "GbH", NEW).unwrap());
    assert!(!retable_attachment(state.path(), "GcH", NEW).unwrap());
    assert!(read_record(state.path(), "GcH").unwrap().is_none());

    // Removal finds every moved row by the moved records.
    assert!(unregister_attachment(state.path(), "GaH").unwrap());
    assert_eq!(row(&dir, NEW, "10.9.0.5/32"), None);
    assert_eq!(
        row(&dir, NEW, "fd20:10:ff01::1:0:0/96"),
        pass,
        "GbH lists it"
    );
    assert!(unregister_attachment(state.path(), "GbH").unwrap());
    assert_eq!(row(&dir, NEW, "fd20:10:ff01::1:0:0/96"), None);
    assert_eq!(nat66(&dir, NEW), None);
}
