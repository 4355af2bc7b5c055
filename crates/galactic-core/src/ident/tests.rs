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

#[test]
fn route_targets_use_the_low_32_bits() {
    let rt = |hex: &str| route_target(65000, &VpcId::parse(&hex_to_base62(hex).unwrap()).unwrap());
    assert_eq!(rt("0000000004d2"), "65000:1234");
    assert_eq!(rt("000100000001"), "65000:1");
    assert_eq!(rt("0000ffffffff"), "65000:4294967295");
    let vpc = VpcId::parse("jU").unwrap();
    assert_eq!(route_target(4_200_000_000, &vpc), "4200000000:1234");
}

#[test]
fn crd_names_match_upstream() {
    assert_eq!(bgp_vrf_instance_name("abc", "worker-1"), "98de-worker-1");
    assert_eq!(
        bgp_vrf_instance_name("0000000jU", "dfw-worker"),
        "4d2-dfw-worker"
    );
    assert_eq!(bgp_vrf_instance_name("1", "n"), "1-n");
    assert_eq!(bgp_advertisement_name("abc", "abc"), "98de-98de");
    assert_eq!(bgp_advertisement_name("0000000jU", "G"), "4d2-2a");
    assert_eq!(bgp_advertisement_name("1", "1"), "1-1");
    let hashed = name_segment("not base62!");
    assert!(hashed.starts_with('x') && hashed.len() == 13, "{hashed}");
    assert_eq!(hashed, name_segment("not base62!"), "stable");
    let vpc = VpcId::parse("0A").unwrap();
    let att = AttachmentId::parse("b").unwrap();
    assert_eq!(tenant_identifier(&vpc, &att), "0A-b", "raw, not canonical");
}
