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
//!
//! Two more figures put the chains in context: the kernel's own cost of the veth pair both
//! chains create and delete ([`floor`], measured in-process over netlink, no plugin), and many
//! attachments at once ([`concurrent`]).

pub mod concurrent;
pub mod floor;
mod table;

pub use table::table;

use galactic_testkit::harness::{json, Entered, Error, Result};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::process::{self, Finished, Probed};
use galactic_testkit::runtime::{Attachment, Conflist};
use galactic_testkit::TestNode;
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

/// How much to measure.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Sequential attachments per chain.
    pub iterations: usize,
    /// Our chain without galactic-route and galactic-bgp (the master with its IPAM only).
    pub master_only: bool,
    /// Attachments started at once in the concurrent part (0: no concurrent part).
    pub concurrency: usize,
    /// Rounds of the concurrent part.
    pub rounds: usize,
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
    /// DEL wall time per plugin process.
    pub stage_del: BTreeMap<String, Vec<Duration>>,
    /// The concurrent part's figures.
    pub concurrent: Option<concurrent::Figures>,
}

/// Everything one run measured.
pub struct Report {
    /// The chains, ours first.
    pub chains: Vec<Chain>,
    /// The kernel's veth cost.
    pub floor: floor::Floor,
    /// Our plugins' own work per operation, from their log lines (`durationMs` of "ADD: done"
    /// and "DEL: done"), by (plugin, verb): the rest of a process's wall time is its start,
    /// configuration and exit.
    pub own_work: BTreeMap<(String, String), Vec<Duration>>,
    /// What was asked for.
    pub options: Options,
}

/// How a chain run is observed.
#[derive(Clone, Copy, PartialEq)]
enum Probe {
    /// Plugins spawned directly; wall times recorded.
    Timed,
    /// Plugins run under rss-probe; peak RSS recorded, times not.
    Rss,
}

/// Runs the sequential attachments, the kernel floor and (when asked) the concurrent part.
pub fn run(paths: &Paths<'_>, options: Options) -> Result<Report> {
    let host = TestNetns::new("gbench-host");
    let _entered = Entered::new(&host)?;
    let node = TestNode::new(json!({"log_level": "info", "routing_domain": "auto"}));
    let mut mine = our_chain(paths.ours);
    if options.master_only {
        mine.list.plugins.truncate(1);
        mine.label = "galactic (veth+ipam only)";
    }
    let mut chains = vec![mine, reference_chain(paths.reference, node.dir.path())];
    let cni_path = PathBuf::from(format!(
        "{}:{}",
        paths.ours.display(),
        paths.reference.display()
    ));
    let mut floor = floor::Floor::default();
    for i in 0..options.iterations {
        for chain in chains.iter_mut() {
            let pod = TestNetns::new("gbench-pod");
            let call = Call {
                cid: format!("bench{i:05}"),
                netns: pod.path().display().to_string(),
                cni_path: &cni_path,
                node: &node,
                probe: paths.probe,
                patch: None,
            };
            let add = run_chain(chain, &call, Verb::Add, None, Probe::Timed)?;
            let del = run_chain(chain, &call, Verb::Del, Some(&add.result), Probe::Timed)?;
            chain.record_times(&add, &del);
            let add = run_chain(chain, &call, Verb::Add, None, Probe::Rss)?;
            let del = run_chain(chain, &call, Verb::Del, Some(&add.result), Probe::Rss)?;
            chain.record_rss(&add);
            chain.record_rss(&del);
        }
        floor.measure_once()?;
    }
    let own_work = own_work(&node.dir.path().join("galactic.log"));
    if options.concurrency > 0 {
        for chain in chains.iter_mut() {
            let figures =
                concurrent::measure(chain, &node, &cni_path, options.concurrency, options.rounds)?;
            chain.concurrent = Some(figures);
        }
    }
    Ok(Report {
        chains,
        floor,
        own_work,
        options,
    })
}

/// The `durationMs` of every "ADD: done" and "DEL: done" line of the node's log, by plugin and
/// verb (a plugin logs its operation's own time, after reading its input and configuration).
fn own_work(log: &Path) -> BTreeMap<(String, String), Vec<Duration>> {
    let mut out: BTreeMap<(String, String), Vec<Duration>> = BTreeMap::new();
    let text = std::fs::read_to_string(log).unwrap_or_default();
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let verb = match entry["msg"].as_str() {
            Some("ADD: done") => "ADD",
            Some("DEL: done") => "DEL",
            _ => continue,
        };
        if let (Some(plugin), Some(ms)) = (entry["plugin"].as_str(), entry["durationMs"].as_f64()) {
            out.entry((plugin.to_owned(), verb.to_owned()))
                .or_default()
                .push(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    out
}

/// One attachment's plugin calls.
pub(crate) struct Call<'a> {
    pub(crate) cid: String,
    pub(crate) netns: String,
    pub(crate) cni_path: &'a Path,
    pub(crate) node: &'a TestNode,
    pub(crate) probe: &'a Path,
    /// Keys this call's plugins take instead of the list's, where the plugin has the key (pods
    /// attached at the same time each need their own VPC attachment, since one attachment has
    /// one holder, and their own terminations, since a network terminates at one attachment).
    pub(crate) patch: Option<Value>,
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

/// One chain ADD or DEL: its total, the result to thread on, and what each plugin cost.
pub(crate) struct Pass {
    /// The sum of the plugins' wall times.
    pub(crate) total: Duration,
    /// ADD: the last plugin's result; DEL: the result it was given.
    pub(crate) result: Value,
    /// Each plugin's wall time, in the order run.
    stages: Vec<(String, Duration)>,
    /// Each plugin's peak RSS and those of the programs it started (probed passes only).
    rss: Vec<Peak>,
}

/// A plugin's own peak RSS (KiB) and those of the programs it started, by name.
struct Peak {
    plugin: String,
    kib: u64,
    started: Vec<(String, u64)>,
}

/// A chain verb.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Verb {
    /// Forward, threading prevResult from plugin to plugin.
    Add,
    /// In reverse, every plugin given the chain's cached result (none after a failed ADD).
    Del,
}

/// Runs ADD forward (threading prevResult) or DEL in reverse (with `cached`, the final result).
fn run_chain(
    chain: &Chain,
    call: &Call<'_>,
    verb: Verb,
    cached: Option<&Value>,
    probe: Probe,
) -> Result<Pass> {
    let command = match verb {
        Verb::Add => "ADD",
        Verb::Del => "DEL",
    };
    let env = call.env(command);
    let mut pass = Pass {
        total: Duration::ZERO,
        result: Value::Null,
        stages: Vec::new(),
        rss: Vec::new(),
    };
    let mut prev: Option<Value> = cached.cloned();
    let stages = chain.list.plugins.len();
    let order: Vec<usize> = match verb {
        Verb::Add => (0..stages).collect(),
        Verb::Del => (0..stages).rev().collect(),
    };
    for i in order {
        let name = chain.list.plugin_type(i).to_owned();
        let stdin = stage_conf(chain, call, i, prev.as_ref());
        let run = run_stage(
            probe,
            call,
            &chain.bins.join(&name),
            &env,
            &stdin,
            &name,
            &mut pass,
        )?;
        if !run.status.success() {
            return Err(Error::Plugin {
                plugin: name,
                command: command.into(),
                reply: String::from_utf8_lossy(&run.stdout).into_owned(),
            });
        }
        pass.total += run.elapsed;
        pass.stages.push((name.clone(), run.elapsed));
        if verb == Verb::Add {
            prev = Some(
                serde_json::from_slice(&run.stdout).map_err(json(format!("{name} ADD result")))?,
            );
        }
    }
    pass.result = prev.unwrap_or(Value::Null);
    Ok(pass)
}

/// Plugin `i`'s stdin: its entry of the chain with `prev` as prevResult and the call's patch.
fn stage_conf(chain: &Chain, call: &Call<'_>, i: usize, prev: Option<&Value>) -> String {
    // Debian's reference plugins speak up to 1.0.0; both chains use it so they do the same
    // work.
    let att = Attachment::new(&call.cid, &call.netns, "eth0");
    let mut conf = chain.list.plugin_conf(i, prev, &att);
    for (key, value) in call.patch.iter().filter_map(Value::as_object).flatten() {
        if let Some(field) = conf.get_mut(key) {
            *field = value.clone();
        }
    }
    conf.to_string()
}

/// Runs one plugin of the chain, timed or under the RSS probe (whose peak goes into `pass`).
fn run_stage(
    probe: Probe,
    call: &Call<'_>,
    binary: &Path,
    env: &[(&str, String)],
    stdin: &str,
    name: &str,
    pass: &mut Pass,
) -> Result<Finished> {
    match probe {
        Probe::Timed => {
            Ok(process::start(process::command(binary, env), stdin.as_bytes())?.wait()?)
        }
        Probe::Rss => {
            let Probed {
                finished,
                started_rss_kib,
            } = process::run_probed(call.probe, binary, env, stdin.as_bytes())?;
            pass.rss.push(Peak {
                plugin: name.to_owned(),
                kib: finished.max_rss_kib,
                started: started_rss_kib,
            });
            Ok(finished)
        }
    }
}

impl Chain {
    fn record_times(&mut self, add: &Pass, del: &Pass) {
        self.add.push(add.total);
        self.del.push(del.total);
        for (name, elapsed) in &add.stages {
            self.stage_add
                .entry(name.clone())
                .or_default()
                .push(*elapsed);
        }
        for (name, elapsed) in &del.stages {
            self.stage_del
                .entry(name.clone())
                .or_default()
                .push(*elapsed);
        }
    }

    fn record_rss(&mut self, pass: &Pass) {
        for Peak {
            plugin: stage,
            kib: own,
            started,
        } in &pass.rss
        {
            let rss = self.rss.entry(stage.clone()).or_default();
            *rss = (*rss).max(*own);
            for (program, kib) in started {
                let rss = self
                    .rss
                    .entry(format!("{program} (started by {stage})"))
                    .or_default();
                *rss = (*rss).max(*kib);
            }
        }
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
        stage_del: BTreeMap::new(),
        concurrent: None,
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
