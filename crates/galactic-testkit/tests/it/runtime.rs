//! The chain runner against libcni's semantics. The plugins here are instruments: small scripts
//! that log what they were given (environment, stdin) and answer as a chained plugin does (ADD
//! passes its `prevResult` on with one interface of its own added).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use galactic_testkit::TestNode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Logs `{plugin, env, conf}` to `calls.jsonl` beside its bin dir; fails when `TEST_FAIL` names
/// `plugin:COMMAND`.
const RECORDER: &str = r#"#!/usr/bin/env python3
import json, os, sys
name = os.path.basename(sys.argv[0])
raw = sys.stdin.read()
conf = json.loads(raw) if raw else None
env = {k: v for k, v in os.environ.items() if k.startswith("CNI_") or k.startswith("TEST_")}
log = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "..", "calls.jsonl")
with open(log, "a") as f:
    f.write(json.dumps({"plugin": name, "env": env, "conf": conf}) + "\n")
command = os.environ["CNI_COMMAND"]
if os.environ.get("TEST_FAIL") == name + ":" + command:
    print(json.dumps({"cniVersion": conf["cniVersion"], "code": 11, "msg": "asked to fail"}))
    sys.exit(1)
if command == "ADD":
    result = conf.get("prevResult") or {"cniVersion": conf["cniVersion"], "interfaces": []}
    result["interfaces"] = result.get("interfaces", []) + [{"name": name}]
    print(json.dumps(result))
"#;

/// A node whose bin dir holds recorders named `plugins`.
fn node(plugins: &[&str]) -> (TestNode, PathBuf) {
    let node = TestNode::new(json!({}));
    let bin = node.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in plugins {
        install(&bin.join(name));
    }
    (node, bin)
}

fn install(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, RECORDER).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every call logged so far, then the log is emptied.
fn calls(node: &TestNode) -> Vec<Value> {
    let log = node.dir.path().join("calls.jsonl");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// (plugin, command) of each call.
fn order(calls: &[Value]) -> Vec<(String, String)> {
    calls
        .iter()
        .map(|c| {
            (
                c["plugin"].as_str().unwrap().to_owned(),
                c["env"]["CNI_COMMAND"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The list a, b, c; each entry names itself (the list's name must win).
fn abc(version: &str) -> Conflist {
    let entry = |t: &str| json!({"type": t, "name": format!("own-{t}"), "cniVersion": "0.3.1"});
    Conflist::new(version, "net", vec![entry("a"), entry("b"), entry("c")])
}

fn att(id: &str) -> Attachment {
    Attachment::new(id, &format!("/var/run/netns/{id}"), "eth0")
}

#[test]
fn add_threads_each_result_into_the_next_plugin_and_caches_the_last() {
    let (node, bin) = node(&["a", "b", "c"]);
    let rt = Runtime::new(&node, &bin, None).env("TEST_SEEN", "inherited");
    let list = abc("1.1.0");
    let att = att("c1")
        .arg("K8S_POD_NAME", "p1")
        .arg("IgnoreUnknown", "1");
    let result = rt.add(&list, &att).unwrap();
    assert_eq!(
        result["interfaces"],
        json!([{"name": "a"}, {"name": "b"}, {"name": "c"}])
    );
    assert_eq!(rt.cached(&list, &att), Some(result));

    let calls = calls(&node);
    assert_eq!(
        order(&calls),
        pairs(&[("a", "ADD"), ("b", "ADD"), ("c", "ADD")])
    );
    assert!(calls[0]["conf"].get("prevResult").is_none());
    assert_eq!(
        calls[1]["conf"]["prevResult"]["interfaces"],
        json!([{"name": "a"}])
    );
    assert_eq!(
        calls[2]["conf"]["prevResult"]["interfaces"],
        json!([{"name": "a"}, {"name": "b"}])
    );
    for call in &calls {
        assert_eq!(
            (&call["conf"]["name"], &call["conf"]["cniVersion"]),
            (&json!("net"), &json!("1.1.0"))
        );
        assert_eq!(
            call["env"],
            json!({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/var/run/netns/c1",
                   "CNI_IFNAME": "eth0", "CNI_ARGS": "K8S_POD_NAME=p1;IgnoreUnknown=1",
                   "CNI_PATH": bin.display().to_string(), "TEST_SEEN": "inherited"})
        );
    }
}

#[test]
fn the_runtimes_environment_never_overrides_the_cni_variables() {
    let (node, bin) = node(&["a"]);
    let rt = Runtime::new(&node, &bin, None)
        .env("CNI_COMMAND", "DEL")
        .env("CNI_IFNAME", "other");
    rt.add(
        &Conflist::new("1.1.0", "net", vec![json!({"type": "a"})]),
        &att("c1"),
    )
    .unwrap();
    let env = &calls(&node)[0]["env"];
    assert_eq!(
        (&env["CNI_COMMAND"], &env["CNI_IFNAME"]),
        (&json!("ADD"), &json!("eth0"))
    );
}

#[test]
fn check_and_del_send_the_cached_result_del_in_reverse_and_again_without_it() {
    let (node, bin) = node(&["a", "b", "c"]);
    let rt = Runtime::new(&node, &bin, None);
    let (list, att) = (abc("1.0.0"), att("c1"));
    let result = rt.add(&list, &att).unwrap();
    calls(&node);

    rt.check(&list, &att).unwrap();
    rt.del(&list, &att).unwrap();
    let seen = calls(&node);
    assert_eq!(
        order(&seen),
        pairs(&[
            ("a", "CHECK"),
            ("b", "CHECK"),
            ("c", "CHECK"),
            ("c", "DEL"),
            ("b", "DEL"),
            ("a", "DEL")
        ])
    );
    assert!(seen.iter().all(|c| c["conf"]["prevResult"] == result));
    assert_eq!(rt.cached(&list, &att), None, "DEL removed the cache entry");

    rt.del(&list, &att).unwrap();
    rt.check(&list, &att).unwrap();
    let seen = calls(&node);
    assert_eq!(seen.len(), 6);
    assert!(
        seen.iter().all(|c| c["conf"].get("prevResult").is_none()),
        "nothing cached, so no prevResult: {seen:?}"
    );

    rt.remember(&list, &att, &result);
    rt.del(&list, &att).unwrap();
    assert!(calls(&node)
        .iter()
        .all(|c| c["conf"]["prevResult"] == result));
}

#[test]
fn a_failed_add_caches_nothing_and_a_failed_del_keeps_the_cache() {
    let (node, bin) = node(&["a", "b", "c"]);
    let rt = Runtime::new(&node, &bin, None);
    let (list, att) = (abc("1.1.0"), att("c1"));
    let err = rt
        .clone()
        .env("TEST_FAIL", "b:ADD")
        .add(&list, &att)
        .unwrap_err();
    assert_eq!(err.plugin.as_deref(), Some("b"));
    assert_eq!(err.expect_error(11), "asked to fail");
    assert_eq!(order(&calls(&node)), pairs(&[("a", "ADD"), ("b", "ADD")]));
    assert_eq!(rt.cached(&list, &att), None);

    let result = rt.add(&list, &att).unwrap();
    let err = rt
        .clone()
        .env("TEST_FAIL", "b:DEL")
        .del(&list, &att)
        .unwrap_err();
    assert_eq!(err.code(), Some(11));
    assert_eq!(rt.cached(&list, &att), Some(result), "kept for the retry");
}

#[test]
fn runtime_config_carries_exactly_the_capabilities_an_entry_declares() {
    let (node, bin) = node(&["a", "b", "c"]);
    let rt = Runtime::new(&node, &bin, None);
    let list = Conflist::new(
        "1.1.0",
        "net",
        vec![
            json!({"type": "a", "capabilities": {"ips": true, "mac": false},
                   "runtimeConfig": {"bandwidth": {"rate": 1}}}),
            json!({"type": "b", "runtimeConfig": {"own": true}}),
            json!({"type": "c", "capabilities": {"mac": true, "portMappings": true}}),
        ],
    );
    let att = att("c1")
        .capability("ips", json!(["10.1.0.5/24"]))
        .capability("mac", json!("02:00:00:00:00:05"));
    rt.add(&list, &att).unwrap();
    let seen: Vec<Value> = calls(&node)
        .iter()
        .map(|c| c["conf"]["runtimeConfig"].clone())
        .collect();
    assert_eq!(
        seen,
        [
            json!({"ips": ["10.1.0.5/24"]}),
            json!({"own": true}),
            json!({"mac": "02:00:00:00:00:05"})
        ],
        "declared and given only; an entry without a match keeps its own"
    );
}

#[test]
fn add_refuses_what_libcni_refuses_before_any_plugin_runs() {
    let (node, bin) = node(&["a"]);
    let rt = Runtime::new(&node, &bin, None);
    let one = |name: &str| Conflist::new("1.1.0", name, vec![json!({"type": "a"})]);
    for (list, att) in [
        (one("net"), Attachment::new("", "/n", "eth0")),
        (one("net"), Attachment::new("../x", "/n", "eth0")),
        (one("net"), Attachment::new("c1", "/n", "sixteen-chars-xx")),
        (one("net"), Attachment::new("c1", "/n", "..")),
        (one("net"), Attachment::new("c1", "/n", "eth:0")),
        (one("a/b"), Attachment::new("c1", "/n", "eth0")),
    ] {
        let err = rt.add(&list, &att).unwrap_err();
        assert!(err.plugin.is_none(), "{err}");
    }
    assert!(calls(&node).is_empty());
    rt.add(
        &one("a.b_c-1"),
        &Attachment::new("c1.x-y_z", "/n", "..eth0"),
    )
    .unwrap();
}

#[test]
fn gc_deletes_the_stale_cached_attachments_then_gcs_every_plugin() {
    let (node, bin) = node(&["a", "b", "c"]);
    let rt = Runtime::new(&node, &bin, None);
    let list = abc("1.1.0");
    let (keep, stale) = (att("keep"), att("stale").arg("K", "V"));
    rt.add(&list, &keep).unwrap();
    let stale_result = rt.add(&list, &stale).unwrap();
    calls(&node);

    rt.gc(&list, &[&keep]).unwrap();
    let seen = calls(&node);
    assert_eq!(
        order(&seen),
        pairs(&[
            ("c", "DEL"),
            ("b", "DEL"),
            ("a", "DEL"),
            ("a", "GC"),
            ("b", "GC"),
            ("c", "GC")
        ])
    );
    for del in &seen[..3] {
        assert_eq!(del["conf"]["prevResult"], stale_result);
        assert_eq!(
            (
                &del["env"]["CNI_CONTAINERID"],
                &del["env"]["CNI_NETNS"],
                &del["env"]["CNI_ARGS"]
            ),
            (
                &json!("stale"),
                &json!("/var/run/netns/stale"),
                &json!("K=V")
            ),
            "the attachment as cached"
        );
    }
    let valid = json!([{"containerID": "keep", "ifname": "eth0"}]);
    for gc in &seen[3..] {
        assert_eq!(gc["conf"]["cni.dev/valid-attachments"], valid);
        assert_eq!(gc["conf"]["cni.dev/attachments"], valid);
        assert!(gc["conf"].get("prevResult").is_none());
        for var in ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS"] {
            assert_eq!(gc["env"][var], "", "{var} is exported empty");
        }
    }
    assert!(rt.cached(&list, &keep).is_some());
    assert!(rt.cached(&list, &stale).is_none());

    // Another network's GC does not touch this one's attachments.
    let mut other = list.clone();
    other.name = "other".into();
    rt.gc(&other, &[]).unwrap();
    assert_eq!(order(&calls(&node)).len(), 3, "GC of a, b, c only");

    // Before 1.1.0 GC is the stale DEL only; a runtime that lost its cache DELs nothing.
    rt.gc(&list.with_version("1.0.0"), &[]).unwrap();
    assert_eq!(
        order(&calls(&node)),
        pairs(&[("c", "DEL"), ("b", "DEL"), ("a", "DEL")])
    );
    rt.add(&list, &keep).unwrap();
    rt.lose_cache();
    calls(&node);
    rt.gc(&list, &[]).unwrap();
    assert_eq!(order(&calls(&node)).len(), 3, "GC only");
}

#[test]
fn the_list_flags_and_status_behave_as_libcni() {
    let (node, bin) = node(&["a", "b", "c"]);
    let rt = Runtime::new(&node, &bin, None);
    let mut value = abc("1.1.0").to_value();
    value["disableCheck"] = json!(true);
    value["disableGC"] = json!(true);
    let quiet = Conflist::from_value(&value).unwrap();
    let att = att("c1");
    rt.add(&quiet, &att).unwrap();
    calls(&node);
    rt.check(&quiet, &att).unwrap();
    rt.gc(&quiet, &[]).unwrap();
    assert!(calls(&node).is_empty(), "disableCheck and disableGC");

    rt.status(&abc("1.1.0")).unwrap();
    let seen = calls(&node);
    assert_eq!(
        order(&seen),
        pairs(&[("a", "STATUS"), ("b", "STATUS"), ("c", "STATUS")])
    );
    assert!(seen.iter().all(|c| c["env"]["CNI_CONTAINERID"] == ""));
    let err = rt.status(&abc("1.0.0")).unwrap_err();
    assert!(err.plugin.is_none(), "{err}");
    assert!(calls(&node).is_empty());
}

#[test]
fn overrides_single_plugins_and_a_cache_shared_by_every_runtime_of_the_node() {
    let (node, bin) = node(&["a", "b", "c"]);
    let other = node.dir.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    install(&other.join("b-prime"));
    let rt = Runtime::new(&node, &bin, None).binary("b", &other.join("b-prime"));
    let (list, att) = (abc("1.1.0"), att("c1"));
    let result = rt.add(&list, &att).unwrap();
    assert_eq!(result["interfaces"][1]["name"], "b-prime");
    assert_eq!(
        Runtime::new(&node, &bin, None).cached(&list, &att),
        Some(result.clone()),
        "another runtime of the node sees the cache"
    );
    calls(&node);

    let prev = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "given"}]});
    let out = rt.plugin(&list, 2, "ADD", &att, Some(&prev));
    assert_eq!(
        out.expect_result()["interfaces"],
        json!([{"name": "given"}, {"name": "c"}])
    );
    assert_eq!(order(&calls(&node)), pairs(&[("c", "ADD")]));
    assert_eq!(
        rt.cached(&list, &att),
        Some(result),
        "the cache is untouched"
    );
    let missing = Conflist::new("1.1.0", "net", vec![json!({"type": "nope"})]);
    let err = rt.add(&missing, &att).unwrap_err();
    assert!(
        err.plugin.is_none() && err.message.contains("nope"),
        "{err}"
    );
}
