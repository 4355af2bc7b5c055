//! The command line as a person meets it: `--help` of every command prints and exits 0 without
//! building, running or writing anything; unknown flags and stray arguments are refused;
//! `cargo xtask --help` lists every command; `test` hands its arguments to `cargo test`.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

/// Every command the README and docs name; `--help` must list at least these.
const KNOWN: [&str; 18] = [
    "setup",
    "build-and-stage",
    "demo",
    "smoke",
    "test",
    "test-kernel",
    "test-podman",
    "bench-chain",
    "bench-fill",
    "bench-ipam",
    "bench-startup",
    "gen-crds",
    "lint-manifests",
    "bpf-pin-maps",
    "fuzz",
    "crash-campaign",
    "soak",
    "check-docs",
];

/// A sandbox in which any attempt to build, install, run a network command or write a
/// temporary file leaves a trace: `CARGO` and every command on `PATH` are shims that record
/// their name, and `TMPDIR`/`HOME`/the working directory are empty directories.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["bin", "calls", "tmp", "home", "cwd"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let calls = dir.path().join("calls");
        for name in [
            "cargo", "ip", "tc", "nft", "ping", "sysctl", "apt-get", "bpftool", "clang",
        ] {
            let shim = dir.path().join("bin").join(name);
            std::fs::write(
                &shim,
                format!(
                    "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}/{name}\n",
                    calls.display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Self { dir }
    }

    /// Removes the shim of `command`, as on a machine without its package.
    fn without(self, command: &str) -> Self {
        std::fs::remove_file(self.path("bin").join(command)).unwrap();
        self
    }

    fn path(&self, sub: &str) -> std::path::PathBuf {
        self.dir.path().join(sub)
    }

    fn xtask(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(args)
            .env_clear()
            .env("PATH", self.path("bin"))
            .env("CARGO", self.path("bin").join("cargo"))
            .env("TMPDIR", self.path("tmp"))
            .env("HOME", self.path("home"))
            // The workspace's own target dir holds what an earlier setup installed there (the
            // virtme-ng virtualenv, the kernel): the sandbox's machine has none of it.
            .env("CARGO_TARGET_DIR", self.path("target"))
            .current_dir(self.path("cwd"))
            .output()
            .unwrap()
    }

    /// Names of the shims that ran, and files left in the scratch directories.
    fn traces(&self) -> Vec<String> {
        let mut traces = Vec::new();
        for sub in ["calls", "tmp", "home", "cwd"] {
            for entry in std::fs::read_dir(self.path(sub)).unwrap() {
                traces.push(format!(
                    "{sub}/{}",
                    entry.unwrap().file_name().to_string_lossy()
                ));
            }
        }
        traces
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The command names in the `Commands:` section of `cargo xtask --help`.
fn listed_commands() -> Vec<String> {
    let out = Sandbox::new().xtask(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    text(&out.stdout)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect()
}

#[test]
fn the_usage_text_lists_every_command() {
    let listed = listed_commands();
    for name in KNOWN {
        assert!(
            listed.iter().any(|l| l == name),
            "{name} missing: {listed:?}"
        );
    }
    let out = Sandbox::new().xtask(&[]);
    assert_eq!(out.status.code(), Some(2), "no command is a usage error");
    assert!(text(&out.stderr).contains("Usage"), "{out:?}");
}

#[test]
fn help_of_every_command_prints_and_does_nothing_else() {
    for name in listed_commands() {
        for flag in ["--help", "-h"] {
            let sandbox = Sandbox::new();
            let out = sandbox.xtask(&[&name, flag]);
            assert!(out.status.success(), "{name} {flag}: {out:?}");
            let stdout = text(&out.stdout);
            assert!(
                stdout.contains(&format!("Usage: cargo xtask {name}")),
                "{name} {flag}: {stdout}"
            );
            assert_eq!(sandbox.traces(), Vec::<String>::new(), "{name} {flag}");
        }
    }
}

#[test]
fn unknown_flags_and_stray_arguments_are_refused_before_anything_runs() {
    for name in listed_commands() {
        // `test` hands everything to `cargo test`, which refuses what it does not know.
        if name == "test" {
            continue;
        }
        let mut cases = vec![vec![name.as_str(), "--bogus"], vec![name.as_str(), "-Z"]];
        // lint-manifests takes paths; every other command takes no positional argument.
        if name != "lint-manifests" {
            cases.push(vec![name.as_str(), "stray"]);
        }
        for args in cases {
            let sandbox = Sandbox::new();
            let out = sandbox.xtask(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
            let stderr = text(&out.stderr);
            assert!(stderr.contains("unexpected argument"), "{args:?}: {stderr}");
            assert_eq!(sandbox.traces(), Vec::<String>::new(), "{args:?}");
        }
    }
}

#[test]
fn bad_values_are_refused_with_the_flag_named() {
    for (args, flag) in [
        (&["soak", "--runtimes", "many"][..], "--runtimes"),
        (&["crash-campaign", "--seed", "xyz"], "--seed"),
        (&["bench-ipam", "--levels", "0,lots"], "--levels"),
        (&["bench-fill", "--backend", "bridge"], "--backend"),
        (&["build-and-stage", "--set", "no-equals-sign"], "--set"),
        (&["bpf-pin-maps"], "--dir"),
    ] {
        let sandbox = Sandbox::new();
        let out = sandbox.xtask(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(text(&out.stderr).contains(flag), "{args:?}: {out:?}");
        assert_eq!(sandbox.traces(), Vec::<String>::new(), "{args:?}");
    }
}

#[test]
fn test_hands_its_arguments_to_cargo_test() {
    // `--native`: the sandbox has no VM for the production-kernel tier that follows otherwise.
    for (args, expected) in [
        (&["test", "--native"][..], "test --workspace --all-targets"),
        (
            &["test", "--native", "--no-fail-fast"],
            "test --workspace --all-targets --no-fail-fast",
        ),
        (
            &["test", "--native", "--", "--test-threads", "1"],
            "test --workspace --all-targets -- --test-threads 1",
        ),
        (
            &[
                "test",
                "--native",
                "-p",
                "galactic-ipam",
                "--",
                "--nocapture",
            ],
            "test --workspace --all-targets -p galactic-ipam -- --nocapture",
        ),
    ] {
        let sandbox = Sandbox::new();
        let out = sandbox.xtask(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let recorded = std::fs::read_to_string(sandbox.path("calls").join("cargo")).unwrap();
        assert_eq!(recorded.lines().collect::<Vec<_>>().join(" "), expected);
    }
}

/// Whether these tests run as root: then setup in the sandbox reaches its (shim) `apt-get`.
fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// What the sandbox's `apt-get` shim recorded of its last call (the shim installs nothing, so
/// setup must find the package still missing afterwards).
fn apt_get_call(sandbox: &Sandbox) -> String {
    std::fs::read_to_string(sandbox.path("calls").join("apt-get"))
        .unwrap_or_default()
        .lines()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn demo_installs_a_missing_package_before_it_builds_anything() {
    let sandbox = Sandbox::new().without("nft");
    let out = sandbox.xtask(&["demo"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("`nft` (the plugins' firewall rules): apt-get install nftables"),
        "{stderr}"
    );
    assert!(!stderr.contains("iproute2"), "ip is there: {stderr}");
    if std::path::Path::new("/usr/sbin/nft").exists() {
        // The machine has it where the sandbox's PATH does not look: setup says so rather
        // than install it again.
        assert!(stderr.contains("PATH lacks /usr/sbin: add it"), "{stderr}");
        assert_eq!(sandbox.traces(), Vec::<String>::new());
        return;
    }
    if is_root() {
        // As root the demo's setup installs it (here: a shim that does not), then says so.
        assert!(stderr.contains("still missing"), "{stderr}");
        assert_eq!(apt_get_call(&sandbox), "install -y -qq nftables");
        assert_eq!(sandbox.traces(), vec!["calls/apt-get".to_owned()]);
    } else {
        assert!(stderr.contains("run it as root"), "{stderr}");
        assert_eq!(sandbox.traces(), Vec::<String>::new());
    }
    let stdout = text(&out.stdout);
    assert!(
        !is_root() || stdout.contains("setup: installing nftables (Debian package;"),
        "one line for what it installs: {stdout}"
    );
}

#[test]
fn setup_that_cannot_install_something_names_everything_and_installs_nothing() {
    // No `dpkg-deb` and no `rustup` in the sandbox: setup can install neither, so it installs
    // nothing at all and names every missing thing with its command.
    let sandbox = Sandbox::new();
    let out = sandbox.xtask(&["setup"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    for expected in [
        "`qemu-system-x86_64` (the VM): apt-get install qemu-system-x86",
        "`podman` (the Podman tier): apt-get install --no-install-recommends podman",
        "`dpkg-deb` (the kernel): not installed by setup",
        "rustup target add",
        "`vng` (the VM runner, virtme-ng): python3 -m venv",
        "cargo install --locked virtiofsd@",
    ] {
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
    assert!(!stderr.contains("`nft`"), "nft is there: {stderr}");
    assert_eq!(sandbox.traces(), Vec::<String>::new(), "nothing may run");
}

#[test]
fn test_that_cannot_set_up_says_how_to_run_the_native_suites_before_running_anything() {
    let sandbox = Sandbox::new();
    let out = sandbox.xtask(&["test"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    for missing in [
        "podman",
        "runc",
        "conmon",
        "qemu-system-x86_64",
        "vng",
        "virtiofsd",
    ] {
        assert!(
            stderr.contains(&format!("`{missing}`")),
            "{missing}: {stderr}"
        );
    }
    assert!(
        stderr.contains("--native"),
        "says how to run without: {stderr}"
    );
    assert_eq!(
        sandbox.traces(),
        Vec::<String>::new(),
        "nothing is built or run"
    );
}

#[test]
fn test_podman_sets_up_its_part_before_building() {
    let sandbox = Sandbox::new();
    let out = sandbox.xtask(&["test-podman"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("the Podman tier"), "{stderr}");
    if !is_root() {
        assert!(stderr.contains("needs root"), "{stderr}");
        assert_eq!(
            sandbox.traces(),
            Vec::<String>::new(),
            "nothing may be built"
        );
        return;
    }
    assert!(
        stderr
            .contains("`podman` (the Podman tier): apt-get install --no-install-recommends podman"),
        "{stderr}"
    );
    // Setup installs (the shim: nothing) unless a tool is where the sandbox's PATH does not
    // look (Debian's runc is in /usr/sbin), which it names instead; nothing is built either way.
    let traces = sandbox.traces();
    assert!(!traces.contains(&"calls/cargo".to_owned()), "{traces:?}");
    if traces.is_empty() {
        assert!(stderr.contains("PATH lacks"), "{stderr}");
    } else {
        assert_eq!(traces, vec!["calls/apt-get".to_owned()]);
        assert!(
            apt_get_call(&sandbox).starts_with(
                "install -y -qq --no-install-recommends podman runc conmon util-linux"
            ),
            "{:?}",
            apt_get_call(&sandbox)
        );
    }
}

/// `check-docs` judges the real tree as it is, root-free, without building or running anything.
#[test]
fn check_docs_passes_on_the_tree_and_runs_nothing() {
    let sandbox = Sandbox::new();
    let out = sandbox.xtask(&["check-docs"]);
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains("every command, flag, path and key checked holds"));
    assert_eq!(sandbox.traces(), Vec::<String>::new(), "{out:?}");
}
