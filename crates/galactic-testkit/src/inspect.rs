//! Readers of a test host's kernel and node state, and names computed the way the plugins
//! compute them: what the masters' tests (the shared flow's, galactic-cni's and
//! galactic-tap-cni's) assert with.

#![allow(clippy::unwrap_used)] // fixtures: a failure here is the test's failure

use super::host::Host;
use super::privileged::{privileged, TestNetns};
use super::runtime::{Attachment, Conflist};
use galactic_core::ident::{host_ifname, vrf_name, AttachmentId, VpcId};
use serde_json::{json, Value};

/// The host interface name of (vpc, attachment), computed like the plugin does.
pub fn hname(vpc: &str, att: &str) -> String {
    host_ifname(
        &VpcId::parse(vpc).unwrap(),
        &AttachmentId::parse(att).unwrap(),
    )
}

/// The VPC's VRF device name.
pub fn vrf(vpc: &str) -> String {
    vrf_name(&VpcId::parse(vpc).unwrap())
}

/// A host with `routing_domain=vrf` and `plugins` staged, or `None` (reported SKIPPED) on a
/// kernel without VRF.
pub fn vrf_host(test: &str, tag: &str, plugins: &[&str]) -> Option<Host> {
    if !privileged(test) {
        return None;
    }
    let probe = TestNetns::new("vrfprobe");
    let (ok, why) = probe.try_ip(&["link", "add", "Gprobe", "type", "vrf", "table", "4242"]);
    if !ok {
        eprintln!(
            "SKIPPED {test}: this kernel has no VRF support ({}); it runs in `cargo xtask test-kernel`",
            why.trim()
        );
        return None;
    }
    Some(Host::new(tag, json!({"routing_domain": "vrf"}), plugins))
}

/// An IPAM block with one pool per family.
pub fn pools(v6: &str, v4: &str) -> Value {
    json!({"type": "galactic-ipam", "ipv6_subnet": v6, "ipv4_subnet": v4})
}

/// The VPC's routing domain record.
pub fn domain(host: &Host, vpc: &str) -> Option<Value> {
    let hex = VpcId::parse(vpc).unwrap().hex();
    std::fs::read(host.path("state").join(format!("routing/vpc-{hex}.json")))
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap())
}

/// `ip -d link show NAME` as JSON, if the link exists.
pub fn link(host: &Host, name: &str) -> Option<Value> {
    if !host.netns.try_ip(&["link", "show", name]).0 {
        return None;
    }
    Some(host.netns.ip_json(&["-d", "link", "show", name])[0].clone())
}

/// Both families' routes of `table`, one per line.
pub fn table_routes(host: &Host, table: &str) -> Vec<String> {
    ["-4", "-6"]
        .iter()
        .flat_map(|f| {
            host.netns
                .ip(&[f, "route", "show", "table", table])
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// How many attachment records the master holds.
pub fn record_count(host: &Host) -> usize {
    state_entries(&host.path("state").join("attachments")).len()
}

/// IPAM's own CHECK for the attachment, given the master's stanza as the master delegates it:
/// succeeds only while it holds an allocation.
pub fn ipam_holds(host: &Host, att: &Attachment, list: &Conflist, result: &Value) -> bool {
    let ipam = host.bin_dir.join("galactic-ipam");
    host.runtime()
        .binary("galactic-cni", &ipam)
        .plugin(list, 0, "CHECK", att, Some(result))
        .success
}

/// Everything on the host that mentions `ifname`: the link, rules, firewall rules (what a
/// removed attachment must not leave).
pub fn host_traces(host: &Host, ifname: &str) -> Vec<String> {
    let mut traces = Vec::new();
    if host.netns.try_ip(&["link", "show", ifname]).0 {
        traces.push(format!("link {ifname}"));
    }
    for family in ["-4", "-6"] {
        let rules = host.netns.ip(&[family, "rule", "show"]);
        traces.extend(
            rules
                .lines()
                .filter(|l| l.contains(ifname))
                .map(|l| format!("rule {l}")),
        );
    }
    let nft = host.netns.exec(&["nft", "list", "ruleset"]);
    let ruleset = String::from_utf8_lossy(&nft.stdout).into_owned();
    traces.extend(
        ruleset
            .lines()
            .filter(|l| l.contains(ifname))
            .map(|l| format!("nft {}", l.trim())),
    );
    traces
}

/// The names in state directory `dir` (none when it is missing), sorted, with what its staging
/// directory holds as `.staging/<name>`: the empty staging directory an atomic write leaves
/// is no state (`galactic_core::state`), a temporary in it is.
pub fn state_entries(dir: &std::path::Path) -> Vec<String> {
    let names = |d: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let staging = galactic_core::state::STAGING;
    let mut out: Vec<String> = names(dir).into_iter().filter(|n| n != staging).collect();
    out.extend(
        names(&dir.join(staging))
            .into_iter()
            .map(|n| format!("{staging}/{n}")),
    );
    out.sort();
    out
}
