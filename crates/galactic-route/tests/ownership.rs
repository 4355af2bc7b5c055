//! The ownership record on real kernel objects: GC removes exactly the recorded routes of
//! domains that are gone, and concurrent ADDs of one VPC lose no record entry.

mod common;

use common::{master_conf, pool_ipam, result_ip, route_conf, with_prev, Node, Pod};
use galactic_testkit::privileged::privileged;
use serde_json::{json, Value};

#[test]
fn gc_removes_routes_whose_domain_is_gone_and_nothing_else() {
    if !privileged("gc_removes_routes_whose_domain_is_gone_and_nothing_else") {
        return;
    }
    let node = Node::new("rt6");
    let (pa, pb) = (Pod::new("rt6a"), Pod::new("rt6b"));
    let conf_a = master_conf(
        "1.1.0",
        "net-a",
        "A",
        "1",
        pool_ipam(&node, "fd66:1::/64", "10.66.0.0/24"),
    );
    let conf_b = master_conf(
        "1.1.0",
        "net-b",
        "B",
        "1",
        pool_ipam(&node, "fd67:1::/64", "10.67.0.0/24"),
    );
    let (ra, rb) = (node.add(&pa, &conf_a), node.add(&pb, &conf_b));
    let route_a = with_prev(
        &route_conf(
            "1.1.0",
            "net-a",
            "A",
            "1",
            json!([{"network": "198.51.100.0/24"}, {"network": "2001:db8:77::/64", "via": result_ip(&ra, true)}]),
        ),
        &ra,
    );
    let route_b = with_prev(
        &route_conf(
            "1.1.0",
            "net-b",
            "B",
            "1",
            json!([{"network": "203.0.113.0/24"}, {"network": "2001:db8:88::/64"}]),
        ),
        &rb,
    );
    assert!(node.call("ADD", &pa, &route_a).success);
    assert!(node.call("ADD", &pb, &route_b).success);
    let (ta, tb) = (node.table("A"), node.table("B"));
    // A route through A's interface that galactic-route did not install.
    let host_a = "G00000000A001H";
    node.host.ip(&[
        "-4",
        "route",
        "add",
        "192.0.2.0/24",
        "dev",
        host_a,
        "table",
        &ta.to_string(),
    ]);
    let (all_a, all_b) = (node.table_routes(ta), node.table_routes(tb));
    let gc_conf = json!({"cniVersion": "1.1.0", "name": "net-a", "type": "galactic-route"});

    // Both domains exist: GC keeps everything.
    node.gc(&gc_conf).expect_quiet_success();
    assert_eq!(node.table_routes(ta), all_a);
    assert_eq!(node.table_routes(tb), all_b);

    // VPC A's domain record is gone while its host interface survives (state lost or torn down
    // behind the plugins' back); the master's own teardown would take the routes with the
    // interface, so this is the case only GC can clean up.
    std::fs::remove_file(node.domain_record("A")).unwrap();
    node.gc(&gc_conf).expect_quiet_success();
    let left_a = node.table_routes(ta);
    let removed: Vec<&String> = all_a.iter().filter(|r| !left_a.contains(r)).collect();
    assert_eq!(
        removed.len(),
        2,
        "exactly the two recorded terminations: {removed:#?}"
    );
    assert!(removed
        .iter()
        .all(|r| r.starts_with("198.51.100.0/24") || r.starts_with("2001:db8:77::/64")));
    assert!(
        left_a.iter().any(|r| r.starts_with("192.0.2.0/24")),
        "not ours: kept"
    );
    assert_eq!(
        node.table_routes(tb),
        all_b,
        "another VPC's routes are kept"
    );
    assert!(!node.route_record("A").exists());
    assert!(node.route_record("B").exists());
    node.gc(&gc_conf).expect_quiet_success();

    // The ordinary end of VPC B: the master's DEL removes the interface (and with it the
    // routes); GC then forgets the entries.
    node.call("DEL", &pb, &with_prev(&conf_b, &rb))
        .expect_quiet_success();
    node.gc(&gc_conf).expect_quiet_success();
    assert!(
        !node.route_record("B").exists(),
        "entries of vanished routes are forgotten"
    );
}

#[test]
fn concurrent_adds_of_one_vpc_keep_every_route_and_record_entry() {
    if !privileged("concurrent_adds_of_one_vpc_keep_every_route_and_record_entry") {
        return;
    }
    let node = Node::new("rt7");
    let ipam = pool_ipam(&node, "fd66:1::/64", "10.66.0.0/24");
    let attachments: Vec<(Pod, Value, Value)> = (1..=6)
        .map(|att| {
            let pod = Pod::new(&format!("rt7p{att}"));
            let master = node.add(
                &pod,
                &master_conf("1.1.0", "tenant-a", "A", &att.to_string(), ipam.clone()),
            );
            let terms = json!([
                {"network": format!("198.51.{att}.0/24")},
                {"network": format!("2001:db8:{att}::/64"), "via": result_ip(&master, true)}
            ]);
            let conf = with_prev(
                &route_conf("1.1.0", "tenant-a", "A", &att.to_string(), terms),
                &master,
            );
            (pod, master, conf)
        })
        .collect();
    // Every ADD rewrites the VPC's record: without the per-VPC lock, entries would be lost.
    std::thread::scope(|s| {
        for (pod, _, conf) in &attachments {
            let node = &node;
            s.spawn(move || {
                let out = node.call("ADD", pod, conf);
                assert!(out.success, "{out:?}");
            });
        }
    });
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(node.route_record("A")).unwrap()).unwrap();
    assert_eq!(
        record["routes"].as_array().unwrap().len(),
        12,
        "every route recorded: {record}"
    );
    for (pod, _, conf) in &attachments {
        node.call("CHECK", pod, conf).expect_quiet_success();
    }
}
