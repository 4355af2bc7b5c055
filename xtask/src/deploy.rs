//! `test-deploy`: the node as shipped — the installer image built from
//! `deploy/kubernetes/Dockerfile` and the DaemonSet's containers under Podman as
//! `deploy/kubernetes/daemonset.yaml` says. The tier is the lab's
//! (`galactic_lab::tier::deploy`); here are its command line, what it needs installed, and the
//! release plugins the image holds.

use anyhow::{Context, Result};
use std::path::PathBuf;

/// `cargo xtask test-deploy`.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Put the release plugins already built in DIR into the image instead of building them
    #[arg(long, value_name = "DIR")]
    pub prebuilt: Option<PathBuf>,
}

/// Runs the tier.
pub fn run(args: &Args) -> Result<()> {
    preflight()?;
    let started = std::time::Instant::now();
    let plugins = match &args.prebuilt {
        Some(dir) => dir.clone(),
        // The image holds what production ships: the static musl release build.
        None => crate::stage::build_release()?,
    };
    galactic_lab::tier::deploy::run(&plugins, &crate::workspace(), started)?;
    Ok(())
}

/// Root, and setup's parts for the tier (the demo's tools: its host checks list the nftables
/// ruleset; Podman's tools, mmdebstrap, the release toolchain), before anything is built. A
/// missing capability fails here, under CI=true as everywhere.
pub fn preflight() -> Result<()> {
    crate::podman::require_root().context("the deployment tier runs the Podman tier's engine")?;
    crate::setup::ensure(&[
        crate::setup::Part::Demo,
        crate::setup::Part::Release,
        crate::setup::Part::Podman,
        crate::setup::Part::Deploy,
    ])
    .context("the deployment tier cannot run")?;
    Ok(())
}
