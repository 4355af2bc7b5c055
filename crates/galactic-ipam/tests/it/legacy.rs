//! Upgrades: the upstream marker files and the annotation records are imported, their addresses
//! are never handed to a new attachment, and DEL/GC release them like native allocations.

use crate::common::{addresses, Net, BIN};
use serde_json::json;
use std::fs;
use std::process::Command;

fn dual() -> Net {
    Net::new(json!({"ipv6_subnet": "fd00:10:ff01::/64", "ipv4_subnet": "10.1.0.0/24"}))
}

/// The upstream layout (§5.5): `<root>/<pool with / as ->/<marker>`, content = container id.
fn write_markers(net: &Net) {
    let root = net.legacy_dir();
    let v6 = root.join("fd00:10:ff01::-64");
    let v4 = root.join("10.1.0.0-24");
    fs::create_dir_all(&v6).expect("fixture dir");
    fs::create_dir_all(&v4).expect("fixture dir");
    fs::create_dir_all(root.join("not-a-pool")).expect("fixture dir");
    for (dir, name, content) in [
        (&v6, "lock", ""),
        (&v6, "fd00:10:ff01::100:0-96", "old-a"),
        // Upstream's 256th allocation carried into byte 11: inside our slot 1.
        (&v6, "fd00:10:ff01::1:0:0-96", "old-b"),
        (&v4, "lock", ""),
        (&v4, "10.1.0.2", "old-a"),
        (&v4, "10.1.0.3", "old-c"),
        // A torn upstream write: an empty marker still reserves its address.
        (&v4, "10.1.0.4", ""),
        (&v4, "README", "junk"),
    ] {
        fs::write(dir.join(name), content).expect("fixture file");
    }
}

#[test]
fn marker_files_are_imported_once_and_their_addresses_never_handed_out() {
    let net = dual();
    write_markers(&net);
    let fresh = net.add("new-1");
    assert_eq!(
        addresses(&fresh),
        ["fd00:10:ff01::2:0:1/96", "10.1.0.5/32"],
        "slot 1 and .2–.4 are held by upstream pods"
    );
    let report = net.verify();
    assert_eq!(
        (report.attachments, report.leases),
        (5, 7),
        "4 upstream holders + 1"
    );
    // Import runs once: a marker appearing later is not read again.
    fs::write(net.legacy_dir().join("10.1.0.0-24/10.1.0.6"), "late").unwrap();
    net.add("new-2");
    assert_eq!(net.verify().attachments, 6);

    // CHECK of an imported pod matches its upstream addresses.
    let prev = json!({"cniVersion": "1.1.0", "ips": [
        {"address": "fd00:10:ff01::100:0/96"}, {"address": "10.1.0.2/32"}]});
    net.check("old-a", Some(&prev)).expect_quiet_success();

    // DEL of the upstream pod (any network, any interface: upstream keyed by container id).
    net.del("old-a");
    net.check("old-a", None).expect_error(100);
    // GC of this network releases imported records in its pools not in the valid list.
    net.gc(&[("new-1", "eth0"), ("new-2", "eth0"), ("old-c", "eth0")]);
    let report = net.verify();
    assert_eq!(
        (report.attachments, report.leases),
        (3, 5),
        "old-b and the empty marker gone"
    );
    net.check("old-c", None).expect_quiet_success();
}

fn migrate(net: &Net) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(["migrate", "--annotations"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/bgpadvertisements.json"
        ))
        .arg("--data-dir")
        .arg(net.data_dir())
        .output()
        .expect("run migrate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

#[test]
fn annotation_records_are_imported_idempotently_and_released_by_full_container_id() {
    let net = dual();
    let first = migrate(&net);
    assert_eq!(first["imported"], 5, "{first}");
    assert_eq!(
        first["shared"], 1,
        "two upstream pods held ::100:0 (the in-memory allocator bug)"
    );
    assert_eq!(first["skipped"].as_array().unwrap().len(), 1, "{first}");
    let again = migrate(&net);
    assert_eq!(
        (
            again["imported"].as_u64(),
            again["already_present"].as_u64()
        ),
        (Some(0), Some(5))
    );

    let results: Vec<_> = (0..3).map(|i| net.add(&format!("new-{i}"))).collect();
    let got: Vec<String> = results.iter().flat_map(addresses).collect();
    for held in ["fd00:10:ff01::3:0:1/96", "10.1.0.2/32", "10.1.0.3/32"] {
        assert!(
            !got.contains(&held.to_owned()),
            "{held} handed out again: {got:?}"
        );
    }

    // The runtime's DEL carries the full 64-character id; the annotation kept 41 characters.
    let full = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    net.call("DEL", full).expect_quiet_success();
    net.check(full, None).expect_error(100);
    // The other holder of ::100:0 keeps it; the verify invariant allows the shared span.
    let report = net.verify();
    assert_eq!(report.attachments, 5);
}

#[test]
fn migrate_usage_errors_exit_2() {
    let out = Command::new(BIN).args(["migrate"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--annotations"));
    let out = Command::new(BIN)
        .args(["frobnicate"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}

/// The installer's export of the annotations, where the store looks for it.
fn place_export(net: &Net) {
    fs::create_dir_all(net.data_dir()).expect("data dir");
    fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/bgpadvertisements.json"
        ),
        net.data_dir().join("legacy-annotations.json"),
    )
    .expect("place the export");
}

#[test]
fn the_annotation_export_is_imported_by_the_first_add_without_migrate() {
    let net = dual();
    place_export(&net);
    let got: Vec<String> = (0..3)
        .flat_map(|i| addresses(&net.add(&format!("new-{i}"))))
        .collect();
    for held in ["fd00:10:ff01::3:0:1/96", "10.1.0.2/32", "10.1.0.3/32"] {
        assert!(
            !got.contains(&held.to_owned()),
            "{held} handed out again: {got:?}"
        );
    }
    assert_eq!(
        net.verify().attachments,
        3 + 3,
        "five imported records of three containers"
    );
    // Once: a later export is not read again (the records of pods since attached by this
    // chain would otherwise come back as upstream holders).
    place_export(&net);
    net.add("new-3");
    assert_eq!(net.verify().attachments, 3 + 4);
    // The full id releases the record kept under 41 characters.
    let full = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    net.call("DEL", full).expect_quiet_success();
    net.check(full, None).expect_error(100);
}

#[test]
fn a_del_before_any_store_exists_imports_then_releases_the_legacy_allocation() {
    let net = dual();
    write_markers(&net);
    assert!(!net.data_dir().join("ipam.db").exists());
    // The Go chain's pod old-a is deleted before anything else ran on the upgraded node.
    net.del("old-a");
    assert!(
        net.data_dir().join("ipam.db").exists(),
        "DEL built the store"
    );
    net.check("old-a", None).expect_error(100);
    // Its addresses are free again; the other upstream holders still are not.
    let report = net.verify();
    assert_eq!(
        (report.attachments, report.leases),
        (3, 3),
        "old-b, old-c, the torn marker"
    );
    let got = addresses(&net.add("new-1"));
    assert!(
        !got.contains(&"10.1.0.3/32".to_owned()),
        "old-c still holds it: {got:?}"
    );

    // Without any legacy state, a DEL still creates nothing.
    let bare = dual();
    bare.del("nobody");
    assert!(!bare.data_dir().join("ipam.db").exists());
}
