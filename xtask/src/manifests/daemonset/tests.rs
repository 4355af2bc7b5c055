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
