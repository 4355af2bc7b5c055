//! The bad-input catalogue: every malformed or hostile input we could think of, run through the
//! real plugins as a runtime would, each with its expected CNI code and message — and for every
//! one, proof that nothing on the node changed (links, rules, routes of every table, the nftables
//! ruleset, the state directory). Also: a delegate's code 11 reaches the runtime unchanged through
//! the master (F15), and an upgrade from the upstream layout never hands out a live address.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Conflist, Runtime};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn cni() -> &'static Path {
    galactic_testkit::plugin_binary("galactic-cni")
}

/// The host's runtime, with this test's own master binary.
fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime().binary("galactic-cni", cni())
}

/// A network config file with `conf` alone.
fn list(conf: &Value) -> Conflist {
    Conflist::from_conf(conf).unwrap()
}

/// The container of the catalogue's galactic-bgp kubeconfig case, whose master record exists.
const KUBECONFIG_CASE: &str = "bgp-kubeconfig-case";

struct Case {
    what: &'static str,
    binary: PathBuf,
    conf: Value,
    env: Vec<(&'static str, String)>,
    code: u64,
    message: &'static str,
}

fn master(patch: Value) -> Value {
    let mut conf = json!({"cniVersion": "1.1.0", "name": "tenant-a", "type": "galactic-cni", "vpc": "1",
                          "vpcattachment": "1", "ipam": {"type": "galactic-ipam", "ipv4_subnet": "10.70.0.0/24"}});
    for (k, v) in patch.as_object().unwrap() {
        if v.is_null() {
            conf.as_object_mut().unwrap().remove(k);
        } else {
            conf[k] = v.clone();
        }
    }
    conf
}

fn cases(host: &Host) -> Vec<Case> {
    let ipam_bin = host.bin_dir.join("galactic-ipam");
    let bgp_bin = host.bin_dir.join("galactic-bgp");
    let c = |what, conf, code, message| Case {
        what,
        binary: cni().into(),
        conf,
        env: vec![],
        code,
        message,
    };
    let two_sandboxes = json!({"cniVersion": "1.1.0", "interfaces": [
        {"name": "G000000001001H"}, {"name": "eth0", "sandbox": "/proc/1/ns/net"}, {"name": "eth1", "sandbox": "/proc/1/ns/net"}],
        "ips": [{"address": "fd00::2/96", "interface": 1}]});
    let unwritable = host.path("not-a-dir");
    std::fs::write(&unwritable, "a file where the state directory should be").unwrap();
    vec![
        c(
            "oversized vpc id",
            master(json!({"vpc": "zzzzzzzzzzzz"})),
            7,
            "48-bit",
        ),
        c(
            "oversized attachment id",
            master(json!({"vpcattachment": "zzzz"})),
            7,
            "16-bit",
        ),
        c(
            "non-base62 vpc",
            master(json!({"vpc": "vpc_1"})),
            7,
            "invalid base62 value for field 'vpc'",
        ),
        c(
            "missing vpc",
            master(json!({"vpc": null})),
            7,
            "vpc is required",
        ),
        c(
            "mtu below the minimum",
            master(json!({"mtu": 67})),
            7,
            "mtu 67 is out of range",
        ),
        c(
            "mtu 70000",
            master(json!({"mtu": 70000})),
            7,
            "mtu 70000 is out of range",
        ),
        c(
            "addressing at the top level (the original NADs)",
            master(json!({"ipv6_subnet": "fd00::/64", "address_families": ["ipv6"]})),
            7,
            "belong inside the 'ipam' block",
        ),
        c(
            "a master with a prevResult",
            master(json!({"prevResult": {"cniVersion": "1.1.0"}})),
            7,
            "first in the chain",
        ),
        c(
            "ipam type with a path",
            master(json!({"ipam": {"type": "../../bin/sh"}})),
            7,
            "plugin name",
        ),
        c(
            "missing ipam delegate",
            master(json!({"ipam": {"type": "no-such-ipam"}})),
            7,
            "not found in CNI_PATH",
        ),
        c(
            "IPv4 pool in ipv6_subnet",
            master(json!({"ipam": {"type": "galactic-ipam", "ipv6_subnet": "10.0.0.0/8"}})),
            7,
            "must be an IPv6 CIDR",
        ),
        c(
            "IPv6 pool in ipv4_subnet",
            master(json!({"ipam": {"type": "galactic-ipam", "ipv4_subnet": "fd00::/64"}})),
            7,
            "must be an IPv4 CIDR",
        ),
        c(
            "pool fields mixed with addresses",
            master(
                json!({"ipam": {"type": "galactic-ipam", "ipv4_subnet": "10.0.0.0/24",
            "addresses": [{"address": "10.0.0.5/32"}]}}),
            ),
            7,
            "cannot be combined",
        ),
        c(
            "address_families excluding every pool",
            master(
                json!({"ipam": {"type": "galactic-ipam", "ipv4_subnet": "10.0.0.0/24",
            "address_families": ["ipv6"]}}),
            ),
            7,
            "excludes every pool",
        ),
        c(
            "unsupported cniVersion",
            master(json!({"cniVersion": "0.3.1"})),
            1,
            "1.0.0, 1.1.0",
        ),
        Case {
            what: "16-char ifname",
            binary: cni().into(),
            conf: master(json!({})),
            env: vec![("CNI_IFNAME", "sixteen-chars-xx".into())],
            code: 4,
            message: "CNI_IFNAME",
        },
        Case {
            what: "path-traversal container id",
            binary: cni().into(),
            conf: master(json!({})),
            env: vec![("CNI_CONTAINERID", "../../etc/passwd".into())],
            code: 4,
            message: "CNI_CONTAINERID",
        },
        Case {
            what: "non-existent netns",
            binary: cni().into(),
            conf: master(json!({})),
            env: vec![("CNI_NETNS", "/var/run/netns/does-not-exist".into())],
            code: 4,
            message: "CNI_NETNS",
        },
        Case {
            what: "unwritable state directory",
            binary: cni().into(),
            conf: master(json!({})),
            env: vec![("GALACTIC_CNI_STATE_DIR", unwritable.display().to_string())],
            code: 5,
            message: "attachment record",
        },
        Case {
            what: "IPAM data_dir that is a file",
            binary: ipam_bin,
            conf: master(json!({"ipam": {"type": "galactic-ipam",
            "ipv4_subnet": "10.0.0.0/24"}})),
            env: vec![(
                "GALACTIC_CNI_IPAM_DATA_DIR",
                unwritable.display().to_string(),
            )],
            code: 5,
            message: "",
        },
        Case {
            what: "prevResult with two sandboxed interfaces",
            binary: bgp_bin.clone(),
            conf: json!({"cniVersion": "1.1.0", "name": "tenant-a", "type": "galactic-bgp", "vpc": "1", "vpcattachment": "1", "prevResult": two_sandboxes}),
            env: vec![],
            code: 6,
            message: "",
        },
        Case {
            what: "kubeconfig pointing nowhere",
            binary: bgp_bin,
            // An attachment its master recorded (see KUBECONFIG_CASE), so galactic-bgp gets past
            // its chain check to the kubeconfig.
            conf: json!({"cniVersion": "1.1.0", "name": "tenant-a", "type": "galactic-bgp", "vpc": "9", "vpcattachment": "9",
                         "prevResult": {"cniVersion": "1.1.0", "interfaces": [{"name": "G000000009009H"}], "ips": [{"address": "10.0.0.2/32", "interface": 0}]}}),
            env: vec![
                ("CNI_CONTAINERID", KUBECONFIG_CASE.into()),
                ("GALACTIC_CNI_PUBLISHER", "kubernetes".into()),
                ("GALACTIC_CNI_KUBECONFIG", "/nonexistent/kubeconfig".into()),
                ("GALACTIC_CNI_NODE_NAME", "n1".into()),
            ],
            code: 7,
            message: "kubeconfig",
        },
    ]
}

#[test]
fn every_hostile_input_gets_its_code_and_changes_nothing() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "bad",
        json!({"routing_domain": "auto"}),
        &["galactic-ipam", "galactic-bgp"],
    );
    let pod = Pod::new("bad");
    host.node.record_master(
        "tenant-a",
        KUBECONFIG_CASE,
        &pod.ifname,
        &pod.netns_path(),
        ("9", "9"),
    );
    let cases = cases(&host);
    let before = host.snapshot();
    let mut failures = Vec::new();
    for case in cases {
        let mut inv = host
            .invocation(&case.binary, "ADD", &pod)
            .stdin(case.conf.to_string());
        for (k, v) in &case.env {
            inv = inv.var(k, v);
        }
        let out = inv.run();
        let got = if out.success { None } else { Some(out.json()) };
        let ok = got.as_ref().is_some_and(|g| {
            g["code"].as_u64() == Some(case.code)
                && g["msg"].as_str().is_some_and(|m| m.contains(case.message))
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
        assert!(
            !pod.ns.try_ip(&["link", "show", "eth0"]).0,
            "{}: an interface appeared in the pod",
            case.what
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_delegates_try_again_later_reaches_the_runtime_unchanged() {
    galactic_testkit::privileged!();
    let host = Host::new("f15", json!({"routing_domain": "auto"}), &[]);
    let busy = host.bin_dir.join("busy-ipam");
    std::fs::write(&busy, "#!/bin/sh\ncat >/dev/null\necho '{\"code\":11,\"msg\":\"store busy\",\"details\":\"lock held\"}'\nexit 1\n").unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&busy).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&busy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let pod = Pod::new("f15");
    let before = host.snapshot();
    let conf = list(&master(json!({"ipam": {"type": "busy-ipam"}})));
    let out = runtime(&host)
        .add(&conf, &pod.attachment())
        .unwrap_err()
        .outcome
        .unwrap();
    assert!(!out.success);
    let err = out.json();
    assert_eq!(
        (err["code"].as_u64(), err["msg"].as_str()),
        (Some(11), Some("store busy")),
        "{err}"
    );
    assert_eq!(err["details"], "lock held");
    let after = host.snapshot();
    // The routing domain a first ADD creates is node state that GC reclaims; everything of the
    // attachment itself is gone.
    assert_eq!(after[0], before[0], "no interface left");
    assert!(
        !after[1].contains("iif G") && !after[2].contains("iif G"),
        "no attachment rule left"
    );
    assert_eq!(
        galactic_testkit::inspect::state_entries(&host.path("state").join("attachments")),
        Vec::<String>::new(),
        "no record left"
    );
}

#[test]
fn an_upgrade_from_the_upstream_layout_never_hands_out_a_live_address() {
    galactic_testkit::privileged!();
    let host = Host::new("upg", json!({"routing_domain": "auto"}), &["galactic-ipam"]);
    // What the Go implementation left on the node: markers of a live pod in both families.
    let legacy = host.path("legacy");
    std::fs::create_dir_all(legacy.join("10.72.0.0-24")).unwrap();
    std::fs::write(legacy.join("10.72.0.0-24/10.72.0.2"), "old-container").unwrap();
    std::fs::write(legacy.join("10.72.0.0-24/lock"), "").unwrap();
    std::fs::create_dir_all(legacy.join("fd72::-64")).unwrap();
    std::fs::write(legacy.join("fd72::-64/fd72::1:0:1-96"), "old-container").unwrap();
    let ipam =
        json!({"type": "galactic-ipam", "ipv6_subnet": "fd72::/64", "ipv4_subnet": "10.72.0.0/24"});
    let conf = list(&master(json!({"vpc": "U", "ipam": ipam})));
    let rt = runtime(&host);
    let pod = Pod::new("upg");
    let result = rt.add(&conf, &pod.attachment()).unwrap();
    let ips: Vec<&str> = result["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["address"].as_str().unwrap())
        .collect();
    assert!(
        !ips.iter()
            .any(|ip| ip.starts_with("10.72.0.2/") || ip.starts_with("fd72::1:0:")),
        "a live upstream address was handed out: {ips:?}"
    );
    rt.del(&conf, &pod.attachment()).unwrap();
    // The old pod's addresses stay reserved until its own DEL (or GC) releases them.
    let again = Pod::new("upg2");
    let mut conf2 = conf.clone();
    conf2.plugins[0]["vpcattachment"] = json!("2");
    let result2 = rt.add(&conf2, &again.attachment()).unwrap();
    let ips2: Vec<&str> = result2["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["address"].as_str().unwrap())
        .collect();
    assert!(
        !ips2
            .iter()
            .any(|ip| ip.starts_with("10.72.0.2/") || ip.starts_with("fd72::1:0:")),
        "{ips2:?}"
    );
    rt.del(&conf2, &again.attachment()).unwrap();
}
