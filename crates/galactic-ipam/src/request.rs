//! Addresses the runtime asks for, read the way the reference `host-local` IPAM reads them:
//! `IP=` in `CNI_ARGS` (Podman's `--ip`, one address or a comma-separated list), `args.cni.ips`
//! in the network configuration (Multus' `cni-args`), and the `ips` capability
//! (`runtimeConfig.ips`: Podman's `--ip` with `--ip6`, Multus' `ips`). Each entry is an address
//! or an address with a prefix length; the prefix length is not used (the endpoint keeps its
//! pool's prefix, as host-local keeps its subnet's).
//!
//! The requests of all sources together name at most one address per family. Whether a
//! requested address can be had (inside the configured pool or addressing, free or already this
//! attachment's) is decided by the caller: `plugin.rs` for the configured addressing, the store
//! for pools.

use crate::pool::Pool;
use crate::store::Want;
use galactic_core::cni::CniArgs;
use galactic_core::ip::Family;
use ipnetwork::IpNetwork;
use serde_json::Value;
use std::net::IpAddr;

/// Why the runtime's address request is refused (code 7). Every variant names the address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// An entry is not an address.
    #[error("requested address {value} (from {source_name}) is not an IP address")]
    Malformed {
        /// Where it came from (`CNI_ARGS IP`, `runtimeConfig.ips`, `args.cni.ips`).
        source_name: &'static str,
        /// The entry as given (JSON text for a non-string entry).
        value: String,
    },
    /// A list source is not a list.
    #[error("{source_name} must be a list of IP addresses, got {value}")]
    NotAList {
        /// Where it came from.
        source_name: &'static str,
        /// The value as given.
        value: String,
    },
    /// Two different addresses of one family.
    #[error("the runtime requested two {family} addresses ({first} and {second}); an attachment has at most one per family")]
    TwoOfFamily {
        /// The family.
        family: Family,
        /// The first request.
        first: IpAddr,
        /// The other one.
        second: IpAddr,
    },
    /// No pool or configured address of the requested address's family.
    #[error("requested address {address} cannot be given: this network configures no {family} addressing")]
    NoFamily {
        /// The address.
        address: IpAddr,
        /// Its family.
        family: Family,
    },
    /// The address is not one the pool may hand out.
    #[error("requested address {address} {refusal}")]
    Refused {
        /// The address.
        address: IpAddr,
        /// Why.
        refusal: crate::pool::Refusal,
    },
    /// `addresses`/`static_ip` mode: the address is not the configured one.
    #[error("requested address {address} is not this network's configured {family} address {configured}")]
    NotConfigured {
        /// The address.
        address: IpAddr,
        /// Its family.
        family: Family,
        /// The configured address.
        configured: IpNetwork,
    },
}

/// The names of the three sources, for messages and docs.
pub const CNI_ARGS_IP: &str = "CNI_ARGS IP";
/// `runtimeConfig.ips` (the `ips` capability).
pub const RUNTIME_CONFIG_IPS: &str = "runtimeConfig.ips";
/// `args.cni.ips` in the network configuration.
pub const ARGS_CNI_IPS: &str = "args.cni.ips";

/// The addresses requested for this ADD by `CNI_ARGS` and the network configuration `conf`
/// (stdin), IPv6 first, at most one per family (an address named by several sources counts
/// once).
pub fn requested(args: &CniArgs, conf: &Value) -> Result<Vec<IpAddr>, RequestError> {
    let mut entries: Vec<(&'static str, String)> = Vec::new();
    if let Some(raw) = args.get("IP") {
        entries.extend(
            raw.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(|e| (CNI_ARGS_IP, e.to_owned())),
        );
    }
    entries.extend(list(ARGS_CNI_IPS, conf.pointer("/args/cni/ips"))?);
    entries.extend(list(
        RUNTIME_CONFIG_IPS,
        conf.pointer("/runtimeConfig/ips"),
    )?);
    let mut out: Vec<IpAddr> = Vec::new();
    for (source_name, text) in entries {
        let address = parse(&text).ok_or(RequestError::Malformed {
            source_name,
            value: text.clone(),
        })?;
        match out.iter().find(|a| Family::of(**a) == Family::of(address)) {
            Some(first) if *first == address => {}
            Some(first) => {
                return Err(RequestError::TwoOfFamily {
                    family: Family::of(address),
                    first: *first,
                    second: address,
                })
            }
            None => out.push(address),
        }
    }
    out.sort_by_key(|a| Family::of(*a));
    Ok(out)
}

/// The string entries of a list source (`null` or absent: none).
fn list(
    source_name: &'static str,
    value: Option<&Value>,
) -> Result<Vec<(&'static str, String)>, RequestError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok((source_name, s.trim().to_owned())),
                other => Err(RequestError::Malformed {
                    source_name,
                    value: other.to_string(),
                }),
            })
            .collect(),
        Some(other) => Err(RequestError::NotAList {
            source_name,
            value: other.to_string(),
        }),
    }
}

/// An address, or an address with a prefix length (whose address part is taken).
fn parse(text: &str) -> Option<IpAddr> {
    if text.contains('/') {
        return text.parse::<IpNetwork>().ok().map(|n| n.ip());
    }
    text.parse().ok()
}

/// Each pool with the address requested in it (checked against the pool: inside it, not
/// reserved); a request of a family no pool has is refused.
pub fn wants<'a>(pools: &'a [Pool], requested: &[IpAddr]) -> Result<Vec<Want<'a>>, RequestError> {
    for address in requested {
        if !pools.iter().any(|p| p.family() == Family::of(*address)) {
            return Err(RequestError::NoFamily {
                address: *address,
                family: Family::of(*address),
            });
        }
    }
    pools
        .iter()
        .map(|pool| {
            let ask = requested.iter().find(|a| Family::of(**a) == pool.family());
            let requested = match ask {
                None => None,
                Some(address) => {
                    let index =
                        pool.requested_slot(*address)
                            .map_err(|refusal| RequestError::Refused {
                                address: *address,
                                refusal,
                            })?;
                    Some((*address, index))
                }
            };
            Ok(Want { pool, requested })
        })
        .collect()
}

/// In `addresses`/`static_ip` mode, every request must name the configured address of its
/// family.
pub fn check_configured(
    requested: &[IpAddr],
    configured: &[galactic_core::ip::Assignment],
) -> Result<(), RequestError> {
    for address in requested {
        let family = Family::of(*address);
        match configured.iter().find(|a| a.family() == family) {
            None => {
                return Err(RequestError::NoFamily {
                    address: *address,
                    family,
                })
            }
            Some(a) if a.address.ip() == *address => {}
            Some(a) => {
                return Err(RequestError::NotConfigured {
                    address: *address,
                    family,
                    configured: a.address,
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
