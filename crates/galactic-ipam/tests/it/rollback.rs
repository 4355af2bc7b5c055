//! A node's return to the Go chain: `galactic-ipam write-markers` writes every live allocation as
//! upstream marker files, and the Go allocator (modelled below from upstream's allocation rules,
//! not from our code) then never hands out an address inside a live allocation.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::{addresses, Net, BIN};
use ipnetwork::IpNetwork;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::process::Command;

fn write_markers(net: &Net) -> (bool, Value) {
    let out = Command::new(BIN)
        .arg("write-markers")
        .arg("--data-dir")
        .arg(net.data_dir())
        .arg("--legacy-dir")
        .arg(net.legacy_dir())
        .output()
        .expect("galactic-ipam runs");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "a JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), report)
}

/// The marker names of a pool directory, un-sanitised as the Go allocator reads them.
fn used(dir: &Path) -> HashSet<String> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().replacen('-', "/", 1))
                .filter(|name| name != "lock")
                .collect()
        })
        .unwrap_or_default()
}

/// Upstream's IPv6 `Allocate` (§5.4): from the pool's network address, step by zeroing bytes
/// 13–15 and incrementing byte 12 with carry; take the first candidate `<ip>/96` that is neither
/// the reserved text (the pool's first /96) nor a marker name; write its marker.
fn go_allocate_v6(root: &Path, pool: IpNetwork, cid: &str) -> Option<Ipv6Addr> {
    let dir = root.join(format!("{}-{}", pool.network(), pool.prefix()));
    let used = used(&dir);
    let reserved = format!("{}/96", pool.network());
    let IpNetwork::V6(pool6) = pool else {
        panic!("an IPv6 pool")
    };
    let mut bytes = pool6.network().octets();
    while pool6.contains(Ipv6Addr::from(bytes)) {
        let text = format!("{}/96", Ipv6Addr::from(bytes));
        if text != reserved && !used.contains(&text) {
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join(text.replacen('/', "-", 1)), cid).unwrap();
            return Some(Ipv6Addr::from(bytes));
        }
        bytes[13..].fill(0);
        for i in (0..=12).rev() {
            bytes[i] = bytes[i].wrapping_add(1);
            if bytes[i] != 0 {
                break;
            }
        }
    }
    None
}

/// Upstream's IPv4 `Allocate` (§5.4): the first offset of the pool that is not the network
/// address, the gateway (network + 1), `size - 2`, `size - 1`, or a marker name.
fn go_allocate_v4(root: &Path, pool: IpNetwork, cid: &str) -> Option<Ipv4Addr> {
    let dir = root.join(format!("{}-{}", pool.network(), pool.prefix()));
    let used = used(&dir);
    let IpNetwork::V4(pool4) = pool else {
        panic!("an IPv4 pool")
    };
    let base = u32::from(pool4.network());
    let size = 1u32 << (32 - pool4.prefix());
    (0..size)
        .filter(|offset| ![0, 1, size - 2, size - 1].contains(offset))
        .map(|offset| Ipv4Addr::from(base + offset))
        .find(|ip| !used.contains(&ip.to_string()))
        .inspect(|ip| fs::write(dir.join(ip.to_string()), cid).unwrap())
}

fn prefixes(results: &[Value]) -> Vec<IpNetwork> {
    results
        .iter()
        .flat_map(addresses)
        .map(|a| a.parse().unwrap())
        .collect()
}

#[test]
fn after_write_markers_the_go_allocator_never_hands_out_a_live_address() {
    let (v6, v4): (IpNetwork, IpNetwork) = (
        "fd00:10:ff01::/64".parse().unwrap(),
        "10.1.0.0/24".parse().unwrap(),
    );
    let net = Net::new(json!({"ipv6_subnet": v6.to_string(), "ipv4_subnet": v4.to_string()}));
    let live: Vec<Value> = ["pod-a", "pod-b", "pod-c"]
        .iter()
        .map(|c| net.add(c))
        .collect();
    net.del("pod-b");
    let live = [live[0].clone(), live[2].clone()];

    let (complete, report) = write_markers(&net);
    assert!(complete, "{report}");
    // A /96 slot of a /64 pool holds 256 of the Go allocator's candidates; an IPv4 address one.
    assert_eq!(report["written"], 2 * 256 + 2, "{report}");
    // The pool directories are the Go allocator's: nothing of ours but its markers and lock.
    for (pool, markers) in [("fd00:10:ff01::-64", 512), ("10.1.0.0-24", 2)] {
        let entries = fs::read_dir(net.legacy_dir().join(pool)).unwrap().count();
        assert_eq!(
            entries,
            markers + 1,
            "{pool} holds more than markers and lock"
        );
    }
    let (complete, again) = write_markers(&net);
    assert!(complete);
    assert_eq!(
        (again["written"].as_u64(), again["present"].as_u64()),
        (Some(0), Some(514))
    );

    // Our own importer reads every live address back with its owner.
    let read = galactic_ipam::legacy::read_markers(&net.legacy_dir()).unwrap();
    assert!(read.skipped.is_empty(), "{:?}", read.skipped);
    for (cid, result) in [("pod-a", &live[0]), ("pod-c", &live[1])] {
        for address in addresses(result) {
            let address: IpNetwork = address.parse().unwrap();
            assert!(
                read.records
                    .iter()
                    .any(|r| r.container_id == cid && address.contains(r.address.ip())),
                "{address} of {cid}"
            );
        }
    }

    // The Go allocator after the switch: 600 IPv6 allocations walk past its first /96 (255)
    // into the /96 slots our pods hold; IPv4 takes every free address of the /24.
    let ours = prefixes(&live);
    for n in 0..600 {
        let ip = go_allocate_v6(&net.legacy_dir(), v6, &format!("go-{n}")).unwrap();
        assert!(
            !ours.iter().any(|p| p.contains(ip.into())),
            "the Go allocator handed out {ip}, inside a live allocation ({ours:?})"
        );
    }
    while let Some(ip) = go_allocate_v4(&net.legacy_dir(), v4, "go-v4") {
        assert!(!ours.iter().any(|p| p.contains(ip.into())), "{ip}");
    }
}

#[test]
fn a_96_pool_needs_one_marker_per_allocation_and_a_foreign_marker_is_a_conflict() {
    let pool: IpNetwork = "fd00:10:ff02::/96".parse().unwrap();
    let net = Net::new(json!({"ipv6_subnet": pool.to_string()}));
    let live: Vec<Value> = ["pod-a", "pod-b"].iter().map(|c| net.add(c)).collect();
    // A marker the Go chain wrote for another container at pod-b's candidate.
    let pod_b: IpNetwork = addresses(&live[1])[0].parse().unwrap();
    let dir = net.legacy_dir().join("fd00:10:ff02::-96");
    fs::create_dir_all(&dir).unwrap();
    let foreign = format!("{}-96", pod_b.network());
    fs::write(dir.join(&foreign), "someone-else").unwrap();

    let (complete, report) = write_markers(&net);
    assert!(!complete, "a conflict fails the command: {report}");
    assert_eq!(
        report["written"], 1,
        "pod-a's /104 slot is one Go candidate: {report}"
    );
    let conflicts = report["conflicts"].to_string();
    assert!(
        conflicts.contains(&foreign) && conflicts.contains("someone-else"),
        "{conflicts}"
    );
    assert_eq!(
        fs::read_to_string(dir.join(&foreign)).unwrap(),
        "someone-else",
        "kept"
    );

    fs::remove_file(dir.join(&foreign)).unwrap();
    assert!(write_markers(&net).0);
    let ours = prefixes(&live);
    while let Some(ip) = go_allocate_v6(&net.legacy_dir(), pool, "go") {
        assert!(
            !ours.iter().any(|p| p.contains(ip.into())),
            "{ip} in {ours:?}"
        );
    }
}

#[test]
fn a_node_without_a_store_has_nothing_to_write() {
    let net = Net::new(json!({"ipv6_subnet": "fd00:10:ff01::/64"}));
    let (complete, report) = write_markers(&net);
    assert!(complete, "{report}");
    assert_eq!(report["written"], 0);
}
