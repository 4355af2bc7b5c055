//! Debian packages the benches compare against, installed on demand.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The reference plugins (`bridge`, `host-local`, …) of Debian's containernetworking-plugins.
pub const REFERENCE_PLUGINS: &str = "/usr/lib/cni";
/// The package that ships them.
pub const REFERENCE_PACKAGE: &str = "containernetworking-plugins";

/// The directory holding the reference chain's `bridge` and `host-local`, installing Debian's
/// package when either is missing.
pub fn reference_chain() -> anyhow::Result<&'static Path> {
    let dir = Path::new(REFERENCE_PLUGINS);
    let missing = ["bridge", "host-local"]
        .iter()
        .any(|p| ensure(&dir.join(p), REFERENCE_PACKAGE).is_none());
    if missing {
        anyhow::bail!("the reference plugins are missing: apt-get install {REFERENCE_PACKAGE}");
    }
    Ok(dir)
}

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
