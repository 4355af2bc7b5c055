//! The cost guard: what ADD, CHECK and DEL read from the kernel does not grow with the node or
//! with the VPC's past. Each runs in-process on a real host namespace (the test kit's bench
//! fixture: the real master attaches the probe pod) and the netlink messages it receives are
//! counted ([`netlink::received`]): deterministic, unlike times. They must be the same on a
//! fresh VPC, with thousands of routes in the node's other tables (a dump of every route of a
//! family, filtered here, makes them grow), and after thousands of the VPC's attachments came
//! and went. DEL reads no netlink at all; what the three read besides is the VPC's record and
//! its lock, so the route state directory (names and sizes) must be what it was on the fresh
//! VPC too, after that history.
//!
//! With live routes in the VPC table, CHECK of a healthy attachment reads only the host
//! interface's routes (the same count as on the fresh VPC); ADD reads the VPC table (its plan
//! must see every route to a termination's destination, its convergence every recorded one).
//! ADD, CHECK and DEL read the VPC's record once and write it at most once.

use crate::record::FileWork;
use crate::Route;
use galactic_core::cni::execute;
use galactic_core::net::netlink::{self, Netlink};
use galactic_testkit::harness::Entered;
use galactic_testkit::host::Host;
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::route_node::{Call, RouteNode};
use serde_json::json;

/// Runs `call` in this process (and thread: the netlink count is per thread).
fn in_process(call: &Call) -> (bool, Vec<u8>) {
    let reply = execute(&Route, |k| call.var(k), call.stdin.clone());
    let stdout = reply.stdout.map(|v| v.to_string()).unwrap_or_default();
    (reply.success, stdout.into_bytes())
}

/// The route state directory: each file's name and size.
fn route_state(node: &RouteNode) -> Vec<(String, u64)> {
    let dir = node.host.node.dir.path().join("state/routes");
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    files.sort();
    files
}

/// The netlink messages the probe's ADD, CHECK and DEL receive, in that order; its routes are
/// removed afterwards (as deleting its host interface would), so each round installs them.
fn costs(node: &RouteNode, nl: &Netlink) -> [u64; 3] {
    work(node, nl).map(|(messages, _)| messages)
}

/// [`costs`] with each call's record work.
fn work(node: &RouteNode, nl: &Netlink) -> [(u64, FileWork); 3] {
    let mut out = [(0, FileWork::default()); 3];
    for (slot, command) in out.iter_mut().zip(["ADD", "CHECK", "DEL"]) {
        let before = (netlink::received(), FileWork::now());
        let (ok, stdout) = in_process(&node.probe(command));
        assert!(ok, "{command}: {}", String::from_utf8_lossy(&stdout));
        *slot = (netlink::received() - before.0, FileWork::since(before.1));
    }
    node.drop_probe_routes(nl).unwrap();
    out
}

#[test]
fn check_of_a_healthy_attachment_reads_its_own_routes_and_each_call_the_record_once() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "rcost2",
        json!({"routing_domain": "auto"}),
        &["galactic-cni", "galactic-ipam"],
    );
    let node = RouteNode::new(host).unwrap();
    let _entered = Entered::new(&node.host.netns).unwrap();
    let nl = Netlink::current().unwrap();
    let peers = TestNetns::new("rcost2-peers");

    let fresh = work(&node, &nl);
    let once = |writes, listings| FileWork {
        reads: 1,
        writes,
        listings,
    };
    assert_eq!(
        fresh.map(|(_, files)| files),
        [once(1, 0), once(0, 0), once(1, 1)],
        "[ADD, CHECK, DEL] read the record once; ADD and DEL write it once (DEL lists the \
         directory for a killed ADD's temporaries)"
    );
    node.live(1_000, &peers, &mut |call| Ok(in_process(call)))
        .unwrap();
    let grown = work(&node, &nl);
    eprintln!("[ADD, CHECK, DEL] fresh {fresh:?}, with 1 000 live routes {grown:?}");
    assert_eq!(
        grown[1].0, fresh[1].0,
        "CHECK with 1 000 live routes of other attachments in the VPC table"
    );
    assert!(
        grown[0].0 >= fresh[0].0 + 1_000,
        "ADD reads the VPC table: {grown:?}"
    );
    assert_eq!(grown.map(|(_, files)| files), fresh.map(|(_, files)| files));
}

#[test]
fn add_check_and_del_read_as_much_on_a_grown_node_and_an_old_vpc_as_on_a_fresh_one() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "rcost",
        json!({"routing_domain": "auto"}),
        &["galactic-cni", "galactic-ipam"],
    );
    let node = RouteNode::new(host).unwrap();
    let _entered = Entered::new(&node.host.netns).unwrap();
    let nl = Netlink::current().unwrap();
    let peers = TestNetns::new("rcost-peers");

    let fresh = costs(&node, &nl);
    eprintln!("netlink messages received by [ADD, CHECK, DEL] of the probe: {fresh:?}");
    assert!(
        fresh[0] > 0 && fresh[1] > 0,
        "the counter counts: {fresh:?}"
    );
    assert_eq!(fresh[2], 0, "DEL reads only the VPC's record");
    assert_eq!(costs(&node, &nl), fresh, "the count is deterministic");
    let state = route_state(&node);

    node.unrelated(2_000, &peers).unwrap();
    assert_eq!(
        costs(&node, &nl),
        fresh,
        "[ADD, CHECK, DEL] with 2 000 routes in the node's other tables"
    );

    node.history(2_000, &mut |call| Ok(in_process(call)))
        .unwrap();
    assert_eq!(
        costs(&node, &nl),
        fresh,
        "[ADD, CHECK, DEL] after 2 000 attachments of the VPC came and went"
    );
    assert_eq!(
        route_state(&node),
        state,
        "the route state after 2 000 attachments came and went"
    );
}
