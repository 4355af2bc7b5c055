//! `soak`: N parallel runtimes doing ADD → CHECK → DEL of the full chain for a bounded time:
//! ops/s, p50/p95 per verb, failures by CNI code, the node's invariants at the end (harness and
//! its self-test: `galactic_lab::campaign::soak`). Any failure code but 11 fails the command.

use anyhow::Result;
use galactic_lab::campaign::{soak::soak, Lab};
use std::time::Duration;

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
    galactic_testkit::harness::require_root()?;
    let built = crate::stage::build_plugins(false)?;
    let lab = Lab::with_plugins_from("soak", &built)?;
    let report = soak(&lab, args.runtimes, Duration::from_secs(args.seconds))?;
    println!("{report}");
    Ok(report.verdict()?)
}
