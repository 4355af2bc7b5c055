//! Per-node BGPAdvertisement names (decision 0018): one object per (VPC, attachment, node), long
//! node names capped, invalid ones refused, and the two-segment objects of older chains (the Go
//! chain's shared object, our local documents) adopted or retired.

// Helpers outside #[test] functions panic on fixture failures by design.
#![allow(clippy::unwrap_used)]

use crate::cluster::*;
use galactic_core::ident::{bgp_advertisement_name, bgp_vrf_instance_name, OBJECT_NAME_MAX};
use galactic_testkit::runtime::Attachment;
use galactic_testkit::TestNode;
use serde_json::{json, Value};

/// The advertisement (name, object) whose annotations record container `cid`.
fn recording(c: &Cluster, cid: &str) -> Vec<(String, Value)> {
    let key = format!(".{}", &cid[..cid.len().min(41)]);
    c.server
        .fixture()
        .list("bgpadvertisements", Some(NS))
        .into_iter()
        .filter(|a| {
            a["metadata"]["annotations"]
                .as_object()
                .is_some_and(|m| m.keys().any(|k| k.ends_with(&key)))
        })
        .map(|a| (a["metadata"]["name"].as_str().unwrap().to_owned(), a))
        .collect()
}

#[test]
fn two_nodes_with_one_attachment_each_keep_their_own_advertisement() {
    let c = Cluster::new("node-a");
    let node_b = kube_node(&c.server, "node-b");
    c.pod("pa");
    c.pod("pb");
    let (a, b) = ("a".repeat(64), "b".repeat(64));
    let prev_a = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let prev_b = veth_prev("fd20:10:ff02::200:0/96", "172.21.1.3/24", &live_netns());
    add_ok(
        &c.node,
        &a,
        &live_netns(),
        Some("pa"),
        &stanza("1", "1", &prev_a),
    );
    add_ok(
        &node_b,
        &b,
        &live_netns(),
        Some("pb"),
        &stanza("1", "1", &prev_b),
    );

    for (cid, router, prefixes, name) in [
        (
            &a,
            "router-a",
            ["172.21.1.2/32", "fd20:10:ff01::/96"],
            "1-1-node-a",
        ),
        (
            &b,
            "router-b",
            ["172.21.1.3/32", "fd20:10:ff02::/96"],
            "1-1-node-b",
        ),
    ] {
        let found = recording(&c, cid);
        assert_eq!(found.len(), 1, "one advertisement records {cid}: {found:?}");
        let (found_name, adv) = &found[0];
        assert_eq!(found_name, name, "upstream's per-node name");
        assert_eq!(adv["spec"]["routerRef"]["name"], router, "{adv}");
        assert_eq!(adv["spec"]["prefixes"], json!(prefixes), "{adv}");
    }
    call(
        &c.node,
        "CHECK",
        &a,
        &live_netns(),
        Some("pa"),
        &stanza("1", "1", &prev_a),
    )
    .expect_quiet_success();
    // One node's last DEL leaves the other node's advertisement alone.
    call(
        &node_b,
        "DEL",
        &b,
        &live_netns(),
        Some("pb"),
        &stanza("1", "1", &prev_b),
    )
    .expect_quiet_success();
    assert!(c.get("bgpadvertisements", NS, "1-1-node-b").is_none());
    let kept = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(kept["spec"]["routerRef"]["name"], "router-a");
}

#[test]
fn a_long_node_name_is_capped_within_the_object_name_limit() {
    // 251 characters: a valid Node name, too long for `{hexvpc}-{hexatt}-{node}` uncapped.
    let long = format!(
        "{}.{}.{}.{}",
        "n".repeat(63),
        "o".repeat(63),
        "d".repeat(63),
        "e".repeat(59)
    );
    let c = Cluster::new(&long);
    c.server
        .fixture()
        .insert(router("router-long", &long, false));
    let node = &c.node;
    c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    add_ok(node, "one", &live_netns(), Some("p1"), &conf);
    call(node, "CHECK", "one", &live_netns(), Some("p1"), &conf).expect_quiet_success();
    for (plural, name) in [
        ("bgpadvertisements", bgp_advertisement_name("1", "1", &long)),
        ("bgpvrfinstances", bgp_vrf_instance_name("1", &long)),
    ] {
        assert!(name.len() <= OBJECT_NAME_MAX, "{name}");
        assert!(name.starts_with("1-"), "{name}");
        let object = c
            .get(plural, NS, &name)
            .unwrap_or_else(|| panic!("{plural}/{name}"));
        assert_eq!(object["spec"]["routerRef"]["name"], "router-long");
    }
    call(node, "DEL", "one", &live_netns(), Some("p1"), &conf).expect_quiet_success();
    assert!(c
        .server
        .fixture()
        .list("bgpadvertisements", Some(NS))
        .is_empty());
}

#[test]
fn a_node_name_no_object_name_can_hold_is_refused_with_what_to_set() {
    let c = Cluster::new("Node_A");
    c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let out = call(
        &c.node,
        "ADD",
        "one",
        &live_netns(),
        Some("p1"),
        &stanza("1", "1", &prev),
    );
    let msg = out.expect_error(4);
    assert!(
        msg.contains("node name 'Node_A'") && msg.contains("node_name"),
        "{msg}"
    );
    assert!(c
        .server
        .fixture()
        .list("bgpvrfinstances", Some(NS))
        .is_empty());
}

/// An advertisement the Go chain wrote under the shared name, recording `containers`
/// (cid, netns, IPv6 subnet `fd20:10:{net}::100:0/96`), last written by `router`.
fn legacy(name: &str, router: &str, containers: &[(&str, &str, &str)]) -> Value {
    let mut ann = serde_json::Map::new();
    let mut prefixes = Vec::new();
    for (cid, netns, net) in containers {
        let key = &cid[..41];
        ann.insert(format!("galactic.datum.net/netns.{key}"), json!(netns));
        let v6 = format!("fd20:10:{net}::100:0/96");
        ann.insert(
            format!("galactic.datum.net/allocated-subnet-ipv6.{key}"),
            json!(v6),
        );
        prefixes.push(format!("fd20:10:{net}::/96"));
    }
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPAdvertisement",
           "metadata": {"name": name, "namespace": NS, "annotations": ann},
           "spec": {"routerRef": {"name": router}, "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
                    "prefixes": prefixes, "communities": ["65000:1"], "vrfID": 1,
                    "function": "End.DT46"}})
}

fn records(adv: &Value) -> Vec<String> {
    let mut out: Vec<String> = adv["metadata"]["annotations"]
        .as_object()
        .unwrap()
        .keys()
        .filter_map(|k| {
            k.strip_prefix("galactic.datum.net/netns.")
                .or_else(|| k.strip_prefix("galactic.datum.net/netns-path."))
        })
        .map(|k| k[..1].to_owned())
        .collect();
    out.sort();
    out
}

#[test]
fn the_go_chains_shared_advertisement_is_left_one_container_at_a_time() {
    let c = Cluster::new("node-a");
    let node_b = kube_node(&c.server, "node-b");
    let (a, d, b) = ("a".repeat(64), "d".repeat(64), "b".repeat(64));
    // node-b's container: its netns is on node-b, so node-a cannot judge it (and must not).
    let other = "/run/netns/cni-on-node-b";
    c.server.fixture().insert(legacy(
        "1-1",
        "router-b",
        &[
            (&a, &live_netns(), "ff01"),
            (&d, &live_netns(), "ff03"),
            (&b, other, "ff02"),
        ],
    ));
    c.pod("pa");
    let prev_a = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    add_ok(
        &c.node,
        &a,
        &live_netns(),
        Some("pa"),
        &stanza("1", "1", &prev_a),
    );
    let shared = c
        .get("bgpadvertisements", NS, "1-1")
        .expect("still holds d and b");
    assert_eq!(
        records(&shared),
        ["b", "d"],
        "a moved to its per-node object"
    );
    assert!(
        !shared["spec"]["prefixes"]
            .as_array()
            .unwrap()
            .contains(&json!("fd20:10:ff01::/96")),
        "{shared}"
    );
    assert_eq!(
        shared["spec"]["routerRef"]["name"], "router-b",
        "not ours to repoint"
    );
    assert_eq!(recording(&c, &a).len(), 1, "a is advertised once");
    call(
        &c.node,
        "CHECK",
        &a,
        &live_netns(),
        Some("pa"),
        &stanza("1", "1", &prev_a),
    )
    .expect_quiet_success();

    // A container recorded on both objects (a write of an older chain after the move) is
    // advertised twice: CHECK says so.
    let prev_d = veth_prev("fd20:10:ff03::100:0/96", "172.21.1.4/24", &live_netns());
    let conf_d = stanza("1", "1", &prev_d);
    c.node
        .record_master("net1", &d, "eth0", &live_netns(), ("1", "1"));
    let fx = c.server.fixture();
    let mut both = fx
        .remove("bgpadvertisements", Some(NS), "1-1-node-a")
        .unwrap();
    let key = format!("galactic.datum.net/netns-path.{}", &d[..41]);
    both["metadata"]["annotations"][&key] = json!(live_netns());
    for prefix in ["172.21.1.4/32", "fd20:10:ff03::/96"] {
        both["spec"]["prefixes"]
            .as_array_mut()
            .unwrap()
            .push(json!(prefix));
    }
    fx.insert(both);
    let msg = call(&c.node, "CHECK", &d, &live_netns(), None, &conf_d).expect_error(999);
    assert!(
        msg.contains("BGPAdvertisement 1-1 ") && msg.contains("older chain"),
        "{msg}"
    );

    // DEL of node-a's other Go-chain container: off the shared object; node-b's stays.
    call(&c.node, "DEL", &d, &live_netns(), None, &conf_d).expect_quiet_success();
    let shared = c
        .get("bgpadvertisements", NS, "1-1")
        .expect("node-b's container is left");
    assert_eq!(records(&shared), ["b"]);
    assert_eq!(shared["spec"]["prefixes"], json!(["fd20:10:ff02::/96"]));
    // node-b's DEL of its last container retires the shared object.
    let prev_b = veth_prev("fd20:10:ff02::100:0/96", "172.21.1.3/24", other);
    call(&node_b, "DEL", &b, other, None, &stanza("1", "1", &prev_b)).expect_quiet_success();
    assert!(c.get("bgpadvertisements", NS, "1-1").is_none());
    assert!(c.get("bgpadvertisements", NS, "1-1-node-a").is_some());
}

#[test]
fn the_local_publishers_two_segment_documents_are_migrated() {
    let node = TestNode::new(json!({"publisher": "local", "node_name": "node-a", "namespace": NS}));
    let dir = node
        .dir
        .path()
        .join("state/bgp")
        .join(NS)
        .join("bgpadvertisements");
    std::fs::create_dir_all(&dir).unwrap();
    let (old, held) = ("o".repeat(64), "h".repeat(64));
    // What our previous version wrote: one document per attachment, two segments.
    let write = |name: &str, cid: &str, v6: &str| {
        let mut doc = legacy(name, "node-a", &[(cid, &live_netns(), v6)]);
        doc["metadata"]["uid"] = json!(format!("uid-{name}"));
        doc["metadata"]["resourceVersion"] = json!("1");
        std::fs::write(dir.join(format!("{name}.json")), doc.to_string()).unwrap();
    };
    write("1-1", &old, "ff01");
    write("2-1", &held, "ff02");
    let read = |name: &str| -> Option<Value> {
        let bytes = std::fs::read(dir.join(format!("{name}.json"))).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    };

    // ADD of another container of attachment 1/1 moves the old record with it.
    let prev = veth_prev("fd20:10:ff04::100:0/96", "172.21.1.3/24", &live_netns());
    add_ok(
        &node,
        "n".repeat(64).as_str(),
        &live_netns(),
        None,
        &stanza("1", "1", &prev),
    );
    assert!(read("1-1").is_none(), "the two-segment document is gone");
    let merged = read("1-1-node-a").unwrap();
    assert_eq!(records(&merged), ["n", "o"], "{merged}");
    assert_eq!(
        merged["spec"]["prefixes"],
        json!(["172.21.1.3/32", "fd20:10:ff01::/96", "fd20:10:ff04::/96"])
    );

    // GC renames the rest (the masters still hold the container, so it stays recorded).
    node.record_master("net1", &held, "eth0", &live_netns(), ("2", "1"));
    node.record_master("net1", &old, "eth0", &live_netns(), ("1", "1"));
    let list = bgp_list("net1", "2", "1");
    let rt = runtime(&node).env(galactic_core::bpf::maps::DATAPATH_ENV, "off");
    rt.lose_cache();
    rt.gc(&list, &[])
        .unwrap_or_else(|e| panic!("GC: {e}; log {:?}", node.log_lines()));
    assert!(read("2-1").is_none());
    let renamed = read("2-1-node-a").unwrap();
    assert_eq!(records(&renamed), ["h"]);
    assert_eq!(renamed["spec"]["prefixes"], json!(["fd20:10:ff02::/96"]));
}

#[test]
fn check_moves_a_go_era_pod_off_the_shared_advertisement() {
    let c = Cluster::new("node-a");
    let (a, b) = ("a".repeat(64), "b".repeat(64));
    c.pod("pa");
    let prev_a = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf_a = stanza("1", "1", &prev_a);
    // What the Go chain left on node-a (its VRF instance and EndpointSlice, as ours), then the
    // pod's record only on the shared object, which node-b wrote last: node-b's router.
    add_ok(&c.node, &a, &live_netns(), Some("pa"), &conf_a);
    let fx = c.server.fixture();
    fx.remove("bgpadvertisements", Some(NS), "1-1-node-a")
        .unwrap();
    let other = "/run/netns/cni-on-node-b";
    let mut shared = legacy(
        "1-1",
        "router-b",
        &[(&a, &live_netns(), "ff01"), (&b, other, "ff02")],
    );
    let v4 = format!("galactic.datum.net/allocated-subnet-ipv4.{}", &a[..41]);
    shared["metadata"]["annotations"][&v4] = json!("172.21.1.2");
    shared["spec"]["prefixes"]
        .as_array_mut()
        .unwrap()
        .push(json!("172.21.1.2/32"));
    let theirs: Vec<(String, Value)> = shared["metadata"]["annotations"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.ends_with(&b[..41]))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    fx.insert(shared);

    for round in 0..2 {
        call(&c.node, "CHECK", &a, &live_netns(), Some("pa"), &conf_a).expect_quiet_success();
        let found = recording(&c, &a);
        assert_eq!(found.len(), 1, "round {round}: advertised once: {found:?}");
        let (name, ours) = &found[0];
        assert_eq!(name, "1-1-node-a", "this node's object");
        assert_eq!(ours["spec"]["routerRef"]["name"], "router-a", "{ours}");
        assert_eq!(
            ours["spec"]["prefixes"],
            json!(["172.21.1.2/32", "fd20:10:ff01::/96"]),
            "{ours}"
        );
        let left = c.get("bgpadvertisements", NS, "1-1").expect("node-b's pod");
        assert_eq!(records(&left), ["b"], "{left}");
        assert_eq!(left["spec"]["prefixes"], json!(["fd20:10:ff02::/96"]));
        assert_eq!(left["spec"]["routerRef"]["name"], "router-b");
        for (key, value) in &theirs {
            assert_eq!(&left["metadata"]["annotations"][key], value, "{key}");
        }
    }
}

#[test]
fn gc_moves_this_nodes_listed_containers_off_the_shared_advertisement() {
    let c = Cluster::new("node-a");
    let (n, a, x, e, b, y) = (
        "n".repeat(64),
        "a".repeat(64),
        "x".repeat(64),
        "e".repeat(64),
        "b".repeat(64),
        "y".repeat(64),
    );
    c.pod("pn");
    // Ours: this node's VRF instance of the VPC and its advertisement.
    let prev_n = veth_prev("fd20:10:ff04::100:0/96", "172.21.1.5/24", &live_netns());
    add_ok(
        &c.node,
        &n,
        &live_netns(),
        Some("pn"),
        &stanza("1", "1", &prev_n),
    );
    // The Go chain's: a (listed, alive here), x (listed, its netns is not here), e (alive here,
    // not listed), b (node-b's), y (listed, alive here, but its master recorded another
    // attachment: this stanza's ids are not its own), last written by node-b.
    let gone = "/run/netns/cni-not-on-this-node";
    let mut shared = legacy(
        "1-1",
        "router-b",
        &[
            (&a, &live_netns(), "ff01"),
            (&x, gone, "ff05"),
            (&e, &live_netns(), "ff06"),
            (&b, "/run/netns/cni-on-node-b", "ff02"),
            (&y, &live_netns(), "ff07"),
        ],
    );
    let v4 = format!("galactic.datum.net/allocated-subnet-ipv4.{}", &a[..41]);
    shared["metadata"]["annotations"][&v4] = json!("172.21.1.2");
    c.server.fixture().insert(shared);
    c.node
        .record_master("net1", &y, "eth0", &live_netns(), ("1", "2"));

    let list = bgp_list("net1", "1", "1");
    let rt = runtime(&c.node).env(galactic_core::bpf::maps::DATAPATH_ENV, "off");
    rt.lose_cache();
    let valid = [
        Attachment::new(&n, &live_netns(), "eth0"),
        Attachment::new(&a, &live_netns(), "eth0"),
        Attachment::new(&x, gone, "eth0"),
        Attachment::new(&y, &live_netns(), "eth0"),
    ];
    for round in 0..2 {
        rt.gc(&list, &valid.iter().collect::<Vec<_>>())
            .unwrap_or_else(|e| panic!("GC: {e}; log {:?}", c.node.log_lines()));
        let found = recording(&c, &a);
        assert_eq!(found.len(), 1, "round {round}: advertised once: {found:?}");
        let ours = &found[0].1;
        assert_eq!(found[0].0, "1-1-node-a");
        assert_eq!(records(ours), ["a", "n"], "{ours}");
        assert_eq!(ours["spec"]["routerRef"]["name"], "router-a");
        assert_eq!(
            ours["spec"]["prefixes"],
            json!([
                "172.21.1.2/32",
                "172.21.1.5/32",
                "fd20:10:ff01::/96",
                "fd20:10:ff04::/96"
            ]),
            "{ours}"
        );
        let left = c.get("bgpadvertisements", NS, "1-1").unwrap();
        assert_eq!(records(&left), ["b", "e", "x", "y"], "{left}");
        assert_eq!(
            left["spec"]["prefixes"],
            json!([
                "fd20:10:ff02::/96",
                "fd20:10:ff05::/96",
                "fd20:10:ff06::/96",
                "fd20:10:ff07::/96"
            ])
        );
        assert_eq!(left["spec"]["routerRef"]["name"], "router-b");
    }
}
