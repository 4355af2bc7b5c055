//! Reads the kernel filters: a dump or a lookup receives what it asks for, not the node's
//! other objects.

use super::open;
use crate::ip::Family;
use crate::net::netlink::{AddrFlags, RouteKind, RouteSpec};
use crate::net::netns::Netns;
use galactic_testns::privileged::TestNetns;

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
        let before = crate::net::netlink::received();
        let routes = nl.routes(family, 70_000).unwrap();
        (routes, crate::net::netlink::received() - before)
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
        let before = crate::net::netlink::received();
        let via = nl.routes_via(family, table, mine).unwrap();
        assert_eq!(crate::net::netlink::received() - before, 1, "{via:?}");
        assert_eq!(via.len(), 1, "{via:?}");
        assert!(own.contains(&via[0].dst.to_string().as_str()));
        assert_eq!(via[0].dev, Some(mine));

        let before = crate::net::netlink::received();
        let unreachable = nl
            .routes_of_kind(family, table, RouteKind::Unreachable)
            .unwrap();
        assert_eq!(
            crate::net::netlink::received() - before,
            1,
            "{unreachable:?}"
        );
        assert_eq!(unreachable.len(), 1, "{unreachable:?}");
        assert_eq!(unreachable[0].dst.prefix(), 0);
        assert_eq!(unreachable[0].kind, RouteKind::Unreachable);

        assert_eq!(nl.routes(family, table).unwrap().len(), 102);
    }
}

/// One link's addresses and neighbours, a controller's links, one neighbour entry and one
/// element of the VPC-mark map are each read alone: the kernel filters the answer, so the messages received
/// do not grow with the node's other links and elements. (A bridge stands in for the VRF as the
/// controller: this machine's kernel may have no VRF, and the kernel's filter is the same.)
#[test]
fn a_links_and_a_controllers_objects_are_received_alone() {
    use crate::net::domain::marks::{self, Mark};
    galactic_testns::privileged!();
    let host = TestNetns::new("nlalone");
    let peer = TestNetns::new("nlalonep");
    let (ns, nl) = open(&host);
    let peer_ns = Netns::open(&peer.path()).unwrap();
    let mark = Mark {
        value: 0x0100_0000,
        mask: 0xff00_0000,
    };
    crate::net::netns::run_in(&ns, || marks::prepare_node().unwrap()).unwrap();
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
        crate::net::netns::run_in(&ns, || marks::select(&[], name, mark).unwrap()).unwrap();
        link
    };
    host.ip(&["link", "add", "ctl0", "type", "bridge"]);
    let ctl = nl.require_link("ctl0").unwrap();
    let mine = plant("mine0", 1, Some(ctl.index));
    let measure = || {
        let count = |read: &dyn Fn() -> usize| {
            let before = crate::net::netlink::received();
            let objects = read();
            (objects, crate::net::netlink::received() - before)
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
            crate::net::netns::run_in(&ns, || {
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
    crate::net::netns::run_in(&ns, || {
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
fn element(mark: crate::net::domain::marks::Mark) -> crate::net::nftables::map::Element {
    crate::net::nftables::map::Element {
        ifname: "mine0".to_owned(),
        mark: mark.value,
    }
}
