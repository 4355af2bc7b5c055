//! A probe pod's ADD, CHECK, DEL and GC as the node around it fills: 0, 250 and 1 000 live
//! attachments spread over 1, 50 and 250 VPCs (our chain), side by side with the reference chain
//! (Debian's `bridge` + `host-local`, one network: it has no VPCs) at the same attachment counts.
//!
//! Ours is the full chain of the campaigns' [`Lab`]: `galactic-cni` (with `galactic-ipam`
//! delegated) → `galactic-route` → `galactic-bgp` publishing locally, eBPF registration on a
//! private bpffs, cniVersion 1.1.0 (GC is one of the verbs measured). The reference speaks up to
//! 1.0.0, so it has no GC. Each chain's node is a throwaway host namespace the bench thread enters.
//!
//! The node is filled the honest way, through the real chain ([`node`]): every live attachment
//! is a pod namespace of its own attached by the test kit's runtime, `--workers` runtimes at a
//! time (each its own thread, each plugin a process). Filling grows one node level by level; the
//! filling time of each step is reported. At each level the probe ([`probe`]) runs
//! `--iterations` times in the first VPC, each verb a pass of plugin processes spawned by the
//! bench and timed one by one, with each plugin's own time (`durationMs` of its log line) beside
//! its wall time; GC gets every live attachment as valid. The kernel objects of the host
//! namespace are counted after each fill ([`objects`]).
//!
//! Everything is gone at the end, also when a step fails: pods and hosts are namespaces deleted
//! on drop (the veth pairs, routes and rules with them), the node directories are temporary
//! directories, and every plugin process is reaped before its call returns. The report lists
//! whatever of that is still there ([`Report::leftovers`]).

mod node;
pub mod objects;
mod probe;
mod table;

pub use objects::Objects;
pub use probe::Verb;
pub use table::table;

use crate::campaign::Lab;
use galactic_testkit::harness::{Error, Result};
use node::Node;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What is measured, built by the caller.
pub struct Paths<'a> {
    /// Our plugins (`galactic-cni`, `galactic-ipam`, `galactic-route`, `galactic-bgp`); `None`:
    /// the workspace's debug builds, as tests use them.
    pub ours: Option<&'a Path>,
    /// The reference plugins (`bridge`, `host-local`); `None`: our chain alone.
    pub reference: Option<&'a Path>,
}

/// The routing-domain backend of our node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Per-VPC routing tables and policy rules.
    Table,
    /// A VRF device per VPC.
    Vrf,
}

impl Backend {
    /// The node config's word for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Vrf => "vrf",
        }
    }
}

/// How much to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// Live attachments to measure at (sorted, ascending; 0 is the empty node).
    pub levels: Vec<usize>,
    /// VPC counts our attachments are spread over; one node per count.
    pub vpcs: Vec<usize>,
    /// Probe rounds (ADD, CHECK, DEL, GC) per level.
    pub iterations: usize,
    /// Our node's backend; `None`: `auto`, what the node would choose.
    pub backend: Option<Backend>,
    /// Runtimes filling a node at once.
    pub workers: usize,
}

/// Which chain a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Chain {
    /// galactic-cni (+ galactic-ipam) → galactic-route → galactic-bgp.
    Ours,
    /// bridge (+ host-local).
    Reference,
}

impl Chain {
    /// Its name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::Ours => "ours",
            Self::Reference => "reference",
        }
    }
}

/// One verb's samples at one level.
#[derive(Debug, Default)]
pub struct Samples {
    /// The pass's wall time (the sum of its plugins').
    pub wall: Vec<Duration>,
    /// Each plugin process's wall time, by plugin.
    pub stages: BTreeMap<String, Vec<Duration>>,
    /// Each plugin's own time as it logs it (`durationMs`), by plugin; delegates included.
    pub own: BTreeMap<String, Vec<Duration>>,
    /// The kernel objects each plugin received over netlink as it logs them
    /// (`netlinkReceived`), by plugin.
    pub received: BTreeMap<String, Vec<u64>>,
}

/// What one level of one node measured.
#[derive(Debug)]
pub struct Row {
    /// The chain.
    pub chain: Chain,
    /// VPCs the live attachments are spread over (0: the empty node, or the reference).
    pub vpcs: usize,
    /// Live attachments besides the probe.
    pub live: usize,
    /// Attachments this row's fill step added, and how long that took.
    pub filled: usize,
    /// Wall time of the fill step.
    pub fill_time: Duration,
    /// The host namespace's kernel objects after the fill (the probe not attached).
    pub objects: Objects,
    /// Samples by verb.
    pub verbs: BTreeMap<Verb, Samples>,
}

/// Everything one run measured.
#[derive(Debug)]
pub struct Report {
    /// The rows, ours first, each node's levels ascending.
    pub rows: Vec<Row>,
    /// The backend our nodes' domains were created with (from their state files).
    pub backend: String,
    /// What was asked for.
    pub options: Options,
    /// What is still there after the nodes were dropped: namespaces with the bench's names,
    /// node directories. Empty when the run cleaned up.
    pub leftovers: Vec<String>,
}

/// Namespace names of the bench (each node's host, pods and probe carry one).
const TAG: &str = "gfill";

/// Runs every node and checks that nothing is left behind.
pub fn run(paths: &Paths<'_>, options: &Options, progress: &dyn Fn(&str)) -> Result<Report> {
    let mut levels = options.levels.clone();
    levels.sort_unstable();
    levels.dedup();
    let mut rows = Vec::new();
    let mut backend = String::from("none");
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut measured_empty = false;
    for &vpcs in &options.vpcs {
        let wanted: Vec<usize> = levels
            .iter()
            .copied()
            .filter(|&l| (l == 0 && !measured_empty) || (l > 0 && l >= vpcs))
            .collect();
        if wanted.is_empty() || vpcs == 0 {
            continue;
        }
        let lab = our_lab(paths.ours, options.backend)?;
        let node = Node::ours(&lab, vpcs);
        dirs.push(lab.host.node.dir.path().to_path_buf());
        measure_levels(node, &wanted, options, progress, &mut rows)?;
        measured_empty |= wanted.contains(&0);
        if let Some(found) = node::domain_backend(&lab.state_dir()) {
            backend = found;
        }
    }
    if let Some(reference) = paths.reference {
        let node = Node::reference(reference)?;
        dirs.push(node.dir());
        measure_levels(node, &levels, options, progress, &mut rows)?;
    }
    Ok(Report {
        rows,
        backend,
        options: options.clone(),
        leftovers: leftovers(&dirs),
    })
}

/// Fills `node` level by level and measures the probe at each; the node is dropped (and with it
/// its namespaces and directory) before this returns.
fn measure_levels(
    mut node: Node<'_>,
    levels: &[usize],
    options: &Options,
    progress: &dyn Fn(&str),
    rows: &mut Vec<Row>,
) -> Result<()> {
    for &level in levels {
        let (filled, fill_time) = node.fill_to(level, options.workers)?;
        progress(&format!(
            "{} node, {} VPCs: {level} live attachments ({filled} added in {:.1} s)",
            node.chain.label(),
            node.vpcs,
            fill_time.as_secs_f64()
        ));
        let objects = Objects::count(node.host_netns());
        let verbs = probe::measure(&node, options.iterations)?;
        rows.push(Row {
            chain: node.chain,
            vpcs: if level == 0 { 0 } else { node.vpcs },
            live: level,
            filled,
            fill_time,
            objects,
            verbs,
        });
    }
    Ok(())
}

/// Our node: the campaigns' lab (full chain, local publisher, eBPF maps pinned), with `backend`
/// when one is asked for.
fn our_lab(plugins: Option<&Path>, backend: Option<Backend>) -> Result<Lab> {
    let lab = match plugins {
        Some(built) => Lab::with_plugins_from(TAG, built)?,
        None => Lab::for_tests(TAG)?,
    };
    if let Some(backend) = backend {
        lab.host
            .node
            .merge_config(serde_json::json!({"routing_domain": backend.name()}));
    }
    Ok(lab)
}

/// Namespaces whose name carries the bench's tag, and node directories still on disk.
fn leftovers(dirs: &[PathBuf]) -> Vec<String> {
    let mut out: Vec<String> = dirs
        .iter()
        .filter(|d| d.exists())
        .map(|d| format!("node directory {}", d.display()))
        .collect();
    // Names are `gt-<tag>-<pid>-<n>`: other processes' namespaces are not this run's.
    let pid = format!("-{}-", std::process::id());
    let listed = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output();
    match listed {
        Ok(listed) => out.extend(
            String::from_utf8_lossy(&listed.stdout)
                .lines()
                .filter(|l| l.starts_with(&format!("gt-{TAG}")) && l.contains(&pid))
                .map(|l| format!("network namespace {l}")),
        ),
        Err(e) => out.push(format!("ip netns list: {e}")),
    }
    out
}

/// A failed plugin call as the harness's error.
fn plugin_failed(plugin: &str, command: &str, stdout: &[u8]) -> Error {
    Error::Plugin {
        plugin: plugin.to_owned(),
        command: command.to_owned(),
        reply: String::from_utf8_lossy(stdout).into_owned(),
    }
}

#[cfg(test)]
mod tests;
