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
//! The node's BGPRouter has an SRv6 locator and the node config names a pin directory on a
//! private bpffs with the datapath's maps pinned (as `cargo xtask bpf-pin-maps` pins them on a
//! node), so galactic-bgp registers every attachment in the eBPF maps.
//! Debug builds are used: failpoints exist only there.

pub mod crash;
pub mod soak;

use galactic_core::bpf::abi::bytes_of;
use galactic_core::bpf::maps;
use galactic_core::bpf::registry::{self, AttachmentRecord};
use galactic_testkit::apiserver::ApiServer;
use galactic_testkit::bpffs::PrivateBpffs;
use galactic_testkit::harness::{io, json, require_root, Entered, Error, Result};
use galactic_testkit::host::Host;
use galactic_testkit::repair::EgressKey;
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
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
/// The node's SRv6 locator (uSID Block) and Node-ID, on its BGPRouter with either publisher.
const SRV6_LOCATOR: &str = "2001:db8:ff03::/48";
const SRV6_NODE_ID: u32 = 1;

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
    /// The private bpffs whose pin directory holds the datapath's maps (unmounted last).
    pub bpffs: PrivateBpffs,
}

impl Lab {
    /// A lab on the workspace's debug plugins next to the running test (built on first use).
    pub fn for_tests(tag: &str) -> Result<Self> {
        Self::for_tests_publishing(tag, Publisher::Local)
    }

    /// [`Lab::for_tests`] with `publisher`.
    pub fn for_tests_publishing(tag: &str, publisher: Publisher) -> Result<Self> {
        require_root()?;
        let bpffs = pinned_bpffs()?;
        let host = Host::new(tag, node_extra(publisher, &bpffs), &PLUGINS);
        Self::enter(host, publisher, bpffs)
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
        let bpffs = pinned_bpffs()?;
        let extra = node_extra(publisher, &bpffs);
        let host = Host::with_plugins_from(tag, extra, built, &PLUGINS)?;
        Self::enter(host, publisher, bpffs)
    }

    fn enter(host: Host, publisher: Publisher, bpffs: PrivateBpffs) -> Result<Self> {
        let api = match publisher {
            Publisher::Kubernetes => Some(seeded_apiserver(&host)),
            Publisher::Local => {
                store_local_router(&host)?;
                None
            }
        };
        Ok(Self {
            _entered: Entered::new(&host.netns)?,
            host,
            publisher,
            api,
            bpffs,
        })
    }

    /// Every eBPF registration record under `<state_dir>/bpf/attachments/`.
    pub fn bpf_records(&self) -> Result<Vec<AttachmentRecord>> {
        registry::all_records(&self.state_dir()).map_err(bpf("read the registration records"))
    }

    /// The keys (ifindexes) of every `ifindex_vrf_table` row.
    pub fn ifindex_rows(&self) -> Result<BTreeSet<u32>> {
        let what = "read ifindex_vrf_table";
        let map: maps::IfindexVrfTable =
            maps::open_typed(&self.bpffs.pin_dir(), maps::IFINDEX_VRF_TABLE).map_err(bpf(what))?;
        let keys = map.keys().collect::<std::result::Result<_, _>>();
        keys.map_err(|e| Error::Precondition(format!("{what}: {e}")))
    }

    /// Every `egress_route_table` entry, key → value bytes.
    pub fn egress_rows(&self) -> Result<BTreeMap<EgressKey, Vec<u8>>> {
        let what = "read egress_route_table";
        let map: maps::EgressRouteTable =
            maps::open_typed(&self.bpffs.pin_dir(), maps::EGRESS_ROUTE_TABLE).map_err(bpf(what))?;
        let mut rows = BTreeMap::new();
        for entry in map.iter() {
            let (k, v) = entry.map_err(|e| Error::Precondition(format!("{what}: {e}")))?;
            let d = k.data();
            let key = (k.prefix_len(), d.table_id, d.family, d.addr_be);
            rows.insert(key, bytes_of(&v).to_vec());
        }
        Ok(rows)
    }

    /// The host's interfaces by name, with their ifindex.
    pub fn host_ifindexes(&self) -> BTreeMap<String, u32> {
        let links = self.host.netns.ip_json(&["link", "show"]);
        let links = links.as_array().into_iter().flatten();
        links
            .filter_map(|l| {
                let index = u32::try_from(l["ifindex"].as_u64()?).ok()?;
                Some((l["ifname"].as_str()?.to_owned(), index))
            })
            .collect()
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
    /// routes of every table and nft ruleset, the state files and the pinned maps'
    /// per-attachment rows.
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
        lines.extend(self.bpf_snapshot());
        lines
    }

    /// The pinned maps' per-attachment rows (`ifindex_vrf_table`, `egress_route_table`); a map
    /// that cannot be read is a line of its own, so that it differs from the baseline. A VPC's
    /// `vrf_table` row outlives its attachments by design (the datapath's GC removes it,
    /// `docs/ebpf.md`), and its VRF id may change when the VPC comes back: not compared.
    fn bpf_snapshot(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match self.ifindex_rows() {
            Ok(rows) => lines.extend(rows.iter().map(|i| format!("bpf ifindex_vrf_table: {i}"))),
            Err(e) => lines.push(format!("bpf: {e}")),
        }
        match self.egress_rows() {
            Ok(rows) => lines.extend(rows.iter().map(|((len, table, family, addr), value)| {
                let (addr, value) = (hex(addr), hex(value));
                format!("bpf egress_route_table: {table} {family} {addr}/{len} = {value}")
            })),
            Err(e) => lines.push(format!("bpf: {e}")),
        }
        lines
    }
}

/// `bytes` in hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A registry error as the harness's.
fn bpf(what: &'static str) -> impl FnOnce(galactic_core::bpf::BpfError) -> Error {
    move |e| Error::Precondition(format!("{what}: {e}"))
}

/// A private bpffs with every map of upstream's newest datapath pinned empty in its pin
/// directory: those `cargo xtask bpf-pin-maps` pins on a node before its plugins run, and the
/// three only the newest datapath pins ([`maps::NEWEST_MAP_DEFS`]), whose rows the plugins
/// write only while they are pinned.
fn pinned_bpffs() -> Result<PrivateBpffs> {
    let bpffs = PrivateBpffs::mount();
    maps::pin_empty_maps(&bpffs.pin_dir()).map_err(bpf("pin the datapath's maps"))?;
    maps::pin_maps(&bpffs.pin_dir(), &maps::NEWEST_MAP_DEFS)
        .map_err(bpf("pin the newest datapath's maps"))?;
    Ok(bpffs)
}

/// The node config of a lab (over the test node's defaults: temporary state). With the
/// Kubernetes publisher `auto` refuses a kernel without VRF, so that lab names the `table`
/// backend (a tier that forces a backend still overrides `auto` only). `bpf_pin_dir` is the
/// private bpffs's.
fn node_extra(publisher: Publisher, bpffs: &PrivateBpffs) -> Value {
    let domain = match publisher {
        Publisher::Local => "auto",
        Publisher::Kubernetes => "table",
    };
    json!({"log_level": "info", "routing_domain": domain, "publisher": publisher.name(),
           "node_name": NODE_NAME, "namespace": NAMESPACE, "bpf_pin_dir": bpffs.pin_dir()})
}

/// This node's BGPRouter, with the SRv6 settings that make galactic-bgp register every
/// attachment in the datapath.
fn router() -> Value {
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "router-a", "namespace": NAMESPACE},
        "spec": {"targetRef": {"kind": "Node", "name": NODE_NAME}, "localASN": 65000,
                 "routerID": "10.0.2.1", "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}],
                 "srv6Locator": SRV6_LOCATOR, "nodeID": SRV6_NODE_ID}})
}

/// The BGPRouter in the local publisher's store, where a node's router is found without a
/// cluster.
fn store_local_router(host: &Host) -> Result<()> {
    let dir = host
        .path("state")
        .join("bgp")
        .join(NAMESPACE)
        .join("bgprouters");
    std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    let path = dir.join("router-a.json");
    std::fs::write(&path, router().to_string()).map_err(io(format!("write {}", path.display())))
}

/// The loopback API server in `host`'s namespace, the node's kubeconfig pointing at it, seeded
/// with what a cluster has before the first pod: this node's BGPRouter (with its SRv6 settings)
/// and the network's NAD, whose chain the masters verify.
fn seeded_apiserver(host: &Host) -> ApiServer {
    let server = host.start_apiserver();
    let f = server.fixture();
    f.insert(router());
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
pub(crate) fn json_docs(dir: &Path) -> Vec<(PathBuf, Value)> {
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
