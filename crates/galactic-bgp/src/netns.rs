//! Whether a container's network namespace still exists, for any path a runtime passes
//! (`/proc/<pid>/ns/net`, `/run/netns/x`, `/var/run/netns/x`, a runtime's own bind mount).
//!
//! A namespace is alive when the path resolves to a file on nsfs. A path that does not exist, or
//! a leftover plain file whose bind mount is gone, is dead. Any other error (e.g. permission) is
//! treated as alive: a record is only pruned when its namespace is known to be gone. A recycled
//! pid can make a `/proc/<pid>/ns/net` record look alive; it is then pruned later.

use nix::sys::statfs::{statfs, NSFS_MAGIC};
use std::path::Path;

/// Whether the network namespace at `path` exists.
pub fn alive(path: &str) -> bool {
    if path.is_empty() {
        return false;
    }
    match statfs(Path::new(path)) {
        Ok(fs) => fs.filesystem_type() == NSFS_MAGIC,
        Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_paths_of_live_processes_are_alive() {
        assert!(alive(&format!("/proc/{}/ns/net", std::process::id())));
        assert!(alive("/proc/self/ns/net"));
    }

    #[test]
    fn missing_paths_and_plain_files_are_dead() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("net");
        std::fs::write(&plain, "").unwrap();
        assert!(!alive(&plain.display().to_string()));
        assert!(!alive("/run/netns/galactic-test-does-not-exist"));
        assert!(!alive("/proc/999999999/ns/net"));
        assert!(!alive(""));
    }
}
