//! `docs/configuration.md` against the code, in both directions.
//!
//! The field tables (each preceded by `<!-- fields: NAME -->`) are read from the markdown.
//! - Documented → read: for every stanza field, its documented example is accepted by the real
//!   plugin binary and a value of the wrong type is refused (so the plugin really reads the key;
//!   a field it ignored would accept anything). For node-config keys, the example changes the
//!   resolved `NodeConfig`.
//! - Read → documented: every key literal the parsers' sources read (outside their tests) is in
//!   the table of its stanza, or in the short list below of literals that are values, not keys.
//!
//! Plugins are judged as `cargo xtask lint-manifests` judges them (decision 0040): masters and
//! the `ipam` block by the master's STATUS (which delegates STATUS to galactic-ipam), galactic-route
//! and galactic-bgp by an ADD without `prevResult` (code 6 after a valid stanza, 7 otherwise).

// A test fails by panicking.
#![allow(clippy::unwrap_used)]

use galactic_core::config::NodeConfig;
use galactic_testkit::host::{bin_dir, PLUGINS};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use galactic_testkit::TestNode;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first-column keys and example column of the table after `<!-- fields: NAME -->`.
fn table(name: &str) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(root().join("docs/configuration.md")).unwrap();
    let marker = format!("<!-- fields: {name} -->");
    let start = text
        .find(&marker)
        .unwrap_or_else(|| panic!("configuration.md has no {marker}"));
    let mut lines = text[start + marker.len()..].lines().skip(1);
    let header: Vec<String> = cells(lines.next().unwrap());
    let example = header.iter().position(|h| h == "example").unwrap();
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let row = cells(l);
            let key = row[0].trim_matches('`').to_owned();
            let value: Value = serde_json::from_str(row[example].trim_matches('`'))
                .unwrap_or_else(|e| panic!("{name}.{key}: example is not JSON: {e}"));
            (key, value)
        })
        .collect()
}

/// The `meaning` cell of `key`'s row in the table after `<!-- fields: NAME -->`.
fn meaning(name: &str, key: &str) -> String {
    let text = std::fs::read_to_string(root().join("docs/configuration.md")).unwrap();
    let marker = format!("<!-- fields: {name} -->");
    let start = text.find(&marker).unwrap();
    let mut lines = text[start + marker.len()..].lines().skip(1);
    let header = cells(lines.next().unwrap());
    let column = header.iter().position(|h| h == "meaning").unwrap();
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(cells)
        .find(|row| row[0].trim_matches('`') == key)
        .map(|row| row[column].clone())
        .unwrap_or_else(|| panic!("{name}.{key}: no row"))
}

fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split(" | ")
        .map(|c| c.trim().to_owned())
        .collect()
}

/// The binaries in a bin dir, and a throwaway node.
struct Judge {
    node: TestNode,
    bin: PathBuf,
}

impl Judge {
    fn new() -> Self {
        let node = TestNode::new(json!({"routing_domain": "table"}));
        let bin = bin_dir(&node, &PLUGINS);
        Self { node, bin }
    }

    /// Whether the plugin named by `conf["type"]` accepts the stanza; the refusal otherwise.
    fn verdict(&self, conf: &Value) -> Result<(), String> {
        let plugin = conf["type"].as_str().unwrap();
        let list = Conflist::new("1.1.0", "docs", vec![conf.clone()]);
        let master = plugin.starts_with("galactic-cni") || plugin == "galactic-tap-cni";
        let rt = Runtime::new(&self.node, &self.bin, None);
        let att = Attachment::new("docs", "/var/run/netns/galactic-docs-never-created", "eth0");
        match (
            master,
            if master {
                rt.status(&list)
            } else {
                rt.add(&list, &att).map(drop)
            },
        ) {
            (true, Ok(())) => Ok(()),
            (false, Err(e)) if e.code() == Some(6) => Ok(()),
            (_, Ok(())) => Err("accepted".into()),
            (_, Err(e)) => Err(e.to_string()),
        }
    }

    /// `field` is read: its example is accepted and an object in its place is refused.
    fn assert_read(&self, what: &str, with_example: &Value, with_wrong: &Value) {
        if let Err(e) = self.verdict(with_example) {
            panic!("{what}: the documented example is refused: {e}\n{with_example}");
        }
        assert!(
            self.verdict(with_wrong).is_err(),
            "{what}: a value of the wrong type is accepted, so the plugin does not read it: {with_wrong}"
        );
    }
}

const WRONG: &str = r#"{"wrong type": true}"#;

fn wrong() -> Value {
    serde_json::from_str(WRONG).unwrap()
}

fn master_base() -> Value {
    json!({"type": "galactic-cni", "vpc": "A", "vpcattachment": "1",
           "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd20:10:ff01::/64",
                    "ipv4_subnet": "10.21.1.0/24"}})
}

/// A data_dir/legacy_dir example points at the node; the probe keeps to the temporary node.
fn local_path(judge: &Judge, key: &str, example: &Value) -> Value {
    if example.as_str().is_some_and(|p| p.starts_with("/var/lib")) {
        json!(judge.node.dir.path().join(key))
    } else {
        example.clone()
    }
}

#[test]
fn every_documented_stanza_field_is_read_by_its_plugin() {
    let judge = Judge::new();
    for (key, example) in table("master") {
        let (mut good, mut bad) = (master_base(), master_base());
        // The tap's own keys are the tap master's (the table's meaning says "tap only").
        if meaning("master", &key).starts_with("tap only") {
            good["type"] = json!("galactic-tap-cni");
            bad["type"] = json!("galactic-tap-cni");
        }
        good[&key] = example;
        bad[&key] = wrong();
        judge.assert_read(&format!("master.{key}"), &good, &bad);
    }
    for (key, example) in table("ipam") {
        let standalone = ["addresses", "static_ip"].contains(&key.as_str());
        let (mut good, mut bad) = (master_base(), master_base());
        if standalone {
            good["ipam"] = json!({"type": "galactic-ipam"});
            bad["ipam"] = json!({"type": "galactic-ipam"});
        }
        good["ipam"][&key] = local_path(&judge, &key, &example);
        bad["ipam"][&key] = wrong();
        judge.assert_read(&format!("ipam.{key}"), &good, &bad);
    }
    for (key, example) in table("addresses") {
        let entry = |v: Value| {
            let mut e = json!({"address": "10.21.4.7/32"});
            e[&key] = v;
            let mut m = master_base();
            m["ipam"] = json!({"type": "galactic-ipam", "addresses": [e]});
            m
        };
        judge.assert_read(
            &format!("addresses[].{key}"),
            &entry(example),
            &entry(wrong()),
        );
    }
    for (name, plugin) in [("route", "galactic-route"), ("bgp", "galactic-bgp")] {
        for (key, example) in table(name) {
            let base = json!({"type": plugin, "vpc": "A", "vpcattachment": "1"});
            let (mut good, mut bad) = (base.clone(), base);
            good[&key] = example;
            bad[&key] = wrong();
            judge.assert_read(&format!("{name}.{key}"), &good, &bad);
        }
    }
    for (key, example) in table("termination") {
        let stanza = |v: Value| {
            let mut entry = json!({"network": "198.51.100.0/24"});
            entry[&key] = v;
            json!({"type": "galactic-route", "vpc": "A", "vpcattachment": "1", "terminations": [entry]})
        };
        let example = if key == "via" {
            json!("198.51.100.1")
        } else {
            example
        };
        judge.assert_read(
            &format!("terminations[].{key}"),
            &stanza(example),
            &stanza(wrong()),
        );
    }
}

#[test]
fn every_documented_node_config_key_changes_the_resolved_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.json");
    let resolve = |config: &Value| {
        std::fs::write(&file, config.to_string()).unwrap();
        NodeConfig::resolve_from(&json!({}), &|_: &str| None, &file, None)
    };
    for (key, example) in table("node") {
        // The override directories take effect only where overrides are allowed.
        let (config, baseline) = match key.as_str() {
            "stanza_override_dirs" => (
                json!({ &key: example, "allow_stanza_overrides": true }),
                json!({"allow_stanza_overrides": true}),
            ),
            _ => (json!({ &key: example }), json!({})),
        };
        let resolved =
            resolve(&config).unwrap_or_else(|e| panic!("node.{key}: example refused: {e}"));
        assert_ne!(
            resolved,
            resolve(&baseline).unwrap(),
            "node.{key}: the example changes nothing, so the key is not read"
        );
    }
}

/// Key-like string literals (`"snake_case"`) in the non-test part of a source file.
fn literals(path: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    // An inline test module ends the production code; `#[cfg(test)] mod tests;` does not.
    let code = text.split("mod tests {").next().unwrap_or_default();
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        for (i, part) in line.split('"').enumerate() {
            let key_like = !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_lowercase())
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if i % 2 == 1 && key_like {
                out.insert(part.to_owned());
            }
        }
    }
    out
}

#[test]
fn every_key_the_parsers_read_is_documented() {
    let documented = |tables: &[&str]| -> BTreeSet<String> {
        tables
            .iter()
            .flat_map(|t| table(t).into_iter().map(|(k, _)| k))
            .collect()
    };
    // Per source: the tables its keys belong to, and literals that are not keys of those tables
    // (each with why).
    let cases: [(&str, &[&str], &[&str]); 9] = [
        ("crates/galactic-tap-cni/src/options.rs", &["master"], &[]),
        (
            "crates/galactic-master/src/conf.rs",
            &["master"],
            // `type` is the standard key ("The conflist"), also read as `ipam.type`; the moved
            // addressing keys are read only to be refused (documented under the table).
            &[
                "type",
                "ipv6_subnet",
                "ipv4_subnet",
                "address_families",
                "static_ip",
            ],
        ),
        (
            "crates/galactic-ipam/src/config.rs",
            &["ipam"],
            // `ipam`: the block itself (master table); `ipv6`/`ipv4`: address_families values;
            // `address`: a word of an error message; `true`: the environment switch's value.
            &["ipam", "ipv6", "ipv4", "address", "true"],
        ),
        (
            "crates/galactic-ipam/src/config/addresses.rs",
            &["addresses"],
            // The list's own key (ipam table).
            &["addresses"],
        ),
        (
            "crates/galactic-route/src/conf.rs",
            &["route", "termination"],
            &[],
        ),
        (
            "crates/galactic-bgp/src/conf.rs",
            &["bgp"],
            // `internet` and `mode`: the keys inside `egress` (its row); `missing`: a word of
            // an error message.
            &["internet", "mode", "missing"],
        ),
        (
            "crates/galactic-ipam/src/config/written.rs",
            &["ipam", "addresses"],
            &[],
        ),
        (
            "crates/galactic-core/src/config/stanza.rs",
            &["node"],
            // The stanza's `ipam` block and its keys as a stanza spells them (refused, mapped
            // to the ipam_* node keys); values of allow_stanza_overrides; the log's plugin name.
            &[
                "ipam",
                "data_dir",
                "legacy_dir",
                "lock_timeout_ms",
                "true",
                "false",
                "galactic",
            ],
        ),
        (
            "crates/galactic-core/src/config/mod.rs",
            &["node"],
            // Values of routing_domain and publisher; `plugins`/`type`: the upstream conflist
            // the node config falls back to; `ipam`: the default store's directory name.
            &[
                "ipam",
                "vrf",
                "table",
                "auto",
                "kubernetes",
                "local",
                "plugins",
                "type",
            ],
        ),
    ];
    for (source, tables, refused) in cases {
        let known = documented(tables);
        let missing: Vec<String> = literals(source)
            .into_iter()
            .filter(|k| !known.contains(k) && !refused.contains(&k.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "{source} reads {missing:?}, which docs/configuration.md does not list in {tables:?}"
        );
    }
}
