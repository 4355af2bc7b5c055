use super::*;
use serde_json::json;
use std::collections::HashMap;
use std::net::Ipv6Addr;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn missing_files_give_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = NodeConfig::resolve_from(
        &json!({}),
        &env_of(&[]),
        &dir.path().join("none.json"),
        Some(&dir.path().join("none.conflist")),
    )
    .unwrap();
    assert_eq!(cfg, NodeConfig::defaults());
}

#[test]
fn env_beats_file_beats_default_and_the_stanza_sets_only_its_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "node.json",
        r#"{"namespace":"from-file","log_level":"warn","publisher":"local",
            "state_dir":"/file/state","routing_domain":"table","future_key":[1]}"#,
    );
    let env = env_of(&[
        ("GALACTIC_CNI_LOG_LEVEL", "error"),
        ("GALACTIC_CNI_NAMESPACE", "from-env"),
    ]);
    let cfg =
        NodeConfig::resolve_from(&json!({"namespace": "from-stanza"}), &env, &file, None).unwrap();
    assert_eq!(cfg.namespace, "from-stanza");
    assert_eq!(cfg.log_level, Level::Error);
    assert_eq!(cfg.publisher, Publisher::Local);
    assert_eq!(cfg.routing_domain, RoutingDomainMode::Table);
    assert_eq!(cfg.state_dir, PathBuf::from("/file/state"));
    assert_eq!(cfg.ipam_data_dir, PathBuf::from("/file/state/ipam"));
    assert_eq!(cfg.log_max_bytes, NodeConfig::defaults().log_max_bytes);
    let cfg = NodeConfig::resolve_from(&json!({}), &env, &file, None).unwrap();
    assert_eq!(cfg.namespace, "from-env");
    let err = NodeConfig::resolve_from(&json!({"namespace": "../x"}), &env, &file, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a Kubernetes namespace name"), "{err}");
}

#[test]
fn every_node_key_in_a_stanza_is_refused_naming_the_key_and_where_it_belongs() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "node.json", r#"{"log_level":"warn"}"#);
    let mut stanzas: Vec<(Value, String)> = NODE_KEYS
        .iter()
        .map(|k| (json!({ *k: "/tmp/x" }), (*k).to_owned()))
        .collect();
    for (key, _) in IPAM_NODE_KEYS {
        stanzas.push((
            json!({"ipam": {"type": "galactic-ipam", key: "/tmp/x"}}),
            format!("ipam.{key}"),
        ));
    }
    for (stanza, key) in stanzas {
        let err = NodeConfig::resolve_from(&stanza, &env_of(&[]), &file, None).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, ConfigError::NodeKeyInStanza { .. })
                && text.starts_with(&format!("{key} is a node setting"))
                && text.contains("node.json")
                && text.contains("GALACTIC_CNI_"),
            "{stanza}: {text}"
        );
        // DEL ignores it and resolves from the node alone.
        let del = NodeConfig::resolve_with(
            &stanza,
            &env_of(&[(NODE_CONFIG_ENV, &file.display().to_string())]),
            Strictness::Ignore,
        )
        .unwrap();
        assert_eq!(del.log_level, Level::Warn, "{stanza}");
        assert_eq!(del.log_file, NodeConfig::defaults().log_file, "{stanza}");
    }
    // Empty and null values are "not set", as everywhere else.
    NodeConfig::resolve_from(
        &json!({"log_file": "", "state_dir": null}),
        &env_of(&[]),
        &file,
        None,
    )
    .unwrap();
}

#[test]
fn a_lab_node_lets_stanzas_override_within_its_directories_only() {
    let dir = tempfile::tempdir().unwrap();
    let lab = dir.path().join("lab");
    std::fs::create_dir_all(&lab).unwrap();
    std::os::unix::fs::symlink("/etc", lab.join("etc")).unwrap();
    let file = write(
        dir.path(),
        "node.json",
        &json!({"allow_stanza_overrides": true, "stanza_override_dirs": lab}).to_string(),
    );
    let cfg = NodeConfig::resolve_from(
        &json!({"log_file": lab.join("g.log"), "log_level": "debug", "routing_domain": "table",
                "ipam": {"type": "galactic-ipam", "data_dir": lab.join("ipam")}}),
        &env_of(&[]),
        &file,
        None,
    )
    .unwrap();
    assert_eq!(cfg.log_file, lab.join("g.log"));
    assert_eq!(cfg.log_level, Level::Debug);
    assert_eq!(cfg.routing_domain, RoutingDomainMode::Table);
    assert_eq!(cfg.ipam_data_dir, lab.join("ipam"));
    assert_eq!(cfg.stanza_overrides, Some(vec![lab.clone()]));
    for outside in [
        json!({"log_file": "/etc/galactic.log"}),
        json!({"state_dir": lab.join("etc/cron.d")}),
        json!({"ipam": {"type": "galactic-ipam", "legacy_dir": "/"}}),
    ] {
        let err = NodeConfig::resolve_from(&outside, &env_of(&[]), &file, None).unwrap_err();
        assert!(
            matches!(err, ConfigError::OutsideOverrideDirs { .. }),
            "{outside}: {err}"
        );
    }
    // The override switch itself is the node's alone.
    let err = NodeConfig::resolve_from(
        &json!({"stanza_override_dirs": "/"}),
        &env_of(&[]),
        &file,
        None,
    )
    .unwrap_err();
    assert!(matches!(err, ConfigError::NodeKeyInStanza { .. }), "{err}");
}

#[test]
fn node_name_falls_back_to_node_name_env_after_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    let cfg =
        NodeConfig::resolve_from(&json!({}), &env_of(&[("NODE_NAME", "n1")]), &none, None).unwrap();
    assert_eq!(cfg.node_name.as_deref(), Some("n1"));
    let file = write(dir.path(), "node.json", r#"{"node_name":"n-file"}"#);
    let cfg =
        NodeConfig::resolve_from(&json!({}), &env_of(&[("NODE_NAME", "n1")]), &file, None).unwrap();
    assert_eq!(cfg.node_name.as_deref(), Some("n-file"));
}

#[test]
fn legacy_conflist_is_read_when_the_node_config_is_absent() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = write(
        dir.path(),
        "10-galactic.conflist",
        r#"{"cniVersion":"1.0.0","name":"galactic","plugins":[
            {"type":"other","namespace":"wrong"},
            {"type":"galactic-cni","node_name":"w1","namespace":"ns-legacy","log_level":"debug"}]}"#,
    );
    let cfg = NodeConfig::resolve_from(
        &json!({}),
        &env_of(&[]),
        &dir.path().join("none.json"),
        Some(&legacy),
    )
    .unwrap();
    assert_eq!(cfg.node_name.as_deref(), Some("w1"));
    assert_eq!(cfg.namespace, "ns-legacy");
    assert_eq!(cfg.log_level, Level::Debug);
}

#[test]
fn malformed_files_and_values_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.json", "{not json");
    let err = NodeConfig::resolve_from(&json!({}), &env_of(&[]), &bad, None).unwrap_err();
    assert!(err.to_string().contains("bad.json"), "{err}");

    let legacy = write(dir.path(), "l.conflist", r#"{"plugins":[{"type":"x"}]}"#);
    let err = NodeConfig::resolve_from(
        &json!({}),
        &env_of(&[]),
        &dir.path().join("n"),
        Some(&legacy),
    )
    .unwrap_err();
    assert!(err.to_string().contains("galactic-cni"), "{err}");

    let env = env_of(&[("GALACTIC_CNI_ROUTING_DOMAIN", "bridge")]);
    let err = NodeConfig::resolve_from(&json!({}), &env, &dir.path().join("n"), None).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("routing_domain") && text.contains("GALACTIC_CNI_ROUTING_DOMAIN"),
        "{text}"
    );
}

#[test]
fn unknown_log_level_falls_back_to_info_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = NodeConfig::resolve_from(
        &json!({}),
        &env_of(&[("GALACTIC_CNI_LOG_LEVEL", "loud")]),
        &dir.path().join("n"),
        None,
    )
    .unwrap();
    assert_eq!(cfg.log_level, Level::Info);
    assert!(cfg.warnings[0].contains("loud"));
}

#[test]
fn ebpf_keys_resolve_from_env_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    let d = NodeConfig::resolve_from(&json!({}), &env_of(&[]), &none, None).unwrap();
    assert_eq!(d.bpf_pin_dir, PathBuf::from("/sys/fs/bpf/galactic"));
    assert!(d.ebpf_datapath);
    assert_eq!(d.ebpf_filter_priority, 1);
    assert!(d.egress.shard_sids.is_empty() && d.egress.nat64_prefixes.is_empty());
    assert!(d.ebpf_interfaces.is_empty());

    let file = write(
        dir.path(),
        "node.json",
        r#"{"bpf_pin_dir":"/file/bpf","ebpf_datapath":"off","ebpf_filter_priority":7,
            "egress_shard_sids":"2001:db8:5::1","ebpf_interfaces":"eth9"}"#,
    );
    let from_file = NodeConfig::resolve_from(&json!({}), &env_of(&[]), &file, None).unwrap();
    assert_eq!(from_file.bpf_pin_dir, PathBuf::from("/file/bpf"));
    assert!(!from_file.ebpf_datapath);
    assert_eq!(from_file.ebpf_filter_priority, 7);
    assert_eq!(
        from_file.egress.shard_sids,
        vec!["2001:db8:5::1".parse::<Ipv6Addr>().unwrap()]
    );
    assert_eq!(from_file.ebpf_interfaces, vec!["eth9"]);

    // The environment names the bpf code read before these keys existed keep working.
    let env = env_of(&[
        ("GALACTIC_CNI_BPF_PIN_DIR", "/env/bpf"),
        ("GALACTIC_CNI_EBPF_DATAPATH", "ON"),
        ("GALACTIC_CNI_EBPF_FILTER_PRIORITY", "9"),
        (
            "GALACTIC_CNI_EGRESS_SHARD_SIDS",
            " 2001:db8:6::1 ,, 2001:db8:5::1 ,",
        ),
        ("GALACTIC_CNI_EBPF_INTERFACES", " eth1, eth0 ,eth1,, "),
    ]);
    let from_env = NodeConfig::resolve_from(&json!({}), &env, &file, None).unwrap();
    assert_eq!(from_env.bpf_pin_dir, PathBuf::from("/env/bpf"));
    assert!(from_env.ebpf_datapath);
    assert_eq!(from_env.ebpf_filter_priority, 9);
    assert_eq!(
        from_env.egress.shard_sids,
        vec![
            "2001:db8:6::1".parse::<Ipv6Addr>().unwrap(),
            "2001:db8:5::1".parse().unwrap()
        ],
        "trimmed, blanks skipped, order kept"
    );
    assert_eq!(
        from_env.ebpf_interfaces,
        vec!["eth1", "eth0"],
        "trimmed, deduplicated, first occurrence first"
    );
}

#[test]
fn invalid_ebpf_values_are_errors_naming_key_entry_and_source() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    let err = |env: &[(&str, &str)]| {
        NodeConfig::resolve_from(&json!({}), &env_of(env), &none, None)
            .unwrap_err()
            .to_string()
    };
    let text = err(&[(
        "GALACTIC_CNI_EGRESS_SHARD_SIDS",
        "2001:db8:5::1, 10.0.0.1 ,2001:db8:6::1",
    )]);
    assert!(
        text.contains("egress_shard_sids")
            && text.contains("\"10.0.0.1\"")
            && text.contains("GALACTIC_CNI_EGRESS_SHARD_SIDS"),
        "{text}"
    );
    for bad in ["ff02::1", "::", "2001:db8::zz"] {
        let text = err(&[("GALACTIC_CNI_NAT66_SHARD_SIDS", bad)]);
        assert!(text.contains(&format!("{bad:?}")), "{text}");
    }
    let text = err(&[("GALACTIC_CNI_EBPF_INTERFACES", "eth0, a/b")]);
    assert!(
        text.contains("ebpf_interfaces") && text.contains("\"a/b\""),
        "{text}"
    );
    let text = err(&[("GALACTIC_CNI_EBPF_INTERFACES", "averyveryverylongname")]);
    assert!(text.contains("averyveryverylongname"), "{text}");
    for (key, value) in [
        ("GALACTIC_CNI_EBPF_FILTER_PRIORITY", "0"),
        ("GALACTIC_CNI_EBPF_FILTER_PRIORITY", "70000"),
        ("GALACTIC_CNI_EBPF_FILTER_PRIORITY", "high"),
        ("GALACTIC_CNI_EBPF_DATAPATH", "maybe"),
        ("GALACTIC_CNI_BPF_PIN_DIR", "relative/dir"),
        ("GALACTIC_CNI_IPAM_DATA_DIR", "relative/dir"),
        ("GALACTIC_CNI_IPAM_LEGACY_DIR", "x"),
        ("GALACTIC_CNI_IPAM_LOCK_TIMEOUT_MS", "0"),
        ("GALACTIC_CNI_IPAM_LOCK_TIMEOUT_MS", "soon"),
        // Found by the node-config fuzz target: `"state_dir": 17` resolved to a relative path.
        ("GALACTIC_CNI_STATE_DIR", "17"),
        ("GALACTIC_CNI_LOG_FILE", "galactic.log"),
        ("GALACTIC_CNI_KUBECONFIG", "kubeconfig"),
    ] {
        let text = err(&[(key, value)]);
        assert!(
            text.contains(key) && text.contains(&format!("{value:?}")),
            "{text}"
        );
    }
}

#[test]
fn del_keeps_the_node_when_one_value_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "node.json",
        r#"{"state_dir":"/node/state","egress_shard_sids":"2001:db8::xyz","ebpf_filter_priority":0}"#,
    );
    let env = env_of(&[(NODE_CONFIG_ENV, &file.display().to_string())]);
    assert!(
        NodeConfig::resolve(&json!({}), &env).is_err(),
        "ADD refuses"
    );
    // DEL resolves the rest: it must find this node's state, not the default's.
    let del = NodeConfig::resolve_with(&json!({}), &env, Strictness::Ignore).unwrap();
    assert_eq!(del.state_dir, PathBuf::from("/node/state"));
    assert!(del.egress.shard_sids.is_empty());
    assert_eq!(del.ebpf_filter_priority, DEFAULT_EBPF_FILTER_PRIORITY);
    assert_eq!(del.warnings.len(), 2, "{:?}", del.warnings);
}

/// Resolution reads exactly the keys [`node_config_keys`] lists: the environment is asked for
/// `GALACTIC_CNI_<KEY>` of every key it looks up (the stanza and the file are empty), so a key
/// read without being listed, or listed without being read, fails here.
#[test]
fn resolution_reads_exactly_the_listed_node_config_keys() {
    let dir = tempfile::tempdir().unwrap();
    let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
    // Overrides allowed, so the override directories are looked up too.
    let env = |name: &str| {
        asked.borrow_mut().insert(name.to_owned());
        (name == "GALACTIC_CNI_ALLOW_STANZA_OVERRIDES").then(|| "true".to_owned())
    };
    NodeConfig::resolve_from(&json!({}), &env, &dir.path().join("none.json"), None).unwrap();
    // The upstream kubeconfig variable is an alternative name of `kubeconfig`, not a key.
    let read: std::collections::BTreeSet<String> = asked
        .into_inner()
        .into_iter()
        .filter(|name| name != "GALACTIC_CNI_KUBERNETES_CONFIG")
        .filter_map(|name| {
            name.strip_prefix("GALACTIC_CNI_")
                .map(str::to_ascii_lowercase)
        })
        .collect();
    let listed: std::collections::BTreeSet<String> =
        node_config_keys().map(str::to_owned).collect();
    assert_eq!(read, listed);
}

#[test]
fn the_old_shard_sid_name_is_an_alias_and_a_conflict_names_both() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    let resolve = |env: &[(&str, &str)], file: &Path| {
        NodeConfig::resolve_from(&json!({}), &env_of(env), file, None)
    };
    let sid = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    // The Go chain's conflist key and environment name alone: taken as the new key.
    let go = write(
        dir.path(),
        "go.json",
        r#"{"nat66_shard_sids":"2001:db8:5::"}"#,
    );
    assert_eq!(
        resolve(&[], &go).unwrap().egress.shard_sids,
        vec![sid("2001:db8:5::")]
    );
    let old_env = [("GALACTIC_CNI_NAT66_SHARD_SIDS", "2001:db8:6::")];
    assert_eq!(
        resolve(&old_env, &none).unwrap().egress.shard_sids,
        vec![sid("2001:db8:6::")]
    );
    // Both, the same list: fine. Both, different: an error naming both and their sources.
    let same = [("GALACTIC_CNI_EGRESS_SHARD_SIDS", "2001:db8:5::")];
    assert_eq!(
        resolve(&same, &go).unwrap().egress.shard_sids,
        vec![sid("2001:db8:5::")]
    );
    let text = resolve(
        &old_env,
        &write(
            dir.path(),
            "n.json",
            r#"{"egress_shard_sids":"2001:db8:5::"}"#,
        ),
    )
    .unwrap_err()
    .to_string();
    assert!(
        text.contains("egress_shard_sids")
            && text.contains("nat66_shard_sids")
            && text.contains("GALACTIC_CNI_NAT66_SHARD_SIDS")
            && text.contains("n.json"),
        "{text}"
    );
    // DEL never fails on it.
    let env = env_of(&[
        ("GALACTIC_CNI_EGRESS_SHARD_SIDS", "2001:db8:5::"),
        ("GALACTIC_CNI_NAT66_SHARD_SIDS", "2001:db8:6::"),
    ]);
    let del = NodeConfig::resolve_with(&json!({}), &env, Strictness::Ignore).unwrap();
    assert!(del.egress.shard_sids.is_empty(), "{:?}", del.egress);
}

#[test]
fn nat64_prefixes_are_a_list_of_ipv6_96_networks() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    let resolve = |v: &str| {
        NodeConfig::resolve_from(
            &json!({}),
            &env_of(&[("GALACTIC_CNI_NAT64_PREFIX", v)]),
            &none,
            None,
        )
    };
    let got = resolve(" 64:ff9b::/96, 2001:db8:64::/96 ").unwrap();
    assert_eq!(
        got.egress.nat64_prefixes,
        vec![
            "64:ff9b::/96".parse().unwrap(),
            "2001:db8:64::/96".parse().unwrap()
        ]
    );
    for bad in ["64:ff9b::/64", "64:ff9b::", "64:ff9b::1/96", "10.0.0.0/8"] {
        let text = resolve(&format!("64:ff9b::/96,{bad}"))
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("nat64_prefix")
                && text.contains(&format!("{bad:?}"))
                && text.contains("/96"),
            "{text}"
        );
    }
}

/// `dan_dir` is upstream's key and `GALACTIC_CNI_DAN_DIR` its variable; a Go node's conflist
/// carries it (empty when the Go installer had none: the default), and a tenant's stanza may not
/// point it (or the RA records) anywhere.
#[test]
fn the_kata_keys_resolve_as_upstream_names_them_and_never_from_a_stanza() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none.json");
    let d = NodeConfig::resolve_from(&json!({}), &env_of(&[]), &none, None).unwrap();
    assert_eq!(d.dan_dir, PathBuf::from("/run/kata-containers/dans-rs"));
    assert_eq!(d.radv_state_dir, PathBuf::from("/var/lib/cni/ra"));
    let env = env_of(&[("GALACTIC_CNI_DAN_DIR", "/run/dans-env")]);
    let cfg = NodeConfig::resolve_from(&json!({}), &env, &none, None).unwrap();
    assert_eq!(cfg.dan_dir, PathBuf::from("/run/dans-env"));
    let legacy = write(
        dir.path(),
        "10-galactic.conflist",
        r#"{"plugins":[{"type":"galactic-cni","dan_dir":""}]}"#,
    );
    let cfg = NodeConfig::resolve_from(&json!({}), &env_of(&[]), &none, Some(&legacy)).unwrap();
    assert_eq!(cfg.dan_dir, d.dan_dir, "an empty dan_dir is the default");
    let file = write(dir.path(), "node.json", r#"{"radv_state_dir":"ra"}"#);
    let err = NodeConfig::resolve_from(&json!({}), &env_of(&[]), &file, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("radv_state_dir") && err.contains("absolute"),
        "{err}"
    );
    for key in ["dan_dir", "radv_state_dir"] {
        let err = NodeConfig::resolve_from(&json!({key: "/tmp/x"}), &env_of(&[]), &none, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{err}");
    }
}

#[test]
fn the_table_mark_mask_is_one_run_of_at_least_two_bits() {
    let dir = tempfile::tempdir().unwrap();
    let resolve = |value: &str| {
        let file = write(
            dir.path(),
            "node.json",
            &json!({ "table_mark_mask": value }).to_string(),
        );
        NodeConfig::resolve_from(&json!({}), &env_of(&[]), &file, None)
    };
    assert_eq!(
        NodeConfig::defaults().table_mark_mask,
        DEFAULT_TABLE_MARK_MASK
    );
    assert_eq!(resolve("0x00f00000").unwrap().table_mark_mask, 0x00f0_0000);
    assert_eq!(resolve("768").unwrap().table_mark_mask, 0x300);
    for refused in ["0", "0x1000", "0xf0f00000", "mark", "0x1_0000_0000"] {
        let err = resolve(refused).unwrap_err().to_string();
        assert!(err.contains("table_mark_mask"), "{refused}: {err}");
    }
}
