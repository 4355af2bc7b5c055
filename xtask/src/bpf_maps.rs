//! `cargo xtask bpf-pin-maps --dir DIR`: creates and pins, in a bpffs directory, every map the
//! CNI chain writes, empty and with the datapath's definitions — for the demo, for tests, and
//! for nodes where the datapath loader has not run yet. Idempotent: maps already pinned with the
//! same definition are kept with their entries; a different definition is an error.

use anyhow::{bail, Context, Result};
use galactic_core::bpf::maps::{pin_empty_maps, PinOutcome};
use std::path::PathBuf;

const USAGE: &str =
    "usage: cargo xtask bpf-pin-maps --dir <bpffs directory, e.g. /sys/fs/bpf/galactic>";

/// Runs the command.
pub fn run(args: &[String]) -> Result<()> {
    let dir = match args {
        [flag, dir] if flag == "--dir" => PathBuf::from(dir),
        _ => bail!("{USAGE}"),
    };
    let outcomes =
        pin_empty_maps(&dir).with_context(|| format!("pin maps under {}", dir.display()))?;
    for (name, outcome) in outcomes {
        let what = match outcome {
            PinOutcome::Created => "created",
            PinOutcome::Present => "already pinned",
        };
        println!("{}: {what}", dir.join(name).display());
    }
    Ok(())
}
