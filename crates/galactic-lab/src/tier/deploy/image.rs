//! The installer image, built offline: the runtime stage of `deploy/kubernetes/Dockerfile` on a
//! Debian bookworm base made here from Debian's packages, with the release plugins built
//! beforehand.
//!
//! No registry is reachable, so the base is `mmdebstrap --variant=minbase` of bookworm (cached
//! under `target/deploy-tier/base/`, made again only when its recipe changes), imported into the
//! tier's Podman under the name the runtime stage's `FROM` gives. The plugins go in as an image
//! of their own holding `/out/`, which the Dockerfile's `PLUGINS` build argument names in place
//! of its build stage; Podman skips the unused build stage, so nothing is pulled.

use crate::tier::podman::engine::Engine;
use crate::tier::{Context, Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the base is made: the arguments to `mmdebstrap` before the output path. Changing them
/// makes the cached base stale.
pub const BASE_RECIPE: &[&str] = &["--variant=minbase", "--include=ca-certificates", "bookworm"];

/// The name of the image holding the plugins (`/out/<plugin>`).
pub const PLUGINS_IMAGE: &str = "localhost/galactic-deploy-tier-plugins:latest";

/// The cached base's tarball, made (with `mmdebstrap`) when missing or made by another recipe.
/// Returns it and whether it was made now.
pub fn base_tarball(cache: &Path) -> Result<(PathBuf, bool)> {
    let tarball = cache.join("bookworm-minbase.tar");
    let stamp = cache.join("bookworm-minbase.recipe");
    let recipe = BASE_RECIPE.join(" ");
    let fresh = std::fs::read_to_string(&stamp).is_ok_and(|s| s == recipe) && tarball.is_file();
    if fresh {
        return Ok((tarball, false));
    }
    std::fs::create_dir_all(cache).with_context(|| format!("create {}", cache.display()))?;
    // mmdebstrap picks the output's format by its name: explicit, and a `.tar` name.
    let partial = cache.join("bookworm-minbase.partial.tar");
    let out = Command::new("mmdebstrap")
        .args(["--quiet", "--format=tar"])
        .args(BASE_RECIPE)
        .arg(&partial)
        .output()
        .context("run mmdebstrap".to_owned())?;
    if !out.status.success() {
        return Err(Error::failed(format!(
            "mmdebstrap {recipe} failed ({}): {}",
            out.status,
            tail(&out.stderr)
        )));
    }
    std::fs::rename(&partial, &tarball)
        .with_context(|| format!("rename to {}", tarball.display()))?;
    std::fs::write(&stamp, recipe).with_context(|| format!("write {}", stamp.display()))?;
    Ok((tarball, true))
}

/// The image the Dockerfile's last stage (the runtime stage) starts `FROM`, as Podman names
/// it (`debian:bookworm-slim` is `docker.io/library/debian:bookworm-slim`).
pub fn runtime_base(dockerfile: &str) -> Result<String> {
    let base = dockerfile
        .lines()
        .filter_map(|l| l.trim().strip_prefix("FROM "))
        .next_back()
        .and_then(|from| from.split_whitespace().next())
        .ok_or_else(|| Error::failed("the Dockerfile has no FROM".to_owned()))?;
    Ok(qualified(base))
}

fn qualified(name: &str) -> String {
    match name.split_once('/') {
        Some((registry, _)) if registry.contains('.') || registry == "localhost" => name.to_owned(),
        Some(_) => format!("docker.io/{name}"),
        None => format!("docker.io/library/{name}"),
    }
}

/// Builds the Dockerfile's runtime stage as `tag` from the release plugins in `plugins`, on the
/// base `tarball`, in `work` (the build context: `install.sh` at the path the Dockerfile copies
/// it from, and nothing else).
pub fn build(
    podman: &Engine,
    workspace: &Path,
    tarball: &Path,
    plugins: &Path,
    work: &Path,
    tag: &str,
) -> Result<()> {
    let dockerfile = workspace.join("deploy/kubernetes/Dockerfile");
    let text = std::fs::read_to_string(&dockerfile)
        .with_context(|| format!("read {}", dockerfile.display()))?;
    let base = runtime_base(&text)?;
    podman.ok(&["import", "--quiet", &path(tarball), &base])?;
    import_plugins(podman, plugins, work)?;
    let context = work.join("context");
    let script = context.join("deploy/kubernetes/install.sh");
    std::fs::create_dir_all(script.parent().unwrap_or(&context))
        .with_context(|| format!("create {}", context.display()))?;
    std::fs::copy(workspace.join("deploy/kubernetes/install.sh"), &script)
        .context("copy install.sh into the build context".to_owned())?;
    podman.ok(&[
        "build",
        "--quiet",
        "--pull=never",
        "--build-arg",
        &format!("PLUGINS={PLUGINS_IMAGE}"),
        "--file",
        &path(&dockerfile),
        "--tag",
        tag,
        &path(&context),
    ])?;
    Ok(())
}

/// The plugins as an image holding `/out/<plugin>`, what the build stage leaves.
fn import_plugins(podman: &Engine, plugins: &Path, work: &Path) -> Result<()> {
    let out = work.join("plugins/out");
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    for plugin in galactic_core::plugins::BINARIES {
        std::fs::copy(plugins.join(plugin), out.join(plugin))
            .with_context(|| format!("copy {plugin} from {}", plugins.display()))?;
    }
    let tarball = work.join("plugins.tar");
    let packed = Command::new("tar")
        .arg("-C")
        .arg(work.join("plugins"))
        .arg("-cf")
        .arg(&tarball)
        .arg("out")
        .output()
        .context("run tar".to_owned())?;
    if !packed.status.success() {
        return Err(Error::failed(format!(
            "tar of the plugins failed: {}",
            tail(&packed.stderr)
        )));
    }
    podman.ok(&["import", "--quiet", &path(&tarball), PLUGINS_IMAGE])?;
    Ok(())
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_runtime_stage_base_is_the_last_from() {
        let dockerfile = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/Dockerfile"),
        )
        .unwrap();
        assert_eq!(
            runtime_base(&dockerfile).unwrap(),
            "docker.io/library/debian:bookworm-slim"
        );
        assert_eq!(qualified("ghcr.io/a/b:c"), "ghcr.io/a/b:c");
        assert_eq!(qualified("a/b"), "docker.io/a/b");
    }
}
