//! The rows our plugins write are the rows upstream's datapath repair pass would write from the
//! same CRDs and kernel state (the test kit's `repair` computation): veth pods and a VM's tap,
//! two VPCs, both families, every map of the ABI and of the newest datapath dumped and compared.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::{Node, NS};
use galactic_core::bpf::maps::{self, PIN_DIR_ENV};
use galactic_core::ident::VpcId;
use galactic_core::net::domain::Domains;
use galactic_core::net::netlink::Netlink;
use galactic_core::net::netns::Netns;
use galactic_testkit::host::Pod;
use galactic_testkit::repair::{self, Crds, Rows};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The shard SID of the node config, the NAT64 prefix, and the VPC whose network opts in.
const SHARD: &str = "2001:db8:5:0:e000::";
const NAT64: &str = "64:ff9b::/96";
const OPTED_IN: &str = "kV";

/// A node with the newest datapath's maps, an uplink into a fabric namespace with a resolved
/// next hop toward the shard, and the egress keys in its config.
fn node(tag: &str) -> Node {
    let mut node = Node::newest(
        tag,
        json!({"egress_shard_sids": SHARD, "nat64_prefix": NAT64}),
    );
    let pin_dir = node.bpffs.pin_dir().display().to_string();
    node.env.push((PIN_DIR_ENV.into(), pin_dir));
    let fabric = galactic_testkit::privileged::TestNetns::new(&format!("{tag}f"));
    galactic_testkit::bpffs::uplink(&node.host.netns, &fabric);
    node.fabric = Some(fabric);
    node
}

/// Every object of `kind` in the local store.
fn objects(node: &Node, kind: &str) -> Vec<Value> {
    let dir = node.host.path("state").join("bgp").join(NS).join(kind);
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// What the pinned maps hold, in the computation's shape; counters and timestamps checked apart.
fn dump(node: &Node) -> Rows {
    let locator: maps::LocatorTable = node.map(maps::LOCATOR_TABLE);
    let function: maps::FunctionTable = node.map(maps::FUNCTION_TABLE);
    let vrf: maps::VrfTable = node.map(maps::VRF_TABLE);
    let src: maps::NodeSrcAddrTable = node.map(maps::NODE_SRC_ADDR_TABLE);
    let locator = locator.iter().map(Result::unwrap).collect::<Vec<_>>();
    assert!(locator.iter().all(|(_, v)| v.generation_ns > 0));
    let vrf = vrf.iter().map(Result::unwrap).collect::<Vec<_>>();
    assert!(vrf
        .iter()
        .all(|(_, v)| v.packets == 0 && v.bytes == 0 && v.dropped_packets == 0));
    let (egress, shard): (BTreeMap<_, _>, BTreeMap<_, _>) = node
        .egress_rows()
        .into_iter()
        .partition(|(_, v)| v == &vec![0u8; 32]);
    let src = src.get(&0, 0).unwrap().addr_be;
    let kinds: maps::EgressKindTable = node.map(maps::IFINDEX_EGRESS_KIND_TABLE);
    let gateways: maps::TenantGwTable = node.map(maps::TENANT_GW_TABLE);
    let attribution: maps::VpcAttributionTable = node.map(maps::VPC_ATTRIBUTION_TABLE);
    let attribution = attribution.iter().map(Result::unwrap).collect::<Vec<_>>();
    assert!(attribution.iter().all(|(_, v)| v.generation_ns > 0));
    Rows {
        egress_kind: kinds.iter().map(Result::unwrap).collect(),
        gateways: gateways
            .iter()
            .map(Result::unwrap)
            .map(|(k, v)| (k, (v.gw6_be, v.gw4_be)))
            .collect(),
        attribution: attribution
            .into_iter()
            .map(|(k, v)| (k, (v.vpc, v.vpc_attachment)))
            .collect(),
        locator: locator.into_iter().map(|(k, _)| k).collect(),
        function: function
            .iter()
            .map(Result::unwrap)
            .map(|(k, v)| (k, v.behavior))
            .collect(),
        node_src: (src != [0; 16]).then_some(src),
        vrf: vrf
            .into_iter()
            .map(|(k, v)| (k, (v.vrf_table_id, v.egress_kind)))
            .collect(),
        ifindex: node
            .ifindex_rows()
            .into_iter()
            .map(|(k, v)| (k, (v.block, v.argument)))
            .collect(),
        egress: egress.into_keys().collect(),
        shard,
    }
}

/// What upstream's pass would write from this node's CRDs and kernel.
fn computed(node: &Node) -> Rows {
    let nl = Netlink::in_netns(&Netns::open(&node.host.netns.path()).unwrap()).unwrap();
    let domains = Domains::new(&node.host.path("state"));
    // The VPC's table: its VRF's (as upstream reads it) or, with the table backend, the one
    // its routing-domain record names.
    let table_of = |link: &galactic_core::net::netlink::Link| {
        let vpc = link.name.get(1..10)?.trim_start_matches('0');
        domains
            .get(&VpcId::parse(vpc).ok()?)
            .ok()
            .flatten()
            .map(|d| d.table)
    };
    let found = repair::discover(&nl, table_of).unwrap();
    let (routers, vrfs, advs) = (
        objects(node, "bgprouters"),
        objects(node, "bgpvrfinstances"),
        objects(node, "bgpadvertisements"),
    );
    let crds = Crds {
        node: "node-a",
        routers: &routers,
        vrf_instances: &vrfs,
        advertisements: &advs,
    };
    let nat64 = [NAT64.parse().unwrap()];
    let egress = repair::Egress {
        sid: SHARD.parse().unwrap(),
        nat64: &nat64,
        link: (
            node.ifindex("up0"),
            [2, 0, 0, 0, 0x0b, 1],
            [2, 0, 0, 0, 0x0a, 1],
        ),
        vpcs: &[OPTED_IN],
    };
    repair::compute(&crds, &found, Some(&egress)).expect("the node's router has an SRv6 identity")
}

#[test]
fn the_rows_are_the_ones_upstreams_repair_pass_computes_from_the_crds_and_the_kernel() {
    galactic_testkit::privileged!();
    let node = node("bpfrep");
    let (a, b, vm) = (Pod::new("repa"), Pod::new("repb"), Pod::new("repvm"));
    let veth_a = node.chain("jU", "G", "galactic-cni");
    let veth_b = node.chain("jU", "H", "galactic-cni");
    // The VM's network opts in to internet egress; the pods' does not.
    node.internet_egress(Some("Enabled"));
    let mut tap = node.chain(OPTED_IN, "V", "galactic-tap-cni");
    // Another VPC, its own pools (table-mode domains need node-unique gateways).
    tap.plugins[0]["ipam"] = json!({"type": "galactic-ipam", "ipv6_subnet": "fd20:10:ff02::/64",
                                    "ipv4_subnet": "172.21.2.0/24"});
    let ra = node.add_list(&a, &veth_a);
    let rb = node.add_list(&b, &veth_b);
    let rvm = node.add_list(&vm, &tap);
    let ours = dump(&node);
    assert_eq!(ours.ifindex.len(), 3, "three attachments registered");
    assert_eq!(ours.vrf.len(), 2, "two VPCs");
    assert_eq!(ours.egress_kind.len(), 3, "a kind per interface");
    assert_eq!(ours.gateways.len(), 3, "gateways per interface");
    assert_eq!(ours.attribution.len(), 2, "an attribution per VPC");
    assert_eq!(
        ours.shard.len(),
        2,
        "::/0 and the NAT64 prefix of the opted-in VPC"
    );
    assert_eq!(ours, computed(&node));
    // CHECK holds the newest maps' rows too.
    for (pod, list, result) in [(&a, &veth_a, &ra), (&b, &veth_b, &rb), (&vm, &tap, &rvm)] {
        node.runtime()
            .plugin(list, 1, "CHECK", &pod.attachment(), Some(result))
            .expect_quiet_success();
    }
    // A veth kind on the VM's interface (the stale row of a reused ifindex) is reported.
    let tap_ifindex = ours
        .egress_kind
        .iter()
        .find(|(_, k)| **k == 1)
        .map(|(i, _)| *i)
        .unwrap();
    let mut kinds: maps::EgressKindTable = node.map(maps::IFINDEX_EGRESS_KIND_TABLE);
    kinds.insert(tap_ifindex, 0, 0).unwrap();
    let check = node
        .runtime()
        .plugin(&tap, 1, "CHECK", &vm.attachment(), Some(&rvm));
    let msg = check.expect_error(999);
    assert!(msg.contains("ifindex_egress_kind_table"), "{msg}");
    kinds.insert(tap_ifindex, 1, 0).unwrap();

    // DEL leaves exactly the rows the pass would rebuild for what remains: the VPC's
    // attribution moves to the attachment left, the interface's rows go.
    node.del_list(&a, &veth_a, &ra);
    assert_eq!(dump(&node), computed(&node));
    node.del_list(&b, &veth_b, &rb);
    let (mut left, want) = (dump(&node), computed(&node));
    // The VPC's vrf_table row stays for the datapath's GC (counters); nothing else of it does.
    left.vrf.retain(|key, _| want.vrf.contains_key(key));
    assert_eq!(left.vrf.len(), 1);
    assert_eq!(left, want);
    assert_eq!(
        left.attribution.len(),
        1,
        "the VPC without attachments has none"
    );
    node.del_list(&vm, &tap, &rvm);
    let none = dump(&node);
    assert!(none.egress_kind.is_empty() && none.gateways.is_empty() && none.attribution.is_empty());
}
