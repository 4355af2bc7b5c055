//! Reliability campaigns over the full chain (veth master with delegated IPAM →
//! galactic-route → galactic-bgp, local publisher), run as a runtime runs it: the crash
//! campaign ([`crash`]: SIGKILLs and failpoints, invariants after every recovery) and the soak
//! ([`soak`]: parallel runtimes, latency and failures by code).
//!
//! Both run on a [`Lab`]: the test kit's throwaway [`Host`] (a host namespace, a test node with
//! the local publisher and the `auto` routing domain, a bin dir with the chain's plugins), which
//! the calling thread enters so that every plugin it (or a thread it spawns) starts is born in
//! the host namespace. Pods are [`galactic_testkit::privileged::TestNetns`] namespaces. Debug builds are used: failpoints exist
//! only there.

pub mod crash;
pub mod soak;

use galactic_testkit::harness::{io, json, require_root, Entered, Result};
use galactic_testkit::host::Host;
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The chain's plugins, in ADD order.
pub const CHAIN: [&str; 3] = ["galactic-cni", "galactic-route", "galactic-bgp"];
/// What the lab's bin dir holds: the chain and the master's IPAM delegate.
pub const PLUGINS: [&str; 4] = [
    "galactic-cni",
    "galactic-ipam",
    "galactic-route",
    "galactic-bgp",
];
/// The network name of every attachment.
pub const NETWORK: &str = "reliability";
/// The chain's `cniVersion` (1.1.0: GC is part of every campaign).
pub const VERSION: &str = "1.1.0";

/// A throwaway node the calling thread has entered. Create and use it on one thread.
pub struct Lab {
    // Declared first: the thread leaves the namespace before the host (and it) is deleted.
    _entered: Entered,
    /// The host namespace, node and bin dir.
    pub host: Host,
}

impl Lab {
    /// A lab on the workspace's debug plugins next to the running test (built on first use).
    pub fn for_tests(tag: &str) -> Result<Self> {
        require_root()?;
        Self::enter(Host::new(tag, node_extra(), &PLUGINS))
    }

    /// A lab on the plugins in `built` (e.g. xtask's `cargo build` output).
    pub fn with_plugins_from(tag: &str, built: &Path) -> Result<Self> {
        require_root()?;
        Self::enter(Host::with_plugins_from(tag, node_extra(), built, &PLUGINS)?)
    }

    fn enter(host: Host) -> Result<Self> {
        Ok(Self {
            _entered: Entered::new(&host.netns)?,
            host,
        })
    }

    /// The IPAM store directory.
    pub fn ipam_dir(&self) -> PathBuf {
        self.host.path("ipam")
    }

    /// The node state directory (the test node's `state_dir`).
    pub fn state_dir(&self) -> PathBuf {
        self.host.path("state")
    }

    /// A plugin binary of the bin dir.
    pub fn binary(&self, plugin: &str) -> PathBuf {
        self.host.bin_dir.join(plugin)
    }

    /// The stanza of `plugin` for an attachment of VPC `vpc`, VPC attachment `att`.
    pub fn stanza(&self, plugin: &str, vpc: &str, att: &str) -> Value {
        match plugin {
            // One pool pair per VPC: table-mode domains need node-unique gateways per VPC.
            "galactic-cni" => json!({"type": plugin, "vpc": vpc, "vpcattachment": att,
                "ipam": {"type": "galactic-ipam", "ipv6_subnet": format!("fd90:{vpc}::/64"),
                         "ipv4_subnet": format!("10.9{vpc}.0.0/16")}}),
            "galactic-route" => {
                // Distinct networks per attachment: a network terminated twice in one VPC is a
                // conflict galactic-route refuses by design.
                let n = u32::from_str_radix(att, 16).unwrap_or(0) % 250;
                json!({"type": plugin, "vpc": vpc, "vpcattachment": att,
                    "terminations": [{"network": format!("fd91:{n:x}::/64")},
                                     {"network": format!("10.91.{n}.0/24")}]})
            }
            _ => json!({"type": plugin, "vpc": vpc, "vpcattachment": att}),
        }
    }

    /// The chain for one attachment, as the runtime holds it.
    pub fn conflist(&self, vpc: &str, att: &str) -> Conflist {
        Conflist::new(
            VERSION,
            NETWORK,
            CHAIN.iter().map(|p| self.stanza(p, vpc, att)).collect(),
        )
    }

    /// The test kit's runtime on this node, starting plugins in the entered host namespace.
    pub fn runtime(&self) -> Runtime<'_> {
        Runtime::new(&self.host.node, &self.host.bin_dir, None)
    }

    /// GC of every plugin of the chain with `valid` as the live attachments, from a runtime
    /// that has no cached result (as after a restart): no DEL runs first, every leftover is the
    /// plugins' own GC's to find.
    pub fn gc(&self, valid: &[String]) -> Result<()> {
        let valid: Vec<Attachment> = valid
            .iter()
            .map(|cid| Attachment::new(cid, "", "eth0"))
            .collect();
        let valid: Vec<&Attachment> = valid.iter().collect();
        Ok(self.runtime().gc(&self.conflist("1", "1"), &valid)?)
    }

    /// `galactic-ipam verify`: (attachments, leases, problems); an error when the store does
    /// not open as it is.
    pub fn verify(&self) -> Result<(u64, u64, Vec<String>)> {
        if !self.ipam_dir().exists() {
            return Ok((0, 0, Vec::new()));
        }
        let out = Command::new(self.binary("galactic-ipam"))
            .args(["verify", "--data-dir"])
            .arg(self.ipam_dir())
            .output()
            .map_err(io("run galactic-ipam verify"))?;
        let report: Value = serde_json::from_slice(&out.stdout).map_err(json(format!(
            "galactic-ipam verify did not report (store does not open as it is): {}",
            String::from_utf8_lossy(&out.stderr)
        )))?;
        let problems = report["problems"]
            .as_array()
            .map(|p| p.iter().map(|v| v.to_string()).collect())
            .unwrap_or_default();
        Ok((
            report["attachments"].as_u64().unwrap_or(0),
            report["leases"].as_u64().unwrap_or(0),
            problems,
        ))
    }

    /// What the plugins' state says about containers that are not in `live`: master records,
    /// route record entries and advertisement records (each names its container), one line per
    /// item. Empty when every plugin's state lives exactly as long as its attachment.
    pub fn state_of_others(&self, live: &BTreeSet<String>) -> Vec<String> {
        let mut out = Vec::new();
        let state = self.state_dir();
        for (path, doc) in json_docs(&state.join("attachments")) {
            let cid = doc["containerId"].as_str().unwrap_or_default();
            if !live.contains(cid) {
                out.push(format!("attachment record {path} of {cid}"));
            }
        }
        for (path, doc) in json_docs(&state.join("routes")) {
            for entry in doc["routes"].as_array().into_iter().flatten() {
                let cid = entry["containerId"].as_str().unwrap_or_default();
                if !live.contains(cid) {
                    out.push(format!("route entry {} in {path} of {cid}", entry["dst"]));
                }
            }
        }
        let short: BTreeSet<String> = live.iter().map(|c| c.chars().take(41).collect()).collect();
        let namespaces = std::fs::read_dir(state.join("bgp"))
            .into_iter()
            .flatten()
            .flatten();
        let ads = namespaces.flat_map(|ns| json_docs(&ns.path().join("bgpadvertisements")));
        for (path, doc) in ads {
            let annotations = doc["metadata"]["annotations"].as_object();
            for key in annotations.into_iter().flat_map(|a| a.keys()) {
                // Under either netns key (decision 0016).
                let cid = key
                    .strip_prefix("galactic.datum.net/netns.")
                    .or_else(|| key.strip_prefix("galactic.datum.net/netns-path."));
                if let Some(cid) = cid {
                    if !short.contains(cid) {
                        out.push(format!("advertisement {path} records {cid}"));
                    }
                }
            }
        }
        out
    }

    /// The host's interfaces but `lo`, by name.
    pub fn host_links(&self) -> BTreeSet<String> {
        let links = self.host.netns.ip_json(&["link", "show"]);
        links
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|l| l["ifname"].as_str().map(str::to_owned))
                    .filter(|n| n != "lo")
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Everything on the node a leak could hide in, one line per item: the host's links, rules,
    /// routes of every table and nft ruleset, and the state files.
    pub fn snapshot(&self) -> BTreeSet<String> {
        let mut lines = BTreeSet::new();
        for argv in [
            &["link", "show"][..],
            &["-4", "rule", "show"],
            &["-6", "rule", "show"],
            &["-4", "route", "show", "table", "all"],
            &["-6", "route", "show", "table", "all"],
        ] {
            let items = self.host.netns.ip_json(argv);
            for item in items.as_array().into_iter().flatten() {
                lines.insert(format!("ip {}: {}", argv.join(" "), stable(item)));
            }
        }
        let nft = self.host.netns.exec(&["nft", "list", "ruleset"]);
        for line in String::from_utf8_lossy(&nft.stdout).lines() {
            lines.insert(format!("nft: {}", line.trim()));
        }
        list_files(&self.state_dir(), &self.state_dir(), &mut lines);
        lines
    }
}

/// The node config of a lab (over the test node's defaults: local publisher, temporary state).
fn node_extra() -> Value {
    json!({"log_level": "info", "routing_domain": "auto"})
}

/// The `*.json` documents of `dir` (none when it does not exist), by file name.
fn json_docs(dir: &Path) -> Vec<(String, Value)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| {
            let doc = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), doc))
        })
        .collect()
}

/// An item of `ip -j` output without the fields that change on their own (counters, ifindex).
fn stable(item: &Value) -> String {
    let mut item = item.clone();
    if let Some(map) = item.as_object_mut() {
        for key in [
            "ifindex",
            "link_index",
            "stats64",
            "txqlen",
            "operstate",
            "expires",
        ] {
            map.remove(key);
        }
    }
    item.to_string()
}

/// Files under `dir`, relative to `root`, except the IPAM store (checked by `verify`) and lock
/// files (a fixed set per node and VPC, created once, owned by nobody by design). Published
/// documents (advertisements, VRF instances, EndpointSlices) are included: the last DEL of what
/// uses them removes them.
fn list_files(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        if rel.starts_with("ipam") || rel.ends_with("lock") || rel.starts_with("locks") {
            continue;
        }
        if path.is_dir() {
            list_files(root, &path, out);
        } else {
            out.insert(format!("state file: {rel}"));
        }
    }
}
