//! ADD, CHECK and DEL of every addressing mode; reachability, isolation and retries.

use crate::*;
use galactic_testkit::host::{ip_of, Pod};
use serde_json::{json, Value};

#[test]
fn dual_stack_add_check_del_del_for_both_spec_versions() {
    galactic_testkit::privileged!();
    for version in ["1.0.0", "1.1.0"] {
        let host = host("vds");
        let rt = runtime(&host);
        let pod = Pod::new("vds");
        let att = pod.attachment();
        let list = conf(version, "1", "1", pools("fd66:1::/64", "10.66.0.0/24"));
        let result = rt.add(&list, &att).unwrap();

        assert_eq!(result["cniVersion"], version);
        let ifaces = result["interfaces"].as_array().unwrap();
        assert_eq!(ifaces.len(), 2, "{result}");
        assert_eq!(ifaces[0]["name"], "G000000001001H");
        assert!(
            ifaces[0].get("sandbox").is_none(),
            "host end has no sandbox"
        );
        assert_eq!(ifaces[0]["mtu"], 1400);
        assert_eq!(ifaces[1]["name"], "eth0");
        assert_eq!(ifaces[1]["mtu"], 1400);
        assert_eq!(ifaces[1]["sandbox"], pod.netns_path());
        assert!(ifaces
            .iter()
            .all(|i| i["mac"].as_str().is_some_and(|m| m.len() == 17)));
        let ips = result["ips"].as_array().unwrap();
        assert_eq!(ips.len(), 2, "{result}");
        assert!(
            ips[0]["address"].as_str().unwrap().starts_with("fd66:1::"),
            "IPv6 first: {result}"
        );
        assert!(
            ips[1]["address"].as_str().unwrap().starts_with("10.66.0."),
            "{result}"
        );
        assert!(ips
            .iter()
            .all(|ip| ip["interface"] == 1 && ip["gateway"].is_string()));
        assert_eq!(
            result["routes"],
            json!([{"dst": "::/0"}, {"dst": "0.0.0.0/0"}])
        );

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
        let host_addrs = host
            .netns
            .ip_json(&["addr", "show", "dev", "G000000001001H"]);
        let infos = host_addrs[0]["addr_info"].as_array().unwrap();
        for ip in ips {
            let gw = ip["gateway"].as_str().unwrap();
            let info = infos
                .iter()
                .find(|a| a["local"] == gw)
                .unwrap_or_else(|| panic!("gateway {gw} on host end"));
            assert!(
                info.get("tentative").is_none(),
                "the gateway never waits for DAD: {info}"
            );
        }
        let neigh = host
            .netns
            .ip(&["neigh", "show", "dev", "G000000001001H", "nud", "permanent"]);
        assert_eq!(neigh.lines().count(), 2, "{neigh}");

        rt.check(&list, &att).unwrap();
        rt.del(&list, &att).unwrap();
        assert_eq!(host_traces(&host, "G000000001001H"), Vec::<String>::new());
        assert!(
            !pod.ns.try_ip(&["link", "show", "eth0"]).0,
            "guest end removed"
        );
        assert!(records(&host).is_empty());
        assert!(
            !ipam_holds(&host, &att, &list, &result),
            "the address was released"
        );
        // CHECK and DEL again with the result the runtime had cached.
        let msg = rt
            .plugin(&list, 0, "CHECK", &att, Some(&result))
            .expect_error(100);
        assert!(
            msg.contains("G000000001001H"),
            "names what is missing: {msg}"
        );
        rt.plugin(&list, 0, "DEL", &att, Some(&result))
            .expect_quiet_success();
    }
}

#[test]
fn every_addressing_mode_attaches_checks_and_detaches() {
    galactic_testkit::privileged!();
    let host = host("vmodes");
    let rt = runtime(&host);
    let cases = [
        (
            "ipv6-only",
            json!({"type": "galactic-ipam", "ipv6_subnet": "fd70::/64"}),
            vec!["fd70::"],
        ),
        (
            "ipv4-only",
            json!({"type": "galactic-ipam", "ipv4_subnet": "10.70.0.0/24"}),
            vec!["10.70.0."],
        ),
        (
            "addresses",
            json!({"type": "galactic-ipam", "addresses": [
                {"address": "fd71::5/96", "gateway": "fd71::1"}, {"address": "10.71.0.5/32", "gateway": "10.71.0.1"}]}),
            vec!["fd71::5/96", "10.71.0.5/32"],
        ),
        (
            "static",
            json!({"type": "galactic-ipam", "static_ip": "fd72::7"}),
            vec!["fd72::7/64"],
        ),
        ("no-ipam", Value::Null, vec![]),
    ];
    for (i, (mode, ipam, expected)) in cases.into_iter().enumerate() {
        let pod = Pod::new(&format!("vm{i}"));
        let att = pod.attachment();
        let list = conf("1.1.0", &format!("{}", i + 2), "1", ipam);
        let result = rt.add(&list, &att).unwrap();
        let ips: Vec<&str> = result["ips"]
            .as_array()
            .map(|a| a.iter().map(|ip| ip["address"].as_str().unwrap()).collect())
            .unwrap_or_default();
        assert_eq!(ips.len(), expected.len(), "{mode}: {result}");
        for (ip, want) in ips.iter().zip(&expected) {
            assert!(
                ip.starts_with(want),
                "{mode}: {ip} should start with {want}"
            );
        }
        rt.check(&list, &att).unwrap();
        rt.del(&list, &att).unwrap();
        // DEL again with the result the runtime had cached.
        rt.plugin(&list, 0, "DEL", &att, Some(&result))
            .expect_quiet_success();
        let name = result["interfaces"][0]["name"].as_str().unwrap().to_owned();
        assert_eq!(host_traces(&host, &name), Vec::<String>::new(), "{mode}");
    }
}

#[test]
fn two_pods_of_one_vpc_talk_and_other_vpcs_and_the_host_are_unreachable() {
    galactic_testkit::privileged!();
    let host = host("viso");
    let rt = runtime(&host);
    // Stand-ins for the host's own addresses (main and local tables).
    host.netns.ip(&["addr", "add", "10.99.0.1/32", "dev", "lo"]);
    host.netns.ip(&["addr", "add", "fd99::1/128", "dev", "lo"]);
    let (a1, a2, b1) = (Pod::new("va1"), Pod::new("va2"), Pod::new("vb1"));
    let conf_a = |att: &str| conf("1.1.0", "A", att, pools("fd66:1::/64", "10.66.0.0/24"));
    let conf_b = conf("1.1.0", "B", "1", pools("fd67:1::/64", "10.67.0.0/24"));
    let r1 = rt.add(&conf_a("1"), &a1.attachment()).unwrap();
    let r2 = rt.add(&conf_a("2"), &a2.attachment()).unwrap();
    let rb = rt.add(&conf_b, &b1.attachment()).unwrap();
    for i in 0..2 {
        assert!(a1.ping(&ip_of(&r2, i)), "a1 → a2 {}", ip_of(&r2, i));
        assert!(a2.ping(&ip_of(&r1, i)), "a2 → a1 {}", ip_of(&r1, i));
        let gw_a = r1["ips"][i]["gateway"].as_str().unwrap();
        assert!(
            a1.ping(gw_a),
            "a1 reaches its gateway {gw_a} (host replies stay in the VPC)"
        );
        assert!(
            !b1.ping(&ip_of(&r1, i)),
            "b1 must not reach a1 {}",
            ip_of(&r1, i)
        );
        assert!(
            !a1.ping(&ip_of(&rb, i)),
            "a1 must not reach b1 {}",
            ip_of(&rb, i)
        );
        assert!(
            !b1.ping(gw_a),
            "b1 must not reach VPC A's gateway {gw_a} (local rule moved)"
        );
    }
    for target in ["10.99.0.1", "fd99::1"] {
        assert!(
            !a1.ping(target),
            "a pod must not reach the host's own address {target}"
        );
    }
    for (pod, c) in [(&a1, conf_a("1")), (&a2, conf_a("2")), (&b1, conf_b)] {
        rt.del(&c, &pod.attachment()).unwrap();
    }
}

#[test]
fn forwarding_works_when_the_host_forward_policy_is_drop() {
    galactic_testkit::privileged!();
    let host = host("vdrop");
    let rt = runtime(&host);
    for cmd in [
        "add table ip filter",
        "add chain ip filter FORWARD { type filter hook forward priority 0; policy drop; }",
        "add table ip6 filter",
        "add chain ip6 filter FORWARD { type filter hook forward priority 0; policy drop; }",
    ] {
        assert!(host.netns.exec(&["nft", cmd]).status.success(), "{cmd}");
    }
    let (a1, a2) = (Pod::new("vd1"), Pod::new("vd2"));
    let c = |att: &str| conf("1.1.0", "D", att, pools("fd68:1::/64", "10.68.0.0/24"));
    let r1 = rt.add(&c("1"), &a1.attachment()).unwrap();
    let r2 = rt.add(&c("2"), &a2.attachment()).unwrap();
    let again = rt.add(&c("1"), &a1.attachment()).unwrap();
    assert_eq!(again, r1, "a retried ADD returns the same result");
    let ruleset =
        String::from_utf8_lossy(&host.netns.exec(&["nft", "list", "ruleset"]).stdout).into_owned();
    assert_eq!(
        ruleset
            .matches(&format!("iifname \"{}\"", hname("D", "1")))
            .count(),
        2,
        "one rule per chain, no duplicates: {ruleset}"
    );
    for i in 0..2 {
        assert!(
            a1.ping(&ip_of(&r2, i)),
            "a1 → a2 {} despite policy drop",
            ip_of(&r2, i)
        );
    }
    rt.del(&c("1"), &a1.attachment()).unwrap();
    assert_eq!(host_traces(&host, &hname("D", "1")), Vec::<String>::new());
    rt.del(&c("2"), &a2.attachment()).unwrap();
}

#[test]
fn a_retried_add_converges_without_duplicates() {
    galactic_testkit::privileged!();
    let host = table_host("vretry");
    let rt = runtime(&host);
    let pod = Pod::new("vretry");
    let conf = conf("1.1.0", "R", "1", pools("fd69:1::/64", "10.69.0.0/24"));
    let first = rt.add(&conf, &pod.attachment()).unwrap();
    let second = rt.add(&conf, &pod.attachment()).unwrap();
    assert_eq!(first, second);
    let map = String::from_utf8_lossy(
        &host
            .netns
            .exec(&["nft", "list", "map", "inet", "galactic", "vpc_marks"])
            .stdout,
    )
    .into_owned();
    assert_eq!(map.matches(&hname("R", "1")).count(), 1, "{map}");
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
    rt.check(&conf, &pod.attachment()).unwrap();
    rt.del(&conf, &pod.attachment()).unwrap();
}

#[test]
fn check_fails_when_only_the_ipam_allocation_is_missing_or_different() {
    galactic_testkit::privileged!();
    let host = table_host("vipamchk");
    let rt = runtime(&host);
    let pod = Pod::new("vipamchk");
    let att = pod.attachment();
    let list = conf("1.1.0", "K", "1", pools("fd6e:1::/64", "10.110.0.0/24"));
    let result = rt.add(&list, &att).unwrap();
    rt.check(&list, &att).unwrap();
    // The allocation alone goes: every kernel object and record is still in place.
    ipam_call(&host, &list, "DEL", &att);
    assert_eq!(host.node.ipam_holdings(), Vec::<String>::new());
    let err = rt.check(&list, &att).unwrap_err();
    let msg = err.expect_error(100);
    assert!(
        msg.contains("fd6e:1::") || msg.contains("allocation"),
        "{msg}"
    );
    // A different allocation for the same attachment. Asked for nothing, IPAM would give the
    // attachment its released addresses back (what restart and reload rely on): ask for another
    // IPv4 address instead.
    let other = ipam_call(&host, &list, "ADD", &att.clone().arg("IP", "10.110.0.200"));
    assert_ne!(
        other["ips"], result["ips"],
        "IPAM handed out other addresses"
    );
    let msg = rt.check(&list, &att).unwrap_err().expect_error(100);
    assert!(!msg.is_empty());
    rt.del(&list, &att).unwrap();
    assert_eq!(host.node.ipam_holdings(), Vec::<String>::new());
}
