//! The Podman tier (`cargo xtask test-podman`): the chain under a real container runtime.
//! Debian 12's Podman (4.3, the last Podman with the CNI network backend; its libcni 1.1
//! accepts results up to cniVersion 1.0.0) runs busybox containers attached through the example
//! conflists of `deploy/cni/`, with the plugins staged into a temporary bin dir and a node
//! config of their own.
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
//!
//! xtask installs what the tier needs and builds the plugins, then calls [`run`]. The engine
//! ([`engine::Engine`]) is public: a tier that runs other containers under Podman uses it too.

pub mod engine;
pub mod machine;
pub mod report;
mod scenario;

use super::{Chain, Error, Result, Workspace};
use std::path::Path;
use std::time::Instant;

/// Runs the tier with the plugins built in `plugins`; `started` is when the run began (the
/// build included), for the total time it reports.
pub fn run(plugins: &Path, workspace: &Workspace, started: Instant) -> Result<()> {
    let version = || {
        let version = engine::podman_version()
            .unwrap_or_else(|e| format!("podman version unknown: {}", Chain(&e)));
        format!(" ({version})")
    };
    machine::untouched("the Podman tier", "test-podman", started, version, || {
        scenario::run(plugins, workspace)
    })
}

/// Podman's CNI backend and the tier's namespaces need root.
pub fn require_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Err(Error::failed(
            "the Podman tier needs root (Podman's CNI backend and the tier's namespaces)",
        ));
    }
    Ok(())
}
