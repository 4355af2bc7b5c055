//! The `ipam` block: parsed and validated into an owned [`IpamConfig`] before anything is touched.
//!
//! Keys (all optional unless a mode needs them):
//!
//! | key | type | meaning |
//! |---|---|---|
//! | `addresses` | `[{address: CIDR, gateway?: IP}]` | pre-decided addresses; nothing is stored |
//! | `static_ip` | IPv6 text | one IPv6 address as /64, no gateway, no routes; nothing is stored |
//! | `ipv6_subnet` | IPv6 CIDR | pool; each attachment gets one `/subnet_len` prefix |
//! | `subnet_len` | integer | IPv6 endpoint prefix length, default 96 |
//! | `ipv6_gateway` | IPv6 | pool gateway, default: pool network + 1 |
//! | `ipv4_subnet` | IPv4 CIDR | pool; each attachment gets one /32 |
//! | `ipv4_gateway` | IPv4 | pool gateway, default: pool network + 1 |
//! | `address_families` | `["ipv6","ipv4"]` | narrows the configured pools, never widens |
//! | `data_dir` | absolute path | store directory, default `<node state_dir>/ipam` (`/var/lib/galactic/ipam`) |
//! | `legacy_dir` | absolute path | upstream marker root, default `/var/lib/cni/galactic-ipam` |
//! | `lock_timeout_ms` | integer | longest wait for the store lock, default 5000; then code 11 |
//!
//! The block is read with serde (`written.rs`), every key as the type it needs; the rules below
//! then read the keys their mode uses, in a fixed order. A value of the wrong JSON type is refused
//! (`ipam.<key> must be …`) when its key is read, so a mode ignores the keys it does not use.
//!
//! Mode precedence follows upstream: `addresses` (which may not be combined with the allocating
//! fields), then `static_ip`, then pools. With no pool and `GALACTIC_IPAM_ENABLE_LOCAL_IPAM=true`
//! the pool `fd00:10:ff01::/64` is used.

use crate::pool::Pool;
use galactic_core::ip::{Assignment, Family};
use ipnetwork::IpNetwork;
use serde::Deserialize;
use serde_json::Value;
use std::net::{IpAddr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;
use written::{read, FamilyName, Key, Typed, Written};

pub use error::ConfigError;

#[cfg(test)]
mod tests;

/// The default IPv6 pool filled in by `GALACTIC_IPAM_ENABLE_LOCAL_IPAM=true`.
pub const DEFAULT_LOCAL_POOL: &str = "fd00:10:ff01::/64";
/// Default IPv6 endpoint prefix length.
pub const DEFAULT_SUBNET_LEN: u8 = 96;
/// Default root of the upstream implementation's marker files.
pub const DEFAULT_LEGACY_DIR: &str = "/var/lib/cni/galactic-ipam";
/// Default bound on waiting for the store lock.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_millis(5000);
/// The environment variable enabling the default pool.
pub const ENABLE_LOCAL_IPAM_ENV: &str = "GALACTIC_IPAM_ENABLE_LOCAL_IPAM";

/// A validated `ipam` block.
#[derive(Debug, Clone, PartialEq)]
pub struct IpamConfig {
    /// What ADD hands out.
    pub mode: Mode,
    /// Store paths and limits.
    pub store: StoreSettings,
}

/// Where the store lives and how long to wait for it. Also derived leniently for DEL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// Store directory (`data_dir`).
    pub data_dir: PathBuf,
    /// Upstream marker root imported once (`legacy_dir`).
    pub legacy_dir: PathBuf,
    /// Bound on lock waits (`lock_timeout_ms`).
    pub lock_timeout: Duration,
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

/// What parsing needs besides the JSON: the node's state directory and the environment switch.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Node state directory; the store defaults to `<state_dir>/ipam`.
    pub state_dir: &'a Path,
    /// `GALACTIC_IPAM_ENABLE_LOCAL_IPAM` is `true` (case-insensitive).
    pub enable_local_ipam: bool,
}

/// Whether `GALACTIC_IPAM_ENABLE_LOCAL_IPAM` enables the default pool.
pub fn local_ipam_enabled(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Parses the `ipam` block of the network configuration `conf`.
pub fn parse(conf: &Value, ctx: Context<'_>) -> Result<IpamConfig, ConfigError> {
    let block = written(conf)?;
    let store = store_settings(&block, ctx.state_dir)?;
    let mode = mode(&block, ctx.enable_local_ipam)?;
    Ok(IpamConfig { mode, store })
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

/// Store settings only, read leniently: DEL uses this when the rest of the block is invalid, so
/// an edited or broken config still finds the store that ADD wrote to.
pub fn store_settings_lenient(conf: &Value, state_dir: &Path) -> StoreSettings {
    let block = written(conf).unwrap_or_default();
    store_settings(&block, state_dir).unwrap_or_else(|_| StoreSettings {
        data_dir: lenient_path(&block.data_dir).unwrap_or_else(|| state_dir.join("ipam")),
        legacy_dir: lenient_path(&block.legacy_dir)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_LEGACY_DIR)),
        lock_timeout: DEFAULT_LOCK_TIMEOUT,
    })
}

fn lenient_path(key: &Key<PathBuf>) -> Option<PathBuf> {
    match key {
        Some(Typed::Fits(path)) if path.is_absolute() => Some(path.clone()),
        _ => None,
    }
}

fn store_settings(block: &Written, state_dir: &Path) -> Result<StoreSettings, ConfigError> {
    let data_dir = absolute(&block.data_dir, "data_dir")?.unwrap_or_else(|| state_dir.join("ipam"));
    let legacy_dir = absolute(&block.legacy_dir, "legacy_dir")?
        .unwrap_or_else(|| PathBuf::from(DEFAULT_LEGACY_DIR));
    let lock_timeout = match read(&block.lock_timeout_ms, "lock_timeout_ms")? {
        None => DEFAULT_LOCK_TIMEOUT,
        Some(&ms) if (1..=600_000).contains(&ms) => Duration::from_millis(ms),
        Some(&ms) => return Err(ConfigError::LockTimeout(ms)),
    };
    Ok(StoreSettings {
        data_dir,
        legacy_dir,
        lock_timeout,
    })
}

fn absolute(key: &Key<PathBuf>, field: &'static str) -> Result<Option<PathBuf>, ConfigError> {
    match read(key, field)? {
        None => Ok(None),
        Some(path) if path.is_absolute() => Ok(Some(path.clone())),
        Some(path) => Err(ConfigError::RelativePath {
            field,
            value: path.display().to_string(),
        }),
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
        None => DEFAULT_SUBNET_LEN,
        Some(&n) if (1..=128).contains(&n) => n as u8,
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
        let slot_len = match keys.family {
            Family::V6 => subnet_len,
            Family::V4 => 32,
        };
        pools.push(pool(keys, value, slot_len)?);
    }
    let pools = narrow(block, pools)?;
    if pools.is_empty() {
        return Err(ConfigError::NoPool);
    }
    Ok(pools)
}

fn pool(keys: &PoolKeys<'_>, value: &str, slot_len: u8) -> Result<Pool, ConfigError> {
    let (_, subnet_field) = keys.subnet;
    let cidr = cidr(subnet_field, value, keys.family, "")?;
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
