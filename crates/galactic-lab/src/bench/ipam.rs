//! galactic-ipam against host-local, both run as processes the way a runtime runs them, at
//! several occupancies. Pre-fill goes straight to each store (galactic's store API; host-local's
//! reservation files); every measured operation is a real process.

use crate::stats::Summary;
use galactic_ipam::pool::Pool;
use galactic_ipam::store::{AttachmentKey, Store};
use galactic_testkit::harness::{json, Error};
use galactic_testkit::process::{self, Running};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the IPAM bench can fail with: the harness's failures, and pre-filling galactic-ipam's
/// store through its API.
#[derive(Debug, thiserror::Error)]
pub enum IpamBenchError {
    /// A process, a file or an invariant.
    #[error(transparent)]
    Harness(#[from] Error),
    /// The store could not be pre-filled.
    #[error("pre-fill the galactic-ipam store: {0}")]
    Store(#[from] galactic_ipam::store::StoreError),
    /// The bench's pool is refused.
    #[error("bench pool: {0}")]
    Pool(#[from] galactic_ipam::pool::PoolError),
}

type Result<T, E = Error> = std::result::Result<T, E>;
/// What pre-filling the store returns.
type Prefilled<T> = std::result::Result<T, IpamBenchError>;

const POOL: &str = "10.128.0.0/14";
const NETWORK: &str = "bench";
/// Processes started together in a burst.
pub const CONCURRENCY: usize = 32;

/// How much to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// Samples per cell.
    pub samples: usize,
    /// Time cap per cell (at least 5 samples are always taken).
    pub budget: Duration,
    /// Live allocations to measure at.
    pub levels: Vec<usize>,
}

/// What is measured, built by the caller.
pub struct Paths<'a> {
    /// Our release `galactic-ipam`.
    pub ours: &'a Path,
    /// `host-local`, when it could be installed.
    pub host_local: Option<&'a Path>,
    /// The `rss-probe` launcher.
    pub probe: &'a Path,
}

/// One process run: wall time, success, stdout.
struct Run {
    elapsed: Duration,
    ok: bool,
    stdout: String,
}

impl From<process::Finished> for Run {
    fn from(f: process::Finished) -> Self {
        Self {
            elapsed: f.elapsed,
            ok: f.status.success(),
            stdout: String::from_utf8_lossy(&f.stdout).into_owned(),
        }
    }
}

fn spawn(binary: &Path, env: &[(&str, String)], stdin: &[u8]) -> Result<Running> {
    process::start(process::command(binary, env), stdin)
}

fn run_once(binary: &Path, env: &[(&str, String)], stdin: &[u8]) -> Result<Run> {
    Ok(spawn(binary, env, stdin)?.wait()?.into())
}

/// A plugin under test: how to call it and how to pre-fill its store.
trait Subject {
    fn name(&self) -> &'static str;
    fn binary(&self) -> &Path;
    fn conf(&self, prev: Option<&Value>) -> Vec<u8>;
    fn base_env(&self) -> Vec<(&'static str, String)>;
    fn prefill(&self, from: usize, to: usize) -> Prefilled<()>;
}

fn call_env(subject: &dyn Subject, command: &str, cid: &str) -> Vec<(&'static str, String)> {
    let mut env = subject.base_env();
    env.extend([
        ("CNI_COMMAND", command.to_owned()),
        ("CNI_CONTAINERID", cid.to_owned()),
        ("CNI_NETNS", "/var/run/netns/bench".to_owned()),
        ("CNI_IFNAME", "eth0".to_owned()),
        ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni".to_owned()),
    ]);
    env
}

struct Galactic {
    binary: PathBuf,
    dir: PathBuf,
}

impl Galactic {
    fn pool() -> Prefilled<Pool> {
        let cidr = POOL
            .parse()
            .map_err(|e| Error::Precondition(format!("bench pool {POOL}: {e}")))?;
        Ok(Pool::new(cidr, 32, None)?)
    }
}

impl Subject for Galactic {
    fn name(&self) -> &'static str {
        "galactic-ipam"
    }
    fn binary(&self) -> &Path {
        &self.binary
    }
    fn conf(&self, prev: Option<&Value>) -> Vec<u8> {
        let mut conf = json!({"cniVersion": "1.0.0", "name": NETWORK, "type": "galactic-cni",
            "ipam": {"type": "galactic-ipam", "ipv4_subnet": POOL}});
        if let Some(prev) = prev {
            conf["prevResult"] = prev.clone();
        }
        conf.to_string().into_bytes()
    }
    fn base_env(&self) -> Vec<(&'static str, String)> {
        vec![(
            "GALACTIC_CNI_NODE_CONFIG",
            self.dir.join("node.json").display().to_string(),
        )]
    }
    fn prefill(&self, from: usize, to: usize) -> Prefilled<()> {
        let mut store = Store::open_or_create(&self.dir.join("ipam"), Duration::from_secs(30))?;
        let keys: Vec<AttachmentKey> = (from..to)
            .map(|i| AttachmentKey {
                network: NETWORK.into(),
                container_id: format!("fill{i:06}"),
                ifname: "eth0".into(),
            })
            .collect();
        for chunk in keys.chunks(4000) {
            store.allocate_batch(chunk, &[Self::pool()?], &self.dir.join("legacy"))?;
        }
        Ok(())
    }
}

struct HostLocal {
    binary: PathBuf,
    dir: PathBuf,
}

impl Subject for HostLocal {
    fn name(&self) -> &'static str {
        "host-local"
    }
    fn binary(&self) -> &Path {
        &self.binary
    }
    fn conf(&self, _prev: Option<&Value>) -> Vec<u8> {
        json!({"cniVersion": "1.0.0", "name": NETWORK, "type": "bridge",
            "ipam": {"type": "host-local", "dataDir": self.dir, "ranges": [[{"subnet": POOL}]]}})
        .to_string()
        .into_bytes()
    }
    fn base_env(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// host-local's layout: one file per reserved IP named by the IP, content "<id>\r\n<ifname>".
    fn prefill(&self, from: usize, to: usize) -> Prefilled<()> {
        let write = |path: PathBuf, text: String| {
            fs::write(&path, text).map_err(galactic_testkit::harness::io(format!(
                "write {}",
                path.display()
            )))
        };
        let dir = self.dir.join(NETWORK);
        fs::create_dir_all(&dir)
            .map_err(galactic_testkit::harness::io("create the host-local store"))?;
        let base = u32::from(std::net::Ipv4Addr::new(10, 128, 0, 0));
        let mut last = None;
        for i in from..to {
            let ip = std::net::Ipv4Addr::from(base + 2 + i as u32);
            write(dir.join(ip.to_string()), format!("fill{i:06}\r\neth0"))?;
            last = Some(ip);
        }
        if let Some(ip) = last {
            write(dir.join("last_reserved_ip.0"), ip.to_string())?;
        }
        Ok(())
    }
}

/// One occupancy level of one subject.
pub struct Cells {
    /// ADD of new attachments.
    pub add: Summary,
    /// CHECK of them.
    pub check: Summary,
    /// DEL of them.
    pub del: Summary,
    /// DEL of attachments never added.
    pub del_unknown: Summary,
    /// Peak RSS of one invocation (own VmHWM; max of ADD, CHECK, DEL), KiB.
    pub peak_rss_kib: u64,
}

/// ADD new attachments, CHECK them, DEL them (back to `level`), DEL unknown ones.
fn measure_level(
    subject: &dyn Subject,
    level: usize,
    opts: &Options,
    probe: &Path,
) -> Prefilled<Cells> {
    let bin = subject.binary();
    let mut results = Vec::new();
    let mut add = Vec::new();
    let started = Instant::now();
    while add.len() < opts.samples && (add.len() < 5 || started.elapsed() < opts.budget) {
        let cid = format!("m{level}-{}", add.len());
        let run = run_once(bin, &call_env(subject, "ADD", &cid), &subject.conf(None))?;
        if !run.ok {
            return Err(failed(subject, "ADD", &cid, &run).into());
        }
        add.push(run.elapsed);
        let result: Value = serde_json::from_str(&run.stdout)
            .map_err(json(format!("{} ADD result", subject.name())))?;
        results.push((cid, result));
    }
    let timed = |command: &str, cids: &[(String, Option<&Value>)]| -> Result<Vec<Duration>> {
        let mut out = Vec::new();
        for (cid, prev) in cids {
            let run = run_once(bin, &call_env(subject, command, cid), &subject.conf(*prev))?;
            if !run.ok {
                return Err(failed(subject, command, cid, &run));
            }
            out.push(run.elapsed);
        }
        Ok(out)
    };
    let known: Vec<(String, Option<&Value>)> =
        results.iter().map(|(c, r)| (c.clone(), Some(r))).collect();
    let mut check = timed("CHECK", &known)?;
    let mut del = timed("DEL", &known)?;
    let unknown: Vec<(String, Option<&Value>)> = (0..results.len())
        .map(|i| (format!("never{level}-{i}"), None))
        .collect();
    let mut del_unknown = timed("DEL", &unknown)?;
    let mut rss = 0;
    for command in ["ADD", "CHECK", "DEL"] {
        let env = call_env(subject, command, &format!("rss{level}"));
        let probed = process::run_probed(probe, bin, &env, &subject.conf(None))?;
        rss = rss.max(probed.finished.max_rss_kib);
    }
    Ok(Cells {
        add: Summary::of(&mut add),
        check: Summary::of(&mut check),
        del: Summary::of(&mut del),
        del_unknown: Summary::of(&mut del_unknown),
        peak_rss_kib: rss,
    })
}

fn failed(subject: &dyn Subject, command: &str, cid: &str, run: &Run) -> Error {
    Error::Plugin {
        plugin: subject.name().into(),
        command: format!("{command} {cid}"),
        reply: run.stdout.clone(),
    }
}

/// `CONCURRENCY` processes started together.
pub struct Burst {
    /// Their wall times.
    pub stats: Summary,
    /// Processes per second over the burst.
    pub ops_per_s: f64,
}

/// `CONCURRENCY` ADD processes started together; all must succeed with distinct addresses.
fn burst(subject: &dyn Subject, tag: &str) -> Result<Burst> {
    let bin = subject.binary();
    let started = Instant::now();
    let mut children = Vec::new();
    for i in 0..CONCURRENCY {
        let cid = format!("burst{tag}-{i}");
        let child = spawn(bin, &call_env(subject, "ADD", &cid), &subject.conf(None))?;
        children.push((cid, child));
    }
    let mut times = Vec::new();
    let mut addresses = HashSet::new();
    let mut cids = Vec::new();
    for (cid, child) in children {
        let run = Run::from(child.wait()?);
        if !run.ok {
            return Err(failed(subject, "concurrent ADD", &cid, &run));
        }
        let result: Value = serde_json::from_str(&run.stdout)
            .map_err(json(format!("{} ADD result", subject.name())))?;
        addresses.insert(result["ips"][0]["address"].to_string());
        times.push(run.elapsed);
        cids.push(cid);
    }
    let wall = started.elapsed().as_secs_f64();
    if addresses.len() != CONCURRENCY {
        return Err(Error::Invariants(format!(
            "{}: {CONCURRENCY} concurrent ADDs got only {} distinct addresses",
            subject.name(),
            addresses.len()
        )));
    }
    for cid in cids {
        run_once(bin, &call_env(subject, "DEL", &cid), &subject.conf(None))?;
    }
    Ok(Burst {
        stats: Summary::of(&mut times),
        ops_per_s: CONCURRENCY as f64 / wall,
    })
}

const TRUE: &str = "/bin/true";

fn floor(opts: &Options) -> Result<Summary> {
    let env = vec![("CNI_COMMAND", "ADD".to_owned())];
    let mut samples = (0..opts.samples)
        .map(|_| run_once(Path::new(TRUE), &env, b"{}").map(|r| r.elapsed))
        .collect::<Result<Vec<_>>>()?;
    Ok(Summary::of(&mut samples))
}

/// `CONCURRENCY` `/bin/true` processes started together: what the machine's cores allow at best.
fn floor_burst() -> Result<Burst> {
    let env = vec![("CNI_COMMAND", "ADD".to_owned())];
    let started = Instant::now();
    let children = (0..CONCURRENCY)
        .map(|_| spawn(Path::new(TRUE), &env, b"{}"))
        .collect::<Result<Vec<_>>>()?;
    let mut times = children
        .into_iter()
        .map(|child| child.wait().map(|r| r.elapsed))
        .collect::<Result<Vec<_>>>()?;
    Ok(Burst {
        stats: Summary::of(&mut times),
        ops_per_s: CONCURRENCY as f64 / started.elapsed().as_secs_f64(),
    })
}

/// Everything one run measured.
pub struct Measured {
    /// `/bin/true`, same harness.
    pub floor: Summary,
    /// `CONCURRENCY` × `/bin/true`.
    pub burst_floor: Burst,
    /// Per level: ours, and host-local's when it ran.
    pub rows: Vec<(usize, Cells, Option<Cells>)>,
    /// Bursts at levels 0 and 4000: ours, and host-local's.
    pub bursts: Vec<(usize, Burst, Option<Burst>)>,
    /// Our peak RSS over every level, and `/bin/true`'s measured the same way, KiB.
    pub rss: (u64, u64),
}

impl Galactic {
    /// galactic-ipam with a store and node config of its own under `dir`.
    fn prepare(binary: &Path, dir: &Path) -> Prefilled<Self> {
        fs::create_dir_all(dir)
            .map_err(galactic_testkit::harness::io("create the store directory"))?;
        super::write_node_config(
            &dir.join("node.json"),
            &json!({"log_file": dir.join("galactic.log"), "state_dir": dir,
                    "ipam_data_dir": dir.join("ipam"), "ipam_legacy_dir": dir.join("legacy")}),
        )?;
        Ok(Self {
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
        })
    }
}

/// Runs the benchmark; `progress` hears of each finished step.
pub fn run(paths: &Paths<'_>, opts: &Options, progress: &dyn Fn(&str)) -> Prefilled<Measured> {
    let tmp =
        tempfile::tempdir().map_err(galactic_testkit::harness::io("create a work directory"))?;
    let ours = Galactic::prepare(paths.ours, &tmp.path().join("galactic"))?;
    let theirs = paths.host_local.map(|binary| HostLocal {
        binary: binary.to_path_buf(),
        dir: tmp.path().join("host-local"),
    });
    let floor = floor(opts)?;
    let burst_floor = floor_burst()?;
    let floor_rss = process::run_probed(paths.probe, Path::new(TRUE), &[], b"")?
        .finished
        .max_rss_kib;
    progress(&format!(
        "floor (/bin/true) median {:.2} ms",
        floor.median_ms()
    ));
    let mut rows = Vec::new();
    let mut bursts = Vec::new();
    let mut filled = 0;
    let mut rss = 0;
    for &level in &opts.levels {
        ours.prefill(filled, level)?;
        if let Some(h) = &theirs {
            h.prefill(filled, level)?;
        }
        filled = filled.max(level);
        let mine = measure_level(&ours, level, opts, paths.probe)?;
        rss = rss.max(mine.peak_rss_kib);
        let other = theirs
            .as_ref()
            .map(|h| measure_level(h, level, opts, paths.probe))
            .transpose()?;
        progress(&format!("level {level} done"));
        if level == 0 || level == 4000 {
            let b_mine = burst(&ours, &level.to_string())?;
            let b_other = theirs
                .as_ref()
                .map(|h| burst(h, &level.to_string()))
                .transpose()?;
            bursts.push((level, b_mine, b_other));
        }
        rows.push((level, mine, other));
    }
    Ok(Measured {
        floor,
        burst_floor,
        rows,
        bursts,
        rss: (rss, floor_rss),
    })
}

fn fmt_ms(s: Summary) -> String {
    format!("{:.2} / {:.2}", s.median_ms(), s.p95_ms())
}

fn ratio(a: Summary, b: Option<Summary>) -> String {
    b.filter(|b| b.median > Duration::ZERO)
        .map_or("n/a".into(), |b| {
            format!("{:.2}", a.median_ms() / b.median_ms())
        })
}

/// The Markdown tables.
pub fn table(m: &Measured) -> String {
    let floor = m.floor;
    let mut out = format!(
        "Spawn floor (`/bin/true`, same harness): median {:.2} ms, p95 {:.2} ms ({} runs)\n\n",
        floor.median_ms(),
        floor.p95_ms(),
        floor.n
    );
    out.push_str(&level_rows(m));
    out.push_str(&burst_rows(m));
    let (rss, floor_rss) = m.rss;
    out.push_str(&format!(
        "\nPeak RSS of one galactic-ipam invocation (own VmHWM; max of ADD, CHECK, DEL at every level): \
         {:.1} MiB (`/bin/true` measured the same way: {:.1} MiB)\n",
        rss as f64 / 1024.0,
        floor_rss as f64 / 1024.0
    ));
    out
}

/// The table of one operation per row at every fill level.
fn level_rows(m: &Measured) -> String {
    let floor = m.floor;
    let mut out = String::from("| live | op | galactic-ipam median / p95 ms | host-local median / p95 ms | ours/host-local | ours/floor | samples (ours, host-local) | ours peak RSS MiB |\n");
    out.push_str("|---:|---|---:|---:|---:|---:|---|---:|\n");
    for (level, mine, other) in &m.rows {
        let ops: [(&str, Summary, Option<Summary>); 4] = [
            ("ADD", mine.add, other.as_ref().map(|o| o.add)),
            ("CHECK", mine.check, other.as_ref().map(|o| o.check)),
            ("DEL", mine.del, other.as_ref().map(|o| o.del)),
            (
                "DEL unknown",
                mine.del_unknown,
                other.as_ref().map(|o| o.del_unknown),
            ),
        ];
        for (name, s, o) in ops {
            out.push_str(&format!(
                "| {level} | {name} | {} | {} | {} | {:.2} | {}, {} | {:.1} |\n",
                fmt_ms(s),
                o.map_or("n/a".into(), fmt_ms),
                ratio(s, o),
                s.median_ms() / floor.median_ms(),
                s.n,
                o.map_or(0, |o| o.n),
                mine.peak_rss_kib as f64 / 1024.0,
            ));
        }
    }
    out
}

/// The table of the concurrent bursts, with the floor's burst last.
fn burst_rows(m: &Measured) -> String {
    let floor = m.floor;
    let mut out = format!(
        "\n{CONCURRENCY} concurrent ADD processes (all succeeded, all addresses distinct):\n\n"
    );
    out.push_str("| live | galactic-ipam median / p95 ms | ops/s | host-local median / p95 ms | ops/s | ours p95 / floor |\n");
    out.push_str("|---:|---:|---:|---:|---:|---:|\n");
    for (level, mine, other) in &m.bursts {
        out.push_str(&format!(
            "| {level} | {} | {:.0} | {} | {} | {:.1} |\n",
            fmt_ms(mine.stats),
            mine.ops_per_s,
            other.as_ref().map_or("n/a".into(), |o| fmt_ms(o.stats)),
            other
                .as_ref()
                .map_or("n/a".into(), |o| format!("{:.0}", o.ops_per_s)),
            mine.stats.p95_ms() / floor.median_ms(),
        ));
    }
    out.push_str(&format!(
        "| ({CONCURRENCY} × `/bin/true`) | {} | {:.0} | | | {:.1} |\n",
        fmt_ms(m.burst_floor.stats),
        m.burst_floor.ops_per_s,
        m.burst_floor.stats.p95_ms() / floor.median_ms(),
    ));
    out
}
