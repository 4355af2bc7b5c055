//! A full disk under the IPAM store or the state directory: ADD fails with nothing changed,
//! DEL answers "try again later" (code 11) and keeps what it could not record as released, and
//! the runtime's retry, once there is room, finishes the teardown. A DEL that answered success
//! here would make the runtime forget a pod whose addresses stay allocated forever.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::disk::SmallDisk;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Conflist, Runtime};
use serde_json::json;

fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime().binary(
        "galactic-cni",
        galactic_testkit::plugin_binary("galactic-cni"),
    )
}

fn host(tag: &str) -> Host {
    Host::new(tag, json!({"routing_domain": "auto"}), &["galactic-ipam"])
}

fn conf(att: &str) -> Conflist {
    Conflist::from_conf(&json!({"cniVersion": "1.1.0", "name": "tenant-a", "type": "galactic-cni",
        "vpc": "1", "vpcattachment": att,
        "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd71::/64", "ipv4_subnet": "10.71.0.0/24"}}))
    .unwrap()
}

fn records(host: &Host) -> usize {
    std::fs::read_dir(host.path("state").join("attachments")).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .count()
    })
}

#[test]
fn add_on_a_full_disk_fails_cleanly_and_leaves_nothing() {
    galactic_testkit::privileged!();
    let host = host("fulladd");
    let disk = SmallDisk::mount(&host.node.ipam_dir(), "64k");
    disk.fill();
    let before = host.snapshot();
    let err = runtime(&host)
        .add(&conf("1"), &Pod::new("fulladd").attachment())
        .expect_err("ADD on a full disk must fail");
    let code = err.code().unwrap();
    assert!(
        [5, 11].contains(&code),
        "an I/O-class code, got {code}: {err}"
    );
    assert_eq!(host.snapshot(), before, "nothing on the node changed");
}

#[test]
fn del_on_a_full_ipam_disk_keeps_the_leases_until_a_retry_releases_them() {
    galactic_testkit::privileged!();
    let host = host("fullipam");
    let disk = SmallDisk::mount(&host.node.ipam_dir(), "2m");
    let rt = runtime(&host);
    let pod = Pod::new("fullipam");
    rt.add(&conf("1"), &pod.attachment()).unwrap();
    let held = host.node.ipam_holdings();
    assert_eq!(held.len(), 1);
    disk.fill();
    let msg = rt
        .del(&conf("1"), &pod.attachment())
        .unwrap_err()
        .expect_error(11);
    assert!(msg.contains("full"), "{msg}");
    assert_eq!(host.node.ipam_holdings(), held, "nothing forgotten");
    assert_eq!(records(&host), 1, "the record still names the delegate");
    disk.free();
    // Edited meanwhile: the retry finds the delegate in the record.
    let mut edited = conf("1");
    edited.plugins[0]["vpc"] = json!("not base62!");
    edited.plugins[0].as_object_mut().unwrap().remove("ipam");
    rt.del(&edited, &pod.attachment()).unwrap();
    assert_eq!(host.node.ipam_holdings(), Vec::<String>::new());
    assert_eq!(records(&host), 0);
}

#[test]
fn del_on_a_full_state_disk_needs_no_room_and_finishes() {
    galactic_testkit::privileged!();
    // The master's DEL only deletes (records, kernel objects): it needs no free space, so a
    // full state disk must not stop a teardown. (galactic-route's DEL rewrites its VPC record
    // and answers 11 there: crates/galactic-route/tests/lifetime.rs.)
    let host = host("fullstate");
    let disk = SmallDisk::mount(&host.path("state"), "1m");
    let rt = runtime(&host);
    let (pod, other) = (Pod::new("fullst1"), Pod::new("fullst2"));
    rt.add(&conf("1"), &pod.attachment()).unwrap();
    rt.add(&conf("2"), &other.attachment()).unwrap();
    disk.fill();
    rt.del(&conf("1"), &pod.attachment()).unwrap();
    assert_eq!(records(&host), 1, "only the other attachment's record");
    rt.check(&conf("2"), &other.attachment()).unwrap();
    rt.del(&conf("2"), &other.attachment()).unwrap();
    assert_eq!(records(&host), 0);
    assert_eq!(host.node.ipam_holdings(), Vec::<String>::new());
}
