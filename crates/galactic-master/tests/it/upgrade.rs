//! Replacing the upstream Go chain on a live node (docs/operations.md, "Upgrading from the Go
//! implementation"; decision 0061). One throwaway namespace is the node: it gets the Go layout
//! (IPAM markers and the annotation export, a Go-created veth pod and tap VM with their iptables
//! FORWARD rules and, on an SRv6 node, the veth's `ifindex_vrf_table` row; a Go VRF with its table
//! where the kernel has VRF; the Go static conflist with NAT66/eBPF settings and the Go binaries in
//! the CNI bin dir). Then `install.sh` runs against a temporary root, and the chain it installed
//! serves the pods: CHECK of a Go-created pod adopts it (its Go rules become ours), the Go-created
//! ones DEL cleanly (interface, Go rules, `ifindex_vrf_table` row, the pod route in the Go VRF's
//! table), a new one never gets an address a live pod holds, the settings carried over, and every
//! name in the bin dir is ours. The VRF device itself exists only where the kernel has VRF (the
//! production-kernel tier); its table and routes are made here either way.
//!
//! Then, each on a node of its own with dual-stack Go attachments: an ADD for another pod or VM
//! of a Go attachment's VPC attachment is refused and leaves it untouched; the master's CHECK of
//! a Go pod and VM passes after the switch (and the pods reach a new one; the same scenario runs
//! with the Go VRF in `vrf_domains.rs`); GC keeps a Go attachment while a listed attachment
//! without a record may be it, and removes it completely once none can be.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::bpf::abi::IfindexVrfValue;
use galactic_core::bpf::maps::{self, IfindexVrfTable};
use galactic_core::config::NodeConfig;
use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_testkit::bpffs::PrivateBpffs;
use galactic_testkit::host::{ip_of, Host, Pod, PLUGINS};
use galactic_testkit::inspect::{host_traces, record_count};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::{Conflist, Runtime};
use galactic_testkit::workspace_binary;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const VPC: &str = "U";
const POOL: &str = "fd20:99::/64";

fn hname(att: &str) -> String {
    host_ifname(
        &VpcId::parse(VPC).unwrap(),
        &AttachmentId::parse(att).unwrap(),
    )
}

/// An upstream NAD of the Go era: the Go type names, the master and galactic-bgp.
fn go_nad(master: &str, att: &str) -> Conflist {
    Conflist::from_value(
        &json!({"cniVersion": "1.0.0", "name": format!("vpc-u-{att}"), "plugins": [
        {"type": master, "vpc": VPC, "vpcattachment": att,
         "ipam": {"type": "galactic-ipam", "ipv6_subnet": POOL}},
        {"type": "galactic-bgp", "vpc": VPC, "vpcattachment": att}]}),
    )
    .unwrap()
}

/// Runs `args` in the node namespace; panics on failure.
fn sh(node: &TestNetns, args: &[&str]) -> String {
    let out = node.exec(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the Go veth master left for a pod: the pair (guest end renamed to eth0 in the pod), its
/// two FORWARD rules per family (one of them twice: upstream never checked for duplicates), the
/// pod's address.
fn go_veth(node: &TestNetns, pod: &Pod, host: &str) {
    sh(
        node,
        &[
            "ip",
            "link",
            "add",
            host,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            pod.ns.name(),
        ],
    );
    sh(node, &["ip", "link", "set", host, "up"]);
    go_rules(node, host);
    pod.ns
        .ip(&["addr", "add", "fd20:99::100:0/96", "dev", "eth0", "nodad"]);
    pod.ns.ip(&["link", "set", "eth0", "up"]);
    pod.ns.ip(&[
        "-6",
        "route",
        "add",
        "default",
        "via",
        "fd20:99::1",
        "dev",
        "eth0",
        "onlink",
    ]);
    // The host gateway: its address on the host end, the pod route in the Go VRF's table
    // (GO_TABLE exists without the VRF device too).
    sh(
        node,
        &["ip", "addr", "add", "fd20:99::1/128", "dev", host, "nodad"],
    );
    sh(
        node,
        &[
            "ip",
            "-6",
            "route",
            "add",
            "fd20:99::/96",
            "dev",
            host,
            "table",
            GO_TABLE,
        ],
    );
}

/// The routing table of the Go VRF `G{vpc:9}V`.
const GO_TABLE: &str = "1";

fn go_tap(node: &TestNetns, host: &str) {
    sh(node, &["ip", "tuntap", "add", "dev", host, "mode", "tap"]);
    go_rules(node, host);
}

fn go_rules(node: &TestNetns, host: &str) {
    for binary in ["iptables", "ip6tables"] {
        for direction in ["-o", "-i", "-i"] {
            sh(
                node,
                &[
                    binary, "-w", "-I", "FORWARD", "1", direction, host, "-j", "ACCEPT",
                ],
            );
        }
    }
}

fn forward_rules(node: &TestNetns) -> String {
    ["iptables", "ip6tables"]
        .iter()
        .map(|b| sh(node, &[b, "-w", "-S", "FORWARD"]))
        .collect()
}

/// The Go IPAM markers (pod, VM) and the installer's annotation export (a pod whose address only
/// the annotation recorded: the old in-memory allocator).
fn go_ipam_state(host: &Host, pod: &Pod, vm: &Pod, elsewhere: &str) {
    let pool = host.node.legacy_dir().join("fd20:99::-64");
    std::fs::create_dir_all(&pool).unwrap();
    std::fs::write(pool.join("lock"), "").unwrap();
    std::fs::write(pool.join("fd20:99::100:0-96"), &pod.id).unwrap();
    std::fs::write(pool.join("fd20:99::200:0-96"), &vm.id).unwrap();
    let data_dir = host.node.dir.path().join("ipam");
    std::fs::create_dir_all(&data_dir).unwrap();
    let cid41: String = elsewhere.chars().take(41).collect();
    std::fs::write(
        data_dir.join("legacy-annotations.json"),
        json!({"kind": "List", "items": [{"metadata": {"name": "55-1", "annotations": {
            format!("galactic.datum.net/netns.{cid41}"): "/var/run/netns/cni-x",
            format!("galactic.datum.net/allocated-subnet-ipv6.{cid41}"): "fd20:99::1:0:0/96"}}}]})
        .to_string(),
    )
    .unwrap();
}

/// A Go VRF `G{vpc:9}V` with its table, the veth enslaved, where the kernel has VRF.
fn go_vrf(node: &TestNetns, host: &str) -> bool {
    let vrf = format!("G{VPC:0>9}V");
    let (ok, _) = node.try_ip(&["link", "add", &vrf, "type", "vrf", "table", GO_TABLE]);
    if ok {
        sh(node, &["ip", "link", "set", &vrf, "up"]);
        sh(node, &["ip", "link", "set", host, "master", &vrf]);
    }
    ok
}

/// The image the installer copies from: the workspace's plugin binaries.
fn image(dir: &Path) -> PathBuf {
    let bin = dir.join("image-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for plugin in PLUGINS {
        std::fs::copy(workspace_binary(plugin), bin.join(plugin)).unwrap();
    }
    bin
}

/// What the Go binaries' stand-ins answer: a text none of ours contains.
const GO_STAND_IN: &str = "the Go chain's stand-in binary";

/// The Go chain's files on the host root: its binaries and its static conflist.
fn go_host_root(root: &Path) {
    let bin = root.join("opt/cni/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in [
        "galactic-veth",
        "galactic-tap",
        "galactic-ipam",
        "galactic-route",
        "galactic-bgp",
    ] {
        std::fs::write(
            bin.join(name),
            format!("#!/bin/sh\necho '{{\"code\":999,\"msg\":\"{GO_STAND_IN}\"}}'; exit 1\n"),
        )
        .unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let conf = root.join("etc/cni/net.d");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("10-galactic.conflist"),
        r#"{
  "cniVersion": "1.0.0",
  "name": "galactic",
  "plugins": [
    {
      "type": "galactic-cni",
      "node_name": "node-u",
      "kubeconfig": "/var/lib/galactic/kubeconfig",
      "namespace": "galactic-system",
      "log_file": "/var/log/galactic/galactic-cni.log",
      "log_level": "debug",
      "nat66_shard_sids": "2001:db8:ff01:9:e001::,2001:db8:ff02:9:e001::",
      "ebpf_interfaces": "eth1"
    }
  ]
}
"#,
    )
    .unwrap();
}

fn install(root: &Path, image_bin: &Path) {
    let out = Command::new("sh")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/install.sh"))
        .arg("install")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOST_ROOT", root)
        .env("IMAGE_BIN", image_bin)
        .env("NODE_NAME", "node-u")
        .env("GALACTIC_PUBLISHER", "local")
        .env("ALIASES", "auto")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_node_running_the_go_chain_switches_with_its_pods_alive() {
    galactic_testkit::privileged!();
    let bpffs = PrivateBpffs::mount();
    maps::pin_empty_maps(&bpffs.pin_dir()).unwrap();
    let host = Host::new(
        "upg",
        json!({"routing_domain": "table", "publisher": "local", "bpf_pin_dir": bpffs.pin_dir()}),
        &[],
    );
    let node = &host.netns;
    let (pod, vm) = (Pod::new("upgp"), Pod::new("upgv"));
    let (veth_host, tap_host) = (hname("1"), hname("2"));

    // The Go layout.
    go_veth(node, &pod, &veth_host);
    go_tap(node, &tap_host);
    let has_vrf = go_vrf(node, &veth_host);
    let elsewhere = "a-pod-the-annotations-alone-remember-0123456789abcdef";
    go_ipam_state(&host, &pod, &vm, elsewhere);
    let ifindex: u32 = sh(
        node,
        &["cat", &format!("/sys/class/net/{veth_host}/ifindex")],
    )
    .trim()
    .parse()
    .unwrap();
    let mut rows: IfindexVrfTable =
        maps::open_typed(&bpffs.pin_dir(), maps::IFINDEX_VRF_TABLE).unwrap();
    rows.insert(
        ifindex,
        IfindexVrfValue {
            block: 0x2001_0db8_ff03,
            argument: 1,
            _pad: [0; 6],
        },
        0,
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    go_host_root(root.path());

    // The switch.
    install(root.path(), &image(root.path()));
    let bin = root.path().join("opt/cni/bin");
    for name in [
        "galactic-veth",
        "galactic-tap",
        "galactic-ipam",
        "galactic-route",
        "galactic-bgp",
    ] {
        let content = std::fs::read(bin.join(name)).unwrap();
        assert!(
            !String::from_utf8_lossy(&content).contains(GO_STAND_IN),
            "{name} is still the Go binary: no NAD may run a mixed chain"
        );
    }
    let carried = NodeConfig::resolve_from(
        &json!({}),
        &|_: &str| None,
        &root.path().join("etc/galactic/node.json"),
        None,
    )
    .unwrap();
    assert_eq!(carried.egress.shard_sids.len(), 2, "{carried:?}");
    assert_eq!(carried.ebpf_interfaces, ["eth1"]);
    assert_eq!(carried.log_level, galactic_core::log::Level::Debug);
    assert!(!root
        .path()
        .join("etc/cni/net.d/10-galactic.conflist")
        .exists());

    // The installed chain (through the upstream type names) serves the node from here on.
    let rt = Runtime::new(&host.node, &bin, Some(node.name()));
    let fresh = Pod::new("upgn");
    let result = rt
        .add(&go_nad("galactic-veth", "3"), &fresh.attachment())
        .unwrap();
    let got = result["ips"][0]["address"].as_str().unwrap().to_owned();
    let net: ipnetwork::IpNetwork = got.parse().unwrap();
    for live in ["fd20:99::100:0", "fd20:99::200:0", "fd20:99::1:0:0"] {
        assert!(
            !net.contains(live.parse().unwrap()),
            "new pod {got} overlaps {live}, which a live pod holds"
        );
    }

    // CHECK of the Go-created pod (its cached result is the Go chain's) adopts it and passes.
    let go_result = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": veth_host}, {"name": "eth0", "sandbox": pod.ns.path()}],
        "ips": [{"interface": 1, "address": "fd20:99::100:0/96", "gateway": "fd20:99::1"}]});
    rt.remember(&go_nad("galactic-veth", "1"), &pod.attachment(), &go_result);
    // The chain's verdict includes galactic-bgp's, which judges the Go chain's publications (a
    // local publisher never had them), so only the adoption is judged here: the Go chain's
    // uncommented rules are replaced by ours. The master's own verdict on a Go pod is
    // `go_attachments_pass_check_after_the_switch_in_table_mode`'s.
    let _ = rt.check(&go_nad("galactic-veth", "1"), &pod.attachment());
    let rules = forward_rules(node);
    let tag = format!("galactic:{veth_host}");
    for line in rules.lines().filter(|l| l.contains(veth_host.as_str())) {
        assert!(line.contains(&tag), "a Go rule left after CHECK: {rules}");
    }
    assert_eq!(
        rules.lines().filter(|l| l.contains(&tag)).count(),
        4,
        "ours, in and out, both families: {rules}"
    );

    // The Go-created pod and VM are torn down cleanly by the new chain.
    rt.del(&go_nad("galactic-veth", "1"), &pod.attachment())
        .unwrap();
    rt.del(&go_nad("galactic-tap", "2"), &vm.attachment())
        .unwrap();
    for gone in [&veth_host, &tap_host] {
        assert!(
            !node.try_ip(&["link", "show", gone]).0,
            "{gone} left behind"
        );
        assert!(
            !forward_rules(node).contains(gone.as_str()),
            "{gone}'s rules left: {}",
            forward_rules(node)
        );
    }
    assert!(pod
        .ns
        .ip(&["-o", "link"])
        .lines()
        .all(|l| !l.contains("eth0")));
    let go_table = node.ip(&["-6", "route", "show", "table", GO_TABLE]);
    assert!(
        !go_table.contains(veth_host.as_str()),
        "the Go pod route in the Go VRF's table left behind: {go_table}"
    );
    assert!(
        rows.get(&ifindex, 0).is_err(),
        "the Go ifindex_vrf_table row left behind"
    );
    if has_vrf {
        // Shared by the VPC's attachments: upstream left it to GC, and so does DEL.
        assert!(node.try_ip(&["link", "show", &format!("G{VPC:0>9}V")]).0);
    }
    // Their addresses are free again; the annotation-only holder's is not.
    let report = Command::new(workspace_binary("galactic-ipam"))
        .arg("verify")
        .env("GALACTIC_CNI_NODE_CONFIG", &host.node.node_config)
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(
        report["attachments"], 2,
        "the new pod and the annotation holder: {report}"
    );
    // A second DEL of each is still success, and the new pod goes as usual.
    rt.del(&go_nad("galactic-veth", "1"), &pod.attachment())
        .unwrap();
    rt.del(&go_nad("galactic-veth", "3"), &fresh.attachment())
        .unwrap();
    assert!(!node.try_ip(&["link", "show", &hname("3")]).0);
}

#[test]
fn a_veth_whose_peer_is_another_pods_is_not_adopted() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "upgo",
        json!({"routing_domain": "table", "publisher": "local"}),
        &PLUGINS,
    );
    let node = &host.netns;
    let (owner, other) = (Pod::new("upgo1"), Pod::new("upgo2"));
    let name = hname("1");
    go_veth(node, &owner, &name);
    let rt = host.runtime();
    // Another container's DEL with the same NAD (e.g. after its own ADD failed).
    rt.del(&go_nad("galactic-cni", "1"), &other.attachment())
        .unwrap();
    assert!(
        node.try_ip(&["link", "show", &name]).0,
        "the owner's interface stays"
    );
    assert!(
        forward_rules(node).contains(name.as_str()),
        "the owner's rules stay"
    );
    // The owner's own DEL adopts and removes it.
    rt.del(&go_nad("galactic-cni", "1"), &owner.attachment())
        .unwrap();
    assert!(!node.try_ip(&["link", "show", &name]).0);
    assert!(!forward_rules(node).contains(name.as_str()));
}

#[test]
fn every_binary_answers_version() {
    for plugin in PLUGINS {
        let out = Command::new(workspace_binary(plugin))
            .arg("--version")
            .output()
            .unwrap();
        assert!(out.status.success(), "{plugin}: {out:?}");
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(
            line.starts_with(&format!("{plugin} {}", env!("CARGO_PKG_VERSION")))
                && line.contains("1.1.0"),
            "{plugin}: {line}"
        );
    }
}

/// The IPv4 pool of the dual-stack Go NADs.
const POOL4: &str = "10.99.0.0/24";

/// A dual-stack upstream NAD (both pools), as the fresh pods of a node the Go chain served.
fn go_nad_dual(master: &str, att: &str) -> Conflist {
    Conflist::from_value(
        &json!({"cniVersion": "1.1.0", "name": format!("vpc-u-{att}"), "plugins": [
        {"type": master, "vpc": VPC, "vpcattachment": att,
         "ipam": {"type": "galactic-ipam", "ipv6_subnet": POOL, "ipv4_subnet": POOL4}},
        {"type": "galactic-bgp", "vpc": VPC, "vpcattachment": att}]}),
    )
    .unwrap()
}

/// The Go chain's host-end sysctls (no `force_forwarding`: it predates it); a tap gets neither
/// proxy key.
fn go_sysctls(node: &TestNetns, host: &str, proxy: bool) {
    let mut keys = vec![
        format!("net.ipv4.conf.{host}.rp_filter=0"),
        format!("net.ipv4.conf.{host}.forwarding=1"),
        format!("net.ipv6.conf.{host}.forwarding=1"),
    ];
    if proxy {
        keys.push(format!("net.ipv4.conf.{host}.proxy_arp=1"));
        keys.push(format!("net.ipv6.conf.{host}.proxy_ndp=1"));
    }
    for key in &keys {
        sh(node, &["sysctl", "-qw", key]);
    }
}

/// A Go-created dual-stack veth pod: [`go_veth`]'s IPv6 layout plus the Go chain's IPv4 one
/// (the /32 address and an on-link default in the pod; the gateway /32 on the host end, the pod's
/// /32 route in the Go VRF's table and a permanent neighbour) and its host-end sysctls.
fn go_veth_dual(node: &TestNetns, pod: &Pod, host: &str) {
    go_veth(node, pod, host);
    go_sysctls(node, host, true);
    pod.ns.ip(&["addr", "add", "10.99.0.100/32", "dev", "eth0"]);
    pod.ns.ip(&[
        "-4",
        "route",
        "add",
        "default",
        "via",
        "10.99.0.1",
        "dev",
        "eth0",
        "onlink",
    ]);
    sh(node, &["ip", "addr", "add", "10.99.0.1/32", "dev", host]);
    sh(
        node,
        &[
            "ip",
            "-4",
            "route",
            "add",
            "10.99.0.100/32",
            "dev",
            host,
            "table",
            GO_TABLE,
        ],
    );
    let mac = pod.ns.ip_json(&["link", "show", "eth0"])[0]["address"]
        .as_str()
        .unwrap()
        .to_owned();
    for addr in ["10.99.0.100", "fd20:99::100:0"] {
        sh(
            node,
            &[
                "ip",
                "neigh",
                "replace",
                addr,
                "lladdr",
                &mac,
                "dev",
                host,
                "nud",
                "permanent",
            ],
        );
    }
}

/// A Go-created tap with the Go chain's host gateway for its VM (IPv6 /128, IPv4 /25 without
/// prefix route, the VM's routes in the Go VRF's table; no neighbours) and its sysctls.
fn go_tap_dual(node: &TestNetns, host: &str) {
    go_tap(node, host);
    go_sysctls(node, host, false);
    sh(node, &["ip", "link", "set", host, "up"]);
    sh(
        node,
        &["ip", "addr", "add", "fd20:99::1/128", "dev", host, "nodad"],
    );
    sh(
        node,
        &[
            "ip",
            "addr",
            "add",
            "10.99.0.1/25",
            "dev",
            host,
            "noprefixroute",
        ],
    );
    for (family, dst) in [("-6", "fd20:99::2:0:0/96"), ("-4", "10.99.0.200/32")] {
        sh(
            node,
            &[
                "ip", family, "route", "add", dst, "dev", host, "table", GO_TABLE,
            ],
        );
    }
}

/// Everything of a Go pod's attachment a new ADD could have touched: its host end (state,
/// peer, master), addresses, permanent neighbours, FORWARD rules, and, for a veth pod, its interface,
/// addresses and routes inside the pod.
fn go_attachment_state(node: &TestNetns, host: &str, pod: Option<&Pod>) -> Vec<String> {
    let mut state = vec![
        sh(node, &["ip", "-d", "-o", "link", "show", host]),
        sh(
            node,
            &["ip", "-o", "addr", "show", "dev", host, "scope", "global"],
        ),
        // Permanent only: the kernel learns and ages the pod's link-local neighbour on its own.
        sh(
            node,
            &["ip", "neigh", "show", "dev", host, "nud", "permanent"],
        ),
        forward_rules(node),
    ];
    if let Some(pod) = pod {
        state.push(pod.ns.ip(&["-d", "-o", "link", "show", "eth0"]));
        state.push(
            pod.ns
                .ip(&["-o", "addr", "show", "dev", "eth0", "scope", "global"]),
        );
        for family in ["-4", "-6"] {
            state.push(pod.ns.ip(&[family, "route", "show"]));
        }
    }
    state
}

#[test]
fn an_add_for_another_pod_never_takes_a_go_pods_veth() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "upgr",
        json!({"routing_domain": "table", "publisher": "local"}),
        &PLUGINS,
    );
    let node = &host.netns;
    let (go_pod, other) = (Pod::new("upgr1"), Pod::new("upgr2"));
    let name = hname("1");
    go_veth_dual(node, &go_pod, &name);
    let before = host.snapshot();
    let go_state = go_attachment_state(node, &name, Some(&go_pod));

    // Another container of the same VPC attachment (the Go pod's own DEL never came, or two
    // pods were scheduled with one attachment id).
    let err = host
        .runtime()
        .add(&go_nad_dual("galactic-cni", "1"), &other.attachment())
        .unwrap_err();
    let msg = err.expect_error(7);
    assert!(
        msg.contains(&name) && msg.contains("upstream") && msg.contains("DEL"),
        "the error names the interface and what to do: {msg}"
    );
    assert_eq!(
        go_attachment_state(node, &name, Some(&go_pod)),
        go_state,
        "the Go pod's attachment is untouched"
    );
    assert_eq!(
        host.changed_since(&before),
        None,
        "the refused ADD left nothing"
    );
    assert!(other
        .ns
        .ip(&["-o", "link"])
        .lines()
        .all(|l| !l.contains("eth0")));

    // The Go pod's own DEL still adopts and removes it; then the other pod attaches.
    host.runtime()
        .del(&go_nad_dual("galactic-cni", "1"), &go_pod.attachment())
        .unwrap();
    assert!(!node.try_ip(&["link", "show", &name]).0);
    let result = host
        .runtime()
        .add(&go_nad_dual("galactic-cni", "1"), &other.attachment())
        .unwrap();
    assert_eq!(result["ips"].as_array().unwrap().len(), 2, "{result}");
    host.runtime()
        .del(&go_nad_dual("galactic-cni", "1"), &other.attachment())
        .unwrap();
}

#[test]
fn an_add_for_another_vm_never_takes_a_go_vms_tap() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "upgt",
        json!({"routing_domain": "table", "publisher": "local"}),
        &PLUGINS,
    );
    let node = &host.netns;
    let (go_vm, other) = (Pod::new("upgt1"), Pod::new("upgt2"));
    let name = hname("2");
    go_tap_dual(node, &name);
    let before = host.snapshot();
    let go_state = go_attachment_state(node, &name, None);

    let err = host
        .runtime()
        .add(&go_nad_dual("galactic-tap-cni", "2"), &other.attachment())
        .unwrap_err();
    let msg = err.expect_error(7);
    assert!(
        msg.contains(&name) && msg.contains("upstream") && msg.contains("DEL"),
        "the error names the tap and what to do: {msg}"
    );
    assert_eq!(
        go_attachment_state(node, &name, None),
        go_state,
        "the Go VM's tap is untouched"
    );
    assert_eq!(
        host.changed_since(&before),
        None,
        "the refused ADD left nothing"
    );

    // The Go VM's DEL (any DEL of its VPC attachment, as upstream) adopts and removes the tap;
    // then the other VM attaches.
    host.runtime()
        .del(&go_nad_dual("galactic-tap-cni", "2"), &go_vm.attachment())
        .unwrap();
    assert!(!node.try_ip(&["link", "show", &name]).0);
    let result = host
        .runtime()
        .add(&go_nad_dual("galactic-tap-cni", "2"), &other.attachment())
        .unwrap();
    assert_eq!(result["ips"].as_array().unwrap().len(), 2, "{result}");
    host.runtime()
        .del(&go_nad_dual("galactic-tap-cni", "2"), &other.attachment())
        .unwrap();
}

/// How many attachments galactic-ipam's store holds (`galactic-ipam verify`).
fn ipam_attachments(host: &Host) -> u64 {
    let report = Command::new(workspace_binary("galactic-ipam"))
        .arg("verify")
        .env("GALACTIC_CNI_NODE_CONFIG", &host.node.node_config)
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    report["attachments"].as_u64().unwrap()
}

#[test]
fn gc_keeps_a_listed_go_attachment_and_removes_an_unlisted_one_completely() {
    galactic_testkit::privileged!();
    let bpffs = PrivateBpffs::mount();
    maps::pin_empty_maps(&bpffs.pin_dir()).unwrap();
    let host = Host::new(
        "upgc",
        json!({"routing_domain": "table", "publisher": "local", "bpf_pin_dir": bpffs.pin_dir()}),
        &PLUGINS,
    );
    let node = &host.netns;
    let rt = host.runtime();
    let (go_pod, go_vm, stranger) = (Pod::new("upgc1"), Pod::new("upgc2"), Pod::new("upgc3"));
    let (veth_host, tap_host) = (hname("1"), hname("2"));
    go_veth_dual(node, &go_pod, &veth_host);
    go_tap_dual(node, &tap_host);
    // The Go pod's IPAM marker (imported by the first GC) and its datapath row.
    let pool = host.node.legacy_dir().join("fd20:99::-64");
    std::fs::create_dir_all(&pool).unwrap();
    std::fs::write(pool.join("lock"), "").unwrap();
    std::fs::write(pool.join("fd20:99::100:0-96"), &go_pod.id).unwrap();
    let ifindex: u32 = sh(
        node,
        &["cat", &format!("/sys/class/net/{veth_host}/ifindex")],
    )
    .trim()
    .parse()
    .unwrap();
    let mut rows: IfindexVrfTable =
        maps::open_typed(&bpffs.pin_dir(), maps::IFINDEX_VRF_TABLE).unwrap();
    let row = IfindexVrfValue {
        block: 0x2001_0db8_ff03,
        argument: 1,
        _pad: [0; 6],
    };
    rows.insert(ifindex, row, 0).unwrap();
    let (veth_nad, tap_nad) = (
        go_nad_dual("galactic-cni", "1"),
        go_nad_dual("galactic-tap-cni", "2"),
    );
    // The first ADD after the switch imports the marker into galactic-ipam's store.
    let fresh = Pod::new("upgc4");
    rt.add(&go_nad_dual("galactic-cni", "3"), &fresh.attachment())
        .unwrap();
    rt.del(&go_nad_dual("galactic-cni", "3"), &fresh.attachment())
        .unwrap();
    let veth_state = go_attachment_state(node, &veth_host, Some(&go_pod));
    let tap_state = go_attachment_state(node, &tap_host, None);

    // Listed: nothing of it changes, its address stays held.
    rt.gc(&veth_nad, &[&go_pod.attachment()]).unwrap();
    assert_eq!(
        go_attachment_state(node, &veth_host, Some(&go_pod)),
        veth_state
    );
    assert!(rows.get(&ifindex, 0).is_ok(), "the Go row stays");
    assert_eq!(ipam_attachments(&host), 1, "the Go pod's address is held");
    // Possibly listed (a listed attachment without a record of ours may be the Go one): its
    // kernel side stays too.
    rt.gc(&veth_nad, &[&stranger.attachment()]).unwrap();
    assert_eq!(
        go_attachment_state(node, &veth_host, Some(&go_pod)),
        veth_state
    );
    assert!(rows.get(&ifindex, 0).is_ok(), "the Go row stays");
    rt.gc(&tap_nad, &[&go_vm.attachment()]).unwrap();
    assert_eq!(go_attachment_state(node, &tap_host, None), tap_state);

    // No longer listed: removed as its DEL would, nothing left.
    rt.gc(&veth_nad, &[]).unwrap();
    rt.gc(&tap_nad, &[]).unwrap();
    for name in [&veth_host, &tap_host] {
        assert_eq!(host_traces(&host, name), Vec::<String>::new());
        assert!(
            !forward_rules(node).contains(name.as_str()),
            "{name}'s Go rules left: {}",
            forward_rules(node)
        );
    }
    assert!(go_pod
        .ns
        .ip(&["-o", "link"])
        .lines()
        .all(|l| !l.contains("eth0")));
    assert!(
        rows.get(&ifindex, 0).is_err(),
        "the Go ifindex_vrf_table row left behind"
    );
    assert_eq!(ipam_attachments(&host), 0, "the Go pod's address is free");
    assert_eq!(
        galactic_testkit::inspect::table_routes(&host, GO_TABLE),
        Vec::<String>::new(),
        "the Go pod and VM routes went with their interfaces"
    );
    assert_eq!(record_count(&host), 0);
}

/// The Go IPAM markers of a dual-stack pod or VM: `(IPv6 marker, IPv4 marker, container id)`.
fn go_markers(host: &Host, holders: &[(&str, &str, &str)]) {
    for (pool, marker_of) in [("fd20:99::-64", 0), ("10.99.0.0-24", 1)] {
        let dir = host.node.legacy_dir().join(pool);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("lock"), "").unwrap();
        for holder in holders {
            let marker = [holder.0, holder.1][marker_of];
            std::fs::write(dir.join(marker), holder.2).unwrap();
        }
    }
}

/// CHECK of a Go-era veth pod and tap VM after the switch, once an ADD of ours has recorded the
/// VPC's routing domain in the backend `host` runs (`vrf`: the Go VRF, which that ADD adopts):
/// both pass, the Go pod and a new pod of the VPC reach each other in both families, a second
/// CHECK passes as well, and their DELs leave nothing. Run natively in table mode (here) and in
/// the production-kernel tier with VRF (`vrf_domains.rs`).
pub(crate) fn go_attachments_pass_check_after_the_switch(host: &Host, vrf: bool) {
    let node = &host.netns;
    let rt = host.runtime();
    let (pod, vm, fresh) = (Pod::new("upgk1"), Pod::new("upgk2"), Pod::new("upgk3"));
    let (veth_host, tap_host) = (hname("1"), hname("2"));
    go_veth_dual(node, &pod, &veth_host);
    go_tap_dual(node, &tap_host);
    if vrf {
        assert!(go_vrf(node, &veth_host), "this kernel has VRF");
        sh(
            node,
            &[
                "ip",
                "link",
                "set",
                &tap_host,
                "master",
                &format!("G{VPC:0>9}V"),
            ],
        );
    }
    go_markers(
        host,
        &[
            ("fd20:99::100:0-96", "10.99.0.100", &pod.id),
            ("fd20:99::2:0:0-96", "10.99.0.200", &vm.id),
        ],
    );
    let fresh_result = rt
        .add(&go_nad_dual("galactic-cni", "3"), &fresh.attachment())
        .unwrap();

    // The runtime's cached results are the Go chain's.
    let (veth_nad, tap_nad) = (
        go_nad_dual("galactic-cni", "1"),
        go_nad_dual("galactic-tap-cni", "2"),
    );
    let veth_result = json!({"cniVersion": "1.1.0",
        "interfaces": [{"name": veth_host}, {"name": "eth0", "sandbox": pod.ns.path()}],
        "ips": [
            {"interface": 1, "address": "fd20:99::100:0/96", "gateway": "fd20:99::1"},
            {"interface": 1, "address": "10.99.0.100/32", "gateway": "10.99.0.1"}],
        "routes": [{"dst": "::/0"}, {"dst": "0.0.0.0/0"}]});
    let tap_result = json!({"cniVersion": "1.1.0",
        "interfaces": [{"name": tap_host}],
        "ips": [
            {"interface": 0, "address": "fd20:99::2:0:0/96", "gateway": "fd20:99::1"},
            {"interface": 0, "address": "10.99.0.200/25", "gateway": "10.99.0.1"}],
        "routes": [{"dst": "::/0"}, {"dst": "0.0.0.0/0"}]});
    rt.remember(&veth_nad, &pod.attachment(), &veth_result);
    rt.remember(&tap_nad, &vm.attachment(), &tap_result);
    // The master's CHECK (galactic-bgp's judges the Go chain's publications, which a local
    // publisher never had). The first adopts, the second finds an attachment of ours.
    for _ in 0..2 {
        for (nad, att, result) in [
            (&veth_nad, pod.attachment(), &veth_result),
            (&tap_nad, vm.attachment(), &tap_result),
        ] {
            let out = rt.plugin(nad, 0, "CHECK", &att, Some(result));
            assert!(out.success, "CHECK of a Go-era attachment: {out:?}");
        }
    }
    // Adopting the Go chain's tap records it for the datapath's router advertisements, as ADD
    // would have (a Go chain before upstream's RA records wrote none).
    assert!(host.path("ra").join(&tap_host).is_file());
    for i in 0..2 {
        let theirs = ip_of(&fresh_result, i);
        assert!(pod.reaches(&theirs), "Go pod → new pod {theirs}");
    }
    for ours in ["fd20:99::100:0", "10.99.0.100"] {
        assert!(fresh.reaches(ours), "new pod → Go pod {ours}");
    }

    for (nad, att) in [(&veth_nad, pod.attachment()), (&tap_nad, vm.attachment())] {
        rt.del(nad, &att).unwrap();
    }
    rt.del(&go_nad_dual("galactic-cni", "3"), &fresh.attachment())
        .unwrap();
    for name in [&veth_host, &tap_host, &hname("3")] {
        assert_eq!(host_traces(host, name), Vec::<String>::new());
        assert!(!forward_rules(node).contains(name.as_str()));
    }
    assert_eq!(record_count(host), 0);
}

#[test]
fn go_attachments_pass_check_after_the_switch_in_table_mode() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "upgk",
        json!({"routing_domain": "table", "publisher": "local"}),
        &PLUGINS,
    );
    go_attachments_pass_check_after_the_switch(&host, false);
}
