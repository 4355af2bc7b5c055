//! The datapath container's router advertisements. A VM on a tap learns its IPv6 default route
//! from router advertisements, and this process ends long before the guest listens, so the
//! upstream datapath container (`galactic-cni run`) sends them, and answers solicitations, on
//! every tap recorded here, in upstream's place and format:
//!
//! ```text
//! <radv_state_dir>/                 /var/lib/cni/ra (mode 0700)
//!   G{vpc:9}{att:3}H                {"hostInterface":"G…H","mtu":<tap MTU>}  (mode 0600)
//!   .galactic-tmp/                  temporaries (crate::staged; the reader skips directories)
//! ```
//! ADD records a tap that has an IPv6 gateway (and removes the record of one that has none, so
//! a retried ADD converges); a failure fails the ADD, where upstream only logs it and the guest
//! never gets a default route. DEL removes the record; GC removes every record whose tap has no
//! attachment record and no longer exists (a record without an attachment of ours whose tap
//! exists is the Go chain's live VM's, and stays).

use crate::options::TapOptions;
use crate::staged;
use galactic_core::attachment::Record;
use galactic_core::config::NodeConfig;
use galactic_core::ip::Family;
use galactic_core::log;
use galactic_core::net::netlink::Netlink;
use galactic_core::net::NetError;
use galactic_master::{Attached, MasterError};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashSet;

/// One record, as upstream's `radv.Record`.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RaRecord {
    host_interface: String,
    mtu: u32,
}

/// Whether the attachment has an IPv6 gateway: only then does its guest need advertisements.
fn advertised(a: &Attached<'_, TapOptions>) -> bool {
    a.addresses
        .iter()
        .any(|x| x.family() == Family::V6 && x.gateway.is_some())
}

/// ADD: records the tap (or removes its record when it has no IPv6 gateway).
pub fn publish(a: &Attached<'_, TapOptions>) -> Result<(), MasterError> {
    let dir = &a.node.radv_state_dir;
    if !advertised(a) {
        return staged::remove(dir, &a.host.name)
            .map_err(MasterError::node("remove the router-advertisement record"));
    }
    let record = RaRecord {
        host_interface: a.host.name.clone(),
        mtu: a.host.mtu,
    };
    let bytes = serde_json::to_vec(&record).map_err(|e| {
        MasterError::node("write the router-advertisement record")(NetError::Io {
            what: format!("encode the record of {}", a.host.name),
            source: std::io::Error::other(e),
        })
    })?;
    staged::write(dir, &a.host.name, &bytes)
        .map_err(MasterError::node("write the router-advertisement record"))
}

/// CHECK: the record is there, for this tap and its MTU, when the tap has an IPv6 gateway.
pub fn differences(a: &Attached<'_, TapOptions>) -> Vec<String> {
    if !advertised(a) {
        return Vec::new();
    }
    let path = a.node.radv_state_dir.join(&a.host.name);
    let want = RaRecord {
        host_interface: a.host.name.clone(),
        mtu: a.host.mtu,
    };
    let found = std::fs::read(&path)
        .ok()
        .map(|b| serde_json::from_slice::<RaRecord>(&b));
    match found {
        None => vec![format!(
            "router-advertisement record {} is missing",
            path.display()
        )],
        Some(Ok(r)) if r == want => Vec::new(),
        Some(Ok(r)) => vec![format!(
            "router-advertisement record {} says {} with MTU {}, the tap is {} with MTU {}",
            path.display(),
            r.host_interface,
            r.mtu,
            want.host_interface,
            want.mtu
        )],
        Some(Err(e)) => vec![format!(
            "router-advertisement record {} does not parse: {e}",
            path.display()
        )],
    }
}

/// DEL, GC, a failed ADD: removes the tap's record.
pub fn release(node: &NodeConfig, record: &Record) -> Option<MasterError> {
    staged::remove(&node.radv_state_dir, &record.host_ifname)
        .err()
        .map(MasterError::node("remove the router-advertisement record"))
}

/// GC: removes the records of taps that are gone (module comment) and killed writers'
/// temporaries; the failures.
pub fn sweep(node: &NodeConfig, live: &HashSet<String>) -> Vec<MasterError> {
    let dir = &node.radv_state_dir;
    let mut failures = Vec::new();
    if let Err(e) = staged::sweep(dir) {
        failures.push(MasterError::node(
            "sweep the router-advertisement temporaries",
        )(e));
    }
    let names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            // Only names an interface can have: anything else is not a record.
            .filter(|n| n.len() < 16 && !live.contains(n))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return failures,
        Err(source) => {
            failures.push(MasterError::node("list the router-advertisement records")(
                NetError::Io {
                    what: format!("list {}", dir.display()),
                    source,
                },
            ));
            return failures;
        }
    };
    if names.is_empty() {
        return failures;
    }
    let host = match Netlink::current() {
        Ok(host) => host,
        Err(e) => {
            failures.push(MasterError::node("open the host netlink socket")(e));
            return failures;
        }
    };
    for name in names {
        match host.link(&name) {
            Ok(Some(_)) => continue,
            Ok(None) => match staged::remove(dir, &name) {
                Ok(()) => log::info(
                    "GC: removed the router-advertisement record of a tap that is gone",
                    json!({"hostIfname": name}),
                ),
                Err(e) => {
                    failures.push(MasterError::node("remove a router-advertisement record")(e))
                }
            },
            Err(e) => failures.push(MasterError::node("look up a recorded tap")(e)),
        }
    }
    failures
}
