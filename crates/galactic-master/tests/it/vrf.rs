//! The veth master with `routing_domain=vrf`, on real kernel objects: what the VRF backend
//! installs, isolates, checks and removes. These need a kernel with `CONFIG_NET_VRF`; the
//! development kernel has none, so they run in the production-kernel tier
//! (`cargo xtask test-kernel`, Debian 12's 6.1), which fails when any of them reports itself
//! skipped. Elsewhere they say SKIPPED with the kernel's answer.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{ip_of, Pod};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};

use crate::common::{
    domain, hname, host_traces, ipam_holds, link, pools, record_count, runtime, table_routes, vrf,
    vrf_host,
};

/// A network config file with the master alone.
fn conf(vpc: &str, att: &str, ipam: Value) -> Conflist {
    let name = format!("tenant-{}", vpc.to_ascii_lowercase());
    let conf = json!({"cniVersion": "1.1.0", "name": name, "type": "galactic-cni",
           "vpc": vpc, "vpcattachment": att, "mtu": 1400, "ipam": ipam});
    Conflist::from_conf(&conf).unwrap()
}

#[test]
fn each_vpc_gets_a_vrf_bound_to_its_own_table_and_only_its_pods_reach_each_other() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vvpc", &["galactic-ipam"]) else {
        return;
    };
    // Stand-ins for the host's own addresses (main and local tables, default VRF).
    host.netns.ip(&["addr", "add", "10.99.0.1/32", "dev", "lo"]);
    host.netns.ip(&["addr", "add", "fd99::1/128", "dev", "lo"]);
    let rt = runtime(&host);
    let (a1, a2, b1) = (Pod::new("vva1"), Pod::new("vva2"), Pod::new("vvb1"));
    let ca = |att: &str| conf("A", att, pools("fd66:1::/64", "10.66.0.0/24"));
    let cb = conf("B", "1", pools("fd67:1::/64", "10.67.0.0/24"));
    let r1 = rt.add(&ca("1"), &a1.attachment()).unwrap();
    let r2 = rt.add(&ca("2"), &a2.attachment()).unwrap();
    let rb = rt.add(&cb, &b1.attachment()).unwrap();

    let mut tables = Vec::new();
    for vpc in ["A", "B"] {
        let record = domain(&host, vpc).expect("a domain record");
        assert_eq!(record["backend"], "vrf", "{record}");
        let dev = link(&host, &vrf(vpc)).expect("the VPC's VRF device");
        assert_eq!(dev["linkinfo"]["info_kind"], "vrf", "{dev}");
        assert_eq!(
            dev["linkinfo"]["info_data"]["table"], record["table"],
            "VRF bound to the recorded table: {dev}"
        );
        assert!(
            dev["flags"].as_array().unwrap().iter().any(|f| f == "UP"),
            "{dev}"
        );
        tables.push(record["table"].as_u64().unwrap());
    }
    assert_ne!(tables[0], tables[1], "one table per VPC");
    for (vpc, att) in [("A", "1"), ("A", "2"), ("B", "1")] {
        let end = link(&host, &hname(vpc, att)).unwrap();
        assert_eq!(end["master"], vrf(vpc), "host end enslaved: {end}");
    }
    let table_a = tables[0].to_string();
    for i in 0..2 {
        let gw = r1["ips"][i]["gateway"].as_str().unwrap();
        let lookup = host
            .netns
            .ip(&["route", "get", &ip_of(&r1, i), "vrf", &vrf("A")]);
        assert!(
            lookup.contains(&format!("dev {} table {table_a}", hname("A", "1"))),
            "the pod's address is routed to its host end in VPC A's table: {lookup}"
        );
        assert!(
            host.netns
                .ip(&["route", "show", "table", &table_a, "type", "local"])
                .contains(gw)
                || host
                    .netns
                    .ip(&["-6", "route", "show", "table", &table_a, "type", "local"])
                    .contains(gw),
            "gateway {gw} is local in the VRF's table"
        );
    }
    for family in ["-4", "-6"] {
        let rules = host.netns.ip(&[family, "rule", "show"]);
        assert!(
            !rules.lines().any(|l| l.starts_with("0:")),
            "the local rule left priority 0: {rules}"
        );
        let unreachable = host.netns.ip(&[
            family,
            "route",
            "show",
            "table",
            &table_a,
            "type",
            "unreachable",
        ]);
        assert!(
            unreachable.contains("default"),
            "{family} table {table_a} ends in unreachable default: {unreachable}"
        );
    }

    for i in 0..2 {
        assert!(a1.ping(&ip_of(&r2, i)), "a1 → a2 {}", ip_of(&r2, i));
        assert!(a2.ping(&ip_of(&r1, i)), "a2 → a1 {}", ip_of(&r1, i));
        let gw_a = r1["ips"][i]["gateway"].as_str().unwrap();
        assert!(a1.ping(gw_a), "a1 reaches its gateway {gw_a}");
        assert!(!b1.ping(&ip_of(&r1, i)), "b1 must not reach a1");
        assert!(!a1.ping(&ip_of(&rb, i)), "a1 must not reach b1");
        assert!(!b1.ping(gw_a), "b1 must not reach VPC A's gateway {gw_a}");
    }
    for target in ["10.99.0.1", "fd99::1"] {
        assert!(!a1.ping(target), "a pod must not reach the host's {target}");
    }
    for (pod, c) in [(&a1, ca("1")), (&a2, ca("2")), (&b1, cb.clone())] {
        rt.check(&c, &pod.attachment()).unwrap();
        rt.del(&c, &pod.attachment()).unwrap();
    }
    // Each VPC's last DEL removed its domain; GC then has nothing left to remove.
    rt.gc(&ca("9"), &[]).unwrap();
    for (vpc, table) in [("A", tables[0]), ("B", tables[1])] {
        assert!(
            link(&host, &vrf(vpc)).is_none(),
            "the VPC's last DEL removed VRF {}",
            vrf(vpc)
        );
        assert!(domain(&host, vpc).is_none(), "and the domain record");
        let left = table_routes(&host, &table.to_string());
        assert!(left.is_empty(), "table {table} is empty: {left:?}");
    }
}

#[test]
fn overlapping_address_spaces_are_separate_vrfs() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vovl", &["galactic-ipam"]) else {
        return;
    };
    // The same pools (hence the same gateways) in two VPCs: table mode refuses the second; each
    // VRF has its own table and local addresses.
    let rt = runtime(&host);
    let (a, c) = (Pod::new("vvoa"), Pod::new("vvoc"));
    let ca = conf("A", "1", pools("fd6d:1::/64", "10.109.0.0/24"));
    let cc = conf("C", "1", pools("fd6d:1::/64", "10.109.0.0/24"));
    let ra = rt.add(&ca, &a.attachment()).unwrap();
    let rc = rt.add(&cc, &c.attachment()).unwrap();
    for i in 0..2 {
        assert_eq!(
            ra["ips"][i]["gateway"], rc["ips"][i]["gateway"],
            "the same gateway in both VPCs"
        );
    }
    for i in 0..2 {
        let gw = ra["ips"][i]["gateway"].as_str().unwrap();
        assert!(a.ping(gw), "a reaches its gateway {gw}");
        assert!(c.ping(gw), "c reaches its own gateway {gw}");
    }
    for (pod, conf) in [(&a, &ca), (&c, &cc)] {
        rt.check(conf, &pod.attachment()).unwrap();
    }
    rt.del(&ca, &a.attachment()).unwrap();
    assert!(
        c.ping(rc["ips"][0]["gateway"].as_str().unwrap()),
        "C is unaffected"
    );
    rt.del(&cc, &c.attachment()).unwrap();
}

#[test]
fn a_retried_add_converges_and_check_del_del_again_and_del_without_netns_work() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vrtr", &["galactic-ipam"]) else {
        return;
    };
    let c = conf("R", "1", pools("fd69:1::/64", "10.69.0.0/24"));
    let rt = runtime(&host);
    let pod = Pod::new("vrtr");
    let att = pod.attachment();
    let first = rt.add(&c, &att).unwrap();
    let second = rt.add(&c, &att).unwrap();
    assert_eq!(first, second, "a retried ADD returns the same result");
    let vrfs = host.netns.ip(&["-o", "link", "show", "type", "vrf"]);
    assert_eq!(vrfs.lines().count(), 1, "one VRF: {vrfs}");
    let end = link(&host, &hname("R", "1")).unwrap();
    assert_eq!(end["master"], vrf("R"));
    let addrs = pod
        .ns
        .ip_json(&["-6", "addr", "show", "dev", "eth0", "scope", "global"]);
    let global = addrs[0]["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a.get("local").is_some())
        .count();
    assert_eq!(global, 1, "one global IPv6 address, not two: {addrs}");
    assert!(
        host_traces(&host, &hname("R", "1")) == vec![format!("link {}", hname("R", "1"))],
        "no rule or firewall entry names the host end in VRF mode"
    );
    rt.check(&c, &att).unwrap();

    // CHECK names what was broken: the enslavement and the table's closing route.
    host.netns
        .ip(&["link", "set", &hname("R", "1"), "nomaster"]);
    let msg = rt.check(&c, &att).unwrap_err().expect_error(100);
    assert!(msg.contains("not enslaved"), "{msg}");
    host.netns
        .ip(&["link", "set", &hname("R", "1"), "master", &vrf("R")]);
    let table = domain(&host, "R").unwrap()["table"].to_string();
    host.netns.ip(&[
        "-6",
        "route",
        "del",
        "unreachable",
        "default",
        "table",
        &table,
    ]);
    let msg = rt.check(&c, &att).unwrap_err().expect_error(100);
    assert!(msg.contains("unreachable default"), "{msg}");

    rt.del(&c, &att).unwrap();
    assert_eq!(host_traces(&host, &hname("R", "1")), Vec::<String>::new());
    assert_eq!(record_count(&host), 0);
    assert!(!ipam_holds(&host, &att, &c, &first), "address released");
    rt.del(&c, &att).unwrap();

    // DEL when the pod's namespace is already gone, and with no netns at all.
    let pod = Pod::new("vrtrgone");
    let att = pod.attachment();
    let result = rt.add(&c, &att).unwrap();
    drop(pod);
    rt.del(&c, &att).unwrap();
    assert_eq!(host_traces(&host, &hname("R", "1")), Vec::<String>::new());
    // IPAM's CHECK needs a live namespace: the same attachment in another one.
    let ghost = TestNetns::new("vrtrghost");
    let ghost_att = att.in_netns(&ghost.path().display().to_string());
    assert!(!ipam_holds(&host, &ghost_att, &c, &result));
    let pod = Pod::new("vrtrnone");
    rt.add(&c, &pod.attachment()).unwrap();
    rt.del(&c, &pod.attachment().in_netns("")).unwrap();
    assert_eq!(host_traces(&host, &hname("R", "1")), Vec::<String>::new());
}

#[test]
fn a_failure_at_any_step_leaves_nothing_behind() {
    let Some(host) = vrf_host(
        "a_failure_at_any_step_leaves_nothing_behind",
        "vvfl",
        &["galactic-ipam"],
    ) else {
        return;
    };
    let failpoints = [
        "after-record",
        "after-domain-record",
        "after-vrf-device",
        "after-domain",
        "after-interface",
        "after-firewall",
        "after-attach",
        "after-ipam",
        "after-guest",
        "after-gateways",
        "after-host-gateway",
    ];
    let rt = runtime(&host);
    let c = conf("F", "1", pools("fd6a:1::/64", "10.106.0.0/24"));
    // Node-wide rules that outlive any VPC: the moved `local` rule and the kernel's own l3mdev
    // rule (added with the first VRF, never removed).
    let vpc_rules = || -> Vec<String> {
        ["-4", "-6"]
            .iter()
            .flat_map(|f| {
                host.netns
                    .ip(&[f, "rule", "show"])
                    .lines()
                    .filter(|l| !l.contains("lookup local") && !l.contains("l3mdev-table"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let baseline = vpc_rules();
    for failpoint in failpoints {
        let pod = Pod::new("vvfl");
        let err = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", failpoint)
            .add(&c, &pod.attachment())
            .unwrap_err();
        assert!(err.expect_error(999).contains(failpoint));
        assert_eq!(
            host_traces(&host, &hname("F", "1")),
            Vec::<String>::new(),
            "after {failpoint}"
        );
        assert!(link(&host, &vrf("F")).is_none(), "no VRF after {failpoint}");
        assert!(domain(&host, "F").is_none(), "no domain after {failpoint}");
        let all = host.netns.ip(&["-6", "route", "show", "table", "all"])
            + &host.netns.ip(&["-4", "route", "show", "table", "all"]);
        assert!(
            !all.contains("table 1000"),
            "no VPC table after {failpoint}: {all}"
        );
        assert!(
            !pod.ns.try_ip(&["link", "show", "eth0"]).0,
            "guest end gone"
        );
        assert_eq!(record_count(&host), 0, "record gone after {failpoint}");
        assert!(
            !ipam_holds(
                &host,
                &pod.attachment(),
                &c,
                &json!({"cniVersion": "1.1.0", "ips": [{"address": "fd6a:1::1:0:1/96"}]})
            ),
            "no allocation left after {failpoint}"
        );
        assert_eq!(vpc_rules(), baseline, "no rule left after {failpoint}");
    }
    let pod = Pod::new("vvflok");
    rt.add(&c, &pod.attachment()).unwrap();
    assert_eq!(link(&host, &hname("F", "1")).unwrap()["master"], vrf("F"));
    rt.del(&c, &pod.attachment()).unwrap();
}

#[test]
fn host_services_are_not_reachable_at_the_gateway() {
    let Some(host) = vrf_host(
        "host_services_are_not_reachable_at_the_gateway",
        "vvsv",
        &["galactic-ipam"],
    ) else {
        return;
    };
    let rt = runtime(&host);
    let pod = Pod::new("vvsv");
    let c = conf("H", "1", pools("fd70:1::/64", "10.112.0.0/24"));
    let result = rt.add(&c, &pod.attachment()).unwrap();
    // A host service bound to the wildcard address of the default VRF.
    let mut listener = std::process::Command::new("ip")
        .args(["netns", "exec", host.netns.name(), "python3", "-c",
               "import socket,time\ns=socket.socket(socket.AF_INET6)\ns.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\ns.bind(('::', 18080))\ns.listen()\ntime.sleep(60)"])
        .spawn()
        .unwrap();
    let connect = |ns: &str, addr: &str| {
        let script = format!("import socket\ntry:\n socket.create_connection(('{addr}', 18080), timeout=3)\n print('connected')\nexcept OSError as e:\n print(type(e).__name__)");
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", ns, "python3", "-c", &script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let ready = (0..100).any(|_| {
        let up = connect(host.netns.name(), "127.0.0.1") == "connected";
        if !up {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        up
    });
    assert!(ready, "the host listener is up");
    for i in 0..2 {
        let gw = result["ips"][i]["gateway"].as_str().unwrap();
        assert_ne!(
            connect(pod.ns.name(), gw),
            "connected",
            "host service via {gw}"
        );
        assert!(pod.ping(gw), "pings to the gateway still work");
    }
    let _ = listener.kill();
    let _ = listener.wait();
    rt.del(&c, &pod.attachment()).unwrap();
}
