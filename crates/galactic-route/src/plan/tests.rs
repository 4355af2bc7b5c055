use super::*;
use ipnetwork::IpNetwork;

const TABLE: u32 = 1000;
const HOST: u32 = 7;
const OTHER: u32 = 9;

fn net(text: &str) -> IpNetwork {
    text.parse().unwrap()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn term(network: &str, via: Option<&str>) -> Termination {
    Termination {
        network: net(network),
        via: via.map(ip),
    }
}

/// The routes a veth attachment's master leaves in the VPC table (pod /32 and /96 device routes).
fn master_routes() -> Vec<RouteSpec> {
    vec![
        RouteSpec::device(net("10.66.0.2/32"), TABLE, HOST),
        RouteSpec::device(net("fd66:1::100:0/96"), TABLE, HOST),
        RouteSpec::device(net("10.66.0.3/32"), TABLE, OTHER),
        RouteSpec {
            dst: net("0.0.0.0/0"),
            table: TABLE,
            kind: RouteKind::Unreachable,
            dev: None,
            gateway: None,
            onlink: false,
            scope_link: false,
        },
    ]
}

#[test]
fn a_termination_without_via_is_a_link_scope_device_route() {
    for network in ["198.51.100.0/24", "2001:db8:77::/64"] {
        let spec = route_for(&term(network, None), TABLE, HOST, &master_routes());
        assert_eq!(spec, RouteSpec::device(net(network), TABLE, HOST));
        assert!(spec.scope_link && !spec.onlink && spec.gateway.is_none());
    }
}

#[test]
fn a_via_route_carries_the_device_and_onlink_only_when_the_gateway_is_not_covered() {
    let routes = master_routes();
    let cases = [
        // The pod's own addresses: covered by the master's device routes.
        ("198.51.100.0/24", "10.66.0.2", false),
        ("2001:db8:77::/64", "fd66:1::100:5", false),
        // Not covered by anything through this device.
        ("198.51.100.0/24", "192.0.2.1", true),
        ("2001:db8:77::/64", "fd99::1", true),
        // Covered, but through another attachment's device.
        ("198.51.100.0/24", "10.66.0.3", true),
        // Link-local IPv6 next hops are always valid on a named device.
        ("2001:db8:77::/64", "fe80::1", false),
    ];
    for (network, via, onlink) in cases {
        let spec = route_for(&term(network, Some(via)), TABLE, HOST, &routes);
        assert_eq!(spec.dev, Some(HOST), "{network} via {via}");
        assert_eq!(spec.gateway, Some(ip(via)));
        assert!(!spec.scope_link, "a gateway route has universe scope");
        assert_eq!(spec.onlink, onlink, "{network} via {via}");
    }
}

#[test]
fn an_ipv4_cover_needs_link_scope() {
    let mut universe = RouteSpec::device(net("10.66.0.0/24"), TABLE, HOST);
    universe.scope_link = false;
    assert!(!reachable_on_link(ip("10.66.0.9"), HOST, &[universe]));
    let link = RouteSpec::device(net("10.66.0.0/24"), TABLE, HOST);
    assert!(reachable_on_link(ip("10.66.0.9"), HOST, &[link]));
}

#[test]
fn classify_finds_present_absent_and_conflicting_routes() {
    let mut table = master_routes();
    let want = route_for(&term("198.51.100.0/24", None), TABLE, HOST, &table);
    assert_eq!(classify(&want, &table), State::Absent);

    table.push(want.clone());
    assert_eq!(classify(&want, &table), State::Present);

    // The same route in another table is irrelevant.
    let mut elsewhere = want.clone();
    elsewhere.table = TABLE + 1;
    assert_eq!(classify(&elsewhere, &table), State::Absent);

    // Same destination, other device: a conflict that names the existing route.
    let other = RouteSpec::device(net("198.51.100.0/24"), TABLE, OTHER);
    assert_eq!(
        classify(&want, std::slice::from_ref(&other)),
        State::Conflict(vec![other])
    );

    // Same destination and device, different gateway: also a conflict.
    let via = route_for(
        &term("198.51.100.0/24", Some("10.66.0.2")),
        TABLE,
        HOST,
        &table,
    );
    assert!(matches!(classify(&via, &table), State::Conflict(_)));

    // The table-mode domain's `unreachable default` makes a default termination a conflict.
    let default = route_for(&term("0.0.0.0/0", None), TABLE, HOST, &table);
    assert!(matches!(classify(&default, &table), State::Conflict(_)));
}

#[test]
fn onlink_is_not_part_of_the_comparison() {
    let want = route_for(&term("2001:db8::/64", Some("fd99::1")), TABLE, HOST, &[]);
    assert!(want.onlink);
    let mut installed = want.clone();
    installed.onlink = false;
    assert!(matches(&installed, &want));
    assert_eq!(classify(&want, &[installed]), State::Present);
}

#[test]
fn describe_names_devices_and_kinds() {
    let name_of = |i: u32| format!("if{i}");
    let via = route_for(
        &term("198.51.100.0/24", Some("192.0.2.1")),
        TABLE,
        HOST,
        &[],
    );
    assert_eq!(
        describe(&via, &name_of),
        "198.51.100.0/24 via 192.0.2.1 dev if7 onlink table 1000"
    );
    assert_eq!(
        describe(&master_routes()[3], &name_of),
        "unreachable 0.0.0.0/0 table 1000"
    );
}
