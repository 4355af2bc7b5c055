//! `soak [--runtimes N] [--seconds S]`: N parallel runtimes (threads, each with its own pod
//! namespace) doing ADD → CHECK → DEL of the full chain (veth master with delegated IPAM →
//! galactic-route → galactic-bgp, local publisher) for distinct attachments in two shared VPCs,
//! for a bounded time. Reports operations per second, p50/p95 latency per verb, failures by CNI
//! code, and the invariants at the end (IPAM store verifies clean and empty, the node back at its
//! state after the warm-up). Code 11 (try again later) is the only acceptable failure: under lock
//! pressure a runtime retries; the runtime here then DELs and starts over. Any other failure code
//! fails the command.

use crate::crash::{unique_name, Lab, Netns, CHAIN, NETWORK};
use crate::stats::median_p95;
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the runtimes measured.
#[derive(Debug, Default)]
pub struct Report {
    /// Runtimes.
    pub runtimes: usize,
    /// Wall time of the loaded phase.
    pub elapsed: Duration,
    /// Chain-level latencies per verb.
    pub latencies: BTreeMap<&'static str, Vec<Duration>>,
    /// Failures by verb and CNI code (`-1`: no parseable reply).
    pub failures: BTreeMap<(&'static str, i64), usize>,
    /// Invariant violations at the end.
    pub violations: Vec<String>,
}

impl Report {
    /// Completed operations (chain-level ADD, CHECK, DEL).
    pub fn operations(&self) -> usize {
        self.latencies.values().map(Vec::len).sum()
    }

    fn print(&self) {
        let secs = self.elapsed.as_secs_f64();
        println!(
            "soak: {} runtimes for {secs:.1} s: {} chain operations, {:.1} ops/s",
            self.runtimes,
            self.operations(),
            self.operations() as f64 / secs.max(f64::EPSILON)
        );
        for (verb, samples) in &self.latencies {
            let (p50, p95) = median_p95(&mut samples.clone());
            println!(
                "  {verb:<5} n={:<6} p50 {:>7.1} ms  p95 {:>7.1} ms",
                samples.len(),
                p50.as_secs_f64() * 1e3,
                p95.as_secs_f64() * 1e3
            );
        }
        if self.failures.is_empty() {
            println!("  failures by code: none");
        }
        for ((verb, code), n) in &self.failures {
            println!("  failures: {verb} code {code}: {n}");
        }
        println!(
            "  invariant violations at the end: {}",
            self.violations.len()
        );
        for v in &self.violations {
            println!("    {v}");
        }
    }

    /// Fails on any failure code but 11, or any invariant violation.
    pub fn verdict(&self) -> Result<()> {
        let bad: usize = self
            .failures
            .iter()
            .filter(|((_, code), _)| *code != 11)
            .map(|(_, n)| n)
            .sum();
        if bad > 0 || !self.violations.is_empty() {
            bail!(
                "{bad} failures with a code other than 11, {} invariant violations",
                self.violations.len()
            );
        }
        Ok(())
    }
}

/// `cargo xtask soak [--runtimes N] [--seconds S]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Parallel runtimes (threads, each with its own pod namespace)
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub runtimes: usize,
    /// Length of the loaded phase, in seconds
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub seconds: u64,
}

pub fn run(args: &Args) -> Result<()> {
    let report = soak(args.runtimes, Duration::from_secs(args.seconds))?;
    report.print();
    report.verdict()
}

/// Shared by the runtimes.
struct Shared<'a> {
    lab: &'a Lab,
    stop: AtomicBool,
    report: Mutex<Report>,
}

/// Runs the soak and checks the node at the end.
pub fn soak(runtimes: usize, duration: Duration) -> Result<Report> {
    let lab = Lab::new("soak")?;
    // Warm-up: one attachment per VPC through the whole chain, so node-wide state that is
    // created once (routing-domain preparation) is part of the baseline.
    for (i, vpc) in ["1", "2"].into_iter().enumerate() {
        let pod = Netns::create(&unique_name("gsoak-warm"))?;
        let shared = Shared {
            lab: &lab,
            stop: AtomicBool::new(false),
            report: Mutex::new(Report::default()),
        };
        cycle(
            &shared,
            &pod,
            &format!("warm{i}"),
            vpc,
            &format!("{:x}", 0xf00 + i),
        )?;
        let failures = shared.report.lock().map(|r| r.failures.len()).unwrap_or(1);
        if failures > 0 {
            bail!("warm-up cycle failed");
        }
    }
    lab.gc(&[])?;
    let baseline = lab.snapshot()?;
    let shared = Shared {
        lab: &lab,
        stop: AtomicBool::new(false),
        report: Mutex::new(Report {
            runtimes,
            ..Report::default()
        }),
    };
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..runtimes)
            .map(|r| {
                let shared = &shared;
                // Threads inherit the host namespace of this thread (Lab entered it).
                scope.spawn(move || runtime(shared, r))
            })
            .collect();
        std::thread::sleep(duration);
        shared.stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a runtime thread panicked"))??;
        }
        Ok(())
    })?;
    let mut report = shared
        .report
        .into_inner()
        .map_err(|_| anyhow::anyhow!("report lock poisoned"))?;
    report.elapsed = started.elapsed();
    final_checks(&lab, &baseline, &mut report)?;
    Ok(report)
}

/// One runtime: its own pod namespace and attachment id, ADD/CHECK/DEL until told to stop.
fn runtime(shared: &Shared<'_>, r: usize) -> Result<()> {
    let pod = Netns::create(&unique_name("gsoak-pod"))?;
    let vpc = if r.is_multiple_of(2) { "1" } else { "2" };
    let att = format!("{:x}", r + 1);
    let mut n = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        n += 1;
        cycle(shared, &pod, &format!("soak{r:03}x{n:06}"), vpc, &att)?;
    }
    Ok(())
}

/// ADD → CHECK → DEL of one attachment; a failed ADD or CHECK is followed by the DEL a runtime
/// would send.
fn cycle(shared: &Shared<'_>, pod: &Netns, cid: &str, vpc: &str, att: &str) -> Result<()> {
    let netns = pod.path().display().to_string();
    let result = match chain(shared, "ADD", cid, &netns, vpc, att, None)? {
        Some(result) => result,
        None => {
            chain(shared, "DEL", cid, &netns, vpc, att, None)?;
            return Ok(());
        }
    };
    chain(shared, "CHECK", cid, &netns, vpc, att, Some(&result))?;
    chain(shared, "DEL", cid, &netns, vpc, att, Some(&result))?;
    Ok(())
}

/// One chain-level verb, timed; failures are counted by code. The ADD result, when it worked.
fn chain(
    shared: &Shared<'_>,
    verb: &'static str,
    cid: &str,
    netns: &str,
    vpc: &str,
    att: &str,
    cached: Option<&Value>,
) -> Result<Option<Value>> {
    let lab = shared.lab;
    let order: Vec<&str> = if verb == "DEL" {
        CHAIN.iter().rev().copied().collect()
    } else {
        CHAIN.to_vec()
    };
    let started = Instant::now();
    let mut prev = cached.cloned();
    for plugin in order {
        let mut conf = lab.stanza(plugin, vpc, att);
        conf["cniVersion"] = json!("1.1.0");
        conf["name"] = json!(NETWORK);
        if let Some(p) = &prev {
            conf["prevResult"] = p.clone();
        }
        let out = lab.call(plugin, &lab.env(verb, cid, netns), &conf)?;
        if !out.status.success() {
            let code = serde_json::from_slice::<Value>(&out.stdout)
                .ok()
                .and_then(|v| v["code"].as_i64())
                .unwrap_or(-1);
            if let Ok(mut report) = shared.report.lock() {
                *report.failures.entry((verb, code)).or_default() += 1;
                if code != 11 {
                    report.violations.push(format!(
                        "{verb} {cid} {plugin}: {}",
                        String::from_utf8_lossy(&out.stdout).trim()
                    ));
                }
            }
            return Ok(None);
        }
        if verb == "ADD" {
            prev = serde_json::from_slice(&out.stdout).ok();
        }
    }
    if let Ok(mut report) = shared.report.lock() {
        report
            .latencies
            .entry(verb)
            .or_default()
            .push(started.elapsed());
    }
    Ok(prev.or(Some(Value::Null)))
}

/// GC with an empty list, then: the store verifies clean and is empty, and the node equals the
/// baseline.
fn final_checks(
    lab: &Lab,
    baseline: &std::collections::BTreeSet<String>,
    report: &mut Report,
) -> Result<()> {
    lab.gc(&[])?;
    let (attachments, leases, problems) = lab.verify()?;
    if attachments != 0 || leases != 0 {
        report.violations.push(format!(
            "store holds {attachments} attachments / {leases} leases after every DEL and GC"
        ));
    }
    report
        .violations
        .extend(problems.into_iter().map(|p| format!("store: {p}")));
    let now = lab.snapshot()?;
    for extra in now.difference(baseline) {
        report.violations.push(format!("left behind: {extra}"));
    }
    for gone in baseline.difference(&now) {
        report.violations.push(format!("missing: {gone}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CI pass: 8 runtimes for 10 s; only code 11 may fail, the node ends clean.
    #[test]
    fn short_soak_keeps_the_invariants() {
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "the soak needs root under CI=true"
            );
            eprintln!("SKIPPED short_soak: not root");
            return;
        }
        let report = soak(8, Duration::from_secs(10)).expect("soak runs");
        report.print();
        assert!(report.operations() > 0, "nothing completed: {report:?}");
        report.verdict().expect("only code 11 and a clean node");
    }
}
