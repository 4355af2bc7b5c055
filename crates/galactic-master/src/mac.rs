//! The MAC address the runtime asks for, read the way the reference `bridge` and `tap` plugins
//! read it: `MAC=` in `CNI_ARGS` (Podman's `--mac-address`), then `args.cni.mac` in the network
//! configuration (Multus' `cni-args`), then the `mac` capability (`runtimeConfig.mac`: Multus'
//! `mac`); a later source wins. The veth master gives it to the container's interface, the tap
//! master to the tap.

use galactic_core::cni::CniArgs;
use galactic_core::net::netlink::{Link, Netlink};
use galactic_core::net::NetError;
use serde_json::Value;
use std::fmt;

/// An Ethernet (EUI-48) unicast address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mac([u8; 6]);

/// `aa:bb:cc:dd:ee:ff`, as the kernel and CNI results write it.
impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&galactic_core::net::netlink::format_mac(&self.0))
    }
}

/// Why the requested MAC is refused (code 7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MacError {
    /// Not six hex pairs.
    #[error("requested MAC {value} (from {source_name}) is not a MAC address: write six hexadecimal pairs separated by ':' or '-', e.g. 02:00:00:00:00:01")]
    Malformed {
        /// Where it came from.
        source_name: &'static str,
        /// The value as given (JSON text for a non-string).
        value: String,
    },
    /// A group address (the lowest bit of the first octet set).
    #[error("requested MAC {0} (from {1}) is a multicast address (the lowest bit of its first octet is set); an interface needs a unicast MAC")]
    Multicast(Mac, &'static str),
    /// All zeros.
    #[error("requested MAC {0} (from {1}) is the all-zeros address, which no interface may use")]
    Zero(Mac, &'static str),
}

/// The names of the three sources, for messages and docs.
pub const CNI_ARGS_MAC: &str = "CNI_ARGS MAC";
/// `args.cni.mac` in the network configuration.
pub const ARGS_CNI_MAC: &str = "args.cni.mac";
/// `runtimeConfig.mac` (the `mac` capability).
pub const RUNTIME_CONFIG_MAC: &str = "runtimeConfig.mac";

/// The MAC requested by `CNI_ARGS` and the network configuration `conf` (stdin), if any.
pub fn requested(args: &CniArgs, conf: &Value) -> Result<Option<Mac>, MacError> {
    let mut chosen: Option<(&'static str, String)> = args
        .get("MAC")
        .filter(|m| !m.is_empty())
        .map(|m| (CNI_ARGS_MAC, m.to_owned()));
    for (source_name, pointer) in [
        (ARGS_CNI_MAC, "/args/cni/mac"),
        (RUNTIME_CONFIG_MAC, "/runtimeConfig/mac"),
    ] {
        match conf.pointer(pointer) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.is_empty() => {}
            Some(Value::String(s)) => chosen = Some((source_name, s.clone())),
            Some(other) => {
                return Err(MacError::Malformed {
                    source_name,
                    value: other.to_string(),
                })
            }
        }
    }
    chosen
        .map(|(source_name, text)| parse(source_name, &text))
        .transpose()
}

fn parse(source_name: &'static str, text: &str) -> Result<Mac, MacError> {
    let malformed = || MacError::Malformed {
        source_name,
        value: text.to_owned(),
    };
    let separator = if text.contains('-') { '-' } else { ':' };
    let mut bytes = [0u8; 6];
    let mut parts = text.split(separator);
    for byte in bytes.iter_mut() {
        let part = parts.next().ok_or_else(malformed)?;
        if part.len() != 2 {
            return Err(malformed());
        }
        *byte = u8::from_str_radix(part, 16).map_err(|_| malformed())?;
    }
    if parts.next().is_some() {
        return Err(malformed());
    }
    let mac = Mac(bytes);
    if bytes[0] & 1 == 1 {
        return Err(MacError::Multicast(mac, source_name));
    }
    if bytes == [0; 6] {
        return Err(MacError::Zero(mac, source_name));
    }
    Ok(mac)
}

/// Gives `link` the MAC `mac` unless it has it; returns the link as it is now.
pub fn apply(nl: &Netlink, link: &Link, mac: Mac) -> Result<Link, NetError> {
    let want = mac.to_string();
    if link.mac.as_deref() == Some(want.as_str()) {
        return Ok(link.clone());
    }
    nl.set_mac(link.index, mac.0)?;
    nl.require_link(&link.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(raw: &str) -> CniArgs {
        CniArgs::parse(raw).unwrap()
    }

    #[test]
    fn every_source_is_read_and_the_capability_wins() {
        let conf = json!({});
        assert_eq!(requested(&args("K8S_POD_NAME=p"), &conf), Ok(None));
        let podman = requested(&args("IgnoreUnknown=1;MAC=02:00:00:00:00:42"), &conf);
        assert_eq!(podman.unwrap().unwrap().to_string(), "02:00:00:00:00:42");
        let all = json!({"args": {"cni": {"mac": "02-00-00-00-00-43"}},
                         "runtimeConfig": {"mac": "CA:FE:C0:FF:EE:00"}});
        let wins = requested(&args("MAC=02:00:00:00:00:42"), &all).unwrap();
        assert_eq!(wins.unwrap().to_string(), "ca:fe:c0:ff:ee:00");
        let args_only = json!({"args": {"cni": {"mac": "02-00-00-00-00-43"}}});
        let second = requested(&args("MAC=02:00:00:00:00:42"), &args_only).unwrap();
        assert_eq!(second.unwrap().to_string(), "02:00:00:00:00:43");
    }

    #[test]
    fn an_unusable_mac_is_refused_naming_it_and_its_source() {
        let cases = [
            (
                "MAC=02:00:00:00:00",
                json!({}),
                "requested MAC 02:00:00:00:00 (from CNI_ARGS MAC) is not a MAC address",
            ),
            (
                "MAC=02:00:00:00:00:0g",
                json!({}),
                "02:00:00:00:00:0g (from CNI_ARGS MAC) is not",
            ),
            (
                "MAC=2:0:0:0:0:1",
                json!({}),
                "2:0:0:0:0:1 (from CNI_ARGS MAC) is not",
            ),
            ("MAC=02:00-00:00:00:01", json!({}), "is not a MAC address"),
            (
                "",
                json!({"runtimeConfig": {"mac": 5}}),
                "requested MAC 5 (from runtimeConfig.mac) is not",
            ),
            (
                "MAC=01:00:5e:00:00:01",
                json!({}),
                "requested MAC 01:00:5e:00:00:01 (from CNI_ARGS MAC) is a multicast address",
            ),
            (
                "",
                json!({"args": {"cni": {"mac": "00:00:00:00:00:00"}}}),
                "00:00:00:00:00:00 (from args.cni.mac) is the all-zeros address",
            ),
        ];
        for (cni_args, conf, want) in cases {
            let err = requested(&args(cni_args), &conf).unwrap_err().to_string();
            assert!(err.contains(want), "{cni_args} {conf}: {err}");
        }
    }
}
