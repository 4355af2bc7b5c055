//! Kata Containers' directly attachable networks (DAN). A Kata sandbox's guest is a VM: with
//! `"dan": true` in the stanza, ADD hands it the tap by writing the sandbox's DAN file, which
//! Kata's runtime-rs shim reads instead of scanning the sandbox's network namespace (where a tap
//! attachment has nothing; without the file the guest comes up on the wrong network and looks
//! healthy). The format is runtime-rs's `DanConfig`, with exactly one device:
//!
//! ```text
//! <dan_dir>/<sandbox id>.json   (mode 0600; written as crate::staged describes)
//! {"devices":[{"name":"eth0","guest_mac":"02:…",
//!   "device":{"type":"host-tap","tap_name":"G{vpc:9}{att:3}H"},
//!   "network_info":{"interface":{"ip_addresses":["<IPv6>/<len>","<IPv4>/25"],"mtu":<tap MTU>,
//!                                "ntype":"tuntap","flags":0},
//!                   "routes":[{"dest":"","gateway":"<gateway>","source":"","scope":0,
//!                              "flags":4,"mtu":0}, …one per family],
//!                   "neighbors":[]}}]}
//! ```
//! No top-level `netns`: naming one sends the shim back to scanning it. The sandbox id is
//! `CNI_CONTAINERID`, the id the shim looks the file up by. An empty `dest` is the default route
//! of the gateway's family; flag 4 (`RTNH_F_ONLINK`) because the gateway is outside the guest's
//! prefix. The guest MAC is derived from the tap's name as upstream derives it, so a guest keeps
//! its MAC across a sandbox's replacement and across the switch from the Go chain.
//!
//! Nothing in Kata removes the file: DEL does, but only when it names this attachment's tap
//! (upstream removes whatever file has the sandbox's name). Files of another tap, of another
//! plugin or that do not parse are left alone.

use crate::options::TapOptions;
use crate::staged;
use galactic_core::attachment::Record;
use galactic_core::config::{NodeConfig, DEFAULT_DAN_DIR};
use galactic_core::ip::{Assignment, Family};
use galactic_core::log;
use galactic_core::net::NetError;
use galactic_master::conf::MasterConf;
use galactic_master::{Attached, MasterError};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The Kata Go shim's DAN directory: it does not know `host-tap` and fails every sandbox of the
/// node on such a file, so nothing is written there.
const GO_SHIM_DIRS: [&str; 2] = ["/run/kata-containers/dans", "/var/run/kata-containers/dans"];
/// `RTNH_F_ONLINK`.
const ONLINK: u32 = 4;

/// Why a stanza with `"dan": true` is refused (code 7).
#[derive(Debug, thiserror::Error)]
pub enum KataError {
    /// No `ipam` block: the guest would have no address to configure.
    #[error("\"dan\": true hands the guest its addresses, but the stanza has no \"ipam\" block; add one, or drop \"dan\"")]
    NoIpam,
    /// The node's `dan_dir` is the Go shim's.
    #[error("the node config's dan_dir {} is the Kata Go shim's directory, which fails every sandbox on this node on a host-tap device; set dan_dir to runtime-rs's ({DEFAULT_DAN_DIR})", .0.display())]
    GoShimDir(PathBuf),
}

/// The document ADD writes.
#[derive(Serialize)]
struct Document<'a> {
    devices: [Device<'a>; 1],
}

#[derive(Serialize)]
struct Device<'a> {
    name: &'static str,
    guest_mac: String,
    device: HostTap<'a>,
    network_info: NetworkInfo,
}

#[derive(Serialize)]
struct HostTap<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    tap_name: &'a str,
}

#[derive(Serialize)]
struct NetworkInfo {
    interface: Interface,
    routes: Vec<Route>,
    neighbors: [(); 0],
}

#[derive(Serialize)]
struct Interface {
    ip_addresses: Vec<String>,
    mtu: u32,
    ntype: &'static str,
    flags: u32,
}

#[derive(Serialize)]
struct Route {
    dest: &'static str,
    gateway: String,
    source: &'static str,
    scope: u32,
    flags: u32,
    mtu: u32,
}

/// ADD's check before anything changes.
pub fn validate(node: &NodeConfig, conf: &MasterConf<TapOptions>) -> Result<(), KataError> {
    if !conf.options.dan {
        return Ok(());
    }
    if conf.ipam_type.is_none() {
        return Err(KataError::NoIpam);
    }
    match GO_SHIM_DIRS.iter().any(|d| node.dan_dir == Path::new(d)) {
        true => Err(KataError::GoShimDir(node.dan_dir.clone())),
        false => Ok(()),
    }
}

/// ADD: writes the sandbox's DAN file when the stanza asks for one.
pub fn publish(a: &Attached<'_, TapOptions>) -> Result<(), MasterError> {
    if !a.options.dan {
        return Ok(());
    }
    let name = file_name(a.container_id);
    let path = a.node.dan_dir.join(&name);
    if let Some(other) = read(&path).filter(|doc| !names_only(doc, &a.host.name)) {
        log::warn(
            "ADD: replacing a DAN file that does not name this tap (one galactic tap per Kata sandbox)",
            json!({"path": path, "found": other}),
        );
    }
    let bytes = serde_json::to_vec(&document(a)).map_err(|e| {
        MasterError::node("write the Kata DAN file")(NetError::Io {
            what: format!("encode {}", path.display()),
            source: std::io::Error::other(e),
        })
    })?;
    staged::write(&a.node.dan_dir, &name, &bytes)
        .map_err(MasterError::node("write the Kata DAN file"))
}

/// CHECK: the file is there and is what ADD wrote.
pub fn differences(a: &Attached<'_, TapOptions>) -> Vec<String> {
    if !a.options.dan {
        return Vec::new();
    }
    let path = a.node.dan_dir.join(file_name(a.container_id));
    let want = serde_json::to_value(document(a)).unwrap_or(Value::Null);
    match read(&path) {
        None => vec![format!("Kata DAN file {} is missing", path.display())],
        Some(doc) if doc == want => Vec::new(),
        Some(doc) if names_only(&doc, &a.host.name) => vec![format!(
            "Kata DAN file {} names {} but not as ADD wrote it",
            path.display(),
            a.host.name
        )],
        Some(_) => vec![format!(
            "Kata DAN file {} does not name {}",
            path.display(),
            a.host.name
        )],
    }
}

/// DEL, GC, a failed ADD: removes the sandbox's DAN file if it names only this tap.
pub fn release(node: &NodeConfig, record: &Record) -> Option<MasterError> {
    let name = file_name(&record.container_id);
    let path = node.dan_dir.join(&name);
    // What an ADD killed while writing the file left goes even when no file came to exist
    // (a live writer's temporary stays: `staged::settle`). Best effort: GC sweeps the rest.
    let _ = staged::settle(&node.dan_dir, &name);
    let doc = read(&path)?;
    if !names_only(&doc, &record.host_ifname) {
        log::info(
            "left a DAN file that does not name this attachment's tap",
            json!({"path": path, "hostIfname": record.host_ifname}),
        );
        return None;
    }
    staged::remove(&node.dan_dir, &name)
        .err()
        .map(MasterError::node("remove the Kata DAN file"))
}

/// The DAN file's name for a sandbox.
fn file_name(sandbox: &str) -> String {
    format!("{sandbox}.json")
}

/// The file as JSON; `None` when it is missing or does not parse (logged: not ours to judge).
fn read(path: &Path) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(doc) => Some(doc),
        Err(e) => {
            log::warn(
                "a DAN file that does not parse is left alone",
                json!({"path": path, "err": e.to_string()}),
            );
            None
        }
    }
}

/// Whether every device of `doc` is the host tap `tap` (and there is one).
fn names_only(doc: &Value, tap: &str) -> bool {
    let devices = doc.get("devices").and_then(Value::as_array);
    devices.is_some_and(|d| {
        !d.is_empty()
            && d.iter()
                .all(|dev| dev["device"]["type"] == "host-tap" && dev["device"]["tap_name"] == tap)
    })
}

fn document<'a>(a: &'a Attached<'_, TapOptions>) -> Document<'a> {
    // IPv6 first, as upstream writes them.
    let mut addresses: Vec<&Assignment> = a.addresses.iter().collect();
    addresses.sort_by_key(|x| x.family() != Family::V6);
    Document {
        devices: [Device {
            name: "eth0",
            guest_mac: guest_mac(&a.host.name),
            device: HostTap {
                kind: "host-tap",
                tap_name: &a.host.name,
            },
            network_info: NetworkInfo {
                interface: Interface {
                    ip_addresses: addresses.iter().map(|x| x.address.to_string()).collect(),
                    mtu: a.host.mtu,
                    ntype: "tuntap",
                    flags: 0,
                },
                routes: addresses
                    .iter()
                    .filter_map(|x| x.gateway)
                    .map(|gw| Route {
                        dest: "",
                        gateway: gw.to_string(),
                        source: "",
                        scope: 0,
                        flags: ONLINK,
                        mtu: 0,
                    })
                    .collect(),
                neighbors: [],
            },
        }],
    }
}

/// Upstream's guest MAC: the first six bytes of SHA-256 of the tap's name, the first one
/// replaced by 0x02 (locally administered, unicast).
fn guest_mac(tap: &str) -> String {
    let sum = Sha256::digest(tap.as_bytes());
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&sum[..6]);
    mac[0] = 0x02;
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_mac_is_upstreams_derivation() {
        // `printf %s G00000000bayhH | sha256sum` begins 13ed1a1598a5.
        assert_eq!(guest_mac("G00000000bayhH"), "02:ed:1a:15:98:a5");
        assert_ne!(guest_mac("G00000000bayhH"), guest_mac("G00000000bayiH"));
    }

    #[test]
    fn only_a_file_naming_just_this_tap_is_ours() {
        let tap = |name: &str| json!({"device": {"type": "host-tap", "tap_name": name}});
        let ours = json!({"devices": [tap("G1H")]});
        assert!(names_only(&ours, "G1H"));
        assert!(!names_only(&ours, "G2H"));
        assert!(!names_only(
            &json!({"devices": [tap("G1H"), tap("G2H")]}),
            "G1H"
        ));
        assert!(!names_only(&json!({"devices": []}), "G1H"));
        let vfio = json!({"devices": [{"device": {"type": "vfio", "tap_name": "G1H"}}]});
        assert!(!names_only(&vfio, "G1H"));
        assert!(!names_only(&json!([1]), "G1H"));
    }
}
