//! Forwarding through a node with a FORWARD DROP policy, whatever its firewall: a router
//! namespace (the node) between two pod namespaces, each firewall set up the way an operator's
//! tools do it (nft, iptables-nft, iptables-legacy, and all three at once), real pings of both
//! families before and after the rules.

use super::{allow, is_allowed, owned_interfaces, remove};
use crate::net::netns::{run_in, Netns};
use galactic_testns::privileged::TestNetns;

struct Node {
    router: TestNetns,
    a: TestNetns,
    b: TestNetns,
}

fn sh(ns: &TestNetns, argv: &[&str]) {
    let out = ns.exec(argv);
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The router with `GA` and `GB` towards the pods, forwarding on, then `firewall` run in it.
fn node(tag: &str, firewall: &[&[&str]]) -> Node {
    let node = Node {
        router: TestNetns::new(&format!("{tag}r")),
        a: TestNetns::new(&format!("{tag}a")),
        b: TestNetns::new(&format!("{tag}b")),
    };
    for (pod, host, n) in [(&node.a, "GA", "1"), (&node.b, "GB", "2")] {
        let r = &node.router;
        sh(
            r,
            &[
                "ip",
                "link",
                "add",
                host,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                pod.name(),
            ],
        );
        sh(
            r,
            &["ip", "addr", "add", &format!("10.1.{n}.1/24"), "dev", host],
        );
        sh(
            r,
            &[
                "ip",
                "addr",
                "add",
                &format!("fd01:{n}::1/64"),
                "dev",
                host,
                "nodad",
            ],
        );
        sh(r, &["ip", "link", "set", host, "up"]);
        sh(
            pod,
            &[
                "ip",
                "addr",
                "add",
                &format!("10.1.{n}.2/24"),
                "dev",
                "eth0",
            ],
        );
        sh(
            pod,
            &[
                "ip",
                "addr",
                "add",
                &format!("fd01:{n}::2/64"),
                "dev",
                "eth0",
                "nodad",
            ],
        );
        sh(pod, &["ip", "link", "set", "eth0", "up"]);
        sh(
            pod,
            &[
                "ip",
                "route",
                "add",
                "default",
                "via",
                &format!("10.1.{n}.1"),
            ],
        );
        sh(
            pod,
            &[
                "ip",
                "-6",
                "route",
                "add",
                "default",
                "via",
                &format!("fd01:{n}::1"),
            ],
        );
    }
    sh(&node.router, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    sh(
        &node.router,
        &["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"],
    );
    for command in firewall {
        sh(&node.router, command);
    }
    node
}

/// Whether A reaches B over (IPv4, IPv6).
fn reach(node: &Node) -> (bool, bool) {
    let ping = |dst: &str| {
        node.a
            .exec(&["ping", "-c", "1", "-W", "1", dst])
            .status
            .success()
    };
    (ping("10.1.2.2"), ping("fd01:2::2"))
}

fn in_router<T: Send>(node: &Node, f: impl FnOnce() -> T + Send) -> T {
    run_in(&Netns::open(&node.router.path()).unwrap(), f).unwrap()
}

fn forwarding_is_allowed_and_taken_back(tag: &str, firewall: &[&[&str]]) {
    let node = node(tag, firewall);
    assert_eq!(reach(&node), (false, false), "{tag}: the DROP policy holds");
    // One side's two rules carry both directions of its traffic.
    in_router(&node, || {
        allow("GA").unwrap();
        allow("GA").unwrap();
        assert!(is_allowed("GA").unwrap() && !is_allowed("GB").unwrap());
    });
    assert_eq!(
        reach(&node),
        (true, true),
        "{tag}: forwarded through GA's rules"
    );
    in_router(&node, || {
        allow("GB").unwrap();
        assert_eq!(owned_interfaces().unwrap(), ["GA", "GB"]);
        remove("GA").unwrap();
        remove("GA").unwrap();
        assert!(!is_allowed("GA").unwrap() && is_allowed("GB").unwrap());
        assert_eq!(owned_interfaces().unwrap(), ["GB"]);
    });
    assert_eq!(
        reach(&node),
        (true, true),
        "{tag}: forwarded through GB's rules"
    );
    in_router(&node, || {
        remove("GB").unwrap();
        assert!(owned_interfaces().unwrap().is_empty());
    });
    assert_eq!(
        reach(&node),
        (false, false),
        "{tag}: every rule of ours is gone"
    );
}

#[test]
fn native_nftables_with_a_drop_policy() {
    galactic_testns::privileged!();
    forwarding_is_allowed_and_taken_back(
        "fwn",
        &[&[
            "nft",
            "add table inet fw; add chain inet fw forward_drop { type filter hook forward priority 0; policy drop; }",
        ]],
    );
}

#[test]
fn iptables_nft_with_a_drop_policy() {
    galactic_testns::privileged!();
    forwarding_is_allowed_and_taken_back(
        "fwi",
        &[
            &["iptables-nft", "-P", "FORWARD", "DROP"],
            &["ip6tables-nft", "-P", "FORWARD", "DROP"],
        ],
    );
}

#[test]
fn iptables_legacy_with_a_drop_policy() {
    galactic_testns::privileged!();
    forwarding_is_allowed_and_taken_back(
        "fwl",
        &[
            &["iptables-legacy", "-P", "FORWARD", "DROP"],
            &["ip6tables-legacy", "-P", "FORWARD", "DROP"],
        ],
    );
}

#[test]
fn all_three_at_once() {
    galactic_testns::privileged!();
    forwarding_is_allowed_and_taken_back(
        "fw3",
        &[
            &[
                "nft",
                "add table inet fw; add chain inet fw forward_drop { type filter hook forward priority 0; policy drop; }",
            ],
            &["iptables-nft", "-P", "FORWARD", "DROP"],
            &["ip6tables-nft", "-P", "FORWARD", "DROP"],
            &["iptables-legacy", "-P", "FORWARD", "DROP"],
            &["ip6tables-legacy", "-P", "FORWARD", "DROP"],
        ],
    );
}

/// A rule written by `nft` from the same text is found and removed, and ours reads back as that
/// text: the two writers agree on the encoding.
#[test]
fn rules_written_by_nft_and_by_netlink_are_the_same_rule() {
    galactic_testns::privileged!();
    let node = node(
        "fwe",
        &[&[
            "nft",
            "add table ip t; add chain ip t f { type filter hook forward priority 0; policy drop; }; \
             insert rule ip t f oifname \"GB\" accept comment \"galactic:GB\"; \
             insert rule ip t f iifname \"GB\" accept comment \"galactic:GB\"",
        ]],
    );
    in_router(&node, || {
        assert!(
            is_allowed("GB").unwrap(),
            "nft's rules are ours by their comment"
        );
        allow("GA").unwrap();
    });
    let listed = node.router.exec(&["nft", "list", "chain", "ip", "t", "f"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    for line in [
        "iifname \"GA\" accept comment \"galactic:GA\"",
        "oifname \"GA\" accept comment \"galactic:GA\"",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    in_router(&node, || {
        remove("GB").unwrap();
        remove("GA").unwrap();
    });
    let listed = node.router.exec(&["nft", "list", "chain", "ip", "t", "f"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(!text.contains("galactic:"), "{text}");
    assert!(
        text.contains("policy drop"),
        "the chain and its policy stay: {text}"
    );
}
