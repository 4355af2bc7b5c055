//! A small disk for full-disk tests: a size-limited tmpfs mounted on a directory, filled on
//! demand and unmounted (lazily) on drop. Nothing of the machine's own filesystems is touched.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a fixed size on a directory.
pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (mount syntax: `64k`, `1m`) on `dir` (created if missing).
    /// Panics when that is impossible (the caller checked `privileged` first).
    pub fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).expect("create the mount point");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount a {size} tmpfs on {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            dir: dir.to_owned(),
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Fills every free byte (a filler file grown until the kernel says the disk is full).
    pub fn fill(&self) {
        let mut filler = std::fs::File::create(self.filler()).expect("create the filler");
        let block = [0u8; 4096];
        while filler.write_all(&block).is_ok() {}
        // Byte by byte for the last partial block.
        while filler.write_all(&[0]).is_ok() {}
        let _ = filler.sync_all();
    }

    /// Frees what [`SmallDisk::fill`] took.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.filler());
    }

    fn filler(&self) -> PathBuf {
        self.dir.join(".filler")
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).output();
    }
}
