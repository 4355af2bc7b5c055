//! `galactic-cni`: the veth master plugin. Attaches a container to its VPC's routing domain
//! through a veth pair whose container end is created directly in the container's namespace;
//! IPAM is delegated by exec. The flow is `galactic_master`'s; this crate owns the veth pair
//! ([`veth`]) and the container end's configuration ([`container`]).

mod container;
mod veth;

use galactic_core::cni::{run, version_flag};
use galactic_master::Master;
use std::process::ExitCode;

fn main() -> ExitCode {
    version_flag(galactic_core::plugins::VETH_MASTER)
        .unwrap_or_else(|| run(&Master::<veth::Veth>::new()))
}

/// musl's allocator returns freed memory to the kernel eagerly; dlmalloc keeps it for reuse
/// (decision 0071). Test and debug builds (glibc) keep the system allocator.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
