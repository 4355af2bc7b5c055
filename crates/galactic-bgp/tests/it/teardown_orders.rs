//! Whatever order the chain's DELs come in, nothing of a VPC stays published or recorded once
//! its attachments are gone: pods of two VPCs (8 attachments each) attached through the full
//! chain (galactic-cni with galactic-ipam, galactic-route, galactic-bgp), then torn down
//! sequentially, 16 at once, stage by stage (every chain's galactic-bgp DEL before any master
//! DEL), in reversed order (master first), and with galactic-bgp killed in the middle of its DEL
//! and the DEL retried. galactic-bgp judges "the VPC's last attachment" by its own publication
//! records, never by the masters' records, which the same teardowns remove at other times. Each
//! case runs with the local publisher and against the test kit's API server (HTTPS).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::cluster::NS;
use galactic_core::bpf::maps::DATAPATH_ENV;
use galactic_testkit::apiserver::ApiServer;
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const NODE: &str = "node-a";
const VPCS: [&str; 2] = ["a1", "a2"];
const PER_VPC: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Publisher {
    Local,
    Kube,
}

/// One attached pod: its namespace, its chain, what the runtime knows of it.
struct Attached {
    _pod: Pod,
    list: Conflist,
    att: Attachment,
}

/// A node with the full chain and the pods of two VPCs attached.
struct Scene {
    host: Host,
    server: Option<ApiServer>,
    pods: Vec<Attached>,
}

fn router() -> Value {
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
           "metadata": {"name": "router-a", "namespace": NS},
           "spec": {"targetRef": {"kind": "Node", "name": NODE}, "localASN": 65000,
                    "routerID": "10.0.2.1", "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}],
                    "srv6Locator": "2001:db8:ff03::/48", "nodeID": 1}})
}

/// The chain of attachment `att` (1-based) of VPC number `v`: its own network and pools.
fn conflist(v: usize, att: usize) -> Conflist {
    let (vpc, att_s) = (VPCS[v], att.to_string());
    let ipam = json!({"type": "galactic-ipam",
                      "ipv6_subnet": format!("fd20:{}{att:02x}::/64", v + 1),
                      "ipv4_subnet": format!("172.{}.{att}.0/24", 20 + v)});
    Conflist::new(
        "1.1.0",
        &format!("net-{vpc}-{att}"),
        vec![
            json!({"type": "galactic-cni", "vpc": vpc, "vpcattachment": att_s, "ipam": ipam}),
            json!({"type": "galactic-route", "vpc": vpc, "vpcattachment": att_s,
                   "terminations": [{"network": format!("fd30:{}:{att}::/64", v + 1)}]}),
            json!({"type": "galactic-bgp", "vpc": vpc, "vpcattachment": att_s}),
        ],
    )
}

impl Scene {
    /// The node, its router, no pod.
    fn empty(tag: &str, publisher: Publisher) -> Self {
        let routing_domain =
            std::env::var(galactic_testkit::ROUTING_DOMAIN_ENV).unwrap_or_else(|_| "table".into());
        let name = match publisher {
            Publisher::Local => "local",
            Publisher::Kube => "kubernetes",
        };
        let host = Host::new(
            tag,
            json!({"publisher": name, "node_name": NODE, "namespace": NS,
                   "routing_domain": routing_domain}),
            &[
                "galactic-cni",
                "galactic-ipam",
                "galactic-route",
                "galactic-bgp",
            ],
        );
        let server = (publisher == Publisher::Kube).then(|| host.start_apiserver());
        match &server {
            Some(server) => {
                server.fixture().insert(router());
            }
            None => {
                let dir = host.path("state").join("bgp").join(NS).join("bgprouters");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("router-a.json"), router().to_string()).unwrap();
            }
        }
        Self {
            host,
            server,
            pods: Vec::new(),
        }
    }

    /// [`Scene::empty`] with the pods of both VPCs attached.
    fn new(tag: &str, publisher: Publisher) -> Self {
        let mut scene = Self::empty(tag, publisher);
        for v in 0..VPCS.len() {
            for att in 1..=PER_VPC {
                scene.attach(tag, v, att);
            }
        }
        scene
    }

    fn runtime(&self) -> Runtime<'_> {
        self.host.runtime().env(DATAPATH_ENV, "off")
    }

    fn attach(&mut self, tag: &str, v: usize, att: usize) {
        let pod = Pod::new(&format!("{tag}{v}{att}"));
        let list = conflist(v, att);
        let name = format!("p-{}-{att}", VPCS[v]);
        if let Some(server) = &self.server {
            let fx = server.fixture();
            fx.insert(json!({"apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": list.name, "namespace": "pods"},
                "spec": {"config": list.to_value().to_string()}}));
            fx.insert(json!({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": name, "namespace": "pods"}}));
        }
        let att = pod
            .attachment()
            .arg("IgnoreUnknown", "1")
            .arg("K8S_POD_NAMESPACE", "pods")
            .arg("K8S_POD_NAME", &name);
        self.runtime()
            .add(&list, &att)
            .unwrap_or_else(|e| panic!("chain ADD of {name}: {e}"));
        self.pods.push(Attached {
            _pod: pod,
            list,
            att,
        });
    }

    /// The names of the published objects of `plural` in `namespace`.
    fn published(&self, plural: &str, namespace: &str) -> Vec<String> {
        match &self.server {
            Some(server) => server
                .fixture()
                .list(plural, Some(namespace))
                .iter()
                .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
                .collect(),
            None => files(
                &self
                    .host
                    .path("state")
                    .join("bgp")
                    .join(namespace)
                    .join(plural),
            ),
        }
    }

    /// Every publication record galactic-bgp keeps.
    fn records(&self) -> Vec<String> {
        let root = self.host.path("state").join("bgp-attachments");
        let mut out = Vec::new();
        for dir in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            if dir.path().is_dir() {
                out.extend(files(&dir.path()));
            }
        }
        out
    }

    fn assert_published(&self) {
        assert_eq!(self.published("bgpvrfinstances", NS).len(), 2);
        assert_eq!(self.published("bgpadvertisements", NS).len(), 16);
        assert_eq!(self.published("endpointslices", "pods").len(), 16);
        assert_eq!(self.records().len(), 16);
    }

    /// Nothing of either VPC is published or recorded.
    fn assert_nothing_left(&self, case: &str) {
        let log = || {
            let lines = self.host.node.log_lines();
            let tail = &lines[lines.len().saturating_sub(20)..];
            tail.iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        };
        for (plural, ns) in [
            ("bgpvrfinstances", NS),
            ("bgpadvertisements", NS),
            ("endpointslices", "pods"),
        ] {
            let left = self.published(plural, ns);
            assert!(
                left.is_empty(),
                "{case}: {plural} left: {left:?}\n{}",
                log()
            );
        }
        assert!(
            self.records().is_empty(),
            "{case}: records left: {:?}",
            self.records()
        );
    }

    /// The DEL of plugin `index` of pod `i`'s chain alone, with the runtime's cached result.
    fn plugin_del(&self, rt: &Runtime<'_>, i: usize, index: usize) -> galactic_testkit::Outcome {
        let p = &self.pods[i];
        let cached = rt.cached(&p.list, &p.att);
        rt.plugin(&p.list, index, "DEL", &p.att, cached.as_ref())
    }

    fn chain_del(&self, i: usize) {
        let p = &self.pods[i];
        self.runtime()
            .del(&p.list, &p.att)
            .unwrap_or_else(|e| panic!("chain DEL: {e}"));
    }
}

fn files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    out.sort();
    out
}

fn sequential(publisher: Publisher, tag: &str) {
    galactic_testkit::privileged!();
    let scene = Scene::new(tag, publisher);
    scene.assert_published();
    for i in 0..scene.pods.len() {
        scene.chain_del(i);
    }
    scene.assert_nothing_left("sequential");
}

fn parallel(publisher: Publisher, tag: &str) {
    galactic_testkit::privileged!();
    let scene = Scene::new(tag, publisher);
    scene.assert_published();
    std::thread::scope(|s| {
        for i in 0..scene.pods.len() {
            let scene = &scene;
            s.spawn(move || scene.chain_del(i));
        }
    });
    scene.assert_nothing_left("parallel");
}

/// Every chain's galactic-bgp DEL, then every galactic-route DEL, then every master DEL: the
/// interleaving 16 parallel DELs can take, made deterministic. Every galactic-bgp DEL runs
/// while all the masters' records are still there.
fn staged(publisher: Publisher, tag: &str) {
    galactic_testkit::privileged!();
    let scene = Scene::new(tag, publisher);
    scene.assert_published();
    let rt = scene.runtime();
    for index in (0..3).rev() {
        for i in 0..scene.pods.len() {
            scene.plugin_del(&rt, i, index).expect_quiet_success();
        }
    }
    scene.assert_nothing_left("staged");
}

/// Each chain's DELs in reversed order (master, galactic-route, galactic-bgp), 16 chains at
/// once.
fn reversed(publisher: Publisher, tag: &str) {
    galactic_testkit::privileged!();
    let scene = Scene::new(tag, publisher);
    scene.assert_published();
    std::thread::scope(|s| {
        for i in 0..scene.pods.len() {
            let scene = &scene;
            s.spawn(move || {
                let rt = scene.runtime();
                for index in 0..3 {
                    scene.plugin_del(&rt, i, index).expect_quiet_success();
                }
            });
        }
    });
    scene.assert_nothing_left("reversed");
}

/// galactic-bgp SIGKILLed in its DEL, after retracting its objects (every chain) and, for the
/// VPC's last record, just before the VRF instance goes (its record still there), and the
/// chain's DEL retried by the runtime until it succeeds.
fn killed(publisher: Publisher, tag: &str) {
    galactic_testkit::privileged!();
    let scene = Scene::new(tag, publisher);
    scene.assert_published();
    let attempts = [
        "bgp-before-forget:kill,bgp-before-vrf-retire:kill",
        "bgp-before-vrf-retire:kill",
        "",
    ];
    let mut kills = 0;
    for (i, p) in scene.pods.iter().enumerate() {
        let done = attempts.iter().position(|failpoints| {
            let rt = scene.runtime().env("GALACTIC_FAILPOINTS", failpoints);
            rt.del(&p.list, &p.att).is_ok()
        });
        match done {
            Some(n) => kills += n,
            None => panic!("pod {i}: the chain DEL never succeeded"),
        }
    }
    // Every DEL died once after its retraction, and the VPC's last one again before the retire.
    assert_eq!(kills, 16 + VPCS.len(), "kills");
    scene.assert_nothing_left("killed");
}

/// The same kill just before the VRF instance goes (the VPC's last record), but the runtime
/// gives those attachments up and, having lost its cache, sends only GC (no DEL of the cached
/// attachments first, as libcni's GC would): galactic-bgp's GC alone finds the record the killed
/// DEL left and finishes its retraction, with either publisher.
fn killed_then_gc(publisher: Publisher, tag: &str) {
    galactic_testkit::privileged!();
    let scene = Scene::new(tag, publisher);
    scene.assert_published();
    let rt = scene
        .runtime()
        .env("GALACTIC_FAILPOINTS", "bgp-before-vrf-retire:kill");
    let given_up: Vec<_> = scene
        .pods
        .iter()
        .filter(|p| rt.del(&p.list, &p.att).is_err())
        .collect();
    assert_eq!(given_up.len(), VPCS.len(), "kills");
    rt.lose_cache();
    for p in given_up {
        scene
            .runtime()
            .gc(&p.list, &[])
            .unwrap_or_else(|e| panic!("GC: {e}"));
    }
    scene.assert_nothing_left("killed_then_gc");
}

macro_rules! both_publishers {
    ($($case:ident),*) => {
        mod local {
            $(#[test]
            fn $case() {
                super::$case(super::Publisher::Local, concat!("l", stringify!($case)));
            })*
        }
        mod kube {
            $(#[test]
            fn $case() {
                super::$case(super::Publisher::Kube, concat!("k", stringify!($case)));
            })*
        }
    };
}

both_publishers!(
    sequential,
    parallel,
    staged,
    reversed,
    killed,
    killed_then_gc
);

/// Kubernetes publisher: the runtime's DEL after a galactic-bgp ADD killed at any step deletes
/// what that ADD created, by its intent record, with no GC of galactic-router.
#[test]
fn the_del_after_a_killed_add_deletes_what_it_created() {
    galactic_testkit::privileged!();
    let scene = Scene::empty("kkadd", Publisher::Kube);
    for (n, point) in [
        "bgp-after-intent",
        "bgp-after-datapath",
        "bgp-before-slice",
        "bgp-after-objects",
    ]
    .iter()
    .enumerate()
    {
        let pod = Pod::new(&format!("kka{n}"));
        let list = conflist(0, 1);
        let name = format!("killed-{n}");
        let server = scene.server.as_ref().unwrap();
        server
            .fixture()
            .insert(json!({"apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": list.name, "namespace": "pods"},
            "spec": {"config": list.to_value().to_string()}}));
        server
            .fixture()
            .insert(json!({"apiVersion": "v1", "kind": "Pod",
                                       "metadata": {"name": name, "namespace": "pods"}}));
        let att = pod
            .attachment()
            .arg("IgnoreUnknown", "1")
            .arg("K8S_POD_NAMESPACE", "pods")
            .arg("K8S_POD_NAME", &name);
        let killing = scene
            .runtime()
            .env("GALACTIC_FAILPOINTS", &format!("{point}:kill"));
        let err = killing.add(&list, &att).unwrap_err();
        assert!(err.to_string().contains("galactic-bgp"), "{point}: {err}");
        assert_eq!(
            scene.records().len(),
            1,
            "{point}: the intent record is written first"
        );
        // The VPC's instance is created in the round of the objects naming its id
        // (decision 0077): before that round nothing of the ADD is in the API.
        let instances = match *point {
            "bgp-after-objects" => 1,
            _ => 0,
        };
        assert_eq!(
            scene.published("bgpvrfinstances", NS).len(),
            instances,
            "{point}"
        );
        scene
            .runtime()
            .del(&list, &att)
            .unwrap_or_else(|e| panic!("{point}: chain DEL: {e}"));
        scene.assert_nothing_left(point);
    }
}

/// A node upgraded from a version without publication records: its VPCs are published, and the
/// first DEL seeds the records from the masters' records (once, under a node-wide lock), so it
/// does not retract a VPC whose other attachments are live.
#[test]
fn an_upgraded_node_keeps_a_vpc_published_while_it_has_live_attachments() {
    galactic_testkit::privileged!();
    let scene = Scene::new("lupg", Publisher::Local);
    let root: PathBuf = scene.host.path("state").join("bgp-attachments");
    // What the previous version left: the documents, no records, no marker.
    std::fs::remove_dir_all(&root).unwrap();
    scene.chain_del(0);
    assert_eq!(
        scene.published("bgpvrfinstances", NS).len(),
        2,
        "a1's seven other attachments are live"
    );
    assert!(root.join("seeded").exists());
    assert_eq!(scene.records().len(), 15, "seeded for the live attachments");
    for i in 1..scene.pods.len() {
        scene.chain_del(i);
    }
    scene.assert_nothing_left("upgraded");
}
