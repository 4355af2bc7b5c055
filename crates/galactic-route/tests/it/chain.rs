//! The chain galactic-cni → galactic-route run exactly as a runtime runs a conflist: each plugin
//! found by its type in `CNI_PATH`, the `CNI_*` environment, the network config with the
//! conflist's `cniVersion` and `name` on stdin, each ADD's result passed to the next plugin as
//! `prevResult`, CHECK of every plugin in order with the cached (final) result, DEL in reverse
//! order with the cached result, then DEL again. For CNI 1.0.0 and 1.1.0.
//!
//! Topology (all throwaway namespaces):
//! ```text
//!  client pod ──veth── host (VPC A table) ──veth── router pod ──veth── target
//!  10.66.0.x              198.51.100.0/24 → router          rt0: 198.51.100.1   tr0: 198.51.100.2
//!  fd66:1::…              2001:db8:77::/64 → router          2001:db8:77::1      2001:db8:77::2
//! ```
//! The router attachment's chain declares the target's networks as terminations; the client
//! (another attachment of the same VPC) reaches the target only through them.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use crate::common::{result_ip, route_get, table, table_routes};
use galactic_testkit::host::Pod;
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};

const ROUTER_HOST: &str = "G00000000A001H";
const CLIENT_HOST: &str = "G00000000A002H";
const ROUTER_V6: &str = "fd66:1::ff:0:5";

fn conflist(version: &str, att: &str, ipam: Value, terminations: Value) -> Conflist {
    Conflist::new(
        version,
        "tenant-a",
        vec![
            common::master_conf("A", att, ipam),
            common::route_conf("A", att, terminations),
        ],
    )
}

/// The target network behind the router pod: a veth from the router to the target namespace.
fn wire_target(router: &Pod, target: &TestNetns) {
    router.ns.ip(&[
        "link",
        "add",
        "rt0",
        "type",
        "veth",
        "peer",
        "name",
        "tr0",
        "netns",
        target.name(),
    ]);
    for (ns, dev, v4, v6) in [
        (&router.ns, "rt0", "198.51.100.1/24", "2001:db8:77::1/64"),
        (target, "tr0", "198.51.100.2/24", "2001:db8:77::2/64"),
    ] {
        ns.ip(&["addr", "add", v4, "dev", dev]);
        ns.ip(&["addr", "add", v6, "dev", dev, "nodad"]);
        ns.ip(&["link", "set", dev, "up"]);
    }
    target.ip(&["-4", "route", "add", "default", "via", "198.51.100.1"]);
    target.ip(&["-6", "route", "add", "default", "via", "2001:db8:77::1"]);
}

/// The router forwards, and answers ARP for the target network on its VPC interface (the IPv4
/// termination is a device route, so the host resolves target addresses on that link).
fn make_router(router: &Pod) {
    for key in [
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.eth0.proxy_arp=1",
    ] {
        let out = router.ns.exec(&["sysctl", "-w", key]);
        assert!(out.status.success(), "{key}: {out:?}");
    }
}

#[test]
fn a_pod_reaches_a_termination_through_the_chain_for_each_spec_version() {
    galactic_testkit::privileged!();
    for version in ["1.0.0", "1.1.0"] {
        chain(version);
    }
}

fn chain(version: &str) {
    let host = common::host(&format!("rc{}", &version[2..3]));
    let rt = common::runtime(&host);
    let (router, client) = (Pod::new("rcr"), Pod::new("rcc"));
    let (router_att, client_att) = (router.attachment(), client.attachment());
    let target = TestNetns::new("rct");
    wire_target(&router, &target);

    let client_list = conflist(
        version,
        "2",
        common::pool_ipam("fd66:1::/64", "10.66.0.0/24"),
        json!([]),
    );
    let router_ipam = json!({"type": "galactic-ipam", "addresses": [
        {"address": format!("{ROUTER_V6}/96"), "gateway": "fd66:1::1"},
        {"address": "10.66.0.200/32", "gateway": "10.66.0.1"}]});
    let router_list = conflist(
        version,
        "1",
        router_ipam,
        json!([{"network": "198.51.100.0/24"}, {"network": "2001:db8:77::/64", "via": ROUTER_V6}]),
    );

    let client_results = rt.add_results(&client_list, &client_att).unwrap();
    let client_cached = client_results[1].clone();
    assert_eq!(client_cached, client_results[0], "{version}: passed on");
    let (c4, c6) = (
        result_ip(&client_cached, false),
        result_ip(&client_cached, true),
    );
    for dst in ["198.51.100.2", "2001:db8:77::2"] {
        assert!(
            !client.ping(dst),
            "{version}: no termination yet, so no way to {dst}"
        );
    }

    let router_results = rt.add_results(&router_list, &router_att).unwrap();
    let router_cached = router_results[1].clone();
    assert_eq!(
        router_cached, router_results[0],
        "{version}: galactic-route passes the master's result on unchanged"
    );
    assert_eq!(router_cached["cniVersion"], version);
    make_router(&router);

    rt.check(&router_list, &router_att).unwrap();
    rt.check(&client_list, &client_att).unwrap();

    let (ok, via4) = route_get(&host, "198.51.100.2", &c4, CLIENT_HOST);
    assert!(
        ok && via4.contains(&format!("dev {ROUTER_HOST}")),
        "{version}: {via4}"
    );
    let (ok, via6) = route_get(&host, "2001:db8:77::2", &c6, CLIENT_HOST);
    assert!(
        ok && via6.contains(&format!("via {ROUTER_V6} dev {ROUTER_HOST}")),
        "{version}: {via6}"
    );
    for dst in ["198.51.100.2", "2001:db8:77::2"] {
        assert!(client.reaches(dst), "{version}: client → target {dst}");
    }

    rt.del(&router_list, &router_att).unwrap();
    let table = table(&host, "A");
    assert!(
        !table_routes(&host, table)
            .iter()
            .any(|r| r.contains(ROUTER_HOST)),
        "{version}: nothing routes through the deleted router attachment"
    );
    let (_, after) = route_get(&host, "198.51.100.2", &c4, CLIENT_HOST);
    assert!(!after.contains(ROUTER_HOST), "{version}: {after}");
    for dst in ["198.51.100.2", "2001:db8:77::2"] {
        assert!(
            !client.ping(dst),
            "{version}: {dst} is gone with the router"
        );
    }
    // Each DEL again, by a runtime that still holds the result.
    rt.remember(&router_list, &router_att, &router_cached);
    rt.del(&router_list, &router_att).unwrap();

    rt.del(&client_list, &client_att).unwrap();
    rt.remember(&client_list, &client_att, &client_cached);
    rt.del(&client_list, &client_att).unwrap();
}
