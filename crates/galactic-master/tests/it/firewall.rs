//! Forwarding on a node with a FORWARD DROP policy in every firewall at once (a native nftables
//! chain, iptables-nft, iptables-legacy), through the real master binary, and with no `nft` on
//! the plugins' `PATH` after the node's first ADD: ADD lets the pod's traffic through each of
//! them, CHECK sees it, DEL takes every rule back.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::Conflist;
use serde_json::json;
use std::path::Path;

fn nad(att: &str) -> Conflist {
    Conflist::from_conf(
        &json!({"cniVersion": "1.1.0", "name": "fw", "type": "galactic-cni",
        "vpc": "F", "vpcattachment": att,
        "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd20:f::/64"}}),
    )
    .unwrap()
}

/// A directory holding every command of the usual `PATH` directories but `nft`.
fn path_without_nft(dir: &Path) -> String {
    let bin = dir.join("path");
    std::fs::create_dir_all(&bin).unwrap();
    for source in ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin"] {
        let Ok(entries) = std::fs::read_dir(source) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name == "nft" || bin.join(&name).exists() {
                continue;
            }
            std::os::unix::fs::symlink(entry.path(), bin.join(&name)).unwrap();
        }
    }
    bin.display().to_string()
}

/// Every place a rule for `ifname` can be: (nftables, iptables-legacy v4, v6).
fn rules_for(host: &Host, ifname: &str) -> (usize, usize, usize) {
    let count = |argv: &[&str]| {
        let out = host.netns.exec(argv);
        assert!(out.status.success(), "{argv:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(&format!("galactic:{ifname}")))
            .count()
    };
    (
        count(&["nft", "list", "ruleset"]),
        count(&["iptables-legacy", "-S", "FORWARD"]),
        count(&["ip6tables-legacy", "-S", "FORWARD"]),
    )
}

#[test]
fn every_firewall_lets_the_pod_through_without_nft_on_the_path() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "mfw",
        json!({"routing_domain": "table", "publisher": "local"}),
        &["galactic-cni", "galactic-ipam"],
    );
    for argv in [
        &["nft", "add table inet fw; add chain inet fw forward_drop { type filter hook forward priority 0; policy drop; }"][..],
        &["iptables-nft", "-P", "FORWARD", "DROP"],
        &["ip6tables-nft", "-P", "FORWARD", "DROP"],
        &["iptables-legacy", "-P", "FORWARD", "DROP"],
        &["ip6tables-legacy", "-P", "FORWARD", "DROP"],
    ] {
        let out = host.netns.exec(argv);
        assert!(out.status.success(), "{argv:?}: {out:?}");
    }
    // The node's first ADD creates the table-mode host-service filter (the one use of nft).
    let first = Pod::new("mfw1");
    host.runtime().add(&nad("1"), &first.attachment()).unwrap();

    let rt = host
        .runtime()
        .env("PATH", &path_without_nft(host.node.dir.path()));
    let pod = Pod::new("mfw2");
    let name = host_ifname(
        &VpcId::parse("F").unwrap(),
        &AttachmentId::parse("2").unwrap(),
    );
    rt.add(&nad("2"), &pod.attachment()).unwrap();
    // Two nftables forward chains (fw, and iptables-nft's ip and ip6 filter FORWARD) × 2 rules;
    // two rules in each legacy family.
    assert_eq!(rules_for(&host, &name), (3 * 2, 2, 2));
    rt.check(&nad("2"), &pod.attachment()).unwrap();
    // A rule gone behind the plugin's back is what CHECK reports.
    let out = host.netns.exec(&[
        "iptables-legacy",
        "-D",
        "FORWARD",
        "-i",
        &name,
        "-m",
        "comment",
        "--comment",
        &format!("galactic:{name}"),
        "-j",
        "ACCEPT",
    ]);
    assert!(out.status.success(), "{out:?}");
    let msg = rt
        .check(&nad("2"), &pod.attachment())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("forward"), "{msg}");
    rt.del(&nad("2"), &pod.attachment()).unwrap();
    assert_eq!(
        rules_for(&host, &name),
        (0, 0, 0),
        "DEL takes every rule back"
    );
    host.runtime().del(&nad("1"), &first.attachment()).unwrap();
}
