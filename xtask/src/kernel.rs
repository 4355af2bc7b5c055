//! `test-kernel`: the production-kernel tier. Production nodes run LTS kernels with VRF (Debian
//! 12: 6.1, Ubuntu 24.04: 6.8); the development and CI kernel is newer and has no
//! `CONFIG_NET_VRF`. This boots Debian 12's generic 6.1 kernel in a VM and runs there, with
//! `routing_domain=vrf` on every throwaway node, the privileged suites that create or use a
//! routing domain, and the demo.
//!
//! The VM is virtme-ng's: the guest's root is the host's `/` (read-only, over virtio-fs), so the
//! workspace, `target/` and the tools are the host's. Everything is built on the host first; the
//! guest never compiles. Test state lives on a tmpfs inside the guest (SQLite's WAL does not work
//! on a shared file system), and results come back through a read-write shared directory, because
//! the guest command's exit status does not come back through virtme-ng. Nested KVM guests hang
//! on this machine kind, so the VM runs under TCG unless `--kvm` is given.

mod guest;

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One run inside the guest: one module of a package's integration-test binary `it`, every
/// test of it, run as `it <test>::` (docs/testing.md).
pub struct Suite {
    /// Workspace package.
    pub package: &'static str,
    /// The module of the package's `it` binary.
    pub test: &'static str,
}

impl Suite {
    /// The module `test` of `package`'s `it` binary.
    pub const fn module(package: &'static str, test: &'static str) -> Self {
        Self { package, test }
    }

    /// `package/test`, as `--only` takes it.
    pub fn id(&self) -> String {
        format!("{}/{}", self.package, self.test)
    }

    /// The test target's crate root, relative to the workspace (what cargo's messages name).
    fn source(&self) -> PathBuf {
        let tests = Path::new("crates").join(self.package).join("tests");
        tests.join("it").join("main.rs")
    }

    /// What the test binary is given to run only this suite: the module's path prefix (the
    /// harness matches it against `module::test_name`).
    fn filter(&self) -> String {
        format!("{}::", self.test)
    }
}

/// What runs in the VM: every privileged suite that creates or uses a routing domain.
pub const SUITES: &[Suite] = &[
    Suite::module("galactic-cni", "attach"),
    Suite::module("galactic-cni", "lifecycle"),
    Suite::module("galactic-tap-cni", "tap"),
    Suite::module("galactic-master", "chain"),
    Suite::module("galactic-master", "vrf"),
    Suite::module("galactic-master", "vrf_domains"),
    Suite::module("galactic-master", "domains"),
    Suite::module("galactic-master", "bad_input"),
    Suite::module("galactic-route", "terminations"),
    Suite::module("galactic-route", "ownership"),
    Suite::module("galactic-route", "chain"),
    Suite::module("galactic-bgp", "datapath"),
    Suite::module("galactic-bgp", "nat66"),
    Suite::module("galactic-bgp", "adopted"),
];

/// `cargo xtask test-kernel`: boots Debian 12's LTS kernel (6.1, with VRF) in a VM and runs the
/// routing-domain suites and the demo there with `routing_domain=vrf`.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Run only this suite (repeatable; `demo` for the demo, which then runs only if named)
    #[arg(long, value_name = "PACKAGE/TEST")]
    pub only: Vec<String>,
    /// Leave the demo out
    #[arg(long)]
    pub no_demo: bool,
    /// Use KVM instead of TCG (nested guests hang on the development machine kind)
    #[arg(long)]
    pub kvm: bool,
    /// Print the selected suites and exit
    #[arg(long)]
    pub list: bool,
}

impl Args {
    fn demo(&self) -> bool {
        if self.only.is_empty() {
            !self.no_demo
        } else {
            self.only.iter().any(|id| id == "demo")
        }
    }

    fn selected(&self) -> Result<Vec<&'static Suite>> {
        for id in self.only.iter().filter(|id| *id != "demo") {
            if !SUITES.iter().any(|s| &s.id() == id) {
                bail!("--only {id}: not a suite of this tier (see --list)");
            }
        }
        Ok(SUITES
            .iter()
            .filter(|s| self.only.is_empty() || self.only.contains(&s.id()))
            .collect())
    }
}

/// Runs the tier.
pub fn run(args: &Args) -> Result<()> {
    let suites = args.selected()?;
    let demo = args.demo();
    if args.list {
        for suite in &suites {
            println!("{}", suite.id());
        }
        if demo {
            println!("demo");
        }
        return Ok(());
    }
    preflight()?;
    let started = std::time::Instant::now();
    let kernel = galactic_lab::tier::kernel::provision::kernel(&cache_dir())?;
    println!(
        "test-kernel: guest kernel {} ({})",
        kernel.release,
        kernel.image.display()
    );
    let executables = build(&suites)?;
    let runs: Vec<guest::Run> = suites
        .iter()
        .map(|s| guest::Run::Test {
            id: s.id(),
            package_dir: crate::workspace_root().join("crates").join(s.package),
            executable: executables[&s.id()].clone(),
            filter: s.filter(),
        })
        .chain(demo.then_some(guest::Run::Demo))
        .collect();
    let report = guest::boot_and_run(&kernel, &runs, args.kvm, &cache_dir().join("results"))?;
    println!(
        "test-kernel: {} suite(s) in {:.0} s (boot {:.0} s), {:.0} s in all",
        runs.len(),
        report.guest_seconds,
        report.boot_seconds,
        started.elapsed().as_secs_f64()
    );
    if !report.failed.is_empty() {
        bail!(
            "production-kernel tier ({}): failed: {}",
            kernel.release,
            report.failed.join(", ")
        );
    }
    Ok(())
}

/// Whether this machine can run the tier, installing what it lacks (`cargo xtask setup`'s part
/// for the tier, with the native suites' tools: the guest runs those suites on the host's root).
/// Runs before anything is built, so `cargo xtask test` fails at once rather than after the
/// native suites.
pub fn preflight() -> Result<()> {
    require_root()?;
    crate::setup::ensure(&[
        crate::setup::Part::Demo,
        crate::setup::Part::Native,
        crate::setup::Part::Kernel,
    ])
    .context("the production-kernel tier cannot run")?;
    Ok(())
}

/// The tier runs the privileged suites in the guest as the invoking user.
pub fn require_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("the production-kernel tier needs root (the guest runs the privileged suites as the invoking user)");
    }
    Ok(())
}

/// The tier's cache: the unpacked kernel package and the results of the last run.
pub(crate) fn cache_dir() -> PathBuf {
    crate::target_dir().join("kernel-tier")
}

/// Builds every workspace binary (the plugins the tests run, and this xtask for the demo) and
/// every test target on the host, as `cargo xtask test`'s native run does (the same command, so
/// after it nothing is rebuilt); returns each suite's test executable.
fn build(suites: &[&Suite]) -> Result<BTreeMap<String, PathBuf>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(crate::workspace_root())
        .args(["build", "--quiet", "--workspace", "--bins"])
        .status()
        .context("run cargo build")?;
    if !status.success() {
        bail!("cargo build --workspace --bins failed ({status})");
    }
    let out = Command::new(&cargo)
        .current_dir(crate::workspace_root())
        .args([
            "test",
            "--workspace",
            "--all-targets",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("run cargo test --no-run")?;
    if !out.status.success() {
        bail!(
            "cargo test --workspace --all-targets --no-run failed ({})",
            out.status
        );
    }
    let built = test_executables(&String::from_utf8_lossy(&out.stdout));
    suites
        .iter()
        .map(|suite| {
            let source = suite.source();
            let exe = built
                .iter()
                .find(|(src, _)| src.ends_with(&source))
                .map(|(_, exe)| exe.clone())
                .with_context(|| {
                    format!(
                        "cargo test --no-run built no test from {}",
                        source.display()
                    )
                })?;
            Ok((suite.id(), exe))
        })
        .collect()
}

/// (source file, executable) of every test target, from cargo's JSON messages.
fn test_executables(messages: &str) -> Vec<(PathBuf, PathBuf)> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["profile"]["test"] == true)
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "test"))
        })
        .filter_map(|m| {
            Some((
                PathBuf::from(m["target"]["src_path"].as_str()?),
                PathBuf::from(m["executable"].as_str()?),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::SUITES;

    /// A suite whose module or file was renamed would run nothing (a filter matching no test)
    /// or fail only after the whole build: each must name a test source of its package.
    #[test]
    fn every_suite_names_a_test_source_of_its_package() {
        let root = crate::workspace_root();
        for suite in SUITES {
            let tests = root.join("crates").join(suite.package).join("tests");
            let it = tests.join("it");
            let found = it.join("main.rs").is_file()
                && (it.join(format!("{}.rs", suite.test)).is_file()
                    || it.join(suite.test).join("mod.rs").is_file());
            assert!(found, "{}: no such test source", suite.id());
        }
    }
}
