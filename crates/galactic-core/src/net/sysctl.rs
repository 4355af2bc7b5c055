//! `net.*` sysctls of the calling thread's network namespace.

use super::NetError;
use std::path::PathBuf;

use crate::ip::Family;

fn conf_path(family: Family, ifname: &str, key: &str) -> PathBuf {
    PathBuf::from(format!(
        "/proc/sys/net/{}/conf/{ifname}/{key}",
        family.name()
    ))
}

/// Sets `net.<family>.conf.<ifname>.<key>`.
pub fn set_interface(family: Family, ifname: &str, key: &str, value: &str) -> Result<(), NetError> {
    write(conf_path(family, ifname, key), value)
}

/// Reads `net.<family>.conf.<ifname>.<key>`.
pub fn get_interface(family: Family, ifname: &str, key: &str) -> Result<String, NetError> {
    read(conf_path(family, ifname, key))
}

/// Whether the per-interface key exists on this kernel (e.g. `force_forwarding`, kernel ≥ 6.17).
pub fn interface_key_exists(family: Family, key: &str) -> bool {
    conf_path(family, "default", key).exists()
}

/// Sets a node-wide key given as a dotted name under `net.` (e.g. `ipv4.icmp_errors_use_inbound_ifaddr`).
pub fn set_global(key: &str, value: &str) -> Result<(), NetError> {
    write(global_path(key), value)
}

/// Reads a node-wide key given as a dotted name under `net.`.
pub fn get_global(key: &str) -> Result<String, NetError> {
    read(global_path(key))
}

fn global_path(key: &str) -> PathBuf {
    PathBuf::from(format!("/proc/sys/net/{}", key.replace('.', "/")))
}

fn write(path: PathBuf, value: &str) -> Result<(), NetError> {
    std::fs::write(&path, value).map_err(|source| NetError::Io {
        what: format!("set {}", path.display()),
        source,
    })
}

fn read(path: PathBuf) -> Result<String, NetError> {
    std::fs::read_to_string(&path)
        .map(|v| v.trim().to_owned())
        .map_err(|source| NetError::Io {
            what: format!("read {}", path.display()),
            source,
        })
}
