//! The ownership record on real kernel objects: GC removes exactly the recorded routes of
//! domains that are gone, and concurrent ADDs of one VPC lose no record entry.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use crate::common::{master_conf, pool_ipam, result_ip, route_conf, route_record, table_routes};
use galactic_testkit::host::Pod;
use galactic_testkit::runtime::{Attachment, Conflist};
use serde_json::{json, Value};

#[test]
fn gc_removes_routes_whose_domain_is_gone_and_nothing_else() {
    galactic_testkit::privileged!();
    let host = common::host("rt6");
    let rt = common::runtime(&host);
    let (pa, pb) = (Pod::new("rt6a"), Pod::new("rt6b"));
    let (att_a, att_b) = (pa.attachment(), pb.attachment());
    // Each chain's master ADD, then galactic-route with the master's result.
    let chain_a = |terms: Value| {
        let ipam = pool_ipam("fd66:1::/64", "10.66.0.0/24");
        let plugins = vec![master_conf("A", "1", ipam), route_conf("A", "1", terms)];
        Conflist::new("1.1.0", "net-a", plugins)
    };
    let chain_b = {
        let ipam = pool_ipam("fd67:1::/64", "10.67.0.0/24");
        let terms = json!([{"network": "203.0.113.0/24"}, {"network": "2001:db8:88::/64"}]);
        let plugins = vec![master_conf("B", "1", ipam), route_conf("B", "1", terms)];
        Conflist::new("1.1.0", "net-b", plugins)
    };
    let ra = rt
        .plugin(&chain_a(json!([])), 0, "ADD", &att_a, None)
        .expect_result();
    let rb = rt.plugin(&chain_b, 0, "ADD", &att_b, None).expect_result();
    let chain_a = chain_a(
        json!([{"network": "198.51.100.0/24"}, {"network": "2001:db8:77::/64", "via": result_ip(&ra, true)}]),
    );
    assert!(rt.plugin(&chain_a, 1, "ADD", &att_a, Some(&ra)).success);
    assert!(rt.plugin(&chain_b, 1, "ADD", &att_b, Some(&rb)).success);
    let (ta, tb) = (common::table(&host, "A"), common::table(&host, "B"));
    // A route through A's interface that galactic-route did not install.
    let host_a = "G00000000A001H";
    host.netns.ip(&[
        "-4",
        "route",
        "add",
        "192.0.2.0/24",
        "dev",
        host_a,
        "table",
        &ta.to_string(),
    ]);
    let (all_a, all_b) = (table_routes(&host, ta), table_routes(&host, tb));
    let gc_list = Conflist::new("1.1.0", "net-a", vec![json!({"type": "galactic-route"})]);
    let gc = || rt.gc(&gc_list, &[]).unwrap();

    // Both domains exist: GC keeps everything.
    gc();
    assert_eq!(table_routes(&host, ta), all_a);
    assert_eq!(table_routes(&host, tb), all_b);

    // VPC A's domain record is gone while its host interface survives (state lost or torn down
    // behind the plugins' back); the master's own teardown would take the routes with the
    // interface, so this is the case only GC can clean up.
    std::fs::remove_file(common::domain_record(&host, "A")).unwrap();
    gc();
    let left_a = table_routes(&host, ta);
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
        table_routes(&host, tb),
        all_b,
        "another VPC's routes are kept"
    );
    assert!(!route_record(&host, "A").exists());
    assert!(route_record(&host, "B").exists());
    gc();

    // The ordinary end of VPC B: the master's DEL removes the interface (and with it the
    // routes); GC then forgets the entries.
    rt.plugin(&chain_b, 0, "DEL", &att_b, Some(&rb))
        .expect_quiet_success();
    gc();
    assert!(
        !route_record(&host, "B").exists(),
        "entries of vanished routes are forgotten"
    );
}

#[test]
fn concurrent_adds_of_one_vpc_keep_every_route_and_record_entry() {
    galactic_testkit::privileged!();
    let host = common::host("rt7");
    let rt = common::runtime(&host);
    let ipam = pool_ipam("fd66:1::/64", "10.66.0.0/24");
    let attachments: Vec<(Pod, Attachment, Conflist, Value)> = (1..=6)
        .map(|att| {
            let pod = Pod::new(&format!("rt7p{att}"));
            let attachment = pod.attachment();
            let master = master_conf("A", &att.to_string(), ipam.clone());
            let list = Conflist::new("1.1.0", "tenant-a", vec![master]);
            let master = rt
                .plugin(&list, 0, "ADD", &attachment, None)
                .expect_result();
            let terms = json!([
                {"network": format!("198.51.{att}.0/24")},
                {"network": format!("2001:db8:{att}::/64"), "via": result_ip(&master, true)}
            ]);
            let mut chain = list;
            chain.plugins.push(route_conf("A", &att.to_string(), terms));
            (pod, attachment, chain, master)
        })
        .collect();
    // Every ADD rewrites the VPC's record: without the per-VPC lock, entries would be lost.
    std::thread::scope(|s| {
        for (_, att, chain, master) in &attachments {
            let rt = &rt;
            s.spawn(move || {
                let out = rt.plugin(chain, 1, "ADD", att, Some(master));
                assert!(out.success, "{out:?}");
            });
        }
    });
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(route_record(&host, "A")).unwrap()).unwrap();
    assert_eq!(
        record["routes"].as_array().unwrap().len(),
        12,
        "every route recorded: {record}"
    );
    for (_, att, chain, master) in &attachments {
        rt.plugin(chain, 1, "CHECK", att, Some(master))
            .expect_quiet_success();
    }
}
