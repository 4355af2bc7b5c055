//! What one GC reads and writes (`src/gc.rs`): the node's state once, not once per VPC. On a
//! healthy node with several VPCs, GC lists the records directory once, reads each record once,
//! rewrites none, and receives as many netlink messages as one dump of the links and one of each
//! recorded VPC table hold. GC logs that work (`GC: route records swept`), which this test reads.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::{self, master_conf, pool_ipam, route_conf};
use galactic_core::ip::Family;
use galactic_core::net::netlink::Netlink;
use galactic_testkit::harness::Entered;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};

const NETWORK: &str = "tenant";
const VPCS: [&str; 5] = ["A", "B", "C", "D", "E"];

/// VPC `vpc` (the `i`-th), attachment 1, with two terminations of its own.
fn chain(i: usize, vpc: &str) -> Conflist {
    let ipam = pool_ipam(
        &format!("fd66:{i:x}::/64"),
        &format!("10.{}.0.0/24", 60 + i),
    );
    let terms = json!([
        {"network": format!("198.51.{i}.0/24")},
        {"network": format!("2001:db8:{i:x}::/64")}
    ]);
    Conflist::new(
        "1.1.0",
        NETWORK,
        vec![master_conf(vpc, "1", ipam), route_conf(vpc, "1", terms)],
    )
}

/// One dump of the links and of each VPC's table, both families: the messages GC may receive.
fn node_state(host: &Host) -> u64 {
    let _entered = Entered::new(&host.netns).unwrap();
    let nl = Netlink::current().unwrap();
    let mut messages = nl.links().unwrap().len();
    for vpc in VPCS {
        let table = common::table(host, vpc);
        for family in Family::ALL {
            messages += nl.routes(family, table).unwrap().len();
        }
    }
    messages as u64
}

/// The fields of the last `GC: route records swept` log record.
fn swept(host: &Host) -> Value {
    host.node
        .log_lines()
        .into_iter()
        .rfind(|l| l["msg"] == "GC: route records swept")
        .expect("GC logs its work")
}

#[test]
fn gc_reads_the_node_once_and_rewrites_no_unchanged_record() {
    galactic_testkit::privileged!();
    let host = common::host("rs1");
    let rt = common::runtime(&host);
    let pods: Vec<Pod> = (0..VPCS.len())
        .map(|i| Pod::new(&format!("rs1{i}")))
        .collect();
    for (i, vpc) in VPCS.iter().enumerate() {
        rt.add(&chain(i, vpc), &pods[i].attachment()).unwrap();
    }
    let records = std::fs::read_dir(host.path("state/routes"))
        .unwrap()
        .count();

    let before = node_state(&host);
    let live: Vec<_> = pods.iter().map(Pod::attachment).collect();
    let list = Conflist::new("1.1.0", NETWORK, vec![json!({"type": "galactic-route"})]);
    rt.gc(&list, &live.iter().collect::<Vec<_>>()).unwrap();
    let after = node_state(&host);

    let work = swept(&host);
    assert_eq!(work["records"], VPCS.len(), "{work}");
    assert_eq!(work["recordsRead"], VPCS.len(), "each record once: {work}");
    assert_eq!(work["recordsWritten"], 0, "nothing changed: {work}");
    assert_eq!(work["listings"], 1, "one listing of the records: {work}");
    // A kernel route may come or go between the test's dumps and GC's (an address's DAD):
    // GC's count lies between the two.
    let messages = work["netlinkMessages"].as_u64().unwrap();
    assert!(
        (before.min(after)..=before.max(after)).contains(&messages),
        "one dump of the links and of each VPC table ({before}..{after}): {work}"
    );
    assert_eq!(
        std::fs::read_dir(host.path("state/routes"))
            .unwrap()
            .count(),
        records,
        "no file came or went"
    );

    for (i, vpc) in VPCS.iter().enumerate() {
        rt.del(&chain(i, vpc), &pods[i].attachment()).unwrap();
    }
}
