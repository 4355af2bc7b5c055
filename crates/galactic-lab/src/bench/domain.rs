//! What a VPC's routing domain costs now that it goes with the VPC's last attachment on the
//! node: the master's ADD into a VPC whose domain exists (another attachment of it is live)
//! against its ADD of a VPC whose last attachment's DEL removed the domain (the ADD creates it
//! again), and the DEL that keeps the domain against the DEL that removes it.
//!
//! One throwaway host, the release master (`galactic-cni` with `galactic-ipam` delegated), the
//! backend `auto` gives on this kernel. VPC K keeps one attachment for the whole run; each round
//! adds and deletes a probe pod of VPC K (its domain stays) and a probe pod of VPC E (its only
//! attachment: created by the ADD, removed by the DEL), the two taking turns at going first,
//! then spawns `/bin/true` (the floor), so a busy machine slows every case alike. Each call is a process started by the test kit's
//! runtime from a thread inside the host namespace; its wall time is taken around the call, and
//! the master's own work is its `durationMs` on the operation's closing log line.

use crate::stats::median_p95;
use galactic_testkit::harness::{Entered, Error, Result};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::process;
use galactic_testkit::runtime::{Conflist, Runtime};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// Rounds run before the measured ones.
const WARM_UP: usize = 3;
/// The pause after each case's DEL (not timed).
const SETTLE: Duration = Duration::from_millis(50);

/// The measured cases, in table order.
pub const CASES: [&str; 4] = [
    "ADD, the VPC's domain exists",
    "ADD, the domain created (after the VPC's last DEL)",
    "DEL, another attachment keeps the domain",
    "DEL of the VPC's last attachment (domain removed)",
];

/// One case's samples.
#[derive(Debug, Default, Clone)]
pub struct Case {
    /// Wall time of the plugin process.
    pub wall: Vec<Duration>,
    /// The master's own work (`durationMs` of its closing log line).
    pub own: Vec<Duration>,
}

/// What one run measured.
pub struct Report {
    /// By [`CASES`].
    pub cases: [Case; 4],
    /// `/bin/true` once per round.
    pub floor: Vec<Duration>,
    /// The backend the domains had.
    pub backend: String,
    /// Rounds measured.
    pub iterations: usize,
    /// Where the measured plugins came from.
    pub plugins: std::path::PathBuf,
    /// Measured rounds after which VPC E's domain was gone (every round with plugins that
    /// remove a domain with its last attachment; none with an earlier release's).
    pub removed_rounds: usize,
}

fn conf(vpc: &str, att: &str, v4: &str, v6: &str) -> Conflist {
    Conflist::new(
        "1.1.0",
        &format!("bench-{vpc}"),
        vec![
            json!({"type": "galactic-cni", "vpc": vpc, "vpcattachment": att,
                   "ipam": {"type": "galactic-ipam", "ipv6_subnet": v6, "ipv4_subnet": v4}}),
        ],
    )
}

/// The last closing line ("ADD: done", "DEL: done") galactic-cni logged: its own work.
fn own_work(host: &Host, verb: &str) -> Result<Duration> {
    let done = format!("{verb}: done");
    host.node
        .raw_log_lines()
        .into_iter()
        .rev()
        .find(|l| l["msg"] == done.as_str() && l["plugin"] == "galactic-cni")
        .and_then(|l| l["durationMs"].as_f64())
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .ok_or_else(|| Error::Precondition(format!("galactic-cni logged no \"{done}\"")))
}

/// One ADD and DEL of a fresh pod with `list`, timed into `add` and `del` when `keep`.
fn cycle(
    host: &Host,
    rt: &Runtime<'_>,
    list: &Conflist,
    cases: &mut [Case; 4],
    (add, del): (usize, usize),
    keep: bool,
) -> Result<()> {
    let pod = Pod::new("gbd-pod");
    let failed = |verb: &str, e: galactic_testkit::runtime::RuntimeError| Error::Plugin {
        plugin: "galactic-cni".into(),
        command: verb.into(),
        reply: e.to_string(),
    };
    let started = Instant::now();
    rt.add(list, &pod.attachment())
        .map_err(|e| failed("ADD", e))?;
    let wall = started.elapsed();
    if keep {
        cases[add].wall.push(wall);
        cases[add].own.push(own_work(host, "ADD")?);
    }
    let started = Instant::now();
    rt.del(list, &pod.attachment())
        .map_err(|e| failed("DEL", e))?;
    let wall = started.elapsed();
    if keep {
        cases[del].wall.push(wall);
        cases[del].own.push(own_work(host, "DEL")?);
    }
    Ok(())
}

/// Whether VPC `vpc`'s domain is recorded on the host.
fn recorded(host: &Host, vpc: &str) -> bool {
    let dir = host.path("state").join("routing");
    let hex = galactic_core::ident::VpcId::parse(vpc).map(|v| v.hex());
    hex.is_ok_and(|h| dir.join(format!("vpc-{h}.json")).is_file())
}

/// Runs the warm-up and `iterations` measured rounds with the release plugins in `plugins`.
pub fn run(plugins: &Path, iterations: usize) -> Result<Report> {
    let host = Host::with_plugins_from(
        "gbd-host",
        json!({"log_level": "info", "routing_domain": "auto"}),
        plugins,
        &["galactic-cni", "galactic-ipam"],
    )?;
    let _entered = Entered::new(&host.netns)?;
    let rt = Runtime::new(&host.node, &host.bin_dir, None);
    let kept = conf("K", "2", "10.201.0.0/24", "fd20:1::/64");
    let fresh = conf("E", "1", "10.202.0.0/24", "fd20:2::/64");
    let keeper = Pod::new("gbd-keep");
    rt.add(
        &conf("K", "1", "10.201.0.0/24", "fd20:1::/64"),
        &keeper.attachment(),
    )
    .map_err(|e| Error::Precondition(format!("attach the keeper: {e}")))?;
    let mut cases: [Case; 4] = Default::default();
    let mut floor = Vec::new();
    let mut removed_rounds = 0;
    for n in 0..WARM_UP + iterations {
        let keep = n >= WARM_UP;
        // The cases take turns at going first: a call right after another's DEL (its pod's
        // namespace torn down by the kernel meanwhile) is slower, whatever it does itself.
        let order = match n % 2 {
            0 => [(&kept, (0, 2)), (&fresh, (1, 3))],
            _ => [(&fresh, (1, 3)), (&kept, (0, 2))],
        };
        for (list, slots) in order {
            cycle(&host, &rt, list, &mut cases, slots, keep)?;
            // The kernel tears the probe's namespace down after the DEL, asynchronously; the
            // next call waits it out rather than paying for it.
            std::thread::sleep(SETTLE);
        }
        if !recorded(&host, "K") {
            return Err(Error::Precondition(
                "VPC K's domain must stay while its keeper is attached".into(),
            ));
        }
        if keep && !recorded(&host, "E") {
            removed_rounds += 1;
        }
        let started = Instant::now();
        process::start(process::command(Path::new("/bin/true"), &[]), b"")?.wait()?;
        if keep {
            floor.push(started.elapsed());
        }
    }
    let backend = std::fs::read_to_string(host.path("state").join("routing/backend"))
        .unwrap_or_default()
        .trim()
        .trim_matches('"')
        .to_owned();
    Ok(Report {
        cases,
        floor,
        backend,
        iterations,
        plugins: plugins.to_path_buf(),
        removed_rounds,
    })
}

/// The table: per case the wall and own-work medians and p95, and each median's ratio to the
/// case it is compared with (ADD into an existing domain; DEL keeping the domain).
pub fn table(report: &Report) -> String {
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    let mut out = format!(
        "{} rounds, galactic-cni with galactic-ipam from {} as processes in a throwaway host \
         netns, {} routing domains; times in ms\n",
        report.iterations,
        report.plugins.display(),
        report.backend
    );
    out.push_str(&format!(
        "{:<52} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7}\n",
        "case", "wall med", "wall p95", "own med", "own p95", "wall ×", "own ×"
    ));
    let medians: Vec<(f64, f64)> = report
        .cases
        .iter()
        .map(|c| {
            (
                median_p95(&mut c.wall.clone()).0.as_secs_f64(),
                median_p95(&mut c.own.clone()).0.as_secs_f64(),
            )
        })
        .collect();
    for (i, case) in report.cases.iter().enumerate() {
        let (wm, wp) = median_p95(&mut case.wall.clone());
        let (om, op) = median_p95(&mut case.own.clone());
        // ADDs against the ADD into an existing domain, DELs against the DEL that keeps it.
        let base = medians[if i < 2 { 0 } else { 2 }];
        out.push_str(&format!(
            "{:<52} {:>8} {:>8} {:>8} {:>8} {:>7.2} {:>7.2}\n",
            CASES[i],
            ms(wm),
            ms(wp),
            ms(om),
            ms(op),
            medians[i].0 / base.0,
            medians[i].1 / base.1,
        ));
    }
    let (floor, _) = median_p95(&mut report.floor.clone());
    out.push_str(&format!(
        "ratios (×): ADDs to the ADD into an existing domain, DELs to the DEL that keeps it; own: \
         the master's durationMs on its closing log line; floor (/bin/true) median {}\n\
         VPC E's domain was gone after its DEL in {} of {} rounds (0: plugins that keep a domain \
         until GC, whose E rows then join and keep an existing domain)\n",
        ms(floor),
        report.removed_rounds,
        report.iterations
    ));
    out
}
