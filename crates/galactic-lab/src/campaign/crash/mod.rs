//! The crash campaign: the full chain run as a runtime runs it, with plugin processes
//! SIGKILLed at random moments and at every named failpoint, and the node's invariants checked
//! after every recovery and at the end, over either publisher of galactic-bgp (the local one or
//! the Kubernetes one against the test kit's HTTPS loopback API server).
//!
//! Each step adds an attachment, deletes a live one, or tears down several pods at once (one
//! VPC's, or every live pod of both VPCs: each chain's DEL in reverse, the chains in parallel,
//! as runtimes do; one of them may be killed). Two VPCs share the node and each holds up to
//! eight pods. A surge step fills the node (ADDs with the usual faults until both VPCs hold
//! eight pods) and tears all sixteen down in parallel, as a node drain does. The node's
//! BGPRouter has SRv6 settings and the datapath's maps are pinned on a private bpffs, so every
//! ADD registers the attachment's eBPF rows and every DEL and GC must remove them. A faulted step is recovered as a runtime would: a failed or killed ADD is followed by
//! the chain's DEL (no cached result) or, at random, left to an immediate GC with the runtime's
//! list of live attachments; a killed DEL is retried or left to GC. After every step and
//! recovery the invariant ([`invariant`]) checks every kind of state a plugin records or
//! publishes against the live attachments, and counts what outlives its attachment by kind. At
//! the end every attachment is deleted, GC runs with an empty list, and the host namespace
//! (links, rules, routes of every table, nft ruleset) and the state directory must equal their
//! state after the warm-up cycle.
//!
//! Every plugin call is built as the test kit's runtime builds it (stdin from the attachment's
//! [`galactic_testkit::runtime::Conflist`], environment from [`galactic_testkit::Invocation`],
//! kubelet's `CNI_ARGS`), but started with [`galactic_testkit::Invocation::start`] so that one
//! plugin of the chain can carry a failpoint or be killed while it runs, which the
//! [`galactic_testkit::runtime::Runtime`] (a faithful libcni) cannot do ([`call`]). GC goes
//! through the runtime.

mod call;
mod check;
pub mod invariant;
mod report;
mod teardown;
#[cfg(test)]
mod tests;

pub use report::{Report, Rng};

use super::{Lab, CHAIN};
use call::{Ending, Fault, Subject, Tally};
use galactic_testkit::harness::{Error, Result};
use galactic_testkit::privileged::TestNetns;
use invariant::Ident;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Percent of steps that are surges ([`Campaign::surge`]).
const SURGE_PERCENT: usize = 2;

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
/// Most attachments alive at once per VPC; two VPCs share the node.
const MAX_PER_VPC: usize = 8;
/// Most attachments alive at once: a full node, whose parallel teardown DELs 16 pods of two
/// VPCs at once (the size of a node drain that once left state behind).
const MAX_LIVE: usize = 2 * MAX_PER_VPC;
/// The VPCs of the campaign.
const VPCS: [&str; 2] = ["1", "2"];

/// The campaign state.
struct Campaign<'a> {
    lab: &'a Lab,
    rng: Rng,
    live: Vec<Subject>,
    /// Every attachment this campaign created, live or gone.
    all: Vec<Ident>,
    report: Report,
    next_id: usize,
    /// Typical duration per plugin, to aim random kills inside the process's life.
    typical: BTreeMap<&'static str, Duration>,
}

/// Runs a campaign of `iterations` steps (or until `seconds` pass) on `lab` and returns its
/// counts.
pub fn campaign(lab: &Lab, iterations: usize, seconds: Option<u64>, seed: u64) -> Result<Report> {
    let mut c = Campaign::new(lab, seed);
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

impl<'a> Campaign<'a> {
    fn new(lab: &'a Lab, seed: u64) -> Self {
        Self {
            lab,
            rng: Rng::new(seed),
            live: Vec::new(),
            all: Vec::new(),
            report: Report {
                publisher: lab.publisher.name(),
                seed,
                ..Report::default()
            },
            next_id: 0,
            typical: BTreeMap::new(),
        }
    }

    fn new_attachment(&mut self) -> Result<Subject> {
        self.next_id += 1;
        let n = self.next_id;
        let a = Subject {
            cid: format!("crash{n:05}"),
            vpc: self.next_vpc(n).to_owned(),
            // Attachment ids are base62; hex digits are a valid subset and stay ≤ 3 characters.
            att: format!("{:x}", n % 0xfff + 1),
            pod: TestNetns::new("gcrash-pod"),
            result: None,
        };
        self.lab.create_pod(&a.cid);
        self.all.push(a.ident()?);
        Ok(a)
    }

    /// The VPC of the `n`th attachment: alternating, unless that VPC is full.
    fn next_vpc(&self, n: usize) -> &'static str {
        let (first, second) = match n % 2 {
            0 => (VPCS[0], VPCS[1]),
            _ => (VPCS[1], VPCS[0]),
        };
        let live_in = |vpc: &str| self.live.iter().filter(|a| a.vpc == vpc).count();
        if live_in(first) >= MAX_PER_VPC {
            second
        } else {
            first
        }
    }

    /// One clean ADD/DEL per VPC and a GC, timing each plugin; the node state afterwards is the
    /// baseline every later check compares with.
    fn warm_up(&mut self) -> Result<BTreeSet<String>> {
        for _ in 0..2 {
            let mut a = self.new_attachment()?;
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
        // Faulted ADDs rarely go live, so single steps seldom fill the node: a surge does.
        if self.rng.chance(SURGE_PERCENT) {
            return self.surge();
        }
        if self.live.len() >= 2 && self.rng.chance(12) {
            return self.parallel_teardown(false);
        }
        let adding = self.live.len() < MAX_LIVE && (self.live.is_empty() || self.rng.chance(60));
        let fault = self.pick_fault(adding);
        if adding {
            self.add_one(&fault, true)?;
        } else {
            let i = self.rng.below(self.live.len());
            let a = self.live.remove(i);
            match self.del(&a, &fault)? {
                Ending::Done(_) => self.check("after a clean DEL", false)?,
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

    /// ADD of a new attachment with `fault`: live once it succeeds (then CHECK of every live
    /// attachment when `check_all`, else of it alone, and the invariant), else recovered.
    fn add_one(&mut self, fault: &Fault, check_all: bool) -> Result<()> {
        let mut a = self.new_attachment()?;
        match self.add(&a, fault)? {
            Ending::Done(result) => {
                a.result = result;
                self.live.push(a);
                match check_all {
                    true => self.check_live(),
                    false => self.check_newest(),
                }
            }
            ending => self.recover(a, ending),
        }
    }

    /// A node filling up and draining at once, as a deployment scaling both VPCs up and the
    /// node being drained: ADDs (with the usual faults) until both VPCs hold their most pods,
    /// CHECK of every pod, then every pod DELed in parallel (one of the DELs possibly killed).
    /// Each ADD is followed by CHECK of the new pod and the invariant; CHECK of every pod
    /// after every ADD would cost a full node's CHECKs sixteen times over.
    fn surge(&mut self) -> Result<()> {
        self.report.surges += 1;
        // Faulted ADDs do not go live; enough attempts for that, never an endless loop.
        for _ in 0..4 * MAX_LIVE {
            if self.live.len() >= MAX_LIVE {
                break;
            }
            let fault = self.pick_fault(true);
            self.add_one(&fault, false)?;
        }
        self.check_live()?;
        self.parallel_teardown(true)
    }

    /// ADD of `a` through the chain, counted in the report.
    fn add(&mut self, a: &Subject, fault: &Fault) -> Result<Ending> {
        let mut tally = Tally::default();
        let ending = call::add(self.lab, a, fault, &mut tally);
        self.absorb(tally);
        ending
    }

    /// DEL of `a` through the chain, counted in the report.
    fn del(&mut self, a: &Subject, fault: &Fault) -> Result<Ending> {
        let mut tally = Tally::default();
        let ending = call::del(self.lab, a, fault, &mut tally);
        self.absorb(tally);
        ending
    }

    /// Counts what a chain operation did, and learns how long its clean calls took.
    fn absorb(&mut self, tally: Tally) {
        self.report.kills += tally.kills;
        self.report.failpoint_kills += tally.failpoint_kills;
        self.report.missed += tally.missed;
        self.report.failpoint_errors += tally.failpoint_errors;
        for (plugin, elapsed) in tally.timings {
            let entry = self.typical.entry(plugin).or_insert(elapsed);
            *entry = (*entry * 3 + elapsed) / 4;
        }
    }

    /// What a runtime does after a failed or killed operation: DEL the chain (retrying a
    /// killed retry), or leave the attachment to an immediate GC.
    fn recover(&mut self, a: Subject, ending: Ending) -> Result<()> {
        if let Ending::Failed(reply) = &ending {
            // Only the deliberate failpoint errors are expected to fail an ADD here.
            if !reply.contains("failpoint") {
                self.report
                    .violations
                    .push(format!("{} failed without a fault: {reply}", a.cid));
            }
        }
        self.report.recoveries += 1;
        let by_gc = self.rng.chance(30);
        if by_gc {
            let valid: Vec<String> = self.live.iter().map(|l| l.cid.clone()).collect();
            self.lab.gc(&valid)?;
            self.report.gc_recoveries += 1;
            return self.check(&format!("after recovering {} by GC", a.cid), true);
        }
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
        self.check(&format!("after recovering {} by DEL", a.cid), false)
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
        self.check("at the end", true)?;
        let now = self.lab.snapshot();
        let extras = now.difference(baseline);
        let found =
            extras.map(|e| invariant::Found::new(invariant::Kind::Baseline, e.clone(), None));
        self.report
            .leftovers
            .observe("at the end, compared with the baseline", found.collect());
        for gone in baseline.difference(&now) {
            self.report
                .violations
                .push(format!("at the end, missing from the baseline: {gone}"));
        }
        Ok(())
    }
}
