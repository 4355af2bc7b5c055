//! Pool arithmetic, both families through the same functions (STYLE §6: every v4 test has a v6 twin).

use super::*;

fn net(s: &str) -> IpNetwork {
    s.parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Every allocatable slot's endpoint, in slot order (small pools only).
fn endpoints(pool: &Pool) -> Vec<String> {
    (0..pool.slot_count())
        .filter(|i| !pool.is_reserved(*i))
        .map(|i| pool.endpoint(i).to_string())
        .collect()
}

#[test]
fn ipv6_slots_are_aligned_real_prefixes_and_skip_the_gateway_prefix() {
    let pool = Pool::new(net("fd00:10:ff01::/64"), 96, None).unwrap();
    assert_eq!(pool.gateway(), ip("fd00:10:ff01::1"));
    assert_eq!(pool.slot_count(), 1 << 32);
    assert!(pool.is_reserved(0), "slot 0 holds the gateway");
    assert_eq!(pool.endpoint(1).to_string(), "fd00:10:ff01::1:0:1/96");
    assert_eq!(pool.endpoint(2).to_string(), "fd00:10:ff01::2:0:1/96");
    for i in [1u128, 2, 77, (1 << 32) - 1] {
        let ep = pool.endpoint(i);
        let slot = pool.slot(i);
        assert_eq!(value_of(ep.network()), slot.first, "aligned: {ep}");
        assert_eq!(slot.last - slot.first, (1u128 << 32) - 1, "a whole /96");
        assert!(!slot.overlaps(&pool.slot(i - 1)) && !slot.overlaps(&pool.slot(0)));
        assert_eq!(pool.index_of(ep.ip()), Some(i));
    }
    assert_eq!(pool.capacity(), (1 << 32) - 1);
}

#[test]
fn ipv4_pool_never_hands_out_network_gateway_or_broadcast() {
    let pool = Pool::new(net("172.21.1.0/24"), 32, None).unwrap();
    assert_eq!(pool.gateway(), ip("172.21.1.1"));
    let eps = endpoints(&pool);
    assert_eq!(eps.first().unwrap(), "172.21.1.2/32");
    assert_eq!(eps.last().unwrap(), "172.21.1.254/32");
    assert_eq!(eps.len(), 253);
    assert_eq!(pool.capacity(), 253);
    for reserved in ["172.21.1.0/32", "172.21.1.1/32", "172.21.1.255/32"] {
        assert!(!eps.iter().any(|e| e == reserved), "{reserved} handed out");
    }
}

#[test]
fn ipv6_single_address_slots_reserve_the_anycast_edges_like_ipv4() {
    let pool = Pool::new(net("fd00::/120"), 128, None).unwrap();
    let eps = endpoints(&pool);
    assert_eq!(eps.first().unwrap(), "fd00::2/128");
    assert_eq!(eps.last().unwrap(), "fd00::fe/128");
    assert_eq!(pool.capacity(), 253);
}

#[test]
fn explicit_gateway_moves_the_reserved_slot() {
    let pool = Pool::new(net("fd00:10::/64"), 96, Some(ip("fd00:10::5:0:9"))).unwrap();
    assert!(pool.is_reserved(5));
    assert!(
        !pool.is_reserved(0),
        "slot 0 is free when the gateway is elsewhere"
    );
    let pool = Pool::new(net("10.0.0.0/29"), 32, Some(ip("10.0.0.6"))).unwrap();
    assert_eq!(
        endpoints(&pool),
        [
            "10.0.0.1/32",
            "10.0.0.2/32",
            "10.0.0.3/32",
            "10.0.0.4/32",
            "10.0.0.5/32"
        ]
    );
}

#[test]
fn gateway_errors_are_typed() {
    assert_eq!(
        Pool::new(net("fd00::/64"), 96, Some(ip("fd01::1"))),
        Err(PoolError::GatewayOutside(ip("fd01::1")))
    );
    assert_eq!(
        Pool::new(net("10.0.0.0/24"), 32, Some(ip("fd00::1"))),
        Err(PoolError::GatewayFamily(ip("fd00::1")))
    );
    assert_eq!(
        Pool::new(net("10.0.0.0/24"), 32, Some(ip("10.0.0.255"))),
        Err(PoolError::GatewayReserved(ip("10.0.0.255")))
    );
}

#[test]
fn ipv4_slash_30_has_one_address_and_slash_31_is_point_to_point() {
    let p30 = Pool::new(net("10.9.0.0/30"), 32, None).unwrap();
    assert_eq!(endpoints(&p30), ["10.9.0.2/32"]);
    let p31 = Pool::new(net("10.9.0.0/31"), 32, None).unwrap();
    assert_eq!(p31.gateway(), ip("10.9.0.1"));
    assert_eq!(
        endpoints(&p31),
        ["10.9.0.0/32"],
        "no network/broadcast on a /31"
    );
    let p31 = Pool::new(net("10.9.0.0/31"), 32, Some(ip("10.9.0.0"))).unwrap();
    assert_eq!(endpoints(&p31), ["10.9.0.1/32"]);
    assert_eq!(
        Pool::new(net("10.9.0.7/32"), 32, None),
        Err(PoolError::NoCapacity(32))
    );
}

#[test]
fn ipv6_slash_127_is_the_twin_of_ipv4_slash_31() {
    let p = Pool::new(net("fd00::/127"), 128, None).unwrap();
    assert_eq!(endpoints(&p), ["fd00::/128"]);
    let p = Pool::new(net("fd00::/126"), 128, None).unwrap();
    assert_eq!(endpoints(&p), ["fd00::2/128"]);
    let p = Pool::new(net("fd00::/126"), 127, None).unwrap();
    assert_eq!(p.slot_count(), 2);
    assert_eq!(
        endpoints(&p),
        ["fd00::3/127"],
        "host address inside the free /127"
    );
    assert_eq!(
        Pool::new(net("fd00::/128"), 128, None),
        Err(PoolError::NoCapacity(128))
    );
}

#[test]
fn slash_96_pool_has_no_room_for_slash_96_endpoints_but_works_with_longer_ones() {
    assert_eq!(
        Pool::new(net("fd00:10:ff01::/96"), 96, None),
        Err(PoolError::NoCapacity(96))
    );
    let pool = Pool::new(net("fd00:10:ff01::/96"), 112, None).unwrap();
    assert_eq!(pool.capacity(), 65535);
    assert_eq!(pool.endpoint(1).to_string(), "fd00:10:ff01::1:1/112");
    let pool = Pool::new(net("fd00:10:ff01::/95"), 96, None).unwrap();
    assert_eq!(endpoints(&pool), ["fd00:10:ff01::1:0:1/96"]);
}

#[test]
fn slot_length_bounds() {
    assert!(matches!(
        Pool::new(net("fd00::/64"), 48, None),
        Err(PoolError::SlotLength {
            prefix: 64,
            slot_len: 48,
            max: 128
        })
    ));
    assert!(matches!(
        Pool::new(net("10.0.0.0/8"), 33, None),
        Err(PoolError::SlotLength { .. })
    ));
    assert_eq!(
        Pool::new(net("::/0"), 128, None),
        Err(PoolError::TooLarge(128))
    );
}

#[test]
fn host_bits_in_the_pool_cidr_are_masked() {
    let pool = Pool::new(net("10.1.2.77/24"), 32, None).unwrap();
    assert_eq!(pool.network().to_string(), "10.1.2.0/24");
    assert_eq!(pool.key(), "10.1.2.0/24@32");
    assert_eq!(pool.gateway(), ip("10.1.2.1"));
}

#[test]
fn exhaustion_is_visible_in_capacity_for_both_families() {
    // A /29 with default gateway: network, gateway and broadcast out, 5 left.
    assert_eq!(
        Pool::new(net("10.0.0.0/29"), 32, None).unwrap().capacity(),
        5
    );
    // The v6 twin: a /125 cut into /128s.
    assert_eq!(
        Pool::new(net("fd00::/125"), 128, None).unwrap().capacity(),
        5
    );
    // /94 cut into /96s: 4 slots, the gateway's taken out.
    assert_eq!(Pool::new(net("fd00::/94"), 96, None).unwrap().capacity(), 3);
}

#[test]
fn spans_of_different_families_never_overlap() {
    let a = Span::single(ip("0.0.0.5"));
    let b = Span::single(ip("::5"));
    assert!(!a.overlaps(&b));
    assert!(a.overlaps(&a));
}

#[test]
fn a_requested_address_takes_its_slot_and_keeps_the_slot_prefix_in_both_families() {
    let v6 = Pool::new(net("fd66:a::/64"), 96, None).unwrap();
    let v4 = Pool::new(net("10.66.0.0/24"), 32, None).unwrap();
    assert_eq!(v6.requested_slot(ip("fd66:a::9:0:5")), Ok(9));
    assert_eq!(
        v6.requested_endpoint(ip("fd66:a::9:0:5")).to_string(),
        "fd66:a::9:0:5/96"
    );
    assert_eq!(v4.requested_slot(ip("10.66.0.77")), Ok(77));
    assert_eq!(
        v4.requested_endpoint(ip("10.66.0.77")).to_string(),
        "10.66.0.77/32"
    );
}

#[test]
fn a_requested_address_the_pool_never_hands_out_is_refused_with_the_reason() {
    let v6 = Pool::new(net("fd66:a::/64"), 96, None).unwrap();
    let v4 = Pool::new(net("10.66.0.0/24"), 32, None).unwrap();
    let cases: [(&Pool, &str, &str); 8] = [
        (&v6, "fd66:b::1:0:1", "is outside the pool fd66:a::/64"),
        (&v4, "10.67.0.5", "is outside the pool 10.66.0.0/24"),
        (&v6, "10.66.0.5", "is outside the pool fd66:a::/64"),
        (&v6, "fd66:a::1", "is the gateway of the pool fd66:a::/64"),
        (&v4, "10.66.0.1", "is the gateway of the pool 10.66.0.0/24"),
        (
            &v6,
            "fd66:a::7",
            "lies in fd66:a::/96, the prefix of the pool fd66:a::/64 that holds its gateway fd66:a::1",
        ),
        (&v4, "10.66.0.255", "is the first or last address of the pool 10.66.0.0/24, which are reserved"),
        (
            &v6,
            "fd66:a::9:0:0",
            "is the subnet-router anycast address of its prefix fd66:a::9:0:0/96; use a host address inside it",
        ),
    ];
    for (pool, address, want) in cases {
        let refusal = pool.requested_slot(ip(address)).unwrap_err();
        assert_eq!(refusal.to_string(), want, "{address}");
    }
    assert!(matches!(
        v4.requested_slot(ip("10.66.0.0")),
        Err(Refusal::Edge { .. })
    ));
}

#[test]
fn spans_read_as_addresses_in_messages() {
    let v6 = Pool::new(net("fd00:10:ff01::/64"), 96, None).unwrap();
    let v4 = Pool::new(net("10.66.0.0/24"), 32, None).unwrap();
    assert_eq!(
        v6.slot(1).to_string(),
        "fd00:10:ff01::1:0:0-fd00:10:ff01::1:ffff:ffff"
    );
    assert_eq!(v4.slot(7).to_string(), "10.66.0.7");
    assert_eq!(Span::single(ip("fd00::5")).to_string(), "fd00::5");
}
