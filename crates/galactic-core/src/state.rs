//! Node-local state files: one reader and one atomic writer for every plugin's records.
//!
//! A file is replaced through a temporary file in the same directory and a rename, so a reader
//! sees the old or the new content, never a torn one, even when the writer is SIGKILLed. The
//! temporary is `<stem>.tmp.<pid>`:
//! - every writer of a file holds the lock that owns that file (each record kind has one), so a
//!   temporary of the file found by the next writer was left by a writer that was killed between
//!   its write and its rename: [`write_json`] removes it first, and nothing accumulates;
//! - a temporary whose process is gone is removed by [`sweep_temporaries`] (GC), also when the
//!   file it was for is never written again.

use serde::{de::DeserializeOwned, Serialize};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// A state file that cannot be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file-system operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`, `remove`, `list`).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not the JSON document it should be.
    #[error("parse {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

impl StateError {
    fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Self + 'a {
        move |source| Self::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }

    /// Whether the disk (or the quota) is full: a caller that cannot record a release says
    /// "try again later" rather than forgetting it.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Self::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)))
    }
}

/// Reads `path` as JSON; `None` when it does not exist.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StateError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| StateError::Parse {
                path: path.to_owned(),
                source,
            }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StateError::io("read", path)(source)),
    }
}

/// Writes `value` as JSON to `path` through a temporary file and a rename (creating the
/// directory). The caller holds the lock of `path`: temporaries of `path` left by killed
/// writers are removed first.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), StateError> {
    let text = serde_json::to_vec_pretty(value)
        .map_err(|e| StateError::io("write", path)(std::io::Error::other(e)))?;
    write_bytes(path, &text)
}

/// [`write_json`] for bytes already encoded.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(StateError::io("write", path))?;
    }
    remove_temporaries(path)?;
    let tmp = temporary(path, std::process::id());
    std::fs::write(&tmp, bytes).map_err(StateError::io("write", path))?;
    std::fs::rename(&tmp, path).map_err(|source| {
        // Best effort: a temporary that cannot be removed now goes with the next write or GC.
        let _ = std::fs::remove_file(&tmp);
        StateError::io("write", path)(source)
    })
}

/// The temporary a writer with `pid` uses for `path`: `<stem>.tmp.<pid>`.
fn temporary(path: &Path, pid: u32) -> PathBuf {
    path.with_extension(format!("tmp.{pid}"))
}

/// The pid of a temporary's writer, when `name` is a temporary of the file with `stem` (any
/// file when `stem` is `None`).
fn temporary_pid(name: &str, stem: Option<&str>) -> Option<u32> {
    let (file_stem, pid) = name.rsplit_once(".tmp.")?;
    let pid = pid.parse().ok()?;
    match stem {
        Some(stem) if stem != file_stem => None,
        _ => Some(pid),
    }
}

/// Removes every temporary of `path` (the caller holds its lock, so none is a live writer's).
pub fn remove_temporaries(path: &Path) -> Result<usize, StateError> {
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) else {
        return Ok(0);
    };
    let stem = stem.to_string_lossy();
    remove_matching(dir, |name| temporary_pid(name, Some(&stem)).is_some())
}

/// Removes the temporaries in `dir` whose writer process is gone (GC: it holds no file's lock,
/// so a live writer's temporary stays). A pid reused by a live process keeps its file until a
/// later sweep or the next write of that file. Returns how many went.
pub fn sweep_temporaries(dir: &Path) -> Result<usize, StateError> {
    remove_matching(dir, |name| {
        temporary_pid(name, None).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
    })
}

fn remove_matching(dir: &Path, stale: impl Fn(&str) -> bool) -> Result<usize, StateError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(source) => return Err(StateError::io("list", dir)(source)),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        if stale(&entry.file_name().to_string_lossy()) {
            unlink(&entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Whether a file can be created in `dir` (created when missing): STATUS of every plugin that
/// records state there.
pub fn probe_writable(dir: &Path) -> Result<(), StateError> {
    let probe = dir.join(format!(".status-probe.{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&probe, b"ok"))
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(StateError::io("write", dir))
}

/// Removes `path` and the temporaries of it that killed writers left (the caller holds its
/// lock, as for a write): a state file that is never written again, such as the record of an
/// attachment whose ADD was killed, leaves nothing behind. A missing file is success.
pub fn remove(path: &Path) -> Result<(), StateError> {
    remove_temporaries(path)?;
    unlink(path)
}

/// Removes one file; a missing file is success.
fn unlink(path: &Path) -> Result<(), StateError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(StateError::io("remove", path)(e)),
        _ => Ok(()),
    }
}

/// The `<prefix>*.json` files of `dir` (none when the directory does not exist).
pub fn json_files(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>, StateError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StateError::io("list", dir)(source)),
    };
    Ok(entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(prefix) && name.ends_with(".json")
        })
        .map(|e| e.path())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_temporaries_of_dead_writers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let touch = |name: &str| std::fs::write(dir.path().join(name), b"{}").unwrap();
        // No process has this pid (above the kernel's pid_max limit).
        touch("vpc-1.tmp.4294967295");
        touch("G1H.json.tmp.4294967295");
        touch(&format!("vpc-2.tmp.{}", std::process::id()));
        touch("vpc-1.json");
        touch("notes.tmp.txt");
        assert_eq!(sweep_temporaries(dir.path()).unwrap(), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "notes.tmp.txt".to_owned(),
                "vpc-1.json".to_owned(),
                format!("vpc-2.tmp.{}", std::process::id()),
            ]
        );
        assert_eq!(sweep_temporaries(&dir.path().join("absent")).unwrap(), 0);
    }

    #[test]
    fn a_write_replaces_the_file_and_removes_what_killed_writers_of_it_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/G1H.json");
        write_json(&path, &serde_json::json!({"a": 1})).unwrap();
        // A killed writer of this file (pid 1 is alive: liveness does not matter under the
        // lock), and one of another file, which this write leaves alone.
        std::fs::write(dir.path().join("sub/G1H.tmp.1"), b"{").unwrap();
        std::fs::write(dir.path().join("sub/G2H.tmp.1"), b"{").unwrap();
        write_json(&path, &serde_json::json!({"a": 2})).unwrap();
        assert_eq!(
            read_json::<serde_json::Value>(&path).unwrap(),
            Some(serde_json::json!({"a": 2}))
        );
        assert!(!dir.path().join("sub/G1H.tmp.1").exists());
        assert!(dir.path().join("sub/G2H.tmp.1").exists());
        assert!(
            read_json::<serde_json::Value>(&dir.path().join("absent.json"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn removing_a_file_removes_what_killed_writers_of_it_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("G1H.json");
        // A record whose writer was killed before its rename: the file itself never appeared.
        std::fs::write(dir.path().join("G1H.tmp.77"), b"{").unwrap();
        std::fs::write(dir.path().join("G2H.tmp.77"), b"{").unwrap();
        remove(&path).unwrap();
        assert!(!dir.path().join("G1H.tmp.77").exists());
        assert!(
            dir.path().join("G2H.tmp.77").exists(),
            "another file's stays"
        );
    }
}
