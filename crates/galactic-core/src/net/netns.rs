//! Network-namespace handles.
//!
//! `setns(2)` changes the namespace of the calling *thread*. Doing it on a thread that goes back to
//! a pool (or an async runtime's worker) would leave later work in the wrong namespace, so every
//! switch here happens on a dedicated thread that is joined before the call returns (the rule of
//! the Go CNI `pkg/ns`).

use super::NetError;
use nix::sched::{setns, unshare, CloneFlags};
use std::fs::File;
use std::path::{Path, PathBuf};

/// An open network namespace.
#[derive(Debug)]
pub struct Netns {
    file: File,
    path: PathBuf,
}

impl Netns {
    /// The namespace of the calling thread (the plugin's "host").
    pub fn current() -> Result<Self, NetError> {
        Self::open(Path::new("/proc/thread-self/ns/net"))
    }

    /// Opens the namespace at `path` (`/var/run/netns/x`, `/proc/<pid>/ns/net`, …).
    pub fn open(path: &Path) -> Result<Self, NetError> {
        let file = File::open(path).map_err(|source| NetError::Io {
            what: format!("open network namespace {}", path.display()),
            source,
        })?;
        Ok(Self {
            file,
            path: path.to_owned(),
        })
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file (for `IFLA_NET_NS_FD` and `setns`).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Whether this is the same namespace as `other` (same inode and device).
    pub fn same_as(&self, other: &Netns) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), other.file.metadata()) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            _ => false,
        }
    }
}

/// Runs `work` inside `ns` on a fresh thread, joined before returning.
pub fn run_in<T: Send>(ns: &Netns, work: impl FnOnce() -> T + Send) -> Result<T, NetError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                setns(ns.file(), CloneFlags::CLONE_NEWNET).map_err(|e| NetError::Io {
                    what: format!("enter network namespace {}", ns.path().display()),
                    source: e.into(),
                })?;
                Ok(work())
            })
            .join()
            .map_err(|_| NetError::Conflict("a namespace worker thread panicked".into()))?
    })
}

/// Runs `work` in a new, empty network namespace of its own on a fresh thread, joined before
/// returning; the namespace, and whatever `work` created in it, is gone with the thread. For
/// probing what the kernel can do without leaving anything on the node (a first VRF device adds
/// the node's l3mdev rules for good). Needs `CAP_SYS_ADMIN`, as every plugin run has.
pub fn run_in_scratch<T: Send>(work: impl FnOnce() -> T + Send) -> Result<T, NetError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                unshare(CloneFlags::CLONE_NEWNET).map_err(|e| NetError::Io {
                    what: "create a scratch network namespace".into(),
                    source: e.into(),
                })?;
                Ok(work())
            })
            .join()
            .map_err(|_| NetError::Conflict("a namespace worker thread panicked".into()))?
    })
}
