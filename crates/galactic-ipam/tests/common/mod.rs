//! Running the built binary like a runtime, against a throwaway node.
#![allow(dead_code)]

use galactic_ipam::store::{Store, VerifyReport};
use galactic_testkit::{Invocation, Outcome, TestNode};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_galactic-ipam");

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
        Self::on(node, "net1", ipam)
    }

    /// Another network on the same node.
    pub fn on(node: TestNode, name: &str, ipam: Value) -> Self {
        let mut block = json!({
            "type": "galactic-ipam",
            "legacy_dir": node.dir.path().join("legacy"),
        });
        if let (Some(map), Value::Object(extra)) = (block.as_object_mut(), ipam) {
            map.extend(extra);
        }
        Self {
            node,
            name: name.to_owned(),
            ipam: block,
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.node.dir.path().join("state/ipam")
    }

    pub fn legacy_dir(&self) -> PathBuf {
        self.node.dir.path().join("legacy")
    }

    /// The network config (1.1.0) with `extra` top-level keys.
    pub fn conf(&self, extra: Value) -> String {
        let mut conf = json!({
            "cniVersion": "1.1.0",
            "name": self.name,
            "type": "galactic-cni",
            "ipam": self.ipam,
        });
        if let (Some(map), Value::Object(extra)) = (conf.as_object_mut(), extra) {
            map.extend(extra);
        }
        conf.to_string()
    }

    pub fn invocation(&self, command: &str, cid: &str, ifname: &str) -> Invocation<'_> {
        Invocation::new(Path::new(BIN), command, &self.node).attachment(
            cid,
            "/var/run/netns/test",
            ifname,
            Path::new("/opt/cni/bin"),
        )
    }

    pub fn run(&self, command: &str, cid: &str, ifname: &str, stdin: String) -> Outcome {
        self.invocation(command, cid, ifname).stdin(stdin).run()
    }

    pub fn add(&self, cid: &str) -> Value {
        self.add_if(cid, "eth0")
    }

    pub fn add_if(&self, cid: &str, ifname: &str) -> Value {
        let out = self.run("ADD", cid, ifname, self.conf(json!({})));
        assert!(out.success, "ADD {cid}/{ifname}: {out:?}");
        out.json()
    }

    pub fn del(&self, cid: &str) {
        self.run("DEL", cid, "eth0", self.conf(json!({})))
            .expect_quiet_success();
    }

    pub fn check(&self, cid: &str, prev: Option<&Value>) -> Outcome {
        let extra = prev.map_or(json!({}), |p| json!({"prevResult": p}));
        self.run("CHECK", cid, "eth0", self.conf(extra))
    }

    pub fn gc(&self, valid: Option<Vec<(&str, &str)>>) -> Outcome {
        let extra = match valid {
            None => json!({}),
            Some(list) => json!({"cni.dev/valid-attachments": list.iter()
                .map(|(c, i)| json!({"containerID": c, "ifname": i})).collect::<Vec<_>>()}),
        };
        Invocation::new(Path::new(BIN), "GC", &self.node)
            .var("CNI_PATH", "/opt/cni/bin")
            .stdin(self.conf(extra))
            .run()
    }

    pub fn status(&self) -> Outcome {
        Invocation::new(Path::new(BIN), "STATUS", &self.node)
            .stdin(self.conf(json!({})))
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
