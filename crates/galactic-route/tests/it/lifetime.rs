//! The route record lives exactly as long as the attachments it names: DEL removes an
//! attachment's entries (whatever its configuration says by then), a container that takes over
//! an attachment takes over its entries, a DEL that cannot rewrite the record is retried, and a
//! VPC's record never holds more than its live attachments' entries however long the node runs.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use crate::common::{master_conf, pool_ipam, route_conf, route_record};
use galactic_testkit::disk::SmallDisk;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};

fn chain(att: &str) -> Conflist {
    let terms = json!([
        {"network": format!("198.51.{att}.0/24")},
        {"network": format!("2001:db8:{att}::/64")}
    ]);
    Conflist::new(
        "1.1.0",
        "tenant-a",
        vec![
            master_conf("A", att, pool_ipam("fd66:1::/64", "10.66.0.0/24")),
            route_conf("A", att, terms),
        ],
    )
}

/// The (container id, destination) of every entry of VPC A's record; empty when it has none.
fn entries(host: &Host) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(route_record(host, "A")) else {
        return Vec::new();
    };
    let record: Value = serde_json::from_str(&text).unwrap();
    let mut out: Vec<(String, String)> = record["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["containerId"].as_str().unwrap().to_owned(),
                r["dst"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn del_removes_its_own_entries_whatever_the_config_says_and_the_last_removes_the_record() {
    galactic_testkit::privileged!();
    let host = common::host("rl1");
    let rt = common::runtime(&host);
    let (one, two) = (Pod::new("rl1a"), Pod::new("rl1b"));
    rt.add(&chain("1"), &one.attachment()).unwrap();
    rt.add(&chain("2"), &two.attachment()).unwrap();
    assert_eq!(entries(&host).len(), 4);
    // Edited since ADD: the route stanza's ids no longer parse.
    let mut edited = chain("1");
    edited.plugins[1]["vpc"] = json!("not base62!");
    rt.del(&edited, &one.attachment()).unwrap();
    let left = entries(&host);
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.iter().all(|(cid, _)| *cid == two.id), "{left:?}");
    rt.check(&chain("2"), &two.attachment()).unwrap();
    rt.del(&chain("2"), &two.attachment()).unwrap();
    assert!(
        !route_record(&host, "A").exists(),
        "no live attachment, no record"
    );
}

#[test]
fn a_container_that_takes_over_an_attachment_takes_over_its_entries() {
    galactic_testkit::privileged!();
    let host = common::host("rl2");
    let rt = common::runtime(&host);
    let first = Pod::new("rl2a");
    let first_att = first.attachment();
    rt.add(&chain("1"), &first_att).unwrap();
    drop(first); // died without a DEL; the next pod of the Deployment gets the attachment
    let second = Pod::new("rl2b");
    rt.add(&chain("1"), &second.attachment()).unwrap();
    assert!(
        entries(&host).iter().all(|(cid, _)| *cid == second.id),
        "{:?}",
        entries(&host)
    );
    // The dead container's DEL arrives late: the holder's routes and entries stay.
    rt.del(&chain("1"), &first_att).unwrap();
    assert_eq!(entries(&host).len(), 2);
    rt.check(&chain("1"), &second.attachment()).unwrap();
    rt.del(&chain("1"), &second.attachment()).unwrap();
    assert_eq!(entries(&host), Vec::<(String, String)>::new());
}

#[test]
fn del_on_a_full_state_disk_is_try_again_later_and_the_retry_finishes() {
    galactic_testkit::privileged!();
    let host = common::host("rl3");
    // The plugins' state directory on a small disk of its own (the IPAM store is elsewhere).
    let disk = SmallDisk::mount(&host.path("state"), "1m");
    let rt = common::runtime(&host);
    // Two attachments: removing the last entry removes the file, which needs no space; the
    // first DEL must rewrite the record.
    let (pod, other) = (Pod::new("rl3a"), Pod::new("rl3b"));
    rt.add(&chain("1"), &pod.attachment()).unwrap();
    rt.add(&chain("2"), &other.attachment()).unwrap();
    disk.fill();
    let err = rt.del(&chain("1"), &pod.attachment()).unwrap_err();
    let msg = err.expect_error(11);
    assert!(msg.contains("space") || msg.contains("full"), "{msg}");
    assert_eq!(entries(&host).len(), 4, "nothing forgotten");
    disk.free();
    rt.del(&chain("1"), &pod.attachment()).unwrap();
    let left = entries(&host);
    assert!(
        left.len() == 2 && left.iter().all(|(cid, _)| *cid == other.id),
        "{left:?}"
    );
    rt.del(&chain("2"), &other.attachment()).unwrap();
    assert_eq!(entries(&host), Vec::<(String, String)>::new());
    assert_eq!(host.node.ipam_holdings(), Vec::<String>::new());
}

#[test]
fn a_long_history_leaves_only_live_attachments_in_the_record() {
    galactic_testkit::privileged!();
    // Not timed: the work of ADD, CHECK and DEL is a function of the record they rewrite,
    // so a record bounded by the live attachments bounds their cost.
    let host = common::host("rl4");
    let rt = common::runtime(&host);
    let keep = Pod::new("rl4k");
    rt.add(&chain("1"), &keep.attachment()).unwrap();
    let size = || std::fs::metadata(route_record(&host, "A")).unwrap().len();
    let one_live = size();
    for round in 0..40 {
        let pod = Pod::new(&format!("rl4{round}"));
        rt.add(&chain("2"), &pod.attachment()).unwrap();
        rt.check(&chain("2"), &pod.attachment()).unwrap();
        rt.del(&chain("2"), &pod.attachment()).unwrap();
    }
    assert_eq!(entries(&host).len(), 2, "{:?}", entries(&host));
    assert_eq!(
        size(),
        one_live,
        "the record is what it was with one live attachment"
    );
    rt.del(&chain("1"), &keep.attachment()).unwrap();
}

/// Every `*.tmp.*` file under the host's state directory.
fn temporaries(host: &Host) -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if entry.file_name().to_string_lossy().contains(".tmp.") {
                out.push(path.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(&host.path("state"), &mut out);
    out
}

/// An ADD SIGKILLed between writing the VPC's record and its rename, when no record existed
/// and when another attachment's did (its entries then never reached the record, so DEL finds
/// nothing to rewrite): the runtime's DEL alone (no GC) leaves no temporary.
#[test]
fn a_del_after_an_add_killed_before_its_record_rename_leaves_no_temporary() {
    galactic_testkit::privileged!();
    let host = common::host("rl5");
    let rt = common::runtime(&host);
    let record = route_record(&host, "A");
    let point = format!(
        "state-before-rename:routes/{}:kill",
        record.file_name().unwrap().to_string_lossy()
    );
    let killed = rt.clone().env("GALACTIC_FAILPOINTS", &point);
    let keep = Pod::new("rl5k");
    for (round, att) in ["1", "2"].into_iter().enumerate() {
        let pod = Pod::new("rl5p");
        let err = killed.add(&chain(att), &pod.attachment()).unwrap_err();
        assert!(err.code().is_none(), "killed, no CNI answer: {err}");
        assert_eq!(temporaries(&host).len(), 1, "{:?}", temporaries(&host));
        assert_eq!(
            record.exists(),
            round == 1,
            "the record existed only the second time"
        );
        rt.del(&chain(att), &pod.attachment()).unwrap();
        assert_eq!(
            temporaries(&host),
            Vec::<String>::new(),
            "after DEL, round {round}"
        );
        if round == 0 {
            rt.add(&chain("1"), &keep.attachment()).unwrap();
        }
    }
    assert_eq!(entries(&host).len(), 2, "the live attachment's entries");
    rt.del(&chain("1"), &keep.attachment()).unwrap();
}
