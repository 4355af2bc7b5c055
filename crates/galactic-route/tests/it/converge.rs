//! Convergence of the VPC's recorded termination routes (`src/converge.rs`): a recorded route
//! deleted behind the plugin's back, or left in the VPC's old table after the domain's table
//! changed, is put back in the current table by the next ADD of *any* attachment of the VPC
//! and by GC for the attachments the runtime lists; CHECK names it, and what restores it, until
//! then.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::{self, master_conf, pool_ipam, route_conf, route_record, table_routes};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};

const NETWORK: &str = "tenant-a";

fn chain(att: &str) -> Conflist {
    let terms = json!([
        {"network": format!("198.51.{att}.0/24")},
        {"network": format!("2001:db8:{att}::/64")}
    ]);
    Conflist::new(
        "1.1.0",
        NETWORK,
        vec![
            master_conf("A", att, pool_ipam("fd66:1::/64", "10.66.0.0/24")),
            route_conf("A", att, terms),
        ],
    )
}

/// GC of galactic-route alone, with `live` listed.
fn gc(rt: &Runtime<'_>, live: &[&Attachment]) {
    let list = Conflist::new("1.1.0", NETWORK, vec![json!({"type": "galactic-route"})]);
    rt.gc(&list, live).unwrap();
}

/// The route of `dst` in `table`, as `table_routes` describes it, if there is one.
fn route_of(host: &Host, table: u32, dst: &str) -> Option<String> {
    table_routes(host, table)
        .into_iter()
        .find(|r| r.starts_with(&format!("{dst} ")))
}

/// The tables VPC A's record names, per destination, sorted.
fn recorded_tables(host: &Host) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(route_record(host, "A")).unwrap();
    let record: Value = serde_json::from_str(&text).unwrap();
    let mut out: Vec<(String, u64)> = record["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["dst"].as_str().unwrap().to_owned(),
                r["table"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Deletes `dst` from `table` by netlink, as an operator or a router's GC would.
fn delete_behind_our_back(host: &Host, table: u32, dst: &str) {
    let family = if dst.contains(':') { "-6" } else { "-4" };
    host.netns
        .ip(&[family, "route", "del", dst, "table", &table.to_string()]);
    assert_eq!(route_of(host, table, dst), None, "{dst} deleted");
}

#[test]
fn a_route_deleted_behind_our_back_is_restored_by_the_vpcs_next_add_and_by_gc() {
    galactic_testkit::privileged!();
    let host = common::host("rc1");
    let rt = common::runtime(&host);
    let (one, two, three) = (Pod::new("rc1a"), Pod::new("rc1b"), Pod::new("rc1c"));
    rt.add(&chain("1"), &one.attachment()).unwrap();
    rt.add(&chain("2"), &two.attachment()).unwrap();
    let table = common::table(&host, "A");
    let installed = table_routes(&host, table);
    let host_one = galactic_testkit::inspect::hname("A", "1");
    for dst in ["198.51.1.0/24", "2001:db8:1::/64"] {
        delete_behind_our_back(&host, table, dst);
    }

    // CHECK names each missing route and what restores it.
    let msg = rt
        .check(&chain("1"), &one.attachment())
        .unwrap_err()
        .expect_error(100);
    for dst in ["198.51.1.0/24", "2001:db8:1::/64"] {
        let want = format!(
            "termination {dst} dev {host_one} table {table} is missing: the next ADD of VPC A \
             on this node or CNI GC re-installs it"
        );
        assert!(msg.contains(&want), "{want}\n{msg}");
    }

    // Another attachment's ADD converges the VPC: both routes are back, nothing else changed.
    rt.add(&chain("3"), &three.attachment()).unwrap();
    for dst in ["198.51.1.0/24", "2001:db8:1::/64"] {
        assert!(
            route_of(&host, table, dst).is_some(),
            "{dst} re-installed by ADD"
        );
    }
    rt.check(&chain("1"), &one.attachment()).unwrap();
    rt.del(&chain("3"), &three.attachment()).unwrap();
    assert_eq!(table_routes(&host, table), installed);

    // GC with the attachments listed does the same.
    delete_behind_our_back(&host, table, "198.51.1.0/24");
    delete_behind_our_back(&host, table, "2001:db8:2::/64");
    assert!(rt.check(&chain("1"), &one.attachment()).is_err());
    gc(&rt, &[&one.attachment(), &two.attachment()]);
    assert_eq!(table_routes(&host, table), installed, "re-installed by GC");
    rt.check(&chain("1"), &one.attachment()).unwrap();
    rt.check(&chain("2"), &two.attachment()).unwrap();

    // Not listed: GC keeps dropping what is gone, and re-installs nothing.
    delete_behind_our_back(&host, table, "198.51.2.0/24");
    let list = Conflist::new("1.1.0", NETWORK, vec![json!({"type": "galactic-route"})]);
    rt.lose_cache(); // the runtime's GC must not DEL the unlisted attachment itself
    rt.gc(&list, &[&one.attachment()]).unwrap();
    assert_eq!(route_of(&host, table, "198.51.2.0/24"), None);
    let recorded: Vec<String> = recorded_tables(&host).into_iter().map(|(d, _)| d).collect();
    assert!(
        !recorded.contains(&"198.51.2.0/24".to_owned()),
        "{recorded:?}"
    );
    assert!(
        recorded.contains(&"2001:db8:2::/64".to_owned()),
        "{recorded:?}"
    );

    rt.del(&chain("2"), &two.attachment()).unwrap();
    rt.del(&chain("1"), &one.attachment()).unwrap();
}

/// Rewrites the VPC's domain record with table `to`, as re-binding its VRF to another table
/// does.
fn rebind(host: &Host, to: u32) {
    let path = common::domain_record(host, "A");
    let mut record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    record["table"] = json!(to);
    std::fs::write(&path, record.to_string()).unwrap();
}

#[test]
fn a_table_change_moves_the_vpcs_recorded_routes_by_the_next_add_and_by_gc() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "rc2",
        json!({"routing_domain": "table"}),
        &["galactic-cni", "galactic-ipam"],
    );
    let rt = common::runtime(&host);
    let (one, two) = (Pod::new("rc2a"), Pod::new("rc2b"));
    rt.add(&chain("1"), &one.attachment()).unwrap();
    let old = common::table(&host, "A");
    let host_one = galactic_testkit::inspect::hname("A", "1");
    let new = old + 500;
    rebind(&host, new);

    // galactic-route's CHECK alone: the master's reports the domain's own objects first.
    let prev = rt.cached(&chain("1"), &one.attachment());
    let msg = rt
        .plugin(&chain("1"), 1, "CHECK", &one.attachment(), prev.as_ref())
        .expect_error(100);
    let want = format!(
        "termination 198.51.1.0/24 dev {host_one} table {new} is missing: the next ADD of VPC A \
         on this node or CNI GC re-installs it"
    );
    assert!(msg.contains(&want), "{want}\n{msg}");

    // The next ADD of the VPC moves the first attachment's routes to the current table.
    rt.add(&chain("2"), &two.attachment()).unwrap();
    for dst in ["198.51.1.0/24", "2001:db8:1::/64"] {
        let moved = route_of(&host, new, dst).unwrap_or_else(|| panic!("{dst} in {new}"));
        assert!(moved.contains(&host_one), "{moved}");
        assert_eq!(route_of(&host, old, dst), None, "{dst} left the old table");
    }
    assert!(
        recorded_tables(&host)
            .iter()
            .all(|(_, t)| *t == u64::from(new)),
        "{:?}",
        recorded_tables(&host)
    );

    // GC moves them again, for the attachments it lists.
    let newer = new + 1;
    rebind(&host, newer);
    gc(&rt, &[&one.attachment(), &two.attachment()]);
    for dst in [
        "198.51.1.0/24",
        "2001:db8:1::/64",
        "198.51.2.0/24",
        "2001:db8:2::/64",
    ] {
        assert!(route_of(&host, newer, dst).is_some(), "{dst} in {newer}");
        assert_eq!(route_of(&host, new, dst), None, "{dst} left {new}");
    }
    assert!(
        recorded_tables(&host)
            .iter()
            .all(|(_, t)| *t == u64::from(newer)),
        "{:?}",
        recorded_tables(&host)
    );

    rt.del(&chain("2"), &two.attachment()).unwrap();
    rt.del(&chain("1"), &one.attachment()).unwrap();
}
