//! A throwaway node for process-level tests: the plugins' "host" is a fresh network namespace,
//! each pod another one, and the plugins are the built binaries, found by their type in a
//! `CNI_PATH` directory exactly as a runtime finds them. Namespaces (and everything in them) are
//! deleted on drop, also when a test fails.

#![allow(dead_code)]
// each test file uses a different part of the fixture
// A fixture panics to report a failed precondition; that is its error handling.
#![allow(clippy::unwrap_used)]

use galactic_core::ident::VpcId;
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::{workspace_binary, Invocation, Outcome, TestNode};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The plugins' host namespace, node config and `CNI_PATH` directory.
pub struct Node {
    /// The "host" namespace the plugins run in.
    pub host: TestNetns,
    /// Node config, log and state directory.
    pub node: TestNode,
    /// `CNI_PATH`: the master, IPAM and this plugin, by type name.
    pub bin_dir: PathBuf,
}

impl Node {
    /// A fresh node (routing domain backend probed: `table` on kernels without VRF).
    pub fn new(tag: &str) -> Self {
        let host = TestNetns::node_host(tag);
        let node = TestNode::new(json!({"routing_domain": "auto"}));
        let bin_dir = node.dir.path().join("bin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        for name in ["galactic-cni", "galactic-ipam"] {
            std::os::unix::fs::symlink(workspace_binary(name), bin_dir.join(name)).unwrap();
        }
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_galactic-route"),
            bin_dir.join("galactic-route"),
        )
        .unwrap();
        Self {
            host,
            node,
            bin_dir,
        }
    }

    /// Where the plugin of type `plugin_type` is, as a runtime resolves it.
    pub fn plugin(&self, plugin_type: &str) -> PathBuf {
        self.bin_dir.join(plugin_type)
    }

    /// Runs one per-attachment command of the plugin named by `conf["type"]` in the host
    /// namespace, with `extra` variables (e.g. armed failpoints) on top of the runtime's.
    pub fn call_with(
        &self,
        command: &str,
        pod: &Pod,
        conf: &Value,
        extra: &[(&str, &str)],
    ) -> Outcome {
        let binary = self.plugin(conf["type"].as_str().expect("conf has a type"));
        let mut invocation = Invocation::new(&binary, command, &self.node)
            .attachment(
                &pod.id,
                &pod.ns.path().display().to_string(),
                &pod.ifname,
                &self.bin_dir,
            )
            .in_netns(self.host.name())
            .stdin(conf.to_string());
        for (key, value) in extra {
            invocation = invocation.var(key, value);
        }
        invocation.run()
    }

    /// Runs one per-attachment command.
    pub fn call(&self, command: &str, pod: &Pod, conf: &Value) -> Outcome {
        self.call_with(command, pod, conf, &[])
    }

    /// ADD that must succeed; returns the result.
    pub fn add(&self, pod: &Pod, conf: &Value) -> Value {
        let out = self.call("ADD", pod, conf);
        assert!(out.success, "ADD {} failed: {out:?}", conf["type"]);
        out.json()
    }

    /// GC of the plugin named by `conf["type"]` (no attachment variables).
    pub fn gc(&self, conf: &Value) -> Outcome {
        let binary = self.plugin(conf["type"].as_str().expect("conf has a type"));
        Invocation::new(&binary, "GC", &self.node)
            .var("CNI_PATH", &self.bin_dir.display().to_string())
            .in_netns(self.host.name())
            .stdin(conf.to_string())
            .run()
    }

    /// The VPC's routing table, from the domain record the master wrote.
    pub fn table(&self, vpc: &str) -> u32 {
        u32::try_from(self.domain(vpc)["table"].as_u64().unwrap()).unwrap()
    }

    /// The VPC's routing domain backend (`table` or `vrf`).
    pub fn backend(&self, vpc: &str) -> String {
        self.domain(vpc)["backend"].as_str().unwrap().to_owned()
    }

    fn domain(&self, vpc: &str) -> Value {
        let record = self.domain_record(vpc);
        let text = std::fs::read_to_string(&record)
            .unwrap_or_else(|e| panic!("read {}: {e}", record.display()));
        serde_json::from_str(&text).unwrap()
    }

    /// Path of the VPC's routing-domain record.
    pub fn domain_record(&self, vpc: &str) -> PathBuf {
        let hex = VpcId::parse(vpc).unwrap().hex();
        self.state_dir()
            .join("routing")
            .join(format!("vpc-{hex}.json"))
    }

    /// Path of this plugin's ownership record for the VPC.
    pub fn route_record(&self, vpc: &str) -> PathBuf {
        let hex = VpcId::parse(vpc).unwrap().hex();
        self.state_dir()
            .join("routes")
            .join(format!("vpc-{hex}.json"))
    }

    /// The node's state directory.
    pub fn state_dir(&self) -> PathBuf {
        self.node.dir.path().join("state")
    }

    /// `ip -j -4|-6 route show table T` in the host namespace, as a sorted list of one-line
    /// descriptions (`dst [via gw] dev D [onlink] [scope]`), so whole tables can be compared.
    pub fn table_routes(&self, table: u32) -> Vec<String> {
        let mut out = Vec::new();
        for family in ["-4", "-6"] {
            let routes = self
                .host
                .ip_json(&[family, "route", "show", "table", &table.to_string()]);
            // Not the kernel's routes for the host end's link-local address: in a VRF table they
            // appear whenever its DAD completes, even between two snapshots.
            let link_local = |r: &Value| {
                r["protocol"] == "kernel"
                    && r["dst"].as_str().is_some_and(|d| d.starts_with("fe80:"))
            };
            for r in routes.as_array().unwrap().iter().filter(|r| !link_local(r)) {
                out.push(describe(r));
            }
        }
        out.sort();
        out
    }

    /// The kernel's answer to "where does a packet to `dst` arriving on `iif` from `from` go".
    pub fn route_get(&self, dst: &str, from: &str, iif: &str) -> (bool, String) {
        self.host
            .try_ip(&["route", "get", dst, "from", from, "iif", iif])
    }
}

/// One route of `ip -j route show`, as text.
pub fn describe(r: &Value) -> String {
    let mut text = r["dst"].as_str().unwrap_or("?").to_owned();
    if let Some(kind) = r["type"].as_str().filter(|t| *t != "unicast") {
        text = format!("{kind} {text}");
    }
    if let Some(gw) = r["gateway"].as_str() {
        text += &format!(" via {gw}");
    }
    if let Some(dev) = r["dev"].as_str() {
        text += &format!(" dev {dev}");
    }
    let flags: Vec<&str> = r["flags"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if flags.contains(&"onlink") {
        text += " onlink";
    }
    if let Some(scope) = r["scope"].as_str() {
        text += &format!(" scope {scope}");
    }
    text
}

/// A pod: its own network namespace.
pub struct Pod {
    /// The namespace.
    pub ns: TestNetns,
    /// `CNI_CONTAINERID`.
    pub id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
}

impl Pod {
    /// A fresh pod.
    pub fn new(tag: &str) -> Self {
        Self {
            ns: TestNetns::new(tag),
            id: format!("cid-{tag}"),
            ifname: "eth0".into(),
        }
    }

    /// Whether `target` answers an echo request from this pod (up to three tries).
    pub fn ping(&self, target: &str) -> bool {
        let family = if target.contains(':') { "-6" } else { "-4" };
        self.ns
            .exec(&[
                "ping", family, "-c", "3", "-i", "0.2", "-W", "2", "-n", "-q", target,
            ])
            .status
            .success()
    }
}

impl Pod {
    /// Whether one echo request to `target` goes unanswered (the negative twin of [`Pod::ping`];
    /// an unroutable target is answered at once with an ICMP error, so one probe suffices).
    pub fn unanswered(&self, target: &str) -> bool {
        let family = if target.contains(':') { "-6" } else { "-4" };
        !self
            .ns
            .exec(&["ping", family, "-c", "1", "-W", "1", "-n", "-q", target])
            .status
            .success()
    }
}

/// The veth master's stanza.
pub fn master_conf(version: &str, network: &str, vpc: &str, att: &str, ipam: Value) -> Value {
    let mut conf = json!({"cniVersion": version, "name": network, "type": "galactic-cni",
                          "vpc": vpc, "vpcattachment": att, "mtu": 1400});
    if !ipam.is_null() {
        conf["ipam"] = ipam;
    }
    conf
}

/// A dual-stack pool `ipam` block with its store under the node's directory.
pub fn pool_ipam(node: &Node, v6: &str, v4: &str) -> Value {
    json!({"type": "galactic-ipam", "ipv6_subnet": v6, "ipv4_subnet": v4,
           "data_dir": node.node.dir.path().join("ipam")})
}

/// This plugin's stanza.
pub fn route_conf(version: &str, network: &str, vpc: &str, att: &str, terms: Value) -> Value {
    json!({"cniVersion": version, "name": network, "type": "galactic-route",
           "vpc": vpc, "vpcattachment": att, "terminations": terms})
}

/// `conf` with `prevResult`.
pub fn with_prev(conf: &Value, prev: &Value) -> Value {
    let mut conf = conf.clone();
    conf["prevResult"] = prev.clone();
    conf
}

/// The `index`-th address of a result, without its prefix length.
pub fn result_ip(result: &Value, family_v6: bool) -> String {
    result["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ip| ip["address"].as_str().unwrap())
        .find(|a| a.contains(':') == family_v6)
        .unwrap_or_else(|| panic!("no address of that family in {result}"))
        .split('/')
        .next()
        .unwrap()
        .to_owned()
}
