//! The fixture enforces the installed CRDs as the real API server does: a known-bad object of
//! each kind is refused for the right rule (every CEL rule of the three BGP CRDs and of
//! EgressShardClaim, and the schema checks), with the server's 422 body; unknown fields are
//! pruned, defaults applied, transition rules see `oldSelf`, the status subresource separates
//! writes, and a removed CRD unserves its resource.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::apiserver::Fixture;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use tower::Service;

const NS: &str = "galactic-system";

/// One request to the fixture as a client sends it; (status, body).
fn send(fixture: &Fixture, method: Method, path: &str, body: Option<&Value>) -> (u16, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut request = Request::builder().method(method).uri(path);
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let request = request.body(Full::new(bytes::Bytes::from(bytes))).unwrap();
        let response = fixture.service().call(request).await.unwrap();
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    })
}

fn collection(plural: &str) -> String {
    format!("/apis/network.datumapis.com/v1alpha1/namespaces/{NS}/{plural}")
}

fn router() -> Value {
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "r"},
        "spec": {"targetRef": {"kind": "Node", "name": "n"}, "localASN": 65000,
                 "routerID": "10.0.2.1", "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}],
                 "srv6Locator": "2001:db8:ff03::/48", "nodeID": 1, "listenPort": 179}})
}

fn vrf() -> Value {
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPVRFInstance",
        "metadata": {"name": "v"},
        "spec": {"routerRef": {"name": "r"}, "vrfID": 1,
                 "importRouteTargets": [{"value": "65000:1"}], "exportRouteTargets": [{"value": "0.0.59.154:51712"}],
                 "nptv6": {"ulaPrefix": "fd00::/48", "publicPrefix": "2001:db8::/48"}}})
}

fn advertisement() -> Value {
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPAdvertisement",
        "metadata": {"name": "a"},
        "spec": {"routerRef": {"name": "r"}, "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
                 "prefixes": ["10.0.0.1/32", "fd20:10:ff01::/96"], "communities": ["65000:1", "1.2.3.4:5"],
                 "vrfID": 1, "function": "End.DT46", "localPreference": 100,
                 "redistribute": ["connected"], "policyRef": {"name": "p"}}})
}

fn claim() -> Value {
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "EgressShardClaim",
        "metadata": {"name": "web-0-eth1"},
        "spec": {"attachment": {"name": "web-0-eth1"}, "vpc": {"name": "vpc-blue"},
                 "nodeName": "node-a", "families": ["IPv6", "IPv4"]}})
}

/// `base` with the JSON merge patch `change` applied.
fn with(base: &Value, change: &Value) -> Value {
    let mut object = base.clone();
    galactic_kube::merge_patch(&mut object, change);
    object
}

fn plural(object: &Value) -> String {
    format!("{}s", object["kind"].as_str().unwrap().to_lowercase())
}

/// The 422 `details.causes` of creating `object`.
fn refused(fixture: &Fixture, object: &Value) -> Vec<(String, String, String)> {
    let (status, body) = send(
        fixture,
        Method::POST,
        &collection(&plural(object)),
        Some(object),
    );
    assert_eq!(status, 422, "{object}\n{body}");
    assert_eq!(body["reason"], "Invalid", "{body}");
    assert_eq!(
        body["details"]["name"], object["metadata"]["name"],
        "{body}"
    );
    assert_eq!(body["details"]["kind"], object["kind"], "{body}");
    let message = body["message"].as_str().unwrap();
    let prefix = format!(
        "{}.network.datumapis.com \"{}\" is invalid: ",
        object["kind"].as_str().unwrap(),
        object["metadata"]["name"].as_str().unwrap()
    );
    assert!(message.starts_with(&prefix), "{message}");
    body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap().to_owned();
            (text("field"), text("reason"), text("message"))
        })
        .collect()
}

/// Creating `object` fails with exactly one cause: `field`, with `message` for a CEL rule
/// (`Invalid value: "<type>": <message>`) or the whole cause message otherwise.
fn refused_for(fixture: &Fixture, object: &Value, field: &str, message: &str) {
    let causes = refused(fixture, object);
    assert_eq!(causes.len(), 1, "{object}: {causes:?}");
    let (got_field, _, got_message) = &causes[0];
    assert_eq!(got_field, field, "{causes:?}");
    assert!(
        got_message == message || got_message.ends_with(&format!("\": {message}")),
        "{causes:?}, want {message:?}"
    );
}

fn accepted(fixture: &Fixture, object: &Value) -> Value {
    let (status, body) = send(
        fixture,
        Method::POST,
        &collection(&plural(object)),
        Some(object),
    );
    assert_eq!(status, 201, "{object}\n{body}");
    send(
        fixture,
        Method::DELETE,
        &format!(
            "{}/{}",
            collection(&plural(object)),
            object["metadata"]["name"].as_str().unwrap()
        ),
        None,
    );
    body
}

#[test]
fn every_cel_rule_of_the_bgp_router_refuses_its_bad_object() {
    let fx = Fixture::new();
    accepted(&fx, &router());
    for (afi, safi, message) in [
        ("ipv4", "evpn", "IPv4 only supports unicast SAFI"),
        ("ipv6", "evpn", "IPv6 only supports unicast SAFI"),
        ("l2vpn", "unicast", "L2VPN only supports evpn SAFI"),
    ] {
        let bad = with(
            &router(),
            &json!({"spec": {"addressFamilies": [{"afi": "ipv6", "safi": "unicast"}, {"afi": afi, "safi": safi}]}}),
        );
        refused_for(&fx, &bad, "spec.addressFamilies[1]", message);
    }
    let bad = with(
        &router(),
        &json!({"spec": {"srv6Locator": "2001:db8::zz/48"}}),
    );
    refused_for(
        &fx,
        &bad,
        "spec.srv6Locator",
        "srv6Locator must be a valid CIDR",
    );
    let bad = with(&router(), &json!({"spec": {"srv6Locator": "10.0.0.0/8"}}));
    refused_for(
        &fx,
        &bad,
        "spec.srv6Locator",
        "srv6Locator must be an IPv6 CIDR",
    );
    let err = refused(
        &fx,
        &with(&router(), &json!({"spec": {"srv6Locator": "x"}})),
    );
    assert_eq!(err.len(), 2, "both locator rules: {err:?}");
}

#[test]
fn the_router_schema_has_no_roles_and_a_16_bit_node_id() {
    let fx = Fixture::new();
    for id in [1, 0x1234, 57343] {
        accepted(&fx, &with(&router(), &json!({"spec": {"nodeID": id}})));
    }
    // A writer of the older schema's `roles` is not refused, but nothing of it is stored.
    let older = with(
        &router(),
        &json!({"spec": {"roles": ["tenant"]}, "status": {"roles": ["tenant"]}}),
    );
    let (code, stored) = send(&fx, Method::POST, &collection("bgprouters"), Some(&older));
    assert_eq!(code, 201, "{stored}");
    assert!(stored["spec"].get("roles").is_none(), "{stored}");
    let mut status = stored.clone();
    status["status"] = json!({"phase": "Ready", "roles": ["tenant"]});
    let path = format!("{}/r/status", collection("bgprouters"));
    let (code, after) = send(&fx, Method::PUT, &path, Some(&status));
    assert_eq!(code, 200, "{after}");
    assert_eq!(after["status"], json!({"phase": "Ready"}), "{after}");
}

#[test]
fn route_targets_take_ten_digits_on_each_side_and_not_eleven() {
    let fx = Fixture::new();
    // The longest of each form: a 4-byte ASN with a 32-bit number (21 characters), and a dotted
    // quad with a 10-digit number.
    let ten = with(
        &vrf(),
        &json!({"spec": {"importRouteTargets": [{"value": "4294967295:4294967295"}],
                         "exportRouteTargets": [{"value": "255.255.255.255:4294967295"}]}}),
    );
    let causes = refused(&fx, &ten);
    assert_eq!(
        causes,
        [(
            "spec.exportRouteTargets[0].value".to_owned(),
            "FieldValueTooLong".to_owned(),
            "Too long: may not be more than 21 bytes".to_owned()
        )],
        "the dotted form with a 10-digit number is 26 characters"
    );
    let ten = with(
        &ten,
        &json!({"spec": {"exportRouteTargets": [{"value": "1.2.3.4:4294967295"}]}}),
    );
    accepted(&fx, &ten);
    for (field, value) in [
        ("importRouteTargets", "42949672950:1"),
        ("importRouteTargets", "1:42949672950"),
        ("exportRouteTargets", "1.2.3.4:42949672950"),
    ] {
        let eleven = with(&ten, &json!({"spec": {field: [{"value": value}]}}));
        refused_for(
            &fx,
            &eleven,
            &format!("spec.{field}[0]"),
            "value must be in ASN:NN or IP:NN format",
        );
    }
}

#[test]
fn every_rule_of_the_egress_shard_claim_refuses_its_bad_object() {
    let fx = Fixture::new();
    accepted(&fx, &claim());
    let mut bare = claim();
    bare.as_object_mut().unwrap().remove("spec");
    refused_for(&fx, &bare, "spec", "Required value");
    for (change, field, message) in [
        (
            json!({"families": ["IPv5"]}),
            "spec.families[0]",
            "Unsupported value: \"IPv5\": supported values: \"IPv6\", \"IPv4\"",
        ),
        (
            json!({"families": ["IPv6", "IPv6"]}),
            "spec.families[1]",
            "Duplicate value: \"IPv6\"",
        ),
        (
            json!({"families": ["IPv6", "IPv4", "IPv6"]}),
            "spec.families",
            "Too many: 3: must have at most 2 items",
        ),
        (
            json!({"families": []}),
            "spec.families",
            "Invalid value: 0: spec.families in body should have at least 1 items",
        ),
        (
            json!({"nodeName": ""}),
            "spec.nodeName",
            "Invalid value: \"\": spec.nodeName in body should be at least 1 chars long",
        ),
        (json!({"vpc": null}), "spec.vpc", "Required value"),
    ] {
        let bad = with(&claim(), &json!({"spec": change}));
        let causes = refused(&fx, &bad);
        assert!(
            causes.iter().any(|(f, _, m)| f == field && m == message),
            "{bad}: {causes:?}, want {field}: {message}"
        );
    }

    // The spec is immutable; the status (the binding) is written through /status.
    let (code, stored) = send(
        &fx,
        Method::POST,
        &collection("egressshardclaims"),
        Some(&claim()),
    );
    assert_eq!(code, 201, "{stored}");
    let path = format!("{}/web-0-eth1", collection("egressshardclaims"));
    let moved = with(&stored, &json!({"spec": {"nodeName": "node-b"}}));
    let (code, body) = send(&fx, Method::PUT, &path, Some(&moved));
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["details"]["causes"][0]["field"], "spec", "{body}");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "Invalid value: \"object\": spec is immutable; an attachment that moved nodes gets a new claim"
    );
    let bound = with(
        &stored,
        &json!({"status": {"shardRef": {"namespace": "galactic-system", "name": "node-a"},
                           "observedGeneration": 1}}),
    );
    let (code, after) = send(&fx, Method::PUT, &format!("{path}/status"), Some(&bound));
    assert_eq!(code, 200, "{after}");
    assert_eq!(after["status"]["shardRef"]["name"], "node-a");
}

#[test]
fn every_cel_rule_of_the_vrf_instance_refuses_its_bad_object() {
    let fx = Fixture::new();
    accepted(&fx, &vrf());
    let rt = "value must be in ASN:NN or IP:NN format";
    for field in ["importRouteTargets", "exportRouteTargets"] {
        // At most 10 digits on either side of the colon (4-byte ASNs, 32-bit numbers), 9 per
        // octet of the dotted form.
        for value in [
            "42000000000:1",
            "65000:10000000000",
            "1234567890.1.1.1:1",
            "1.2.3:4",
            "a:1",
        ] {
            let bad = with(
                &vrf(),
                &json!({"spec": {field: [{"value": "65000:1"}, {"value": value}]}}),
            );
            refused_for(&fx, &bad, &format!("spec.{field}[1]"), rt);
        }
    }
    for (field, value, message) in [
        (
            "publicPrefix",
            "2001:db8::zz/48",
            "publicPrefix must be a valid CIDR",
        ),
        ("ulaPrefix", "fd00::zz/48", "ulaPrefix must be a valid CIDR"),
    ] {
        let bad = with(&vrf(), &json!({"spec": {"nptv6": {field: value}}}));
        refused_for(&fx, &bad, &format!("spec.nptv6.{field}"), message);
    }
    for (field, message) in [
        ("publicPrefix", "publicPrefix must be an IPv6 CIDR"),
        ("ulaPrefix", "ulaPrefix must be an IPv6 CIDR"),
    ] {
        let bad = with(&vrf(), &json!({"spec": {"nptv6": {field: "10.0.0.0/48"}}}));
        let bad = with(&bad, &json!({"spec": {"nptv6": {field: "10.0.0.0/24"}}}));
        let other = if field == "ulaPrefix" {
            "publicPrefix"
        } else {
            "ulaPrefix"
        };
        let other_value = if field == "ulaPrefix" {
            "2001:db8::/24"
        } else {
            "fd00::/24"
        };
        let bad = with(&bad, &json!({"spec": {"nptv6": {other: other_value}}}));
        refused_for(&fx, &bad, &format!("spec.nptv6.{field}"), message);
    }
    let bad = with(
        &vrf(),
        &json!({"spec": {"nptv6": {"publicPrefix": "2001:db8::/64"}}}),
    );
    refused_for(
        &fx,
        &bad,
        "spec.nptv6",
        "ulaPrefix and publicPrefix must share the same prefix length",
    );
    let exactly_one = "Exactly one of routerRef or routerSelector must be set";
    let both = with(
        &vrf(),
        &json!({"spec": {"routerSelector": {"matchLabels": {"a": "b"}}}}),
    );
    refused_for(&fx, &both, "spec", exactly_one);
    let neither = with(&vrf(), &json!({"spec": {"routerRef": null}}));
    refused_for(&fx, &neither, "spec", exactly_one);
    let selected = with(
        &neither,
        &json!({"spec": {"routerSelector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}}),
    );
    accepted(&fx, &selected);
}

#[test]
fn every_cel_rule_of_the_advertisement_refuses_its_bad_object() {
    let fx = Fixture::new();
    accepted(&fx, &advertisement());
    for (afi, safi, message) in [
        ("ipv4", "evpn", "IPv4 only supports unicast SAFI"),
        ("ipv6", "evpn", "IPv6 only supports unicast SAFI"),
        ("l2vpn", "unicast", "L2VPN only supports evpn SAFI"),
    ] {
        let bad = with(
            &advertisement(),
            &json!({"spec": {"addressFamily": {"afi": afi, "safi": safi}}}),
        );
        refused_for(&fx, &bad, "spec.addressFamily", message);
    }
    for community in ["4294967296123:1", "1.2.3.4444:1", "x", "65000"] {
        let bad = with(
            &advertisement(),
            &json!({"spec": {"communities": ["65000:1", community]}}),
        );
        refused_for(
            &fx,
            &bad,
            "spec.communities",
            "community must be in ASN:NN or IP:NN format",
        );
    }
    let bad = with(
        &advertisement(),
        &json!({"spec": {"originateFrom": {"type": "interface"}}}),
    );
    refused_for(
        &fx,
        &bad,
        "spec.originateFrom",
        "interfaceName is required when type is interface",
    );
    let bad = with(
        &advertisement(),
        &json!({"spec": {"originateFrom": {"type": "kernel", "interfaceName": "eth0"}}}),
    );
    refused_for(
        &fx,
        &bad,
        "spec.originateFrom",
        "interfaceName must not be set when type is kernel",
    );
    for prefix in ["fd00::1", "::/0", "10.0.0/24", "10.0.0.1/333"] {
        let bad = with(
            &advertisement(),
            &json!({"spec": {"prefixes": ["10.0.0.1/32", prefix]}}),
        );
        refused_for(
            &fx,
            &bad,
            "spec.prefixes[1]",
            "must be a valid IPv4 or IPv6 CIDR",
        );
    }
    let at_least_one = "at least one of prefixes, redistribute, or originateFrom must be specified";
    let nothing = with(
        &advertisement(),
        &json!({"spec": {"prefixes": [], "redistribute": null}}),
    );
    refused_for(&fx, &nothing, "spec", at_least_one);
    let absent = with(
        &advertisement(),
        &json!({"spec": {"prefixes": null, "redistribute": null}}),
    );
    refused_for(&fx, &absent, "spec", at_least_one);
    let from_interface = with(
        &absent,
        &json!({"spec": {"originateFrom": {"type": "interface", "interfaceName": "G0000000jU00GH"}}}),
    );
    accepted(&fx, &from_interface);
}

#[test]
fn status_rules_run_on_status_writes() {
    let fx = Fixture::new();
    let (status, created) = send(
        &fx,
        Method::POST,
        &collection("bgpvrfinstances"),
        Some(&vrf()),
    );
    assert_eq!(status, 201, "{created}");
    let mut update = created.clone();
    update["status"] = json!({"routers": [{"routerName": "r", "resolvedConfig":
        {"addressFamilies": [{"afi": "l2vpn", "safi": "unicast"}], "asNumber": 65000}}]});
    let path = format!("{}/v/status", collection("bgpvrfinstances"));
    let (status, body) = send(&fx, Method::PUT, &path, Some(&update));
    assert_eq!(status, 422, "{body}");
    let cause = &body["details"]["causes"][0];
    assert_eq!(
        cause["field"],
        "status.routers[0].resolvedConfig.addressFamilies[0]"
    );
    assert_eq!(
        cause["message"],
        "Invalid value: \"object\": L2VPN only supports evpn SAFI"
    );
    update["status"]["routers"][0]["resolvedConfig"]["addressFamilies"][0]["safi"] = json!("evpn");
    let (status, body) = send(&fx, Method::PUT, &path, Some(&update));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn schema_checks_answer_as_the_api_server() {
    let fx = Fixture::new();
    let cases = [
        (with(&router(), &json!({"spec": {"addressFamilies": null}})), "spec.addressFamilies", "Required value"),
        (with(&router(), &json!({"spec": {"routerID": null}})), "spec.routerID", "Required value"),
        (with(&router(), &json!({"spec": {"routerID": "10.0.2"}})), "spec.routerID",
         "Invalid value: \"10.0.2\": spec.routerID in body must be of type ipv4: \"10.0.2\""),
        (with(&router(), &json!({"spec": {"localASN": 0}})), "spec.localASN",
         "Invalid value: 0: spec.localASN in body should be greater than or equal to 1"),
        (with(&router(), &json!({"spec": {"nodeID": 57344}})), "spec.nodeID",
         "Invalid value: 57344: spec.nodeID in body should be less than or equal to 57343"),
        (with(&router(), &json!({"spec": {"nodeID": 0}})), "spec.nodeID",
         "Invalid value: 0: spec.nodeID in body should be greater than or equal to 1"),
        (with(&router(), &json!({"spec": {"targetRef": {"name": ""}}})), "spec.targetRef.name",
         "Invalid value: \"\": spec.targetRef.name in body should be at least 1 chars long"),
        (with(&router(), &json!({"spec": {"localASN": "65000"}})), "spec.localASN",
         "Invalid value: \"string\": spec.localASN in body must be of type integer: \"string\""),
        (with(&vrf(), &json!({"spec": {"vrfID": 65536}})), "spec.vrfID",
         "Invalid value: 65536: spec.vrfID in body should be less than or equal to 65535"),
        (with(&vrf(), &json!({"spec": {"exportRouteTargets": []}})), "spec.exportRouteTargets",
         "Invalid value: 0: spec.exportRouteTargets in body should have at least 1 items"),
        (with(&vrf(), &json!({"spec": {"exportRouteTargets": vec![json!({"value": "1:1"}); 33]}})),
         "spec.exportRouteTargets", "Too many: 33: must have at most 32 items"),
        (with(&vrf(), &json!({"spec": {"vrfID": null}})), "spec.vrfID", "Required value"),
        (with(&advertisement(), &json!({"spec": {"prefixes": ["10.0.0.1/32", "10.0.0.1/32"]}})),
         "spec.prefixes[1]", "Duplicate value: \"10.0.0.1/32\""),
        (with(&advertisement(), &json!({"spec": {"function": "End.DX4"}})), "spec.function",
         "Unsupported value: \"End.DX4\": supported values: \"End.DT4\", \"End.DT6\", \"End.DT46\""),
        (with(&advertisement(), &json!({"spec": {"communities": ["1".repeat(33)]}})), "spec.communities[0]",
         "Too long: may not be more than 32 bytes"),
        (with(&advertisement(), &json!({"spec": {"routerRef": null}})), "spec.routerRef", "Required value"),
    ];
    for (object, field, message) in cases {
        let causes = refused(&fx, &object);
        assert!(
            causes.iter().any(|(f, _, m)| f == field && m == message),
            "{object}: {causes:?}, want {field}: {message}"
        );
    }
    // A route target longer than 21 characters: the length check and the rule both answer.
    let long = with(
        &vrf(),
        &json!({"spec": {"importRouteTargets": [{"value": "1234567890.1.1.1:12345"}]}}),
    );
    let causes = refused(&fx, &long);
    let reasons: Vec<&str> = causes.iter().map(|(_, r, _)| r.as_str()).collect();
    assert_eq!(
        reasons,
        ["FieldValueTooLong", "FieldValueInvalid"],
        "{causes:?}"
    );
}

#[test]
fn unknown_fields_are_pruned_and_status_is_a_subresource() {
    let fx = Fixture::new();
    let sent = with(
        &router(),
        &json!({"spec": {"bogus": 1, "targetRef": {"extra": "x"}},
        "status": {"phase": "Ready"}, "extraTop": true}),
    );
    let (status, stored) = send(&fx, Method::POST, &collection("bgprouters"), Some(&sent));
    assert_eq!(status, 201, "{stored}");
    assert!(
        stored["spec"].get("bogus").is_none() && stored["spec"]["targetRef"].get("extra").is_none()
    );
    assert!(stored.get("extraTop").is_none(), "{stored}");
    assert!(
        stored.get("status").is_none(),
        "a create ignores status: {stored}"
    );
    assert_eq!(stored["metadata"]["generation"], 1);

    let path = format!("{}/r", collection("bgprouters"));
    let status_path = format!("{path}/status");
    let mut with_status = stored.clone();
    with_status["status"] = json!({"phase": "Ready", "peers": {"established": 1, "total": 2}});
    let (code, after) = send(&fx, Method::PUT, &status_path, Some(&with_status));
    assert_eq!(code, 200, "{after}");
    assert_eq!(after["status"]["phase"], "Ready");
    assert_eq!(
        after["metadata"]["generation"], 1,
        "a status write is no new generation"
    );

    // A write of the object keeps the stored status; a /status write keeps the spec.
    let mut main = after.clone();
    main["status"]["phase"] = json!("Gone");
    main["spec"]["localASN"] = json!(65001);
    let (code, after) = send(&fx, Method::PUT, &path, Some(&main));
    assert_eq!(code, 200, "{after}");
    assert_eq!(
        (
            after["status"]["phase"].as_str(),
            after["spec"]["localASN"].as_i64()
        ),
        (Some("Ready"), Some(65001))
    );
    assert_eq!(after["metadata"]["generation"], 2);
    let mut status_only = after.clone();
    status_only["spec"]["localASN"] = json!(1);
    status_only["status"]["phase"] = json!("Degraded");
    let (code, after) = send(&fx, Method::PUT, &status_path, Some(&status_only));
    assert_eq!(code, 200, "{after}");
    assert_eq!(
        (
            after["status"]["phase"].as_str(),
            after["spec"]["localASN"].as_i64()
        ),
        (Some("Degraded"), Some(65001))
    );

    // A write that changes nothing keeps the resourceVersion.
    let (code, same) = send(&fx, Method::PUT, &path, Some(&after));
    assert_eq!(code, 200);
    assert_eq!(
        same["metadata"]["resourceVersion"],
        after["metadata"]["resourceVersion"]
    );
    // A stale resourceVersion is still a conflict.
    let (code, _) = send(&fx, Method::PUT, &path, Some(&stored));
    assert_eq!(code, 409);
}

/// The BGPRouter CRD with `change` merged into its v1alpha1 schema's `spec` properties.
fn router_crd_with(change: &Value) -> Value {
    let mut crd = galactic_kube::crds()
        .into_iter()
        .find(|(f, _)| *f == "bgprouters.yaml")
        .unwrap()
        .1;
    let spec = crd
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .unwrap();
    galactic_kube::merge_patch(spec, change);
    crd
}

#[test]
fn defaults_and_transition_rules_of_an_installed_crd_apply() {
    let fx = Fixture::new();
    fx.remove(
        "customresourcedefinitions",
        None,
        "bgprouters.network.datumapis.com",
    );
    fx.insert(router_crd_with(&json!({"properties": {
        "listenPort": {"default": 179},
        "localASN": {"x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "localASN is immutable"}]}}})));
    let mut sent = router();
    sent["spec"].as_object_mut().unwrap().remove("listenPort");
    let (code, stored) = send(&fx, Method::POST, &collection("bgprouters"), Some(&sent));
    assert_eq!(code, 201, "{stored}");
    assert_eq!(stored["spec"]["listenPort"], 179, "defaulted on create");
    let mut change = stored.clone();
    change["spec"]["localASN"] = json!(65001);
    let (code, body) = send(
        &fx,
        Method::PUT,
        &format!("{}/r", collection("bgprouters")),
        Some(&change),
    );
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["details"]["causes"][0]["field"], "spec.localASN");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "Invalid value: \"integer\": localASN is immutable"
    );
    change["spec"]["localASN"] = json!(65000);
    change["spec"]["nodeID"] = json!(2);
    let (code, body) = send(
        &fx,
        Method::PUT,
        &format!("{}/r", collection("bgprouters")),
        Some(&change),
    );
    assert_eq!(code, 200, "{body}");
}

#[test]
fn a_resource_whose_crd_is_not_installed_is_not_served() {
    let fx = Fixture::new();
    let (code, _) = send(
        &fx,
        Method::POST,
        &collection("bgprouters"),
        Some(&router()),
    );
    assert_eq!(code, 201);
    fx.remove(
        "customresourcedefinitions",
        None,
        "bgprouters.network.datumapis.com",
    );
    for (method, path) in [
        (Method::GET, collection("bgprouters")),
        (Method::GET, format!("{}/r", collection("bgprouters"))),
    ] {
        let (code, body) = send(&fx, method, &path, None);
        assert_eq!(code, 404, "{body}");
    }
    let (code, _) = send(
        &fx,
        Method::POST,
        &collection("bgprouters"),
        Some(&with(&router(), &json!({"metadata": {"name": "s"}}))),
    );
    assert_eq!(code, 404);
    let (code, crds) = send(
        &fx,
        Method::GET,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(
        crds["items"].as_array().unwrap().len(),
        galactic_kube::crds().len() - 1,
        "{crds}"
    );
    let bare = Fixture::without_crds();
    let (code, _) = send(&bare, Method::GET, &collection("bgpadvertisements"), None);
    assert_eq!(code, 404);
}

#[test]
fn seeding_refuses_a_field_the_schema_does_not_have_as_kubectl_does() {
    let fx = Fixture::new();
    let older = with(
        &router(),
        &json!({"spec": {"roles": ["tenant"], "addressFamilies": [{"afi": "l2vpn", "safi": "evpn", "x": 1}]}}),
    );
    let err = fx.try_insert(older).unwrap_err();
    assert_eq!((err.code, err.reason), (400, "BadRequest"), "{err}");
    assert_eq!(
        err.message,
        "BGPRouter in version \"v1alpha1\" cannot be handled as a BGPRouter: strict decoding error: \
         unknown field \"spec.addressFamilies[0].x\", unknown field \"spec.roles\""
    );
    assert!(fx.list("bgprouters", None).is_empty());
    // A `null` of a known field is dropped, not unknown.
    fx.insert(with(&router(), &json!({"spec": {"listenPort": null}})));
}

#[test]
#[should_panic(expected = "is invalid")]
fn seeding_an_object_the_server_would_refuse_panics() {
    Fixture::new().insert(with(&router(), &json!({"spec": {"addressFamilies": null}})));
}
