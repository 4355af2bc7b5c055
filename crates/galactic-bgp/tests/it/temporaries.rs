//! No temporary file outlives its writer's recovery: galactic-bgp's ADD SIGKILLed between
//! writing a local document or an eBPF registration record and renaming it into place
//! (`state-before-rename:…:kill`), or a temporary planted beside a shared document as a killed
//! writer leaves it, then only the runtime's DEL of that attachment (no GC) leaves no `*.tmp.*`
//! under the state directory.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::{Node, NS};
use galactic_core::bpf::maps::PIN_DIR_ENV;
use galactic_core::ident::{bgp_advertisement_name, bgp_vrf_instance_name};
use galactic_testkit::host::Pod;
use serde_json::json;
use std::path::{Path, PathBuf};

/// No process has this pid (above the kernel's pid_max limit).
const DEAD: u32 = 4_294_967_295;

/// A node whose plugins find the pin directory in their environment.
fn node(tag: &str) -> Node {
    let mut node = Node::new(tag, json!({}));
    let pin_dir = node.bpffs.pin_dir().display().to_string();
    node.env.push((PIN_DIR_ENV.into(), pin_dir));
    node
}

/// Every `*.tmp.*` file under `dir`, recursively.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(temporaries(&path));
        } else if entry.file_name().to_string_lossy().contains(".tmp.") {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_del_after_an_add_killed_before_its_rename_leaves_no_temporary() {
    galactic_testkit::privileged!();
    let node = node("btmp1");
    let state = node.host.path("state");
    let adv = bgp_advertisement_name("jU", "1", "node-a");
    let host = galactic_testkit::inspect::hname("jU", "1");
    for file in [
        format!("bgpadvertisements/{adv}.json"),
        format!("bpf/attachments/{host}.json"),
    ] {
        let pod = Pod::new("btmp1");
        let point = format!("state-before-rename:{file}:kill");
        let err = node
            .runtime()
            .env("GALACTIC_FAILPOINTS", &point)
            .add(&node.list("1"), &pod.attachment())
            .unwrap_err();
        assert!(
            err.code().is_none(),
            "{point}: killed, no CNI answer: {err}"
        );
        assert_eq!(
            temporaries(&state).len(),
            1,
            "{point}: {:?}",
            temporaries(&state)
        );
        node.runtime()
            .del(&node.list("1"), &pod.attachment())
            .unwrap();
        assert_eq!(
            temporaries(&state),
            Vec::<PathBuf>::new(),
            "after DEL, {point}"
        );
    }
}

/// The VPC's shared files outlive the DEL of one of its attachments, which reads them but does
/// not rewrite them: what a killed rewrite left goes with that DEL all the same (staged apart,
/// `galactic_core::state`; the local store's document, beside it: that directory's listing).
#[test]
fn a_del_removes_what_a_killed_writer_left_beside_the_vpcs_shared_files() {
    galactic_testkit::privileged!();
    let node = node("btmp2");
    let state = node.host.path("state");
    let (one, two) = (Pod::new("btmp2a"), Pod::new("btmp2b"));
    let r1 = node.add(&one, "1");
    let r2 = node.add(&two, "2");
    let vrf = bgp_vrf_instance_name("jU", "node-a");
    let planted = [
        state.join(format!("bgp/{NS}/bgpvrfinstances/{vrf}.tmp.{DEAD}")),
        state.join(format!("bpf/nat66/.staging/{}.tmp.{DEAD}", node.table())),
        state.join(format!("routing/.staging/vpc-{}.tmp.{DEAD}", hex("jU"))),
    ];
    for path in &planted {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"{").unwrap();
    }
    node.del(&two, "2", &r2);
    assert_eq!(
        temporaries(&state),
        Vec::<PathBuf>::new(),
        "after the DEL of one attachment"
    );
    node.del(&one, "1", &r1);
}

fn hex(vpc: &str) -> String {
    galactic_core::ident::VpcId::parse(vpc).unwrap().hex()
}
