//! A change of the node's `table_mark_mask` (table mode, decision 0076): the VPC's next ADD
//! converges its domain onto a mark within the new mask and moves every live attachment's map
//! element with it; nothing of the old mask is left, and the pods keep reaching each other.

use crate::common::{domain, hname, runtime};
use galactic_testkit::host::{ip_of, Host, Pod};
use galactic_testkit::runtime::Conflist;
use serde_json::json;

const VPC: &str = "3a";

fn veth(att: &str) -> Conflist {
    Conflist::new(
        "1.1.0",
        "pods-mask",
        vec![
            json!({"type": "galactic-cni", "vpc": VPC, "vpcattachment": att,
            "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd7d:1::/64", "ipv4_subnet": "10.125.0.0/24"}}),
        ],
    )
}

/// The VPC's recorded mark as (value, mask).
fn recorded_mark(host: &Host) -> (u64, u64) {
    let d = domain(host, VPC).expect("the VPC's domain record");
    (
        d["mark"]["value"].as_u64().expect("a mark value"),
        d["mark"]["mask"].as_u64().expect("a mark mask"),
    )
}

/// Every policy rule of both families, as `ip rule` prints them.
fn rules(host: &Host) -> String {
    host.netns.ip(&["-4", "rule", "show"]) + &host.netns.ip(&["-6", "rule", "show"])
}

fn map(host: &Host) -> String {
    let out = host
        .netns
        .exec(&["nft", "list", "map", "inet", "galactic", "vpc_marks"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_changed_mark_mask_moves_the_vpcs_rules_and_elements_at_its_next_add() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "mmask",
        json!({"routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&host);
    let pods = [Pod::new("mm1"), Pod::new("mm2"), Pod::new("mm3")];
    let mut results = Vec::new();
    for (i, pod) in pods[..2].iter().enumerate() {
        results.push(
            rt.add(&veth(&(i + 1).to_string()), &pod.attachment())
                .unwrap(),
        );
    }
    let table = domain(&host, VPC).unwrap()["table"].to_string();
    assert_eq!(
        recorded_mark(&host),
        (0x0100_0000, 0xff00_0000),
        "the default mask's first mark"
    );
    let old_rule = format!("fwmark 0x1000000/0xff000000 lookup {table}");
    assert_eq!(
        rules(&host).matches(&old_rule).count(),
        2,
        "{}",
        rules(&host)
    );

    // The administrator moves the VPC marks to bits another component leaves free.
    host.node
        .merge_config(json!({"table_mark_mask": "0x00f00000"}));
    results.push(rt.add(&veth("3"), &pods[2].attachment()).unwrap());

    assert_eq!(
        recorded_mark(&host),
        (0x0010_0000, 0x00f0_0000),
        "re-allocated in the new mask"
    );
    let rules = rules(&host);
    let new_rule = format!("fwmark 0x100000/0xf00000 lookup {table}");
    assert_eq!(
        rules.matches(&new_rule).count(),
        2,
        "one per family: {rules}"
    );
    assert!(
        !rules.contains("0xff000000"),
        "no rule of the old mask: {rules}"
    );
    let map = map(&host);
    for att in ["1", "2", "3"] {
        let element = format!("\"{}\" : 0x00100000", hname(VPC, att));
        assert!(map.contains(&element), "{element} in {map}");
    }
    assert!(
        !map.contains("0x01000000"),
        "no element of the old mark: {map}"
    );
    for (i, pod) in pods.iter().enumerate() {
        rt.check(&veth(&(i + 1).to_string()), &pod.attachment())
            .unwrap_or_else(|e| panic!("CHECK of pod {i} after the move: {e:?}"));
    }
    for f in 0..2 {
        let (a, b, c) = (
            ip_of(&results[0], f),
            ip_of(&results[1], f),
            ip_of(&results[2], f),
        );
        assert!(pods[0].ping(&b), "an earlier pod reaches another: {b}");
        assert!(pods[2].ping(&a), "the new pod reaches an earlier one: {a}");
        assert!(pods[1].ping(&c), "an earlier pod reaches the new one: {c}");
    }

    for (i, pod) in pods.iter().enumerate() {
        rt.del(&veth(&(i + 1).to_string()), &pod.attachment())
            .unwrap();
    }
    assert!(
        domain(&host, VPC).is_none(),
        "the domain went with the last attachment"
    );
    assert!(
        !self::rules(&host).contains("fwmark"),
        "no VPC rule is left"
    );
}

#[test]
fn status_warns_of_other_rules_that_set_or_match_bits_of_the_mark_mask() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "mmusers",
        json!({"routing_domain": "table"}),
        &["galactic-ipam"],
    );
    let rt = runtime(&host);
    let nft = |args: &str| {
        let out = host.netns.exec(&["nft", args]);
        assert!(out.status.success(), "nft {args}: {out:?}");
    };
    let warnings = || {
        host.node
            .log_lines()
            .into_iter()
            .filter(|l| {
                l["level"] == "WARN"
                    && l["msg"]
                        .as_str()
                        .is_some_and(|m| m.contains("firewall-mark bits"))
            })
            .collect::<Vec<_>>()
    };
    // kube-proxy's bits, clear of the default mask: nothing to say.
    nft("add table ip kp");
    nft("add chain ip kp pre { type filter hook prerouting priority -100 ; }");
    nft("add rule ip kp pre meta mark set mark or 0x4000");
    rt.status(&veth("1")).unwrap();
    assert!(warnings().is_empty(), "{:?}", warnings());
    // A Calico-like mask within ours.
    nft("add rule ip kp pre meta mark and 0xffff0000 == 0x00010000 accept");
    rt.status(&veth("1")).unwrap();
    let warned = warnings();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0]["tableMarkMask"], "0xff000000");
    assert_eq!(
        warned[0]["rules"],
        json!(["table kp chain pre matches mark bits 0xffff0000"])
    );
}
