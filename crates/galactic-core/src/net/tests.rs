//! The netlink layer against real kernel objects in throwaway namespaces.

use super::netlink::{AddrFlags, Netlink, RouteKind, RouteSpec, RuleSpec};
use super::netns::Netns;
use crate::ip::Family;
use galactic_testns::privileged::TestNetns;

fn open(ns: &TestNetns) -> (Netns, Netlink) {
    let netns = Netns::open(&ns.path()).unwrap();
    let nl = Netlink::in_netns(&netns).unwrap();
    (netns, nl)
}

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
    use super::netlink::{NeighState, RouteLookup};
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

#[test]
fn firewall_rules_are_owned_idempotent_and_removed_by_tag() {
    galactic_testns::privileged!();
    assert!(
        super::firewall::available(),
        "nft (Debian package nftables) is required"
    );
    let host = TestNetns::new("fw");
    let nft = |args: &str| {
        let out = host.exec(&["nft", args]);
        assert!(
            out.status.success(),
            "nft {args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    nft("add table ip filter");
    nft("add chain ip filter FORWARD { type filter hook forward priority 0; policy drop; }");
    nft("add table inet other");
    nft(
        "add chain inet other forward_other { type filter hook forward priority 10; policy drop; }",
    );
    let ns = Netns::open(&host.path()).unwrap();
    let empty = TestNetns::new("fwempty");
    let forward = |ns: &TestNetns| {
        super::netns::run_in(
            &Netns::open(&ns.path()).unwrap(),
            super::nftables::has_forward_chain,
        )
        .unwrap()
        .unwrap()
    };
    assert!(!forward(&empty), "a namespace without nftables chains");
    let out = empty.exec(&[
        "nft",
        "add table inet g; add chain inet g input { type filter hook input priority 0; }",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!forward(&empty), "an input chain is not a forward chain");
    let has = |ns: &TestNetns, family, table: &'static str, chain: &'static str| {
        super::netns::run_in(&Netns::open(&ns.path()).unwrap(), move || {
            super::nftables::has_chain(family, table, chain)
        })
        .unwrap()
        .unwrap()
    };
    let inet = super::nftables::FAMILY_INET;
    assert!(
        has(&empty, inet, "g", "input"),
        "the chain is seen by family, table and name"
    );
    assert!(!has(&empty, inet, "g", "output"), "another name");
    assert!(!has(&empty, inet, "h", "input"), "another table");
    assert!(!has(&empty, 2, "g", "input"), "another family (ip)");
    assert!(has(&host, 2, "filter", "FORWARD"), "ip filter FORWARD");
    assert!(
        forward(&host),
        "the forward chains created above are seen over netlink"
    );
    super::netns::run_in(&ns, || {
        use super::firewall::*;
        allow("G000000001001H").unwrap();
        allow("G000000001001H").unwrap();
        allow("G000000001002H").unwrap();
        assert!(is_allowed("G000000001001H").unwrap());
        assert_eq!(
            owned_interfaces().unwrap(),
            vec!["G000000001001H", "G000000001002H"]
        );
        remove("G000000001001H").unwrap();
        remove("G000000001001H").unwrap();
        assert!(!is_allowed("G000000001001H").unwrap());
        assert_eq!(owned_interfaces().unwrap(), vec!["G000000001002H"]);
    })
    .unwrap();
    let out = String::from_utf8_lossy(&host.exec(&["nft", "list", "ruleset"]).stdout).into_owned();
    assert_eq!(
        out.matches("G000000001002H").count(),
        4 * 2,
        "2 rules x 2 chains, name twice each: {out}"
    );
    assert!(
        out.contains("policy drop"),
        "chains and policies untouched: {out}"
    );
}

#[test]
fn a_table_dump_receives_that_table_only() {
    galactic_testns::privileged!();
    let host = TestNetns::new("nldump");
    let peer = TestNetns::new("nldumpp");
    let (_h, nl) = open(&host);
    nl.create_veth("up0", "up1", &Netns::open(&peer.path()).unwrap(), None)
        .unwrap();
    let link = nl.require_link("up0").unwrap();
    nl.set_up(link.index).unwrap();
    for family in Family::ALL {
        assert!(
            nl.routes(family, 70_000).unwrap().is_empty(),
            "a table that does not exist has no routes"
        );
    }
    let mine = ["10.1.0.0/24", "fd01::/64"];
    for dst in mine {
        nl.add_route(&RouteSpec::device(dst.parse().unwrap(), 70_000, link.index))
            .unwrap();
    }
    let measure = |family| {
        let before = super::netlink::received();
        let routes = nl.routes(family, 70_000).unwrap();
        (routes, super::netlink::received() - before)
    };
    let alone = Family::ALL.map(measure);
    for n in 0..200u32 {
        for (dst, table) in [
            (format!("10.2.{n}.0/24"), 254),
            (format!("fd02:{n:x}::/64"), 7),
        ] {
            nl.add_route(&RouteSpec::device(dst.parse().unwrap(), table, link.index))
                .unwrap();
        }
    }
    let crowded = Family::ALL.map(measure);
    assert_eq!(crowded, alone, "routes of other tables are not received");
    for (routes, received) in crowded {
        assert_eq!(routes.len(), 1, "{routes:?}");
        assert!(mine.contains(&routes[0].dst.to_string().as_str()));
        assert_eq!(routes[0].table, 70_000);
        assert_eq!(received, 1);
    }
}

/// `routes_via` and `routes_of_kind` receive the routes of one device or one type of the table,
/// not the table's other routes.
#[test]
fn a_table_dump_by_device_or_type_receives_those_routes_only() {
    galactic_testns::privileged!();
    let host = TestNetns::new("nldev");
    let peer = TestNetns::new("nldevp");
    let (_h, nl) = open(&host);
    let peer_ns = Netns::open(&peer.path()).unwrap();
    let mut devs = Vec::new();
    for (name, peer_name) in [("mine0", "mine1"), ("other0", "other1")] {
        nl.create_veth(name, peer_name, &peer_ns, None).unwrap();
        let link = nl.require_link(name).unwrap();
        nl.set_up(link.index).unwrap();
        devs.push(link.index);
    }
    let (mine, other) = (devs[0], devs[1]);
    let table = 70_001;
    let own = ["10.1.0.0/24", "fd01::/64"];
    for dst in own {
        nl.add_route(&RouteSpec::device(dst.parse().unwrap(), table, mine))
            .unwrap();
    }
    for family in Family::ALL {
        let mut closing = RouteSpec::device(family.default_route(), table, mine);
        closing.kind = RouteKind::Unreachable;
        closing.dev = None;
        closing.scope_link = false;
        nl.add_route(&closing).unwrap();
    }
    for n in 0..100u32 {
        for dst in [format!("10.2.{n}.0/24"), format!("fd02:{n:x}::/64")] {
            nl.add_route(&RouteSpec::device(dst.parse().unwrap(), table, other))
                .unwrap();
        }
    }
    for family in Family::ALL {
        let before = super::netlink::received();
        let via = nl.routes_via(family, table, mine).unwrap();
        assert_eq!(super::netlink::received() - before, 1, "{via:?}");
        assert_eq!(via.len(), 1, "{via:?}");
        assert!(own.contains(&via[0].dst.to_string().as_str()));
        assert_eq!(via[0].dev, Some(mine));

        let before = super::netlink::received();
        let unreachable = nl
            .routes_of_kind(family, table, RouteKind::Unreachable)
            .unwrap();
        assert_eq!(super::netlink::received() - before, 1, "{unreachable:?}");
        assert_eq!(unreachable.len(), 1, "{unreachable:?}");
        assert_eq!(unreachable[0].dst.prefix(), 0);
        assert_eq!(unreachable[0].kind, RouteKind::Unreachable);

        assert_eq!(nl.routes(family, table).unwrap().len(), 102);
    }
}

#[test]
fn vpc_mark_elements_written_over_netlink_and_by_nft_are_the_same_elements() {
    use super::domain::marks::{self, Mark};
    galactic_testns::privileged!();
    let host = TestNetns::new("marks");
    let ns = Netns::open(&host.path()).unwrap();
    let nft = |args: &str| {
        let out = host.exec(&["nft", args]);
        assert!(out.status.success(), "nft {args}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let a = Mark {
        value: 0x0100_0000,
        mask: 0xff00_0000,
    };
    let b = Mark {
        value: 0x0200_0000,
        ..a
    };
    super::netns::run_in(&ns, || {
        // No map yet: nothing listed, nothing to remove.
        assert_eq!(marks::elements().unwrap(), Vec::new());
        marks::deselect("Gnone").unwrap();
        assert!(marks::prepare_node().unwrap(), "created once");
        assert!(!marks::prepare_node().unwrap(), "then seen over netlink");
        marks::select(&marks::elements().unwrap(), "G000000001001H", a).unwrap();
        marks::select(&marks::elements().unwrap(), "G000000001001H", a).unwrap();
    })
    .unwrap();
    let listed = nft("list map inet galactic vpc_marks");
    assert!(
        listed.contains("\"G000000001001H\" : 0x01000000"),
        "{listed}"
    );
    nft("add element inet galactic vpc_marks { \"Gbynft\" : 0x02000000 }");
    super::netns::run_in(&ns, || {
        let elements = marks::elements().unwrap();
        assert!(marks::is_selected(&elements, "Gbynft", b), "{elements:?}");
        // Another VPC's mark replaces the element's in one batch.
        marks::select(&elements, "G000000001001H", b).unwrap();
        let elements = marks::elements().unwrap();
        assert!(marks::is_selected(&elements, "G000000001001H", b));
        assert_eq!(elements.len(), 2, "{elements:?}");
        marks::deselect("Gbynft").unwrap();
        marks::deselect("Gbynft").unwrap();
        let names = vec!["G000000001001H".to_owned(), "Gnone".to_owned()];
        assert_eq!(marks::deselect_all(&elements, &names).unwrap(), 1);
        assert_eq!(marks::elements().unwrap(), Vec::new());
    })
    .unwrap();
}

#[test]
fn a_nodes_table_mode_objects_are_created_by_one_nft_transaction() {
    use super::firewall::{prepare_table_mode, Prepared};
    use super::nftables::generation;
    galactic_testns::privileged!();
    let host = TestNetns::new("tprep");
    let ns = Netns::open(&host.path()).unwrap();
    let nft = |args: &str| {
        let out = host.exec(&["nft", args]);
        assert!(out.status.success(), "nft {args}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let both = Prepared {
        host_services: true,
        vpc_marks: true,
    };
    super::netns::run_in(&ns, || {
        let before = generation().unwrap();
        assert_eq!(
            prepare_table_mode().unwrap(),
            both,
            "a fresh node has neither"
        );
        assert_eq!(
            generation().unwrap(),
            before + 1,
            "the filter and the marks are one transaction (one nft run)"
        );
        assert_eq!(prepare_table_mode().unwrap(), Prepared::default());
        assert_eq!(generation().unwrap(), before + 1, "then seen, nothing run");
    })
    .unwrap();
    // A node whose marks are gone (or that never had them: the release before decision 0076)
    // gets them alone, and keeps one host-service rule.
    nft("delete chain inet galactic vpc_marks");
    nft("delete map inet galactic vpc_marks");
    super::netns::run_in(&ns, || {
        let before = generation().unwrap();
        let marks_only = Prepared {
            host_services: false,
            vpc_marks: true,
        };
        assert_eq!(prepare_table_mode().unwrap(), marks_only);
        assert_eq!(generation().unwrap(), before + 1);
    })
    .unwrap();
    let listed = nft("list table inet galactic");
    assert_eq!(
        listed.matches("galactic:host-services").count(),
        1,
        "{listed}"
    );
    assert_eq!(listed.matches("galactic:vpc-marks").count(), 1, "{listed}");
    assert!(listed.contains("map vpc_marks"), "{listed}");
}

#[test]
fn rules_outside_our_table_that_set_or_match_mark_bits_are_found_with_their_bits() {
    use super::nftables::mark_users::mark_users;
    galactic_testns::privileged!();
    let host = TestNetns::new("mkusers");
    let ns = Netns::open(&host.path()).unwrap();
    let nft = |args: &str| {
        let out = host.exec(&["nft", args]);
        assert!(out.status.success(), "nft {args}: {out:?}");
    };
    nft("add table inet galactic");
    nft("add chain inet galactic c");
    nft("add rule inet galactic c meta mark set 0x01000000");
    nft("add table ip other");
    nft("add chain ip other pre { type filter hook prerouting priority -150 ; }");
    nft("add rule ip other pre meta mark set mark or 0x4000");
    nft("add rule ip other pre meta mark set 0x10");
    nft("add rule ip other pre meta mark and 0xffff0000 == 0x00010000 accept");
    nft("add rule ip other pre iifname \"eth0\" accept");
    let users = super::netns::run_in(&ns, || mark_users("galactic"))
        .unwrap()
        .unwrap();
    let found: Vec<(bool, u32)> = users.iter().map(|u| (u.sets, u.bits)).collect();
    assert_eq!(
        found,
        vec![(true, 0x4000), (true, u32::MAX), (false, 0xffff_0000)],
        "{users:?}"
    );
    assert!(users.iter().all(|u| u.table == "other" && u.chain == "pre"));
    let overlapping: Vec<_> = users.iter().filter(|u| u.bits & 0xff00_0000 != 0).collect();
    assert_eq!(
        overlapping.len(),
        2,
        "kube-proxy-like 0x4000 is clear of the default mask"
    );
    // iptables-nft's MARK target and mark match (xtables compat expressions).
    let ipt = |args: &[&str]| {
        let mut argv = vec!["iptables-nft"];
        argv.extend_from_slice(args);
        let out = host.exec(&argv);
        assert!(out.status.success(), "{argv:?}: {out:?}");
    };
    if host.exec(&["iptables-nft", "--version"]).status.success() {
        ipt(&[
            "-t",
            "mangle",
            "-A",
            "PREROUTING",
            "-j",
            "MARK",
            "--set-xmark",
            "0x10000/0xffff0000",
        ]);
        ipt(&[
            "-t",
            "mangle",
            "-A",
            "PREROUTING",
            "-m",
            "mark",
            "--mark",
            "0x4000/0x4000",
            "-j",
            "ACCEPT",
        ]);
        let users = super::netns::run_in(&ns, || mark_users("galactic"))
            .unwrap()
            .unwrap();
        let mangle: Vec<(bool, u32)> = users
            .iter()
            .filter(|u| u.table == "mangle")
            .map(|u| (u.sets, u.bits))
            .collect();
        assert_eq!(
            mangle,
            vec![(true, 0xffff_0000), (false, 0x4000)],
            "{users:?}"
        );
    }
}

/// One link's addresses and neighbours, a controller's links, one neighbour entry and one
/// element of the VPC-mark map are each read alone: the kernel filters the answer, so the messages received
/// do not grow with the node's other links and elements. (A bridge stands in for the VRF as the
/// controller: this machine's kernel may have no VRF, and the kernel's filter is the same.)
#[test]
fn a_links_and_a_controllers_objects_are_received_alone() {
    use super::domain::marks::{self, Mark};
    galactic_testns::privileged!();
    let host = TestNetns::new("nlalone");
    let peer = TestNetns::new("nlalonep");
    let (ns, nl) = open(&host);
    let peer_ns = Netns::open(&peer.path()).unwrap();
    let mark = Mark {
        value: 0x0100_0000,
        mask: 0xff00_0000,
    };
    super::netns::run_in(&ns, || marks::prepare_node().unwrap()).unwrap();
    // A link with two addresses and two permanent neighbours, enslaved to a controller, with
    // its map element; it stays down, so no link-local address or multicast neighbour comes
    // and goes.
    let plant = |name: &str, n: u32, controller: Option<u32>| {
        nl.create_veth(name, &format!("{name}p"), &peer_ns, None)
            .unwrap();
        let link = nl.require_link(name).unwrap();
        if let Some(controller) = controller {
            nl.set_controller(link.index, controller).unwrap();
        }
        let v6 = AddrFlags {
            nodad: true,
            noprefixroute: true,
        };
        nl.add_address(
            link.index,
            "10.9.0.1/32".parse().unwrap(),
            AddrFlags::default(),
        )
        .unwrap();
        nl.add_address(link.index, format!("fd09::{n:x}/128").parse().unwrap(), v6)
            .unwrap();
        let mac = format!("02:00:00:00:{:02x}:{:02x}", n / 256, n % 256);
        for ip in [
            format!("10.9.{}.{}", n / 256, n % 256),
            format!("fd09::1:{n:x}"),
        ] {
            nl.replace_neighbour(link.index, ip.parse().unwrap(), &mac)
                .unwrap();
        }
        super::netns::run_in(&ns, || marks::select(&[], name, mark).unwrap()).unwrap();
        link
    };
    host.ip(&["link", "add", "ctl0", "type", "bridge"]);
    let ctl = nl.require_link("ctl0").unwrap();
    let mine = plant("mine0", 1, Some(ctl.index));
    let measure = || {
        let count = |read: &dyn Fn() -> usize| {
            let before = super::netlink::received();
            let objects = read();
            (objects, super::netlink::received() - before)
        };
        [
            count(&|| nl.addresses(mine.index).unwrap().len()),
            count(&|| nl.permanent_neighbours(mine.index).unwrap().len()),
            count(&|| nl.controller_links(ctl.index).unwrap().len()),
            count(&|| {
                let ip = "fd09::1:1".parse().unwrap();
                usize::from(nl.neighbour(mine.index, ip).unwrap().is_some())
            }),
            // In the namespace's thread, which the count is of.
            super::netns::run_in(&ns, || {
                count(&|| usize::from(marks::element("mine0").unwrap() == Some(element(mark))))
            })
            .unwrap(),
        ]
    };
    let alone = measure();
    assert_eq!(
        alone,
        [(2, 2), (2, 2), (1, 1), (1, 1), (1, 1)],
        "[addresses, neighbours, controller's links, one neighbour, element]"
    );
    for n in 2..42 {
        plant(&format!("other{n}"), n, None);
    }
    assert_eq!(measure(), alone, "with 40 other links and elements");
    super::netns::run_in(&ns, || {
        assert_eq!(marks::element("nosuch0").unwrap(), None);
        assert_eq!(marks::elements().unwrap().len(), 41);
    })
    .unwrap();
    assert!(nl.addresses(999_999).unwrap().is_empty(), "no such link");
    assert!(nl.neighbours(999_999).unwrap().is_empty(), "no such link");
    let absent = "fd09::9:9".parse().unwrap();
    assert_eq!(nl.neighbour(mine.index, absent).unwrap(), None);
}

/// The element of `mine0` with `mark`.
fn element(mark: super::domain::marks::Mark) -> super::nftables::map::Element {
    super::nftables::map::Element {
        ifname: "mine0".to_owned(),
        mark: mark.value,
    }
}
