//! `cargo xtask bpf-pin-maps --dir DIR`: creates and pins, in a bpffs directory, every map the
//! CNI chain writes, empty and with the datapath's definitions — for the demo, for tests, and
//! for nodes where the datapath loader has not run yet. Idempotent: maps already pinned with the
//! same definition are kept with their entries; a different definition is an error.

use anyhow::{Context, Result};
use galactic_core::bpf::maps::{pin_empty_maps, PinOutcome};
use std::path::PathBuf;

/// `cargo xtask bpf-pin-maps --dir DIR`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The bpffs directory to pin into, e.g. /sys/fs/bpf/galactic
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

/// Runs the command.
pub fn run(args: &Args) -> Result<()> {
    let dir = &args.dir;
    let outcomes =
        pin_empty_maps(dir).with_context(|| format!("pin maps under {}", dir.display()))?;
    for (name, outcome) in outcomes {
        let what = match outcome {
            PinOutcome::Created => "created",
            PinOutcome::Present => "already pinned",
        };
        println!("{}: {what}", dir.join(name).display());
    }
    Ok(())
}
