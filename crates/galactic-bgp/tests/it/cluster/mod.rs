//! The publication tests' cluster: galactic-bgp as a runtime runs it (a separate process),
//! against the loopback API server or the local backend, with prevResults shaped like the
//! masters' results.

#![allow(dead_code)] // each test file uses a different part of the fixture
#![allow(clippy::unwrap_used)] // a fixture panics to report a failed precondition

use galactic_testkit::apiserver::ApiServer;
use galactic_testkit::host::use_apiserver;
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use galactic_testkit::{Outcome, TestNode};
use serde_json::{json, Value};
use std::path::Path;

pub const BIN: &str = env!("CARGO_BIN_EXE_galactic-bgp");
pub const NS: &str = "galactic-system";

/// A live netns path: this test process's own.
pub fn live_netns() -> String {
    format!("/proc/{}/ns/net", std::process::id())
}

pub fn veth_prev(v6: &str, v4: &str, netns: &str) -> Value {
    json!({
        "cniVersion": "1.1.0",
        "interfaces": [
            {"name": "G000000001001H", "mac": "02:00:00:00:00:01", "mtu": 1500},
            {"name": "eth0", "mac": "02:00:00:00:00:02", "sandbox": netns, "socketPath": "/x"}
        ],
        "ips": [
            {"address": v6, "gateway": "fd20:10:ff01::1", "interface": 1},
            {"address": v4, "gateway": "172.21.1.1", "interface": 1}
        ],
        "routes": [{"dst": "::/0", "table": 100, "priority": 5}],
        "futureKey": {"kept": true}
    })
}

/// galactic-bgp's network config and the prevResult it runs with.
pub struct Stanza {
    pub list: Conflist,
    pub prev: Option<Value>,
}

/// galactic-bgp's stanza for (`vpc`, `att`), with `prev` as that attachment's master would
/// report it: its host interface is the one the ids name.
pub fn stanza(vpc: &str, att: &str, prev: &Value) -> Stanza {
    let mut prev = prev.clone();
    if let Ok(ids) = galactic_core::ident::ChainIds::of(&json!({"vpc": vpc, "vpcattachment": att}))
    {
        for iface in prev["interfaces"].as_array_mut().into_iter().flatten() {
            if iface.get("sandbox").is_none() {
                iface["name"] = json!(ids.host_ifname());
            }
        }
    }
    Stanza {
        list: bgp_list("net1", vpc, att),
        prev: Some(prev),
    }
}

/// A network config file with galactic-bgp alone.
pub fn bgp_list(name: &str, vpc: &str, att: &str) -> Conflist {
    let conf = json!({"type": "galactic-bgp", "vpc": vpc, "vpcattachment": att});
    Conflist::new("1.1.0", name, vec![conf])
}

/// A runtime on `node` running this crate's galactic-bgp in the test's own namespace.
pub fn runtime(node: &TestNode) -> Runtime<'_> {
    Runtime::new(node, node.dir.path(), None).binary("galactic-bgp", Path::new(BIN))
}

pub struct Cluster {
    pub server: ApiServer,
    pub node: TestNode,
}

pub fn router(name: &str, node: &str, srv6: bool) -> Value {
    let mut spec = json!({"targetRef": {"kind": "Node", "name": node},
                          "localASN": 65000, "routerID": "10.0.2.1",
                          "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}]});
    if srv6 {
        spec["srv6Locator"] = json!("2001:db8:ff03::/48");
        spec["nodeID"] = json!(1);
    }
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
           "metadata": {"name": name, "namespace": NS}, "spec": spec})
}

/// A node publishing to `server` under the name `node_name`.
pub fn kube_node(server: &ApiServer, node_name: &str) -> TestNode {
    let node =
        TestNode::new(json!({"publisher": "kubernetes", "node_name": node_name, "namespace": NS}));
    use_apiserver(&node, server);
    node
}

impl Cluster {
    pub fn new(node_name: &str) -> Self {
        let server = ApiServer::start().unwrap();
        let node = kube_node(&server, node_name);
        server.fixture().insert(router("router-a", "node-a", true));
        server.fixture().insert(router("router-b", "node-b", false));
        Self { server, node }
    }

    pub fn pod(&self, name: &str) -> String {
        let pod = self
            .server
            .fixture()
            .insert(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "pods"}}));
        pod["metadata"]["uid"].as_str().unwrap().to_owned()
    }

    pub fn get(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        self.server.fixture().get(plural, Some(ns), name)
    }
}

/// galactic-bgp's `command` for container `cid` in `netns`, of kubelet's `pod` (if any).
pub fn call(
    node: &TestNode,
    command: &str,
    cid: &str,
    netns: &str,
    pod: Option<&str>,
    stanza: &Stanza,
) -> Outcome {
    let mut att = Attachment::new(cid, netns, "eth0");
    if let Some(pod) = pod {
        att = att
            .arg("IgnoreUnknown", "1")
            .arg("K8S_POD_NAMESPACE", "pods")
            .arg("K8S_POD_NAME", pod);
    }
    // These tests run galactic-bgp with a prevResult of their own: the master's record of
    // the attachment is what its ADD would have left (galactic-bgp checks it before publishing).
    let entry = &stanza.list.plugins[0];
    if let (Some(vpc), Some(att)) = (entry["vpc"].as_str(), entry["vpcattachment"].as_str()) {
        if galactic_core::ident::ChainIds::of(entry).is_ok() && command == "ADD" {
            node.record_master(&stanza.list.name, cid, "eth0", netns, (vpc, att));
        }
    }
    // These tests are about publication: the node has SRv6 settings but no eBPF datapath
    // (the `datapath` module covers the registration on real maps).
    runtime(node)
        .env(galactic_core::bpf::maps::DATAPATH_ENV, "off")
        .plugin(&stanza.list, 0, command, &att, stanza.prev.as_ref())
}

pub fn add_ok(node: &TestNode, cid: &str, netns: &str, pod: Option<&str>, stanza: &Stanza) {
    let out = call(node, "ADD", cid, netns, pod, stanza);
    assert!(out.success, "{out:?}\nlog: {:?}", node.log_lines());
    assert_eq!(
        Some(out.json()),
        stanza.prev,
        "prevResult passes through unchanged"
    );
}
