//! Every example conflist in `deploy/cni/` run by a CNI runtime (libcni semantics,
//! `galactic_testkit::runtime`) on a throwaway host namespace with the local publisher:
//! ADD, CHECK, DEL, DEL for cniVersion 1.0.0 and 1.1.0, then STATUS and GC (1.1.0).
//!
//! For each file and version the test checks what a user relies on: the result carries one
//! address per family the `ipam` block configures, the kernel has them (in the pod for a veth
//! master, the tap on the host for a tap master), termination routes are in the VPC's table,
//! CHECK passes, DEL removes the host interface, a second DEL (no cached result) succeeds. GC with
//! the attachment in the valid list keeps it; GC without it removes it.

// A test fails by panicking.
#![allow(clippy::unwrap_used)]

use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_testkit::host::{Host, Pod, PLUGINS};
use galactic_testkit::runtime::{Conflist, Runtime};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A throwaway host (namespace, node config with the local publisher, every plugin).
fn host() -> Host {
    Host::new("cl", json!({"routing_domain": "auto"}), &PLUGINS)
}

/// `deploy/cni/*.conflist`, sorted.
fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/cni");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "conflist"))
        .collect();
    files.sort();
    files
}

/// What the list's master entry configures.
struct Expect {
    tap: bool,
    host_ifname: String,
    families: Vec<bool>,
    terminations: Vec<String>,
}

impl Expect {
    fn of(list: &Conflist) -> Self {
        let master = &list.plugins[0];
        let vpc = VpcId::parse(master["vpc"].as_str().unwrap()).unwrap();
        let att = AttachmentId::parse(master["vpcattachment"].as_str().unwrap()).unwrap();
        let terminations = list
            .plugins
            .iter()
            .filter(|p| p["type"] == "galactic-route")
            .flat_map(|p| p["terminations"].as_array().cloned().unwrap_or_default())
            .map(|t| t["network"].as_str().unwrap().to_owned())
            .collect();
        Self {
            tap: master["type"] == "galactic-tap-cni",
            host_ifname: host_ifname(&vpc, &att),
            families: families(&master["ipam"]),
            terminations,
        }
    }
}

/// The families (true = IPv6) the `ipam` block hands out, IPv6 first.
fn families(ipam: &Value) -> Vec<bool> {
    if let Some(addresses) = ipam["addresses"].as_array().filter(|a| !a.is_empty()) {
        let mut v6: Vec<bool> = addresses
            .iter()
            .map(|a| a["address"].as_str().unwrap().contains(':'))
            .collect();
        v6.sort_by(|a, b| b.cmp(a));
        return v6;
    }
    if ipam["static_ip"].is_string() {
        return vec![true];
    }
    let listed = |name: &str| {
        ipam["address_families"]
            .as_array()
            .is_none_or(|l| l.iter().any(|f| f == name))
    };
    let mut out = Vec::new();
    if ipam["ipv6_subnet"].is_string() && listed("ipv6") {
        out.push(true);
    }
    if ipam["ipv4_subnet"].is_string() && listed("ipv4") {
        out.push(false);
    }
    out
}

#[test]
fn every_example_conflist_runs_add_check_del_del_status_and_gc() {
    galactic_testkit::privileged!();
    let files = examples();
    assert!(files.len() >= 8, "deploy/cni has the examples: {files:?}");
    for file in &files {
        let list = Conflist::from_file(file).unwrap();
        for version in ["1.0.0", "1.1.0"] {
            lifecycle(file, &list.with_version(version));
        }
    }
}

/// ADD, CHECK, DEL, DEL (and for 1.1.0 STATUS and GC) of one list on a fresh host.
fn lifecycle(file: &Path, list: &Conflist) {
    let what = format!("{} @ {}", file.display(), list.version);
    let expect = Expect::of(list);
    let host = host();
    let runtime = host.runtime();
    let pod = Pod::new("clp");
    let att = pod.attachment();

    let result = runtime
        .add(list, &att)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(result["cniVersion"], list.version.as_str(), "{what}");
    assert_attached(&what, &host, &pod, &expect, &result);
    runtime
        .check(list, &att)
        .unwrap_or_else(|e| panic!("{what}: {e}"));

    runtime
        .del(list, &att)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_detached(&what, &host, &pod, &expect);
    assert!(runtime.cached(list, &att).is_none(), "{what}");
    runtime
        .del(list, &att)
        .unwrap_or_else(|e| panic!("{what}: second DEL: {e}"));

    if list.has_status_and_gc() {
        runtime
            .status(list)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        gc(&what, &host, &runtime, list, &expect);
    } else {
        let refused = runtime.status(list).unwrap_err();
        assert!(
            refused.plugin.is_none(),
            "{what}: 1.0.0 STATUS is refused by the runtime"
        );
    }
}

/// GC keeps a valid attachment and removes one that is not valid any more.
fn gc(what: &str, host: &Host, runtime: &Runtime<'_>, list: &Conflist, expect: &Expect) {
    let pod = Pod::new("clg");
    let att = pod.attachment();
    let result = runtime
        .add(list, &att)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    runtime
        .gc(list, &[&att])
        .unwrap_or_else(|e| panic!("{what}: GC with the attachment valid: {e}"));
    assert_attached(what, host, &pod, expect, &result);
    runtime
        .check(list, &att)
        .unwrap_or_else(|e| panic!("{what}: CHECK after GC: {e}"));
    runtime
        .gc(list, &[])
        .unwrap_or_else(|e| panic!("{what}: GC with nothing valid: {e}"));
    assert!(runtime.cached(list, &att).is_none(), "{what}");
    assert_detached(what, host, &pod, expect);
}

/// The result and the kernel agree with the configuration.
fn assert_attached(what: &str, host: &Host, pod: &Pod, expect: &Expect, result: &Value) {
    let ips: Vec<String> = result["ips"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: result without ips: {result}"))
        .iter()
        .map(|ip| ip["address"].as_str().unwrap().to_owned())
        .collect();
    let got: Vec<bool> = ips.iter().map(|a| a.contains(':')).collect();
    assert_eq!(got, expect.families, "{what}: families of {ips:?}");
    let (ns_text, dev) = if expect.tap {
        (host.netns.ip(&["addr"]), expect.host_ifname.as_str())
    } else {
        (pod.ns.ip(&["addr", "show", "dev", &pod.ifname]), "")
    };
    assert!(
        host.netns.try_ip(&["link", "show", &expect.host_ifname]).0,
        "{what}: host interface {} exists",
        expect.host_ifname
    );
    if !expect.tap {
        for ip in &ips {
            assert!(ns_text.contains(ip.as_str()), "{what}: {ip} in {ns_text}");
        }
    } else {
        let tap = host.netns.ip(&["-d", "link", "show", dev]);
        assert!(tap.contains("tun type tap"), "{what}: {tap}");
    }
    let routes = host.netns.ip(&["route", "show", "table", "all"])
        + &host.netns.ip(&["-6", "route", "show", "table", "all"]);
    for network in &expect.terminations {
        let line = routes
            .lines()
            .find(|l| l.starts_with(&format!("{network} ")))
            .unwrap_or_else(|| panic!("{what}: termination {network} in {routes}"));
        assert!(line.contains(&expect.host_ifname), "{what}: {line}");
    }
}

/// Nothing of the attachment is left in the kernel.
fn assert_detached(what: &str, host: &Host, pod: &Pod, expect: &Expect) {
    assert!(
        !host.netns.try_ip(&["link", "show", &expect.host_ifname]).0,
        "{what}: host interface {} is gone",
        expect.host_ifname
    );
    assert!(
        !pod.ns.try_ip(&["link", "show", &pod.ifname]).0,
        "{what}: no {} in the pod",
        pod.ifname
    );
    let routes = host.netns.ip(&["route", "show", "table", "all"])
        + &host.netns.ip(&["-6", "route", "show", "table", "all"]);
    assert!(
        !routes.contains(&expect.host_ifname),
        "{what}: no route through {}: {routes}",
        expect.host_ifname
    );
}
