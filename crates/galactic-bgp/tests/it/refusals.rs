//! What the API server refuses, through the real client: a 422 of a CRD with a rule this
//! plugin's objects break, a 404 of a CRD that is not installed, a server certificate the
//! kubeconfig's CA does not sign, a token it does not accept. Each is a CNI error carrying the
//! server's own words or what to fix (no Rust dump of the Status), and ADD leaves nothing it
//! created.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::cluster::*;
use galactic_testkit::apiserver::{tls, Fault, FaultAction, Kubeconfig};
use galactic_testkit::runtime::Conflist;
use serde_json::{json, Value};

const ADVERTISEMENTS: &str = "bgpadvertisements.network.datumapis.com";

fn crd(c: &Cluster, name: &str) -> Value {
    c.server
        .fixture()
        .get("customresourcedefinitions", None, name)
        .unwrap()
}

fn assert_nothing_published(c: &Cluster) {
    for plural in ["bgpvrfinstances", "bgpadvertisements", "endpointslices"] {
        assert_eq!(
            c.server.fixture().list(plural, None),
            Vec::<Value>::new(),
            "{plural} rolled back"
        );
    }
}

#[test]
fn a_422_carries_the_rule_message_and_add_rolls_back() {
    let c = Cluster::new("node-a");
    // A cluster whose BGPAdvertisement CRD has a rule the addressless advertisement breaks.
    let mut strict = crd(&c, ADVERTISEMENTS);
    let spec =
        &mut strict["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["x-kubernetes-validations"]
        .as_array_mut()
        .unwrap()
        .push(json!({"rule": "has(self.prefixes)", "message": "this cluster advertises prefixes only"}));
    c.server.fixture().insert(strict);
    let tap = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "G000000001001H"}]});
    let out = call(
        &c.node,
        "ADD",
        "tap",
        &live_netns(),
        None,
        &stanza("1", "1", &tap),
    );
    let msg = out.expect_error(7);
    assert!(
        msg.contains("422")
            && msg.contains("BGPAdvertisement")
            && msg.contains("this cluster advertises prefixes only"),
        "{msg}"
    );
    assert!(!msg.contains("Status {") && !msg.contains("Some("), "{msg}");
    assert_nothing_published(&c);
}

#[test]
fn a_missing_crd_is_a_404_naming_the_resource_and_del_still_succeeds() {
    let c = Cluster::new("node-a");
    c.pod("p1");
    c.server
        .fixture()
        .remove("customresourcedefinitions", None, ADVERTISEMENTS);
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let msg = call(&c.node, "ADD", "one", &live_netns(), Some("p1"), &conf).expect_error(999);
    assert!(
        msg.contains("404") && msg.contains("bgpadvertisements"),
        "{msg}"
    );
    assert!(!msg.contains("Status {"), "{msg}");
    assert_nothing_published(&c);
    call(&c.node, "DEL", "one", &live_netns(), Some("p1"), &conf).expect_quiet_success();

    // STATUS without the BGPRouter CRD: not ready, naming what is missing.
    c.server.fixture().remove(
        "customresourcedefinitions",
        None,
        "bgprouters.network.datumapis.com",
    );
    let list = Conflist::new(
        "1.1.0",
        "n",
        vec![json!({"type": "galactic-bgp", "vpc": "1", "vpcattachment": "1"})],
    );
    let msg = runtime(&c.node).status(&list).unwrap_err().expect_error(50);
    assert!(msg.contains("404") && msg.contains("bgprouters"), "{msg}");
}

fn bgp_only() -> Conflist {
    Conflist::new(
        "1.1.0",
        "n",
        vec![json!({"type": "galactic-bgp", "vpc": "1", "vpcattachment": "1"})],
    )
}

#[test]
fn status_reports_an_installed_crd_that_lacks_what_the_plugin_writes() {
    let c = Cluster::new("node-a");
    let status = || runtime(&c.node).status(&bgp_only());
    status().unwrap();
    // An older Galactic API: no originateFrom.interfaceName, and no End.DT46.
    let mut older = crd(&c, ADVERTISEMENTS);
    let spec = &mut older["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec["properties"]["originateFrom"]["properties"]
        .as_object_mut()
        .unwrap()
        .remove("interfaceName");
    spec["properties"]["function"]["enum"] = json!(["End.DT4", "End.DT6"]);
    c.server.fixture().insert(older);
    let msg = status().unwrap_err().expect_error(50);
    assert!(
        msg.contains(ADVERTISEMENTS)
            && msg.contains("spec.originateFrom.interfaceName")
            && msg.contains("spec.function value End.DT46"),
        "{msg}"
    );
    // A node whose RBAC may not read CRDs cannot judge them: STATUS answers from the probe.
    c.server.fixture().inject(Fault::on(
        "GET",
        "/customresourcedefinitions/",
        1,
        FaultAction::Status(403),
    ));
    status().unwrap();
    // The VRF instance CRD not installed at all.
    c.server.fixture().remove(
        "customresourcedefinitions",
        None,
        "bgpvrfinstances.network.datumapis.com",
    );
    let msg = status().unwrap_err().expect_error(50);
    assert!(
        msg.contains("bgpvrfinstances.network.datumapis.com is not installed"),
        "{msg}"
    );
}

/// Rewrites the node's kubeconfig (written by the cluster fixture) changed by `change`.
fn rewrite_kubeconfig(c: &Cluster, change: impl FnOnce(&mut Kubeconfig)) -> String {
    let path = c.node.dir.path().join("kubeconfig");
    let mut kubeconfig = c.server.kubeconfig();
    change(&mut kubeconfig);
    kubeconfig.write(&path).unwrap();
    path.display().to_string()
}

/// ADD fails with code 7 and `words`, having published nothing; DEL logs it and succeeds (a
/// refusal does not clear up by retrying, decision 0002); STATUS is not ready (code 50).
fn refused_everywhere(c: &Cluster, words: &[&str]) {
    c.pod("p1");
    let prev = veth_prev("fd20:10:ff01::100:0/96", "172.21.1.2/24", &live_netns());
    let conf = stanza("1", "1", &prev);
    let msg = call(&c.node, "ADD", "one", &live_netns(), Some("p1"), &conf).expect_error(7);
    for word in words {
        assert!(msg.contains(word), "{word:?} in {msg}");
    }
    assert!(
        !msg.contains("Some(") && !msg.contains("Error(") && !msg.contains("Custom {"),
        "{msg}"
    );
    assert_nothing_published(c);
    call(&c.node, "DEL", "one", &live_netns(), Some("p1"), &conf).expect_quiet_success();
    let msg = runtime(&c.node)
        .status(&bgp_only())
        .unwrap_err()
        .expect_error(50);
    assert!(msg.contains(words[0]), "{msg}");
}

#[test]
fn a_kubeconfig_trusting_another_ca_is_code_7_saying_the_certificate_was_refused() {
    let c = Cluster::new("node-a");
    let kubeconfig = rewrite_kubeconfig(&c, |k| {
        k.ca_pem = tls::ClusterCa::generate().unwrap().pem();
    });
    refused_everywhere(
        &c,
        &[
            "the API server's certificate was refused",
            "not signed by the CA the kubeconfig trusts",
            &kubeconfig,
        ],
    );
    assert_eq!(
        c.server.fixture().requests(),
        Vec::new(),
        "no request passed the handshake"
    );
}

#[test]
fn a_token_the_server_does_not_accept_is_code_7_saying_the_credentials_were_refused() {
    let c = Cluster::new("node-a");
    let kubeconfig = rewrite_kubeconfig(&c, |k| k.token = "expired-token".into());
    refused_everywhere(
        &c,
        &[
            "the API server refused the credentials (401 Unauthorized)",
            &kubeconfig,
        ],
    );
    assert!(
        c.server
            .fixture()
            .requests()
            .iter()
            .all(|r| r.status == 401),
        "every request was refused, none served"
    );
}
