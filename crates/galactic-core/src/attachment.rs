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
//!                            "hostIfname","ipamType"}
//! ```
//! Keyed by host interface, which is unique per (VPC, attachment) on the node.

use crate::ident::ChainIds;
use crate::log;
use crate::state::{self, StateError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
}

impl Records {
    /// Records under `<state_dir>/attachments`.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("attachments"),
        }
    }

    fn path(&self, host_ifname: &str) -> PathBuf {
        self.dir.join(format!("{host_ifname}.json"))
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
        let mut out = Vec::new();
        for path in state::json_files(&self.dir, "")? {
            match state::read_json::<Record>(&path) {
                Ok(record) => out.extend(record),
                Err(e) => log::warn(
                    "skipping unreadable attachment record",
                    serde_json::json!({"err": e.to_string()}),
                ),
            }
        }
        Ok(out)
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
