//! A VPC's routing domain goes with the VPC's last attachment on the node (`retire.rs`): the
//! DEL of the last one removes it (table mode on any kernel, VRF where the kernel has it), a DEL
//! with another attachment of the VPC left keeps it, the next ADD creates it again and its pods
//! reach their gateway; and a DEL racing an ADD of the same VPC (each interleaving held by a
//! failure point, then unheld in a loop) always ends with the ADD's attachment in a working
//! domain, and with no domain once that attachment goes too. GC afterwards has nothing to remove.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Conflist, Runtime};
use serde_json::{json, Value};
use std::time::Duration;

use crate::common::{domain, link, runtime, vrf, vrf_host};

const VPC: &str = "R";
const REMOVED: &str =
    "DEL: the VPC's last attachment on this node is gone; its routing domain removed";

fn conf(att: &str) -> Conflist {
    Conflist::new(
        "1.1.0",
        "tenant-r",
        vec![
            json!({"type": "galactic-cni", "vpc": VPC, "vpcattachment": att,
                   "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd7e:1::/64",
                            "ipv4_subnet": "10.126.0.0/24"}}),
        ],
    )
}

fn table_host(tag: &str) -> Host {
    Host::new(tag, json!({"routing_domain": "table"}), &["galactic-ipam"])
}

/// Every rule steering into `table` and every route of it, both families.
fn traces(host: &Host, table: &str) -> Vec<String> {
    let mut out = Vec::new();
    for family in ["-4", "-6"] {
        let rules = host.netns.ip(&[family, "rule", "show"]);
        out.extend(
            rules
                .lines()
                .filter(|l| l.ends_with(&format!("lookup {table}")))
                .map(str::to_owned),
        );
        let routes = host.netns.ip(&[family, "route", "show", "table", table]);
        out.extend(routes.lines().map(str::to_owned));
    }
    out
}

/// The VPC's recorded table.
fn table_of(host: &Host) -> String {
    domain(host, VPC).expect("the VPC's domain is recorded")["table"].to_string()
}

/// The pod reaches its gateways (both families) and passes CHECK: it is attached to a working
/// domain.
fn works(rt: &Runtime<'_>, pod: &Pod, att: &str, result: &Value) {
    rt.check(&conf(att), &pod.attachment()).unwrap();
    for i in 0..2 {
        let gw = result["ips"][i]["gateway"].as_str().unwrap();
        assert!(pod.ping(gw), "{} reaches its gateway {gw}", pod.id);
    }
}

/// How many DELs logged the domain's removal.
fn removals(host: &Host) -> usize {
    host.node
        .log_lines()
        .iter()
        .filter(|l| l["msg"] == REMOVED && l["command"] == "DEL")
        .count()
}

/// Nothing of the VPC's domain is left: no record, no rule into its table, no route in it.
fn gone(host: &Host, table: &str, when: &str) {
    assert!(
        domain(host, VPC).is_none(),
        "{when}: the domain record is gone"
    );
    assert_eq!(
        traces(host, table),
        Vec::<String>::new(),
        "{when}: nothing steers into or routes in table {table}"
    );
}

#[test]
fn the_last_del_removes_a_table_domain_another_attachment_keeps_it_and_the_next_add_recreates_it() {
    galactic_testkit::privileged!();
    let host = table_host("rlast");
    let rt = runtime(&host);
    // The first attachment's life moves the node-wide local rule for good: the baseline.
    let warm = Pod::new("rlastw");
    rt.add(&conf("9"), &warm.attachment()).unwrap();
    rt.del(&conf("9"), &warm.attachment()).unwrap();
    let baseline = host.snapshot();

    let (p1, p2) = (Pod::new("rlast1"), Pod::new("rlast2"));
    rt.add(&conf("1"), &p1.attachment()).unwrap();
    let r2 = rt.add(&conf("2"), &p2.attachment()).unwrap();
    let table = table_of(&host);
    rt.del(&conf("1"), &p1.attachment()).unwrap();
    assert_eq!(
        table_of(&host),
        table,
        "another attachment keeps the domain"
    );
    works(&rt, &p2, "2", &r2);
    rt.del(&conf("2"), &p2.attachment()).unwrap();
    gone(&host, &table, "after the last DEL");
    assert_eq!(
        removals(&host),
        2,
        "the warm-up's and the last DEL's lines say so"
    );
    assert_eq!(
        host.changed_since(&baseline),
        None,
        "the node is as it began"
    );

    // The next ADD pays for the domain again, and works.
    let p3 = Pod::new("rlast3");
    let r3 = rt.add(&conf("3"), &p3.attachment()).unwrap();
    works(&rt, &p3, "3", &r3);
    let table = table_of(&host);
    rt.del(&conf("3"), &p3.attachment()).unwrap();
    gone(&host, &table, "after the recreated domain's last DEL");
    // GC is left nothing to remove.
    rt.gc(&conf("9"), &[]).unwrap();
    assert!(!host
        .node
        .log_lines()
        .iter()
        .any(|l| l["msg"] == "GC: removed unused routing domain"));
    assert_eq!(
        host.changed_since(&baseline),
        None,
        "the node is as it began"
    );
}

#[test]
fn the_last_del_removes_a_vrf_domain_and_the_next_add_recreates_it() {
    let Some(host) = vrf_host(
        "the_last_del_removes_a_vrf_domain_and_the_next_add_recreates_it",
        "rvrf",
        &["galactic-ipam"],
    ) else {
        return;
    };
    let rt = runtime(&host);
    let (p1, p2) = (Pod::new("rvrf1"), Pod::new("rvrf2"));
    rt.add(&conf("1"), &p1.attachment()).unwrap();
    let r2 = rt.add(&conf("2"), &p2.attachment()).unwrap();
    let table = table_of(&host);
    rt.del(&conf("1"), &p1.attachment()).unwrap();
    assert!(
        link(&host, &vrf(VPC)).is_some(),
        "another attachment keeps the VRF"
    );
    works(&rt, &p2, "2", &r2);
    rt.del(&conf("2"), &p2.attachment()).unwrap();
    assert!(
        link(&host, &vrf(VPC)).is_none(),
        "the last DEL removed the VRF"
    );
    gone(&host, &table, "after the last DEL");
    let p3 = Pod::new("rvrf3");
    let r3 = rt.add(&conf("3"), &p3.attachment()).unwrap();
    works(&rt, &p3, "3", &r3);
    rt.del(&conf("3"), &p3.attachment()).unwrap();
    assert!(link(&host, &vrf(VPC)).is_none());
    assert!(domain(&host, VPC).is_none());
}

/// The keeper's DEL (the VPC's last live attachment) runs while `other` is added by `held`
/// (failure points armed); the ADD's outcome.
fn race(
    rt: &Runtime<'_>,
    held: Runtime<'_>,
    hold_del: bool,
    keeper: &Pod,
    other: &Pod,
) -> Result<Value, galactic_testkit::runtime::RuntimeError> {
    std::thread::scope(|s| match hold_del {
        // The DEL is held; the ADD comes while it is.
        true => {
            let del = s.spawn(move || held.del(&conf("1"), &keeper.attachment()));
            std::thread::sleep(Duration::from_millis(300));
            let added = rt.add(&conf("2"), &other.attachment());
            del.join().unwrap().unwrap();
            added
        }
        // The ADD is held; the DEL comes while it is.
        false => {
            let add = s.spawn(move || held.add(&conf("2"), &other.attachment()));
            std::thread::sleep(Duration::from_millis(300));
            rt.del(&conf("1"), &keeper.attachment()).unwrap();
            add.join().unwrap()
        }
    })
}

#[test]
fn an_add_held_after_ensuring_the_domain_keeps_it_through_the_last_del() {
    galactic_testkit::privileged!();
    let host = table_host("rhold");
    let rt = runtime(&host);
    let (keeper, other) = (Pod::new("rholdk"), Pod::new("rholdo"));
    rt.add(&conf("1"), &keeper.attachment()).unwrap();
    let held = rt.clone().env("GALACTIC_FAILPOINTS", "after-domain:pause");
    let r = race(&rt, held, false, &keeper, &other).unwrap();
    works(&rt, &other, "2", &r);
    let table = table_of(&host);
    rt.del(&conf("2"), &other.attachment()).unwrap();
    gone(&host, &table, "after the ADD's attachment went too");
}

#[test]
fn an_add_during_a_held_removal_waits_for_it_and_creates_the_domain_again() {
    galactic_testkit::privileged!();
    let host = table_host("rwait");
    let rt = runtime(&host);
    let (keeper, other) = (Pod::new("rwaitk"), Pod::new("rwaito"));
    rt.add(&conf("1"), &keeper.attachment()).unwrap();
    let held = rt
        .clone()
        .env("GALACTIC_FAILPOINTS", "retire-before-remove:pause");
    let r = race(&rt, held, true, &keeper, &other).unwrap();
    assert_eq!(removals(&host), 1, "the keeper's DEL removed the domain");
    works(&rt, &other, "2", &r);
    let table = table_of(&host);
    rt.del(&conf("2"), &other.attachment()).unwrap();
    gone(&host, &table, "after the ADD's attachment went too");
}

#[test]
fn an_add_that_fails_after_the_last_del_kept_the_domain_for_it_removes_the_domain() {
    galactic_testkit::privileged!();
    let host = table_host("rfail");
    let rt = runtime(&host);
    let (keeper, other) = (Pod::new("rfailk"), Pod::new("rfailo"));
    rt.add(&conf("1"), &keeper.attachment()).unwrap();
    let table = table_of(&host);
    // Its record written (the DEL keeps the domain for it), then failing after it joined.
    let held = rt
        .clone()
        .env("GALACTIC_FAILPOINTS", "after-record:pause,after-ipam");
    let failed = race(&rt, held, false, &keeper, &other).unwrap_err();
    assert!(failed.expect_error(999).contains("after-ipam"));
    assert_eq!(removals(&host), 0, "the DEL kept the domain for the ADD");
    gone(&host, &table, "after the ADD rolled back");
}

#[test]
fn gc_never_recreates_a_domain_the_last_del_removed_while_it_ran() {
    galactic_testkit::privileged!();
    let host = table_host("rgc");
    let rt = runtime(&host);
    let keeper = Pod::new("rgck");
    rt.add(&conf("1"), &keeper.attachment()).unwrap();
    let table = table_of(&host);
    // GC lists the keeper as live, is held, and the keeper's DEL removes the domain meanwhile.
    std::thread::scope(|s| {
        let held = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", "gc-before-converge:pause");
        let att = keeper.attachment();
        let gc = s.spawn(move || held.gc(&conf("9"), &[&att]));
        std::thread::sleep(Duration::from_millis(300));
        rt.del(&conf("1"), &keeper.attachment()).unwrap();
        gc.join().unwrap().unwrap();
    });
    gone(&host, &table, "after the GC");
}

#[test]
fn a_del_racing_an_add_of_the_same_vpc_always_ends_consistent() {
    galactic_testkit::privileged!();
    let host = table_host("rloop");
    let rt = runtime(&host);
    for round in 0..12 {
        let (keeper, other) = (Pod::new("rloopk"), Pod::new("rloopo"));
        rt.add(&conf("1"), &keeper.attachment()).unwrap();
        let table = table_of(&host);
        // Each round starts the ADD a little later against the DEL.
        let deleting = rt.clone();
        let added = std::thread::scope(|s| {
            let del = s.spawn(|| deleting.del(&conf("1"), &keeper.attachment()));
            std::thread::sleep(Duration::from_millis(round * 4));
            let added = rt.add(&conf("2"), &other.attachment());
            del.join().unwrap().unwrap();
            added
        });
        let r = added.unwrap_or_else(|e| panic!("round {round}: {e:?}"));
        works(&rt, &other, "2", &r);
        rt.del(&conf("2"), &other.attachment()).unwrap();
        gone(&host, &table, &format!("round {round}"));
    }
}
