//! galactic-route on real kernel objects: ADD, CHECK, retry, rollback, conflicts and DEL,
//! each after a real master ADD (routing domain, host interface, pod routes) in a throwaway host
//! namespace.

mod common;

use common::{master_conf, pool_ipam, result_ip, route_conf, with_prev, Node, Pod};
use galactic_testkit::privileged::privileged;
use galactic_testkit::Outcome;
use serde_json::{json, Value};

const HOST: &str = "G00000000A001H";

/// A node with one pod of VPC A (attachment 1) attached by the veth master with a dual-stack
/// pool; returns the master's result.
fn attached(tag: &str) -> (Node, Pod, Value) {
    let node = Node::new(tag);
    let pod = Pod::new(&format!("{tag}p"));
    let ipam = pool_ipam(&node, "fd66:1::/64", "10.66.0.0/24");
    let result = node.add(&pod, &master_conf("1.1.0", "tenant-a", "A", "1", ipam));
    (node, pod, result)
}

fn route_add(node: &Node, pod: &Pod, prev: &Value, terms: Value) -> Outcome {
    let conf = route_conf("1.1.0", "tenant-a", "A", "1", terms);
    node.call("ADD", pod, &with_prev(&conf, prev))
}

#[test]
fn add_check_retry_del_for_both_families_with_and_without_via() {
    if !privileged("add_check_retry_del_for_both_families_with_and_without_via") {
        return;
    }
    let (node, pod, master) = attached("rt1");
    let (pod4, pod6) = (result_ip(&master, false), result_ip(&master, true));
    let table = node.table("A");
    let before = node.table_routes(table);
    let terms = json!([
        {"network": "198.51.100.9/24"},                 // host bits set on purpose
        {"network": "2001:db8:77::/64"},
        {"network": "203.0.113.0/24", "via": pod4},
        {"network": "2001:db8:78::1/48", "via": pod6},
        {"network": "192.0.2.0/24", "via": "169.254.1.1"}, // not covered: onlink
        {"network": "2001:db8:79::/64", "via": "fe80::1"}  // link-local: no onlink needed
    ]);
    let conf = with_prev(&route_conf("1.1.0", "tenant-a", "A", "1", terms), &master);

    let out = node.call("ADD", &pod, &conf);
    assert!(out.success, "{out:?}");
    assert_eq!(out.json(), master, "prevResult is passed on unchanged");

    let after = node.table_routes(table);
    let added: Vec<String> = after
        .iter()
        .filter(|r| !before.contains(r))
        .cloned()
        .collect();
    // Exactly these, canonical destinations, the device on every route, `onlink` only where the
    // next hop is not covered by a device route of this interface.
    let mut expected = vec![
        format!("198.51.100.0/24 dev {HOST} scope link"),
        format!("2001:db8:77::/64 dev {HOST}"),
        format!("203.0.113.0/24 via {pod4} dev {HOST}"),
        format!("2001:db8:78::/48 via {pod6} dev {HOST}"),
        format!("192.0.2.0/24 via 169.254.1.1 dev {HOST} onlink"),
        format!("2001:db8:79::/64 via fe80::1 dev {HOST}"),
    ];
    expected.sort();
    assert_eq!(added, expected);

    node.call("CHECK", &pod, &conf).expect_quiet_success();

    // A retried ADD succeeds with the same result and changes nothing.
    let retry = node.call("ADD", &pod, &conf);
    assert!(retry.success, "{retry:?}");
    assert_eq!(retry.json(), master);
    assert_eq!(
        node.table_routes(table),
        after,
        "no duplicates, nothing replaced"
    );

    // CHECK names every missing route, of both families.
    let t = table.to_string();
    node.host
        .ip(&["-4", "route", "del", "203.0.113.0/24", "table", &t]);
    node.host
        .ip(&["-6", "route", "del", "2001:db8:77::/64", "table", &t]);
    let msg = node.call("CHECK", &pod, &conf).expect_error(100);
    assert!(
        msg.contains(&format!(
            "termination 203.0.113.0/24 via {pod4} dev {HOST} table {table} is missing"
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "termination 2001:db8:77::/64 dev {HOST} table {table} is missing"
        )),
        "{msg}"
    );
    assert!(!msg.contains("198.51.100.0/24"), "only what differs: {msg}");

    // A retried ADD repairs exactly what is missing.
    assert!(node.call("ADD", &pod, &conf).success);
    assert_eq!(node.table_routes(table), after);
    node.call("CHECK", &pod, &conf).expect_quiet_success();

    // DEL leaves the routes (VPC-wide state); the master's DEL takes them with the interface.
    node.call("DEL", &pod, &conf).expect_quiet_success();
    assert_eq!(node.table_routes(table), after, "DEL leaves the routes");
    let master_del = with_prev(
        &master_conf(
            "1.1.0",
            "tenant-a",
            "A",
            "1",
            pool_ipam(&node, "fd66:1::/64", "10.66.0.0/24"),
        ),
        &master,
    );
    node.call("DEL", &pod, &master_del).expect_quiet_success();
    let left = node.table_routes(table);
    assert!(
        !left.iter().any(|r| r.contains(HOST)),
        "no route through the deleted interface: {left:#?}"
    );
    node.call("DEL", &pod, &conf).expect_quiet_success();
}

#[test]
fn check_names_a_route_that_points_elsewhere_and_canonicalises() {
    if !privileged("check_names_a_route_that_points_elsewhere_and_canonicalises") {
        return;
    }
    let (node, pod, master) = attached("rt2");
    let pod4 = result_ip(&master, false);
    let terms =
        json!([{"network": "198.51.100.0/24", "via": pod4}, {"network": "2001:db8:77::5/64"}]);
    assert!(route_add(&node, &pod, &master, terms.clone()).success);
    let conf = with_prev(&route_conf("1.1.0", "tenant-a", "A", "1", terms), &master);
    node.call("CHECK", &pod, &conf).expect_quiet_success();

    // Someone re-points the IPv4 termination to another next hop.
    let t = node.table("A").to_string();
    node.host.ip(&[
        "-4",
        "route",
        "replace",
        "198.51.100.0/24",
        "via",
        "169.254.9.9",
        "dev",
        HOST,
        "onlink",
        "table",
        &t,
    ]);
    let msg = node.call("CHECK", &pod, &conf).expect_error(100);
    assert!(
        msg.contains(&format!(
            "termination 198.51.100.0/24 via {pod4} dev {HOST} table {t} is missing: the table routes 198.51.100.0/24 via 169.254.9.9 dev {HOST} onlink table {t} instead"
        )),
        "{msg}"
    );
    assert!(
        !msg.contains("2001:db8:77::"),
        "the IPv6 one is fine: {msg}"
    );
}

#[test]
fn a_failed_add_removes_only_the_routes_it_added() {
    if !privileged("a_failed_add_removes_only_the_routes_it_added") {
        return;
    }
    let (node, pod, master) = attached("rt3");
    let (pod4, pod6) = (result_ip(&master, false), result_ip(&master, true));
    let table = node.table("A");
    // A previous ADD installed one termination; the failing ADDs must leave it alone.
    assert!(
        route_add(
            &node,
            &pod,
            &master,
            json!([{"network": "198.51.100.0/24"}])
        )
        .success
    );
    let snapshot = node.table_routes(table);
    let record = std::fs::read_to_string(node.route_record("A")).unwrap();

    // Installation order: IPv4 first, then IPv6, each in configured order; the kept route is
    // present, so route 1 is the IPv4 via-route, 2 the IPv6 device route, 3 the IPv6 via-route.
    let terms = json!([
        {"network": "198.51.100.0/24"},
        {"network": "203.0.113.0/24", "via": pod4},
        {"network": "2001:db8:77::/64"},
        {"network": "2001:db8:78::/64", "via": pod6}
    ]);
    for failpoint in [
        "after-route-record",
        "after-route-1",
        "after-route-2",
        "after-route-3",
    ] {
        let conf = with_prev(
            &route_conf("1.1.0", "tenant-a", "A", "1", terms.clone()),
            &master,
        );
        let out = node.call_with("ADD", &pod, &conf, &[("GALACTIC_FAILPOINTS", failpoint)]);
        let msg = out.expect_error(999);
        assert!(msg.contains(failpoint), "{msg}");
        assert_eq!(
            node.table_routes(table),
            snapshot,
            "{failpoint}: only the routes this ADD added are removed"
        );
        assert_eq!(
            std::fs::read_to_string(node.route_record("A")).unwrap(),
            record,
            "{failpoint}: the record is restored"
        );
    }
    // Unarmed, the same ADD succeeds.
    let conf = with_prev(&route_conf("1.1.0", "tenant-a", "A", "1", terms), &master);
    assert!(node.call("ADD", &pod, &conf).success);
    assert_eq!(node.table_routes(table).len(), snapshot.len() + 3);
    node.call("CHECK", &pod, &conf).expect_quiet_success();
}

#[test]
fn an_existing_route_elsewhere_is_a_conflict_and_nothing_is_installed() {
    if !privileged("an_existing_route_elsewhere_is_a_conflict_and_nothing_is_installed") {
        return;
    }
    let (node, pod, master) = attached("rt4");
    let table = node.table("A");
    let t = table.to_string();
    // No dummy driver on every kernel; a veth pair is always there.
    node.host.ip(&[
        "link", "add", "other0", "type", "veth", "peer", "name", "other1",
    ]);
    node.host.ip(&["link", "set", "other0", "up"]);
    node.host.ip(&[
        "-4",
        "route",
        "add",
        "198.51.100.0/24",
        "dev",
        "other0",
        "table",
        &t,
    ]);
    node.host.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:77::/64",
        "dev",
        "other0",
        "table",
        &t,
    ]);
    let snapshot = node.table_routes(table);

    for (conflicting, family_free) in [
        ("198.51.100.0/24", json!({"network": "2001:db8:99::/64"})),
        ("2001:db8:77::/64", json!({"network": "203.0.113.0/24"})),
    ] {
        // The conflicting entry comes last: validation must stop the ADD before anything else.
        let out = route_add(
            &node,
            &pod,
            &master,
            json!([family_free, {"network": conflicting}]),
        );
        let msg = out.expect_error(7);
        assert!(
            msg.contains(&format!("termination {conflicting} dev {HOST} table {t} conflicts with {conflicting} dev other0 table {t}")),
            "{msg}"
        );
        assert_eq!(
            node.table_routes(table),
            snapshot,
            "nothing installed, nothing replaced"
        );
        assert!(!node.route_record("A").exists(), "nothing recorded");
    }

    // A changed next hop for a network this plugin routes is not silently applied either.
    assert!(route_add(&node, &pod, &master, json!([{"network": "203.0.113.0/24"}])).success);
    let pod4 = result_ip(&master, false);
    let msg = route_add(
        &node,
        &pod,
        &master,
        json!([{"network": "203.0.113.0/24", "via": pod4}]),
    )
    .expect_error(7);
    assert!(
        msg.contains(&format!(
            "conflicts with 203.0.113.0/24 dev {HOST} table {t}"
        )),
        "{msg}"
    );

    // The table backend's `unreachable default` (nothing falls through to `main`) makes a
    // default termination a conflict; a VRF table has no such route.
    if node.backend("A") == "table" {
        let msg =
            route_add(&node, &pod, &master, json!([{"network": "0.0.0.0/0"}])).expect_error(7);
        assert!(
            msg.contains(&format!("conflicts with unreachable 0.0.0.0/0 table {t}")),
            "{msg}"
        );
    }
}

#[test]
fn chain_order_and_consistency_errors() {
    if !privileged("chain_order_and_consistency_errors") {
        return;
    }
    let (node, pod, master) = attached("rt5");
    let terms = json!([{"network": "198.51.100.0/24"}]);

    // Another attachment's stanza with this attachment's result.
    let conf = with_prev(
        &route_conf("1.1.0", "tenant-a", "A", "2", terms.clone()),
        &master,
    );
    let msg = node.call("ADD", &pod, &conf).expect_error(6);
    assert!(
        msg.contains(HOST) && msg.contains("G00000000A002H"),
        "{msg}"
    );

    // A result without a host interface: the computed one must exist.
    let guest_only =
        json!({"cniVersion": "1.1.0", "interfaces": [master["interfaces"][1].clone()]});
    let conf = with_prev(
        &route_conf("1.1.0", "tenant-a", "A", "2", terms.clone()),
        &guest_only,
    );
    let msg = node.call("ADD", &pod, &conf).expect_error(7);
    assert!(
        msg.contains("host interface G00000000A002H does not exist"),
        "{msg}"
    );

    // A VPC without a routing domain on this node.
    let conf = with_prev(
        &route_conf("1.1.0", "tenant-a", "B", "1", terms),
        &guest_only,
    );
    let msg = node.call("ADD", &pod, &conf).expect_error(7);
    assert!(
        msg.contains("VPC B has no routing domain on this node"),
        "{msg}"
    );
}
