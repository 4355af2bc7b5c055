//! What a script was generated with, recorded in its header: the compiler (`rustc -vV`'s release
//! and commit) and the plugin's dependency set (every package its release build compiles, by
//! name, version and source, from `cargo metadata`, hashed). Both decide the symbol names and
//! the code the script's patterns match, and the toolchain cannot be pinned (decision 0063), so
//! `cargo xtask check-layout` compares them with the current ones and asks for a regeneration
//! when either differs.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// What a script was (or would now be) generated with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// `<release> <commit-hash>` of `rustc -vV`.
    pub rustc: String,
    /// FNV-1a (64 bits, hex) of the sorted `name version source` lines of the dependency set.
    pub dependencies: String,
}

const RUSTC: &str = "rustc: ";
const DEPENDENCIES: &str = "dependencies: ";

impl Provenance {
    /// The header lines that record it (inside the script's leading comment).
    pub fn header(&self) -> String {
        format!(
            "   {RUSTC}{}\n   {DEPENDENCIES}{}",
            self.rustc, self.dependencies
        )
    }

    /// What the header of `script` records, if it records both.
    pub fn recorded(script: &str) -> Option<Self> {
        let header = script.split_once("*/")?.0;
        let field = |key: &str| {
            header
                .lines()
                .find_map(|l| l.trim().strip_prefix(key))
                .map(|v| v.trim().to_owned())
        };
        Some(Self {
            rustc: field(RUSTC)?,
            dependencies: field(DEPENDENCIES)?,
        })
    }
}

/// The current provenance of each of `plugins`' scripts.
pub fn current(plugins: &[&str]) -> Result<BTreeMap<String, Provenance>> {
    let rustc = rustc()?;
    let metadata = metadata()?;
    let mut out = BTreeMap::new();
    for plugin in plugins {
        // Every plugin binary is the package of its name.
        let Some(dependencies) = dependency_set(&metadata, plugin) else {
            bail!("cargo metadata lists no workspace package {plugin}");
        };
        out.insert(
            (*plugin).to_owned(),
            Provenance {
                rustc: rustc.clone(),
                dependencies,
            },
        );
    }
    Ok(out)
}

/// `<release> <commit-hash>` of the compiler cargo uses in the workspace.
fn rustc() -> Result<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .current_dir(crate::workspace_root())
        .arg("-vV")
        .output()
        .context("run rustc -vV")?;
    if !out.status.success() {
        bail!("rustc -vV failed ({})", out.status);
    }
    version(&String::from_utf8_lossy(&out.stdout)).context("rustc -vV: no release line")
}

fn version(verbose: &str) -> Option<String> {
    let field = |key: &str| verbose.lines().find_map(|l| l.strip_prefix(key));
    let release = field("release: ")?;
    Some(match field("commit-hash: ") {
        Some(commit) => format!("{release} {commit}"),
        None => release.to_owned(),
    })
}

/// The workspace's resolved packages for the release target (`--locked`: never rewrites
/// Cargo.lock).
fn metadata() -> Result<Value> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
        ])
        .arg(crate::stage::release_triple())
        .output()
        .context("run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("parse cargo metadata")
}

/// The hash of the packages `package`'s build compiles: its normal and build dependencies,
/// transitively (dev-dependencies are not in its binaries). Workspace packages count by name and
/// version, not by path, so that every checkout agrees.
pub fn dependency_set(metadata: &Value, package: &str) -> Option<String> {
    let packages: BTreeMap<&str, String> = metadata["packages"]
        .as_array()?
        .iter()
        .filter_map(|p| {
            let source = p["source"].as_str().unwrap_or("workspace");
            let line = format!(
                "{} {} {source}",
                p["name"].as_str()?,
                p["version"].as_str()?
            );
            Some((p["id"].as_str()?, line))
        })
        .collect();
    let root = metadata["packages"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == package && p["source"].is_null())?["id"]
        .as_str()?;
    let nodes: BTreeMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()?
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let mut seen = BTreeSet::from([root]);
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        for dep in nodes.get(id)?["deps"].as_array()? {
            let built = dep["dep_kinds"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k["kind"] != "dev"));
            if let Some(pkg) = dep["pkg"].as_str().filter(|_| built) {
                if seen.insert(pkg) {
                    todo.push(pkg);
                }
            }
        }
    }
    let lines: BTreeSet<&str> = seen
        .iter()
        .filter_map(|id| packages.get(id).map(String::as_str))
        .collect();
    let text: Vec<&str> = lines.into_iter().collect();
    Some(format!("{:016x}", fnv1a64(text.join("\n").as_bytes())))
}

/// A stable 64-bit hash (std's `DefaultHasher` may change between Rust versions).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_header_round_trips() {
        let p = Provenance {
            rustc: "1.95.0 59807616e1fa".into(),
            dependencies: "00ff00ff00ff00ff".into(),
        };
        let script = format!(
            "/* The hot code of x.\n{} */\nSECTIONS {{\n}}\n",
            p.header()
        );
        assert_eq!(Provenance::recorded(&script), Some(p));
        assert_eq!(Provenance::recorded("/* no record */\nrustc: 1"), None);
    }

    #[test]
    fn the_compiler_is_its_release_and_commit() {
        let out = "rustc 1.95.0 (59807616e 2026-04-14)\nbinary: rustc\n\
                   commit-hash: 59807616e1fa\nrelease: 1.95.0\nLLVM version: 22.1.2\n";
        assert_eq!(version(out).as_deref(), Some("1.95.0 59807616e1fa"));
    }

    #[test]
    fn the_dependency_set_follows_normal_and_build_edges_only() {
        let pkg = |id: &str, source: Option<&str>| json!({"id": id, "name": id, "version": "1.0.0", "source": source});
        let dep = |id: &str, kind: Option<&str>| json!({"pkg": id, "dep_kinds": [{"kind": kind}]});
        // A registry package's source id (what it names does not matter here).
        let registry = Some("registry+https://example.invalid/index");
        let metadata = |lib_version: &str| {
            let mut lib = pkg("lib", registry);
            lib["version"] = json!(lib_version);
            json!({
                "packages": [pkg("app", None), lib, pkg("cc", registry), pkg("testkit", None)],
                "resolve": {"nodes": [
                    {"id": "app", "deps": [dep("lib", None), dep("cc", Some("build")),
                                           dep("testkit", Some("dev"))]},
                    {"id": "lib", "deps": []},
                    {"id": "cc", "deps": []},
                    {"id": "testkit", "deps": [dep("lib", None)]},
                ]}
            })
        };
        let base = dependency_set(&metadata("1.0.0"), "app").expect("a set");
        assert_eq!(base.len(), 16);
        assert_ne!(
            dependency_set(&metadata("1.0.1"), "app"),
            Some(base.clone())
        );
        // A dev-dependency's own bump does not count.
        let mut dev_bump = metadata("1.0.0");
        dev_bump["packages"][3]["version"] = json!("2.0.0");
        assert_eq!(dependency_set(&dev_bump, "app"), Some(base));
        assert_eq!(dependency_set(&metadata("1.0.0"), "lib"), None);
    }
}
