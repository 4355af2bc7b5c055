//! `check-rss`: every plugin process's peak RSS at most half of the reference `bridge`'s, for
//! ADD, CHECK and DEL. The calls are those `cargo xtask layout` profiles (both masters, each
//! with its IPAM delegate, then galactic-route and galactic-bgp with the local publisher; and
//! `bridge` + `host-local`), each chain entry run through `rss-probe`, which reads the peak
//! (`VmHWM`) of it and of every program it starts at their exits. No time is measured: what it
//! guards is the resident size of the release binaries as built, their hot-code layout
//! included (docs/performance.md).

use crate::layout::chain;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// `cargo xtask check-rss`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The largest allowed ratio of a plugin's peak RSS to bridge's
    #[arg(long, value_name = "RATIO", default_value_t = 0.5)]
    pub ratio: f64,
}

/// The reference the budget is a fraction of.
const REFERENCE: &str = "bridge";

pub fn run(args: &Args) -> Result<()> {
    galactic_testkit::harness::require_root()?;
    let peaks = measure()?;
    judge(&peaks, args.ratio)
}

/// Builds the probe, our release plugins and the reference chain, runs every chain with each
/// entry under `rss-probe`, and returns the peaks it reported.
fn measure() -> Result<BTreeMap<(String, String), u64>> {
    let probe = crate::stage::build_rss_probe()?;
    let ours = crate::stage::build_release()?;
    let reference = crate::debian::reference_chain()?;
    let work = tempfile::tempdir()?;
    let (wrappers, reports) = (work.path().join("wrappers"), work.path().join("reports"));
    std::fs::create_dir_all(&wrappers)?;
    std::fs::create_dir_all(&reports)?;
    let launch = |name: &str, real: &Path| {
        format!(
            "{} {}/{name}.\"$CNI_COMMAND\".$$ {} \"$@\"",
            probe.display(),
            reports.display(),
            real.display()
        )
    };
    let cni = chain::ours(galactic_core::plugins::VETH_MASTER);
    let tap = chain::ours(galactic_core::plugins::TAP_MASTER);
    let bridge = chain::reference(work.path());
    for (list, bins) in [(&cni, &ours), (&tap, &ours)] {
        chain::wrappers(list, bins, &wrappers, &launch)?;
    }
    chain::wrappers(&bridge, reference, &wrappers, &launch)?;
    chain::run(
        &[(&cni, &ours), (&tap, &ours), (&bridge, reference)],
        &wrappers,
    )?;
    peaks(&reports)
}

/// Prints every peak against the budget (`ratio` × bridge's largest); fails when a plugin's
/// command reported no peak or one of ours is over.
fn judge(peaks: &BTreeMap<(String, String), u64>, ratio: f64) -> Result<()> {
    let budget_of = peaks
        .iter()
        .filter(|((program, _), _)| program == REFERENCE)
        .map(|(_, kib)| *kib)
        .max()
        .context("no peak RSS of bridge was reported")?;
    // Whole KiB, rounded down: the figure a person compares.
    let budget = (budget_of as f64 * ratio) as u64;
    println!("peak RSS (KiB); budget {budget} = {ratio} × bridge's {budget_of}");
    let mut over = Vec::new();
    for ((program, command), kib) in peaks {
        let ours = program.starts_with("galactic-");
        let mark = if ours && *kib > budget { "  OVER" } else { "" };
        println!("{program:<18} {command:<6} {kib:>6}{mark}");
        if ours && *kib > budget {
            over.push(format!("{program} {command} {kib} KiB"));
        }
    }
    for plugin in crate::stage::PLUGINS {
        for command in chain::COMMANDS {
            if !peaks.contains_key(&(plugin.to_owned(), command.to_owned())) {
                bail!("no peak RSS of {plugin} {command} was reported");
            }
        }
    }
    if !over.is_empty() {
        bail!("over {budget} KiB: {}", over.join(", "));
    }
    Ok(())
}

/// The largest peak per (program, command) in the rss-probe reports under `dir`, each named
/// `<entry>.<COMMAND>.<pid>` and holding `<program> <KiB>` lines.
fn peaks(dir: &Path) -> Result<BTreeMap<(String, String), u64>> {
    let mut peaks = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let file = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Some(command) = file.split('.').nth(1).map(str::to_owned) else {
            continue;
        };
        let report = std::fs::read_to_string(&path)?;
        for line in report.lines() {
            let (program, kib) = line
                .rsplit_once(' ')
                .and_then(|(p, k)| Some((p.to_owned(), k.parse::<u64>().ok()?)))
                .with_context(|| format!("{}: {line:?}", path.display()))?;
            let peak = peaks.entry((program, command.clone())).or_insert(0);
            *peak = (*peak).max(kib);
        }
    }
    Ok(peaks)
}
