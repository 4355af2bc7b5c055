//! `crash-campaign [--iterations N] [--seconds S] [--seed X]`: the full chain (veth master with
//! delegated IPAM → galactic-route → galactic-bgp with the local publisher) run as a runtime runs
//! it, with plugin processes SIGKILLed at random moments and at every named failpoint, and the
//! node's invariants checked after every recovery and at the end.
//!
//! Each step either adds an attachment or deletes a live one. A faulted step is recovered as a
//! runtime would: a failed or killed ADD is followed by the chain's DEL (no cached result) or, at
//! random, left to the next GC with the runtime's list of live attachments; a killed DEL is
//! retried or left to GC. After every recovery: the IPAM store verifies clean and holds exactly
//! the live attachments, no two live attachments share an address, and no host interface or
//! attachment record exists for an attachment that is not live. At the end every attachment is
//! deleted, GC runs with an empty list, and the host namespace (links, rules, routes of every
//! table, nft ruleset) and the state directory must equal their state after the warm-up cycle.
//!
//! Everything runs in a throwaway host namespace this command enters (plugins inherit it) and pod
//! namespaces it creates; the machine's own network is never touched. Debug builds are used:
//! failpoints exist only there.

use anyhow::{bail, Context, Result};
use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use nix::sched::{setns, CloneFlags};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The chain's plugins, in ADD order.
pub const CHAIN: [&str; 3] = ["galactic-cni", "galactic-route", "galactic-bgp"];
/// Every named failpoint of the chain's ADD (master, then galactic-route).
const FAILPOINTS: [(&str, &str); 11] = [
    ("galactic-cni", "after-record"),
    ("galactic-cni", "after-domain"),
    ("galactic-cni", "after-interface"),
    ("galactic-cni", "after-firewall"),
    ("galactic-cni", "after-attach"),
    ("galactic-cni", "after-ipam"),
    ("galactic-cni", "after-guest"),
    ("galactic-cni", "after-gateways"),
    ("galactic-cni", "after-host-gateway"),
    ("galactic-route", "after-route-record"),
    ("galactic-route", "after-route-1"),
];
/// The network name of every attachment.
pub const NETWORK: &str = "reliability";
/// Most attachments alive at once.
const MAX_LIVE: usize = 4;

/// `cargo xtask crash-campaign [--iterations N] [--seconds S] [--seed HEX]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Steps to run
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub iterations: usize,
    /// Stop after S seconds even when steps remain
    #[arg(long, value_name = "S")]
    pub seconds: Option<u64>,
    /// Random seed, hexadecimal with or without 0x (default: from the clock); a report names
    /// its seed, so a campaign replays
    #[arg(long, value_name = "HEX", value_parser = hex_seed)]
    pub seed: Option<u64>,
}

/// `--seed`: hexadecimal, `0x` optional.
fn hex_seed(text: &str) -> Result<u64, String> {
    u64::from_str_radix(text.trim_start_matches("0x"), 16)
        .map_err(|e| format!("takes a hex number: {e}"))
}

pub fn run(args: &Args) -> Result<()> {
    let seed = args.seed.unwrap_or_else(Rng::time_seed);
    let report = campaign(args.iterations, args.seconds, seed)?;
    report.print();
    report.verdict()
}

/// What a campaign counted.
#[derive(Debug, Default)]
pub struct Report {
    /// The random seed (replay with `--seed`).
    pub seed: u64,
    /// Steps run.
    pub steps: usize,
    /// Processes that died of SIGKILL (random or at a failpoint).
    pub kills: usize,
    /// Of which at a named failpoint.
    pub failpoint_kills: usize,
    /// Kill attempts that came after the process had already exited.
    pub missed: usize,
    /// ADDs failed on purpose at a failpoint (rollback path).
    pub failpoint_errors: usize,
    /// Recoveries after a fault (DEL or GC) that left the invariants intact.
    pub recoveries: usize,
    /// Of which by GC.
    pub gc_recoveries: usize,
    /// Things left without an owner.
    pub leaks: Vec<String>,
    /// Addresses held twice.
    pub duplicates: Vec<String>,
    /// Other invariant violations (a CHECK or clean DEL that failed, a store problem).
    pub violations: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

impl Report {
    fn print(&self) {
        println!(
            "crash campaign: {} steps in {:.1} s (seed {:#x})",
            self.steps,
            self.elapsed.as_secs_f64(),
            self.seed
        );
        println!(
            "  kills: {} ({} at named failpoints, {} random; {} attempts missed a finished process)",
            self.kills,
            self.failpoint_kills,
            self.kills - self.failpoint_kills,
            self.missed
        );
        println!(
            "  failpoint errors (rollback path): {}",
            self.failpoint_errors
        );
        println!(
            "  recoveries: {} ({} by DEL, {} by GC)",
            self.recoveries,
            self.recoveries - self.gc_recoveries,
            self.gc_recoveries
        );
        println!("  leaks found: {}", self.leaks.len());
        println!("  duplicates found: {}", self.duplicates.len());
        println!("  other violations: {}", self.violations.len());
        for line in self
            .leaks
            .iter()
            .chain(&self.duplicates)
            .chain(&self.violations)
        {
            println!("    {line}");
        }
    }

    /// Fails when any invariant failed.
    pub fn verdict(&self) -> Result<()> {
        if !self.leaks.is_empty() || !self.duplicates.is_empty() || !self.violations.is_empty() {
            bail!(
                "invariants failed: {} leaks, {} duplicates, {} violations (seed {:#x})",
                self.leaks.len(),
                self.duplicates.len(),
                self.violations.len(),
                self.seed
            );
        }
        Ok(())
    }
}

/// A small deterministic generator (xorshift64*), so a campaign replays from its seed.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// A seed from the clock.
    pub fn time_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// `<prefix>-<pid>-<n>`, unique within this process (campaigns may run in parallel tests).
pub fn unique_name(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

/// A named network namespace, deleted on drop.
pub struct Netns(String);

impl Netns {
    /// Creates `name` with `lo` up.
    pub fn create(name: &str) -> Result<Self> {
        let out = Command::new("ip").args(["netns", "add", name]).output()?;
        if !out.status.success() {
            bail!(
                "ip netns add {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ns = Self(name.to_owned());
        let _ = Command::new("ip")
            .args(["-n", name, "link", "set", "lo", "up"])
            .output();
        Ok(ns)
    }

    /// Its path (`CNI_NETNS`).
    pub fn path(&self) -> PathBuf {
        Path::new("/var/run/netns").join(&self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A throwaway node: a host namespace the calling thread enters (so every plugin it spawns runs
/// there), a node config with the local publisher, and the debug plugins.
pub struct Lab {
    /// Scratch directory: node config, state, IPAM store, log.
    pub work: tempfile::TempDir,
    /// Where the plugins are (`CNI_PATH`).
    pub bins: PathBuf,
    node_config: PathBuf,
    original: Option<File>,
    host: Option<Netns>,
}

impl Lab {
    /// Builds the debug plugins and enters a fresh host namespace.
    pub fn new(tag: &str) -> Result<Self> {
        if !nix::unistd::geteuid().is_root() {
            bail!("needs root (it creates network namespaces)");
        }
        let bins = build_debug_plugins()?;
        let work = tempfile::tempdir()?;
        let node_config = work.path().join("node.json");
        std::fs::write(
            &node_config,
            json!({"log_file": work.path().join("galactic.log"), "log_level": "info",
                   "state_dir": work.path().join("state"), "publisher": "local",
                   "routing_domain": "auto"})
            .to_string(),
        )?;
        let host = Netns::create(&unique_name(&format!("g{tag}-host")))?;
        let original = File::open("/proc/self/ns/net")?;
        setns(File::open(host.path())?, CloneFlags::CLONE_NEWNET)
            .context("enter the host namespace")?;
        Ok(Self {
            work,
            bins,
            node_config,
            original: Some(original),
            host: Some(host),
        })
    }

    /// The IPAM store directory.
    pub fn ipam_dir(&self) -> PathBuf {
        self.work.path().join("ipam")
    }

    /// The node state directory.
    pub fn state_dir(&self) -> PathBuf {
        self.work.path().join("state")
    }

    /// The stanza of `plugin` for an attachment (without cniVersion/name).
    pub fn stanza(&self, plugin: &str, vpc: &str, att: &str) -> Value {
        match plugin {
            // One pool pair per VPC: table-mode domains need node-unique gateways per VPC.
            "galactic-cni" => json!({"type": plugin, "vpc": vpc, "vpcattachment": att,
                "ipam": {"type": "galactic-ipam", "ipv6_subnet": format!("fd90:{vpc}::/64"),
                         "ipv4_subnet": format!("10.9{vpc}.0.0/16"), "data_dir": self.ipam_dir(),
                         "legacy_dir": self.work.path().join("legacy")}}),
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

    /// The environment of one plugin call.
    pub fn env(&self, command: &str, cid: &str, netns: &str) -> Vec<(String, String)> {
        let mut env = vec![
            ("CNI_COMMAND".to_owned(), command.to_owned()),
            ("CNI_CONTAINERID".to_owned(), cid.to_owned()),
            ("CNI_NETNS".to_owned(), netns.to_owned()),
            ("CNI_IFNAME".to_owned(), "eth0".to_owned()),
            ("CNI_PATH".to_owned(), self.bins.display().to_string()),
            (
                "GALACTIC_CNI_NODE_CONFIG".to_owned(),
                self.node_config.display().to_string(),
            ),
        ];
        if let Ok(path) = std::env::var("PATH") {
            env.push(("PATH".to_owned(), path));
        }
        env
    }

    /// Starts `plugin` in its own process group with `env` and `stdin`.
    pub fn spawn(&self, plugin: &str, env: &[(String, String)], stdin: &[u8]) -> Result<Child> {
        let mut child = Command::new(self.bins.join(plugin))
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("spawn {plugin}"))?;
        if let Some(mut input) = child.stdin.take() {
            // A plugin killed before reading its stdin closes the pipe; that is the point.
            let _ = input.write_all(stdin);
        }
        Ok(child)
    }

    /// Runs `plugin` to completion.
    pub fn call(&self, plugin: &str, env: &[(String, String)], conf: &Value) -> Result<Output> {
        let child = self.spawn(plugin, env, conf.to_string().as_bytes())?;
        Ok(child.wait_with_output()?)
    }

    /// GC on every plugin of the chain with `valid` as the live attachments.
    pub fn gc(&self, valid: &[String]) -> Result<()> {
        let list: Vec<Value> = valid
            .iter()
            .map(|cid| json!({"containerID": cid, "ifname": "eth0"}))
            .collect();
        for plugin in CHAIN {
            let mut conf = self.stanza(plugin, "1", "1");
            conf["cniVersion"] = json!("1.1.0");
            conf["name"] = json!(NETWORK);
            conf["cni.dev/valid-attachments"] = json!(list);
            let mut env = self.env("GC", "", "");
            // GC gets no per-attachment variables (libcni sets them empty).
            env.retain(|(k, _)| {
                !matches!(k.as_str(), "CNI_CONTAINERID" | "CNI_NETNS" | "CNI_IFNAME")
            });
            let out = self.call(plugin, &env, &conf)?;
            if !out.status.success() {
                bail!("{plugin} GC: {}", String::from_utf8_lossy(&out.stdout));
            }
        }
        Ok(())
    }

    /// `galactic-ipam verify`: (attachments, leases, problems); an error when the store does
    /// not open as it is.
    pub fn verify(&self) -> Result<(u64, u64, Vec<String>)> {
        if !self.ipam_dir().exists() {
            return Ok((0, 0, Vec::new()));
        }
        let out = Command::new(self.bins.join("galactic-ipam"))
            .args(["verify", "--data-dir"])
            .arg(self.ipam_dir())
            .output()?;
        let report: Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "galactic-ipam verify did not report (store does not open as it is): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
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

    /// Host interfaces that belong to attachments (`G…H` and their domains), by name.
    pub fn host_links(&self) -> Result<BTreeSet<String>> {
        let out = Command::new("ip").args(["-j", "link", "show"]).output()?;
        let links: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!([]));
        Ok(links
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|l| l["ifname"].as_str().map(str::to_owned))
                    .filter(|n| n != "lo")
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Everything on the node a leak could hide in, one line per item.
    pub fn snapshot(&self) -> Result<BTreeSet<String>> {
        let mut lines = BTreeSet::new();
        for argv in [
            &["-j", "link", "show"][..],
            &["-j", "-4", "rule", "show"],
            &["-j", "-6", "rule", "show"],
            &["-j", "-4", "route", "show", "table", "all"],
            &["-j", "-6", "route", "show", "table", "all"],
        ] {
            let out = Command::new("ip").args(argv).output()?;
            let items: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!([]));
            for item in items.as_array().into_iter().flatten() {
                lines.insert(format!("ip {}: {}", argv[1..].join(" "), stable(item)));
            }
        }
        let nft = Command::new("nft").args(["list", "ruleset"]).output();
        if let Ok(nft) = nft {
            for line in String::from_utf8_lossy(&nft.stdout).lines() {
                lines.insert(format!("nft: {}", line.trim()));
            }
        }
        list_files(&self.state_dir(), &self.state_dir(), &mut lines);
        Ok(lines)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(original) = self.original.take() {
            let _ = setns(original, CloneFlags::CLONE_NEWNET);
        }
        self.host.take();
    }
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

/// Files under `dir`, relative to `root`, except the IPAM store (checked by `verify`), lock files
/// (node-wide, created once, owned by nobody by design) and the published per-VPC-attachment
/// BGPAdvertisement and per-VPC BGPVRFInstance objects: DEL leaves those by design, for the
/// router's GC (docs/kubernetes.md, "Operations"). The per-pod EndpointSlices are checked.
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
        let shared = rel.contains("bgpadvertisements") || rel.contains("bgpvrfinstances");
        if rel.starts_with("ipam") || rel.ends_with("lock") || shared {
            continue;
        }
        if path.is_dir() {
            list_files(root, &path, out);
        } else {
            out.insert(format!("state file: {rel}"));
        }
    }
}

/// `cargo build` of the chain's plugins (debug: failpoints exist only there); their directory.
pub fn build_debug_plugins() -> Result<PathBuf> {
    crate::stage::build_plugins(false)
}

/// One attachment of the campaign.
struct Attachment {
    cid: String,
    vpc: String,
    att: String,
    pod: Netns,
    /// The chain's ADD result (what a runtime caches), once ADD completed.
    result: Option<Value>,
}

impl Attachment {
    fn host_ifname(&self) -> Result<String> {
        let vpc = VpcId::parse(&self.vpc)?;
        let att = AttachmentId::parse(&self.att)?;
        Ok(host_ifname(&vpc, &att))
    }
}

/// How a step is disturbed.
#[derive(Debug, Clone)]
enum Fault {
    None,
    /// SIGKILL the process of chain stage `stage` (and, with `group`, its delegate) after `delay`.
    Random {
        stage: usize,
        delay: Duration,
        group: bool,
    },
    /// `GALACTIC_FAILPOINTS=<name>:kill` for `plugin`.
    KillAt(&'static str, &'static str),
    /// `GALACTIC_FAILPOINTS=<name>` for `plugin` (the ADD fails and rolls back).
    FailAt(&'static str, &'static str),
}

/// How a chain call ended.
enum Ending {
    Done(Option<Value>),
    /// A plugin failed with this CNI reply.
    Failed(String),
    /// A plugin died of SIGKILL.
    Killed,
}

/// The campaign state.
struct Campaign<'a> {
    lab: &'a Lab,
    rng: Rng,
    live: Vec<Attachment>,
    report: Report,
    next_id: usize,
    /// Typical duration per plugin, to aim random kills inside the process's life.
    typical: BTreeMap<&'static str, Duration>,
}

/// Runs a campaign of `iterations` steps (or until `seconds` pass) and returns its counts.
pub fn campaign(iterations: usize, seconds: Option<u64>, seed: u64) -> Result<Report> {
    let lab = Lab::new("crash")?;
    let mut c = Campaign {
        lab: &lab,
        rng: Rng::new(seed),
        live: Vec::new(),
        report: Report {
            seed,
            ..Report::default()
        },
        next_id: 0,
        typical: BTreeMap::new(),
    };
    let started = Instant::now();
    let baseline = c.warm_up()?;
    let deadline = seconds.map(|s| started + Duration::from_secs(s));
    for _ in 0..iterations {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        c.step()?;
        c.report.steps += 1;
    }
    c.finish(&baseline)?;
    c.report.elapsed = started.elapsed();
    Ok(c.report)
}

impl Campaign<'_> {
    fn new_attachment(&mut self) -> Result<Attachment> {
        self.next_id += 1;
        let n = self.next_id;
        Ok(Attachment {
            cid: format!("crash{n:05}"),
            vpc: if n.is_multiple_of(2) { "1" } else { "2" }.to_owned(),
            // Attachment ids are base62; hex digits are a valid subset and stay ≤ 3 characters.
            att: format!("{:x}", n % 0xfff + 1),
            pod: Netns::create(&unique_name("gcrash-pod"))?,
            result: None,
        })
    }

    /// One clean ADD/DEL per VPC and a GC, timing each plugin; the node state afterwards is the
    /// baseline every later check compares with.
    fn warm_up(&mut self) -> Result<BTreeSet<String>> {
        for _ in 0..2 {
            let mut a = self.new_attachment()?;
            match self.add(&a, &Fault::None)? {
                Ending::Done(result) => a.result = result,
                Ending::Failed(reply) => bail!("warm-up ADD failed: {reply}"),
                Ending::Killed => bail!("warm-up ADD died"),
            }
            if !matches!(self.del(&a, &Fault::None)?, Ending::Done(_)) {
                bail!("warm-up DEL failed");
            }
        }
        self.lab.gc(&[])?;
        self.lab.snapshot()
    }

    fn pick_fault(&mut self, adding: bool) -> Fault {
        let roll = self.rng.below(100);
        if roll < 35 {
            return Fault::None;
        }
        if adding && roll < 60 {
            let (plugin, point) = FAILPOINTS[self.rng.below(FAILPOINTS.len())];
            return if self.rng.chance(75) {
                Fault::KillAt(plugin, point)
            } else {
                Fault::FailAt(plugin, point)
            };
        }
        let stage = self.rng.below(CHAIN.len());
        let typical = self
            .typical
            .get(CHAIN[stage])
            .copied()
            .unwrap_or(Duration::from_millis(20));
        // Anywhere from spawn to a little past the usual end.
        let span = (typical.as_micros() as usize * 12 / 10).max(1);
        Fault::Random {
            stage,
            delay: Duration::from_micros(self.rng.below(span) as u64),
            group: self.rng.chance(50),
        }
    }

    fn step(&mut self) -> Result<()> {
        let adding = self.live.len() < MAX_LIVE && (self.live.is_empty() || self.rng.chance(55));
        let fault = self.pick_fault(adding);
        if adding {
            let mut a = self.new_attachment()?;
            match self.add(&a, &fault)? {
                Ending::Done(result) => {
                    a.result = result;
                    self.live.push(a);
                    self.check_live()?;
                }
                ending => self.recover(a, ending)?,
            }
        } else {
            let i = self.rng.below(self.live.len());
            let a = self.live.remove(i);
            match self.del(&a, &fault)? {
                Ending::Done(_) => self.quick_check("after a clean DEL")?,
                Ending::Failed(reply) => {
                    self.report
                        .violations
                        .push(format!("DEL {} failed: {reply}", a.cid));
                }
                ending => self.recover(a, ending)?,
            }
        }
        Ok(())
    }

    /// ADD through the chain, threading prevResult, with `fault` applied.
    fn add(&mut self, a: &Attachment, fault: &Fault) -> Result<Ending> {
        let mut prev: Option<Value> = None;
        for (stage, plugin) in CHAIN.iter().enumerate() {
            let mut conf = self.lab.stanza(plugin, &a.vpc, &a.att);
            conf["cniVersion"] = json!("1.1.0");
            conf["name"] = json!(NETWORK);
            if let Some(p) = &prev {
                conf["prevResult"] = p.clone();
            }
            let env = self
                .lab
                .env("ADD", &a.cid, &a.pod.path().display().to_string());
            match self.run_stage(plugin, stage, env, &conf, fault)? {
                Ending::Done(out) => prev = out,
                other => return Ok(other),
            }
        }
        Ok(Ending::Done(prev))
    }

    /// DEL through the chain in reverse, with the cached result when there is one.
    fn del(&mut self, a: &Attachment, fault: &Fault) -> Result<Ending> {
        for (stage, plugin) in CHAIN.iter().enumerate().rev() {
            let mut conf = self.lab.stanza(plugin, &a.vpc, &a.att);
            conf["cniVersion"] = json!("1.1.0");
            conf["name"] = json!(NETWORK);
            if let Some(result) = &a.result {
                conf["prevResult"] = result.clone();
            }
            let env = self
                .lab
                .env("DEL", &a.cid, &a.pod.path().display().to_string());
            if let other @ (Ending::Failed(_) | Ending::Killed) =
                self.run_stage(plugin, stage, env, &conf, fault)?
            {
                return Ok(other);
            }
        }
        Ok(Ending::Done(None))
    }

    /// Runs one plugin, applying the part of `fault` that concerns it.
    fn run_stage(
        &mut self,
        plugin: &'static str,
        stage: usize,
        mut env: Vec<(String, String)>,
        conf: &Value,
        fault: &Fault,
    ) -> Result<Ending> {
        let mut kill_after = None;
        let mut at_failpoint = false;
        match fault {
            Fault::KillAt(p, point) if *p == plugin => {
                env.push(("GALACTIC_FAILPOINTS".into(), format!("{point}:kill")));
                at_failpoint = true;
            }
            Fault::FailAt(p, point) if *p == plugin => {
                env.push(("GALACTIC_FAILPOINTS".into(), (*point).to_owned()));
            }
            Fault::Random {
                stage: s,
                delay,
                group,
            } if *s == stage => kill_after = Some((*delay, *group)),
            _ => {}
        }
        let started = Instant::now();
        let child = self.lab.spawn(plugin, &env, conf.to_string().as_bytes())?;
        let pid = Pid::from_raw(i32::try_from(child.id()).context("pid")?);
        if let Some((delay, group)) = kill_after {
            std::thread::sleep(delay);
            // The process may have exited already (a zombie until reaped): then this is a miss.
            let _ = if group {
                killpg(pid, Signal::SIGKILL)
            } else {
                kill(pid, Signal::SIGKILL)
            };
        }
        let out = child.wait_with_output()?;
        if out.status.signal() == Some(libc::SIGKILL) {
            self.report.kills += 1;
            if at_failpoint {
                self.report.failpoint_kills += 1;
            }
            return Ok(Ending::Killed);
        }
        if kill_after.is_some() {
            self.report.missed += 1;
        } else if matches!(fault, Fault::None) {
            let entry = self.typical.entry(plugin).or_insert(started.elapsed());
            *entry = (*entry * 3 + started.elapsed()) / 4;
        }
        if !out.status.success() {
            let reply = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if matches!(fault, Fault::FailAt(p, _) if *p == plugin) {
                self.report.failpoint_errors += 1;
            }
            return Ok(Ending::Failed(format!("{plugin}: {reply}")));
        }
        let parsed = serde_json::from_slice(&out.stdout).ok();
        Ok(Ending::Done(parsed))
    }

    /// What a runtime does after a failed or killed operation: DEL the chain (retrying a
    /// killed retry), or leave the attachment to the next GC.
    fn recover(&mut self, a: Attachment, ending: Ending) -> Result<()> {
        if let Ending::Failed(reply) = &ending {
            // Only the deliberate failpoint errors are expected to fail an ADD here.
            if !reply.contains("failpoint") {
                self.report
                    .violations
                    .push(format!("{} failed without a fault: {reply}", a.cid));
            }
        }
        let by_gc = self.rng.chance(30);
        if by_gc {
            let valid: Vec<String> = self.live.iter().map(|l| l.cid.clone()).collect();
            self.lab.gc(&valid)?;
            self.report.gc_recoveries += 1;
        } else {
            // A faulted ADD has no cached result; a killed DEL is retried with the one it had.
            match self.del(&a, &Fault::None)? {
                Ending::Done(_) => {}
                Ending::Failed(reply) => {
                    self.report
                        .violations
                        .push(format!("recovery DEL of {} failed: {reply}", a.cid));
                    return Ok(());
                }
                Ending::Killed => bail!("a recovery DEL died without a fault"),
            }
        }
        let before = self.report.leaks.len() + self.report.duplicates.len();
        self.quick_check(&format!(
            "after recovering {} by {}",
            a.cid,
            if by_gc { "GC" } else { "DEL" }
        ))?;
        if self.report.leaks.len() + self.report.duplicates.len() == before {
            self.report.recoveries += 1;
        }
        Ok(())
    }

    /// CHECK of every live attachment must pass; then the quick invariants.
    fn check_live(&mut self) -> Result<()> {
        for a in &self.live {
            for plugin in CHAIN {
                let mut conf = self.lab.stanza(plugin, &a.vpc, &a.att);
                conf["cniVersion"] = json!("1.1.0");
                conf["name"] = json!(NETWORK);
                conf["prevResult"] = a.result.clone().unwrap_or(Value::Null);
                let env = self
                    .lab
                    .env("CHECK", &a.cid, &a.pod.path().display().to_string());
                let out = self.lab.call(plugin, &env, &conf)?;
                if !out.status.success() {
                    self.report.violations.push(format!(
                        "CHECK {} {plugin}: {}",
                        a.cid,
                        String::from_utf8_lossy(&out.stdout).trim()
                    ));
                }
            }
        }
        self.quick_check("after ADD")
    }

    /// The store holds exactly the live attachments, verifies clean, no address is held twice,
    /// and no host interface exists for an attachment that is not live.
    fn quick_check(&mut self, when: &str) -> Result<()> {
        let (attachments, leases, problems) = self.lab.verify()?;
        let live = self.live.len() as u64;
        if attachments != live || leases != 2 * live {
            self.report.leaks.push(format!(
                "{when}: store holds {attachments} attachments / {leases} leases for {live} live attachments"
            ));
        }
        for p in problems {
            if p.contains("overlap") || p.contains("share") {
                self.report.duplicates.push(format!("{when}: {p}"));
            } else {
                self.report.violations.push(format!("{when}: store: {p}"));
            }
        }
        let mut seen = BTreeMap::new();
        for a in &self.live {
            let ips = a
                .result
                .as_ref()
                .and_then(|r| r["ips"].as_array().cloned())
                .unwrap_or_default();
            for ip in ips {
                let addr = ip["address"].as_str().unwrap_or_default().to_owned();
                if let Some(other) = seen.insert(addr.clone(), a.cid.clone()) {
                    self.report
                        .duplicates
                        .push(format!("{when}: {addr} held by {other} and {}", a.cid));
                }
            }
        }
        let expected: BTreeSet<String> = self
            .live
            .iter()
            .map(Attachment::host_ifname)
            .collect::<Result<_>>()?;
        for link in self.lab.host_links()? {
            if link.starts_with('G') && link.ends_with('H') && !expected.contains(&link) {
                self.report.leaks.push(format!(
                    "{when}: host interface {link} has no live attachment"
                ));
            }
        }
        Ok(())
    }

    /// DEL everything, GC with an empty list; the node must be back at the baseline.
    fn finish(&mut self, baseline: &BTreeSet<String>) -> Result<()> {
        while let Some(a) = self.live.pop() {
            if let Ending::Failed(reply) = self.del(&a, &Fault::None)? {
                self.report
                    .violations
                    .push(format!("final DEL {}: {reply}", a.cid));
            }
        }
        self.lab.gc(&[])?;
        self.quick_check("at the end")?;
        let now = self.lab.snapshot()?;
        for extra in now.difference(baseline) {
            self.report
                .leaks
                .push(format!("at the end, not in the baseline: {extra}"));
        }
        for gone in baseline.difference(&now) {
            self.report
                .violations
                .push(format!("at the end, missing from the baseline: {gone}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CI pass: a short campaign with every kind of fault must find nothing.
    #[test]
    fn short_crash_campaign_finds_no_leak_or_duplicate() {
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "the crash campaign needs root under CI=true"
            );
            eprintln!("SKIPPED short_crash_campaign: not root");
            return;
        }
        let report = campaign(60, Some(60), Rng::time_seed()).expect("campaign runs");
        report.print();
        assert!(report.kills > 0, "no process was killed: {report:?}");
        report.verdict().expect("invariants hold");
    }

    /// The checks can fail: an attachment the runtime forgot (no DEL, no GC yet) is reported.
    #[test]
    fn a_forgotten_attachment_is_a_leak() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED a_forgotten_attachment_is_a_leak: not root");
            return;
        }
        let lab = Lab::new("leak").expect("lab");
        let mut c = Campaign {
            lab: &lab,
            rng: Rng::new(7),
            live: Vec::new(),
            report: Report::default(),
            next_id: 0,
            typical: BTreeMap::new(),
        };
        let a = c.new_attachment().expect("attachment");
        assert!(matches!(c.add(&a, &Fault::None), Ok(Ending::Done(_))));
        c.quick_check("forgotten").expect("check runs");
        let leaks = c.report.leaks.join("\n");
        assert!(leaks.contains("1 attachments / 2 leases"), "{leaks}");
        assert!(leaks.contains("host interface"), "{leaks}");
        assert!(matches!(c.del(&a, &Fault::None), Ok(Ending::Done(_))));
    }

    #[test]
    fn rng_is_deterministic_per_seed() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<u64> = (0..5).map(|_| a.next()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next()).collect();
        assert_eq!(xs, ys);
        assert!(xs.windows(2).all(|w| w[0] != w[1]));
    }
}
