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

mod switch;
mod takeover;

pub(crate) use takeover::go_attachments_pass_check_after_the_switch;

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
