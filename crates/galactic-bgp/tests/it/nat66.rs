//! The internet egress rows (`::/0` and each NAT64 prefix, toward the tenant's shard SID) and
//! the node rows of the eBPF datapath (upstream §6.7 steps 6, 12 and 13) on real BPF maps, with
//! the real galactic-bgp binary. Egress is opt-in per network: these nodes' stanzas opt in
//! unless a test says otherwise.
//!
//! The plugins' host is a throwaway namespace with an uplink `up0`: a veth into a second
//! "fabric" namespace, an IPv6 address, routes towards shard SIDs and a permanent neighbour for
//! the fabric gateway. Every row is read back byte for byte with aya. The node-config keys are
//! given through each layer: node.json, the environment and the plugin stanza.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::Node;
use galactic_core::bpf::abi::*;
use galactic_core::bpf::maps::{self, pin_empty_maps};
use galactic_testkit::bpffs::PrivateBpffs;
use galactic_testkit::host::Pod;
use galactic_testkit::privileged::TestNetns;
use serde_json::{json, Value};
use std::net::Ipv6Addr;

const UP_MAC: [u8; 6] = [2, 0, 0, 0, 0x0a, 1];
const FABRIC_MAC: [u8; 6] = [2, 0, 0, 0, 0x0b, 1];
/// Routed via the fabric gateway, whose neighbour entry is known: resolvable. Shard SIDs are
/// uSIDs as the operator configures them (Argument 0); a tenant's has its VRF id there.
const SID_OK: &str = "2001:db8:5:0:e000::";
/// Routed via a gateway nobody has a neighbour entry for: not resolvable.
const SID_NO_NEIGH: &str = "2001:db8:6:0:e000::";
/// No route at all (the hosts here have no default route unless a test adds one).
const SID_NO_ROUTE: &str = "2001:db8:99:0:e000::";
/// The VRF id (uSID Argument) of the first VPC on the router: every test here has one VPC.
const VRF_ID: u16 = 1;

/// `sid` as the tenant's: Argument = the VRF id.
fn tenant(sid: &str) -> String {
    let arg = galactic_core::bpf::usid::Argument::new(i64::from(VRF_ID)).unwrap();
    galactic_core::bpf::usid::with_argument(sid.parse().unwrap(), arg)
        .unwrap()
        .to_string()
}

/// A node with an uplink into a fabric namespace; `node_extra` goes into node.json (with the
/// pin dir).
fn node(tag: &str, node_extra: Value) -> Node {
    let mut node = Node::new(tag, node_extra);
    node.host
        .node
        .merge_config(json!({"bpf_pin_dir": node.bpffs.pin_dir()}));
    let fabric = TestNetns::new(&format!("{tag}f"));
    galactic_testkit::bpffs::uplink(&node.host.netns, &fabric);
    // A second shard prefix via a next hop without a neighbour entry: unresolvable until a
    // test adds one.
    node.host.netns.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:6::/64",
        "via",
        "2001:db8:f::99",
        "dev",
        "up0",
    ]);
    node.fabric = Some(fabric);
    node.internet_egress(Some("Enabled"));
    node
}

/// An IPv6 default route via the fabric: auto-detection then finds `up0`.
fn with_default_route(node: Node) -> Node {
    node.host.netns.ip(&[
        "-6",
        "route",
        "add",
        "default",
        "via",
        "2001:db8:f::1",
        "dev",
        "up0",
    ]);
    node
}

/// What these tests read beyond the shared node's readers.
trait Nat66Rows {
    fn nat66_row(&self, table: u32) -> Option<Vec<u8>>;
    fn node_src_addr(&self) -> Vec<u8>;
    fn public_uplink(&self) -> Vec<u8>;
    fn warnings(&self) -> Vec<String>;
    fn state_files(&self, sub: &str) -> Vec<String>;
}

impl Nat66Rows for Node {
    /// The `::/0` row of `table`, as bytes.
    fn nat66_row(&self, table: u32) -> Option<Vec<u8>> {
        self.egress_rows()
            .remove(&(40, table, FAMILY_IPV6, [0; 16]))
    }

    fn node_src_addr(&self) -> Vec<u8> {
        let m: maps::NodeSrcAddrTable = self.map(maps::NODE_SRC_ADDR_TABLE);
        bytes_of(&m.get(&0, 0).unwrap()).to_vec()
    }

    fn public_uplink(&self) -> Vec<u8> {
        let m: maps::PublicUplinkTable = self.map(maps::PUBLIC_UPLINK_TABLE);
        bytes_of(&m.get(&0, 0).unwrap()).to_vec()
    }

    fn warnings(&self) -> Vec<String> {
        self.host
            .node
            .log_lines()
            .iter()
            .filter(|l| l["level"] == "WARN")
            .map(|l| l.to_string())
            .collect()
    }

    fn state_files(&self, sub: &str) -> Vec<String> {
        galactic_testkit::inspect::state_entries(&self.host.path("state").join("bpf").join(sub))
    }
}

/// The 32 bytes of an egress value: SID, ifindex (host order), dmac, smac.
fn egress_bytes(sid: &str, ifindex: u32, dmac: [u8; 6], smac: [u8; 6]) -> Vec<u8> {
    let mut out = sid.parse::<Ipv6Addr>().unwrap().octets().to_vec();
    out.extend_from_slice(&ifindex.to_ne_bytes());
    out.extend_from_slice(&dmac);
    out.extend_from_slice(&smac);
    out
}

#[test]
fn the_first_resolvable_shard_sid_wins_and_the_node_rows_are_written() {
    galactic_testkit::privileged!();
    // Keys from node.json: shard SIDs, pin dir; interfaces auto-detected.
    let node = with_default_route(node(
        "n66win",
        json!({"egress_shard_sids": format!("{SID_NO_NEIGH}, {SID_OK}")}),
    ));
    let pod = Pod::new("n66w");
    let result = node.add(&pod, "G");
    let (table, up0) = (node.table(), node.ifindex("up0"));

    assert_eq!(
        node.nat66_row(table),
        Some(egress_bytes(&tenant(SID_OK), up0, FABRIC_MAC, UP_MAC)),
        "the first SID has no neighbour for its gateway; the second wins"
    );
    assert_eq!(
        node.ifindex_rows().values().next().unwrap().argument,
        VRF_ID
    );
    // The node's SID base (Block, Node-ID 1, End.DT46, Argument 0), not up0's address.
    let mut src = vec![];
    src.extend_from_slice(
        &"2001:db8:ff03:1:e000::"
            .parse::<Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    assert_eq!(node.node_src_addr(), src);
    let mut uplink = up0.to_ne_bytes().to_vec();
    uplink.extend_from_slice(&FABRIC_MAC);
    uplink.extend_from_slice(&UP_MAC);
    assert_eq!(node.public_uplink(), uplink);
    assert!(node.warnings().is_empty(), "{:?}", node.warnings());
    node.check(&pod, "G", &result).expect_quiet_success();

    // CHECK names a missing ::/0 row.
    let mut egress: maps::EgressRouteTable = node.map(maps::EGRESS_ROUTE_TABLE);
    let key = galactic_core::bpf::registry::nat66_key(table);
    let value = egress.get(&key, 0).unwrap();
    egress.remove(&key).unwrap();
    let msg = node.check(&pod, "G", &result).expect_error(999);
    assert!(
        msg.contains("::/0") && msg.contains(&table.to_string()),
        "{msg}"
    );
    egress.insert(&key, value, 0).unwrap();
    node.check(&pod, "G", &result).expect_quiet_success();

    // Node rows are node-wide: the attachment's DEL leaves them (and its VPC's last attachment
    // takes the ::/0 row).
    node.del(&pod, "G", &result);
    assert_eq!(node.node_src_addr(), src);
    assert_eq!(node.public_uplink(), uplink);
    assert!(node.egress_rows().is_empty(), "{:?}", node.egress_rows());
}

#[test]
fn no_resolvable_shard_sid_fails_the_add_with_code_11_and_leaves_nothing() {
    galactic_testkit::privileged!();
    let mut node = node("n66none", json!({}));
    // Keys from the environment, by the Go chain's older name (read as egress_shard_sids).
    node.env.push((
        "GALACTIC_CNI_NAT66_SHARD_SIDS".into(),
        format!("{SID_NO_NEIGH},{SID_NO_ROUTE}"),
    ));
    let pod = Pod::new("n66n");
    let prev = node.master_add(&pod, "G");
    let msg = node.bgp("ADD", &pod, "G", &prev, &[]).expect_error(11);
    assert!(
        msg.contains("no egress shard SID is resolvable yet, out of 2 configured")
            && msg.contains(&format!(
                "{}: no neighbour entry with a MAC for next hop 2001:db8:f::99 on up0",
                tenant(SID_NO_NEIGH)
            ))
            && msg.contains(&format!("{}: no route", tenant(SID_NO_ROUTE))),
        "{msg}"
    );
    assert!(node.egress_rows().is_empty(), "{:?}", node.egress_rows());
    assert_eq!(node.ifindex_rows().len(), 0);
    let vrf: maps::VrfTable = node.map(maps::VRF_TABLE);
    assert_eq!(
        vrf.iter().count(),
        0,
        "nothing of the registration was written"
    );
    assert_eq!(node.node_src_addr(), vec![0; 16]);
    assert!(node.state_files("attachments").is_empty());
    assert!(node.state_files("nat66").is_empty());

    // The retry succeeds once the fabric neighbour is known.
    node.host.netns.ip(&[
        "-6",
        "neigh",
        "replace",
        "2001:db8:f::99",
        "lladdr",
        "02:00:00:00:0b:99",
        "dev",
        "up0",
        "nud",
        "permanent",
    ]);
    let out = node.bgp("ADD", &pod, "G", &prev, &[]);
    assert!(out.success, "{out:?}");
    assert_eq!(
        node.nat66_row(node.table()),
        Some(egress_bytes(
            &tenant(SID_NO_NEIGH),
            node.ifindex("up0"),
            [2, 0, 0, 0, 0x0b, 0x99],
            UP_MAC
        ))
    );
    node.del(&pod, "G", &out.json());
}

#[test]
fn the_nat66_default_lives_while_its_vpc_has_attachments() {
    galactic_testkit::privileged!();
    let node = with_default_route(node("n66life", json!({})));
    // Keys from the node config, set once the node exists.
    node.host
        .node
        .merge_config(json!({"egress_shard_sids": SID_OK}));
    let (a, b, c) = (Pod::new("n66a"), Pod::new("n66b"), Pod::new("n66c"));
    let ra = node.add(&a, "G");
    let rb = node.add(&b, "H");
    let table = node.table();
    let row = egress_bytes(&tenant(SID_OK), node.ifindex("up0"), FABRIC_MAC, UP_MAC);
    assert_eq!(node.nat66_row(table), Some(row.clone()));
    assert_eq!(
        node.egress_rows().len(),
        7,
        "::/0, each pod's /96 and /32, the VPC's two gateways"
    );

    node.del(&a, "G", &ra);
    assert_eq!(node.nat66_row(table), Some(row.clone()), "H still uses it");
    assert_eq!(node.egress_rows().len(), 5);
    node.del(&b, "H", &rb);
    assert_eq!(
        node.nat66_row(table),
        None,
        "the VPC's last attachment took it"
    );
    assert!(node.egress_rows().is_empty());
    assert!(node.state_files("nat66").is_empty());

    // GC of the last attachment takes it too.
    let rc = node.add(&c, "K");
    assert_eq!(node.nat66_row(node.table()), Some(row));
    node.gc_nothing_valid();
    assert!(node.egress_rows().is_empty(), "{:?}", node.egress_rows());
    assert!(node.state_files("nat66").is_empty());
    let _ = rc;
}

#[test]
fn a_failed_add_rolls_back_only_what_it_created() {
    galactic_testkit::privileged!();
    let node = with_default_route(node("n66rb", json!({"egress_shard_sids": SID_OK})));
    let fail = [("GALACTIC_FAILPOINTS", "bgp-after-datapath")];
    let (a, b, c) = (Pod::new("n66ra"), Pod::new("n66rb"), Pod::new("n66rc"));
    let ra = node.add(&a, "G");
    let table = node.table();
    let before = node.egress_rows();
    assert!(node.nat66_row(table).is_some());

    // B's ADD fails after its registration: its rows go, A's and the VPC's ::/0 stay.
    let prev_b = node.master_add(&b, "H");
    let msg = node.bgp("ADD", &b, "H", &prev_b, &fail).expect_error(999);
    assert!(msg.contains("bgp-after-datapath"), "{msg}");
    assert_eq!(node.egress_rows(), before);
    assert_eq!(node.ifindex_rows().len(), 1);
    node.master_del(&b, "H", &prev_b);

    // A goes; then C's ADD is the VPC's only one and fails: the ::/0 it created goes with it.
    node.del(&a, "G", &ra);
    assert!(node.egress_rows().is_empty());
    let prev_c = node.master_add(&c, "K");
    node.bgp("ADD", &c, "K", &prev_c, &fail).expect_error(999);
    assert!(node.egress_rows().is_empty(), "{:?}", node.egress_rows());
    assert_eq!(node.ifindex_rows().len(), 0);
    assert!(node.state_files("nat66").is_empty());
    assert!(node.state_files("attachments").is_empty());
    node.master_del(&c, "K", &prev_c);
}

#[test]
fn a_missing_uplink_fails_open_with_a_warning() {
    galactic_testkit::privileged!();
    let node = node("n66up", json!({}));
    node.internet_egress(None);
    node.host
        .node
        .merge_config(json!({"ebpf_interfaces": "nosuch0, up0"}));
    let pod = Pod::new("n66u");
    let result = node.add(&pod, "G");
    let base = "2001:db8:ff03:1:e000::".parse::<Ipv6Addr>().unwrap();
    assert_eq!(
        node.node_src_addr(),
        base.octets().to_vec(),
        "the SID base needs no uplink"
    );
    assert_eq!(node.public_uplink(), vec![0; 16], "not written");
    let warnings = node.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("own public uplink") && w.contains("nosuch0")),
        "{warnings:?}"
    );
    assert_eq!(
        node.ifindex_rows().len(),
        1,
        "the attachment itself is registered"
    );
    node.check(&pod, "G", &result).expect_quiet_success();

    // No interface configured and no default route: nothing to detect, still an ADD.
    node.host
        .node
        .merge_config(json!({"ebpf_interfaces": null}));
    let other = Pod::new("n66u2");
    let r2 = node.add(&other, "H");
    assert_eq!(node.public_uplink(), vec![0; 16]);
    assert!(node
        .warnings()
        .iter()
        .any(|w| w.contains("no table has an IPv6 default or BGP-learned route")));
    node.del(&other, "H", &r2);
    node.del(&pod, "G", &result);
}

#[test]
fn the_datapath_switched_off_in_node_json_registers_nothing() {
    galactic_testkit::privileged!();
    let node = node(
        "n66off",
        json!({"ebpf_datapath": "off", "egress_shard_sids": SID_NO_ROUTE}),
    );
    let pod = Pod::new("n66o");
    let result = node.add(&pod, "G");
    assert!(node.egress_rows().is_empty());
    assert_eq!(node.ifindex_rows().len(), 0);
    node.check(&pod, "G", &result).expect_quiet_success();
    node.del(&pod, "G", &result);
}

#[test]
fn an_invalid_shard_sid_is_a_config_error_naming_it() {
    galactic_testkit::privileged!();
    let node = node("n66bad", json!({}));
    let pod = Pod::new("n66b");
    let prev = node.master_add(&pod, "G");
    node.host
        .node
        .merge_config(json!({"egress_shard_sids": format!("{SID_OK}, 2001:db8::xyz")}));
    let msg = node.bgp("ADD", &pod, "G", &prev, &[]).expect_error(7);
    assert!(
        msg.contains("egress_shard_sids") && msg.contains("\"2001:db8::xyz\""),
        "{msg}"
    );
    // An address that is not a uSID cannot carry the tenant's Argument.
    node.host
        .node
        .merge_config(json!({"egress_shard_sids": "2001:db8:5::1"}));
    let msg = node.bgp("ADD", &pod, "G", &prev, &[]).expect_error(7);
    assert!(
        msg.contains("egress_shard_sids") && msg.contains("2001:db8:5::1 is not a uSID"),
        "{msg}"
    );
    // A NAT64 prefix must be a /96.
    node.host
        .node
        .merge_config(json!({"egress_shard_sids": SID_OK, "nat64_prefix": "64:ff9b::/64"}));
    let msg = node.bgp("ADD", &pod, "G", &prev, &[]).expect_error(7);
    assert!(
        msg.contains("nat64_prefix") && msg.contains("\"64:ff9b::/64\"") && msg.contains("/96"),
        "{msg}"
    );
    assert!(node.egress_rows().is_empty());
    node.master_del(&pod, "G", &prev);
}

/// The ::/0 row goes only while it holds what was written; a NAT66 record whose table lost its
/// last registration without removing it (a failed removal) is swept by GC.
#[test]
fn a_rerouted_default_is_left_alone_and_orphaned_records_are_swept() {
    use galactic_core::bpf::registry::nat66_key;
    galactic_testkit::privileged!();
    let registry = Registry::new();
    let (dir, state) = (registry.bpffs.pin_dir(), &registry.state);
    let value = registry_value();
    let reg = |host: &str, ifindex: u32, table: u32| registry.register(host, ifindex, table, value);
    let mut egress: maps::EgressRouteTable =
        maps::open_typed(&dir, maps::EGRESS_ROUTE_TABLE).unwrap();
    reg("GaH", 41, 1000);
    assert_eq!(egress.get(&nat66_key(1000), 0).unwrap(), value);
    // A routing daemon put its own default at ::/0 since.
    let theirs = EgressRouteValue {
        link_ifindex: 3,
        ..value
    };
    egress.insert(&nat66_key(1000), theirs, 0).unwrap();
    assert!(galactic_core::bpf::unregister_attachment(state.path(), "GaH").unwrap());
    assert_eq!(
        egress.get(&nat66_key(1000), 0).unwrap(),
        theirs,
        "left alone"
    );
    egress.remove(&nat66_key(1000)).unwrap();

    // A registration record gone without its table's NAT66 removal (as after a crash): GC.
    reg("GbH", 42, 1001);
    std::fs::remove_file(state.path().join("bpf/attachments/GbH.json")).unwrap();
    assert!(egress.get(&nat66_key(1001), 0).is_ok());
    let live = std::collections::HashSet::new();
    assert!(galactic_core::bpf::sweep_attachments(state.path(), &live)
        .unwrap()
        .is_empty());
    assert!(egress.get(&nat66_key(1001), 0).is_err(), "swept");
    assert!(!state.path().join("bpf/nat66/1001.json").exists());
}

#[test]
fn a_replacement_interrupted_between_record_and_map_is_still_removed() {
    use galactic_core::bpf::registry::nat66_key;
    galactic_testkit::privileged!();
    let registry = Registry::new();
    let (dir, state) = (registry.bpffs.pin_dir(), &registry.state);
    let first = registry_value();
    let second = EgressRouteValue {
        link_ifindex: 10,
        ..first
    };
    let reg = |host: &str, ifindex: u32, value| registry.register(host, ifindex, 1000, value);
    let egress: maps::EgressRouteTable = maps::open_typed(&dir, maps::EGRESS_ROUTE_TABLE).unwrap();
    let record_path = state.path().join("bpf/nat66/1000.json");
    let record = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap()
    };
    reg("GaH", 41, first);
    assert_eq!(record().get("replaces"), None, "nothing replaced yet");
    // A second attachment of the VPC resolves another uplink: the record names both rows.
    reg("GbH", 42, second);
    assert_eq!(egress.get(&nat66_key(1000), 0).unwrap(), second);
    assert_eq!(record()["linkIfindex"], 10);
    assert_eq!(record()["replaces"]["linkIfindex"], 9);
    // As if that ADD had died after its record and before the map write: the map holds the
    // replaced row, which the removal of the VPC's last attachment must still take.
    let mut interrupted: maps::EgressRouteTable =
        maps::open_typed(&dir, maps::EGRESS_ROUTE_TABLE).unwrap();
    interrupted.insert(&nat66_key(1000), first, 0).unwrap();
    assert!(galactic_core::bpf::unregister_attachment(state.path(), "GaH").unwrap());
    assert_eq!(
        egress.get(&nat66_key(1000), 0).unwrap(),
        first,
        "GbH still uses it"
    );
    assert!(galactic_core::bpf::unregister_attachment(state.path(), "GbH").unwrap());
    assert!(egress.get(&nat66_key(1000), 0).is_err(), "removed");
    assert!(!record_path.exists());
}

/// Registrations straight through the registry, on a private bpffs with empty pinned maps.
struct Registry {
    bpffs: PrivateBpffs,
    state: tempfile::TempDir,
}

impl Registry {
    fn new() -> Self {
        let bpffs = PrivateBpffs::mount();
        pin_empty_maps(&bpffs.pin_dir()).unwrap();
        Self {
            bpffs,
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn register(&self, host: &str, ifindex: u32, table: u32, nat66: EgressRouteValue) {
        use galactic_core::bpf::registry::{register_attachment, Registration};
        use galactic_core::bpf::usid::Usid;
        register_attachment(&Registration {
            pin_dir: &self.bpffs.pin_dir(),
            state_dir: self.state.path(),
            usid: Usid::compute("2001:db8:ff03::/48", 1, 3).unwrap(),
            vrf_table_id: table,
            egress_kind: EGRESS_KIND_VETH,
            host_ifname: host,
            host_ifindex: ifindex,
            prefixes: &[],
            egress: &[(galactic_core::bpf::registry::DEFAULT_ROUTE, nat66)],
            gateways: None,
        })
        .unwrap();
    }
}

/// A NAT66 default towards the resolvable SID over link 9.
fn registry_value() -> EgressRouteValue {
    EgressRouteValue {
        sid_be: SID_OK.parse::<Ipv6Addr>().unwrap().octets(),
        link_ifindex: 9,
        dmac: FABRIC_MAC,
        smac: UP_MAC,
    }
}

/// The key of `table`'s egress row for `prefix`, as `egress_rows` lists it.
fn row_key(table: u32, prefix: &str) -> (u32, u32, u8, [u8; 16]) {
    let net: ipnetwork::Ipv6Network = prefix.parse().unwrap();
    (
        40 + u32::from(net.prefix()),
        table,
        FAMILY_IPV6,
        net.network().octets(),
    )
}

#[test]
fn an_opted_in_vpc_routes_default_and_each_nat64_prefix_toward_its_tenant_sid() {
    galactic_testkit::privileged!();
    let node = with_default_route(node(
        "egin",
        json!({"egress_shard_sids": SID_OK, "nat64_prefix": "64:ff9b::/96, 2001:db8:64::/96"}),
    ));
    let (a, b) = (Pod::new("egina"), Pod::new("eginb"));
    let ra = node.add(&a, "G");
    let table = node.table();
    // The shard SID with the VPC's VRF id (1) as its Argument; Block, Node-ID, Function kept.
    assert_eq!(tenant(SID_OK), "2001:db8:5:0:e001::");
    let row = egress_bytes(
        "2001:db8:5:0:e001::",
        node.ifindex("up0"),
        FABRIC_MAC,
        UP_MAC,
    );
    let rows = node.egress_rows();
    for prefix in ["::/0", "64:ff9b::/96", "2001:db8:64::/96"] {
        assert_eq!(rows.get(&row_key(table, prefix)), Some(&row), "{prefix}");
    }
    assert_eq!(
        rows.len(),
        7,
        "three egress rows, the pod's /96 and /32, its gateways' /128 and /32"
    );
    node.check(&a, "G", &ra).expect_quiet_success();

    // CHECK names a NAT64 row that encapsulates elsewhere.
    let mut egress: maps::EgressRouteTable = node.map(maps::EGRESS_ROUTE_TABLE);
    let key = galactic_core::bpf::registry::egress_key(table, "64:ff9b::/96".parse().unwrap());
    let right = egress.get(&key, 0).unwrap();
    let mut wrong = right;
    wrong.sid_be = SID_OK.parse::<Ipv6Addr>().unwrap().octets();
    egress.insert(&key, wrong, 0).unwrap();
    let msg = node.check(&a, "G", &ra).expect_error(999);
    assert!(
        msg.contains("64:ff9b::/96") && msg.contains("2001:db8:5:0:e001::"),
        "{msg}"
    );
    egress.insert(&key, right, 0).unwrap();

    // Another attachment of the VPC whose network no longer opts in: the ADD withdraws them.
    node.internet_egress(Some("Disabled"));
    let rb = node.add(&b, "H");
    let rows = node.egress_rows();
    for prefix in ["::/0", "64:ff9b::/96", "2001:db8:64::/96"] {
        assert!(
            !rows.contains_key(&row_key(table, prefix)),
            "{prefix} withdrawn"
        );
    }
    assert!(node.state_files("nat66").is_empty());
    node.check(&b, "H", &rb).expect_quiet_success();
    // A CHECK by the opted-in stanza reports each missing row.
    node.internet_egress(Some("Enabled"));
    let msg = node.check(&a, "G", &ra).expect_error(999);
    assert!(
        msg.contains("no egress row ::/0") && msg.contains("no egress row 2001:db8:64::/96"),
        "{msg}"
    );
    // Opted out, CHECK reports a row that is still there.
    node.add(&a, "G");
    node.internet_egress(None);
    let msg = node.check(&b, "H", &rb).expect_error(999);
    assert!(msg.contains("has no internet egress"), "{msg}");
    node.del(&b, "H", &rb);
    node.del(&a, "G", &ra);
    assert!(node.egress_rows().is_empty(), "{:?}", node.egress_rows());
    assert!(node.state_files("nat66").is_empty());
}

#[test]
fn a_vpc_that_does_not_opt_in_gets_no_egress_on_a_node_with_shards() {
    galactic_testkit::privileged!();
    let node = with_default_route(node(
        "egout",
        json!({"egress_shard_sids": SID_OK, "nat64_prefix": "64:ff9b::/96"}),
    ));
    for (i, mode) in [None, Some("Disabled")].into_iter().enumerate() {
        node.internet_egress(mode);
        let pod = Pod::new(&format!("egout{i}"));
        let result = node.add(&pod, "G");
        let rows = node.egress_rows();
        assert_eq!(
            rows.len(),
            4,
            "only the pod's own /96 and /32 and its gateways' /128 and /32: {rows:?}"
        );
        assert!(!rows.contains_key(&row_key(node.table(), "::/0")));
        assert!(node.state_files("nat66").is_empty());
        node.check(&pod, "G", &result).expect_quiet_success();
        node.del(&pod, "G", &result);
    }
}

#[test]
fn a_misspelt_egress_stanza_is_refused_naming_the_key() {
    galactic_testkit::privileged!();
    let node = with_default_route(node("egbad", json!({"egress_shard_sids": SID_OK})));
    let pod = Pod::new("egbad");
    let prev = node.master_add(&pod, "G");
    for (egress, want) in [
        (
            json!({"internett": {"mode": "Enabled"}}),
            "unknown key \"internett\" in egress (accepted: \"internet\")",
        ),
        (
            json!({"internet": {"mode": "Enabled", "shardSIDs": [SID_NO_NEIGH]}}),
            "unknown key \"shardSIDs\" in egress.internet (accepted: \"mode\")",
        ),
        (
            json!({"internet": {"mode": "enabled"}}),
            "egress.internet.mode is \"enabled\"; accepted: \"Enabled\", \"Disabled\"",
        ),
    ] {
        *node.egress.borrow_mut() = Some(egress);
        let msg = node.bgp("ADD", &pod, "G", &prev, &[]).expect_error(7);
        assert_eq!(msg, want);
        assert!(node.egress_rows().is_empty() && node.ifindex_rows().is_empty());
    }
    // DEL never fails on it.
    node.bgp("DEL", &pod, "G", &prev, &[])
        .expect_quiet_success();
    node.master_del(&pod, "G", &prev);
}

#[test]
fn opting_in_without_a_node_shard_or_with_conflicting_names_is_a_config_error() {
    galactic_testkit::privileged!();
    let mut node = with_default_route(node("egcfg", json!({})));
    let pod = Pod::new("egcfg");
    let prev = node.master_add(&pod, "G");
    let msg = node.bgp("ADD", &pod, "G", &prev, &[]).expect_error(7);
    assert!(
        msg.contains("opts in to internet egress") && msg.contains("egress_shard_sids"),
        "{msg}"
    );
    // The old name in the environment, the new one in node.json, different: both named.
    node.host
        .node
        .merge_config(json!({"egress_shard_sids": SID_OK}));
    node.env
        .push(("GALACTIC_CNI_NAT66_SHARD_SIDS".into(), SID_NO_NEIGH.into()));
    let msg = node.bgp("ADD", &pod, "G", &prev, &[]).expect_error(7);
    assert!(
        msg.contains("egress_shard_sids")
            && msg.contains("nat66_shard_sids")
            && msg.contains("GALACTIC_CNI_NAT66_SHARD_SIDS"),
        "{msg}"
    );
    assert!(node.egress_rows().is_empty() && node.ifindex_rows().is_empty());
    node.env.clear();
    node.master_del(&pod, "G", &prev);
}

/// The uplink's next hop moved to a router with another MAC: the fabric's end takes `mac` (so
/// whatever the node learns from it again, its link-local address included, says `mac`), and the
/// node's neighbour table holds `mac` for the next hop and nothing older of up0's.
fn move_uplink_neighbour(node: &Node, mac: &str) {
    let fabric = node.fabric.as_ref().expect("the node has a fabric");
    fabric.ip(&["link", "set", "fab0", "address", mac]);
    node.host
        .netns
        .ip(&["-6", "neigh", "flush", "dev", "up0", "nud", "all"]);
    node.host.netns.ip(&[
        "-6",
        "neigh",
        "replace",
        "2001:db8:f::1",
        "lladdr",
        mac,
        "dev",
        "up0",
        "nud",
        "permanent",
    ]);
}

#[test]
fn a_changed_uplink_next_hop_reaches_the_row_with_the_next_add_detected_or_configured() {
    galactic_testkit::privileged!();
    let node = with_default_route(node("n66mv", json!({})));
    node.internet_egress(None);
    let up0 = node.ifindex("up0");
    let row = |dmac: [u8; 6]| {
        let mut row = up0.to_ne_bytes().to_vec();
        row.extend_from_slice(&dmac);
        row.extend_from_slice(&UP_MAC);
        row
    };
    let first = Pod::new("n66m1");
    let r1 = node.add(&first, "G");
    assert_eq!(node.public_uplink(), row(FABRIC_MAC), "detected: up0");

    // Auto-detected: the next ADD resolves the interface the first one chose, by name.
    move_uplink_neighbour(&node, "02:00:00:00:0b:02");
    let second = Pod::new("n66m2");
    let r2 = node.add(&second, "H");
    assert_eq!(node.public_uplink(), row([2, 0, 0, 0, 0x0b, 2]));

    // Configured: every ADD resolves it.
    node.host
        .node
        .merge_config(json!({"ebpf_interfaces": "up0"}));
    move_uplink_neighbour(&node, "02:00:00:00:0b:03");
    let third = Pod::new("n66m3");
    let r3 = node.add(&third, "I");
    assert_eq!(node.public_uplink(), row([2, 0, 0, 0, 0x0b, 3]));
    assert!(node.warnings().is_empty(), "{:?}", node.warnings());

    node.del(&third, "I", &r3);
    node.del(&second, "H", &r2);
    node.del(&first, "G", &r1);
}
