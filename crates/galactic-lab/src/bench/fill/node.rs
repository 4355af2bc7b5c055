//! A chain's node while the bench runs: its host namespace (entered by the bench thread), the
//! chain's configuration for every attachment, and the live attachments with their pods.

use super::{Chain, TAG};
use crate::campaign::Lab;
use galactic_testkit::harness::{Entered, Error, Result};
use galactic_testkit::host::Host;
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use galactic_testkit::TestNode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Our chain's cniVersion: 1.1.0, so GC is part of what is measured.
const OURS_VERSION: &str = "1.1.0";
/// The reference's: Debian's plugins speak up to 1.0.0.
const REFERENCE_VERSION: &str = "1.0.0";
/// The probe's VPC attachment: above every fill attachment's (hex of 1 ..= 4094).
const PROBE_ATT: &str = "fff";
/// Fill attachments a node can hold: attachment ids and termination networks are numbered by it.
pub(super) const MAX_LIVE: usize = 4094;
/// The pods' Kubernetes namespace in `CNI_ARGS` (galactic-bgp publishes their EndpointSlices).
const POD_NAMESPACE: &str = "pods";

/// Where a node's chain runs.
enum Site<'a> {
    /// Our full chain on the campaigns' lab.
    Ours(&'a Lab),
    /// The reference on a host of its own.
    Reference {
        // Declared first: the thread leaves the namespace before the host is deleted.
        _entered: Entered,
        host: Host,
    },
}

/// What an attachment's configuration is made of; shared by the filling threads.
struct Plan {
    chain: Chain,
    vpcs: usize,
    /// host-local's store, in the node's directory (never the machine's `/var/lib/cni`).
    host_local_dir: PathBuf,
}

/// A node of one chain and its live attachments.
pub(super) struct Node<'a> {
    /// The chain.
    pub(super) chain: Chain,
    /// VPCs our attachments are spread over (1 for the reference: one network).
    pub(super) vpcs: usize,
    site: Site<'a>,
    /// The live attachments, in fill order, each with its pod (declared after the site: pods
    /// are deleted before the host, though either order is clean).
    live: Vec<(Attachment, TestNetns)>,
}

impl<'a> Node<'a> {
    /// Our chain on `lab` (which the calling thread has entered), attachments over `vpcs` VPCs.
    pub(super) fn ours(lab: &'a Lab, vpcs: usize) -> Self {
        Self {
            chain: Chain::Ours,
            vpcs,
            site: Site::Ours(lab),
            live: Vec::new(),
        }
    }

    /// The reference chain on a fresh host the calling thread enters, its plugins from `bins`.
    pub(super) fn reference(bins: &Path) -> Result<Self> {
        let host = Host::with_plugins_from(TAG, json!({}), bins, &["bridge", "host-local"])?;
        Ok(Self {
            chain: Chain::Reference,
            vpcs: 1,
            site: Site::Reference {
                _entered: Entered::new(&host.netns)?,
                host,
            },
            live: Vec::new(),
        })
    }

    fn host(&self) -> &Host {
        match &self.site {
            Site::Ours(lab) => &lab.host,
            Site::Reference { host, .. } => host,
        }
    }

    /// The host namespace.
    pub(super) fn host_netns(&self) -> &TestNetns {
        &self.host().netns
    }

    /// The node's temporary directory (config, state, log, runtime cache).
    pub(super) fn dir(&self) -> PathBuf {
        self.host().node.dir.path().to_path_buf()
    }

    /// The test node (its config is every plugin's `GALACTIC_CNI_NODE_CONFIG`).
    pub(super) fn test_node(&self) -> &TestNode {
        &self.host().node
    }

    /// The bin dir (`CNI_PATH`).
    pub(super) fn bin_dir(&self) -> &Path {
        &self.host().bin_dir
    }

    /// The node's log, where our plugins write their `durationMs` (none for the reference).
    pub(super) fn log(&self) -> Option<PathBuf> {
        match self.chain {
            Chain::Ours => Some(self.dir().join("galactic.log")),
            Chain::Reference => None,
        }
    }

    /// Whether the chain has GC (cniVersion 1.1.0).
    pub(super) fn has_gc(&self) -> bool {
        self.chain == Chain::Ours
    }

    fn plan(&self) -> Plan {
        Plan {
            chain: self.chain,
            vpcs: self.vpcs,
            host_local_dir: self.dir().join("host-local"),
        }
    }

    /// The probe's configuration: in the first VPC, with networks no fill attachment uses.
    pub(super) fn probe_conflist(&self) -> Conflist {
        self.plan().conflist(1, PROBE_ATT, MAX_LIVE + 1)
    }

    /// The probe's attachment in `pod`.
    pub(super) fn probe_attachment(&self, cid: &str, pod: &TestNetns) -> Attachment {
        attachment(cid, pod)
    }

    /// Every live attachment, as GC's valid list names them.
    pub(super) fn valid(&self) -> Vec<Attachment> {
        self.live.iter().map(|(att, _)| att.clone()).collect()
    }

    /// Attaches pods through the chain until `level` are live, `workers` runtimes at a time;
    /// returns how many were added and how long that took. Our plugins log warnings only
    /// meanwhile (the probe's log lines are read back; the fill's would only grow the file).
    pub(super) fn fill_to(&mut self, level: usize, workers: usize) -> Result<(usize, Duration)> {
        if level > MAX_LIVE {
            return Err(Error::Precondition(format!(
                "at most {MAX_LIVE} live attachments per node (asked for {level})"
            )));
        }
        let start = self.live.len();
        if level <= start {
            return Ok((0, Duration::ZERO));
        }
        self.set_log_level("warn");
        let started = Instant::now();
        let added = self.attach_in_parallel(start..level, workers.max(1));
        let elapsed = started.elapsed();
        self.set_log_level("info");
        let mut added = added?;
        added.sort_by_key(|(i, _, _)| *i);
        let count = added.len();
        self.live
            .extend(added.into_iter().map(|(_, att, pod)| (att, pod)));
        Ok((count, elapsed))
    }

    /// ADDs of attachments `range` on `workers` threads, each with its own runtime (threads
    /// start in the host namespace the calling thread entered, so their plugins do too).
    fn attach_in_parallel(
        &self,
        range: std::ops::Range<usize>,
        workers: usize,
    ) -> Result<Vec<(usize, Attachment, TestNetns)>> {
        let plan = &self.plan();
        let (node, bins) = (self.test_node(), self.bin_dir());
        let indices: Vec<usize> = range.collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let mine: Vec<usize> =
                        indices.iter().copied().skip(w).step_by(workers).collect();
                    s.spawn(move || attach_each(plan, node, bins, &mine))
                })
                .collect();
            let mut all = Vec::new();
            let mut first_error = None;
            for handle in handles {
                match handle.join() {
                    Ok(Ok(done)) => all.extend(done),
                    Ok(Err(e)) => first_error = first_error.or(Some(e)),
                    Err(_) => {
                        let panicked = Error::Precondition("a fill thread panicked".into());
                        first_error = first_error.or(Some(panicked));
                    }
                }
            }
            match first_error {
                // The pods attached so far are dropped (deleted) with `all`.
                Some(e) => Err(e),
                None => Ok(all),
            }
        })
    }

    fn set_log_level(&self, level: &str) {
        if self.chain == Chain::Ours {
            self.test_node().merge_config(json!({ "log_level": level }));
        }
    }
}

/// One worker's ADDs, in order; stops at the first failure (whose pod is deleted with it).
fn attach_each(
    plan: &Plan,
    node: &TestNode,
    bins: &Path,
    indices: &[usize],
) -> Result<Vec<(usize, Attachment, TestNetns)>> {
    let runtime = Runtime::new(node, bins, None);
    let mut done = Vec::with_capacity(indices.len());
    for &i in indices {
        let pod = TestNetns::new("gfill-pod");
        let att = attachment(&format!("fill{i:05}"), &pod);
        let (vpc, id) = plan.fill_ids(i);
        runtime
            .add(&plan.conflist(vpc, &id, i), &att)
            .map_err(|e| Error::from(Box::new(e)))?;
        done.push((i, att, pod));
    }
    Ok(done)
}

/// Container `cid` in `pod`, with the Kubernetes arguments kubelet passes.
fn attachment(cid: &str, pod: &TestNetns) -> Attachment {
    Attachment::new(cid, &pod.path().display().to_string(), "eth0")
        .arg("IgnoreUnknown", "1")
        .arg("K8S_POD_NAMESPACE", POD_NAMESPACE)
        .arg("K8S_POD_NAME", cid)
}

impl Plan {
    /// Fill attachment `i`'s VPC (round robin over the VPCs, numbered from 1, so every level
    /// spreads evenly) and VPC attachment id (hex of `i + 1`, unique on the node).
    fn fill_ids(&self, i: usize) -> (usize, String) {
        (i % self.vpcs.max(1) + 1, format!("{:x}", i + 1))
    }

    /// The chain of VPC `vpc`, VPC attachment `att`, with termination networks numbered `n`.
    fn conflist(&self, vpc: usize, att: &str, n: usize) -> Conflist {
        match self.chain {
            Chain::Ours => Conflist::new(OURS_VERSION, "bench-fill", ours(vpc, att, n)),
            Chain::Reference => Conflist::new(
                REFERENCE_VERSION,
                "bench-fill-reference",
                vec![reference(&self.host_local_dir)],
            ),
        }
    }
}

/// Our stanzas. Each VPC has its own pools (table-mode domains need node-unique gateways per
/// VPC); each attachment terminates networks of its own (a network terminated twice in one VPC
/// is a conflict galactic-route refuses by design).
fn ours(vpc: usize, att: &str, n: usize) -> Vec<Value> {
    let vpc_id = vpc.to_string();
    vec![
        json!({"type": "galactic-cni", "vpc": vpc_id, "vpcattachment": att, "ipam": {
            "type": "galactic-ipam", "ipv6_subnet": format!("fd90:{vpc:x}::/64"),
            "ipv4_subnet": format!("10.{vpc}.0.0/16")}}),
        json!({"type": "galactic-route", "vpc": vpc_id, "vpcattachment": att,
            "terminations": [{"network": format!("fd91:{n:x}::/64")},
                             {"network": format!("172.{}.{}.0/24", 16 + n / 256, n % 256)}]}),
        json!({"type": "galactic-bgp", "vpc": vpc_id, "vpcattachment": att}),
    ]
}

/// The reference's stanza: one bridge, host-local with a range per family wide enough for
/// every level.
fn reference(host_local_dir: &Path) -> Value {
    json!({"type": "bridge", "bridge": "gfill0", "isGateway": true, "ipMasq": false,
        "ipam": {"type": "host-local", "dataDir": host_local_dir,
                 "ranges": [[{"subnet": "fd92::/64"}], [{"subnet": "10.92.0.0/16"}]]}})
}

/// The backend named in a routing domain's state file under `state_dir` (`vpc-<hex>.json`),
/// the first found.
pub(super) fn domain_backend(state_dir: &Path) -> Option<String> {
    let mut dirs = vec![state_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                dirs.push(path);
            } else if name.starts_with("vpc-") && name.ends_with(".json") {
                let doc: Option<Value> = std::fs::read(&path)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok());
                if let Some(backend) = doc.as_ref().and_then(|d| d["backend"].as_str()) {
                    return Some(backend.to_owned());
                }
            }
        }
    }
    None
}
