//! Attachment records: what this node's masters own.
//!
//! Written *before* an ADD creates anything (an intent log), so that a crash at any point leaves
//! a record that DEL or GC can tear down by, and removed last by DEL. GC never guesses ownership
//! from interface names: an interface, rule or firewall entry is ours when a record names it.
//!
//! ```text
//! <state_dir>/attachments/
//!   G{vpc:9}{att:3}H.json   {"network","containerId","ifname","netns","kind","vpc","attachment",
//!                            "hostIfname","ipamType"}
//! ```
//! Keyed by host interface, which is unique per (VPC, attachment) on the node.

use galactic_core::log;
use galactic_core::net::NetError;
use galactic_core::state;
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
    pub fn get(&self, host_ifname: &str) -> Result<Option<Record>, NetError> {
        Ok(state::read_json(&self.path(host_ifname))?)
    }

    /// Writes (or replaces) a record atomically.
    pub fn put(&self, record: &Record) -> Result<(), NetError> {
        Ok(state::write_json(&self.path(&record.host_ifname), record)?)
    }

    /// Removes a record; a missing one is success.
    pub fn remove(&self, host_ifname: &str) -> Result<(), NetError> {
        Ok(state::remove(&self.path(host_ifname))?)
    }

    /// Removes what writers killed mid-write left behind (GC).
    pub fn sweep_temporaries(&self) -> Result<usize, NetError> {
        Ok(state::sweep_temporaries(&self.dir)?)
    }

    /// Every record (unreadable ones are skipped with a warning: they must not stop GC).
    pub fn all(&self) -> Result<Vec<Record>, NetError> {
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
    ) -> Result<Option<Record>, NetError> {
        Ok(self
            .all()?
            .into_iter()
            .find(|r| r.is_for(network, container_id, ifname)))
    }
}
