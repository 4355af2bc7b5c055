//! CNI results (1.0.0/1.1.0 share one schema; every 1.1 field is kept).
//!
//! Empty optional fields are omitted, as Go's libcni does, and parsing accepts results without
//! `dns`, `routes`, `mac` or `sandbox` (C33). Keys this version does not know are carried in
//! `extra` so a chained plugin passes a `prevResult` on without losing anything (C25).

use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::net::IpAddr;

/// A success result (ADD), or the abbreviated IPAM result (no `interfaces`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CniResult {
    /// The result's version; set to the config's version when printed.
    #[serde(rename = "cniVersion", default)]
    pub cni_version: String,
    /// Interfaces the attachment created, host-side ones included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    /// Assigned addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpConfig>,
    /// Routes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// DNS settings.
    #[serde(default, skip_serializing_if = "Dns::is_empty")]
    pub dns: Dns,
    /// Keys not modelled here, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An interface entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// Interface name.
    pub name: String,
    /// Hardware address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// MTU (1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// The netns path for container-side interfaces; absent for host interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Socket path of a vhost-user style interface (1.1).
    #[serde(
        rename = "socketPath",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub socket_path: Option<String>,
    /// PCI address (1.1).
    #[serde(rename = "pciID", default, skip_serializing_if = "Option::is_none")]
    pub pci_id: Option<String>,
    /// Keys not modelled here.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An assigned address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IpConfig {
    /// The address with its prefix length (host bits kept).
    pub address: IpNetwork,
    /// The gateway, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Index into `interfaces` (absent in IPAM results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
    /// Keys not modelled here.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A route.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// Destination.
    pub dst: IpNetwork,
    /// Next hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
    /// Route MTU (1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Advertised MSS (1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advmss: Option<u32>,
    /// Route priority (1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Routing table (1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// Route scope (1.1): 0 global, 253 link, 254 host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<u8>,
    /// Keys not modelled here.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Route {
    /// A route to `dst` with nothing else set.
    pub fn to(dst: IpNetwork) -> Self {
        Self {
            dst,
            gw: None,
            mtu: None,
            advmss: None,
            priority: None,
            table: None,
            scope: None,
            extra: Map::new(),
        }
    }
}

/// DNS settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dns {
    /// Name servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// Local domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    /// Resolver options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Dns {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.is_none()
            && self.search.is_empty()
            && self.options.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SPEC appendix's bridge result, with every 1.1 field set.
    const FULL_1_1: &str = r#"{
      "cniVersion": "1.1.0",
      "interfaces": [
        {"name": "cni0", "mac": "00:11:22:33:44:55"},
        {"name": "veth3243", "mac": "55:44:33:22:11:11", "mtu": 1400},
        {"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/var/run/netns/blue",
         "socketPath": "/tmp/sock", "pciID": "0000:00:1f.6"}
      ],
      "ips": [{"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 2},
              {"address": "fd00::5/64", "interface": 2}],
      "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.0.1", "mtu": 1400, "advmss": 1360,
                  "priority": 10, "table": 100, "scope": 0}],
      "dns": {"nameservers": ["10.1.0.1"]},
      "futureKey": {"kept": true}
    }"#;

    #[test]
    fn round_trip_keeps_every_field() {
        let parsed: CniResult = serde_json::from_str(FULL_1_1).unwrap();
        let original: Value = serde_json::from_str(FULL_1_1).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), original);
        assert_eq!(
            parsed.ips[0].address.to_string(),
            "10.1.0.5/16",
            "host bits kept"
        );
    }

    #[test]
    fn go_style_minimal_results_parse() {
        let parsed: CniResult = serde_json::from_str(
            r#"{"cniVersion":"1.0.0","interfaces":[{"name":"h"}],"ips":[{"address":"10.0.0.2/32"}]}"#,
        )
        .unwrap();
        assert!(parsed.dns.is_empty() && parsed.routes.is_empty());
        let out = serde_json::to_value(&parsed).unwrap();
        assert!(out.get("dns").is_none(), "empty dns is omitted");
    }
}
