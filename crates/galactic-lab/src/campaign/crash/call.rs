//! One attachment's chain calls as a runtime makes them (ADD forward with prevResult, DEL in
//! reverse with the cached result), each plugin started with [`Invocation::start`] so that one
//! of them can carry a failpoint or be killed while it runs. Free of the campaign's state, so
//! that parallel teardowns run them on threads of their own.

use super::invariant::Ident;
use crate::campaign::{Lab, CHAIN};
use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_testkit::harness::{Error, Result};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::{Attachment, Conflist};
use galactic_testkit::Invocation;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// One attachment of the campaign: its identity, its pod and what the runtime cached.
pub(super) struct Subject {
    pub(super) cid: String,
    pub(super) vpc: String,
    pub(super) att: String,
    pub(super) pod: TestNetns,
    /// The chain's ADD result (what a runtime caches), once ADD completed.
    pub(super) result: Option<Value>,
}

impl Subject {
    pub(super) fn host_ifname(&self) -> Result<String> {
        let bad = |e: galactic_core::ident::IdentError| {
            Error::Precondition(format!("campaign attachment {}: {e}", self.cid))
        };
        let vpc = VpcId::parse(&self.vpc).map_err(bad)?;
        let att = AttachmentId::parse(&self.att).map_err(bad)?;
        Ok(host_ifname(&vpc, &att))
    }

    /// Everything that names this attachment, for the invariant.
    pub(super) fn ident(&self) -> Result<Ident> {
        Ok(Ident {
            cid: self.cid.clone(),
            vpc: self.vpc.clone(),
            att: self.att.clone(),
            ifname: self.host_ifname()?,
        })
    }

    /// The chain as the runtime holds it for this attachment.
    pub(super) fn conflist(&self, lab: &Lab) -> Conflist {
        lab.conflist(&self.vpc, &self.att)
    }

    /// The attachment as the runtime describes it to the plugins.
    pub(super) fn attachment(&self) -> Attachment {
        Attachment::new(&self.cid, &self.pod.path().display().to_string(), "eth0")
    }

    /// One plugin call for this attachment, as the runtime builds it (kubelet's `CNI_ARGS`).
    pub(super) fn invocation<'b>(
        &self,
        lab: &Lab,
        binary: &'b Path,
        command: &str,
    ) -> Invocation<'b> {
        Invocation::new(binary, command, &lab.host.node)
            .attachment(
                &self.cid,
                &self.pod.path().display().to_string(),
                "eth0",
                &lab.host.bin_dir,
            )
            .var("CNI_ARGS", &lab.cni_args(&self.cid))
    }
}

/// How a step is disturbed.
#[derive(Debug, Clone)]
pub(super) enum Fault {
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
pub(super) enum Ending {
    Done(Option<Value>),
    /// A plugin failed with this CNI reply.
    Failed(String),
    /// A plugin died of SIGKILL.
    Killed,
}

/// What the calls of one operation did, for the report; and how long clean calls took, to aim
/// later random kills inside a process's life.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) kills: usize,
    pub(super) failpoint_kills: usize,
    pub(super) missed: usize,
    pub(super) failpoint_errors: usize,
    pub(super) timings: BTreeMap<&'static str, Duration>,
}

/// ADD through the chain, threading prevResult, with `fault` applied.
pub(super) fn add(lab: &Lab, a: &Subject, fault: &Fault, tally: &mut Tally) -> Result<Ending> {
    let list = a.conflist(lab);
    let mut prev: Option<Value> = None;
    for (stage, plugin) in CHAIN.iter().enumerate() {
        let conf = list.plugin_conf(stage, prev.as_ref(), &a.attachment());
        let call = Stage {
            command: "ADD",
            plugin,
            stage,
            conf: &conf,
        };
        match run_stage(lab, a, &call, fault, tally)? {
            Ending::Done(out) => prev = out,
            other => return Ok(other),
        }
    }
    Ok(Ending::Done(prev))
}

/// DEL through the chain in reverse, with the cached result when there is one.
pub(super) fn del(lab: &Lab, a: &Subject, fault: &Fault, tally: &mut Tally) -> Result<Ending> {
    let list = a.conflist(lab);
    for (stage, plugin) in CHAIN.iter().enumerate().rev() {
        let conf = list.plugin_conf(stage, a.result.as_ref(), &a.attachment());
        let call = Stage {
            command: "DEL",
            plugin,
            stage,
            conf: &conf,
        };
        if let other @ (Ending::Failed(_) | Ending::Killed) =
            run_stage(lab, a, &call, fault, tally)?
        {
            return Ok(other);
        }
    }
    Ok(Ending::Done(None))
}

/// One plugin call of a chain operation.
struct Stage<'c> {
    command: &'static str,
    plugin: &'static str,
    stage: usize,
    conf: &'c Value,
}

/// Runs one plugin, applying the part of `fault` that concerns it.
fn run_stage(
    lab: &Lab,
    a: &Subject,
    s: &Stage<'_>,
    fault: &Fault,
    tally: &mut Tally,
) -> Result<Ending> {
    let binary = lab.binary(s.plugin);
    let mut call = a
        .invocation(lab, &binary, s.command)
        .stdin(s.conf.to_string());
    let mut kill_after = None;
    let mut at_failpoint = false;
    match fault {
        Fault::KillAt(p, point) if *p == s.plugin => {
            call = call.var("GALACTIC_FAILPOINTS", &format!("{point}:kill"));
            at_failpoint = true;
        }
        Fault::FailAt(p, point) if *p == s.plugin => {
            call = call.var("GALACTIC_FAILPOINTS", point);
        }
        Fault::Random {
            stage,
            delay,
            group,
        } if *stage == s.stage => kill_after = Some((*delay, *group)),
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
        tally.kills += 1;
        tally.failpoint_kills += usize::from(at_failpoint);
        return Ok(Ending::Killed);
    }
    if kill_after.is_some() {
        tally.missed += 1;
    } else if matches!(fault, Fault::None) {
        tally.timings.insert(s.plugin, out.elapsed);
    }
    if !out.status.success() {
        let reply = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if matches!(fault, Fault::FailAt(p, _) if *p == s.plugin) {
            tally.failpoint_errors += 1;
        }
        return Ok(Ending::Failed(format!("{}: {reply}", s.plugin)));
    }
    Ok(Ending::Done(serde_json::from_slice(&out.stdout).ok()))
}
