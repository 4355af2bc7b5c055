//! galactic-bgp as a runtime runs it (a separate process), against the loopback API server and
//! against the local backend, with prevResults shaped like the masters' results.

// Helpers outside #[test] functions panic on fixture failures by design.
#![allow(clippy::unwrap_used)]

use crate::cluster::*;
use galactic_testkit::apiserver::{Fault, FaultAction};
use galactic_testkit::runtime::Attachment;
use galactic_testkit::{Outcome, TestNode};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

#[test]
fn veth_add_publishes_exact_objects_and_a_second_pod_reuses_the_vrf_id() {
    let c = Cluster::new("node-a");
    let uid = c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let cid = "c".repeat(64);
    add_ok(&c.node, &cid, &live_netns(), Some("p1"), &conf);

    let vrf = c
        .get("bgpvrfinstances", NS, "1-node-a")
        .expect("BGPVRFInstance 1-node-a");
    assert_eq!(
        vrf["spec"],
        json!({"routerRef": {"name": "router-a"}, "vrfID": 1,
        "importRouteTargets": [{"value": "65000:1"}], "exportRouteTargets": [{"value": "65000:1"}]})
    );
    let adv = c
        .get("bgpadvertisements", NS, "1-1-node-a")
        .expect("BGPAdvertisement 1-1-node-a");
    let key = "c".repeat(41);
    // A /proc netns path: the router's GC cannot judge it, so it is not under netns.*
    // (decision 0016; /run/netns paths are, see galactic-master's router_gc tests).
    assert_eq!(
        adv["metadata"]["annotations"],
        json!({
            format!("galactic.datum.net/netns-path.{key}"): live_netns(),
            format!("galactic.datum.net/allocated-subnet-ipv6.{key}"): "fd20:10:ff01::100:0/96",
            format!("galactic.datum.net/allocated-subnet-ipv4.{key}"): "172.21.1.2",
        })
    );
    assert_eq!(
        adv["spec"],
        json!({"routerRef": {"name": "router-a"},
        "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
        "prefixes": ["172.21.1.2/32", "fd20:10:ff01::/96"], "communities": ["65000:1"],
        "vrfID": 1, "function": "End.DT46"})
    );
    let slice = c
        .get("endpointslices", "pods", "p1")
        .expect("EndpointSlice pods/p1");
    assert_eq!(
        slice["metadata"]["labels"],
        json!({"galactic.datum.net/tenant-id": "1-1"})
    );
    assert_eq!(
        slice["metadata"]["annotations"],
        json!({"galactic.datum.net/tenant-id": "1-1",
        "galactic.datum.net/srv6-sid": "2001:db8:ff03:1:e001::"})
    );
    assert_eq!(
        slice["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "p1", "uid": uid}])
    );
    assert_eq!(slice["addressType"], "IPv6");
    assert_eq!(
        slice["endpoints"],
        json!([{"addresses": ["fd20:10:ff01::100:0"], "conditions": {"ready": true},
        "targetRef": {"kind": "Pod", "name": "p1", "namespace": "pods", "uid": uid}}])
    );
    call(&c.node, "CHECK", &cid, &live_netns(), Some("p1"), &conf).expect_quiet_success();

    // Someone else owns nptv6 on the instance: a later ADD must keep it.
    let fx = c.server.fixture();
    let mut with_nptv6 = fx.remove("bgpvrfinstances", Some(NS), "1-node-a").unwrap();
    with_nptv6["spec"]["nptv6"] =
        json!({"ulaPrefix": "fd00::/48", "publicPrefix": "2001:db8::/48"});
    fx.insert(with_nptv6);
    c.pod("p2");
    let prev2 = veth_prev("fd20:10:ff01::200:0/96", "172.21.1.3/24", &live_netns());
    add_ok(
        &c.node,
        "second",
        &live_netns(),
        Some("p2"),
        &stanza("1", "2", &prev2),
    );
    let vrf = c.get("bgpvrfinstances", NS, "1-node-a").unwrap();
    assert_eq!(
        vrf["spec"]["vrfID"], 1,
        "same VPC on the same node reuses the VRF id"
    );
    assert_eq!(
        vrf["spec"]["nptv6"]["ulaPrefix"], "fd00::/48",
        "fields others own are kept"
    );
    assert_eq!(
        c.get("bgpadvertisements", NS, "1-2-node-a").unwrap()["spec"]["vrfID"],
        1
    );
    let prev3 = veth_prev("fd20:10:ff02::100:0/96", "172.22.1.2/24", &live_netns());
    c.pod("p3");
    add_ok(
        &c.node,
        "third",
        &live_netns(),
        Some("p3"),
        &stanza("2", "1", &prev3),
    );
    assert_eq!(
        c.get("bgpvrfinstances", NS, "2-node-a").unwrap()["spec"]["vrfID"],
        2,
        "another VPC gets the next id"
    );

    // DEL retracts the pod's EndpointSlice and its advertisement (it was the only container);
    // the VPC's VRF instance stays for the VPC's other attachment on the node. Twice is fine.
    for _ in 0..2 {
        call(&c.node, "DEL", &cid, &live_netns(), Some("p1"), &conf).expect_quiet_success();
    }
    assert!(c.get("endpointslices", "pods", "p1").is_none());
    assert!(c.get("endpointslices", "pods", "p2").is_some());
    assert!(c.get("bgpadvertisements", NS, "1-1-node-a").is_none());
    assert!(c.get("bgpadvertisements", NS, "1-2-node-a").is_some());
    assert!(c.get("bgpvrfinstances", NS, "1-node-a").is_some());
    let msg = call(&c.node, "CHECK", &cid, &live_netns(), Some("p1"), &conf).expect_error(999);
    assert!(
        msg.contains("BGPAdvertisement galactic-system/1-1-node-a"),
        "{msg}"
    );
    // The node's masters hold their records until their own DEL, which follows galactic-bgp's.
    c.node.forget_master("net1", &cid, "eth0");
    // The VPC's last attachment on the node: its VRF instance goes with it.
    call(
        &c.node,
        "DEL",
        "second",
        &live_netns(),
        Some("p2"),
        &stanza("1", "2", &prev2),
    )
    .expect_quiet_success();
    c.node.forget_master("net1", "second", "eth0");
    assert!(c.get("bgpadvertisements", NS, "1-2-node-a").is_none());
    assert!(c.get("bgpvrfinstances", NS, "1-node-a").is_none());
    assert!(
        c.get("bgpvrfinstances", NS, "2-node-a").is_some(),
        "VPC 2 is still here"
    );
    call(
        &c.node,
        "DEL",
        "third",
        &live_netns(),
        Some("p3"),
        &stanza("2", "1", &prev3),
    )
    .expect_quiet_success();
    for plural in ["bgpadvertisements", "bgpvrfinstances", "endpointslices"] {
        let left: Vec<Value> = ["pods", NS]
            .iter()
            .flat_map(|ns| c.server.fixture().list(plural, Some(ns)))
            .collect();
        assert_eq!(left, Vec::<Value>::new(), "no {plural} left");
    }
}

#[test]
fn a_replacement_pod_with_a_recycled_prefix_does_not_wedge_add() {
    let c = Cluster::new("node-a");
    c.pod("old");
    c.pod("new");
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let dead_netns = format!("/proc/{}/ns/net", child.id());
    let prev_old = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &dead_netns);
    add_ok(
        &c.node,
        "oldcontainer",
        &dead_netns,
        Some("old"),
        &stanza("1", "1", &prev_old),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The replacement gets the same addresses; its predecessor never ran DEL.
    let prev_new = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    add_ok(
        &c.node,
        "newcontainer",
        &live_netns(),
        Some("new"),
        &stanza("1", "1", &prev_new),
    );
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(
        adv["spec"]["prefixes"],
        json!(["172.21.1.2/32", "fd20:10:ff01::/96"])
    );
    let keys: Vec<&String> = adv["metadata"]["annotations"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert!(
        keys.iter().all(|k| k.ends_with(".newcontainer")),
        "dead sibling pruned: {keys:?}"
    );
}

#[test]
fn concurrent_allocations_end_with_distinct_vrf_ids() {
    let c = Cluster::new("node-a");
    // Every create waits long enough that all allocators have listed first: they all pick 1.
    c.server.fixture().inject(Fault::on(
        "POST",
        "/bgpvrfinstances",
        4,
        FaultAction::Delay(Duration::from_millis(300)),
    ));
    let vpcs = ["1", "2", "3", "4"];
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = vpcs.iter().map(|vpc| {
            let node = &c.node;
            s.spawn(move || {
                let prev = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G000000001001H"}],
                                  "ips": [{"address": format!("10.{vpc}.0.2/32"), "interface": 0}]});
                call(node, "ADD", &format!("c{vpc}"), &live_netns(), None, &stanza(vpc, "1", &prev))
            })
        }).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for out in &outcomes {
        assert!(out.success, "{out:?}");
    }
    let mut ids: Vec<u64> = vpcs
        .iter()
        .map(|vpc| {
            c.get("bgpvrfinstances", NS, &format!("{vpc}-node-a"))
                .unwrap()["spec"]["vrfID"]
                .as_u64()
                .unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, [1, 2, 3, 4], "one router never hands out an id twice");
    assert_eq!(
        c.server.fixture().list("bgpvrfinstances", Some(NS)).len(),
        6 - 2,
        "no leftover instances"
    );

    // A second node has its own router, hence its own id space.
    let other = kube_node(&c.server, "node-b");
    let prev = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G000000001001H"}], "ips": [{"address": "10.9.0.2/32"}]});
    add_ok(&other, "b1", &live_netns(), None, &stanza("1", "1", &prev));
    assert_eq!(
        c.get("bgpvrfinstances", NS, "1-node-b").unwrap()["spec"]["routerRef"]["name"],
        "router-b"
    );
}

#[test]
fn transient_errors_and_conflicts_are_retried() {
    let c = Cluster::new("node-a");
    c.pod("p1");
    c.pod("p2");
    let fx = c.server.fixture();
    fx.inject(Fault::on("GET", "/bgprouters", 1, FaultAction::Status(503)));
    fx.inject(Fault::on(
        "POST",
        "/bgpadvertisements",
        1,
        FaultAction::Status(500),
    ));
    fx.inject(Fault::on("POST", "/endpointslices", 1, FaultAction::Drop));
    fx.inject(Fault::on("GET", "/pods/p1", 1, FaultAction::Status(429)));
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    add_ok(
        &c.node,
        "one",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &prev),
    );
    // A second container of the same attachment meets a stale write: re-read and re-apply.
    fx.inject(Fault::on(
        "PUT",
        "/bgpadvertisements/1-1-node-a",
        1,
        FaultAction::Status(409),
    ));
    let prev2 = veth_prev("fd20:10:ff01::300:0/96", "172.21.1.9/24", &live_netns());
    add_ok(
        &c.node,
        "two",
        &live_netns(),
        Some("p2"),
        &stanza("1", "1", &prev2),
    );
    let statuses: Vec<(String, u16)> = fx
        .requests()
        .iter()
        .filter(|r| r.status != 200)
        .map(|r| (format!("{} {}", r.method, r.path), r.status))
        .collect();
    for code in [503, 500, 0, 429, 409] {
        assert!(
            statuses.iter().any(|(_, s)| *s == code),
            "fault {code} was exercised: {statuses:?}"
        );
    }
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(
        adv["spec"]["prefixes"],
        json!(["172.21.1.2/32", "172.21.1.9/32", "fd20:10:ff01::/96"])
    );
    assert!(c.get("endpointslices", "pods", "p1").is_some());
}

#[test]
fn del_retracts_through_conflicts_and_answers_11_while_the_api_server_fails() {
    let c = Cluster::new("node-a");
    c.pod("p1");
    c.pod("p2");
    let fx = c.server.fixture();
    let (one, two) = (
        veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns()),
        veth_prev("fd20:10:ff01::300:0/96", "172.21.1.9/24", &live_netns()),
    );
    // Two containers of one attachment (a replacement pod started before the old one's DEL).
    add_ok(
        &c.node,
        "one",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &one),
    );
    add_ok(
        &c.node,
        "two",
        &live_netns(),
        Some("p2"),
        &stanza("1", "1", &two),
    );
    // One's DEL meets a stale write: it re-reads, and two's record survives.
    fx.inject(Fault::on(
        "PUT",
        "/bgpadvertisements/1-1-node-a",
        1,
        FaultAction::Status(409),
    ));
    call(
        &c.node,
        "DEL",
        "one",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &one),
    )
    .expect_quiet_success();
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(
        adv["spec"]["prefixes"],
        json!(["172.21.1.9/32", "fd20:10:ff01::/96"]),
        "only two's prefixes"
    );
    assert!(
        fx.requests().iter().any(|r| r.status == 409),
        "the conflict was exercised"
    );
    // Two's DEL while the API server fails: try again later, nothing forgotten.
    fx.inject(Fault::on(
        "DELETE",
        "/bgpadvertisements/1-1-node-a",
        100,
        FaultAction::Status(503),
    ));
    let msg = call(
        &c.node,
        "DEL",
        "two",
        &live_netns(),
        Some("p2"),
        &stanza("1", "1", &two),
    )
    .expect_error(11);
    assert!(msg.contains("503") || msg.contains("unavailable"), "{msg}");
    assert!(c.get("bgpadvertisements", NS, "1-1-node-a").is_some());
    fx.clear_faults();
    call(
        &c.node,
        "DEL",
        "two",
        &live_netns(),
        Some("p2"),
        &stanza("1", "1", &two),
    )
    .expect_quiet_success();
    assert!(c.get("bgpadvertisements", NS, "1-1-node-a").is_none());
    assert!(
        c.get("bgpvrfinstances", NS, "1-node-a").is_none(),
        "the VPC's last attachment on the node took its VRF instance"
    );
}

#[test]
fn a_permanent_error_rolls_back_only_what_this_add_created() {
    let c = Cluster::new("node-a");
    c.pod("p1");
    let fx = c.server.fixture();
    fx.inject(Fault::on(
        "POST",
        "/endpointslices",
        1,
        FaultAction::Status(403),
    ));
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let out = call(&c.node, "ADD", "one", &live_netns(), Some("p1"), &conf);
    out.expect_error(999);
    assert!(
        fx.list("bgpvrfinstances", Some(NS)).is_empty(),
        "created VRF instance rolled back"
    );
    assert!(
        fx.list("bgpadvertisements", Some(NS)).is_empty(),
        "created advertisement rolled back"
    );
    // Objects that existed before the ADD stay.
    add_ok(&c.node, "one", &live_netns(), Some("p1"), &conf);
    c.pod("p2");
    fx.inject(Fault::on(
        "POST",
        "/endpointslices",
        1,
        FaultAction::Status(403),
    ));
    let prev2 = veth_prev("fd20:10:ff01::200:0/96", "172.21.1.3/24", &live_netns());
    call(
        &c.node,
        "ADD",
        "two",
        &live_netns(),
        Some("p2"),
        &stanza("1", "1", &prev2),
    )
    .expect_error(999);
    assert!(
        c.get("bgpvrfinstances", NS, "1-node-a").is_some()
            && c.get("bgpadvertisements", NS, "1-1-node-a").is_some()
    );
    // A foreign EndpointSlice of the pod's name is never overwritten.
    fx.insert(
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv6",
        "metadata": {"name": "p2", "namespace": "pods"}, "endpoints": []}),
    );
    let msg = call(
        &c.node,
        "ADD",
        "two",
        &live_netns(),
        Some("p2"),
        &stanza("1", "1", &prev2),
    )
    .expect_error(999);
    assert!(msg.contains("refusing to overwrite"), "{msg}");
}

#[test]
fn bad_input_and_missing_cluster_state_get_clear_codes() {
    let c = Cluster::new("node-a");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let no_prev = Stanza {
        list: bgp_list("n", "1", "1"),
        prev: None,
    };
    call(&c.node, "ADD", "x", &live_netns(), Some("p1"), &no_prev).expect_error(6);
    let two_sandboxes = json!({"interfaces": [{"name": "h"}, {"name": "a", "sandbox": "/a"}, {"name": "b", "sandbox": "/b"}]});
    call(
        &c.node,
        "ADD",
        "x",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &two_sandboxes),
    )
    .expect_error(6);
    call(
        &c.node,
        "ADD",
        "x",
        &live_netns(),
        Some("p1"),
        &stanza("1!", "1", &prev),
    )
    .expect_error(7);
    let msg = call(
        &c.node,
        "ADD",
        "x",
        &live_netns(),
        None,
        &stanza("1", "1", &prev),
    )
    .expect_error(4);
    assert!(msg.contains("K8S_POD_NAME"), "{msg}");
    let lonely = kube_node(&c.server, "node-z");
    let msg = call(
        &lonely,
        "ADD",
        "x",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &prev),
    )
    .expect_error(7);
    assert!(msg.contains("no BGPRouter found for node node-z"), "{msg}");
    assert!(
        c.server.fixture().list("bgpvrfinstances", None).is_empty(),
        "nothing written"
    );
    // A tap attachment without addresses: its advertisement originates from its host interface
    // (decision 0016: the router keeps the VPC's VRF only while an advertisement exists).
    let tap = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G000000001001H"}]});
    add_ok(&c.node, "tap", &live_netns(), None, &stanza("1", "1", &tap));
    assert!(c.get("bgpvrfinstances", NS, "1-node-a").is_some());
    let adv = c
        .get("bgpadvertisements", NS, "1-1-node-a")
        .expect("an advertisement");
    assert_eq!(
        adv["spec"],
        json!({"routerRef": {"name": "router-a"}, "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
        "originateFrom": {"type": "interface", "interfaceName": "G000000001001H"},
        "communities": ["65000:1"], "vrfID": 1, "function": "End.DT46"})
    );
    call(
        &c.node,
        "CHECK",
        "tap",
        &live_netns(),
        None,
        &stanza("1", "1", &tap),
    )
    .expect_quiet_success();
}

#[test]
fn status_probes_the_api_server() {
    let c = Cluster::new("node-a");
    let list = bgp_list("n", "1", "1");
    let status = || runtime(&c.node).status(&list);
    status().unwrap();
    c.server
        .fixture()
        .inject(Fault::on("GET", "/bgprouters", 1, FaultAction::Status(503)));
    let err = status().expect_err(&format!("{:?}", c.server.fixture().requests()));
    err.expect_error(50);
    let Cluster { server, node } = c;
    drop(server);
    let msg = runtime(&node).status(&list).unwrap_err().expect_error(50);
    assert!(msg.contains("bgprouters"), "{msg}");
}

#[test]
fn the_local_backend_writes_the_same_documents_to_disk() {
    let node = TestNode::new(json!({"publisher": "local", "node_name": "node-a", "namespace": NS}));
    let root = node.dir.path().join("state").join("bgp");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    // Without a BGPRouter document publication still works: no SRv6, and the route target's
    // ASN-free form (decision 0015; the API requires route targets).
    add_ok(&node, "one", &live_netns(), Some("p1"), &conf);
    let read = |rel: &str| -> Value {
        serde_json::from_slice(&std::fs::read(root.join(rel)).unwrap()).unwrap()
    };
    assert_eq!(
        read("galactic-system/bgpvrfinstances/1-node-a.json")["spec"],
        json!({"routerRef": {"name": "node-a"}, "vrfID": 1,
        "importRouteTargets": [{"value": "0.0.0.0:1"}], "exportRouteTargets": [{"value": "0.0.0.0:1"}]})
    );

    std::fs::write(
        root.join("galactic-system/bgprouters/router-a.json")
            .as_path(),
        router("router-a", "node-a", true).to_string(),
    )
    .or_else(|_| {
        std::fs::create_dir_all(root.join("galactic-system/bgprouters"))?;
        std::fs::write(
            root.join("galactic-system/bgprouters/router-a.json"),
            router("router-a", "node-a", true).to_string(),
        )
    })
    .unwrap();
    std::fs::remove_dir_all(root.join("galactic-system/bgpvrfinstances")).unwrap();
    add_ok(&node, "one", &live_netns(), Some("p1"), &conf);
    let vrf = read("galactic-system/bgpvrfinstances/1-node-a.json");
    assert_eq!(
        vrf["spec"],
        json!({"routerRef": {"name": "router-a"}, "vrfID": 1,
        "importRouteTargets": [{"value": "65000:1"}], "exportRouteTargets": [{"value": "65000:1"}]})
    );
    assert_eq!(vrf["kind"], "BGPVRFInstance");
    assert!(vrf["metadata"]["uid"].is_string() && vrf["metadata"]["resourceVersion"].is_string());
    let adv = read("galactic-system/bgpadvertisements/1-1-node-a.json");
    assert_eq!(
        adv["spec"],
        json!({"routerRef": {"name": "router-a"}, "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
        "prefixes": ["172.21.1.2/32", "fd20:10:ff01::/96"], "communities": ["65000:1"], "vrfID": 1, "function": "End.DT46"})
    );
    let slice = read("pods/endpointslices/p1.json");
    assert_eq!(
        slice["metadata"]["annotations"]["galactic.datum.net/srv6-sid"],
        "2001:db8:ff03:1:e001::"
    );
    assert!(
        slice["metadata"].get("ownerReferences").is_none(),
        "no Pod object locally"
    );
    call(&node, "CHECK", "one", &live_netns(), Some("p1"), &conf).expect_quiet_success();
    let prev2 = veth_prev("fd20:10:ff01::200:0/96", "172.21.1.3/24", &live_netns());
    add_ok(&node, "two", &live_netns(), None, &stanza("2", "1", &prev2));
    assert_eq!(
        read("galactic-system/bgpvrfinstances/2-node-a.json")["spec"]["vrfID"],
        2
    );
    call(&node, "DEL", "one", &live_netns(), Some("p1"), &conf).expect_quiet_success();
    assert!(!root.join("pods/endpointslices/p1.json").exists());
    let mut leftovers: Vec<_> = std::fs::read_dir(root.join("galactic-system/bgpadvertisements"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    leftovers.sort();
    assert_eq!(
        leftovers,
        ["2-1-node-a.json"],
        "the last container's DEL removed its advertisement; no temporary files left behind"
    );
    assert!(
        !root
            .join("galactic-system/bgpvrfinstances/1-node-a.json")
            .exists(),
        "VPC 1's last attachment on the node is gone, and its VRF instance with it"
    );
    assert!(root
        .join("galactic-system/bgpvrfinstances/2-node-a.json")
        .exists());
}

/// Every JSON document under `dir`, recursively.
fn documents_under(dir: &Path) -> Vec<(std::path::PathBuf, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(documents_under(&path));
        } else if path.extension().is_some_and(|x| x == "json") {
            out.push((
                path.clone(),
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap(),
            ));
        }
    }
    out
}

#[test]
fn every_local_document_is_one_the_api_server_stores_and_a_bad_router_file_is_refused() {
    let node = TestNode::new(json!({"publisher": "local", "node_name": "node-a", "namespace": NS}));
    let root = node.dir.path().join("state").join("bgp");
    let routers = root.join(NS).join("bgprouters");
    std::fs::create_dir_all(&routers).unwrap();
    std::fs::write(
        routers.join("router-a.json"),
        router("router-a", "node-a", true).to_string(),
    )
    .unwrap();
    let dual = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    add_ok(
        &node,
        "one",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &dual),
    );
    let tap = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G000000001001H"}]});
    add_ok(&node, "tap", &live_netns(), None, &stanza("2", "1", &tap));
    let v4 = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G000000001001H"}],
        "ips": [{"address": "10.7.0.2/24", "interface": 0}]});
    add_ok(&node, "v4", &live_netns(), None, &stanza("3Zz", "1", &v4));
    let fixture = galactic_testkit::apiserver::Fixture::new();
    let docs = documents_under(&root);
    assert!(docs.len() >= 7, "{docs:?}");
    for (path, doc) in docs {
        if let Err(e) = fixture.try_insert(doc) {
            panic!("{} would be refused: {e}", path.display());
        }
    }
    // A router document without addressFamilies is no BGPRouter: code 7, naming the problem.
    let mut bad = router("router-a", "node-a", true);
    bad["spec"]
        .as_object_mut()
        .unwrap()
        .remove("addressFamilies");
    std::fs::write(routers.join("router-a.json"), bad.to_string()).unwrap();
    let msg = call(
        &node,
        "ADD",
        "one",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &dual),
    )
    .expect_error(7);
    assert!(
        msg.contains("BGPRouter") && msg.contains("addressFamilies"),
        "{msg}"
    );
}

/// The VPC's last attachment leaving while another arrives: DEL decides "no other attachment of
/// the VPC here" and deletes the VRF instance, while the other ADD reuses the instance. The DEL is
/// held between its decision and the delete (failpoint pause), and the ADD runs in that window:
/// the per-VPC lock makes it wait, so it recreates the instance instead of reusing one that is
/// about to go. (The local publisher serialises whole processes; the API server does not.)
#[test]
fn a_vrf_instance_retired_while_another_attachment_arrives_is_never_lost() {
    let c = Cluster::new("node-a");
    let node = &c.node;
    let vrf = || c.get("bgpvrfinstances", NS, "1-node-a");
    let prev_a = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let prev_b = veth_prev("fd20:10:ff01::200:0/96", "172.21.1.3/24", &live_netns());
    let (a, b) = (stanza("1", "1", &prev_a), stanza("1", "2", &prev_b));
    c.pod("pa");
    c.pod("pb");
    add_ok(node, "a", &live_netns(), Some("pa"), &a);
    assert!(vrf().is_some());
    std::thread::scope(|s| {
        let leaving = s.spawn(|| {
            let att = Attachment::new("a", &live_netns(), "eth0")
                .arg("K8S_POD_NAMESPACE", "pods")
                .arg("K8S_POD_NAME", "pa");
            runtime(node)
                .env(galactic_core::bpf::maps::DATAPATH_ENV, "off")
                .env("GALACTIC_FAILPOINTS", "bgp-before-vrf-retire:pause")
                .plugin(&a.list, 0, "DEL", &att, a.prev.as_ref())
        });
        // Well inside the DEL's pause: it has decided, and holds the VPC's lock.
        std::thread::sleep(galactic_core::failpoint::PAUSE / 2);
        add_ok(node, "b", &live_netns(), Some("pb"), &b);
        leaving.join().unwrap().expect_quiet_success();
    });
    node.forget_master("net1", "a", "eth0");
    assert!(
        vrf().is_some(),
        "attachment b is live: its VRF instance must exist"
    );
    call(node, "CHECK", "b", &live_netns(), Some("pb"), &b).expect_quiet_success();
    call(node, "DEL", "b", &live_netns(), Some("pb"), &b).expect_quiet_success();
    node.forget_master("net1", "b", "eth0");
    assert!(
        vrf().is_none(),
        "the VPC's last attachment took its instance"
    );
}
