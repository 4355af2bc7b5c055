//! The custom resources galactic reads and writes, as Rust types.
//!
//! `network.datumapis.com/v1alpha1` (BGPRouter, BGPVRFInstance, BGPAdvertisement) follows the
//! datum-cloud/network types at the commit upstream galactic pins (`45d0ff9`), limited to what the
//! CNI reads or writes plus every required field; validation that upstream's writes have tripped
//! over is carried here so the generated CRDs (and the test fixture) enforce it. Status
//! subresources are omitted: nothing in the CNI chain reads them. `k8s.cni.cncf.io/v1`
//! NetworkAttachmentDefinition is the Multus type (its spec is one JSON string).
//!
//! `cargo xtask gen-crds` writes `deploy/crds/*.yaml` from [`crds`].

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the BGP resources.
pub const GROUP: &str = "network.datumapis.com";
/// API version of the BGP resources.
pub const VERSION: &str = "v1alpha1";

/// Pattern of a BGP route target value (`ASN:NN` or `IPv4:NN`, at most 9 digits per number).
pub const ROUTE_TARGET_PATTERN: &str =
    r"^([0-9]{1,9}[.][0-9]{1,9}[.][0-9]{1,9}[.][0-9]{1,9}|[0-9]{1,9}):[0-9]{1,9}$";
/// Pattern of an advertised prefix.
pub const PREFIX_PATTERN: &str =
    r"^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+/[0-9]{1,2}$|^[0-9a-fA-F:]+::?[0-9a-fA-F:]+/[0-9]{1,3}$";
/// Pattern of a BGP community.
pub const COMMUNITY_PATTERN: &str = r"^([0-9]{1,10}|[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+):[0-9]{1,10}$";

/// The object a BGPRouter configures.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct TargetRef {
    /// Kind of the target, normally `Node` (the CNI compares only the name).
    pub kind: String,
    /// Name of the target: the Kubernetes node name.
    pub name: String,
}

/// A reference to a BGPRouter by name (same namespace).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct RouterRef {
    /// The BGPRouter's name.
    pub name: String,
}

/// A minimal label selector (matchLabels only).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouterSelector {
    /// Labels a BGPRouter must carry, all of them.
    #[serde(default)]
    pub match_labels: std::collections::BTreeMap<String, String>,
}

/// A router role.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Fabric (underlay) peering.
    Fabric,
    /// Tenant (VPC) routes.
    Tenant,
    /// Transit.
    Transit,
}

/// Address family identifier.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Afi {
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
    /// Layer-2 VPN (EVPN).
    L2vpn,
}

/// Subsequent address family identifier.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Safi {
    /// Unicast.
    Unicast,
    /// EVPN.
    Evpn,
}

/// An AFI/SAFI pair.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub struct AddressFamily {
    /// AFI: ipv4, ipv6 or l2vpn.
    pub afi: Afi,
    /// SAFI: unicast or evpn.
    pub safi: Safi,
}

/// Per-node BGP speaker settings; the CNI reads the one whose `targetRef.name` is its node.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "network.datumapis.com",
    version = "v1alpha1",
    kind = "BGPRouter",
    plural = "bgprouters",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct BGPRouterSpec {
    /// The node this router runs on (`kind: Node`, `name: <node name>`).
    pub target_ref: TargetRef,
    /// Roles of this router (fabric, tenant, transit); at least one.
    #[schemars(length(min = 1))]
    pub roles: Vec<Role>,
    /// Local autonomous system number; the ASN half of every route target the CNI writes.
    #[serde(rename = "localASN")]
    #[schemars(range(min = 1, max = 4294967295i64))]
    pub local_asn: i64,
    /// BGP router id (IPv4 text); the router derives route distinguishers from it.
    #[serde(rename = "routerID", default, skip_serializing_if = "Option::is_none")]
    pub router_id: Option<String>,
    /// Address families this router speaks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub address_families: Vec<AddressFamily>,
    /// SRv6 locator (IPv6 /48 CIDR); with `nodeID`, the CNI computes each VRF's uSID from it.
    #[serde(
        rename = "srv6Locator",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub srv6_locator: Option<String>,
    /// uSID node id (bounds of the pinned CRD: 1..254; the CNI accepts up to 0xDFFF).
    #[serde(rename = "nodeID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 254))]
    pub node_id: Option<i32>,
    /// BGP listen port (default chosen by the router).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_port: Option<i32>,
}

/// One route target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct RouteTargetValue {
    /// `ASN:NN` (the CNI writes `<localASN>:<low 32 bits of the VPC>`).
    #[schemars(length(max = 21), regex(pattern = ROUTE_TARGET_PATTERN))]
    pub value: String,
}

/// NPTv6 translation of a VRF (set by the control plane, never by the CNI).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Nptv6 {
    /// Inside (ULA) prefix.
    pub ula_prefix: String,
    /// Outside (public) prefix.
    pub public_prefix: String,
}

/// One VPC's VRF on one router (one per VPC and node).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "network.datumapis.com",
    version = "v1alpha1",
    kind = "BGPVRFInstance",
    plural = "bgpvrfinstances",
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.routerRef) != has(self.routerSelector)",
    "message": "exactly one of routerRef and routerSelector must be set"
}]))]
pub struct BGPVRFInstanceSpec {
    /// The router this VRF lives on (the CNI sets this, never `routerSelector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_ref: Option<RouterRef>,
    /// Routers selected by label (alternative to `routerRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_selector: Option<RouterSelector>,
    /// VRF id on the router, unique per router; the CNI allocates the lowest free in 1..4095
    /// (the uSID argument is 12 bits).
    #[serde(rename = "vrfID")]
    #[schemars(range(min = 1, max = 65535))]
    pub vrf_id: i32,
    /// Route targets imported into this VRF (1..32).
    #[schemars(length(min = 1, max = 32))]
    pub import_route_targets: Vec<RouteTargetValue>,
    /// Route targets attached to routes exported from this VRF (1..32).
    #[schemars(length(min = 1, max = 32))]
    pub export_route_targets: Vec<RouteTargetValue>,
    /// NPTv6 settings, owned by the control plane; the CNI never writes or clears this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nptv6: Option<Nptv6>,
}

/// SRv6 endpoint behaviour of the advertised routes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SRv6Function {
    /// Decapsulate and look up IPv4 in the VRF.
    #[serde(rename = "End.DT4")]
    EndDt4,
    /// Decapsulate and look up IPv6 in the VRF.
    #[serde(rename = "End.DT6")]
    EndDt6,
    /// Decapsulate and look up IPv4 or IPv6 in the VRF (what the CNI writes).
    #[serde(rename = "End.DT46")]
    EndDt46,
}

/// The prefixes of one VPC attachment (one per VPC and attachment).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "network.datumapis.com",
    version = "v1alpha1",
    kind = "BGPAdvertisement",
    plural = "bgpadvertisements",
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.prefixes) || has(self.redistribute) || has(self.originateFrom)",
    "message": "at least one of prefixes, redistribute, originateFrom must be specified"
}]))]
pub struct BGPAdvertisementSpec {
    /// The router that originates these routes.
    pub router_ref: RouterRef,
    /// AFI/SAFI of the routes (the CNI writes l2vpn/evpn).
    pub address_family: AddressFamily,
    /// Prefixes to originate: a set (no duplicates), canonical and sorted when the CNI writes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 256),
        inner(regex(pattern = PREFIX_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub prefixes: Vec<String>,
    /// Route sources to redistribute (not used by the CNI).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redistribute: Vec<String>,
    /// Originate from another object (not used by the CNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originate_from: Option<String>,
    /// Routing policy (not used by the CNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_ref: Option<RouterRef>,
    /// BGP communities (the CNI writes the VPC's route target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = COMMUNITY_PATTERN)))]
    pub communities: Vec<String>,
    /// Local preference (not used by the CNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_preference: Option<i64>,
    /// VRF id the routes belong to (the VPC's BGPVRFInstance `vrfID` on this node).
    #[serde(rename = "vrfID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub vrf_id: Option<i32>,
    /// SRv6 behaviour (the CNI writes End.DT46).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<SRv6Function>,
}

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

/// Every CRD, with the file name `cargo xtask gen-crds` writes it to.
pub fn crds() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("bgprouters.yaml", BGPRouter::crd()),
        ("bgpvrfinstances.yaml", BGPVRFInstance::crd()),
        ("bgpadvertisements.yaml", BGPAdvertisement::crd()),
        (
            "network-attachment-definitions.yaml",
            NetworkAttachmentDefinition::crd(),
        ),
    ]
}
