//! Resolution against real links, routes and neighbours in throwaway namespaces.

use super::*;
use crate::net::netns::Netns;
use galactic_testns::privileged::TestNetns;

/// A namespace with `up0` (a veth into a peer namespace), `2001:db8:f::2/64`, a route to
/// `2001:db8:5::/64` via the peer and a permanent neighbour entry for the peer.
fn uplinked(tag: &str) -> (TestNetns, TestNetns, Netlink) {
    let host = TestNetns::new(tag);
    let peer = TestNetns::new(&format!("{tag}p"));
    galactic_testns::bpffs::uplink(&host, &peer);
    let nl = Netlink::in_netns(&Netns::open(&host.path()).unwrap()).unwrap();
    (host, peer, nl)
}

#[test]
fn shard_sids_resolve_via_gateway_or_on_link_and_say_why_not() {
    galactic_testns::privileged!();
    let (host, _peer, nl) = uplinked("upsid");
    let up0 = nl.require_link("up0").unwrap().index;
    let via = resolve_sid(&nl, "2001:db8:5::1".parse().unwrap()).unwrap();
    assert_eq!(
        via,
        EgressRouteValue {
            sid_be: "2001:db8:5::1".parse::<Ipv6Addr>().unwrap().octets(),
            link_ifindex: up0,
            dmac: [2, 0, 0, 0, 0xb, 1],
            smac: [2, 0, 0, 0, 0xa, 1],
        }
    );
    // On-link: the SID is its own next hop.
    let onlink = resolve_sid(&nl, "2001:db8:f::1".parse().unwrap()).unwrap();
    assert_eq!(onlink.dmac, [2, 0, 0, 0, 0xb, 1]);
    let why = resolve_sid(&nl, "2001:db8:f::5".parse().unwrap())
        .unwrap_err()
        .to_string();
    assert_eq!(
        why,
        "no neighbour entry with a MAC for next hop 2001:db8:f::5 on up0"
    );
    // A failed entry's address is not trusted.
    host.ip(&[
        "-6",
        "neigh",
        "replace",
        "2001:db8:f::5",
        "lladdr",
        "02:00:00:00:0b:05",
        "dev",
        "up0",
        "nud",
        "failed",
    ]);
    assert!(resolve_sid(&nl, "2001:db8:f::5".parse().unwrap()).is_err());
    let why = resolve_sid(&nl, "2001:db8:99::1".parse().unwrap())
        .unwrap_err()
        .to_string();
    assert_eq!(why, "no route");
    let why = resolve_sid(&nl, "2001:db8:f::2".parse().unwrap())
        .unwrap_err()
        .to_string();
    assert!(why.contains("Local"), "{why}");

    let first = resolve_nat66(
        &nl,
        &[
            "2001:db8:99::1".parse().unwrap(),
            "2001:db8:5::1".parse().unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(first, via, "the first that resolves wins");
    let none = resolve_nat66(
        &nl,
        &[
            "2001:db8:99::1".parse().unwrap(),
            "2001:db8:f::5".parse().unwrap(),
        ],
    )
    .unwrap_err();
    assert!(matches!(
        none,
        BpfError::NoShardSidResolvable { configured: 2, .. }
    ));
    assert!(
        none.to_string()
            .starts_with("no egress shard SID is resolvable yet, out of 2 configured: 2001:db8:99::1: no route; 2001:db8:f::5: "),
        "{none}"
    );
}

#[test]
fn node_rows_come_from_the_first_configured_or_detected_interface() {
    galactic_testns::privileged!();
    let (host, _peer, nl) = uplinked("uprows");
    let up0 = nl.require_link("up0").unwrap().index;
    let none = resolve_node_rows(&nl, &[]);
    assert!(none.interface.is_none());
    let why = none.uplink.unwrap_err();
    assert!(
        why.contains("no table has an IPv6 default or BGP-learned route"),
        "nothing to detect: {why}"
    );
    host.ip(&[
        "-6",
        "route",
        "add",
        "default",
        "via",
        "2001:db8:f::1",
        "dev",
        "up0",
    ]);
    assert_eq!(ebpf_interfaces(&nl, &[]).unwrap(), vec!["up0"]);
    let rows = resolve_node_rows(&nl, &[]);
    assert_eq!(rows.interface.as_deref(), Some("up0"));
    assert_eq!(
        rows.uplink.unwrap(),
        PublicUplinkValue {
            link_ifindex: up0,
            dmac: [2, 0, 0, 0, 0xb, 1],
            smac: [2, 0, 0, 0, 0xa, 1],
        }
    );
    // Configured interfaces win over detection, in the configured order.
    let rows = resolve_node_rows(&nl, &["nosuch0".into(), "up0".into()]);
    assert!(rows.uplink.unwrap_err().contains("nosuch0"));
    // An interface without neighbours.
    let rows = resolve_node_rows(&nl, &["lo".into()]);
    assert!(rows.uplink.is_err());
}

#[test]
fn detection_reads_every_table_defaults_first_then_bgp_routes() {
    galactic_testns::privileged!();
    let (host, _peer, nl) = uplinked("upall");
    for cmd in [
        "link add up1 type veth peer name up1p",
        "link set up1 up",
        "link add fab1 type veth peer name fab1p",
        "link set fab1 up",
        // A BGP-learned locator route, listed first by the kernel (table 90 < 100).
        "-6 route add 2001:db8:77::/48 dev fab1 proto bgp table 90",
        // The underlay's default lives in a table of its own, not in main.
        "-6 route add default dev up1 table 100",
        // A discard route learned over BGP is no path to a peer.
        "-6 route add blackhole 2001:db8:78::/48 proto bgp table 90",
        "-6 route add unreachable default table 101",
    ] {
        host.ip(&cmd.split_whitespace().collect::<Vec<_>>());
    }
    assert_eq!(
        ebpf_interfaces(&nl, &[]).unwrap(),
        vec!["up1", "fab1"],
        "the default route's device first, then the BGP route's, none from a discard route"
    );
    // A default in main joins the defaults, in the kernel's order (main is 254 > 100).
    host.ip(&[
        "-6",
        "route",
        "add",
        "default",
        "via",
        "2001:db8:f::1",
        "dev",
        "up0",
    ]);
    assert_eq!(
        ebpf_interfaces(&nl, &[]).unwrap(),
        vec!["up1", "up0", "fab1"]
    );
    // The loopback never is an uplink, whatever routes through it.
    host.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:79::/48",
        "dev",
        "lo",
        "proto",
        "bgp",
    ]);
    assert_eq!(
        ebpf_interfaces(&nl, &[]).unwrap(),
        vec!["up1", "up0", "fab1"]
    );
    let rows = resolve_node_rows(&nl, &[]);
    assert_eq!(rows.interface.as_deref(), Some("up1"));
}

#[test]
fn detection_and_resolution_read_the_links_routes_name_not_every_link() {
    galactic_testns::privileged!();
    let (host, _peer, nl) = uplinked("upcost");
    // A node's pods: links no route of the detection names.
    for i in 0..20 {
        let (a, b) = (format!("pod{i}"), format!("pod{i}p"));
        host.ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
    }
    let default = [
        "-6",
        "route",
        "add",
        "default",
        "via",
        "2001:db8:f::1",
        "dev",
        "up0",
    ];
    host.ip(&default);
    let received = crate::net::netlink::received;
    let before = received();
    assert_eq!(ebpf_interfaces(&nl, &[]).unwrap(), vec!["up0"]);
    let detection = received() - before;
    let before = received();
    resolve_sid(&nl, "2001:db8:5::1".parse().unwrap()).unwrap();
    let resolution = received() - before;
    // The detection: the IPv6 routes and the devices they name; the resolution: the route,
    // its link and the next hop's entry.
    assert!(
        detection < 40,
        "the detection received {detection} objects (with 40 unrelated links)"
    );
    assert_eq!(
        resolution, 3,
        "the resolution received {resolution} objects"
    );
}
