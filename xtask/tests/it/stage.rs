//! `cargo xtask build-and-stage` into temporary directories, run twice.

use galactic_testkit::host::PLUGINS;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn stage(root: &Path, conflist: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("build-and-stage")
        .args(["--bin-dir", &root.join("bin").display().to_string()])
        .args([
            "--node-config",
            &root.join("etc/node.json").display().to_string(),
        ])
        .args(["--set", "publisher=local", "--set", "routing_domain=table"])
        .args([
            "--set",
            &format!("state_dir={}", root.join("state").display()),
        ])
        .args(["--set", "node_name=worker-1", "--aliases"])
        .args(["--conflist", &conflist.display().to_string()])
        .args(["--conf-dir", &root.join("net.d").display().to_string()])
        .output()
        .expect("run xtask");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[test]
fn stages_every_plugin_and_the_node_config_and_is_idempotent() {
    let root = tempfile::tempdir().unwrap();
    let conflist = root.path().join("10-tenant.conflist");
    std::fs::write(
        &conflist,
        r#"{"cniVersion":"1.1.0","name":"tenant","plugins":[{"type":"galactic-cni"}]}"#,
    )
    .unwrap();

    let first = stage(root.path(), &conflist);
    assert!(first.contains("updated"), "{first}");
    for name in PLUGINS.iter().chain(&["galactic-veth", "galactic-tap"]) {
        let meta = std::fs::metadata(root.path().join("bin").join(name)).unwrap();
        assert!(
            meta.is_file() && meta.permissions().mode() & 0o777 == 0o755,
            "{name}"
        );
    }
    let node: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.path().join("etc/node.json")).unwrap()).unwrap();
    assert_eq!(node["publisher"], "local");
    assert_eq!(node["routing_domain"], "table");
    assert_eq!(node["node_name"], "worker-1");
    assert!(node["state_dir"].as_str().unwrap().ends_with("/state"));
    assert!(root.path().join("net.d/10-tenant.conflist").is_file());

    let before: Vec<_> = std::fs::read_dir(root.path().join("bin"))
        .unwrap()
        .map(|e| {
            (
                e.as_ref().unwrap().file_name(),
                e.unwrap().metadata().unwrap().modified().unwrap(),
            )
        })
        .collect();
    let second = stage(root.path(), &conflist);
    assert!(second.contains("already up to date"), "{second}");
    let after: Vec<_> = std::fs::read_dir(root.path().join("bin"))
        .unwrap()
        .map(|e| {
            (
                e.as_ref().unwrap().file_name(),
                e.unwrap().metadata().unwrap().modified().unwrap(),
            )
        })
        .collect();
    assert_eq!(before, after, "nothing rewritten, no temporary files left");
}

#[test]
fn an_invalid_setting_is_refused_before_anything_is_installed() {
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("build-and-stage")
        .args(["--bin-dir", &root.path().join("bin").display().to_string()])
        .args([
            "--node-config",
            &root.path().join("node.json").display().to_string(),
        ])
        .args(["--set", "routing_domain=bridge"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("routing_domain"));
    assert!(!root.path().join("node.json").exists());
}
