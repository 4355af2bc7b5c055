//! `cargo xtask <command>`: the workspace's build, staging, demo, test and benchmark entry points.

mod bench_chain;
mod bench_ipam;
mod bench_startup;
mod bpf_maps;
mod crash;
mod crds;
mod demo;
mod fuzz;
mod kernel;
mod manifests;
mod proc;
mod smoke;
mod soak;
mod stage;
mod stats;
mod test;

use anyhow::{bail, Result};
use std::path::PathBuf;

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  build-and-stage   build the plugins and install them into a CNI bin dir (see --help)
  demo              the whole chain on this machine: pods in namespaces, pings, CHECK, DEL, cleanup
  smoke             build-and-stage into a temporary root and round-trip VERSION/STATUS
                    through every staged plugin
  test              every test, privileged ones included (fails under CI=true without root),
                    then the production-kernel tier (test-kernel); --native: only the first part
  test-kernel       the routing-domain suites and the demo with VRF on Debian 12's 6.1 kernel
                    in a VM [--only PACKAGE/TEST|demo]... [--list] [--kvm]
  bench-chain       full-chain ADD/DEL wall time and peak RSS, ours vs. bridge+host-local
  bench-startup     median start-up cost of every release plugin vs. the spawn floor
  lint-manifests    check every NAD and conflist under deploy/ with the plugins' own validation
  fuzz              bounded fuzzing of every untrusted-input parser [--seconds N per target]
  crash-campaign    full chain ADD/DEL under SIGKILLs and failpoints, then the invariants
                    [--iterations N] [--seconds S] [--seed HEX]
  soak              N parallel runtimes doing ADD/CHECK/DEL: ops/s, p50/p95, failures by code
                    [--runtimes N] [--seconds S]
";

fn main() -> std::process::ExitCode {
    match dispatch() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn dispatch() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    match command.as_str() {
        "build-and-stage" => stage::build_and_stage(&stage::Options::parse(&rest)?),
        "smoke" => smoke::run(&rest),
        "demo" => demo::run(&rest),
        "bench-ipam" => bench_ipam::run(&rest),
        "bench-chain" => bench_chain::run(&rest),
        "bench-startup" => bench_startup::run(&rest),
        "test" => test::run(&rest),
        "test-kernel" => kernel::run(&rest),
        "fuzz" => fuzz::run(&rest),
        "crash-campaign" => crash::run(&rest),
        "soak" => soak::run(&rest),
        "gen-crds" => crds::run(&rest),
        "bpf-pin-maps" => bpf_maps::run(&rest),
        "lint-manifests" => manifests::run(&rest),
        "" | "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {other:?}\n{USAGE}"),
    }
}

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
