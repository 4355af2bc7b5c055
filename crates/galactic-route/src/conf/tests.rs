use super::*;
use serde_json::json;

fn stanza(terminations: Value) -> Value {
    json!({"cniVersion": "1.1.0", "name": "n", "type": "galactic-route",
           "vpc": "A", "vpcattachment": "1", "terminations": terminations})
}

fn net(text: &str) -> IpNetwork {
    text.parse().unwrap()
}

#[test]
fn parses_both_families_with_and_without_via_and_masks_networks() {
    let conf = RouteConf::parse(&stanza(json!([
        {"network": "198.51.100.7/24"},
        {"network": "2001:db8:77::1/64", "via": "fd66:1::5"},
        {"network": "203.0.113.0/25", "via": "10.66.0.2"},
        {"network": "2001:db8:78::/48", "via": ""},
        {"network": "192.0.2.0/24", "via": null}
    ])))
    .unwrap();
    assert_eq!(conf.host_ifname(), "G00000000A001H");
    assert_eq!(
        conf.terminations,
        vec![
            Termination {
                network: net("198.51.100.0/24"),
                via: None
            },
            Termination {
                network: net("2001:db8:77::/64"),
                via: Some("fd66:1::5".parse().unwrap())
            },
            Termination {
                network: net("203.0.113.0/25"),
                via: Some("10.66.0.2".parse().unwrap())
            },
            Termination {
                network: net("2001:db8:78::/48"),
                via: None
            },
            Termination {
                network: net("192.0.2.0/24"),
                via: None
            },
        ]
    );
}

#[test]
fn absent_or_null_terminations_are_an_empty_list() {
    let mut raw = stanza(Value::Null);
    assert!(RouteConf::parse(&raw).unwrap().terminations.is_empty());
    raw.as_object_mut().unwrap().remove("terminations");
    assert!(RouteConf::parse(&raw).unwrap().terminations.is_empty());
}

#[test]
fn ids_are_validated_with_the_masters_messages() {
    let cases = [
        (
            json!({"vpcattachment": "1"}),
            "vpc is required and must be a non-empty base62 string",
        ),
        (
            json!({"vpc": 5, "vpcattachment": "1"}),
            "vpc is required and must be a non-empty base62 string",
        ),
        (
            json!({"vpc": "A"}),
            "vpcattachment is required and must be a non-empty base62 string",
        ),
        (
            json!({"vpc": "a-b", "vpcattachment": "1"}),
            "invalid base62 value for field 'vpc': \"a-b\"",
        ),
        (
            json!({"vpc": "A", "vpcattachment": "zzzz"}),
            "vpcattachment \"zzzz\" is out of range",
        ),
        (
            json!({"vpc": "zzzzzzzzzz", "vpcattachment": "1"}),
            "vpc \"zzzzzzzzzz\" is out of range",
        ),
    ];
    for (raw, want) in cases {
        let err = RouteConf::parse(&raw).unwrap_err();
        assert!(matches!(err, StanzaError::Ident(_)), "{raw}: {err:?}");
        assert!(err.to_string().starts_with(want), "{raw}: {err}");
    }
}

#[test]
fn every_termination_error_is_precise() {
    let cases: &[(Value, &str)] = &[
        (
            json!({"network": "10.0.0.0/8"}),
            "terminations must be a list of {\"network\": CIDR, \"via\"?: IP} objects, got {\"network\":\"10.0.0.0/8\"}",
        ),
        (
            json!(["10.0.0.0/8"]),
            "terminations[0] must be an object {\"network\": CIDR, \"via\"?: IP}, got \"10.0.0.0/8\"",
        ),
        (
            json!([{"network": "10.0.0.0/8"}, {"via": "10.0.0.1"}]),
            "terminations[1] has no \"network\": give a CIDR such as 198.51.100.0/24 or 2001:db8::/64",
        ),
        (
            json!([{"network": ""}]),
            "terminations[0] has no \"network\"",
        ),
        (
            json!([{"network": "10.0.0.0/8", "gw": "10.0.0.1"}]),
            "terminations[0] has unknown key \"gw\": only \"network\" and \"via\" are allowed",
        ),
        (
            json!([{"network": "10.0.0.1"}]),
            "terminations[0].network \"10.0.0.1\" is not a CIDR (address/prefix-length): the prefix length is missing (for a single host write 10.0.0.1/32)",
        ),
        (
            json!([{"network": "2001:db8::1"}]),
            "terminations[0].network \"2001:db8::1\" is not a CIDR (address/prefix-length): the prefix length is missing (for a single host write 2001:db8::1/128)",
        ),
        (
            json!([{"network": "10.0.0.0/33"}]),
            "terminations[0].network \"10.0.0.0/33\" is not a CIDR",
        ),
        (
            json!([{"network": "nonsense/8"}]),
            "terminations[0].network \"nonsense/8\" is not a CIDR",
        ),
        (
            json!([{"network": 10}]),
            "terminations[0].network 10 is not a CIDR (address/prefix-length): it must be a string",
        ),
        (
            json!([{"network": "10.0.0.0/8", "via": "10.0.0.300"}]),
            "terminations[0].via \"10.0.0.300\" is not an IP address",
        ),
        (
            json!([{"network": "10.0.0.0/8", "via": 7}]),
            "terminations[0].via 7 is not an IP address: it must be a string",
        ),
        (
            json!([{"network": "10.0.0.0/8", "via": "fd00::1"}]),
            "terminations[0].via fd00::1 is IPv6 but network 10.0.0.0/8 is IPv4: a next hop must be of the network's family",
        ),
        (
            json!([{"network": "2001:db8::/64", "via": "10.0.0.1"}]),
            "terminations[0].via 10.0.0.1 is IPv4 but network 2001:db8::/64 is IPv6",
        ),
        (
            json!([{"network": "10.0.0.0/8", "via": "0.0.0.0"}]),
            "terminations[0].via 0.0.0.0 cannot be a next hop: it is the unspecified address",
        ),
        (
            json!([{"network": "2001:db8::/64", "via": "ff02::1"}]),
            "terminations[0].via ff02::1 cannot be a next hop: it is a multicast address",
        ),
        (
            json!([{"network": "10.0.0.0/8", "via": "255.255.255.255"}]),
            "terminations[0].via 255.255.255.255 cannot be a next hop: it is the broadcast address",
        ),
        (
            json!([{"network": "10.1.0.0/16"}, {"network": "2001:db8::/64"}, {"network": "10.1.2.3/16", "via": "10.0.0.1"}]),
            "terminations[0] and terminations[2] both route 10.1.0.0/16: one route per network and VPC table",
        ),
    ];
    for (terminations, want) in cases {
        let err = RouteConf::parse(&stanza(terminations.clone())).unwrap_err();
        assert!(
            err.to_string().starts_with(want),
            "{terminations}:\n got  {err}\n want {want}"
        );
    }
}

#[test]
fn a_later_bad_entry_is_found_even_after_good_ones() {
    let err = RouteConf::parse(&stanza(json!([
        {"network": "10.0.0.0/8"},
        {"network": "2001:db8::/64"},
        {"network": "2001:db8:1::/64", "via": "10.0.0.1"}
    ])))
    .unwrap_err();
    assert!(
        matches!(err, StanzaError::FamilyMismatch { index: 2, .. }),
        "{err:?}"
    );
}

#[test]
fn the_terminations_list_is_bounded() {
    let entry = |i: usize| json!({"network": format!("10.{}.{}.0/24", i / 256, i % 256)});
    let at_bound: Vec<Value> = (0..MAX_TERMINATIONS).map(entry).collect();
    assert_eq!(
        RouteConf::parse(&stanza(json!(at_bound)))
            .unwrap()
            .terminations
            .len(),
        MAX_TERMINATIONS
    );
    let over: Vec<Value> = (0..50_000).map(entry).collect();
    let err = RouteConf::parse(&stanza(json!(over))).unwrap_err();
    assert_eq!(err, StanzaError::TooMany(50_000));
    assert!(err.to_string().contains("at most 64"), "{err}");
}
