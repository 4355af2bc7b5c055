//! Links, addresses, routes, rules and neighbours written and read back.

use super::open;
use crate::ip::Family;
use crate::net::netlink::{AddrFlags, Netlink, RouteKind, RouteSpec, RuleSpec};
use crate::net::netns::Netns;
use galactic_testns::privileged::TestNetns;

#[test]
fn veth_peer_is_created_directly_in_the_pod_namespace() {
    galactic_testns::privileged!();
    let host = TestNetns::new("nlhost");
    let pod = TestNetns::new("nlpod");
    let (_h, nl) = open(&host);
    let pod_ns = Netns::open(&pod.path()).unwrap();
    nl.create_veth("G000000001001H", "eth0", &pod_ns, Some(1400))
        .unwrap();

    let host_link = nl.require_link("G000000001001H").unwrap();
    assert_eq!(host_link.mtu, 1400);
    assert_eq!(host_link.kind.as_deref(), Some("veth"));
    let pod_nl = Netlink::in_netns(&pod_ns).unwrap();
    let guest = pod_nl.require_link("eth0").unwrap();
    assert_eq!(guest.mtu, 1400);
    // One queue each way, asked for at creation: the kernel's default is a queue per possible
    // CPU, cut down to one active queue after registration at the cost of an RCU grace period
    // per end (on a machine with one possible CPU both are one queue either way).
    for (ns, name) in [(&host, "G000000001001H"), (&pod, "eth0")] {
        let detail = ns.ip(&["-d", "link", "show", name]);
        assert!(
            detail.contains("numtxqueues 1 numrxqueues 1"),
            "{name}: {detail}"
        );
    }
    assert!(
        nl.link("eth0").unwrap().is_none(),
        "the peer never appears in the host"
    );
    assert!(nl
        .create_veth("G000000001001H", "eth0", &pod_ns, None)
        .unwrap_err()
        .is_exists());

    nl.delete_link("G000000001001H").unwrap();
    nl.delete_link("G000000001001H").unwrap();
    assert!(
        pod_nl.link("eth0").unwrap().is_none(),
        "the peer goes with it"
    );
}

#[test]
fn addresses_routes_rules_and_neighbours_round_trip() {
    galactic_testns::privileged!();
    let host = TestNetns::new("nlobj");
    let pod = TestNetns::new("nlobjpod");
    let (_h, nl) = open(&host);
    nl.create_veth("GH", "eth0", &Netns::open(&pod.path()).unwrap(), None)
        .unwrap();
    let link = nl.require_link("GH").unwrap();
    nl.set_up(link.index).unwrap();

    for addr in ["fd66:1::1/128", "10.66.0.1/32"] {
        let flags = AddrFlags {
            nodad: true,
            noprefixroute: true,
        };
        nl.add_address(link.index, addr.parse().unwrap(), flags)
            .unwrap();
        nl.add_address(link.index, addr.parse().unwrap(), flags)
            .unwrap();
    }
    let addrs = nl.addresses(link.index).unwrap();
    assert!(
        addrs.contains(&"fd66:1::1/128".parse().unwrap()),
        "{addrs:?}"
    );
    assert!(
        addrs.contains(&"10.66.0.1/32".parse().unwrap()),
        "{addrs:?}"
    );
    let v6 = host.ip_json(&["-6", "addr", "show", "dev", "GH"]);
    let flags = v6[0]["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["local"] == "fd66:1::1")
        .unwrap();
    assert_eq!(flags["nodad"], true);
    assert_eq!(flags["noprefixroute"], true);

    for dst in ["fd66:1::1:0:0/96", "10.66.0.2/32"] {
        let spec = RouteSpec::device(dst.parse().unwrap(), 1001, link.index);
        nl.replace_route(&spec).unwrap();
        nl.replace_route(&spec).unwrap();
    }
    let unreachable = RouteSpec {
        kind: RouteKind::Unreachable,
        dev: None,
        scope_link: false,
        ..RouteSpec::device("0.0.0.0/0".parse().unwrap(), 1001, 0)
    };
    nl.replace_route(&unreachable).unwrap();
    let v4 = nl.routes(Family::V4, 1001).unwrap();
    assert_eq!(v4.len(), 2, "{v4:?}");
    assert!(v4
        .iter()
        .any(|r| r.dst.to_string() == "10.66.0.2/32" && r.dev == Some(link.index)));
    assert!(v4.iter().any(|r| r.kind == RouteKind::Unreachable));
    assert_eq!(nl.routes(Family::V6, 1001).unwrap().len(), 1);

    let rule = RuleSpec {
        family: Family::V4,
        priority: 1000,
        iif: Some("GH".into()),
        from: None,
        fwmark: None,
        table: 1001,
    };
    let from = RuleSpec {
        family: Family::V6,
        priority: 1001,
        iif: Some("lo".into()),
        from: Some("fd66:1::1/128".parse().unwrap()),
        fwmark: None,
        table: 1001,
    };
    // A marked rule reads back with its mark and mask (CHECK compares them).
    let marked = RuleSpec {
        family: Family::V6,
        priority: 1000,
        iif: None,
        from: None,
        fwmark: Some(crate::net::netlink::MarkMatch {
            mark: 0x0300_0000,
            mask: 0xff00_0000,
        }),
        table: 1001,
    };
    for spec in [&rule, &from, &marked] {
        nl.add_rule(spec).unwrap();
        nl.add_rule(spec).unwrap();
    }
    assert_eq!(
        nl.rules(Family::V4)
            .unwrap()
            .iter()
            .filter(|r| **r == rule)
            .count(),
        1
    );
    assert_eq!(
        nl.rules(Family::V6)
            .unwrap()
            .iter()
            .filter(|r| **r == from)
            .count(),
        1
    );
    assert!(nl.rules(Family::V6).unwrap().contains(&marked));
    nl.delete_rule(&rule).unwrap();
    nl.delete_rule(&rule).unwrap();
    assert!(!nl.rules(Family::V4).unwrap().contains(&rule));

    nl.replace_neighbour(
        link.index,
        "10.66.0.2".parse().unwrap(),
        "02:00:00:00:00:01",
    )
    .unwrap();
    nl.replace_neighbour(
        link.index,
        "10.66.0.2".parse().unwrap(),
        "02:00:00:00:00:01",
    )
    .unwrap();
    let neigh = nl.permanent_neighbours(link.index).unwrap();
    assert_eq!(
        neigh,
        vec![("10.66.0.2".parse().unwrap(), "02:00:00:00:00:01".to_owned())]
    );

    let spec = RouteSpec::device("10.66.0.2/32".parse().unwrap(), 1001, link.index);
    nl.delete_route(&spec).unwrap();
    nl.delete_route(&spec).unwrap();
    assert_eq!(nl.routes(Family::V4, 1001).unwrap().len(), 1);
}

#[test]
fn route_get_neighbours_and_global_addresses_read_the_kernel() {
    use crate::net::netlink::{NeighState, RouteLookup};
    galactic_testns::privileged!();
    let host = TestNetns::new("nlget");
    let peer = TestNetns::new("nlgetpeer");
    let (_h, nl) = open(&host);
    nl.create_veth("up0", "fab0", &Netns::open(&peer.path()).unwrap(), None)
        .unwrap();
    host.ip(&["link", "set", "up0", "address", "02:00:00:00:0a:01", "up"]);
    host.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:f::2/64",
        "dev",
        "up0",
        "nodad",
    ]);
    host.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:5::/64",
        "via",
        "2001:db8:f::1",
    ]);
    host.ip(&["-6", "route", "add", "unreachable", "2001:db8:6::/64"]);
    host.ip(&["-6", "route", "add", "blackhole", "2001:db8:7::/64"]);
    let up = nl.require_link("up0").unwrap();

    let via = nl.route_get("2001:db8:5::1".parse().unwrap()).unwrap();
    assert_eq!(
        via,
        Some(RouteLookup {
            kind: RouteKind::Unicast,
            oif: Some(up.index),
            gateway: Some("2001:db8:f::1".parse().unwrap()),
            table: 254,
        })
    );
    let onlink = nl
        .route_get("2001:db8:f::9".parse().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((onlink.oif, onlink.gateway), (Some(up.index), None));
    assert_eq!(
        onlink
            .next_hop("2001:db8:f::9".parse().unwrap())
            .to_string(),
        "2001:db8:f::9",
        "on-link: the destination is its own next hop"
    );
    assert_eq!(
        nl.route_get("2001:db8:6::1".parse().unwrap()).unwrap(),
        None,
        "an unreachable route"
    );
    assert_eq!(
        nl.route_get("2001:db8:99::1".parse().unwrap()).unwrap(),
        None,
        "no route at all"
    );
    assert_eq!(
        nl.route_get("2001:db8:7::1".parse().unwrap()).unwrap(),
        None,
        "a blackhole route"
    );
    let local = nl
        .route_get("2001:db8:f::2".parse().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(local.kind, RouteKind::Local);

    host.ip(&[
        "-6",
        "neigh",
        "replace",
        "2001:db8:f::1",
        "lladdr",
        "02:00:00:00:0b:01",
        "dev",
        "up0",
        "nud",
        "permanent",
    ]);
    host.ip(&[
        "-6",
        "neigh",
        "replace",
        "2001:db8:f::3",
        "lladdr",
        "02:00:00:00:0b:03",
        "dev",
        "up0",
        "nud",
        "stale",
    ]);
    let neigh = nl.neighbours(up.index).unwrap();
    let find = |ip: &str| {
        neigh
            .iter()
            .find(|n| n.ip.to_string() == ip)
            .unwrap_or_else(|| panic!("{ip} in {neigh:?}"))
    };
    assert_eq!(find("2001:db8:f::1").state, NeighState::Permanent);
    assert_eq!(
        find("2001:db8:f::1").usable_mac(),
        Some([2, 0, 0, 0, 0xb, 1])
    );
    assert_eq!(find("2001:db8:f::3").state, NeighState::Stale);
    assert_eq!(
        find("2001:db8:f::3").lladdr.as_deref(),
        Some(&[2u8, 0, 0, 0, 0xb, 3][..])
    );
    assert!(
        nl.neighbours(nl.require_link("lo").unwrap().index)
            .unwrap()
            .iter()
            .all(|n| n.ip.to_string() != "2001:db8:f::1"),
        "only the link's own entries"
    );

    host.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:f::7/64",
        "dev",
        "up0",
        "nodad",
    ]);
    let global = nl.global_addresses(up.index).unwrap();
    assert!(global.iter().all(|a| a.is_ipv6()), "{global:?}");
    let texts: Vec<String> = global.iter().map(|a| a.to_string()).collect();
    assert!(
        texts.contains(&"2001:db8:f::2/64".to_owned())
            && texts.contains(&"2001:db8:f::7/64".to_owned()),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.starts_with("fe80")),
        "link-local is not global: {texts:?}"
    );
}
