//! galactic-ipam as the master delegates to it (the master's stanza, the master's environment),
//! run by the test kit's runtime against a throwaway node.
#![allow(dead_code)]

use galactic_ipam::store::{Store, VerifyReport};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime, RuntimeError};
use galactic_testkit::{Invocation, Outcome, TestNode};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_galactic-ipam");

/// `CNI_PATH` and `CNI_NETNS` of every call (IPAM never looks at either).
const CNI_PATH: &str = "/opt/cni/bin";
const NETNS: &str = "/var/run/netns/test";

/// A node plus the network config used by most tests.
pub struct Net {
    pub node: TestNode,
    pub name: String,
    pub ipam: Value,
}

impl Net {
    /// Network `net1` with `ipam` merged over `type` and a private legacy dir.
    pub fn new(ipam: Value) -> Self {
        let node = TestNode::new(json!({}));
        let mut block = json!({"type": "galactic-ipam"});
        if let (Some(map), Value::Object(extra)) = (block.as_object_mut(), ipam) {
            map.extend(extra);
        }
        Self {
            node,
            name: "net1".to_owned(),
            ipam: block,
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.node.ipam_dir()
    }

    pub fn legacy_dir(&self) -> PathBuf {
        self.node.legacy_dir()
    }

    /// The master's network config (1.1.0) with `extra` top-level keys, as a list of one.
    pub fn list(&self, extra: Value) -> Conflist {
        let mut conf = json!({
            "cniVersion": "1.1.0",
            "name": self.name,
            "type": "galactic-cni",
            "ipam": self.ipam,
        });
        if let (Some(map), Value::Object(extra)) = (conf.as_object_mut(), extra) {
            map.extend(extra);
        }
        Conflist::from_conf(&conf).expect("a network config")
    }

    /// The master's stanza with `extra` keys, as IPAM reads it on stdin.
    pub fn conf(&self, extra: Value) -> String {
        self.list(extra).inject(0).to_string()
    }

    /// A runtime on this node whose "master" is galactic-ipam: it gets what the master would
    /// delegate.
    pub fn runtime(&self) -> Runtime<'_> {
        Runtime::new(&self.node, Path::new(CNI_PATH), None).binary("galactic-cni", Path::new(BIN))
    }

    /// `command` for (`cid`, `ifname`) with `list` and `prev` as `prevResult`.
    pub fn plugin(
        &self,
        command: &str,
        cid: &str,
        ifname: &str,
        list: &Conflist,
        prev: Option<&Value>,
    ) -> Outcome {
        let att = Attachment::new(cid, NETNS, ifname);
        self.runtime().plugin(list, 0, command, &att, prev)
    }

    /// `command` for `cid`/eth0 with the network config.
    pub fn call(&self, command: &str, cid: &str) -> Outcome {
        self.plugin(command, cid, "eth0", &self.list(json!({})), None)
    }

    pub fn add(&self, cid: &str) -> Value {
        self.add_if(cid, "eth0")
    }

    pub fn add_if(&self, cid: &str, ifname: &str) -> Value {
        let out = self.plugin("ADD", cid, ifname, &self.list(json!({})), None);
        assert!(out.success, "ADD {cid}/{ifname}: {out:?}");
        out.json()
    }

    pub fn del(&self, cid: &str) {
        self.call("DEL", cid).expect_quiet_success();
    }

    pub fn check(&self, cid: &str, prev: Option<&Value>) -> Outcome {
        self.plugin("CHECK", cid, "eth0", &self.list(json!({})), prev)
    }

    /// GC with the valid (container id, ifname) pairs, which must succeed.
    pub fn gc(&self, valid: &[(&str, &str)]) {
        let valid: Vec<Attachment> = valid
            .iter()
            .map(|(c, i)| Attachment::new(c, NETNS, i))
            .collect();
        let valid: Vec<&Attachment> = valid.iter().collect();
        self.runtime()
            .gc(&self.list(json!({})), &valid)
            .unwrap_or_else(|e| panic!("GC: {e}"));
    }

    /// GC as no runtime sends it: the stanza with `extra` keys (no list, the older key only).
    pub fn raw_gc(&self, extra: Value) -> Outcome {
        Invocation::new(Path::new(BIN), "GC", &self.node)
            .var("CNI_PATH", CNI_PATH)
            .stdin(self.conf(extra))
            .run()
    }

    pub fn status(&self) -> Result<(), RuntimeError> {
        self.runtime().status(&self.list(json!({})))
    }

    /// A process with hostile input (stdin, ids) the runtime would never send.
    pub fn run(&self, command: &str, cid: &str, ifname: &str, stdin: String) -> Outcome {
        Invocation::new(Path::new(BIN), command, &self.node)
            .attachment(cid, NETNS, ifname, Path::new(CNI_PATH))
            .stdin(stdin)
            .run()
    }

    /// The store's full consistency report (asserts it is clean).
    pub fn verify(&self) -> VerifyReport {
        let mut store = Store::open_existing(&self.data_dir(), Duration::from_secs(5))
            .expect("store opens")
            .expect("store exists");
        let report = store.verify().expect("verify runs");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        report
    }
}

/// The addresses of an ADD result, in order.
pub fn addresses(result: &Value) -> Vec<String> {
    result["ips"]
        .as_array()
        .map(|ips| {
            ips.iter()
                .map(|ip| ip["address"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that no two results share an address and no two prefixes overlap.
pub fn assert_disjoint(results: &[Value]) {
    let nets: Vec<ipnetwork::IpNetwork> = results
        .iter()
        .flat_map(addresses)
        .map(|a| a.parse().expect("an address"))
        .collect();
    let unique: HashSet<String> = nets
        .iter()
        .map(|n| n.network().to_string() + &n.prefix().to_string())
        .collect();
    assert_eq!(unique.len(), nets.len(), "duplicate prefix among {nets:?}");
    for (i, a) in nets.iter().enumerate() {
        for b in &nets[i + 1..] {
            let a_net = ipnetwork::IpNetwork::new(a.network(), a.prefix()).expect("a prefix");
            let b_net = ipnetwork::IpNetwork::new(b.network(), b.prefix()).expect("a prefix");
            assert!(
                !(a_net.contains(b.ip()) || b_net.contains(a.ip())),
                "{a} and {b} overlap"
            );
        }
    }
}
