//! The node installer (`deploy/kubernetes/install.sh`, run by the DaemonSet's init container)
//! against a temporary host root: what it stages must be what the plugins read — the node config
//! through `galactic_core::config::NodeConfig`, the kubeconfig through the `kube` crate
//! galactic-bgp builds its client with — and a second run must change nothing.

// A test fails by panicking.
#![allow(clippy::unwrap_used)]

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

#[test]
fn install_stages_what_the_plugins_read_and_a_second_run_changes_nothing() {
    let fx = Fixture::new();
    let first = fx.run(&[("GALACTIC_ROUTING_DOMAIN", "table")]);
    assert!(first.status.success(), "{first:?}");
    for plugin in PLUGINS {
        let staged = fx.host("opt/cni/bin").join(plugin);
        assert_eq!(
            std::fs::read(&staged).unwrap(),
            std::fs::read(fx.dir.path().join("image-bin").join(plugin)).unwrap()
        );
        assert_eq!(mode(&staged), 0o755, "{plugin}");
    }
    assert!(!fx.host("opt/cni/bin/galactic-veth").exists());

    let node = NodeConfig::resolve_from(
        &serde_json::json!({}),
        &|_: &str| None,
        &fx.host("etc/galactic/node.json"),
        None,
    )
    .unwrap();
    assert_eq!(node.node_name.as_deref(), Some("node-a"));
    assert_eq!(node.publisher, Publisher::Kubernetes);
    assert_eq!(node.routing_domain, RoutingDomainMode::Table);
    assert_eq!(node.namespace, "galactic-system");
    assert_eq!(node.kubeconfig, Path::new("/var/lib/galactic/kubeconfig"));
    assert_eq!(node.state_dir, Path::new("/var/lib/galactic"));

    let kubeconfig_path = fx.host("var/lib/galactic/kubeconfig");
    assert_eq!(mode(&kubeconfig_path), 0o600);
    let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig_path).unwrap();
    let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://[fd00:10::1]:6443"));
    assert_eq!(
        cluster.certificate_authority.as_deref(),
        Some("/var/lib/galactic/ca.crt")
    );
    let user = kubeconfig.auth_infos[0].auth_info.as_ref().unwrap();
    assert!(user.token.is_some(), "a bearer token");
    let text = std::fs::read_to_string(&kubeconfig_path).unwrap();
    assert!(text.contains("token: eyJhbGciOi.first-token_1"), "{text}");
    assert_eq!(
        kubeconfig.current_context.as_deref(),
        Some("galactic"),
        "{kubeconfig:?}"
    );
    assert!(fx.host("var/lib/galactic/ca.crt").is_file());
    assert!(fx.host("var/log/galactic").is_dir());

    let modified = std::fs::metadata(&kubeconfig_path)
        .unwrap()
        .modified()
        .unwrap();
    let second = fx.run(&[("GALACTIC_ROUTING_DOMAIN", "table")]);
    assert!(second.status.success(), "{second:?}");
    assert!(
        second.stdout.is_empty(),
        "a second run changes nothing: {}",
        String::from_utf8_lossy(&second.stdout)
    );
    assert_eq!(
        std::fs::metadata(&kubeconfig_path)
            .unwrap()
            .modified()
            .unwrap(),
        modified
    );
}

#[test]
fn a_rotated_token_rewrites_only_the_kubeconfig() {
    let fx = Fixture::new();
    assert!(fx.run(&[]).status.success());
    std::fs::write(fx.dir.path().join("sa/token"), "eyJhbGciOi.second-token_2").unwrap();
    let again = fx.run(&[]);
    assert!(again.status.success(), "{again:?}");
    let changed = String::from_utf8_lossy(&again.stdout);
    let lines: Vec<&str> = changed.lines().collect();
    assert_eq!(lines.len(), 1, "{changed}");
    assert!(
        lines[0].ends_with("var/lib/galactic/kubeconfig"),
        "{changed}"
    );
    let text = std::fs::read_to_string(fx.host("var/lib/galactic/kubeconfig")).unwrap();
    assert!(text.contains("second-token_2") && !text.contains("first-token_1"));
}

#[test]
fn aliases_and_the_local_publisher() {
    let fx = Fixture::new();
    let out = fx.run(&[("ALIASES", "true"), ("GALACTIC_PUBLISHER", "local")]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read(fx.host("opt/cni/bin/galactic-veth")).unwrap(),
        std::fs::read(fx.host("opt/cni/bin/galactic-cni")).unwrap()
    );
    assert_eq!(
        std::fs::read(fx.host("opt/cni/bin/galactic-tap")).unwrap(),
        std::fs::read(fx.host("opt/cni/bin/galactic-tap-cni")).unwrap()
    );
    assert!(
        !fx.host("var/lib/galactic/kubeconfig").exists(),
        "the local publisher needs no credentials"
    );
}

#[test]
fn an_invalid_setting_fails_before_anything_is_written() {
    for (key, value) in [
        ("GALACTIC_PUBLISHER", "bridge"),
        ("GALACTIC_ROUTING_DOMAIN", "l3"),
        ("NODE_NAME", "node \"a\""),
        ("NODE_NAME", ""),
    ] {
        let fx = Fixture::new();
        let out = fx.run(&[(key, value)]);
        assert!(!out.status.success(), "{key}={value:?} must fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert!(!fx.host("opt").exists(), "{key}: nothing staged");
        assert!(!fx.host("etc").exists(), "{key}: nothing staged");
    }
}
