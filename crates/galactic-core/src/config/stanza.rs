//! Node-level keys and the stanza: who may set what.
//!
//! A stanza comes from whoever wrote the NetworkAttachmentDefinition (often a tenant), while the
//! plugins run as root in the host's network namespace. So every key that names a node resource
//! (a path, the publisher, the node's name, the routing-domain backend, the datapath) comes from
//! the node config file or the environment the runtime gives the plugin, never from a stanza: a
//! stanza that sets one is refused, naming the key and where it belongs.
//!
//! Lab nodes may let stanzas override node keys (`allow_stanza_overrides: true` in the node
//! config or its environment variable), and then a path a stanza gives must lie inside one of
//! the directories the node config names (`stanza_override_dirs`), after symlinks are resolved.
//! DEL never refuses: a key it may not take is ignored, so a teardown never stops on a config.

use super::{ConfigError, Source};
use serde_json::{Map, Value};
use std::path::{Component, Path, PathBuf};

/// Top-level node-level keys: set in the node config (or `GALACTIC_CNI_<KEY>`), never in a stanza.
pub const NODE_KEYS: [&str; 20] = [
    "node_name",
    "kubeconfig",
    "log_file",
    "log_level",
    "log_max_bytes",
    "routing_domain",
    "table_mark_mask",
    "publisher",
    "state_dir",
    "bpf_pin_dir",
    "ebpf_datapath",
    "ebpf_filter_priority",
    "egress_shard_sids",
    "nat66_shard_sids",
    "nat64_prefix",
    "ebpf_interfaces",
    "dan_dir",
    "radv_state_dir",
    "allow_stanza_overrides",
    "stanza_override_dirs",
];

/// Node-level keys of the `ipam` block, and their node config names.
pub const IPAM_NODE_KEYS: [(&str, &str); 3] = [
    ("data_dir", "ipam_data_dir"),
    ("legacy_dir", "ipam_legacy_dir"),
    ("lock_timeout_ms", "ipam_lock_timeout_ms"),
];

/// The one node key a stanza may set (upstream's per-stanza key): the BGP resources' namespace.
pub const NAMESPACE_KEY: &str = "namespace";

/// Every key the node config accepts, by its node config name: the stanza-refused keys, the
/// `ipam` block's node keys and [`NAMESPACE_KEY`]. Built from the lists resolution itself reads,
/// so a key added there is listed here (the config tests assert that resolution reads exactly
/// these); `cargo xtask check-docs` compares it with docs/configuration.md.
pub fn node_config_keys() -> impl Iterator<Item = &'static str> {
    NODE_KEYS
        .into_iter()
        .chain(IPAM_NODE_KEYS.into_iter().map(|(_, node_key)| node_key))
        .chain([NAMESPACE_KEY])
}

/// Node-level keys whose value is a path: with overrides, it must lie inside an override dir.
const PATH_KEYS: [&str; 8] = [
    "kubeconfig",
    "dan_dir",
    "radv_state_dir",
    "log_file",
    "state_dir",
    "bpf_pin_dir",
    "ipam_data_dir",
    "ipam_legacy_dir",
];

/// Keys a stanza may never set, not even on a lab node: they decide the overrides themselves.
const NEVER_FROM_STANZA: [&str; 2] = ["allow_stanza_overrides", "stanza_override_dirs"];

/// How strictly a stanza's node-level keys are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// Refuse a key the stanza may not set (ADD, CHECK, STATUS, GC).
    Refuse,
    /// Ignore it (DEL: a teardown never stops on a config).
    Ignore,
}

/// A node-level key the stanza set: `(stanza key, node config key, value)`.
fn node_keys_in(stanza: &Value) -> Vec<(String, &'static str, &Value)> {
    let mut found: Vec<(String, &'static str, &Value)> = NODE_KEYS
        .iter()
        .filter_map(|k| present(stanza.get(*k)).map(|v| ((*k).to_owned(), *k, v)))
        .collect();
    if let Some(ipam) = stanza.get("ipam").filter(|v| v.is_object()) {
        for (key, node_key) in IPAM_NODE_KEYS {
            if let Some(v) = present(ipam.get(key)) {
                found.push((format!("ipam.{key}"), node_key, v));
            }
        }
    }
    found
}

/// A value counts as set unless it is absent, `null` or an empty string.
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null() && v.as_str().is_none_or(|s| !s.trim().is_empty()))
}

/// The stanza's node-level values the node config admits, keyed by their node config names.
/// `overrides` is `Some(dirs)` when the node allows stanza overrides; `node_config` names the
/// file for messages.
pub(super) fn admitted(
    stanza: &Value,
    overrides: Option<&[PathBuf]>,
    strictness: Strictness,
    node_config: &Path,
) -> Result<Map<String, Value>, ConfigError> {
    let mut out = Map::new();
    for (key, node_key, value) in node_keys_in(stanza) {
        match judge(&key, node_key, value, overrides, node_config) {
            Ok(()) => {
                out.insert(node_key.to_owned(), value.clone());
            }
            Err(e) if strictness == Strictness::Refuse => return Err(e),
            Err(e) => {
                crate::log::stderr_warn("galactic", &format!("DEL ignores a stanza setting: {e}"))
            }
        }
    }
    Ok(out)
}

fn judge(
    key: &str,
    node_key: &'static str,
    value: &Value,
    overrides: Option<&[PathBuf]>,
    node_config: &Path,
) -> Result<(), ConfigError> {
    let refused = || ConfigError::NodeKeyInStanza {
        key: key.to_owned(),
        node_key,
        node_config: node_config.to_owned(),
    };
    let Some(dirs) = overrides.filter(|_| !NEVER_FROM_STANZA.contains(&node_key)) else {
        return Err(refused());
    };
    if !PATH_KEYS.contains(&node_key) {
        return Ok(());
    }
    let path = value.as_str().map(PathBuf::from).unwrap_or_default();
    if dirs.iter().any(|dir| inside(&path, dir)) {
        return Ok(());
    }
    Err(ConfigError::OutsideOverrideDirs {
        key: key.to_owned(),
        value: value.to_string(),
        dirs: dirs.to_vec(),
    })
}

/// Whether `path` lies inside `dir` once symlinks are resolved: the longest existing ancestor
/// of `path` is canonicalised, the rest must be plain names (no `..`).
fn inside(path: &Path, dir: &Path) -> bool {
    let (Ok(dir), true) = (dir.canonicalize(), path.is_absolute()) else {
        return false;
    };
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            return false;
        };
        rest.push(name.to_owned());
        existing = parent.to_path_buf();
    }
    let Ok(resolved) = existing.canonicalize() else {
        return false;
    };
    let tail_is_plain = rest
        .iter()
        .all(|n| matches!(Path::new(n).components().next(), Some(Component::Normal(_))));
    tail_is_plain && resolved.starts_with(&dir)
}

/// `allow_stanza_overrides` and `stanza_override_dirs` as the node config says (never a stanza).
pub(super) fn overrides(
    get: impl Fn(&str) -> Option<(String, Source)>,
) -> Result<Option<Vec<PathBuf>>, ConfigError> {
    let allowed = match get("allow_stanza_overrides") {
        None => false,
        Some((value, origin)) => match value.trim().to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(ConfigError::Value {
                    key: "allow_stanza_overrides",
                    value,
                    origin,
                    why: "true or false",
                })
            }
        },
    };
    if !allowed {
        return Ok(None);
    }
    let mut dirs = Vec::new();
    if let Some((value, origin)) = get("stanza_override_dirs") {
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if !Path::new(entry).is_absolute() {
                return Err(ConfigError::Entry {
                    key: "stanza_override_dirs",
                    entry: entry.to_owned(),
                    value: value.clone(),
                    origin,
                    why: "not an absolute directory",
                });
            }
            dirs.push(PathBuf::from(entry));
        }
    }
    Ok(Some(dirs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_path_inside_is_inside_and_a_symlink_out_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let lab = dir.path().join("lab");
        std::fs::create_dir_all(lab.join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc", lab.join("escape")).unwrap();
        assert!(inside(&lab.join("sub/new/file.log"), &lab));
        assert!(inside(&lab.join("fresh.log"), &lab));
        assert!(!inside(&lab.join("escape/passwd"), &lab), "symlink out");
        assert!(!inside(&lab.join("none/../../x"), &lab), "dot-dot out");
        assert!(!inside(Path::new("/etc/x"), &lab));
        assert!(!inside(Path::new("relative"), &lab));
    }

    #[test]
    fn node_keys_are_found_at_the_top_and_in_the_ipam_block() {
        let stanza = json!({"log_file": "/x", "state_dir": "", "namespace": "t",
            "ipam": {"type": "galactic-ipam", "data_dir": "/d", "lock_timeout_ms": 9}});
        let found: Vec<(String, &str)> = node_keys_in(&stanza)
            .into_iter()
            .map(|(k, n, _)| (k, n))
            .collect();
        assert_eq!(
            found,
            [
                ("log_file".to_owned(), "log_file"),
                ("ipam.data_dir".to_owned(), "ipam_data_dir"),
                ("ipam.lock_timeout_ms".to_owned(), "ipam_lock_timeout_ms"),
            ]
        );
    }
}
