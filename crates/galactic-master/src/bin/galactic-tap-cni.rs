//! `galactic-tap-cni`: the tap master plugin for VM workloads. Creates a persistent tap in the
//! host namespace, joins it to the VPC's routing domain and configures the host gateway; the VM
//! configures itself from the result. The flow lives in the `galactic_master` library.

use galactic_core::cni::{run, version_flag};
use galactic_master::Master;
use std::process::ExitCode;

fn main() -> ExitCode {
    version_flag(galactic_core::plugins::TAP_MASTER).unwrap_or_else(|| run(&Master::TAP))
}
