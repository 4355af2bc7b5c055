//! The crash campaign: the full chain run as a runtime runs it, with plugin processes
//! SIGKILLed at random moments and at every named failpoint, and the node's invariants checked
//! after every recovery and at the end.
//!
//! Each step either adds an attachment or deletes a live one. A faulted step is recovered as a
//! runtime would: a failed or killed ADD is followed by the chain's DEL (no cached result) or, at
//! random, left to the next GC with the runtime's list of live attachments; a killed DEL is
//! retried or left to GC. After every recovery: the IPAM store verifies clean and holds exactly
//! the live attachments, no two live attachments share an address, and no host interface,
//! attachment record, route record entry or advertisement record exists for an attachment that
//! is not live. At the end every attachment is
//! deleted, GC runs with an empty list, and the host namespace (links, rules, routes of every
//! table, nft ruleset) and the state directory must equal their state after the warm-up cycle.
//!
//! Every plugin call is built as the test kit's runtime builds it (stdin from the attachment's
//! [`Conflist`], environment from [`Invocation`]), but started with [`Invocation::start`] so that
//! one plugin of the chain can carry a failpoint or be killed while it runs, which the
//! [`galactic_testkit::runtime::Runtime`] (a faithful libcni) cannot do. GC goes through the runtime.

mod report;
#[cfg(test)]
mod tests;

pub use report::{Report, Rng};

use super::{Lab, CHAIN};
use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_testkit::harness::{Error, Result};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::{Attachment, Conflist};
use galactic_testkit::Invocation;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Every named failpoint of the chain's ADD (master, then galactic-route).
const FAILPOINTS: [(&str, &str); 12] = [
    ("galactic-cni", "after-record"),
    ("galactic-cni", "after-domain-record"),
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
/// Most attachments alive at once.
const MAX_LIVE: usize = 4;

/// One attachment of the campaign: its identity, its pod and what the runtime cached.
struct Subject {
    cid: String,
    vpc: String,
    att: String,
    pod: TestNetns,
    /// The chain's ADD result (what a runtime caches), once ADD completed.
    result: Option<Value>,
}

impl Subject {
    fn host_ifname(&self) -> Result<String> {
        let bad = |e: galactic_core::ident::IdentError| {
            Error::Precondition(format!("campaign attachment {}: {e}", self.cid))
        };
        let vpc = VpcId::parse(&self.vpc).map_err(bad)?;
        let att = AttachmentId::parse(&self.att).map_err(bad)?;
        Ok(host_ifname(&vpc, &att))
    }

    /// The chain as the runtime holds it for this attachment.
    fn conflist(&self, lab: &Lab) -> Conflist {
        lab.conflist(&self.vpc, &self.att)
    }

    /// One plugin call for this attachment, as the runtime builds it.
    /// The attachment as the runtime describes it to the plugins.
    fn attachment(&self) -> Attachment {
        Attachment::new(&self.cid, &self.pod.path().display().to_string(), "eth0")
    }

    fn invocation<'b>(
        &self,
        lab: &Lab,
        binary: &'b std::path::Path,
        command: &str,
    ) -> Invocation<'b> {
        Invocation::new(binary, command, &lab.host.node).attachment(
            &self.cid,
            &self.pod.path().display().to_string(),
            "eth0",
            &lab.host.bin_dir,
        )
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
    live: Vec<Subject>,
    report: Report,
    next_id: usize,
    /// Typical duration per plugin, to aim random kills inside the process's life.
    typical: BTreeMap<&'static str, Duration>,
}

/// Runs a campaign of `iterations` steps (or until `seconds` pass) on `lab` and returns its
/// counts.
pub fn campaign(lab: &Lab, iterations: usize, seconds: Option<u64>, seed: u64) -> Result<Report> {
    let mut c = Campaign {
        lab,
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
    fn new_attachment(&mut self) -> Subject {
        self.next_id += 1;
        let n = self.next_id;
        Subject {
            cid: format!("crash{n:05}"),
            vpc: if n.is_multiple_of(2) { "1" } else { "2" }.to_owned(),
            // Attachment ids are base62; hex digits are a valid subset and stay ≤ 3 characters.
            att: format!("{:x}", n % 0xfff + 1),
            pod: TestNetns::new("gcrash-pod"),
            result: None,
        }
    }

    /// One clean ADD/DEL per VPC and a GC, timing each plugin; the node state afterwards is the
    /// baseline every later check compares with.
    fn warm_up(&mut self) -> Result<BTreeSet<String>> {
        for _ in 0..2 {
            let mut a = self.new_attachment();
            match self.add(&a, &Fault::None)? {
                Ending::Done(result) => a.result = result,
                Ending::Failed(reply) => {
                    return Err(Error::Precondition(format!("warm-up ADD failed: {reply}")))
                }
                Ending::Killed => return Err(Error::Precondition("warm-up ADD died".into())),
            }
            if !matches!(self.del(&a, &Fault::None)?, Ending::Done(_)) {
                return Err(Error::Precondition("warm-up DEL failed".into()));
            }
        }
        self.lab.gc(&[])?;
        Ok(self.lab.snapshot())
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
            let mut a = self.new_attachment();
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
    fn add(&mut self, a: &Subject, fault: &Fault) -> Result<Ending> {
        let list = a.conflist(self.lab);
        let mut prev: Option<Value> = None;
        for (stage, plugin) in CHAIN.iter().enumerate() {
            let conf = list.plugin_conf(stage, prev.as_ref(), &a.attachment());
            match self.run_stage(a, "ADD", plugin, stage, &conf, fault)? {
                Ending::Done(out) => prev = out,
                other => return Ok(other),
            }
        }
        Ok(Ending::Done(prev))
    }

    /// DEL through the chain in reverse, with the cached result when there is one.
    fn del(&mut self, a: &Subject, fault: &Fault) -> Result<Ending> {
        let list = a.conflist(self.lab);
        for (stage, plugin) in CHAIN.iter().enumerate().rev() {
            let conf = list.plugin_conf(stage, a.result.as_ref(), &a.attachment());
            if let other @ (Ending::Failed(_) | Ending::Killed) =
                self.run_stage(a, "DEL", plugin, stage, &conf, fault)?
            {
                return Ok(other);
            }
        }
        Ok(Ending::Done(None))
    }

    /// Runs one plugin, applying the part of `fault` that concerns it.
    fn run_stage(
        &mut self,
        a: &Subject,
        command: &str,
        plugin: &'static str,
        stage: usize,
        conf: &Value,
        fault: &Fault,
    ) -> Result<Ending> {
        let binary = self.lab.binary(plugin);
        let mut call = a
            .invocation(self.lab, &binary, command)
            .stdin(conf.to_string());
        let mut kill_after = None;
        let mut at_failpoint = false;
        match fault {
            Fault::KillAt(p, point) if *p == plugin => {
                call = call.var("GALACTIC_FAILPOINTS", &format!("{point}:kill"));
                at_failpoint = true;
            }
            Fault::FailAt(p, point) if *p == plugin => {
                call = call.var("GALACTIC_FAILPOINTS", point);
            }
            Fault::Random {
                stage: s,
                delay,
                group,
            } if *s == stage => kill_after = Some((*delay, *group)),
            _ => {}
        }
        let running = call.start()?;
        if let Some((delay, group)) = kill_after {
            std::thread::sleep(delay);
            // The process may have exited already (a zombie until reaped): then this is a miss.
            running.kill(group);
        }
        let out = running.wait()?;
        if out.killed() {
            self.report.kills += 1;
            if at_failpoint {
                self.report.failpoint_kills += 1;
            }
            return Ok(Ending::Killed);
        }
        if kill_after.is_some() {
            self.report.missed += 1;
        } else if matches!(fault, Fault::None) {
            let entry = self.typical.entry(plugin).or_insert(out.elapsed);
            *entry = (*entry * 3 + out.elapsed) / 4;
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
    fn recover(&mut self, a: Subject, ending: Ending) -> Result<()> {
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
                Ending::Killed => {
                    return Err(Error::Precondition(
                        "a recovery DEL died without a fault".into(),
                    ))
                }
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
            let list = a.conflist(self.lab);
            let cached = a.result.clone().unwrap_or(Value::Null);
            for (stage, plugin) in CHAIN.iter().enumerate() {
                let binary = self.lab.binary(plugin);
                let out = a
                    .invocation(self.lab, &binary, "CHECK")
                    .stdin(
                        list.plugin_conf(stage, Some(&cached), &a.attachment())
                            .to_string(),
                    )
                    .run();
                if !out.success {
                    self.report.violations.push(format!(
                        "CHECK {} {plugin}: {}",
                        a.cid,
                        out.stdout.trim()
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
        let live: BTreeSet<String> = self.live.iter().map(|a| a.cid.clone()).collect();
        for item in self.lab.state_of_others(&live) {
            self.report.leaks.push(format!("{when}: {item}"));
        }
        let expected: BTreeSet<String> = self
            .live
            .iter()
            .map(Subject::host_ifname)
            .collect::<Result<_>>()?;
        for link in self.lab.host_links() {
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
        let now = self.lab.snapshot();
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
