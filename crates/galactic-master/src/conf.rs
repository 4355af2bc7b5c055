//! The master stanza (`galactic-cni` / `galactic-tap-cni`), validated before anything is touched.
//!
//! Parsed with serde: each field's type refuses a bad value with the message a person needs
//! (which key, what is accepted); the checks across fields run first, in a fixed order.

use galactic_core::attachment::{Kind, Record, Stage};
use galactic_core::cni::{CniError, Request};
use galactic_core::ident::{ChainIds, IdentError};
use galactic_core::plugins;
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::Deserialize;
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

/// Why a stanza is refused (code 7).
#[derive(Debug, thiserror::Error)]
pub enum StanzaError {
    /// `vpc` or `vpcattachment` is missing or invalid.
    #[error(transparent)]
    Ids(#[from] IdentError),
    /// Addressing keys at the top level instead of inside `ipam`.
    #[error("{}", moved_message(.0))]
    MovedKeys(Vec<&'static str>),
    /// A field's value is refused (the message names the field and what it accepts).
    #[error("{0}")]
    Field(#[source] serde_json::Error),
}

fn moved_message(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("'{k}'")).collect();
    match quoted.as_slice() {
        [one] => format!(
            "addressing field {one} belongs inside the 'ipam' block, not at the top level of the config"
        ),
        many => format!(
            "addressing fields {} belong inside the 'ipam' block, not at the top level of the config",
            many.join(", ")
        ),
    }
}

/// A validated master stanza, with the options `O` of the master's own device kind.
#[derive(Debug, Clone)]
pub struct MasterConf<O> {
    /// The VPC and the VPC attachment.
    pub ids: ChainIds,
    /// MTU of the host (and guest) interface; kernel default when absent.
    pub mtu: Option<u32>,
    /// The IPAM delegate's type, when an `ipam` block is present (its presence alone decides).
    pub ipam_type: Option<String>,
    /// The device kind's own keys (the tap's owner, group and queues; none for a veth).
    pub options: O,
}

/// The per-field part of the stanza, as serde reads it.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Written {
    mtu: Option<Mtu>,
    ipam: Option<IpamRef>,
}

impl<O: DeserializeOwned> MasterConf<O> {
    /// The host interface name `G{vpc:9}{att:3}H`.
    pub fn host_ifname(&self) -> String {
        self.ids.host_ifname()
    }

    /// The record of this attachment for the request's container (`kind`: the master's device).
    pub fn record(&self, req: &Request, kind: Kind) -> Result<Record, CniError> {
        Ok(Record {
            network: req.conf.name.clone(),
            container_id: req.env.container_id()?.to_string(),
            ifname: req.env.ifname()?.to_string(),
            netns: req.env.netns.as_ref().map(|p| p.display().to_string()),
            kind,
            vpc: self.ids.vpc.raw().to_owned(),
            attachment: self.ids.att.raw().to_owned(),
            host_ifname: self.host_ifname(),
            ipam_type: self.ipam_type.clone(),
            stage: Stage::Live,
            configured: None,
        })
    }

    /// Parses and validates the stanza (the whole stdin object).
    pub fn parse(raw: &Value) -> Result<Self, StanzaError> {
        reject_moved_keys(raw)?;
        let ids = ChainIds::of(raw)?;
        let written = Written::deserialize(raw).map_err(StanzaError::Field)?;
        Ok(Self {
            ids,
            mtu: written.mtu.and_then(|m| m.0),
            ipam_type: written.ipam.map(|i| i.0),
            options: O::deserialize(raw).map_err(StanzaError::Field)?,
        })
    }
}

fn reject_moved_keys(raw: &Value) -> Result<(), StanzaError> {
    let present: Vec<&'static str> = MOVED_KEYS
        .into_iter()
        .filter(|k| raw.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    match present.is_empty() {
        true => Ok(()),
        false => Err(StanzaError::MovedKeys(present)),
    }
}

/// `mtu`: an integer the kernel accepts, or 0 for the kernel default (`None`), as the upstream
/// chain and the reference plugins read it: NADs written for the Go chain keep their meaning
/// (decision 0062).
struct Mtu(Option<u32>);

impl<'de> Deserialize<'de> for Mtu {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        if value.as_u64() == Some(0) {
            return Ok(Mtu(None));
        }
        value
            .as_u64()
            .filter(|m| (MIN_MTU..=MAX_MTU).contains(m))
            .and_then(|m| u32::try_from(m).ok())
            .map(|m| Mtu(Some(m)))
            .ok_or_else(|| {
                D::Error::custom(format!(
                    "mtu {value} is out of range: use an integer from {MIN_MTU} to {MAX_MTU}, or 0 (or omit it) for the kernel default"
                ))
            })
    }
}

/// The `ipam` block as the master reads it: only its `type`, a plain plugin name.
struct IpamRef(String);

impl<'de> Deserialize<'de> for IpamRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let plugin = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !value.is_object() || plugin.is_empty() {
            return Err(D::Error::custom(
                "the 'ipam' block must be an object with a \"type\" (e.g. \"galactic-ipam\")",
            ));
        }
        if plugin.contains('/') {
            return Err(D::Error::custom(format!(
                "ipam.type {plugin:?} must be a plugin name, not a path"
            )));
        }
        // A chain plugin as IPAM would exec the chain from inside itself.
        if !matches!(plugins::role(plugin), None | Some(plugins::Role::Ipam)) {
            return Err(D::Error::custom(format!(
                "ipam.type {plugin:?} names a chain plugin, not an IPAM plugin; use {:?} (or another IPAM plugin)",
                plugins::IPAM
            )));
        }
        Ok(IpamRef(plugin.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A device kind without keys of its own (the veth's): the flow's keys alone.
    #[derive(Debug, Clone, Default, Deserialize)]
    struct NoKeys {}

    fn parse(extra: Value) -> Result<MasterConf<NoKeys>, String> {
        let mut raw = json!({"type": "galactic-cni", "vpc": "A", "vpcattachment": "1"});
        if let (Some(map), Value::Object(extra)) = (raw.as_object_mut(), extra) {
            map.extend(extra);
        }
        MasterConf::parse(&raw).map_err(|e| e.to_string())
    }

    #[test]
    fn every_field_is_refused_with_its_own_message() {
        let cases = [
            (json!({"mtu": 67}), "mtu 67 is out of range"),
            (json!({"mtu": "1500"}), "mtu \"1500\" is out of range"),
            (json!({"ipam": []}), "the 'ipam' block must be an object"),
            (
                json!({"ipam": {"type": "/bin/x"}}),
                "must be a plugin name, not a path",
            ),
            (
                json!({"static_ip": "fd00::1", "ipv6_subnet": 5}),
                "addressing fields 'ipv6_subnet', 'static_ip' belong inside the 'ipam' block",
            ),
            (json!({"vpc": 7}), "vpc is required"),
        ];
        for (extra, want) in cases {
            let err = parse(extra.clone()).unwrap_err();
            assert!(err.contains(want), "{extra}: {err}");
        }
    }

    #[test]
    fn a_valid_stanza_is_read_whole() {
        let conf = parse(json!({"mtu": 1400, "ipam": {"type": "galactic-ipam"},
            "owner": 1000, "multi_queue": true, "mtu_note": "unknown keys are tolerated"}))
        .unwrap();
        assert_eq!(conf.host_ifname(), "G00000000A001H");
        assert_eq!(conf.mtu, Some(1400));
        assert_eq!(conf.ipam_type.as_deref(), Some("galactic-ipam"));
        let bare = parse(json!({"mtu": null, "ipam": null})).unwrap();
        assert_eq!((bare.mtu, bare.ipam_type), (None, None));
        // The upstream chain's "kernel default" spelling.
        assert_eq!(parse(json!({"mtu": 0})).unwrap().mtu, None);
    }
}
