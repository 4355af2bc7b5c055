//! The cost guard: what ADD, CHECK and DEL read from the kernel does not grow with the node or
//! with the VPC's past. Each runs in-process on a real host namespace (the test kit's bench
//! fixture: the real master attaches the probe pod) and the netlink messages it receives are
//! counted ([`netlink::received`]): deterministic, unlike times. They must be the same on a
//! fresh VPC, with thousands of routes in the node's other tables (a dump of every route of a
//! family, filtered here, makes them grow), and after thousands of the VPC's attachments came
//! and went. DEL reads no netlink at all; what the three read besides is the VPC's record and
//! its lock, so the route state directory (names and sizes) must be what it was on the fresh
//! VPC too, after that history.

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
    let mut out = [0; 3];
    for (slot, command) in out.iter_mut().zip(["ADD", "CHECK", "DEL"]) {
        let before = netlink::received();
        let (ok, stdout) = in_process(&node.probe(command));
        assert!(ok, "{command}: {}", String::from_utf8_lossy(&stdout));
        *slot = netlink::received() - before;
    }
    node.drop_probe_routes(nl).unwrap();
    out
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
