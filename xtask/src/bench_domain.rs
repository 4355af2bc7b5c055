//! `bench-domain`: the master's ADD into a VPC whose routing domain exists against its ADD after
//! the VPC's last DEL removed the domain, and the DEL that keeps a domain against the DEL that
//! removes it, in one run (harness: `galactic_lab::bench::domain`); this command builds what it
//! measures.

use anyhow::Result;
use galactic_lab::bench::domain;

/// `cargo xtask bench-domain [--iterations N] [--plugins DIR]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Measured rounds (each: both ADDs and both DELs)
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub iterations: usize,
    /// Measure the plugins in DIR (e.g. an earlier commit's release build, for a before/after)
    /// instead of building this tree's
    #[arg(long, value_name = "DIR")]
    pub plugins: Option<std::path::PathBuf>,
}

pub fn run(args: &Args) -> Result<()> {
    galactic_testkit::harness::require_root()?;
    let plugins = match &args.plugins {
        // Absolute: the bench's bin dir links each plugin by this path.
        Some(dir) => dir.canonicalize()?,
        None => crate::stage::build_release()?,
    };
    print!(
        "{}",
        domain::table(&domain::run(&plugins, args.iterations)?)
    );
    Ok(())
}
