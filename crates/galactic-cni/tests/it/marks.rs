//! Table mode's selection of a VPC's traffic by firewall mark (`docs/decisions/0076`): one rule
//! per VPC and family, one map element per attachment; a pod that marks its own packets still
//! reaches its VPC only; a node of the previous release (one `iif` rule per host interface, a
//! domain record without a mark) is migrated by the next ADD of the VPC or by GC without its
//! traffic ever being cut off.

use crate::*;
use galactic_testkit::host::{ip_of, Pod};
use galactic_testkit::privileged::TestNetns;
use serde_json::Value;

/// One `nft` command in `ns` (it must succeed); its output.
fn nft(ns: &TestNetns, command: &str) -> String {
    let out = ns.exec(&["nft", command]);
    assert!(
        out.status.success(),
        "nft {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The VPC's recorded mark, `0x…`.
fn mark(host: &Host, vpc: &str) -> String {
    let value = domain(host, vpc).unwrap()["mark"]["value"]
        .as_u64()
        .unwrap();
    format!("{value:#x}")
}

/// `ip rule show` of both families, one rule a line.
fn rules(host: &Host) -> Vec<String> {
    ["-4", "-6"]
        .iter()
        .flat_map(|f| {
            host.netns
                .ip(&[f, "rule", "show"])
                .lines()
                .map(|l| format!("{f} {l}"))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// How many packets from `source` reached `pod`'s namespace (a counter its own nft table
/// keeps; see [`watch`]).
fn arrived(pod: &Pod, source: &str) -> u64 {
    let listed = nft(&pod.ns, "list table inet watch");
    listed
        .lines()
        .find(|l| l.contains(source))
        .and_then(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "packets")?;
            words.get(at + 1)?.parse().ok()
        })
        .unwrap_or_else(|| panic!("a counter for {source}: {listed}"))
}

/// Counts, in `pod`'s namespace, the packets that arrive from each of `sources`: one-way
/// delivery, which a ping cannot show when the reply has no way back.
fn watch(pod: &Pod, sources: &[String]) {
    nft(&pod.ns, "add table inet watch");
    nft(
        &pod.ns,
        "add chain inet watch in { type filter hook prerouting priority 0; policy accept; }",
    );
    for s in sources {
        let family = if s.contains(':') { "ip6" } else { "ip" };
        nft(
            &pod.ns,
            &format!("add rule inet watch in {family} saddr {s} counter"),
        );
    }
}

/// `ping`'s arguments for two echo requests marked `mark` (`0x…`; `SO_MARK`, which ping takes
/// in decimal only).
fn marked_ping(mark: &str, target: &str) -> Vec<String> {
    let decimal = u32::from_str_radix(mark.trim_start_matches("0x"), 16).unwrap();
    [
        "ping",
        "-c",
        "2",
        "-i",
        "0.2",
        "-W",
        "1",
        "-m",
        &decimal.to_string(),
        target,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Pings `target` from `ns` with every packet marked `mark`; whether it answered. A ping that
/// could not start (a refused argument) fails the test instead of passing for isolation.
fn ping_marked_from(ns: &TestNetns, target: &str, mark: &str) -> bool {
    let args = marked_ping(mark, target);
    let out = ns.exec(&args.iter().map(String::as_str).collect::<Vec<_>>());
    // A refused argument exits 1 as an unanswered ping does, but prints no header.
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("PING"),
        "ping {args:?} did not run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.success()
}

fn ping_marked(pod: &Pod, target: &str, mark: &str) -> bool {
    ping_marked_from(&pod.ns, target, mark)
}

#[test]
fn rules_grow_with_vpcs_and_pods_that_mark_their_packets_still_reach_their_vpc_only() {
    galactic_testkit::privileged!();
    let host = table_host("mkiso");
    let rt = runtime(&host);
    let (a1, a2, b1) = (Pod::new("mka1"), Pod::new("mka2"), Pod::new("mkb1"));
    let conf_a = |att: &str| conf("1.1.0", "A", att, pools("fd66:1::/64", "10.66.0.0/24"));
    let conf_b = conf("1.1.0", "B", "1", pools("fd67:1::/64", "10.67.0.0/24"));
    let r1 = rt.add(&conf_a("1"), &a1.attachment()).unwrap();
    let r2 = rt.add(&conf_a("2"), &a2.attachment()).unwrap();
    let rb = rt.add(&conf_b, &b1.attachment()).unwrap();
    let (mark_a, mark_b) = (mark(&host, "A"), mark(&host, "B"));
    assert_ne!(mark_a, mark_b, "each VPC its own mark");

    // Per VPC and family one rule at 1000; no rule names a host interface.
    let at_1000: Vec<String> = rules(&host)
        .into_iter()
        .filter(|l| l.split_whitespace().nth(1) == Some("1000:"))
        .collect();
    assert_eq!(at_1000.len(), 4, "two VPCs × two families: {at_1000:?}");
    assert!(
        at_1000
            .iter()
            .all(|l| l.contains("fwmark") && !l.contains(" iif ")),
        "{at_1000:?}"
    );
    let map = nft(&host.netns, "list map inet galactic vpc_marks");
    for (vpc, att, m) in [
        ("A", "1", &mark_a),
        ("A", "2", &mark_a),
        ("B", "1", &mark_b),
    ] {
        let element = format!(
            "\"{}\" : {:#010x}",
            hname(vpc, att),
            u64::from_str_radix(&m[2..], 16).unwrap()
        );
        assert!(map.contains(&element), "{element}: {map}");
    }

    // b1 marks every packet with VPC A's mark, by socket option and by its own nft rule: its
    // packets still reach nothing of VPC A (one way included), and a1 and a2 still talk.
    let b_sources: Vec<String> = (0..2).map(|i| ip_of(&rb, i)).collect();
    watch(
        &a1,
        &[b_sources.clone(), vec!["10.250.0.2".to_owned()]].concat(),
    );
    nft(&b1.ns, "add table inet spoof");
    nft(
        &b1.ns,
        "add chain inet spoof out { type route hook output priority -150; policy accept; }",
    );
    nft(
        &b1.ns,
        &format!("add rule inet spoof out meta mark set {mark_a}"),
    );
    for i in 0..2 {
        let target = ip_of(&r1, i);
        assert!(
            !ping_marked(&b1, &target, &mark_a),
            "b1 (marked) → a1 {target}"
        );
        assert!(!b1.ping(&target), "b1 (nft-marked) → a1 {target}");
        assert!(a1.ping(&ip_of(&r2, i)), "a1 → a2 {}", ip_of(&r2, i));
        assert!(
            ping_marked(&a2, &ip_of(&r1, i), &mark_b),
            "a2 (marked B) → a1 still"
        );
    }
    for source in &b_sources {
        assert_eq!(
            arrived(&a1, source),
            0,
            "nothing from b1 {source} reached a1"
        );
    }

    // A non-VPC interface's packets (marks do not cross a veth into the host either) find no
    // VPC rule: they look up main, which has no route to a pod.
    let outside = TestNetns::new("mkout");
    host.netns.ip(&[
        "link",
        "add",
        "mkout0",
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        outside.name(),
    ]);
    host.netns
        .ip(&["addr", "add", "10.250.0.1/30", "dev", "mkout0"]);
    host.netns.ip(&["link", "set", "mkout0", "up"]);
    outside.ip(&["addr", "add", "10.250.0.2/30", "dev", "eth0"]);
    outside.ip(&["link", "set", "eth0", "up"]);
    outside.ip(&["route", "add", "default", "via", "10.250.0.1"]);
    let target = ip_of(&r1, 1);
    assert!(
        !ping_marked_from(&outside, &target, &mark_a),
        "outside (marked) → a1 {target}"
    );
    assert_eq!(
        arrived(&a1, "10.250.0.2"),
        0,
        "nothing from outside reached a1"
    );
    for (pod, c) in [(&a1, conf_a("1")), (&a2, conf_a("2")), (&b1, conf_b)] {
        rt.del(&c, &pod.attachment()).unwrap();
    }
    assert!(
        !nft(&host.netns, "list map inet galactic vpc_marks").contains("\"G"),
        "every element goes with its attachment"
    );
}

/// Puts the node back as the previous release left it: per host interface an `iif` rule in
/// each family and no element, no VPC rule, the domain record without a mark.
fn as_previous_release(host: &Host, vpc: &str, atts: &[&str]) {
    let record = domain(host, vpc).unwrap();
    let table = record["table"].to_string();
    let m = mark(host, vpc);
    for att in atts {
        let dev = hname(vpc, att);
        for f in ["-4", "-6"] {
            host.netns.ip(&[
                f, "rule", "add", "pref", "1000", "iif", &dev, "lookup", &table,
            ]);
        }
        nft(
            &host.netns,
            &format!("delete element inet galactic vpc_marks {{ \"{dev}\" }}"),
        );
    }
    for f in ["-4", "-6"] {
        host.netns.ip(&[
            f,
            "rule",
            "del",
            "pref",
            "1000",
            "fwmark",
            &format!("{m}/0xff000000"),
            "lookup",
            &table,
        ]);
    }
    let mut old = record.clone();
    old.as_object_mut().unwrap().remove("mark");
    let hex = galactic_core::ident::VpcId::parse(vpc).unwrap().hex();
    std::fs::write(
        host.path("state").join(format!("routing/vpc-{hex}.json")),
        serde_json::to_vec(&old).unwrap(),
    )
    .unwrap();
}

/// The `iif` rules naming `dev`.
fn iif_rules(host: &Host, dev: &str) -> Vec<String> {
    rules(host)
        .into_iter()
        .filter(|l| l.contains(&format!("iif {dev} ")))
        .collect()
}

#[test]
fn a_node_of_the_previous_release_is_migrated_by_the_next_add_and_by_gc_without_a_cut() {
    galactic_testkit::privileged!();
    let host = table_host("mkmig");
    let rt = runtime(&host);
    let (p1, p2, p3) = (Pod::new("mkm1"), Pod::new("mkm2"), Pod::new("mkm3"));
    let c = |att: &str| conf("1.1.0", "M", att, pools("fd6a:1::/64", "10.106.0.0/24"));
    let r1 = rt.add(&c("1"), &p1.attachment()).unwrap();
    let r2 = rt.add(&c("2"), &p2.attachment()).unwrap();
    let talk = |after: &str| {
        for i in 0..2 {
            assert!(
                p1.ping(&ip_of(&r2, i)),
                "{after}: p1 → p2 {}",
                ip_of(&r2, i)
            );
            assert!(
                p2.ping(&ip_of(&r1, i)),
                "{after}: p2 → p1 {}",
                ip_of(&r1, i)
            );
        }
    };
    let (h1, h2) = (hname("M", "1"), hname("M", "2"));

    for (round, migrate) in ["the next ADD", "GC"].iter().enumerate() {
        as_previous_release(&host, "M", &["1", "2"]);
        talk("the previous release's rules");
        assert!(domain(&host, "M").unwrap().get("mark").is_none());
        // Held between the new selection and the old rules' removal: the pods talk through
        // both, so the traffic is never without one.
        let held = rt
            .clone()
            .env("GALACTIC_FAILPOINTS", "converge-before-retire:pause");
        std::thread::scope(|s| {
            let run = s.spawn(|| match round {
                0 => held.add(&c("3"), &p3.attachment()).map(|_: Value| ()),
                _ => held.gc(
                    &c("1"),
                    &[&p1.attachment(), &p2.attachment(), &p3.attachment()],
                ),
            });
            std::thread::sleep(std::time::Duration::from_millis(400));
            talk(&format!("{migrate}, held before the old rules go"));
            run.join().unwrap().unwrap();
        });
        talk(&format!("after {migrate}"));
        assert!(
            domain(&host, "M").unwrap()["mark"]["value"].is_u64(),
            "{migrate} records a mark"
        );
        for dev in [&h1, &h2] {
            assert_eq!(
                iif_rules(&host, dev),
                Vec::<String>::new(),
                "{migrate} retires {dev}'s rules"
            );
        }
        let migrated = host
            .node
            .log_lines()
            .into_iter()
            .filter(|l| {
                l["msg"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("converge: retired"))
            })
            .count();
        assert!(migrated > round, "{migrate} logs what it retired");
        rt.check(&c("1"), &p1.attachment()).unwrap();
        rt.check(&c("2"), &p2.attachment()).unwrap();
    }
    // A DEL of an attachment that still has a rule of the previous release removes it.
    let dev3 = hname("M", "3");
    let table = domain(&host, "M").unwrap()["table"].to_string();
    host.netns.ip(&[
        "-6", "rule", "add", "pref", "1000", "iif", &dev3, "lookup", &table,
    ]);
    for (pod, att) in [(&p1, "1"), (&p2, "2"), (&p3, "3")] {
        rt.del(&c(att), &pod.attachment()).unwrap();
        assert_eq!(host_traces(&host, &hname("M", att)), Vec::<String>::new());
    }
}
