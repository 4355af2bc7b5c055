//! Removals that failed in DEL, and their retry without GC.
//!
//! The masters' DEL never fails on datapath state ([`super::unregister_or_defer`]), and most
//! runtimes never send a CNI GC, so a removal that failed there is recorded and retried by the
//! next registration or removal on the node, whichever comes first:
//!
//! ```text
//! <state_dir>/bpf/deferred/
//!   G{vpc}{att}H.json   {"hostIfname","error"}: the registration of that interface still has
//!                       rows and a record to remove (written under the registry lock)
//! ```
//! With nothing deferred the retry costs one `readdir` of a missing or empty directory. A
//! registration of the same interface supersedes its marker: the retry runs first (the old rows
//! go by the old record), and if it fails again the new registration's record replaces the old
//! one, whose rows are then left to GC's orphan sweep.

use super::records::{io, write_json};
use super::removal::unregister_locked;
use super::BpfError;
use crate::state;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One deferred removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deferral {
    /// The host interface whose registration is still to be removed.
    pub host_ifname: String,
    /// Why the removal failed last (for the operator).
    pub error: String,
}

pub(super) fn deferred_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("bpf").join("deferred")
}

fn marker_path(state_dir: &Path, host_ifname: &str) -> PathBuf {
    deferred_dir(state_dir).join(format!("{host_ifname}.json"))
}

/// Records that `host_ifname`'s removal failed with `error` (the registry lock is held).
pub(super) fn defer_locked(
    state_dir: &Path,
    host_ifname: &str,
    error: &str,
) -> Result<(), BpfError> {
    let marker = Deferral {
        host_ifname: host_ifname.to_owned(),
        error: error.to_owned(),
    };
    write_json(&marker_path(state_dir, host_ifname), &marker)
}

/// The host interfaces whose removal is deferred (none when the directory is missing).
pub fn deferred(state_dir: &Path) -> Result<Vec<String>, BpfError> {
    let dir = deferred_dir(state_dir);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(format!("list {}", dir.display()))(e)),
    };
    let mut hosts: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json").map(str::to_owned)
        })
        .collect();
    hosts.sort();
    Ok(hosts)
}

/// Retries every deferred removal (the registry lock is held); a removal that fails again keeps
/// its marker with the new error. Returns the interfaces whose rows went. Failures are logged,
/// never returned: the caller's own registration or removal is what its caller asked for.
pub(super) fn retry_locked(state_dir: &Path) -> Vec<String> {
    let hosts = match deferred(state_dir) {
        Ok(hosts) => hosts,
        Err(e) => {
            warn_retry("list the deferred eBPF removals", "", &e);
            return Vec::new();
        }
    };
    let mut removed = Vec::new();
    for host in hosts {
        match unregister_locked(state_dir, &host) {
            Ok(_) => match state::remove(&marker_path(state_dir, &host)) {
                Ok(()) => removed.push(host),
                Err(e) => warn_retry("remove a deferral marker", &host, &BpfError::from(e)),
            },
            Err(e) => {
                warn_retry("retry a deferred eBPF removal", &host, &e);
                // Best effort: the marker stays either way; only its message may be older.
                let _ = defer_locked(state_dir, &host, &e.to_string());
            }
        }
    }
    if !removed.is_empty() {
        crate::log::info(
            "eBPF datapath: deferred removals done",
            serde_json::json!({"hostIfnames": removed}),
        );
    }
    removed
}

/// Drops `host_ifname`'s marker: its registration is being replaced (the retry ran first).
pub(super) fn supersede_locked(state_dir: &Path, host_ifname: &str) {
    let path = marker_path(state_dir, host_ifname);
    if path.exists() {
        crate::log::warn(
            "eBPF datapath: a deferred removal is superseded by a new registration of the interface; GC sweeps what the old one left",
            serde_json::json!({"hostIfname": host_ifname}),
        );
        if let Err(e) = state::remove(&path) {
            warn_retry("remove a deferral marker", host_ifname, &BpfError::from(e));
        }
    }
}

fn warn_retry(what: &str, host: &str, e: &BpfError) {
    crate::log::warn(
        "eBPF datapath: deferred removal",
        serde_json::json!({"step": what, "hostIfname": host, "err": e.to_string()}),
    );
}
