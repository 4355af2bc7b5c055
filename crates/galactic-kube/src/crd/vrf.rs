//! `BGPVRFInstance`: one VPC's VRF on a router (the CNI writes one per VPC and node).

use super::shared::{AddressFamily, Conditions, LabelSelector, NameRef};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One route target, `ASN:NN` (at most 10 digits per number) or `IPv4:NN` (at most 9 digits per
/// octet, 10 in the number), 21 characters in all.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.value.matches('^([0-9]{1,9}[.][0-9]{1,9}[.][0-9]{1,9}[.][0-9]{1,9}|[0-9]{1,10}):[0-9]{1,10}$')",
    "message": "value must be in ASN:NN or IP:NN format"
}]))]
pub struct RouteTarget {
    /// The extended community text (see `galactic_core::ident::route_target`).
    #[schemars(length(min = 1, max = 21))]
    pub value: String,
}

impl RouteTarget {
    /// The route target `value`.
    pub fn new(value: &str) -> Self {
        Self {
            value: value.to_owned(),
        }
    }
}

/// Stateless NPTv6 (RFC 6296) of a VRF, owned by the control plane; the CNI never writes it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.ulaPrefix.split('/')[1] == self.publicPrefix.split('/')[1]",
    "message": "ulaPrefix and publicPrefix must share the same prefix length"
}]))]
pub struct Nptv6 {
    /// The externally routable IPv6 prefix the inside prefix maps to (same length).
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isCIDR(self)", "message": "publicPrefix must be a valid CIDR"},
        {"rule": "self.contains(':')", "message": "publicPrefix must be an IPv6 CIDR"},
    ]))]
    pub public_prefix: String,
    /// The tenant-facing ULA prefix inside the VRF.
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isCIDR(self)", "message": "ulaPrefix must be a valid CIDR"},
        {"rule": "self.contains(':')", "message": "ulaPrefix must be an IPv6 CIDR"},
    ]))]
    pub ula_prefix: String,
}

/// One VPC's VRF on one router.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "network.datumapis.com",
    version = "v1alpha1",
    kind = "BGPVRFInstance",
    plural = "bgpvrfinstances",
    shortname = "bgpvrf",
    status = "BGPVRFInstanceStatus",
    doc = "An L2VPN EVPN VRF on the routers it names; the CNI writes one per VPC and node.",
    printcolumn = r#"{"name": "VRF-ID", "type": "integer", "jsonPath": ".spec.vrfID"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.routerRef) != has(self.routerSelector)",
    "message": "Exactly one of routerRef or routerSelector must be set"
}]))]
pub struct BGPVRFInstanceSpec {
    /// Route targets attached to routes exported from this VRF (1..32); the CNI writes the VPC's.
    #[schemars(length(min = 1, max = 32))]
    pub export_route_targets: Vec<RouteTarget>,
    /// Route targets whose routes are imported into this VRF (1..32); the CNI writes the VPC's.
    #[schemars(length(min = 1, max = 32))]
    pub import_route_targets: Vec<RouteTarget>,
    /// NPTv6 of the VRF, owned by the control plane; the CNI never writes or clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nptv6: Option<Nptv6>,
    /// The router this VRF lives on (the CNI sets this, never `routerSelector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_ref: Option<NameRef>,
    /// Routers selected by label (the alternative to `routerRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_selector: Option<LabelSelector>,
    /// VRF id on the router (1..65535), also the uSID argument; the CNI allocates the lowest
    /// free id in 1..4095 (the argument is 12 bits).
    #[serde(rename = "vrfID")]
    #[schemars(range(min = 1, max = 65535))]
    pub vrf_id: i32,
}

/// The configuration a router applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedConfig {
    /// Address families configured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub address_families: Vec<AddressFamily>,
    /// The AS number configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_number: Option<i64>,
    /// The router id used.
    #[serde(rename = "routerID", default, skip_serializing_if = "Option::is_none")]
    pub router_id: Option<String>,
}

/// One router's view of the VRF.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouterStatus {
    /// Conditions on this router, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// What the router applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_config: Option<ResolvedConfig>,
    /// The BGPRouter this entry is about.
    pub router_name: String,
}

/// What the routers report (the CNI never reads or writes it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BGPVRFInstanceStatus {
    /// Conditions, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// One entry per router.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["routerName"]))]
    pub routers: Vec<RouterStatus>,
}
