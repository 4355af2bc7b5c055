//! Configs the upstream Go chain accepted, through the real chain (decision 0062): each keeps the
//! meaning it had there, or is refused with a message naming the upgrade step that finds it.
//! - `"mtu": 0` is the kernel default;
//! - a /96 `ipv6_subnet` without `subnet_len` holds upstream's 255 endpoints (/104 slots);
//! - a termination entry with a key other than `network`/`via` is refused (code 7), saying what
//!   upstream made of it and where the runbook finds such entries.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::ident::{host_ifname, AttachmentId, VpcId};
use galactic_testkit::host::{Host, Pod, PLUGINS};
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};

fn nad(att: &str, master: Value, route: Option<Value>) -> Conflist {
    let mut plugins = vec![master];
    if let Some(route) = route {
        plugins.push(route);
    }
    plugins.push(json!({"type": "galactic-bgp", "vpc": "C", "vpcattachment": att}));
    Conflist::from_value(
        &json!({"cniVersion": "1.0.0", "name": format!("vpc-c-{att}"), "plugins": plugins}),
    )
    .unwrap()
}

#[test]
fn mtu_0_and_a_slash_96_pool_attach_as_upstream_did() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "gocf",
        json!({"routing_domain": "table", "publisher": "local"}),
        &PLUGINS,
    );
    let rt = host.runtime();
    let pod = Pod::new("gocf");
    let list = nad(
        "1",
        json!({"type": "galactic-cni", "vpc": "C", "vpcattachment": "1", "mtu": 0,
               "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd20:96::/96"}}),
        None,
    );
    let result = rt.add(&list, &pod.attachment()).unwrap();
    assert_eq!(
        result["ips"][0]["address"], "fd20:96::100:1/104",
        "upstream's first /96 allocation step, as a /104: {result}"
    );
    let name = host_ifname(
        &VpcId::parse("C").unwrap(),
        &AttachmentId::parse("1").unwrap(),
    );
    let link = host.netns.ip(&["-o", "link", "show", &name]);
    assert!(link.contains("mtu 1500 "), "kernel default MTU: {link}");
    rt.check(&list, &pod.attachment()).unwrap();
    rt.del(&list, &pod.attachment()).unwrap();
    assert!(!host.netns.try_ip(&["link", "show", &name]).0);
}

#[test]
fn a_termination_with_an_extra_key_is_refused_naming_the_upgrade_step() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "gotm",
        json!({"routing_domain": "table", "publisher": "local"}),
        &PLUGINS,
    );
    let rt = host.runtime();
    let pod = Pod::new("gotm");
    let list = nad(
        "1",
        json!({"type": "galactic-cni", "vpc": "C", "vpcattachment": "1",
               "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd20:97::/64"}}),
        Some(
            json!({"type": "galactic-route", "vpc": "C", "vpcattachment": "1",
               "terminations": [{"network": "2001:db8:7::/64", "gw": "fd20:97::9"}]}),
        ),
    );
    let msg = rt
        .add(&list, &pod.attachment())
        .unwrap_err()
        .expect_error(7);
    for part in [
        "terminations[0] has unknown key \"gw\"",
        "the upstream chain ignored it (a device route)",
        "docs/operations.md",
        "lint the NADs before the switch",
    ] {
        assert!(msg.contains(part), "{part}: {msg}");
    }
    // The failed ADD left nothing; its DEL is still success.
    rt.del(&list, &pod.attachment()).unwrap();
    let links = host.netns.ip(&["-o", "link", "show"]);
    assert_eq!(links.lines().count(), 1, "only lo: {links}");
}
