//! The fixture against the real `kube` client (in-process and over loopback HTTPS, verifying the
//! server's certificate and presenting the token), and the Kubernetes helpers of this module
//! against the fixture.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_kube::{
    annotate_nad_host_interface, detect_node_name, verify_chain_complete, BGPAdvertisement,
    ClientOptions, KubeClient, KubeError, RetryPolicy, HOST_INTERFACE_ANNOTATION,
};
use galactic_testkit::apiserver::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::{json, Value};
use std::time::Duration;

fn fast() -> ClientOptions {
    ClientOptions {
        call_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            attempts: 3,
            base_backoff: Duration::from_millis(5),
        },
    }
}

fn in_process(fixture: &Fixture) -> KubeClient {
    let service = fixture.service();
    KubeClient::from_built(move || kube::Client::new(service, "default"), fast()).unwrap()
}

fn over_https(server: &ApiServer) -> (KubeClient, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    server.write_kubeconfig(&path).unwrap();
    (KubeClient::from_kubeconfig(&path, fast()).unwrap(), dir)
}

/// A client of `kubeconfig` (changed from the server's own by the caller).
fn with_kubeconfig(kubeconfig: &Kubeconfig) -> (KubeClient, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    kubeconfig.write(&path).unwrap();
    (KubeClient::from_kubeconfig(&path, fast()).unwrap(), dir)
}

/// One GET of ConfigMap `n/a`.
fn get_a(client: &KubeClient) -> Result<ConfigMap, KubeError> {
    client.call("get ConfigMap n/a", |c| async move {
        Api::<ConfigMap>::namespaced(c, "n").get("a").await
    })
}

fn config_map(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}
    }))
    .unwrap()
}

/// Create, get, list with selectors, merge/JSON/apply patch, conflicts and deletes, as the real
/// client sends and parses them.
fn crud_contract(client: &KubeClient) {
    let api: Api<ConfigMap> = Api::namespaced(client.client().clone(), "ns1");
    let created = client
        .call("create", |_| {
            let api = api.clone();
            async move {
                api.create(
                    &PostParams::default(),
                    &config_map("a", json!({"app": "x"})),
                )
                .await
            }
        })
        .unwrap();
    let meta = &created.metadata;
    assert!(
        meta.uid.is_some() && meta.resource_version.is_some() && meta.creation_timestamp.is_some()
    );
    let again = client.call("create again", |_| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &config_map("a", json!({})))
                .await
        }
    });
    assert!(
        again.unwrap_err().is_conflict(),
        "create of an existing name is 409"
    );
    client
        .call("create b", |_| {
            let api = api.clone();
            async move {
                api.create(
                    &PostParams::default(),
                    &config_map("b", json!({"app": "y"})),
                )
                .await
            }
        })
        .unwrap();
    let other_ns: Api<ConfigMap> = Api::namespaced(client.client().clone(), "ns2");
    client
        .call("create in ns2", |_| {
            let api = other_ns.clone();
            async move {
                api.create(
                    &PostParams::default(),
                    &config_map("c", json!({"app": "x"})),
                )
                .await
            }
        })
        .unwrap();

    let names = |api: &Api<ConfigMap>, selector: &str| -> Vec<String> {
        let lp = ListParams::default().labels(selector);
        let api = api.clone();
        client
            .call("list", |_| {
                let (api, lp) = (api.clone(), lp.clone());
                async move { api.list(&lp).await }
            })
            .unwrap()
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect()
    };
    assert_eq!(names(&api, ""), ["a", "b"], "namespaced list");
    assert_eq!(names(&api, "app=x"), ["a"]);
    assert_eq!(names(&api, "app!=x"), ["b"]);
    assert_eq!(names(&api, "app,app in-valid-free"), Vec::<String>::new());
    let all: Api<ConfigMap> = Api::all(client.client().clone());
    assert_eq!(names(&all, "app=x"), ["a", "c"], "list across namespaces");

    let merged = client
        .call("merge", |_| {
            let api = api.clone();
            async move {
                api.patch(
                    "a",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"k2": "v2"}})),
                )
                .await
            }
        })
        .unwrap();
    assert_eq!(
        merged.data.as_ref().unwrap().len(),
        2,
        "merge patch keeps other keys"
    );
    assert_ne!(merged.metadata.resource_version, meta.resource_version);
    let patched = client
        .call("json patch", |_| {
            let api = api.clone();
            let ops: json_patch::Patch =
                serde_json::from_value(json!([{"op": "remove", "path": "/data/k"}])).unwrap();
            async move {
                api.patch("a", &PatchParams::default(), &Patch::<()>::Json(ops))
                    .await
            }
        })
        .unwrap();
    assert_eq!(patched.data.unwrap().keys().collect::<Vec<_>>(), ["k2"]);
    let applied = client
        .call("apply", |_| {
            let api = api.clone();
            async move {
                api.patch(
                    "d",
                    &PatchParams::apply("test").force(),
                    &Patch::Apply(
                        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "1"}}),
                    ),
                )
                .await
            }
        })
        .unwrap();
    assert_eq!(applied.metadata.name.as_deref(), Some("d"), "apply creates");

    let mut stale = created.clone();
    stale.data = Some([("z".to_owned(), "1".to_owned())].into());
    let err = client
        .call("replace stale", |_| {
            let (api, stale) = (api.clone(), stale.clone());
            async move { api.replace("a", &PostParams::default(), &stale).await }
        })
        .unwrap_err();
    assert!(err.is_conflict(), "stale resourceVersion is 409: {err}");

    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let err = client
        .call("delete", |_| {
            let (api, dp) = (api.clone(), wrong_uid.clone());
            async move { api.delete("a", &dp).await.map(drop) }
        })
        .unwrap_err();
    assert!(err.is_conflict(), "uid precondition: {err}");
    client
        .call("delete", |_| {
            let api = api.clone();
            async move { api.delete("a", &DeleteParams::default()).await.map(drop) }
        })
        .unwrap();
    let err = client
        .call("get", |_| {
            let api = api.clone();
            async move { api.get("a").await }
        })
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[test]
fn kube_client_contract_in_process() {
    let fixture = Fixture::new();
    crud_contract(&in_process(&fixture));
}

#[test]
fn kube_client_contract_over_loopback_https() {
    let server = ApiServer::start().unwrap();
    let (client, _dir) = over_https(&server);
    crud_contract(&client);
    assert!(server
        .fixture()
        .requests()
        .iter()
        .any(|r| r.content_type.as_deref() == Some("application/json-patch+json")));
}

#[test]
fn the_kubeconfig_is_the_installers_https_ca_file_and_token() {
    let server = ApiServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    server.write_kubeconfig(&path).unwrap();
    let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let cluster = &written["clusters"][0]["cluster"];
    assert_eq!(cluster["server"], json!(server.url()));
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    let ca_file = cluster["certificate-authority"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(ca_file).unwrap(), server.ca_pem());
    assert!(server.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(
        written["users"][0]["user"],
        json!({"token": server.token()})
    );
    assert!(cluster.get("insecure-skip-tls-verify").is_none());
    let ca_copy = dir.path().join("ca.crt");
    server.write_ca(&ca_copy).unwrap();
    assert_eq!(std::fs::read_to_string(ca_copy).unwrap(), server.ca_pem());
}

#[test]
fn the_ca_inline_and_a_caller_bound_ipv6_listener_work_too() {
    let listener = std::net::TcpListener::bind("[::1]:0").unwrap();
    let server = ApiServer::builder()
        .listener(listener)
        .token("a-service-account-token")
        .start()
        .unwrap();
    assert!(
        server.url().starts_with("https://[::1]:"),
        "{}",
        server.url()
    );
    assert_eq!(server.token(), "a-service-account-token");
    let mut kubeconfig = server.kubeconfig();
    kubeconfig.ca = CaPlacement::Inline;
    let (client, _dir) = with_kubeconfig(&kubeconfig);
    crud_contract(&client);
}

#[test]
fn a_client_trusting_another_ca_is_refused_and_not_retried() {
    let server = ApiServer::start().unwrap();
    let mut kubeconfig = server.kubeconfig();
    kubeconfig.ca_pem = tls::ClusterCa::generate().unwrap().pem();
    let (client, _dir) = with_kubeconfig(&kubeconfig);
    let err = get_a(&client).unwrap_err();
    assert!(
        matches!(
            err,
            KubeError::Untrusted {
                // Both CAs have the fixture's CA name, as two clusters' CAs often share
                // theirs: the issuer is found by name and its signature fails.
                why: rustls::CertificateError::BadSignature,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_refused() && !err.is_transient(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("certificate was refused")
            && text.contains("not signed by the CA the kubeconfig trusts")
            && text.contains("kubeconfig"),
        "{text}"
    );
    assert!(
        server.fixture().requests().is_empty(),
        "no request was served"
    );
}

#[test]
fn a_server_name_the_certificate_does_not_cover_is_refused() {
    let server = ApiServer::start().unwrap();
    let mut kubeconfig = server.kubeconfig();
    kubeconfig.tls_server_name = Some("api.elsewhere.example".into());
    let (client, _dir) = with_kubeconfig(&kubeconfig);
    let err = get_a(&client).unwrap_err();
    assert!(
        matches!(
            err,
            KubeError::Untrusted {
                why: rustls::CertificateError::NotValidForNameContext { .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("api.elsewhere.example"), "{err}");
    // A name it covers: verified by that name, served.
    kubeconfig.tls_server_name = Some("localhost".into());
    let (client, _dir) = with_kubeconfig(&kubeconfig);
    server.fixture().insert(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}),
    );
    get_a(&client).unwrap();
}

#[test]
fn a_wrong_token_is_401_and_says_the_credentials_were_refused() {
    let server = ApiServer::start().unwrap();
    server.fixture().insert(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}),
    );
    let mut kubeconfig = server.kubeconfig();
    kubeconfig.token = "another-clusters-token".into();
    let (client, _dir) = with_kubeconfig(&kubeconfig);
    let err = get_a(&client).unwrap_err();
    assert!(matches!(err, KubeError::Unauthenticated { .. }), "{err}");
    assert_eq!(err.status_code(), Some(401));
    assert!(
        err.to_string()
            .contains("refused the credentials (401 Unauthorized)"),
        "{err}"
    );
    let statuses: Vec<u16> = server
        .fixture()
        .requests()
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [401], "answered 401 once, not retried");
    // The server's own token is served.
    let (client, _dir) = over_https(&server);
    get_a(&client).unwrap();
}

#[test]
fn the_401_is_the_api_servers_status() {
    let server = ApiServer::start().unwrap();
    let mut kubeconfig = server.kubeconfig();
    kubeconfig.token = "wrong".into();
    let (client, _dir) = with_kubeconfig(&kubeconfig);
    let raw = client.block_on(async {
        let request = http::Request::get("/api/v1/namespaces/n/configmaps/a")
            .body(Vec::new())
            .unwrap();
        client.client().request_text(request).await
    });
    let kube::Error::Api(status) = raw.unwrap_err() else {
        panic!("a Status answer expected")
    };
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );
}

fn advertisement(prefixes: Value) -> BGPAdvertisement {
    serde_json::from_value(json!({
        "apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPAdvertisement",
        "metadata": {"name": "1-1"},
        "spec": {"routerRef": {"name": "r"}, "addressFamily": {"afi": "l2vpn", "safi": "evpn"},
                 "prefixes": prefixes, "communities": ["65000:1"]}
    }))
    .unwrap()
}

#[test]
fn crd_validation_rejects_what_upstream_trips_over() {
    let fixture = Fixture::new();
    let client = in_process(&fixture);
    let api: Api<BGPAdvertisement> = Api::namespaced(client.client().clone(), "galactic-system");
    let create = |ad: BGPAdvertisement| {
        client.call("create", |_| {
            let (api, ad) = (api.clone(), ad.clone());
            async move { api.create(&PostParams::default(), &ad).await }
        })
    };
    for bad in [
        json!([]),
        json!(["10.0.0.1/32", "10.0.0.1/32"]),
        json!(["::/0"]),
        json!(["fd00::1"]),
    ] {
        let err = create(advertisement(bad.clone())).unwrap_err();
        assert_eq!(err.status_code(), Some(422), "{bad}: {err}");
    }
    create(advertisement(json!(["10.0.0.1/32", "fd20:10:ff01::/96"]))).unwrap();
    let err = client
        .call("vrf", |c| async move {
            let api: Api<galactic_kube::BGPVRFInstance> = Api::namespaced(c, "galactic-system");
            let vrf = serde_json::from_value(json!({
                "apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPVRFInstance",
                "metadata": {"name": "1-node"},
                "spec": {"routerRef": {"name": "r"}, "vrfID": 1,
                         "importRouteTargets": [{"value": "65000:4294967295"}],
                         "exportRouteTargets": [{"value": "65000:1"}]}
            }))
            .unwrap();
            api.create(&PostParams::default(), &vrf).await
        })
        .unwrap_err();
    assert_eq!(
        err.status_code(),
        Some(422),
        "10-digit route target half: {err}"
    );
}

#[test]
fn transient_faults_are_retried_and_permanent_ones_are_not() {
    let server = ApiServer::start().unwrap();
    let (client, _dir) = over_https(&server);
    let fx = server.fixture();
    fx.insert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}));
    let get = || {
        client.call("get", |c| async move {
            Api::<ConfigMap>::namespaced(c, "n").get("a").await
        })
    };
    fx.inject(Fault::on(
        "GET",
        "/configmaps/a",
        1,
        FaultAction::Status(503),
    ));
    fx.inject(Fault::on("GET", "/configmaps/a", 1, FaultAction::Drop));
    get().unwrap();
    let statuses: Vec<u16> = fx.requests().iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [503, 0, 200],
        "503, dropped connection, then success"
    );

    fx.inject(Fault::on(
        "GET",
        "/configmaps/a",
        3,
        FaultAction::Status(500),
    ));
    let err = get().unwrap_err();
    // Transient after the retries: galactic-bgp answers such errors with code 11 (its
    // error.rs test pins that mapping).
    assert!(err.is_transient(), "{err}");

    fx.inject(Fault::on(
        "GET",
        "/configmaps/a",
        1,
        FaultAction::Status(403),
    ));
    let before = fx.requests().len();
    assert_eq!(get().unwrap_err().status_code(), Some(403));
    assert_eq!(
        fx.requests().len(),
        before + 1,
        "a permanent error is not retried"
    );

    fx.inject(Fault::on(
        "GET",
        "/configmaps/a",
        3,
        FaultAction::Delay(Duration::from_millis(300)),
    ));
    let slow = KubeClient::from_kubeconfig(
        &_dir.path().join("kubeconfig"),
        ClientOptions {
            call_timeout: Duration::from_millis(100),
            retry: RetryPolicy {
                attempts: 2,
                base_backoff: Duration::from_millis(1),
            },
        },
    )
    .unwrap();
    let err = slow
        .call("get", |c| async move {
            Api::<ConfigMap>::namespaced(c, "n").get("a").await
        })
        .unwrap_err();
    assert!(
        matches!(err, KubeError::Timeout { attempts: 2, .. }),
        "{err}"
    );
}

#[test]
fn connection_refused_is_transient() {
    let server = ApiServer::start().unwrap();
    let (client, _dir) = over_https(&server);
    drop(server);
    let err = client
        .call("get", |c| async move {
            Api::<ConfigMap>::namespaced(c, "n").get("a").await
        })
        .unwrap_err();
    assert_eq!(
        err.class(),
        Some(galactic_kube::ErrorClass::Transient),
        "{err}"
    );
}

fn nad(fx: &Fixture, name: &str, config: Option<Value>) {
    let mut spec = json!({});
    if let Some(config) = config {
        spec["config"] = json!(config.to_string());
    }
    fx.insert(json!({
        "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": "pods", "annotations": {"keep.example/x": "1"}},
        "spec": spec,
    }));
}

#[test]
fn nad_annotation_patches_only_its_key() {
    let fx = Fixture::new();
    let client = in_process(&fx);
    nad(&fx, "net1", None);
    annotate_nad_host_interface(&client, "pods", "net1", "G000000001001H").unwrap();
    let stored = fx
        .get("network-attachment-definitions", Some("pods"), "net1")
        .unwrap();
    assert_eq!(
        stored["metadata"]["annotations"],
        json!({"keep.example/x": "1", HOST_INTERFACE_ANNOTATION: "G000000001001H"})
    );
    let seen = fx.requests();
    assert_eq!(
        seen.last().unwrap().content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    let err = annotate_nad_host_interface(&client, "pods", "absent", "G000000001001H").unwrap_err();
    assert!(err.is_not_found());
}

#[test]
fn chain_completeness_is_checked_on_the_nad() {
    let fx = Fixture::new();
    let client = in_process(&fx);
    let chain = |types: &[&str]| {
        let plugins: Vec<Value> = types.iter().map(|t| json!({"type": t})).collect();
        Some(json!({"cniVersion": "1.1.0", "name": "n", "plugins": plugins}))
    };
    nad(
        &fx,
        "good",
        chain(&["galactic-cni", "galactic-route", "galactic-bgp"]),
    );
    nad(&fx, "bad", chain(&["galactic-cni", "galactic-route"]));
    nad(&fx, "empty", None);
    verify_chain_complete(&client, "pods", "good").unwrap();
    for name in ["bad", "empty"] {
        let err = verify_chain_complete(&client, "pods", name).unwrap_err();
        // galactic-bgp answers ChainIncomplete with code 7 (its error.rs test pins that).
        assert!(matches!(err, KubeError::ChainIncomplete { .. }), "{err}");
        assert!(err.to_string().contains(&format!("pods/{name}")), "{err}");
    }
    assert!(verify_chain_complete(&client, "pods", "absent")
        .unwrap_err()
        .is_not_found());
}

#[test]
fn node_name_is_detected_from_internal_ips() {
    let fx = Fixture::new();
    let client = in_process(&fx);
    let node = |name: &str, ip: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "status": {"addresses": [{"type": "InternalIP", "address": ip}]}})
    };
    fx.insert(node("elsewhere", "192.0.2.7"));
    let local = galactic_kube::local_addresses().unwrap();
    assert!(matches!(
        detect_node_name(&client, &local),
        Err(KubeError::NodeNotDetected(_))
    ));
    fx.insert(node("here", "127.0.0.1"));
    assert_eq!(detect_node_name(&client, &local).unwrap(), "here");
    assert!(fx
        .requests()
        .iter()
        .all(|r| r.path == "/api/v1/nodes" && r.method == "GET"));
}
