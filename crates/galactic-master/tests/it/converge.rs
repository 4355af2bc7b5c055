//! One convergence of a VPC's whole node state (`table` mode, on any kernel; the VRF cases are
//! in `vrf_domains.rs`): with live pods of one VPC (veth and tap attachments, both families),
//! each kind of object removed behind the records is named by the earlier attachments' CHECK,
//! with what restores it, and brought back by the next ADD of another attachment of the VPC or
//! by a CNI GC, for every attachment, not only the one being added. A DEL racing a
//! convergence never sees its attachment's objects re-created.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{ip_of, Host, Pod};
use galactic_testkit::plugin_binary;
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};

use crate::common::{cni, domain, hname};

const VPC: &str = "C";
const REMEDY: &str = "CNI GC or the next ADDs of VPC C on this node restore it";
const DOMAIN_REMEDY: &str = "the next ADD of VPC C on this node restores it, or CNI GC";

fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime()
        .binary("galactic-cni", cni())
        .binary("galactic-tap-cni", plugin_binary("galactic-tap-cni"))
}

fn veth(att: &str) -> Conflist {
    Conflist::new(
        "1.1.0",
        "pods-c",
        vec![
            json!({"type": "galactic-cni", "vpc": VPC, "vpcattachment": att,
            "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd7c:1::/64", "ipv4_subnet": "10.124.0.0/24"}}),
        ],
    )
}

fn tap(att: &str) -> Conflist {
    Conflist::new(
        "1.1.0",
        "vms-c",
        vec![
            json!({"type": "galactic-tap-cni", "vpc": VPC, "vpcattachment": att,
            "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd7c:2::/64", "ipv4_subnet": "10.124.1.0/24"}}),
        ],
    )
}

/// Two pods and a VM of VPC C, attached.
struct Vpc<'a> {
    host: &'a Host,
    rt: Runtime<'a>,
    pods: [Pod; 2],
    vm: Pod,
    results: Vec<Value>,
    table: String,
}

impl<'a> Vpc<'a> {
    fn up(host: &'a Host, tag: &str) -> Self {
        let rt = runtime(host);
        let pods = [Pod::new(&format!("{tag}1")), Pod::new(&format!("{tag}2"))];
        let vm = Pod::new(&format!("{tag}v"));
        let mut results = Vec::new();
        for (i, pod) in pods.iter().enumerate() {
            results.push(
                rt.add(&veth(&(i + 1).to_string()), &pod.attachment())
                    .unwrap(),
            );
        }
        results.push(rt.add(&tap("3"), &vm.attachment()).unwrap());
        let table = domain(host, VPC).unwrap()["table"].to_string();
        Self {
            host,
            rt,
            pods,
            vm,
            results,
            table,
        }
    }

    fn ip(&self, args: &[&str]) -> String {
        self.host.netns.ip(args)
    }

    /// One `nft` command in the node's namespace (it must succeed).
    fn nft(&self, command: &str) {
        let out = self.host.netns.exec(&["nft", command]);
        assert!(
            out.status.success(),
            "nft {command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The VPC's firewall mark as recorded, `0x…`.
    fn mark(&self) -> String {
        let value = domain(self.host, VPC).unwrap()["mark"]["value"]
            .as_u64()
            .unwrap();
        format!("{value:#x}")
    }

    /// The CHECK of attachment `i` (0, 1: the pods; 2: the VM).
    fn check(&self, i: usize) -> Result<(), String> {
        let (list, att) = self.attachment(i);
        self.rt.check(&list, &att).map_err(|e| e.expect_error(100))
    }

    fn attachment(&self, i: usize) -> (Conflist, Attachment) {
        match i {
            2 => (tap("3"), self.vm.attachment()),
            _ => (veth(&(i + 1).to_string()), self.pods[i].attachment()),
        }
    }

    /// Every earlier attachment passes CHECK, the pods reach each other and their gateways in
    /// both families, and the pods' permanent neighbours are there.
    fn assert_healthy(&self, after: &str) {
        for i in 0..3 {
            if let Err(msg) = self.check(i) {
                panic!("after {after}: CHECK of attachment {i}: {msg}");
            }
        }
        for f in 0..2 {
            let (a, b) = (ip_of(&self.results[0], f), ip_of(&self.results[1], f));
            assert!(self.pods[0].ping(&b), "after {after}: p1 → p2 {b}");
            assert!(self.pods[1].ping(&a), "after {after}: p2 → p1 {a}");
            let gw = self.results[0]["ips"][f]["gateway"].as_str().unwrap();
            assert!(
                self.pods[0].ping(gw),
                "after {after}: p1 → its gateway {gw}"
            );
        }
        for (i, r) in self.results[..2].iter().enumerate() {
            let neigh = self.ip(&[
                "-6",
                "neigh",
                "show",
                "dev",
                &hname(VPC, &(i + 1).to_string()),
            ]);
            let addr = ip_of(r, 0);
            assert!(
                neigh
                    .lines()
                    .any(|l| l.starts_with(&addr) && l.contains("PERMANENT")),
                "after {after}: permanent neighbour {addr}: {neigh}"
            );
        }
    }

    /// CHECK of attachment `i` fails and names each of `wants`.
    fn assert_check_names(&self, i: usize, wants: &[String]) {
        let msg = self.check(i).unwrap_err();
        for want in wants {
            assert!(
                msg.contains(want.as_str()),
                "CHECK of {i} names {want:?}: {msg}"
            );
        }
    }

    /// The next ADD of another attachment of the VPC (added, checked, then deleted again).
    fn repair_by_add(&self, tag: &str) {
        let pod = Pod::new(tag);
        let list = veth("9");
        self.rt.add(&list, &pod.attachment()).unwrap();
        self.rt.check(&list, &pod.attachment()).unwrap();
        self.rt.del(&list, &pod.attachment()).unwrap();
    }

    /// A CNI GC of the pods' network listing every attachment.
    fn repair_by_gc(&self) {
        let atts: Vec<Attachment> = self.pods.iter().map(Pod::attachment).collect();
        self.rt
            .gc(&veth("1"), &atts.iter().collect::<Vec<_>>())
            .unwrap();
    }

    /// The first route of `table` through `dev` in `family`, as `ip route` prints it.
    fn pod_route(&self, family: &str, dev: &str) -> String {
        let routes = self.ip(&[family, "route", "show", "table", &self.table, "dev", dev]);
        routes
            .split_whitespace()
            .next()
            .unwrap_or_else(|| panic!("a {family} route through {dev}: {routes}"))
            .to_owned()
    }

    /// A route's destination as the masters name it (a host route with its length).
    fn dst(route: &str) -> String {
        match (route.contains('/'), route.contains(':')) {
            (true, _) => route.to_owned(),
            (false, true) => format!("{route}/128"),
            (false, false) => format!("{route}/32"),
        }
    }

    fn down(self) {
        for i in 0..3 {
            let (list, att) = self.attachment(i);
            self.rt.del(&list, &att).unwrap();
        }
    }
}

/// The "converge" info lines' restorations.
fn restorations(host: &Host) -> Vec<String> {
    host.node
        .log_lines()
        .into_iter()
        .filter(|l| {
            l["msg"]
                .as_str()
                .is_some_and(|m| m.starts_with("converge: restored"))
        })
        .flat_map(|l| {
            l["restored"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|r| r.as_str().map(str::to_owned))
        })
        .collect()
}

#[test]
fn an_attachments_rules_addresses_routes_and_neighbours_removed_behind_its_record_are_restored_by_the_next_add_of_another(
) {
    galactic_testkit::privileged!();
    let host = Host::new(
        "cvadd",
        json!({"routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let vpc = Vpc::up(&host, "cva");
    vpc.assert_healthy("ADD");
    let t = vpc.table.clone();
    let (h1, h2, hv) = (hname(VPC, "1"), hname(VPC, "2"), hname(VPC, "3"));
    let gw6 = vpc.results[0]["ips"][0]["gateway"]
        .as_str()
        .unwrap()
        .to_owned();
    let p1v6 = ip_of(&vpc.results[0], 0);

    // Behind the records: p1's and the VM's elements of the VPC-mark map, p1's IPv6 gateway
    // address and its permanent neighbour, p2's IPv6 pod route and the VM's IPv4 one.
    let mark = vpc.mark();
    for dev in [&h1, &hv] {
        vpc.nft(&format!(
            "delete element inet galactic vpc_marks {{ \"{dev}\" }}"
        ));
    }
    vpc.ip(&["-6", "addr", "del", &format!("{gw6}/128"), "dev", &h1]);
    vpc.ip(&["-6", "neigh", "del", &p1v6, "dev", &h1]);
    let r2 = vpc.pod_route("-6", &h2);
    let rv = vpc.pod_route("-4", &hv);
    vpc.ip(&["-6", "route", "del", &r2, "dev", &h2, "table", &t]);
    vpc.ip(&["-4", "route", "del", &rv, "dev", &hv, "table", &t]);
    let (r2, rv) = (Vpc::dst(&r2), Vpc::dst(&rv));

    vpc.assert_check_names(
        0,
        &[
            format!("element '{h1} : {mark}' is missing from nftables map 'inet galactic vpc_marks' (its packets do not reach table {t}); {REMEDY}"),
            format!("gateway address {gw6}/128 is not on {h1}; {REMEDY}"),
        ],
    );
    vpc.assert_check_names(
        1,
        &[format!(
            "route {r2} dev {h2} is missing from table {t}; {REMEDY}"
        )],
    );
    vpc.assert_check_names(
        2,
        &[
            format!("element '{hv} : {mark}' is missing from nftables map"),
            format!("route {rv} dev {hv} is missing from table {t}; {REMEDY}"),
        ],
    );

    vpc.repair_by_add("cvan");
    vpc.assert_healthy("the next ADD");
    let restored = restorations(&host);
    for want in [
        format!("element '{h1} : {mark}' of map inet galactic vpc_marks"),
        format!("element '{hv} : {mark}' of map inet galactic vpc_marks"),
        format!("gateway address {gw6}/128 on {h1}"),
        format!("permanent neighbour {p1v6} on {h1}"),
        format!("route {r2} dev {h2} in table {t}"),
        format!("route {rv} dev {hv} in table {t}"),
    ] {
        assert!(
            restored.contains(&want),
            "the convergence names {want:?}: {restored:?}"
        );
    }
    vpc.down();
}

#[test]
fn the_domains_objects_and_the_whole_tables_routes_removed_behind_the_records_are_restored_by_gc() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "cvgc",
        json!({"routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let vpc = Vpc::up(&host, "cvg");
    let t = vpc.table.clone();
    let gw6 = vpc.results[0]["ips"][0]["gateway"]
        .as_str()
        .unwrap()
        .to_owned();
    let gw4 = vpc.results[0]["ips"][1]["gateway"]
        .as_str()
        .unwrap()
        .to_owned();

    // A gateway's local route, then the table's closing routes: each named, each restored.
    vpc.ip(&[
        "-4", "route", "del", "local", &gw4, "dev", "lo", "table", &t,
    ]);
    vpc.assert_check_names(
        0,
        &[format!(
            "local route for gateway {gw4} is missing from table {t}; {DOMAIN_REMEDY}"
        )],
    );
    vpc.repair_by_gc();
    vpc.assert_healthy("GC after the gateway route");

    for f in ["-4", "-6"] {
        vpc.ip(&[f, "route", "del", "unreachable", "default", "table", &t]);
    }
    vpc.assert_check_names(
        2,
        &[format!("'unreachable default' is missing from table {t}")],
    );
    vpc.repair_by_gc();
    vpc.assert_healthy("GC after the closing routes");

    // The node's VPC-mark chain with its map (every element), and the VPC's IPv6 mark rule.
    let mark = vpc.mark();
    vpc.nft("delete table inet galactic");
    vpc.ip(&[
        "-6",
        "rule",
        "del",
        "pref",
        "1000",
        "fwmark",
        &format!("{mark}/0xff000000"),
        "lookup",
        &t,
    ]);
    vpc.assert_check_names(
        1,
        &[
            format!("nftables chain 'inet galactic vpc_marks' (the VPC marks of table-mode routing domains) is missing; {DOMAIN_REMEDY}"),
            format!("IPv6 rule 'fwmark {mark}/0xff000000 lookup {t}' (the VPC's traffic) is missing; {DOMAIN_REMEDY}"),
            format!("element '{} : {mark}' is missing", hname(VPC, "2")),
        ],
    );
    vpc.repair_by_gc();
    vpc.assert_healthy("GC after the VPC-mark chain and rule");

    // The whole table: every pod route, the gateways' local routes, the closing routes.
    for f in ["-4", "-6"] {
        vpc.ip(&[f, "route", "flush", "table", &t]);
    }
    let h1 = hname(VPC, "1");
    vpc.assert_check_names(
        0,
        &[
            format!("local route for gateway {gw6} is missing from table {t}"),
            format!("dev {h1} is missing from table {t}; {REMEDY}"),
        ],
    );
    vpc.repair_by_gc();
    vpc.assert_healthy("GC after the flush");
    let restored = restorations(&host);
    for (i, dev) in [h1, hname(VPC, "2"), hname(VPC, "3")].iter().enumerate() {
        let addr = ip_of(&vpc.results[i], 1);
        let want = format!("route {addr}/32 dev {dev} in table {t}");
        assert!(restored.contains(&want), "GC names {want:?}: {restored:?}");
    }
    assert!(
        host.node.log_lines().iter().any(|l| l["msg"]
            .as_str()
            .is_some_and(|m| m.starts_with("GC: routing domain repaired"))),
        "GC's repair of the domain is logged"
    );
    vpc.down();
}

/// Every rule, route and VPC-mark map element of the node that names `dev`.
fn traces_of(host: &Host, dev: &str) -> Vec<String> {
    let ruleset = host.netns.exec(&["nft", "list", "ruleset"]);
    let quoted = format!("\"{dev}\"");
    let elements: Vec<String> = String::from_utf8_lossy(&ruleset.stdout)
        .split([',', '\n', '{', '}'])
        .filter(|e| e.contains(&quoted))
        .map(|e| e.trim().to_owned())
        .collect();
    ["-4", "-6"]
        .iter()
        .flat_map(|f| {
            let rules = host.netns.ip(&[f, "rule", "show"]);
            let routes = host.netns.ip(&[f, "route", "show", "table", "all"]);
            rules
                .lines()
                .chain(routes.lines())
                .filter(|l| l.split_whitespace().any(|w| w == dev))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .chain(elements)
        .collect()
}

#[test]
fn a_del_never_sees_its_objects_recreated_by_a_concurrent_convergence() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "cvdel",
        json!({"routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&host);
    // A tap's host interface outlives its rules during DEL (no veth peer takes it down
    // early): held after its rules are removed, the DEL races an ADD's convergence.
    let vm = Pod::new("cvdv");
    rt.add(&tap("3"), &vm.attachment()).unwrap();
    let pod = Pod::new("cvdp");
    std::thread::scope(|s| {
        let held = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", "del-after-leave:pause");
        let del = s.spawn(move || held.del(&tap("3"), &vm.attachment()));
        std::thread::sleep(std::time::Duration::from_millis(300));
        rt.add(&veth("1"), &pod.attachment()).unwrap();
        del.join().unwrap().unwrap();
    });
    let hv = hname(VPC, "3");
    assert_eq!(
        traces_of(&host, &hv),
        Vec::<String>::new(),
        "nothing names {hv}"
    );

    // Parallel ADDs of the VPC while DELs of its other attachments run.
    let olds: Vec<Pod> = (0..4).map(|i| Pod::new(&format!("cvdo{i}"))).collect();
    let news: Vec<Pod> = (0..4).map(|i| Pod::new(&format!("cvdn{i}"))).collect();
    for (i, p) in olds.iter().enumerate() {
        rt.add(&veth(&(10 + i).to_string()), &p.attachment())
            .unwrap();
    }
    std::thread::scope(|s| {
        for (i, p) in olds.iter().enumerate() {
            let rt = rt.clone();
            s.spawn(move || {
                rt.del(&veth(&(10 + i).to_string()), &p.attachment())
                    .unwrap()
            });
        }
        for (i, p) in news.iter().enumerate() {
            let rt = rt.clone();
            s.spawn(move || {
                rt.add(&veth(&(20 + i).to_string()), &p.attachment())
                    .unwrap()
            });
        }
    });
    for (i, new) in news.iter().enumerate() {
        let dev = hname(VPC, &(10 + i).to_string());
        assert_eq!(
            traces_of(&host, &dev),
            Vec::<String>::new(),
            "nothing names {dev}"
        );
        rt.check(&veth(&(20 + i).to_string()), &new.attachment())
            .unwrap();
    }
    for (i, p) in news.iter().enumerate() {
        rt.del(&veth(&(20 + i).to_string()), &p.attachment())
            .unwrap();
    }
    rt.del(&veth("1"), &pod.attachment()).unwrap();
}

#[test]
fn a_convergence_never_joins_an_attachment_whose_add_then_rolls_back() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "cvrb",
        json!({"routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&host);
    let first = Pod::new("cvrb1");
    rt.add(&veth("1"), &first.attachment()).unwrap();
    // Held after its host interface exists, then failing before it joins the domain: a
    // convergence that ran meanwhile must not have joined it (its rollback would not know).
    let (failing, other) = (Pod::new("cvrbf"), Pod::new("cvrbo"));
    std::thread::scope(|s| {
        let held = rt.clone().env(
            "GALACTIC_FAILPOINTS",
            "after-interface:pause,after-firewall",
        );
        let add = s.spawn(move || held.add(&veth("5"), &failing.attachment()));
        std::thread::sleep(std::time::Duration::from_millis(500));
        rt.add(&veth("2"), &other.attachment()).unwrap();
        assert!(add
            .join()
            .unwrap()
            .unwrap_err()
            .expect_error(999)
            .contains("after-firewall"));
    });
    let dev = hname(VPC, "5");
    assert_eq!(
        traces_of(&host, &dev),
        Vec::<String>::new(),
        "nothing names {dev}"
    );
    rt.del(&veth("2"), &other.attachment()).unwrap();
    rt.del(&veth("1"), &first.attachment()).unwrap();
}
