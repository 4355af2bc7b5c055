//! The soak: N parallel runtimes (threads, each with its own pod namespace and its own test kit
//! [`Runtime`]) doing ADD → CHECK → DEL of the full chain for distinct attachments in two shared
//! VPCs, for a bounded time. Reports operations per second, p50/p95 latency per verb, failures by
//! CNI code, and the invariants at the end (IPAM store verifies clean and empty, the node back at
//! its state after the warm-up). Code 11 (try again later) is the only acceptable failure: under
//! lock pressure a runtime retries; the runtime here then DELs and starts over. Any other failure
//! code fails the soak.

use super::Lab;
use crate::stats::median_p95;
use galactic_testkit::harness::{Error, Result};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::{Attachment, Runtime, RuntimeError};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
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

    /// Fails on any failure code but 11, or any invariant violation.
    pub fn verdict(&self) -> Result<()> {
        let bad: usize = self
            .failures
            .iter()
            .filter(|((_, code), _)| *code != 11)
            .map(|(_, n)| n)
            .sum();
        if bad > 0 || !self.violations.is_empty() {
            return Err(Error::Invariants(format!(
                "{bad} failures with a code other than 11, {} invariant violations",
                self.violations.len()
            )));
        }
        Ok(())
    }

    /// Counts a failed chain operation; anything but code 11 is also a violation.
    fn failed(&mut self, verb: &'static str, cid: &str, e: &RuntimeError) {
        let code = e.code().and_then(|c| i64::try_from(c).ok()).unwrap_or(-1);
        *self.failures.entry((verb, code)).or_default() += 1;
        if code != 11 {
            self.violations.push(format!("{verb} {cid}: {e}"));
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed.as_secs_f64();
        writeln!(
            f,
            "soak: {} runtimes for {secs:.1} s: {} chain operations, {:.1} ops/s",
            self.runtimes,
            self.operations(),
            self.operations() as f64 / secs.max(f64::EPSILON)
        )?;
        for (verb, samples) in &self.latencies {
            let (p50, p95) = median_p95(&mut samples.clone());
            writeln!(
                f,
                "  {verb:<5} n={:<6} p50 {:>7.1} ms  p95 {:>7.1} ms",
                samples.len(),
                p50.as_secs_f64() * 1e3,
                p95.as_secs_f64() * 1e3
            )?;
        }
        if self.failures.is_empty() {
            writeln!(f, "  failures by code: none")?;
        }
        for ((verb, code), n) in &self.failures {
            writeln!(f, "  failures: {verb} code {code}: {n}")?;
        }
        write!(
            f,
            "  invariant violations at the end: {}",
            self.violations.len()
        )?;
        for v in &self.violations {
            write!(f, "\n    {v}")?;
        }
        Ok(())
    }
}

/// Shared by the runtimes.
struct Shared<'a> {
    lab: &'a Lab,
    stop: AtomicBool,
    report: Mutex<Report>,
}

impl<'a> Shared<'a> {
    fn new(lab: &'a Lab, report: Report) -> Self {
        Self {
            lab,
            stop: AtomicBool::new(false),
            report: Mutex::new(report),
        }
    }

    fn record(&self, f: impl FnOnce(&mut Report)) {
        if let Ok(mut report) = self.report.lock() {
            f(&mut report);
        }
    }
}

/// Runs the soak on `lab` (on the thread that created it) and checks the node at the end.
pub fn soak(lab: &Lab, runtimes: usize, duration: Duration) -> Result<Report> {
    // Warm-up: one attachment per VPC through the whole chain, so node-wide state that is
    // created once (routing-domain preparation) is part of the baseline.
    for (i, vpc) in ["1", "2"].into_iter().enumerate() {
        let pod = TestNetns::new("gsoak-warm");
        let shared = Shared::new(lab, Report::default());
        let runtime = lab.runtime();
        let att = format!("{:x}", 0xf00 + i);
        cycle(&shared, &runtime, &pod, &format!("warm{i}"), vpc, &att);
        let failures = shared.report.lock().map(|r| r.failures.len()).unwrap_or(1);
        if failures > 0 {
            return Err(Error::Precondition("warm-up cycle failed".into()));
        }
    }
    lab.gc(&[])?;
    let baseline = lab.snapshot();
    let shared = Shared::new(
        lab,
        Report {
            runtimes,
            ..Report::default()
        },
    );
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..runtimes)
            .map(|r| {
                let shared = &shared;
                // Threads inherit the host namespace of this thread (the lab entered it).
                scope.spawn(move || runtime_loop(shared, r))
            })
            .collect();
        std::thread::sleep(duration);
        shared.stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join()
                .map_err(|_| Error::Precondition("a runtime thread panicked".into()))?;
        }
        Ok(())
    })?;
    let mut report = shared
        .report
        .into_inner()
        .map_err(|_| Error::Precondition("report lock poisoned".into()))?;
    report.elapsed = started.elapsed();
    final_checks(lab, &baseline, &mut report)?;
    Ok(report)
}

/// One runtime: its own pod namespace, attachment id and runtime; ADD/CHECK/DEL until told to
/// stop.
fn runtime_loop(shared: &Shared<'_>, r: usize) {
    let pod = TestNetns::new("gsoak-pod");
    let runtime = shared.lab.runtime();
    let vpc = if r.is_multiple_of(2) { "1" } else { "2" };
    let att = format!("{:x}", r + 1);
    let mut n = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        n += 1;
        cycle(
            shared,
            &runtime,
            &pod,
            &format!("soak{r:03}x{n:06}"),
            vpc,
            &att,
        );
    }
}

/// ADD → CHECK → DEL of one attachment; a failed ADD or CHECK is followed by the DEL a runtime
/// would send (without a cached result after a failed ADD). Each verb is timed when it worked;
/// failures are counted by code.
fn cycle(
    shared: &Shared<'_>,
    runtime: &Runtime<'_>,
    pod: &TestNetns,
    cid: &str,
    vpc: &str,
    att: &str,
) {
    let list = shared.lab.conflist(vpc, att);
    let attachment = Attachment::new(cid, &pod.path().display().to_string(), "eth0");
    let timed = |verb: &'static str, op: &dyn Fn() -> Result<(), RuntimeError>| {
        let started = Instant::now();
        match op() {
            Ok(()) => {
                shared.record(|r| r.latencies.entry(verb).or_default().push(started.elapsed()))
            }
            Err(e) => shared.record(|r| r.failed(verb, cid, &e)),
        }
    };
    timed("ADD", &|| runtime.add(&list, &attachment).map(drop));
    if runtime.cached(&list, &attachment).is_some() {
        timed("CHECK", &|| runtime.check(&list, &attachment));
    }
    timed("DEL", &|| runtime.del(&list, &attachment));
}

/// GC with an empty list, then: the store verifies clean and is empty, and the node equals the
/// baseline.
fn final_checks(lab: &Lab, baseline: &BTreeSet<String>, report: &mut Report) -> Result<()> {
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
    let now = lab.snapshot();
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
        galactic_testkit::privileged!();
        let lab = Lab::for_tests("soak").expect("lab");
        let report = soak(&lab, 8, Duration::from_secs(10)).expect("soak runs");
        println!("{report}");
        assert!(report.operations() > 0, "nothing completed: {report:?}");
        report.verdict().expect("only code 11 and a clean node");
    }
}
