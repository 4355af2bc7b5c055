//! A full attachment as a runtime performs it, ours against the reference plugins, measured side
//! by side in one run.
//!
//! Ours: `galactic-cni` (with `galactic-ipam` delegated) → `galactic-route` → `galactic-bgp`
//! (local publisher). Reference: `bridge` with `host-local` (Debian's
//! `containernetworking-plugins`). Each iteration creates a pod namespace, runs the chain's ADD
//! (prevResult threaded from plugin to plugin, stdin built as libcni builds it, see
//! [`Conflist::plugin_conf`]) and its DEL in reverse, and deletes the namespace. The plugins run
//! in a throwaway host namespace the calling thread enters and leaves.
//!
//! Each iteration attaches twice per chain: once timed, with the plugins spawned directly, and
//! once through `rss-probe`, which stops every process at exec and exit (ptrace) to read its peak
//! RSS — stops that would bias the times against the chain with more processes. Both passes
//! start each plugin with the same environment, the one the test kit's runtime gives it.

use crate::harness::{json, Entered, Error, Result};
use crate::privileged::TestNetns;
use crate::process::{self, Finished, Probed};
use crate::runtime::{Attachment, Conflist};
use crate::stats::median_p95;
use crate::TestNode;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What is measured, built by the caller.
pub struct Paths<'a> {
    /// Our release plugins.
    pub ours: &'a Path,
    /// The reference plugins (`bridge`, `host-local`).
    pub reference: &'a Path,
    /// The `rss-probe` launcher.
    pub probe: &'a Path,
}

/// A chain and what was measured for it.
pub struct Chain {
    /// Its name in the table.
    pub label: &'static str,
    list: Conflist,
    bins: PathBuf,
    /// Chain ADD wall times.
    pub add: Vec<Duration>,
    /// Chain DEL wall times.
    pub del: Vec<Duration>,
    /// Peak RSS per plugin process (and per program it started), KiB.
    pub rss: BTreeMap<String, u64>,
    /// ADD wall time per plugin process.
    pub stage_add: BTreeMap<String, Vec<Duration>>,
}

/// How a chain run is observed.
#[derive(Clone, Copy, PartialEq)]
enum Probe {
    /// Plugins spawned directly; wall times recorded.
    Timed,
    /// Plugins run under rss-probe; peak RSS recorded, times not.
    Rss,
}

/// Runs `iterations` attachments per chain; with `master_only`, our chain is the master with
/// its IPAM only.
pub fn run(paths: &Paths<'_>, iterations: usize, master_only: bool) -> Result<Vec<Chain>> {
    let host = TestNetns::new("gbench-host");
    let _entered = Entered::new(&host)?;
    let node = TestNode::new(json!({"log_level": "info", "routing_domain": "auto"}));
    let mut mine = our_chain(paths.ours);
    if master_only {
        mine.list.plugins.truncate(1);
        mine.label = "galactic (veth+ipam only)";
    }
    let mut chains = vec![mine, reference_chain(paths.reference, node.dir.path())];
    let cni_path = PathBuf::from(format!(
        "{}:{}",
        paths.ours.display(),
        paths.reference.display()
    ));
    for i in 0..iterations {
        for chain in chains.iter_mut() {
            let pod = TestNetns::new("gbench-pod");
            let call = Call {
                cid: format!("bench{i:05}"),
                netns: pod.path().display().to_string(),
                cni_path: &cni_path,
                node: &node,
                probe: paths.probe,
            };
            let (add, result) = run_chain(chain, &call, None, Probe::Timed)?;
            let (del, _) = run_chain(chain, &call, Some(&result), Probe::Timed)?;
            chain.add.push(add);
            chain.del.push(del);
            let (_, result) = run_chain(chain, &call, None, Probe::Rss)?;
            run_chain(chain, &call, Some(&result), Probe::Rss)?;
        }
    }
    Ok(chains)
}

/// One attachment's plugin calls.
struct Call<'a> {
    cid: String,
    netns: String,
    cni_path: &'a Path,
    node: &'a TestNode,
    probe: &'a Path,
}

impl Call<'_> {
    /// The environment the test kit's runtime gives a plugin for `command`.
    fn env(&self, command: &str) -> Vec<(&'static str, String)> {
        vec![
            ("CNI_COMMAND", command.to_owned()),
            ("CNI_CONTAINERID", self.cid.clone()),
            ("CNI_NETNS", self.netns.clone()),
            ("CNI_IFNAME", "eth0".into()),
            ("CNI_PATH", self.cni_path.display().to_string()),
            (
                "GALACTIC_CNI_NODE_CONFIG",
                self.node.node_config.display().to_string(),
            ),
        ]
    }
}

/// Runs ADD forward (threading prevResult) or DEL in reverse (with the final result).
fn run_chain(
    chain: &mut Chain,
    call: &Call<'_>,
    cached: Option<&Value>,
    probe: Probe,
) -> Result<(Duration, Value)> {
    let command = if cached.is_none() { "ADD" } else { "DEL" };
    let env = call.env(command);
    let mut total = Duration::ZERO;
    let mut prev: Option<Value> = cached.cloned();
    let stages = chain.list.plugins.len();
    let order: Vec<usize> = match cached {
        None => (0..stages).collect(),
        Some(_) => (0..stages).rev().collect(),
    };
    for i in order {
        let name = chain.list.plugin_type(i).to_owned();
        let binary = chain.bins.join(&name);
        // Debian's reference plugins speak up to 1.0.0; both chains use it so they do the same
        // work.
        let att = Attachment::new(&call.cid, &call.netns, "eth0");
        let stdin = chain.list.plugin_conf(i, prev.as_ref(), &att).to_string();
        let (run, started) = match probe {
            Probe::Timed => (
                process::start(process::command(&binary, &env), stdin.as_bytes())?.wait()?,
                Vec::new(),
            ),
            Probe::Rss => {
                let Probed {
                    finished,
                    started_rss_kib,
                } = process::run_probed(call.probe, &binary, &env, stdin.as_bytes())?;
                (finished, started_rss_kib)
            }
        };
        if !run.status.success() {
            return Err(Error::Plugin {
                plugin: name,
                command: command.into(),
                reply: String::from_utf8_lossy(&run.stdout).into_owned(),
            });
        }
        total += run.elapsed;
        match probe {
            Probe::Timed if cached.is_none() => chain
                .stage_add
                .entry(name.clone())
                .or_default()
                .push(run.elapsed),
            Probe::Timed => {}
            Probe::Rss => record_rss(chain, &name, &run, &started),
        }
        if cached.is_none() {
            prev = Some(
                serde_json::from_slice(&run.stdout).map_err(json(format!("{name} ADD result")))?,
            );
        }
    }
    Ok((total, prev.unwrap_or(Value::Null)))
}

fn record_rss(chain: &mut Chain, stage: &str, run: &Finished, started: &[(String, u64)]) {
    let rss = chain.rss.entry(stage.to_owned()).or_default();
    *rss = (*rss).max(run.max_rss_kib);
    for (program, kib) in started {
        let rss = chain
            .rss
            .entry(format!("{program} (started by {stage})"))
            .or_default();
        *rss = (*rss).max(*kib);
    }
}

fn chain(label: &'static str, network: &str, bins: &Path, plugins: Vec<Value>) -> Chain {
    Chain {
        label,
        list: Conflist::new("1.0.0", network, plugins),
        bins: bins.to_path_buf(),
        add: Vec::new(),
        del: Vec::new(),
        rss: BTreeMap::new(),
        stage_add: BTreeMap::new(),
    }
}

fn our_chain(bins: &Path) -> Chain {
    chain(
        "galactic (veth+ipam → route → bgp)",
        "bench-galactic",
        bins,
        vec![
            json!({"type": "galactic-cni", "vpc": "1", "vpcattachment": "1", "ipam": {
                "type": "galactic-ipam", "ipv6_subnet": "fd90::/64", "ipv4_subnet": "10.90.0.0/16"}}),
            json!({"type": "galactic-route", "vpc": "1", "vpcattachment": "1",
                "terminations": [{"network": "fd91::/64"}, {"network": "10.91.0.0/24"}]}),
            json!({"type": "galactic-bgp", "vpc": "1", "vpcattachment": "1"}),
        ],
    )
}

fn reference_chain(bins: &Path, work: &Path) -> Chain {
    chain(
        "reference (bridge + host-local)",
        "bench-reference",
        bins,
        vec![
            json!({"type": "bridge", "bridge": "gbench0", "isGateway": true, "ipMasq": false,
                "ipam": {"type": "host-local", "dataDir": work.join("host-local"),
                         "ranges": [[{"subnet": "fd92::/64"}], [{"subnet": "10.92.0.0/16"}]]}}),
        ],
    )
}

/// The table of `chains` after `iterations` attachments each.
pub fn table(chains: &[Chain], iterations: usize) -> String {
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
    let mut out = format!(
        "{iterations} attachments per chain, release builds, plugins run as processes in a throwaway host netns\n"
    );
    out.push_str(&format!(
        "{:<38} {:>10} {:>10} {:>10} {:>10}\n",
        "chain", "ADD med", "ADD p95", "DEL med", "DEL p95"
    ));
    let mut medians = Vec::new();
    for chain in chains {
        let (am, ap) = median_p95(&mut chain.add.clone());
        let (dm, dp) = median_p95(&mut chain.del.clone());
        medians.push(am);
        out.push_str(&format!(
            "{:<38} {:>10} {:>10} {:>10} {:>10}\n",
            chain.label,
            ms(am),
            ms(ap),
            ms(dm),
            ms(dp)
        ));
    }
    if let [ours, reference] = medians[..] {
        out.push_str(&format!(
            "ADD median ratio ours/reference: {:.2}\n",
            ours.as_secs_f64() / reference.as_secs_f64()
        ));
    }
    out.push_str(
        "\nper plugin process: ADD median (a plugin's includes the processes it starts), \
         peak RSS (own VmHWM, max over all ADD and DEL runs):\n",
    );
    for chain in chains {
        for (plugin, kib) in &chain.rss {
            let add = chain
                .stage_add
                .get(plugin)
                .map_or("–".to_owned(), |t| ms(median_p95(&mut t.clone()).0));
            out.push_str(&format!("  {:<46} {:>10} {:>8} KiB\n", plugin, add, kib));
        }
    }
    out
}
