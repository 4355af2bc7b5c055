//! A fresh node: what the installer stages, token rotation, aliases, refused settings.

// A test fails by panicking.
#![allow(clippy::unwrap_used)]

use super::*;

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
