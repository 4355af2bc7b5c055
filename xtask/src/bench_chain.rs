//! `bench-chain`: a full attachment as a runtime performs it, ours against the reference plugins,
//! measured side by side in one run.
//!
//! Ours: `galactic-cni` (with `galactic-ipam` delegated) → `galactic-route` → `galactic-bgp`
//! (local publisher). Reference: Debian's `containernetworking-plugins` `bridge` with `host-local`
//! (installed with apt when missing). Each iteration creates a pod namespace, runs the chain's ADD
//! (prevResult threaded from plugin to plugin) and its DEL in reverse, and deletes the namespace.
//! The plugins run in a throwaway "host" namespace this command enters and leaves.
//!
//! Each iteration attaches twice per chain: once timed, with the plugins spawned directly, and
//! once through `rss-probe`, which stops every process at exec and exit (ptrace) to read its peak
//! RSS — stops that would bias the times against the chain with more processes.

use crate::proc;
use crate::stats::median_p95;
use anyhow::{bail, Context, Result};
use nix::sched::{setns, CloneFlags};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const ITERATIONS: usize = 60;

/// One plugin of a chain: its binary and stanza.
struct Stage {
    name: String,
    binary: PathBuf,
    stanza: Value,
}

/// A chain and what was measured for it.
struct Chain {
    label: &'static str,
    network: &'static str,
    stages: Vec<Stage>,
    add: Vec<Duration>,
    del: Vec<Duration>,
    rss: BTreeMap<String, u64>,
    /// ADD wall time per plugin process.
    stage_add: BTreeMap<String, Vec<Duration>>,
}

/// `cargo xtask bench-chain [--iterations N] [--master-only]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Attachments per chain
    #[arg(long, value_name = "N", default_value_t = ITERATIONS)]
    pub iterations: usize,
    /// Our chain without galactic-route and galactic-bgp (the master with its IPAM only)
    #[arg(long)]
    pub master_only: bool,
}

pub fn run(args: &Args) -> Result<()> {
    proc::build_probe()?;
    let iterations = args.iterations;
    let master_only = args.master_only;
    let ours = crate::stage::build_release()?;
    let reference = reference_plugins()?;
    let work = tempfile::tempdir()?;
    let host = Netns::create(&format!("gbench-host-{}", std::process::id()))?;
    let original = std::fs::File::open("/proc/self/ns/net")?;
    setns(std::fs::File::open(host.path())?, CloneFlags::CLONE_NEWNET)
        .context("enter the bench host namespace")?;
    let outcome = measure(&ours, &reference, work.path(), iterations, master_only);
    setns(original, CloneFlags::CLONE_NEWNET).context("return to the original namespace")?;
    drop(host);
    let chains = outcome?;
    print_table(&chains, iterations);
    Ok(())
}

fn measure(
    ours: &Path,
    reference: &Path,
    work: &Path,
    iterations: usize,
    master_only: bool,
) -> Result<Vec<Chain>> {
    let node_config = work.join("node.json");
    std::fs::write(
        &node_config,
        json!({"log_file": work.join("galactic.log"), "log_level": "info", "state_dir": work.join("state"),
               "publisher": "local", "routing_domain": "auto"})
        .to_string(),
    )?;
    let mut mine = our_chain(ours, work);
    if master_only {
        mine.stages.truncate(1);
        mine.label = "galactic (veth+ipam only)";
    }
    let mut chains = vec![mine, reference_chain(reference, work)];
    for i in 0..iterations {
        for chain in chains.iter_mut() {
            let pod = Netns::create(&format!("gbench-pod-{}-{i}", std::process::id()))?;
            let cid = format!("bench{i:05}");
            let path_env = format!("{}:{}", ours.display(), reference.display());
            let env = |command: &str| -> Vec<(&'static str, String)> {
                vec![
                    ("CNI_COMMAND", command.to_owned()),
                    ("CNI_CONTAINERID", cid.clone()),
                    ("CNI_NETNS", pod.path().display().to_string()),
                    ("CNI_IFNAME", "eth0".into()),
                    ("CNI_PATH", path_env.clone()),
                    (
                        "GALACTIC_CNI_NODE_CONFIG",
                        node_config.display().to_string(),
                    ),
                ]
            };
            let (add, result) = run_chain(chain, &env("ADD"), None, Probe::Timed)?;
            let (del, _) = run_chain(chain, &env("DEL"), Some(&result), Probe::Timed)?;
            chain.add.push(add);
            chain.del.push(del);
            let (_, result) = run_chain(chain, &env("ADD"), None, Probe::Rss)?;
            run_chain(chain, &env("DEL"), Some(&result), Probe::Rss)?;
        }
    }
    Ok(chains)
}

/// How a chain run is observed.
#[derive(Clone, Copy, PartialEq)]
enum Probe {
    /// Plugins spawned directly; wall times recorded.
    Timed,
    /// Plugins run under rss-probe; peak RSS recorded, times not.
    Rss,
}

/// Runs ADD forward (threading prevResult) or DEL in reverse (with the final result).
fn run_chain(
    chain: &mut Chain,
    env: &[(&'static str, String)],
    cached: Option<&Value>,
    probe: Probe,
) -> Result<(Duration, Value)> {
    let mut total = Duration::ZERO;
    let mut prev: Option<Value> = cached.cloned();
    let order: Vec<usize> = match cached {
        None => (0..chain.stages.len()).collect(),
        Some(_) => (0..chain.stages.len()).rev().collect(),
    };
    for i in order {
        let stage = &chain.stages[i];
        let (name, binary) = (stage.name.clone(), stage.binary.clone());
        let mut conf = stage.stanza.clone();
        // Debian's reference plugins speak up to 1.0.0; both chains use it so they do the same work.
        conf["cniVersion"] = json!("1.0.0");
        conf["name"] = json!(chain.network);
        if let Some(p) = &prev {
            conf["prevResult"] = p.clone();
        }
        let stdin = conf.to_string();
        let run = match probe {
            Probe::Timed => proc::run(&[&binary], None, env, stdin.as_bytes())?,
            Probe::Rss => proc::run_probed(&binary, env, stdin.as_bytes())?,
        };
        if !run.status.success() {
            bail!(
                "{} {}: {}",
                name,
                env[0].1,
                String::from_utf8_lossy(&run.stdout)
            );
        }
        total += run.elapsed;
        match probe {
            Probe::Timed if cached.is_none() => chain
                .stage_add
                .entry(name.clone())
                .or_default()
                .push(run.elapsed),
            Probe::Timed => {}
            Probe::Rss => record_rss(chain, &name, &run),
        }
        if cached.is_none() {
            prev = Some(
                serde_json::from_slice(&run.stdout)
                    .with_context(|| format!("{name} ADD result"))?,
            );
        }
    }
    Ok((total, prev.unwrap_or(Value::Null)))
}

fn record_rss(chain: &mut Chain, stage: &str, run: &proc::Run) {
    let rss = chain.rss.entry(stage.to_owned()).or_default();
    *rss = (*rss).max(run.max_rss_kib);
    for (program, kib) in &run.started_rss_kib {
        let rss = chain
            .rss
            .entry(format!("{program} (started by {stage})"))
            .or_default();
        *rss = (*rss).max(*kib);
    }
}

fn our_chain(bins: &Path, work: &Path) -> Chain {
    let stage = |name: &str, stanza: Value| Stage {
        name: name.into(),
        binary: bins.join(name),
        stanza,
    };
    Chain {
        label: "galactic (veth+ipam → route → bgp)",
        network: "bench-galactic",
        stages: vec![
            stage(
                "galactic-cni",
                json!({"type": "galactic-cni", "vpc": "1", "vpcattachment": "1", "ipam": {
                "type": "galactic-ipam", "ipv6_subnet": "fd90::/64", "ipv4_subnet": "10.90.0.0/16",
                "data_dir": work.join("ipam")}}),
            ),
            stage(
                "galactic-route",
                json!({"type": "galactic-route", "vpc": "1", "vpcattachment": "1",
                "terminations": [{"network": "fd91::/64"}, {"network": "10.91.0.0/24"}]}),
            ),
            stage(
                "galactic-bgp",
                json!({"type": "galactic-bgp", "vpc": "1", "vpcattachment": "1"}),
            ),
        ],
        add: Vec::new(),
        del: Vec::new(),
        rss: BTreeMap::new(),
        stage_add: BTreeMap::new(),
    }
}

fn reference_chain(bins: &Path, work: &Path) -> Chain {
    Chain {
        label: "reference (bridge + host-local)",
        network: "bench-reference",
        stages: vec![Stage {
            name: "bridge".into(),
            binary: bins.join("bridge"),
            stanza: json!({"type": "bridge", "bridge": "gbench0", "isGateway": true, "ipMasq": false,
                "ipam": {"type": "host-local", "dataDir": work.join("host-local"),
                         "ranges": [[{"subnet": "fd92::/64"}], [{"subnet": "10.92.0.0/16"}]]}}),
        }],
        add: Vec::new(),
        del: Vec::new(),
        rss: BTreeMap::new(),
        stage_add: BTreeMap::new(),
    }
}

fn reference_plugins() -> Result<PathBuf> {
    let dir = PathBuf::from("/usr/lib/cni");
    if !dir.join("bridge").is_file() || !dir.join("host-local").is_file() {
        eprintln!("installing the reference plugins (Debian package containernetworking-plugins)");
        let ok = Command::new("apt-get")
            .args(["install", "-y", "-qq", "containernetworking-plugins"])
            .status()?;
        if !ok.success() {
            bail!("apt-get install containernetworking-plugins failed");
        }
    }
    Ok(dir)
}

fn print_table(chains: &[Chain], iterations: usize) {
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
    println!("{iterations} attachments per chain, release builds, plugins run as processes in a throwaway host netns");
    println!(
        "{:<38} {:>10} {:>10} {:>10} {:>10}",
        "chain", "ADD med", "ADD p95", "DEL med", "DEL p95"
    );
    let mut medians = Vec::new();
    for chain in chains {
        let (am, ap) = median_p95(&mut chain.add.clone());
        let (dm, dp) = median_p95(&mut chain.del.clone());
        medians.push(am);
        println!(
            "{:<38} {:>10} {:>10} {:>10} {:>10}",
            chain.label,
            ms(am),
            ms(ap),
            ms(dm),
            ms(dp)
        );
    }
    if let [ours, reference] = medians[..] {
        println!(
            "ADD median ratio ours/reference: {:.2}",
            ours.as_secs_f64() / reference.as_secs_f64()
        );
    }
    println!(
        "\nper plugin process: ADD median (a plugin's includes the processes it starts), \
         peak RSS (own VmHWM, max over all ADD and DEL runs):"
    );
    for chain in chains {
        for (plugin, kib) in &chain.rss {
            let add = chain
                .stage_add
                .get(plugin)
                .map_or("–".to_owned(), |t| ms(median_p95(&mut t.clone()).0));
            println!("  {:<46} {:>10} {:>8} KiB", plugin, add, kib);
        }
    }
}

/// A named namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn create(name: &str) -> Result<Self> {
        let ok = Command::new("ip").args(["netns", "add", name]).status()?;
        if !ok.success() {
            bail!("ip netns add {name} failed");
        }
        let _ = Command::new("ip")
            .args(["-n", name, "link", "set", "lo", "up"])
            .status();
        Ok(Self(name.to_owned()))
    }

    fn path(&self) -> PathBuf {
        Path::new("/var/run/netns").join(&self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}
