//! Routing domains that agree with the kernel, on any kernel (the VRF cases are in
//! `vrf_domains.rs`, run by the production-kernel tier): `table`-mode state removed behind the
//! record is reported by CHECK and restored by the next ADD of the VPC (for every attachment of
//! it: `converge.rs` has each kind of object), and the backend in force
//! (and why) is what the node config can really get here: `auto` with the Kubernetes publisher
//! never falls back to `table` silently.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{ip_of, Host, Pod};
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};

use crate::common::{domain, hname, runtime};

fn master(vpc: &str, att: &str, v6: &str, v4: &str) -> Value {
    json!({"type": "galactic-cni", "vpc": vpc, "vpcattachment": att,
           "ipam": {"type": "galactic-ipam", "ipv6_subnet": v6, "ipv4_subnet": v4}})
}

fn conf(vpc: &str, att: &str, v6: &str, v4: &str) -> Conflist {
    Conflist::new("1.1.0", "tenant-d", vec![master(vpc, att, v6, v4)])
}

/// `ip -4`/`-6` for the family of `addr`.
fn family_of(addr: &str) -> &'static str {
    if addr.contains(':') {
        "-6"
    } else {
        "-4"
    }
}

/// Whether this kernel can create VRF devices (the native run's kernel cannot).
fn kernel_has_vrf() -> bool {
    let probe = TestNetns::new("dprobe");
    probe
        .try_ip(&["link", "add", "Gprobe", "type", "vrf", "table", "4242"])
        .0
}

/// The STATUS log line naming the backend in force.
fn status_line(host: &Host) -> Value {
    host.node
        .log_lines()
        .into_iter()
        .rev()
        .find(|l| l["msg"] == "STATUS: routing domain backend")
        .expect("STATUS logs the routing domain backend")
}

#[test]
fn table_state_removed_behind_the_record_is_reported_by_check_and_restored_by_the_next_add() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "dheal",
        json!({"routing_domain": "table"}),
        &["galactic-ipam", "galactic-route"],
    );
    let rt = runtime(&host);
    let (p1, p2) = (Pod::new("dheal1"), Pod::new("dheal2"));
    // The first attachment terminates a network, so galactic-route checks the table too.
    let route = json!({"type": "galactic-route", "vpc": "T", "vpcattachment": "1",
                       "terminations": [{"network": "198.51.102.0/24"}]});
    let c1 = Conflist::new(
        "1.1.0",
        "tenant-d",
        vec![master("T", "1", "fd71:1::/64", "10.71.0.0/24"), route],
    );
    let c2 = conf("T", "2", "fd71:1::/64", "10.71.0.0/24");
    let r1 = rt.add(&c1, &p1.attachment()).unwrap();
    let table = domain(&host, "T").unwrap()["table"].to_string();
    let gateways: Vec<String> = (0..2)
        .map(|i| r1["ips"][i]["gateway"].as_str().unwrap().to_owned())
        .collect();

    // Behind the record: the table flushed, the gateways' rules and the attachment's map element
    // deleted, the local rule back at priority 0 (as after a reboot with the state directory
    // kept).
    let mark = domain(&host, "T").unwrap()["mark"]["value"]
        .as_u64()
        .unwrap();
    let h1 = hname("T", "1");
    let nft = host.netns.exec(&[
        "nft",
        &format!("delete element inet galactic vpc_marks {{ \"{h1}\" }}"),
    ]);
    assert!(nft.status.success(), "{nft:?}");
    for family in ["-4", "-6"] {
        host.netns.ip(&[family, "route", "flush", "table", &table]);
        host.netns
            .ip(&[family, "rule", "add", "pref", "0", "lookup", "local"]);
        host.netns
            .ip(&[family, "rule", "del", "pref", "32765", "lookup", "local"]);
    }
    for gw in &gateways {
        host.netns.ip(&[
            family_of(gw),
            "rule",
            "del",
            "pref",
            "1001",
            "from",
            gw,
            "lookup",
            &table,
        ]);
    }
    let msg = rt
        .check(&c1, &p1.attachment())
        .unwrap_err()
        .expect_error(100);
    let restores = "the next ADD of VPC T on this node restores it";
    for want in [
        format!("'unreachable default' is missing from table {table}"),
        "local table rule is still at priority 0".to_owned(),
        format!(
            "local route for gateway {} is missing from table {table}; {restores}",
            gateways[0]
        ),
        format!(
            "rule 'iif lo from {} lookup {table}' is missing; {restores}",
            gateways[1]
        ),
        format!(
            "element '{h1} : {mark:#x}' is missing from nftables map 'inet galactic vpc_marks' \
             (its packets do not reach table {table}); CNI GC or the next ADDs of VPC T on this \
             node restore it"
        ),
    ] {
        assert!(msg.contains(&want), "CHECK names {want:?}: {msg}");
    }
    let route = rt
        .plugin(&c1, 1, "CHECK", &p1.attachment(), Some(&r1))
        .expect_error(100);
    for want in [
        format!("'unreachable default' is missing from table {table}"),
        format!(
            "rule 'iif lo from {} lookup {table}' is missing; {restores}",
            gateways[0]
        ),
    ] {
        assert!(
            route.contains(&want),
            "galactic-route's CHECK names {want:?}: {route}"
        );
    }

    // The next ADD of the VPC restores the domain's own objects.
    let r2 = rt.add(&c2, &p2.attachment()).unwrap();
    for family in ["-4", "-6"] {
        let closing = host.netns.ip(&[
            family,
            "route",
            "show",
            "table",
            &table,
            "type",
            "unreachable",
        ]);
        assert!(closing.contains("default"), "{family} {table}: {closing}");
        let rules = host.netns.ip(&[family, "rule", "show"]);
        assert!(!rules.lines().any(|l| l.starts_with("0:")), "{rules}");
    }
    for gw in &gateways {
        let rules = host
            .netns
            .ip(&[family_of(gw), "rule", "show", "pref", "1001"]);
        assert!(
            rules.contains(gw.as_str()),
            "gateway rule for {gw}: {rules}"
        );
        let local = host.netns.ip(&[
            family_of(gw),
            "route",
            "show",
            "table",
            &table,
            "type",
            "local",
        ]);
        assert!(local.contains(gw.as_str()), "local route for {gw}: {local}");
    }
    let repaired = host
        .node
        .log_lines()
        .into_iter()
        .find(|l| {
            l["msg"]
                .as_str()
                .unwrap_or("")
                .contains("routing domain repaired")
        })
        .expect("the repair is logged");
    assert_eq!(repaired["level"], "WARN", "{repaired}");
    assert!(
        repaired["restored"]
            .as_array()
            .is_some_and(|r| r.len() >= 3),
        "{repaired}"
    );
    rt.check(&c2, &p2.attachment()).unwrap();
    // The same ADD converged the VPC's other attachments: the first one's own rules are back
    // too (its master's CHECK passes without adding it again). Its termination routes are
    // galactic-route's, which its own ADD restores: adding it again does.
    let master = rt.plugin(&c1, 0, "CHECK", &p1.attachment(), Some(&r1));
    assert!(master.success, "{}", master.stdout);
    let route = rt
        .plugin(&c1, 1, "CHECK", &p1.attachment(), Some(&r1))
        .expect_error(100);
    assert!(route.contains("termination 198.51.102.0/24"), "{route}");
    rt.add(&c1, &p1.attachment()).unwrap();
    rt.check(&c1, &p1.attachment()).unwrap();
    for (i, gw) in gateways.iter().enumerate() {
        assert!(p1.ping(&ip_of(&r2, i)), "p1 → p2 {}", ip_of(&r2, i));
        assert!(p2.ping(&ip_of(&r1, i)), "p2 → p1 {}", ip_of(&r1, i));
        assert!(p1.ping(gw), "p1 → its gateway {gw}");
    }
    rt.del(&c1, &p1.attachment()).unwrap();
    rt.del(&c2, &p2.attachment()).unwrap();
}

#[test]
fn auto_never_falls_back_to_table_silently_with_the_kubernetes_publisher() {
    galactic_testkit::privileged!();
    let c = conf("K", "1", "fd72:1::/64", "10.72.0.0/24");
    let pod = Pod::new("dkube");
    let kube = Host::new(
        "dkube",
        json!({"publisher": "kubernetes", "routing_domain": "auto"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&kube);
    if kernel_has_vrf() {
        // A kernel with VRF: auto finds it, says so, and ADD uses it.
        rt.status(&c).unwrap();
        let line = status_line(&kube);
        assert_eq!(line["backend"], "vrf", "{line}");
        rt.add(&c, &pod.attachment()).unwrap();
        assert_eq!(domain(&kube, "K").unwrap()["backend"], "vrf");
        rt.del(&c, &pod.attachment()).unwrap();
        return;
    }
    // STATUS is not ready, with the message ADD refuses with; ADD refuses before anything
    // changed (no allocation, record, domain or interface).
    let status = rt.status(&c).unwrap_err().expect_error(50);
    let before = kube.snapshot();
    let add = rt.add(&c, &pod.attachment()).unwrap_err().expect_error(7);
    assert_eq!(kube.snapshot(), before, "a refused ADD changes nothing");
    for msg in [&status, &add] {
        for want in [
            "routing_domain is auto and this kernel cannot create VRF devices",
            "publisher: kubernetes",
            "galactic-router installs its SRv6 routes only through a VPC's VRF device",
            "set routing_domain to table in the node config (/etc/galactic/node.json",
            "GALACTIC_CNI_ROUTING_DOMAIN=table",
        ] {
            assert!(msg.contains(want), "{want:?}: {msg}");
        }
    }
    assert!(status.starts_with("routing domains: "), "{status}");
    assert!(domain(&kube, "K").is_none());
    assert!(!kube.netns.try_ip(&["link", "show", &hname("K", "1")]).0);
    assert!(!pod.ns.try_ip(&["link", "show", "eth0"]).0);

    // `vrf` on this kernel is refused the same way.
    let vrf = Host::new("dvrf", json!({"routing_domain": "vrf"}), &["galactic-ipam"]);
    let msg = runtime(&vrf)
        .add(&c, &pod.attachment())
        .unwrap_err()
        .expect_error(7);
    assert!(
        msg.contains("routing_domain is vrf but this kernel cannot create VRF devices"),
        "{msg}"
    );
    runtime(&vrf).status(&c).unwrap_err().expect_error(50);

    // An explicit `table` is accepted with the Kubernetes publisher, and STATUS says why.
    let table = Host::new(
        "dtab",
        json!({"publisher": "kubernetes", "routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&table);
    rt.status(&c).unwrap();
    let line = status_line(&table);
    assert_eq!(
        (
            &line["backend"],
            &line["routingDomain"],
            &line["publisher"],
            &line["level"]
        ),
        (
            &json!("table"),
            &json!("table"),
            &json!("kubernetes"),
            &json!("INFO")
        ),
        "{line}"
    );
    assert_eq!(line["reason"], "routing_domain is table", "{line}");
    assert_eq!(line["recorded"], json!({"vrf": 0, "table": 0}), "{line}");
    rt.add(&c, &pod.attachment()).unwrap();
    assert_eq!(domain(&table, "K").unwrap()["backend"], "table");
    // The recorded domains keep their backend: STATUS counts them.
    rt.status(&c).unwrap();
    assert_eq!(
        status_line(&table)["recorded"],
        json!({"vrf": 0, "table": 1})
    );
    rt.del(&c, &pod.attachment()).unwrap();

    // The local publisher falls back to table under auto, and says so.
    let local = Host::new(
        "dloc",
        json!({"routing_domain": "auto"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&local);
    rt.status(&c).unwrap();
    let line = status_line(&local);
    assert_eq!(line["backend"], "table", "{line}");
    assert!(
        line["reason"]
            .as_str()
            .unwrap()
            .contains("cannot create VRF devices (no CONFIG_NET_VRF), and the local publisher"),
        "{line}"
    );
    rt.add(&c, &pod.attachment()).unwrap();
    rt.del(&c, &pod.attachment()).unwrap();
}
