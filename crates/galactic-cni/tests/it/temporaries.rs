//! No temporary file outlives its writer's recovery: an ADD SIGKILLed between writing a state
//! file and renaming it into place (`state-before-rename:<dir>/<file>:kill`), then only the
//! runtime's DEL of that attachment (no GC, which most runtimes never send), leaves no
//! `*.tmp.*` anywhere under the state directory, whether or not the file itself existed.

use crate::*;
use galactic_core::ident::VpcId;
use galactic_testkit::host::Pod;
use std::path::{Path, PathBuf};

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

/// ADD of `list` killed at the rename of `file` (relative to the state directory): the
/// killed writer's temporary is there afterwards, as the crash campaign found it.
fn add_killed_at(rt: &Runtime<'_>, list: &Conflist, pod: &Pod, file: &str) {
    let point = format!("state-before-rename:{file}:kill");
    let err = rt
        .clone()
        .env("GALACTIC_FAILPOINTS", &point)
        .add(list, &pod.attachment())
        .unwrap_err();
    assert!(err.code().is_none(), "killed, no CNI answer: {err}");
}

fn domain_record(vpc: &str) -> String {
    format!("routing/vpc-{}.json", VpcId::parse(vpc).unwrap().hex())
}

#[test]
fn a_del_after_an_add_killed_before_its_first_record_existed_leaves_no_temporary() {
    galactic_testkit::privileged!();
    let host = host("vtmp1");
    let rt = runtime(&host);
    let state = host.path("state");
    let list = conf("1.1.0", "T", "1", pools("fd6b:1::/64", "10.107.0.0/24"));
    // The attachment's record (written first: no file of it exists), then the VPC's routing
    // domain record (the VPC's first ADD on the node: none exists either).
    for file in [
        format!("attachments/{}.json", hname("T", "1")),
        domain_record("T"),
    ] {
        let pod = Pod::new("vtmp1");
        add_killed_at(&rt, &list, &pod, &file);
        let left = temporaries(&state);
        assert_eq!(
            left.len(),
            1,
            "{file}: the killed writer's temporary: {left:?}"
        );
        assert!(!state.join(&file).exists(), "{file} never came to exist");
        rt.del(&list, &pod.attachment()).unwrap();
        assert_eq!(
            temporaries(&state),
            Vec::<PathBuf>::new(),
            "after DEL, {file}"
        );
        assert!(records(&host).is_empty(), "{file}");
        assert_eq!(host.node.ipam_holdings(), Vec::<String>::new(), "{file}");
    }
}

#[test]
fn a_del_after_an_add_killed_while_rewriting_the_vpcs_domain_record_leaves_no_temporary() {
    galactic_testkit::privileged!();
    let host = host("vtmp2");
    let rt = runtime(&host);
    let state = host.path("state");
    let first = conf("1.1.0", "T", "1", pools("fd6b:1::/64", "10.107.0.0/24"));
    let keep = Pod::new("vtmp2a");
    rt.add(&first, &keep.attachment()).unwrap();
    // Another network of the VPC: its gateways are new to the domain, whose record the second
    // ADD rewrites (it exists, and stays for the first attachment after the second's DEL).
    let second = conf("1.1.0", "T", "2", pools("fd6b:2::/64", "10.108.0.0/24"));
    let pod = Pod::new("vtmp2b");
    let file = domain_record("T");
    add_killed_at(&rt, &second, &pod, &file);
    assert!(state.join(&file).exists());
    assert_eq!(temporaries(&state).len(), 1, "{:?}", temporaries(&state));
    rt.del(&second, &pod.attachment()).unwrap();
    assert_eq!(temporaries(&state), Vec::<PathBuf>::new(), "after DEL");
    rt.check(&first, &keep.attachment()).unwrap();
    rt.del(&first, &keep.attachment()).unwrap();
    assert_eq!(temporaries(&state), Vec::<PathBuf>::new());
}
