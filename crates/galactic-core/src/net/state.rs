//! Node-local JSON state files (routing domains, attachment records): read, atomic write,
//! remove and list, with errors that say which file.

use super::NetError;
use serde::{Deserialize, Serialize};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Reads `path` as JSON; `None` when it does not exist.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, NetError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| NetError::Io {
                what: format!("parse {}", path.display()),
                source: std::io::Error::other(e),
            }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(NetError::Io {
            what: format!("read {}", path.display()),
            source,
        }),
    }
}

/// Writes JSON through a temporary file and a rename, so readers never see a torn record.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<(), NetError> {
    let io = |source| NetError::Io {
        what: format!("write {}", path.display()),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text = serde_json::to_vec_pretty(value).map_err(|e| io(std::io::Error::other(e)))?;
    // Named by pid so that concurrent writers never share one; a killed writer's is swept by GC
    // (`sweep_temporaries`).
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Removes the temporary files of [`write_json_atomic`] (`<name>.tmp.<pid>`) that a process
/// killed between its write and its rename left in `dir`, when that process is gone. A pid that
/// was reused by a live process keeps its file until a later sweep. Returns how many went.
pub fn sweep_temporaries(dir: &Path) -> Result<usize, NetError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(NetError::Io {
                what: format!("list {}", dir.display()),
                source,
            })
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_string_lossy()
            .rsplit_once(".tmp.")
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            remove(&entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Removes `path`; a missing file is success.
pub fn remove(path: &Path) -> Result<(), NetError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(NetError::Io {
            what: format!("remove {}", path.display()),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// The `<prefix>*.json` files of `dir` (none when the directory does not exist).
pub fn json_files(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>, NetError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(NetError::Io {
                what: format!("list {}", dir.display()),
                source,
            })
        }
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
mod sweep_tests {
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
}
