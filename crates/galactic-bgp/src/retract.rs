//! Retracting what ADD published: DEL for one attachment, GC for what a lost DEL left. Both go
//! by galactic-bgp's own publication records (`publications`), so the VPC's last attachment is
//! judged by what galactic-bgp still publishes, whatever order the chain's other plugins tear
//! down in. Kubernetes objects no record names (a crash of an older version) are also reclaimed
//! by galactic-router's GC (as upstream); with the local publisher nothing else would ever
//! reclaim them, so GC here sweeps them.

use crate::annotations;
use crate::attachments::{held, published_ids};
use crate::error::BgpError;
use crate::netns;
use crate::ops::{node_name, Backend};
use crate::publications::{
    forget_and_retire, forget_recorded, AttachmentKey, Publication, Publications, SliceRef,
};
use crate::publish;
use crate::slice::{self, PodRef};
use crate::store::{Documents, Done, Kind, ObjectStore, Op, StoreError};
use galactic_core::attachment::Record;
use galactic_core::cni::Request;
use galactic_core::ident::{
    bgp_advertisement_name, bgp_vrf_instance_name, is_legacy_advertisement_name, ChainIds,
};
use galactic_core::log;
use galactic_kube::{BGPAdvertisement, BGPVRFInstance, ClientOptions};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// DEL: retracts what ADD published for this container: its EndpointSlice, its records on the
/// attachment's advertisement (the advertisement itself when no live container is left), then
/// its publication record, and the VPC's BGPVRFInstance of this node when no record of the VPC
/// is left ([`forget_and_retire`]). What to retract is named by this attachment's publication
/// record (what ADD published), else by the deterministic names of the master's record of the
/// attachment or of the stanza. Transient failures are code 11 (the runtime retries); anything
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
    let node = node_name(&req.node, &backend)?;
    let records = Publications::new(&req.node.state_dir);
    let key = AttachmentKey {
        network: &req.conf.name,
        container_id: cid.as_str(),
        ifname: ifname.as_str(),
    };
    records.ensure_seeded(&req.node, &node, Some(&key))?;
    let own = records.find(&ids.vpc, &ids.host_ifname(), &key)?;
    let mut target = own
        .clone()
        .unwrap_or_else(|| Publication::named(&key, &ids, &req.node.namespace, &node));
    if target.endpoint_slice.is_none() {
        target.endpoint_slice = PodRef::from_args(&req.env.args).map(|p| SliceRef {
            namespace: p.namespace,
            name: p.name,
        });
    }
    let store = backend.store();
    let retraction = retract_objects(store, &target, &ids)?;
    // Debug builds: a test kills the DEL here, its objects retracted and its record still there.
    galactic_core::failpoint::hit("bgp-before-forget")?;
    let retired = forget_and_retire(
        &req.node,
        store,
        &ids.vpc,
        own.as_ref(),
        &target.vrf_instance,
    )?;
    log::info(
        "DEL: BGP publication retracted",
        json!({"advertisement": target.advertisement, "retraction": retraction.as_str(),
               "recorded": own.is_some(),
               "vrfInstanceDeleted": retired.then_some(&target.vrf_instance)}),
    );
    Ok(())
}

/// Retracts the objects `p` names for its container: the pod's EndpointSlice, the container's
/// records on the attachment's advertisement of this node and on the shared one of older chains
/// (decision 0018). What the attachment's ADD recorded of its writes is deleted without reading
/// first, both deletes in flight together: the EndpointSlice by its uid, the advertisement by
/// its uid and resourceVersion when ADD's write left this container its only record (any write
/// since, another container's record or a status, fails that precondition, and the
/// advertisement is read and retracted from). A record with what ADD published also says its
/// ADD took the container off the shared advertisement. Idempotent: a retried DEL finds nothing
/// left and goes on.
fn retract_objects(
    store: &dyn ObjectStore,
    p: &Publication,
    ids: &ChainIds,
) -> Result<publish::Retraction, BgpError> {
    let recorded = RecordedDeletes::of(p);
    let mut answers = store.batch(&recorded.ops(p)).into_iter();
    let slice_answer = recorded.slice.and_then(|_| answers.next());
    let adv_answer = recorded.sole.and_then(|_| answers.next());
    retract_slice(store, p, slice_answer)?;
    let retraction = retract_recorded_advertisement(store, p, adv_answer)?;
    if p.published.is_some() {
        return Ok(retraction);
    }
    leave_older_chains(store, p, ids)?;
    Ok(retraction)
}

/// What the attachment's ADD recorded of its writes, so DEL can delete it without reading
/// first.
struct RecordedDeletes<'p> {
    /// The pod's EndpointSlice and its uid.
    slice: Option<(&'p SliceRef, &'p str)>,
    /// The advertisement's uid and resourceVersion, when ADD's write left this container its
    /// only record.
    sole: Option<(&'p str, &'p str)>,
}

impl<'p> RecordedDeletes<'p> {
    fn of(p: &'p Publication) -> Self {
        let published = p.published.as_ref();
        let slice_uid = published.and_then(|r| r.endpoint_slice_uid.as_deref());
        Self {
            slice: p.endpoint_slice.as_ref().zip(slice_uid),
            sole: published.and_then(|r| {
                r.advertisement_sole_version
                    .as_deref()
                    .map(|v| (r.advertisement_uid.as_str(), v))
            }),
        }
    }

    /// The guarded deletes, in flight together: the EndpointSlice's first, then the
    /// advertisement's.
    fn ops(&self, p: &'p Publication) -> Vec<Op<'p>> {
        let mut ops = Vec::new();
        if let Some((slice, uid)) = self.slice {
            ops.push(Op::Delete {
                kind: Kind::EndpointSlice,
                namespace: &slice.namespace,
                name: &slice.name,
                uid,
                version: None,
            });
        }
        if let Some((uid, version)) = self.sole {
            ops.push(Op::Delete {
                kind: Kind::Advertisement,
                namespace: &p.namespace,
                name: &p.advertisement,
                uid,
                version: Some(version),
            });
        }
        ops
    }
}

/// The attachment's advertisement after the recorded delete's `answer`: deleted; or, written
/// since ADD (another container, a status: 409) or never recorded, read and retracted from.
fn retract_recorded_advertisement(
    store: &dyn ObjectStore,
    p: &Publication,
    answer: Option<Result<Done, StoreError>>,
) -> Result<publish::Retraction, BgpError> {
    Ok(match answer {
        Some(Ok(_)) => publish::Retraction::Deleted,
        Some(Err(e)) if !e.is_conflict() => return Err(e.into()),
        Some(Err(_)) | None => publish::retract_advertisement(
            store,
            &p.namespace,
            &p.advertisement,
            &[p.container_id.as_str()],
            Some(&p.host_ifname),
            &netns::alive,
        )?,
    })
}

/// The container off the attachment's shared advertisement, for a container the Go chain (or
/// our chain before decision 0018) published: a record without what ADD published says no ADD
/// of this chain took it off.
fn leave_older_chains(
    store: &dyn ObjectStore,
    p: &Publication,
    ids: &ChainIds,
) -> Result<(), BgpError> {
    let legacy = publish::leave_legacy_advertisement(store, &p.namespace, ids, &p.container_id)?;
    if legacy != publish::Retraction::NotListed {
        log::info(
            "DEL: container left the shared BGPAdvertisement of an older chain",
            json!({"retraction": legacy.as_str()}),
        );
    }
    Ok(())
}

/// The pod's EndpointSlice after the recorded delete's `answer`; without one, or when the
/// slice of the name is another one than ADD published (409), read and deleted when it carries
/// the attachment's tenant id, as before uids were recorded.
fn retract_slice(
    store: &dyn ObjectStore,
    p: &Publication,
    answer: Option<Result<Done, StoreError>>,
) -> Result<(), BgpError> {
    let Some(slice) = &p.endpoint_slice else {
        return Ok(());
    };
    let pod = format!("{}/{}", slice.namespace, slice.name);
    let deleted = match answer {
        Some(Ok(_)) => true,
        Some(Err(e)) if !e.is_conflict() => return Err(e.into()),
        Some(Err(_)) | None => {
            let pod = PodRef {
                name: slice.name.clone(),
                namespace: slice.namespace.clone(),
                uid: None,
            };
            slice::delete_owned(store, &pod, &p.tenant)?
        }
    };
    if deleted {
        log::info("DEL: EndpointSlice deleted", json!({"pod": pod}));
    }
    Ok(())
}

/// GC: first, for both publishers, retracts what this node's publication records name for the
/// attachments of this network the runtime no longer lists (a DEL that never came), as DEL
/// would. Then, with the local publisher, it retracts from every advertisement the containers
/// no record or master holds (and deletes advertisements left without one), and deletes this
/// node's VRF instances of VPCs without an attachment here, after moving our own two-segment
/// documents of before decision 0018 to their per-node names. Kubernetes objects no record
/// names are left to the router's GC, as upstream; there GC only moves the containers the
/// runtime lists off the attachment's shared advertisement of an older chain (`legacy`): its
/// other records may be other nodes' containers, which this node cannot judge.
pub fn gc(req: &Request) -> Result<(), BgpError> {
    let backend = Backend::open(&req.node, ClientOptions::default())?;
    let node = node_name(&req.node, &backend)?;
    let records = Publications::new(&req.node.state_dir);
    records.ensure_seeded(&req.node, &node, None)?;
    // The node-wide row ADD resolves once (decision 0079): resolved again once per GC.
    crate::datapath::refresh_public_uplink(&req.node);
    let masters = held(&req.node)?;
    let forgotten = retract_unlisted(req, &backend, &records, &masters)?;
    records.sweep_temporaries()?;
    if backend.is_kube() {
        let moved = crate::legacy::move_listed(req, &backend)?;
        log::info(
            "GC: published Kubernetes objects no record names are reclaimed by the router's GC",
            json!({"movedOffSharedAdvertisement": moved, "unlistedRetracted": forgotten}),
        );
        return Ok(());
    }
    if let Backend::Local(local) = &backend {
        local.sweep_temporaries()?;
    }
    let store = backend.store();
    let ns = req.node.namespace.as_str();
    let live = Live::of(&records.all()?, &masters, &node);
    let migrated = migrate_legacy(store, ns, &node)?;
    let retracted = retract_gone(store, ns, &live)?;
    let retired = retire_vrf_instances(store, ns, &live, &node)?;
    log::info(
        "GC: stale publications retracted",
        json!({"containers": retracted, "vrfInstances": retired, "migrated": migrated,
               "unlistedRetracted": forgotten}),
    );
    Ok(())
}

/// The records of this network's attachments the runtime no longer lists, retracted as DEL
/// would; how many. A record whose attachment a master still holds is kept: the master's GC
/// runs before ours in the list and removes the records of what it tears down, so a master
/// record left means the attachment lives (the masters' records are a keep-only signal here,
/// never a reason to retract). Without a valid list nothing is judged.
fn retract_unlisted(
    req: &Request,
    backend: &Backend,
    records: &Publications,
    masters: &[Record],
) -> Result<usize, BgpError> {
    let Some(valid) = req.conf.valid_attachments()? else {
        return Ok(0);
    };
    let listed = |p: &Publication| {
        valid
            .iter()
            .any(|v| v.container_id == p.container_id && v.ifname == p.ifname)
    };
    let held = |p: &Publication| {
        masters
            .iter()
            .any(|m| m.is_for(&p.network, &p.container_id, &p.ifname))
    };
    let mut forgotten = 0;
    for p in records.all()? {
        if p.network != req.conf.name || listed(&p) || held(&p) {
            continue;
        }
        let Ok(ids) = ChainIds::of(&json!({"vpc": p.vpc, "vpcattachment": p.attachment})) else {
            continue;
        };
        retract_objects(backend.store(), &p, &ids)?;
        forget_recorded(&req.node, backend.store(), &p)?;
        forgotten += 1;
    }
    Ok(forgotten)
}

/// What GC keeps (local publisher): the containers, advertisements' host interfaces and VRF
/// instances of every attachment a publication record or a master holds. The masters' records
/// only add to what is kept: an attachment with a master record lives (see
/// [`retract_unlisted`]).
struct Live {
    containers: BTreeSet<String>,
    /// The host interface of each attachment, by its advertisement's name.
    hosts: BTreeMap<String, String>,
    vrf_instances: BTreeSet<String>,
}

impl Live {
    fn of(records: &[Publication], masters: &[Record], node: &str) -> Self {
        let mut live = Self {
            containers: BTreeSet::new(),
            hosts: BTreeMap::new(),
            vrf_instances: BTreeSet::new(),
        };
        for p in records {
            live.containers
                .insert(annotations::cid41(&p.container_id).to_owned());
            live.hosts
                .insert(p.advertisement.clone(), p.host_ifname.clone());
            live.vrf_instances.insert(p.vrf_instance.clone());
        }
        for r in masters {
            live.containers
                .insert(annotations::cid41(&r.container_id).to_owned());
            if let Ok(ids) = ChainIds::of(&json!({"vpc": r.vpc, "vpcattachment": r.attachment})) {
                live.hosts.insert(
                    bgp_advertisement_name(&r.vpc, &r.attachment, node),
                    ids.host_ifname(),
                );
            }
            live.vrf_instances
                .insert(bgp_vrf_instance_name(&r.vpc, node));
        }
        live
    }
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

/// Retracts from every advertisement the containers GC does not keep; how many. Every local
/// document is this node's, so this also drains the two-segment documents our chain wrote
/// before decision 0018.
fn retract_gone(store: &dyn ObjectStore, ns: &str, live: &Live) -> Result<usize, BgpError> {
    let mut retracted = 0;
    for adv in store.list_typed::<BGPAdvertisement>(ns)? {
        // A document that is no BGPAdvertisement is not ours to judge.
        let Ok(adv) = adv else { continue };
        let name = adv.metadata.name.clone().unwrap_or_default();
        let recorded = annotations::recorded(&adv.metadata.annotations.unwrap_or_default());
        let gone: Vec<&str> = recorded
            .iter()
            .map(String::as_str)
            .filter(|cid| !live.containers.contains(*cid))
            .collect();
        if gone.is_empty() {
            continue;
        }
        let host = live.hosts.get(&name).map(String::as_str);
        publish::retract_advertisement(store, ns, &name, &gone, host, &netns::alive)?;
        retracted += gone.len();
    }
    Ok(retracted)
}

/// Deletes this node's VRF instances of VPCs without an attachment here; how many.
fn retire_vrf_instances(
    store: &dyn ObjectStore,
    ns: &str,
    live: &Live,
    node: &str,
) -> Result<usize, BgpError> {
    let wanted = &live.vrf_instances;
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
