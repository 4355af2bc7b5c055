//! The chain bench's table.

use super::{Chain, Report};
use crate::stats::Summary;
use std::fmt::Write;
use std::time::Duration;

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn summary(samples: &[Duration]) -> Summary {
    Summary::of(&mut samples.to_vec())
}

fn ratio(ours: Duration, reference: Duration) -> f64 {
    ours.as_secs_f64() / reference.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// The table of a run.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    sequential(&mut out, report);
    per_plugin(&mut out, report);
    floor(&mut out, report);
    concurrent(&mut out, &report.chains);
    out
}

fn sequential(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "{} attachments per chain, release builds, plugins run as processes in a throwaway host netns",
        report.options.iterations
    );
    let _ = writeln!(
        out,
        "{:<38} {:>10} {:>10} {:>10} {:>10}",
        "chain", "ADD med", "ADD p95", "DEL med", "DEL p95"
    );
    for chain in &report.chains {
        let (add, del) = (summary(&chain.add), summary(&chain.del));
        let _ = writeln!(
            out,
            "{:<38} {:>10} {:>10} {:>10} {:>10}",
            chain.label,
            ms(add.median),
            ms(add.p95),
            ms(del.median),
            ms(del.p95)
        );
    }
    if let [ours, reference] = &report.chains[..] {
        let _ = writeln!(
            out,
            "median ratio ours/reference: ADD {:.2}, DEL {:.2}",
            ratio(summary(&ours.add).median, summary(&reference.add).median),
            ratio(summary(&ours.del).median, summary(&reference.del).median)
        );
    }
}

fn per_plugin(out: &mut String, report: &Report) {
    let chains = &report.chains;
    let _ = writeln!(
        out,
        "\nper plugin process: ADD and DEL medians, wall time from spawn to exit (a plugin's \
         include the processes it starts) and, in brackets, its own work as it logs it (the rest \
         is process start, configuration and exit); peak RSS (own VmHWM, max over all ADD and \
         DEL runs) and its ratio to bridge's:"
    );
    let bridge = chains
        .iter()
        .flat_map(|c| c.rss.iter())
        .find(|(name, _)| name.as_str() == "bridge")
        .map(|(_, kib)| *kib);
    let _ = writeln!(
        out,
        "  {:<46} {:>20} {:>20} {:>9} {:>9}",
        "process", "ADD med (own)", "DEL med (own)", "peak RSS", "× bridge"
    );
    let name_of = |plugin: &str| plugin.split(' ').next().unwrap_or(plugin).to_owned();
    for chain in chains {
        for (plugin, kib) in &chain.rss {
            let median = |stage: Option<&Vec<Duration>>, verb: &str| {
                let wall = stage.map_or("–".to_owned(), |t| ms(summary(t).median));
                match report.own_work.get(&(name_of(plugin), verb.to_owned())) {
                    Some(own) => format!("{wall} ({:.2})", summary(own).median_ms()),
                    None => wall,
                }
            };
            let times = (
                median(chain.stage_add.get(plugin), "ADD"),
                median(chain.stage_del.get(plugin), "DEL"),
            );
            let share = bridge.map_or("–".to_owned(), |b| {
                format!("{:.2}", *kib as f64 / b.max(1) as f64)
            });
            let _ = writeln!(
                out,
                "  {:<46} {:>20} {:>20} {:>5} KiB {:>9}",
                plugin, times.0, times.1, kib, share
            );
        }
    }
}

fn floor(out: &mut String, report: &Report) {
    let (create, delete) = (summary(&report.floor.create), summary(&report.floor.delete));
    let _ = writeln!(
        out,
        "\nkernel floor (a veth pair with its peer in a pod namespace, in-process netlink, no plugin): \
         create median {}, delete median {}",
        ms(create.median),
        ms(delete.median)
    );
    for chain in &report.chains {
        let (add, del) = (summary(&chain.add), summary(&chain.del));
        let _ = writeln!(
            out,
            "  {:<38} beyond the floor: ADD {}, DEL {}",
            chain.label,
            ms(add.median.saturating_sub(create.median)),
            ms(del.median.saturating_sub(delete.median))
        );
    }
}

fn concurrent(out: &mut String, chains: &[Chain]) {
    let Some(first) = chains.iter().find_map(|c| c.concurrent.as_ref()) else {
        return;
    };
    let _ = writeln!(
        out,
        "\n{} attachments at once, {} rounds (each pod's chain ADD, then their DELs, all released together):",
        first.concurrency,
        first.rounds.len()
    );
    let _ = writeln!(
        out,
        "{:<38} {:>9} {:>10} {:>10} {:>10} {:>10}  failures",
        "chain", "ADD ops/s", "ADD p50", "ADD p95", "DEL p50", "DEL p95"
    );
    for chain in chains {
        let Some(f) = &chain.concurrent else { continue };
        let (add, del) = (summary(&f.add), summary(&f.del));
        let failures = match f.failures.is_empty() {
            true => "none".to_owned(),
            false => f
                .failures
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let _ = writeln!(
            out,
            "{:<38} {:>9.0} {:>10} {:>10} {:>10} {:>10}  {}",
            chain.label,
            f.ops_per_s(),
            ms(add.median),
            ms(add.p95),
            ms(del.median),
            ms(del.p95),
            failures
        );
    }
}
