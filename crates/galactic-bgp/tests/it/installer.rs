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

#[test]
fn upstream_settings_by_their_upstream_names_land_in_the_node_config() {
    let fx = Fixture::new();
    let out = fx.run(&[
        ("GALACTIC_CNI_NODE_NAME", "node-b"),
        ("GALACTIC_CNI_LOG_LEVEL", "Warning"),
        (
            "GALACTIC_CNI_EGRESS_SHARD_SIDS",
            " 2001:db8:5::1, ,2001:db8:6::1",
        ),
        (
            "GALACTIC_CNI_NAT64_PREFIX",
            "64:ff9b::/96, 2001:db8:64::/96",
        ),
        ("GALACTIC_CNI_EBPF_INTERFACES", "eth1, eth1,eth2"),
        ("GALACTIC_CNI_EBPF_FILTER_PRIORITY", "7"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let node = node_config(&fx);
    assert_eq!(
        node.node_name.as_deref(),
        Some("node-b"),
        "GALACTIC_CNI_NODE_NAME wins over NODE_NAME, as upstream"
    );
    assert_eq!(node.log_level, galactic_core::log::Level::Warn);
    assert_eq!(
        node.egress.shard_sids,
        [
            "2001:db8:5::1".parse::<std::net::Ipv6Addr>().unwrap(),
            "2001:db8:6::1".parse().unwrap()
        ]
    );
    assert_eq!(
        node.egress.nat64_prefixes,
        [
            "64:ff9b::/96".parse::<ipnetwork::Ipv6Network>().unwrap(),
            "2001:db8:64::/96".parse().unwrap()
        ]
    );
    assert_eq!(node.ebpf_interfaces, ["eth1", "eth2"]);
    assert_eq!(node.ebpf_filter_priority, 7);
    // The datapath container's host conflist: upstream's shape, the same values.
    let datapath: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fx.host("etc/galactic/datapath/10-galactic.conflist")).unwrap(),
    )
    .unwrap();
    let entry = &datapath["plugins"][0];
    assert_eq!(entry["type"], "galactic-cni");
    assert_eq!(entry["node_name"], "node-b");
    assert_eq!(entry["namespace"], "galactic-system");
    assert_eq!(entry["egress_shard_sids"], "2001:db8:5::1,2001:db8:6::1");
    assert_eq!(entry["nat64_prefix"], "64:ff9b::/96,2001:db8:64::/96");
    assert_eq!(entry["ebpf_interfaces"], "eth1,eth2");
    // An unknown level is upstream's info with a warning, not a failed node.
    let fx = Fixture::new();
    let out = fx.run(&[("GALACTIC_CNI_LOG_LEVEL", "trace")]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("trace"));
    assert_eq!(node_config(&fx).log_level, galactic_core::log::Level::Info);
}

#[test]
fn a_bad_uplink_or_sid_fails_before_anything_is_written() {
    for (key, value) in [
        ("GALACTIC_CNI_EGRESS_SHARD_SIDS", "2001:db8::1,10.0.0.1"),
        ("GALACTIC_CNI_NAT66_SHARD_SIDS", "2001:db8::1,10.0.0.1"),
        ("GALACTIC_CNI_NAT64_PREFIX", "64:ff9b::/96,64:ff9b::/64"),
        ("GALACTIC_CNI_EBPF_INTERFACES", "eth0,a-name-far-too-long"),
        ("GALACTIC_CNI_EBPF_INTERFACES", "eth0:1"),
    ] {
        let fx = Fixture::new();
        let out = fx.run(&[(key, value)]);
        assert!(!out.status.success(), "{key}={value:?} must fail");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(key),
            "{out:?}"
        );
        assert!(
            !fx.host("etc").exists() && !fx.host("opt").exists(),
            "{key}"
        );
    }
}

#[test]
fn the_old_shard_sid_name_is_carried_and_a_different_new_one_fails_naming_both() {
    let fx = Fixture::new();
    let out = fx.run(&[("GALACTIC_CNI_NAT66_SHARD_SIDS", "2001:db8:5::")]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        node_config(&fx).egress.shard_sids,
        ["2001:db8:5::".parse::<std::net::Ipv6Addr>().unwrap()]
    );
    let fx = Fixture::new();
    let out = fx.run(&[
        ("GALACTIC_CNI_EGRESS_SHARD_SIDS", "2001:db8:5::"),
        ("GALACTIC_CNI_NAT66_SHARD_SIDS", "2001:db8:6::"),
    ]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("GALACTIC_CNI_EGRESS_SHARD_SIDS")
            && err.contains("GALACTIC_CNI_NAT66_SHARD_SIDS"),
        "{err}"
    );
    assert!(!fx.host("etc").exists() && !fx.host("opt").exists());
}

#[test]
fn the_go_conflist_settings_carry_over_and_the_file_leaves_the_conf_dir() {
    let fx = Fixture::new();
    let go = fx.plant_go_conflist("debug", "2001:db8:ff01:9:e001::", "eth1");
    let out = fx.run(&[]);
    assert!(out.status.success(), "{out:?}");
    let node = node_config(&fx);
    assert_carried(&node, galactic_core::log::Level::Debug);
    assert!(!go.exists(), "the runtime's conf dir no longer holds it");
    let datapath =
        std::fs::read_to_string(fx.host("etc/galactic/datapath/10-galactic.conflist")).unwrap();
    assert!(
        datapath.contains("\"ebpf_interfaces\": \"eth1\""),
        "{datapath}"
    );
    // The environment wins over the file, as upstream.
    let fx = Fixture::new();
    fx.plant_go_conflist("debug", "", "eth1");
    assert!(fx
        .run(&[("GALACTIC_CNI_EBPF_INTERFACES", "eth9")])
        .status
        .success());
    assert_eq!(node_config(&fx).ebpf_interfaces, ["eth9"]);
}

#[test]
fn the_go_settings_survive_every_later_run_and_only_a_changed_setting_changes() {
    let fx = Fixture::new();
    let go = fx.plant_go_conflist("debug", "2001:db8:ff01:9:e001::", "eth1");
    assert!(fx.run(&[]).status.success());
    assert!(!go.exists());
    let node_json = fx.host("etc/galactic/node.json");
    let datapath = fx.host("etc/galactic/datapath/10-galactic.conflist");
    let first = (
        std::fs::read_to_string(&node_json).unwrap(),
        std::fs::read_to_string(&datapath).unwrap(),
    );

    // A restart, a reboot: the same (empty) DaemonSet settings, the Go conflist gone.
    for run in ["second", "third"] {
        let out = fx.run(&[]);
        assert!(out.status.success(), "{out:?}");
        assert!(
            out.stdout.is_empty(),
            "the {run} run changes nothing: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(std::fs::read_to_string(&node_json).unwrap(), first.0);
        assert_eq!(std::fs::read_to_string(&datapath).unwrap(), first.1);
    }

    // A DaemonSet update that sets one setting: that one changes, every carried one stays.
    let out = fx.run(&[("GALACTIC_CNI_LOG_LEVEL", "error")]);
    assert!(out.status.success(), "{out:?}");
    let node = node_config(&fx);
    assert_carried(&node, galactic_core::log::Level::Error);
    let updated = std::fs::read_to_string(&node_json).unwrap();
    assert_eq!(
        updated.replace("\"log_level\": \"error\"", "\"log_level\": \"debug\""),
        first.0,
        "only the log level changed"
    );
    assert!(
        !go.exists(),
        "the runtime's conf dir still does not hold it"
    );
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

#[test]
fn the_go_binaries_are_replaced_and_aliased_over_in_one_switch() {
    let fx = Fixture::new();
    plant_go_binaries(&fx);
    let out = fx.run(&[]);
    assert!(out.status.success(), "{out:?}");
    let bin = fx.host("opt/cni/bin");
    let image = |name: &str| std::fs::read(fx.dir.path().join("image-bin").join(name)).unwrap();
    for (name, ours) in [
        ("galactic-cni", "galactic-cni"),
        ("galactic-tap-cni", "galactic-tap-cni"),
        ("galactic-ipam", "galactic-ipam"),
        ("galactic-route", "galactic-route"),
        ("galactic-bgp", "galactic-bgp"),
        ("galactic-veth", "galactic-cni"),
        ("galactic-tap", "galactic-tap-cni"),
    ] {
        assert_eq!(
            std::fs::read(bin.join(name)).unwrap(),
            image(ours),
            "{name}"
        );
        // Every name goes through the one `current` link: one rename switches them all.
        assert_eq!(
            std::fs::read_link(bin.join(name)).unwrap(),
            Path::new(".galactic/current").join(name),
            "{name}"
        );
    }
    assert!(std::fs::symlink_metadata(bin.join(".galactic/current"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(bin.join("host-device")).unwrap(),
        "#!/bin/sh\necho go-host-device\n",
        "not ours to replace"
    );
    let sets: Vec<_> = std::fs::read_dir(bin.join(".galactic"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(sets.len(), 2, "current and one set: {sets:?}");
    let again = fx.run(&[]);
    assert!(
        again.status.success() && again.stdout.is_empty(),
        "{again:?}"
    );

    // A new image switches every name at once, and the old set goes.
    let new_bgp = fx.dir.path().join("image-bin/galactic-bgp");
    std::fs::write(&new_bgp, "#!/bin/sh\necho galactic-bgp v2\n").unwrap();
    let before = std::fs::read_link(bin.join(".galactic/current")).unwrap();
    assert!(fx.run(&[]).status.success());
    assert_ne!(
        std::fs::read_link(bin.join(".galactic/current")).unwrap(),
        before
    );
    assert_eq!(
        std::fs::read_to_string(bin.join("galactic-bgp")).unwrap(),
        "#!/bin/sh\necho galactic-bgp v2\n"
    );
    assert!(!bin.join(".galactic").join(before).exists());

    // Once no NAD uses the upstream names: ALIASES=false removes them.
    assert!(fx.run(&[("ALIASES", "false")]).status.success());
    assert!(std::fs::symlink_metadata(bin.join("galactic-veth")).is_err());
    assert!(std::fs::symlink_metadata(bin.join("galactic-tap")).is_err());
    assert!(bin.join("galactic-cni").is_file());
}

/// The install-cni container's environment as `deploy/kubernetes/daemonset.yaml` gives it, with
/// the downward API values a node would get.
fn daemonset_env() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/daemonset.yaml"),
    )
    .unwrap();
    let ds: serde_json::Value =
        serde_json::to_value(serde_norway::from_str::<serde_norway::Value>(&text).unwrap())
            .unwrap();
    let install = &ds["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(install["name"], "install-cni");
    install["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("spec.nodeName") => "node-ds".to_owned(),
                Some("metadata.namespace") => "galactic-system".to_owned(),
                Some(other) => panic!("unexpected downward API field {other}"),
                None => e["value"].as_str().unwrap().to_owned(),
            };
            (name, value)
        })
        .collect()
}

#[test]
fn the_daemonset_environment_installs_and_each_upstream_setting_reaches_the_node_config() {
    let env = daemonset_env();
    let as_pairs = |env: &[(String, String)]| -> Vec<(String, String)> { env.to_vec() };
    let run = |env: &[(String, String)]| {
        let fx = Fixture::new();
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let out = fx.run(&pairs);
        assert!(out.status.success(), "{out:?}");
        let node = node_config(&fx);
        (fx, node)
    };
    let (_fx, node) = run(&as_pairs(&env));
    assert_eq!(node.node_name.as_deref(), Some("node-ds"));
    assert_eq!(node.publisher, Publisher::Kubernetes);
    assert_eq!(node.routing_domain, RoutingDomainMode::Auto);
    assert!(node.egress.shard_sids.is_empty(), "empty means unset");
    assert!(node.ebpf_interfaces.is_empty(), "empty means auto-detect");
    assert_eq!(node.ebpf_filter_priority, 1);
    // Each upstream setting, edited in the DaemonSet, arrives.
    let edit = |key: &str, value: &str| {
        let mut env = env.clone();
        let slot = env.iter_mut().find(|(k, _)| k == key);
        slot.unwrap_or_else(|| panic!("the DaemonSet gives {key}"))
            .1 = value.into();
        env
    };
    let (_fx, node) = run(&edit(
        "GALACTIC_CNI_EGRESS_SHARD_SIDS",
        "2001:db8:5:0:e000::",
    ));
    assert_eq!(node.egress.shard_sids.len(), 1);
    let (_fx, node) = run(&edit("GALACTIC_CNI_NAT64_PREFIX", "64:ff9b::/96"));
    assert_eq!(node.egress.nat64_prefixes.len(), 1);
    let (_fx, node) = run(&edit("GALACTIC_CNI_EBPF_INTERFACES", "eth1"));
    assert_eq!(node.ebpf_interfaces, ["eth1"]);
    let (_fx, node) = run(&edit("GALACTIC_CNI_LOG_LEVEL", "debug"));
    assert_eq!(node.log_level, galactic_core::log::Level::Debug);
    let (_fx, node) = run(&edit("GALACTIC_CNI_EBPF_FILTER_PRIORITY", "9"));
    assert_eq!(node.ebpf_filter_priority, 9);
}

/// An image `galactic-bgp` that records its `export-annotations` call (the kubeconfig it was
/// given, whether the Go binaries were still in place) and writes the export.
fn recording_bgp(fx: &Fixture) {
    let log = fx.dir.path().join("export-calls");
    let ipam = fx.host("opt/cni/bin/galactic-ipam");
    std::fs::write(
        fx.dir.path().join("image-bin/galactic-bgp"),
        format!(
            "#!/bin/sh\n[ \"$1\" = export-annotations ] || exit 0\n\
             {{ echo \"args $3 $4\"; grep -E 'server|certificate-authority|token' \"$2\"; \
             echo \"ipam then: $(sh {ipam})\"; }} >>{log}\n\
             printf '%s' '{{\"kind\":\"List\",\"items\":[]}}' >\"$4\"\n",
            ipam = ipam.display(),
            log = log.display()
        ),
    )
    .unwrap();
}

#[test]
fn a_node_the_go_chain_served_exports_the_annotations_once_before_the_switch() {
    let fx = Fixture::new();
    recording_bgp(&fx);
    plant_go_binaries(&fx);
    let out = fx.run(&[("GALACTIC_NAMESPACE", "galactic-system")]);
    assert!(out.status.success(), "{out:?}");
    let export = fx.host("var/lib/galactic/ipam/legacy-annotations.json");
    assert_eq!(
        std::fs::read_to_string(&export).unwrap(),
        r#"{"kind":"List","items":[]}"#
    );
    let calls = std::fs::read_to_string(fx.dir.path().join("export-calls")).unwrap();
    let sa = fx.dir.path().join("sa");
    for line in [
        format!("args galactic-system {}", export.display()),
        "server: https://[fd00:10::1]:6443".to_owned(),
        format!("certificate-authority: {}/ca.crt", sa.display()),
        "token: eyJhbGciOi.first-token_1".to_owned(),
        // Exported while the Go IPAM still served the node: the new one's first write imports it.
        "ipam then: go-galactic-ipam".to_owned(),
    ] {
        assert!(calls.contains(&line), "{line}: {calls}");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains(&export.display().to_string()));
    // Once: a second run (the Go layout is gone, the export kept) exports nothing.
    let again = fx.run(&[("GALACTIC_NAMESPACE", "galactic-system")]);
    assert!(again.status.success(), "{again:?}");
    assert_eq!(
        std::fs::read_to_string(fx.dir.path().join("export-calls"))
            .unwrap()
            .matches("args ")
            .count(),
        1
    );
}

#[test]
fn a_failed_export_fails_the_install_before_the_switch_and_other_nodes_export_nothing() {
    let fx = Fixture::new();
    plant_go_binaries(&fx);
    std::fs::write(
        fx.dir.path().join("image-bin/galactic-bgp"),
        "#!/bin/sh\n[ \"$1\" = export-annotations ] && { echo 'connection refused' >&2; exit 1; }\nexit 0\n",
    )
    .unwrap();
    let out = fx.run(&[]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("could not export the BGPAdvertisement annotations"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.host("opt/cni/bin/galactic-ipam")).unwrap(),
        "#!/bin/sh\necho go-galactic-ipam\n",
        "the Go chain keeps serving until the export exists"
    );
    // A node without the Go chain, or with the local publisher: no export is attempted.
    let fresh = Fixture::new();
    recording_bgp(&fresh);
    assert!(fresh.run(&[]).status.success());
    let local = Fixture::new();
    recording_bgp(&local);
    plant_go_binaries(&local);
    assert!(local
        .run(&[("GALACTIC_PUBLISHER", "local")])
        .status
        .success());
    for fx in [&fresh, &local] {
        assert!(!fx.dir.path().join("export-calls").exists());
    }
}

#[test]
fn a_node_name_that_names_another_node_fails_the_install_before_anything_is_staged() {
    let fx = Fixture::new();
    plant_go_binaries(&fx);
    let go = fx.plant_go_conflist("debug", "", "eth1");
    let calls = fx.dir.path().join("check-calls");
    std::fs::write(
        fx.dir.path().join("image-bin/galactic-bgp"),
        format!(
            "#!/bin/sh\n[ \"$1\" = check-node ] || exit 0\necho \"$3\" >>{calls}\n\
             echo 'node identity check failed: Node node-a has InternalIP 192.0.2.7' >&2\nexit 1\n",
            calls = calls.display()
        ),
    )
    .unwrap();
    let out = fx.run(&[]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&calls).unwrap(), "node-a\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("192.0.2.7"), "the check's own reason: {err}");
    assert!(
        err.contains("NODE_NAME node-a does not name this node"),
        "{err}"
    );
    assert!(!fx.host("etc/galactic").exists(), "no node config");
    assert!(go.exists(), "the Go conflist stays");
    assert_eq!(
        std::fs::read_to_string(fx.host("opt/cni/bin/galactic-ipam")).unwrap(),
        "#!/bin/sh\necho go-galactic-ipam\n",
        "the Go chain keeps serving"
    );
    let state: Vec<_> = std::fs::read_dir(fx.host("var/lib/galactic"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        state.is_empty(),
        "the installer's kubeconfig is removed: {state:?}"
    );
    // The local publisher has no API server to ask: no check.
    let local = Fixture::new();
    std::fs::copy(
        fx.dir.path().join("image-bin/galactic-bgp"),
        local.dir.path().join("image-bin/galactic-bgp"),
    )
    .unwrap();
    assert!(local
        .run(&[("GALACTIC_PUBLISHER", "local")])
        .status
        .success());
}

impl Fixture {
    fn rollback(&self) -> Output {
        let mut cmd = Command::new("sh");
        cmd.arg(script())
            .arg("rollback")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOST_ROOT", self.dir.path().join("host"))
            .env("IMAGE_BIN", self.dir.path().join("image-bin"));
        cmd.output().unwrap()
    }

    /// A stand-in galactic-ipam that records its arguments and exits with `status`.
    fn recording_ipam(&self, status: u8) -> PathBuf {
        let calls = self.dir.path().join("ipam-calls");
        std::fs::write(
            self.dir.path().join("image-bin/galactic-ipam"),
            format!(
                "#!/bin/sh\necho \"$@\" >>{}\necho '{{\"written\": 0}}'\nexit {status}\n",
                calls.display()
            ),
        )
        .unwrap();
        calls
    }
}

#[test]
fn rollback_writes_the_markers_then_the_go_conflist_with_the_current_settings() {
    let fx = Fixture::new();
    let go = fx.plant_go_conflist("debug", "2001:db8:ff01:9:e001::", "eth1");
    // Installed, then the DaemonSet changed a setting after the switch.
    assert!(fx.run(&[]).status.success());
    assert!(fx
        .run(&[("GALACTIC_CNI_EBPF_INTERFACES", "eth7")])
        .status
        .success());
    assert!(!go.exists());

    let calls = fx.recording_ipam(0);
    let out = fx.rollback();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&calls).unwrap(),
        format!(
            "write-markers --data-dir {} --legacy-dir {}\n",
            fx.host("var/lib/galactic/ipam").display(),
            fx.host("var/lib/cni/galactic-ipam").display()
        )
    );
    let restored = std::fs::read_to_string(&go).unwrap();
    assert_eq!(
        restored,
        std::fs::read_to_string(fx.host("etc/galactic/datapath/10-galactic.conflist")).unwrap()
    );
    for setting in [
        "\"ebpf_interfaces\": \"eth7\"",
        "\"nat66_shard_sids\": \"2001:db8:ff01:9:e001::\"",
        "\"egress_shard_sids\": \"2001:db8:ff01:9:e001::\"",
        "\"log_level\": \"debug\"",
        "\"node_name\": \"node-a\"",
    ] {
        assert!(restored.contains(setting), "{setting}: {restored}");
    }
    assert!(fx.rollback().status.success(), "a second run is harmless");
}

#[test]
fn a_rollback_whose_markers_are_incomplete_fails_and_leaves_the_conf_dir_alone() {
    let fx = Fixture::new();
    assert!(fx.run(&[]).status.success());
    fx.recording_ipam(1);
    let out = fx.rollback();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("do not start the Go chain on this node"),
        "{err}"
    );
    assert!(!fx.host("etc/cni/net.d/10-galactic.conflist").exists());
    // A node this installer never ran on has nothing to roll back.
    let never = Fixture::new();
    never.recording_ipam(0);
    let out = never.rollback();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("never installed"));
}

/// `dan_dir` (Kata DAN files, upstream's key) lands in node.json and, as upstream's installer
/// writes it, in the datapath's host conflist: from `GALACTIC_CNI_DAN_DIR`, else from the Go
/// conflist; unset, the plugins use runtime-rs's directory. The Go shim's directory and a
/// relative path are refused before anything is written.
#[test]
fn the_kata_dan_dir_reaches_the_node_config_and_the_datapath_conflist() {
    let datapath_dan_dir = |fx: &Fixture| {
        let text =
            std::fs::read_to_string(fx.host("etc/galactic/datapath/10-galactic.conflist")).unwrap();
        let conflist: serde_json::Value = serde_json::from_str(&text).unwrap();
        conflist["plugins"][0]["dan_dir"].clone()
    };
    let fx = Fixture::new();
    let out = fx.run(&[("GALACTIC_CNI_DAN_DIR", "/run/kata-dans")]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(node_config(&fx).dan_dir, Path::new("/run/kata-dans"));
    assert_eq!(datapath_dan_dir(&fx), "/run/kata-dans");

    let fx = Fixture::new();
    assert!(fx.run(&[]).status.success());
    assert_eq!(
        node_config(&fx).dan_dir,
        Path::new("/run/kata-containers/dans-rs")
    );
    assert_eq!(
        datapath_dan_dir(&fx),
        "",
        "upstream writes an unset one empty"
    );

    let fx = Fixture::new();
    let go = fx.plant_go_conflist("info", "", "");
    let text = std::fs::read_to_string(&go).unwrap().replace(
        r#""ebpf_interfaces": """#,
        "\"ebpf_interfaces\": \"\",\n      \"dan_dir\": \"/run/go-dans\"",
    );
    std::fs::write(&go, text).unwrap();
    assert!(fx.run(&[]).status.success());
    assert_eq!(node_config(&fx).dan_dir, Path::new("/run/go-dans"));

    for bad in ["/run/kata-containers/dans", "dans"] {
        let fx = Fixture::new();
        let out = fx.run(&[("GALACTIC_CNI_DAN_DIR", bad)]);
        assert!(!out.status.success(), "{bad} must fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("GALACTIC_CNI_DAN_DIR"), "{bad}: {stderr}");
        assert!(
            !fx.host("opt").exists() && !fx.host("etc").exists(),
            "{bad}: nothing staged"
        );
    }
}
