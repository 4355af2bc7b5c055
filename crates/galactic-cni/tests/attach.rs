//! The veth master as a runtime drives it, on real kernel objects: the plugin's host is a
//! throwaway network namespace, each pod another one.

use galactic_core::testing::privileged::{privileged, TestNetns};
use galactic_core::testing::{workspace_binary, Invocation, Outcome, TestNode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

struct Node {
    host: TestNetns,
    node: TestNode,
    bin_dir: PathBuf,
}

impl Node {
    fn new(tag: &str) -> Self {
        let host = TestNetns::new(tag);
        let node = TestNode::new(json!({"routing_domain": "auto"}));
        let bin_dir = node.dir.path().join("bin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        for name in ["galactic-ipam"] {
            std::os::unix::fs::symlink(workspace_binary(name), bin_dir.join(name)).unwrap();
        }
        Self {
            host,
            node,
            bin_dir,
        }
    }

    fn call(&self, command: &str, pod: &Pod, conf: &Value) -> Outcome {
        Invocation::new(
            Path::new(env!("CARGO_BIN_EXE_galactic-cni")),
            command,
            &self.node,
        )
        .attachment(
            &pod.id,
            &pod.ns.path().display().to_string(),
            &pod.ifname,
            &self.bin_dir,
        )
        .in_netns(self.host.name())
        .stdin(conf.to_string())
        .run()
    }

    fn add(&self, pod: &Pod, conf: &Value) -> Value {
        let out = self.call("ADD", pod, conf);
        assert!(out.success, "ADD failed: {out:?}");
        out.json()
    }

    fn with_prev(conf: &Value, result: &Value) -> Value {
        let mut conf = conf.clone();
        conf["prevResult"] = result.clone();
        conf
    }
}

struct Pod {
    ns: TestNetns,
    id: String,
    ifname: String,
}

impl Pod {
    fn new(tag: &str) -> Self {
        Self {
            ns: TestNetns::new(tag),
            id: format!("cid-{tag}"),
            ifname: "eth0".into(),
        }
    }

    fn ping(&self, target: &str) -> bool {
        let family = if target.contains(':') { "-6" } else { "-4" };
        self.ns
            .exec(&["ping", family, "-c", "1", "-W", "1", target])
            .status
            .success()
    }
}

fn conf(vpc: &str, att: &str, ipam: Value) -> Value {
    let mut conf = json!({"cniVersion": "1.1.0", "name": "tenant-a", "type": "galactic-cni", "vpc": vpc, "vpcattachment": att, "mtu": 1400});
    if !ipam.is_null() {
        conf["ipam"] = ipam;
    }
    conf
}

fn pool_ipam(data_dir: &Path) -> Value {
    json!({"type": "galactic-ipam", "ipv6_subnet": "fd66:1::/64", "ipv4_subnet": "10.66.0.0/24", "data_dir": data_dir})
}

#[test]
fn dual_stack_add_check_del_del() {
    if !privileged("dual_stack_add_check_del_del") {
        return;
    }
    let node = Node::new("vhost1");
    let pod = Pod::new("vpod1");
    let conf = conf("1", "1", pool_ipam(&node.node.dir.path().join("ipam")));
    let result = node.add(&pod, &conf);

    assert_eq!(result["cniVersion"], "1.1.0");
    let ifaces = result["interfaces"].as_array().unwrap();
    assert_eq!(ifaces.len(), 2, "{result}");
    assert_eq!(ifaces[0]["name"], "G000000001001H");
    assert!(ifaces[0].get("sandbox").is_none());
    assert_eq!(ifaces[0]["mtu"], 1400);
    assert_eq!(ifaces[1]["name"], "eth0");
    assert_eq!(ifaces[1]["sandbox"], pod.ns.path().display().to_string());
    let ips = result["ips"].as_array().unwrap();
    assert_eq!(ips.len(), 2, "{result}");
    assert!(
        ips[0]["address"].as_str().unwrap().contains(':'),
        "IPv6 first: {result}"
    );
    assert!(ips
        .iter()
        .all(|ip| ip["interface"] == 1 && ip["gateway"].is_string()));
    assert_eq!(
        result["routes"],
        json!([{"dst": "::/0"}, {"dst": "0.0.0.0/0"}])
    );

    // Guest side: the addresses and a default route per family inside the pod.
    let guest = pod.ns.ip_json(&["addr", "show", "dev", "eth0"]);
    let guest_addrs: Vec<String> = guest[0]["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
        .collect();
    for ip in ips {
        assert!(
            guest_addrs.contains(&ip["address"].as_str().unwrap().to_owned()),
            "{guest_addrs:?}"
        );
    }
    for family in ["-4", "-6"] {
        let routes = pod.ns.ip_json(&[family, "route", "show", "default"]);
        assert_eq!(
            routes.as_array().unwrap().len(),
            1,
            "{family} default route: {routes}"
        );
    }
    // Host side: gateway addresses, pod routes in the VPC table, permanent neighbours.
    let host_addrs = node.host.ip(&["addr", "show", "dev", "G000000001001H"]);
    for ip in ips {
        assert!(
            host_addrs.contains(ip["gateway"].as_str().unwrap()),
            "{host_addrs}"
        );
    }
    let neigh = node
        .host
        .ip(&["neigh", "show", "dev", "G000000001001H", "nud", "permanent"]);
    assert_eq!(neigh.lines().count(), 2, "{neigh}");

    let check_conf = Node::with_prev(&conf, &result);
    node.call("CHECK", &pod, &check_conf).expect_quiet_success();
    node.call("DEL", &pod, &check_conf).expect_quiet_success();
    assert!(
        node.host.try_ip(&["link", "show", "G000000001001H"]).0 == false,
        "host end removed"
    );
    assert!(
        !pod.ns.try_ip(&["link", "show", "eth0"]).0,
        "guest end removed"
    );
    let rules = node.host.ip(&["rule", "show"]);
    assert!(
        !rules.contains("G000000001001H"),
        "attachment rules removed: {rules}"
    );
    let check = node.call("CHECK", &pod, &check_conf);
    assert!(!check.success, "CHECK after DEL fails");
    node.call("DEL", &pod, &check_conf).expect_quiet_success();
}

#[test]
fn two_pods_of_one_vpc_talk_and_another_vpc_is_isolated() {
    if !privileged("two_pods_of_one_vpc_talk_and_another_vpc_is_isolated") {
        return;
    }
    let node = Node::new("vhost2");
    let data = node.node.dir.path().join("ipam");
    let (a1, a2, b1) = (Pod::new("va1"), Pod::new("va2"), Pod::new("vb1"));
    let conf_a = |att: &str| conf("A", att, pool_ipam(&data));
    let conf_b = conf(
        "B",
        "1",
        json!({"type": "galactic-ipam", "ipv6_subnet": "fd67:1::/64", "ipv4_subnet": "10.67.0.0/24", "data_dir": data}),
    );
    let r1 = node.add(&a1, &conf_a("1"));
    let r2 = node.add(&a2, &conf_a("2"));
    let rb = node.add(&b1, &conf_b);
    let ip = |r: &Value, i: usize| {
        r["ips"][i]["address"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned()
    };
    for i in 0..2 {
        assert!(a1.ping(&ip(&r2, i)), "a1 → a2 {}", ip(&r2, i));
        assert!(a2.ping(&ip(&r1, i)), "a2 → a1 {}", ip(&r1, i));
        assert!(!b1.ping(&ip(&r1, i)), "b1 must not reach a1 {}", ip(&r1, i));
        assert!(!a1.ping(&ip(&rb, i)), "a1 must not reach b1 {}", ip(&rb, i));
        let gw_a = r1["ips"][i]["gateway"].as_str().unwrap();
        assert!(a1.ping(gw_a), "a1 reaches its gateway {gw_a}");
        assert!(!b1.ping(gw_a), "b1 must not reach VPC A's gateway {gw_a}");
    }
    for (pod, r, c) in [
        (&a1, &r1, conf_a("1")),
        (&a2, &r2, conf_a("2")),
        (&b1, &rb, conf_b.clone()),
    ] {
        node.call("DEL", pod, &Node::with_prev(&c, r))
            .expect_quiet_success();
    }
}
