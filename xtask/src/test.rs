//! `test`: every test of the workspace, privileged ones included, then the Podman tier
//! (`test-podman`: the chain under Debian 12's Podman), the production-kernel tier
//! (`test-kernel`: the routing-domain suites with VRF on an LTS kernel in a VM), the release
//! plugins' resident-size budget (`check-rss`: every plugin's peak RSS at most half of bridge's)
//! and their hot-code layouts (`check-layout`: every script still matches the code it orders).
//!
//! Privileged tests need root, network namespaces and the tools `cargo xtask setup` installs,
//! which runs first (for `--native` only the native suites' part). Under `CI=true` missing root
//! is a hard failure here, before any test runs, so nothing is skipped silently; a tool that
//! cannot be installed fails the run everywhere.

use anyhow::{bail, Context, Result};
use std::process::Command;

/// `cargo xtask test [CARGO_TEST_ARGS]... [-- TEST_BINARY_ARGS...]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only the native suites: leave out the Podman tier, the production-kernel tier's VM and the
    /// release plugins' RSS budget and layout check (the quick local loop)
    #[arg(long)]
    pub native: bool,
    /// Passed on to `cargo test --workspace --all-targets` as given, e.g. `--no-fail-fast` or
    /// `-p galactic-ipam`
    #[arg(allow_hyphen_values = true, value_name = "CARGO_TEST_ARGS")]
    pub cargo_test_args: Vec<String>,
    /// After `--`: passed on to the test binaries, e.g. `-- --test-threads 1`
    #[arg(last = true, value_name = "TEST_BINARY_ARGS")]
    pub test_binary_args: Vec<String>,
}

impl Args {
    /// What follows `cargo test --workspace --all-targets`.
    fn cargo_test_tail(&self) -> Vec<String> {
        let mut tail = self.cargo_test_args.clone();
        if !self.test_binary_args.is_empty() {
            tail.push("--".to_owned());
            tail.extend(self.test_binary_args.iter().cloned());
        }
        tail
    }
}

pub fn run(args: &Args) -> Result<()> {
    let native_only = args.native;
    let args = args.cargo_test_tail();
    // First, native or not: it takes well under a second and needs neither root nor a build.
    crate::docs_check::run(&crate::docs_check::Args::default())?;
    preflight()?;
    if native_only {
        crate::setup::ensure(crate::setup::NATIVE)?;
    } else {
        // Both tiers' root checks, then one setup for everything, so one `apt-get install`
        // covers the machine before the native suites start.
        let missing: Vec<String> = [crate::podman::require_root(), crate::kernel::require_root()]
            .into_iter()
            .filter_map(Result::err)
            .map(|e| format!("{e:#}"))
            .collect();
        if !missing.is_empty() {
            bail!(
                "{}; `cargo xtask test --native` runs only the native suites",
                missing.join("\n")
            );
        }
        crate::setup::ensure(crate::setup::ALL).context(
            "`cargo xtask test` cannot run; `cargo xtask test --native` runs only the native suites",
        )?;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["test", "--workspace", "--all-targets"])
        .args(&args)
        .status()
        .context("run cargo test")?;
    if !status.success() {
        bail!("tests failed ({status})");
    }
    if !native_only {
        crate::podman::run(&crate::podman::Args::default())?;
        crate::deploy::run(&crate::deploy::Args::default())?;
        crate::kernel::run(&crate::kernel::Args::default())?;
        // A size, not a time: the release binaries' resident pages, measured on this run's
        // build against the reference plugin's.
        crate::check_rss::run(&crate::check_rss::Args { ratio: 0.5 })?;
        // The same build's link maps: the budget above has room for stale hot-code scripts,
        // which only this sees.
        crate::check_layout::run(&crate::check_layout::Args::default())?;
        // The release plugins as a runtime first meets them: staged, VERSION, STATUS.
        crate::smoke::run(&crate::smoke::Args { release: true })?;
    }
    Ok(())
}

/// Root, which privileged tests need; reported (and fatal under CI) before the run. Their tools
/// are setup's (`cargo xtask setup`), installed before the run.
fn preflight() -> Result<()> {
    if nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let text = "privileged tests cannot run: missing root (they create network namespaces)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        bail!("{text} (CI=true: refusing to skip them)");
    }
    eprintln!("warning: {text}; they will report themselves as skipped");
    Ok(())
}
