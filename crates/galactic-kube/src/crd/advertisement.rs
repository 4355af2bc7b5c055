//! `BGPAdvertisement`: what one router originates (the CNI writes one per VPC and attachment).

use super::shared::{AddressFamily, Conditions, NameRef};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// A local routing-table source.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RedistributeSource {
    /// Static routes.
    Static,
    /// Connected routes.
    Connected,
    /// Kernel routes.
    Kernel,
}

/// Where originated routes come from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OriginType {
    /// A local interface (`interfaceName`).
    Interface,
    /// The kernel routing table.
    Kernel,
}

/// Routes originated from a local interface or the kernel table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.type == 'interface' ? has(self.interfaceName) : true",
     "message": "interfaceName is required when type is interface"},
    {"rule": "self.type == 'kernel' ? !has(self.interfaceName) : true",
     "message": "interfaceName must not be set when type is kernel"},
]))]
pub struct OriginateFrom {
    /// The interface, for `type: interface` (and only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub interface_name: Option<String>,
    /// The source kind.
    #[serde(rename = "type")]
    pub type_: OriginType,
}

impl OriginateFrom {
    /// Routes of the local interface `name`.
    pub fn interface(name: &str) -> Self {
        Self {
            interface_name: Some(name.to_owned()),
            type_: OriginType::Interface,
        }
    }
}

/// Adds the item rule of `prefixes` (a rule on each string, which `inner(...)` cannot carry).
fn prefix_rule(schema: &mut schemars::Schema) {
    if let Some(items) = schema.get_mut("items").and_then(|i| i.as_object_mut()) {
        items.insert(
            "x-kubernetes-validations".into(),
            serde_json::json!([{
                "rule": "self.matches('^[0-9]+\\\\.[0-9]+\\\\.[0-9]+\\\\.[0-9]+/[0-9]{1,2}$|^[0-9a-fA-F:]+::?[0-9a-fA-F:]+/[0-9]{1,3}$')",
                "message": "must be a valid IPv4 or IPv6 CIDR"
            }]),
        );
    }
}

/// What one router originates.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "network.datumapis.com",
    version = "v1alpha1",
    kind = "BGPAdvertisement",
    plural = "bgpadvertisements",
    shortname = "bgpadv",
    status = "BGPAdvertisementStatus",
    doc = "Routes one BGPRouter originates: static prefixes, redistributed or interface routes.",
    printcolumn = r#"{"name": "ROUTER", "type": "string", "jsonPath": ".spec.routerRef.name"}"#,
    printcolumn = r#"{"name": "ADDRESS-FAMILY", "type": "string", "jsonPath": ".spec.addressFamily.afi"}"#,
    printcolumn = r#"{"name": "PREFIXES", "type": "integer", "jsonPath": ".status.advertisedPrefixes"}"#,
    printcolumn = r#"{"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    namespaced
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(has(self.prefixes) && self.prefixes.size() > 0) || (has(self.redistribute) && self.redistribute.size() > 0) || has(self.originateFrom)",
    "message": "at least one of prefixes, redistribute, or originateFrom must be specified"
}]))]
pub struct BGPAdvertisementSpec {
    /// AFI/SAFI of the routes (the CNI writes l2vpn/evpn).
    pub address_family: AddressFamily,
    /// Communities attached to every route (the CNI writes the VPC's route target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 64),
        inner(length(max = 32)),
        extend("x-kubernetes-validations" = [{
            "rule": "self.all(c, c.matches('^[0-9]{1,10}:[0-9]{1,10}$') || c.matches('^[0-9]{1,3}\\\\.[0-9]{1,3}\\\\.[0-9]{1,3}\\\\.[0-9]{1,3}:[0-9]{1,10}$'))",
            "message": "community must be in ASN:NN or IP:NN format"
        }])
    )]
    pub communities: Vec<String>,
    /// SRv6 behaviour of the routes' uSID (the CNI writes End.DT46).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<SRv6Function>,
    /// LOCAL_PREF of every route (not used by the CNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub local_preference: Option<i32>,
    /// Routes from an interface or the kernel table: what the CNI writes for an attachment
    /// without addresses (its host interface), so the router sees the attachment alive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originate_from: Option<OriginateFrom>,
    /// Policy filtering the routes (not used by the CNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_ref: Option<NameRef>,
    /// Prefixes to originate: a set, canonical and sorted when the CNI writes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 256),
        inner(length(max = 64)),
        transform = prefix_rule,
        extend("x-kubernetes-list-type" = "set")
    )]
    pub prefixes: Vec<String>,
    /// Routing-table sources to redistribute (not used by the CNI).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3), extend("x-kubernetes-list-type" = "set"))]
    pub redistribute: Vec<RedistributeSource>,
    /// The router that originates these routes.
    pub router_ref: NameRef,
    /// The VPC's VRF id on this router (1..65535): the uSID argument of the routes.
    #[serde(rename = "vrfID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub vrf_id: Option<i32>,
}

/// What the router reports (the CNI never reads or writes it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BGPAdvertisementStatus {
    /// How many prefixes are being originated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertised_prefixes: Option<i32>,
    /// Conditions, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Conditions,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
