//! `bench-rules`: what table mode's VPC selection costs on the packet path, one policy rule per
//! attachment (the previous release) vs. one per VPC with the mark set by the node's nftables map,
//! at each node size. The harness is `galactic_lab::bench::rules`.

use anyhow::Result;
use galactic_lab::bench::rules;

/// `cargo xtask bench-rules [--rounds N] [--sizes N,N…]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rounds of 100 pings per row and family
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub rounds: usize,
    /// Attachments on the node per pair of rows (the two probe pods included)
    #[arg(long, value_name = "N,N…", value_delimiter = ',', default_values_t = [2, 500])]
    pub sizes: Vec<usize>,
}

pub fn run(args: &Args) -> Result<()> {
    galactic_testkit::harness::require_root()?;
    let mut rows = rules::run(&args.sizes, args.rounds)?;
    print!("{}", rules::table(&mut rows));
    Ok(())
}
