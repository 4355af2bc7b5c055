//! Types more than one of the BGP resources use: address families, references by name, label
//! selectors and status conditions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// An AFI/SAFI pair; the API accepts ipv4/unicast, ipv6/unicast and l2vpn/evpn only.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.afi == 'ipv4' ? self.safi == 'unicast' : true",
     "message": "IPv4 only supports unicast SAFI"},
    {"rule": "self.afi == 'ipv6' ? self.safi == 'unicast' : true",
     "message": "IPv6 only supports unicast SAFI"},
    {"rule": "self.afi == 'l2vpn' ? self.safi == 'evpn' : true",
     "message": "L2VPN only supports evpn SAFI"},
]))]
pub struct AddressFamily {
    /// AFI: ipv4, ipv6 or l2vpn.
    pub afi: Afi,
    /// SAFI: unicast or evpn.
    pub safi: Safi,
}

impl AddressFamily {
    /// L2VPN EVPN, the family of every advertisement the CNI writes.
    pub const L2VPN_EVPN: Self = Self {
        afi: Afi::L2vpn,
        safi: Safi::Evpn,
    };
}

/// A reference to an object of the same namespace by name (a BGPRouter, a BGPPolicy).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct NameRef {
    /// The object's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

impl NameRef {
    /// A reference to `name`.
    pub fn to(name: &str) -> Self {
        Self {
            name: name.to_owned(),
        }
    }
}

/// One requirement of a label selector.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// The values for `In`/`NotIn`; empty for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub values: Vec<String>,
}

/// A Kubernetes label selector (routers selected by label).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Requirements, all of which must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// Labels an object must carry, all of them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// A condition's truth value.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// Not known.
    Unknown,
}

/// One observed condition (the shape of `metav1.Condition`), written by the router.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// When the status last changed (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
    /// Human-readable detail; may be empty.
    #[schemars(length(max = 32768))]
    pub message: String,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// CamelCase reason for the last transition.
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    )]
    pub reason: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// The condition's type, CamelCase or `domain/CamelCase`.
    #[serde(rename = "type")]
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub type_: String,
}

/// A status's condition list: one entry per `type`.
pub type Conditions = Vec<Condition>;
