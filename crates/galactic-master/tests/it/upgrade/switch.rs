//! The switch itself: one node with the Go layout, `install.sh`, and the chain it installed
//! serving the Go-created pods.

#![allow(clippy::unwrap_used)]

use super::*;

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
        // The new pod of the VPC is still attached: its domain (the adopted VRF) stays.
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
