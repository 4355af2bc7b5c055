//! `EgressShardClaim`: one attachment's standing request for internet egress on the node it
//! landed on, written by the cell's controller and read by the node. None of the plugins reads or
//! writes claims: the DaemonSet's `datapath` container (upstream's `galactic-cni run`) lists the
//! claims naming its node on every egress sweep. The type is here so that `cargo xtask gen-crds`
//! and the test API server serve the schema the Galactic API serves.

use super::shared::{Conditions, NameRef};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A destination address family an egress shard translates toward.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum EgressAddressFamily {
    /// IPv6 destinations.
    IPv6,
    /// IPv4 destinations.
    IPv4,
}

/// The attachment, VPC, node and families one claim stands for; immutable as a whole (an
/// attachment that lands on another node gets a new claim).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "network.datumapis.com",
    version = "v1alpha1",
    kind = "EgressShardClaim",
    plural = "egressshardclaims",
    shortname = "egressclaim",
    status = "EgressShardClaimStatus",
    doc = "One attachment's request for internet egress on its node; the node's datapath routes the VRF toward the node's shard while a claim names it.",
    printcolumn = r#"{"name": "ATTACHMENT", "type": "string", "jsonPath": ".spec.attachment.name"}"#,
    printcolumn = r#"{"name": "VPC", "type": "string", "jsonPath": ".spec.vpc.name"}"#,
    printcolumn = r#"{"name": "NODE", "type": "string", "jsonPath": ".spec.nodeName"}"#,
    printcolumn = r#"{"name": "SHARD", "type": "string", "jsonPath": ".status.shardRef.name"}"#,
    printcolumn = r#"{"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "REASON", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self == oldSelf",
    "message": "spec is immutable; an attachment that moved nodes gets a new claim"
}]))]
pub struct EgressShardClaimSpec {
    /// The attachment (in the claim's namespace) this claim stands for; it owns the claim.
    pub attachment: NameRef,
    /// The destination families the attachment's network declared (1 or 2, no repeats).
    #[schemars(length(min = 1, max = 2), extend("x-kubernetes-list-type" = "set"))]
    pub families: Vec<EgressAddressFamily>,
    /// The node the attachment landed on: whose shard serves it and whose datapath acts on it.
    #[schemars(length(min = 1))]
    pub node_name: String,
    /// The attachment's VPC (in the claim's namespace); the node derives the VRF from its name.
    pub vpc: NameRef,
}

/// The EgressShard a claim is bound to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ShardRef {
    /// Name of the EgressShard.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the EgressShard.
    #[schemars(length(min = 1))]
    pub namespace: String,
}

/// The shard a claim was bound to, written by the cell's controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressShardClaimStatus {
    /// Conditions, one per type (`Ready`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The shard on the attachment's node; absent when the node has none to bind to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_ref: Option<ShardRef>,
}
