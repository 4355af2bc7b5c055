//! `BGPRouter`: one BGP speaker, bound to a node. The CNI reads the one whose `targetRef.name`
//! is its node; it never writes routers.

use super::shared::{AddressFamily, Conditions};
use galactic_core::ident::NODE_ID_MAX;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The object a BGPRouter runs on.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct TargetRef {
    /// Kind of the target, normally `Node` (the CNI compares only the name).
    #[schemars(length(min = 1))]
    pub kind: String,
    /// Name of the target: the Kubernetes node name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Per-node BGP speaker settings.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "network.datumapis.com",
    version = "v1alpha1",
    kind = "BGPRouter",
    plural = "bgprouters",
    shortname = "bgpr",
    status = "BGPRouterStatus",
    doc = "A BGP speaker bound to one node; the owner of the node's VRF instances and advertisements.",
    printcolumn = r#"{"name": "TARGET", "type": "string", "jsonPath": ".spec.targetRef.name"}"#,
    printcolumn = r#"{"name": "ASN", "type": "integer", "jsonPath": ".spec.localASN"}"#,
    printcolumn = r#"{"name": "ROUTER-ID", "type": "string", "jsonPath": ".spec.routerID"}"#,
    printcolumn = r#"{"name": "PHASE", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct BGPRouterSpec {
    /// Address families the router activates (at least one); the CNI's advertisements are
    /// l2vpn/evpn.
    #[schemars(length(min = 1))]
    pub address_families: Vec<AddressFamily>,
    /// TCP port for incoming sessions (the router's default is 179).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub listen_port: Option<i32>,
    /// Local autonomous system number (≥ 1). The router speaks its low 32 bits; so do the route
    /// targets the CNI derives from it (`galactic_core::ident::route_target`).
    #[serde(rename = "localASN")]
    #[schemars(range(min = 1))]
    pub local_asn: i64,
    /// uSID Node-ID, the router's 16-bit slot within the PoP's locator block: 1..=57343
    /// (0xDFFF; 0xE000.. is uFMT's Function space). With `srv6Locator`, the CNI computes each
    /// VRF's uSID from it.
    #[serde(rename = "nodeID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = NODE_ID_MAX))]
    pub node_id: Option<i32>,
    /// 32-bit router id in dotted-quad form; the router derives route distinguishers from it.
    #[serde(rename = "routerID")]
    #[schemars(extend("format" = "ipv4"))]
    pub router_id: String,
    /// SRv6 locator block of the router, an IPv6 CIDR (the CNI needs a /48).
    #[serde(
        rename = "srv6Locator",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isCIDR(self)", "message": "srv6Locator must be a valid CIDR"},
        {"rule": "self.contains(':')", "message": "srv6Locator must be an IPv6 CIDR"},
    ]))]
    pub srv6_locator: Option<String>,
    /// The node this router runs on (`kind: Node`, `name: <node name>`).
    pub target_ref: TargetRef,
}

/// Session counts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PeerSummary {
    /// Peers in the Established state.
    pub established: i32,
    /// Configured peers.
    pub total: i32,
}

/// What the router reports (the CNI never reads or writes it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BGPRouterStatus {
    /// Conditions, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Session counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<PeerSummary>,
    /// Lifecycle phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}
