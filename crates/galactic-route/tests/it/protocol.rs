//! The CNI protocol as a runtime sees it, against the built binary, and the chain-order errors
//! that need no kernel access (they are found before any netlink socket is opened).

use galactic_testkit::{protocol_suite, ExpectStatus, Invocation, Outcome, TestNode};
use serde_json::{json, Value};
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_galactic-route");

#[test]
fn speaks_the_cni_protocol() {
    protocol_suite(
        Path::new(BIN),
        json!({"name": "net1", "type": "galactic-route", "vpc": "1", "vpcattachment": "1"}),
        ExpectStatus::Ready,
    );
}

fn call(node: &TestNode, command: &str, stdin: &str) -> Outcome {
    Invocation::new(Path::new(BIN), command, node)
        .attachment(
            "c0ffee",
            "/var/run/netns/t",
            "eth0",
            &node.dir.path().join("bin"),
        )
        .stdin(stdin)
        .run()
}

fn stanza(extra: Value) -> Value {
    let mut conf = json!({"cniVersion": "1.1.0", "name": "net1", "type": "galactic-route",
                          "vpc": "A", "vpcattachment": "1",
                          "terminations": [{"network": "198.51.100.0/24"}]});
    if let (Some(map), Value::Object(extra)) = (conf.as_object_mut(), extra) {
        map.extend(extra);
    }
    conf
}

#[test]
fn add_and_check_without_prev_result_say_it_must_follow_a_master() {
    let node = TestNode::new(json!({}));
    for command in ["ADD", "CHECK"] {
        let msg = call(&node, command, &stanza(json!({})).to_string()).expect_error(6);
        assert!(
            msg.contains("no prevResult: galactic-route must follow a master plugin"),
            "{command}: {msg}"
        );
    }
    let msg = call(
        &node,
        "ADD",
        &stanza(json!({"prevResult": {"ips": "x"}})).to_string(),
    )
    .expect_error(6);
    assert!(msg.contains("prevResult"), "a malformed one too: {msg}");
}

#[test]
fn an_invalid_stanza_is_code_7_with_the_entry_named() {
    let node = TestNode::new(json!({}));
    let prev = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G00000000A001H"}]});
    let conf = stanza(json!({"prevResult": prev,
        "terminations": [{"network": "198.51.100.0/24"}, {"network": "2001:db8::/64", "via": "10.0.0.1"}]}));
    let msg = call(&node, "ADD", &conf.to_string()).expect_error(7);
    assert_eq!(
        msg,
        "terminations[1].via 10.0.0.1 is IPv4 but network 2001:db8::/64 is IPv6: a next hop must be of the network's family"
    );
    let conf = stanza(json!({"prevResult": prev, "vpc": "a_b"}));
    let msg = call(&node, "ADD", &conf.to_string()).expect_error(7);
    assert_eq!(msg, "invalid base62 value for field 'vpc': \"a_b\"");
}

#[test]
fn add_before_the_master_created_the_routing_domain_is_code_7() {
    let node = TestNode::new(json!({}));
    // The master recorded the attachment (its ADD had begun), but no domain exists yet.
    let network = stanza(json!({}))["name"].as_str().unwrap().to_owned();
    node.record_master(&network, "c0ffee", "eth0", "/var/run/netns/t", ("A", "1"));
    let prev = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G00000000A001H"}]});
    let msg = call(
        &node,
        "ADD",
        &stanza(json!({"prevResult": prev})).to_string(),
    )
    .expect_error(7);
    assert!(
        msg.contains("VPC A has no routing domain on this node: galactic-route must follow the VPC's master plugin"),
        "{msg}"
    );
}

#[test]
fn del_never_fails_and_prints_nothing() {
    let node = TestNode::new(json!({}));
    for stdin in [
        stanza(json!({})).to_string(),
        stanza(json!({"vpc": "not base62!", "terminations": 5})).to_string(),
        "{not json".to_owned(),
    ] {
        call(&node, "DEL", &stdin).expect_quiet_success();
    }
}
