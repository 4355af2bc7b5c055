//! The custom resources galactic reads and writes, as Rust types.
//!
//! `network.datumapis.com/v1alpha1` BGPRouter, BGPVRFInstance, BGPAdvertisement and
//! EgressShardClaim reproduce the Galactic API's v1alpha1 schema (datum-cloud/network, see
//! `docs/decisions/0017-upstream-crds.md` for the commits and how the equality is checked): every
//! field, type, required field, enum, bound, `x-kubernetes-validations` CEL rule (with its
//! message, which the API server answers), list type, the status subresource, short names and
//! printer columns. Descriptions are our own.
//! `k8s.cni.cncf.io/v1` NetworkAttachmentDefinition is the Multus type (its spec is one JSON
//! string).
//!
//! `cargo xtask gen-crds` writes `deploy/crds/*.yaml` from [`crds`], in the shape the Galactic
//! API's generator writes (see [`upstream_shape`]).

mod advertisement;
mod egress_claim;
mod router;
mod shared;
mod vrf;

pub use advertisement::{
    BGPAdvertisement, BGPAdvertisementSpec, BGPAdvertisementStatus, OriginType, OriginateFrom,
    RedistributeSource, SRv6Function,
};
pub use egress_claim::{
    EgressAddressFamily, EgressShardClaim, EgressShardClaimSpec, EgressShardClaimStatus, ShardRef,
};
pub use router::{BGPRouter, BGPRouterSpec, BGPRouterStatus, PeerSummary, TargetRef};
pub use shared::{
    AddressFamily, Afi, Condition, ConditionStatus, Conditions, LabelSelector,
    LabelSelectorRequirement, NameRef, Safi,
};
pub use vrf::{
    BGPVRFInstance, BGPVRFInstanceSpec, BGPVRFInstanceStatus, Nptv6, ResolvedConfig, RouteTarget,
    RouterStatus,
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// API group of the BGP resources.
pub const GROUP: &str = "network.datumapis.com";
/// API version of the BGP resources.
pub const VERSION: &str = "v1alpha1";

/// A Multus network attachment: the CNI configuration of a secondary network.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "k8s.cni.cncf.io",
    version = "v1",
    kind = "NetworkAttachmentDefinition",
    plural = "network-attachment-definitions",
    shortname = "net-attach-def",
    namespaced
)]
pub struct NetworkAttachmentDefinitionSpec {
    /// The CNI configuration (a conflist or single plugin config) as a JSON string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// Whether an object must have a `spec`: the Galactic API's Go types say so per kind (`spec`
/// with `omitempty` is optional, `+required` without it is required), the derive always
/// requires it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecPresence {
    /// An object without `spec` is stored (the BGP resources, the NAD).
    Optional,
    /// An object without `spec` is refused (EgressShardClaim).
    Required,
}

/// Every CRD as the JSON document the API server gets (in the shape of [`upstream_shape`]), with
/// the file name `cargo xtask gen-crds` writes it to.
pub fn crds() -> Vec<(&'static str, Value)> {
    use SpecPresence::{Optional, Required};
    [
        ("bgprouters.yaml", BGPRouter::crd(), Optional),
        ("bgpvrfinstances.yaml", BGPVRFInstance::crd(), Optional),
        ("bgpadvertisements.yaml", BGPAdvertisement::crd(), Optional),
        ("egressshardclaims.yaml", EgressShardClaim::crd(), Required),
        (
            "network-attachment-definitions.yaml",
            NetworkAttachmentDefinition::crd(),
            Optional,
        ),
    ]
    .into_iter()
    .map(|(file, crd, spec)| (file, upstream_shape(&crd, spec)))
    .collect()
}

/// A derived CRD as a JSON document in the shape the Galactic API's generator (controller-gen)
/// writes, which differs from the derive's in form only:
/// - no `nullable` (an optional Go field is simply not required; the API server drops a `null`
///   of a field that is not nullable, so the two accept the same objects);
/// - the root lists `apiVersion`, `kind` and `metadata`, has no `title`, and requires `spec`
///   only as `spec` says (nothing else);
/// - `names.listKind` is spelled out (the API server would default it to the same);
/// - `required` is sorted; integral bounds are integers (`1`, not `1.0`).
pub fn upstream_shape(crd: &CustomResourceDefinition, spec: SpecPresence) -> Value {
    let mut value = serde_json::to_value(crd).unwrap_or(Value::Null);
    if let Some(names) = value
        .pointer_mut("/spec/names")
        .and_then(Value::as_object_mut)
    {
        let list_kind = names
            .get("kind")
            .and_then(Value::as_str)
            .map(|k| format!("{k}List"));
        names.insert("listKind".into(), json!(list_kind));
    }
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            if let Some(root) = version.pointer_mut("/schema/openAPIV3Schema") {
                reshape_root(root, spec);
                reshape(root);
            }
        }
    }
    value
}

fn reshape_root(root: &mut Value, spec: SpecPresence) {
    let Some(object) = root.as_object_mut() else {
        return;
    };
    object.remove("title");
    match spec {
        SpecPresence::Optional => object.remove("required"),
        SpecPresence::Required => object.insert("required".into(), json!(["spec"])),
    };
    if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
        properties.insert("apiVersion".into(), json!({"type": "string"}));
        properties.insert("kind".into(), json!({"type": "string"}));
        properties.insert("metadata".into(), json!({"type": "object"}));
    }
}

fn reshape(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if object.get("nullable") == Some(&Value::Bool(true)) {
                object.remove("nullable");
            }
            if let Some(Value::Array(required)) = object.get_mut("required") {
                required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
            for key in ["minimum", "maximum"] {
                if let Some(bound) = object.get(key).and_then(Value::as_f64) {
                    if bound.fract() == 0.0 && bound.abs() < 9.0e15 {
                        object.insert(key.into(), json!(bound as i64));
                    }
                }
            }
            object.values_mut().for_each(reshape);
        }
        Value::Array(items) => items.iter_mut().for_each(reshape),
        _ => {}
    }
}
