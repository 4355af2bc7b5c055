//! The veth master as a runtime drives it, on real kernel objects: the plugin's host is a
//! throwaway network namespace, each pod another one.
//!
//! - [`attach`]: ADD/CHECK/DEL of every addressing mode, reachability and isolation, retries;
//! - [`cost`]: what ADD and GC read of the node, as the node grows in attachments and VPCs;
//! - [`lifecycle`]: failures at every step, DEL after the pod or config changed, claims, GC,
//!   refusals, the host services filter, the VRF backend;
//! - [`marks`]: table mode's VPC selection by firewall mark: isolation with pod-set marks, the
//!   migration from one rule per host interface;
//! - [`temporaries`]: DEL after an ADD killed between a state write and its rename.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod attach;
mod cost;
mod lifecycle;
mod marks;
mod temporaries;

use galactic_testkit::host::Host;
pub use galactic_testkit::inspect::*;
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};
use std::path::Path;

/// This crate's veth master.
pub fn cni() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_galactic-cni"))
}

/// The host's runtime, with this crate's master binary.
pub fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime().binary("galactic-cni", cni())
}

pub fn host(tag: &str) -> Host {
    Host::new(tag, json!({"routing_domain": "auto"}), &["galactic-ipam"])
}

/// For tests that assert the `table` backend's own objects (rules) or limits; their `vrf`
/// counterparts are in `vrf.rs`.
pub fn table_host(tag: &str) -> Host {
    Host::new(tag, json!({"routing_domain": "table"}), &["galactic-ipam"])
}

/// A network config file with the master alone.
pub fn conf(version: &str, vpc: &str, att: &str, ipam: Value) -> Conflist {
    let mut conf = json!({"cniVersion": version, "name": "tenant-a", "type": "galactic-cni",
                          "vpc": vpc, "vpcattachment": att, "mtu": 1400});
    if !ipam.is_null() {
        conf["ipam"] = ipam;
    }
    Conflist::from_conf(&conf).unwrap()
}

pub fn records(host: &Host) -> Vec<String> {
    galactic_testkit::inspect::state_entries(&host.path("state").join("attachments"))
}

/// Runs the master's IPAM delegate on its own for `att` (as the master would delegate to it).
pub fn ipam_call(host: &Host, list: &Conflist, command: &str, att: &Attachment) -> Value {
    let ipam = host.bin_dir.join("galactic-ipam");
    let out = host
        .runtime()
        .binary("galactic-cni", &ipam)
        .plugin(list, 0, command, att, None);
    assert!(out.success, "IPAM {command}: {}", out.stdout);
    if out.stdout.trim().is_empty() {
        Value::Null
    } else {
        out.json()
    }
}
