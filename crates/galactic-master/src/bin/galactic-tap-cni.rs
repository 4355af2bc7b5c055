//! `galactic-tap-cni`: the tap master plugin for VM workloads. Creates a persistent tap in the
//! host namespace, joins it to the VPC's routing domain and configures the host gateway; the VM
//! configures itself from the result. The flow lives in the `galactic_master` library.

use galactic_core::cni::run;
use galactic_master::Master;
use std::process::ExitCode;

fn main() -> ExitCode {
    run(&Master::TAP)
}
