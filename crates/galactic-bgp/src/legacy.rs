//! GC with the Kubernetes publisher: this node's containers on the attachment's shared
//! advertisement `{hexvpc}-{hexatt}` of older chains (decision 0018) move onto this node's
//! advertisement, as their ADD would have moved them (a pod the Go chain attached before the
//! switch gets no ADD again, and its CHECK may never come).
//!
//! A container is this node's when the runtime lists it as a valid attachment of the network
//! (the runtime is this node's, and container ids are unique across nodes) and the netns its
//! record names is alive here. Its record moves as the older chain wrote it (netns and
//! addresses), with this node's router and VRF id; every other record, and the shared object's
//! `routerRef`, stay for their own node.

use crate::annotations::{self, cid41, ContainerRecord};
use crate::attachments::published_ids;
use crate::check::check_vrf;
use crate::error::BgpError;
use crate::netns;
use crate::ops::{advertise_here, node_name, Backend};
use crate::publish::{self, AdvertisementInput};
use crate::store::Documents;
use galactic_core::cni::Request;
use galactic_core::ident::{
    bgp_advertisement_name, bgp_vrf_instance_name, legacy_advertisement_name, route_target,
    ChainIds,
};
use galactic_core::log;
use galactic_core::rollback::Rollback;
use galactic_kube::BGPAdvertisement;
use serde_json::json;

/// Moves this node's listed containers off the network's shared advertisement; how many.
/// Without a valid list nothing moves (decision 0002).
pub fn move_listed(req: &Request, backend: &Backend) -> Result<usize, BgpError> {
    let (Some(valid), Ok(ids)) = (req.conf.valid_attachments()?, ChainIds::of(&req.conf.raw))
    else {
        return Ok(0);
    };
    let store = backend.store();
    let ns = req.node.namespace.as_str();
    let read = |name: &str| -> Result<annotations::Annotations, BgpError> {
        Ok(store
            .get_typed::<BGPAdvertisement>(ns, name)?
            .and_then(|o| o.metadata.annotations)
            .unwrap_or_default())
    };
    let shared = read(&legacy_advertisement_name(ids.vpc.raw(), ids.att.raw()))?;
    // A container whose master recorded another attachment is not this stanza's to move.
    let listed: Vec<_> = valid
        .iter()
        .filter(|a| annotations::records(&shared, &a.container_id))
        .filter(|a| published_ids(req, &a.container_id, &a.ifname).as_ref() == Some(&ids))
        .collect();
    if listed.is_empty() {
        return Ok(0);
    }
    let node = node_name(&req.node, backend)?;
    let router = publish::lookup_router(store, ns, &node, backend.is_kube())?;
    let rt = route_target(router.asn, &ids.vpc);
    let vrf_name = bgp_vrf_instance_name(ids.vpc.raw(), &node);
    let Some(vrf_id) = usable_vrf(check_vrf(store, ns, &vrf_name, &router, &rt))? else {
        return Ok(0);
    };
    let name = bgp_advertisement_name(ids.vpc.raw(), ids.att.raw(), &node);
    let here = read(&name)?;
    let host_ifname = ids.host_ifname();
    let mut moved = 0;
    for cid in listed.iter().map(|a| a.container_id.as_str()) {
        let Some(record) = ContainerRecord::read(&shared, cid41(cid)) else {
            continue;
        };
        if annotations::records(&here, cid) || !netns::alive(record.netns) {
            continue;
        }
        let input = AdvertisementInput {
            namespace: ns,
            name: &name,
            router: &router,
            route_target: &rt,
            vrf_id,
            container_id: cid,
            record,
            host_ifname: &host_ifname,
        };
        let mut rollback = Rollback::new();
        advertise_here(store, &input, &ids, &mut rollback)?;
        rollback.commit();
        moved += 1;
    }
    Ok(moved)
}

/// The VRF id of this node's VRF instance, `None` (logged) when the instance is not usable:
/// missing, or naming another router. The containers then stay where they are.
fn usable_vrf(checked: Result<u32, BgpError>) -> Result<Option<u32>, BgpError> {
    match checked {
        Ok(id) => Ok(Some(id)),
        Err(BgpError::Check(why)) => {
            log::warn(
                "GC: containers of an older chain stay on the shared BGPAdvertisement: this node's VRF instance is not usable",
                json!({"reason": why}),
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
