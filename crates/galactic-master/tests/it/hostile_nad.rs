//! The hostile-NAD catalogue: what a tenant who writes a NetworkAttachmentDefinition could put in
//! a stanza to steer the node, run through the real binaries as Multus would hand them over.
//! Every case asserts its code, a message the tenant can act on, and that nothing on the node
//! changed (links, rules, routes, nftables, every file under the node's directory, including the
//! paths the stanza named). See docs/tenancy.md.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::config::{IPAM_NODE_KEYS, NODE_KEYS};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const NETWORK: &str = "tenant-a";

fn cni() -> &'static Path {
    galactic_testkit::plugin_binary("galactic-cni")
}

fn master(patch: Value) -> Value {
    let mut conf = json!({"cniVersion": "1.1.0", "name": NETWORK, "type": "galactic-cni",
        "vpc": "1", "vpcattachment": "1",
        "ipam": {"type": "galactic-ipam", "ipv4_subnet": "10.73.0.0/24"}});
    merge(&mut conf, patch);
    conf
}

fn chained(plugin: &str, patch: Value) -> Value {
    let mut conf = json!({"cniVersion": "1.1.0", "name": NETWORK, "type": plugin,
        "vpc": "1", "vpcattachment": "1"});
    merge(&mut conf, patch);
    conf
}

fn merge(conf: &mut Value, patch: Value) {
    for (k, v) in patch.as_object().into_iter().flatten() {
        conf[k] = v.clone();
    }
}

/// One hostile stanza: which plugin gets it, and what it must answer.
struct Case {
    what: String,
    plugin: &'static str,
    conf: Value,
    prev: Option<Value>,
    code: u64,
    message: String,
}

/// Every node-level key, in the stanza of every plugin, pointing at a path outside the node's
/// state (inside the node's directory, so the snapshot sees whatever would be created there).
fn node_key_cases(outside: &Path, prev: &Value) -> Vec<Case> {
    let mut cases = Vec::new();
    let value = |key: &str| -> Value {
        match key {
            "log_max_bytes" | "ebpf_filter_priority" => json!(4096),
            "allow_stanza_overrides" => json!(true),
            _ => json!(outside.join(key).display().to_string()),
        }
    };
    for plugin in ["galactic-cni", "galactic-route", "galactic-bgp"] {
        for key in NODE_KEYS {
            let patch = json!({ key: value(key) });
            let (conf, prev) = match plugin {
                "galactic-cni" => (master(patch), None),
                _ => (chained(plugin, patch), Some(prev.clone())),
            };
            cases.push(Case {
                what: format!("{plugin}: {key} in the stanza"),
                plugin,
                conf,
                prev,
                code: 7,
                message: format!("{key} is a node setting"),
            });
        }
    }
    for (key, node_key) in IPAM_NODE_KEYS {
        let mut conf = master(json!({}));
        conf["ipam"][key] = value(node_key);
        cases.push(Case {
            what: format!("ipam.{key} in the stanza"),
            plugin: "galactic-cni",
            conf,
            prev: None,
            code: 7,
            message: format!("set {node_key} in the node config"),
        });
    }
    cases
}

/// Delegates that are not IPAM plugins, or not plain names.
fn delegate_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (ipam_type, message) in [
        ("galactic-cni", "names a chain plugin, not an IPAM plugin"),
        (
            "galactic-tap-cni",
            "names a chain plugin, not an IPAM plugin",
        ),
        ("galactic-veth", "names a chain plugin, not an IPAM plugin"),
        ("galactic-route", "names a chain plugin, not an IPAM plugin"),
        ("galactic-bgp", "names a chain plugin, not an IPAM plugin"),
        ("/usr/bin/env", "must be a plugin name, not a path"),
        ("../bin/galactic-ipam", "must be a plugin name, not a path"),
    ] {
        cases.push(Case {
            what: format!("ipam.type {ipam_type}"),
            plugin: "galactic-cni",
            conf: master(json!({"ipam": {"type": ipam_type, "ipv4_subnet": "10.73.0.0/24"}})),
            prev: None,
            code: 7,
            message: message.into(),
        });
    }
    cases
}

/// Oversize lists and strings, unicode, path-like names.
fn bound_cases(prev: &Value) -> Vec<Case> {
    // 20 000 entries: far over the bound yet under the 1 MiB configuration limit, so the
    // refusal seen is the list bound's.
    let terminations: Vec<Value> = (0..20_000)
        .map(|i| json!({"network": format!("10.{}.{}.0/24", i / 256 % 256, i % 256)}))
        .collect();
    let c = |what: &str, plugin, conf, prev: Option<&Value>, message: &str| Case {
        what: what.into(),
        plugin,
        conf,
        prev: prev.cloned(),
        code: 7,
        message: message.into(),
    };
    vec![
        c(
            "20 000 terminations",
            "galactic-route",
            chained("galactic-route", json!({"terminations": terminations})),
            Some(prev),
            "at most 64 are allowed",
        ),
        c(
            "a 1000-character vpc",
            "galactic-cni",
            master(json!({"vpc": "a".repeat(1000)})),
            None,
            "vpc",
        ),
        c(
            "a unicode vpc",
            "galactic-cni",
            master(json!({"vpc": "Ａ１"})),
            None,
            "invalid base62 value for field 'vpc'",
        ),
        c(
            "a unicode network name",
            "galactic-cni",
            master(json!({"name": "réseau"})),
            None,
            "network name",
        ),
        c(
            "a path-like network name",
            "galactic-cni",
            master(json!({"name": "../../etc"})),
            None,
            "network name",
        ),
        c(
            "a 300-character network name",
            "galactic-cni",
            master(json!({"name": "n".repeat(300)})),
            None,
            "network name",
        ),
        c(
            "a namespace that is not a Kubernetes name",
            "galactic-bgp",
            chained("galactic-bgp", json!({"namespace": "../kube-system"})),
            Some(prev),
            "not a Kubernetes namespace name",
        ),
        c(
            "a 100-character namespace",
            "galactic-bgp",
            chained("galactic-bgp", json!({"namespace": "n".repeat(100)})),
            Some(prev),
            "not a Kubernetes namespace name",
        ),
        c(
            "a network configuration over 1 MiB",
            "galactic-cni",
            master(json!({"padding": "x".repeat(1024 * 1024)})),
            None,
            "the limit is 1048576",
        ),
    ]
}

/// A galactic-route or galactic-bgp stanza naming another attachment than the master's.
fn mismatch_cases(prev: &Value) -> Vec<Case> {
    let mut cases = Vec::new();
    for plugin in ["galactic-route", "galactic-bgp"] {
        for (vpc, att) in [("2", "1"), ("1", "2")] {
            cases.push(Case {
                what: format!("{plugin} naming VPC {vpc} attachment {att}"),
                plugin,
                conf: chained(plugin, json!({"vpc": vpc, "vpcattachment": att})),
                prev: Some(prev.clone()),
                code: 7,
                message: "every plugin of a chain must carry the master's vpc and vpcattachment"
                    .into(),
            });
        }
    }
    cases
}

#[test]
fn no_stanza_steers_the_node_and_every_refusal_says_why() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "hnad",
        json!({"routing_domain": "auto"}),
        &["galactic-ipam", "galactic-route", "galactic-bgp"],
    );
    let outside = host.path("outside");
    let rt = host.runtime().binary("galactic-cni", cni());
    let pod = Pod::new("hnad");
    // A live attachment of this container: VPC 1 attachment 1, as the runtime caches it.
    let list = Conflist::from_conf(&master(json!({}))).unwrap();
    let prev = rt.add(&list, &pod.attachment()).unwrap();
    let before = host.snapshot();
    let mut failures = Vec::new();
    let cases = node_key_cases(&outside, &prev)
        .into_iter()
        .chain(delegate_cases())
        .chain(bound_cases(&prev))
        .chain(mismatch_cases(&prev));
    for case in cases {
        let binary = match case.plugin {
            "galactic-cni" => cni().to_path_buf(),
            other => host.bin_dir.join(other),
        };
        let mut conf = case.conf.clone();
        if let Some(prev) = &case.prev {
            conf["prevResult"] = prev.clone();
        }
        let out = host
            .invocation(&binary, "ADD", &pod)
            .stdin(conf.to_string())
            .run();
        let got = (!out.success).then(|| out.json());
        let ok = got.as_ref().is_some_and(|g| {
            g["code"].as_u64() == Some(case.code)
                && g["msg"]
                    .as_str()
                    .is_some_and(|m| m.contains(&case.message) && !m.contains("Some("))
        });
        if !ok {
            failures.push(format!(
                "{}: expected code {} with {:?}, got {got:?}",
                case.what, case.code, case.message
            ));
        }
        if let Some(new) = host.changed_since(&before) {
            failures.push(format!("{}: the node changed: {new:?}", case.what));
        }
    }
    assert!(
        !outside.exists(),
        "a stanza made a plugin create {}",
        outside.display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    rt.del(&list, &pod.attachment()).unwrap();
}

/// A delegate that execs the master again, with the same environment and stdin: the nested
/// master refuses at once, so the chain is one level deep and nothing is created.
#[test]
fn a_delegate_that_calls_the_master_again_cannot_recurse() {
    galactic_testkit::privileged!();
    let host = Host::new("hrec", json!({"routing_domain": "auto"}), &[]);
    let calls = host.path("calls");
    let script = host.bin_dir.join("echo-ipam");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$GALACTIC_CNI_DELEGATE_DEPTH\" >> {}\nexec {}\n",
            calls.display(),
            cni().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pod = Pod::new("hrec");
    let conf = master(json!({"ipam": {"type": "echo-ipam"}}));
    let before = host.snapshot();
    let out = host
        .invocation(cni(), "ADD", &pod)
        .stdin(conf.to_string())
        .run();
    let msg = out.expect_error(7);
    assert!(
        msg.contains("cannot run as a delegate"),
        "the nested master's refusal reaches the runtime: {msg}"
    );
    assert_eq!(
        std::fs::read_to_string(&calls)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        ["1"],
        "the delegate ran once, one level deep"
    );
    std::fs::remove_file(&calls).unwrap();
    assert_eq!(host.snapshot(), before, "nothing on the node changed");
}

/// On a lab node that allows stanza overrides, a path must stay inside the allowed directory:
/// a symlink out of it is refused, and nothing is written through it.
#[test]
fn a_lab_nodes_overrides_cannot_escape_through_a_symlink() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "hsym",
        json!({"routing_domain": "auto"}),
        &["galactic-ipam"],
    );
    let lab = host.path("lab");
    let escape = host.path("escape");
    std::fs::create_dir_all(&lab).unwrap();
    std::fs::create_dir_all(&escape).unwrap();
    std::os::unix::fs::symlink(&escape, lab.join("link")).unwrap();
    host.node.merge_config(
        json!({"allow_stanza_overrides": true, "stanza_override_dirs": lab.display().to_string()}),
    );
    let pod = Pod::new("hsym");
    let before = host.snapshot();
    for (key, path) in [
        ("log_file", lab.join("link/evil.log")),
        ("state_dir", lab.join("link/state")),
        ("log_file", lab.join("../escape/evil.log")),
    ] {
        let conf = master(json!({ key: path.display().to_string() }));
        let msg = host
            .invocation(cni(), "ADD", &pod)
            .stdin(conf.to_string())
            .run()
            .expect_error(7);
        assert!(
            msg.contains("is outside the directories this node lets a network configuration use"),
            "{key} {}: {msg}",
            path.display()
        );
    }
    assert_eq!(
        std::fs::read_dir(&escape).unwrap().count(),
        0,
        "nothing was written through the symlink"
    );
    assert_eq!(host.snapshot(), before, "nothing on the node changed");
}
