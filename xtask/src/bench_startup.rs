//! `bench-startup`: the per-process cost every CNI call pays before doing any work, for every
//! release plugin against the spawn floor (harness: `galactic_lab::bench::startup`).

use crate::stage::PLUGINS;
use anyhow::Result;
use galactic_lab::bench::startup;

/// `cargo xtask bench-startup` (no options).
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> Result<()> {
    let bins = crate::stage::build_release()?;
    print!("{}", startup::table(&startup::run(&bins, &PLUGINS)?));
    Ok(())
}
