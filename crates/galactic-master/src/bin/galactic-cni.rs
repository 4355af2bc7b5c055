//! `galactic-cni`: the veth master plugin. Attaches a container to its VPC's routing domain
//! through a veth pair whose guest end is created directly in the container's namespace; IPAM is
//! delegated by exec. The flow lives in the `galactic_master` library.

use galactic_core::cni::{run, version_flag};
use galactic_master::Master;
use std::process::ExitCode;

fn main() -> ExitCode {
    version_flag(galactic_core::plugins::VETH_MASTER).unwrap_or_else(|| run(&Master::VETH))
}
