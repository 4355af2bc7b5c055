//! What the demo needs from the machine, settled before anything is built: root (it creates
//! network namespaces), then every external command the demo or the plugins it runs execute,
//! which `cargo xtask setup`'s demo part installs when it is missing (and, with `--release`, the
//! musl toolchain of the release plugins).

use crate::setup::Part;
use anyhow::{bail, Context, Result};

/// The setup parts a demo needs: its commands, and the release toolchain when it builds release
/// plugins.
pub fn parts(release_build: bool) -> &'static [Part] {
    if release_build {
        &[Part::Demo, Part::Release]
    } else {
        &[Part::Demo]
    }
}

/// Fails unless `is_root`, naming how to run as root without losing `PATH`.
pub fn require_root(is_root: bool) -> Result<()> {
    if is_root {
        return Ok(());
    }
    bail!(
        "the demo cannot run here: it creates network namespaces: run it as root \
         ({} demo); nothing was built",
        crate::setup::SUDO
    )
}

/// Root, then setup's parts for this demo, for this process.
pub fn check_here(release_build: bool) -> Result<()> {
    require_root(nix::unistd::geteuid().is_root())?;
    crate::setup::ensure(parts(release_build))
        .context("the demo cannot run here (nothing was built)")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_told_how_to_keep_path_as_root() {
        let message = require_root(false).expect_err("not root").to_string();
        assert!(
            message.contains(r#"sudo env "PATH=$PATH:/usr/sbin" RUSTUP_HOME="#),
            "{message}"
        );
        require_root(true).expect("root");
    }

    #[test]
    fn only_a_release_demo_needs_the_release_toolchain() {
        assert_eq!(parts(false), [Part::Demo]);
        assert_eq!(parts(true), [Part::Demo, Part::Release]);
    }
}
