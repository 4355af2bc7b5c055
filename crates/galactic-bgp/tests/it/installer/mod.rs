//! The node installer (`deploy/kubernetes/install.sh`, run by the DaemonSet's init container)
//! against a temporary host root: what it stages must be what the plugins read — the node config
//! through `galactic_core::config::NodeConfig`, the kubeconfig through the `kube` crate
//! galactic-bgp builds its client with — and a second run must change nothing.

// A test fails by panicking.
#![allow(clippy::unwrap_used)]

mod fresh;
mod rollback;
mod settings;
mod switch;

use galactic_core::config::{NodeConfig, Publisher, RoutingDomainMode};
use galactic_testkit::host::PLUGINS;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/install.sh")
}

/// An image layout (`/galactic/bin`, the service account directory) and a host root.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("image-bin");
        std::fs::create_dir_all(&bin).unwrap();
        for plugin in PLUGINS {
            let path = bin.join(plugin);
            std::fs::write(&path, format!("#!/bin/sh\necho {plugin}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let sa = dir.path().join("sa");
        std::fs::create_dir_all(&sa).unwrap();
        std::fs::write(sa.join("token"), "eyJhbGciOi.first-token_1").unwrap();
        std::fs::write(
            sa.join("ca.crt"),
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        Self { dir }
    }

    fn host(&self, path: &str) -> PathBuf {
        self.dir.path().join("host").join(path)
    }

    fn run(&self, extra: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new("sh");
        cmd.arg(script())
            .arg("install")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOST_ROOT", self.dir.path().join("host"))
            .env("IMAGE_BIN", self.dir.path().join("image-bin"))
            .env("SA_DIR", self.dir.path().join("sa"))
            // The init container's root filesystem is read-only and it mounts no /tmp: a
            // temporary file anywhere but under its host mounts fails, as it does there.
            .env(
                "TMPDIR",
                self.dir.path().join("no-scratch-space-outside-the-mounts"),
            )
            .env("NODE_NAME", "node-a")
            .env("KUBERNETES_SERVICE_HOST", "fd00:10::1")
            .env("KUBERNETES_SERVICE_PORT", "6443");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// What the upstream installer writes to `/etc/cni/net.d/10-galactic.conflist` (its format: one
/// Go-quoted `"key": "value"` per line).
fn go_conflist(level: &str, sids: &str, uplinks: &str) -> String {
    format!(
        r#"{{
  "cniVersion": "1.0.0",
  "name": "galactic",
  "plugins": [
    {{
      "type": "galactic-cni",
      "node_name": "node-a",
      "kubeconfig": "/var/lib/galactic/kubeconfig",
      "namespace": "galactic-system",
      "log_file": "/var/log/galactic/galactic-cni.log",
      "log_level": "{level}",
      "nat66_shard_sids": "{sids}",
      "ebpf_interfaces": "{uplinks}"
    }}
  ]
}}
"#
    )
}

impl Fixture {
    /// The Go installer's static conflist in the host's CNI conf dir; its path.
    fn plant_go_conflist(&self, level: &str, sids: &str, uplinks: &str) -> PathBuf {
        let go = self.host("etc/cni/net.d/10-galactic.conflist");
        std::fs::create_dir_all(go.parent().unwrap()).unwrap();
        std::fs::write(&go, go_conflist(level, sids, uplinks)).unwrap();
        go
    }
}

/// The Go settings the carry-over tests plant: debug, one SID, one uplink.
fn assert_carried(node: &NodeConfig, level: galactic_core::log::Level) {
    assert_eq!(node.log_level, level);
    assert_eq!(
        node.egress.shard_sids,
        ["2001:db8:ff01:9:e001::"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()]
    );
    assert_eq!(node.ebpf_interfaces, ["eth1"]);
}

fn node_config(fx: &Fixture) -> NodeConfig {
    NodeConfig::resolve_from(
        &serde_json::json!({}),
        &|_: &str| None,
        &fx.host("etc/galactic/node.json"),
        None,
    )
    .unwrap()
}

/// Plants the Go installer's binaries in the host's CNI bin dir.
fn plant_go_binaries(fx: &Fixture) {
    let bin = fx.host("opt/cni/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in [
        "galactic-veth",
        "galactic-tap",
        "galactic-ipam",
        "galactic-route",
        "galactic-bgp",
        "host-device",
    ] {
        std::fs::write(bin.join(name), format!("#!/bin/sh\necho go-{name}\n")).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
