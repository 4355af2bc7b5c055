//! `cargo xtask <command>`: the workspace's build, staging, demo, test and benchmark entry points.
//!
//! One parser (clap) for every command: `cargo xtask <command> --help` prints that command's
//! options and exits before anything is built or run, unknown flags and stray arguments are
//! refused, and `cargo xtask --help` lists every command.

mod bench_chain;
mod bench_domain;
mod bench_fill;
mod bench_ipam;
mod bench_kube;
mod bench_route;
mod bench_rules;
mod bench_startup;
mod bpf_maps;
mod check_layout;
mod check_rss;
mod crash;
mod crds;
mod debian;
mod demo;
mod deploy;
mod docs_check;
mod fuzz;
mod kernel;
mod layout;
mod manifests;
mod podman;
mod setup;
mod smoke;
mod soak;
mod stage;
mod test;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The workspace's build, staging, demo, test and benchmark entry points.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Every command; the first line of each doc comment is its line in `cargo xtask --help`.
#[derive(Debug, Subcommand)]
enum Command {
    /// Install what demo and test need (Debian packages, the musl target, virtme-ng,
    /// virtiofsd, the VM's kernel); checks only when everything is there
    Setup(setup::Args),
    /// Build the plugins and install them into a CNI bin dir, with a node config (and a
    /// conflist)
    BuildAndStage(stage::Options),
    /// The whole chain on this machine: pods in namespaces, pings, CHECK, DEL, cleanup (as root)
    Demo(demo::Args),
    /// Stage into a temporary root and round-trip VERSION/STATUS through every staged plugin
    Smoke(smoke::Args),
    /// Every test, privileged ones included (fails under CI=true without root), then the
    /// production-kernel tier (test-kernel); --native: only the first part
    Test(test::Args),
    /// The routing-domain suites and the demo with VRF on Debian 12's 6.1 kernel in a VM
    TestKernel(kernel::Args),
    /// Containers of Debian 12's Podman (CNI backend) attached through the example conflists
    TestPodman(podman::Args),
    /// The installer image built offline and the DaemonSet's containers under Podman, as the
    /// manifest says (fresh node, restarts and updates, a Go node, a failing API server)
    TestDeploy(deploy::Args),
    /// Full-chain ADD/DEL wall time and peak RSS, ours vs. bridge+host-local
    BenchChain(bench_chain::Args),
    /// The master's ADD creating a VPC's routing domain vs. joining it, DEL removing vs. keeping it
    BenchDomain(bench_domain::Args),
    /// A probe pod's ADD/CHECK/DEL/GC at 0-1000 live attachments over 1-250 VPCs, ours vs.
    /// bridge+host-local
    BenchFill(bench_fill::Args),
    /// IPAM ADD/CHECK/DEL at several occupancies, galactic-ipam vs. host-local
    BenchIpam(bench_ipam::Args),
    /// galactic-bgp's Kubernetes publisher: requests per ADD/DEL vs. upstream, wall time at
    /// 0, 1 and 5 ms per request, client start-up
    BenchKube(bench_kube::Args),
    /// galactic-route ADD/CHECK/DEL on a fresh VPC vs. long history and many routes
    BenchRoute(bench_route::Args),
    /// Table mode's packet path: pod-to-pod round trip with a rule per attachment vs. per VPC
    BenchRules(bench_rules::Args),
    /// Median start-up cost of every release plugin vs. the spawn floor
    BenchStartup(bench_startup::Args),
    /// Every plugin's peak RSS in ADD/CHECK/DEL at most half of bridge's (as root)
    CheckRss(check_rss::Args),
    /// Every release plugin's hot-code layout still matches its code and toolchain (link maps)
    CheckLayout(check_layout::Args),
    /// Write layout/<plugin>.ld, each plugin's hot-code layout, from traced calls (as root)
    Layout(layout::Args),
    /// Write deploy/crds/*.yaml from the Rust custom resource types
    GenCrds(crds::Args),
    /// Check every NAD and conflist under deploy/ (or PATHs) with the plugins' own validation
    LintManifests(manifests::Args),
    /// Create and pin, empty, every eBPF map the chain writes, in a bpffs directory
    BpfPinMaps(bpf_maps::Args),
    /// Bounded fuzzing of every untrusted-input parser
    Fuzz(fuzz::Args),
    /// Full chain ADD/DEL under SIGKILLs and failpoints, then the invariants
    CrashCampaign(crash::Args),
    /// N parallel runtimes doing ADD/CHECK/DEL: ops/s, p50/p95, failures by code
    Soak(soak::Args),
    /// Check the docs' commands, flags, repository paths and config keys against the code
    CheckDocs(docs_check::Args),
}

fn main() -> std::process::ExitCode {
    // `--help`, a bad flag or a stray argument ends here: clap prints and exits (0 for help,
    // 2 for a usage error) before any command does anything.
    let cli = Cli::parse();
    forget_cargo_run_env();
    match dispatch(cli.command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn dispatch(command: Command) -> Result<()> {
    match command {
        Command::Setup(args) => setup::run(&args),
        Command::BuildAndStage(opts) => stage::build_and_stage(&opts),
        Command::Demo(args) => demo::run(&args),
        Command::Smoke(args) => smoke::run(&args),
        Command::Test(args) => test::run(&args),
        Command::TestKernel(args) => kernel::run(&args),
        Command::TestPodman(args) => podman::run(&args),
        Command::TestDeploy(args) => deploy::run(&args),
        Command::BenchChain(args) => bench_chain::run(&args),
        Command::BenchFill(args) => bench_fill::run(&args),
        Command::BenchIpam(args) => bench_ipam::run(&args),
        Command::BenchKube(args) => bench_kube::run(&args),
        Command::BenchRoute(args) => bench_route::run(&args),
        Command::BenchRules(args) => bench_rules::run(&args),
        Command::BenchDomain(args) => bench_domain::run(&args),
        Command::BenchStartup(args) => bench_startup::run(&args),
        Command::CheckRss(args) => check_rss::run(&args),
        Command::CheckLayout(args) => check_layout::run(&args),
        Command::Layout(args) => layout::run(&args),
        Command::GenCrds(args) => crds::run(&args),
        Command::LintManifests(args) => manifests::run(&args),
        Command::BpfPinMaps(args) => bpf_maps::run(&args),
        Command::Fuzz(args) => fuzz::run(&args),
        Command::CrashCampaign(args) => crash::run(&args),
        Command::Soak(args) => soak::run(&args),
        Command::CheckDocs(args) => docs_check::run(&args),
    }
}

/// The workspace root (xtask lives one level below it).
/// `cargo run` describes this package to this process (CARGO_PKG_*, CARGO_MANIFEST_DIR, ...);
/// the cargo runs it starts must not inherit that: ring's build script tracks those variables,
/// so it would rerun, and everything above it rebuild, each time `cargo xtask` and a cargo it
/// starts take turns (some 25 s a run on two cores). `CARGO` and `CARGO_HOME` stay.
fn forget_cargo_run_env() {
    const SET_BY_CARGO_RUN: &[&str] = &[
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
    ];
    let names = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|name| name.starts_with("CARGO_PKG_") || SET_BY_CARGO_RUN.contains(&name.as_str()));
    for name in names.collect::<Vec<_>>() {
        std::env::remove_var(name);
    }
}

pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// The target directory: `$CARGO_TARGET_DIR`, or `target/` of the workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The workspace as the lab's tiers are given it (they do not guess it themselves).
pub fn workspace() -> galactic_lab::tier::Workspace {
    galactic_lab::tier::Workspace {
        root: workspace_root(),
        target_dir: target_dir(),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// The derive attributes are consistent (clap's own check of every command and flag).
    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
