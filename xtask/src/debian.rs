//! Debian packages the benches compare against, installed on demand.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The reference plugins (`bridge`, `host-local`, …) of Debian's containernetworking-plugins.
pub const REFERENCE_PLUGINS: &str = "/usr/lib/cni";
/// The package that ships them.
pub const REFERENCE_PACKAGE: &str = "containernetworking-plugins";

/// `path`, installing Debian's `package` when it is missing (retrying once after
/// `apt-get update`); `None` when it is still missing.
pub fn ensure(path: &Path, package: &str) -> Option<PathBuf> {
    if !path.exists() {
        eprintln!(
            "installing {package} (Debian package) for {}",
            path.display()
        );
        let install = |update: bool| {
            if update {
                let _ = Command::new("apt-get").args(["update", "-qq"]).status();
            }
            Command::new("apt-get")
                .args(["install", "-y", "-qq", package])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        if !install(false) && !install(true) {
            eprintln!("could not install {package}");
        }
    }
    path.exists().then(|| path.to_path_buf())
}
