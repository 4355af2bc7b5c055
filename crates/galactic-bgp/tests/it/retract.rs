//! DEL's retraction of one container of a shared advertisement: what is left is the
//! advertisement ADD would have written for the containers that remain (decision 0016).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::cluster::*;
use galactic_testkit::privileged::TestNetns;
use serde_json::{json, Value};

fn annotation_keys(adv: &Value) -> Vec<String> {
    adv["metadata"]["annotations"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[test]
fn del_of_the_addressed_container_leaves_its_addressless_sibling_advertised() {
    let c = Cluster::new("node-a");
    c.pod("p1");
    let one = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let tap = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G000000001001H"}]});
    add_ok(
        &c.node,
        "one",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &one),
    );
    add_ok(&c.node, "two", &live_netns(), None, &stanza("1", "1", &tap));
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(
        adv["spec"]["prefixes"],
        json!(["172.21.1.2/32", "fd20:10:ff01::/96"])
    );
    assert!(adv["spec"].get("originateFrom").is_none(), "{adv}");

    call(
        &c.node,
        "DEL",
        "one",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &one),
    )
    .expect_quiet_success();
    c.node.forget_master("net1", "one", "eth0");
    let adv = c
        .get("bgpadvertisements", NS, "1-1-node-a")
        .expect("two still records itself on the advertisement");
    assert_eq!(
        adv["spec"],
        json!({"routerRef": {"name": "router-a"}, "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
        "originateFrom": {"type": "interface", "interfaceName": "G000000001001H"},
        "communities": ["65000:1"], "vrfID": 1, "function": "End.DT46"})
    );
    assert_eq!(
        annotation_keys(&adv),
        ["galactic.datum.net/netns-path.two"],
        "only two's records (a /proc netns, no addresses)"
    );
    call(
        &c.node,
        "CHECK",
        "two",
        &live_netns(),
        None,
        &stanza("1", "1", &tap),
    )
    .expect_quiet_success();

    call(
        &c.node,
        "DEL",
        "two",
        &live_netns(),
        None,
        &stanza("1", "1", &tap),
    )
    .expect_quiet_success();
    c.node.forget_master("net1", "two", "eth0");
    assert!(c.get("bgpadvertisements", NS, "1-1-node-a").is_none());
    assert!(c.get("bgpvrfinstances", NS, "1-node-a").is_none());
}

#[test]
fn records_move_back_under_netns_when_the_unjudgeable_container_goes() {
    galactic_testkit::privileged!();
    let c = Cluster::new("node-a");
    c.pod("p1");
    c.pod("p2");
    let named = TestNetns::new("bgpret");
    let named_path = named.path().display().to_string();
    assert!(
        named_path.starts_with("/run/netns/") || named_path.starts_with("/var/run/netns/"),
        "{named_path}"
    );
    let one = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &named_path);
    let two = veth_prev("fd20:10:ff01::300:0/96", "172.21.1.9/24", &live_netns());
    add_ok(
        &c.node,
        "one",
        &named_path,
        Some("p1"),
        &stanza("1", "1", &one),
    );
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(
        adv["metadata"]["annotations"]["galactic.datum.net/netns.one"],
        json!(named_path)
    );
    add_ok(
        &c.node,
        "two",
        &live_netns(),
        Some("p2"),
        &stanza("1", "1", &two),
    );
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    let held: Vec<String> = annotation_keys(&adv)
        .into_iter()
        .filter(|k| k.contains("/netns"))
        .collect();
    assert_eq!(
        held,
        [
            "galactic.datum.net/netns-path.one",
            "galactic.datum.net/netns-path.two"
        ],
        "a /proc path the router's GC cannot judge holds every record"
    );

    call(
        &c.node,
        "DEL",
        "two",
        &live_netns(),
        Some("p2"),
        &stanza("1", "1", &two),
    )
    .expect_quiet_success();
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(
        adv["metadata"]["annotations"],
        json!({"galactic.datum.net/netns.one": named_path,
               "galactic.datum.net/allocated-subnet-ipv6.one": "fd20:10:ff01::100:0/96",
               "galactic.datum.net/allocated-subnet-ipv4.one": "172.21.1.2"}),
        "with the /proc container gone the router's GC judges the rest again"
    );
    assert_eq!(
        adv["spec"]["prefixes"],
        json!(["172.21.1.2/32", "fd20:10:ff01::/96"])
    );
}
