//! galactic-bgp's publisher `kubernetes` as a pod start pays it: the release binary, a fresh
//! process per call with the kubeconfig of the node config, against the test kit's API server
//! over HTTPS (its own cluster CA, bearer token) with a latency added to every request (the
//! round trip to an API server a network away). Per row (latency): the requests per operation by
//! verb and resource (the fixture counts them), the wall time medians of each operation, and the
//! client's start-up (kubeconfig read, TLS configuration, runtime: the `setupMs` the client logs).
//!
//! Operations, each on the same node and VPC: the VPC's first ADD on the node (the VRF instance
//! is created) and its last DEL (the instance retired); an ADD and a DEL while another attachment
//! of the VPC keeps the instance. Every ADD has an IPv6 address and a pod, so it publishes an
//! EndpointSlice too. Last, the first ADDs of [`TOGETHER`] other VPCs started at once: a VPC's
//! first ADD holds the node's VRF-id lock until its instance's create is answered (decision
//! 0077), so first ADDs of different VPCs queue for that span; each call's wall time shows it.

use crate::stats::Summary;
use galactic_testkit::apiserver::{count_requests, ApiServer, RequestCounts};
use galactic_testkit::harness::{io, Error, Result};
use galactic_testkit::host::use_apiserver;
use galactic_testkit::runtime::{Attachment, Conflist, Runtime};
use galactic_testkit::TestNode;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The BGP namespace of the bench node.
const NS: &str = "galactic-system";
/// The bench node's name (its BGPRouter's target).
const NODE: &str = "node-a";
/// The VPC, the measured attachment and the attachment that keeps the VPC.
const VPC: &str = "0000000001";
const ATT: &str = "001";
const KEEPER_ATT: &str = "002";
/// First ADDs of different VPCs started together, per round.
pub const TOGETHER: usize = 8;

/// What one row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    /// The VPC's first ADD on the node.
    FirstAdd,
    /// The VPC's last DEL on the node.
    LastDel,
    /// An ADD while another attachment of the VPC is published.
    Add,
    /// A DEL that leaves another attachment of the VPC.
    Del,
    /// One of [`TOGETHER`] first ADDs of as many VPCs, started at once.
    FirstAddTogether,
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 5] = [
        Op::FirstAdd,
        Op::LastDel,
        Op::Add,
        Op::Del,
        Op::FirstAddTogether,
    ];

    fn label(self) -> &'static str {
        match self {
            Op::FirstAdd => "ADD (VPC's first)",
            Op::LastDel => "DEL (VPC's last)",
            Op::Add => "ADD (VPC present)",
            Op::Del => "DEL (VPC stays)",
            Op::FirstAddTogether => "ADD (8 VPCs' first)",
        }
    }
}

/// One operation's figures at one latency.
pub struct Figures {
    /// Wall time of each call (spawn to exit).
    pub wall: Summary,
    /// Requests of the first measured call, by verb and resource (every call makes the same).
    pub requests: RequestCounts,
    /// The client's start-up of each call.
    pub setup: Summary,
}

impl Figures {
    /// Requests of one call.
    pub fn total(&self) -> usize {
        self.requests.values().sum()
    }
}

/// One latency's rows.
pub struct Row {
    /// The latency added to every request.
    pub latency: Duration,
    /// Per operation.
    pub ops: BTreeMap<Op, Figures>,
    /// The HTTP versions the requests came over.
    pub versions: Vec<String>,
}

/// Upstream's requests per operation, counted from its code (docs/performance.md says which
/// files of which versions): datum-cloud/galactic's `internal/cnibgp` (`publishBGPState` in
/// `bgp.go`, `publishEndpointSlice` and `deleteEndpointSlice` in `endpointslice.go`, `cmdDel`
/// in `ops_del.go`), controller-runtime's discovery requests not counted.
pub fn upstream(op: Op) -> usize {
    match op {
        // List routers, list instances, CreateOrUpdate of the instance (get, create), the
        // collision list, CreateOrUpdate of the advertisement (get, create), get the Pod, get
        // the slice, CreateOrUpdate of the slice (get, create).
        Op::FirstAdd | Op::FirstAddTogether => 11,
        // The same with the instance unchanged (CreateOrUpdate: a get, no update) and the
        // advertisement updated (get, update).
        Op::Add => 10,
        // The EndpointSlice's delete; the BGP objects are left to galactic-router's GC.
        Op::LastDel | Op::Del => 1,
    }
}

/// The attachment a call is for.
struct Probe<'a> {
    node: &'a TestNode,
    binary: &'a Path,
    list: Conflist,
    prev: Value,
}

fn prev(host_ifname: &str, v6: &str, v4: &str, netns: &str) -> Value {
    json!({
        "cniVersion": "1.1.0",
        "interfaces": [
            {"name": host_ifname, "mac": "02:00:00:00:00:01", "mtu": 1500},
            {"name": "eth0", "mac": "02:00:00:00:00:02", "sandbox": netns, "socketPath": "/x"}
        ],
        "ips": [
            {"address": v6, "gateway": "fd20:10:ff01::1", "interface": 1},
            {"address": v4, "gateway": "172.21.1.1", "interface": 1}
        ],
    })
}

impl<'a> Probe<'a> {
    fn new(
        node: &'a TestNode,
        binary: &'a Path,
        (vpc, att): (&str, &str),
        v6: &str,
    ) -> Result<Self> {
        let ids = galactic_core::ident::ChainIds::of(&json!({"vpc": vpc, "vpcattachment": att}))
            .map_err(|e| Error::Precondition(format!("bench ids: {e}")))?;
        let netns = format!("/proc/{}/ns/net", std::process::id());
        let conf = json!({"type": "galactic-bgp", "vpc": vpc, "vpcattachment": att});
        Ok(Self {
            node,
            binary,
            list: Conflist::new("1.1.0", &format!("net-{att}"), vec![conf]),
            prev: prev(&ids.host_ifname(), v6, "172.21.1.10/24", &netns),
        })
    }

    /// Runs `command` for container `cid` of pod `pod` (`uid`); its wall time.
    fn call(&self, command: &str, cid: &str, (pod, uid): (&str, &str)) -> Result<Duration> {
        let netns = format!("/proc/{}/ns/net", std::process::id());
        // The runtime's arguments as containerd and CRI-O pass them.
        let att = Attachment::new(cid, &netns, "eth0")
            .arg("IgnoreUnknown", "1")
            .arg("K8S_POD_NAMESPACE", "pods")
            .arg("K8S_POD_NAME", pod)
            .arg("K8S_POD_UID", uid);
        if command == "ADD" {
            let entry = &self.list.plugins[0];
            let ids = (
                entry["vpc"].as_str().unwrap_or_default(),
                entry["vpcattachment"].as_str().unwrap_or_default(),
            );
            self.node
                .record_master(&self.list.name, cid, "eth0", &netns, ids);
        }
        let runtime = Runtime::new(self.node, self.node.dir.path(), None)
            .binary("galactic-bgp", self.binary)
            .env(galactic_core::bpf::maps::DATAPATH_ENV, "off");
        let started = Instant::now();
        let out = runtime.plugin(&self.list, 0, command, &att, Some(&self.prev));
        let elapsed = started.elapsed();
        if !out.success {
            return Err(Error::Plugin {
                plugin: "galactic-bgp".into(),
                command: format!("{command} {cid}"),
                reply: out.stdout,
            });
        }
        Ok(elapsed)
    }
}

/// The `setupMs` of every "kube: client ready" line logged since line `from`.
fn setups(node: &TestNode, from: usize) -> (Vec<Duration>, usize) {
    let lines = node.log_lines();
    let setups = lines
        .iter()
        .skip(from)
        .filter(|l| l["msg"] == "kube: client ready")
        .filter_map(|l| l["setupMs"].as_f64())
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .collect();
    (setups, lines.len())
}

/// Samples of one operation.
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    setup: Vec<Duration>,
    requests: Option<RequestCounts>,
}

/// Measures `binary` (a release galactic-bgp) at every latency of `latencies`, `runs` calls of
/// each operation per latency.
pub fn run(binary: &Path, latencies: &[Duration], runs: usize) -> Result<Vec<Row>> {
    latencies
        .iter()
        .map(|latency| row(binary, *latency, runs))
        .collect()
}

fn row(binary: &Path, latency: Duration, runs: usize) -> Result<Row> {
    let server = ApiServer::start().map_err(io("start the API server"))?;
    let fixture = server.fixture();
    fixture.insert(router());
    // Debug: the client logs its start-up at debug level (one line per call, written at exit).
    let node = TestNode::new(json!({"publisher": "kubernetes", "node_name": NODE,
                                    "namespace": NS, "log_level": "debug"}));
    use_apiserver(&node, &server);
    fixture.set_latency(latency);
    let probe = Probe::new(&node, binary, (VPC, ATT), "fd20:10:ff01::10/64")?;
    let keeper = Probe::new(&node, binary, (VPC, KEEPER_ATT), "fd20:10:ff02::10/64")?;
    let mut samples: BTreeMap<Op, Samples> = BTreeMap::new();
    let mut log_at = 0;
    let mut measure = |op: Op, probe: &Probe<'_>, command: &str, cid: &str, pod: (&str, &str)| {
        let before = fixture.request_count();
        let wall = probe.call(command, cid, pod)?;
        let sample = samples.entry(op).or_default();
        sample.wall.push(wall);
        if sample.requests.is_none() {
            sample.requests = Some(count_requests(&fixture.requests()[before..]));
        }
        let (setup, next) = setups(probe.node, log_at);
        sample.setup.extend(setup);
        log_at = next;
        Ok::<(), Error>(())
    };
    for i in 0..runs {
        let (cid, pod) = (format!("probe{i:04}"), format!("probe-{i}"));
        let uid = insert_pod(&server, &pod);
        measure(Op::FirstAdd, &probe, "ADD", &cid, (&pod, &uid))?;
        measure(Op::LastDel, &probe, "DEL", &cid, (&pod, &uid))?;
    }
    let uid = insert_pod(&server, "keeper");
    keeper.call("ADD", "keeper", ("keeper", &uid))?;
    for i in 0..runs {
        let (cid, pod) = (format!("probe{i:04}"), format!("probe-{i}"));
        let uid = insert_pod(&server, &pod);
        measure(Op::Add, &probe, "ADD", &cid, (&pod, &uid))?;
        measure(Op::Del, &probe, "DEL", &cid, (&pod, &uid))?;
    }
    let together = firsts_together(&server, &node, binary, runs)?;
    samples.insert(Op::FirstAddTogether, together);
    let mut versions: Vec<String> = fixture.requests().into_iter().map(|s| s.version).collect();
    versions.sort();
    versions.dedup();
    Ok(Row {
        latency,
        ops: samples
            .into_iter()
            .map(|(op, s)| (op, s.figures()))
            .collect(),
        versions,
    })
}

impl Samples {
    /// The summaries of these samples.
    fn figures(mut self) -> Figures {
        Figures {
            wall: Summary::of(&mut self.wall),
            requests: self.requests.unwrap_or_default(),
            setup: Summary::of(&mut self.setup),
        }
    }
}

/// [`Op::FirstAddTogether`]'s samples: `runs` rounds of [`together`], each followed by the
/// rounds' DELs (unmeasured); the requests are the first round's, a call's mean share.
fn firsts_together(
    server: &ApiServer,
    node: &TestNode,
    binary: &Path,
    runs: usize,
) -> Result<Samples> {
    let fixture = server.fixture();
    let probes = (0..TOGETHER)
        .map(|k| {
            let vpc = format!("{:010x}", 0x100 + k);
            let v6 = format!("fd20:11:{:x}::10/64", 0x100 + k);
            Probe::new(node, binary, (&vpc, ATT), &v6)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut sample = Samples::default();
    for i in 0..runs {
        let before = fixture.request_count();
        let (walls, calls) = together(server, &probes, i)?;
        if sample.requests.is_none() {
            let mut counts = count_requests(&fixture.requests()[before..]);
            counts.values_mut().for_each(|n| *n /= TOGETHER);
            sample.requests = Some(counts);
        }
        sample.wall.extend(walls);
        for (probe, (cid, pod, uid)) in probes.iter().zip(&calls) {
            probe.call("DEL", cid, (pod, uid))?;
        }
    }
    Ok(sample)
}

/// A call's container id, pod name and pod uid.
type Call = (String, String, String);

/// Round `i` of [`Op::FirstAddTogether`]: the first ADD of every probe's VPC, all started at
/// once; each ADD's wall time, and the calls (for their DELs).
fn together(
    server: &ApiServer,
    probes: &[Probe<'_>],
    i: usize,
) -> Result<(Vec<Duration>, Vec<Call>)> {
    let calls: Vec<Call> = (0..probes.len())
        .map(|k| {
            let (cid, pod) = (format!("together{i:04}x{k}"), format!("together-{i}-{k}"));
            let uid = insert_pod(server, &pod);
            (cid, pod, uid)
        })
        .collect();
    let walls = std::thread::scope(|scope| {
        let running: Vec<_> = probes
            .iter()
            .zip(&calls)
            .map(|(probe, (cid, pod, uid))| scope.spawn(move || probe.call("ADD", cid, (pod, uid))))
            .collect();
        running
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| {
                    Err(Error::Precondition(
                        "a concurrent ADD's thread panicked".into(),
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok((walls, calls))
}

fn router() -> Value {
    json!({"apiVersion": "network.datumapis.com/v1alpha1", "kind": "BGPRouter",
           "metadata": {"name": "router-a", "namespace": NS},
           "spec": {"targetRef": {"kind": "Node", "name": NODE},
                    "localASN": 65000, "routerID": "10.0.2.1",
                    "addressFamilies": [{"afi": "l2vpn", "safi": "evpn"}],
                    "srv6Locator": "2001:db8:ff03::/48", "nodeID": 1}})
}

/// The pod `name` (kubelet created it before the runtime's ADD), kept if it exists; its uid.
fn insert_pod(server: &ApiServer, name: &str) -> String {
    let fixture = server.fixture();
    let pod = fixture.get("pods", Some("pods"), name).unwrap_or_else(|| {
        fixture.insert(json!({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": name, "namespace": "pods"}}))
    });
    pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn counts(requests: &RequestCounts) -> String {
    requests
        .iter()
        .map(|((verb, resource), n)| format!("{n}×{verb} {resource}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table.
pub fn table(rows: &[Row], runs: usize) -> String {
    let ms = |d: Duration| format!("{:.2}ms", d.as_secs_f64() * 1000.0);
    let mut out = format!(
        "galactic-bgp (release, a process per call) against the fixture API server over HTTPS; \
         {runs} calls per operation and latency; upstream's requests counted from its code\n"
    );
    out.push_str(&format!(
        "{:>8} {:<18} {:>5} {:>9} {:>10} {:>10} {:>9}  requests\n",
        "latency", "operation", "reqs", "upstream", "wall med", "wall p95", "setup med"
    ));
    for row in rows {
        for (op, f) in &row.ops {
            let upstream = upstream(*op);
            out.push_str(&format!(
                "{:>8} {:<18} {:>5} {:>9} {:>10} {:>10} {:>9}  {}\n",
                ms(row.latency),
                op.label(),
                f.total(),
                upstream,
                ms(f.wall.median),
                ms(f.wall.p95),
                // The calls started together are not matched to their start-up lines.
                match f.setup.n {
                    0 => "–".to_owned(),
                    _ => ms(f.setup.median),
                },
                counts(&f.requests)
            ));
        }
        out.push_str(&format!(
            "{:>8} HTTP versions seen: {}\n",
            "",
            row.versions.join(", ")
        ));
    }
    out
}

/// `ours` next to `baseline` (another build, measured in the same run, rows taking turns by
/// latency): requests and wall time medians of each, and the ratio of the medians.
pub fn compared(ours: &[Row], baseline: &[Row]) -> String {
    let ms = |d: Duration| format!("{:.2}ms", d.as_secs_f64() * 1000.0);
    let mut out = format!(
        "{:>8} {:<18} {:>9} {:>9} {:>11} {:>11} {:>7}\n",
        "latency", "operation", "reqs base", "reqs ours", "wall base", "wall ours", "ratio"
    );
    for (row, base) in ours.iter().zip(baseline) {
        for (op, f) in &row.ops {
            let Some(b) = base.ops.get(op) else { continue };
            out.push_str(&format!(
                "{:>8} {:<18} {:>9} {:>9} {:>11} {:>11} {:>7.2}\n",
                ms(row.latency),
                op.label(),
                b.total(),
                f.total(),
                ms(b.wall.median),
                ms(f.wall.median),
                f.wall.median.as_secs_f64() / b.wall.median.as_secs_f64()
            ));
        }
    }
    out
}
