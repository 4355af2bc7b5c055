//! The publish algorithm, over any [`ObjectStore`]: this node's router, the VPC's VRF instance
//! (VRF id allocation), and the attachment's advertisement.

use crate::annotations;
use crate::error::BgpError;
use crate::prev::Facts;
use crate::store::{meta_str, Kind, ObjectStore, StoreError};
use galactic_core::ident::speaking_asn;
use galactic_core::kube::BGPRouter;
use galactic_core::log;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// Lowest and highest VRF id handed out (the uSID argument is 12 bits; 0 is reserved).
pub const VRF_ID_RANGE: std::ops::RangeInclusive<u32> = 1..=4095;
/// Attempts at a contended write before giving up with code 11.
pub const MAX_ATTEMPTS: u32 = 8;

/// This node's router, as far as the CNI needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    /// The name VRF instances and advertisements refer to.
    pub name: String,
    /// The ASN the router speaks; `None` when no BGPRouter document exists (local backend
    /// only): route targets then take their ASN-free form.
    pub asn: Option<u32>,
    /// `(srv6Locator, nodeID)` when both are set.
    pub srv6: Option<(String, i64)>,
}

/// Finds the BGPRouter whose `spec.targetRef.name` is `node`. With `required`, none is an error;
/// otherwise a router named after the node, without ASN or SRv6, stands in.
pub fn lookup_router(
    store: &dyn ObjectStore,
    namespace: &str,
    node: &str,
    required: bool,
) -> Result<Router, BgpError> {
    let mut matches = Vec::new();
    for object in store.list(Kind::Router, namespace)? {
        let name = meta_str(&object, "name").unwrap_or_default().to_owned();
        match serde_json::from_value::<BGPRouter>(object) {
            Ok(router) if router.spec.target_ref.name == node => matches.push(router),
            Ok(_) => {}
            Err(e) => log::warn(
                "BGP: skipping a BGPRouter that does not parse",
                json!({"name": name, "err": e.to_string()}),
            ),
        }
    }
    match matches.len() {
        0 if required => Err(BgpError::NoRouter {
            node: node.into(),
            namespace: namespace.into(),
        }),
        0 => Ok(Router {
            name: node.to_owned(),
            asn: None,
            srv6: None,
        }),
        1 => {
            let spec = &matches[0].spec;
            let asn = speaking_asn(spec.local_asn);
            if i64::from(asn) != spec.local_asn {
                log::warn(
                    "BGP: the router's localASN exceeds 32 bits; it speaks, and route targets use, the low 32",
                    json!({"localASN": spec.local_asn, "asn": asn}),
                );
            }
            let srv6 = match (&spec.srv6_locator, spec.node_id) {
                (Some(locator), Some(id)) if !locator.is_empty() && id != 0 => {
                    Some((locator.clone(), i64::from(id)))
                }
                _ => None,
            };
            let name = matches[0].metadata.name.clone().unwrap_or_default();
            log::debug("BGP: router matched", json!({"router": name, "node": node}));
            Ok(Router {
                name,
                asn: Some(asn),
                srv6,
            })
        }
        count => Err(BgpError::AmbiguousRouter {
            count,
            node: node.into(),
            namespace: namespace.into(),
        }),
    }
}

/// The VRF instance of this (VPC, node) after [`ensure_vrf_instance`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VrfInstance {
    /// Its VRF id.
    pub vrf_id: u32,
    /// Its uid when this call created it (what a rollback may delete).
    pub created_uid: Option<String>,
}

fn vrf_id_of(object: &Value) -> Option<u32> {
    object
        .pointer("/spec/vrfID")?
        .as_u64()
        .and_then(|v| u32::try_from(v).ok())
}

fn router_of(object: &Value) -> Option<&str> {
    object.pointer("/spec/routerRef/name")?.as_str()
}

/// The fields of a BGPVRFInstance spec this plugin owns (never `nptv6` or anything else).
fn owned_vrf_fields(router: &Router, route_target: Option<&str>) -> Value {
    let mut spec = json!({"routerRef": {"name": router.name}});
    if let Some(rt) = route_target {
        spec["importRouteTargets"] = json!([{"value": rt}]);
        spec["exportRouteTargets"] = json!([{"value": rt}]);
    }
    spec
}

fn lowest_free(router: &str, instances: &[Value]) -> Result<u32, BgpError> {
    let used: BTreeSet<u32> = instances.iter().filter_map(vrf_id_of).collect();
    VRF_ID_RANGE
        .clone()
        .find(|id| !used.contains(id))
        .ok_or(BgpError::VrfIdsExhausted {
            router: router.into(),
            used: used.len(),
        })
}

/// A short, process-dependent wait so that two colliding allocators do not retry in lockstep.
fn jitter(attempt: u32) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let spread = (nanos ^ std::process::id().wrapping_mul(2_654_435_761)) % 40;
    Duration::from_millis(u64::from(10 * attempt + spread))
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
    route_target: Option<&str>,
) -> Result<VrfInstance, BgpError> {
    let mine = |all: Vec<Value>| -> Vec<Value> {
        all.into_iter()
            .filter(|o| router_of(o) == Some(router.name.as_str()))
            .collect()
    };
    for attempt in 1..=MAX_ATTEMPTS {
        let instances = mine(store.list(Kind::VrfInstance, namespace)?);
        if let Some(existing) = instances.iter().find(|o| meta_str(o, "name") == Some(name)) {
            let vrf_id = vrf_id_of(existing).ok_or_else(|| StoreError::Shape {
                what: format!("BGPVRFInstance {namespace}/{name}"),
                why: "no spec.vrfID".into(),
            })?;
            store.merge_patch(
                Kind::VrfInstance,
                namespace,
                name,
                &json!({"spec": owned_vrf_fields(router, route_target)}),
            )?;
            log::debug(
                "BGP: BGPVRFInstance reused",
                json!({"name": name, "vrfID": vrf_id}),
            );
            return Ok(VrfInstance {
                vrf_id,
                created_uid: None,
            });
        }
        let vrf_id = lowest_free(&router.name, &instances)?;
        let mut spec = owned_vrf_fields(router, route_target);
        spec["vrfID"] = json!(vrf_id);
        let object = json!({"apiVersion": Kind::VrfInstance.api_version(), "kind": "BGPVRFInstance", "metadata": {"name": name}, "spec": spec});
        let created = match store.create(Kind::VrfInstance, namespace, &object) {
            Ok(created) => created,
            // Another ADD of this VPC on this node created it first: reuse it next round.
            Err(e) if e.is_exists() => continue,
            Err(e) => return Err(e.into()),
        };
        let uid = meta_str(&created, "uid").unwrap_or_default().to_owned();
        let rivals: Vec<String> = mine(store.list(Kind::VrfInstance, namespace)?)
            .iter()
            .filter(|o| vrf_id_of(o) == Some(vrf_id) && meta_str(o, "name") != Some(name))
            .filter_map(|o| meta_str(o, "name").map(str::to_owned))
            .collect();
        if rivals.is_empty() {
            log::debug(
                "BGP: BGPVRFInstance created",
                json!({"name": name, "vrfID": vrf_id}),
            );
            return Ok(VrfInstance {
                vrf_id,
                created_uid: Some(uid),
            });
        }
        log::warn(
            "BGP: VRF id claimed concurrently; yielding and allocating again",
            json!({"name": name, "vrfID": vrf_id, "rivals": rivals, "attempt": attempt}),
        );
        store.delete(Kind::VrfInstance, namespace, name, &uid)?;
        std::thread::sleep(jitter(attempt));
    }
    Err(BgpError::Contended {
        what: format!("VRF id allocation for BGPVRFInstance {namespace}/{name}"),
        attempts: MAX_ATTEMPTS,
    })
}

/// Everything the advertisement of this attachment is built from.
pub struct AdvertisementInput<'a> {
    /// Namespace of the BGP resources.
    pub namespace: &'a str,
    /// `BGPAdvertisement` name (`{hexvpc}-{hexatt}`).
    pub name: &'a str,
    /// This node's router.
    pub router: &'a Router,
    /// The VPC's route target, when the router's ASN is known.
    pub route_target: Option<&'a str>,
    /// The VPC's VRF id on this node.
    pub vrf_id: u32,
    /// This container's id.
    pub container_id: &'a str,
    /// This container's netns path, as the runtime passed it.
    pub netns: &'a str,
    /// This attachment's addresses.
    pub facts: &'a Facts,
}

fn advertisement_spec(input: &AdvertisementInput<'_>, prefixes: Vec<String>) -> Value {
    let mut spec = json!({
        "routerRef": {"name": input.router.name},
        "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
        "prefixes": prefixes,
        "vrfID": input.vrf_id,
        "function": "End.DT46",
    });
    if let Some(rt) = input.route_target {
        spec["communities"] = json!([rt]);
    }
    spec
}

/// Records this container on the advertisement (pruning dead siblings) and rewrites its spec
/// from the records. Returns the uid when this call created the advertisement. Not called for an
/// attachment without addresses: an advertisement without prefixes is invalid (see
/// `docs/decisions/0012-empty-advertisements.md`).
pub fn publish_advertisement(
    store: &dyn ObjectStore,
    input: &AdvertisementInput<'_>,
    alive: &dyn Fn(&str) -> bool,
) -> Result<Option<String>, BgpError> {
    for _ in 1..=MAX_ATTEMPTS {
        let current = store.get(Kind::Advertisement, input.namespace, input.name)?;
        let mut ann: Map<String, Value> = current
            .as_ref()
            .and_then(|o| o.pointer("/metadata/annotations"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let pruned = annotations::prune_dead(&mut ann, |p| alive(p));
        if !pruned.is_empty() {
            log::info(
                "BGP: pruned dead containers from the advertisement",
                json!({"name": input.name, "containers": pruned}),
            );
        }
        annotations::record(&mut ann, input.container_id, input.netns, input.facts);
        let spec = advertisement_spec(input, annotations::all_prefixes(&ann));
        let outcome = match current {
            None => {
                let object = json!({"apiVersion": Kind::Advertisement.api_version(), "kind": "BGPAdvertisement",
                    "metadata": {"name": input.name, "annotations": ann}, "spec": spec});
                store
                    .create(Kind::Advertisement, input.namespace, &object)
                    .map(|o| meta_str(&o, "uid").map(str::to_owned))
            }
            Some(mut object) => {
                object["metadata"]["annotations"] = Value::Object(ann);
                object["spec"] = spec;
                store
                    .replace(Kind::Advertisement, input.namespace, &object)
                    .map(|_| None)
            }
        };
        match outcome {
            Ok(created) => {
                log::debug(
                    "BGP: BGPAdvertisement applied",
                    json!({"name": input.name, "created": created.is_some()}),
                );
                return Ok(created);
            }
            // Another container of this attachment wrote in between: re-read and re-apply.
            Err(e) if e.is_exists() || e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(BgpError::Contended {
        what: format!("BGPAdvertisement {}/{}", input.namespace, input.name),
        attempts: MAX_ATTEMPTS,
    })
}
