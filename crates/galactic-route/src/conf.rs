//! The `galactic-route` stanza, parsed into a checked plan before anything is touched.
//!
//! ```json
//! {"type": "galactic-route", "vpc": "A", "vpcattachment": "1",
//!  "terminations": [{"network": "198.51.100.0/24"},
//!                   {"network": "2001:db8:77::/64", "via": "fd66:1::100:0"}]}
//! ```
//! `vpc` and `vpcattachment` are read as every plugin of the chain reads them
//! ([`ChainIds`]: same rules, same messages).
//! Every termination is checked: `network` must be a CIDR (host bits are cleared: the kernel
//! stores the masked prefix, so that is what is installed and compared), `via` an address of the
//! same family that can be a next hop. Two terminations for one network are refused, since they
//! would compete for one route.

use galactic_core::ident::{host_ifname, AttachmentId, ChainIds, IdentError, VpcId};
use galactic_core::ip::Family;
use galactic_core::net::netlink::masked;
use ipnetwork::IpNetwork;
use serde_json::Value;
use std::net::IpAddr;

/// Most terminations one attachment may carry: each is a route and a record entry written under
/// the VPC's lock, so the list bounds how long one ADD holds it.
pub const MAX_TERMINATIONS: usize = 64;

/// The keys a termination entry may have.
const TERMINATION_KEYS: [&str; 2] = ["network", "via"];

/// One termination: traffic of the VPC for `network` leaves through this attachment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    /// The destination, masked (canonical).
    pub network: IpNetwork,
    /// The next hop behind the host interface, if any; otherwise a device route.
    pub via: Option<IpAddr>,
}

/// A validated `galactic-route` stanza.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConf {
    /// The VPC (selects the routing table).
    pub vpc: VpcId,
    /// The VPC attachment (with the VPC, names the host interface).
    pub att: AttachmentId,
    /// The terminations, in configured order (empty when the key is absent).
    pub terminations: Vec<Termination>,
}

/// Why a stanza is refused (all CNI code 7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StanzaError {
    /// `vpc` or `vpcattachment` is missing or invalid (the masters' messages).
    #[error(transparent)]
    Ident(#[from] IdentError),
    /// `terminations` is not a list.
    #[error("terminations must be a list of {{\"network\": CIDR, \"via\"?: IP}} objects, got {0}")]
    NotAList(String),
    /// More entries than [`MAX_TERMINATIONS`].
    #[error("terminations has {0} entries; at most {MAX_TERMINATIONS} are allowed per attachment (route a covering prefix instead)")]
    TooMany(usize),
    /// An entry is not an object.
    #[error(
        "terminations[{index}] must be an object {{\"network\": CIDR, \"via\"?: IP}}, got {value}"
    )]
    NotAnObject {
        /// Position in the list.
        index: usize,
        /// The entry as written.
        value: String,
    },
    /// An entry has a key other than `network` and `via` (a typo such as `gw` would otherwise
    /// silently turn a next-hop route into a device route). The upstream chain ignored such
    /// keys, so the message says what the entry meant there and names the upgrade step that
    /// finds these before the switch (decision 0062).
    #[error(
        "terminations[{index}] has unknown key {key:?}: only \"network\" and \"via\" are allowed; the upstream chain ignored it (a device route): remove it to keep that meaning, or write the next hop as \"via\" (docs/operations.md, upgrading from the Go implementation: lint the NADs before the switch)"
    )]
    UnknownKey {
        /// Position in the list.
        index: usize,
        /// The key.
        key: String,
    },
    /// `network` is absent or empty.
    #[error(
        "terminations[{index}] has no \"network\": give a CIDR such as 198.51.100.0/24 or 2001:db8::/64"
    )]
    MissingNetwork {
        /// Position in the list.
        index: usize,
    },
    /// `network` is not a CIDR.
    #[error(
        "terminations[{index}].network {value} is not a CIDR (address/prefix-length): {reason}"
    )]
    BadNetwork {
        /// Position in the list.
        index: usize,
        /// The value as written.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// `via` is not an IP address.
    #[error("terminations[{index}].via {value} is not an IP address: {reason}")]
    BadVia {
        /// Position in the list.
        index: usize,
        /// The value as written.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// `via` and `network` are of different families.
    #[error("terminations[{index}].via {via} is {via_family} but network {network} is {network_family}: a next hop must be of the network's family")]
    FamilyMismatch {
        /// Position in the list.
        index: usize,
        /// The next hop.
        via: IpAddr,
        /// The network.
        network: IpNetwork,
        /// "IPv4" or "IPv6".
        via_family: &'static str,
        /// "IPv4" or "IPv6".
        network_family: &'static str,
    },
    /// `via` cannot be a next hop (unspecified, multicast, broadcast).
    #[error("terminations[{index}].via {via} cannot be a next hop: {why}")]
    ViaNotUnicast {
        /// Position in the list.
        index: usize,
        /// The next hop.
        via: IpAddr,
        /// Why.
        why: &'static str,
    },
    /// Two entries route the same (canonical) network.
    #[error("terminations[{first}] and terminations[{second}] both route {network}: one route per network and VPC table")]
    Duplicate {
        /// The earlier entry.
        first: usize,
        /// The later entry.
        second: usize,
        /// The canonical network.
        network: IpNetwork,
    },
}

impl RouteConf {
    /// Parses and validates the stanza (the whole stdin object).
    pub fn parse(raw: &Value) -> Result<Self, StanzaError> {
        let ChainIds { vpc, att } = ChainIds::of(raw)?;
        let entries = match raw.get("terminations") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(entries)) => entries.as_slice(),
            Some(other) => return Err(StanzaError::NotAList(other.to_string())),
        };
        if entries.len() > MAX_TERMINATIONS {
            return Err(StanzaError::TooMany(entries.len()));
        }
        let mut terminations: Vec<Termination> = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let t = termination(index, entry)?;
            if let Some(first) = terminations.iter().position(|o| o.network == t.network) {
                return Err(StanzaError::Duplicate {
                    first,
                    second: index,
                    network: t.network,
                });
            }
            terminations.push(t);
        }
        Ok(Self {
            vpc,
            att,
            terminations,
        })
    }

    /// The attachment's host interface `G{vpc:9}{att:3}H` (the masters' naming).
    pub fn host_ifname(&self) -> String {
        host_ifname(&self.vpc, &self.att)
    }
}

fn termination(index: usize, entry: &Value) -> Result<Termination, StanzaError> {
    let Some(object) = entry.as_object() else {
        return Err(StanzaError::NotAnObject {
            index,
            value: entry.to_string(),
        });
    };
    if let Some(key) = object
        .keys()
        .find(|k| !TERMINATION_KEYS.contains(&k.as_str()))
    {
        return Err(StanzaError::UnknownKey {
            index,
            key: key.clone(),
        });
    }
    let network = network(index, object.get("network"))?;
    let via = via(index, object.get("via"))?;
    if let Some(via) = via {
        check_next_hop(index, via, network)?;
    }
    Ok(Termination { network, via })
}

fn network(index: usize, value: Option<&Value>) -> Result<IpNetwork, StanzaError> {
    let text = match value {
        None | Some(Value::Null) => return Err(StanzaError::MissingNetwork { index }),
        Some(Value::String(s)) if s.is_empty() => {
            return Err(StanzaError::MissingNetwork { index })
        }
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(StanzaError::BadNetwork {
                index,
                value: other.to_string(),
                reason: "it must be a string".into(),
            })
        }
    };
    let bad = |reason: String| StanzaError::BadNetwork {
        index,
        value: format!("{text:?}"),
        reason,
    };
    // ipnetwork reads a bare address as a host route; a termination must say its prefix.
    if !text.contains('/') {
        return Err(bad(format!(
            "the prefix length is missing (for a single host write {text}/{})",
            if text.contains(':') { 128 } else { 32 }
        )));
    }
    let parsed: IpNetwork = text.parse().map_err(|e| bad(format!("{e}")))?;
    Ok(masked(parsed))
}

fn via(index: usize, value: Option<&Value>) -> Result<Option<IpAddr>, StanzaError> {
    match value {
        // An empty `via` means "no next hop", as upstream reads it.
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => {
            s.parse()
                .map(Some)
                .map_err(|e: std::net::AddrParseError| StanzaError::BadVia {
                    index,
                    value: format!("{s:?}"),
                    reason: e.to_string(),
                })
        }
        Some(other) => Err(StanzaError::BadVia {
            index,
            value: other.to_string(),
            reason: "it must be a string".into(),
        }),
    }
}

fn check_next_hop(index: usize, via: IpAddr, network: IpNetwork) -> Result<(), StanzaError> {
    if Family::of(via) != Family::of_net(network) {
        return Err(StanzaError::FamilyMismatch {
            index,
            via,
            network,
            via_family: Family::of(via).label(),
            network_family: Family::of_net(network).label(),
        });
    }
    let why = match via {
        ip if ip.is_unspecified() => Some("it is the unspecified address"),
        ip if ip.is_multicast() => Some("it is a multicast address"),
        IpAddr::V4(v4) if v4.is_broadcast() => Some("it is the broadcast address"),
        _ => None,
    };
    match why {
        Some(why) => Err(StanzaError::ViaNotUnicast { index, via, why }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
