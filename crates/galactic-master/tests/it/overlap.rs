//! The master and its IPAM delegate work at the same time: the delegate allocates while the
//! master builds the host side (ADD), and releases while the kernel deletes the veth (DEL) — but
//! only once the container interface holds the addresses no more.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::Conflist;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

/// An IPAM delegate in front of galactic-ipam: on ADD it answers only once the master's host
/// interface exists (within 5 s, else it fails), on DEL it writes down the container interface's
/// global addresses as it finds them, then hands over to galactic-ipam.
fn watching_ipam(host: &Host, host_ifname: &str) {
    let script = host.bin_dir.join("watching-ipam");
    let seen = host.path("seen-at-release");
    let body = format!(
        r#"#!/bin/sh
stdin=$(cat)
if [ "$CNI_COMMAND" = ADD ] && [ -e {refuse} ]; then
    echo '{{"code":11,"msg":"store busy"}}'
    exit 1
fi
if [ "$CNI_COMMAND" = ADD ]; then
    tries=0
    until ip link show {host_ifname} >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ $tries -gt 500 ]; then
            echo '{{"code":999,"msg":"the host interface never appeared while IPAM ran"}}'
            exit 1
        fi
        sleep 0.01
    done
fi
if [ "$CNI_COMMAND" = DEL ]; then
    nsenter --net="$CNI_NETNS" ip -o addr show dev "$CNI_IFNAME" scope global > {seen} 2>&1
fi
echo "$stdin" | exec {ipam}
"#,
        seen = seen.display(),
        refuse = host.path("refuse").display(),
        ipam = host.bin_dir.join("galactic-ipam").display(),
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn ipam_allocates_while_the_host_side_is_built_and_releases_only_unconfigured_addresses() {
    galactic_testkit::privileged!();
    let host = Host::new("ovl", json!({"routing_domain": "auto"}), &["galactic-ipam"]);
    let name = host_ifname(
        &VpcId::parse("O").unwrap(),
        &AttachmentId::parse("1").unwrap(),
    );
    watching_ipam(&host, &name);
    let conf = Conflist::from_conf(&json!({"cniVersion": "1.1.0", "name": "ovl",
        "type": "galactic-cni", "vpc": "O", "vpcattachment": "1",
        "ipam": {"type": "watching-ipam", "ipv6_subnet": "fd6b:1::/64",
                 "ipv4_subnet": "10.107.0.0/24"}}))
    .unwrap();
    let rt = host.runtime().binary(
        "galactic-cni",
        galactic_testkit::plugin_binary("galactic-cni"),
    );
    let pod = Pod::new("ovl");
    let att = pod.attachment();
    // Sequential (IPAM, then the host side) would never let the delegate see the interface.
    let result = rt.add(&conf, &att).unwrap();
    assert_eq!(result["ips"].as_array().unwrap().len(), 2, "{result}");
    assert!(pod
        .ns
        .ip(&["-o", "addr", "show", "dev", "eth0"])
        .contains("10.107.0."));

    // Held for a second just before it unconfigures the container interface: a release that
    // acted before then would find the addresses still there.
    let rt = rt.env("GALACTIC_FAILPOINTS", "del-before-unconfigure:pause");
    rt.del(&conf, &att).unwrap();
    let seen = std::fs::read_to_string(host.path("seen-at-release")).unwrap();
    assert!(
        !seen.contains("inet"),
        "the release ran while the container interface still held its addresses: {seen}"
    );
    assert_eq!(host.node.ipam_holdings(), Vec::<String>::new());
    assert!(!host.netns.try_ip(&["link", "show", &name]).0);
}

/// A retried ADD of a live attachment whose delegate refuses (a busy store) leaves the
/// attachment as it was: the delegate is heard before anything is touched.
#[test]
fn a_retried_add_the_delegate_refuses_leaves_the_live_attachment_alone() {
    galactic_testkit::privileged!();
    let host = Host::new("ovr", json!({"routing_domain": "auto"}), &["galactic-ipam"]);
    let name = host_ifname(
        &VpcId::parse("R").unwrap(),
        &AttachmentId::parse("1").unwrap(),
    );
    watching_ipam(&host, &name);
    let conf = Conflist::from_conf(&json!({"cniVersion": "1.1.0", "name": "ovr",
        "type": "galactic-cni", "vpc": "R", "vpcattachment": "1",
        "ipam": {"type": "watching-ipam", "ipv6_subnet": "fd6b:2::/64",
                 "ipv4_subnet": "10.108.0.0/24"}}))
    .unwrap();
    let rt = host.runtime().binary(
        "galactic-cni",
        galactic_testkit::plugin_binary("galactic-cni"),
    );
    let pod = Pod::new("ovr");
    let att = pod.attachment();
    rt.add(&conf, &att).unwrap();
    let holdings = host.node.ipam_holdings();
    std::fs::write(host.path("refuse"), "").unwrap();
    let err = rt.add(&conf, &att).unwrap_err();
    err.expect_error(11);
    assert!(
        host.netns.try_ip(&["link", "show", &name]).0,
        "host end kept"
    );
    assert!(pod
        .ns
        .ip(&["-o", "addr", "show", "dev", "eth0"])
        .contains("10.108.0."));
    assert_eq!(host.node.ipam_holdings(), holdings, "the lease kept");
    std::fs::remove_file(host.path("refuse")).unwrap();
    rt.check(&conf, &att).unwrap();
    rt.del(&conf, &att).unwrap();
    assert_eq!(host.node.ipam_holdings(), Vec::<String>::new());
}
