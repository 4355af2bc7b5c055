//! What the node's masters hold: their attachment records say which attachments exist on this
//! node (a master records an attachment before galactic-bgp runs in its chain, and removes the
//! record after galactic-bgp's DEL), so they decide what DEL and GC may retract. And the per-VPC
//! lock under which the VPC's VRF instance is found or retired.

use crate::error::BgpError;
use crate::store::local::LOCAL_LOCK_WAIT;
use crate::store::StoreError;
use galactic_core::attachment::{Record, Records};
use galactic_core::cni::Request;
use galactic_core::config::NodeConfig;
use galactic_core::ident::{ChainIds, VpcId};
use galactic_core::lockfile::{self, LockGuard};
use serde_json::json;

/// The ids ADD published under: the master's record of (network, container, interface), else
/// the stanza's.
pub fn published_ids(req: &Request, cid: &str, ifname: &str) -> Option<ChainIds> {
    let recorded = Records::new(&req.node.state_dir)
        .find(&req.conf.name, cid, ifname)
        .ok()
        .flatten()
        .and_then(|r| ChainIds::of(&json!({"vpc": r.vpc, "vpcattachment": r.attachment})).ok());
    recorded.or_else(|| ChainIds::of(&req.conf.raw).ok())
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
