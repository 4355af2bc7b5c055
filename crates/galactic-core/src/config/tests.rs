use super::*;
use serde_json::json;
use std::collections::HashMap;

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
fn stanza_beats_env_beats_file_beats_default() {
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
    assert_eq!(cfg.log_max_bytes, NodeConfig::defaults().log_max_bytes);
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
        &json!({"log_level": "loud"}),
        &env_of(&[]),
        &dir.path().join("n"),
        None,
    )
    .unwrap();
    assert_eq!(cfg.log_level, Level::Info);
    assert!(cfg.warnings[0].contains("loud"));
}
