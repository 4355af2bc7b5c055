//! `bench-chain`: a full attachment as a runtime performs it, ours against the reference plugins
//! (Debian's `bridge` + `host-local`, installed with apt when missing), side by side. The
//! harness is `galactic_testkit::bench::chain`; this command builds what it measures.

use crate::debian::{self, REFERENCE_PACKAGE, REFERENCE_PLUGINS};
use anyhow::{bail, Result};
use galactic_testkit::bench::chain::{self, Options, Paths};
use std::path::Path;

/// `cargo xtask bench-chain [--iterations N] [--master-only] [--concurrency N] [--rounds N]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Sequential attachments per chain
    #[arg(long, value_name = "N", default_value_t = 60)]
    pub iterations: usize,
    /// Our chain without galactic-route and galactic-bgp (the master with its IPAM only)
    #[arg(long)]
    pub master_only: bool,
    /// Attachments started at once in the concurrent part (0 leaves it out)
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub concurrency: usize,
    /// Rounds of the concurrent part
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub rounds: usize,
}

pub fn run(args: &Args) -> Result<()> {
    galactic_testkit::harness::require_root()?;
    let probe = crate::stage::build_rss_probe()?;
    let ours = crate::stage::build_release()?;
    let reference = Path::new(REFERENCE_PLUGINS);
    if debian::ensure(&reference.join("bridge"), REFERENCE_PACKAGE).is_none()
        || debian::ensure(&reference.join("host-local"), REFERENCE_PACKAGE).is_none()
    {
        bail!("the reference plugins are missing: apt-get install {REFERENCE_PACKAGE}");
    }
    let paths = Paths {
        ours: &ours,
        reference,
        probe: &probe,
    };
    let options = Options {
        iterations: args.iterations,
        master_only: args.master_only,
        concurrency: args.concurrency,
        rounds: args.rounds,
    };
    let report = chain::run(&paths, options)?;
    print!("{}", chain::table(&report));
    Ok(())
}
