//! What the node's masters hold: their attachment records say which attachments exist on this
//! node (a master records an attachment before galactic-bgp runs in its chain, and removes the
//! record after galactic-bgp's DEL), so they decide what DEL and GC may retract. And the per-VPC
//! lock under which the VPC's VRF instance is found or retired.

use crate::error::BgpError;
use crate::publications::{AttachmentKey, Publications};
use crate::store::local::LOCAL_LOCK_WAIT;
use crate::store::StoreError;
use galactic_core::attachment::{Record, Records};
use galactic_core::cni::Request;
use galactic_core::config::NodeConfig;
use galactic_core::ident::{ChainIds, VpcId};
use galactic_core::lockfile::{self, LockGuard};
use serde_json::json;

/// The ids ADD published under: the master's record of (network, container, interface), else
/// the stanza's. Looked up by name first, so a DEL opens its own attachment's files only
/// (decision 0079): the master's record of the stanza's host interface when it is this
/// attachment's, else this attachment's publication record under the stanza's ids (a reversed
/// DEL runs after the master's record went). Only when neither is there (a stanza that names
/// another attachment than its ADD did, a DEL retried after everything went) is the record
/// looked for among every master record.
pub fn published_ids(req: &Request, cid: &str, ifname: &str) -> Option<ChainIds> {
    let masters = Records::new(&req.node.state_dir);
    let stanza = ChainIds::of(&req.conf.raw).ok();
    if let Some(ids) = &stanza {
        let host = ids.host_ifname();
        let named = masters.get(&host).ok().flatten();
        if let Some(r) = named.filter(|r| r.is_for(&req.conf.name, cid, ifname)) {
            return ids_of(&r.vpc, &r.attachment);
        }
        let key = AttachmentKey {
            network: &req.conf.name,
            container_id: cid,
            ifname,
        };
        let own = Publications::new(&req.node.state_dir).find(&ids.vpc, &host, &key);
        if let Ok(Some(p)) = own {
            return ids_of(&p.vpc, &p.attachment);
        }
    }
    let recorded = masters
        .find(&req.conf.name, cid, ifname)
        .ok()
        .flatten()
        .and_then(|r| ids_of(&r.vpc, &r.attachment));
    recorded.or(stanza)
}

/// The ids of a recorded VPC and attachment.
fn ids_of(vpc: &str, attachment: &str) -> Option<ChainIds> {
    ChainIds::of(&json!({"vpc": vpc, "vpcattachment": attachment})).ok()
}

/// Every attachment the node's masters hold.
pub fn held(node: &NodeConfig) -> Result<Vec<Record>, BgpError> {
    Records::new(&node.state_dir)
        .all()
        .map_err(|e| BgpError::Store(StoreError::State(e)))
}

/// The node's lock of the VPC's BGPVRFInstance: ADD holds it while it ensures the instance and
/// DEL while it decides whether the VPC's last attachment is going, so DEL never deletes an
/// instance an ADD of another attachment has just found.
pub fn vpc_lock(node: &NodeConfig, vpc: &VpcId) -> Result<LockGuard, BgpError> {
    let path = node
        .state_dir
        .join("locks")
        .join(format!("bgp-vpc-{}", vpc.hex()));
    lockfile::acquire(&path, LOCAL_LOCK_WAIT).map_err(|e| BgpError::Store(StoreError::Lock(e)))
}
