//! The production-kernel tier (`cargo xtask test-kernel`). Production nodes run LTS kernels
//! with VRF (Debian 12: 6.1, Ubuntu 24.04: 6.8); the development and CI kernel is newer and has
//! no `CONFIG_NET_VRF`. This boots Debian 12's generic 6.1 kernel in a VM and runs there, with
//! `routing_domain=vrf` on every throwaway node, the privileged suites that create or use a
//! routing domain, and the demo.
//!
//! The VM is virtme-ng's: the guest's root is the host's `/` (read-only, over virtio-fs), so the
//! workspace, `target/` and the tools are the host's. Everything is built on the host first; the
//! guest never compiles. Test state lives on a tmpfs inside the guest (SQLite's WAL does not work
//! on a shared file system), and results come back through a read-write shared directory, because
//! the guest command's exit status does not come back through virtme-ng. Nested KVM guests hang
//! on this machine kind, so the VM runs under TCG unless `--kvm` is given.
//!
//! xtask installs what the tier needs (with [`provision`], which `cargo xtask setup` uses too)
//! and calls [`run`] with a [`Plan`]; the build of the plugins and test executables on the
//! host is the tier's own (it needs each suite's executable).

mod guest;
pub mod provision;

use super::{Context, Result, Workspace};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One run inside the guest: one module of a package's integration-test binary `it`, every
/// test of it, run as `it <test>::` (docs/testing.md).
#[derive(Debug)]
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
    pub fn source(&self) -> PathBuf {
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
    Suite::module("galactic-cni", "cost"),
    Suite::module("galactic-tap-cni", "tap"),
    Suite::module("galactic-master", "chain"),
    Suite::module("galactic-master", "vrf"),
    Suite::module("galactic-master", "vrf_domains"),
    Suite::module("galactic-master", "rotation"),
    Suite::module("galactic-master", "domains"),
    Suite::module("galactic-master", "bad_input"),
    Suite::module("galactic-route", "terminations"),
    Suite::module("galactic-route", "ownership"),
    Suite::module("galactic-route", "chain"),
    Suite::module("galactic-bgp", "datapath"),
    Suite::module("galactic-bgp", "nat66"),
    Suite::module("galactic-bgp", "adopted"),
];

/// What one run of the tier does: which suites, whether the demo, and how the VM runs.
#[derive(Debug)]
pub struct Plan {
    /// The suites, in [`SUITES`]' order.
    pub suites: Vec<&'static Suite>,
    /// Whether the demo runs after them.
    pub demo: bool,
    /// KVM instead of TCG (nested guests hang on the development machine kind).
    pub kvm: bool,
}

impl Plan {
    /// The plan for `--only` ids `only` (`package/test`, or `demo`; none: every suite, and the
    /// demo unless `no_demo`). An id that names no suite is refused.
    pub fn new(only: &[String], no_demo: bool, kvm: bool) -> Result<Self> {
        for id in only.iter().filter(|id| *id != "demo") {
            if !SUITES.iter().any(|s| &s.id() == id) {
                fail!("--only {id}: not a suite of this tier (see --list)");
            }
        }
        let suites = SUITES
            .iter()
            .filter(|s| only.is_empty() || only.contains(&s.id()))
            .collect();
        let demo = if only.is_empty() {
            !no_demo
        } else {
            only.iter().any(|id| id == "demo")
        };
        Ok(Self { suites, demo, kvm })
    }

    /// The ids of what runs, in order (what `--list` prints).
    pub fn ids(&self) -> Vec<String> {
        self.suites
            .iter()
            .map(|s| s.id())
            .chain(self.demo.then(|| "demo".to_owned()))
            .collect()
    }
}

/// Runs the tier as `plan` says, in `workspace`: the guest kernel, the build on the host, the VM.
pub fn run(plan: &Plan, workspace: &Workspace) -> Result<()> {
    let started = std::time::Instant::now();
    let cache = cache_dir(&workspace.target_dir);
    let kernel = provision::kernel(&cache)?;
    println!(
        "test-kernel: guest kernel {} ({})",
        kernel.release,
        kernel.image.display()
    );
    let executables = build(&plan.suites, workspace)?;
    let runs: Vec<guest::Run> = plan
        .suites
        .iter()
        .map(|s| guest::Run::Test {
            id: s.id(),
            package_dir: workspace.root.join("crates").join(s.package),
            executable: executables[&s.id()].clone(),
            filter: s.filter(),
        })
        .chain(plan.demo.then_some(guest::Run::Demo))
        .collect();
    let report = guest::boot_and_run(&kernel, &runs, plan.kvm, &cache.join("results"), workspace)?;
    println!(
        "test-kernel: {} suite(s) in {:.0} s (boot {:.0} s), {:.0} s in all",
        runs.len(),
        report.guest_seconds,
        report.boot_seconds,
        started.elapsed().as_secs_f64()
    );
    if !report.failed.is_empty() {
        fail!(
            "production-kernel tier ({}): failed: {}",
            kernel.release,
            report.failed.join(", ")
        );
    }
    Ok(())
}

/// The tier runs the privileged suites in the guest as the invoking user.
pub fn require_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        fail!("the production-kernel tier needs root (the guest runs the privileged suites as the invoking user)");
    }
    Ok(())
}

/// The tier's cache under the target dir `target_dir`: the unpacked kernel package and the
/// results of the last run.
pub fn cache_dir(target_dir: &Path) -> PathBuf {
    target_dir.join("kernel-tier")
}

/// Builds every workspace binary (the plugins the tests run, and this xtask for the demo) and
/// every test target on the host, as `cargo xtask test`'s native run does (the same command, so
/// after it nothing is rebuilt); returns each suite's test executable.
fn build(suites: &[&Suite], workspace: &Workspace) -> Result<BTreeMap<String, PathBuf>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(&workspace.root)
        .args(["build", "--quiet", "--workspace", "--bins"])
        .status()
        .context("run cargo build")?;
    if !status.success() {
        fail!("cargo build --workspace --bins failed ({status})");
    }
    let out = Command::new(&cargo)
        .current_dir(&workspace.root)
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
        fail!(
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
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
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
