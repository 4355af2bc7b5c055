//! What a crash campaign counted, and its replayable random source.

use super::invariant::{Kind, Leftovers};
use galactic_testkit::harness::{Error, Result};
use std::fmt;
use std::time::Duration;

/// What a campaign counted.
#[derive(Debug, Default)]
pub struct Report {
    /// Where galactic-bgp published (`local` or `kubernetes`).
    pub publisher: &'static str,
    /// The random seed (replay with `--seed`).
    pub seed: u64,
    /// Steps run.
    pub steps: usize,
    /// Of which parallel teardowns (several pods DELed at once, each chain in reverse).
    pub parallel_teardowns: usize,
    /// Pods those teardowns DELed.
    pub parallel_dels: usize,
    /// Processes that died of SIGKILL (random or at a failpoint).
    pub kills: usize,
    /// Of which at a named failpoint.
    pub failpoint_kills: usize,
    /// Kill attempts that came after the process had already exited.
    pub missed: usize,
    /// ADDs failed on purpose at a failpoint (rollback path).
    pub failpoint_errors: usize,
    /// Recoveries after a fault (DEL or GC).
    pub recoveries: usize,
    /// Of which by GC.
    pub gc_recoveries: usize,
    /// What outlived its attachment, by kind.
    pub leftovers: Leftovers,
    /// Other invariant violations (a CHECK or clean DEL that failed, a store problem).
    pub violations: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "crash campaign, {} publisher: {} steps in {:.1} s (seed {:#x}); {} parallel teardowns of {} pods",
            self.publisher,
            self.steps,
            self.elapsed.as_secs_f64(),
            self.seed,
            self.parallel_teardowns,
            self.parallel_dels
        )?;
        writeln!(
            f,
            "  kills: {} ({} at named failpoints, {} random; {} attempts found the process already finished)",
            self.kills,
            self.failpoint_kills,
            self.kills - self.failpoint_kills,
            self.missed
        )?;
        writeln!(
            f,
            "  failpoint errors (rollback path): {}",
            self.failpoint_errors
        )?;
        writeln!(
            f,
            "  recoveries: {} ({} by DEL, {} by GC)",
            self.recoveries,
            self.recoveries - self.gc_recoveries,
            self.gc_recoveries
        )?;
        writeln!(
            f,
            "  leftovers by kind (target 0 each): {}",
            self.leftovers.total()
        )?;
        for kind in Kind::ALL {
            writeln!(f, "    {:<52} {}", kind.label(), self.leftovers.count(kind))?;
        }
        write!(f, "  other violations: {}", self.violations.len())?;
        for kind in Kind::ALL {
            for item in self.leftovers.items(kind) {
                write!(f, "\n    {}: {item}", kind.label())?;
            }
        }
        for line in &self.violations {
            write!(f, "\n    {line}")?;
        }
        Ok(())
    }
}

impl Report {
    /// Fails when any invariant failed.
    pub fn verdict(&self) -> Result<()> {
        if self.leftovers.total() > 0 || !self.violations.is_empty() {
            return Err(Error::Invariants(format!(
                "{} publisher: {} leftovers, {} violations (seed {:#x})",
                self.publisher,
                self.leftovers.total(),
                self.violations.len(),
                self.seed
            )));
        }
        Ok(())
    }
}

/// A small deterministic generator (xorshift64*), so a campaign replays from its seed.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// A seed from the clock.
    pub fn time_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}
