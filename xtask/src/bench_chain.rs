//! `bench-chain`: a full attachment as a runtime performs it, ours against the reference plugins
//! (Debian's `bridge` + `host-local`, installed with apt when missing), side by side. The
//! harness is `galactic_lab::bench::chain`; this command builds what it measures.

use anyhow::Result;
use galactic_lab::bench::chain::{self, Options, Paths};

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
    let reference = crate::debian::reference_chain()?;
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
