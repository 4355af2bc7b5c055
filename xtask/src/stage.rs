//! `build-and-stage`: build the plugins and install them where a CNI runtime finds them.
//!
//! Every file is installed atomically (a temporary file in the target directory, then a rename),
//! so a runtime never executes a half-written binary, and only when its content changed, so a
//! second run changes nothing.

use anyhow::{bail, Context, Result};
use galactic_core::config::NodeConfig;
use serde_json::{Map, Value};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The chain's plugin binaries, and the upstream type names kept working as copies of our
/// masters (one list, the plugins').
pub use galactic_core::plugins::{ALIASES, BINARIES as PLUGINS};

/// `cargo xtask build-and-stage`: what to build and where to install it.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Build with the release profile (default: debug)
    #[arg(long)]
    pub release: bool,
    /// CNI bin dir to install into
    #[arg(long, value_name = "DIR", default_value = "/opt/cni/bin")]
    pub bin_dir: PathBuf,
    /// Node config to write
    #[arg(long, value_name = "PATH", default_value = galactic_core::config::DEFAULT_NODE_CONFIG)]
    pub node_config: PathBuf,
    /// Node config key to set (repeatable), e.g. --set publisher=local
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub set: Vec<(String, String)>,
    /// Also install galactic-veth and galactic-tap (upstream type names)
    #[arg(long)]
    pub aliases: bool,
    /// Chain conflist to install into the runtime's conf dir
    #[arg(long, value_name = "FILE")]
    pub conflist: Option<PathBuf>,
    /// The runtime's conf dir (where --conflist goes)
    #[arg(long, value_name = "DIR", default_value = "/etc/cni/net.d")]
    pub conf_dir: PathBuf,
}

/// `KEY=VALUE` of `--set`.
fn key_value(pair: &str) -> Result<(String, String), String> {
    pair.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("takes KEY=VALUE, got {pair:?}"))
}

/// Builds, then stages binaries, node config and (optionally) the conflist.
pub fn build_and_stage(opts: &Options) -> Result<()> {
    // Validate the node config before anything is built or installed.
    let node_config = node_config_text(&opts.node_config, &opts.set)?;
    let built = build(opts.release)?;
    let mut changed = Vec::new();
    for plugin in PLUGINS {
        if install(&built.join(plugin), &opts.bin_dir.join(plugin), 0o755)? {
            changed.push(plugin.to_owned());
        }
    }
    if opts.aliases {
        for (alias, plugin) in ALIASES {
            if install(&built.join(plugin), &opts.bin_dir.join(alias), 0o755)? {
                changed.push(alias.to_owned());
            }
        }
    }
    if write_atomic(&opts.node_config, node_config.as_bytes(), 0o644)? {
        changed.push(opts.node_config.display().to_string());
    }
    if let Some(conflist) = &opts.conflist {
        let target = install_conflist(conflist, &opts.conf_dir)?;
        if target.1 {
            changed.push(target.0.display().to_string());
        }
    }
    if changed.is_empty() {
        eprintln!("staged into {}: already up to date", opts.bin_dir.display());
    } else {
        eprintln!(
            "staged into {}: updated {}",
            opts.bin_dir.display(),
            changed.join(", ")
        );
    }
    Ok(())
}

/// Builds the release plugins; returns the directory holding them.
pub fn build_release() -> Result<PathBuf> {
    build(true)
}

/// Builds the `rss-probe` launcher next to this binary (it stays in xtask: a ptrace tool the
/// benches start, built with xtask's own `cargo build`); returns its path.
pub fn build_rss_probe() -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["build", "--quiet", "-p", "xtask", "--bin", "rss-probe"])
        .status()
        .context("run cargo build")?;
    if !ok.success() {
        bail!("building rss-probe failed");
    }
    Ok(std::env::current_exe()?.with_file_name("rss-probe"))
}

/// Runs cargo for the plugin binaries; returns the directory holding them.
pub fn build_plugins(release: bool) -> Result<PathBuf> {
    build(release)
}

/// Builds the release plugins exactly as [`build_release`] does but with their symbol tables,
/// in a target directory of their own (`symbols` in the target directory, so the stripped
/// build is not rebuilt); returns the directory holding them. For the tools that map addresses
/// to functions (`cargo xtask layout`).
pub fn build_release_with_symbols() -> Result<PathBuf> {
    let target = crate::target_dir().join("symbols");
    build_with(
        true,
        &[
            ("CARGO_PROFILE_RELEASE_STRIP", "none".as_ref()),
            ("CARGO_TARGET_DIR", target.as_os_str()),
        ],
    )
}

fn build(release: bool) -> Result<PathBuf> {
    build_with(release, &[])
}

fn build_with(release: bool, env: &[(&str, &std::ffi::OsStr)]) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = crate::workspace_root();
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root).args(["build", "--quiet", "--bins"]);
    cmd.envs(env.iter().copied());
    // Each plugin binary is the package of its name.
    for package in PLUGINS {
        cmd.args(["--package", package]);
    }
    let triple = release_triple();
    if release {
        require_release_toolchain()?;
        // Release plugins are static, non-PIE musl executables: a CNI plugin is a fresh
        // process per call, so its start-up and the pages it touches are paid on every call.
        // Static and non-PIE, each call maps only the code it runs (no ld.so, no relocations
        // to apply); musl rather than glibc, because glibc's start-up identifies the CPU and
        // its caches with ≈ 50 `cpuid` instructions, each a trap to the hypervisor on a
        // virtual machine (docs/performance.md). The flags go to the plugin target only
        // (`--target`), never to build scripts or proc macros.
        cmd.args(["--release", "--target", &triple]).env(
            format!(
                "CARGO_TARGET_{}_RUSTFLAGS",
                triple.to_uppercase().replace('-', "_")
            ),
            STATIC_RUSTFLAGS,
        );
    }
    let status = cmd.status().context("run cargo build")?;
    if !status.success() {
        bail!("cargo build failed ({status})");
    }
    let target = env
        .iter()
        .find(|(k, _)| *k == "CARGO_TARGET_DIR")
        .map(|(_, v)| v.to_os_string())
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR"))
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(if release {
        target.join(triple).join("release")
    } else {
        target.join("debug")
    })
}

/// How the release plugins are linked: musl statically, at a fixed address.
pub const STATIC_RUSTFLAGS: &str = "-C target-feature=+crt-static -C relocation-model=static";

/// The musl triple of this machine's architecture, which the release plugins are built for.
pub fn release_triple() -> String {
    format!("{}-unknown-linux-musl", std::env::consts::ARCH)
}

/// Fails, naming what to install, unless the release plugins can be built here.
pub fn require_release_toolchain() -> Result<()> {
    let missing = release_toolchain_missing();
    if !missing.is_empty() {
        bail!(
            "the release plugins cannot be built here: missing {}",
            missing.join("; ")
        );
    }
    Ok(())
}

/// What the release build needs and this machine lacks, each with how to get it: the Rust
/// standard library for [`release_triple`], and `musl-gcc` for the C the plugins link (SQLite,
/// and ring's primitives in galactic-bgp).
pub fn release_toolchain_missing() -> Vec<String> {
    let triple = release_triple();
    let mut missing = Vec::new();
    if !release_target_libdir().is_some_and(|dir| dir.is_dir()) {
        missing.push(format!(
            "the Rust target {triple} (rustup target add {triple})"
        ));
    }
    if which("musl-gcc").is_none() {
        missing.push("`musl-gcc` (apt-get install musl-tools)".to_owned());
    }
    missing
}

/// Where the toolchain keeps the standard library (and musl's own `self-contained` libc) of
/// [`release_triple`]: `<sysroot>/lib/rustlib/<triple>/lib`, whether or not it is installed.
pub fn release_target_libdir() -> Option<PathBuf> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Some(
        sysroot
            .join("lib/rustlib")
            .join(release_triple())
            .join("lib"),
    )
}

/// `program` as found on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}

/// Installs `source` as `target` atomically unless the content is already the same.
/// Returns whether anything changed.
pub fn install(source: &Path, target: &Path, mode: u32) -> Result<bool> {
    let bytes = fs::read(source).with_context(|| format!("read {}", source.display()))?;
    write_atomic(target, &bytes, mode)
}

/// Writes `bytes` to `target` through a temporary file + rename in the same directory.
pub fn write_atomic(target: &Path, bytes: &[u8], mode: u32) -> Result<bool> {
    let unchanged = fs::read(target).is_ok_and(|old| old == bytes)
        && fs::metadata(target).is_ok_and(|m| m.permissions().mode() & 0o7777 == mode);
    if unchanged {
        return Ok(false);
    }
    let dir = target.parent().context("target has no parent directory")?;
    fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let name = target
        .file_name()
        .context("target has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    fs::write(&tmp, bytes).with_context(|| format!("write {}", tmp.display()))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
    fs::File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, target).with_context(|| format!("rename into {}", target.display()))?;
    Ok(true)
}

/// Merges `set` into the node config at `path` (or a new one) and validates the result with the
/// plugins' own resolver; returns the text to install.
fn node_config_text(path: &Path, set: &[(String, String)]) -> Result<String> {
    let mut config: Map<String, Value> = match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "existing node config {} is not a JSON object",
                path.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    for (key, value) in set {
        config.insert(key.clone(), Value::String(value.clone()));
    }
    let text = serde_json::to_string_pretty(&Value::Object(config))? + "\n";
    // Validate with the plugins' own resolver before anything is installed.
    let mut check = tempfile::NamedTempFile::new()?;
    check.write_all(text.as_bytes())?;
    NodeConfig::resolve_from(
        &Value::Object(Map::new()),
        &|_: &str| None,
        check.path(),
        None,
    )
    .context("the node config would be invalid")?;
    Ok(text)
}

/// Installs the chain conflist after checking its shape. Returns (target, changed).
fn install_conflist(source: &Path, conf_dir: &Path) -> Result<(PathBuf, bool)> {
    let bytes = fs::read(source).with_context(|| format!("read {}", source.display()))?;
    let conflist: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", source.display()))?;
    let plugins = conflist.get("plugins").and_then(Value::as_array);
    if conflist.get("name").and_then(Value::as_str).is_none()
        || plugins.is_none_or(|p| p.is_empty())
    {
        bail!(
            "{} is not a conflist (needs \"name\" and a non-empty \"plugins\")",
            source.display()
        );
    }
    let name = source.file_name().context("conflist has no file name")?;
    let target = conf_dir.join(name);
    let changed = write_atomic(&target, &bytes, 0o644)?;
    Ok((target, changed))
}
