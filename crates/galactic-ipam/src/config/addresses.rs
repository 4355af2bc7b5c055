//! The `addresses` mode: pre-decided addresses, validated as upstream does (§5.2).

use super::written::{read, Entry, Typed};
use super::{cidr, ConfigError};
use galactic_core::ip::Assignment;
use galactic_core::ip::Family;
use std::net::IpAddr;

const ADDRESS_HINT: &str = " (an explicit prefix length is required)";

/// Validates the entries; the result is ordered IPv6 first.
pub(super) fn parse(entries: &[Typed<Entry>]) -> Result<Vec<Assignment>, ConfigError> {
    let mut out: Vec<Assignment> = Vec::new();
    for entry in entries {
        let fixed = entry_of(entry.get("addresses")?)?;
        let family = Family::of(fixed.address.ip());
        if out.iter().any(|f| Family::of(f.address.ip()) == family) {
            return Err(ConfigError::DuplicateFamily(family));
        }
        out.push(fixed);
    }
    if out.is_empty() {
        return Err(ConfigError::EmptyAddresses);
    }
    out.sort_by_key(|f| Family::of(f.address.ip()));
    Ok(out)
}

fn entry_of(entry: &Entry) -> Result<Assignment, ConfigError> {
    let raw = read(&entry.address, "address")?.ok_or(ConfigError::InvalidCidr {
        field: "addresses[].address",
        value: String::new(),
        hint: ADDRESS_HINT,
    })?;
    // Family-agnostic parse: try v6 first, then v4, keeping the v6 error shape for garbage.
    let address = cidr("addresses[].address", raw, Family::V6, ADDRESS_HINT)
        .or_else(|_| cidr("addresses[].address", raw, Family::V4, ADDRESS_HINT))
        .map_err(|_| ConfigError::InvalidCidr {
            field: "addresses[].address",
            value: raw.to_owned(),
            hint: ADDRESS_HINT,
        })?;
    if address.is_ipv4() && address.prefix() != 32 {
        return Err(ConfigError::Ipv4NotHost(raw.to_owned()));
    }
    let gateway = match read(&entry.gateway, "gateway")? {
        None => None,
        Some(gw) => Some(gateway_of(gw, raw, address.ip())?),
    };
    Ok(Assignment { address, gateway })
}

fn gateway_of(gw: &str, address: &str, ip: IpAddr) -> Result<IpAddr, ConfigError> {
    let parsed: IpAddr = gw.parse().map_err(|_| ConfigError::InvalidIp {
        field: "addresses[].gateway",
        value: gw.to_owned(),
    })?;
    if Family::of(parsed) != Family::of(ip) {
        return Err(ConfigError::GatewayFamily {
            gateway: gw.to_owned(),
            address: address.to_owned(),
        });
    }
    Ok(parsed)
}
