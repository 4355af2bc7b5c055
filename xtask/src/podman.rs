//! `test-podman`: the chain under a real container runtime (Debian 12's Podman with its CNI
//! backend). The tier itself is the lab's (`galactic_lab::tier::podman`, which says what it
//! shows and how it keeps the machine untouched); here are its command line, what it needs
//! installed, and the plugins it runs.

use anyhow::{Context, Result};
use std::path::PathBuf;

/// `cargo xtask test-podman`.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Stage the plugins already built in DIR instead of building them
    #[arg(long, value_name = "DIR")]
    pub prebuilt: Option<PathBuf>,
}

/// Runs the tier.
pub fn run(args: &Args) -> Result<()> {
    preflight()?;
    let started = std::time::Instant::now();
    let plugins = match &args.prebuilt {
        Some(dir) => dir.clone(),
        None => crate::stage::build_plugins(false)?,
    };
    galactic_lab::tier::podman::run(&plugins, &crate::workspace(), started)?;
    Ok(())
}

/// Whether this machine can run the tier, installing what it lacks (`cargo xtask setup`'s part
/// for the tier). Runs before anything is built, so `cargo xtask test` fails at once rather than
/// after the native suites.
pub fn preflight() -> Result<()> {
    require_root()?;
    crate::setup::ensure(&[crate::setup::Part::Demo, crate::setup::Part::Podman])
        .context("the Podman tier cannot run")?;
    Ok(())
}

/// Podman's CNI backend and the tier's namespaces need root.
pub fn require_root() -> Result<()> {
    Ok(galactic_lab::tier::podman::require_root()?)
}
