//! Booting the guest and running the tier's suites in it.
//!
//! The guest runs one generated shell script. It writes, into the results directory shared
//! read-write with the host, a marker when it starts, the kernel release and root file system it
//! found, and for each run `<name>.log` then `<name>.rc`; the host polls for those, so each
//! suite's wall time is measured on the host's clock (the guest's runs slow under TCG).

use anyhow::{bail, Context, Result};
use galactic_lab::tier::kernel::provision::{self, Kernel};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One thing to run in the guest.
pub enum Run {
    /// A test executable, run from its package directory as `cargo test` runs it.
    Test {
        /// `package/test`.
        id: String,
        /// The package's directory (the test's working directory).
        package_dir: PathBuf,
        /// The built test executable.
        executable: PathBuf,
        /// The test-name filter that selects the suite from its package's `it` binary (a
        /// module path prefix).
        filter: String,
    },
    /// `cargo xtask demo` with a VRF routing domain and the plugins built on the host.
    Demo,
}

impl Run {
    fn id(&self) -> String {
        match self {
            Self::Test { id, .. } => id.clone(),
            Self::Demo => "demo".into(),
        }
    }

    /// The results file stem: the id with `/` replaced.
    fn stem(&self) -> String {
        self.id().replace('/', "--")
    }

    /// The guest script's line for this run.
    fn script_line(&self) -> String {
        let (dir, argv) = match self {
            Self::Test {
                package_dir,
                executable,
                filter,
                ..
            } => (
                package_dir.clone(),
                // --show-output: a test that reports itself SKIPPED is visible, and failed.
                format!(
                    "{} --show-output {}",
                    quote(executable),
                    quote(Path::new(filter))
                ),
            ),
            Self::Demo => {
                let debug = executable_dir();
                (
                    crate::workspace_root(),
                    format!(
                        "{} demo --routing-domain vrf --prebuilt {}",
                        quote(&debug.join("xtask")),
                        quote(&debug)
                    ),
                )
            }
        };
        format!("run {} {} {argv}\n", self.stem(), quote(&dir))
    }
}

/// What the guest reported.
pub struct Report {
    /// Seconds from starting the VM until the guest's script began.
    pub boot_seconds: f64,
    /// Seconds from the script's start until the VM was gone.
    pub guest_seconds: f64,
    /// The runs that failed (or never reported), with why.
    pub failed: Vec<String>,
}

/// Longest the whole VM may take before it is killed and the tier fails (the budget in CI is
/// 25 minutes; this bounds a hung guest).
const VM_TIMEOUT: Duration = Duration::from_secs(40 * 60);

/// Longest one run may take inside the guest.
const RUN_TIMEOUT_SECS: u32 = 900;

/// Boots `kernel`, runs `runs` in order, and collects their results from `results`.
pub fn boot_and_run(kernel: &Kernel, runs: &[Run], kvm: bool, results: &Path) -> Result<Report> {
    let _ = std::fs::remove_dir_all(results);
    std::fs::create_dir_all(results).with_context(|| format!("create {}", results.display()))?;
    let script = results.join("guest.sh");
    std::fs::write(&script, script_text(results, runs))?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let console = std::fs::File::create(results.join("console.log"))?;
    let mut vng = Command::new("vng");
    vng.arg("--run")
        .arg(&kernel.image)
        .args(["--memory", "4G", "--cpus", "2", "--verbose"])
        .arg(format!("--rwdir={}", results.display()))
        .arg("--exec")
        .arg(&script)
        .env(
            "PATH",
            std::env::join_paths(provision::search_path(&crate::target_dir()))?,
        )
        .current_dir(crate::workspace_root())
        .stdin(Stdio::null())
        .stdout(console.try_clone()?)
        .stderr(console);
    if !kvm {
        vng.arg("--disable-kvm");
    }
    std::os::unix::process::CommandExt::process_group(&mut vng, 0);
    println!(
        "test-kernel: booting {} under {} (console: {})",
        kernel.release,
        if kvm { "KVM" } else { "TCG" },
        results.join("console.log").display()
    );
    let started = Instant::now();
    let child = vng.spawn().context("start vng (virtme-ng)")?;
    watch(child, started, runs, results, kernel)
}

/// Follows the guest until the VM exits, printing each run as it finishes.
fn watch(
    mut child: Child,
    started: Instant,
    runs: &[Run],
    results: &Path,
    kernel: &Kernel,
) -> Result<Report> {
    let mut boot = None;
    let mut last = started;
    let mut reported = 0;
    let mut failed = Vec::new();
    loop {
        let exited = child.try_wait()?.is_some();
        if boot.is_none() && results.join("started").exists() {
            let now = Instant::now();
            boot = Some(now - started);
            last = now;
            check_guest(results, kernel)?;
        }
        while reported < runs.len()
            && results
                .join(format!("{}.rc", runs[reported].stem()))
                .exists()
        {
            let now = Instant::now();
            let run = &runs[reported];
            if let Some(why) = outcome(run, results) {
                println!(
                    "[FAIL] {} ({:.0} s): {why}",
                    run.id(),
                    (now - last).as_secs_f64()
                );
                print_tail(&results.join(format!("{}.log", run.stem())));
                failed.push(format!("{} ({why})", run.id()));
            } else {
                println!("[PASS] {} ({:.0} s)", run.id(), (now - last).as_secs_f64());
            }
            last = now;
            reported += 1;
        }
        if exited {
            break;
        }
        if started.elapsed() > VM_TIMEOUT {
            // The VM's process group (vng, qemu, virtiofsd) is ours: it was started above.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX)),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            failed.push(format!(
                "the VM ran longer than {} s and was killed",
                VM_TIMEOUT.as_secs()
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let Some(boot) = boot else {
        bail!(
            "the guest never started its script (kernel {}); see {}",
            kernel.release,
            results.join("console.log").display()
        );
    };
    for run in &runs[reported..] {
        failed.push(format!(
            "{} (no result: the guest stopped before it finished)",
            run.id()
        ));
    }
    Ok(Report {
        boot_seconds: boot.as_secs_f64(),
        guest_seconds: (started.elapsed() - boot).as_secs_f64(),
        failed,
    })
}

/// The guest must be the kernel we meant, with VRF, and see the host's root over virtio-fs
/// (virtme-ng falls back to 9p silently, on which the suites are ten times slower).
fn check_guest(results: &Path, kernel: &Kernel) -> Result<()> {
    let read = |name: &str| {
        std::fs::read_to_string(results.join(name))
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    // The script writes these before `started`.
    if read("release") != kernel.release {
        bail!(
            "the guest runs {:?}, not {}",
            read("release"),
            kernel.release
        );
    }
    if read("rootfs") != "virtiofs" {
        bail!(
            "the guest's root is {:?}, not virtiofs: virtme-ng did not start virtiofsd \
             (is it on PATH? cargo install --locked virtiofsd@{})",
            read("rootfs"),
            provision::VIRTIOFSD_VERSION
        );
    }
    if read("vrf") != "ok" {
        bail!(
            "the guest kernel cannot create a VRF device: {}",
            read("vrf")
        );
    }
    Ok(())
}

/// Why a finished run failed, or `None` when it passed.
fn outcome(run: &Run, results: &Path) -> Option<String> {
    let rc =
        std::fs::read_to_string(results.join(format!("{}.rc", run.stem()))).unwrap_or_default();
    let log =
        std::fs::read_to_string(results.join(format!("{}.log", run.stem()))).unwrap_or_default();
    match rc.trim() {
        "0" => {}
        "124" => return Some(format!("timed out after {RUN_TIMEOUT_SECS} s")),
        other => return Some(format!("exit status {other}")),
    }
    // Every suite here must really run on this kernel: a test that skips itself fails the tier.
    let skipped: Vec<&str> = log.lines().filter(|l| l.contains("SKIPPED")).collect();
    if !skipped.is_empty() {
        return Some(format!("skipped in the VM: {}", skipped.join("; ")));
    }
    if let Run::Test { .. } = run {
        let Some(result) = log.lines().find(|l| l.starts_with("test result: ok.")) else {
            return Some("no test result line".into());
        };
        // A filter that matches nothing (a module renamed) passes with nothing run.
        if result.starts_with("test result: ok. 0 passed;") {
            return Some("no test ran".into());
        }
    }
    None
}

fn print_tail(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(60)..] {
        println!("    {line}");
    }
}

/// `target/debug` (or `$CARGO_TARGET_DIR/debug`): the host-built plugins and xtask.
fn executable_dir() -> PathBuf {
    crate::target_dir().join("debug")
}

/// The script the guest runs (as root, with the host's root read-only).
fn script_text(results: &Path, runs: &[Run]) -> String {
    let path = std::env::join_paths(
        [
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ]
        .iter()
        .map(PathBuf::from)
        .chain(provision::search_path(&crate::target_dir())),
    )
    .map(|p| p.to_string_lossy().into_owned())
    .unwrap_or_default();
    let ci = std::env::var("CI").unwrap_or_default();
    let mut text = format!(
        r#"#!/bin/bash
# Generated by `cargo xtask test-kernel`; runs inside the guest.
set -u
out={out}
exec >"$out/guest.log" 2>&1
uname -r >"$out/release"
awk '$2 == "/" {{print $3}}' /proc/mounts >"$out/rootfs"
if modprobe vrf 2>"$out/vrf"; then echo ok >"$out/vrf"; fi
# What a node's boot does (systemd creates /dev/net/tun from modules.devname); the guest has no udev.
modprobe tun
# Test state on a tmpfs: SQLite's WAL fails on shared file systems, and the root is read-only.
mkdir -p /run/tier && mount -t tmpfs -o size=3g,mode=1777 tier /run/tier
mkdir -p /run/tier/tmp
export TMPDIR=/run/tier/tmp HOME=/root PATH={path} CI={ci} RUST_BACKTRACE=1
export GALACTIC_TEST_ROUTING_DOMAIN=vrf GALACTIC_TEST_PREBUILT=1
touch "$out/started"
run() {{
    local stem=$1 dir=$2
    shift 2
    # Run as cargo runs a test: from its package directory, which cargo also exports.
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" timeout {timeout} "$@") >"$out/$stem.log" 2>&1
    # Written then renamed: the host polls for the file and must never read it half written.
    echo $? >"$out/$stem.rc.part" && mv "$out/$stem.rc.part" "$out/$stem.rc"
}}
"#,
        out = quote(results),
        path = quote(Path::new(&path)),
        ci = quote(Path::new(&ci)),
        timeout = RUN_TIMEOUT_SECS,
    );
    for run in runs {
        text.push_str(&run.script_line());
    }
    text.push_str("touch \"$out/done\"\n");
    text
}

/// A path as one single-quoted shell word.
fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::{outcome, Run};

    fn judge(rc: &str, log: &str) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let run = Run::Test {
            id: "p/t".into(),
            package_dir: dir.path().into(),
            executable: dir.path().join("t"),
            filter: "t::".into(),
        };
        std::fs::write(dir.path().join("p--t.rc"), rc).unwrap();
        std::fs::write(dir.path().join("p--t.log"), log).unwrap();
        outcome(&run, dir.path())
    }

    #[test]
    fn a_run_passes_only_with_status_0_a_result_line_a_test_run_and_nothing_skipped() {
        let ok = "test a ... ok\ntest result: ok. 1 passed; 0 failed\n";
        assert_eq!(judge("0\n", ok), None);
        assert!(judge("101\n", ok).unwrap().contains("exit status 101"));
        assert!(judge("124\n", ok).unwrap().contains("timed out"));
        let skipped =
            "SKIPPED vrf_test: this kernel has no VRF support\ntest result: ok. 1 passed\n";
        assert!(judge("0\n", skipped).unwrap().contains("skipped in the VM"));
        assert!(judge("0\n", "running 0 tests\n")
            .unwrap()
            .contains("no test result"));
        let none_matched = "running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; \
                            0 measured; 12 filtered out\n";
        assert!(judge("0\n", none_matched).unwrap().contains("no test ran"));
    }
}
