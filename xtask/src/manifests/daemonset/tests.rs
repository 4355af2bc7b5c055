//! The DaemonSet lint against the shipped manifest and edits of it.

use super::*;

fn shipped() -> Value {
    let path = crate::workspace_root().join("deploy/kubernetes/daemonset.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let yaml: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    serde_json::to_value(yaml).unwrap()
}

fn install_mounts(doc: &mut Value) -> &mut Vec<Value> {
    let init = &mut doc["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(init["name"], "install-cni");
    init["volumeMounts"].as_array_mut().unwrap()
}

#[test]
fn the_installer_reads_the_go_markers_through_a_read_only_mount() {
    assert_eq!(lint(&shipped()), Vec::<String>::new());
    let mut writable = shipped();
    for mount in install_mounts(&mut writable) {
        if mount["mountPath"] == "/host/var/lib/cni" {
            mount["readOnly"] = Value::Bool(false);
        }
    }
    assert_eq!(
        lint(&writable),
        ["install-cni must mount /host/var/lib/cni read-only"]
    );
    let mut missing = shipped();
    install_mounts(&mut missing).retain(|m| m["mountPath"] != "/host/var/lib/cni");
    assert_eq!(
        lint(&missing),
        ["install-cni must mount /host/var/lib/cni read-only"]
    );
}

fn datapath_mounts_of(doc: &mut Value) -> &mut Vec<Value> {
    let containers = doc["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap();
    let datapath = containers
        .iter_mut()
        .find(|c| c["name"] == "datapath")
        .unwrap();
    datapath["volumeMounts"].as_array_mut().unwrap()
}

#[test]
fn the_datapath_reads_the_tap_ra_records_writable_at_their_host_path() {
    let want = ["the datapath container must mount the tap RA records writable at /var/lib/cni/ra (hostPath /var/lib/cni/ra): without them no VM on a tap gets router advertisements"];
    let mut missing = shipped();
    datapath_mounts_of(&mut missing).retain(|m| m["mountPath"] != "/var/lib/cni/ra");
    assert_eq!(lint(&missing), want);
    let mut read_only = shipped();
    for m in datapath_mounts_of(&mut read_only) {
        if m["mountPath"] == "/var/lib/cni/ra" {
            m["readOnly"] = Value::Bool(true);
        }
    }
    assert_eq!(lint(&read_only), want);
    let mut elsewhere = shipped();
    for v in elsewhere["spec"]["template"]["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
    {
        if v["name"] == "radv-state" {
            v["hostPath"]["path"] = "/var/lib/galactic/ra".into();
        }
    }
    assert_eq!(lint(&elsewhere), want);
}
