//! The tap's own stanza keys: `owner` and `group` (numeric ids of an unprivileged VMM),
//! `multi_queue` and `vnet_hdr` (upstream's defaults, off, when absent), and `dan` (hand the tap
//! to a Kata runtime-rs shim, [`crate::kata`]). Each refuses a bad value with a message naming
//! the key and what it accepts: upstream reads `"dan": "true"` as no DAN file at all, and the VM
//! comes up on the wrong network looking healthy.

use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use serde_json::Value;
use std::marker::PhantomData;

/// How the tap is created (the VMM's needs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TapOptions {
    /// Owning user id (a VMM running unprivileged).
    pub owner: Option<u32>,
    /// Owning group id.
    pub group: Option<u32>,
    /// `IFF_MULTI_QUEUE`: one queue per vCPU.
    pub multi_queue: bool,
    /// `IFF_VNET_HDR`: virtio-net header offloads.
    pub vnet_hdr: bool,
    /// `dan`: write the Kata sandbox's DAN file naming this tap.
    pub dan: bool,
}

/// The keys as serde reads them from the stanza object.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Written {
    owner: Option<NumericId<Owner>>,
    group: Option<NumericId<Group>>,
    multi_queue: Option<Flag<MultiQueue>>,
    vnet_hdr: Option<Flag<VnetHdr>>,
    dan: Option<Flag<Dan>>,
}

impl<'de> Deserialize<'de> for TapOptions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let written = Written::deserialize(d)?;
        Ok(Self {
            owner: written.owner.map(|o| o.value),
            group: written.group.map(|g| g.value),
            multi_queue: written.multi_queue.is_some_and(|f| f.value),
            vnet_hdr: written.vnet_hdr.is_some_and(|f| f.value),
            dan: written.dan.is_some_and(|f| f.value),
        })
    }
}

/// A stanza key's name, for messages.
trait Key {
    const NAME: &'static str;
}
struct Owner;
impl Key for Owner {
    const NAME: &'static str = "owner";
}
struct Group;
impl Key for Group {
    const NAME: &'static str = "group";
}
struct MultiQueue;
impl Key for MultiQueue {
    const NAME: &'static str = "multi_queue";
}
struct VnetHdr;
impl Key for VnetHdr {
    const NAME: &'static str = "vnet_hdr";
}
struct Dan;
impl Key for Dan {
    const NAME: &'static str = "dan";
}

/// A numeric user or group id (tap owner/group).
struct NumericId<K> {
    value: u32,
    key: PhantomData<K>,
}

impl<'de, K: Key> Deserialize<'de> for NumericId<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        value
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(|value| Self {
                value,
                key: PhantomData,
            })
            .ok_or_else(|| {
                D::Error::custom(format!("{} must be a numeric id, got {value}", K::NAME))
            })
    }
}

/// A boolean tap option.
struct Flag<K> {
    value: bool,
    key: PhantomData<K>,
}

impl<'de, K: Key> Deserialize<'de> for Flag<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(value) => Ok(Self {
                value,
                key: PhantomData,
            }),
            other => Err(D::Error::custom(format!(
                "{} must be true or false, got {other}",
                K::NAME
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use galactic_master::conf::MasterConf;
    use serde_json::json;

    fn parse(extra: Value) -> Result<MasterConf<TapOptions>, String> {
        let mut raw = json!({"type": "galactic-tap-cni", "vpc": "A", "vpcattachment": "1"});
        if let (Some(map), Value::Object(extra)) = (raw.as_object_mut(), extra) {
            map.extend(extra);
        }
        MasterConf::parse(&raw).map_err(|e| e.to_string())
    }

    #[test]
    fn every_tap_key_is_refused_with_its_own_message() {
        let cases = [
            (json!({"owner": -1}), "owner must be a numeric id, got -1"),
            (
                json!({"group": "x"}),
                "group must be a numeric id, got \"x\"",
            ),
            (
                json!({"vnet_hdr": 1}),
                "vnet_hdr must be true or false, got 1",
            ),
            (
                json!({"dan": "true"}),
                "dan must be true or false, got \"true\"",
            ),
        ];
        for (extra, want) in cases {
            let err = parse(extra.clone()).unwrap_err();
            assert!(err.contains(want), "{extra}: {err}");
        }
    }

    #[test]
    fn the_tap_keys_are_read_with_the_rest_of_the_stanza() {
        let conf = parse(json!({"mtu": 1400, "owner": 1000, "multi_queue": true})).unwrap();
        assert_eq!(conf.mtu, Some(1400));
        assert_eq!(
            (conf.options.owner, conf.options.multi_queue),
            (Some(1000), true)
        );
        assert_eq!(parse(json!({})).unwrap().options, TapOptions::default());
        // Absent and null are upstream's "no DAN file".
        assert!(parse(json!({"dan": true})).unwrap().options.dan);
        assert!(!parse(json!({"dan": null})).unwrap().options.dan);
    }

    use galactic_core::cni::ErrorCode;
    use galactic_testkit::fuzz::proptest;

    proptest::proptest! {
        /// Any JSON value under a tap key is read or refused as a stanza error (code 7) with a
        /// message naming the key; nothing panics.
        #[test]
        fn any_value_of_a_tap_key_is_read_or_refused_by_name(
            key in proptest::sample::select(vec!["owner", "group", "multi_queue", "vnet_hdr", "dan"]),
            value in galactic_testkit::fuzz::any_json(),
        ) {
            let raw = json!({"type": "galactic-tap-cni", "vpc": "A", "vpcattachment": "1", key: value});
            if let Err(e) = MasterConf::<TapOptions>::parse(&raw) {
                let e = galactic_master::MasterError::from(e).to_cni();
                proptest::prop_assert_eq!(e.code.0, 7);
                proptest::prop_assert!(e.msg.contains(key), "{}", e.msg);
            }
        }
    }
}
