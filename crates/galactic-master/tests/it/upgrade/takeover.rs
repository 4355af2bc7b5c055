//! Each on a node of its own with dual-stack Go attachments: ADDs that must not take a Go
//! attachment, CHECK after the switch, and GC of Go attachments.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use super::*;

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
