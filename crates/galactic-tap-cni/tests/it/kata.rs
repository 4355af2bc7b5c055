//! Kata DAN files and the router-advertisement records of taps (`src/kata.rs`, `src/radv.rs`),
//! through the real binary in throwaway namespaces, with the node's `dan_dir` and
//! `radv_state_dir` in its temporary directory.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use super::tap::{conf, runtime};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::inspect::hname;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn host(tag: &str, node_extra: Value) -> Host {
    let mut node = json!({"routing_domain": "auto"});
    for (k, v) in node_extra.as_object().into_iter().flatten() {
        node[k] = v.clone();
    }
    Host::new(tag, node, &["galactic-ipam"])
}

fn dan_file(host: &Host, vm: &Pod) -> PathBuf {
    host.path("dans").join(format!("{}.json", vm.id))
}

fn ra_record(host: &Host, tap: &str) -> PathBuf {
    host.path("ra").join(tap)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// What a directory holds besides its (empty) staging directory: temporaries are never left.
fn entries(dir: &Path) -> Vec<String> {
    let staged = dir.join(".galactic-tmp");
    let left: Vec<String> = std::fs::read_dir(&staged)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "temporaries left behind: {left:?}");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".galactic-tmp")
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn dan_true_writes_the_sandboxs_dan_file_and_del_removes_it() {
    galactic_testkit::privileged!();
    let host = host("kdan", json!({}));
    let rt = runtime(&host);
    let vm = Pod::new("kdanvm");
    let att = vm.attachment();
    let conf = conf("D", json!({"dan": true}));
    let result = rt.add(&conf, &att).unwrap();
    let tap = hname("D", "1");
    let ips = result["ips"].as_array().unwrap();
    let (v6, v4) = (&ips[0], &ips[1]);
    assert!(v4["address"].as_str().unwrap().ends_with("/25"), "{result}");

    let path = dan_file(&host, &vm);
    let doc = read_json(&path);
    let device = &doc["devices"][0];
    let mac = device["guest_mac"].as_str().unwrap().to_owned();
    assert!(mac.starts_with("02:") && mac.len() == 17, "{doc}");
    let want = json!({"devices": [{
        "name": "eth0",
        "guest_mac": mac,
        "device": {"type": "host-tap", "tap_name": tap},
        "network_info": {
            "interface": {"ip_addresses": [v6["address"], v4["address"]], "mtu": 9000,
                          "ntype": "tuntap", "flags": 0},
            "routes": [
                {"dest": "", "gateway": v6["gateway"], "source": "", "scope": 0, "flags": 4, "mtu": 0},
                {"dest": "", "gateway": v4["gateway"], "source": "", "scope": 0, "flags": 4, "mtu": 0},
            ],
            "neighbors": []}}]});
    assert_eq!(
        doc, want,
        "runtime-rs's DanConfig, one host-tap device, no netns"
    );
    assert_eq!((mode(&host.path("dans")), mode(&path)), (0o700, 0o600));
    assert_eq!(entries(&host.path("dans")), [format!("{}.json", vm.id)]);

    rt.check(&conf, &att).unwrap();
    std::fs::remove_file(&path).unwrap();
    let err = rt.check(&conf, &att).unwrap_err().expect_error(100);
    assert!(
        err.contains("Kata DAN file") && err.contains("missing"),
        "{err}"
    );
    assert_eq!(
        rt.add(&conf, &att).unwrap(),
        result,
        "a retried ADD converges"
    );
    assert_eq!(read_json(&path), want);
    rt.check(&conf, &att).unwrap();

    rt.del(&conf, &att).unwrap();
    assert!(!path.exists(), "DEL removes the sandbox's DAN file");
    assert!(entries(&host.path("dans")).is_empty());
    rt.plugin(&conf, 0, "DEL", &att, Some(&result))
        .expect_quiet_success();
}

#[test]
fn without_dan_no_file_is_written_and_every_tap_with_an_ipv6_gateway_is_recorded_for_ras() {
    galactic_testkit::privileged!();
    let host = host("kra", json!({}));
    let rt = runtime(&host);
    let vm = Pod::new("kravm");
    let list = conf("R", json!({"dan": false}));
    rt.add(&list, &vm.attachment()).unwrap();
    let tap = hname("R", "1");
    assert!(
        entries(&host.path("dans")).is_empty(),
        "no DAN file without dan: true"
    );
    // Upstream's record, byte for byte (Go's compact encoding of radv.Record).
    let record = std::fs::read_to_string(ra_record(&host, &tap)).unwrap();
    assert_eq!(record, format!(r#"{{"hostInterface":"{tap}","mtu":9000}}"#));
    assert_eq!(mode(&ra_record(&host, &tap)), 0o600);
    assert_eq!(entries(&host.path("ra")), std::slice::from_ref(&tap));
    rt.check(&list, &vm.attachment()).unwrap();
    std::fs::write(ra_record(&host, &tap), r#"{"hostInterface":"x","mtu":1}"#).unwrap();
    let err = rt
        .check(&list, &vm.attachment())
        .unwrap_err()
        .expect_error(100);
    assert!(err.contains("router-advertisement record"), "{err}");
    rt.del(&list, &vm.attachment()).unwrap();
    assert!(
        entries(&host.path("ra")).is_empty(),
        "DEL removes the record"
    );

    // IPv4 only: no IPv6 gateway, nothing to advertise.
    let v4 = Pod::new("kra4vm");
    let conf4 = conf(
        "S",
        json!({"ipam": {"type": "galactic-ipam", "ipv4_subnet": "10.81.0.0/24"}}),
    );
    rt.add(&conf4, &v4.attachment()).unwrap();
    assert!(
        entries(&host.path("ra")).is_empty(),
        "no record without an IPv6 gateway"
    );
    rt.check(&conf4, &v4.attachment()).unwrap();
    rt.del(&conf4, &v4.attachment()).unwrap();
}

/// Upstream removes whatever file carries the sandbox's name; ours only one that names this
/// attachment's tap alone, and DEL succeeds either way.
#[test]
fn del_leaves_a_dan_file_that_does_not_name_its_tap() {
    galactic_testkit::privileged!();
    let host = host("kkeep", json!({}));
    let rt = runtime(&host);
    let conf = conf("E", json!({"dan": true}));
    let other_tap = json!({"devices": [{"name": "eth0", "device": {"type": "host-tap",
        "tap_name": "G00000000Z001H"}, "network_info": {"interface": {"ip_addresses": []}}}]});
    let cases: [(&str, Vec<u8>); 3] = [
        ("kkeepa", other_tap.to_string().into_bytes()),
        ("kkeepb", b"{not json".to_vec()),
        ("kkeepc", br#"{"devices":[]}"#.to_vec()),
    ];
    for (tag, foreign) in cases {
        let vm = Pod::new(tag);
        rt.add(&conf, &vm.attachment()).unwrap();
        std::fs::write(dan_file(&host, &vm), &foreign).unwrap();
        rt.del(&conf, &vm.attachment()).unwrap();
        assert_eq!(
            std::fs::read(dan_file(&host, &vm)).unwrap(),
            foreign,
            "{tag}: a file that is not ours is kept"
        );
    }
    // A missing file (and a missing directory) is not an error either.
    let vm = Pod::new("kkeepd");
    rt.add(&conf, &vm.attachment()).unwrap();
    std::fs::remove_dir_all(host.path("dans")).unwrap();
    rt.del(&conf, &vm.attachment()).unwrap();
}

#[test]
fn a_failed_add_removes_the_dan_file_and_the_ra_record_it_wrote() {
    galactic_testkit::privileged!();
    let host = host("kfail", json!({}));
    let rt = runtime(&host);
    let vm = Pod::new("kfailvm");
    let conf = conf("F", json!({"dan": true}));
    let err = rt
        .clone()
        .env("GALACTIC_FAILPOINTS", "after-publish")
        .add(&conf, &vm.attachment())
        .unwrap_err();
    assert!(err.expect_error(999).contains("after-publish"));
    assert!(
        entries(&host.path("dans")).is_empty(),
        "rollback removes the DAN file"
    );
    assert!(
        entries(&host.path("ra")).is_empty(),
        "rollback removes the RA record"
    );
    assert!(!host.netns.try_ip(&["link", "show", &hname("F", "1")]).0);
    rt.add(&conf, &vm.attachment()).unwrap();
    rt.del(&conf, &vm.attachment()).unwrap();
}

#[test]
fn gc_removes_the_records_of_attachments_and_taps_that_are_gone() {
    galactic_testkit::privileged!();
    let host = host("kgc", json!({}));
    let rt = runtime(&host);
    let gone = Pod::new("kgcgone");
    let kept = Pod::new("kgckept");
    let conf = conf("G", json!({"dan": true}));
    let conf_kept = conf_with_att("G", "2");
    rt.add(&conf, &gone.attachment()).unwrap();
    rt.add(&conf_kept, &kept.attachment()).unwrap();
    let ra = host.path("ra");
    // A record whose tap is gone and has no attachment record (a DEL that never came), one of
    // a tap that exists without a record of ours (the Go chain's live VM), and temporaries of
    // writers that were killed.
    std::fs::write(
        ra.join("G00000000Q001H"),
        r#"{"hostInterface":"G00000000Q001H","mtu":1500}"#,
    )
    .unwrap();
    host.netns
        .ip(&["tuntap", "add", "dev", "G00000000W001H", "mode", "tap"]);
    std::fs::write(
        ra.join("G00000000W001H"),
        r#"{"hostInterface":"G00000000W001H","mtu":1500}"#,
    )
    .unwrap();
    for dir in [&ra, &host.path("dans")] {
        std::fs::write(dir.join(".galactic-tmp/x.tmp.4294967295"), b"{").unwrap();
    }
    // The runtime forgot `gone`: only GC's own removal can find it.
    rt.lose_cache();
    rt.gc(&conf, &[&kept.attachment()]).unwrap();
    assert!(
        !dan_file(&host, &gone).exists(),
        "GC removes a gone attachment's DAN file"
    );
    assert_eq!(
        entries(&ra),
        [hname("G", "2"), "G00000000W001H".to_owned()],
        "GC keeps the live attachment's record and the Go chain's"
    );
    assert!(entries(&host.path("dans")).is_empty());
    rt.del(&conf_kept, &kept.attachment()).unwrap();
}

fn conf_with_att(vpc: &str, att: &str) -> galactic_testkit::runtime::Conflist {
    let mut c = conf(vpc, json!({})).to_value();
    c["plugins"][0]["vpcattachment"] = json!(att);
    galactic_testkit::runtime::Conflist::from_value(&c).unwrap()
}

#[test]
fn a_dan_stanza_that_cannot_work_is_refused_before_anything_changes() {
    galactic_testkit::privileged!();
    let host = host("kbad", json!({}));
    let rt = runtime(&host);
    let vm = Pod::new("kbadvm");
    let mut no_ipam = conf("B", json!({"dan": true})).to_value();
    no_ipam["plugins"][0]
        .as_object_mut()
        .unwrap()
        .remove("ipam");
    let no_ipam = galactic_testkit::runtime::Conflist::from_value(&no_ipam).unwrap();
    let cases = [
        (no_ipam, "\"ipam\" block"),
        (
            conf("B", json!({"dan": "true"})),
            "dan must be true or false",
        ),
    ];
    for (list, want) in cases {
        let err = rt.add(&list, &vm.attachment()).unwrap_err().expect_error(7);
        assert!(err.contains(want), "{err}");
        // DEL of the same stanza never fails.
        rt.plugin(&list, 0, "DEL", &vm.attachment(), None)
            .expect_quiet_success();
    }
    // A node whose dan_dir is the Go shim's directory (which fails every sandbox of the node on
    // a host-tap file): refused, and nothing is written there.
    let go = self::host("kgo", json!({"dan_dir": "/run/kata-containers/dans"}));
    let err = runtime(&go)
        .add(&conf("B", json!({"dan": true})), &vm.attachment())
        .unwrap_err()
        .expect_error(7);
    assert!(err.contains("Go shim"), "{err}");
    for h in [&host, &go] {
        assert!(!h.netns.try_ip(&["link", "show", &hname("B", "1")]).0);
    }
}

/// A record that cannot be written fails the ADD ("try again later" on a full disk, rolled
/// back), where upstream logs it and the guest never gets an IPv6 default route.
#[test]
fn a_full_disk_under_the_ra_records_fails_the_add_for_a_retry() {
    galactic_testkit::privileged!();
    let host = host("kfull", json!({}));
    let rt = runtime(&host);
    let vm = Pod::new("kfullvm");
    let conf = conf("H", json!({"dan": true}));
    let disk = galactic_testkit::disk::SmallDisk::mount(&host.path("ra"), "64k");
    disk.fill();
    let err = rt
        .add(&conf, &vm.attachment())
        .unwrap_err()
        .expect_error(11);
    assert!(err.contains("router-advertisement record"), "{err}");
    assert!(!host.netns.try_ip(&["link", "show", &hname("H", "1")]).0);
    assert!(entries(&host.path("dans")).is_empty());
    disk.free();
    rt.add(&conf, &vm.attachment()).unwrap();
    rt.del(&conf, &vm.attachment()).unwrap();
    assert!(entries(&host.path("ra"))
        .iter()
        .all(|n| n == "filler" || n.is_empty()));
}

/// An ADD SIGKILLed between writing the DAN file or the RA record and renaming it into place:
/// the runtime's DEL alone (no GC) leaves no temporary, though neither file ever existed.
#[test]
fn a_del_after_an_add_killed_before_its_rename_leaves_no_temporary() {
    galactic_testkit::privileged!();
    let host = host("kkill", json!({}));
    let rt = runtime(&host);
    let conf = conf("K", json!({"dan": true}));
    for dir in ["dans", "ra"] {
        let vm = Pod::new("kkillvm");
        let file = match dir {
            "dans" => format!("{}.json", vm.id),
            _ => hname("K", "1"),
        };
        let point = format!("state-before-rename:{dir}/{file}:kill");
        let err = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", &point)
            .add(&conf, &vm.attachment())
            .unwrap_err();
        assert!(
            err.code().is_none(),
            "{point}: killed, no CNI answer: {err}"
        );
        let staged = std::fs::read_dir(host.path(dir).join(".galactic-tmp")).unwrap();
        assert_eq!(staged.count(), 1, "{point}: the killed writer's temporary");
        rt.del(&conf, &vm.attachment()).unwrap();
        // `entries` fails on any temporary left.
        assert!(entries(&host.path("dans")).is_empty(), "{point}");
        assert!(entries(&host.path("ra")).is_empty(), "{point}");
    }
}
