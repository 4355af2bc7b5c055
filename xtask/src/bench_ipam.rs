//! `cargo xtask bench-ipam`: galactic-ipam against host-local, both run as processes the way a
//! runtime runs them, at several occupancies. Pre-fill goes straight to each store (galactic's
//! store API; host-local's reservation files); every measured operation is a real process.
//!
//! Options: `--samples N` (per cell, default 200), `--budget-ms MS` (time cap per cell, default
//! 4000; at least 5 samples are always taken), `--levels 0,1000,...`.

use anyhow::{bail, Context, Result};
use galactic_ipam::pool::Pool;
use galactic_ipam::store::{AttachmentKey, Store};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const POOL: &str = "10.128.0.0/14";
const NETWORK: &str = "bench";
const HOST_LOCAL: &str = "/usr/lib/cni/host-local";
const CONCURRENCY: usize = 32;

/// `cargo xtask bench-ipam [--samples N] [--budget-ms MS] [--levels L,...]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Samples per cell (at least 5 are always taken)
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub samples: usize,
    /// Time cap per cell, in milliseconds
    #[arg(long = "budget-ms", value_name = "MS", default_value_t = 4000)]
    pub budget_ms: u64,
    /// Live allocations to measure at, comma-separated
    #[arg(
        long,
        value_name = "L,...",
        value_delimiter = ',',
        default_value = "0,1000,4000,16000,64000"
    )]
    pub levels: Vec<usize>,
}

struct Options {
    samples: usize,
    budget: Duration,
    levels: Vec<usize>,
}

impl Options {
    fn from_args(args: &Args) -> Self {
        Self {
            samples: args.samples,
            budget: Duration::from_millis(args.budget_ms),
            levels: args.levels.clone(),
        }
    }
}

/// One process run.
struct Run {
    ms: f64,
    ok: bool,
    stdout: String,
}

/// Spawns `binary` with exactly `env` and writes `stdin` to it.
fn spawn(
    binary: &Path,
    env: &[(&str, String)],
    stdin: &[u8],
) -> Result<(std::process::Child, Instant)> {
    let started = Instant::now();
    let mut child = Command::new(binary)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("spawn {}", binary.display()))?;
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin);
    }
    Ok((child, started))
}

fn reap(child: std::process::Child, started: Instant) -> Result<Run> {
    let out = child.wait_with_output()?;
    Ok(Run {
        ms: started.elapsed().as_secs_f64() * 1000.0,
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}

/// Peak RSS (KiB) of one run: the process's own `VmHWM` at exit, read by `rss-probe` (a child
/// spawned from this process, or from GNU time, would carry its parent's high-water mark).
fn peak_rss_kib(binary: &Path, env: &[(&str, String)], stdin: &[u8]) -> Result<u64> {
    Ok(crate::proc::run_probed(binary, env, stdin)?.max_rss_kib)
}

fn run_once(binary: &Path, env: &[(&str, String)], stdin: &[u8]) -> Result<Run> {
    let (child, started) = spawn(binary, env, stdin)?;
    reap(child, started)
}

/// A plugin under test: how to call it and how to pre-fill its store.
trait Subject {
    fn name(&self) -> &'static str;
    fn binary(&self) -> &Path;
    fn conf(&self, prev: Option<&Value>) -> Vec<u8>;
    fn base_env(&self) -> Vec<(&'static str, String)>;
    fn prefill(&self, from: usize, to: usize) -> Result<()>;
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
    fn pool() -> Result<Pool> {
        Ok(Pool::new(POOL.parse()?, 32, None)?)
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
            "ipam": {"type": "galactic-ipam", "ipv4_subnet": POOL,
                     "data_dir": self.dir.join("ipam"), "legacy_dir": self.dir.join("legacy")}});
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
    fn prefill(&self, from: usize, to: usize) -> Result<()> {
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
    fn prefill(&self, from: usize, to: usize) -> Result<()> {
        let dir = self.dir.join(NETWORK);
        fs::create_dir_all(&dir)?;
        let base = u32::from("10.128.0.0".parse::<std::net::Ipv4Addr>()?);
        let mut last = None;
        for i in from..to {
            let ip = std::net::Ipv4Addr::from(base + 2 + i as u32);
            fs::write(dir.join(ip.to_string()), format!("fill{i:06}\r\neth0"))?;
            last = Some(ip);
        }
        if let Some(ip) = last {
            fs::write(dir.join("last_reserved_ip.0"), ip.to_string())?;
        }
        Ok(())
    }
}

/// Median, p95 and count of samples in ms.
#[derive(Clone, Copy, Default)]
struct Stats {
    median: f64,
    p95: f64,
    n: usize,
}

fn stats(mut samples: Vec<f64>) -> Stats {
    if samples.is_empty() {
        return Stats::default();
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let p95_index = ((n as f64) * 0.95).ceil() as usize;
    Stats {
        median: if n % 2 == 1 {
            samples[n / 2]
        } else {
            (samples[n / 2 - 1] + samples[n / 2]) / 2.0
        },
        p95: samples[p95_index.clamp(1, n) - 1],
        n,
    }
}

struct Cells {
    add: Stats,
    check: Stats,
    del: Stats,
    del_unknown: Stats,
    peak_rss_kib: u64,
}

/// ADD new attachments, CHECK them, DEL them (back to `level`), DEL unknown ones.
fn measure_level(subject: &dyn Subject, level: usize, opts: &Options) -> Result<Cells> {
    let bin = subject.binary();
    let mut results = Vec::new();
    let mut add = Vec::new();
    let started = Instant::now();
    while add.len() < opts.samples && (add.len() < 5 || started.elapsed() < opts.budget) {
        let cid = format!("m{level}-{}", add.len());
        let run = run_once(bin, &call_env(subject, "ADD", &cid), &subject.conf(None))?;
        if !run.ok {
            bail!("{} ADD {cid} failed: {}", subject.name(), run.stdout);
        }
        add.push(run.ms);
        results.push((cid, serde_json::from_str::<Value>(&run.stdout)?));
    }
    let timed = |command: &str, cids: &[(String, Option<&Value>)]| -> Result<Vec<f64>> {
        let mut out = Vec::new();
        for (cid, prev) in cids {
            let run = run_once(bin, &call_env(subject, command, cid), &subject.conf(*prev))?;
            if !run.ok {
                bail!("{} {command} {cid} failed: {}", subject.name(), run.stdout);
            }
            out.push(run.ms);
        }
        Ok(out)
    };
    let known: Vec<(String, Option<&Value>)> =
        results.iter().map(|(c, r)| (c.clone(), Some(r))).collect();
    let check = timed("CHECK", &known)?;
    let del = timed("DEL", &known)?;
    let unknown: Vec<(String, Option<&Value>)> = (0..results.len())
        .map(|i| (format!("never{level}-{i}"), None))
        .collect();
    let del_unknown = timed("DEL", &unknown)?;
    let mut rss = 0;
    for (command, cid) in [("ADD", "rss"), ("CHECK", "rss"), ("DEL", "rss")] {
        let env = call_env(subject, command, &format!("{cid}{level}"));
        rss = rss.max(peak_rss_kib(bin, &env, &subject.conf(None))?);
    }
    Ok(Cells {
        add: stats(add),
        check: stats(check),
        del: stats(del),
        del_unknown: stats(del_unknown),
        peak_rss_kib: rss,
    })
}

struct Burst {
    stats: Stats,
    ops_per_s: f64,
}

/// `CONCURRENCY` ADD processes started together; all must succeed with distinct addresses.
fn burst(subject: &dyn Subject, tag: &str) -> Result<Burst> {
    let bin = subject.binary();
    let started = Instant::now();
    let mut children = Vec::new();
    for i in 0..CONCURRENCY {
        let cid = format!("burst{tag}-{i}");
        children.push((
            cid.clone(),
            spawn(bin, &call_env(subject, "ADD", &cid), &subject.conf(None))?,
        ));
    }
    let mut times = Vec::new();
    let mut addresses = HashSet::new();
    let mut cids = Vec::new();
    for (cid, (child, t0)) in children {
        let run = reap(child, t0)?;
        if !run.ok {
            bail!(
                "{} concurrent ADD {cid} failed: {}",
                subject.name(),
                run.stdout
            );
        }
        let result: Value = serde_json::from_str(&run.stdout)?;
        addresses.insert(result["ips"][0]["address"].to_string());
        times.push(run.ms);
        cids.push(cid);
    }
    let wall = started.elapsed().as_secs_f64();
    if addresses.len() != CONCURRENCY {
        bail!(
            "{}: {CONCURRENCY} concurrent ADDs got only {} distinct addresses",
            subject.name(),
            addresses.len()
        );
    }
    for cid in cids {
        run_once(bin, &call_env(subject, "DEL", &cid), &subject.conf(None))?;
    }
    Ok(Burst {
        stats: stats(times),
        ops_per_s: CONCURRENCY as f64 / wall,
    })
}

fn floor(opts: &Options) -> Result<Stats> {
    let env = vec![("CNI_COMMAND", "ADD".to_owned())];
    let samples = (0..opts.samples)
        .map(|_| run_once(Path::new("/bin/true"), &env, b"{}").map(|r| r.ms))
        .collect::<Result<Vec<_>>>()?;
    Ok(stats(samples))
}

/// `CONCURRENCY` `/bin/true` processes started together: what the machine's cores allow at best.
fn floor_burst() -> Result<Burst> {
    let env = vec![("CNI_COMMAND", "ADD".to_owned())];
    let started = Instant::now();
    let children = (0..CONCURRENCY)
        .map(|_| spawn(Path::new("/bin/true"), &env, b"{}"))
        .collect::<Result<Vec<_>>>()?;
    let times = children
        .into_iter()
        .map(|(child, t0)| reap(child, t0).map(|r| r.ms))
        .collect::<Result<Vec<_>>>()?;
    Ok(Burst {
        stats: stats(times),
        ops_per_s: CONCURRENCY as f64 / started.elapsed().as_secs_f64(),
    })
}

/// The staged release build (static, see `stage::build_release`), as nodes run it.
fn build_release() -> Result<PathBuf> {
    Ok(crate::stage::build_release()?.join("galactic-ipam"))
}

/// `path` from the Debian package `package`, installed when missing.
fn debian_tool(path: &str, package: &str) -> Option<PathBuf> {
    let path = PathBuf::from(path);
    if !path.exists() {
        eprintln!("bench-ipam: installing {package}");
        let install = |update: bool| {
            if update {
                let _ = Command::new("apt-get").args(["update", "-qq"]).status();
            }
            Command::new("apt-get")
                .args(["install", "-y", "-qq", package])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        if !install(false) && !install(true) {
            eprintln!("bench-ipam: could not install {package}");
        }
    }
    path.exists().then_some(path)
}

/// Runs the benchmark and prints the Markdown table.
pub fn run(args: &Args) -> Result<()> {
    let opts = Options::from_args(args);
    let ours_bin = build_release()?;
    let tmp = tempfile::tempdir()?;
    let ours = Galactic {
        binary: ours_bin,
        dir: tmp.path().join("galactic"),
    };
    fs::create_dir_all(&ours.dir)?;
    fs::write(
        ours.dir.join("node.json"),
        json!({"log_file": ours.dir.join("galactic.log"), "state_dir": ours.dir}).to_string(),
    )?;
    crate::proc::build_probe()?;
    let theirs = debian_tool(HOST_LOCAL, "containernetworking-plugins").map(|binary| HostLocal {
        binary,
        dir: tmp.path().join("host-local"),
    });
    let floor = floor(&opts)?;
    let burst_floor = floor_burst()?;
    let floor_rss = peak_rss_kib(Path::new("/bin/true"), &[], b"")?;
    eprintln!(
        "bench-ipam: floor (/bin/true) median {:.2} ms",
        floor.median
    );
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
        let mine = measure_level(&ours, level, &opts)?;
        rss = rss.max(mine.peak_rss_kib);
        let other = theirs
            .as_ref()
            .map(|h| measure_level(h, level, &opts))
            .transpose()?;
        eprintln!("bench-ipam: level {level} done");
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
    print!(
        "{}",
        table(floor, &burst_floor, &rows, &bursts, (rss, floor_rss))
    );
    Ok(())
}

fn fmt_ms(s: Stats) -> String {
    format!("{:.2} / {:.2}", s.median, s.p95)
}

fn ratio(a: Stats, b: Option<Stats>) -> String {
    b.filter(|b| b.median > 0.0)
        .map_or("n/a".into(), |b| format!("{:.2}", a.median / b.median))
}

fn table(
    floor: Stats,
    burst_floor: &Burst,
    rows: &[(usize, Cells, Option<Cells>)],
    bursts: &[(usize, Burst, Option<Burst>)],
    (rss, floor_rss): (u64, u64),
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Spawn floor (`/bin/true`, same harness): median {:.2} ms, p95 {:.2} ms ({} runs)\n\n",
        floor.median, floor.p95, floor.n
    ));
    out.push_str("| live | op | galactic-ipam median / p95 ms | host-local median / p95 ms | ours/host-local | ours/floor | samples (ours, host-local) | ours peak RSS MiB |\n");
    out.push_str("|---:|---|---:|---:|---:|---:|---|---:|\n");
    for (level, mine, other) in rows {
        let ops: [(&str, Stats, Option<Stats>); 4] = [
            ("ADD", mine.add, other.as_ref().map(|o| o.add)),
            ("CHECK", mine.check, other.as_ref().map(|o| o.check)),
            ("DEL", mine.del, other.as_ref().map(|o| o.del)),
            (
                "DEL unknown",
                mine.del_unknown,
                other.as_ref().map(|o| o.del_unknown),
            ),
        ];
        for (name, m, o) in ops {
            out.push_str(&format!(
                "| {level} | {name} | {} | {} | {} | {:.2} | {}, {} | {:.1} |\n",
                fmt_ms(m),
                o.map_or("n/a".into(), fmt_ms),
                ratio(m, o),
                m.median / floor.median,
                m.n,
                o.map_or(0, |o| o.n),
                mine.peak_rss_kib as f64 / 1024.0,
            ));
        }
    }
    out.push_str(&format!(
        "\n{CONCURRENCY} concurrent ADD processes (all succeeded, all addresses distinct):\n\n"
    ));
    out.push_str("| live | galactic-ipam median / p95 ms | ops/s | host-local median / p95 ms | ops/s | ours p95 / floor |\n");
    out.push_str("|---:|---:|---:|---:|---:|---:|\n");
    for (level, mine, other) in bursts {
        out.push_str(&format!(
            "| {level} | {} | {:.0} | {} | {} | {:.1} |\n",
            fmt_ms(mine.stats),
            mine.ops_per_s,
            other.as_ref().map_or("n/a".into(), |o| fmt_ms(o.stats)),
            other
                .as_ref()
                .map_or("n/a".into(), |o| format!("{:.0}", o.ops_per_s)),
            mine.stats.p95 / floor.median,
        ));
    }
    out.push_str(&format!(
        "| ({CONCURRENCY} × `/bin/true`) | {} | {:.0} | | | {:.1} |\n",
        fmt_ms(burst_floor.stats),
        burst_floor.ops_per_s,
        burst_floor.stats.p95 / floor.median,
    ));
    out.push_str(&format!(
        "\nPeak RSS of one galactic-ipam invocation (own VmHWM; max of ADD, CHECK, DEL at every level): \
         {:.1} MiB (`/bin/true` measured the same way: {:.1} MiB)\n",
        rss as f64 / 1024.0,
        floor_rss as f64 / 1024.0
    ));
    out
}
