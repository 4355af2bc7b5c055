//! `setup`: installs, idempotently, what `cargo xtask demo` and `cargo xtask test` need.
//!
//! One table, [`NEEDS`], says what each command needs, how its presence is checked and how it is
//! installed. With everything present setup only looks (files on the search path, the musl
//! target's library directory, a `dpkg-query` or two, the tier's kernel cache): no network, no
//! `apt-get update`. Otherwise it prints one line per thing it installs, refreshes apt's lists
//! once, installs the Debian packages in at most two `apt-get install`s, then the rest. The demo,
//! the tiers and `test` call [`ensure`] for their parts first, so a missing tool is installed
//! rather than named; what cannot be installed here (not root, no apt, a toolchain rustup does not
//! manage) fails before anything is installed, each thing with the command that would get it.
//! Why virtme-ng goes into a virtualenv: docs/decisions/0073-setup-by-the-two-commands.md.

use anyhow::{bail, Context, Result};
use galactic_lab::tier::kernel::provision;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `cargo xtask setup`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only what `cargo xtask demo` needs
    #[arg(long, conflicts_with = "native")]
    pub demo_only: bool,
    /// Only what `cargo xtask test --native` needs (the demo's tools included)
    #[arg(long)]
    pub native: bool,
}

/// Who needs a thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `cargo xtask demo` (and the plugins it runs).
    Demo,
    /// The native suites, beyond the demo's tools.
    Native,
    /// The release plugins (static musl executables: `demo --release`, check-rss).
    Release,
    /// The Podman tier.
    Podman,
    /// The deployment tier (the installer image under Podman), beyond the Podman tier's tools.
    Deploy,
    /// The production-kernel tier's VM.
    Kernel,
}

/// Everything `cargo xtask test` runs.
pub const ALL: &[Part] = &[
    Part::Demo,
    Part::Native,
    Part::Release,
    Part::Podman,
    Part::Deploy,
    Part::Kernel,
];

/// `cargo xtask test --native`.
pub const NATIVE: &[Part] = &[Part::Demo, Part::Native];

/// How a thing's presence is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// An executable file of this name in a directory of the search path.
    Program(&'static str),
    /// A Debian package, installed (a program of its name would not tell: Debian's dynamic
    /// `busybox` has the static one's path).
    Package(&'static str),
    /// The Rust standard library of the release plugins' musl target.
    MuslTarget,
    /// The production-kernel tier's guest kernel, unpacked in the tier's cache.
    Kernel,
}

/// How a missing thing is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Install {
    /// `apt-get install PACKAGE`.
    Apt(&'static str),
    /// `apt-get install --no-install-recommends PACKAGE`.
    AptBare(&'static str),
    /// `rustup target add` of the musl target.
    RustupTarget,
    /// virtme-ng into the tools virtualenv.
    VirtmeNg,
    /// `cargo install --locked virtiofsd@VERSION`.
    Virtiofsd,
    /// The tier's kernel, fetched with `apt-get download` and unpacked.
    Kernel,
    /// Not installed by setup; what to do instead.
    Manual(&'static str),
}

/// One thing a command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    parts: &'static [Part],
    check: Check,
    install: Install,
    /// Who uses it, for the messages.
    used_for: &'static str,
}

const fn need(
    parts: &'static [Part],
    check: Check,
    install: Install,
    used_for: &'static str,
) -> Need {
    Need {
        parts,
        check,
        install,
        used_for,
    }
}

use Check::{Package, Program};
use Install::{Apt, AptBare};

/// What each part needs, in install order (the kernel last: it is fetched with apt).
const NEEDS: &[Need] = &[
    need(
        &[Part::Demo],
        Program("ip"),
        Apt("iproute2"),
        "namespaces, links, rules and routes",
    ),
    need(
        &[Part::Demo],
        Program("nft"),
        Apt("nftables"),
        "the plugins' firewall rules",
    ),
    need(
        &[Part::Demo],
        Program("ping"),
        Apt("iputils-ping"),
        "the connectivity checks",
    ),
    need(
        &[Part::Native],
        Program("tc"),
        Apt("iproute2"),
        "the datapath tests' classifiers",
    ),
    need(
        &[Part::Native],
        Program("sysctl"),
        Apt("procps"),
        "the firewall and VRF tests",
    ),
    need(
        &[Part::Native],
        Program("bpftool"),
        Apt("bpftool"),
        "the eBPF map tests",
    ),
    need(
        &[Part::Native],
        Program("clang"),
        Apt("clang"),
        "the datapath tests' eBPF program",
    ),
    need(
        &[Part::Release],
        Program("musl-gcc"),
        Apt("musl-tools"),
        "the C of the release plugins",
    ),
    need(
        &[Part::Release],
        Check::MuslTarget,
        Install::RustupTarget,
        "the release plugins",
    ),
    need(
        &[Part::Podman, Part::Deploy],
        Program("podman"),
        AptBare("podman"),
        "the Podman tier",
    ),
    need(
        &[Part::Podman, Part::Deploy],
        Program("runc"),
        AptBare("runc"),
        "Podman's OCI runtime",
    ),
    need(
        &[Part::Podman, Part::Deploy],
        Program("conmon"),
        AptBare("conmon"),
        "Podman's container monitor",
    ),
    need(
        &[Part::Podman, Part::Deploy],
        Program("nsenter"),
        AptBare("util-linux"),
        "entering the tier's host",
    ),
    need(
        &[Part::Podman, Part::Deploy],
        Program("unshare"),
        AptBare("util-linux"),
        "the tier's mount namespace",
    ),
    need(
        &[Part::Podman, Part::Deploy],
        Program("mount"),
        Apt("mount"),
        "the tier's mount namespace",
    ),
    need(
        &[Part::Podman, Part::Deploy],
        Program("tar"),
        Apt("tar"),
        "packing the busybox image",
    ),
    need(
        &[Part::Deploy],
        Program("mmdebstrap"),
        AptBare("mmdebstrap"),
        "the installer image's Debian base",
    ),
    need(
        &[Part::Podman, Part::Deploy, Part::Kernel],
        Package("busybox-static"),
        Apt("busybox-static"),
        "the containers' image and the guest's init",
    ),
    need(
        &[Part::Kernel],
        Program("qemu-system-x86_64"),
        Apt("qemu-system-x86"),
        "the VM",
    ),
    need(
        &[Part::Kernel],
        Program("depmod"),
        Apt("kmod"),
        "indexing the guest's modules",
    ),
    need(
        &[Part::Kernel],
        Program("file"),
        Apt("file"),
        "virtme-ng's kernel probe",
    ),
    need(
        &[Part::Kernel],
        Program("apt-get"),
        Install::Manual("a Debian machine"),
        "the kernel",
    ),
    need(
        &[Part::Kernel],
        Program("dpkg-deb"),
        Install::Manual("a Debian machine"),
        "the kernel",
    ),
    need(
        &[Part::Kernel],
        Program("vng"),
        Install::VirtmeNg,
        "the VM runner, virtme-ng",
    ),
    need(
        &[Part::Kernel],
        Program("virtiofsd"),
        Install::Virtiofsd,
        "the guest's root file system",
    ),
    need(&[Part::Kernel], Check::Kernel, Install::Kernel, "the VM"),
];

impl Need {
    /// What it is, for the messages.
    fn what(&self) -> String {
        match self.check {
            Program(p) => format!("`{p}` ({})", self.used_for),
            Package(p) => format!("Debian package {p} ({})", self.used_for),
            Check::MuslTarget => format!(
                "the Rust target {} ({})",
                crate::stage::release_triple(),
                self.used_for
            ),
            Check::Kernel => format!(
                "the guest kernel, Debian 12's newest linux-image-6.1.0-<N>-amd64-unsigned ({})",
                self.used_for
            ),
        }
    }

    /// The command that installs it.
    fn how(&self) -> String {
        match self.install {
            Apt(p) => format!("apt-get install {p}"),
            AptBare(p) => format!("apt-get install --no-install-recommends {p}"),
            Install::RustupTarget => {
                format!("rustup target add {}", crate::stage::release_triple())
            }
            Install::VirtmeNg => format!(
                "python3 -m venv {dir} && {dir}/bin/pip install {}",
                provision::PIP_PACKAGE,
                dir = provision::virtme_ng_dir(&crate::target_dir()).display()
            ),
            Install::Virtiofsd => format!(
                "apt-get install {} && cargo install --locked virtiofsd@{}",
                VIRTIOFSD_BUILD_DEPS.join(" "),
                provision::VIRTIOFSD_VERSION
            ),
            Install::Kernel => "apt-get update && cargo xtask setup".to_owned(),
            Install::Manual(m) => format!("not installed by setup: needs {m}"),
        }
    }

    /// Whether it is there, looking for programs in `dirs`.
    fn present(&self, dirs: &[PathBuf]) -> bool {
        match self.check {
            Program(p) => find_executable(p, dirs).is_some(),
            Package(p) => package_installed(p),
            Check::MuslTarget => crate::stage::release_target_libdir().is_some_and(|d| d.is_dir()),
            Check::Kernel => provision::cached_kernel(&galactic_lab::tier::kernel::cache_dir(
                &crate::target_dir(),
            ))
            .is_some(),
        }
    }

    /// The Debian package it is, if it is one.
    fn apt_package(&self) -> Option<(&'static str, bool)> {
        match self.install {
            Apt(p) => Some((p, true)),
            AptBare(p) => Some((p, false)),
            _ => None,
        }
    }
}

/// The -dev packages `cargo install virtiofsd` links against.
const VIRTIOFSD_BUILD_DEPS: &[&str] = &["libcap-ng-dev", "libseccomp-dev"];

/// `cargo xtask setup`.
pub fn run(args: &Args) -> Result<()> {
    let parts = if args.demo_only {
        &[Part::Demo][..]
    } else if args.native {
        NATIVE
    } else {
        ALL
    };
    let installed = ensure(parts)?;
    if installed == 0 {
        println!("setup: everything is already there");
    } else {
        println!("setup: installed {installed} thing(s); everything is there now");
    }
    Ok(())
}

/// Installs what `parts` need and this machine lacks; returns how many things it installed.
/// Fails before installing anything when something missing cannot be installed here.
pub fn ensure(parts: &[Part]) -> Result<usize> {
    let dirs = provision::search_path(&crate::target_dir());
    let missing = missing(parts, &dirs);
    if missing.is_empty() {
        return Ok(0);
    }
    let plan = Plan::new(&missing, &dirs);
    let elsewhere: Vec<PathBuf> = SBIN
        .iter()
        .map(PathBuf::from)
        .filter(|d| !dirs.contains(d))
        .collect();
    let mut blocked = off_path(&missing, &elsewhere);
    blocked.extend(plan.blocked(&dirs, nix::unistd::geteuid().is_root()));
    if !blocked.is_empty() {
        bail!("{}", cannot_install(&missing, &blocked));
    }
    let installed = plan.install(&dirs)?;
    let dirs = provision::search_path(&crate::target_dir());
    let still: Vec<String> = missing
        .iter()
        .filter(|n| !n.present(&dirs))
        .map(|n| format!("{}: {}", n.what(), n.how()))
        .collect();
    if !still.is_empty() {
        bail!(
            "setup installed what it could, but these are still missing:\n  - {}",
            still.join("\n  - ")
        );
    }
    Ok(installed)
}

/// `cargo xtask` as root for a user with their own rustup (README): Debian's sudo replaces
/// `PATH`, rustup's `cargo` needs `RUSTUP_HOME` under root's home, and a user's `PATH` lacks
/// `/usr/sbin`.
pub const SUDO: &str =
    r#"sudo env "PATH=$PATH:/usr/sbin" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" cargo xtask"#;

/// Where Debian installs root's programs (`nft`, `depmod`); a user's `PATH`, which
/// `sudo env "PATH=$PATH"` hands to root, has none of them.
const SBIN: &[&str] = &["/usr/local/sbin", "/usr/sbin", "/sbin"];

/// The missing programs that are in one of `elsewhere` (installed, but not on `PATH`: installing
/// them again would not help), each with what to do.
fn off_path(missing: &[Need], elsewhere: &[PathBuf]) -> Vec<(Need, String)> {
    missing
        .iter()
        .filter_map(|n| match n.check {
            Program(p) => find_executable(p, elsewhere).map(|at| {
                let dir = at.parent().unwrap_or(&at).display().to_string();
                (
                    *n,
                    format!("{} is there, but PATH lacks {dir}: add it", at.display()),
                )
            }),
            _ => None,
        })
        .collect()
}

/// The needs of `parts` that are not there, in table order.
fn missing(parts: &[Part], dirs: &[PathBuf]) -> Vec<Need> {
    NEEDS
        .iter()
        .filter(|n| n.parts.iter().any(|p| parts.contains(p)))
        .filter(|n| !n.present(dirs))
        .copied()
        .collect()
}

/// The message for missing things of which some (`blocked`, each with why) cannot be
/// installed here.
fn cannot_install(missing: &[Need], blocked: &[(Need, String)]) -> String {
    let mut lines = Vec::new();
    for n in missing {
        let why = blocked
            .iter()
            .find(|(b, _)| b == n)
            .map(|(_, why)| format!(" [{why}]"))
            .unwrap_or_default();
        lines.push(format!("{}: {}{why}", n.what(), n.how()));
    }
    format!(
        "missing here, and setup cannot install all of it:\n  - {}\n\
         as root on Debian, `cargo xtask setup` installs everything it can \
         ({SUDO} setup); nothing was installed or built",
        lines.join("\n  - ")
    )
}

/// A Debian package setup is about to install, and for which need.
struct AptPackage {
    package: &'static str,
    /// Whether its recommendations come too (`.ci/run` took Podman's without).
    recommends: bool,
    need: Need,
    /// Whether it is only what installing `need` takes (a -dev package, python3-venv).
    prerequisite: bool,
}

/// What setup is about to install for the missing needs.
struct Plan {
    /// Debian packages, deduplicated; the prerequisites of the other installs included.
    apt: Vec<AptPackage>,
    /// The other installs, in table order.
    rest: Vec<Need>,
}

impl Plan {
    fn new(missing: &[Need], dirs: &[PathBuf]) -> Self {
        let mut plan = Self {
            apt: Vec::new(),
            rest: Vec::new(),
        };
        for n in missing {
            match n.apt_package() {
                Some((package, recommends)) => plan.add(package, recommends, *n, false),
                None => plan.rest.push(*n),
            }
            for package in prerequisites(n, dirs) {
                plan.add(package, true, *n, true);
            }
        }
        plan
    }

    fn add(&mut self, package: &'static str, recommends: bool, need: Need, prerequisite: bool) {
        if !self.apt.iter().any(|a| a.package == package) {
            self.apt.push(AptPackage {
                package,
                recommends,
                need,
                prerequisite,
            });
        }
    }

    /// Whether apt is needed: a package to install, or the kernel (apt's lists name it).
    fn needs_apt(&self) -> bool {
        !self.apt.is_empty() || self.rest.iter().any(|n| n.install == Install::Kernel)
    }

    /// Each need that cannot be installed here, with why.
    fn blocked(&self, dirs: &[PathBuf], is_root: bool) -> Vec<(Need, String)> {
        let no_apt = if find_executable("apt-get", dirs).is_none() {
            Some("no apt-get: install it by this system's means")
        } else if !is_root {
            Some("not root")
        } else {
            None
        };
        let mut blocked: Vec<(Need, String)> = Vec::new();
        let mut block = |need: Need, why: &str| {
            if !blocked.iter().any(|(b, _)| *b == need) {
                blocked.push((need, why.to_owned()));
            }
        };
        if let Some(why) = no_apt {
            self.apt.iter().for_each(|a| block(a.need, why));
            let kernel = self.rest.iter().filter(|n| n.install == Install::Kernel);
            kernel.for_each(|n| block(*n, why));
        }
        for n in &self.rest {
            match n.install {
                Install::Manual(_) => block(*n, "setup cannot install it"),
                Install::RustupTarget if find_executable("rustup", dirs).is_none() => block(
                    *n,
                    "the toolchain is not rustup's: add its standard library for this target",
                ),
                _ => {}
            }
        }
        blocked
    }

    /// Installs everything planned, printing one line per thing; returns how many.
    fn install(&self, dirs: &[PathBuf]) -> Result<usize> {
        for a in &self.apt {
            let why = match a.need.check {
                _ if a.prerequisite => format!("to install {}", a.need.what()),
                Program(p) => format!("`{p}`: {}", a.need.used_for),
                _ => a.need.used_for.to_owned(),
            };
            println!("setup: installing {} (Debian package; {why})", a.package);
        }
        if self.needs_apt() {
            apt_install(&self.apt)?;
        }
        for n in &self.rest {
            println!("setup: installing {}", n.what());
            match n.install {
                Install::RustupTarget => rustup_target_add(dirs)?,
                Install::VirtmeNg => virtme_ng(dirs)?,
                Install::Virtiofsd => virtiofsd()?,
                Install::Kernel => {
                    provision::kernel(
                        &galactic_lab::tier::kernel::cache_dir(&crate::target_dir()),
                    )?;
                }
                Apt(_) | AptBare(_) | Install::Manual(_) => {}
            }
        }
        Ok(self.apt.len() + self.rest.len())
    }
}

/// The Debian packages installing `need` takes first, those not installed yet.
fn prerequisites(need: &Need, dirs: &[PathBuf]) -> Vec<&'static str> {
    match need.install {
        Install::Virtiofsd => VIRTIOFSD_BUILD_DEPS
            .iter()
            .copied()
            .filter(|p| !package_installed(p))
            .collect(),
        // Debian's python3 makes virtualenvs only with python3-venv (ensurepip); another
        // python3 (pyenv's) has it built in.
        Install::VirtmeNg if !python_makes_venvs(dirs) => vec!["python3-venv"],
        _ => Vec::new(),
    }
}

/// Whether `python3` on the search path can make a virtualenv with pip in it.
fn python_makes_venvs(dirs: &[PathBuf]) -> bool {
    find_executable("python3", dirs).is_some_and(|python| {
        Command::new(python)
            .args(["-c", "import ensurepip, venv"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// `apt-get update`, then the packages: those with their recommendations, then those without.
fn apt_install(packages: &[AptPackage]) -> Result<()> {
    quiet(Command::new("apt-get").args(["update", "-qq"]))?;
    for recommends in [true, false] {
        let batch: Vec<&str> = packages
            .iter()
            .filter(|a| a.recommends == recommends)
            .map(|a| a.package)
            .collect();
        if batch.is_empty() {
            continue;
        }
        let mut cmd = Command::new("apt-get");
        cmd.args(["install", "-y", "-qq"]);
        if !recommends {
            cmd.arg("--no-install-recommends");
        }
        quiet(cmd.args(&batch).env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    Ok(())
}

fn rustup_target_add(dirs: &[PathBuf]) -> Result<()> {
    let rustup = find_executable("rustup", dirs).context("rustup")?;
    // From the workspace, so a toolchain override there gets the target.
    quiet(
        Command::new(rustup)
            .args(["target", "add", &crate::stage::release_triple()])
            .current_dir(crate::workspace_root()),
    )
}

/// virtme-ng into a virtualenv of the workspace's tools directory: Debian 12's python3 is
/// externally managed (PEP 668), so `pip install` outside a virtualenv is refused.
fn virtme_ng(dirs: &[PathBuf]) -> Result<()> {
    let dir = provision::virtme_ng_dir(&crate::target_dir());
    // The `python3` whose virtualenv support was checked (pyenv's, or Debian's).
    let python = find_executable("python3", dirs).context("python3 is not on PATH")?;
    // `--clear`: a virtualenv left by an interrupted install is started afresh (its scripts
    // name its path, so it cannot be built elsewhere and moved).
    quiet(
        Command::new(python)
            .args(["-m", "venv", "--clear"])
            .arg(&dir),
    )?;
    quiet(
        Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .arg(provision::PIP_PACKAGE),
    )
}

fn virtiofsd() -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["install", "--quiet", "--locked"])
        .arg(format!("virtiofsd@{}", provision::VIRTIOFSD_VERSION))
        .status()
        .context("run cargo install")?;
    if !status.success() {
        bail!("cargo install --locked virtiofsd failed ({status})");
    }
    Ok(())
}

/// Runs `cmd` with its output captured; on failure the error carries the output's tail.
fn quiet(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("run {cmd:?}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(30)..].join("\n");
    bail!("{cmd:?} failed ({}):\n{tail}", out.status)
}

/// Whether Debian's `package` is installed.
fn package_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${db:Status-Abbrev}", package])
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"ii"))
}

/// `program` as an executable file in one of `dirs`.
fn find_executable(program: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory holding executables named `commands`.
    fn dir_with(commands: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in commands {
            let file = dir.path().join(name);
            std::fs::write(&file, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        dir
    }

    fn programs(needs: &[Need]) -> Vec<&'static str> {
        needs
            .iter()
            .filter_map(|n| match n.check {
                Program(p) => Some(p),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_demo_needs_ip_nft_and_ping_and_finds_them_in_any_directory() {
        let some = dir_with(&["ip"]);
        let others = dir_with(&["nft", "ping"]);
        let dirs = [some.path().to_path_buf(), others.path().to_path_buf()];
        assert_eq!(missing(&[Part::Demo], &dirs), Vec::<Need>::new());
        assert_eq!(
            programs(&missing(&[Part::Demo], &[])),
            ["ip", "nft", "ping"]
        );
    }

    #[test]
    fn a_file_that_is_not_executable_does_not_count() {
        let dir = dir_with(&["ip", "ping"]);
        std::fs::write(dir.path().join("nft"), "").expect("write");
        let missing = missing(&[Part::Demo], &[dir.path().to_path_buf()]);
        assert_eq!(programs(&missing), ["nft"]);
        assert_eq!(missing[0].how(), "apt-get install nftables");
    }

    #[test]
    fn a_package_two_programs_need_is_installed_once() {
        let missing = missing(NATIVE, &[]);
        let plan = Plan::new(&missing, &[]);
        let packages: Vec<&str> = plan.apt.iter().map(|a| a.package).collect();
        assert_eq!(
            packages,
            [
                "iproute2",
                "nftables",
                "iputils-ping",
                "procps",
                "bpftool",
                "clang"
            ]
        );
        assert!(plan.rest.is_empty() && plan.needs_apt());
    }

    #[test]
    fn without_root_nothing_is_installed_and_every_package_is_named() {
        let apt = dir_with(&["apt-get", "ip", "ping"]);
        let dirs = [apt.path().to_path_buf()];
        let missing = missing(&[Part::Demo], &dirs);
        let plan = Plan::new(&missing, &dirs);
        let blocked = plan.blocked(&dirs, false);
        assert_eq!(blocked.len(), 1, "{blocked:?}");
        let message = cannot_install(&missing, &blocked);
        assert!(
            message.contains(
                "`nft` (the plugins' firewall rules): apt-get install nftables [not root]"
            ),
            "{message}"
        );
        assert!(!message.contains("iproute2"), "{message}");
        assert!(
            plan.blocked(&dirs, true).is_empty(),
            "root with apt-get installs it"
        );
    }

    #[test]
    fn a_program_installed_outside_path_is_named_with_its_directory() {
        let sbin = dir_with(&["nft"]);
        let path = dir_with(&["ip", "ping"]);
        let missing = missing(&[Part::Demo], &[path.path().to_path_buf()]);
        let off = off_path(&missing, &[sbin.path().to_path_buf()]);
        assert_eq!(off.len(), 1, "{off:?}");
        let expected = format!("PATH lacks {}: add it", sbin.path().display());
        assert!(off[0].1.ends_with(&expected), "{off:?}");
        assert!(off_path(&missing, &[]).is_empty());
    }

    #[test]
    fn what_setup_never_installs_blocks_even_as_root() {
        let apt = dir_with(&["apt-get"]);
        let dirs = [apt.path().to_path_buf()];
        let missing = missing(&[Part::Kernel], &dirs);
        let plan = Plan::new(&missing, &dirs);
        let blocked = plan.blocked(&dirs, true);
        let blocked: Vec<&str> = blocked
            .iter()
            .filter_map(|(n, _)| match n.check {
                Program(p) => Some(p),
                _ => None,
            })
            .collect();
        assert_eq!(blocked, ["dpkg-deb"]);
    }

    #[test]
    fn every_part_has_needs_and_every_need_a_part() {
        for part in ALL {
            assert!(NEEDS.iter().any(|n| n.parts.contains(part)), "{part:?}");
        }
        assert!(NEEDS.iter().all(|n| !n.parts.is_empty()));
    }
}
