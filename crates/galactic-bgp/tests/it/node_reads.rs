//! What galactic-bgp reads of the node for one attachment: its ADD, CHECK and DEL, and the
//! master's DEL that removes its eBPF registration, open the files of the attachment and of its
//! VPC, never a file of another VPC's attachments, however many the node holds (decision 0079).
//! The kernel counts: an inotify watch on every directory that holds the node's per-attachment
//! files reports each file opened in them, by name.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::{Node, NS};
use galactic_core::bpf::maps::PIN_DIR_ENV;
use galactic_testkit::host::Pod;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The other VPC, with attachments of its own on the node.
const OTHER: &str = "kV";
/// Its attachments.
const OTHERS: [&str; 3] = ["1", "2", "3"];

/// The files opened in a set of directories since the last [`Opens::take`].
struct Opens {
    events: std::fs::File,
    dirs: BTreeMap<i32, PathBuf>,
}

impl Opens {
    /// Watches `dirs` (each must exist) for files opened in them.
    fn watch(dirs: &[PathBuf]) -> Self {
        // SAFETY: plain system call with constant flags; the descriptor is checked and owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let events = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let mut watched = BTreeMap::new();
        for dir in dirs {
            let path = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: `path` is a NUL-terminated string that outlives the call.
            let wd = unsafe { libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_OPEN) };
            assert!(
                wd >= 0,
                "watch {}: {}",
                dir.display(),
                std::io::Error::last_os_error()
            );
            watched.insert(wd, dir.clone());
        }
        Self {
            events,
            dirs: watched,
        }
    }

    /// Every file opened in the watched directories since the last call, by path, one entry
    /// per open (a directory's own listing is not a file opened in it).
    fn take(&mut self) -> Vec<PathBuf> {
        let mut opened = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match self.events.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return opened,
                Err(e) => panic!("read inotify events: {e}"),
            };
            let mut at = 0;
            // struct inotify_event: wd, mask, cookie, len (4 bytes each), then `len` name bytes.
            while at + 16 <= n {
                let word =
                    |i: usize| u32::from_ne_bytes(buf[at + i..at + i + 4].try_into().unwrap());
                let (wd, mask, len) = (word(0) as i32, word(4), word(12) as usize);
                let name = &buf[at + 16..at + 16 + len];
                let name = String::from_utf8_lossy(name)
                    .trim_end_matches('\0')
                    .to_owned();
                if mask & libc::IN_ISDIR == 0 && !name.is_empty() {
                    opened.push(self.dirs[&wd].join(name));
                }
                at += 16 + len;
            }
        }
    }
}

/// Every file under the watched `dirs` now.
fn files_in(dirs: &[PathBuf]) -> BTreeSet<PathBuf> {
    dirs.iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.path())
        .collect()
}

/// The directories holding a file per attachment or per VPC of the node: the masters'
/// records, the eBPF registration records, the local publisher's advertisements and VRF
/// instances, and the other VPC's publication records.
fn per_attachment_dirs(state: &Path) -> Vec<PathBuf> {
    let other = galactic_core::ident::VpcId::parse(OTHER).unwrap().hex();
    vec![
        state.join("attachments"),
        state.join("bpf/attachments"),
        state.join(format!("bgp/{NS}/bgpadvertisements")),
        state.join(format!("bgp/{NS}/bgpvrfinstances")),
        state.join(format!("bgp-attachments/vpc-{other}")),
    ]
}

/// The chain of the other VPC's attachment `att`: its own pools (table-mode domains need
/// node-unique gateways).
fn other_chain(node: &Node, att: &str) -> galactic_testkit::runtime::Conflist {
    let mut list = node.chain(OTHER, att, "galactic-cni");
    list.plugins[0]["ipam"] = json!({"type": "galactic-ipam", "ipv6_subnet": "fd20:10:ff02::/64",
                                     "ipv4_subnet": "172.21.2.0/24"});
    list
}

/// The files of `opened` that were the other VPC's.
fn theirs(opened: &[PathBuf], others: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
    opened
        .iter()
        .filter(|p| others.contains(*p))
        .cloned()
        .collect()
}

#[test]
fn an_attachments_add_check_and_del_open_no_file_of_another_vpc() {
    galactic_testkit::privileged!();
    let mut node = Node::new("bgpreads", json!({}));
    let pin_dir = node.bpffs.pin_dir().display().to_string();
    node.env.push((PIN_DIR_ENV.into(), pin_dir));
    let state = node.host.path("state");
    let pods: Vec<(Pod, Value)> = OTHERS
        .iter()
        .map(|att| {
            let pod = Pod::new(&format!("bgpreadk{att}"));
            let result = node.add_list(&pod, &other_chain(&node, att));
            (pod, result)
        })
        .collect();
    let dirs = per_attachment_dirs(&state);
    // Everything there now is the other VPC's (and the node's router, outside these dirs).
    let others = files_in(&dirs);
    assert!(
        others.len() >= 2 * OTHERS.len(),
        "the other VPC's records: {others:?}"
    );
    // A sibling in the probe's VPC, so the probe's ADD is not its VPC's first.
    let sibling = Pod::new("bgpreads");
    let sibling_result = node.add(&sibling, "1");
    let probe = Pod::new("bgpreadp");
    let prev = node.master_add(&probe, "2");
    let mut opens = Opens::watch(&dirs);

    let result = node.bgp("ADD", &probe, "2", &prev, &[]).expect_result();
    let add = opens.take();
    assert_eq!(
        theirs(&add, &others),
        Vec::<PathBuf>::new(),
        "ADD opened: {add:?}"
    );
    // Its own registration record (written and read back with its VPC's) and the sibling's:
    // two per record at most, never one per attachment of the node.
    let registrations = add
        .iter()
        .filter(|p| p.starts_with(state.join("bpf/attachments")))
        .count();
    assert!(
        registrations <= 4,
        "registration records opened by ADD: {add:?}"
    );

    node.check(&probe, "2", &result).expect_quiet_success();
    let check = opens.take();
    assert_eq!(
        theirs(&check, &others),
        Vec::<PathBuf>::new(),
        "CHECK opened: {check:?}"
    );

    node.bgp("DEL", &probe, "2", &result, &[])
        .expect_quiet_success();
    let del = opens.take();
    assert_eq!(
        theirs(&del, &others),
        Vec::<PathBuf>::new(),
        "DEL opened: {del:?}"
    );

    // The master's DEL removes the eBPF registration: it reads the VPC's registrations only.
    node.master_del(&probe, "2", &result);
    let unregistered: Vec<PathBuf> = opens
        .take()
        .into_iter()
        .filter(|p| p.starts_with(state.join("bpf/attachments")))
        .collect();
    assert_eq!(
        theirs(&unregistered, &others),
        Vec::<PathBuf>::new(),
        "the removal of the registration opened: {unregistered:?}"
    );

    node.del(&sibling, "1", &sibling_result);
    for ((pod, result), att) in pods.iter().zip(OTHERS) {
        node.del_list(pod, &other_chain(&node, att), result);
    }
}
