//! The eBPF datapath rows of an attachment whose VPC's VRF was left by the upstream Go chain:
//! the master adopts the device with its table, and galactic-bgp registers that table (the one
//! galactic-router resolves through the device), not a new one. Needs a kernel with VRF: it runs
//! in the production-kernel tier (`cargo xtask test-kernel`) and says SKIPPED elsewhere.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::Node;
use galactic_core::bpf::abi::{VrfValue, EGRESS_KIND_VETH};
use galactic_core::bpf::maps::{self, PIN_DIR_ENV};
use galactic_testkit::host::Pod;
use galactic_testkit::privileged::TestNetns;
use serde_json::json;

const BLOCK: u64 = 0x2001_0db8_ff03;
/// The Go chain's table for the VPC: the lowest no VRF used, far from this node's first pick.
const GO_TABLE: u32 = 3;

#[test]
fn an_adopted_vrfs_table_is_the_one_registered_in_the_datapath() {
    galactic_testkit::privileged!();
    let test = galactic_testkit::test_name!();
    let probe = TestNetns::new("vrfprobe");
    let (ok, why) = probe.try_ip(&["link", "add", "Gprobe", "type", "vrf", "table", "4242"]);
    if !ok {
        eprintln!(
            "SKIPPED {test}: this kernel has no VRF support ({}); it runs in `cargo xtask test-kernel`",
            why.trim()
        );
        return;
    }
    let mut node = Node::new("bpfadopt", json!({"routing_domain": "vrf"}));
    let pin_dir = node.bpffs.pin_dir().display().to_string();
    node.env.push((PIN_DIR_ENV.into(), pin_dir));
    let table = GO_TABLE.to_string();
    node.host
        .netns
        .ip(&["link", "add", "G0000000jUV", "type", "vrf", "table", &table]);
    node.host.netns.ip(&["link", "set", "G0000000jUV", "up"]);

    let pod = Pod::new("bpfadopt");
    let result = node.add(&pod, "G");
    assert_eq!(
        node.table(),
        GO_TABLE,
        "the domain records the VRF's own table"
    );
    let vrf: maps::VrfTable = node.map(maps::VRF_TABLE);
    let row: VrfValue = vrf.get(&((BLOCK << 12) | 1), 0).unwrap();
    assert_eq!(
        (row.vrf_table_id, row.egress_kind),
        (GO_TABLE, EGRESS_KIND_VETH)
    );
    let egress = node.egress_rows();
    assert_eq!(
        egress.len(),
        4,
        "the pod's /96 and /32, its gateways' /128 and /32: {egress:?}"
    );
    assert!(
        egress.keys().all(|(_, t, _, _)| *t == GO_TABLE),
        "egress rows keyed by the adopted table: {egress:?}"
    );
    let routes = node
        .host
        .netns
        .ip(&["-4", "route", "show", "table", &table]);
    let pod_v4 = galactic_testkit::host::ip_of(&result, 1);
    assert!(routes.contains(&format!("{pod_v4} dev")), "{routes}");
    node.check(&pod, "G", &result).expect_quiet_success();
    node.del(&pod, "G", &result);
    node.gc_nothing_valid();
    assert!(node.ifindex_rows().is_empty());
}
