use super::*;

#[test]
fn base62_matches_upstream_examples() {
    for (value, text) in [(0u64, "0"), (42, "G"), (62, "10"), (1234, "jU")] {
        assert_eq!(base62_encode(value), text);
        assert_eq!(base62_to_hex(text), Some(format!("{value:x}")));
    }
    assert_eq!(base62_to_hex("0000000jU").as_deref(), Some("4d2"));
    assert_eq!(base62_to_hex("abc").as_deref(), Some("98de"));
    assert_eq!(hex_to_base62("4D2").as_deref(), Some("jU"));
    assert_eq!(base62_to_hex(""), None);
    assert_eq!(base62_to_hex("a-b"), None);
}

#[test]
fn base62_hex_round_trip_for_many_values() {
    for value in [
        1u64,
        61,
        63,
        3843,
        3844,
        0xffff,
        1 << 47,
        (1 << 48) - 1,
        u64::MAX,
    ] {
        let text = base62_encode(value);
        assert_eq!(base62_to_hex(&text), Some(format!("{value:x}")), "{value}");
        assert_eq!(hex_to_base62(&format!("{value:x}")), Some(text));
    }
}

#[test]
fn interface_names_match_upstream() {
    let vpc = VpcId::parse("10").unwrap();
    let att = AttachmentId::parse("10").unwrap();
    assert_eq!(vrf_name(&vpc), "G000000010V");
    assert_eq!(host_ifname(&vpc, &att), "G000000010010H");
    assert_eq!(guest_ifname(&vpc, &att), "G000000010010G");
    // Leading zeros in the input are harmless, as with upstream's padding.
    let vpc0 = VpcId::parse("0A").unwrap();
    assert_eq!(vrf_name(&vpc0), vrf_name(&VpcId::parse("A").unwrap()));
    // Over-long but in-range input still builds a valid 14-character name.
    let long = VpcId::parse("00000000000001").unwrap();
    assert_eq!(host_ifname(&long, &att), "G000000001010H");
    let max_vpc = VpcId::parse(&base62_encode((1 << 48) - 1)).unwrap();
    let max_att = AttachmentId::parse(&base62_encode(0xffff)).unwrap();
    assert_eq!(host_ifname(&max_vpc, &max_att).len(), 14);
}

#[test]
fn ids_are_range_checked() {
    assert_eq!(
        VpcId::parse("").unwrap_err(),
        IdentError::Empty { field: "vpc" }
    );
    let err = VpcId::parse("ab-c").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid base62 value for field 'vpc': \"ab-c\""
    );
    assert!(VpcId::parse("a\u{1}")
        .unwrap_err()
        .to_string()
        .contains("<binary>"));
    let too_big = base62_encode(1 << 48);
    assert!(matches!(
        VpcId::parse(&too_big),
        Err(IdentError::TooLarge { bits: 48, .. })
    ));
    assert!(
        VpcId::parse("zzzzzzzzzzzzzzzzzzzzzzzzz").is_err(),
        "no overflow panic"
    );
    assert_eq!(
        AttachmentId::parse(&base62_encode(0xffff)).unwrap().value(),
        0xffff
    );
    let err = AttachmentId::parse(&base62_encode(0x10000)).unwrap_err();
    assert!(err.to_string().contains("vpcattachment") && err.to_string().contains("16-bit"));
}

/// The VPC a route target names, for either form ([`route_target`]).
fn vpc_of(text: &str) -> u64 {
    let (admin, number) = text.split_once(':').unwrap();
    let number: u64 = number.parse().unwrap();
    match admin.parse::<std::net::Ipv4Addr>() {
        Ok(address) => {
            assert!(number <= 0xffff, "{text}");
            u64::from(u32::from(address)) << 16 | number
        }
        Err(_) => number,
    }
}

/// The Galactic API's route-target rule (BGPVRFInstance) and community rule (BGPAdvertisement).
fn accepted(text: &str) -> bool {
    static RULES: std::sync::OnceLock<(regex::Regex, regex::Regex)> = std::sync::OnceLock::new();
    let (rt, community) = RULES.get_or_init(|| {
        (
            regex::Regex::new(
                r"^([0-9]{1,9}[.][0-9]{1,9}[.][0-9]{1,9}[.][0-9]{1,9}|[0-9]{1,9}):[0-9]{1,9}$",
            )
            .unwrap(),
            regex::Regex::new(
                r"^[0-9]{1,10}:[0-9]{1,10}$|^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}:[0-9]{1,10}$",
            )
            .unwrap(),
        )
    });
    !text.is_empty() && text.len() <= 21 && rt.is_match(text) && community.is_match(text)
}

fn vpc(value: u64) -> VpcId {
    VpcId::parse(&base62_encode(value)).unwrap()
}

#[test]
fn route_targets_keep_the_go_text_where_the_api_accepts_it() {
    let rt = |hex: &str| {
        route_target(
            Some(65000),
            &VpcId::parse(&hex_to_base62(hex).unwrap()).unwrap(),
        )
    };
    assert_eq!(rt("0000000004d2"), "65000:1234");
    assert_eq!(rt("00003b9ac9ff"), "65000:999999999");
    assert_eq!(route_target(Some(999_999_999), &vpc(1)), "999999999:1");
    assert_eq!(
        route_target(Some(0), &vpc(7)),
        "0:7",
        "localASN 2^32 speaks as AS 0"
    );
    // Where the Go text is refused (10 digits) or names another VPC too (low 32 bits), the VPC's
    // 48 bits as an IPv4-specific route target.
    assert_eq!(rt("0000ffffffff"), "0.0.255.255:65535");
    assert_eq!(rt("00003b9aca00"), "0.0.59.154:51712");
    assert_eq!(
        rt("000100000001"),
        "0.1.0.0:1",
        "not 65000:1, which is VPC 1's"
    );
    assert_eq!(rt("ffffffffffff"), "255.255.255.255:65535");
    assert_eq!(
        route_target(Some(4_200_000_000), &vpc(1234)),
        "0.0.0.0:1234"
    );
    assert_eq!(route_target(Some(1_000_000_000), &vpc(1)), "0.0.0.0:1");
    assert_eq!(
        route_target(None, &vpc(1)),
        "0.0.0.0:1",
        "no router: no ASN"
    );
    assert_eq!(speaking_asn(65000), 65000);
    assert_eq!(speaking_asn((1 << 32) + 65000), 65000);
    assert_eq!(speaking_asn(i64::MAX), u32::MAX);
}

#[test]
fn every_asn_and_vpc_gives_an_accepted_route_target_unique_per_vpc() {
    let edge_asns = [
        None,
        Some(0),
        Some(1),
        Some(65535),
        Some(65536),
        Some(999_999_999),
        Some(1_000_000_000),
        Some(4_199_999_999),
        Some(4_200_000_000),
        Some(4_294_967_294),
        Some(u32::MAX),
    ];
    let mut vpcs: Vec<u64> = vec![0, 1, 999_999_999, 1_000_000_000, (1 << 32) - 1, 1 << 32];
    vpcs.extend([
        (1 << 32) + 1,
        (1 << 32) + 999_999_999,
        (1 << 48) - 1,
        0xffff,
        0x10000,
    ]);
    // A deterministic spread over the whole 48-bit space.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..5_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        vpcs.push(x & ((1 << 48) - 1));
        vpcs.push(x % 2_000_000_000);
    }
    for asn in edge_asns
        .into_iter()
        .chain((0..40).map(|i| Some(speaking_asn(i64::MAX - i * 7_919_113))))
    {
        let mut seen = std::collections::HashMap::new();
        for &v in &vpcs {
            let text = route_target(asn, &vpc(v));
            assert!(
                accepted(&text),
                "ASN {asn:?} VPC {v}: {text:?} refused by the API"
            );
            assert_eq!(vpc_of(&text), v, "{text} names VPC {v}");
            if let Some(other) = seen.insert(text.clone(), v) {
                assert_eq!(other, v, "{text} names VPCs {other} and {v}");
            }
            let go = asn.map(|a| format!("{a}:{}", v as u32));
            if let Some(go) = go.filter(|g| accepted(g) && v < 1 << 32) {
                assert_eq!(text, go, "the Go chain's text where it was valid");
            }
        }
    }
}

#[test]
fn crd_names_match_upstream() {
    assert_eq!(bgp_vrf_instance_name("abc", "worker-1"), "98de-worker-1");
    assert_eq!(
        bgp_vrf_instance_name("0000000jU", "dfw-worker"),
        "4d2-dfw-worker"
    );
    assert_eq!(bgp_vrf_instance_name("1", "n"), "1-n");
    assert_eq!(bgp_advertisement_name("abc", "abc", "n"), "98de-98de-n");
    assert_eq!(
        bgp_advertisement_name("0000000jU", "G", "worker-1"),
        "4d2-2a-worker-1"
    );
    assert_eq!(bgp_advertisement_name("1", "1", "a.b"), "1-1-a.b");
    assert_eq!(legacy_advertisement_name("0000000jU", "G"), "4d2-2a");
    let hashed = name_segment("not base62!");
    assert!(hashed.starts_with('x') && hashed.len() == 13, "{hashed}");
    assert_eq!(hashed, name_segment("not base62!"), "stable");
    let vpc = VpcId::parse("0A").unwrap();
    let att = AttachmentId::parse("b").unwrap();
    assert_eq!(tenant_identifier(&vpc, &att), "0A-b", "raw, not canonical");
}

#[test]
fn long_node_names_are_capped_deterministically_and_short_ones_kept() {
    let widest = "ZZZZZZZZZ"; // the widest VPC id: the longest prefix
    for len in [1, 200, 232, 233, 234, 240, 253] {
        let node = format!("{}{}", "a".repeat(len - 1), "b");
        check_node_name(&node).unwrap();
        for name in [
            bgp_advertisement_name(widest, "ZZZ", &node),
            bgp_vrf_instance_name(widest, &node),
        ] {
            assert!(name.len() <= OBJECT_NAME_MAX, "{len}: {}", name.len());
            assert!(
                name.ends_with(|c: char| c.is_ascii_alphanumeric()),
                "{name}"
            );
        }
    }
    // The widest ids a stanza accepts (48-bit VPC, 16-bit attachment): node names up to 235
    // characters keep upstream's name exactly (docs/kubernetes.md).
    let (vpc_max, att_max) = ("1hVwxnaA7", "h31");
    assert_eq!(
        legacy_advertisement_name(vpc_max, att_max),
        "ffffffffffff-ffff"
    );
    let fits = "a".repeat(235);
    assert_eq!(
        bgp_advertisement_name(vpc_max, att_max, &fits),
        format!("ffffffffffff-ffff-{fits}")
    );
    let over = "a".repeat(236);
    assert_ne!(
        bgp_advertisement_name(vpc_max, att_max, &over),
        format!("ffffffffffff-ffff-{over}")
    );
    let short = "a".repeat(200);
    assert_eq!(
        bgp_advertisement_name("1", "1", &short),
        format!("1-1-{short}"),
        "a name that fits is upstream's"
    );
    // Two long names with the same start stay apart; the same name gives the same object name.
    let long1 = format!("{}1", "n.".repeat(126));
    let long2 = format!("{}2", "n.".repeat(126));
    let capped = bgp_advertisement_name(widest, "ZZZ", &long1);
    assert!(capped.len() <= OBJECT_NAME_MAX, "{capped}");
    assert!(capped.starts_with(&format!(
        "{}-n.n.",
        legacy_advertisement_name(widest, "ZZZ")
    )));
    assert_ne!(capped, bgp_advertisement_name(widest, "ZZZ", &long2));
    assert_eq!(capped, bgp_advertisement_name(widest, "ZZZ", &long1));
    assert!(!capped.contains(".-"), "no empty label: {capped}");
}

#[test]
fn node_names_that_no_object_name_can_hold_are_refused() {
    for good in ["n", "worker-1", "a.b-c.d", "0"] {
        check_node_name(good).unwrap();
    }
    let long = "a".repeat(254);
    for bad in [
        "",
        "Worker",
        "a_b",
        "-a",
        "a-",
        "a..b",
        ".a",
        "a.",
        "a b",
        long.as_str(),
    ] {
        let e = check_node_name(bad).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("node_name"), "{text}");
        assert!(!text.contains('"'), "no Debug quoting: {text}");
    }
}
