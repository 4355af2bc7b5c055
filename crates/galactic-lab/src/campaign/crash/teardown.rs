//! Parallel teardowns: several pods DELed at once, as a node's runtimes do when a deployment
//! scales down or a node drains. Each chain's DEL runs in reverse on its own thread (the
//! threads inherit the host namespace the lab entered), so the pods of one VPC race for its
//! last-attachment decisions (VRF instance, routing domain, ledger). One of the DELs may be
//! killed at a random moment; it is recovered afterwards as any killed DEL is.

use super::call::{self, Ending, Fault, Subject, Tally};
use super::Campaign;
use galactic_testkit::harness::{Error, Result};

impl Campaign<'_> {
    /// Tears down every live pod of one VPC, or (one time in three) every live pod of the
    /// node, in parallel; then checks the invariant and recovers a killed DEL.
    pub(super) fn parallel_teardown(&mut self) -> Result<()> {
        let vpc = self.live[self.rng.below(self.live.len())].vpc.clone();
        let whole_node = self.rng.chance(33);
        let (leaving, staying): (Vec<Subject>, Vec<Subject>) = std::mem::take(&mut self.live)
            .into_iter()
            .partition(|a| whole_node || a.vpc == vpc);
        self.live = staying;
        let faulted = self.rng.chance(50).then(|| self.rng.below(leaving.len()));
        let fault = match faulted {
            Some(_) => self.pick_fault(false),
            None => Fault::None,
        };
        let endings = self.run_in_parallel(&leaving, faulted, &fault)?;
        self.report.parallel_teardowns += 1;
        self.report.parallel_dels += leaving.len();
        let mut killed = Vec::new();
        for (a, ending) in leaving.into_iter().zip(endings) {
            match ending {
                Ending::Done(_) => {}
                Ending::Failed(reply) => {
                    let failed = format!("parallel DEL {} failed: {reply}", a.cid);
                    self.report.violations.push(failed);
                }
                Ending::Killed => killed.push(a),
            }
        }
        // A killed DEL's attachment is neither live nor gone until it is recovered: the
        // recovery checks the node then.
        if killed.is_empty() {
            return self.check("after a parallel teardown", false);
        }
        for a in killed {
            self.recover(a, Ending::Killed)?;
        }
        Ok(())
    }

    /// Each subject's chain DEL on a thread of its own; `fault` applies to subject `faulted`.
    fn run_in_parallel(
        &mut self,
        leaving: &[Subject],
        faulted: Option<usize>,
        fault: &Fault,
    ) -> Result<Vec<Ending>> {
        let lab = self.lab;
        let results: Vec<Result<(Ending, Tally)>> = std::thread::scope(|scope| {
            let workers: Vec<_> = leaving
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let fault = if faulted == Some(i) {
                        fault.clone()
                    } else {
                        Fault::None
                    };
                    scope.spawn(move || {
                        let mut tally = Tally::default();
                        call::del(lab, a, &fault, &mut tally).map(|e| (e, tally))
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(Error::Precondition("a teardown thread panicked".into()))
                    })
                })
                .collect()
        });
        let mut endings = Vec::new();
        for result in results {
            let (ending, mut tally) = result?;
            // Durations under contention would aim later single-call kills too late.
            tally.timings.clear();
            self.absorb(tally);
            endings.push(ending);
        }
        Ok(endings)
    }
}
