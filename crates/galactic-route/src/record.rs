//! Ownership records: the termination routes this plugin installed on this node, per VPC.
//!
//! GC must never remove a route it did not install, and a table id can outlive its VPC (the
//! `table` backend hands a freed id to the next VPC). So ownership is recorded, not guessed from
//! the table: an entry names the exact route (destination, table, device *name*, gateway), and the
//! device name `G{vpc:9}{att:3}H` itself belongs to the VPC, so an entry can never match a route
//! another VPC installed through its own interfaces, even in a reused table.
//!
//! ```text
//! <state_dir>/routes/
//!   vpc-<hex>.lock   flock: serialises ADD and GC of the VPC's termination routes (bounded wait)
//!   vpc-<hex>.json   {"vpc": "A", "routes": [{"dst": "198.51.100.0/24", "table": 1000,
//!                     "dev": "G00000000A001H", "gateway": "10.66.0.2", "onlink": false,
//!                     "network": "tenant-a", "containerId": "…", "ifname": "eth0"}]}
//! ```
//! ADD writes its entries *before* it installs the routes (an intent log: a crash in between
//! leaves an entry for a route that may not exist, which GC drops; never a route nobody owns).
//! Files are replaced atomically (temporary file + rename), so readers never see a torn record.
//! They are not fsynced: after a power loss the kernel's routes are gone as well.

use crate::error::RouteError;
use galactic_core::ident::VpcId;
use galactic_core::lockfile::{self, LockGuard};
use galactic_core::net::domain::LOCK_TIMEOUT;
use galactic_core::net::netlink::RouteSpec;
use galactic_core::state;
use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The file work of the records done by this thread so far: records read, records written
/// (or removed) and listings of the records directory. Deterministic, unlike times: the cost
/// guards compare it across node sizes (GC reads each record once and rewrites only those that
/// change).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileWork {
    /// Records read ([`Ledger::get`]).
    pub reads: u64,
    /// Records written or removed ([`Ledger::put`]).
    pub writes: u64,
    /// Listings of the records directory.
    pub listings: u64,
}

impl FileWork {
    /// This thread's work so far.
    pub fn now() -> Self {
        WORK.with(Cell::get)
    }

    /// The work done since `earlier`.
    pub fn since(earlier: Self) -> Self {
        let now = Self::now();
        Self {
            reads: now.reads - earlier.reads,
            writes: now.writes - earlier.writes,
            listings: now.listings - earlier.listings,
        }
    }

    fn count(add: impl FnOnce(&mut Self)) {
        WORK.with(|w| {
            let mut work = w.get();
            add(&mut work);
            w.set(work);
        });
    }
}

thread_local! {
    static WORK: Cell<FileWork> = const { Cell::new(FileWork { reads: 0, writes: 0, listings: 0 }) };
}

/// One listing of the records directory: the VPCs with a record (by file name; a name that is
/// no VPC's is reported, it may own routes) and those with temporaries left by killed writers.
#[derive(Debug, Default)]
pub struct Listing {
    /// `vpc-<hex>.json` files, in name order.
    pub records: Vec<Result<VpcId, String>>,
    /// VPCs with a `vpc-<hex>.tmp.<pid>` file.
    pub temporaries: Vec<VpcId>,
}

/// The VPC whose hex id is `hex` (a record's file name part).
fn vpc_of_hex(hex: &str) -> Option<VpcId> {
    galactic_core::ident::hex_to_base62(hex).and_then(|b| VpcId::parse(&b).ok())
}

/// One termination route this plugin installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owned {
    /// Canonical destination.
    pub dst: IpNetwork,
    /// The VPC table at ADD time.
    pub table: u32,
    /// The host interface's name (indexes are reused; names carry the VPC and attachment).
    pub dev: String,
    /// Next hop, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Whether it was installed with `onlink` (informational).
    #[serde(default)]
    pub onlink: bool,
    /// Network name of the ADD that installed it (diagnostics).
    pub network: String,
    /// `CNI_CONTAINERID` of that ADD (diagnostics).
    pub container_id: String,
    /// `CNI_IFNAME` of that ADD (diagnostics).
    pub ifname: String,
}

impl Owned {
    /// Whether both entries describe the same kernel route.
    pub fn same_route(&self, other: &Owned) -> bool {
        self.dst == other.dst
            && self.table == other.table
            && self.dev == other.dev
            && self.gateway == other.gateway
    }
}

/// The record of one VPC.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VpcRoutes {
    /// The VPC id as configured.
    pub vpc: String,
    /// Routes owned by this plugin.
    pub routes: Vec<Owned>,
}

impl VpcRoutes {
    /// Whether the kernel route `spec` out of the interface named `dev` is recorded.
    pub fn owns(&self, spec: &RouteSpec, dev: &str) -> bool {
        self.routes.iter().any(|r| {
            r.dst == spec.dst && r.table == spec.table && r.dev == dev && r.gateway == spec.gateway
        })
    }
}

/// The records directory.
#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
}

impl Ledger {
    /// Records under `<state_dir>/routes`.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("routes"),
        }
    }

    fn path(&self, vpc: &VpcId) -> PathBuf {
        self.dir.join(format!("vpc-{}.json", vpc.hex()))
    }

    /// Removes the VPC's temporary record files left by writers that were killed between write
    /// and rename. Call with the lock held: then no live writer of the VPC has one open.
    pub fn remove_stale_temp(&self, vpc: &VpcId) {
        FileWork::count(|w| w.listings += 1);
        // Best effort: what cannot be removed now goes with the next write of the record.
        let _ = state::remove_temporaries(&self.path(vpc));
    }

    /// [`remove_stale_temp`](Self::remove_stale_temp) for every VPC with a temporary file,
    /// each under its lock (a VPC whose lock is busy is left for the next run). A VPC whose
    /// record was never written, or was emptied, has no record GC would visit. (GC lists the
    /// directory once for its records and temporaries alike: `sweep_listed_temp`.)
    #[cfg(test)]
    pub fn sweep_stale_temp(&self) {
        if let Ok(listing) = self.listing() {
            self.sweep_listed_temp(&listing.temporaries);
        }
    }

    /// [`sweep_stale_temp`](Self::sweep_stale_temp) for the VPCs of a listing already made,
    /// the temporaries releases before the staging directory left beside the records too.
    pub fn sweep_listed_temp(&self, vpcs: &[VpcId]) {
        for vpc in vpcs {
            if let Ok(_lock) = self.lock(vpc) {
                let _ = state::remove_all_temporaries(&self.path(vpc));
            }
        }
    }

    /// One listing of the records directory (empty when it does not exist).
    pub fn listing(&self) -> Result<Listing, RouteError> {
        FileWork::count(|w| w.listings += 1);
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing::default()),
            Err(source) => {
                return Err(state::StateError::Io {
                    op: "list",
                    path: self.dir.clone(),
                    source,
                }
                .into())
            }
        };
        let mut listing = Listing::default();
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        // The writes' temporaries, staged apart (`galactic_core::state`).
        if let Ok(staged) = std::fs::read_dir(state::staging(&self.dir)) {
            names.extend(
                staged
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            );
        }
        names.sort();
        for name in names {
            let Some(rest) = name.strip_prefix("vpc-") else {
                continue;
            };
            if let Some(hex) = rest.strip_suffix(".json") {
                listing
                    .records
                    .push(vpc_of_hex(hex).ok_or_else(|| format!("{name}: not a VPC's record")));
            } else if let Some((hex, _)) = rest.split_once(".tmp.") {
                if let Some(vpc) = vpc_of_hex(hex) {
                    if !listing.temporaries.contains(&vpc) {
                        listing.temporaries.push(vpc);
                    }
                }
            }
        }
        Ok(listing)
    }

    /// Takes the VPC's lock (bounded wait; a timeout is "try again later").
    pub fn lock(&self, vpc: &VpcId) -> Result<LockGuard, RouteError> {
        let path = self.dir.join(format!("vpc-{}.lock", vpc.hex()));
        Ok(lockfile::acquire(&path, LOCK_TIMEOUT)?)
    }

    /// The VPC's record (empty when there is none).
    pub fn get(&self, vpc: &VpcId) -> Result<VpcRoutes, RouteError> {
        let empty = VpcRoutes {
            vpc: vpc.raw().to_owned(),
            routes: Vec::new(),
        };
        FileWork::count(|w| w.reads += 1);
        Ok(state::read_json(&self.path(vpc))?.unwrap_or(empty))
    }

    /// Replaces the VPC's record; an empty one removes the file. Call with the lock held.
    pub fn put(&self, vpc: &VpcId, record: &VpcRoutes) -> Result<(), RouteError> {
        let path = self.path(vpc);
        FileWork::count(|w| w.writes += 1);
        if record.routes.is_empty() {
            return Ok(state::remove(&path)?);
        }
        // Compact: the record is read whole by every ADD, CHECK, DEL and GC of the VPC, and
        // indentation nearly doubles what they parse.
        let bytes = serde_json::to_vec(record).map_err(|e| state::StateError::Io {
            op: "write",
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        Ok(state::write_bytes(&path, &bytes)?)
    }

    /// Adds the entries not yet recorded; returns those it added. An entry recorded for the same
    /// route by another container passes to this one: the route goes out of the attachment's
    /// host interface, which the master gives one container at a time, so this container now
    /// holds it (and a late DEL of the previous one must not remove it). Call with the lock held.
    #[cfg(test)]
    pub fn add(&self, vpc: &VpcId, entries: &[Owned]) -> Result<Vec<Owned>, RouteError> {
        let mut record = self.get(vpc)?;
        self.add_to(vpc, &mut record, entries)
    }

    /// [`Ledger::add`] to `record`, the VPC's record as read under the lock still held: it is
    /// updated and written (only when it changed).
    pub fn add_to(
        &self,
        vpc: &VpcId,
        record: &mut VpcRoutes,
        entries: &[Owned],
    ) -> Result<Vec<Owned>, RouteError> {
        let mut added = Vec::new();
        let mut changed = false;
        for entry in entries {
            match record.routes.iter_mut().find(|r| r.same_route(entry)) {
                Some(held) if *held != *entry => {
                    *held = entry.clone();
                    changed = true;
                }
                Some(_) => {}
                None => {
                    record.routes.push(entry.clone());
                    added.push(entry.clone());
                    changed = true;
                }
            }
        }
        if changed {
            self.put(vpc, record)?;
        }
        Ok(added)
    }

    /// Removes the given entries (the undo of [`Ledger::add`]). Call with the lock held.
    pub fn remove(&self, vpc: &VpcId, entries: &[Owned]) -> Result<(), RouteError> {
        let mut record = self.get(vpc)?;
        record
            .routes
            .retain(|r| !entries.iter().any(|e| e.same_route(r)));
        self.put(vpc, &record)
    }

    /// The VPCs that have a record. A file that cannot be read is reported, not skipped
    /// silently: it may own routes.
    pub fn vpcs(&self) -> Result<Vec<Result<VpcId, String>>, RouteError> {
        let mut out = Vec::new();
        FileWork::count(|w| w.listings += 1);
        for path in state::json_files(&self.dir, "vpc-")? {
            FileWork::count(|w| w.reads += 1);
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push(match state::read_json::<VpcRoutes>(&path) {
                Ok(Some(r)) => VpcId::parse(&r.vpc).map_err(|e| format!("{name}: {e}")),
                Ok(None) => continue,
                Err(e) => Err(e.to_string()),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dst: &str, dev: &str, gateway: Option<&str>) -> Owned {
        Owned {
            dst: dst.parse().unwrap(),
            table: 1000,
            dev: dev.into(),
            gateway: gateway.map(|g| g.parse().unwrap()),
            onlink: false,
            network: "n".into(),
            container_id: "c".into(),
            ifname: "eth0".into(),
        }
    }

    #[test]
    fn add_is_idempotent_and_remove_undoes_only_what_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        let vpc = VpcId::parse("A").unwrap();
        let _lock = ledger.lock(&vpc).unwrap();
        let a = entry("198.51.100.0/24", "G00000000A001H", None);
        let b = entry("2001:db8::/64", "G00000000A001H", Some("fd66::2"));
        assert_eq!(
            ledger.add(&vpc, std::slice::from_ref(&a)).unwrap(),
            vec![a.clone()]
        );
        assert_eq!(
            ledger.add(&vpc, &[a.clone(), b.clone()]).unwrap(),
            vec![b.clone()],
            "a retried ADD adds only what is new"
        );
        assert_eq!(ledger.get(&vpc).unwrap().routes, vec![a.clone(), b.clone()]);
        ledger.remove(&vpc, &[b]).unwrap();
        assert_eq!(ledger.get(&vpc).unwrap().routes, vec![a.clone()]);
        assert_eq!(ledger.vpcs().unwrap(), vec![Ok(vpc.clone())]);
        ledger.remove(&vpc, &[a]).unwrap();
        assert!(
            !dir.path().join("routes/vpc-a.json").exists(),
            "an empty record is removed"
        );
        assert!(ledger.vpcs().unwrap().is_empty());
    }

    /// Found by the crash campaign: a writer killed between write and rename left
    /// `vpc-<hex>.tmp.<pid>` behind for good, also once the VPC had no record left.
    #[test]
    fn temporary_files_of_killed_writers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path());
        let routes = dir.path().join("routes");
        std::fs::create_dir_all(&routes).unwrap();
        // Staged (where writers put them) and beside the records (where a release before the
        // staging directory did).
        std::fs::create_dir_all(state::staging(&routes)).unwrap();
        std::fs::write(state::staging(&routes).join("vpc-2.tmp.4242"), b"{\"vpc\":").unwrap();
        std::fs::write(routes.join("vpc-3.tmp.4243"), b"").unwrap();
        std::fs::write(routes.join("vpc-3.lock"), b"").unwrap();
        ledger.sweep_stale_temp();
        let mut left: Vec<String> = std::fs::read_dir(&routes)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".staging", "vpc-2.lock", "vpc-3.lock"],
            "only the locks stay"
        );
        assert_eq!(
            std::fs::read_dir(state::staging(&routes)).unwrap().count(),
            0
        );
        // A write removes its VPC's leftovers too.
        let vpc = VpcId::parse("A").unwrap();
        let leftover = state::staging(&routes).join(format!("vpc-{}.tmp.1", vpc.hex()));
        std::fs::write(&leftover, b"x").unwrap();
        let _lock = ledger.lock(&vpc).unwrap();
        ledger
            .add(&vpc, &[entry("10.0.0.0/8", "G00000000A001H", None)])
            .unwrap();
        assert!(!leftover.exists());
    }

    #[test]
    fn same_route_ignores_diagnostics_but_not_the_next_hop() {
        let a = entry("10.0.0.0/8", "G00000000A001H", Some("10.66.0.2"));
        let mut other_owner = a.clone();
        other_owner.container_id = "d".into();
        other_owner.onlink = true;
        assert!(a.same_route(&other_owner));
        assert!(!a.same_route(&entry("10.0.0.0/8", "G00000000A001H", None)));
        assert!(!a.same_route(&entry("10.0.0.0/8", "G00000000A002H", Some("10.66.0.2"))));
    }

    #[test]
    fn an_unreadable_record_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("routes")).unwrap();
        std::fs::write(dir.path().join("routes/vpc-1.json"), b"{").unwrap();
        let listed = Ledger::new(dir.path()).vpcs().unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].is_err(), "{listed:?}");
    }
}
