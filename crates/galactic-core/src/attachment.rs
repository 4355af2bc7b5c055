//! Attachment records: what this node's masters own, and how the chained plugins check that
//! they act on the same attachment as the master that ran before them.
//!
//! Written by the masters *before* an ADD creates anything (an intent log), so that a crash at any point leaves
//! a record that DEL or GC can tear down by, and removed last by DEL. GC never guesses ownership
//! from interface names: an interface, rule or firewall entry is ours when a record names it.
//!
//! ```text
//! <state_dir>/attachments/
//!   G{vpc:9}{att:3}H.json   {"network","containerId","ifname","netns","kind","vpc","attachment",
//!                            "hostIfname","ipamType","stage"?,"configured"?:{"addresses":[{"address",
//!                            "gateway"?}],"v4GatewayPrefix","guestMac"?}}
//! ```
//! `stage` is absent while the attachment is live, `adding` from the record's first write until
//! its ADD has configured everything, `removing` from the start of its teardown (DEL, GC, a stale
//! claim) on; `configured` is what its host side holds, written when its ADD completes (records of
//! releases before it have neither). The VPC's convergence (galactic-master's `converge.rs`)
//! restores the host side of live records only, so it never re-creates what a teardown removed
//! or joins an attachment its ADD may still roll back.
//! Keyed by host interface, which is unique per (VPC, attachment) on the node. Every ADD, DEL and
//! GC of an attachment holds its lock (`<state_dir>/locks/attachment-<n>`, one of
//! [`LOCK_BUCKETS`] files chosen by the host interface's name: a fixed set, so lock files never
//! accumulate and are never removed while someone waits on one), so one VPC attachment is claimed
//! by one container at a time and a losing ADD never touches what the holder created.
//!
//! A VPC's lock (`<state_dir>/locks/vpc-<n>`, one of [`LOCK_BUCKETS`] files chosen by the VPC id)
//! serialises the VPC's convergence with the stage changes of its records. Lock order, everywhere:
//! an attachment's lock, then its VPC's lock, then the node-wide routing lock
//! (`galactic_core::net::domain::Domains::lock`); never the other way round.

use crate::ident::{ChainIds, VpcId};
use crate::ip::Assignment;
use crate::lockfile::{self, LockError, LockGuard};
use crate::log;
use crate::state::{self, StateError};
use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How many lock files the attachments share (by host interface name).
pub const LOCK_BUCKETS: u64 = 64;
/// Longest wait for an attachment's lock: longer than one ADD takes (its IPAM delegate is bounded
/// at 30 s only for a hung one); past it the caller answers "try again later".
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The kind of host interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// veth pair (containers).
    Veth,
    /// tap device (VMs).
    Tap,
}

/// One attachment owned by a master on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Network name.
    pub network: String,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_NETNS` at ADD.
    pub netns: Option<String>,
    /// veth or tap.
    pub kind: Kind,
    /// VPC id as configured.
    pub vpc: String,
    /// Attachment id as configured.
    pub attachment: String,
    /// Host interface.
    pub host_ifname: String,
    /// IPAM delegate, if any.
    pub ipam_type: Option<String>,
    /// Where the attachment's life stands (absent: live).
    #[serde(default, skip_serializing_if = "Stage::is_live")]
    pub stage: Stage,
    /// What its host side holds, once its ADD configured it (absent in records of releases
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configured: Option<Configured>,
}

/// Where an attachment's life stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Its ADD is running (or was killed): it may still roll back.
    Adding,
    /// Configured; the VPC's convergence keeps its host side as recorded.
    #[default]
    Live,
    /// Its teardown started: nothing of it is restored any more.
    Removing,
}

impl Stage {
    /// Whether this is [`Stage::Live`].
    pub fn is_live(&self) -> bool {
        *self == Stage::Live
    }
}

/// What a configured attachment's host side holds besides its interface: enough for the VPC's
/// convergence to restore it without the runtime's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Configured {
    /// The pod's addresses as the host routes them (pod routes, neighbours), with their
    /// gateways (host gateway addresses).
    pub addresses: Vec<Address>,
    /// The prefix length of the IPv4 gateway address on the host interface.
    pub v4_gateway_prefix: u8,
    /// The container end's MAC, for the permanent neighbours (none for a tap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_mac: Option<String>,
}

/// One recorded address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    /// The address with its prefix length.
    pub address: IpNetwork,
    /// Its gateway, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
}

impl From<&Assignment> for Address {
    fn from(a: &Assignment) -> Self {
        Self {
            address: a.address,
            gateway: a.gateway,
        }
    }
}

impl From<&Address> for Assignment {
    fn from(a: &Address) -> Self {
        Self {
            address: a.address,
            gateway: a.gateway,
        }
    }
}

impl Configured {
    /// The recorded addresses as assignments.
    pub fn assignments(&self) -> Vec<Assignment> {
        self.addresses.iter().map(Assignment::from).collect()
    }
}

impl Record {
    /// Whether this record is for the CNI attachment (network, container, ifname).
    pub fn is_for(&self, network: &str, container_id: &str, ifname: &str) -> bool {
        self.network == network && self.container_id == container_id && self.ifname == ifname
    }

    /// Whether the record is for the VPC and attachment `ids` (by value).
    pub fn has_ids(&self, ids: &ChainIds) -> bool {
        ChainIds::of(&serde_json::json!({"vpc": self.vpc, "vpcattachment": self.attachment}))
            .is_ok_and(|recorded| recorded.same_as(ids))
    }
}

/// The records directory.
#[derive(Debug, Clone)]
pub struct Records {
    dir: PathBuf,
    locks: PathBuf,
}

impl Records {
    /// Records under `<state_dir>/attachments`.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("attachments"),
            locks: state_dir.join("locks"),
        }
    }

    fn path(&self, host_ifname: &str) -> PathBuf {
        self.dir.join(format!("{host_ifname}.json"))
    }

    /// Takes the lock of the attachment whose host interface is `host_ifname`.
    pub fn lock(&self, host_ifname: &str) -> Result<LockGuard, LockError> {
        let path = self
            .locks
            .join(format!("attachment-{:02}", bucket(host_ifname)));
        lockfile::acquire(&path, LOCK_TIMEOUT)
    }

    /// Takes the lock of VPC `vpc` (after any attachment lock, before the routing lock). Its
    /// bucket goes by the VPC's value, so every spelling of one VPC id takes the same file.
    pub fn lock_vpc(&self, vpc: &VpcId) -> Result<LockGuard, LockError> {
        let path = self.locks.join(format!("vpc-{:02}", bucket(&vpc.hex())));
        lockfile::acquire(&path, LOCK_TIMEOUT)
    }

    /// Marks the attachment's record as being torn down, under its VPC's lock, so no
    /// convergence of the VPC restores any of it from now on (a record already gone, or one
    /// replaced by another container's, is left alone). Call with the attachment's lock held.
    pub fn mark_removing(&self, record: &Record) -> Result<(), MarkError> {
        let vpc = VpcId::parse(&record.vpc).map_err(|_| MarkError::Vpc(record.vpc.clone()))?;
        let _vpc = self.lock_vpc(&vpc)?;
        let Some(mut now) = self.get(&record.host_ifname)? else {
            return Ok(());
        };
        if !now.is_for(&record.network, &record.container_id, &record.ifname) {
            return Ok(());
        }
        if now.stage != Stage::Removing {
            now.stage = Stage::Removing;
            self.put(&now)?;
        }
        Ok(())
    }

    /// The record of a host interface.
    pub fn get(&self, host_ifname: &str) -> Result<Option<Record>, StateError> {
        state::read_json(&self.path(host_ifname))
    }

    /// Writes (or replaces) a record atomically.
    pub fn put(&self, record: &Record) -> Result<(), StateError> {
        state::write_json(&self.path(&record.host_ifname), record)
    }

    /// Removes a record; a missing one is success.
    pub fn remove(&self, host_ifname: &str) -> Result<(), StateError> {
        state::remove(&self.path(host_ifname))
    }

    /// Removes what writers killed mid-write left behind (GC).
    pub fn sweep_temporaries(&self) -> Result<usize, StateError> {
        state::sweep_temporaries(&self.dir)
    }

    /// Every record (unreadable ones are skipped with a warning: they must not stop GC).
    pub fn all(&self) -> Result<Vec<Record>, StateError> {
        self.read_all("")
    }

    /// The records of VPC `vpc`, found by their file names: a record is named after its host
    /// interface, `G<vpc, 9 digits><attachment>H` (or `…G`, `ident::host_ifname`), so the
    /// other VPCs' records are never read. A VPC's convergence needs its own records only; on a
    /// node of many VPCs reading every record made each ADD cost the node's size and each GC
    /// the node's size times its VPCs, and a DEL judging the VPC's last attachment reads only its
    /// own. Records of every stage are returned.
    pub fn of_vpc(&self, vpc: &VpcId) -> Result<Vec<Record>, StateError> {
        let mut records = self.read_all(&format!("G{}", vpc.padded()))?;
        records.retain(|r| VpcId::parse(&r.vpc).is_ok_and(|v| v.value() == vpc.value()));
        Ok(records)
    }

    /// The host interfaces of VPC `vpc`'s records, by their file names alone, in order (no
    /// record is read): what a caller that reads a few of them, or only needs to know whether
    /// one exists, starts from.
    pub fn names_of_vpc(&self, vpc: &VpcId) -> Result<Vec<String>, StateError> {
        let mut names: Vec<String> = state::json_files(&self.dir, &format!("G{}", vpc.padded()))?
            .iter()
            .filter_map(|p| p.file_stem())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    /// Whether a record of VPC `vpc` in any stage is on the node other than `except`'s: the
    /// VPC's files by name, read until one is the VPC's. A DEL asking whether its attachment
    /// was the VPC's last reads one record, not every one of the VPC's.
    pub fn any_of_vpc(&self, vpc: &VpcId, except: Option<&str>) -> Result<bool, StateError> {
        for name in self.names_of_vpc(vpc)? {
            if Some(name.as_str()) == except {
                continue;
            }
            let found = read_files([self.path(&name)]);
            if found
                .iter()
                .any(|(_, r)| VpcId::parse(&r.vpc).is_ok_and(|v| v.value() == vpc.value()))
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The records whose file name starts with `prefix`, unreadable ones skipped with a warning.
    fn read_all(&self, prefix: &str) -> Result<Vec<Record>, StateError> {
        Ok(read_files(state::json_files(&self.dir, prefix)?)
            .into_iter()
            .map(|(_, record)| record)
            .collect())
    }

    /// Every record, from one listing of the directory, each with its file so that a VPC's
    /// records can be read again later without listing the directory again ([`Self::reread`]).
    pub fn list(&self) -> Result<Listing, StateError> {
        let mut listing = Listing::default();
        for (path, record) in read_files(state::json_files(&self.dir, "")?) {
            if let Ok(vpc) = VpcId::parse(&record.vpc) {
                listing.by_vpc.entry(vpc.value()).or_default().push(path);
            }
            listing.records.push(record);
        }
        Ok(listing)
    }

    /// The records of VPC `vpc` that `listing` holds, each read again now from its file (those
    /// gone since are not returned): what [`Self::of_vpc`] returns but for records written
    /// since the listing, without listing the directory. A caller working through every VPC of
    /// the node (GC) lists it once, not once per VPC.
    pub fn reread(&self, listing: &Listing, vpc: &VpcId) -> Vec<Record> {
        let prefix = format!("G{}", vpc.padded());
        let files = listing
            .by_vpc
            .get(&vpc.value())
            .map_or(&[][..], Vec::as_slice);
        let mut records: Vec<Record> = read_files(
            files
                .iter()
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
                })
                .cloned(),
        )
        .into_iter()
        .map(|(_, record)| record)
        .collect();
        records.retain(|r| VpcId::parse(&r.vpc).is_ok_and(|v| v.value() == vpc.value()));
        records
    }

    /// The record for a CNI attachment, found by scanning (used when the config cannot tell the
    /// host interface).
    pub fn find(
        &self,
        network: &str,
        container_id: &str,
        ifname: &str,
    ) -> Result<Option<Record>, StateError> {
        Ok(self
            .all()?
            .into_iter()
            .find(|r| r.is_for(network, container_id, ifname)))
    }
}

/// Every record of the node as one listing of the records' directory found them
/// ([`Records::list`]), with the files of each VPC's.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    records: Vec<Record>,
    by_vpc: std::collections::HashMap<u64, Vec<PathBuf>>,
}

impl Listing {
    /// The records as listed.
    pub fn records(&self) -> &[Record] {
        &self.records
    }
}

/// Each readable record of `paths` with its file (a missing file is skipped, an unreadable one
/// with a warning: they must not stop GC).
fn read_files(paths: impl IntoIterator<Item = PathBuf>) -> Vec<(PathBuf, Record)> {
    let mut out = Vec::new();
    for path in paths {
        match state::read_json::<Record>(&path) {
            Ok(record) => out.extend(record.map(|r| (path, r))),
            Err(e) => log::warn(
                "skipping unreadable attachment record",
                serde_json::json!({"err": e.to_string()}),
            ),
        }
    }
    out
}

/// FNV-1a of `name` over the lock buckets: stable across processes and releases (the bucket
/// must be the same for every plugin process on the node).
fn bucket(name: &str) -> u64 {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    hash % LOCK_BUCKETS
}

/// Why [`Records::mark_removing`] failed.
#[derive(Debug, thiserror::Error)]
pub enum MarkError {
    /// The record's VPC id does not parse (a hand-edited record): there is no VPC to lock.
    #[error("the record's VPC id {0} does not parse")]
    Vpc(String),
    /// The VPC's lock.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The record.
    #[error(transparent)]
    State(#[from] StateError),
}

/// Why a chained plugin refuses to act: its stanza names another attachment than the one the
/// master of this chain created for this container (code 7 in every plugin).
#[derive(Debug, thiserror::Error)]
pub enum ChainMismatch {
    /// `prevResult`'s host interface is not the one the stanza's ids name.
    #[error("vpc/vpcattachment of this stanza name host interface {expected}, but the master of this chain attached {found}: every plugin of a chain must carry the master's vpc and vpcattachment")]
    Interface {
        /// What the stanza's ids give.
        expected: String,
        /// The host interfaces `prevResult` lists.
        found: String,
    },
    /// No master record of that attachment on this node.
    #[error("no master on this node attached {host} (no record of it): the chain must start with the master of the same VPC attachment")]
    NoRecord {
        /// The host interface.
        host: String,
    },
    /// The record is another container's (or another network's).
    #[error("{host} belongs to container {holder} (network {network}), not to this one: a plugin acts only on its own chain's attachment")]
    OtherContainer {
        /// The host interface.
        host: String,
        /// The container that holds it.
        holder: String,
        /// Its network.
        network: String,
    },
    /// The record was written for other ids.
    #[error(
        "{host} was attached for VPC {vpc} attachment {attachment}, not for this stanza's ids"
    )]
    Ids {
        /// The host interface.
        host: String,
        /// The recorded VPC.
        vpc: String,
        /// The recorded attachment.
        attachment: String,
    },
    /// The record cannot be read.
    #[error(transparent)]
    State(#[from] StateError),
}

/// What a chained plugin knows of its place: the stanza's ids, the host interfaces the master
/// reported in `prevResult` (those without a sandbox), and the CNI attachment.
pub struct ChainPosition<'a> {
    /// The stanza's `vpc` and `vpcattachment`.
    pub ids: &'a ChainIds,
    /// `prevResult`'s host-side interface names.
    pub prev_hosts: &'a [&'a str],
    /// The network name.
    pub network: &'a str,
    /// `CNI_CONTAINERID`.
    pub container_id: &'a str,
    /// `CNI_IFNAME`.
    pub ifname: &'a str,
}

impl ChainPosition<'_> {
    /// The master's record of this attachment, when the stanza names the master's attachment
    /// and the master recorded it for this container: the check every chained plugin makes
    /// before it routes or publishes anything.
    pub fn verify(&self, state_dir: &Path) -> Result<Record, ChainMismatch> {
        let host = self.ids.host_ifname();
        if !self.prev_hosts.is_empty() && !self.prev_hosts.contains(&host.as_str()) {
            return Err(ChainMismatch::Interface {
                expected: host,
                found: self.prev_hosts.join(", "),
            });
        }
        let record = Records::new(state_dir)
            .get(&host)?
            .ok_or_else(|| ChainMismatch::NoRecord { host: host.clone() })?;
        if !record.is_for(self.network, self.container_id, self.ifname) {
            return Err(ChainMismatch::OtherContainer {
                host,
                holder: record.container_id,
                network: record.network,
            });
        }
        if !record.has_ids(self.ids) {
            return Err(ChainMismatch::Ids {
                host,
                vpc: record.vpc,
                attachment: record.attachment,
            });
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn older() -> serde_json::Value {
        json!({"network": "n", "containerId": "c", "ifname": "eth0", "netns": "/run/netns/p",
               "kind": "veth", "vpc": "A", "attachment": "1", "hostIfname": "G00000000A001H",
               "ipamType": "galactic-ipam"})
    }

    #[test]
    fn a_record_of_an_older_release_is_live_without_addresses() {
        let record: Record = serde_json::from_value(older()).unwrap();
        assert_eq!((record.stage, &record.configured), (Stage::Live, &None));
        // And a live record without addresses is written as older releases read it.
        assert_eq!(serde_json::to_value(&record).unwrap(), older());
    }

    #[test]
    fn stage_and_addresses_round_trip() {
        let mut value = older();
        value["stage"] = json!("removing");
        value["configured"] = json!({"addresses": [{"address": "10.1.0.5/32", "gateway": "10.1.0.1"},
            {"address": "fd00::5/128"}], "v4GatewayPrefix": 32, "guestMac": "02:00:00:00:00:05"});
        let record: Record = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(record.stage, Stage::Removing);
        let configured = record.configured.clone().unwrap();
        assert_eq!(configured.assignments()[1].gateway, None);
        assert_eq!(serde_json::to_value(&record).unwrap(), value);
    }

    /// A record of VPC `vpc`, attachment `att`, named as its master names it.
    fn record_of(vpc: &str, att: &str) -> Record {
        let ids = ChainIds::of(&json!({"vpc": vpc, "vpcattachment": att})).unwrap();
        let mut value = older();
        value["vpc"] = json!(vpc);
        value["attachment"] = json!(att);
        value["hostIfname"] = json!(ids.host_ifname());
        serde_json::from_value(value).unwrap()
    }

    /// A VPC's records are found by their file names and no other VPC's file is read: a record
    /// of VPC A stored under VPC B's name is not among A's (reading every file and keeping A's
    /// by content, as convergence once did, would return it).
    #[test]
    fn a_vpcs_records_are_read_from_its_own_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path());
        for (vpc, att) in [("A", "1"), ("A", "2"), ("0A", "3"), ("B", "1"), ("AB", "1")] {
            records.put(&record_of(vpc, att)).unwrap();
        }
        let mut misnamed = record_of("A", "4");
        misnamed.host_ifname = record_of("B", "4").host_ifname;
        records.put(&misnamed).unwrap();
        let a = VpcId::parse("A").unwrap();
        let mut found: Vec<String> = records
            .of_vpc(&a)
            .unwrap()
            .into_iter()
            .map(|r| r.attachment)
            .collect();
        found.sort();
        // `0A` is another spelling of A; `AB` shares no prefix with it once padded.
        assert_eq!(found, ["1", "2", "3"]);
        assert_eq!(records.all().unwrap().len(), 6);
    }

    #[test]
    fn a_vpcs_records_are_found_by_their_names_in_any_spelling_and_stage() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path());
        let put = |vpc: &str, att: &str, stage: Stage| {
            let record = Record {
                stage,
                ..record_of(vpc, att)
            };
            records.put(&record).unwrap();
        };
        put("A", "1", Stage::Live);
        put("0A", "2", Stage::Adding);
        put("B", "1", Stage::Removing);
        let of = |vpc: &str| {
            let mut found: Vec<String> = records
                .of_vpc(&VpcId::parse(vpc).unwrap())
                .unwrap()
                .into_iter()
                .map(|r| r.attachment)
                .collect();
            found.sort();
            found
        };
        assert_eq!(of("A"), ["1", "2"]);
        assert_eq!(of("B"), ["1"]);
        assert_eq!(of("C"), Vec::<String>::new());
    }

    /// A VPC's records read again from one listing: a removed record is gone, a changed stage
    /// is seen, a record written since is not among them, and a misnamed one never is (as for
    /// `of_vpc`); no other VPC's record is returned.
    #[test]
    fn a_listing_reads_a_vpcs_records_again_by_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path());
        for (vpc, att) in [("A", "1"), ("A", "2"), ("B", "1")] {
            records.put(&record_of(vpc, att)).unwrap();
        }
        let mut misnamed = record_of("A", "4");
        misnamed.host_ifname = record_of("B", "4").host_ifname;
        records.put(&misnamed).unwrap();
        let listing = records.list().unwrap();
        assert_eq!(listing.records().len(), 4);
        records.remove(&record_of("A", "1").host_ifname).unwrap();
        records
            .put(&Record {
                stage: Stage::Removing,
                ..record_of("A", "2")
            })
            .unwrap();
        records.put(&record_of("A", "3")).unwrap();
        let a = VpcId::parse("0A").unwrap();
        let again = records.reread(&listing, &a);
        let found: Vec<(&str, Stage)> = again
            .iter()
            .map(|r| (r.attachment.as_str(), r.stage))
            .collect();
        assert_eq!(found, [("2", Stage::Removing)]);
        let b: Vec<String> = records
            .reread(&listing, &VpcId::parse("B").unwrap())
            .into_iter()
            .map(|r| r.attachment)
            .collect();
        assert_eq!(b, ["1"]);
    }

    #[test]
    fn every_spelling_of_a_vpc_takes_the_same_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let records = Records::new(dir.path());
        let a = VpcId::parse("0A").unwrap();
        let _held = records.lock_vpc(&a).unwrap();
        assert_eq!(a.hex(), VpcId::parse("A").unwrap().hex());
        let files: Vec<String> = std::fs::read_dir(dir.path().join("locks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files, vec![format!("vpc-{:02}", bucket(&a.hex()))]);
    }
}
