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
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
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
