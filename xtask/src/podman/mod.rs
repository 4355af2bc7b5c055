//! `test-podman`: the chain under a real container runtime. Debian 12's Podman (4.3, the last
//! Podman with the CNI network backend; its libcni 1.1 accepts results up to cniVersion 1.0.0)
//! runs busybox containers attached through the example conflists of `deploy/cni/`, with the
//! plugins staged into a temporary bin dir and a node config of their own.
//!
//! Everything is private to the run. Podman reads a containers.conf and a storage.conf written
//! under `target/podman-tier/` (vfs storage, runc, CNI backend, file locks, its plugin and
//! network config dirs, the node config passed through `[engine] env`). It runs inside the test
//! kit's throwaway host network namespace, entered with `nsenter --net` (not `ip netns exec`,
//! which remounts `/sys` without the cgroup hierarchies runc needs), and inside a mount
//! namespace of the tier's own in which `/run` and `/var/lib` are empty tmpfs: Podman 4.3 has
//! no setting for libcni's cache (`/var/lib/cni`), the image blob cache
//! (`/var/lib/containers/cache`), runc's state (`/run/runc`) or where container namespaces are
//! mounted (`/run/netns`), and none of those of the machine is touched. Containers get a cgroup
//! parent of the run's own, removed at the end.
//!
//! What it shows (scenario.rs): two containers of one VPC reach each other in both families, a
//! container of another VPC reaches neither; `podman inspect` shows the plugins' addresses;
//! `--ip`, `--ip6` and `--mac-address` are honoured exactly, or refused with the plugin's
//! message; `restart` and `network reload` keep a container's addresses; a container that exits
//! on its own is detached; `rm` leaves no interface, rule, record or allocation (the routing
//! domains stay for the chain's GC, which then leaves the host namespace as it began); the
//! machine's own links, routes, rules, nftables ruleset and runtime directories are unchanged.

mod engine;
mod machine;
mod report;
mod scenario;

use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// `cargo xtask test-podman`.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Stage the plugins already built in DIR instead of building them
    #[arg(long, value_name = "DIR")]
    pub prebuilt: Option<PathBuf>,
}

/// Programs the tier runs, each with the Debian package that has it.
pub const TOOLS: &[(&str, &str)] = &[
    ("podman", "podman"),
    ("runc", "runc"),
    ("conmon", "conmon"),
    ("nsenter", "util-linux"),
    ("unshare", "util-linux"),
    ("mount", "mount"),
    ("busybox", "busybox-static"),
    ("tar", "tar"),
    ("ip", "iproute2"),
    ("nft", "nftables"),
];

/// What `.ci/run` installs for the tier (`--no-install-recommends`: Podman's recommendations
/// pull in crun, fuse-overlayfs and slirp4netns, none of which the tier uses).
pub const APT_PACKAGES: &[&str] = &["podman", "runc", "busybox-static"];

/// Runs the tier.
pub fn run(args: &Args) -> Result<()> {
    preflight()?;
    let started = std::time::Instant::now();
    let plugins = match &args.prebuilt {
        Some(dir) => dir.clone(),
        None => crate::stage::build_plugins(false)?,
    };
    let machine_before = machine::Snapshot::take()?;
    let outcome = scenario::run(&plugins);
    let machine_after = machine::Snapshot::take()?;
    let changed = machine_before.differences(&machine_after);
    println!(
        "[{}] the machine's own links, routes, rules, nftables ruleset, runtime directories and cgroups are unchanged",
        if changed.is_empty() { "PASS" } else { "FAIL" }
    );
    println!(
        "test-podman: {:.0} s in all ({})",
        started.elapsed().as_secs_f64(),
        engine::podman_version().unwrap_or_else(|e| format!("podman version unknown: {e}"))
    );
    outcome.context("the Podman tier failed (see [FAIL] above)")?;
    if !changed.is_empty() {
        bail!(
            "the Podman tier changed the machine: {}",
            changed.join("; ")
        );
    }
    Ok(())
}

/// Whether this machine can run the tier; fails naming exactly what to install. Runs before
/// anything is built, so `cargo xtask test` fails at once rather than after the native suites.
pub fn preflight() -> Result<()> {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root (Podman's CNI backend and the tier's namespaces need it)".to_owned());
    }
    for (program, package) in TOOLS {
        if crate::kernel::find_program(program).is_none() {
            missing.push(format!("`{program}` (Debian package {package})"));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    bail!(
        "the Podman tier cannot run: missing {}.\n\
         Install with: apt-get install --no-install-recommends {} (.ci/run does this); \
         `cargo xtask test --native` runs only the native suites",
        missing.join("; "),
        APT_PACKAGES.join(" "),
    )
}
