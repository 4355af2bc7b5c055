//! The master stanza (`galactic-cni` / `galactic-tap-cni`), validated before anything is touched.

use galactic_core::cni::{CniError, Request};
use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_core::net::tap::TapOptions;
use serde_json::Value;

/// Lowest MTU Linux accepts on an Ethernet-like device.
pub const MIN_MTU: u64 = 68;
/// Highest MTU accepted.
pub const MAX_MTU: u64 = 65535;

/// Addressing keys that belong inside the `ipam` block (upstream's guard against stale NADs that
/// would otherwise attach with no address at all).
const MOVED_KEYS: [&str; 4] = [
    "ipv6_subnet",
    "ipv4_subnet",
    "address_families",
    "static_ip",
];

/// A validated master stanza.
#[derive(Debug, Clone)]
pub struct MasterConf {
    /// The VPC.
    pub vpc: VpcId,
    /// The VPC attachment.
    pub att: AttachmentId,
    /// MTU of the host (and guest) interface; kernel default when absent.
    pub mtu: Option<u32>,
    /// The IPAM delegate's type, when an `ipam` block is present (its presence alone decides).
    pub ipam_type: Option<String>,
    /// Tap options (tap master only).
    pub tap: TapOptions,
}

impl MasterConf {
    /// The host interface name `G{vpc:9}{att:3}H`.
    pub fn host_ifname(&self) -> String {
        host_ifname(&self.vpc, &self.att)
    }

    /// Parses and validates the stanza of `req` (every error is code 7).
    pub fn parse(req: &Request) -> Result<Self, CniError> {
        let raw = &req.conf.raw;
        reject_moved_keys(raw)?;
        let vpc = VpcId::parse(str_field(raw, "vpc"))
            .map_err(|e| CniError::invalid_config(e.to_string()))?;
        let att = AttachmentId::parse(str_field(raw, "vpcattachment"))
            .map_err(|e| CniError::invalid_config(e.to_string()))?;
        Ok(Self {
            vpc,
            att,
            mtu: mtu(raw)?,
            ipam_type: ipam_type(raw)?,
            tap: tap_options(raw)?,
        })
    }
}

fn str_field<'a>(raw: &'a Value, key: &str) -> &'a str {
    raw.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn reject_moved_keys(raw: &Value) -> Result<(), CniError> {
    let present: Vec<String> = MOVED_KEYS
        .iter()
        .filter(|k| raw.get(**k).is_some_and(|v| !v.is_null()))
        .map(|k| format!("'{k}'"))
        .collect();
    match present.len() {
        0 => Ok(()),
        1 => Err(CniError::invalid_config(format!(
            "addressing field {} belongs inside the 'ipam' block, not at the top level of the config",
            present[0]
        ))),
        _ => Err(CniError::invalid_config(format!(
            "addressing fields {} belong inside the 'ipam' block, not at the top level of the config",
            present.join(", ")
        ))),
    }
}

fn mtu(raw: &Value) -> Result<Option<u32>, CniError> {
    match raw.get("mtu") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|m| (MIN_MTU..=MAX_MTU).contains(m))
            .and_then(|m| u32::try_from(m).ok())
            .map(Some)
            .ok_or_else(|| {
                CniError::invalid_config(format!(
                    "mtu {value} is out of range: use an integer from {MIN_MTU} to {MAX_MTU}, or omit it for the kernel default"
                ))
            }),
    }
}

fn ipam_type(raw: &Value) -> Result<Option<String>, CniError> {
    let Some(ipam) = raw.get("ipam").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let plugin = ipam.get("type").and_then(Value::as_str).unwrap_or_default();
    if !ipam.is_object() || plugin.is_empty() {
        return Err(CniError::invalid_config(
            "the 'ipam' block must be an object with a \"type\" (e.g. \"galactic-ipam\")",
        ));
    }
    if plugin.contains('/') {
        return Err(CniError::invalid_config(format!(
            "ipam.type {plugin:?} must be a plugin name, not a path"
        )));
    }
    Ok(Some(plugin.to_owned()))
}

fn tap_options(raw: &Value) -> Result<TapOptions, CniError> {
    let id = |key: &str| match raw.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| {
                CniError::invalid_config(format!("{key} must be a numeric id, got {v}"))
            }),
    };
    let flag = |key: &str| match raw.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(CniError::invalid_config(format!(
            "{key} must be true or false, got {v}"
        ))),
    };
    Ok(TapOptions {
        owner: id("owner")?,
        group: id("group")?,
        multi_queue: flag("multi_queue")?,
        vnet_hdr: flag("vnet_hdr")?,
    })
}
