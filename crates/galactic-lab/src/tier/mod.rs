//! The tiers `cargo xtask test` runs after the native suites: the chain under a real container
//! runtime ([`podman`]), the node as shipped (the installer image and the DaemonSet's containers
//! under Podman, [`deploy`]) and, through [`kernel`]'s provisioning, on a production kernel in a
//! VM.
//! xtask installs what a tier needs and builds the plugins; the tier is given the workspace
//! ([`Workspace`]) rather than guessing it, so where the sources and the target directory are
//! is decided once, by the task runner.

/// Returns a [`Error::Failed`] with the formatted message (the tiers' `bail!`).
macro_rules! fail {
    ($($message:tt)*) => {
        return Err($crate::tier::Error::failed(format!($($message)*)))
    };
}

pub mod deploy;
mod error;
pub mod kernel;
pub mod podman;

pub use error::{Chain, Context, Error, Result};

use std::path::PathBuf;

/// Where a tier finds the workspace.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The workspace root: the sources, `deploy/`.
    pub root: PathBuf,
    /// The target directory (`$CARGO_TARGET_DIR` or `target/`): the builds, each tier's
    /// directory and cache, and the tools `cargo xtask setup` installs there.
    pub target_dir: PathBuf,
}
