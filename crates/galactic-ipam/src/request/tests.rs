//! The runtime's address requests, every source and both families.

use super::*;
use galactic_core::ip::Assignment;
use serde_json::json;

fn args(raw: &str) -> CniArgs {
    CniArgs::parse(raw).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn every_source_is_read_and_ipv6_comes_first() {
    let none = requested(&args("IgnoreUnknown=1;K8S_POD_NAME=p"), &json!({})).unwrap();
    assert!(none.is_empty());
    let podman_one = requested(&args("IgnoreUnknown=1;IP=10.66.0.77"), &json!({})).unwrap();
    assert_eq!(podman_one, [ip("10.66.0.77")]);
    let podman_two = requested(
        &args(""),
        &json!({"runtimeConfig": {"ips": ["10.66.0.78", "fd66:a::9:0:5"]}}),
    )
    .unwrap();
    assert_eq!(podman_two, [ip("fd66:a::9:0:5"), ip("10.66.0.78")]);
    // Multus: prefix lengths are accepted and not used; args.cni.ips is a source too.
    let multus = requested(
        &args(""),
        &json!({"args": {"cni": {"ips": ["fd66:a::9:0:5/64"]}},
                "runtimeConfig": {"ips": ["10.66.0.78/24"]}}),
    )
    .unwrap();
    assert_eq!(multus, [ip("fd66:a::9:0:5"), ip("10.66.0.78")]);
    let listed = requested(&args("IP=fd66:a::9:0:5, 10.66.0.78"), &json!({})).unwrap();
    assert_eq!(listed, [ip("fd66:a::9:0:5"), ip("10.66.0.78")]);
}

#[test]
fn one_address_named_twice_counts_once_but_two_of_a_family_are_refused() {
    let same = requested(
        &args("IP=10.66.0.77"),
        &json!({"runtimeConfig": {"ips": ["10.66.0.77/24"]}}),
    )
    .unwrap();
    assert_eq!(same, [ip("10.66.0.77")]);
    for (cni_args, conf) in [
        (
            "IP=10.66.0.77",
            json!({"runtimeConfig": {"ips": ["10.66.0.78"]}}),
        ),
        (
            "",
            json!({"runtimeConfig": {"ips": ["fd66::5", "fd66::6"]}}),
        ),
    ] {
        let err = requested(&args(cni_args), &conf).unwrap_err();
        assert!(matches!(err, RequestError::TwoOfFamily { .. }), "{err}");
        assert!(err.to_string().contains("at most one per family"), "{err}");
    }
}

#[test]
fn malformed_requests_name_the_value_and_its_source() {
    let cases = [
        (args("IP=10.66.0"), json!({}), "10.66.0 (from CNI_ARGS IP)"),
        (
            args(""),
            json!({"runtimeConfig": {"ips": ["fd66::x"]}}),
            "fd66::x (from runtimeConfig.ips)",
        ),
        (
            args(""),
            json!({"runtimeConfig": {"ips": [5]}}),
            "5 (from runtimeConfig.ips)",
        ),
        (
            args(""),
            json!({"args": {"cni": {"ips": "10.0.0.1"}}}),
            "args.cni.ips must be a list",
        ),
    ];
    for (cni_args, conf, want) in cases {
        let err = requested(&cni_args, &conf).unwrap_err().to_string();
        assert!(err.contains(want), "{conf}: {err}");
    }
}

#[test]
fn configured_addressing_accepts_only_its_own_address() {
    let configured = [
        Assignment {
            address: "fd66:a::7:0:1/96".parse().unwrap(),
            gateway: None,
        },
        Assignment {
            address: "10.66.0.7/32".parse().unwrap(),
            gateway: None,
        },
    ];
    check_configured(&[ip("fd66:a::7:0:1"), ip("10.66.0.7")], &configured).unwrap();
    let other = check_configured(&[ip("10.66.0.8")], &configured).unwrap_err();
    assert_eq!(
        other.to_string(),
        "requested address 10.66.0.8 is not this network's configured IPv4 address 10.66.0.7/32"
    );
    let missing = check_configured(&[ip("10.66.0.7")], &configured[..1]).unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("configures no IPv4 addressing"),
        "{missing}"
    );
}
