//! The firewall's rules, the VPC-mark map and the nft transactions of table mode.

use crate::net::netns::Netns;
use galactic_testns::privileged::TestNetns;

#[test]
fn firewall_rules_are_owned_idempotent_and_removed_by_tag() {
    galactic_testns::privileged!();
    assert!(
        crate::net::firewall::available(),
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
        crate::net::netns::run_in(
            &Netns::open(&ns.path()).unwrap(),
            crate::net::nftables::has_forward_chain,
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
        crate::net::netns::run_in(&Netns::open(&ns.path()).unwrap(), move || {
            crate::net::nftables::has_chain(family, table, chain)
        })
        .unwrap()
        .unwrap()
    };
    let inet = crate::net::nftables::FAMILY_INET;
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
    crate::net::netns::run_in(&ns, || {
        use crate::net::firewall::*;
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
fn vpc_mark_elements_written_over_netlink_and_by_nft_are_the_same_elements() {
    use crate::net::domain::marks::{self, Mark};
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
    crate::net::netns::run_in(&ns, || {
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
    crate::net::netns::run_in(&ns, || {
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
    use crate::net::firewall::{prepare_table_mode, Prepared};
    use crate::net::nftables::generation;
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
    crate::net::netns::run_in(&ns, || {
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
    crate::net::netns::run_in(&ns, || {
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
    use crate::net::nftables::mark_users::mark_users;
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
    let users = crate::net::netns::run_in(&ns, || mark_users("galactic"))
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
        let users = crate::net::netns::run_in(&ns, || mark_users("galactic"))
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
