//! The probe pod: ADD, CHECK, DEL and GC of one attachment on a filled node, every plugin a
//! process the bench spawns and times (stdin and environment as the test kit's runtime, that is
//! libcni, builds them), and each plugin's own time read back from the node's log.

use super::node::Node;
use super::{plugin_failed, Samples};
use galactic_testkit::harness::{io, json, Result};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::process;
use galactic_testkit::runtime::{Attachment, Conflist};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

/// Rounds run before the measured ones (the first ADD of a level pays cold caches, and on the
/// empty node the VPC's routing domain).
const WARM_UP: usize = 1;

/// A CNI verb the probe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verb {
    /// ADD, prevResult threaded from plugin to plugin.
    Add,
    /// CHECK of every plugin with the ADD's result.
    Check,
    /// DEL in reverse with the ADD's result.
    Del,
    /// GC of every plugin, every live fill attachment valid.
    Gc,
}

impl Verb {
    /// `CNI_COMMAND`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Add => "ADD",
            Self::Check => "CHECK",
            Self::Del => "DEL",
            Self::Gc => "GC",
        }
    }

    /// Every verb, in the order a round runs them.
    pub const ALL: [Verb; 4] = [Self::Add, Self::Check, Self::Del, Self::Gc];
}

/// `iterations` measured rounds of the probe on `node` (after the warm-up), samples by verb.
pub(super) fn measure(node: &Node<'_>, iterations: usize) -> Result<BTreeMap<Verb, Samples>> {
    let pod = TestNetns::new("gfill-probe");
    let list = node.probe_conflist();
    let valid = node.valid();
    let mut kept: BTreeMap<Verb, Samples> = BTreeMap::new();
    for round in 0..WARM_UP + iterations {
        let mut scratch = BTreeMap::new();
        let samples = if round < WARM_UP {
            &mut scratch
        } else {
            &mut kept
        };
        let att = node.probe_attachment(&format!("probe{round:04}"), &pod);
        let probe = Probe {
            node,
            list: &list,
            att: &att,
        };
        let result = probe.pass(Verb::Add, None, &[], samples.entry(Verb::Add).or_default())?;
        for verb in [Verb::Check, Verb::Del] {
            probe.pass(verb, result.as_ref(), &[], samples.entry(verb).or_default())?;
        }
        if node.has_gc() {
            probe.pass(Verb::Gc, None, &valid, samples.entry(Verb::Gc).or_default())?;
        }
    }
    Ok(kept)
}

/// One probe attachment's calls.
struct Probe<'a> {
    node: &'a Node<'a>,
    list: &'a Conflist,
    att: &'a Attachment,
}

impl Probe<'_> {
    /// One pass of `verb` through the chain (DEL in reverse), each plugin's wall time and own
    /// time recorded in `samples`; returns ADD's last result (`None` for the other verbs).
    fn pass(
        &self,
        verb: Verb,
        cached: Option<&Value>,
        valid: &[Attachment],
        samples: &mut Samples,
    ) -> Result<Option<Value>> {
        let log = self.node.log();
        let log_from = log.as_deref().map(log_len);
        let stages = self.list.plugins.len();
        let order: Vec<usize> = match verb {
            Verb::Del => (0..stages).rev().collect(),
            _ => (0..stages).collect(),
        };
        let mut prev: Option<Value> = None;
        let mut total = Duration::ZERO;
        for i in order {
            let plugin = self.list.plugin_type(i).to_owned();
            let stdin = match verb {
                Verb::Add => self.list.plugin_conf(i, prev.as_ref(), self.att),
                Verb::Check | Verb::Del => self.list.plugin_conf(i, cached, self.att),
                Verb::Gc => gc_conf(self.list, i, valid),
            };
            let binary = self.node.bin_dir().join(&plugin);
            let command = process::command(&binary, &self.env(verb));
            let done = process::start(command, stdin.to_string().as_bytes())?.wait()?;
            if !done.status.success() {
                return Err(plugin_failed(&plugin, verb.name(), &done.stdout));
            }
            total += done.elapsed;
            samples
                .stages
                .entry(plugin.clone())
                .or_default()
                .push(done.elapsed);
            if verb == Verb::Add {
                let result = serde_json::from_slice(&done.stdout)
                    .map_err(json(format!("{plugin} ADD result")))?;
                prev = Some(result);
            }
        }
        samples.wall.push(total);
        if let (Some(log), Some(from)) = (log, log_from) {
            for (plugin, own, received) in own_times(&log, from, verb) {
                samples.own.entry(plugin.clone()).or_default().push(own);
                if let Some(n) = received {
                    samples.received.entry(plugin).or_default().push(n);
                }
            }
        }
        Ok(prev)
    }

    /// The environment libcni gives a plugin for `verb` (GC carries no attachment).
    fn env(&self, verb: Verb) -> Vec<(&'static str, String)> {
        let none = Attachment::new("", "", "");
        let att = if verb == Verb::Gc { &none } else { self.att };
        vec![
            ("CNI_COMMAND", verb.name().to_owned()),
            ("CNI_CONTAINERID", att.container_id.clone()),
            ("CNI_NETNS", att.netns.clone()),
            ("CNI_ARGS", att.cni_args()),
            ("CNI_IFNAME", att.ifname.clone()),
            ("CNI_PATH", self.node.bin_dir().display().to_string()),
            (
                "GALACTIC_CNI_NODE_CONFIG",
                self.node.test_node().node_config.display().to_string(),
            ),
        ]
    }
}

/// GC's stdin for plugin `i`: its entry with the valid attachments, both spellings (as the
/// test kit's runtime builds it).
fn gc_conf(list: &Conflist, i: usize, valid: &[Attachment]) -> Value {
    let attachments: Vec<Value> = valid
        .iter()
        .map(|a| json!({"containerID": a.container_id, "ifname": a.ifname}))
        .collect();
    let mut conf = list.inject(i);
    conf["cni.dev/valid-attachments"] = json!(attachments);
    conf["cni.dev/attachments"] = json!(attachments);
    conf
}

/// The log's length now (0 when it does not exist yet).
fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

/// The `durationMs` (and `netlinkReceived`, when the plugin counts it) of every "`<verb>`:
/// done" line written to `log` since offset `from`, by plugin (a delegate's lines under its own
/// name). A log rotated meanwhile is read whole.
fn own_times(log: &Path, from: u64, verb: Verb) -> Vec<(String, Duration, Option<u64>)> {
    let text = read_from(log, from).unwrap_or_default();
    let done = format!("{}: done", verb.name());
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["msg"].as_str() == Some(done.as_str()))
        .filter_map(|entry| {
            let plugin = entry["plugin"].as_str()?.to_owned();
            let ms = entry["durationMs"].as_f64()?;
            let received = entry["netlinkReceived"].as_u64();
            Some((plugin, Duration::from_secs_f64(ms / 1000.0), received))
        })
        .collect()
}

fn read_from(log: &Path, from: u64) -> Result<String> {
    let mut file = std::fs::File::open(log).map_err(io(format!("open {}", log.display())))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = if len < from { 0 } else { from };
    file.seek(SeekFrom::Start(start))
        .map_err(io(format!("seek {}", log.display())))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(io(format!("read {}", log.display())))?;
    Ok(text)
}
