//! `bench-ipam`: galactic-ipam against host-local, both run as processes the way a runtime runs
//! them, at several occupancies (harness: `galactic_lab::bench::ipam`). Prints Markdown
//! tables.

use crate::debian::{self, REFERENCE_PACKAGE, REFERENCE_PLUGINS};
use anyhow::Result;
use galactic_lab::bench::ipam::{self, Options, Paths};
use std::path::Path;
use std::time::Duration;

/// `cargo xtask bench-ipam [--samples N] [--budget-ms MS] [--levels L,...]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Samples per cell (at least 5 are always taken)
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub samples: usize,
    /// Time cap per cell, in milliseconds
    #[arg(long = "budget-ms", value_name = "MS", default_value_t = 4000)]
    pub budget_ms: u64,
    /// Live allocations to measure at, comma-separated
    #[arg(
        long,
        value_name = "L,...",
        value_delimiter = ',',
        default_value = "0,1000,4000,16000,64000"
    )]
    pub levels: Vec<usize>,
}

/// Runs the benchmark and prints the Markdown table.
pub fn run(args: &Args) -> Result<()> {
    // The staged release build (static, see `stage::build_release`), as nodes run it.
    let ours = crate::stage::build_release()?.join("galactic-ipam");
    let probe = crate::stage::build_rss_probe()?;
    let host_local = debian::ensure(
        &Path::new(REFERENCE_PLUGINS).join("host-local"),
        REFERENCE_PACKAGE,
    );
    let paths = Paths {
        ours: &ours,
        host_local: host_local.as_deref(),
        probe: &probe,
    };
    let opts = Options {
        samples: args.samples,
        budget: Duration::from_millis(args.budget_ms),
        levels: args.levels.clone(),
    };
    let measured = ipam::run(&paths, &opts, &|step| eprintln!("bench-ipam: {step}"))?;
    print!("{}", ipam::table(&measured));
    Ok(())
}
