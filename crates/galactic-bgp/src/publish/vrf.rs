//! The VPC's BGPVRFInstance on this node and its VRF id (decision 0011).

use super::{jitter, Router, MAX_ATTEMPTS, VRF_ID_RANGE};
use crate::error::BgpError;
use crate::store::{Documents, ObjectStore, StoreError};
use galactic_core::log;
use galactic_kube::{BGPVRFInstance, BGPVRFInstanceSpec, NameRef, RouteTarget};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeSet;

/// The VRF instance of this (VPC, node) after [`ensure_vrf_instance`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VrfInstance {
    /// Its VRF id.
    pub vrf_id: u32,
    /// Its uid when this call created it (what a rollback may delete).
    pub created_uid: Option<String>,
    /// Its uid.
    pub uid: String,
}

/// The fields of a BGPVRFInstance spec this plugin owns (never `nptv6` or anything else): the
/// body of its merge patch.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OwnedFields {
    router_ref: NameRef,
    import_route_targets: Vec<RouteTarget>,
    export_route_targets: Vec<RouteTarget>,
}

/// A merge patch of `spec` only.
#[derive(Serialize)]
struct SpecPatch<T> {
    spec: T,
}

fn owned_fields(router: &Router, route_target: &str) -> OwnedFields {
    OwnedFields {
        router_ref: NameRef::to(&router.name),
        import_route_targets: vec![RouteTarget::new(route_target)],
        export_route_targets: vec![RouteTarget::new(route_target)],
    }
}

fn nameof(instance: &BGPVRFInstance) -> &str {
    instance.metadata.name.as_deref().unwrap_or_default()
}

fn vrf_id(instance: &BGPVRFInstance) -> Option<u32> {
    u32::try_from(instance.spec.vrf_id).ok()
}

fn lowest_free(router: &str, instances: &[BGPVRFInstance]) -> Result<u32, BgpError> {
    let used: BTreeSet<u32> = instances.iter().filter_map(vrf_id).collect();
    VRF_ID_RANGE
        .clone()
        .find(|id| !used.contains(id))
        .ok_or(BgpError::VrfIdsExhausted {
            router: router.into(),
            used: used.len(),
        })
}

/// The router's instances (others' documents that do not parse are not the router's).
fn instances_of(
    store: &dyn ObjectStore,
    namespace: &str,
    router: &Router,
) -> Result<Vec<BGPVRFInstance>, BgpError> {
    Ok(routers_instances(
        store.list_typed::<BGPVRFInstance>(namespace)?,
        router,
    ))
}

/// The instances of `listed` that are `router`'s.
pub fn routers_instances(
    listed: Vec<Result<BGPVRFInstance, StoreError>>,
    router: &Router,
) -> Vec<BGPVRFInstance> {
    listed
        .into_iter()
        .filter_map(Result::ok)
        .filter(|o| {
            o.spec
                .router_ref
                .as_ref()
                .is_some_and(|r| r.name == router.name)
        })
        .collect()
}

/// How an ADD allocates, when it has to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocation {
    /// Other allocators on the router may claim an id at the same time: a created instance is
    /// checked against a fresh list, and yields to a rival.
    Contended,
    /// This call holds the node's VRF id lock, which every allocator on the node's router holds
    /// from its list to its create: nobody claims an id in between (decision 0077).
    Locked,
}

/// Makes sure the BGPVRFInstance `name` exists for `router` and returns its VRF id: an existing
/// instance keeps its id (its owned fields are merge-patched; others such as `nptv6` are kept);
/// otherwise the lowest id free on the router is claimed by creating the instance. A concurrent
/// allocator that claimed the same id is detected by re-listing: an instance this call created
/// yields (is deleted and the allocation retried); a pre-existing one never does.
///
/// `listed` is the router's instances as the caller read them under the VPC's lock (its first
/// round, in flight with its other reads), used for the first attempt; `allocation` says
/// whether a claim must be checked against rivals.
pub fn ensure_vrf_instance(
    store: &dyn ObjectStore,
    target: &VrfTarget<'_>,
    mut listed: Option<Vec<BGPVRFInstance>>,
    allocation: Allocation,
) -> Result<VrfInstance, BgpError> {
    let (namespace, name) = (target.namespace, target.name);
    let claim = Claim {
        store,
        namespace,
        name,
        router: target.router,
        route_target: target.route_target,
        allocation,
    };
    for attempt in 1..=MAX_ATTEMPTS {
        let instances = match listed.take() {
            Some(instances) => instances,
            None => instances_of(store, namespace, target.router)?,
        };
        if let Some(existing) = instances.iter().find(|o| nameof(o) == name) {
            return claim.reuse(existing);
        }
        if let Some(claimed) = claim.claim(&instances, attempt)? {
            return Ok(claimed);
        }
    }
    Err(BgpError::Contended {
        what: format!("VRF id allocation for BGPVRFInstance {namespace}/{name}"),
        attempts: MAX_ATTEMPTS,
    })
}

/// The instance `name` of `router` with `vrf_id`, as a create sends it.
fn new_instance(name: &str, router: &Router, route_target: &str, vrf_id: u32) -> BGPVRFInstance {
    let owned = owned_fields(router, route_target);
    let spec = BGPVRFInstanceSpec {
        export_route_targets: owned.export_route_targets,
        import_route_targets: owned.import_route_targets,
        nptv6: None,
        router_ref: Some(owned.router_ref),
        router_selector: None,
        // At most 4095 (VRF_ID_RANGE).
        vrf_id: vrf_id as i32,
    };
    BGPVRFInstance::new(name, spec)
}

/// A claim of a VRF id decided but not sent: the instance to create, with the lowest id free
/// on the router. Final only while the node's VRF id lock is held from the list it was chosen
/// from to its create (decision 0077), so the create can go in flight with the advertisement
/// that names the id.
#[derive(Debug, Clone)]
pub struct PlannedClaim {
    /// The id claimed.
    pub vrf_id: u32,
    /// The instance to create.
    pub instance: BGPVRFInstance,
}

/// The claim an ADD holding the node's VRF id lock makes from `listed` (the router's instances
/// as it read them under that lock): `None` when the instance exists already (it is reused,
/// by [`ensure_vrf_instance`]).
pub fn plan_claim(
    target: &VrfTarget<'_>,
    listed: &[BGPVRFInstance],
) -> Result<Option<PlannedClaim>, BgpError> {
    if listed.iter().any(|o| nameof(o) == target.name) {
        return Ok(None);
    }
    let vrf_id = lowest_free(&target.router.name, listed)?;
    Ok(Some(PlannedClaim {
        vrf_id,
        instance: new_instance(target.name, target.router, target.route_target, vrf_id),
    }))
}

/// The BGPVRFInstance an ADD makes sure of.
pub struct VrfTarget<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// This node's router.
    pub router: &'a Router,
    /// The VPC's route target.
    pub route_target: &'a str,
}

/// The BGPVRFInstance one ADD makes sure of.
struct Claim<'a> {
    store: &'a dyn ObjectStore,
    namespace: &'a str,
    name: &'a str,
    router: &'a Router,
    route_target: &'a str,
    allocation: Allocation,
}

/// Whether `existing` has the owned fields an ADD would write (a merge patch of them would
/// change nothing).
fn owns_already(existing: &BGPVRFInstance, owned: &OwnedFields) -> bool {
    let spec = &existing.spec;
    spec.router_ref.as_ref() == Some(&owned.router_ref)
        && spec.import_route_targets == owned.import_route_targets
        && spec.export_route_targets == owned.export_route_targets
}

impl Claim<'_> {
    /// An existing instance keeps its id; its owned fields are merge-patched.
    fn reuse(&self, existing: &BGPVRFInstance) -> Result<VrfInstance, BgpError> {
        let (namespace, name) = (self.namespace, self.name);
        let vrf_id = vrf_id(existing).ok_or_else(|| StoreError::Shape {
            what: format!("BGPVRFInstance {namespace}/{name}"),
            why: format!("spec.vrfID {} is not a VRF id", existing.spec.vrf_id),
        })?;
        let owned = owned_fields(self.router, self.route_target);
        let uid = existing.metadata.uid.clone().unwrap_or_default();
        // A patch that would change nothing is not sent: one request fewer per ADD.
        let patched = !owns_already(existing, &owned);
        if patched {
            self.store.merge_patch_typed::<BGPVRFInstance, _>(
                namespace,
                name,
                &SpecPatch { spec: owned },
            )?;
        }
        log::debug(
            "BGP: BGPVRFInstance reused",
            json!({"name": name, "vrfID": vrf_id, "patched": patched}),
        );
        Ok(VrfInstance {
            vrf_id,
            created_uid: None,
            uid,
        })
    }

    /// Creates the instance with the lowest id free on the router; `None` when another
    /// allocator won the name or the id (this call's instance then yields and is deleted), for
    /// the caller to try again.
    fn claim(
        &self,
        instances: &[BGPVRFInstance],
        attempt: u32,
    ) -> Result<Option<VrfInstance>, BgpError> {
        let (store, namespace, name) = (self.store, self.namespace, self.name);
        let vrf_id = lowest_free(&self.router.name, instances)?;
        let instance = new_instance(name, self.router, self.route_target, vrf_id);
        let created = match store.create_typed(namespace, &instance) {
            Ok(created) => created,
            // Another ADD of this VPC on this node created it first: reuse it next round.
            Err(e) if e.is_exists() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let uid = created.metadata.uid.clone().unwrap_or_default();
        // Under the node's VRF id lock nobody can have claimed the id since the list (decision
        // 0077); without it the router's instances are listed again to find a rival.
        let rivals: Vec<String> = match self.allocation {
            Allocation::Locked => Vec::new(),
            Allocation::Contended => instances_of(store, namespace, self.router)?
                .iter()
                .filter(|o| self::vrf_id(o) == Some(vrf_id) && nameof(o) != name)
                .map(|o| nameof(o).to_owned())
                .collect(),
        };
        if rivals.is_empty() {
            log::debug(
                "BGP: BGPVRFInstance created",
                json!({"name": name, "vrfID": vrf_id}),
            );
            return Ok(Some(VrfInstance {
                vrf_id,
                created_uid: Some(uid.clone()),
                uid,
            }));
        }
        log::warn(
            "BGP: VRF id claimed concurrently; yielding and allocating again",
            json!({"name": name, "vrfID": vrf_id, "rivals": rivals, "attempt": attempt}),
        );
        store.delete(crate::store::Kind::VrfInstance, namespace, name, &uid)?;
        std::thread::sleep(jitter(attempt));
        Ok(None)
    }
}
