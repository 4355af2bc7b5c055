//! VRF routing domains that agree with the kernel: a VPC's VRF left by the upstream Go chain is
//! adopted with its table, a VRF removed or recreated behind the record is reported by CHECK and
//! brought back by the next ADD, a crash halfway through creating one leaves a record the retry
//! completes, and a failed adoption leaves the device as it was found (its sysctls and link state
//! too). A VRF removed behind the record is recreated by the next ADD or by GC with every
//! attachment of the VPC rejoined (`converge.rs` has the table-mode objects). Plus the IPv6 forwarding
//! requirement of kernels before 6.17. These need Debian 12's 6.1 (VRF, no `force_forwarding`):
//! they run in the production-kernel tier (`cargo xtask test-kernel`) and say SKIPPED elsewhere.
//! The CHECK of Go-era attachments in a Go VRF is `upgrade/takeover.rs`'s scenario, run here with VRF.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{ip_of, is_kernel_link_local, Host, Pod};
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};
use std::path::Path;

use crate::common::{domain, hname, link, record_count, runtime, table_routes, vrf, vrf_host};

/// The master alone, or followed by galactic-route with `terminations`.
fn chain(vpc: &str, att: &str, v6: &str, v4: &str, terminations: Option<Value>) -> Conflist {
    let mut plugins = vec![
        json!({"type": "galactic-cni", "vpc": vpc, "vpcattachment": att,
        "ipam": {"type": "galactic-ipam", "ipv6_subnet": v6, "ipv4_subnet": v4}}),
    ];
    if let Some(terminations) = terminations {
        plugins.push(
            json!({"type": "galactic-route", "vpc": vpc, "vpcattachment": att,
            "terminations": terminations}),
        );
    }
    Conflist::new("1.1.0", &format!("tenant-{}", vpc.to_lowercase()), plugins)
}

fn record_table(host: &Host, vpc: &str) -> String {
    domain(host, vpc).expect("a domain record")["table"].to_string()
}

/// The table a VRF device is bound to.
fn bound_table(host: &Host, name: &str) -> Option<String> {
    link(host, name).map(|l| l["linkinfo"]["info_data"]["table"].to_string())
}

/// What the upstream Go chain leaves for a VPC: `G{vpc}V` bound to `table`, up, with one of its
/// pods' host ends enslaved and routed in the table.
fn go_chain_vrf(host: &Host, vpc: &str, table: &str) {
    let name = vrf(vpc);
    host.netns
        .ip(&["link", "add", &name, "type", "vrf", "table", table]);
    host.netns.ip(&["link", "set", &name, "up"]);
    host.netns
        .ip(&["link", "add", "goh", "type", "veth", "peer", "name", "gog"]);
    host.netns.ip(&["link", "set", "goh", "master", &name]);
    host.netns.ip(&["link", "set", "goh", "up"]);
    host.netns.ip(&["link", "set", "gog", "up"]);
    host.netns
        .ip(&["route", "add", "10.77.9.9/32", "dev", "goh", "table", table]);
    host.netns.ip(&[
        "-6",
        "route",
        "add",
        "fd77::9/128",
        "dev",
        "goh",
        "table",
        table,
    ]);
}

/// `ip route get ADDR vrf G{vpc}V`: where the VPC's table sends a packet for `addr`.
fn routed_in(host: &Host, vpc: &str, addr: &str) -> String {
    host.netns.ip(&["route", "get", addr, "vrf", &vrf(vpc)])
}

/// Every link of kind vrf.
fn vrfs(host: &Host) -> Vec<String> {
    host.netns
        .ip(&["-o", "link", "show", "type", "vrf"])
        .lines()
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        .collect()
}

#[test]
fn a_go_chain_vrf_is_adopted_with_its_table_and_its_pods_reach_each_other() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vado", &["galactic-ipam", "galactic-route"]) else {
        return;
    };
    // Table 7: not what this node would pick (the lowest free id from 1000).
    go_chain_vrf(&host, "A", "7");
    let rt = runtime(&host);
    let (a1, a2) = (Pod::new("vado1"), Pod::new("vado2"));
    let c1 = chain(
        "A",
        "1",
        "fd73:1::/64",
        "10.73.0.0/24",
        Some(json!([{"network": "198.51.100.0/24"}, {"network": "2001:db8:73::/64"}])),
    );
    let c2 = chain("A", "2", "fd73:1::/64", "10.73.0.0/24", None);
    let r1 = rt.add(&c1, &a1.attachment()).unwrap();
    let r2 = rt.add(&c2, &a2.attachment()).unwrap();

    let record = domain(&host, "A").unwrap();
    assert_eq!(
        (&record["backend"], &record["table"]),
        (&json!("vrf"), &json!(7)),
        "{record}"
    );
    assert_eq!(vrfs(&host), vec![vrf("A")], "no second VRF");
    assert_eq!(bound_table(&host, &vrf("A")).as_deref(), Some("7"));
    for att in ["1", "2"] {
        assert_eq!(link(&host, &hname("A", att)).unwrap()["master"], vrf("A"));
    }
    for (result, att) in [(&r1, "1"), (&r2, "2")] {
        for i in 0..2 {
            let lookup = routed_in(&host, "A", &ip_of(result, i));
            let want = format!("dev {} table 7", hname("A", att));
            assert!(lookup.contains(&want), "{want}: {lookup}");
        }
    }
    let routes = table_routes(&host, "7").join("\n");
    for want in [
        "198.51.100.0/24 dev G00000000A001H".to_owned(),
        "2001:db8:73::/64 dev G00000000A001H".to_owned(),
        "10.77.9.9 dev goh".to_owned(),
        "fd77::9 dev goh".to_owned(),
        "unreachable default".to_owned(),
    ] {
        assert!(routes.contains(&want), "table 7 has {want}: {routes}");
    }
    for i in 0..2 {
        assert!(a1.ping(&ip_of(&r2, i)), "a1 → a2 {}", ip_of(&r2, i));
        assert!(a2.ping(&ip_of(&r1, i)), "a2 → a1 {}", ip_of(&r1, i));
        assert!(a1.ping(r1["ips"][i]["gateway"].as_str().unwrap()));
    }
    rt.check(&c1, &a1.attachment()).unwrap();
    rt.check(&c2, &a2.attachment()).unwrap();

    // The DEL of the last attachment of ours forgets the domain, but the Go pod is still
    // enslaved: its VRF and table stay (and GC after it changes nothing).
    rt.del(&c1, &a1.attachment()).unwrap();
    rt.del(&c2, &a2.attachment()).unwrap();
    assert!(domain(&host, "A").is_none(), "the record is forgotten");
    rt.gc(&c1, &[]).unwrap();
    assert_eq!(bound_table(&host, &vrf("A")).as_deref(), Some("7"));
    assert_eq!(link(&host, "goh").unwrap()["master"], vrf("A"));
    let routes = table_routes(&host, "7").join("\n");
    assert!(
        routes.contains("10.77.9.9 dev goh") && routes.contains("fd77::9 dev goh"),
        "{routes}"
    );
    assert!(
        host.node.log_lines().iter().any(|l| l["command"] == "DEL"
            && l["msg"]
                .as_str()
                .unwrap_or("")
                .contains("left its VRF and table")
            && l["enslaved"] == json!(["goh"])),
        "the last DEL says why the VRF stays"
    );

    // With the Go pod gone, the next ADD adopts it again and its DEL then removes it for good.
    host.netns.ip(&["link", "del", "goh"]);
    rt.add(&c2, &a2.attachment()).unwrap();
    assert_eq!(domain(&host, "A").unwrap()["table"], 7);
    rt.del(&c2, &a2.attachment()).unwrap();
    assert!(
        link(&host, &vrf("A")).is_none(),
        "the last DEL removed the VRF"
    );
    assert_eq!(table_routes(&host, "7"), Vec::<String>::new());
}

#[test]
fn a_failed_adoption_leaves_the_vrf_as_it_was_found() {
    let Some(host) = vrf_host(
        "a_failed_adoption_leaves_the_vrf_as_it_was_found",
        "vafl",
        &["galactic-ipam", "galactic-route"],
    ) else {
        return;
    };
    go_chain_vrf(&host, "F", "7");
    let rt = runtime(&host);
    let c = chain("F", "1", "fd74:1::/64", "10.74.0.0/24", None);
    // The device, its table, its Go pod and the rules (the moved `local` rule and the kernel's
    // own l3mdev rule are node-wide and stay).
    let found = || {
        let dev = link(&host, &vrf("F")).unwrap();
        let rules: Vec<String> = ["-4", "-6"]
            .iter()
            .flat_map(|f| {
                host.netns
                    .ip(&[f, "rule", "show"])
                    .lines()
                    .filter(|l| !l.contains("lookup local"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        (
            dev["linkinfo"]["info_data"]["table"].clone(),
            dev["flags"].clone(),
            link(&host, "goh").unwrap()["master"].clone(),
            // The Go pod's link-local routes appear whenever its DAD ends: not a step's state.
            table_routes(&host, "7")
                .into_iter()
                .filter(|r| !is_kernel_link_local(r))
                .collect::<Vec<_>>(),
            rules,
        )
    };
    let before = found();
    for failpoint in [
        "after-ipam",
        "after-record",
        "after-domain-record",
        "after-domain",
        "after-interface",
        "after-firewall",
        "after-attach",
        "after-guest",
        "after-gateways",
        "after-host-gateway",
    ] {
        let pod = Pod::new("vafl");
        let err = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", failpoint)
            .add(&c, &pod.attachment())
            .unwrap_err();
        assert!(err.expect_error(999).contains(failpoint));
        assert_eq!(found(), before, "the VRF as found after {failpoint}");
        assert!(domain(&host, "F").is_none(), "no record after {failpoint}");
        assert_eq!(
            record_count(&host),
            0,
            "no attachment record after {failpoint}"
        );
        assert!(link(&host, &hname("F", "1")).is_none());
    }
    let pod = Pod::new("vaflok");
    rt.add(&c, &pod.attachment()).unwrap();
    assert_eq!(domain(&host, "F").unwrap()["table"], 7);
    rt.del(&c, &pod.attachment()).unwrap();
}

#[test]
fn a_vrf_removed_behind_the_record_is_reported_by_check_and_recreated_by_the_next_add() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vrem", &["galactic-ipam", "galactic-route"]) else {
        return;
    };
    let rt = runtime(&host);
    let (d1, d2) = (Pod::new("vrem1"), Pod::new("vrem2"));
    let c1 = chain(
        "D",
        "1",
        "fd75:1::/64",
        "10.75.0.0/24",
        Some(json!([{"network": "198.51.101.0/24"}])),
    );
    let c2 = chain("D", "2", "fd75:1::/64", "10.75.0.0/24", None);
    let r1 = rt.add(&c1, &d1.attachment()).unwrap();
    let table = record_table(&host, "D");

    // As galactic-router's GC does it.
    host.netns.ip(&["link", "del", &vrf("D")]);
    let msg = rt
        .check(&c1, &d1.attachment())
        .unwrap_err()
        .expect_error(100);
    for want in [
        format!("VRF {} does not exist", vrf("D")),
        "galactic-router's GC".to_owned(),
        "the next ADD of the VPC on this node recreates it".to_owned(),
    ] {
        assert!(msg.contains(&want), "{want:?}: {msg}");
    }
    // galactic-route checks its terminations' table and says the same.
    let route = rt
        .plugin(&c1, 1, "CHECK", &d1.attachment(), Some(&r1))
        .expect_error(100);
    assert!(
        route.contains(&format!("VRF {} does not exist", vrf("D"))),
        "{route}"
    );

    let r2 = rt.add(&c2, &d2.attachment()).unwrap();
    assert_eq!(
        record_table(&host, "D"),
        table,
        "the recorded table is kept"
    );
    assert_eq!(bound_table(&host, &vrf("D")), Some(table.clone()));
    assert_eq!(link(&host, &hname("D", "2")).unwrap()["master"], vrf("D"));
    for i in 0..2 {
        assert!(d2.ping(r2["ips"][i]["gateway"].as_str().unwrap()));
    }
    rt.check(&c2, &d2.attachment()).unwrap();
    assert!(
        host.node
            .log_lines()
            .iter()
            .any(|l| l["restored"].as_array().is_some_and(|r| r
                .iter()
                .any(|x| x.as_str().unwrap_or("").starts_with("recreated VRF")))),
        "the repair is logged"
    );
    // The same ADD converged the VPC's other attachments: the first one is enslaved again with
    // its gateway addresses, pod routes and neighbours, so its master's CHECK passes and the
    // pods reach each other without it being added again.
    assert_eq!(link(&host, &hname("D", "1")).unwrap()["master"], vrf("D"));
    let master = rt.plugin(&c1, 0, "CHECK", &d1.attachment(), Some(&r1));
    assert!(master.success, "{}", master.stdout);
    for i in 0..2 {
        assert!(d1.ping(&ip_of(&r2, i)), "d1 → d2 {}", ip_of(&r2, i));
        assert!(d2.ping(&ip_of(&r1, i)), "d2 → d1 {}", ip_of(&r1, i));
    }
    // Its termination routes are galactic-route's: its own next ADD restores them.
    rt.add(&c1, &d1.attachment()).unwrap();
    rt.check(&c1, &d1.attachment()).unwrap();
    rt.del(&c1, &d1.attachment()).unwrap();
    rt.del(&c2, &d2.attachment()).unwrap();
}

#[test]
fn a_vrf_removed_behind_the_record_is_recreated_by_gc_with_every_attachment_rejoined() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vrgc", &["galactic-ipam"]) else {
        return;
    };
    let rt = runtime(&host).binary(
        "galactic-tap-cni",
        galactic_testkit::plugin_binary("galactic-tap-cni"),
    );
    let (g1, g2, vm) = (Pod::new("vrgc1"), Pod::new("vrgc2"), Pod::new("vrgcv"));
    let c1 = chain("G", "1", "fd7a:1::/64", "10.122.0.0/24", None);
    let c2 = chain("G", "2", "fd7a:1::/64", "10.122.0.0/24", None);
    let ct = Conflist::new(
        "1.1.0",
        "vms-g",
        vec![
            json!({"type": "galactic-tap-cni", "vpc": "G", "vpcattachment": "3",
            "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd7a:2::/64", "ipv4_subnet": "10.122.1.0/24"}}),
        ],
    );
    let r1 = rt.add(&c1, &g1.attachment()).unwrap();
    let r2 = rt.add(&c2, &g2.attachment()).unwrap();
    rt.add(&ct, &vm.attachment()).unwrap();

    host.netns.ip(&["link", "del", &vrf("G")]);
    let remedy = "CNI GC or the next ADDs of VPC G on this node restore it";
    for (c, pod) in [(&c1, &g1), (&c2, &g2), (&ct, &vm)] {
        let msg = rt
            .check(c, &pod.attachment())
            .unwrap_err()
            .expect_error(100);
        for want in [
            format!("VRF {} does not exist", vrf("G")),
            format!("is not enslaved to VRF {}; {remedy}", vrf("G")),
        ] {
            assert!(msg.contains(&want), "{want:?}: {msg}");
        }
    }
    rt.gc(&c1, &[&g1.attachment(), &g2.attachment()]).unwrap();
    for att in ["1", "2", "3"] {
        assert_eq!(link(&host, &hname("G", att)).unwrap()["master"], vrf("G"));
    }
    for (c, pod) in [(&c1, &g1), (&c2, &g2), (&ct, &vm)] {
        rt.check(c, &pod.attachment()).unwrap();
    }
    for i in 0..2 {
        assert!(g1.ping(&ip_of(&r2, i)), "g1 → g2 {}", ip_of(&r2, i));
        assert!(g2.ping(&ip_of(&r1, i)), "g2 → g1 {}", ip_of(&r1, i));
    }
    rt.del(&ct, &vm.attachment()).unwrap();
    rt.del(&c2, &g2.attachment()).unwrap();
    rt.del(&c1, &g1.attachment()).unwrap();
}

/// The VRF's sysctls ADD sets when it readies a device, and its link flags.
fn vrf_state(host: &Host, vpc: &str) -> (Vec<String>, Value) {
    let name = vrf(vpc);
    let sysctls = [
        format!("net.ipv4.conf.{name}.rp_filter"),
        format!("net.ipv4.conf.{name}.forwarding"),
        format!("net.ipv6.conf.{name}.forwarding"),
    ]
    .iter()
    .map(|k| {
        let out = host.netns.exec(&["sysctl", "-n", k]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    })
    .collect();
    (sysctls, link(host, &name).unwrap()["flags"].clone())
}

#[test]
fn a_failed_adoption_puts_the_vrfs_sysctls_and_link_state_back() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vafs", &["galactic-ipam"]) else {
        return;
    };
    go_chain_vrf(&host, "S", "8");
    // A device as an operator may leave it: down, rp_filter strict, forwarding off.
    let name = vrf("S");
    host.netns.ip(&["link", "set", &name, "down"]);
    for key in [
        format!("net.ipv4.conf.{name}.rp_filter=1"),
        format!("net.ipv4.conf.{name}.forwarding=0"),
        format!("net.ipv6.conf.{name}.forwarding=0"),
    ] {
        assert!(host.netns.exec(&["sysctl", "-qw", &key]).status.success());
    }
    let before = vrf_state(&host, "S");
    assert_eq!(before.0, ["1", "0", "0"], "the device as set up");
    let rt = runtime(&host);
    let c = chain("S", "1", "fd7b:1::/64", "10.123.0.0/24", None);
    // Inside the adoption (after `ready` set the sysctls), and in the ADD's rollback after it.
    for failpoint in ["after-vrf-sysctls", "after-attach", "after-host-gateway"] {
        let pod = Pod::new("vafs");
        let err = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", failpoint)
            .add(&c, &pod.attachment())
            .unwrap_err();
        assert!(err.expect_error(999).contains(failpoint));
        assert_eq!(
            vrf_state(&host, "S"),
            before,
            "the VRF as found after {failpoint}"
        );
        assert!(domain(&host, "S").is_none(), "no record after {failpoint}");
    }
    let pod = Pod::new("vafsok");
    rt.add(&c, &pod.attachment()).unwrap();
    assert_eq!(
        vrf_state(&host, "S").0,
        ["0", "1", "1"],
        "readied once adopted"
    );
    rt.del(&c, &pod.attachment()).unwrap();
}

#[test]
fn a_vrf_recreated_with_another_table_behind_the_record_is_adopted_by_the_next_add() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vrec", &["galactic-ipam", "galactic-route"]) else {
        return;
    };
    let rt = runtime(&host);
    let (e1, e2) = (Pod::new("vrec1"), Pod::new("vrec2"));
    let c1 = chain("E", "1", "fd76:1::/64", "10.76.0.0/24", None);
    let c2 = chain("E", "2", "fd76:1::/64", "10.76.0.0/24", None);
    let r1 = rt.add(&c1, &e1.attachment()).unwrap();
    let old = record_table(&host, "E");
    // As the Go chain would recreate it: the lowest table no VRF uses.
    host.netns.ip(&["link", "del", &vrf("E")]);
    host.netns
        .ip(&["link", "add", &vrf("E"), "type", "vrf", "table", "77"]);
    host.netns.ip(&["link", "set", &vrf("E"), "up"]);
    let msg = rt
        .check(&c1, &e1.attachment())
        .unwrap_err()
        .expect_error(100);
    let want = format!(
        "VRF {} is bound to table 77, but this node's record says table {old}",
        vrf("E")
    );
    assert!(
        msg.contains(&want) && msg.contains("adopts its table"),
        "{msg}"
    );

    let r2 = rt.add(&c2, &e2.attachment()).unwrap();
    assert_eq!(record_table(&host, "E"), "77");
    assert_eq!(
        table_routes(&host, &old),
        Vec::<String>::new(),
        "old table flushed"
    );
    for i in 0..2 {
        let lookup = routed_in(&host, "E", &ip_of(&r2, i));
        assert!(
            lookup.contains(&format!("dev {} table 77", hname("E", "2"))),
            "{lookup}"
        );
    }
    // The ADD of e2 moved e1's pod routes to the adopted table too.
    rt.check(&c1, &e1.attachment()).unwrap();
    let lookup = routed_in(&host, "E", &ip_of(&r1, 0));
    assert!(
        lookup.contains(&format!("dev {} table 77", hname("E", "1"))),
        "{lookup}"
    );
    rt.add(&c1, &e1.attachment()).unwrap();
    rt.check(&c1, &e1.attachment()).unwrap();
    rt.check(&c2, &e2.attachment()).unwrap();
    for i in 0..2 {
        assert!(e1.ping(&ip_of(&r2, i)), "e1 → e2 {}", ip_of(&r2, i));
        assert!(e2.ping(&ip_of(&r1, i)), "e2 → e1 {}", ip_of(&r1, i));
    }
    rt.del(&c1, &e1.attachment()).unwrap();
    rt.del(&c2, &e2.attachment()).unwrap();
    rt.gc(&c1, &[]).unwrap();
    assert!(link(&host, &vrf("E")).is_none());
}

#[test]
fn a_crash_after_creating_the_vrf_leaves_a_record_the_retry_completes() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vcra", &["galactic-ipam", "galactic-route"]) else {
        return;
    };
    let rt = runtime(&host);
    let pod = Pod::new("vcra");
    let c = chain("C", "1", "fd78:1::/64", "10.78.0.0/24", None);
    rt.clone()
        .env("GALACTIC_FAILPOINTS", "after-vrf-device:kill")
        .add(&c, &pod.attachment())
        .unwrap_err();
    // Killed with the device bound to the table just taken: the record (written first) holds
    // that table, so the retry uses both rather than taking a new table for the same device.
    let table = record_table(&host, "C");
    assert_eq!(bound_table(&host, &vrf("C")), Some(table.clone()));
    let result = rt.add(&c, &pod.attachment()).unwrap();
    assert_eq!(vrfs(&host), vec![vrf("C")]);
    assert_eq!(record_table(&host, "C"), table);
    assert_eq!(bound_table(&host, &vrf("C")), Some(table.clone()));
    rt.check(&c, &pod.attachment()).unwrap();
    assert!(pod.ping(result["ips"][0]["gateway"].as_str().unwrap()));
    rt.del(&c, &pod.attachment()).unwrap();
    rt.gc(&c, &[]).unwrap();
    assert!(link(&host, &vrf("C")).is_none());
    assert_eq!(table_routes(&host, &table), Vec::<String>::new());
}

#[test]
fn without_force_forwarding_and_ipv6_forwarding_off_add_says_what_to_set() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vfwd", &["galactic-ipam", "galactic-route"]) else {
        return;
    };
    if Path::new("/proc/sys/net/ipv6/conf/default/force_forwarding").exists() {
        eprintln!("SKIPPED {test}: this kernel has force_forwarding (>= 6.17)");
        return;
    }
    let set = |v: &str| {
        host.netns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.all.forwarding={v}"),
        ])
    };
    assert!(set("0").status.success());
    let rt = runtime(&host);
    let pod = Pod::new("vfwd");
    let c = chain("W", "1", "fd79:1::/64", "10.79.0.0/24", None);
    let msg = rt.add(&c, &pod.attachment()).unwrap_err().expect_error(5);
    assert_eq!(
        msg,
        "IPv6 forwarding is off for pods: this kernel has no net.ipv6.conf.*.force_forwarding (it \
         arrived in 6.17) and net.ipv6.conf.all.forwarding is 0 in the plugins' network namespace; \
         set net.ipv6.conf.all.forwarding=1 on this node (e.g. in /etc/sysctl.d/)"
    );
    assert!(link(&host, &hname("W", "1")).is_none(), "nothing left");
    assert_eq!(record_count(&host), 0);
    assert!(set("1").status.success());
    rt.add(&c, &pod.attachment()).unwrap();
    rt.del(&c, &pod.attachment()).unwrap();
}

#[test]
fn go_attachments_pass_check_after_the_switch_with_the_go_vrf() {
    let test = galactic_testkit::test_name!();
    let Some(host) = vrf_host(test, "vgok", &galactic_testkit::host::PLUGINS) else {
        return;
    };
    crate::upgrade::go_attachments_pass_check_after_the_switch(&host, true);
}
