//! Retracting a container's publication (DEL, and GC with the local publisher): its records on
//! the attachment's advertisement, and the VPC's VRF instance of this node with the VPC's last
//! attachment here.

use super::advertisement::routes;
use super::MAX_ATTEMPTS;
use crate::annotations;
use crate::error::BgpError;
use crate::store::{Documents, ObjectStore};
use galactic_core::ident::{legacy_advertisement_name, per_node_advertisement_name, ChainIds};
use galactic_kube::{BGPAdvertisement, BGPVRFInstance};

/// What DEL did to an advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retraction {
    /// There is no advertisement, or it records none of the containers.
    NotListed,
    /// The containers' records and prefixes are gone; other containers keep it.
    Retracted,
    /// No live container was left: the advertisement is gone.
    Deleted,
}

impl Retraction {
    /// The log field's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotListed => "not listed",
            Self::Retracted => "retracted",
            Self::Deleted => "deleted",
        }
    }
}

/// Removes the records of `containers` (and with them their prefixes) from the advertisement
/// `name`, with those of dead containers as ADD prunes them, or the whole advertisement when no
/// live container is left. The spec is rebuilt from the remaining records as ADD builds it: an
/// advertisement left without prefixes originates from `host_ifname` (else from what it
/// originated from before), decision 0016. Every write carries the resourceVersion it read, and
/// the delete its uid and resourceVersion, so a concurrent ADD's record is never lost: on a
/// conflict the advertisement is read again.
pub fn retract_advertisement(
    store: &dyn ObjectStore,
    namespace: &str,
    name: &str,
    containers: &[&str],
    host_ifname: Option<&str>,
    alive: &dyn Fn(&str) -> bool,
) -> Result<Retraction, BgpError> {
    for _ in 1..=MAX_ATTEMPTS {
        let Some(mut object) = store.get_typed::<BGPAdvertisement>(namespace, name)? else {
            return Ok(Retraction::NotListed);
        };
        let mut ann = object.metadata.annotations.clone().unwrap_or_default();
        let mut found = false;
        for cid in containers {
            found |= annotations::forget(&mut ann, cid);
        }
        if !found {
            return Ok(Retraction::NotListed);
        }
        annotations::prune_dead(&mut ann, |p| alive(p));
        let outcome = if annotations::containers(&ann) == 0 {
            store
                .delete_unchanged_typed(namespace, &object)
                .map(|()| Retraction::Deleted)
        } else {
            let (prefixes, from_host) = routes(annotations::all_prefixes(&ann), host_ifname);
            let before = object.spec.originate_from.take();
            object.spec.originate_from = if prefixes.is_empty() {
                from_host.or(before)
            } else {
                None
            };
            object.spec.prefixes = prefixes;
            object.metadata.annotations = Some(ann);
            store
                .replace_typed(namespace, &object)
                .map(|_| Retraction::Retracted)
        };
        match outcome {
            Ok(done) => return Ok(done),
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(BgpError::Contended {
        what: format!("BGPAdvertisement {namespace}/{name}"),
        attempts: MAX_ATTEMPTS,
    })
}

/// Removes `cid`'s record from the attachment's shared advertisement `{hexvpc}-{hexatt}` of
/// older chains (decision 0018). No record is pruned as dead: the object may hold other nodes'
/// containers, whose netns cannot be judged here. It goes with its last record.
pub fn leave_legacy_advertisement(
    store: &dyn ObjectStore,
    namespace: &str,
    ids: &ChainIds,
    cid: &str,
) -> Result<Retraction, BgpError> {
    let name = legacy_advertisement_name(ids.vpc.raw(), ids.att.raw());
    retract_advertisement(store, namespace, &name, &[cid], None, &|_| true)
}

/// Local publisher: moves every record of the two-segment document `legacy` our chain wrote
/// before decision 0018 onto this node's per-node document (created from the legacy spec, or
/// merged into, its prefixes rebuilt from the records), then deletes the legacy document. Every
/// local document is this node's, so nothing there belongs to another node. Whether one moved.
pub fn migrate_local_legacy(
    store: &dyn ObjectStore,
    namespace: &str,
    legacy: &str,
    node: &str,
) -> Result<bool, BgpError> {
    let name = per_node_advertisement_name(legacy, node);
    for _ in 1..=MAX_ATTEMPTS {
        let Some(old) = store.get_typed::<BGPAdvertisement>(namespace, legacy)? else {
            return Ok(false);
        };
        let moved = match store.get_typed::<BGPAdvertisement>(namespace, &name)? {
            None => {
                let mut object = BGPAdvertisement::new(&name, old.spec.clone());
                object.metadata.annotations = old.metadata.annotations.clone();
                store.create_typed(namespace, &object).map(|_| ())
            }
            Some(mut object) => {
                let ann = object
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default);
                for (key, value) in old.metadata.annotations.clone().unwrap_or_default() {
                    ann.entry(key).or_insert(value);
                }
                annotations::place_netns(ann);
                let (prefixes, _) = routes(annotations::all_prefixes(ann), None);
                if !prefixes.is_empty() {
                    object.spec.originate_from = None;
                }
                object.spec.prefixes = prefixes;
                store.replace_typed(namespace, &object).map(|_| ())
            }
        }
        .and_then(|()| store.delete_unchanged_typed(namespace, &old));
        match moved {
            Ok(()) => return Ok(true),
            Err(e) if e.is_exists() || e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(BgpError::Contended {
        what: format!("BGPAdvertisement {namespace}/{legacy}"),
        attempts: MAX_ATTEMPTS,
    })
}

/// DEL of the VPC's last attachment on this node: deletes the node's BGPVRFInstance of the VPC:
/// the one whose `uid` the attachment's ADD recorded, without a read; otherwise (no uid
/// recorded, or the instance of the name is another one since) as read, so an instance
/// re-created between the read and the delete is kept. Returns whether one was deleted (with
/// a recorded uid: whether the delete was answered; an instance already gone answers the same).
pub fn retire_vrf_instance(
    store: &dyn ObjectStore,
    namespace: &str,
    name: &str,
    recorded_uid: Option<&str>,
) -> Result<bool, BgpError> {
    if let Some(uid) = recorded_uid {
        match store.delete(crate::store::Kind::VrfInstance, namespace, name, uid) {
            Ok(()) => return Ok(true),
            Err(e) if e.is_conflict() => {}
            Err(e) => return Err(e.into()),
        }
    }
    let Some(object) = store.get_typed::<BGPVRFInstance>(namespace, name)? else {
        return Ok(false);
    };
    store.delete_unchanged_typed(namespace, &object)?;
    Ok(true)
}
