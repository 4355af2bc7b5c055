//! The machine's own state the tier must leave as it found it: the root network namespace's
//! links, routes, rules and nftables ruleset, the directories a Podman of the machine uses, and
//! the cgroup hierarchies' top level.

use crate::tier::{Context, Result};
use std::path::Path;
use std::process::Command;

/// Directories Podman, runc and libcni use on the machine by default, each with the prefix of
/// the names that matter (the test kit's own namespaces come and go in `/run/netns` while other
/// suites run); the tier's Podman must not have written into any of them.
const RUNTIME_DIRS: &[(&str, &str)] = &[
    ("/var/lib/cni", ""),
    ("/var/lib/containers", ""),
    ("/run/netns", "netns-"),
    ("/run/runc", ""),
    ("/run/libpod", ""),
    ("/run/containers", ""),
    ("/etc/cni/net.d", ""),
    ("/dev/shm", "libpod"),
    ("/var/tmp", "storage"),
];

/// What was found, one labelled text per item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot(Vec<(String, String)>);

impl Snapshot {
    /// The machine as it is now.
    pub fn take() -> Result<Self> {
        let mut items = Vec::new();
        for args in [
            &["-o", "link", "show"][..],
            &["-4", "route", "show", "table", "all"],
            &["-6", "route", "show", "table", "all"],
            &["-4", "rule", "show"],
            &["-6", "rule", "show"],
        ] {
            items.push((format!("ip {}", args.join(" ")), output("ip", args)?));
        }
        items.push((
            "nft list ruleset".to_owned(),
            output("nft", &["list", "ruleset"])?,
        ));
        for (dir, prefix) in RUNTIME_DIRS {
            items.push(((*dir).to_owned(), listing(Path::new(dir), prefix)));
        }
        items.push(("cgroup hierarchies".to_owned(), cgroup_tops()));
        Ok(Self(items))
    }

    /// What differs in `later`, by label.
    pub fn differences(&self, later: &Snapshot) -> Vec<String> {
        self.0
            .iter()
            .zip(&later.0)
            .filter(|(a, b)| a != b)
            .map(|((label, before), (_, after))| {
                format!(
                    "{label} changed (only before: [{}]; only after: [{}])",
                    lines_not_in(before, after),
                    lines_not_in(after, before)
                )
            })
            .collect()
    }
}

/// The first few lines of `text` that `other` lacks.
fn lines_not_in(text: &str, other: &str) -> String {
    let others: std::collections::HashSet<&str> = other.lines().collect();
    let only: Vec<&str> = text.lines().filter(|l| !others.contains(l)).collect();
    let shown = only.iter().take(5).copied().collect::<Vec<_>>().join(" | ");
    match only.len() {
        0..=5 => shown,
        n => format!("{shown} | and {} more", n - 5),
    }
}

fn output(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("run {program} {}", args.join(" ")))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Everything under `dir` whose top-level name starts with `prefix`: each path with its size
/// and modification time (a Podman of the machine run once touches its lock files and event
/// log even when it creates nothing), sorted; `absent` when there is no such directory. With a
/// prefix the directory is shared (the tiers' own namespaces live in `/run/netns`, and
/// creating the first one creates it): only those names matter, and a missing directory has
/// none.
fn listing(dir: &Path, prefix: &str) -> String {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return if prefix.is_empty() { "absent" } else { "" }.to_owned();
    };
    let mut found = Vec::new();
    let mut stack: Vec<_> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        found.push(format!("{} {} {modified}", path.display(), meta.len()));
        if meta.is_dir() && found.len() < 10_000 {
            stack.extend(
                std::fs::read_dir(&path)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
        }
    }
    found.sort();
    found.join("\n")
}

/// The directories at the top of every cgroup hierarchy (where a container's cgroup parent
/// would be created).
fn cgroup_tops() -> String {
    let mut out = Vec::new();
    let root = Path::new("/sys/fs/cgroup");
    let mut hierarchies: Vec<_> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    hierarchies.sort();
    // On a unified (v2 only) mount the root itself is the hierarchy.
    hierarchies.push(root.to_path_buf());
    for h in hierarchies {
        out.push(format!("{}: {}", h.display(), listing_dirs(&h)));
    }
    out.join("\n")
}

fn listing_dirs(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.join(" ")
}

/// Runs a tier's `play` between two snapshots of the machine, prints the machine's line and
/// the tier's total time (`summary` adds to it), and fails when `play` did or the machine
/// changed. `tier` names it in the messages ("the Podman tier").
pub fn untouched(
    tier: &str,
    command: &str,
    started: std::time::Instant,
    summary: impl FnOnce() -> String,
    play: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let before = Snapshot::take()?;
    let outcome = play();
    let changed = before.differences(&Snapshot::take()?);
    println!(
        "[{}] the machine's own links, routes, rules, nftables ruleset, runtime directories and cgroups are unchanged",
        if changed.is_empty() { "PASS" } else { "FAIL" }
    );
    println!(
        "{command}: {:.0} s in all{}",
        started.elapsed().as_secs_f64(),
        summary()
    );
    outcome.with_context(|| format!("{tier} failed (see [FAIL] above)"))?;
    if !changed.is_empty() {
        return Err(crate::tier::Error::failed(format!(
            "{tier} changed the machine: {}",
            changed.join("; ")
        )));
    }
    Ok(())
}
