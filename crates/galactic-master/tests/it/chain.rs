//! The whole chain (veth master → galactic-route → galactic-bgp) run exactly as a runtime runs a
//! conflist: one process per plugin, prevResult threaded forward on ADD, the cached result on
//! CHECK and DEL, DEL in reverse. Against the loopback API server (Kubernetes publisher) and with
//! the local publisher.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_testkit::apiserver::ApiServer;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};

const NS: &str = "galactic-system";

fn conflist(name: &str) -> Value {
    json!({"cniVersion": "1.1.0", "name": name, "plugins": [
        {"type": "galactic-cni", "vpc": "jU", "vpcattachment": "G",
         "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd20:10:ff01::/64", "ipv4_subnet": "172.21.1.0/24"}},
        {"type": "galactic-route", "vpc": "jU", "vpcattachment": "G", "terminations": [{"network": "fd30::/64"}]},
        {"type": "galactic-bgp", "vpc": "jU", "vpcattachment": "G"}]})
}

/// The list as this host's runtime holds it: the NAD's config (IPAM's store is the node's).
fn list(nad: &Value, _host: &Host) -> Conflist {
    Conflist::from_value(nad).unwrap()
}

/// The host's runtime, with this test's own master binary.
fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime()
        .binary(
            "galactic-cni",
            galactic_testkit::plugin_binary("galactic-cni"),
        )
        // The router has SRv6 settings but this host has no eBPF datapath (covered by
        // galactic-bgp's tests/datapath.rs on a private bpffs).
        .env("GALACTIC_CNI_EBPF_DATAPATH", "off")
}

/// The pod's attachment with the arguments kubelet passes.
fn attachment(pod: &Pod) -> Attachment {
    pod.attachment()
        .arg("IgnoreUnknown", "1")
        .arg("K8S_POD_NAMESPACE", "pods")
        .arg("K8S_POD_NAME", "p1")
}

struct Cluster {
    server: ApiServer,
    host: Host,
}

impl Cluster {
    fn new(tag: &str, nad: &Value) -> Self {
        // With the Kubernetes publisher `auto` refuses a kernel without VRF, so this cluster's
        // node names its backend: the tier's (the production-kernel tier forces vrf), else an
        // explicit table for the development kernel.
        let routing_domain =
            std::env::var(galactic_testkit::ROUTING_DOMAIN_ENV).unwrap_or_else(|_| "table".into());
        let host = Host::new(
            tag,
            json!({"publisher": "kubernetes", "node_name": "node-a", "namespace": NS,
                   "routing_domain": routing_domain}),
            &["galactic-ipam", "galactic-route", "galactic-bgp"],
        );
        let server = host.start_apiserver();
        let f = server.fixture();
        f.insert(
            json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
            "metadata": {"name": "router-a", "namespace": NS},
            "spec": {"targetRef": {"kind": "Node", "name": "node-a"}, "localASN": 65000,
                     "routerID": "10.0.2.1", "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}],
                     "srv6Locator": "2001:db8:ff03::/48", "nodeID": 1}}),
        );
        f.insert(
            json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": nad["name"], "namespace": "pods", "annotations": {"team": "blue"}},
            "spec": {"config": nad.to_string()}}),
        );
        f.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "pods"}}));
        Self { server, host }
    }

    fn get(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        self.server.fixture().get(plural, Some(ns), name)
    }
}

#[test]
fn the_chain_publishes_to_the_cluster_and_cleans_up_in_reverse() {
    galactic_testkit::privileged!();
    let nad = conflist("tenant-ju");
    let cluster = Cluster::new("ckube", &nad);
    let (rt, list) = (runtime(&cluster.host), list(&nad, &cluster.host));
    let pod = Pod::new("ckube");
    let att = attachment(&pod);
    let result = rt
        .add(&list, &att)
        .unwrap_or_else(|e| panic!("chain ADD failed: {e}"));
    assert_eq!(result["interfaces"][0]["name"], "G0000000jU00GH");

    let nad = cluster
        .get("network-attachment-definitions", "pods", "tenant-ju")
        .unwrap();
    let annotations = &nad["metadata"]["annotations"];
    assert_eq!(
        annotations["k8s.v1.cni.cncf.io/host-interface"],
        "G0000000jU00GH"
    );
    assert_eq!(annotations["team"], "blue", "other annotations are kept");
    let vrf = cluster
        .get("bgpvrfinstances", NS, "4d2-node-a")
        .expect("BGPVRFInstance {hexvpc}-{node}");
    assert_eq!(
        vrf["spec"]["importRouteTargets"],
        json!([{"value": "65000:1234"}])
    );
    let adv = cluster
        .get("bgpadvertisements", NS, "4d2-2a-node-a")
        .expect("BGPAdvertisement {hexvpc}-{hexatt}-{node}");
    let prefixes = adv["spec"]["prefixes"].as_array().unwrap();
    assert_eq!(prefixes.len(), 2, "{adv}");
    let slice = cluster
        .get("endpointslices", "pods", "p1")
        .expect("EndpointSlice named after the pod");
    assert_eq!(
        slice["metadata"]["labels"]["galactic.datum.net/tenant-id"],
        "jU-G"
    );
    assert!(pod.ns.try_ip(&["route", "get", "fd30::1"]).0);
    assert!(
        cluster
            .host
            .netns
            .ip(&["-6", "route", "show", "table", "1000"])
            .contains("fd30::/64"),
        "termination installed"
    );

    rt.check(&list, &att).unwrap();
    rt.del(&list, &att).unwrap();
    assert!(
        cluster.get("endpointslices", "pods", "p1").is_none(),
        "EndpointSlice deleted"
    );
    // The VPC's only attachment on the node is gone: DEL retracted what it published.
    assert!(
        cluster.get("bgpvrfinstances", NS, "4d2-node-a").is_none(),
        "the VPC's last attachment on the node took the VRF instance"
    );
    assert!(
        cluster
            .get("bgpadvertisements", NS, "4d2-2a-node-a")
            .is_none(),
        "no live container is left on the advertisement"
    );
    assert!(
        !cluster
            .host
            .netns
            .try_ip(&["link", "show", "G0000000jU00GH"])
            .0
    );
    // DEL retried by a runtime that still holds the result.
    rt.remember(&list, &att, &result);
    rt.del(&list, &att).unwrap();
}

#[test]
fn a_nad_without_galactic_bgp_is_refused_before_any_kernel_state_exists() {
    galactic_testkit::privileged!();
    let mut nad = conflist("tenant-nobgp");
    nad["plugins"].as_array_mut().unwrap().truncate(2);
    let cluster = Cluster::new("cnobgp", &nad);
    let (rt, list) = (runtime(&cluster.host), list(&nad, &cluster.host));
    let pod = Pod::new("cnobgp");
    let err = rt.add(&list, &attachment(&pod)).unwrap_err();
    let msg = err.expect_error(7);
    assert!(msg.contains("galactic-bgp"), "{msg}");
    assert_nothing_attached(&cluster, &pod);
}

#[test]
fn without_galactic_bgp_in_cni_path_the_kubernetes_publisher_refuses_before_any_state() {
    galactic_testkit::privileged!();
    let nad = conflist("tenant-nohelper");
    let cluster = Cluster::new("cnohelp", &nad);
    // The masters reach the NAD through galactic-bgp (decision 0014); here it is not installed.
    std::fs::remove_file(cluster.host.bin_dir.join("galactic-bgp")).unwrap();
    let (rt, list) = (runtime(&cluster.host), list(&nad, &cluster.host));
    let pod = Pod::new("cnohelp");
    let err = rt.add(&list, &attachment(&pod)).unwrap_err();
    let msg = err.expect_error(7);
    assert!(
        msg.contains("galactic-bgp") && msg.contains("CNI_PATH"),
        "{msg}"
    );
    assert_nothing_attached(&cluster, &pod);
    let nad = cluster.get("network-attachment-definitions", "pods", "tenant-nohelper");
    assert!(
        nad.unwrap()["metadata"]["annotations"]
            .get("k8s.v1.cni.cncf.io/host-interface")
            .is_none(),
        "nothing annotated"
    );
}

/// No interface, attachment record or IPAM state exists after a refused ADD.
fn assert_nothing_attached(cluster: &Cluster, pod: &Pod) {
    let links = cluster.host.netns.ip(&["-o", "link", "show"]);
    assert_eq!(
        links.lines().count(),
        1,
        "no interface was created: {links}"
    );
    assert!(!pod.ns.try_ip(&["link", "show", "eth0"]).0);
    assert!(
        !cluster.host.path("state").join("attachments").exists()
            || std::fs::read_dir(cluster.host.path("state").join("attachments"))
                .unwrap()
                .next()
                .is_none()
    );
    assert!(!cluster.host.path("ipam").exists(), "IPAM was never called");
}

#[test]
fn the_local_publisher_writes_the_same_documents_to_disk() {
    galactic_testkit::privileged!();
    let host = Host::new(
        "clocal",
        json!({"publisher": "local", "node_name": "node-a"}),
        &["galactic-ipam", "galactic-route", "galactic-bgp"],
    );
    let router_dir = host.path("state").join("bgp").join(NS).join("bgprouters");
    std::fs::create_dir_all(&router_dir).unwrap();
    std::fs::write(router_dir.join("router-a.json"), json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "router-a", "namespace": NS},
        "spec": {"targetRef": {"kind": "Node", "name": "node-a"}, "localASN": 65000, "routerID": "10.0.2.1",
                 "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}]}}).to_string()).unwrap();
    let (rt, list) = (runtime(&host), list(&conflist("tenant-ju"), &host));
    let pod = Pod::new("clocal");
    let att = attachment(&pod);
    rt.add(&list, &att)
        .unwrap_or_else(|e| panic!("chain ADD failed: {e}"));
    let doc = |kind: &str, ns: &str, name: &str| -> Value {
        let path = host
            .path("state")
            .join("bgp")
            .join(ns)
            .join(kind)
            .join(format!("{name}.json"));
        serde_json::from_slice(
            &std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        )
        .unwrap()
    };
    assert_eq!(
        doc("bgpvrfinstances", NS, "4d2-node-a")["spec"]["importRouteTargets"],
        json!([{"value": "65000:1234"}])
    );
    assert_eq!(
        doc("bgpadvertisements", NS, "4d2-2a-node-a")["spec"]["prefixes"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        doc("endpointslices", "pods", "p1")["metadata"]["labels"]["galactic.datum.net/tenant-id"],
        "jU-G"
    );
    rt.check(&list, &att).unwrap();
    rt.del(&list, &att).unwrap();
    assert!(!host
        .path("state")
        .join("bgp/pods/endpointslices/p1.json")
        .exists());
}
