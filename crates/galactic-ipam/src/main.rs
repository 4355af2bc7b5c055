//! `galactic-ipam`: a CNI plugin when run without arguments (as every runtime runs it), an
//! operator tool with them (`galactic-ipam --help`).

use galactic_ipam::{cli, plugin::IpamPlugin};
use std::process::ExitCode;

fn main() -> ExitCode {
    if let Some(code) = galactic_core::cni::version_flag(galactic_core::plugins::IPAM) {
        return code;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        galactic_core::cni::run(&IpamPlugin)
    } else {
        cli::main(&args)
    }
}

/// musl's allocator returns freed memory to the kernel eagerly; dlmalloc keeps it for reuse
/// (decision 0071). Test and debug builds (glibc) keep the system allocator.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
