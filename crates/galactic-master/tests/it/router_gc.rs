//! What the real chain publishes for every kind of attachment is what the Galactic API stores,
//! and what galactic-router's GC keeps while the attachment lives (decision 0016).
//!
//! The GC below is a reimplementation of galactic-router's rules from their description
//! (datum-cloud/galactic `internal/gc`, read at `c4c2d06`), run against the fixture's objects
//! and this machine's `/var/run/netns`.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use galactic_core::ident::{name_segment, vrf_name, VpcId};
use galactic_testkit::apiserver::{ApiServer, Fixture};
use galactic_testkit::host::{Host, Pod};
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

const NS: &str = "galactic-system";
const NODE: &str = "node-a";

/// galactic-router's GC for one node and namespace, over the objects in `fixture`.
struct RouterGc<'a> {
    fixture: &'a Fixture,
}

/// The VPC part of a CRD name: up to the first `-`.
fn vpc_of_name(name: &str) -> &str {
    name.split_once('-').map_or(name, |(vpc, _)| vpc)
}

/// Every form a VPC appears as: itself and its CRD name segment.
fn vpc_keys(vpc: &str) -> [String; 2] {
    [vpc.to_owned(), name_segment(vpc)]
}

/// Whether the GC sees the netns at `path` alive: `/var/run/netns/<basename>` exists.
fn gc_netns_exists(path: &str) -> bool {
    let base = Path::new(path).file_name();
    !path.is_empty() && base.is_some_and(|b| Path::new("/var/run/netns").join(b).exists())
}

impl RouterGc<'_> {
    /// The names of the BGPRouters whose `targetRef.name` is the node.
    fn routers(&self) -> BTreeSet<String> {
        self.fixture
            .list("bgprouters", Some(NS))
            .iter()
            .filter(|r| r["spec"]["targetRef"]["name"] == NODE)
            .map(|r| r["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn mine(&self, plural: &str) -> Vec<Value> {
        let routers = self.routers();
        self.fixture
            .list(plural, Some(NS))
            .into_iter()
            .filter(|o| {
                o["spec"]["routerRef"]["name"]
                    .as_str()
                    .is_some_and(|r| routers.contains(r))
            })
            .collect()
    }

    /// The node's advertisements and VRF instances the GC deletes.
    fn orphaned_objects(&self) -> BTreeSet<String> {
        let mut orphaned = BTreeSet::new();
        let mut surviving = BTreeSet::new();
        for adv in self.mine("bgpadvertisements") {
            let name = adv["metadata"]["name"].as_str().unwrap();
            let paths: Vec<&str> = adv["metadata"]["annotations"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.starts_with("galactic.datum.net/netns."))
                .filter_map(|(_, v)| v.as_str())
                .collect();
            if paths.is_empty() || paths.iter().any(|p| gc_netns_exists(p)) {
                surviving.extend(vpc_keys(vpc_of_name(name)));
            } else {
                orphaned.insert(format!("BGPAdvertisement/{name}"));
            }
        }
        for vrf in self.mine("bgpvrfinstances") {
            let name = vrf["metadata"]["name"].as_str().unwrap();
            if !vpc_keys(vpc_of_name(name))
                .iter()
                .any(|k| surviving.contains(k))
            {
                orphaned.insert(format!("BGPVRFInstance/{name}"));
            }
        }
        orphaned
    }

    /// Of the VRF devices `devices` (`G{vpc:9}V`), those the GC deletes: no advertisement of
    /// the node names their VPC (counted after the objects it deletes are gone).
    fn orphaned_devices(&self, devices: &[String]) -> Vec<String> {
        let gone = self.orphaned_objects();
        let active: BTreeSet<String> = self
            .mine("bgpadvertisements")
            .iter()
            .map(|a| a["metadata"]["name"].as_str().unwrap().to_owned())
            .filter(|n| !gone.contains(&format!("BGPAdvertisement/{n}")))
            .flat_map(|n| vpc_keys(vpc_of_name(&n)))
            .collect();
        devices
            .iter()
            .filter(|d| {
                let vpc = d[1..d.len() - 1].trim_start_matches('0');
                !vpc_keys(vpc).iter().any(|k| active.contains(k))
            })
            .cloned()
            .collect()
    }
}

/// One attachment of the scenario.
struct Case {
    tag: &'static str,
    master: &'static str,
    vpc: &'static str,
    att: &'static str,
    ipam: Option<Value>,
    terminations: bool,
    /// The netns is given as `/proc/<pid>/ns/net` (of a process in the pod, or on the host for
    /// a tap) instead of `/run/netns/<name>`.
    proc_netns: bool,
}

fn cases() -> Vec<Case> {
    let pools = |n: u8| {
        json!({"type": "galactic-ipam", "ipv6_subnet": format!("fd20:10:ff{n:02x}::/64"),
                               "ipv4_subnet": format!("172.21.{n}.0/24")})
    };
    let case = |tag, master, vpc, ipam| Case {
        tag,
        master,
        vpc,
        att: "1",
        ipam,
        terminations: false,
        proc_netns: false,
    };
    vec![
        Case {
            terminations: true,
            ..case("dual", "galactic-cni", "a1", Some(pools(1)))
        },
        case(
            "v6",
            "galactic-cni",
            "a2",
            Some(json!({"type": "galactic-ipam", "ipv6_subnet": "fd20:10:ff02::/64"})),
        ),
        case(
            "v4",
            "galactic-cni",
            "a3",
            Some(json!({"type": "galactic-ipam", "ipv4_subnet": "172.21.3.0/24"})),
        ),
        case(
            "static",
            "galactic-cni",
            "a4",
            Some(json!({"type": "galactic-ipam", "static_ip": "fd20:10:ff05::10"})),
        ),
        case(
            "fixed",
            "galactic-cni",
            "a5",
            Some(json!({"type": "galactic-ipam",
            "addresses": [{"address": "fd20:10:ff04::7:0:1/96"}, {"address": "10.21.4.7/32"}]})),
        ),
        case("none", "galactic-cni", "a6", None),
        Case {
            proc_netns: true,
            ..case("proc", "galactic-cni", "a7", Some(pools(7)))
        },
        case("tap", "galactic-tap-cni", "a8", Some(pools(8))),
        Case {
            proc_netns: true,
            ..case("tapnone", "galactic-tap-cni", "a9", None)
        },
        // A second attachment of a1 without addresses: the shared VRF instance has two owners.
        Case {
            att: "2",
            ..case("dual2", "galactic-cni", "a1", None)
        },
    ]
}

impl Case {
    fn conflist(&self) -> Value {
        let mut master = json!({"type": self.master, "vpc": self.vpc, "vpcattachment": self.att});
        if let Some(ipam) = &self.ipam {
            master["ipam"] = ipam.clone();
        }
        let mut plugins = vec![master];
        if self.terminations {
            plugins.push(
                json!({"type": "galactic-route", "vpc": self.vpc, "vpcattachment": self.att,
                "terminations": [{"network": "fd30::/64"}]}),
            );
        }
        plugins.push(json!({"type": "galactic-bgp", "vpc": self.vpc, "vpcattachment": self.att}));
        json!({"cniVersion": "1.1.0", "name": format!("net-{}", self.tag), "plugins": plugins})
    }
}

/// A live attachment: its pod, the process that holds a `/proc` netns, its attachment.
struct Live {
    pod: Pod,
    holder: Option<std::process::Child>,
    list: Conflist,
    att: Attachment,
}

fn runtime(host: &Host) -> Runtime<'_> {
    host.runtime()
        .binary(
            "galactic-cni",
            galactic_testkit::plugin_binary("galactic-cni"),
        )
        .binary(
            "galactic-tap-cni",
            galactic_testkit::plugin_binary("galactic-tap-cni"),
        )
        .env("GALACTIC_CNI_EBPF_DATAPATH", "off")
}

/// A process in `netns` (a named namespace) that keeps running until killed.
fn holder_in(netns: &str) -> std::process::Child {
    std::process::Command::new("ip")
        .args(["netns", "exec", netns, "sleep", "600"])
        .spawn()
        .unwrap()
}

fn attach(server: &ApiServer, host: &Host, case: &Case) -> Live {
    let pod = Pod::new(case.tag);
    let nad = case.conflist();
    let fx = server.fixture();
    fx.insert(json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": nad["name"], "namespace": "pods"}, "spec": {"config": nad.to_string()}}));
    fx.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": case.tag, "namespace": "pods"}}));
    let (holder, netns) = if case.proc_netns {
        // A tap's netns is the host's (a VMM on the node); a veth's is the pod's.
        let ns = if case.master == "galactic-tap-cni" {
            host.netns.name().to_owned()
        } else {
            pod.ns.name().to_owned()
        };
        let child = holder_in(&ns);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let path = format!("/proc/{}/ns/net", child.id());
        (Some(child), path)
    } else {
        (None, pod.netns_path())
    };
    let att = Attachment::new(&pod.id, &netns, &pod.ifname)
        .arg("IgnoreUnknown", "1")
        .arg("K8S_POD_NAMESPACE", "pods")
        .arg("K8S_POD_NAME", case.tag);
    let list = Conflist::from_value(&nad).unwrap();
    runtime(host)
        .add(&list, &att)
        .unwrap_or_else(|e| panic!("{}: chain ADD failed: {e}", case.tag));
    Live {
        pod,
        holder,
        list,
        att,
    }
}

/// Every object the chain wrote, through a fresh API server with the CRDs: it must store them.
fn assert_every_object_is_storable(fixture: &Fixture) {
    let fresh = Fixture::new();
    let mut checked = 0;
    for plural in ["bgpvrfinstances", "bgpadvertisements", "endpointslices"] {
        for object in fixture.list(plural, None) {
            if let Err(e) = fresh.try_insert(object.clone()) {
                panic!("{plural}: the API server would refuse {object}: {e}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 18, "{checked} objects");
}

#[test]
fn the_router_gc_reclaims_nothing_live_of_any_attachment_kind() {
    galactic_testkit::privileged!();
    // With the Kubernetes publisher `auto` refuses a kernel without VRF: the node names its
    // backend (the production-kernel tier's, else table on the development kernel).
    let routing_domain =
        std::env::var(galactic_testkit::ROUTING_DOMAIN_ENV).unwrap_or_else(|_| "table".into());
    let host = Host::new(
        "rgc",
        json!({"publisher": "kubernetes", "node_name": NODE, "namespace": NS,
               "routing_domain": routing_domain}),
        &["galactic-ipam", "galactic-route", "galactic-bgp"],
    );
    let server = host.start_apiserver();
    server.fixture().insert(
        json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "router-a", "namespace": NS},
        "spec": {"targetRef": {"kind": "Node", "name": NODE}, "localASN": 4_200_000_000i64,
                 "routerID": "10.0.2.1", "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}],
                 "srv6Locator": "2001:db8:ff03::/48", "nodeID": 1}}),
    );
    // Another node's router and advertisement: never this node's GC's business.
    server.fixture().insert(
        json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
        "metadata": {"name": "router-b", "namespace": NS},
        "spec": {"targetRef": {"kind": "Node", "name": "node-b"}, "localASN": 65000,
                 "routerID": "10.0.2.2", "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}]}}),
    );
    let cases = cases();
    let mut live: Vec<Live> = cases.iter().map(|c| attach(&server, &host, c)).collect();
    let fx = server.fixture();
    assert_every_object_is_storable(fx);
    let gc = RouterGc { fixture: fx };
    let devices: Vec<String> = cases
        .iter()
        .map(|c| vrf_name(&VpcId::parse(c.vpc).unwrap()))
        .collect();
    assert_eq!(
        gc.orphaned_objects(),
        BTreeSet::new(),
        "nothing live is reclaimed"
    );
    assert_eq!(gc.orphaned_devices(&devices), Vec::<String>::new());
    for (case, l) in cases.iter().zip(&live) {
        runtime(&host)
            .check(&l.list, &l.att)
            .unwrap_or_else(|e| panic!("{}: CHECK: {e}", case.tag));
    }

    // A pod killed without DEL (its /run/netns entry gone): the GC reclaims its attachment's
    // advertisement, the VPC's VRF instance and its VRF device, and nothing else.
    let v6 = cases.iter().position(|c| c.tag == "v6").unwrap();
    let killed = live.remove(v6);
    drop(killed.pod);
    let vpc = name_segment("a2");
    assert_eq!(
        gc.orphaned_objects(),
        BTreeSet::from([
            format!("BGPAdvertisement/{vpc}-1-{NODE}"),
            format!("BGPVRFInstance/{vpc}-{NODE}")
        ])
    );
    assert_eq!(
        gc.orphaned_devices(&devices),
        [vrf_name(&VpcId::parse("a2").unwrap())]
    );

    // A /proc netns the GC cannot judge: kept, even once its process is gone (decision 0016).
    let proc = live.iter_mut().find(|l| l.holder.is_some()).unwrap();
    let mut holder = proc.holder.take().unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(
        gc.orphaned_objects().len(),
        2,
        "only the killed pod's objects"
    );

    for l in &mut live {
        runtime(&host).del(&l.list, &l.att).unwrap();
        if let Some(mut h) = l.holder.take() {
            let _ = h.kill();
            let _ = h.wait();
        }
    }
}
