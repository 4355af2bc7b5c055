//! The simulated node: a directory that is the host's `/` for the DaemonSet's `hostPath` volumes,
//! seeded as a fresh node or as one the upstream Go chain served, and compared file by file
//! before and after a container ran.

use crate::tier::{Context, Result};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The simulated host root.
pub struct HostRoot {
    dir: PathBuf,
}

/// The upstream settings a Go node's static conflist carries.
pub const GO_LOG_LEVEL: &str = "debug";
/// A NAT66 shard SID of the Go node.
pub const GO_SHARD_SIDS: &str = "2001:db8:ff01:9:e001::";
/// The Go node's uplinks.
pub const GO_UPLINKS: &str = "eth1";

/// The Go installer's binaries, as plain files.
pub const GO_BINARIES: &[&str] = &[
    "galactic-veth",
    "galactic-tap",
    "galactic-ipam",
    "galactic-route",
    "galactic-bgp",
];

impl HostRoot {
    /// An empty host root at `dir` (created).
    pub fn new(dir: PathBuf) -> Result<Self> {
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Self { dir })
    }

    /// The host root's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host's `path` (absolute on the host) in the simulation.
    pub fn path(&self, path: &str) -> PathBuf {
        self.dir.join(path.trim_start_matches('/'))
    }

    /// What the upstream Go chain leaves on a node it served: its static conflist in the
    /// runtime's conf dir (its installer's format: one `"key": "value"` per line), its IPAM's
    /// marker files, and its binaries as plain files.
    pub fn seed_go_node(&self, node_name: &str) -> Result<()> {
        let conflist = format!(
            r#"{{
  "cniVersion": "1.0.0",
  "name": "galactic",
  "plugins": [
    {{
      "type": "galactic-cni",
      "node_name": "{node_name}",
      "kubeconfig": "/var/lib/galactic/kubeconfig",
      "namespace": "galactic-system",
      "log_file": "/var/log/galactic/galactic-cni.log",
      "log_level": "{GO_LOG_LEVEL}",
      "nat66_shard_sids": "{GO_SHARD_SIDS}",
      "ebpf_interfaces": "{GO_UPLINKS}"
    }}
  ]
}}
"#
        );
        self.write("/etc/cni/net.d/10-galactic.conflist", &conflist, 0o644)?;
        let pool = "/var/lib/cni/galactic-ipam/fd20:10:ff01::-48";
        self.write(&format!("{pool}/lock"), "", 0o644)?;
        self.write(&format!("{pool}/fd20:10:ff01::100:0-96"), "go-pod-1", 0o644)?;
        for name in GO_BINARIES {
            let script = format!("#!/bin/sh\necho go-{name}\n");
            self.write(&format!("/opt/cni/bin/{name}"), &script, 0o755)?;
        }
        Ok(())
    }

    fn write(&self, path: &str, text: &str, mode: u32) -> Result<()> {
        let file = self.path(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("create {}", parent.display()))?;
        }
        std::fs::write(&file, text).with_context(|| format!("write {}", file.display()))?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("chmod {}", file.display()))
    }

    /// Every file, directory and link under the root as it is now.
    pub fn snapshot(&self) -> Result<Tree> {
        let mut entries = BTreeMap::new();
        let mut stack = vec![self.dir.clone()];
        while let Some(dir) = stack.pop() {
            let listing =
                std::fs::read_dir(&dir).with_context(|| format!("list {}", dir.display()))?;
            for entry in listing {
                let path = entry
                    .with_context(|| format!("list {}", dir.display()))?
                    .path();
                let meta = std::fs::symlink_metadata(&path)
                    .with_context(|| format!("stat {}", path.display()))?;
                let relative = path
                    .strip_prefix(&self.dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                let mode = meta.permissions().mode() & 0o7777;
                let found = if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&path)
                        .with_context(|| format!("readlink {}", path.display()))?;
                    Entry::Link(target.display().to_string())
                } else if meta.is_dir() {
                    stack.push(path.clone());
                    Entry::Dir { mode }
                } else {
                    let bytes =
                        std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
                    Entry::File {
                        mode,
                        bytes,
                        modified: (meta.mtime(), meta.mtime_nsec()),
                    }
                };
                entries.insert(relative, found);
            }
        }
        Ok(Tree(entries))
    }
}

/// One path of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory and its mode (not its mtime: a temporary file made and removed in it
    /// changes that without changing anything in it).
    Dir {
        /// Permission bits.
        mode: u32,
    },
    /// A regular file: mode, content and modification time (a rewrite with the same content
    /// is a change too).
    File {
        /// Permission bits.
        mode: u32,
        /// Content.
        bytes: Vec<u8>,
        /// `mtime` in seconds and nanoseconds.
        modified: (i64, i64),
    },
    /// A symbolic link and its target.
    Link(String),
}

impl Entry {
    /// The permission bits (none for a link).
    pub fn mode(&self) -> Option<u32> {
        match self {
            Self::Dir { mode } | Self::File { mode, .. } => Some(*mode),
            Self::Link(_) => None,
        }
    }
}

/// The host root's content at one moment, by path relative to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree(pub BTreeMap<String, Entry>);

impl Tree {
    /// The paths that differ in `later`: changed, new or gone, sorted.
    pub fn changes(&self, later: &Tree) -> Vec<String> {
        let mut changed: Vec<String> = self
            .0
            .iter()
            .filter(|(path, entry)| later.0.get(*path) != Some(entry))
            .map(|(path, _)| path.clone())
            .collect();
        changed.extend(later.0.keys().filter(|p| !self.0.contains_key(*p)).cloned());
        changed.sort();
        changed.dedup();
        changed
    }

    /// The entry at `path` (relative to the root).
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.0.get(path.trim_start_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A rewrite with the same content is a change; a temporary file made and removed beside
    /// a file is not (only its directory's mtime moved).
    #[test]
    fn a_rewrite_counts_and_a_temporary_file_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path().join("host")).unwrap();
        root.write("/etc/galactic/node.json", "{}", 0o644).unwrap();
        let before = root.snapshot().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let tmp = root.path("/etc/galactic/.node.json.tmp.1");
        std::fs::write(&tmp, "x").unwrap();
        std::fs::remove_file(&tmp).unwrap();
        assert_eq!(
            before.changes(&root.snapshot().unwrap()),
            Vec::<String>::new()
        );
        root.write("/etc/galactic/node.json", "{}", 0o644).unwrap();
        assert_eq!(
            before.changes(&root.snapshot().unwrap()),
            ["etc/galactic/node.json"]
        );
        root.write("/etc/galactic/new", "", 0o600).unwrap();
        let later = root.snapshot().unwrap();
        assert!(before
            .changes(&later)
            .contains(&"etc/galactic/new".to_owned()));
        assert_eq!(
            later.get("/etc/galactic/new").and_then(Entry::mode),
            Some(0o600)
        );
    }
}
