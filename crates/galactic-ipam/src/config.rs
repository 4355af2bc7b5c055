//! The `ipam` block: parsed and validated into an owned [`IpamConfig`] before anything is touched.
//!
//! Keys (all optional unless a mode needs them):
//!
//! | key | type | meaning |
//! |---|---|---|
//! | `addresses` | `[{address: CIDR, gateway?: IP}]` | pre-decided addresses; nothing is stored |
//! | `static_ip` | IPv6 text | one IPv6 address as /64, no gateway, no routes; nothing is stored |
//! | `ipv6_subnet` | IPv6 CIDR | pool; each attachment gets one `/subnet_len` prefix |
//! | `subnet_len` | integer | IPv6 endpoint prefix length, default 96 (104 in a /96 pool) |
//! | `ipv6_gateway` | IPv6 | pool gateway, default: pool network + 1 |
//! | `ipv4_subnet` | IPv4 CIDR | pool; each attachment gets one /32 |
//! | `ipv4_gateway` | IPv4 | pool gateway, default: pool network + 1 |
//! | `address_families` | `["ipv6","ipv4"]` | narrows the configured pools, never widens |
//!
//! Where the store lives and how long to wait for its lock are node settings (`ipam_data_dir`,
//! `ipam_legacy_dir`, `ipam_lock_timeout_ms` in the node config, [`StoreSettings::of`]): a stanza
//! that sets `data_dir`, `legacy_dir` or `lock_timeout_ms` is refused before this block is read.
//!
//! The block is read with serde (`written.rs`), every key as the type it needs; the rules below
//! then read the keys their mode uses, in a fixed order. A value of the wrong JSON type is refused
//! (`ipam.<key> must be …`) when its key is read, so a mode ignores the keys it does not use.
//!
//! Mode precedence follows upstream: `addresses` (which may not be combined with the allocating
//! fields), then `static_ip`, then pools. With no pool and `GALACTIC_IPAM_ENABLE_LOCAL_IPAM=true`
//! the pool `fd00:10:ff01::/64` is used.

use crate::pool::Pool;
use galactic_core::config::NodeConfig;
use galactic_core::ip::{Assignment, Family};
use ipnetwork::IpNetwork;
use serde::Deserialize;
use serde_json::Value;
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;
use written::{read, FamilyName, Key, Written};

pub use error::ConfigError;

#[cfg(test)]
mod tests;

/// The default IPv6 pool filled in by `GALACTIC_IPAM_ENABLE_LOCAL_IPAM=true`.
pub const DEFAULT_LOCAL_POOL: &str = "fd00:10:ff01::/64";
/// Default IPv6 endpoint prefix length.
pub const DEFAULT_SUBNET_LEN: u8 = 96;
/// Default IPv6 endpoint prefix length in a /96 pool: upstream's allocation step there.
pub const UPSTREAM_SLASH96_SLOT_LEN: u8 = 104;
/// The environment variable enabling the default pool.
pub const ENABLE_LOCAL_IPAM_ENV: &str = "GALACTIC_IPAM_ENABLE_LOCAL_IPAM";

/// A validated `ipam` block.
#[derive(Debug, Clone, PartialEq)]
pub struct IpamConfig {
    /// What ADD hands out.
    pub mode: Mode,
}

/// Where the store lives and how long to wait for it: the node's settings, the same for ADD,
/// DEL, CHECK and GC whatever the stanza says (DEL never depends on the stanza to find it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// Store directory (node `ipam_data_dir`).
    pub data_dir: PathBuf,
    /// Upstream marker root imported once (node `ipam_legacy_dir`).
    pub legacy_dir: PathBuf,
    /// Bound on lock waits (node `ipam_lock_timeout_ms`).
    pub lock_timeout: Duration,
}

impl StoreSettings {
    /// The settings of `node`.
    pub fn of(node: &NodeConfig) -> Self {
        Self {
            data_dir: node.ipam_data_dir.clone(),
            legacy_dir: node.ipam_legacy_dir.clone(),
            lock_timeout: node.ipam_lock_timeout,
        }
    }
}

/// How addresses are obtained.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// Pre-decided addresses (IPv6 first); nothing stored.
    Addresses(Vec<Assignment>),
    /// One IPv6 address as /64; nothing stored.
    Static(Ipv6Addr),
    /// Pools, IPv6 first; at least one.
    Pools(Vec<Pool>),
}

/// What parsing needs besides the JSON: the environment switch.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// `GALACTIC_IPAM_ENABLE_LOCAL_IPAM` is `true` (case-insensitive).
    pub enable_local_ipam: bool,
}

/// Whether `GALACTIC_IPAM_ENABLE_LOCAL_IPAM` enables the default pool.
pub fn local_ipam_enabled(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Parses the `ipam` block of the network configuration `conf`.
pub fn parse(conf: &Value, ctx: Context) -> Result<IpamConfig, ConfigError> {
    let block = written(conf)?;
    let mode = mode(&block, ctx.enable_local_ipam)?;
    Ok(IpamConfig { mode })
}

/// The block as written; `null` counts as absent.
fn written(conf: &Value) -> Result<Written, ConfigError> {
    match conf.get("ipam") {
        None | Some(Value::Null) => Err(ConfigError::MissingBlock),
        // Each key takes any JSON value (a wrong type is kept, refused when read), so reading
        // an object does not fail.
        Some(Value::Object(map)) => Written::deserialize(map).map_err(|_| ConfigError::NotAnObject),
        Some(_) => Err(ConfigError::NotAnObject),
    }
}

fn mode(block: &Written, enable_local_ipam: bool) -> Result<Mode, ConfigError> {
    if let Some(entries) = read(&block.addresses, "addresses")? {
        let allocating = [
            (&block.static_ip, "static_ip"),
            (&block.ipv6_subnet, "ipv6_subnet"),
            (&block.ipv4_subnet, "ipv4_subnet"),
        ];
        for (key, field) in allocating {
            if read(key, field)?.is_some() {
                return Err(ConfigError::AddressesCombined(field));
            }
        }
        return addresses::parse(entries).map(Mode::Addresses);
    }
    if let Some(raw) = read(&block.static_ip, "static_ip")? {
        return static_ip(raw).map(Mode::Static);
    }
    pools(block, enable_local_ipam).map(Mode::Pools)
}

fn static_ip(raw: &str) -> Result<Ipv6Addr, ConfigError> {
    match raw.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => Ok(v6),
        Ok(IpAddr::V4(_)) => Err(ConfigError::WrongFamily {
            field: "static_ip",
            want: Family::V6,
            got: Family::V4,
            what: "address",
            value: raw.to_owned(),
        }),
        Err(_) => Err(ConfigError::InvalidIp {
            field: "static_ip",
            value: raw.to_owned(),
        }),
    }
}

/// The pool keys of one family, as written, each with its name.
struct PoolKeys<'a> {
    family: Family,
    subnet: (&'a Key<String>, &'static str),
    gateway: (&'a Key<String>, &'static str),
}

fn pool_keys(block: &Written) -> [PoolKeys<'_>; 2] {
    [
        PoolKeys {
            family: Family::V6,
            subnet: (&block.ipv6_subnet, "ipv6_subnet"),
            gateway: (&block.ipv6_gateway, "ipv6_gateway"),
        },
        PoolKeys {
            family: Family::V4,
            subnet: (&block.ipv4_subnet, "ipv4_subnet"),
            gateway: (&block.ipv4_gateway, "ipv4_gateway"),
        },
    ]
}

fn pools(block: &Written, enable_local_ipam: bool) -> Result<Vec<Pool>, ConfigError> {
    let subnet_len = match read(&block.subnet_len, "subnet_len")? {
        None => None,
        Some(&n) if (1..=128).contains(&n) => Some(n as u8),
        Some(&n) => return Err(ConfigError::SubnetLen(n)),
    };
    let all = pool_keys(block);
    let mut raw: Vec<(&PoolKeys<'_>, &str)> = Vec::new();
    for keys in &all {
        let (subnet, field) = keys.subnet;
        if let Some(value) = read(subnet, field)? {
            raw.push((keys, value));
        }
    }
    if raw.is_empty() && enable_local_ipam {
        raw.push((&all[0], DEFAULT_LOCAL_POOL));
    }
    let mut pools = Vec::new();
    for (keys, value) in raw {
        pools.push(pool(keys, value, subnet_len)?);
    }
    let pools = narrow(block, pools)?;
    if pools.is_empty() {
        return Err(ConfigError::NoPool);
    }
    Ok(pools)
}

/// The endpoint prefix length of a pool: IPv4 always /32; IPv6 the configured `subnet_len`, or
/// by default /96, except in a /96 pool. Upstream cut a /96 pool into 255 endpoints 2^24 apart
/// (its "/96" allocations stepped through byte 12), which are this project's /104 slots; that
/// default keeps the NADs written for it working with the same capacity (decision 0062). An
/// explicit `subnet_len` 96 in a /96 pool is still refused: it asks for the gateway's prefix.
fn slot_len(family: Family, pool_prefix: u8, subnet_len: Option<u8>) -> u8 {
    match (family, subnet_len) {
        (Family::V4, _) => 32,
        (Family::V6, Some(n)) => n,
        (Family::V6, None) if pool_prefix == DEFAULT_SUBNET_LEN => UPSTREAM_SLASH96_SLOT_LEN,
        (Family::V6, None) => DEFAULT_SUBNET_LEN,
    }
}

fn pool(keys: &PoolKeys<'_>, value: &str, subnet_len: Option<u8>) -> Result<Pool, ConfigError> {
    let (_, subnet_field) = keys.subnet;
    let cidr = cidr(subnet_field, value, keys.family, "")?;
    let slot_len = slot_len(keys.family, cidr.prefix(), subnet_len);
    let (gateway_key, gateway_field) = keys.gateway;
    let gateway = match read(gateway_key, gateway_field)? {
        None => None,
        Some(raw) => Some(ip_of_family(gateway_field, raw, keys.family)?),
    };
    Pool::new(cidr, slot_len, gateway).map_err(|source| ConfigError::Pool {
        field: subnet_field,
        value: value.to_owned(),
        source,
    })
}

/// Applies `address_families` to the pools (never widens).
fn narrow(block: &Written, pools: Vec<Pool>) -> Result<Vec<Pool>, ConfigError> {
    let Some(names) = read(&block.address_families, "address_families")? else {
        return Ok(pools);
    };
    let mut allowed = Vec::new();
    let mut listed = Vec::new();
    for name in names {
        let FamilyName(text) = name.get("address_families")?;
        let family = match text.as_str() {
            "ipv6" => Family::V6,
            "ipv4" => Family::V4,
            other => return Err(ConfigError::FamilyName(other.to_owned())),
        };
        allowed.push(family);
        listed.push(text.as_str());
    }
    let kept: Vec<Pool> = pools
        .into_iter()
        .filter(|p| allowed.contains(&p.family()))
        .collect();
    if kept.is_empty() {
        return Err(ConfigError::FamiliesExcludeAll(listed.join(" ")));
    }
    Ok(kept)
}

/// Parses `value` of `field` as a CIDR of `family` (any family when called for `addresses`).
pub(crate) fn cidr(
    field: &'static str,
    value: &str,
    family: Family,
    hint: &'static str,
) -> Result<IpNetwork, ConfigError> {
    let invalid = || ConfigError::InvalidCidr {
        field,
        value: value.to_owned(),
        hint,
    };
    if !value.contains('/') {
        return Err(invalid());
    }
    let net: IpNetwork = value.parse().map_err(|_| invalid())?;
    of_family(field, value, net.ip(), family, "CIDR")?;
    Ok(net)
}

fn ip_of_family(field: &'static str, raw: &str, family: Family) -> Result<IpAddr, ConfigError> {
    let ip: IpAddr = raw.parse().map_err(|_| ConfigError::InvalidIp {
        field,
        value: raw.to_owned(),
    })?;
    of_family(field, raw, ip, family, "address")?;
    Ok(ip)
}

/// Refuses `value` of `field` (parsed: `ip`) when it is not of family `want`.
fn of_family(
    field: &'static str,
    value: &str,
    ip: IpAddr,
    want: Family,
    what: &'static str,
) -> Result<(), ConfigError> {
    let got = Family::of(ip);
    if got == want {
        return Ok(());
    }
    Err(ConfigError::WrongFamily {
        field,
        want,
        got,
        what,
        value: value.to_owned(),
    })
}

mod addresses;
mod error;
mod written;
