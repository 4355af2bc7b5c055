//! A node's return to the Go chain (`galactic-ipam write-markers`): every live allocation of the
//! store written as upstream marker files, so the Go allocator never hands out an address a live
//! pod holds.
//!
//! The Go allocator (upstream §5.4) walks its candidates in order and takes the first whose text
//! is not a marker name in the pool's directory. Its candidates: IPv6, the pool's network address
//! stepped by 2^24 (byte 12 counts, with carry), each `<address>/96`; IPv4, every address of the
//! pool, bare. Our leases are not on that walk (an IPv6 endpoint is `<slot>+1`, and a slot of a
//! /64 pool is a whole /96), so one marker per lease would not do: every candidate inside a
//! lease's span gets a marker holding the lease's container id (256 for a /96 slot, 1 for a /104
//! slot of a /96 pool or an IPv4 address). A span with more candidates than [`MAX_PER_LEASE`], a
//! pool the Go allocator refuses (IPv6 longer than /96), or an imported lease no known pool
//! contains is reported, never silently left out.
//!
//! Writing takes each pool directory's `lock` (the Go allocator's flock target), and a marker
//! already there is kept: with the same container id it is counted as present, with another it
//! is a conflict (a live address the Go chain holds for someone else) and reported.

use crate::legacy::{marker_name, pool_dir_name, pool_of_dir_name};
use crate::pool::{value_of, Pool};
use crate::store::Lease;
use galactic_core::ip::Family;
use ipnetwork::IpNetwork;
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most markers one lease may need (a /96 slot of a pool of /88 or wider needs 256).
pub const MAX_PER_LEASE: u128 = 256;
/// The Go allocator's IPv6 step: byte 12 of the address counts.
const GO_STEP_V6: u128 = 1 << 24;
/// How long to wait for a pool directory's lock (a Go allocation holds it for milliseconds).
const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// One marker to write: `<root>/<pool dir>/<name>`, content the container id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The Go pool the address is in.
    pub pool: IpNetwork,
    /// The marker's file name.
    pub name: String,
    /// Who holds the address.
    pub container_id: String,
}

/// What `write-markers` did.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Markers written.
    pub written: usize,
    /// Markers already there with the same container id.
    pub present: usize,
    /// Markers already there naming another container.
    pub conflicts: Vec<String>,
    /// Leases that could not be written as markers, and why.
    pub unplaced: Vec<String>,
}

impl Report {
    /// Whether the Go allocator will skip every live address.
    pub fn complete(&self) -> bool {
        self.conflicts.is_empty() && self.unplaced.is_empty()
    }
}

/// Why markers could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    /// A pool directory or marker could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A pool directory's lock was not taken.
    #[error(transparent)]
    Lock(#[from] galactic_core::lockfile::LockError),
    /// The shared atomic writer failed.
    #[error(transparent)]
    State(#[from] galactic_core::state::StateError),
}

/// The markers for `leases` (container id and lease), and what cannot be written. Imported
/// leases (no pool recorded) go to the known pool that contains them: the pools of native leases
/// and `existing` (the pool directories already under the marker root).
pub fn plan(leases: &[(String, Lease)], existing: &[IpNetwork]) -> (Vec<Marker>, Vec<String>) {
    let mut known: Vec<IpNetwork> = leases
        .iter()
        .filter_map(|(_, lease)| lease.pool.as_deref().and_then(Pool::network_of_key))
        .chain(existing.iter().copied())
        .collect();
    known.sort();
    known.dedup();
    let mut markers = Vec::new();
    let mut unplaced = Vec::new();
    for (container_id, lease) in leases {
        match markers_of(container_id, lease, &known) {
            Ok(found) => markers.extend(found),
            Err(why) => unplaced.push(format!("{} of {container_id}: {why}", lease.address)),
        }
    }
    (markers, unplaced)
}

fn markers_of(
    container_id: &str,
    lease: &Lease,
    known: &[IpNetwork],
) -> Result<Vec<Marker>, String> {
    let pool = match lease.pool.as_deref() {
        Some(key) => Pool::network_of_key(key).ok_or("its pool key does not parse")?,
        None => *known
            .iter()
            .find(|pool| pool.contains(lease.address.ip()))
            .ok_or("imported without a pool, and no known pool contains it")?,
    };
    if lease.span.family == Family::V6 && pool.prefix() > 96 {
        return Err(format!(
            "its pool {pool} is longer than /96, which the Go allocator refuses"
        ));
    }
    let candidates = go_candidates(pool, lease)?;
    Ok(candidates
        .map(|value| Marker {
            pool,
            name: marker_name(lease.span.family.addr(value)),
            container_id: container_id.to_owned(),
        })
        .collect())
}

/// The Go allocator's candidates inside `lease`'s span, at most [`MAX_PER_LEASE`].
fn go_candidates(pool: IpNetwork, lease: &Lease) -> Result<impl Iterator<Item = u128>, String> {
    let step = match lease.span.family {
        Family::V6 => GO_STEP_V6,
        Family::V4 => 1,
    };
    let base = value_of(pool.network());
    let span = lease.span;
    // The first candidate at or after the span's start (the span lies inside the pool).
    let offset = span.first.saturating_sub(base).div_ceil(step) * step;
    let first = base + offset;
    let count = if first > span.last {
        0
    } else {
        (span.last - first) / step + 1
    };
    if count > MAX_PER_LEASE {
        return Err(format!(
            "its prefix holds {count} of the Go allocator's candidates (at most {MAX_PER_LEASE} are written)"
        ));
    }
    Ok((0..count).map(move |i| first + i * step))
}

/// The pools that have a directory under `root` already (none when `root` does not exist).
pub fn existing_pools(root: &Path) -> Result<Vec<IpNetwork>, RollbackError> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RollbackError::Io {
                what: "read the marker root",
                path: root.to_owned(),
                source,
            })
        }
    };
    Ok(entries
        .flatten()
        .filter_map(|entry| pool_of_dir_name(&entry.file_name().to_string_lossy()))
        .collect())
}

/// Writes `markers` under `root`, one pool directory at a time under its lock.
pub fn write(root: &Path, markers: &[Marker], report: &mut Report) -> Result<(), RollbackError> {
    let mut by_pool: BTreeMap<IpNetwork, Vec<&Marker>> = BTreeMap::new();
    for marker in markers {
        by_pool.entry(marker.pool).or_default().push(marker);
    }
    for (pool, markers) in by_pool {
        let dir = root.join(pool_dir_name(pool));
        create_private_dir(&dir)?;
        let _lock = galactic_core::lockfile::acquire(&dir.join("lock"), LOCK_TIMEOUT)?;
        for marker in markers {
            write_marker(&dir, marker, report)?;
        }
        // The directory is the Go allocator's: the shared writer's staging goes with the write.
        galactic_core::state::remove_staging_if_empty(&dir)?;
    }
    Ok(())
}

/// Upstream's directories are 0700.
fn create_private_dir(dir: &Path) -> Result<(), RollbackError> {
    let io = |what| {
        move |source| RollbackError::Io {
            what,
            path: dir.to_owned(),
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("create the pool directory"))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io("set the mode of the pool directory"))
}

fn write_marker(dir: &Path, marker: &Marker, report: &mut Report) -> Result<(), RollbackError> {
    let path = dir.join(&marker.name);
    match std::fs::read_to_string(&path) {
        Ok(holder) if holder.trim() == marker.container_id => report.present += 1,
        Ok(holder) => report.conflicts.push(format!(
            "{} holds container '{}'; the store gives it to '{}'",
            path.display(),
            holder.trim(),
            marker.container_id
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            galactic_core::state::write_bytes(&path, marker.container_id.as_bytes())?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(
                |source| RollbackError::Io {
                    what: "set the mode of marker",
                    path: path.clone(),
                    source,
                },
            )?;
            report.written += 1;
        }
        Err(source) => {
            return Err(RollbackError::Io {
                what: "read marker",
                path,
                source,
            })
        }
    }
    Ok(())
}
