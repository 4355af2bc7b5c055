//! What the demo needs from the machine, checked before anything is built: root (it creates
//! network namespaces) and every external command the demo or the plugins it runs execute.
//! Everything missing is reported in one message that names the Debian packages to install.

use anyhow::{bail, Result};
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// An external command the demo depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needed {
    /// The executable, looked up on `PATH`.
    pub command: &'static str,
    /// The Debian package that installs it.
    pub package: &'static str,
    /// Who runs it, for the message.
    pub used_for: &'static str,
}

/// Every command the demo runs (`ip`, `ping`) or makes the plugins run (`nft`: the masters'
/// firewall step). The plugins write sysctls through `/proc/sys` and need no `sysctl` binary.
pub const NEEDED: [Needed; 3] = [
    Needed {
        command: "ip",
        package: "iproute2",
        used_for: "namespaces, links, rules and routes",
    },
    Needed {
        command: "nft",
        package: "nftables",
        used_for: "the plugins' firewall rules",
    },
    Needed {
        command: "ping",
        package: "iputils-ping",
        used_for: "the connectivity checks",
    },
];

/// Whether `command` is an executable file in one of the directories of `path`.
fn on_path(command: &str, path: &OsStr) -> bool {
    std::env::split_paths(path).any(|dir| {
        let candidate = dir.join(command);
        is_executable(&candidate)
    })
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The commands of [`NEEDED`] that `path` lacks.
pub fn missing_commands(path: &OsStr) -> Vec<Needed> {
    NEEDED
        .into_iter()
        .filter(|n| !on_path(n.command, path))
        .collect()
}

/// Fails, naming everything that is missing and how to get it, unless the demo can run with
/// this `PATH` and effective user.
pub fn check(path: &OsStr, is_root: bool) -> Result<()> {
    let missing = missing_commands(path);
    let mut problems = Vec::new();
    if !is_root {
        problems.push(
            "it creates network namespaces: run it as root (sudo -E cargo xtask demo)".to_owned(),
        );
    }
    for n in &missing {
        problems.push(format!(
            "`{}` is not on PATH ({}; Debian package {})",
            n.command, n.used_for, n.package
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    let mut message = format!("the demo cannot run here:\n  - {}", problems.join("\n  - "));
    if !missing.is_empty() {
        let mut packages: Vec<&str> = missing.iter().map(|n| n.package).collect();
        packages.dedup();
        message.push_str(&format!(
            "\ninstall them with: apt-get install {}",
            packages.join(" ")
        ));
    }
    message.push_str("\nnothing was built");
    bail!("{message}")
}

/// [`check`] for this process.
pub fn check_here() -> Result<()> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    check(&path, nix::unistd::geteuid().is_root())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `PATH` of one directory holding executables named `commands`.
    fn path_with(commands: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in commands {
            let file = dir.path().join(name);
            std::fs::write(&file, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        dir
    }

    #[test]
    fn a_missing_nft_is_named_with_its_package() {
        let dir = path_with(&["ip", "ping"]);
        let message = check(dir.path().as_os_str(), true)
            .expect_err("nft is missing")
            .to_string();
        assert!(message.contains("`nft`"), "{message}");
        assert!(message.contains("apt-get install nftables\n"), "{message}");
        assert!(!message.contains("iproute2"), "{message}");
        assert!(!message.contains("root"), "{message}");
    }

    #[test]
    fn everything_missing_is_named_in_one_message() {
        let dir = path_with(&[]);
        let message = check(dir.path().as_os_str(), false)
            .expect_err("nothing is there")
            .to_string();
        assert!(message.contains("run it as root"), "{message}");
        assert!(
            message.contains("apt-get install iproute2 nftables iputils-ping"),
            "{message}"
        );
    }

    #[test]
    fn a_complete_machine_passes() {
        let dir = path_with(&["ip", "nft", "ping"]);
        let other = path_with(&[]);
        let path = std::env::join_paths([other.path(), dir.path()]).expect("join");
        check(&path, true).expect("all there");
    }

    #[test]
    fn a_file_that_is_not_executable_does_not_count() {
        let dir = path_with(&["ip", "ping"]);
        std::fs::write(dir.path().join("nft"), "").expect("write");
        assert_eq!(missing_commands(dir.path().as_os_str()), vec![NEEDED[1]]);
    }
}
