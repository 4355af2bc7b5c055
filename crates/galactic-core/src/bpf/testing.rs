//! A private bpffs for privileged tests: mounted on a temporary directory, unmounted (lazily)
//! and removed on drop. The machine's `/sys/fs/bpf` is never touched.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A bpffs instance of its own (each bpf mount is a separate filesystem).
pub struct PrivateBpffs {
    dir: tempfile::TempDir,
}

impl PrivateBpffs {
    /// Mounts a fresh bpffs on a new temporary directory. Panics when that is impossible (the
    /// caller checked `privileged` first).
    pub fn mount() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("galactic-bpffs-")
            .tempdir()
            .expect("create a mount point");
        let out = Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount -t bpf: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { dir }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The pin directory the tests use inside it (like `/sys/fs/bpf/galactic`).
    pub fn pin_dir(&self) -> PathBuf {
        self.dir.path().join("galactic")
    }
}

impl Drop for PrivateBpffs {
    fn drop(&mut self) {
        // Lazy: a pinned object still open elsewhere must not keep the mount (and the test's
        // temporary directory) alive.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .output();
    }
}
