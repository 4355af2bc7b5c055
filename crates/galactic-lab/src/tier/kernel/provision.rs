//! What the production-kernel tier needs on the host: the VM tools, and Debian 12's generic LTS
//! kernel, fetched once with apt and unpacked into the tier's cache.

use crate::tier::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The VM runner, from PyPI (Debian 12 has no package of it), which `cargo xtask setup`
/// installs into [`virtme_ng_dir`].
pub const PIP_PACKAGE: &str = "virtme-ng==1.42";

/// The virtio-fs daemon virtme-ng shares the host's root with (from the crate registry; qemu
/// 7.2's own C daemon lacks the options virtme-ng passes, and without a daemon virtme-ng falls
/// back to 9p, on which the suites run ten times slower).
pub const VIRTIOFSD_VERSION: &str = "1.14.0";

/// The virtualenv `cargo xtask setup` installs [`PIP_PACKAGE`] into, under the target dir
/// `target_dir` (the version in its name: a new pin gets a new one).
pub fn virtme_ng_dir(target_dir: &Path) -> PathBuf {
    target_dir
        .join("tools")
        .join(PIP_PACKAGE.replace("==", "-"))
}

/// Where `program` is on `PATH`, or (for what `cargo install` puts there) in `~/.cargo/bin`, or
/// in the virtualenv under `target_dir` (see [`search_path`]).
pub fn find_program(program: &str, target_dir: &Path) -> Option<PathBuf> {
    search_path(target_dir)
        .into_iter()
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `PATH` plus cargo's bin dir, which a `sudo` shell may lack, and the virtualenv of
/// [`virtme_ng_dir`] (last: a `vng` of the machine's own comes first).
pub fn search_path(target_dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
    {
        dirs.push(home.join("bin"));
    }
    dirs.push(virtme_ng_dir(target_dir).join("bin"));
    dirs
}

/// The guest kernel: its image and its module tree.
pub struct Kernel {
    /// `uname -r` of the guest, e.g. `6.1.0-57-amd64`.
    pub release: String,
    /// The bootable image (`…/boot/vmlinuz-<release>`), inside its unpacked package, so
    /// virtme-ng finds the package's `lib/modules/<release>` above it.
    pub image: PathBuf,
}

/// The kernel package: `$GALACTIC_KERNEL_PACKAGE`, or the newest
/// `linux-image-6.1.0-<N>-amd64-unsigned` apt knows (the generic flavour: `-cloud-` lacks 9p and
/// virtio-fs).
fn package_name() -> Result<String> {
    if let Ok(name) = std::env::var("GALACTIC_KERNEL_PACKAGE") {
        return Ok(name);
    }
    let out = Command::new("apt-cache")
        .args([
            "search",
            "--names-only",
            r"^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$",
        ])
        .output()
        .context("run apt-cache search")?;
    let text = String::from_utf8_lossy(&out.stdout);
    newest_package(&text).context(
        "apt knows no linux-image-6.1.0-<N>-amd64-unsigned: run `apt-get update` \
         (Debian 12 sources needed)",
    )
}

/// The package with the highest ABI number `<N>` in `apt-cache search` output.
fn newest_package(search_output: &str) -> Option<String> {
    search_output
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|name| {
            let abi = name
                .strip_prefix("linux-image-6.1.0-")?
                .strip_suffix("-amd64-unsigned")?;
            Some((abi.parse::<u32>().ok()?, name.to_owned()))
        })
        .max()
        .map(|(_, name)| name)
}

/// A guest kernel already unpacked in `cache` (`$GALACTIC_KERNEL_PACKAGE`'s, or any): setup's
/// presence check, which must not search apt's lists (over a second). The tier itself still
/// fetches a newer package when apt's lists name one.
pub fn cached_kernel(cache: &Path) -> Option<Kernel> {
    if let Ok(name) = std::env::var("GALACTIC_KERNEL_PACKAGE") {
        return unpacked(&cache.join(name)).ok().flatten();
    }
    std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .filter(|e| newest_package(&e.file_name().to_string_lossy()).is_some())
        .find_map(|e| unpacked(&e.path()).ok().flatten())
}

/// The guest kernel, fetched and unpacked into `cache` unless it already is.
pub fn kernel(cache: &Path) -> Result<Kernel> {
    let package = package_name()?;
    let root = cache.join(&package);
    if let Some(kernel) = unpacked(&root)? {
        return Ok(kernel);
    }
    let _ = std::fs::remove_dir_all(&root);
    let download = cache.join("download");
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download).with_context(|| format!("create {}", download.display()))?;
    println!("test-kernel: fetching {package}");
    run(Command::new("apt-get")
        .args(["download", "-q", &package])
        .current_dir(&download))?;
    let deb = std::fs::read_dir(&download)
        .with_context(|| format!("read {}", download.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .with_context(|| format!("apt-get download {package} left no .deb"))?;
    let staging = cache.join(format!("{package}.partial"));
    let _ = std::fs::remove_dir_all(&staging);
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&staging))?;
    let release = release_of(&staging)?;
    // The package ships no modules.dep; modprobe in the guest needs it.
    run(Command::new("depmod").arg("-b").arg(&staging).arg(&release))?;
    std::fs::rename(&staging, &root).with_context(|| format!("rename to {}", root.display()))?;
    let _ = std::fs::remove_dir_all(&download);
    unpacked(&root)?.with_context(|| format!("{} is incomplete after unpacking", root.display()))
}

/// The kernel of an already unpacked package, if it is complete.
fn unpacked(root: &Path) -> Result<Option<Kernel>> {
    if !root.is_dir() {
        return Ok(None);
    }
    let release = release_of(root)?;
    let image = root.join("boot").join(format!("vmlinuz-{release}"));
    let deps = root.join("lib/modules").join(&release).join("modules.dep");
    Ok((image.is_file() && deps.is_file()).then_some(Kernel { release, image }))
}

/// The release the unpacked package's `boot/vmlinuz-<release>` names.
fn release_of(root: &Path) -> Result<String> {
    let boot = root.join("boot");
    std::fs::read_dir(&boot)
        .with_context(|| format!("read {}", boot.display()))?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("vmlinuz-")
                .map(str::to_owned)
        })
        .next()
        .with_context(|| format!("no vmlinuz-<release> in {}", boot.display()))
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("run {cmd:?}"))?;
    if !status.success() {
        fail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::newest_package;

    #[test]
    fn the_newest_abi_wins_numerically() {
        let out = "linux-image-6.1.0-9-amd64-unsigned - Linux 6.1 for 64-bit PCs\n\
                   linux-image-6.1.0-57-amd64-unsigned - Linux 6.1 for 64-bit PCs\n\
                   linux-image-6.1.0-10-amd64-unsigned - Linux 6.1 for 64-bit PCs\n";
        assert_eq!(
            newest_package(out).as_deref(),
            Some("linux-image-6.1.0-57-amd64-unsigned")
        );
        assert_eq!(newest_package(""), None);
    }
}
