//! How much of a VPC one ADD's convergence covers (decision 0083).
//!
//! A VPC's whole convergence costs its live attachments' size: a filling VPC of N attachments
//! paid N lookups per ADD, N² over its fill (1 000 attachments in one VPC: 111 ms of each ADD,
//! against 4 ms on the empty node). Most of what it restores is the domain's: a VRF or a
//! table recreated behind the records strips every member at once, and what [`Domains::ensure`]
//! repairs, or a VRF device that is not the one the VPC's last whole convergence saw, says so
//! in O(1). So an ADD converges:
//! - the whole VPC when it has at most [`WINDOW`] other attachments (what every ADD did
//!   before: a small VPC converges as a whole at no cost worth saving), when the domain was
//!   just created, adopted or repaired, and when the VPC's [`Identity`] (its table, VRF device
//!   and mark) is not the one its last whole convergence recorded, or none was recorded;
//! - otherwise [`WINDOW`] of its other attachments, the ones after those the previous ADD
//!   converged, in the order of their host interfaces' names: one attachment's own state
//!   removed behind its record (a route, an address, a neighbour, its membership) comes back
//!   within ⌈N / [`WINDOW`]⌉ ADDs of the VPC, and with the next CNI GC, which converges every
//!   VPC whole.
//!
//! The VPC's rotation is a file of its own, `<state_dir>/converged/vpc-<hex>.json`
//! (`{"identity": {"table", "vrf", "mark"}, "after": "<host interface>"}`), read and written
//! under the VPC's lock; it goes before the VPC's domain does (`retire.rs`) and GC removes any
//! whose VPC has no domain. A missing or unreadable one only means the next ADD converges the
//! VPC whole.
//!
//! [`Domains::ensure`]: galactic_core::net::domain::Domains::ensure

use galactic_core::ident::VpcId;
use galactic_core::log;
use galactic_core::net::domain::Domain;
use galactic_core::net::netlink::Link;
use galactic_core::state::{self, StateError};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The other attachments one ADD converges in a VPC that has more: its cost stays that of a
/// few lookups however large the VPC, and a VPC of up to this many others converges whole.
pub const WINDOW: usize = 4;

/// What identifies a VPC's domain to its members: a domain with another identity is not the
/// one they were last converged on, whatever its record says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The domain's table.
    pub table: u32,
    /// VRF mode: the VRF device's interface index (a VRF recreated under its name has a new
    /// one and none of the old one's members).
    pub vrf: Option<u32>,
    /// Table mode: the VPC's firewall mark.
    pub mark: Option<u32>,
}

impl Identity {
    /// The identity of `domain`, with `vrf` its device as the kernel has it now.
    pub fn of(domain: &Domain, vrf: Option<&Link>) -> Self {
        Self {
            table: domain.table,
            vrf: vrf.map(|l| l.index),
            mark: domain.mark.map(|m| m.value),
        }
    }
}

/// The VPC's rotation as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Recorded {
    identity: Identity,
    /// The host interface of the last attachment an ADD converged in its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<String>,
}

/// What one ADD's convergence covers, and what it records once done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The host interfaces of the attachments to converge.
    pub names: Vec<String>,
    /// Whether they are every other attachment of the VPC.
    pub whole: bool,
    /// The rotation to record once converged (none for a VPC converged whole because it is
    /// small: nothing to rotate over).
    record: Option<Recorded>,
}

/// Why an ADD converges its VPC whole, for its log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whole {
    /// The VPC has at most [`WINDOW`] other attachments.
    Small,
    /// The domain was created, adopted or repaired by this ADD.
    DomainChanged,
    /// No rotation was recorded, or the domain's identity is not the recorded one.
    NewIdentity,
}

impl Whole {
    /// What the convergence covered, for its log lines.
    pub fn label(self) -> &'static str {
        match self {
            Self::Small => "the whole VPC (a small one)",
            Self::DomainChanged => "the whole VPC (its domain was created, adopted or repaired)",
            Self::NewIdentity => "the whole VPC (its domain's identity was not recorded)",
        }
    }
}

/// The rotations' directory.
fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("converged")
}

fn path(state_dir: &Path, vpc: &VpcId) -> PathBuf {
    dir(state_dir).join(format!("vpc-{}.json", vpc.hex()))
}

/// The plan of an ADD's convergence over `others` (the VPC's other attachments' host
/// interfaces, in order) on a domain of `identity`; `changed` when this ADD created, adopted or
/// repaired the domain. Call with the VPC's lock held.
pub fn plan(
    state_dir: &Path,
    vpc: &VpcId,
    others: Vec<String>,
    identity: &Identity,
    changed: bool,
) -> (Plan, Option<Whole>) {
    let whole = |names, why, record| {
        let plan = Plan {
            names,
            whole: true,
            record,
        };
        (plan, Some(why))
    };
    if others.len() <= WINDOW {
        return whole(others, Whole::Small, None);
    }
    let fresh = Recorded {
        identity: identity.clone(),
        after: None,
    };
    if changed {
        return whole(others, Whole::DomainChanged, Some(fresh));
    }
    let recorded = read(state_dir, vpc).filter(|r| r.identity == *identity);
    let Some(recorded) = recorded else {
        return whole(others, Whole::NewIdentity, Some(fresh));
    };
    let names = window(&others, recorded.after.as_deref());
    let record = Recorded {
        identity: identity.clone(),
        after: names.last().cloned(),
    };
    let plan = Plan {
        names,
        whole: false,
        record: Some(record),
    };
    (plan, None)
}

/// The [`WINDOW`] names of `others` after `after`, wrapping around (`others` holds more).
fn window(others: &[String], after: Option<&str>) -> Vec<String> {
    let start = after.map_or(0, |a| others.partition_point(|n| n.as_str() <= a));
    others
        .iter()
        .cycle()
        .skip(start % others.len())
        .take(WINDOW)
        .cloned()
        .collect()
}

impl Plan {
    /// Records the rotation the plan leads to (a failure only costs the next ADD a whole
    /// convergence, and is logged). Call with the VPC's lock held.
    pub fn record(&self, state_dir: &Path, vpc: &VpcId) {
        let Some(record) = &self.record else {
            return;
        };
        if let Err(e) = state::write_json(&path(state_dir, vpc), record) {
            log::warn(
                "converge: could not record the VPC's rotation; its next ADD converges it whole",
                json!({"vpc": vpc.raw(), "err": e.to_string()}),
            );
        }
    }
}

/// Records that the VPC was just converged whole on a domain of `identity` (GC), when it has
/// more than [`WINDOW`] live attachments (a smaller one is converged whole by every ADD).
pub fn converged_whole(state_dir: &Path, vpc: &VpcId, identity: &Identity, live: usize) {
    if live <= WINDOW {
        return;
    }
    let plan = Plan {
        names: Vec::new(),
        whole: true,
        record: Some(Recorded {
            identity: identity.clone(),
            after: None,
        }),
    };
    plan.record(state_dir, vpc);
}

/// The VPC's recorded rotation; none when missing or unreadable (the next ADD converges it
/// whole, which is what a missing one asks for).
fn read(state_dir: &Path, vpc: &VpcId) -> Option<Recorded> {
    match state::read_json::<Recorded>(&path(state_dir, vpc)) {
        Ok(recorded) => recorded,
        Err(e) => {
            log::warn(
                "converge: the VPC's rotation is unreadable; this ADD converges it whole",
                json!({"vpc": vpc.raw(), "err": e.to_string()}),
            );
            None
        }
    }
}

/// Removes the VPC's rotation (before its domain goes). Call with the VPC's lock held.
pub fn remove(state_dir: &Path, vpc: &VpcId) -> Result<(), StateError> {
    state::remove(&path(state_dir, vpc))
}

/// Removes the rotations (and writers' temporaries) of VPCs without a recorded domain, `kept`
/// by their hex ids: what a teardown killed between its rotation's and its domain's removal
/// cannot leave, but a domain removed by an older release or by hand can. Returns how many.
pub fn sweep(state_dir: &Path, kept: &HashSet<String>) -> Result<usize, StateError> {
    let dir = dir(state_dir);
    let mut removed = state::sweep_temporaries(&dir)?;
    for file in state::json_files(&dir, "vpc-")? {
        let hex = file
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.strip_prefix("vpc-"));
        if hex.is_some_and(|h| !kept.contains(h)) {
            state::remove(&file)?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("G{i:03}H")).collect()
    }

    #[test]
    fn a_window_starts_after_the_last_one_and_wraps_around() {
        let all = names(6);
        assert_eq!(window(&all, None), names(4));
        assert_eq!(
            window(&all, Some("G001H")),
            ["G002H", "G003H", "G004H", "G005H"]
        );
        assert_eq!(
            window(&all, Some("G003H")),
            ["G004H", "G005H", "G000H", "G001H"]
        );
        // An `after` that left the VPC: the window starts at the next name still there.
        assert_eq!(
            window(&all, Some("G002I")),
            ["G003H", "G004H", "G005H", "G000H"]
        );
        assert_eq!(window(&all, Some("G999H")), names(4));
    }

    #[test]
    fn successive_windows_cover_every_attachment() {
        let all = names(11);
        let mut after: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..all.len().div_ceil(WINDOW) {
            let w = window(&all, after.as_deref());
            after = w.last().cloned();
            seen.extend(w);
        }
        assert_eq!(seen.len(), all.len());
    }

    #[test]
    fn a_vpc_converges_whole_when_small_changed_or_of_another_identity() {
        let dir = tempfile::tempdir().unwrap();
        let vpc = VpcId::parse("c01").unwrap();
        let id = Identity {
            table: 1000,
            vrf: Some(7),
            mark: None,
        };
        let (p, why) = plan(dir.path(), &vpc, names(WINDOW), &id, false);
        assert_eq!(
            (p.whole, why, p.names.len()),
            (true, Some(Whole::Small), WINDOW)
        );
        assert_eq!(p.record, None);

        let (p, why) = plan(dir.path(), &vpc, names(9), &id, false);
        assert_eq!((p.whole, why), (true, Some(Whole::NewIdentity)));
        p.record(dir.path(), &vpc);
        let (p, why) = plan(dir.path(), &vpc, names(9), &id, false);
        assert_eq!((p.whole, why, &p.names), (false, None, &names(4)));
        p.record(dir.path(), &vpc);
        let (p, _) = plan(dir.path(), &vpc, names(9), &id, false);
        assert_eq!(p.names, ["G004H", "G005H", "G006H", "G007H"]);

        let (p, why) = plan(dir.path(), &vpc, names(9), &id, true);
        assert_eq!((p.whole, why), (true, Some(Whole::DomainChanged)));
        let recreated = Identity {
            vrf: Some(8),
            ..id.clone()
        };
        let (p, why) = plan(dir.path(), &vpc, names(9), &recreated, false);
        assert_eq!((p.whole, why), (true, Some(Whole::NewIdentity)));

        remove(dir.path(), &vpc).unwrap();
        let (p, why) = plan(dir.path(), &vpc, names(9), &id, false);
        assert_eq!((p.whole, why), (true, Some(Whole::NewIdentity)));
    }

    #[test]
    fn the_sweep_keeps_the_rotations_of_recorded_domains_only() {
        let dir = tempfile::tempdir().unwrap();
        let kept = VpcId::parse("c01").unwrap();
        let gone = VpcId::parse("c02").unwrap();
        let id = Identity {
            table: 1000,
            vrf: None,
            mark: Some(0x100),
        };
        converged_whole(dir.path(), &kept, &id, WINDOW + 1);
        converged_whole(dir.path(), &gone, &id, WINDOW + 1);
        let n = sweep(dir.path(), &HashSet::from([kept.hex()])).unwrap();
        assert_eq!(n, 1);
        assert!(path(dir.path(), &kept).exists());
        assert!(!path(dir.path(), &gone).exists());
    }
}
