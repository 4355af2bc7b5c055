//! `galactic-tap-cni`: the tap master plugin for VM workloads. Creates a persistent tap in the
//! host namespace ([`tun`], with the stanza's [`options`]), joins it to the VPC's routing domain
//! and configures the host gateway; the VM configures itself from the result ([`tap`]), a Kata
//! guest from its DAN file ([`kata`]); the tap is recorded for the datapath container's router
//! advertisements ([`radv`]). The flow is `galactic_master`'s.

mod kata;
mod options;
mod radv;
mod staged;
mod tap;
mod tun;

use galactic_core::cni::{run, version_flag};
use galactic_master::Master;
use std::process::ExitCode;

fn main() -> ExitCode {
    version_flag(galactic_core::plugins::TAP_MASTER)
        .unwrap_or_else(|| run(&Master::<tap::Tap>::new()))
}

/// musl's allocator returns freed memory to the kernel eagerly; dlmalloc keeps it for reuse
/// (decision 0071). Test and debug builds (glibc) keep the system allocator.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
