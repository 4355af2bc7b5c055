//! `galactic-bgp check-node` (the node installer's node-identity check) against the loopback API
//! server: the named Node must have one of this machine's addresses as an InternalIP.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::apiserver::ApiServer;
use serde_json::json;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_galactic-bgp");

fn node(name: &str, addresses: &[(&str, &str)]) -> serde_json::Value {
    let addresses: Vec<_> = addresses
        .iter()
        .map(|(kind, address)| json!({"type": kind, "address": address}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
           "status": {"addresses": addresses}})
}

fn check(server: &ApiServer, name: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    Command::new(BIN)
        .arg("check-node")
        .arg(&kubeconfig)
        .arg(name)
        .output()
        .unwrap()
}

#[test]
fn a_node_whose_internal_ip_is_local_passes_and_any_other_fails_with_what_to_fix() {
    let server = ApiServer::start().unwrap();
    // 127.0.0.1 is an address of every machine's loopback; 192.0.2.0/24 is documentation space.
    server.fixture().insert(node(
        "this-node",
        &[("ExternalIP", "192.0.2.1"), ("InternalIP", "127.0.0.1")],
    ));
    server.fixture().insert(node(
        "other-node",
        &[("InternalIP", "192.0.2.77"), ("ExternalIP", "127.0.0.1")],
    ));

    let out = check(&server, "this-node");
    assert!(out.status.success(), "{out:?}");

    let out = check(&server, "other-node");
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(message.contains("node identity check failed"), "{message}");
    assert!(
        message.contains("other-node") && message.contains("192.0.2.77"),
        "{message}"
    );
    assert!(
        !message.contains("127.0.0.1"),
        "an ExternalIP is not the node's identity: {message}"
    );
    assert!(message.contains("NODE_NAME"), "says what to fix: {message}");

    let out = check(&server, "no-such-node");
    assert!(!out.status.success());
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(
        message.contains("no-such-node") || message.contains("not found"),
        "{message}"
    );
    assert!(!message.contains("Some("), "no Debug output: {message}");
}
