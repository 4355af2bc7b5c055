//! Many attachments at once, as a node starting a burst of pods sees them: `concurrency` pods
//! released together (a barrier), each running its chain's ADD in order on a thread of its own;
//! then their DELs, the same way. A failed ADD is DELeted like any other (as a runtime does), and
//! counted by plugin and CNI error code.

use super::{run_chain, Call, Chain, Probe, Verb};
use galactic_testkit::harness::{Error, Result};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::TestNode;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What the concurrent part measured for one chain.
#[derive(Debug, Default)]
pub struct Figures {
    /// Attachments started at once.
    pub concurrency: usize,
    /// Wall time from the release of each round to its last ADD's end.
    pub rounds: Vec<Duration>,
    /// Each attachment's chain ADD wall time (successful ones).
    pub add: Vec<Duration>,
    /// Each attachment's chain DEL wall time (successful ones).
    pub del: Vec<Duration>,
    /// Failed calls by `"<plugin> <verb> code <n>"`.
    pub failures: BTreeMap<String, usize>,
}

impl Figures {
    /// Successful ADDs per second over all rounds.
    pub fn ops_per_s(&self) -> f64 {
        let wall: f64 = self.rounds.iter().map(Duration::as_secs_f64).sum();
        if wall == 0.0 {
            return 0.0;
        }
        self.add.len() as f64 / wall
    }

    fn count(&mut self, e: &Error) {
        let key = match e {
            Error::Plugin {
                plugin,
                command,
                reply,
            } => {
                let code = serde_json::from_str::<Value>(reply)
                    .ok()
                    .and_then(|v| v["code"].as_u64());
                match code {
                    Some(code) => format!("{plugin} {command} code {code}"),
                    None => format!("{plugin} {command} without a CNI error"),
                }
            }
            other => format!("harness: {other}"),
        };
        *self.failures.entry(key).or_default() += 1;
    }
}

/// Runs `rounds` rounds of `concurrency` simultaneous attachments of `chain`.
pub(super) fn measure(
    chain: &Chain,
    node: &TestNode,
    cni_path: &Path,
    concurrency: usize,
    rounds: usize,
) -> Result<Figures> {
    let mut figures = Figures {
        concurrency,
        ..Figures::default()
    };
    for round in 0..rounds {
        let pods: Vec<TestNetns> = (0..concurrency)
            .map(|_| TestNetns::new("gbench-burst"))
            .collect();
        let calls = burst_calls(&pods, round, node, cni_path);
        let added = all_at_once(&calls, |call| {
            run_chain(chain, call, Verb::Add, None, Probe::Timed).map(|p| (p.total, p.result))
        });
        figures.rounds.push(span(&added));
        let results: Vec<Option<Value>> = added
            .into_iter()
            .map(|(_, _, outcome)| match outcome {
                Ok((elapsed, result)) => {
                    figures.add.push(elapsed);
                    Some(result)
                }
                Err(e) => {
                    figures.count(&e);
                    None
                }
            })
            .collect();
        let pairs: Vec<(&Call<'_>, Option<Value>)> = calls.iter().zip(results).collect();
        let removed = all_at_once(&pairs, |(call, result)| {
            // A failed ADD has no result to give DEL; the runtime sends the configuration alone.
            run_chain(chain, call, Verb::Del, result.as_ref(), Probe::Timed).map(|p| p.total)
        });
        for (_, _, outcome) in removed {
            match outcome {
                Ok(elapsed) => figures.del.push(elapsed),
                Err(e) => figures.count(&e),
            }
        }
    }
    Ok(figures)
}

/// One call per pod of a burst: each its own VPC attachment and terminations.
fn burst_calls<'a>(
    pods: &[TestNetns],
    round: usize,
    node: &'a TestNode,
    cni_path: &'a Path,
) -> Vec<Call<'a>> {
    pods.iter()
        .enumerate()
        .map(|(i, pod)| Call {
            cid: format!("burst{round:03}{i:04}"),
            netns: pod.path().display().to_string(),
            cni_path,
            node,
            probe: Path::new(""),
            patch: Some(serde_json::json!({
                "vpcattachment": format!("c{i}"),
                "terminations": [{"network": format!("fd91:{i:x}::/64")},
                                 {"network": format!("10.91.{}.0/24", i % 256)}],
            })),
        })
        .collect()
}

/// Runs `work` for every item on threads of their own, released together; each outcome with
/// the instants its work started and ended.
fn all_at_once<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Vec<(Instant, Instant, Result<R>)> {
    let barrier = Barrier::new(items.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .iter()
            .map(|item| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    let started = Instant::now();
                    let outcome = work(item);
                    (started, Instant::now(), outcome)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let now = Instant::now();
                    let panicked = Error::Precondition("a bench thread panicked".into());
                    (now, now, Err(panicked))
                })
            })
            .collect()
    })
}

/// From the first start to the last end.
fn span<R>(outcomes: &[(Instant, Instant, R)]) -> Duration {
    let first = outcomes.iter().map(|(start, _, _)| *start).min();
    let last = outcomes.iter().map(|(_, end, _)| *end).max();
    match (first, last) {
        (Some(first), Some(last)) => last.saturating_duration_since(first),
        _ => Duration::ZERO,
    }
}
