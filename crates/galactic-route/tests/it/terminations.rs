//! galactic-route on real kernel objects: ADD, CHECK, retry, rollback, conflicts and DEL,
//! each after a real master ADD (routing domain, host interface, pod routes) in a throwaway host
//! namespace.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use crate::common::{master_conf, pool_ipam, result_ip, route_conf, table, table_routes};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};

const HOST: &str = "G00000000A001H";

/// The chain of VPC A's attachment 1 (dual-stack pool) with `route` after the master.
fn chain(route: Value) -> Conflist {
    let ipam = pool_ipam("fd66:1::/64", "10.66.0.0/24");
    Conflist::new(
        "1.1.0",
        "tenant-a",
        vec![master_conf("A", "1", ipam), route],
    )
}

/// galactic-route's entry for VPC A's attachment 1.
fn terms(terms: Value) -> Value {
    route_conf("A", "1", terms)
}

/// A host with one pod of VPC A (attachment 1) attached by the veth master; returns the
/// master's result (galactic-route is then run on its own with it).
fn attached(tag: &str) -> (Host, Pod, Value) {
    let host = common::host(tag);
    let pod = Pod::new(&format!("{tag}p"));
    let list = chain(terms(json!([])));
    let master = common::runtime(&host).plugin(&list, 0, "ADD", &pod.attachment(), None);
    (host, pod, master.expect_result())
}

#[test]
fn add_check_retry_del_for_both_families_with_and_without_via() {
    galactic_testkit::privileged!();
    let (host, pod, master) = attached("rt1");
    let (rt, att) = (common::runtime(&host), pod.attachment());
    let (pod4, pod6) = (result_ip(&master, false), result_ip(&master, true));
    let table = table(&host, "A");
    let before = table_routes(&host, table);
    let terms = json!([
        {"network": "198.51.100.9/24"},                 // host bits set on purpose
        {"network": "2001:db8:77::/64"},
        {"network": "203.0.113.0/24", "via": pod4},
        {"network": "2001:db8:78::1/48", "via": pod6},
        {"network": "192.0.2.0/24", "via": "169.254.1.1"}, // not covered: onlink
        {"network": "2001:db8:79::/64", "via": "fe80::1"}  // link-local: no onlink needed
    ]);
    let list = chain(self::terms(terms));
    let route = |command: &str| rt.plugin(&list, 1, command, &att, Some(&master));

    let out = route("ADD");
    assert!(out.success, "{out:?}");
    assert_eq!(out.json(), master, "prevResult is passed on unchanged");

    let after = table_routes(&host, table);
    let added: Vec<String> = after
        .iter()
        .filter(|r| !before.contains(r))
        .cloned()
        .collect();
    // Exactly these, canonical destinations, the device on every route, `onlink` only where the
    // next hop is not covered by a device route of this interface the kernel accepts for a
    // gateway (IPv4: link scope; the pod's own /32 is universe-scoped, as upstream's masters
    // install it, so a termination via the pod is onlink).
    let mut expected = vec![
        format!("198.51.100.0/24 dev {HOST} scope link"),
        format!("2001:db8:77::/64 dev {HOST}"),
        format!("203.0.113.0/24 via {pod4} dev {HOST} onlink"),
        format!("2001:db8:78::/48 via {pod6} dev {HOST}"),
        format!("192.0.2.0/24 via 169.254.1.1 dev {HOST} onlink"),
        format!("2001:db8:79::/64 via fe80::1 dev {HOST}"),
    ];
    expected.sort();
    assert_eq!(added, expected);

    route("CHECK").expect_quiet_success();

    // A retried ADD succeeds with the same result and changes nothing.
    let retry = route("ADD");
    assert!(retry.success, "{retry:?}");
    assert_eq!(retry.json(), master);
    assert_eq!(
        table_routes(&host, table),
        after,
        "no duplicates, nothing replaced"
    );

    // CHECK names every missing route, of both families.
    let t = table.to_string();
    host.netns
        .ip(&["-4", "route", "del", "203.0.113.0/24", "table", &t]);
    host.netns
        .ip(&["-6", "route", "del", "2001:db8:77::/64", "table", &t]);
    let msg = route("CHECK").expect_error(100);
    assert!(
        msg.contains(&format!(
            "termination 203.0.113.0/24 via {pod4} dev {HOST} onlink table {table} is missing"
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
    assert!(route("ADD").success);
    assert_eq!(table_routes(&host, table), after);
    route("CHECK").expect_quiet_success();

    // DEL leaves the routes (VPC-wide state); the master's DEL takes them with the interface.
    route("DEL").expect_quiet_success();
    assert_eq!(table_routes(&host, table), after, "DEL leaves the routes");
    rt.plugin(&list, 0, "DEL", &att, Some(&master))
        .expect_quiet_success();
    let left = table_routes(&host, table);
    assert!(
        !left.iter().any(|r| r.contains(HOST)),
        "no route through the deleted interface: {left:#?}"
    );
    route("DEL").expect_quiet_success();
}

#[test]
fn check_names_a_route_that_points_elsewhere_and_canonicalises() {
    galactic_testkit::privileged!();
    let (host, pod, master) = attached("rt2");
    let (rt, att) = (common::runtime(&host), pod.attachment());
    let pod4 = result_ip(&master, false);
    let list = chain(terms(
        json!([{"network": "198.51.100.0/24", "via": pod4}, {"network": "2001:db8:77::5/64"}]),
    ));
    let route = |command: &str| rt.plugin(&list, 1, command, &att, Some(&master));
    assert!(route("ADD").success);
    route("CHECK").expect_quiet_success();

    // Someone re-points the IPv4 termination to another next hop.
    let t = table(&host, "A").to_string();
    host.netns.ip(&[
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
    let msg = route("CHECK").expect_error(100);
    assert!(
        msg.contains(&format!(
            "termination 198.51.100.0/24 via {pod4} dev {HOST} onlink table {t} is missing: the table routes 198.51.100.0/24 via 169.254.9.9 dev {HOST} onlink table {t} instead"
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
    galactic_testkit::privileged!();
    let (host, pod, master) = attached("rt3");
    let (rt, att) = (common::runtime(&host), pod.attachment());
    let route_add = |t: Value| rt.plugin(&chain(terms(t)), 1, "ADD", &att, Some(&master));
    let (pod4, pod6) = (result_ip(&master, false), result_ip(&master, true));
    let table = table(&host, "A");
    // A previous ADD installed one termination; the failing ADDs must leave it alone.
    assert!(route_add(json!([{"network": "198.51.100.0/24"}])).success);
    let snapshot = table_routes(&host, table);
    let record = std::fs::read_to_string(common::route_record(&host, "A")).unwrap();

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
        let list = chain(self::terms(terms.clone()));
        let armed = rt.clone().env("GALACTIC_FAILPOINTS", failpoint);
        let out = armed.plugin(&list, 1, "ADD", &att, Some(&master));
        let msg = out.expect_error(999);
        assert!(msg.contains(failpoint), "{msg}");
        assert_eq!(
            table_routes(&host, table),
            snapshot,
            "{failpoint}: only the routes this ADD added are removed"
        );
        assert_eq!(
            std::fs::read_to_string(common::route_record(&host, "A")).unwrap(),
            record,
            "{failpoint}: the record is restored"
        );
    }
    // Unarmed, the same ADD succeeds.
    let list = chain(self::terms(terms));
    assert!(rt.plugin(&list, 1, "ADD", &att, Some(&master)).success);
    assert_eq!(table_routes(&host, table).len(), snapshot.len() + 3);
    rt.plugin(&list, 1, "CHECK", &att, Some(&master))
        .expect_quiet_success();
}

#[test]
fn an_existing_route_elsewhere_is_a_conflict_and_nothing_is_installed() {
    galactic_testkit::privileged!();
    let (host, pod, master) = attached("rt4");
    let (rt, att) = (common::runtime(&host), pod.attachment());
    let route_add = |t: Value| rt.plugin(&chain(terms(t)), 1, "ADD", &att, Some(&master));
    let table = table(&host, "A");
    let t = table.to_string();
    // No dummy driver on every kernel; a veth pair is always there.
    host.netns.ip(&[
        "link", "add", "other0", "type", "veth", "peer", "name", "other1",
    ]);
    host.netns.ip(&["link", "set", "other0", "up"]);
    host.netns.ip(&[
        "-4",
        "route",
        "add",
        "198.51.100.0/24",
        "dev",
        "other0",
        "table",
        &t,
    ]);
    host.netns.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:77::/64",
        "dev",
        "other0",
        "table",
        &t,
    ]);
    let snapshot = table_routes(&host, table);

    for (conflicting, family_free) in [
        ("198.51.100.0/24", json!({"network": "2001:db8:99::/64"})),
        ("2001:db8:77::/64", json!({"network": "203.0.113.0/24"})),
    ] {
        // The conflicting entry comes last: validation must stop the ADD before anything else.
        let out = route_add(json!([family_free, {"network": conflicting}]));
        let msg = out.expect_error(7);
        assert!(
            msg.contains(&format!("termination {conflicting} dev {HOST} table {t} conflicts with {conflicting} dev other0 table {t}")),
            "{msg}"
        );
        assert_eq!(
            table_routes(&host, table),
            snapshot,
            "nothing installed, nothing replaced"
        );
        assert!(
            !common::route_record(&host, "A").exists(),
            "nothing recorded"
        );
    }

    // A changed next hop for a network this plugin routes is not silently applied either.
    assert!(route_add(json!([{"network": "203.0.113.0/24"}])).success);
    let pod4 = result_ip(&master, false);
    let msg = route_add(json!([{"network": "203.0.113.0/24", "via": pod4}])).expect_error(7);
    assert!(
        msg.contains(&format!(
            "conflicts with 203.0.113.0/24 dev {HOST} table {t}"
        )),
        "{msg}"
    );

    // The table backend's `unreachable default` (nothing falls through to `main`) makes a
    // default termination a conflict; a VRF table has no such route.
    if common::backend(&host, "A") == "table" {
        let msg = route_add(json!([{"network": "0.0.0.0/0"}])).expect_error(7);
        assert!(
            msg.contains(&format!("conflicts with unreachable 0.0.0.0/0 table {t}")),
            "{msg}"
        );
    }
}

#[test]
fn chain_order_and_consistency_errors() {
    galactic_testkit::privileged!();
    let (host, pod, master) = attached("rt5");
    let (rt, att) = (common::runtime(&host), pod.attachment());
    let route_add =
        |route: Value, prev: &Value| rt.plugin(&chain(route), 1, "ADD", &att, Some(prev));
    let terms = json!([{"network": "198.51.100.0/24"}]);

    // Another attachment's stanza with this attachment's result: a configuration error.
    let msg = route_add(route_conf("A", "2", terms.clone()), &master).expect_error(7);
    assert!(
        msg.contains(HOST) && msg.contains("G00000000A002H"),
        "{msg}"
    );

    // The checks past the chain check: a master record of the named attachment exists (as if
    // its master's ADD had died before creating the interface or the domain).
    let network = chain(route_conf("A", "1", json!([]))).name;
    let netns = pod.netns_path();
    host.node
        .record_master(&network, &pod.id, &pod.ifname, &netns, ("A", "2"));
    host.node
        .record_master(&network, &pod.id, &pod.ifname, &netns, ("B", "1"));

    // A result without a host interface: the computed one must exist.
    let guest_only =
        json!({"cniVersion": "1.1.0", "interfaces": [master["interfaces"][1].clone()]});
    let msg = route_add(route_conf("A", "2", terms.clone()), &guest_only).expect_error(7);
    assert!(
        msg.contains("host interface G00000000A002H does not exist"),
        "{msg}"
    );

    // A VPC without a routing domain on this node.
    let msg = route_add(route_conf("B", "1", terms), &guest_only).expect_error(7);
    assert!(
        msg.contains("VPC B has no routing domain on this node"),
        "{msg}"
    );
}
