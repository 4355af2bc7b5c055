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

/// Wires `host` to `fabric` the way a node reaches its SRv6 fabric: `up0`
/// (02:00:00:00:0a:01, 2001:db8:f::2/64) in `host`, its veth peer `fab0` (02:00:00:00:0b:01,
/// 2001:db8:f::1/64) in `fabric`, a route to 2001:db8:5::/64 via the fabric end, and a permanent
/// neighbour entry for it (so its MAC is known without traffic).
pub fn uplink(host: &crate::privileged::TestNetns, fabric: &crate::privileged::TestNetns) {
    host.ip(&[
        "link",
        "add",
        "up0",
        "address",
        "02:00:00:00:0a:01",
        "type",
        "veth",
        "peer",
        "name",
        "fab0",
        "address",
        "02:00:00:00:0b:01",
        "netns",
        fabric.name(),
    ]);
    for cmd in [
        "link set up0 up",
        "-6 addr add 2001:db8:f::2/64 dev up0 nodad",
        "-6 route add 2001:db8:5::/64 via 2001:db8:f::1 dev up0",
        "-6 neigh replace 2001:db8:f::1 lladdr 02:00:00:00:0b:01 dev up0 nud permanent",
    ] {
        host.ip(&cmd.split_whitespace().collect::<Vec<_>>());
    }
    for cmd in [
        "link set fab0 up",
        "-6 addr add 2001:db8:f::1/64 dev fab0 nodad",
    ] {
        fabric.ip(&cmd.split_whitespace().collect::<Vec<_>>());
    }
}
