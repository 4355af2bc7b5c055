//! Reliability campaigns over the full chain (veth master with delegated IPAM →
//! galactic-route → galactic-bgp), run as a runtime runs it: the crash campaign ([`crash`]:
//! SIGKILLs and failpoints, invariants after every recovery, over either publisher) and the
//! soak ([`soak`]: parallel runtimes, latency and failures by code, local publisher).
//!
//! Both run on a [`Lab`]: the test kit's throwaway [`Host`] (a host namespace, a test node with
//! the `auto` routing domain and the local publisher, or the `table` domain and the Kubernetes
//! publisher against the test kit's loopback API server, a bin dir with the chain's plugins),
//! which the calling thread enters so that every plugin it (or a thread it spawns) starts is
//! born in the host namespace. Pods are [`galactic_testkit::privileged::TestNetns`] namespaces.
//! Debug builds are used: failpoints exist only there.

pub mod crash;
pub mod soak;

use galactic_testkit::apiserver::ApiServer;
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

/// Where galactic-bgp publishes: JSON files under `<state_dir>/bgp/`, or the test kit's HTTPS
/// loopback API server (the Kubernetes client, TLS, retries and uid-guarded writes included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publisher {
    /// `publisher: local`.
    Local,
    /// `publisher: kubernetes`, against [`galactic_testkit::apiserver::ApiServer`].
    Kubernetes,
}

impl Publisher {
    /// The node config's word for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Kubernetes => "kubernetes",
        }
    }
}

/// The node name every lab publishes under (VRF instance `<vpc>-node-a`, advertisement
/// `<vpc>-<att>-node-a`).
pub const NODE_NAME: &str = "node-a";
/// The namespace of the BGP documents.
pub const NAMESPACE: &str = "galactic-system";
/// The pods' namespace (`K8S_POD_NAMESPACE`): their EndpointSlices live there.
pub const POD_NAMESPACE: &str = "pods";

/// A throwaway node the calling thread has entered. Create and use it on one thread.
pub struct Lab {
    // Declared first: the thread leaves the namespace before the host (and it) is deleted.
    _entered: Entered,
    /// The host namespace, node and bin dir.
    pub host: Host,
    /// Where galactic-bgp publishes.
    pub publisher: Publisher,
    /// The API server of the Kubernetes publisher.
    pub api: Option<ApiServer>,
}

impl Lab {
    /// A lab on the workspace's debug plugins next to the running test (built on first use).
    pub fn for_tests(tag: &str) -> Result<Self> {
        Self::for_tests_publishing(tag, Publisher::Local)
    }

    /// [`Lab::for_tests`] with `publisher`.
    pub fn for_tests_publishing(tag: &str, publisher: Publisher) -> Result<Self> {
        require_root()?;
        Self::enter(Host::new(tag, node_extra(publisher), &PLUGINS), publisher)
    }

    /// A lab on the plugins in `built` (e.g. xtask's `cargo build` output).
    pub fn with_plugins_from(tag: &str, built: &Path) -> Result<Self> {
        Self::publishing_with_plugins_from(tag, built, Publisher::Local)
    }

    /// [`Lab::with_plugins_from`] with `publisher`.
    pub fn publishing_with_plugins_from(
        tag: &str,
        built: &Path,
        publisher: Publisher,
    ) -> Result<Self> {
        require_root()?;
        let host = Host::with_plugins_from(tag, node_extra(publisher), built, &PLUGINS)?;
        Self::enter(host, publisher)
    }

    fn enter(host: Host, publisher: Publisher) -> Result<Self> {
        let api = (publisher == Publisher::Kubernetes).then(|| seeded_apiserver(&host));
        Ok(Self {
            _entered: Entered::new(&host.netns)?,
            host,
            publisher,
            api,
        })
    }

    /// `CNI_ARGS` of container `cid`, as kubelet passes them: its pod is named after it, so
    /// galactic-bgp publishes its EndpointSlice (with either publisher).
    pub fn cni_args(&self, cid: &str) -> String {
        format!("IgnoreUnknown=1;K8S_POD_NAMESPACE={POD_NAMESPACE};K8S_POD_NAME={cid}")
    }

    /// Registers pod `cid` with the API server (the Kubernetes publisher requires the Pod its
    /// EndpointSlice is owned by); nothing to do locally.
    pub fn create_pod(&self, cid: &str) {
        if let Some(api) = &self.api {
            api.fixture()
                .insert(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": cid, "namespace": POD_NAMESPACE}}));
        }
    }

    /// Every published document of `plural` (`bgpvrfinstances`, `bgpadvertisements`,
    /// `endpointslices`) in any namespace, by `namespace/name`, from wherever this lab's
    /// publisher writes (with its file for the local publisher).
    pub fn documents(&self, plural: &str) -> Vec<crash::invariant::Document> {
        match &self.api {
            Some(api) => api
                .fixture()
                .list(plural, None)
                .into_iter()
                .map(|doc| {
                    let meta = &doc["metadata"];
                    let ns = meta["namespace"].as_str().unwrap_or_default();
                    let name = meta["name"].as_str().unwrap_or_default();
                    (format!("{ns}/{name}"), doc.clone(), None)
                })
                .collect(),
            None => {
                let namespaces = std::fs::read_dir(self.state_dir().join("bgp"));
                let namespaces = namespaces.into_iter().flatten().flatten();
                namespaces
                    .flat_map(|ns| {
                        let docs = json_docs(&ns.path().join(plural));
                        let ns = ns.file_name().to_string_lossy().into_owned();
                        docs.into_iter().map(move |(path, doc)| {
                            let file = path.file_name().unwrap_or_default().to_string_lossy();
                            let name = file.trim_end_matches(".json").to_owned();
                            (format!("{ns}/{name}"), doc, Some(path))
                        })
                    })
                    .collect()
            }
        }
    }

    /// Deletes a published document, as the cluster's own GC (galactic-router's) reclaims what
    /// a crash left with the Kubernetes publisher (`docs/kubernetes.md`, GC); `key` is
    /// `namespace/name`.
    pub fn reclaim_document(&self, plural: &str, key: &str) {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        match &self.api {
            Some(api) => {
                api.fixture().remove(plural, Some(ns), name);
            }
            None => {
                let path = self.state_dir().join("bgp").join(ns).join(plural);
                let _ = std::fs::remove_file(path.join(format!("{name}.json")));
            }
        }
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

/// The node config of a lab (over the test node's defaults: temporary state). With the
/// Kubernetes publisher `auto` refuses a kernel without VRF, so that lab names the `table`
/// backend (a tier that forces a backend still overrides `auto` only).
fn node_extra(publisher: Publisher) -> Value {
    let domain = match publisher {
        Publisher::Local => "auto",
        Publisher::Kubernetes => "table",
    };
    json!({"log_level": "info", "routing_domain": domain, "publisher": publisher.name(),
           "node_name": NODE_NAME, "namespace": NAMESPACE})
}

/// The loopback API server in `host`'s namespace, the node's kubeconfig pointing at it, seeded
/// with what a cluster has before the first pod: this node's BGPRouter (no SRv6 settings, as
/// the local lab's: nothing is registered in an eBPF datapath) and the network's NAD, whose
/// chain the masters verify.
fn seeded_apiserver(host: &Host) -> ApiServer {
    let server = host.start_apiserver();
    let f = server.fixture();
    f.insert(
        json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "router-a", "namespace": NAMESPACE},
        "spec": {"targetRef": {"kind": "Node", "name": NODE_NAME}, "localASN": 65000,
                 "routerID": "10.0.2.1", "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}]}}),
    );
    let types: Vec<Value> = CHAIN.iter().map(|p| json!({"type": p})).collect();
    let config = json!({"cniVersion": VERSION, "name": NETWORK, "plugins": types});
    f.insert(
        json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": NETWORK, "namespace": POD_NAMESPACE},
        "spec": {"config": config.to_string()}}),
    );
    server
}

/// The `*.json` documents of `dir` (none when it does not exist), by path.
fn json_docs(dir: &Path) -> Vec<(PathBuf, Value)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| {
            let doc = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            Some((e.path(), doc))
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
