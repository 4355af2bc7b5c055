//! The eBPF uSID datapath registration on real BPF maps: a private bpffs per test, the maps
//! pinned with the reference definitions, the veth master and galactic-bgp (local publisher, a
//! BGPRouter with an SRv6 locator) run as a runtime runs them, and every map read back with aya.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::Node;
use galactic_core::bpf::abi::*;
use galactic_core::bpf::maps::{self, pin_empty_maps, PIN_DIR_ENV, USID_EGRESS_PROG};
use galactic_core::bpf::registry::egress_key;
use galactic_testkit::bpffs::PrivateBpffs;
use galactic_testkit::host::Pod;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const BLOCK: u64 = 0x2001_0db8_ff03;

/// A node whose plugins find the pin directory in their environment.
fn node(tag: &str) -> Node {
    let mut node = Node::new(tag, json!({}));
    let pin_dir = node.bpffs.pin_dir().display().to_string();
    node.env.push((PIN_DIR_ENV.into(), pin_dir));
    node
}

/// The index of a result's host interface.
fn host_ifindex(node: &Node, result: &Value) -> u32 {
    node.ifindex(result["interfaces"][0]["name"].as_str().unwrap())
}

/// The VRF row of the VPC.
fn vrf_value(node: &Node) -> VrfValue {
    let m: maps::VrfTable = node.map(maps::VRF_TABLE);
    m.get(&((BLOCK << 12) | 1), 0).unwrap()
}

fn v4_key(table: u32, result: &Value) -> (u32, u32, u8, [u8; 16]) {
    let ip: std::net::Ipv4Addr = result["ips"][1]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let mut addr = [0u8; 16];
    addr[..4].copy_from_slice(&ip.octets());
    (40 + 32, table, FAMILY_IPV4, addr)
}

fn v6_key(table: u32, result: &Value) -> (u32, u32, u8, [u8; 16]) {
    let net: ipnetwork::Ipv6Network = result["ips"][0]["address"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    (
        40 + u32::from(net.prefix()),
        table,
        FAMILY_IPV6,
        net.network().octets(),
    )
}

/// The pass-through keys of a result's gateways (host prefixes: /128 and /32).
fn gateway_keys(table: u32, result: &Value) -> Vec<(u32, u32, u8, [u8; 16])> {
    let gateways = result["ips"].as_array().unwrap().iter();
    gateways
        .filter_map(|ip| ip["gateway"].as_str()?.parse::<std::net::IpAddr>().ok())
        .map(|gw| galactic_testkit::repair::egress_key(table, gw.into()))
        .collect()
}

#[test]
fn registration_writes_every_row_and_del_and_gc_remove_exactly_the_attachments_rows() {
    galactic_testkit::privileged!();
    let node = node("bpfreg");
    let (a, b) = (Pod::new("bpfa"), Pod::new("bpfb"));
    let ra = node.add(&a, "G");
    let table = node.table();
    let (ia, zero) = (host_ifindex(&node, &ra), vec![0u8; 32]);

    let locator: maps::LocatorTable = node.map(maps::LOCATOR_TABLE);
    let rows: Vec<_> = locator.iter().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, 0x2001_0db8_ff03_0001, "Block<<16 | NodeID");
    assert!(rows[0].1.generation_ns > 0);
    let function: maps::FunctionTable = node.map(maps::FUNCTION_TABLE);
    let rows: Vec<_> = function.iter().map(Result::unwrap).collect();
    assert_eq!(
        rows,
        vec![((BLOCK << 4) | 0xE, FunctionValue { behavior: 1 })]
    );
    let vrf = vrf_value(&node);
    let first_generation = vrf.generation_ns;
    assert_eq!(
        (
            vrf.vrf_table_id,
            vrf.egress_kind,
            vrf.packets,
            vrf.bytes,
            vrf.last_seen_ns,
            vrf.dropped_packets
        ),
        (table, EGRESS_KIND_VETH, 0, 0, 0, 0)
    );
    assert!(first_generation > 0);
    let mut want_row = vec![];
    want_row.extend_from_slice(&BLOCK.to_ne_bytes());
    want_row.extend_from_slice(&1u16.to_ne_bytes());
    want_row.extend_from_slice(&[0; 6]);
    let ifrows = node.ifindex_rows();
    assert_eq!(ifrows.len(), 1);
    assert_eq!(bytes_of(&ifrows[&ia]), want_row.as_slice());
    let egress = node.egress_rows();
    let gateways = gateway_keys(table, &ra);
    assert_eq!(gateways.len(), 2, "a gateway per family");
    let mut want: BTreeMap<_, _> = [
        (v6_key(table, &ra), zero.clone()),
        (v4_key(table, &ra), zero.clone()),
    ]
    .into();
    want.extend(gateways.iter().map(|k| (*k, zero.clone())));
    assert_eq!(
        egress, want,
        "pass-through entries of the masked prefixes and the gateways, all-zero values"
    );
    node.check(&a, "G", &ra).expect_quiet_success();

    // The datapath counts traffic; a second attachment of the VPC re-registers the VRF.
    let mut m: maps::VrfTable = node.map(maps::VRF_TABLE);
    let counted = VrfValue {
        packets: 10,
        bytes: 1500,
        last_seen_ns: 77,
        dropped_packets: 3,
        ..vrf
    };
    m.insert((BLOCK << 12) | 1, counted, 0).unwrap();
    let rb = node.add(&b, "H");
    let ib = host_ifindex(&node, &rb);
    let vrf = vrf_value(&node);
    assert_eq!(
        (
            vrf.packets,
            vrf.bytes,
            vrf.last_seen_ns,
            vrf.dropped_packets
        ),
        (10, 1500, 77, 3),
        "counters survive"
    );
    assert!(
        vrf.generation_ns > first_generation,
        "generation stamped again"
    );
    assert_eq!(node.ifindex_rows().len(), 2);
    assert_eq!(
        node.egress_rows().len(),
        6,
        "each pod's masked /96 and /32, and the VPC's two gateways once"
    );

    // CHECK names a VRF row that no longer points at the VPC's table.
    m.insert(
        (BLOCK << 12) | 1,
        VrfValue {
            vrf_table_id: table + 1,
            ..vrf
        },
        0,
    )
    .unwrap();
    let msg = node.check(&b, "H", &rb).expect_error(999);
    assert!(
        msg.contains(&format!("points at table {}", table + 1)),
        "{msg}"
    );
    m.insert((BLOCK << 12) | 1, vrf, 0).unwrap();
    node.check(&b, "H", &rb).expect_quiet_success();

    // DEL of A: its ifindex row and its prefixes go; B's stay.
    node.del(&a, "G", &ra);
    let ifrows = node.ifindex_rows();
    assert_eq!(ifrows.keys().copied().collect::<Vec<_>>(), vec![ib]);
    let mut want: BTreeMap<_, _> = [
        (v6_key(table, &rb), zero.clone()),
        (v4_key(table, &rb), zero.clone()),
    ]
    .into();
    want.extend(gateway_keys(table, &rb).iter().map(|k| (*k, zero.clone())));
    assert_eq!(
        node.egress_rows(),
        want,
        "B still lists the shared gateways"
    );
    assert_eq!(vrf_value(&node), vrf, "node-level rows stay");

    // GC with B no longer valid: B's rows go.
    node.gc_nothing_valid();
    assert!(node.ifindex_rows().is_empty());
    assert!(node.egress_rows().is_empty());
    let locator: maps::LocatorTable = node.map(maps::LOCATOR_TABLE);
    assert_eq!(
        locator.iter().count(),
        1,
        "locator rows are never removed by the CNI"
    );
}

#[test]
fn a_vpc_row_keeps_the_tap_kind_while_a_tap_of_the_vpc_is_on_the_node() {
    galactic_testkit::privileged!();
    let node = node("bpfkind");
    let (vm, a, b) = (Pod::new("kvm"), Pod::new("ka"), Pod::new("kb"));
    let (tap, vm_list) = (node.tap_list("V"), node.tap_list("V"));
    let rvm = node.add_list(&vm, &tap);
    assert_eq!(vrf_value(&node).egress_kind, EGRESS_KIND_TAP);
    // One more veth pod of the VPC: the VM's inbound traffic must still be redirected as into
    // a tap (as into a veth, the kernel drops it).
    let ra = node.add(&a, "G");
    assert_eq!(
        vrf_value(&node).egress_kind,
        EGRESS_KIND_TAP,
        "a veth ADD after the VM's keeps the tap kind"
    );
    node.check(&a, "G", &ra).expect_quiet_success();
    // The last tap goes: the veth pods are served by the veth redirect again.
    node.del_list(&vm, &vm_list, &rvm);
    assert_eq!(vrf_value(&node).egress_kind, EGRESS_KIND_VETH);
    // A VM again, then a veth pod's DEL: the tap stays.
    let rvm = node.add_list(&vm, &tap);
    let rb = node.add(&b, "H");
    node.del(&a, "G", &ra);
    assert_eq!(vrf_value(&node).egress_kind, EGRESS_KIND_TAP);
    node.del(&b, "H", &rb);
    assert_eq!(vrf_value(&node).egress_kind, EGRESS_KIND_TAP);
    node.del_list(&vm, &vm_list, &rvm);
    assert_eq!(
        vrf_value(&node).egress_kind,
        EGRESS_KIND_TAP,
        "the VPC's last attachment leaves the row as it was (the datapath's GC owns it)"
    );
}

#[test]
fn missing_maps_fail_the_add_with_an_actionable_error_and_no_registration() {
    galactic_testkit::privileged!();
    let node = node("bpfmiss");
    std::fs::remove_file(node.bpffs.pin_dir().join(maps::VRF_TABLE)).unwrap();
    let pod = Pod::new("bpfm");
    let prev = node.master_add(&pod, "G");
    let msg = node.bgp("ADD", &pod, "G", &prev, &[]).expect_error(999);
    assert!(
        msg.contains("not loaded") && msg.contains("vrf_table") && msg.contains("bpf-pin-maps"),
        "{msg}"
    );
    assert!(
        node.ifindex_rows().is_empty(),
        "nothing written before every map was open"
    );
    assert!(node.egress_rows().is_empty());
    node.master_del(&pod, "G", &prev);
}

/// Builds a classifier that passes every packet (clang from Debian) and pins it with bpftool.
fn pin_pass_classifier(pin_dir: &Path) {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("pass.c");
    let obj = work.path().join("pass.o");
    std::fs::write(
        &src,
        "__attribute__((section(\"tc\"), used)) int usid_egress(void *skb) { return 0; }\n\
         char _license[] __attribute__((section(\"license\"), used)) = \"GPL\";\n",
    )
    .unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e} (install clang and bpftool)"));
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(Command::new("clang")
        .args(["-O2", "-target", "bpf", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    run(Command::new("bpftool")
        .args(["prog", "load"])
        .arg(&obj)
        .arg(pin_dir.join(USID_EGRESS_PROG))
        .args(["type", "classifier"]));
}

#[test]
fn the_pinned_egress_program_is_attached_once_in_its_slot_and_replaced_on_a_repeated_add() {
    galactic_testkit::privileged!();
    let node = node("bpftc");
    pin_pass_classifier(&node.bpffs.pin_dir());
    let pod = Pod::new("bpft");
    let result = node.add(&pod, "G");
    let ifname = result["interfaces"][0]["name"].as_str().unwrap();
    let filters = |node: &Node| -> Vec<Value> {
        let text = node.host.netns.ip(&["link"]);
        assert!(text.contains(ifname));
        let out = node
            .host
            .netns
            .exec(&["tc", "-j", "filter", "show", "dev", ifname, "ingress"]);
        let all: Value = serde_json::from_slice(&out.stdout).unwrap();
        all.as_array()
            .unwrap()
            .iter()
            .filter(|f| f.get("options").is_some())
            .cloned()
            .collect()
    };
    let first = filters(&node);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["kind"], "bpf");
    assert_eq!(first[0]["pref"], 1);
    assert_eq!(first[0]["options"]["handle"], "0x1");
    assert_eq!(first[0]["options"]["bpf_name"], "usid_egress");
    assert!(
        first[0]["options"].get("direct-action").is_some()
            || first[0]["options"].get("da").is_some()
            || first[0]["options"]["direct_action"] == true,
        "direct action: {first:?}"
    );
    // A repeated ADD (runtime retry) replaces the filter in place.
    let out = node.bgp("ADD", &pod, "G", &result, &[]);
    assert!(out.success, "{out:?}");
    let second = filters(&node);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0]["options"]["handle"], "0x1");
    node.del(&pod, "G", &result);

    // The node-config key `ebpf_filter_priority` picks the slot.
    let other = Pod::new("bpft2");
    let prev = node.master_add(&other, "H");
    node.host
        .node
        .merge_config(json!({"ebpf_filter_priority": 7}));
    let out = node.bgp("ADD", &other, "H", &prev, &[]);
    assert!(out.success, "{out:?}");
    node.host
        .node
        .merge_config(json!({"ebpf_filter_priority": null}));
    let ifname = prev["interfaces"][0]["name"].as_str().unwrap();
    let out = node
        .host
        .netns
        .exec(&["tc", "-j", "filter", "show", "dev", ifname, "ingress"]);
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let prefs: Vec<&Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.get("options").is_some())
        .map(|f| &f["pref"])
        .collect();
    assert_eq!(prefs, vec![&json!(7)], "{all}");
    node.del(&other, "H", &prev);
}

/// A map written by bpftool is read by our ABI types, and what we write is what bpftool sees.
#[test]
fn bpftool_and_the_abi_agree_byte_for_byte() {
    galactic_testkit::privileged!();
    let bpffs = PrivateBpffs::mount();
    let dir = bpffs.pin_dir();
    pin_empty_maps(&dir).unwrap();
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>();
    let bpftool = |args: &[String]| -> Vec<u8> {
        let out = Command::new("bpftool")
            .args(args)
            .output()
            .expect("bpftool (Debian package bpftool)");
        assert!(
            out.status.success(),
            "bpftool {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    // bpftool writes a vrf_table row from the reference layout: u32 table, u32 kind, 5 × u64.
    let key = ((BLOCK << 12) | 0x2A).to_ne_bytes();
    let mut value = vec![];
    value.extend_from_slice(&1234u32.to_ne_bytes());
    value.extend_from_slice(&1u32.to_ne_bytes());
    for n in [11u64, 22, 33, 44, 55] {
        value.extend_from_slice(&n.to_ne_bytes());
    }
    let mut args: Vec<String> = ["map", "update", "pinned"].map(String::from).to_vec();
    args.push(dir.join(maps::VRF_TABLE).display().to_string());
    args.push("key".into());
    args.push("hex".into());
    args.extend(hex(&key));
    args.push("value".into());
    args.push("hex".into());
    args.extend(hex(&value));
    bpftool(&args);
    let vrf: maps::VrfTable = maps::open_typed(&dir, maps::VRF_TABLE).unwrap();
    assert_eq!(
        vrf.get(&u64::from_ne_bytes(key), 0).unwrap(),
        VrfValue {
            vrf_table_id: 1234,
            egress_kind: EGRESS_KIND_TAP,
            packets: 11,
            bytes: 22,
            last_seen_ns: 33,
            generation_ns: 44,
            dropped_packets: 55
        }
    );
    // We write an egress route; bpftool dumps the 25-byte key and 32-byte value we meant.
    let mut egress: maps::EgressRouteTable =
        maps::open_typed(&dir, maps::EGRESS_ROUTE_TABLE).unwrap();
    let value = EgressRouteValue {
        sid_be: "2001:db8:ff03:2:e02a::"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
        link_ifindex: 7,
        dmac: [2, 0, 0, 0, 0, 1],
        smac: [2, 0, 0, 0, 0, 2],
    };
    egress
        .insert(&egress_key(100, "10.1.2.0/24".parse().unwrap()), value, 0)
        .unwrap();
    let dump: Value = serde_json::from_slice(&bpftool(
        &["-j", "map", "dump", "pinned"]
            .map(String::from)
            .into_iter()
            .chain([dir.join(maps::EGRESS_ROUTE_TABLE).display().to_string()])
            .collect::<Vec<_>>(),
    ))
    .unwrap();
    let bytes = |v: &Value| -> Vec<u8> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|b| u8::from_str_radix(b.as_str().unwrap().trim_start_matches("0x"), 16).unwrap())
            .collect()
    };
    let entries = dump.as_array().unwrap();
    assert_eq!(entries.len(), 1);
    let mut want_key = vec![];
    want_key.extend_from_slice(&(40u32 + 24).to_ne_bytes());
    want_key.extend_from_slice(&100u32.to_ne_bytes());
    want_key.push(FAMILY_IPV4);
    want_key.extend_from_slice(&[10, 1, 2, 0]);
    want_key.extend_from_slice(&[0; 12]);
    assert_eq!(bytes(&entries[0]["key"]), want_key);
    let mut want_value = "2001:db8:ff03:2:e02a::"
        .parse::<std::net::Ipv6Addr>()
        .unwrap()
        .octets()
        .to_vec();
    want_value.extend_from_slice(&7u32.to_ne_bytes());
    want_value.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
    assert_eq!(bytes(&entries[0]["value"]), want_value);
    // bpftool's view of the definitions: names, types, sizes, capacity, flags.
    let show: Value = serde_json::from_slice(&bpftool(
        &["-j", "map", "show", "pinned"]
            .map(String::from)
            .into_iter()
            .chain([dir.join(maps::EGRESS_ROUTE_TABLE).display().to_string()])
            .collect::<Vec<_>>(),
    ))
    .unwrap();
    assert_eq!(
        (
            show["name"].as_str(),
            show["type"].as_str(),
            show["bytes_key"].as_u64(),
            show["bytes_value"].as_u64(),
            show["max_entries"].as_u64(),
            show["flags"].as_u64()
        ),
        (
            Some("egress_route_ta"),
            Some("lpm_trie"),
            Some(25),
            Some(32),
            Some(32768),
            Some(1)
        )
    );
}

#[test]
fn pinning_is_idempotent_and_refuses_a_map_with_another_definition() {
    galactic_testkit::privileged!();
    let bpffs = PrivateBpffs::mount();
    let dir = bpffs.pin_dir();
    let first = pin_empty_maps(&dir).unwrap();
    assert!(
        first.iter().all(|(_, o)| *o == maps::PinOutcome::Created),
        "{first:?}"
    );
    let mut ifrows: maps::IfindexVrfTable =
        maps::open_typed(&dir, maps::IFINDEX_VRF_TABLE).unwrap();
    ifrows
        .insert(
            5,
            IfindexVrfValue {
                block: BLOCK,
                argument: 9,
                _pad: [0; 6],
            },
            0,
        )
        .unwrap();
    let again = pin_empty_maps(&dir).unwrap();
    assert!(
        again.iter().all(|(_, o)| *o == maps::PinOutcome::Present),
        "{again:?}"
    );
    let ifrows: maps::IfindexVrfTable = maps::open_typed(&dir, maps::IFINDEX_VRF_TABLE).unwrap();
    assert_eq!(ifrows.get(&5, 0).unwrap().argument, 9, "entries kept");
    // A foreign map under one of our names.
    std::fs::remove_file(dir.join(maps::FUNCTION_TABLE)).unwrap();
    let out = Command::new("bpftool")
        .args(["map", "create"])
        .arg(dir.join(maps::FUNCTION_TABLE))
        .args([
            "type",
            "hash",
            "key",
            "8",
            "value",
            "8",
            "entries",
            "128",
            "name",
            "function_table",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = pin_empty_maps(&dir).unwrap_err().to_string();
    assert!(
        err.contains("function_table") && err.contains("value_size: 8"),
        "{err}"
    );
}

/// Removal keeps what another registration still lists, a key someone re-routed, and an ifindex
/// row that now belongs to another VRF.
#[test]
fn removal_keeps_shared_rerouted_and_reused_rows() {
    use galactic_core::bpf::registry::{register_attachment, Registration};
    use galactic_core::bpf::usid::Usid;
    galactic_testkit::privileged!();
    let bpffs = PrivateBpffs::mount();
    let dir = bpffs.pin_dir();
    pin_empty_maps(&dir).unwrap();
    let state = tempfile::tempdir().unwrap();
    let shared: ipnetwork::IpNetwork = "fd20:10:ff01::1:0:5/96".parse().unwrap();
    let own: ipnetwork::IpNetwork = "10.9.0.0/24".parse().unwrap();
    let reg =
        |host: &'static str, ifindex: u32, arg: i64, prefixes: &'static [ipnetwork::IpNetwork]| {
            register_attachment(&Registration {
                pin_dir: &dir,
                state_dir: state.path(),
                usid: Usid::compute("2001:db8:ff03::/48", 1, arg).unwrap(),
                vrf_table_id: 1000,
                egress_kind: EGRESS_KIND_TAP,
                host_ifname: host,
                host_ifindex: ifindex,
                prefixes,
                egress: &[],
                gateways: None,
            })
            .unwrap()
        };
    let prefixes_a: &'static [ipnetwork::IpNetwork] =
        Box::leak(vec![shared, own].into_boxed_slice());
    let prefixes_b: &'static [ipnetwork::IpNetwork] = Box::leak(vec![shared].into_boxed_slice());
    let record = reg("GaH", 41, 7, prefixes_a);
    assert_eq!(
        record.prefixes[0].to_string(),
        "fd20:10:ff01::1:0:0/96",
        "masked"
    );
    reg("GbH", 42, 7, prefixes_b);
    let mut egress: maps::EgressRouteTable =
        maps::open_typed(&dir, maps::EGRESS_ROUTE_TABLE).unwrap();
    let rerouted = EgressRouteValue {
        link_ifindex: 3,
        ..EgressRouteValue::PASS_THROUGH
    };
    egress.insert(&egress_key(1000, own), rerouted, 0).unwrap();
    // Interface index 41 was reused by an attachment of another VRF since.
    let mut ifrows: maps::IfindexVrfTable =
        maps::open_typed(&dir, maps::IFINDEX_VRF_TABLE).unwrap();
    let other = IfindexVrfValue {
        block: BLOCK,
        argument: 8,
        _pad: [0; 6],
    };
    ifrows.insert(41, other, 0).unwrap();

    assert!(galactic_core::bpf::unregister_attachment(state.path(), "GaH").unwrap());
    let keys: Vec<_> = egress
        .iter()
        .map(Result::unwrap)
        .map(|(k, v)| (k.prefix_len(), v))
        .collect();
    assert_eq!(
        keys.len(),
        2,
        "the shared /96 (listed by GbH) and the re-routed /24 stay: {keys:?}"
    );
    assert_eq!(ifrows.get(&41, 0).unwrap(), other);
    assert!(
        !galactic_core::bpf::unregister_attachment(state.path(), "GaH").unwrap(),
        "already gone"
    );
    let live = std::collections::HashSet::new();
    assert_eq!(
        galactic_core::bpf::sweep_attachments(state.path(), &live).unwrap(),
        vec!["GbH".to_owned()]
    );
    let keys: Vec<_> = egress
        .iter()
        .map(Result::unwrap)
        .map(|(k, _)| k.prefix_len())
        .collect();
    assert_eq!(keys, vec![40 + 24], "only the re-routed entry is left");
    assert!(ifrows.get(&42, 0).is_err(), "GbH's row is gone");
}
