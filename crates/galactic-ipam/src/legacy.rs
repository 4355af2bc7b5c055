//! Reading the upstream implementation's allocation records, so an upgrade never hands out an
//! address a live pod holds.
//!
//! (a) Marker files (upstream §5.5), imported automatically once per `legacy_dir`:
//! ```text
//! <legacy_dir>/                      default /var/lib/cni/galactic-ipam
//!   <pool CIDR, "/" replaced by "-">/  e.g. fd20:10:ff01::-48, 172.21.1.0-24
//!     lock                           flock target, ignored
//!     <marker>                       IPv6: "<address>-<len>" (host bits kept), IPv4: "<address>";
//!                                    content = container id (an empty file still reserves)
//! ```
//! (b) BGPAdvertisement annotations (`kubectl get bgpadvertisements -A -o json`), imported
//! automatically once from `<data_dir>/legacy-annotations.json` (the installer's export), or by
//! `galactic-ipam migrate --annotations FILE`: `galactic.datum.net/allocated-subnet-ipv6.<cid41>`
//! = `"<address>/<len>"`, `…-ipv4.<cid41>` = `"<address>"`; `<cid41>` is the container id cut to
//! 41 characters.
//!
//! Nothing here uses a container id as a path: ids are file *contents* or annotation suffixes.
//! Writing markers back, for a return to the Go chain, is `crate::rollback`'s.

use crate::store::{LegacyOrigin, LegacyRecord};
use ipnetwork::IpNetwork;
use serde_json::Value;
use std::fs;
use std::net::IpAddr;
use std::path::Path;

/// File name, in the store directory, of the export of upstream's BGPAdvertisement annotations
/// (a `List` as `kubectl get bgpadvertisements -o json` prints it) that the node installer
/// writes; imported once, automatically, by the first ADD, DEL or GC.
pub const ANNOTATIONS_EXPORT: &str = "legacy-annotations.json";

/// Whether the node holds upstream allocation state not imported yet could be in: a marker pool
/// directory under `legacy_dir`, or the annotation export in `data_dir`. A DEL on a node without
/// a store then builds one, imports, and releases, instead of leaving the address to be imported
/// as taken later.
pub fn state_present(legacy_dir: &Path, data_dir: &Path) -> bool {
    let has_pool = fs::read_dir(legacy_dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_type().is_ok_and(|t| t.is_dir()))
    });
    has_pool || data_dir.join(ANNOTATIONS_EXPORT).is_file()
}

/// Reads the annotation export at `path`; `None` when there is none.
pub fn read_annotations_file(path: &Path) -> std::io::Result<Option<Parsed>> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let json: Value = serde_json::from_slice(&bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(Some(read_annotations(&json)))
}

/// Annotation key prefix of an IPv6 record.
pub const ANNOTATION_V6: &str = "galactic.datum.net/allocated-subnet-ipv6.";
/// Annotation key prefix of an IPv4 record.
pub const ANNOTATION_V4: &str = "galactic.datum.net/allocated-subnet-ipv4.";

/// What was read, and what could not be understood (reported, never fatal).
#[derive(Debug, Default)]
pub struct Parsed {
    /// Usable records.
    pub records: Vec<LegacyRecord>,
    /// Entries that were skipped, with the reason.
    pub skipped: Vec<String>,
}

/// Reads every marker under `root`. A missing root is an empty result.
pub fn read_markers(root: &Path) -> std::io::Result<Parsed> {
    let mut parsed = Parsed::default();
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(parsed),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type()?.is_dir() {
            continue;
        }
        match pool_of_dir_name(&name) {
            Some(pool) => read_pool_dir(&entry.path(), pool, &mut parsed)?,
            None => parsed.skipped.push(format!("{name}: not a pool directory")),
        }
    }
    Ok(parsed)
}

fn read_pool_dir(dir: &Path, pool: IpNetwork, parsed: &mut Parsed) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "lock" || !entry.file_type()?.is_file() {
            continue;
        }
        let Some(address) = marker_address(&name) else {
            parsed.skipped.push(format!("{pool}/{name}: not a marker"));
            continue;
        };
        let container_id = fs::read_to_string(entry.path())?.trim().to_owned();
        parsed.records.push(LegacyRecord {
            container_id,
            address,
            // Upstream's gateway was always the pool's first address plus one.
            gateway: crate::pool::Pool::new(pool, address.prefix().max(pool.prefix()), None)
                .ok()
                .map(|p| p.gateway()),
            origin: LegacyOrigin::Marker,
        });
    }
    Ok(())
}

/// Upstream replaced "/" by "-"; CIDR text has no other "-".
fn unsanitise(name: &str) -> Option<String> {
    name.contains('-').then(|| name.replacen('-', "/", 1))
}

/// The pool a marker directory of upstream's is named for.
pub fn pool_of_dir_name(name: &str) -> Option<IpNetwork> {
    unsanitise(name)?.parse().ok()
}

/// The directory upstream keeps `pool`'s markers in: its CIDR text with "/" replaced by "-".
pub fn pool_dir_name(pool: IpNetwork) -> String {
    format!("{}-{}", pool.network(), pool.prefix())
}

/// The marker name upstream gives an address it handed out: IPv6 `<address>-96` (host bits kept,
/// its allocations were always /96), IPv4 the bare address.
pub fn marker_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => format!("{v6}-96"),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

fn marker_address(name: &str) -> Option<IpNetwork> {
    match unsanitise(name) {
        Some(cidr) => cidr.parse().ok(),
        None => name
            .parse::<IpAddr>()
            .ok()
            .and_then(|ip| IpNetwork::new(ip, if ip.is_ipv4() { 32 } else { 128 }).ok()),
    }
}

/// Reads the annotations of every object in `json` (a `List` with `items`, or one object).
pub fn read_annotations(json: &Value) -> Parsed {
    let mut parsed = Parsed::default();
    let items: Vec<&Value> = match json.get("items").and_then(Value::as_array) {
        Some(items) => items.iter().collect(),
        None => vec![json],
    };
    for item in items {
        let Some(annotations) = item
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (key, value) in annotations {
            annotation_record(key, value, &mut parsed);
        }
    }
    parsed
}

fn annotation_record(key: &str, value: &Value, parsed: &mut Parsed) {
    let (cid, want_v6) = if let Some(cid) = key.strip_prefix(ANNOTATION_V6) {
        (cid, true)
    } else if let Some(cid) = key.strip_prefix(ANNOTATION_V4) {
        (cid, false)
    } else {
        return;
    };
    let text = value.as_str().unwrap_or_default().trim();
    let address = text.parse::<IpNetwork>().ok().or_else(|| {
        text.parse::<IpAddr>()
            .ok()
            .and_then(|ip| IpNetwork::new(ip, if ip.is_ipv4() { 32 } else { 128 }).ok())
    });
    match address {
        Some(address) if address.is_ipv6() == want_v6 && !cid.is_empty() => {
            parsed.records.push(LegacyRecord {
                container_id: cid.to_owned(),
                address,
                gateway: None,
                origin: LegacyOrigin::Annotation,
            })
        }
        _ => parsed
            .skipped
            .push(format!("{key}={text:?}: not an address of that family")),
    }
}
