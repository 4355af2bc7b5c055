//! `test`: every test of the workspace, privileged ones included, then the production-kernel
//! tier (`test-kernel`: the routing-domain suites with VRF on an LTS kernel in a VM).
//!
//! Privileged tests need root, `ip` (iproute2) and network namespaces. Under `CI=true` a missing
//! capability is a hard failure here, before any test runs, so nothing is skipped silently.

use anyhow::{bail, Context, Result};
use std::process::Command;

pub fn run(args: &[String]) -> Result<()> {
    // `--native`: the quick local loop, without the production-kernel tier's VM.
    let native_only = args.iter().any(|a| a == "--native");
    preflight()?;
    if !native_only {
        crate::kernel::preflight()?;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["test", "--workspace", "--all-targets"])
        .args(args.iter().filter(|a| *a != "--native"))
        .status()
        .context("run cargo test")?;
    if !status.success() {
        bail!("tests failed ({status})");
    }
    if !native_only {
        crate::kernel::run(&[])?;
    }
    Ok(())
}

/// What privileged tests need; reported (and fatal under CI) before the run.
fn preflight() -> Result<()> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root (privileged tests create network namespaces)".to_owned());
    }
    if Command::new("ip")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        missing.push("the `ip` command (Debian package iproute2)".to_owned());
    }
    if missing.is_empty() {
        return Ok(());
    }
    let text = format!(
        "privileged tests cannot run: missing {}",
        missing.join("; ")
    );
    if ci {
        bail!("{text} (CI=true: refusing to skip them)");
    }
    eprintln!("warning: {text}; they will report themselves as skipped");
    Ok(())
}
