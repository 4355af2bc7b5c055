//! The campaign's invariant: every kind of state a plugin of the chain records or publishes
//! lives exactly as long as its attachment. Each check below names one kind and says when its
//! state counts as a leftover; [`Leftovers`] counts each leftover once, however many checks in
//! a row still find it.
//!
//! The checks read the node as it is (files, documents, `ip -j` and `nft` output), never a
//! plugin's own account of it, and judge it against the campaign's attachments: the live ones
//! and the gone ones (ever attached in this campaign, not live now).

use crate::campaign::{json_docs, NODE_NAME};
use galactic_core::bpf::abi::FAMILY_IPV4;
use galactic_core::bpf::registry::AttachmentRecord;
use galactic_core::ident::{bgp_advertisement_name, bgp_vrf_instance_name, VpcId};
use galactic_testkit::repair::{egress_key, EgressKey};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// A kind of state that can outlive its attachment; one report line each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Master attachment records (`attachments/*.json`) of a container that is not live.
    MasterRecords,
    /// Routing-domain records (`routing/vpc-<hex>.json`) of a VPC without a live attachment,
    /// right after a GC: the DEL of a VPC's last attachment removes its domain, but a DEL the
    /// campaign kills leaves it to the DEL's retry or to GC, so between GCs such a record is not
    /// a leftover.
    DomainRecords,
    /// galactic-route ledger entries (`routes/vpc-<hex>.json`) of a container that is not live.
    RouteEntries,
    /// IPAM allocations of a container that is not live.
    IpamAllocations,
    /// Addresses held twice (by the store's own verification or by two live results).
    IpamDuplicates,
    /// BGPVRFInstance documents of a VPC with no live attachment on the node: DEL of the VPC's
    /// last attachment retracts it, without waiting for GC.
    VrfInstances,
    /// BGPAdvertisement documents of an attachment that is not live, and records (netns
    /// annotations) on any advertisement of a container that is not live.
    Advertisements,
    /// EndpointSlice documents of a pod that is not live.
    EndpointSlices,
    /// Temporaries of killed writers: any `*.tmp.*` file and any `.galactic-tmp/` entry under
    /// the node's state, IPAM, tap RA and Kata DAN directories. The campaign checks only while no
    /// plugin runs, so every one it sees is a leftover.
    Temporaries,
    /// eBPF registration records (`bpf/attachments/<host ifname>.json`) of a host interface of
    /// no live attachment: DEL and GC remove an attachment's rows by its record.
    BpfRecords,
    /// `ifindex_vrf_table` rows keyed by an ifindex that is no live attachment's host interface
    /// (only the campaign's attachments register interfaces on the lab's node).
    IfindexRows,
    /// Pass-through `egress_route_table` entries (all-zero value) that no live attachment's
    /// registration record lists: a gateway shared by a VPC's attachments stays while one of
    /// them is registered.
    EgressRows,
    /// Host interfaces (`G…H`) of no live attachment.
    HostInterfaces,
    /// Policy rules and nftables lines naming a host interface of no live attachment, and
    /// routes naming one that no longer exists (a leaked interface's routes are its own).
    KernelReferences,
    /// Any other file (name or content) under those directories naming a gone container or a
    /// gone host interface, whatever directory it is in (a plugin's own per-attachment records
    /// the checks above do not know), minus the shared files ([`SHARED`]).
    OtherFiles,
    /// At the end: what differs from the node after the warm-up (links, rules, routes of every
    /// table, nft ruleset, state files).
    Baseline,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 16] = [
        Kind::MasterRecords,
        Kind::DomainRecords,
        Kind::RouteEntries,
        Kind::IpamAllocations,
        Kind::IpamDuplicates,
        Kind::VrfInstances,
        Kind::Advertisements,
        Kind::EndpointSlices,
        Kind::Temporaries,
        Kind::BpfRecords,
        Kind::IfindexRows,
        Kind::EgressRows,
        Kind::HostInterfaces,
        Kind::KernelReferences,
        Kind::OtherFiles,
        Kind::Baseline,
    ];

    /// The report's name of the kind.
    pub fn label(self) -> &'static str {
        match self {
            Kind::MasterRecords => "master attachment records",
            Kind::DomainRecords => "routing-domain records after GC",
            Kind::RouteEntries => "galactic-route ledger entries",
            Kind::IpamAllocations => "IPAM allocations",
            Kind::IpamDuplicates => "IPAM duplicates",
            Kind::VrfInstances => "BGPVRFInstance documents",
            Kind::Advertisements => "BGPAdvertisement documents and records",
            Kind::EndpointSlices => "EndpointSlice documents",
            Kind::Temporaries => "temporaries (*.tmp.*, .galactic-tmp/)",
            Kind::BpfRecords => "eBPF registration records",
            Kind::IfindexRows => "ifindex_vrf_table rows of a gone interface",
            Kind::EgressRows => "pass-through egress entries no live record lists",
            Kind::HostInterfaces => "host interfaces",
            Kind::KernelReferences => "rules, routes, nft lines naming a gone interface",
            Kind::OtherFiles => "other files naming a gone attachment",
            Kind::Baseline => "differences from the baseline at the end",
        }
    }
}

/// Files and directories under the node's directories that are shared by every attachment by
/// design, never per-attachment state: the IPAM store (judged by `galactic-ipam verify` and
/// `list`), lock files, the local publisher's `lock` and `revision`, the routing backend probe.
pub const SHARED: [&str; 5] = ["ipam/", "locks/", "bgp/revision", "routing/backend", "lock"];

/// Whether `rel` (a path relative to the node's directory root it was found under) is shared.
fn is_shared(rel: &str) -> bool {
    SHARED.iter().any(|s| match s.strip_suffix('/') {
        Some(dir) => rel.starts_with(s) || rel.contains(&format!("/{dir}/")),
        None => rel == *s || rel.ends_with(&format!("/{s}")) || rel.ends_with(".lock"),
    })
}

/// One attachment of the campaign, by everything that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    /// `CNI_CONTAINERID` (also the pod's name).
    pub cid: String,
    /// The VPC id, as the stanza writes it.
    pub vpc: String,
    /// The VPC attachment id, as the stanza writes it.
    pub att: String,
    /// The host interface.
    pub ifname: String,
}

/// The campaign's attachments at one check.
#[derive(Debug, Default)]
pub struct Population {
    /// Attached now.
    pub live: Vec<Ident>,
    /// Attached earlier in this campaign and not live now.
    pub gone: Vec<Ident>,
}

impl Population {
    fn live_cids(&self) -> BTreeSet<&str> {
        self.live.iter().map(|i| i.cid.as_str()).collect()
    }

    fn live_ifnames(&self) -> BTreeSet<&str> {
        self.live.iter().map(|i| i.ifname.as_str()).collect()
    }

    /// The hex ids of the VPCs that have a live attachment.
    fn live_vpc_hex(&self) -> BTreeSet<String> {
        self.live
            .iter()
            .filter_map(|i| VpcId::parse(&i.vpc).ok().map(|v| v.hex()))
            .collect()
    }
}

/// One leftover a check found: its kind, what it is, and the file it is in (if it is a file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its kind.
    pub kind: Kind,
    /// What it is (stable across checks, so a leftover that stays is counted once).
    pub item: String,
    /// The file it is (or is in), so that [`Kind::OtherFiles`] does not count it again.
    pub file: Option<PathBuf>,
}

impl Found {
    /// A leftover of `kind`.
    pub fn new(kind: Kind, item: String, file: Option<PathBuf>) -> Self {
        Self { kind, item, file }
    }
}

/// The leftovers of a campaign by kind. A leftover is counted when it appears: one that stays
/// over many checks counts once, one that goes (a later GC, a new ADD reusing it) and comes
/// back counts again.
#[derive(Debug, Default)]
pub struct Leftovers {
    /// Per kind, per item: the check that first found it and how many times it appeared.
    seen: BTreeMap<Kind, BTreeMap<String, (String, usize)>>,
    /// What the last check found.
    present: BTreeSet<(Kind, String)>,
}

impl Leftovers {
    /// Takes in everything one check (`when`) found.
    pub fn observe(&mut self, when: &str, found: Vec<Found>) {
        let now: BTreeSet<(Kind, String)> = found.into_iter().map(|f| (f.kind, f.item)).collect();
        for (kind, item) in now.difference(&self.present) {
            let entry = self.seen.entry(*kind).or_default();
            let (_, times) = entry
                .entry(item.clone())
                .or_insert_with(|| (when.to_owned(), 0));
            *times += 1;
        }
        self.present = now;
    }

    /// How many times leftovers of `kind` appeared.
    pub fn count(&self, kind: Kind) -> usize {
        let items = self.seen.get(&kind).into_iter().flat_map(BTreeMap::values);
        items.map(|(_, times)| times).sum()
    }

    /// How many times any leftover appeared.
    pub fn total(&self) -> usize {
        Kind::ALL.iter().map(|k| self.count(*k)).sum()
    }

    /// Every leftover of `kind` as `item (first seen when[, N times])`.
    pub fn items(&self, kind: Kind) -> Vec<String> {
        let items = self.seen.get(&kind).into_iter().flatten();
        items
            .map(|(item, (when, times))| match times {
                1 => format!("{item} ({when})"),
                n => format!("{item} ({when}; {n} times)"),
            })
            .collect()
    }
}

/// Master records of containers that are not live.
pub fn master_records(state_dir: &Path, pop: &Population) -> Vec<Found> {
    let live = pop.live_cids();
    let records = json_docs(&state_dir.join("attachments"));
    records
        .into_iter()
        .filter_map(|(path, doc)| {
            let cid = doc["containerId"].as_str().unwrap_or_default();
            (!live.contains(cid)).then(|| {
                let item = format!("{} of {cid}", path.display());
                Found::new(Kind::MasterRecords, item, Some(path.clone()))
            })
        })
        .collect()
}

/// Routing-domain records of VPCs without a live attachment (call right after a GC only).
pub fn domain_records(state_dir: &Path, pop: &Population) -> Vec<Found> {
    let live = pop.live_vpc_hex();
    let records = json_docs(&state_dir.join("routing"));
    records
        .into_iter()
        .filter_map(|(path, _)| {
            let name = path.file_name()?.to_string_lossy().into_owned();
            let hex = name.strip_prefix("vpc-")?.strip_suffix(".json")?.to_owned();
            let item = format!("{} (VPC {hex} has no attachment)", path.display());
            (!live.contains(&hex)).then(|| Found::new(Kind::DomainRecords, item, Some(path)))
        })
        .collect()
}

/// galactic-route ledger entries of containers that are not live.
pub fn route_entries(state_dir: &Path, pop: &Population) -> Vec<Found> {
    let live = pop.live_cids();
    let mut out = Vec::new();
    for (path, doc) in json_docs(&state_dir.join("routes")) {
        for entry in doc["routes"].as_array().into_iter().flatten() {
            let cid = entry["containerId"].as_str().unwrap_or_default();
            if !live.contains(cid) {
                let item = format!("{} in {} of {cid}", entry["dst"], path.display());
                out.push(Found::new(Kind::RouteEntries, item, Some(path.clone())));
            }
        }
    }
    out
}

/// IPAM allocations (`galactic-ipam list` lines, `<cid>/<ifname>/<network>: …`) of containers
/// that are not live.
pub fn ipam_allocations(holdings: &[String], pop: &Population) -> Vec<Found> {
    let live = pop.live_cids();
    holdings
        .iter()
        .filter(|h| !live.contains(h.split('/').next().unwrap_or_default()))
        .map(|h| Found::new(Kind::IpamAllocations, h.clone(), None))
        .collect()
}

/// A published document: `namespace/name`, the document, and its file (local publisher).
pub type Document = (String, Value, Option<PathBuf>);

/// VRF instances of VPCs without a live attachment on this node.
pub fn vrf_instances(docs: &[Document], pop: &Population) -> Vec<Found> {
    let expected: BTreeSet<String> = pop
        .live
        .iter()
        .map(|i| bgp_vrf_instance_name(&i.vpc, NODE_NAME))
        .collect();
    unexpected(docs, &expected, Kind::VrfInstances)
}

/// EndpointSlices of pods that are not live (each pod is named after its container).
pub fn endpoint_slices(docs: &[Document], pop: &Population) -> Vec<Found> {
    let expected: BTreeSet<String> = pop.live.iter().map(|i| i.cid.clone()).collect();
    unexpected(docs, &expected, Kind::EndpointSlices)
}

/// Advertisements of attachments that are not live, and records of containers that are not
/// live on the others.
pub fn advertisements(docs: &[Document], pop: &Population) -> Vec<Found> {
    let expected: BTreeSet<String> = pop
        .live
        .iter()
        .map(|i| bgp_advertisement_name(&i.vpc, &i.att, NODE_NAME))
        .collect();
    let mut out = unexpected(docs, &expected, Kind::Advertisements);
    // The record keys hold the container id cut to 41 characters (decision 0016).
    let live: BTreeSet<String> = pop.live.iter().map(|i| short_cid(&i.cid)).collect();
    for (key, doc, file) in docs {
        let annotations = doc["metadata"]["annotations"].as_object();
        for name in annotations.into_iter().flat_map(|a| a.keys()) {
            let cid = name
                .strip_prefix("galactic.datum.net/netns.")
                .or_else(|| name.strip_prefix("galactic.datum.net/netns-path."));
            if let Some(cid) = cid.filter(|c| !live.contains(*c)) {
                let item = format!("advertisement {key} records {cid}");
                out.push(Found::new(Kind::Advertisements, item, file.clone()));
            }
        }
    }
    out
}

fn short_cid(cid: &str) -> String {
    cid.chars().take(41).collect()
}

/// The documents whose name is not in `expected`.
fn unexpected(docs: &[Document], expected: &BTreeSet<String>, kind: Kind) -> Vec<Found> {
    docs.iter()
        .filter(|(key, _, _)| {
            let name = key.rsplit('/').next().unwrap_or_default();
            !expected.contains(name)
        })
        .map(|(key, _, file)| Found::new(kind, format!("document {key}"), file.clone()))
        .collect()
}

/// Every file and directory under `roots`, with its path relative to the root it is under.
fn walk(roots: &[PathBuf]) -> Vec<(PathBuf, String, bool)> {
    let mut out = Vec::new();
    for root in roots {
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                let base = root.file_name().map(PathBuf::from).unwrap_or_default();
                let rel = base.join(path.strip_prefix(root).unwrap_or(&path));
                out.push((path.clone(), rel.display().to_string(), is_dir));
                if is_dir {
                    stack.push(path);
                }
            }
        }
    }
    out
}

/// Temporaries of killed writers under `roots`.
pub fn temporaries(roots: &[PathBuf]) -> Vec<Found> {
    walk(roots)
        .into_iter()
        .filter(|(_, rel, is_dir)| {
            let name = rel.rsplit('/').next().unwrap_or_default();
            let in_tmp = rel.split('/').rev().skip(1).any(|c| c == ".galactic-tmp");
            (!is_dir && name.contains(".tmp.")) || in_tmp
        })
        .map(|(path, rel, _)| Found::new(Kind::Temporaries, rel, Some(path)))
        .collect()
}

/// Files under `roots` whose name or content names a gone container or host interface,
/// except shared files and files already counted (`counted`).
pub fn other_files(roots: &[PathBuf], pop: &Population, counted: &BTreeSet<PathBuf>) -> Vec<Found> {
    let live_cids = pop.live_cids();
    let live_ifnames = pop.live_ifnames();
    // A gone attachment whose identity a live one reuses is not "gone" by name.
    let names: Vec<&str> = pop
        .gone
        .iter()
        .flat_map(|g| {
            let cid = (!live_cids.contains(g.cid.as_str())).then_some(g.cid.as_str());
            let ifname = (!live_ifnames.contains(g.ifname.as_str())).then_some(g.ifname.as_str());
            cid.into_iter().chain(ifname)
        })
        .collect();
    let mut out = Vec::new();
    for (path, rel, is_dir) in walk(roots) {
        if is_dir || is_shared(&rel) || counted.contains(&path) {
            continue;
        }
        let text = std::fs::read(&path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if let Some(name) = names
            .iter()
            .find(|n| rel.contains(**n) || text.contains(**n))
        {
            let item = format!("{rel} names {name}");
            out.push(Found::new(Kind::OtherFiles, item, Some(path)));
        }
    }
    out
}

/// eBPF registration records (`records`, as `galactic_core::bpf::registry::all_records`
/// reads them from `state_dir`) of host interfaces of no live attachment.
pub fn bpf_records(state_dir: &Path, records: &[AttachmentRecord], pop: &Population) -> Vec<Found> {
    let live = pop.live_ifnames();
    let dir = state_dir.join("bpf").join("attachments");
    records
        .iter()
        .filter(|r| !live.contains(r.host_ifname.as_str()))
        .map(|r| {
            let path = dir.join(format!("{}.json", r.host_ifname));
            let item = format!("{} (ifindex {})", path.display(), r.ifindex);
            Found::new(Kind::BpfRecords, item, Some(path))
        })
        .collect()
}

/// `ifindex_vrf_table` rows (`rows`: their keys) of an ifindex that is no live attachment's
/// host interface (`ifindexes`: the host's interfaces by name).
pub fn ifindex_rows(
    rows: &BTreeSet<u32>,
    ifindexes: &BTreeMap<String, u32>,
    pop: &Population,
) -> Vec<Found> {
    let live: BTreeSet<u32> = pop
        .live
        .iter()
        .filter_map(|i| ifindexes.get(&i.ifname).copied())
        .collect();
    rows.iter()
        .filter(|ifindex| !live.contains(ifindex))
        .map(|ifindex| {
            let item = format!("ifindex_vrf_table row {ifindex}");
            Found::new(Kind::IfindexRows, item, None)
        })
        .collect()
}

/// Pass-through `egress_route_table` entries (all-zero values; `rows` by key) that no live
/// attachment's registration record lists. Other entries (a VPC's internet egress) are not
/// per-attachment and the campaign's stanzas do not opt in to them.
pub fn egress_rows(
    rows: &BTreeMap<EgressKey, Vec<u8>>,
    records: &[AttachmentRecord],
    pop: &Population,
) -> Vec<Found> {
    let live = pop.live_ifnames();
    let listed: BTreeSet<EgressKey> = records
        .iter()
        .filter(|r| live.contains(r.host_ifname.as_str()))
        .flat_map(|r| r.prefixes.iter().map(|p| egress_key(r.vrf_table_id, *p)))
        .collect();
    rows.iter()
        .filter(|(key, value)| value.iter().all(|b| *b == 0) && !listed.contains(*key))
        .map(|((len, table, family, addr), _)| {
            let addr = match *family {
                FAMILY_IPV4 => IpAddr::from([addr[0], addr[1], addr[2], addr[3]]),
                _ => IpAddr::from(*addr),
            };
            // The key's length counts the table and family header (40 bits) too.
            let item = format!(
                "egress_route_table entry {addr}/{} of table {table}",
                len.saturating_sub(40)
            );
            Found::new(Kind::EgressRows, item, None)
        })
        .collect()
}

/// Whether `name` has the shape of a host interface (`G` + 12 id characters + `H`).
fn is_host_ifname(name: &str) -> bool {
    name.len() == 14 && name.starts_with('G') && name.ends_with('H')
}

/// Host interfaces of no live attachment, from the host's link names.
pub fn host_interfaces(links: &BTreeSet<String>, pop: &Population) -> Vec<Found> {
    let live = pop.live_ifnames();
    links
        .iter()
        .filter(|l| is_host_ifname(l) && !live.contains(l.as_str()))
        .map(|l| Found::new(Kind::HostInterfaces, format!("link {l}"), None))
        .collect()
}

/// Policy rules and nft lines naming a host interface of no live attachment, and routes naming
/// one that no longer exists (`links`: the host's interfaces; the routes of a leaked interface
/// go with it and are counted as that interface).
pub fn kernel_references(
    rules: &[String],
    routes: &[String],
    nft: &str,
    links: &BTreeSet<String>,
    pop: &Population,
) -> Vec<Found> {
    let live = pop.live_ifnames();
    let gone_in = |line: &str, skip_existing: bool| {
        line.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
            is_host_ifname(w) && !live.contains(w) && !(skip_existing && links.contains(w))
        })
    };
    let rules = rules
        .iter()
        .map(String::as_str)
        .filter(|l| gone_in(l, false));
    let nft = nft.lines().map(str::trim).filter(|l| gone_in(l, false));
    let routes = routes
        .iter()
        .map(String::as_str)
        .filter(|l| gone_in(l, true));
    rules
        .chain(nft)
        .chain(routes)
        .map(|line| Found::new(Kind::KernelReferences, line.to_owned(), None))
        .collect()
}
