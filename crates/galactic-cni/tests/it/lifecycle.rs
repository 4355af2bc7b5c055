//! Failures at every step, DEL after the pod or its config changed, claims, GC and refusals.

use crate::*;
use galactic_testkit::host::{ip_of, Host, Pod};
use serde_json::{json, Value};

#[test]
fn a_failure_at_any_step_leaves_nothing_behind() {
    galactic_testkit::privileged!();
    let failpoints = [
        "after-record",
        "after-domain-record",
        "after-domain",
        "after-interface",
        "after-firewall",
        "after-attach",
        "after-ipam",
        "after-guest",
        "after-gateways",
        "after-host-gateway",
    ];
    let host = table_host("vfail");
    let rt = runtime(&host);
    let baseline_rules: Vec<String> = ["-4", "-6"]
        .iter()
        .map(|f| host.netns.ip(&[f, "rule", "show"]))
        .collect();
    let conf = conf("1.1.0", "F", "1", pools("fd6a:1::/64", "10.106.0.0/24"));
    for failpoint in failpoints {
        let pod = Pod::new("vfail");
        let err = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", failpoint)
            .add(&conf, &pod.attachment())
            .unwrap_err();
        let msg = err.expect_error(999);
        assert!(msg.contains(failpoint), "{failpoint}: {msg}");
        assert_eq!(
            host_traces(&host, &hname("F", "1")),
            Vec::<String>::new(),
            "after {failpoint}"
        );
        assert!(
            !pod.ns.try_ip(&["link", "show", "eth0"]).0,
            "guest end gone after {failpoint}"
        );
        assert!(records(&host).is_empty(), "record gone after {failpoint}");
        assert_eq!(
            host.node.ipam_holdings(),
            Vec::<String>::new(),
            "no allocation left in the IPAM store after {failpoint}"
        );
        let now: Vec<String> = ["-4", "-6"]
            .iter()
            .map(|f| host.netns.ip(&[f, "rule", "show"]))
            .collect();
        let strip = |rules: &[String]| {
            rules
                .iter()
                .map(|r| {
                    r.lines()
                        .filter(|l| !l.contains("lookup local"))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            strip(&now),
            strip(&baseline_rules),
            "no VPC rule left after {failpoint}"
        );
        let table = host.netns.ip(&["-6", "route", "show", "table", "all"]);
        assert!(
            !table.contains("table 1000"),
            "the domain this ADD created is gone after {failpoint}: {table}"
        );
    }
    // And the same attachment then succeeds.
    let pod = Pod::new("vfailok");
    rt.add(&conf, &pod.attachment()).unwrap();
    rt.del(&conf, &pod.attachment()).unwrap();
}

#[test]
fn del_succeeds_and_releases_when_the_netns_is_gone_or_the_config_was_edited() {
    galactic_testkit::privileged!();
    let host = host("vdel");
    let rt = runtime(&host);
    let conf = conf("1.1.0", "E", "1", pools("fd6b:1::/64", "10.107.0.0/24"));
    // Netns gone.
    let pod = Pod::new("vgone");
    let att = pod.attachment();
    rt.add(&conf, &att).unwrap();
    drop(pod);
    rt.del(&conf, &att).unwrap();
    assert_eq!(host_traces(&host, &hname("E", "1")), Vec::<String>::new());
    assert_eq!(host.node.ipam_holdings(), Vec::<String>::new(), "released");
    // Config edited between ADD and DEL: a different pool, and a vpc that no longer parses.
    let pod = Pod::new("vedit");
    let att = pod.attachment();
    rt.add(&conf, &att).unwrap();
    let mut edited = conf.clone();
    edited.plugins[0]["ipam"]["ipv6_subnet"] = json!("fd6c::/64");
    edited.plugins[0]["vpc"] = json!("not base62!");
    rt.del(&edited, &att).unwrap();
    assert_eq!(host_traces(&host, &hname("E", "1")), Vec::<String>::new());
    assert!(records(&host).is_empty());
    assert_eq!(
        host.node.ipam_holdings(),
        Vec::<String>::new(),
        "released despite the edited config"
    );
    // No netns at all (exported empty, as libcni does).
    let pod = Pod::new("vnonetns");
    rt.add(&conf, &pod.attachment()).unwrap();
    rt.del(&conf, &pod.attachment().in_netns("")).unwrap();
    assert_eq!(host_traces(&host, &hname("E", "1")), Vec::<String>::new());
}

#[test]
fn an_attachment_held_by_a_live_pod_is_refused_and_a_dead_ones_is_replaced() {
    galactic_testkit::privileged!();
    let host = host("vclaim");
    let rt = runtime(&host);
    let conf = conf("1.1.0", "C", "1", pools("fd6d:1::/64", "10.108.0.0/24"));
    let first = Pod::new("vc1");
    rt.add(&conf, &first.attachment()).unwrap();
    let second = Pod::new("vc2");
    let msg = rt
        .add(&conf, &second.attachment())
        .unwrap_err()
        .expect_error(7);
    assert!(msg.contains(&first.id), "names the holder: {msg}");
    assert!(
        !second.ns.try_ip(&["link", "show", "eth0"]).0,
        "nothing created in the refused pod"
    );
    drop(first); // the pod died without a DEL
    rt.add(&conf, &second.attachment()).unwrap();
    rt.del(&conf, &second.attachment()).unwrap();
}

#[test]
fn containers_racing_for_one_attachment_leave_one_intact_holder() {
    galactic_testkit::privileged!();
    // Two pods of one Deployment on one node: the same NAD, so the same VPC attachment. Each
    // round three containers ADD at once; a loser's failure (and the DEL its runtime then
    // sends) must never touch what the holder created.
    let host = table_host("vrace");
    let rt = runtime(&host);
    let list = conf("1.1.0", "Q", "1", pools("fd6f:1::/64", "10.111.0.0/24"));
    for round in 0..6 {
        let pods: Vec<Pod> = (0..3).map(|i| Pod::new(&format!("vr{round}{i}"))).collect();
        let outcomes: Vec<_> = std::thread::scope(|s| {
            let racers: Vec<_> = pods
                .iter()
                .map(|p| s.spawn(|| rt.add(&list, &p.attachment())))
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let holders: Vec<usize> = (0..3).filter(|i| outcomes[*i].is_ok()).collect();
        assert_eq!(holders.len(), 1, "round {round}: one holder: {outcomes:?}");
        let holder = &pods[holders[0]];
        for (pod, outcome) in pods.iter().zip(&outcomes) {
            if let Err(e) = outcome {
                let code = e.code();
                assert!(
                    code == Some(7) || code == Some(11),
                    "round {round}: a loser fails with 7 (held) or 11 (busy): {e}"
                );
                assert!(
                    !pod.ns.try_ip(&["link", "show", "eth0"]).0,
                    "loser untouched"
                );
                rt.del(&list, &pod.attachment()).unwrap();
            }
        }
        rt.check(&list, &holder.attachment())
            .unwrap_or_else(|e| panic!("round {round}: holder intact after the losers' DEL: {e}"));
        assert!(
            holder.ping("fd6f:1::1"),
            "round {round}: holder reaches its gateway"
        );
        assert_eq!(
            host.node.ipam_holdings().len(),
            1,
            "only the holder holds addresses"
        );
        rt.del(&list, &holder.attachment()).unwrap();
        assert_eq!(host_traces(&host, &hname("Q", "1")), Vec::<String>::new());
        assert_eq!(host.node.ipam_holdings(), Vec::<String>::new());
        assert!(records(&host).is_empty());
    }
}

#[test]
fn a_gateway_used_by_another_vpc_is_refused_cleanly() {
    galactic_testkit::privileged!();
    let host = table_host("vovl");
    let rt = runtime(&host);
    let a = Pod::new("vovla");
    let c = Pod::new("vovlc");
    let conf_a = conf(
        "1.1.0",
        "A",
        "1",
        json!({"type": "galactic-ipam", "ipv4_subnet": "10.109.0.0/24"}),
    );
    let conf_c = conf(
        "1.1.0",
        "C",
        "1",
        json!({"type": "galactic-ipam", "ipv4_subnet": "10.109.0.0/24"}),
    );
    let ra = rt.add(&conf_a, &a.attachment()).unwrap();
    let msg = rt
        .add(&conf_c, &c.attachment())
        .unwrap_err()
        .expect_error(7);
    assert!(
        msg.contains("10.109.0.1") && msg.contains("node-unique"),
        "{msg}"
    );
    assert_eq!(host_traces(&host, &hname("C", "1")), Vec::<String>::new());
    assert!(
        a.ping(ra["ips"][0]["gateway"].as_str().unwrap()),
        "VPC A is unaffected"
    );
    rt.del(&conf_a, &a.attachment()).unwrap();
}

#[test]
fn gc_removes_stale_attachments_and_unused_domains_only() {
    galactic_testkit::privileged!();
    let host = host("vgc");
    let rt = runtime(&host);
    let c = |att: &str| conf("1.1.0", "G", att, pools("fd6e:1::/64", "10.110.0.0/24"));
    let (keep, stale) = (Pod::new("vgck"), Pod::new("vgcs"));
    let (keep_att, stale_att) = (keep.attachment(), stale.attachment());
    let rk = rt.add(&c("1"), &keep_att).unwrap();
    let rs = rt.add(&c("2"), &stale_att).unwrap();
    // The runtime lost its cache: only the master's own GC knows the attachments.
    rt.lose_cache();
    // No list (no runtime sends that): nothing removed.
    host.invocation(cni(), "GC", &keep)
        .stdin(c("9").inject(0).to_string())
        .run()
        .expect_quiet_success();
    assert_eq!(records(&host).len(), 2);
    rt.gc(&c("9"), &[&keep_att]).unwrap();
    assert_eq!(
        host_traces(&host, &hname("G", "2")),
        Vec::<String>::new(),
        "stale attachment removed"
    );
    assert!(
        !ipam_holds(&host, &stale_att, &c("2"), &rs),
        "its address released"
    );
    assert!(
        host.netns.try_ip(&["link", "show", &hname("G", "1")]).0,
        "the valid one stays"
    );
    rt.plugin(&c("1"), 0, "CHECK", &keep_att, Some(&rk))
        .expect_quiet_success();
    rt.gc(&c("9"), &[]).unwrap();
    assert!(records(&host).is_empty());
    let rules = host.netns.ip(&["-4", "rule", "show"]);
    assert!(
        !rules.contains("lookup 1000"),
        "the unused domain's rules are gone: {rules}"
    );
    let table = host.netns.ip(&["-6", "route", "show", "table", "all"]);
    assert!(!table.contains("table 1000"), "and its table: {table}");
}

#[test]
fn invalid_configs_are_refused_before_anything_changes() {
    galactic_testkit::privileged!();
    let host = host("vbad");
    let rt = runtime(&host);
    let pod = Pod::new("vbad");
    let good = conf("1.1.0", "1", "1", Value::Null);
    let cases: Vec<(Value, &str)> = vec![
        (json!({"vpc": ""}), "vpc is required"),
        (
            json!({"vpc": "a/b"}),
            "invalid base62 value for field 'vpc'",
        ),
        (json!({"vpc": "zzzzzzzzzz"}), "48-bit"),
        (json!({"vpcattachment": "zzzz"}), "16-bit"),
        (json!({"mtu": 67}), "mtu 67 is out of range"),
        (json!({"mtu": 70000}), "mtu 70000 is out of range"),
        (
            json!({"ipv6_subnet": "fd00::/64"}),
            "'ipv6_subnet' belongs inside the 'ipam' block",
        ),
        (
            json!({"prevResult": {"cniVersion": "1.1.0"}}),
            "must be first in the chain",
        ),
        (json!({"ipam": {"type": "../x"}}), "must be a plugin name"),
    ];
    for (patch, expected) in cases {
        let mut bad = good.clone();
        for (k, v) in patch.as_object().unwrap() {
            bad.plugins[0][k] = v.clone();
        }
        let msg = rt.add(&bad, &pod.attachment()).unwrap_err().expect_error(7);
        assert!(msg.contains(expected), "{patch}: {msg}");
    }
    let links = host.netns.ip(&["-o", "link", "show"]);
    assert_eq!(links.lines().count(), 1, "only lo: {links}");
    assert!(records(&host).is_empty());
    assert!(!pod.ns.try_ip(&["link", "show", "eth0"]).0);
}

#[test]
fn gc_sweeps_rules_and_firewall_entries_no_record_owns() {
    galactic_testkit::privileged!();
    // Table mode's own objects (the previous release's `iif` rules, the VPC-mark map's
    // elements): with `auto` a kernel with VRF (the VM tier's) has no map to leave one in.
    let host = table_host("vsweep");
    let rt = runtime(&host);
    let pod = Pod::new("vsweep");
    assert!(host
        .netns
        .exec(&["nft", "add table ip filter"])
        .status
        .success());
    assert!(host
        .netns
        .exec(&[
            "nft",
            "add chain ip filter FORWARD { type filter hook forward priority 0; }"
        ])
        .status
        .success());
    let c = conf("1.1.0", "S", "1", pools("fd6f:1::/64", "10.111.0.0/24"));
    rt.add(&c, &pod.attachment()).unwrap();
    // What a crash between deleting a link and deleting its rules leaves behind, plus a foreign
    // rule at the same priority for a table that is not ours.
    let ghost = hname("S", "9");
    host.netns.ip(&[
        "-6", "rule", "add", "pref", "1000", "iif", &ghost, "lookup", "1000",
    ]);
    host.netns.ip(&[
        "-4", "rule", "add", "pref", "1000", "iif", "foreign0", "lookup", "77",
    ]);
    let tagged = format!(
        "insert rule ip filter FORWARD iifname \"{ghost}\" accept comment \"galactic:{ghost}\""
    );
    assert!(host.netns.exec(&["nft", &tagged]).status.success());
    // Its element of the VPC-mark map (an element outlives its interface too).
    let element = format!("add element inet galactic vpc_marks {{ \"{ghost}\" : 0x1000000 }}");
    assert!(host.netns.exec(&["nft", &element]).status.success());

    rt.gc(&c, &[&pod.attachment()]).unwrap();
    assert_eq!(
        host_traces(&host, &ghost),
        Vec::<String>::new(),
        "detached rule and tagged entry swept"
    );
    assert!(
        host.netns.ip(&["-4", "rule", "show"]).contains("foreign0"),
        "a rule that is not ours stays"
    );
    rt.check(&c, &pod.attachment()).unwrap();
    rt.del(&c, &pod.attachment()).unwrap();
}

#[test]
fn host_services_are_not_reachable_at_the_gateway_in_table_mode() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "vsvc",
        json!({"routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&host);
    let pod = Pod::new("vsvc");
    let c = conf("1.1.0", "H", "1", pools("fd70:1::/64", "10.112.0.0/24"));
    let result = rt.add(&c, &pod.attachment()).unwrap();
    let listener = std::process::Command::new("ip")
        .args(["netns", "exec", host.netns.name(), "python3", "-c",
               "import socket,time\ns=socket.socket(socket.AF_INET6)\ns.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\ns.bind(('::', 18080))\ns.listen()\ntime.sleep(20)"])
        .spawn()
        .unwrap();
    let connect = |ns: &str, addr: &str| {
        let script = format!("import socket\ntry:\n socket.create_connection(('{addr}', 18080), timeout=2)\n print('connected')\nexcept OSError as e:\n print(type(e).__name__)");
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", ns, "python3", "-c", &script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let mut ready = false;
    for _ in 0..50 {
        if connect(host.netns.name(), "127.0.0.1") == "connected" {
            ready = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(ready, "the host listener is up");
    for i in 0..2 {
        let gw = result["ips"][i]["gateway"].as_str().unwrap();
        assert_eq!(
            connect(pod.ns.name(), gw),
            "ConnectionRefusedError",
            "host service via gateway {gw}"
        );
        assert!(pod.ping(gw), "pings to the gateway still work");
    }
    let mut listener = listener;
    let _ = listener.kill();
    let _ = listener.wait();
    rt.del(&c, &pod.attachment()).unwrap();
}

#[test]
fn vrf_backend_when_the_kernel_has_vrf() {
    galactic_testkit::privileged!();
    let probe = galactic_testkit::privileged::TestNetns::new("vrfprobe");
    let (supported, why) = probe.try_ip(&["link", "add", "Gprobe", "type", "vrf", "table", "4242"]);
    if !supported {
        // The development and CI kernel is built without CONFIG_NET_VRF; the table backend is
        // exercised by every other test here.
        eprintln!(
            "SKIPPED vrf_backend_when_the_kernel_has_vrf: this kernel has no VRF support ({})",
            why.trim()
        );
        return;
    }
    let host = Host::new("vvrf", json!({"routing_domain": "vrf"}), &["galactic-ipam"]);
    let rt = runtime(&host);
    let (a1, a2) = (Pod::new("vvrf1"), Pod::new("vvrf2"));
    let c = |att: &str| conf("1.1.0", "V", att, pools("fd71:1::/64", "10.113.0.0/24"));
    rt.add(&c("1"), &a1.attachment()).unwrap();
    let r2 = rt.add(&c("2"), &a2.attachment()).unwrap();
    let link = host
        .netns
        .ip_json(&["-d", "link", "show", &hname("V", "1")]);
    assert_eq!(
        link[0]["master"], "G00000000VV",
        "host end enslaved to the VRF: {link}"
    );
    for i in 0..2 {
        assert!(a1.ping(&ip_of(&r2, i)));
    }
    rt.check(&c("1"), &a1.attachment()).unwrap();
    rt.del(&c("1"), &a1.attachment()).unwrap();
    rt.del(&c("2"), &a2.attachment()).unwrap();
}
