//! How many requests galactic-bgp's ADD and DEL make, by verb and resource, counted by the
//! loopback API server (a regression in the count fails here, not in a timing), and the paths a
//! request that meets another writer's object takes.

// Helpers outside #[test] functions panic on fixture failures by design.
#![allow(clippy::unwrap_used)]

use crate::cluster::*;
use galactic_testkit::apiserver::{count_requests, Fault, FaultAction, RequestCounts};
use galactic_testkit::runtime::Attachment;
use galactic_testkit::Outcome;
use serde_json::json;

/// `command` for container `cid` of pod `pod`, with `K8S_POD_UID` when `uid` is given (as
/// containerd and CRI-O pass it); the requests it made.
fn counted(
    c: &Cluster,
    command: &str,
    cid: &str,
    (pod, uid): (&str, Option<&str>),
    stanza: &Stanza,
) -> (Outcome, RequestCounts) {
    let fx = c.server.fixture();
    let before = fx.request_count();
    let mut att = Attachment::new(cid, &live_netns(), "eth0")
        .arg("IgnoreUnknown", "1")
        .arg("K8S_POD_NAMESPACE", "pods")
        .arg("K8S_POD_NAME", pod);
    if let Some(uid) = uid {
        att = att.arg("K8S_POD_UID", uid);
    }
    let entry = &stanza.list.plugins[0];
    let ids = (
        entry["vpc"].as_str().unwrap(),
        entry["vpcattachment"].as_str().unwrap(),
    );
    if command == "ADD" {
        c.node
            .record_master(&stanza.list.name, cid, "eth0", &live_netns(), ids);
    }
    let out = runtime(&c.node)
        .env(galactic_core::bpf::maps::DATAPATH_ENV, "off")
        .plugin(&stanza.list, 0, command, &att, stanza.prev.as_ref());
    let requests = fx.requests()[before..].to_vec();
    assert!(
        requests.iter().all(|r| r.version == "HTTP/2.0"),
        "every request over the one HTTP/2 connection: {requests:?}"
    );
    (out, count_requests(&requests))
}

fn counts(pairs: &[(&str, &str, usize)]) -> RequestCounts {
    pairs
        .iter()
        .map(|(verb, resource, n)| ((verb.to_string(), resource.to_string()), *n))
        .collect()
}

#[test]
fn add_and_del_make_the_requests_they_need_and_no_more() {
    let c = Cluster::new("node-a");
    let uid = c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let cid = "c".repeat(64);

    // The VPC's first ADD: the reads in one round, the instance, both creates in one round.
    let (out, first) = counted(&c, "ADD", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    assert_eq!(
        first,
        counts(&[
            ("list", "bgprouters", 1),
            ("get", "bgpadvertisements", 1),
            ("list", "bgpvrfinstances", 1),
            ("create", "bgpvrfinstances", 1),
            ("create", "bgpadvertisements", 1),
            ("create", "endpointslices", 1),
        ]),
        "the VPC's first ADD (before: 10 requests)"
    );
    // Without K8S_POD_UID the Pod is read, in the first round.
    let (out, _) = counted(&c, "DEL", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    let (out, unnamed) = counted(&c, "ADD", &cid, ("p1", None), &conf);
    assert!(out.success, "{out:?}");
    assert_eq!(unnamed.values().sum::<usize>(), 7, "{unnamed:?}");
    assert_eq!(unnamed.get(&("get".into(), "pods".into())), Some(&1));

    // Another attachment of the VPC: its ADD takes the VRF id from this one's record.
    c.pod("p2");
    let prev2 = veth_prev("fd20:10:ff02::100:0/96", "172.21.2.2/24", &live_netns());
    let conf2 = stanza("1", "2", &prev2);
    let uid2 = c.get("pods", "pods", "p2").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let (out, present) = counted(&c, "ADD", "two", ("p2", Some(&uid2)), &conf2);
    assert!(out.success, "{out:?}");
    assert_eq!(
        present,
        counts(&[
            ("list", "bgprouters", 1),
            ("get", "bgpadvertisements", 1),
            ("create", "bgpadvertisements", 1),
            ("create", "endpointslices", 1),
        ]),
        "an ADD of a VPC published here (before: 9 requests)"
    );
    let adv = c.get("bgpadvertisements", NS, "1-2-node-a").unwrap();
    assert_eq!(adv["spec"]["vrfID"], 1, "the recorded VRF id: {adv}");

    // DEL of an attachment the VPC keeps: both recorded deletes in one round.
    let (out, stays) = counted(&c, "DEL", "two", ("p2", Some(&uid2)), &conf2);
    assert!(out.success, "{out:?}");
    assert_eq!(
        stays,
        counts(&[
            ("delete", "bgpadvertisements", 1),
            ("delete", "endpointslices", 1)
        ]),
        "a DEL the VPC stays after (before: 5 requests)"
    );
    // The VPC's last DEL: and its instance by the recorded uid.
    let (out, last) = counted(&c, "DEL", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    assert_eq!(
        last,
        counts(&[
            ("delete", "bgpadvertisements", 1),
            ("delete", "endpointslices", 1),
            ("delete", "bgpvrfinstances", 1),
        ]),
        "the VPC's last DEL (before: 7 requests)"
    );
    for (plural, ns, name) in [
        ("bgpadvertisements", NS, "1-1-node-a"),
        ("bgpadvertisements", NS, "1-2-node-a"),
        ("bgpvrfinstances", NS, "1-node-a"),
        ("endpointslices", "pods", "p1"),
        ("endpointslices", "pods", "p2"),
    ] {
        assert!(c.get(plural, ns, name).is_none(), "{plural} {name} is gone");
    }
}

/// Whether `requests` has a request of `method` to a path containing `path`.
fn sent(requests: &[galactic_testkit::apiserver::Seen], method: &str, path: &str) -> bool {
    requests
        .iter()
        .any(|r| r.method == method && r.path.contains(path))
}

#[test]
fn the_vpcs_first_add_creates_its_instance_with_the_objects_naming_its_id() {
    let c = Cluster::new("node-a");
    let uid = c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let cid = "c".repeat(64);
    let fx = c.server.fixture();
    // The instance's create fails for good: sent in a round of its own, before the objects
    // that name its id, it would stop the ADD before they are sent.
    fx.inject(Fault::on(
        "POST",
        "/bgpvrfinstances",
        1,
        FaultAction::Status(403),
    ));
    let before = fx.request_count();
    let (out, seen) = counted(&c, "ADD", &cid, ("p1", Some(&uid)), &conf);
    assert!(!out.success, "{out:?}");
    let requests = fx.requests()[before..].to_vec();
    assert!(
        sent(&requests, "POST", "/bgpadvertisements") && sent(&requests, "POST", "/endpointslices"),
        "the advertisement and the EndpointSlice in flight with the instance: {seen:?}"
    );
    // The failed ADD leaves nothing: both objects it created are deleted again.
    for (plural, ns, name) in [
        ("bgpadvertisements", NS, "1-1-node-a"),
        ("bgpvrfinstances", NS, "1-node-a"),
        ("endpointslices", "pods", "p1"),
    ] {
        assert!(c.get(plural, ns, name).is_none(), "{plural} {name} is gone");
    }
    // The runtime's retry publishes all three, with the id the instance has.
    let (out, _) = counted(&c, "ADD", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    let vrf = c.get("bgpvrfinstances", NS, "1-node-a").unwrap();
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(vrf["spec"]["vrfID"], 1, "{vrf}");
    assert_eq!(adv["spec"]["vrfID"], 1, "{adv}");
}

#[test]
fn an_instance_created_meanwhile_with_another_id_fails_the_add_and_its_retry_reuses_that_id() {
    let c = Cluster::new("node-a");
    let uid = c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let cid = "c".repeat(64);
    let fx = c.server.fixture();
    // A writer outside the node's VRF id lock creates the instance of the name, with another
    // id, after the first round's list: the ADD's create meets 409, and the advertisement and
    // the EndpointSlice created with it name the id it claimed, not the instance's.
    let theirs = json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPVRFInstance",
        "metadata": {"name": "1-node-a", "namespace": NS},
        "spec": {"routerRef": {"name": "router-a"}, "vrfID": 7,
                 "importRouteTargets": [{"value": "65000:1"}],
                 "exportRouteTargets": [{"value": "65000:1"}]}});
    fx.inject(Fault::on(
        "POST",
        "/bgpvrfinstances",
        1,
        FaultAction::InsertFirst(theirs),
    ));
    let before = fx.request_count();
    let (out, seen) = counted(&c, "ADD", &cid, ("p1", Some(&uid)), &conf);
    let msg = out.expect_error(11);
    assert!(msg.contains("created meanwhile with id 7"), "{msg}");
    let requests = fx.requests()[before..].to_vec();
    assert!(
        requests
            .iter()
            .any(|r| r.method == "POST" && r.path.contains("/bgpvrfinstances") && r.status == 409),
        "the instance's create met the other writer's: {seen:?}"
    );
    // The contended ADD leaves nothing of its own: both objects it created are deleted again.
    for (plural, ns, name) in [
        ("bgpadvertisements", NS, "1-1-node-a"),
        ("endpointslices", "pods", "p1"),
    ] {
        assert!(c.get(plural, ns, name).is_none(), "{plural} {name} is gone");
    }
    let vrf = c.get("bgpvrfinstances", NS, "1-node-a").unwrap();
    assert_eq!(
        vrf["spec"]["vrfID"], 7,
        "the other writer's instance stays: {vrf}"
    );
    // The runtime's retry publishes with the id the instance has.
    let (out, _) = counted(&c, "ADD", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    let vrf = c.get("bgpvrfinstances", NS, "1-node-a").unwrap();
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(vrf["spec"]["vrfID"], 7, "{vrf}");
    assert_eq!(adv["spec"]["vrfID"], 7, "the advertisement names it: {adv}");
}

#[test]
fn an_instance_create_that_meets_409_reuses_the_instance_it_reads() {
    let c = Cluster::new("node-a");
    let uid = c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let cid = "c".repeat(64);
    let fx = c.server.fixture();
    // Another writer's instance of the name, absent from the first round's list: the create
    // meets 409, the router's instances are listed again and the instance found is reused.
    fx.inject(Fault::on(
        "POST",
        "/bgpvrfinstances",
        1,
        FaultAction::Status(409),
    ));
    let (out, seen) = counted(&c, "ADD", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    assert_eq!(
        seen.get(&("list".into(), "bgpvrfinstances".into())),
        Some(&2),
        "listed again after the 409: {seen:?}"
    );
    let vrf = c.get("bgpvrfinstances", NS, "1-node-a").unwrap();
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(vrf["spec"]["vrfID"], 1, "{vrf}");
    assert_eq!(adv["spec"]["vrfID"], 1, "the advertisement names it: {adv}");
    let (out, _) = counted(&c, "DEL", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    assert!(c.get("bgpvrfinstances", NS, "1-node-a").is_none());
}

#[test]
fn creates_that_meet_another_writers_objects_read_and_rewrite_them() {
    let c = Cluster::new("node-a");
    let uid = c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let (one, two) = ("a".repeat(64), "b".repeat(64));
    let (out, _) = counted(&c, "ADD", &one, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    let slice_uid = c.get("endpointslices", "pods", "p1").unwrap()["metadata"]["uid"].clone();

    // A second container of the attachment, of the same pod: both creates meet 409.
    let prev2 = veth_prev("fd20:10:ff01::300:0/96", "172.21.1.9/24", &live_netns());
    let conf2 = stanza("1", "1", &prev2);
    let (out, seen) = counted(&c, "ADD", &two, ("p1", Some(&uid)), &conf2);
    assert!(out.success, "{out:?}");
    for resource in ["bgpadvertisements", "endpointslices"] {
        assert_eq!(
            seen.get(&("create".into(), resource.into())),
            Some(&1),
            "{seen:?}"
        );
        assert_eq!(
            seen.get(&("update".into(), resource.into())),
            Some(&1),
            "{seen:?}"
        );
    }
    let conflicts = c
        .server
        .fixture()
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.status == 409)
        .count();
    assert_eq!(conflicts, 2, "both creates met the existing objects");
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(
        adv["spec"]["prefixes"],
        json!(["172.21.1.2/32", "172.21.1.9/32", "fd20:10:ff01::/96"]),
        "both containers' records: {adv}"
    );
    let slice = c.get("endpointslices", "pods", "p1").unwrap();
    assert_eq!(
        slice["metadata"]["uid"], slice_uid,
        "rewritten, not re-created"
    );
    assert_eq!(
        slice["endpoints"][0]["addresses"],
        json!(["fd20:10:ff01::300:0"])
    );

    // `one`'s record says its ADD left it the only container: the advertisement changed since,
    // so its DEL's delete meets 409 and it retracts from what it reads instead.
    let (out, seen) = counted(&c, "DEL", &one, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    assert!(
        seen.contains_key(&("get".into(), "bgpadvertisements".into())),
        "{seen:?}"
    );
    let adv = c.get("bgpadvertisements", NS, "1-1-node-a").unwrap();
    assert_eq!(
        adv["spec"]["prefixes"],
        json!(["172.21.1.9/32", "fd20:10:ff01::/96"]),
        "`two`'s record is left: {adv}"
    );
    assert!(
        c.get("bgpvrfinstances", NS, "1-node-a").is_some(),
        "`two` keeps the VPC"
    );
}

#[test]
fn del_reads_what_changed_since_its_add_and_retracts_as_before() {
    let c = Cluster::new("node-a");
    let uid = c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let cid = "c".repeat(64);
    let (out, _) = counted(&c, "ADD", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    // Someone re-made the slice and the instance (new uids): the recorded deletes meet 409.
    let fx = c.server.fixture();
    for (plural, ns, name) in [
        ("endpointslices", "pods", "p1"),
        ("bgpvrfinstances", NS, "1-node-a"),
    ] {
        let mut object = fx.remove(plural, Some(ns), name).unwrap();
        object["metadata"]
            .as_object_mut()
            .unwrap()
            .retain(|k, _| ["name", "namespace", "labels", "annotations"].contains(&k.as_str()));
        fx.insert(object);
    }
    let (out, seen) = counted(&c, "DEL", &cid, ("p1", Some(&uid)), &conf);
    assert!(out.success, "{out:?}");
    for resource in ["endpointslices", "bgpvrfinstances"] {
        assert_eq!(
            seen.get(&("get".into(), resource.into())),
            Some(&1),
            "{seen:?}"
        );
        assert_eq!(
            seen.get(&("delete".into(), resource.into())),
            Some(&2),
            "{seen:?}"
        );
    }
    assert!(
        c.get("endpointslices", "pods", "p1").is_none(),
        "ours by its tenant label"
    );
    assert!(c.get("bgpadvertisements", NS, "1-1-node-a").is_none());
    assert!(
        c.get("bgpvrfinstances", NS, "1-node-a").is_none(),
        "the VPC's last DEL"
    );
}
