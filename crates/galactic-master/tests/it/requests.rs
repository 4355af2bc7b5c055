//! What a runtime asks of the masters for one attachment, on real kernel objects: an address
//! (`IP=` in `CNI_ARGS`, the `ips` capability) and a MAC (`MAC=`, the `mac` capability) for the
//! container's interface (veth) or the tap; and a DEL followed by an ADD asking for what the
//! attachment held (Podman's `network reload`) or asking nothing (`restart`).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};

fn host(tag: &str) -> Host {
    Host::new(tag, json!({"routing_domain": "auto"}), &["galactic-ipam"])
}

/// The master `plugin` alone, declaring the `ips` and `mac` capabilities as the examples do.
fn list(plugin: &str, vpc: &str, att: &str) -> Conflist {
    Conflist::from_conf(&json!({"cniVersion": "1.0.0", "name": format!("net-{vpc}-{att}"),
        "type": plugin, "vpc": vpc, "vpcattachment": att,
        "capabilities": {"ips": true, "mac": true},
        "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd66:a::/64", "ipv4_subnet": "10.66.0.0/24"}}))
    .unwrap()
}

fn runtime<'a>(host: &'a Host, plugin: &str) -> Runtime<'a> {
    host.runtime()
        .binary(plugin, galactic_testkit::plugin_binary(plugin))
}

fn addresses(result: &Value) -> Vec<String> {
    result["ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ip| ip["address"].as_str().unwrap().to_owned())
        .collect()
}

/// The MAC of the result's interface `name`.
fn mac_of(result: &Value, name: &str) -> String {
    result["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .and_then(|i| i["mac"].as_str())
        .unwrap()
        .to_owned()
}

fn link_mac(ns: &galactic_testkit::privileged::TestNetns, name: &str) -> String {
    ns.ip_json(&["link", "show", "dev", name])[0]["address"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn veth_gets_exactly_the_requested_addresses_and_mac_from_args_and_capabilities() {
    galactic_testkit::privileged!();
    let host = host("rqv");
    let rt = runtime(&host, "galactic-cni");
    // Podman --ip --mac-address: both in CNI_ARGS.
    let pod = Pod::new("rqv1");
    let att = pod
        .attachment()
        .arg("IgnoreUnknown", "1")
        .arg("MAC", "02:00:00:00:00:42")
        .arg("IP", "10.66.0.77");
    let net = list("galactic-cni", "A", "1");
    let result = rt.add(&net, &att).unwrap();
    assert_eq!(addresses(&result)[1], "10.66.0.77/32", "{result}");
    assert_eq!(mac_of(&result, "eth0"), "02:00:00:00:00:42");
    assert_eq!(link_mac(&pod.ns, "eth0"), "02:00:00:00:00:42");
    let in_pod = pod.ns.ip(&["addr", "show", "dev", "eth0"]);
    assert!(in_pod.contains("10.66.0.77/32"), "{in_pod}");
    rt.check(&net, &att).unwrap();

    // Podman --ip --ip6, Multus ips and mac: the capabilities.
    let pod2 = Pod::new("rqv2");
    let att2 = pod2
        .attachment()
        .capability("ips", json!(["fd66:a::9:0:5", "10.66.0.78"]))
        .capability("mac", json!("02:00:00:00:00:43"));
    let net2 = list("galactic-cni", "A", "2");
    let result2 = rt.add(&net2, &att2).unwrap();
    assert_eq!(addresses(&result2), ["fd66:a::9:0:5/96", "10.66.0.78/32"]);
    assert_eq!(link_mac(&pod2.ns, "eth0"), "02:00:00:00:00:43");
    assert!(pod.reaches("fd66:a::9:0:5") && pod.reaches("10.66.0.78"));
    rt.check(&net2, &att2).unwrap();

    // A retried ADD asking for the same gets the same.
    let again = rt.add(&net2, &att2).unwrap();
    assert_eq!(addresses(&again), addresses(&result2));
    assert_eq!(mac_of(&again, "eth0"), "02:00:00:00:00:43");
    rt.del(&net2, &att2).unwrap();
    rt.del(&net, &att).unwrap();
}

#[test]
fn a_request_that_cannot_be_granted_is_code_7_naming_it_and_leaves_the_node_as_it_was() {
    galactic_testkit::privileged!();
    let host = host("rqr");
    let rt = runtime(&host, "galactic-cni");
    let owner = Pod::new("rqr1");
    let owner_att = owner.attachment().arg("IP", "10.66.0.77");
    rt.add(&list("galactic-cni", "A", "1"), &owner_att).unwrap();
    let before = host.snapshot();
    let pod = Pod::new("rqr2");
    let net = list("galactic-cni", "A", "2");
    let cases: [(Attachment, &str); 5] = [
        (
            pod.attachment().arg("IP", "10.99.0.5"),
            "requested address 10.99.0.5 is outside the pool 10.66.0.0/24",
        ),
        (
            pod.attachment().capability("ips", json!(["fd66:b::1:0:1"])),
            "requested address fd66:b::1:0:1 is outside the pool fd66:a::/64",
        ),
        (
            pod.attachment().arg("IP", "10.66.0.77"),
            "requested address 10.66.0.77 is in use by another attachment",
        ),
        (
            pod.attachment().arg("MAC", "01:00:5e:00:00:01"),
            "requested MAC 01:00:5e:00:00:01 (from CNI_ARGS MAC) is a multicast address",
        ),
        (
            pod.attachment().capability("mac", json!("02:00:00:00:00")),
            "requested MAC 02:00:00:00:00 (from runtimeConfig.mac) is not a MAC address",
        ),
    ];
    for (att, want) in cases {
        let err = rt.add(&net, &att).unwrap_err();
        let msg = err.expect_error(7);
        assert!(msg.contains(want), "{msg}");
        assert!(
            !msg.contains(&owner.id),
            "never names another holder: {msg}"
        );
        assert_eq!(host.snapshot(), before, "{want}: the node is unchanged");
        assert!(!pod.ns.try_ip(&["link", "show", "eth0"]).0, "{want}");
        rt.del(&net, &att).unwrap();
    }
    rt.del(&list("galactic-cni", "A", "1"), &owner_att).unwrap();
}

#[test]
fn an_ipam_delegate_that_cannot_be_started_is_code_5_and_is_not_asked_to_release() {
    galactic_testkit::privileged!();
    use std::os::unix::fs::PermissionsExt;
    let host = host("rqx");
    // In CNI_PATH and executable (so the check before anything passes), but exec refuses it:
    // its interpreter is missing.
    let broken = host.bin_dir.join("broken-ipam");
    std::fs::write(&broken, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rt = runtime(&host, "galactic-cni");
    let net = Conflist::from_conf(&json!({"cniVersion": "1.0.0", "name": "net-broken",
        "type": "galactic-cni", "vpc": "A", "vpcattachment": "9",
        "ipam": {"type": "broken-ipam"}}))
    .unwrap();
    let before = host.snapshot();
    let pod = Pod::new("rqx1");
    let err = rt.add(&net, &pod.attachment()).unwrap_err();
    let msg = err.expect_error(5);
    assert!(msg.contains("broken-ipam"), "{msg}");
    assert_eq!(host.snapshot(), before, "the node is unchanged");
    assert!(!pod.ns.try_ip(&["link", "show", "eth0"]).0);
    // A delegate that never ran holds nothing: nothing is rolled back, no DEL is attempted.
    let failed_undos: Vec<_> = host
        .node
        .log_lines()
        .into_iter()
        .filter(|l| l["msg"] == "rollback: undo failed")
        .collect();
    assert!(failed_undos.is_empty(), "{failed_undos:?}");
}

#[test]
fn del_then_add_keeps_the_addresses_asked_for_like_reload_and_unasked_like_restart() {
    galactic_testkit::privileged!();
    let host = host("rqk");
    let rt = runtime(&host, "galactic-cni");
    let net = list("galactic-cni", "A", "1");
    let pod = Pod::new("rqk1");
    let first = rt.add(&net, &pod.attachment()).unwrap();
    let ips = addresses(&first);
    let mac = mac_of(&first, "eth0");
    // Restart: DEL, then ADD in a new namespace, nothing asked.
    rt.del(&net, &pod.attachment()).unwrap();
    let restarted = Pod {
        ns: galactic_testkit::privileged::TestNetns::new("rqk2"),
        id: pod.id.clone(),
        ifname: "eth0".into(),
    };
    let second = rt.add(&net, &restarted.attachment()).unwrap();
    assert_eq!(addresses(&second), ips);
    // Reload: DEL, then ADD in the same namespace asking for the addresses and MAC it had.
    rt.del(&net, &restarted.attachment()).unwrap();
    let bare: Vec<String> = ips
        .iter()
        .map(|a| a.split('/').next().unwrap().to_owned())
        .collect();
    let reload = restarted
        .attachment()
        .capability("ips", json!(bare))
        .arg("MAC", &mac);
    let third = rt.add(&net, &reload).unwrap();
    assert_eq!(addresses(&third), ips);
    assert_eq!(link_mac(&restarted.ns, "eth0"), mac);
    rt.check(&net, &reload).unwrap();
    rt.del(&net, &reload).unwrap();
}

#[test]
fn check_names_a_container_interface_whose_mac_changed() {
    galactic_testkit::privileged!();
    let host = host("rqc");
    let rt = runtime(&host, "galactic-cni");
    let net = list("galactic-cni", "A", "1");
    let pod = Pod::new("rqc1");
    let att = pod.attachment().arg("MAC", "02:00:00:00:00:42");
    rt.add(&net, &att).unwrap();
    pod.ns
        .ip(&["link", "set", "dev", "eth0", "address", "02:00:00:00:00:99"]);
    let msg = rt.check(&net, &att).unwrap_err().expect_error(100);
    assert!(
        msg.contains("eth0 has MAC 02:00:00:00:00:99, the result says 02:00:00:00:00:42"),
        "{msg}"
    );
    rt.del(&net, &att).unwrap();
}

#[test]
fn tap_gets_the_requested_mac_and_address() {
    galactic_testkit::privileged!();
    let host = host("rqt");
    let rt = runtime(&host, "galactic-tap-cni");
    let net = list("galactic-tap-cni", "T", "1");
    let vm = Pod::new("rqt1");
    let att = vm
        .attachment()
        .capability("mac", json!("02:00:00:00:00:44"))
        .arg("IP", "fd66:a::44:0:1");
    let result = rt.add(&net, &att).unwrap();
    let tap = result["interfaces"][0]["name"].as_str().unwrap().to_owned();
    assert_eq!(mac_of(&result, &tap), "02:00:00:00:00:44");
    assert_eq!(link_mac(&host.netns, &tap), "02:00:00:00:00:44");
    assert_eq!(addresses(&result)[0], "fd66:a::44:0:1/96");
    rt.check(&net, &att).unwrap();
    let bad = vm.attachment().arg("MAC", "00:00:00:00:00:00");
    rt.del(&net, &att).unwrap();
    let msg = rt.add(&net, &bad).unwrap_err().expect_error(7);
    assert!(msg.contains("is the all-zeros address"), "{msg}");
}

#[test]
fn a_second_network_refuses_a_second_default_route_in_words() {
    galactic_testkit::privileged!();
    let host = host("rqd");
    let rt = runtime(&host, "galactic-cni");
    let pod = Pod::new("rqd1");
    let first = list("galactic-cni", "A", "1");
    rt.add(&first, &pod.attachment()).unwrap();
    // Another VPC's network in the same container (Podman's --network a --network b): its
    // default route would replace the first one's.
    let second = Conflist::from_conf(&json!({"cniVersion": "1.0.0", "name": "net-B-1",
        "type": "galactic-cni", "vpc": "B", "vpcattachment": "1",
        "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd66:b::/64"}}))
    .unwrap();
    let mut att = pod.attachment();
    att.ifname = "net1".into();
    let err = rt.add(&second, &att).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("already has a default route via fd66:a::1 dev eth0")
            && msg.contains("via fd66:b::1 on net1")
            && !msg.contains("Some("),
        "{msg}"
    );
    rt.del(&second, &att).unwrap();
    rt.del(&first, &pod.attachment()).unwrap();
}
