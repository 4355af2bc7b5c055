//! `galactic-bgp export-annotations` (run by the node installer on a node the Go chain served)
//! against the loopback API server, and the export read back by `galactic-ipam migrate`, the
//! same reader the automatic import uses: every allocation the annotations record reaches the
//! store.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::apiserver::{ApiServer, Fault, FaultAction};
use galactic_testkit::workspace_binary;
use serde_json::{json, Value};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_galactic-bgp");
const NS: &str = "galactic-system";

fn advertisement(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPAdvertisement",
           "metadata": {"name": name, "namespace": NS, "annotations": annotations},
           "spec": {"routerRef": {"name": "router-a"},
                    "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
                    "prefixes": ["fd20:10:ff01::/96"]}})
}

fn export(server: &ApiServer, dir: &std::path::Path) -> std::process::Output {
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    Command::new(BIN)
        .arg("export-annotations")
        .arg(&kubeconfig)
        .arg(NS)
        .arg(dir.join("ipam/legacy-annotations.json"))
        .output()
        .unwrap()
}

#[test]
fn the_export_carries_every_annotation_record_to_the_store() {
    let server = ApiServer::start().unwrap();
    let cid = "0123456789abcdef0123456789abcdef0123456789abcdef";
    let cid41: String = cid.chars().take(41).collect();
    server.fixture().insert(advertisement(
        "55-1",
        json!({format!("galactic.datum.net/netns.{cid41}"): "/var/run/netns/cni-1",
               format!("galactic.datum.net/allocated-subnet-ipv6.{cid41}"): "fd20:10:ff01::100:0/96",
               format!("galactic.datum.net/allocated-subnet-ipv4.{cid41}"): "172.21.1.2"}),
    ));
    server.fixture().insert(advertisement(
        "55-2",
        json!({"unrelated": "kept out of the store"}),
    ));
    let dir = tempfile::tempdir().unwrap();
    let out = export(&server, dir.path());
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 BGPAdvertisements"));
    let file = dir.path().join("ipam/legacy-annotations.json");
    let list: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert!(
        std::fs::read_dir(dir.path().join("ipam"))
            .unwrap()
            .all(|e| !e.unwrap().file_name().to_string_lossy().contains(".tmp.")),
        "no temporary file left"
    );

    let migrate = Command::new(workspace_binary("galactic-ipam"))
        .args(["migrate", "--annotations"])
        .arg(&file)
        .arg("--data-dir")
        .arg(dir.path().join("store"))
        .output()
        .unwrap();
    assert!(migrate.status.success(), "{migrate:?}");
    let report: Value = serde_json::from_slice(&migrate.stdout).unwrap();
    assert_eq!(report["imported"], 2, "both families: {report}");
}

#[test]
fn an_unreachable_or_refusing_api_server_fails_and_writes_nothing() {
    let server = ApiServer::start().unwrap();
    server.fixture().inject(Fault::on(
        "GET",
        "bgpadvertisements",
        100,
        FaultAction::Status(403),
    ));
    let dir = tempfile::tempdir().unwrap();
    let out = export(&server, dir.path());
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("galactic-bgp export-annotations:"), "{err}");
    assert!(!dir.path().join("ipam/legacy-annotations.json").exists());
}
