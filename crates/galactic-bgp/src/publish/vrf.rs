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
    Ok(store
        .list_typed::<BGPVRFInstance>(namespace)?
        .into_iter()
        .filter_map(Result::ok)
        .filter(|o| {
            o.spec
                .router_ref
                .as_ref()
                .is_some_and(|r| r.name == router.name)
        })
        .collect())
}

/// Makes sure the BGPVRFInstance `name` exists for `router` and returns its VRF id: an existing
/// instance keeps its id (its owned fields are merge-patched; others such as `nptv6` are kept);
/// otherwise the lowest id free on the router is claimed by creating the instance. A concurrent
/// allocator that claimed the same id is detected by re-listing: an instance this call created
/// yields (is deleted and the allocation retried); a pre-existing one never does.
pub fn ensure_vrf_instance(
    store: &dyn ObjectStore,
    namespace: &str,
    name: &str,
    router: &Router,
    route_target: &str,
) -> Result<VrfInstance, BgpError> {
    let target = Claim {
        store,
        namespace,
        name,
        router,
        route_target,
    };
    for attempt in 1..=MAX_ATTEMPTS {
        let instances = instances_of(store, namespace, router)?;
        if let Some(existing) = instances.iter().find(|o| nameof(o) == name) {
            return target.reuse(existing);
        }
        if let Some(claimed) = target.claim(&instances, attempt)? {
            return Ok(claimed);
        }
    }
    Err(BgpError::Contended {
        what: format!("VRF id allocation for BGPVRFInstance {namespace}/{name}"),
        attempts: MAX_ATTEMPTS,
    })
}

/// The BGPVRFInstance one ADD makes sure of.
struct Claim<'a> {
    store: &'a dyn ObjectStore,
    namespace: &'a str,
    name: &'a str,
    router: &'a Router,
    route_target: &'a str,
}

impl Claim<'_> {
    /// An existing instance keeps its id; its owned fields are merge-patched.
    fn reuse(&self, existing: &BGPVRFInstance) -> Result<VrfInstance, BgpError> {
        let (namespace, name) = (self.namespace, self.name);
        let vrf_id = vrf_id(existing).ok_or_else(|| StoreError::Shape {
            what: format!("BGPVRFInstance {namespace}/{name}"),
            why: format!("spec.vrfID {} is not a VRF id", existing.spec.vrf_id),
        })?;
        let patch = SpecPatch {
            spec: owned_fields(self.router, self.route_target),
        };
        self.store
            .merge_patch_typed::<BGPVRFInstance, _>(namespace, name, &patch)?;
        log::debug(
            "BGP: BGPVRFInstance reused",
            json!({"name": name, "vrfID": vrf_id}),
        );
        Ok(VrfInstance {
            vrf_id,
            created_uid: None,
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
        let owned = owned_fields(self.router, self.route_target);
        let spec = BGPVRFInstanceSpec {
            export_route_targets: owned.export_route_targets,
            import_route_targets: owned.import_route_targets,
            nptv6: None,
            router_ref: Some(owned.router_ref),
            router_selector: None,
            // At most 4095 (VRF_ID_RANGE).
            vrf_id: vrf_id as i32,
        };
        let created = match store.create_typed(namespace, &BGPVRFInstance::new(name, spec)) {
            Ok(created) => created,
            // Another ADD of this VPC on this node created it first: reuse it next round.
            Err(e) if e.is_exists() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let uid = created.metadata.uid.clone().unwrap_or_default();
        let rivals: Vec<String> = instances_of(store, namespace, self.router)?
            .iter()
            .filter(|o| self::vrf_id(o) == Some(vrf_id) && nameof(o) != name)
            .map(|o| nameof(o).to_owned())
            .collect();
        if rivals.is_empty() {
            log::debug(
                "BGP: BGPVRFInstance created",
                json!({"name": name, "vrfID": vrf_id}),
            );
            return Ok(Some(VrfInstance {
                vrf_id,
                created_uid: Some(uid),
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
