//! Every validation message, mode selection, narrowing and the default pool filler.

use super::*;
use serde_json::json;

fn ctx(enable: bool) -> Context {
    Context {
        enable_local_ipam: enable,
    }
}

fn parse_ipam(ipam: Value) -> Result<IpamConfig, ConfigError> {
    parse(&json!({ "ipam": ipam }), ctx(false))
}

fn err(ipam: Value) -> String {
    parse_ipam(ipam.clone())
        .map(|c| panic!("{ipam} should fail, got {c:?}"))
        .unwrap_err()
        .to_string()
}

fn pools_of(cfg: &IpamConfig) -> Vec<String> {
    match &cfg.mode {
        Mode::Pools(p) => p.iter().map(Pool::key).collect(),
        other => panic!("not pool mode: {other:?}"),
    }
}

#[test]
fn every_validation_message() {
    let cases: Vec<(Value, &str)> = vec![
        (json!(null), "ipam block is required"),
        (json!([]), "ipam must be a JSON object"),
        (json!({"addresses": [{"address": "fd00::1/64"}], "ipv6_subnet": "fd00::/64"}),
         "ipam.addresses cannot be combined with ipam.ipv6_subnet: addresses assigns pre-decided addresses, the other fields allocate"),
        (json!({"addresses": [{"address": "fd00::1/64"}], "static_ip": "fd00::1", "ipv4_subnet": "10.0.0.0/24"}),
         "ipam.addresses cannot be combined with ipam.static_ip: addresses assigns pre-decided addresses, the other fields allocate"),
        (json!({"addresses": [{"address": "fd00::1"}]}),
         "invalid CIDR value for field 'ipam.addresses[].address': \"fd00::1\" (an explicit prefix length is required)"),
        (json!({"addresses": [{"address": "nope/3"}]}),
         "invalid CIDR value for field 'ipam.addresses[].address': \"nope/3\" (an explicit prefix length is required)"),
        (json!({"addresses": [{"address": "10.0.0.5/24"}]}),
         "ipam.addresses IPv4 entry \"10.0.0.5/24\" must be a /32: the data plane models an IPv4 endpoint as a host route"),
        (json!({"addresses": [{"address": "fd00::1/64"}, {"address": "fd01::1/64"}]}),
         "ipam.addresses carries more than one IPv6 address"),
        (json!({"addresses": [{"address": "10.0.0.1/32"}, {"address": "10.0.0.2/32"}]}),
         "ipam.addresses carries more than one IPv4 address"),
        (json!({"addresses": [{"address": "fd00::1/64", "gateway": "10.0.0.1"}]}),
         "ipam.addresses gateway \"10.0.0.1\" is not the same address family as \"fd00::1/64\""),
        (json!({"addresses": [{"address": "fd00::1/64", "gateway": "x"}]}),
         "invalid IP for field 'ipam.addresses[].gateway': \"x\""),
        (json!({"addresses": ["fd00::1/64"]}),
         "ipam.addresses must be a list of {\"address\", \"gateway\"} objects"),
        (json!({"ipv6_subnet": "fd00::"}), "invalid CIDR value for field 'ipam.ipv6_subnet': \"fd00::\""),
        (json!({"ipv6_subnet": "10.0.0.0/8"}), "ipam.ipv6_subnet must be an IPv6 CIDR, got IPv4: \"10.0.0.0/8\""),
        (json!({"ipv4_subnet": "fd00::/64"}), "ipam.ipv4_subnet must be an IPv4 CIDR, got IPv6: \"fd00::/64\""),
        (json!({"ipv6_subnet": "fd00::/97"}),
         "ipam.ipv6_subnet \"fd00::/97\" endpoint prefix length /96 must be at least the pool's prefix length /97 and at most /128"),
        (json!({"ipv6_subnet": "fd00::/96", "subnet_len": 96}),
         "ipam.ipv6_subnet \"fd00::/96\" leaves no allocatable /96 once the gateway's prefix and the reserved addresses are taken out"),
        (json!({"ipv4_subnet": "10.0.0.1/32"}),
         "ipam.ipv4_subnet \"10.0.0.1/32\" leaves no allocatable /32 once the gateway's prefix and the reserved addresses are taken out"),
        (json!({"ipv6_subnet": "fd00::/64", "ipv6_gateway": "fd01::1"}),
         "ipam.ipv6_subnet \"fd00::/64\" gateway fd01::1 is not inside the pool"),
        (json!({"ipv4_subnet": "10.0.0.0/24", "ipv4_gateway": "10.0.0.255"}),
         "ipam.ipv4_subnet \"10.0.0.0/24\" gateway 10.0.0.255 is the pool's first or last address, which are reserved"),
        (json!({"ipv4_subnet": "10.0.0.0/24", "ipv4_gateway": "fd00::1"}),
         "ipam.ipv4_gateway must be an IPv4 address, got IPv6: \"fd00::1\""),
        (json!({"ipv6_subnet": "fd00::/64", "ipv6_gateway": "zz"}), "invalid IP for field 'ipam.ipv6_gateway': \"zz\""),
        (json!({"ipv6_subnet": "fd00::/64", "subnet_len": 0}), "ipam.subnet_len 0 must be between 1 and 128"),
        (json!({"ipv6_subnet": "fd00::/64", "subnet_len": 129}), "ipam.subnet_len 129 must be between 1 and 128"),
        (json!({"ipv6_subnet": "fd00::/64", "subnet_len": "96"}), "ipam.subnet_len must be a non-negative integer"),
        (json!({"ipv6_subnet": 5}), "ipam.ipv6_subnet must be a string"),
        (json!({"ipv6_subnet": "fd00::/64", "address_families": ["ipv7"]}),
         "invalid ipam.address_families entry \"ipv7\": must be \"ipv6\" or \"ipv4\""),
        (json!({"ipv6_subnet": "fd00::/64", "address_families": [4]}), "ipam.address_families must be a list of strings"),
        (json!({"ipv6_subnet": "fd00::/64", "address_families": ["ipv4"]}),
         "ipam.address_families [ipv4] excludes every pool this config configures (ipam.ipv6_subnet/ipam.ipv4_subnet)"),
        (json!({}), "ipam.ipv6_subnet or ipam.ipv4_subnet is required (or enable GALACTIC_IPAM_ENABLE_LOCAL_IPAM)"),
        (json!({"static_ip": "10.1.1.1"}), "ipam.static_ip must be an IPv6 address, got IPv4: \"10.1.1.1\""),
        (json!({"static_ip": "garbage"}), "invalid IP for field 'ipam.static_ip': \"garbage\""),
    ];
    for (ipam, want) in cases {
        assert_eq!(err(ipam.clone()), want, "for {ipam}");
    }
    assert_eq!(
        parse_ipam(json!({"addresses": [{}]})).unwrap_err().to_string(),
        "invalid CIDR value for field 'ipam.addresses[].address': \"\" (an explicit prefix length is required)"
    );
}

#[test]
fn empty_addresses_list_counts_as_absent_and_empty_entries_are_rejected() {
    let cfg = parse(
        &json!({"ipam": {"addresses": [], "ipv4_subnet": "10.0.0.0/24"}}),
        ctx(false),
    )
    .unwrap();
    assert_eq!(pools_of(&cfg), ["10.0.0.0/24@32"]);
    assert_eq!(err(json!({"addresses": [{"address": null}]})),
        "invalid CIDR value for field 'ipam.addresses[].address': \"\" (an explicit prefix length is required)");
}

#[test]
fn mode_selection_follows_upstream_precedence() {
    let addrs = parse_ipam(json!({"addresses": [
        {"address": "10.0.0.9/32", "gateway": "10.0.0.1"},
        {"address": "fd20:60:ff03:0:1::/96"}]}))
    .unwrap();
    match addrs.mode {
        Mode::Addresses(list) => {
            assert_eq!(
                list[0].address.to_string(),
                "fd20:60:ff03:0:1::/96",
                "IPv6 first, host bits kept"
            );
            assert_eq!(list[1].gateway, Some("10.0.0.1".parse().unwrap()));
        }
        other => panic!("{other:?}"),
    }
    let st = parse_ipam(json!({"static_ip": "fd00::5", "ipv6_subnet": "fd00::/64"})).unwrap();
    assert_eq!(
        st.mode,
        Mode::Static("fd00::5".parse().unwrap()),
        "static_ip wins over pools"
    );
    let both = parse_ipam(
        json!({"ipv4_subnet": "10.0.0.0/24", "ipv6_subnet": "fd00::/64", "subnet_len": 112}),
    )
    .unwrap();
    assert_eq!(
        pools_of(&both),
        ["fd00::/64@112", "10.0.0.0/24@32"],
        "IPv6 first"
    );
}

#[test]
fn address_families_narrows_and_never_widens() {
    let cfg = parse_ipam(
        json!({"ipv4_subnet": "10.0.0.0/24", "ipv6_subnet": "fd00::/64",
        "address_families": ["ipv4"]}),
    )
    .unwrap();
    assert_eq!(pools_of(&cfg), ["10.0.0.0/24@32"]);
    let cfg =
        parse_ipam(json!({"ipv4_subnet": "10.0.0.0/24", "address_families": ["ipv4", "ipv6"]}))
            .unwrap();
    assert_eq!(
        pools_of(&cfg),
        ["10.0.0.0/24@32"],
        "ipv6 listed but not configured: not added"
    );
    let cfg = parse_ipam(json!({"static_ip": "fd00::1", "address_families": ["ipv4"]})).unwrap();
    assert!(
        matches!(cfg.mode, Mode::Static(_)),
        "static bypasses narrowing"
    );
}

#[test]
fn default_pool_only_when_enabled_and_underspecified() {
    let cfg = parse(&json!({"ipam": {}}), ctx(true)).unwrap();
    assert_eq!(pools_of(&cfg), ["fd00:10:ff01::/64@96"]);
    let cfg = parse(&json!({"ipam": {"ipv4_subnet": "10.0.0.0/24"}}), ctx(true)).unwrap();
    assert_eq!(
        pools_of(&cfg),
        ["10.0.0.0/24@32"],
        "a configured pool is not widened"
    );
    assert_eq!(
        parse(&json!({"ipam": {"address_families": ["ipv4"]}}), ctx(true)).unwrap_err(),
        ConfigError::FamiliesExcludeAll("ipv4".into())
    );
    assert!(local_ipam_enabled(Some("TRUE")) && local_ipam_enabled(Some("true")));
    assert!(!local_ipam_enabled(Some("1")) && !local_ipam_enabled(None));
}

#[test]
fn the_store_is_where_the_node_says_whatever_the_stanza() {
    let node = NodeConfig::defaults();
    let settings = StoreSettings::of(&node);
    assert_eq!(
        settings.data_dir,
        std::path::Path::new("/var/lib/galactic/ipam")
    );
    assert_eq!(
        settings.legacy_dir,
        std::path::Path::new(galactic_core::config::DEFAULT_IPAM_LEGACY_DIR)
    );
    assert_eq!(
        settings.lock_timeout,
        galactic_core::config::DEFAULT_IPAM_LOCK_TIMEOUT
    );
    // The block no longer has store keys: they are the node's (refused in a stanza before the
    // block is read), so a block that still carries one parses as if it did not.
    let cfg = parse_ipam(json!({"ipv6_subnet": "fd00::/64", "data_dir": "/srv/ipam"})).unwrap();
    assert_eq!(
        cfg,
        parse_ipam(json!({"ipv6_subnet": "fd00::/64"})).unwrap()
    );
}

#[test]
fn an_addresses_entry_must_be_an_object_even_one_serde_could_read_as_a_struct() {
    // serde reads a struct from a JSON list too; an entry written as a list is still refused.
    for entries in [json!([["fd00::1/64"]]), json!([["fd00::1/64", "fd00::ff"]])] {
        assert_eq!(
            err(json!({ "addresses": entries })),
            "ipam.addresses must be a list of {\"address\", \"gateway\"} objects"
        );
    }
}

#[test]
fn a_mode_ignores_the_keys_it_does_not_read_even_of_the_wrong_type() {
    let unused = json!({"ipv6_gateway": 5, "ipv4_gateway": [], "subnet_len": "96",
        "address_families": "ipv6"});
    let with = |mode: Value| {
        let mut block = unused.clone();
        if let (Some(block), Value::Object(mode)) = (block.as_object_mut(), mode) {
            block.extend(mode);
        }
        parse_ipam(block).map(|c| c.mode)
    };
    assert_eq!(
        with(json!({"static_ip": "fd00::5"})),
        Ok(Mode::Static("fd00::5".parse().unwrap()))
    );
    assert!(matches!(
        with(json!({"addresses": [{"address": "fd00::1/64"}]})),
        Ok(Mode::Addresses(_))
    ));
    // The same keys are refused where pool mode reads them, in its order.
    assert_eq!(
        with(json!({"ipv6_subnet": "fd00::/64"})).unwrap_err(),
        ConfigError::WrongType {
            field: "subnet_len",
            expected: "a non-negative integer"
        }
    );
}

#[test]
fn the_first_broken_rule_is_reported_whatever_the_key_order() {
    let cases: Vec<(Value, &str)> = vec![
        // The combination rule before the entries.
        (json!({"addresses": [5], "static_ip": "fd00::1"}),
         "ipam.addresses cannot be combined with ipam.static_ip: addresses assigns pre-decided addresses, the other fields allocate"),
        // Entries in order: the first entry's value before the second entry's type.
        (json!({"addresses": [{"address": "x/1"}, 5]}),
         "invalid CIDR value for field 'ipam.addresses[].address': \"x/1\" (an explicit prefix length is required)"),
        (json!({"ipv6_subnet": "fd00::/64", "address_families": ["ipv7", 4]}),
         "invalid ipam.address_families entry \"ipv7\": must be \"ipv6\" or \"ipv4\""),
        (json!({"ipv6_subnet": "fd00::/64", "address_families": [4, "ipv7"]}),
         "ipam.address_families must be a list of strings"),
    ];
    for (ipam, want) in cases {
        assert_eq!(err(ipam.clone()), want, "for {ipam}");
    }
}

#[test]
fn a_slash_96_pool_without_subnet_len_has_the_upstream_capacity() {
    // Upstream cut a /96 pool into 255 endpoints 2^24 apart: /104 slots, the gateway's reserved.
    let cfg = parse_ipam(json!({"ipv6_subnet": "fd00:10:ff01::/96"})).unwrap();
    assert_eq!(pools_of(&cfg), ["fd00:10:ff01::/96@104"]);
    let Mode::Pools(pools) = &cfg.mode else {
        panic!("{cfg:?}")
    };
    assert_eq!(pools[0].capacity(), 255);
    // The first endpoint's /104 holds upstream's first allocation (::100:0), so an imported
    // upstream record of it keeps that slot taken.
    assert_eq!(pools[0].endpoint(1).to_string(), "fd00:10:ff01::100:1/104");
    // A shorter pool keeps the /96 default; an explicit subnet_len is kept as written.
    let wide = parse_ipam(json!({"ipv6_subnet": "fd00::/64"})).unwrap();
    assert_eq!(pools_of(&wide), ["fd00::/64@96"]);
    let explicit = parse_ipam(json!({"ipv6_subnet": "fd00::/96", "subnet_len": 112})).unwrap();
    assert_eq!(pools_of(&explicit), ["fd00::/96@112"]);
}
