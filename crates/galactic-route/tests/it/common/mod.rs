//! The route tests' node: a throwaway host (the test kit's `Host`) with the workspace's master
//! and IPAM in `CNI_PATH`, a runtime that runs this crate's galactic-route, and readers of the
//! state the plugins keep on it.

#![allow(dead_code)]
// each test file uses a different part of the fixture
// A fixture panics to report a failed precondition; that is its error handling.
#![allow(clippy::unwrap_used)]

use galactic_core::ident::VpcId;
use galactic_testkit::host::Host;
use galactic_testkit::runtime::Runtime;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A fresh host (routing domain backend probed: `table` on kernels without VRF).
pub fn host(tag: &str) -> Host {
    Host::new(
        tag,
        json!({"routing_domain": "auto"}),
        &["galactic-cni", "galactic-ipam"],
    )
}

/// The host's runtime, with this crate's galactic-route.
pub fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime().binary(
        "galactic-route",
        Path::new(env!("CARGO_BIN_EXE_galactic-route")),
    )
}

/// The VPC's routing table, from the domain record the master wrote.
pub fn table(host: &Host, vpc: &str) -> u32 {
    u32::try_from(domain(host, vpc)["table"].as_u64().unwrap()).unwrap()
}

/// The VPC's routing domain backend (`table` or `vrf`).
pub fn backend(host: &Host, vpc: &str) -> String {
    domain(host, vpc)["backend"].as_str().unwrap().to_owned()
}

fn domain(host: &Host, vpc: &str) -> Value {
    let record = domain_record(host, vpc);
    let text = std::fs::read_to_string(&record)
        .unwrap_or_else(|e| panic!("read {}: {e}", record.display()));
    serde_json::from_str(&text).unwrap()
}

/// Path of the VPC's routing-domain record.
pub fn domain_record(host: &Host, vpc: &str) -> PathBuf {
    vpc_record(host, "routing", vpc)
}

/// Path of this plugin's ownership record for the VPC.
pub fn route_record(host: &Host, vpc: &str) -> PathBuf {
    vpc_record(host, "routes", vpc)
}

fn vpc_record(host: &Host, kind: &str, vpc: &str) -> PathBuf {
    let hex = VpcId::parse(vpc).unwrap().hex();
    host.path("state")
        .join(kind)
        .join(format!("vpc-{hex}.json"))
}

/// `ip -j -4|-6 route show table T` in the host namespace, as a sorted list of one-line
/// descriptions (`dst [via gw] dev D [onlink] [scope]`), so whole tables can be compared.
pub fn table_routes(host: &Host, table: u32) -> Vec<String> {
    let mut out = Vec::new();
    for family in ["-4", "-6"] {
        let routes = host
            .netns
            .ip_json(&[family, "route", "show", "table", &table.to_string()]);
        // Not the kernel's routes for the host end's link-local address: in a VRF table they
        // appear whenever its DAD completes, even between two snapshots.
        let link_local = |r: &Value| {
            r["protocol"] == "kernel" && r["dst"].as_str().is_some_and(|d| d.starts_with("fe80:"))
        };
        for r in routes.as_array().unwrap().iter().filter(|r| !link_local(r)) {
            out.push(describe(r));
        }
    }
    out.sort();
    out
}

/// The kernel's answer to "where does a packet to `dst` arriving on `iif` from `from` go". In
/// table mode such a packet carries its VPC's mark, set from `iif` by the node's VPC-mark map
/// before routing; `ip route get` runs no nftables, so the mark is passed as the map has it.
pub fn route_get(host: &Host, dst: &str, from: &str, iif: &str) -> (bool, String) {
    let mut args = vec!["route", "get", dst, "from", from, "iif", iif];
    let mark = vpc_mark(host, iif);
    if let Some(mark) = &mark {
        args.extend(["mark", mark.as_str()]);
    }
    host.netns.try_ip(&args)
}

/// `iif`'s mark in the node's VPC-mark map (table mode), if it has one.
fn vpc_mark(host: &Host, iif: &str) -> Option<String> {
    let out = host
        .netns
        .exec(&["nft", "list", "map", "inet", "galactic", "vpc_marks"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let quoted = format!("\"{iif}\" : ");
    let at = listed.find(&quoted)? + quoted.len();
    listed[at..]
        .split(|c: char| c == ',' || c.is_whitespace())
        .next()
        .map(str::to_owned)
}

/// One route of `ip -j route show`, as text.
pub fn describe(r: &Value) -> String {
    let mut text = r["dst"].as_str().unwrap_or("?").to_owned();
    if let Some(kind) = r["type"].as_str().filter(|t| *t != "unicast") {
        text = format!("{kind} {text}");
    }
    if let Some(gw) = r["gateway"].as_str() {
        text += &format!(" via {gw}");
    }
    if let Some(dev) = r["dev"].as_str() {
        text += &format!(" dev {dev}");
    }
    let flags: Vec<&str> = r["flags"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if flags.contains(&"onlink") {
        text += " onlink";
    }
    if let Some(scope) = r["scope"].as_str() {
        text += &format!(" scope {scope}");
    }
    text
}

/// The veth master's entry.
pub fn master_conf(vpc: &str, att: &str, ipam: Value) -> Value {
    let mut conf = json!({"type": "galactic-cni", "vpc": vpc, "vpcattachment": att, "mtu": 1400});
    if !ipam.is_null() {
        conf["ipam"] = ipam;
    }
    conf
}

/// A dual-stack pool `ipam` block (the store is the node's, under the host's directory).
pub fn pool_ipam(v6: &str, v4: &str) -> Value {
    json!({"type": "galactic-ipam", "ipv6_subnet": v6, "ipv4_subnet": v4})
}

/// This plugin's entry.
pub fn route_conf(vpc: &str, att: &str, terms: Value) -> Value {
    json!({"type": "galactic-route", "vpc": vpc, "vpcattachment": att, "terminations": terms})
}

/// The address of `result` of one family, without its prefix length.
pub fn result_ip(result: &Value, family_v6: bool) -> String {
    result["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ip| ip["address"].as_str().unwrap())
        .find(|a| a.contains(':') == family_v6)
        .unwrap_or_else(|| panic!("no address of that family in {result}"))
        .split('/')
        .next()
        .unwrap()
        .to_owned()
}
