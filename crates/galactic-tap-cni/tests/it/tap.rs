//! The tap master as a runtime drives it, on real kernel objects in throwaway namespaces.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{Host, Pod};
use galactic_testkit::inspect::hname;
use galactic_testkit::runtime::{Conflist, Runtime};
use serde_json::{json, Value};
use std::path::Path;

/// The host's runtime, with this test's own tap master binary.
pub fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime().binary(
        "galactic-tap-cni",
        Path::new(env!("CARGO_BIN_EXE_galactic-tap-cni")),
    )
}

/// A network config file with the tap master alone.
pub fn conf(vpc: &str, extra: Value) -> Conflist {
    let mut conf = json!({"cniVersion": "1.1.0", "name": "vms", "type": "galactic-tap-cni", "vpc": vpc,
        "vpcattachment": "1", "mtu": 9000,
        "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd80:1::/64", "ipv4_subnet": "10.80.0.0/24"}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        conf[k] = v.clone();
    }
    Conflist::from_conf(&conf).unwrap()
}

#[test]
fn tap_add_check_del_del() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "thost",
        json!({"routing_domain": "auto"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&host);
    let vm = Pod::new("tvm");
    let att = vm.attachment();
    let conf = conf(
        "T",
        json!({"owner": 54321, "multi_queue": true, "vnet_hdr": true}),
    );
    let result = rt.add(&conf, &att).unwrap();
    let name = hname("T", "1");

    let ifaces = result["interfaces"].as_array().unwrap();
    assert_eq!(ifaces.len(), 1, "a single host interface: {result}");
    assert_eq!(ifaces[0]["name"], name.as_str());
    assert!(ifaces[0].get("sandbox").is_none());
    assert_eq!(ifaces[0]["mtu"], 9000);
    let ips = result["ips"].as_array().unwrap();
    assert_eq!(ips.len(), 2);
    assert!(ips.iter().all(|ip| ip["interface"] == 0));
    assert!(
        ips[1]["address"].as_str().unwrap().ends_with("/25"),
        "IPv4 reported on-link /25: {result}"
    );

    let link = host.netns.ip_json(&["-d", "addr", "show", "dev", &name]);
    let info = &link[0]["linkinfo"]["info_data"];
    assert_eq!(
        (info["type"].as_str(), info["persist"].as_bool()),
        (Some("tap"), Some(true)),
        "{link}"
    );
    assert_eq!(info["multi_queue"], true);
    assert_eq!(info["vnet_hdr"], true);
    assert_eq!(info["user"], 54321);
    let addrs = link[0]["addr_info"].as_array().unwrap();
    let v4gw = ips[1]["gateway"].as_str().unwrap();
    let gw = addrs
        .iter()
        .find(|a| a["local"] == v4gw)
        .expect("IPv4 gateway on the tap");
    assert_eq!(gw["prefixlen"], 25);
    assert_eq!(gw["noprefixroute"], true, "{gw}");
    let table = host.netns.ip(&["-4", "route", "show", "table", "1000"]);
    let v4 = ips[1]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    assert!(
        table.contains(&format!("{v4} dev {name}")),
        "pod route: {table}"
    );
    let neigh = host
        .netns
        .ip(&["neigh", "show", "dev", &name, "nud", "permanent"]);
    assert!(
        neigh.trim().is_empty(),
        "no neighbour entries for a tap: {neigh}"
    );

    rt.check(&conf, &att).unwrap();
    assert_eq!(
        rt.add(&conf, &att).unwrap(),
        result,
        "a retried ADD returns the same result"
    );
    rt.del(&conf, &att).unwrap();
    assert!(
        !host.netns.try_ip(&["link", "show", &name]).0,
        "tap removed"
    );
    assert!(
        !host.netns.ip(&["rule", "show"]).contains(&name),
        "rules removed"
    );
    // CHECK and DEL again with the result the runtime had cached.
    rt.plugin(&conf, 0, "CHECK", &att, Some(&result))
        .expect_error(100);
    rt.plugin(&conf, 0, "DEL", &att, Some(&result))
        .expect_quiet_success();
}

#[test]
fn tap_rollback_leaves_nothing_behind() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "tfail",
        json!({"routing_domain": "auto"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&host);
    let vm = Pod::new("tfvm");
    let conf = conf("U", json!({}));
    let name = hname("U", "1");
    for failpoint in ["after-interface", "after-ipam", "after-host-gateway"] {
        let err = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", failpoint)
            .add(&conf, &vm.attachment())
            .unwrap_err();
        assert!(err.expect_error(999).contains(failpoint));
        assert!(
            !host.netns.try_ip(&["link", "show", &name]).0,
            "no tap after {failpoint}"
        );
        assert!(
            !host.netns.ip(&["rule", "show"]).contains(&name),
            "no rule after {failpoint}"
        );
    }
    rt.add(&conf, &vm.attachment()).unwrap();
    rt.del(&conf, &vm.attachment()).unwrap();
}

/// A tap master creates nothing in the runtime's namespace, so its DEL must not touch what is
/// there: the VM's pod already has an interface of the CNI_IFNAME the runtime passes (its
/// primary network's), and it keeps it and its address.
#[test]
fn tap_del_leaves_the_namespaces_interface_of_the_same_name_alone() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "tkeep",
        json!({"routing_domain": "auto"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&host);
    let vm = Pod::new("tkeepvm");
    vm.ns.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p",
    ]);
    vm.ns.ip(&["addr", "add", "192.0.2.7/24", "dev", "eth0"]);
    let att = vm.attachment();
    let conf = conf("K", json!({}));
    rt.add(&conf, &att).unwrap();
    rt.del(&conf, &att).unwrap();
    let left = vm.ns.ip(&["-4", "addr", "show", "dev", "eth0"]);
    assert!(
        left.contains("192.0.2.7/24"),
        "the pod's own eth0 and its address survive the tap's DEL: {left}"
    );
    assert!(!host.netns.try_ip(&["link", "show", &hname("K", "1")]).0);
}
