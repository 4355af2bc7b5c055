//! The upstream settings: carried from the Go conflist and the DaemonSet environment into the
//! node config.

// A test fails by panicking.
#![allow(clippy::unwrap_used)]

use super::*;

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
