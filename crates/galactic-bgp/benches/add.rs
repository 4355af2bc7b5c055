//! Median ADD time of galactic-bgp (a fresh process per ADD, as a runtime runs it) against the
//! loopback API server, split into process overhead, Kubernetes client start-up (kubeconfig,
//! TLS stack, runtime) and the API calls. Prints a table; asserts nothing.

// A benchmark's setup failing is a bug in the benchmark: panic with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use galactic_testkit::apiserver::ApiServer;
use galactic_testkit::{Invocation, TestNode};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_galactic-bgp");
const RUNS: usize = 100;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn field(lines: &[Value], msg: &str, key: &str) -> Vec<f64> {
    lines
        .iter()
        .filter(|l| l["msg"] == msg)
        .filter_map(|l| l[key].as_f64())
        .collect()
}

fn main() {
    let server = ApiServer::start().expect("start the fixture");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    server.fixture().insert(
        json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "router-a", "namespace": "galactic-system"},
        "spec": {"targetRef": {"kind": "Node", "name": "node-a"}, "localASN": 65000,
                 "routerID": "10.0.2.1", "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}],
                 "srv6Locator": "2001:db8:ff03::/48", "nodeID": 1}}),
    );
    // Debug logging records the client start-up time of each process.
    let node = TestNode::new(json!({"publisher": "kubernetes", "kubeconfig": kubeconfig,
        "node_name": "node-a", "namespace": "galactic-system", "log_level": "debug"}));
    let netns = format!("/proc/{}/ns/net", std::process::id());
    let mut wall = Vec::new();
    for i in 0..RUNS {
        let pod = format!("p{i}");
        server.fixture().insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": "pods"}}));
        let att = galactic_core::ident::base62_encode(i as u64 % 200 + 1);
        let cid = format!("c{i}");
        // What the master's ADD of this attachment leaves: its record and its result.
        node.record_master("net1", &cid, "eth0", &netns, ("1", &att));
        let host = galactic_core::ident::ChainIds::of(&json!({"vpc": "1", "vpcattachment": att}))
            .unwrap()
            .host_ifname();
        let prev = json!({"cniVersion": "1.1.0",
            "interfaces": [{"name": host}, {"name": "eth0", "sandbox": netns}],
            "ips": [{"address": format!("fd20:10:ff01::{:x}:0/96", i + 1), "interface": 1},
                    {"address": format!("172.21.{}.{}/24", i / 200, i % 200 + 2), "interface": 1}]});
        let conf =
            json!({"cniVersion": "1.1.0", "name": "net1", "type": "galactic-bgp", "vpc": "1",
                          "vpcattachment": att, "prevResult": prev})
            .to_string();
        let started = Instant::now();
        let out = Invocation::new(Path::new(BIN), "ADD", &node)
            .attachment(&cid, &netns, "eth0", dir.path())
            // Publication cost only: no eBPF datapath on the bench node.
            .var(galactic_core::bpf::maps::DATAPATH_ENV, "off")
            .var(
                "CNI_ARGS",
                &format!("K8S_POD_NAMESPACE=pods;K8S_POD_NAME={pod}"),
            )
            .stdin(conf)
            .run();
        wall.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(out.success, "{out:?}");
    }
    let mut floor = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let out = Invocation::new(Path::new(BIN), "VERSION", &node).run();
        floor.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(out.success);
    }
    let lines = node.log_lines();
    let setup = field(&lines, "kube: client ready", "setupMs");
    let handler = field(&lines, "ADD: done", "durationMs");
    let requests = server.fixture().requests().len() as f64 / RUNS as f64;
    println!("galactic-bgp ADD against the loopback API server ({RUNS} runs, release build)");
    println!("| measure | median |");
    println!("|---|---|");
    println!(
        "| ADD, whole process (spawn to exit) | {:.2} ms |",
        median(wall)
    );
    println!(
        "| ADD handler (config resolved → result) | {:.2} ms |",
        median(handler)
    );
    println!(
        "| of which Kubernetes client start-up | {:.2} ms |",
        median(setup)
    );
    println!(
        "| VERSION, whole process (spawn floor + parse) | {:.2} ms |",
        median(floor)
    );
    println!("| API requests per ADD | {requests:.1} |");
}
