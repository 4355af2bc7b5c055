//! Retracting what ADD published: DEL for one attachment, GC for what a killed ADD or a lost
//! DEL left. With the Kubernetes publisher, objects a crash left in the cluster are also
//! reclaimed by the galactic-router's GC (as upstream); with the local publisher nothing else
//! would ever reclaim them, so GC here does.

use crate::annotations;
use crate::attachments::{held, others_of_vpc, published_ids, vpc_lock};
use crate::error::BgpError;
use crate::netns;
use crate::ops::{node_name, Backend};
use crate::publish;
use crate::slice::{self, PodRef};
use crate::store::{Documents, ObjectStore};
use galactic_core::attachment::Record;
use galactic_core::cni::Request;
use galactic_core::ident::{
    bgp_advertisement_name, bgp_vrf_instance_name, is_legacy_advertisement_name, tenant_identifier,
    ChainIds,
};
use galactic_core::log;
use galactic_kube::{BGPAdvertisement, BGPVRFInstance, ClientOptions};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// DEL: retracts what ADD published for this container: its EndpointSlice, its records on the
/// attachment's advertisement (the advertisement itself when no live container is left), and the
/// VPC's BGPVRFInstance of this node when no other attachment of the VPC is left here. What to
/// retract is named by the master's record of the attachment (what ADD worked from), or by the
/// stanza when there is none. Transient failures are code 11 (the runtime retries); anything
/// else is logged and DEL succeeds (the dispatcher's rule for DEL).
pub fn del(req: &Request) -> Result<(), BgpError> {
    let (Ok(cid), Ok(ifname)) = (req.env.container_id(), req.env.ifname()) else {
        log::info(
            "DEL: no container id or interface name; nothing published",
            json!({}),
        );
        return Ok(());
    };
    let Some(ids) = published_ids(req, cid.as_str(), ifname.as_str()) else {
        log::warn(
            "DEL: no attachment record and the stanza names no VPC attachment; nothing to retract",
            json!({}),
        );
        return Ok(());
    };
    let backend = Backend::open(&req.node, ClientOptions::default())?;
    if let Backend::Local(local) = &backend {
        // A killed ADD's temporaries go with its DEL, also of documents DEL does not rewrite.
        let _ = local.sweep_temporaries();
    }
    let store = backend.store();
    let ns = req.node.namespace.as_str();
    let tenant = tenant_identifier(&ids.vpc, &ids.att);
    if let Some(pod) = PodRef::from_args(&req.env.args) {
        if slice::delete_owned(store, &pod, &tenant)? {
            log::info(
                "DEL: EndpointSlice deleted",
                json!({"pod": format!("{}/{}", pod.namespace, pod.name)}),
            );
        }
    }
    let node = node_name(&req.node, &backend)?;
    let adv_name = bgp_advertisement_name(ids.vpc.raw(), ids.att.raw(), &node);
    let host = ids.host_ifname();
    let retraction = publish::retract_advertisement(
        store,
        ns,
        &adv_name,
        &[cid.as_str()],
        Some(&host),
        &netns::alive,
    )?;
    // A container the Go chain (or our chain before decision 0018) published.
    let legacy = publish::leave_legacy_advertisement(store, ns, &ids, cid.as_str())?;
    let _vpc = vpc_lock(&req.node, &ids.vpc)?;
    let retired = match others_of_vpc(req, &ids.vpc, cid.as_str(), ifname.as_str()) {
        0 => {
            galactic_core::failpoint::hit("bgp-before-vrf-retire")?;
            let vrf_name = bgp_vrf_instance_name(ids.vpc.raw(), &node);
            publish::retire_vrf_instance(store, ns, &vrf_name)?.then_some(vrf_name)
        }
        _ => None,
    };
    log::info(
        "DEL: BGP publication retracted",
        json!({"advertisement": adv_name, "retraction": retraction.as_str(),
               "sharedAdvertisement": legacy.as_str(), "vrfInstanceDeleted": retired}),
    );
    Ok(())
}

/// GC (local publisher): retracts, from every advertisement, the containers no master on the
/// node holds an attachment for (and deletes advertisements left without one), and deletes this
/// node's VRF instances of VPCs without an attachment here, after moving our own two-segment
/// documents of before decision 0018 to their per-node names. Kubernetes objects are left to the
/// router's GC, as upstream; there GC only moves the containers the runtime lists off the
/// attachment's shared advertisement of an older chain (`legacy`): its other records may be
/// other nodes' containers, which this node cannot judge.
pub fn gc(req: &Request) -> Result<(), BgpError> {
    let backend = Backend::open(&req.node, ClientOptions::default())?;
    if backend.is_kube() {
        let moved = crate::legacy::move_listed(req, &backend)?;
        log::info(
            "GC: published Kubernetes objects are reclaimed by the router's GC",
            json!({"movedOffSharedAdvertisement": moved}),
        );
        return Ok(());
    }
    if let Backend::Local(local) = &backend {
        local.sweep_temporaries()?;
    }
    let store = backend.store();
    let ns = req.node.namespace.as_str();
    let records = held(&req.node)?;
    let node = node_name(&req.node, &backend)?;
    let migrated = migrate_legacy(store, ns, &node)?;
    let retracted = retract_gone(store, ns, &records, &node)?;
    let retired = retire_vrf_instances(store, ns, &records, &node)?;
    log::info(
        "GC: stale publications retracted",
        json!({"containers": retracted, "vrfInstances": retired, "migrated": migrated}),
    );
    Ok(())
}

/// Moves every two-segment document (our chain before decision 0018) to its per-node name; how
/// many.
fn migrate_legacy(store: &dyn ObjectStore, ns: &str, node: &str) -> Result<usize, BgpError> {
    let mut migrated = 0;
    for adv in store.list_typed::<BGPAdvertisement>(ns)? {
        let Some(name) = adv.ok().and_then(|a| a.metadata.name) else {
            continue;
        };
        if is_legacy_advertisement_name(&name)
            && publish::migrate_local_legacy(store, ns, &name, node)?
        {
            migrated += 1;
        }
    }
    Ok(migrated)
}

/// Retracts from every advertisement the containers no master on the node holds; how many.
/// Every local document is this node's, so this also drains the two-segment documents our
/// chain wrote before decision 0018.
fn retract_gone(
    store: &dyn ObjectStore,
    ns: &str,
    records: &[Record],
    node: &str,
) -> Result<usize, BgpError> {
    let live: BTreeSet<String> = records
        .iter()
        .map(|r| annotations::cid41(&r.container_id).to_owned())
        .collect();
    // The host interface of each attachment the masters hold, by its advertisement's name.
    let hosts: BTreeMap<String, String> = records
        .iter()
        .filter_map(|r| {
            let ids = ChainIds::of(&json!({"vpc": r.vpc, "vpcattachment": r.attachment})).ok()?;
            Some((
                bgp_advertisement_name(&r.vpc, &r.attachment, node),
                ids.host_ifname(),
            ))
        })
        .collect();
    let mut retracted = 0;
    for adv in store.list_typed::<BGPAdvertisement>(ns)? {
        // A document that is no BGPAdvertisement is not ours to judge.
        let Ok(adv) = adv else { continue };
        let name = adv.metadata.name.clone().unwrap_or_default();
        let recorded = annotations::recorded(&adv.metadata.annotations.unwrap_or_default());
        let gone: Vec<&str> = recorded
            .iter()
            .map(String::as_str)
            .filter(|cid| !live.contains(*cid))
            .collect();
        if gone.is_empty() {
            continue;
        }
        let host = hosts.get(&name).map(String::as_str);
        publish::retract_advertisement(store, ns, &name, &gone, host, &netns::alive)?;
        retracted += gone.len();
    }
    Ok(retracted)
}

/// Deletes this node's VRF instances of VPCs without an attachment here; how many.
fn retire_vrf_instances(
    store: &dyn ObjectStore,
    ns: &str,
    records: &[Record],
    node: &str,
) -> Result<usize, BgpError> {
    let wanted: BTreeSet<String> = records
        .iter()
        .map(|r| bgp_vrf_instance_name(&r.vpc, node))
        .collect();
    let suffix = format!("-{node}");
    let mut retired = 0;
    for vrf in store.list_typed::<BGPVRFInstance>(ns)? {
        let Ok(vrf) = vrf else { continue };
        let name = vrf.metadata.name.clone().unwrap_or_default();
        if name.ends_with(&suffix) && !wanted.contains(&name) {
            store.delete_unchanged_typed(ns, &vrf)?;
            retired += 1;
        }
    }
    Ok(retired)
}
