//! `check-layout`: every release plugin's hot-code script (`layout/<plugin>.ld`, decision 0063)
//! still matches the code it orders. A stale pattern is silently ignored by the linker and
//! `check-rss`'s budget has room for half-stale scripts, so this reads what the link did: the
//! map each release link writes next to its binary (`layout/link.rs`), for the same build
//! `check-rss` measures (a no-op build when it ran first). Per plugin it prints how many of the
//! script's functions landed in `.text.hot`, how many match nothing in the link (stale) and how
//! many exist but were garbage-collected, and fails when a script is stale beyond
//! `--max-stale`, places less than `--min-hot`, or was generated with another compiler or
//! dependency set than the current ones. Needs neither root nor valgrind. The same maps tell
//! whether each plugin was linked with galactic-core's `memcpy` (decision 0085); one without it
//! fails too.

use crate::layout::{check, map, provenance::Provenance};
use anyhow::{Context, Result};
use object::{Object, ObjectSection};
use std::path::Path;
use std::time::Instant;

/// `cargo xtask check-layout`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The largest allowed share of a script's functions that match no input section
    #[arg(long, value_name = "SHARE", default_value_t = 0.01)]
    pub max_stale: f64,
    /// The smallest allowed share of a script's functions placed in .text.hot
    #[arg(long, value_name = "SHARE", default_value_t = 0.98)]
    pub min_hot: f64,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            max_stale: 0.01,
            min_hot: 0.98,
        }
    }
}

/// Stale statements listed per plugin; the count says how many more.
const LISTED: usize = 8;

const REGENERATE: &str = "regenerate with `cargo xtask layout` (as root, needs valgrind) and \
                          commit layout/";

pub fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    let bins = crate::stage::build_release()?;
    let built = start.elapsed();
    let current = crate::layout::provenance::current(&crate::stage::PLUGINS)?;
    println!(
        "{:<18} {:>9} {:>6} {:>6} {:>6} {:>9} {:>10}  generated with",
        "script", "functions", "hot", "share", "stale", "elsewhere", ".text.hot"
    );
    let mut failures = Vec::new();
    let mut stale_lists = Vec::new();
    for plugin in crate::stage::PLUGINS {
        let now = &current[plugin];
        match verdict(plugin, &bins) {
            Ok(v) => {
                v.print(plugin, now);
                failures.extend(v.failures(plugin, now, args));
                if !v.stale.is_empty() {
                    stale_lists.push((plugin, v.stale));
                }
            }
            Err(e) => {
                println!("{plugin:<18} {e:#}");
                failures.push(format!("{plugin}: {e:#}"));
                // A toolchain or dependency change is worth naming even when the link is
                // unreadable: it says what to regenerate with.
                let script =
                    std::fs::read_to_string(crate::layout::dir().join(format!("{plugin}.ld")));
                let recorded = script.ok().and_then(|t| Provenance::recorded(&t));
                failures.extend(provenance_failure(plugin, recorded.as_ref(), now));
            }
        }
    }
    for (plugin, stale) in stale_lists {
        println!("{plugin}: {} stale statements", stale.len());
        for text in stale.iter().take(LISTED) {
            println!("  {text}");
        }
        if stale.len() > LISTED {
            println!("  … and {} more", stale.len() - LISTED);
        }
    }
    println!(
        "check-layout: {:.1} s, of which {:.1} s building the release plugins",
        start.elapsed().as_secs_f64(),
        built.as_secs_f64()
    );
    if !failures.is_empty() {
        anyhow::bail!("{}", failures.join("\n"));
    }
    Ok(())
}

/// What the link of one plugin did with its script.
struct Verdict {
    functions: usize,
    hot: usize,
    elsewhere: usize,
    /// The statements of the stale functions.
    stale: Vec<String>,
    hot_bytes: u64,
    recorded: Option<Provenance>,
    /// Whether galactic-core's `memcpy` was linked in place of musl's (decision 0085).
    wrapped_memcpy: bool,
}

fn verdict(plugin: &str, bins: &Path) -> Result<Verdict> {
    let path = crate::layout::dir().join(format!("{plugin}.ld"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let recorded = Provenance::recorded(&text);
    let map_path = bins.join(format!("{plugin}.map"));
    let map_text = std::fs::read_to_string(&map_path).with_context(|| {
        format!(
            "read {} (written by layout/link.rs in release builds)",
            map_path.display()
        )
    })?;
    let map = map::parse(&map_text);
    let binary = bins.join(plugin);
    let linked = hot_section(&binary)?;
    anyhow::ensure!(
        linked.is_none() || linked == map.hot,
        "{} is not the binary {} describes (rebuild)",
        binary.display(),
        map_path.display()
    );
    let script = check::script(&text);
    let placements = check::placements(&script, &map).map_err(anyhow::Error::msg)?;
    let count = |p: check::Placement| placements.iter().filter(|x| **x == p).count();
    let stale = script
        .functions
        .iter()
        .zip(&placements)
        .filter(|(_, p)| **p == check::Placement::Stale)
        .map(|(f, _)| f.text.clone())
        .collect();
    Ok(Verdict {
        functions: script.functions.len(),
        hot: count(check::Placement::Hot),
        elsewhere: count(check::Placement::Elsewhere),
        stale,
        hot_bytes: map.hot.map_or(0, |(_, size)| size),
        recorded,
        // The symbol at an address: a discarded section is listed without its symbols, and the
        // memory map also echoes the script's statements, which may name the section.
        wrapped_memcpy: map_text.lines().any(|line| {
            let line = line.trim();
            line.starts_with("0x") && line.ends_with(" __wrap_memcpy")
        }),
    })
}

/// The address and size of the binary's `.text.hot` (section headers survive stripping).
fn hot_section(binary: &Path) -> Result<Option<(u64, u64)>> {
    let data = std::fs::read(binary).with_context(|| format!("read {}", binary.display()))?;
    let file =
        object::File::parse(&*data).with_context(|| format!("parse {}", binary.display()))?;
    Ok(file
        .section_by_name(".text.hot")
        .map(|s| (s.address(), s.size())))
}

impl Verdict {
    fn share(&self, n: usize) -> f64 {
        n as f64 / self.functions.max(1) as f64
    }

    fn print(&self, plugin: &str, now: &Provenance) {
        let generated = match &self.recorded {
            Some(r) if r == now => "the current toolchain and dependencies".to_owned(),
            Some(r) => format!("rustc {}, dependencies {}", r.rustc, r.dependencies),
            None => "(not recorded)".to_owned(),
        };
        println!(
            "{plugin:<18} {:>9} {:>6} {:>6.3} {:>6} {:>9} {:>6} KiB  {generated}",
            self.functions,
            self.hot,
            self.share(self.hot),
            self.stale.len(),
            self.elsewhere,
            self.hot_bytes / 1024
        );
    }

    fn failures(&self, plugin: &str, now: &Provenance, args: &Args) -> Vec<String> {
        let mut out: Vec<String> = provenance_failure(plugin, self.recorded.as_ref(), now)
            .into_iter()
            .collect();
        let stale = self.share(self.stale.len());
        if stale > args.max_stale {
            out.push(format!(
                "{plugin}: {} of {} functions ({stale:.3}) match no input section (at most \
                 {}): {REGENERATE}",
                self.stale.len(),
                self.functions,
                args.max_stale
            ));
        }
        let hot = self.share(self.hot);
        if hot < args.min_hot {
            out.push(format!(
                "{plugin}: {} of {} functions ({hot:.3}) are in .text.hot (at least {}): \
                 {REGENERATE}",
                self.hot, self.functions, args.min_hot
            ));
        }
        if !self.wrapped_memcpy && cfg!(target_arch = "x86_64") {
            out.push(format!(
                "{plugin}: the link has no __wrap_memcpy: musl's memcpy serves its copies \
                 (layout/link.rs passes --wrap=memcpy, decision 0085)"
            ));
        }
        out
    }
}

/// Why the script's recorded provenance is not the build's, if it is not.
fn provenance_failure(
    plugin: &str,
    recorded: Option<&Provenance>,
    now: &Provenance,
) -> Option<String> {
    match recorded {
        Some(r) if r == now => None,
        Some(r) => Some(format!(
            "{plugin}: the script was generated with rustc {} and dependency set {}, the build \
             uses rustc {} and dependency set {}: {REGENERATE}",
            r.rustc, r.dependencies, now.rustc, now.dependencies
        )),
        None => Some(format!(
            "{plugin}: the script's header does not record its rustc and dependency set: \
             {REGENERATE}"
        )),
    }
}
