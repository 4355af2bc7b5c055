//! galactic-bgp's own records of what it published on this node, one per attachment: what DEL
//! retracts by, and what decides whether an attachment is the VPC's last one here. They are
//! written by ADD before it publishes anything and removed by DEL after the attachment's own
//! objects are retracted, so they never depend on the order in which the chain's other plugins
//! tear down (the masters' records go last in a chain's DEL, first in a reversed one).
//!
//! ```text
//! <state_dir>/bgp-attachments/
//!   seeded                       written once the records were seeded from the masters'
//!                                records (a node upgraded from a version without them)
//!   vpc-<hex>/                   one directory per VPC: "is any attachment of the VPC left" is
//!                                one readdir
//!     <host_ifname>.<cid41>.json {"network","containerId","ifname","vpc","attachment",
//!                                 "hostIfname","namespace","advertisement","vrfInstance",
//!                                 "endpointSlice"?:{"namespace","name"},"tenant"}
//! ```
//! A VPC's records are written and removed under the VPC's lock (`locks/bgp-vpc-<hex>`), which
//! ADD also holds while it ensures the VRF instance and DEL while it retires it; the seeding
//! holds `locks/bgp-seed`. Writes go through `galactic_core::state` (atomic; temporaries of
//! killed writers removed by the next writer of the file).

use crate::annotations::cid41;
use crate::attachments::vpc_lock;
use crate::error::BgpError;
use crate::publish;
use crate::store::local::LOCAL_LOCK_WAIT;
use crate::store::{ObjectStore, StoreError};
use galactic_core::attachment::{Record, Records};
use galactic_core::config::NodeConfig;
use galactic_core::ident::{
    bgp_advertisement_name, bgp_vrf_instance_name, tenant_identifier, ChainIds, VpcId,
};
use galactic_core::{lockfile, log, state};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Subdirectory of the state directory holding the records.
pub const DIR: &str = "bgp-attachments";
/// The marker of a finished seeding.
const SEEDED: &str = "seeded";

/// What one attachment's ADD publishes (or published), by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Publication {
    /// The network (the conflist's name).
    pub network: String,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// The VPC, as configured.
    pub vpc: String,
    /// The VPC attachment, as configured.
    pub attachment: String,
    /// The attachment's host interface.
    pub host_ifname: String,
    /// The BGP namespace.
    pub namespace: String,
    /// The attachment's BGPAdvertisement on this node.
    pub advertisement: String,
    /// The VPC's BGPVRFInstance on this node.
    pub vrf_instance: String,
    /// The pod's EndpointSlice, when the runtime named a pod (absent in seeded records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_slice: Option<SliceRef>,
    /// `<vpc>-<attachment>`: the EndpointSlice's tenant label.
    pub tenant: String,
    /// What ADD's writes left, recorded once they are all done (absent: a killed or failed ADD,
    /// a seeded record, a record of a release before it was kept): what a later ADD of the VPC
    /// takes the VRF id from and what DEL deletes without reading first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
}

/// The objects an attachment's ADD left, as its writes answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    /// The VPC's VRF instance: its uid (empty with the local publisher's documents, which have
    /// one too; empty only when unknown), VRF id, and the owned fields it was made sure of.
    pub vrf: RecordedVrf,
    /// The advertisement's uid.
    pub advertisement_uid: String,
    /// The advertisement's resourceVersion after ADD's write, when that write left this
    /// container its only record: DEL deletes it if it is still exactly so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertisement_sole_version: Option<String>,
    /// The EndpointSlice's uid, when ADD published one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_slice_uid: Option<String>,
}

/// A VRF instance as an ADD made sure of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedVrf {
    /// Its uid.
    pub uid: String,
    /// Its VRF id.
    pub vrf_id: u32,
    /// `spec.routerRef.name`.
    pub router: String,
    /// Its import and export route target.
    pub route_target: String,
}

/// An EndpointSlice by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceRef {
    /// Its namespace (the pod's).
    pub namespace: String,
    /// Its name (the pod's).
    pub name: String,
}

impl Publication {
    /// What an attachment of `ids` publishes on `node` by the deterministic names.
    pub fn named(
        attachment: &AttachmentKey<'_>,
        ids: &ChainIds,
        namespace: &str,
        node: &str,
    ) -> Self {
        Self {
            network: attachment.network.to_owned(),
            container_id: attachment.container_id.to_owned(),
            ifname: attachment.ifname.to_owned(),
            vpc: ids.vpc.raw().to_owned(),
            attachment: ids.att.raw().to_owned(),
            host_ifname: ids.host_ifname(),
            namespace: namespace.to_owned(),
            advertisement: bgp_advertisement_name(ids.vpc.raw(), ids.att.raw(), node),
            vrf_instance: bgp_vrf_instance_name(ids.vpc.raw(), node),
            endpoint_slice: None,
            tenant: tenant_identifier(&ids.vpc, &ids.att),
            published: None,
        }
    }

    /// Whether this is the record of the CNI attachment `key`.
    pub fn is_for(&self, key: &AttachmentKey<'_>) -> bool {
        self.network == key.network
            && self.container_id == key.container_id
            && self.ifname == key.ifname
    }

    fn vpc_id(&self) -> Option<VpcId> {
        VpcId::parse(&self.vpc).ok()
    }
}

/// A CNI attachment: (network, container id, interface name).
#[derive(Debug, Clone, Copy)]
pub struct AttachmentKey<'a> {
    /// The network.
    pub network: &'a str,
    /// `CNI_CONTAINERID`.
    pub container_id: &'a str,
    /// `CNI_IFNAME`.
    pub ifname: &'a str,
}

/// The node's publication records.
pub struct Publications {
    root: PathBuf,
}

fn state_err(e: state::StateError) -> BgpError {
    BgpError::Store(StoreError::State(e))
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> BgpError {
    move |source| BgpError::Store(StoreError::Io { what, source })
}

impl Publications {
    /// The records under `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            root: state_dir.join(DIR),
        }
    }

    fn vpc_dir(&self, vpc: &VpcId) -> PathBuf {
        self.root.join(format!("vpc-{}", vpc.hex()))
    }

    fn path(&self, vpc: &VpcId, host_ifname: &str, container_id: &str) -> PathBuf {
        self.vpc_dir(vpc)
            .join(format!("{host_ifname}.{}.json", cid41(container_id)))
    }

    /// Writes `p` (the caller holds the VPC's lock); whether no record of it existed before.
    pub fn put(&self, vpc: &VpcId, p: &Publication) -> Result<bool, BgpError> {
        let path = self.path(vpc, &p.host_ifname, &p.container_id);
        let existed = path.exists();
        state::write_json(&path, p).map_err(state_err)?;
        Ok(!existed)
    }

    /// The record of `key` on the host interface `host_ifname` of `vpc`, if there is one.
    pub fn find(
        &self,
        vpc: &VpcId,
        host_ifname: &str,
        key: &AttachmentKey<'_>,
    ) -> Result<Option<Publication>, BgpError> {
        let path = self.path(vpc, host_ifname, key.container_id);
        let found: Option<Publication> = state::read_json(&path).map_err(state_err)?;
        Ok(found.filter(|p| p.is_for(key)))
    }

    /// Removes `p`'s record, and the VPC's directory with its last one (the caller holds the
    /// VPC's lock).
    pub fn remove(&self, vpc: &VpcId, p: &Publication) -> Result<(), BgpError> {
        state::remove(&self.path(vpc, &p.host_ifname, &p.container_id)).map_err(state_err)?;
        // Not empty (another record, a temporary) or gone already: either way nothing to do.
        let _ = state::remove_dir_if_empty(&self.vpc_dir(vpc));
        Ok(())
    }

    /// The VRF instance another record of `vpc` than `own`'s says its ADD made sure of (the
    /// caller holds the VPC's lock: while any record of the VPC is left, its instance is not
    /// retired).
    pub fn recorded_vrf(
        &self,
        vpc: &VpcId,
        own: &Publication,
    ) -> Result<Option<RecordedVrf>, BgpError> {
        let own = self.path(vpc, &own.host_ifname, &own.container_id);
        for file in state::json_files(&self.vpc_dir(vpc), "").map_err(state_err)? {
            if file == own {
                continue;
            }
            if let Ok(Some(Publication {
                published: Some(p), ..
            })) = state::read_json::<Publication>(&file)
            {
                return Ok(Some(p.vrf));
            }
        }
        Ok(None)
    }

    /// Whether any record of `vpc` other than `own`'s is there (a temporary is no record).
    pub fn others_of_vpc(&self, vpc: &VpcId, own: Option<&Publication>) -> Result<bool, BgpError> {
        let own = own.map(|p| self.path(vpc, &p.host_ifname, &p.container_id));
        Ok(state::json_files(&self.vpc_dir(vpc), "")
            .map_err(state_err)?
            .iter()
            .any(|path| Some(path) != own.as_ref()))
    }

    /// GC: removes the temporaries killed writers left in every VPC's directory (a live
    /// writer's stays: its process exists). How many went. A directory stays: only a holder of
    /// the VPC's lock removes it (DEL), since an ADD may be writing into it.
    pub fn sweep_temporaries(&self) -> Result<usize, BgpError> {
        let mut removed = state::sweep_temporaries(&self.root).map_err(state_err)?;
        for dir in self.vpc_dirs()? {
            removed += state::sweep_temporaries(&dir).map_err(state_err)?;
        }
        Ok(removed)
    }

    fn vpc_dirs(&self) -> Result<Vec<PathBuf>, BgpError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(format!("list {}", self.root.display()))(e)),
        };
        Ok(entries
            .flatten()
            .filter(|e| e.file_name() != state::STAGING)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect())
    }

    /// Every record on the node (unparseable ones are skipped: they must not stop GC, and
    /// [`Self::others_of_vpc`] still counts them).
    pub fn all(&self) -> Result<Vec<Publication>, BgpError> {
        let mut out = Vec::new();
        for dir in self.vpc_dirs()? {
            for file in state::json_files(&dir, "").map_err(state_err)? {
                if let Ok(Some(p)) = state::read_json::<Publication>(&file) {
                    out.push(p);
                }
            }
        }
        Ok(out)
    }

    /// Seeds the records once from the masters' records, for a node upgraded from a version
    /// that kept none: without them the first DEL of a VPC would find no record of its other
    /// live attachments and retract the VPC. Every master record stands for an attachment
    /// whose chain ADD may have published (an over-count only keeps a VRF instance longer,
    /// until that attachment's DEL or GC). The attachment of the call that seeds (`current`) is
    /// not seeded: its ADD writes its own record (and undoes it when it fails), its DEL has
    /// nothing to remove. One `stat` once seeded.
    pub fn ensure_seeded(
        &self,
        node: &NodeConfig,
        node_name: &str,
        current: Option<&AttachmentKey<'_>>,
    ) -> Result<usize, BgpError> {
        let marker = self.root.join(SEEDED);
        if marker.exists() {
            return Ok(0);
        }
        let lock = node.state_dir.join("locks").join("bgp-seed");
        let _seed = lockfile::acquire(&lock, LOCAL_LOCK_WAIT)
            .map_err(|e| BgpError::Store(StoreError::Lock(e)))?;
        if marker.exists() {
            return Ok(0);
        }
        let masters = Records::new(&node.state_dir).all().map_err(state_err)?;
        let mut seeded = 0;
        let is_current =
            |r: &Record| current.is_some_and(|c| r.is_for(c.network, c.container_id, c.ifname));
        for record in masters.iter().filter(|r| !is_current(r)) {
            if self.seed_one(record, &node.namespace, node_name)? {
                seeded += 1;
            }
        }
        state::write_bytes(&marker, b"1\n").map_err(state_err)?;
        log::info(
            "BGP: publication records seeded from the masters' records",
            json!({"records": seeded}),
        );
        Ok(seeded)
    }

    fn seed_one(
        &self,
        record: &Record,
        namespace: &str,
        node_name: &str,
    ) -> Result<bool, BgpError> {
        let Ok(ids) = ChainIds::of(&json!({"vpc": record.vpc, "vpcattachment": record.attachment}))
        else {
            return Ok(false);
        };
        let key = AttachmentKey {
            network: &record.network,
            container_id: &record.container_id,
            ifname: &record.ifname,
        };
        let path = self.path(&ids.vpc, &ids.host_ifname(), &record.container_id);
        if path.exists() {
            return Ok(false);
        }
        let p = Publication::named(&key, &ids, namespace, node_name);
        state::write_json(&path, &p).map_err(state_err)?;
        Ok(true)
    }
}

/// The last step of every retraction (DEL, a failed ADD's rollback, GC): under the VPC's lock,
/// retires the VPC's VRF instance `vrf_instance` when no record of the VPC but `own` (the record
/// of the attachment whose objects were just retracted, if it had one) is left, then removes
/// `own`. The record goes last, so a retraction killed in between leaves a record that names
/// the instance: the runtime's retried DEL or its GC (which finds only records) finishes it.
/// Idempotent, and run also without a record of one's own (a DEL retried after such a kill), so
/// any order of the chain's DELs ends with nothing of the VPC published. Whether an instance was
/// deleted.
pub fn forget_and_retire(
    node: &NodeConfig,
    store: &dyn ObjectStore,
    vpc: &VpcId,
    own: Option<&Publication>,
    vrf_instance: &str,
) -> Result<bool, BgpError> {
    let records = Publications::new(&node.state_dir);
    let _vpc = vpc_lock(node, vpc)?;
    let retired = match records.others_of_vpc(vpc, own)? {
        true => false,
        false => {
            galactic_core::failpoint::hit("bgp-before-vrf-retire")?;
            let uid = own
                .and_then(|p| p.published.as_ref())
                .map(|p| p.vrf.uid.as_str())
                .filter(|uid| !uid.is_empty());
            publish::retire_vrf_instance(store, &node.namespace, vrf_instance, uid)?
        }
    };
    if let Some(own) = own {
        records.remove(vpc, own)?;
    }
    Ok(retired)
}

/// [`forget_and_retire`] for a record read back from disk (GC).
pub fn forget_recorded(
    node: &NodeConfig,
    store: &dyn ObjectStore,
    p: &Publication,
) -> Result<bool, BgpError> {
    match p.vpc_id() {
        Some(vpc) => forget_and_retire(node, store, &vpc, Some(p), &p.vrf_instance),
        None => Ok(false),
    }
}
