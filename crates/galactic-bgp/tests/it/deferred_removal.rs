//! An eBPF row removal that fails in the master's DEL is deferred, and the next registration
//! (galactic-bgp's ADD) or removal (any attachment's DEL) on the node finishes it, with no CNI
//! GC: most runtimes never send one. The removal is made to fail by pinning `ifindex_vrf_table`
//! with another definition than the ABI's (the maps cannot be opened), then the right map is
//! pinned again.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::Node;
use galactic_core::bpf::maps::{self, MapDef, PIN_DIR_ENV};
use galactic_core::bpf::registry::{deferred, read_record};
use galactic_core::ident::ChainIds;
use galactic_testkit::host::Pod;
use serde_json::json;
use std::path::Path;

fn node(tag: &str) -> Node {
    let mut node = Node::new(tag, json!({}));
    let pin_dir = node.bpffs.pin_dir().display().to_string();
    node.env.push((PIN_DIR_ENV.into(), pin_dir));
    node
}

fn host_ifname(att: &str) -> String {
    ChainIds::of(&json!({"vpc": "jU", "vpcattachment": att}))
        .unwrap()
        .host_ifname()
}

fn ifindex_def() -> MapDef {
    *maps::MAP_DEFS
        .iter()
        .find(|d| d.name == maps::IFINDEX_VRF_TABLE)
        .unwrap()
}

/// Pins `ifindex_vrf_table` with a value size the ABI does not have: every removal fails.
fn break_ifindex_map(pin_dir: &Path) {
    std::fs::remove_file(pin_dir.join(maps::IFINDEX_VRF_TABLE)).unwrap();
    let bad = MapDef {
        value_size: 4,
        ..ifindex_def()
    };
    maps::pin_maps(pin_dir, &[bad]).unwrap();
}

/// Pins an empty `ifindex_vrf_table` of the ABI's definition again.
fn repair_ifindex_map(pin_dir: &Path) {
    std::fs::remove_file(pin_dir.join(maps::IFINDEX_VRF_TABLE)).unwrap();
    maps::pin_maps(pin_dir, &[ifindex_def()]).unwrap();
}

/// B registered, then A; A's DEL while its removal fails: the DEL succeeds, A's registration
/// record stays with a deferral marker. Returns B's egress rows alone.
fn defer_a(
    node: &Node,
    a: &Pod,
    b: &Pod,
) -> std::collections::BTreeMap<(u32, u32, u8, [u8; 16]), Vec<u8>> {
    let state = node.host.path("state");
    node.add(b, "2");
    let rows_b = node.egress_rows();
    let ra = node.add(a, "1");
    assert!(
        node.egress_rows().len() > rows_b.len(),
        "A's pass-through rows"
    );
    break_ifindex_map(&node.bpffs.pin_dir());
    node.del(a, "1", &ra);
    assert!(
        read_record(&state, &host_ifname("1")).unwrap().is_some(),
        "the failed removal keeps A's registration record"
    );
    assert_eq!(deferred(&state).unwrap(), [host_ifname("1")]);
    repair_ifindex_map(&node.bpffs.pin_dir());
    rows_b
}

#[test]
fn a_later_add_finishes_a_removal_the_del_deferred() {
    galactic_testkit::privileged!();
    let node = node("dfadd");
    let (a, b, c) = (Pod::new("dfa"), Pod::new("dfb"), Pod::new("dfc"));
    let state = node.host.path("state");
    let rows_b = defer_a(&node, &a, &b);

    let rc = node.add(&c, "3");
    assert!(
        read_record(&state, &host_ifname("1")).unwrap().is_none(),
        "C's registration removed A's rows and record first"
    );
    assert!(deferred(&state).unwrap().is_empty(), "no deferral left");
    node.del(&c, "3", &rc);
    assert_eq!(node.egress_rows(), rows_b, "only B's rows are left");
}

#[test]
fn a_later_del_of_another_attachment_finishes_a_removal_the_del_deferred() {
    galactic_testkit::privileged!();
    let node = node("dfdel");
    let (a, b) = (Pod::new("dda"), Pod::new("ddb"));
    let state = node.host.path("state");
    defer_a(&node, &a, &b);
    let rb = node
        .runtime()
        .cached(&node.list("2"), &b.attachment())
        .unwrap();

    node.del(&b, "2", &rb);
    assert!(read_record(&state, &host_ifname("1")).unwrap().is_none());
    assert!(read_record(&state, &host_ifname("2")).unwrap().is_none());
    assert!(deferred(&state).unwrap().is_empty());
    assert!(node.egress_rows().is_empty(), "{:?}", node.egress_rows());
    assert!(node.ifindex_rows().is_empty());
}
