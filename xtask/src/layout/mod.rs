//! `layout`: writes `layout/<plugin>.ld`, the hot-code linker script of every plugin, from
//! real calls. The release plugins are built with their symbol tables and run, ADD, CHECK and
//! DEL of the full chain with each master ([`chain`]), under valgrind's lackey; the functions
//! each process entered become the plugin's `.text.hot` section ([`script`]). Each plugin
//! crate's build script passes its scripts to the linker in release builds
//! (`layout/link.rs`). Why: a plugin call's resident size is the 64 KiB fault-around blocks its
//! code touches, and without a layout the few hundred KiB it runs are spread over most of the
//! binary (docs/performance.md, docs/decisions/0063-hot-code-layout.md).

pub mod chain;
pub mod check;
pub mod map;
pub mod provenance;
mod script;
mod trace;

use anyhow::{bail, Context, Result};
use object::read::archive::ArchiveFile;
use object::{Object, ObjectSymbol, SymbolKind};
use script::Profile;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `cargo xtask layout`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep the valgrind logs in this directory (default: a temporary one)
    #[arg(long, value_name = "DIR")]
    pub keep_logs: Option<PathBuf>,
}

/// Where the scripts live (read by `layout/link.rs`).
pub fn dir() -> PathBuf {
    crate::workspace_root().join("layout")
}

pub fn run(args: &Args) -> Result<()> {
    galactic_testkit::harness::require_root()?;
    let valgrind =
        crate::stage::which("valgrind").context("valgrind is missing: apt-get install valgrind")?;
    let bins = crate::stage::build_release_with_symbols()?;
    let work = tempfile::tempdir()?;
    let logs = match &args.keep_logs {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => work.path().join("logs"),
    };
    std::fs::create_dir_all(&logs)?;
    let wrappers = work.path().join("wrappers");
    std::fs::create_dir_all(&wrappers)?;
    // Children too: the masters' IPAM delegate is found in the real bin dir. No chasing: a
    // superblock that follows calls and jumps would hide the entry of the functions it enters.
    let launch = |_: &str, real: &Path| {
        format!(
            "{} --tool=lackey --trace-superblocks=yes --vex-guest-chase=no --trace-children=yes \
             --log-file={}/%q{{CNI_COMMAND}}.%p {} \"$@\"",
            valgrind.display(),
            logs.display(),
            real.display()
        )
    };
    let lists: Vec<_> = [
        galactic_core::plugins::VETH_MASTER,
        galactic_core::plugins::TAP_MASTER,
    ]
    .map(chain::ours)
    .into_iter()
    .collect();
    for list in &lists {
        chain::wrappers(list, &bins, &wrappers, &launch)?;
    }
    let runs: Vec<(&_, &Path)> = lists.iter().map(|l| (l, bins.as_path())).collect();
    chain::run(&runs, &wrappers)?;
    let profiles = profiles(&logs)?;
    let libc = libc_members()?;
    let provenance = provenance::current(&crate::stage::PLUGINS)?;
    for plugin in crate::stage::PLUGINS {
        let Some(profile) = profiles.get(plugin) else {
            bail!("no traced call of {plugin}");
        };
        let path = dir().join(format!("{plugin}.ld"));
        let script = script::render(plugin, profile, &libc, &provenance[plugin]);
        std::fs::write(&path, script).with_context(|| format!("write {}", path.display()))?;
        println!("{}: {} functions", path.display(), profile.ordered().len());
    }
    Ok(())
}

/// The profile of every plugin traced in `logs` (files `<COMMAND>.<pid>`).
fn profiles(logs: &Path) -> Result<BTreeMap<String, Profile>> {
    let mut symbols: BTreeMap<PathBuf, trace::Symbols> = BTreeMap::new();
    let mut profiles: BTreeMap<String, Profile> = BTreeMap::new();
    for entry in std::fs::read_dir(logs)? {
        let log = entry?.path();
        let file = log
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Some(command) = chain::COMMANDS
            .iter()
            .position(|c| file.starts_with(&format!("{c}.")))
        else {
            continue;
        };
        let traced = trace::read(&log)?;
        let name = traced
            .program
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        // Other programs a plugin starts (`nft`) are not ours to lay out.
        if !crate::stage::PLUGINS.contains(&name.as_str()) {
            continue;
        }
        if !symbols.contains_key(&traced.program) {
            symbols.insert(traced.program.clone(), trace::Symbols::of(&traced.program)?);
        }
        let profile = profiles.entry(name).or_default();
        for function in trace::functions(&traced, &symbols[&traced.program]) {
            profile.ran(command, function);
        }
    }
    Ok(profiles)
}

/// libc's code symbols by the `libc.a` members defining them: the musl that rustc links the
/// release plugins with (its own copy, in the target's `self-contained` directory).
fn libc_members() -> Result<BTreeMap<String, BTreeSet<String>>> {
    let path = crate::stage::release_target_libdir()
        .context("run rustc --print sysroot")?
        .join("self-contained/libc.a");
    let data = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
    let archive =
        ArchiveFile::parse(&*data).with_context(|| format!("parse {}", path.display()))?;
    let mut members: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for member in archive.members() {
        let member = member?;
        let name = String::from_utf8_lossy(member.name()).into_owned();
        let Ok(object) = object::File::parse(member.data(&*data)?) else {
            continue;
        };
        for symbol in object.symbols() {
            if symbol.kind() == SymbolKind::Text && symbol.is_definition() {
                if let Ok(function) = symbol.name() {
                    members
                        .entry(function.to_owned())
                        .or_default()
                        .insert(name.clone());
                }
            }
        }
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plugin without a script, or whose crate's build script does not pass it, is linked
    /// with its hot code scattered again (`cargo xtask check-rss` would notice, as root).
    #[test]
    fn every_plugin_is_linked_with_its_layout() {
        for plugin in crate::stage::PLUGINS {
            let path = dir().join(format!("{plugin}.ld"));
            let script = std::fs::read_to_string(&path).expect("read the layout script");
            let placed = script
                .lines()
                .filter(|l| l.trim_start().starts_with('*'))
                .count();
            assert!(
                script.contains(".text.hot : {") && placed > 100,
                "{} places {placed} sections: regenerate it with `cargo xtask layout`",
                path.display()
            );
            let build = crate::workspace_root()
                .join("crates")
                .join(plugin)
                .join("build.rs");
            let build = std::fs::read_to_string(&build).expect("read the build script");
            assert!(
                build.contains("layout::link(") && build.contains(&format!("\"{plugin}\"")),
                "crates/{plugin}/build.rs does not link {plugin} with its layout"
            );
        }
    }
}
