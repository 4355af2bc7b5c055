//! The runtime's address requests through the built binary, as the master delegates them:
//! `IP=` in `CNI_ARGS` (Podman's `--ip`), the `ips` capability (`runtimeConfig.ips`: Podman's
//! `--ip` with `--ip6`, Multus' `ips`) and `args.cni.ips`, in both families; and what a DEL
//! followed by an ADD of the same attachment gets (Podman's `restart` and `network reload`).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::{addresses, Net};
use galactic_testkit::runtime::Attachment;
use galactic_testkit::Outcome;
use serde_json::json;

const NETNS: &str = "/var/run/netns/test";

fn dual() -> Net {
    Net::new(json!({"ipv6_subnet": "fd66:a::/64", "ipv4_subnet": "10.66.0.0/24"}))
}

/// `command` for container `cid` with `args` in `CNI_ARGS` and `ips` as the capability argument,
/// the stanza declaring the `ips` capability (as the example conflists do).
fn call(net: &Net, command: &str, cid: &str, args: &str, ips: &[&str]) -> Outcome {
    let mut att = Attachment::new(cid, NETNS, "eth0");
    for pair in args.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap();
        att = att.arg(k, v);
    }
    if !ips.is_empty() {
        att = att.capability("ips", json!(ips));
    }
    let list = net.list(json!({"capabilities": {"ips": true}}));
    net.runtime().plugin(&list, 0, command, &att, None)
}

fn add(net: &Net, cid: &str, args: &str, ips: &[&str]) -> Vec<String> {
    addresses(&call(net, "ADD", cid, args, ips).expect_result())
}

fn refused(net: &Net, cid: &str, args: &str, ips: &[&str]) -> String {
    call(net, "ADD", cid, args, ips).expect_error(7)
}

fn del(net: &Net, cid: &str) {
    call(net, "DEL", cid, "", &[]).expect_quiet_success();
}

#[test]
fn exactly_the_requested_address_is_given_in_either_family_from_every_source() {
    let net = dual();
    // Podman --ip: IP= in CNI_ARGS, the other family from the pool.
    let one = add(
        &net,
        "c1",
        "IgnoreUnknown=1;K8S_POD_NAME=c1;IP=10.66.0.77",
        &[],
    );
    assert_eq!(one[1], "10.66.0.77/32", "{one:?}");
    assert!(one[0].starts_with("fd66:a::"), "{one:?}");
    let v6_only = add(&net, "c2", "IP=fd66:a::42:0:9", &[]);
    assert_eq!(v6_only[0], "fd66:a::42:0:9/96");
    // Podman --ip with --ip6: the ips capability, both families.
    let both = add(&net, "c3", "", &["10.66.0.78", "fd66:a::9:0:5"]);
    assert_eq!(both, ["fd66:a::9:0:5/96", "10.66.0.78/32"]);
    // Multus: prefix lengths given, the pool's endpoint prefix kept; args.cni.ips too.
    let multus = add(&net, "c4", "", &["10.66.0.79/24", "fd66:a::10:0:1/64"]);
    assert_eq!(multus, ["fd66:a::10:0:1/96", "10.66.0.79/32"]);
    let list = net.list(json!({"args": {"cni": {"ips": ["10.66.0.80"]}}}));
    let out = net
        .runtime()
        .plugin(&list, 0, "ADD", &Attachment::new("c5", NETNS, "eth0"), None);
    assert_eq!(addresses(&out.expect_result())[1], "10.66.0.80/32");
    let report = net.verify();
    assert_eq!((report.attachments, report.leases), (5, 10));
}

#[test]
fn an_address_outside_the_pool_or_reserved_is_refused_naming_it_and_nothing_is_stored() {
    let net = dual();
    let cases: [(&str, &[&str], &str); 6] = [
        (
            "IP=10.99.0.5",
            &[],
            "requested address 10.99.0.5 is outside the pool 10.66.0.0/24",
        ),
        (
            "",
            &["fd66:b::1:0:1"],
            "requested address fd66:b::1:0:1 is outside the pool fd66:a::/64",
        ),
        (
            "IP=10.66.0.1",
            &[],
            "requested address 10.66.0.1 is the gateway of the pool 10.66.0.0/24",
        ),
        (
            "IP=fd66:a::5",
            &[],
            "requested address fd66:a::5 lies in fd66:a::/96",
        ),
        (
            "IP=10.66.0.255",
            &[],
            "requested address 10.66.0.255 is the first or last address",
        ),
        (
            "IP=10.66.0",
            &[],
            "requested address 10.66.0 (from CNI_ARGS IP) is not an IP address",
        ),
    ];
    for (args, ips, want) in cases {
        let msg = refused(&net, "c1", args, ips);
        assert!(msg.contains(want), "{args} {ips:?}: {msg}");
    }
    // One family refused, the other fine: nothing of either is kept. A request is judged
    // before the store is even opened.
    let msg = refused(&net, "c1", "", &["10.66.0.9", "fd66:b::1"]);
    assert!(msg.contains("fd66:b::1"), "{msg}");
    assert!(!net.data_dir().join("ipam.db").exists());
    let v4_only = Net::new(json!({"ipv4_subnet": "10.66.0.0/24"}));
    let msg = refused(&v4_only, "c1", "IP=fd66:a::9:0:5", &[]);
    assert_eq!(
        msg,
        "requested address fd66:a::9:0:5 cannot be given: this network configures no IPv6 addressing"
    );
}

#[test]
fn an_address_another_attachment_holds_is_refused_without_naming_the_holder() {
    for (first, second) in [
        ("10.66.0.77", "10.66.0.77"),
        ("fd66:a::9:0:5", "fd66:a::9:0:7"),
    ] {
        let net = dual();
        add(&net, "owner-container", &format!("IP={first}"), &[]);
        // The same slot (for IPv6 the same /96, another host address in it) is taken.
        let msg = refused(&net, "c2", &format!("IP={second}"), &[]);
        assert_eq!(
            msg,
            format!("requested address {second} is in use by another attachment")
        );
        assert!(!msg.contains("owner-container"), "{msg}");
        let report = net.verify();
        assert_eq!((report.attachments, report.leases), (1, 2), "{second}");
    }
}

#[test]
fn a_retried_add_asking_for_its_own_addresses_gets_them_and_another_request_is_refused() {
    let net = dual();
    let first = add(&net, "c1", "", &["10.66.0.78", "fd66:a::9:0:5"]);
    let again = add(&net, "c1", "", &["10.66.0.78", "fd66:a::9:0:5"]);
    assert_eq!(first, again);
    let msg = refused(&net, "c1", "IP=10.66.0.79", &[]);
    assert_eq!(
        msg,
        "requested address 10.66.0.79, but this attachment already holds 10.66.0.78/32; DEL the attachment before asking for another address"
    );
    assert_eq!(net.verify().leases, 2);
}

#[test]
fn del_then_add_asking_for_the_old_addresses_gets_them_back_like_a_network_reload() {
    let net = dual();
    let first = add(&net, "c1", "", &[]);
    let bare: Vec<String> = first
        .iter()
        .map(|a| a.split('/').next().unwrap().to_owned())
        .collect();
    add(&net, "c2", "", &[]);
    del(&net, "c1");
    let ips: Vec<&str> = bare.iter().map(String::as_str).collect();
    assert_eq!(add(&net, "c1", "", &ips), first);
}

#[test]
fn del_then_add_of_the_same_attachment_gets_its_addresses_back_like_a_restart() {
    let net = dual();
    let first = add(&net, "c1", "", &[]);
    let other = add(&net, "c2", "", &[]);
    del(&net, "c1");
    // A new attachment does not inherit the released addresses (they wait for the cursor)…
    let newcomer = add(&net, "c3", "", &[]);
    assert!(newcomer.iter().all(|a| !first.contains(a)), "{newcomer:?}");
    // …the same attachment gets them back.
    assert_eq!(add(&net, "c1", "", &[]), first);
    // Twice in a row, and for another container too.
    del(&net, "c1");
    del(&net, "c2");
    assert_eq!(add(&net, "c2", "", &[]), other);
    assert_eq!(add(&net, "c1", "", &[]), first);
}

#[test]
fn a_released_address_taken_meanwhile_is_not_given_back_and_no_error_follows() {
    let net = dual();
    let first = add(&net, "c1", "", &[]);
    del(&net, "c1");
    let v4 = first[1].split('/').next().unwrap().to_owned();
    assert_eq!(add(&net, "c2", &format!("IP={v4}"), &[])[1], first[1]);
    let again = add(&net, "c1", "", &[]);
    assert_eq!(again[0], first[0], "the IPv6 one is still free");
    assert_ne!(again[1], first[1], "the IPv4 one belongs to c2 now");
    net.verify();
}

#[test]
fn gc_forgets_who_held_an_address() {
    let net = dual();
    let first = add(&net, "c1", "", &[]);
    add(&net, "c2", "", &[]);
    net.gc(&[("c2", "eth0")]);
    // GC said c1 is gone for good: a container of that id starts afresh.
    let after = add(&net, "c1", "", &[]);
    assert!(after.iter().all(|a| !first.contains(a)), "{after:?}");
}

#[test]
fn configured_addresses_honour_a_request_only_for_themselves() {
    let net = Net::new(json!({"addresses": [
        {"address": "fd66:a::7:0:1/96", "gateway": "fd66:a::1"},
        {"address": "10.66.0.7/32", "gateway": "10.66.0.1"}]}));
    let same = add(&net, "c1", "IP=10.66.0.7", &["fd66:a::7:0:1"]);
    assert_eq!(same, ["fd66:a::7:0:1/96", "10.66.0.7/32"]);
    let msg = refused(&net, "c1", "IP=10.66.0.8", &[]);
    assert_eq!(
        msg,
        "requested address 10.66.0.8 is not this network's configured IPv4 address 10.66.0.7/32"
    );
    let static_ip = Net::new(json!({"static_ip": "fd66:a::10"}));
    let msg = refused(&static_ip, "c1", "IP=10.66.0.8", &[]);
    assert!(msg.contains("configures no IPv4 addressing"), "{msg}");
    assert_eq!(
        add(&static_ip, "c1", "IP=fd66:a::10", &[]),
        ["fd66:a::10/64"]
    );
}

#[test]
fn del_never_looks_at_requests() {
    let net = dual();
    add(&net, "c1", "IP=10.66.0.77", &[]);
    call(&net, "DEL", "c1", "IP=not-an-address", &["10.99.0.1"]).expect_quiet_success();
    assert_eq!(net.verify().leases, 0);
}
