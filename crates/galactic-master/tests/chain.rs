//! The whole chain (veth master → galactic-route → galactic-bgp) run exactly as a runtime runs a
//! conflist: one process per plugin, prevResult threaded forward on ADD, the cached result on
//! CHECK and DEL, DEL in reverse. Against the loopback API server (Kubernetes publisher) and with
//! the local publisher.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::net::netns::{run_in, Netns};
use galactic_testkit::apiserver::ApiServer;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::privileged::privileged;
use galactic_testkit::Outcome;
use serde_json::{json, Value};
use std::path::PathBuf;

const NS: &str = "galactic-system";

fn conflist(name: &str) -> Value {
    json!({"cniVersion": "1.1.0", "name": name, "plugins": [
        {"type": "galactic-cni", "vpc": "jU", "vpcattachment": "G",
         "ipam": {"type": "galactic-ipam", "ipv6_subnet": "fd20:10:ff01::/64", "ipv4_subnet": "172.21.1.0/24"}},
        {"type": "galactic-route", "vpc": "jU", "vpcattachment": "G", "terminations": [{"network": "fd30::/64"}]},
        {"type": "galactic-bgp", "vpc": "jU", "vpcattachment": "G"}]})
}

/// A runtime for one conflist on one host.
struct Runtime<'a> {
    host: &'a Host,
    conflist: Value,
    args: String,
}

impl Runtime<'_> {
    fn stanza(&self, i: usize, prev: Option<&Value>) -> Value {
        let mut stanza = self.conflist["plugins"][i].clone();
        stanza["cniVersion"] = self.conflist["cniVersion"].clone();
        stanza["name"] = self.conflist["name"].clone();
        if let Some(ipam) = stanza.get_mut("ipam") {
            ipam["data_dir"] = json!(self.host.path("ipam"));
        }
        if let Some(prev) = prev {
            stanza["prevResult"] = prev.clone();
        }
        stanza
    }

    fn binary(&self, i: usize) -> PathBuf {
        let plugin = self.conflist["plugins"][i]["type"].as_str().unwrap();
        if plugin == "galactic-cni" {
            PathBuf::from(env!("CARGO_BIN_EXE_galactic-cni"))
        } else {
            self.host.bin_dir.join(plugin)
        }
    }

    fn call(&self, i: usize, command: &str, pod: &Pod, prev: Option<&Value>) -> Outcome {
        self.host
            .invocation(&self.binary(i), command, pod)
            .var("CNI_ARGS", &self.args)
            // The router has SRv6 settings but this host has no eBPF datapath (covered by
            // galactic-bgp's tests/datapath.rs on a private bpffs).
            .var("GALACTIC_CNI_EBPF_DATAPATH", "off")
            .stdin(self.stanza(i, prev).to_string())
            .run()
    }

    fn len(&self) -> usize {
        self.conflist["plugins"].as_array().unwrap().len()
    }

    fn add(&self, pod: &Pod) -> Result<Value, Outcome> {
        let mut prev: Option<Value> = None;
        for i in 0..self.len() {
            let out = self.call(i, "ADD", pod, prev.as_ref());
            if !out.success {
                return Err(out);
            }
            prev = Some(out.json());
        }
        Ok(prev.unwrap())
    }

    fn each(&self, command: &str, pod: &Pod, cached: &Value, reverse: bool) {
        let mut order: Vec<usize> = (0..self.len()).collect();
        if reverse {
            order.reverse();
        }
        for i in order {
            self.call(i, command, pod, Some(cached))
                .expect_quiet_success();
        }
    }
}

struct Cluster {
    server: ApiServer,
    host: Host,
}

impl Cluster {
    fn new(tag: &str, nad: &Value) -> Self {
        let dir = tempfile::tempdir().unwrap().keep();
        let kubeconfig = dir.join("kubeconfig");
        let host = Host::new(
            tag,
            json!({"publisher": "kubernetes", "kubeconfig": kubeconfig, "node_name": "node-a", "namespace": NS}),
            &["galactic-ipam", "galactic-route", "galactic-bgp"],
        );
        // The plugins run in the host namespace, so the API server listens on its loopback.
        let ns = Netns::open(&host.netns.path()).unwrap();
        let server = run_in(&ns, ApiServer::start).unwrap().unwrap();
        server.write_kubeconfig(&kubeconfig).unwrap();
        let f = server.fixture();
        f.insert(json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
            "metadata": {"name": "router-a", "namespace": NS},
            "spec": {"targetRef": {"kind": "Node", "name": "node-a"}, "roles": ["tenant"], "localASN": 65000,
                     "routerID": "10.0.2.1", "srv6Locator": "2001:db8:ff03::/48", "nodeID": 1}}));
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

const ARGS: &str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=pods;K8S_POD_NAME=p1";

#[test]
fn the_chain_publishes_to_the_cluster_and_cleans_up_in_reverse() {
    if !privileged("the_chain_publishes_to_the_cluster_and_cleans_up_in_reverse") {
        return;
    }
    let list = conflist("tenant-ju");
    let cluster = Cluster::new("ckube", &list);
    let rt = Runtime {
        host: &cluster.host,
        conflist: list,
        args: ARGS.into(),
    };
    let pod = Pod::new("ckube");
    let result = rt
        .add(&pod)
        .unwrap_or_else(|out| panic!("chain ADD failed: {out:?}"));
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
        .get("bgpadvertisements", NS, "4d2-2a")
        .expect("BGPAdvertisement {hexvpc}-{hexatt}");
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

    rt.each("CHECK", &pod, &result, false);
    rt.each("DEL", &pod, &result, true);
    assert!(
        cluster.get("endpointslices", "pods", "p1").is_none(),
        "EndpointSlice deleted"
    );
    assert!(
        cluster.get("bgpvrfinstances", NS, "4d2-node-a").is_some(),
        "shared objects stay for GC"
    );
    assert!(
        !cluster
            .host
            .netns
            .try_ip(&["link", "show", "G0000000jU00GH"])
            .0
    );
    rt.each("DEL", &pod, &result, true);
}

#[test]
fn a_nad_without_galactic_bgp_is_refused_before_any_kernel_state_exists() {
    if !privileged("a_nad_without_galactic_bgp_is_refused_before_any_kernel_state_exists") {
        return;
    }
    let mut list = conflist("tenant-nobgp");
    list["plugins"].as_array_mut().unwrap().truncate(2);
    let cluster = Cluster::new("cnobgp", &list);
    let rt = Runtime {
        host: &cluster.host,
        conflist: list,
        args: ARGS.into(),
    };
    let pod = Pod::new("cnobgp");
    let out = rt.add(&pod).unwrap_err();
    let msg = out.expect_error(7);
    assert!(msg.contains("galactic-bgp"), "{msg}");
    assert_nothing_attached(&cluster, &pod);
}

#[test]
fn without_galactic_bgp_in_cni_path_the_kubernetes_publisher_refuses_before_any_state() {
    if !privileged(
        "without_galactic_bgp_in_cni_path_the_kubernetes_publisher_refuses_before_any_state",
    ) {
        return;
    }
    let list = conflist("tenant-nohelper");
    let cluster = Cluster::new("cnohelp", &list);
    // The masters reach the NAD through galactic-bgp (decision 0014); here it is not installed.
    std::fs::remove_file(cluster.host.bin_dir.join("galactic-bgp")).unwrap();
    let rt = Runtime {
        host: &cluster.host,
        conflist: list,
        args: ARGS.into(),
    };
    let pod = Pod::new("cnohelp");
    let out = rt.add(&pod).unwrap_err();
    let msg = out.expect_error(7);
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
    if !privileged("the_local_publisher_writes_the_same_documents_to_disk") {
        return;
    }
    let host = Host::new(
        "clocal",
        json!({"publisher": "local", "node_name": "node-a"}),
        &["galactic-ipam", "galactic-route", "galactic-bgp"],
    );
    let router_dir = host.path("state").join("bgp").join(NS).join("bgprouters");
    std::fs::create_dir_all(&router_dir).unwrap();
    std::fs::write(router_dir.join("router-a.json"), json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "router-a", "namespace": NS},
        "spec": {"targetRef": {"kind": "Node", "name": "node-a"}, "roles": ["tenant"], "localASN": 65000, "routerID": "10.0.2.1"}}).to_string()).unwrap();
    let rt = Runtime {
        host: &host,
        conflist: conflist("tenant-ju"),
        args: ARGS.into(),
    };
    let pod = Pod::new("clocal");
    let result = rt
        .add(&pod)
        .unwrap_or_else(|out| panic!("chain ADD failed: {out:?}"));
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
        doc("bgpadvertisements", NS, "4d2-2a")["spec"]["prefixes"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        doc("endpointslices", "pods", "p1")["metadata"]["labels"]["galactic.datum.net/tenant-id"],
        "jU-G"
    );
    rt.each("CHECK", &pod, &result, false);
    rt.each("DEL", &pod, &result, true);
    assert!(!host
        .path("state")
        .join("bgp/pods/endpointslices/p1.json")
        .exists());
}
