//! Files that another program reads by name from a directory of its own (a Kata shim's DAN
//! directory, the datapath container's RA records), replaced atomically.
//!
//! ```text
//! <dir>/
//!   <name>                     the file (mode 0600; the directory 0700, as upstream's)
//!   .galactic-tmp/<name>.tmp.<pid>   a write in progress, renamed into <dir> when complete
//! ```
//! The temporary is in a subdirectory, not beside the file: upstream's RA reader parses every
//! file of its directory, so a temporary torn by a killed writer would stop its listing, while it
//! skips directories. The subdirectory is on the same file system, so the rename is atomic and a
//! reader sees the old file or the new one. A killed writer's temporary goes with the DEL of its
//! attachment ([`remove`], [`settle`]: whether or not the file came to exist) and with GC
//! ([`sweep`]), once no process has the writer's pid (`galactic_core::state`'s rule).

use galactic_core::state::StateError;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// The temporaries' subdirectory.
pub const STAGING: &str = ".galactic-tmp";

/// A failed `op` on `path` (a full disk is told apart by the caller: "try again later").
fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StateError {
    let path = path.to_owned();
    move |source| StateError::Io { op, path, source }
}

/// Writes `bytes` to `<dir>/<name>` through a temporary and a rename, after removing what
/// killed writers of it left ([`settle`]).
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), StateError> {
    let staging = dir.join(STAGING);
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&staging)
        .map_err(io("create", &staging))?;
    settle(dir, name)?;
    let tmp = staging.join(format!("{name}.tmp.{}", std::process::id()));
    let path = dir.join(name);
    let renamed = write_private(&tmp, bytes)
        .map_err(io("write", &tmp))
        .and_then(|()| galactic_core::state::before_rename(&path, &tmp))
        .and_then(|()| std::fs::rename(&tmp, &path).map_err(io("write", &path)));
    if renamed.is_err() {
        // Best effort: one that cannot be removed now goes with the DEL or GC.
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

/// Creates (or truncates) `tmp` with mode 0600 and writes `bytes`.
fn write_private(tmp: &Path, bytes: &[u8]) -> std::io::Result<()> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(tmp)
        .and_then(|mut f| f.write_all(bytes))
}

/// Removes `<dir>/<name>` and the temporaries of it that killed writers left ([`settle`]); a
/// missing file is success.
pub fn remove(dir: &Path, name: &str) -> Result<(), StateError> {
    settle(dir, name)?;
    let path = dir.join(name);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(io("remove", &path)(e)),
        _ => Ok(()),
    }
}

/// Removes the temporaries of `<dir>/<name>` whose writer is gone, whether or not the file
/// exists: the DEL of an attachment whose ADD was killed before its rename. Returns how many.
pub fn settle(dir: &Path, name: &str) -> Result<usize, StateError> {
    galactic_core::state::remove_dead_temporaries_named(&dir.join(STAGING), name)
}

/// Removes the temporaries of `dir` whose writer is gone (GC).
pub fn sweep(dir: &Path) -> Result<usize, StateError> {
    galactic_core::state::sweep_temporaries(&dir.join(STAGING))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_write_replaces_the_file_private_and_leaves_no_temporary() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ra");
        write(&dir, "G1H", b"one").unwrap();
        write(&dir, "G1H", b"two").unwrap();
        assert_eq!(std::fs::read(dir.join("G1H")).unwrap(), b"two");
        assert_eq!((mode(&dir), mode(&dir.join("G1H"))), (0o700, 0o600));
        let staged: Vec<_> = std::fs::read_dir(dir.join(STAGING)).unwrap().collect();
        assert!(staged.is_empty(), "{staged:?}");
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            files.len(),
            2,
            "the file and the staging directory: {files:?}"
        );
        remove(&dir, "G1H").unwrap();
        remove(&dir, "G1H").unwrap();
        assert!(!dir.join("G1H").exists());
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_and_a_killed_ones_is_swept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("dans");
        // The target is a directory: the rename fails after the temporary was written.
        std::fs::create_dir_all(dir.join("busy.json/inner")).unwrap();
        assert!(write(&dir, "busy.json", b"{}").is_err());
        assert_eq!(std::fs::read_dir(dir.join(STAGING)).unwrap().count(), 0);
        // A writer killed between its write and its rename (no process has this pid).
        std::fs::write(dir.join(STAGING).join("a.json.tmp.4294967295"), b"{").unwrap();
        assert_eq!(sweep(&dir).unwrap(), 1);
        assert_eq!(sweep(&root.path().join("absent")).unwrap(), 0);
    }
}
