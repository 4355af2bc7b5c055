//! galactic-route's cost per call as its VPC and its node grow: ADD, CHECK and DEL of one
//! attachment's terminations on a fresh VPC, after 10 000 attachments of the VPC came and went,
//! with 10 000 other attachments' termination routes in the VPC's table, and with 10 000
//! unrelated routes in the node's other tables.
//!
//! Each row is its own throwaway host: the real master (`galactic-cni` with `galactic-ipam`)
//! attaches the *probe* pod, whose galactic-route ADD, CHECK and DEL are timed, each a fresh
//! process. After each DEL the bench removes the probe's termination routes, as the master's DEL
//! does by deleting the host interface, so every ADD installs them again. The other
//! attachments of a row are made the way the route plugin sees them: an attachment record (as
//! the master writes it), a host interface of the attachment's name (a veth whose peer lives in
//! a throwaway namespace) and a `prevResult` naming it; their ADD and DEL are real plugin calls
//! too ([`RouteNode::history`], [`RouteNode::live`]). [`RouteNode`] is also the fixture of
//! galactic-route's cost guard, which runs the same calls in-process and counts netlink messages.

use crate::harness::{json, Entered, Error, Result};
use crate::host::{Host, Pod};
use crate::privileged::TestNetns;
use crate::process;
use crate::runtime::Conflist;
use crate::stats::median_p95;
use galactic_core::ident::ChainIds;
use galactic_core::ip::Family;
use galactic_core::net::netlink::{Netlink, RouteKind, RouteSpec};
use galactic_core::net::netns::Netns;
use galactic_core::net::NetError;
use ipnetwork::IpNetwork;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// The network name of every attachment of the bench.
const NETWORK: &str = "bench-route";
/// The VPC.
const VPC: &str = "1";
/// Another table of the node (another VPC's, a BGP daemon's): unrelated routes go there.
const OTHER_TABLE: u32 = 4242;
/// The main table.
const MAIN_TABLE: u32 = 254;
/// Rounds run before a row's measured ones.
const WARM_UP: usize = 3;

/// One galactic-route call as a runtime makes it: environment and stdin.
pub struct Call {
    /// `CNI_*` and the node config.
    pub env: Vec<(&'static str, String)>,
    /// The stanza with `prevResult`.
    pub stdin: Vec<u8>,
}

impl Call {
    /// The value of `name` in the environment.
    pub fn var(&self, name: &str) -> Option<String> {
        self.env
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    }
}

/// Runs one call, returning whether it succeeded and its stdout (a process, or in-process).
pub type Runner<'a> = dyn FnMut(&Call) -> Result<(bool, Vec<u8>)> + 'a;

/// VPC 1 on a throwaway host, with its probe attachment.
pub struct RouteNode {
    /// The host (the calling thread must have entered its namespace for [`RouteNode`]'s
    /// netlink work; `Host::runtime` runs the master there by itself).
    pub host: Host,
    /// The probe pod.
    pub pod: Pod,
    /// The master's ADD result for the probe (the route plugin's `prevResult`).
    prev: Value,
    /// The VPC's table.
    pub table: u32,
    /// The probe's terminations.
    terminations: Value,
}

fn net(what: &str) -> impl FnOnce(NetError) -> Error + '_ {
    move |e| Error::Precondition(format!("{what}: {e}"))
}

/// A 1–3 character base62 attachment id for `n` (1 ≤ n < 62³).
fn att_id(n: usize) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    let mut rest = n;
    while rest > 0 || out.is_empty() {
        out.push(DIGITS[rest % 62]);
        rest /= 62;
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// The `n`-th network of a block of distinct terminations: IPv4 /24s for even `n`, IPv6 /64s
/// for odd ones.
fn network(n: usize) -> String {
    let i = n / 2;
    match n % 2 {
        0 => format!("10.{}.{}.0/24", 128 + i / 256, i % 256),
        _ => format!("fd77:{i:x}::/64"),
    }
}

impl RouteNode {
    /// Attaches the probe pod through the real master on `host`.
    pub fn new(host: Host) -> Result<Self> {
        let pod = Pod::new("grb-pod");
        let master = Conflist::new(
            "1.1.0",
            NETWORK,
            vec![
                json!({"type": "galactic-cni", "vpc": VPC, "vpcattachment": "1", "ipam": {
                "type": "galactic-ipam", "ipv6_subnet": "fd90::/64", "ipv4_subnet": "10.90.0.0/16"}}),
            ],
        );
        let prev = host.runtime().add(&master, &pod.attachment())?;
        let pod4 = prev["ips"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|ip| ip["address"].as_str())
            .find(|a| !a.contains(':'))
            .and_then(|a| a.split('/').next())
            .ok_or_else(|| Error::Precondition(format!("no IPv4 address in {prev}")))?
            .to_owned();
        let domain = host
            .node
            .dir
            .path()
            .join("state/routing")
            .join(format!("vpc-{VPC}.json"));
        let record: Value = serde_json::from_slice(
            &std::fs::read(&domain).map_err(crate::harness::io("read the domain record"))?,
        )
        .map_err(json("the domain record"))?;
        let table = record["table"]
            .as_u64()
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| Error::Precondition(format!("no table in {record}")))?;
        Ok(Self {
            host,
            pod,
            prev,
            table,
            terminations: json!([{"network": "10.91.0.0/24"}, {"network": "fd91::/64"},
                {"network": "10.92.0.0/24", "via": pod4}]),
        })
    }

    /// The probe's galactic-route call for `command`.
    pub fn probe(&self, command: &str) -> Call {
        self.call(
            command,
            (&self.pod.id, &self.pod.netns_path()),
            "1",
            &self.terminations,
            &self.prev,
        )
    }

    fn call(
        &self,
        command: &str,
        (cid, netns): (&str, &str),
        att: &str,
        terminations: &Value,
        prev: &Value,
    ) -> Call {
        let stdin = json!({"cniVersion": "1.1.0", "name": NETWORK, "type": "galactic-route",
            "vpc": VPC, "vpcattachment": att, "terminations": terminations, "prevResult": prev});
        Call {
            env: vec![
                ("CNI_COMMAND", command.to_owned()),
                ("CNI_CONTAINERID", cid.to_owned()),
                ("CNI_NETNS", netns.to_owned()),
                ("CNI_IFNAME", "eth0".into()),
                ("CNI_PATH", self.host.bin_dir.display().to_string()),
                (
                    "GALACTIC_CNI_NODE_CONFIG",
                    self.host.node.node_config.display().to_string(),
                ),
            ],
            stdin: stdin.to_string().into_bytes(),
        }
    }

    /// Removes the probe's termination routes, as deleting its host interface does (the
    /// master's DEL, next in a real chain's teardown), so the next ADD installs them again.
    pub fn drop_probe_routes(&self, nl: &Netlink) -> Result<()> {
        for t in self.terminations.as_array().into_iter().flatten() {
            let Some(dst) = t["network"].as_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            // IPv4 deletes match the scope: link for a device route, universe through a gateway.
            let spec = RouteSpec {
                dst,
                table: self.table,
                kind: RouteKind::Unicast,
                dev: None,
                gateway: None,
                onlink: false,
                scope_link: t["via"].is_null(),
            };
            nl.delete_route(&spec)
                .map_err(net("remove a probe termination"))?;
        }
        Ok(())
    }

    /// Another attachment `n` of the VPC as the route plugin sees it: its record, its host
    /// interface (up, its peer in `peers`) and the `prevResult` naming it. Returns its ADD and
    /// DEL calls for `terminations`.
    fn other(
        &self,
        nl: &Netlink,
        peers: &Netns,
        n: usize,
        terminations: &Value,
    ) -> Result<(Call, Call)> {
        let att = att_id(n);
        let cid = format!("other-{n}");
        let ids = ChainIds::of(&json!({"vpc": VPC, "vpcattachment": att}))
            .map_err(|e| Error::Precondition(format!("attachment id {att}: {e}")))?;
        let host_ifname = ids.host_ifname();
        let netns = peers.path().display().to_string();
        self.host
            .node
            .record_master(NETWORK, &cid, "eth0", &netns, (VPC, &att));
        nl.create_veth(&host_ifname, &format!("p{n}"), peers, None)
            .map_err(net("create an attachment's host interface"))?;
        let link = nl
            .require_link(&host_ifname)
            .map_err(net("find the host interface"))?;
        nl.set_up(link.index)
            .map_err(net("set the host interface up"))?;
        let prev = json!({"cniVersion": "1.1.0", "interfaces": [{"name": host_ifname}], "ips": []});
        let add = self.call("ADD", (&cid, &netns), &att, terminations, &prev);
        let del = self.call("DEL", (&cid, &netns), &att, terminations, &prev);
        Ok((add, del))
    }

    /// `count` attachments of the VPC come and go: each is recorded, gets its host interface,
    /// runs galactic-route ADD and DEL through `run`, and loses its record, as in the master's
    /// DEL. Their host interfaces (with the routes through them) go in batches, with the
    /// namespace of their peers: deleting one veth at a time waits for the kernel's grace
    /// periods, which would make the pre-fill take many minutes. So an attachment's routes stay
    /// until its batch goes, which the route plugin never looks at (its DEL leaves routes to the
    /// master); each attachment of a batch routes its own two networks, and the next batch starts
    /// once the table is back to what it held before.
    pub fn history(&self, count: usize, run: &mut Runner<'_>) -> Result<()> {
        const BATCH: usize = 500;
        let nl = Netlink::current().map_err(net("open netlink"))?;
        let before = self.table_size(&nl)?;
        let mut done = 0;
        while done < count {
            let peers = TestNetns::new("grb-peers");
            let peers_ns = Netns::open(&peers.path()).map_err(net("open the peers' namespace"))?;
            for n in done..count.min(done + BATCH) {
                let k = 2 * (n % BATCH);
                let terminations = json!([{"network": network(k)}, {"network": network(k + 1)}]);
                // Ids 2…: 1 is the probe.
                let (add, del) = self.other(&nl, &peers_ns, n + 2, &terminations)?;
                succeed(run, &add)?;
                succeed(run, &del)?;
                let cid = add.var("CNI_CONTAINERID").unwrap_or_default();
                self.host.node.forget_master(NETWORK, &cid, "eth0");
            }
            done = count.min(done + BATCH);
            // The open handle would keep the namespace, and the batch, alive.
            drop(peers_ns);
            drop(peers);
            self.settle(&nl, before)?;
        }
        Ok(())
    }

    /// Waits until the VPC table holds `size` routes again (the kernel deletes a dead
    /// namespace's veth pairs, and the routes through them, asynchronously).
    fn settle(&self, nl: &Netlink, size: usize) -> Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while self.table_size(nl)? != size {
            if std::time::Instant::now() > deadline {
                return Err(Error::Precondition(
                    "the historical attachments' host interfaces did not go".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Other attachments that stay, routing `routes` distinct networks through the VPC table
    /// between them (at most 64 per attachment, the plugin's limit), installed by their ADDs
    /// through `run`. Their host interfaces' peers live in `peers`, which must outlive the
    /// measurement.
    pub fn live(&self, routes: usize, peers: &TestNetns, run: &mut Runner<'_>) -> Result<()> {
        const PER_ATTACHMENT: usize = 64;
        let nl = Netlink::current().map_err(net("open netlink"))?;
        let peers_ns = Netns::open(&peers.path()).map_err(net("open the peers' namespace"))?;
        let attachments = routes.div_ceil(PER_ATTACHMENT);
        for a in 0..attachments {
            let first = a * PER_ATTACHMENT;
            let terminations: Vec<Value> = (first..routes.min(first + PER_ATTACHMENT))
                .map(|n| json!({"network": network(n)}))
                .collect();
            // Ids from 10 000 on, clear of the probe's.
            let (add, _) = self.other(&nl, &peers_ns, 10_000 + a, &Value::from(terminations))?;
            succeed(run, &add)?;
        }
        Ok(())
    }

    /// `count` routes in tables that are not the VPC's, half in `main` and half in another
    /// table, both families, out of an uplink whose peer lives in `peers`.
    pub fn unrelated(&self, count: usize, peers: &TestNetns) -> Result<()> {
        let nl = Netlink::current().map_err(net("open netlink"))?;
        let peers_ns = Netns::open(&peers.path()).map_err(net("open the peers' namespace"))?;
        nl.create_veth("uplink0", "uplink1", &peers_ns, None)
            .map_err(net("create the uplink"))?;
        let uplink = nl.require_link("uplink0").map_err(net("find the uplink"))?;
        nl.set_up(uplink.index).map_err(net("set the uplink up"))?;
        for n in 0..count {
            let dst: IpNetwork = network(n)
                .parse()
                .map_err(|e| Error::Precondition(format!("network {n}: {e}")))?;
            let table = if (n / 2) % 2 == 0 {
                MAIN_TABLE
            } else {
                OTHER_TABLE
            };
            nl.add_route(&RouteSpec::device(dst, table, uplink.index))
                .map_err(net("add an unrelated route"))?;
        }
        Ok(())
    }

    /// How many routes the VPC table holds (both families).
    pub fn table_size(&self, nl: &Netlink) -> Result<usize> {
        let mut size = 0;
        for family in Family::ALL {
            size += nl
                .routes(family, self.table)
                .map_err(net("list the VPC table"))?
                .len();
        }
        Ok(size)
    }
}

/// Runs `call`; a failure is an error naming the plugin's reply.
fn succeed(run: &mut Runner<'_>, call: &Call) -> Result<Vec<u8>> {
    let (ok, stdout) = run(call)?;
    if !ok {
        return Err(Error::Plugin {
            plugin: "galactic-route".into(),
            command: call.var("CNI_COMMAND").unwrap_or_default(),
            reply: String::from_utf8_lossy(&stdout).into_owned(),
        });
    }
    Ok(stdout)
}

/// What the bench measures, built by the caller.
pub struct Paths<'a> {
    /// The release plugins (galactic-cni, galactic-ipam, galactic-route).
    pub plugins: &'a Path,
}

/// The node a row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A VPC with only the probe.
    Fresh,
    /// This many attachments came and went before.
    History(usize),
    /// This many other attachments' termination routes in the VPC table.
    LiveRoutes(usize),
    /// This many routes in the node's other tables.
    Unrelated(usize),
}

impl Shape {
    fn label(self) -> String {
        match self {
            Shape::Fresh => "fresh VPC".into(),
            Shape::History(n) => format!("{n} historical attachments"),
            Shape::LiveRoutes(n) => {
                format!("{n} live routes in the VPC table ({} att.)", n.div_ceil(64))
            }
            Shape::Unrelated(n) => format!("{n} routes in other tables"),
        }
    }
}

/// One row's samples.
pub struct Row {
    /// What the node held.
    pub shape: Shape,
    /// Routes in the VPC table before each probe ADD.
    pub table_routes: usize,
    /// ADD wall times.
    pub add: Vec<Duration>,
    /// CHECK wall times.
    pub check: Vec<Duration>,
    /// DEL wall times.
    pub del: Vec<Duration>,
    /// How long producing the row's node took.
    pub setup: Duration,
}

/// Spawns the plugin at `binary` for `call`; returns its wall time with its outcome.
fn spawn(binary: &Path, call: &Call) -> Result<(bool, Vec<u8>, Duration)> {
    let done = process::start(process::command(binary, &call.env), &call.stdin)?.wait()?;
    Ok((done.status.success(), done.stdout, done.elapsed))
}

/// Measures `iterations` probe ADD/CHECK/DEL rounds on a node of each of `shapes`; also returns
/// the spawn floor (`/bin/true`, same environment and stdin) over as many runs.
pub fn run(paths: &Paths<'_>, shapes: &[Shape], iterations: usize) -> Result<(Vec<Row>, Duration)> {
    let binary = paths.plugins.join("galactic-route");
    let mut rows = Vec::new();
    let mut floor = Vec::new();
    for shape in shapes {
        let started = std::time::Instant::now();
        let host = Host::with_plugins_from(
            "grb-host",
            json!({"log_level": "info", "routing_domain": "auto"}),
            paths.plugins,
            &["galactic-cni", "galactic-ipam", "galactic-route"],
        )?;
        let node = RouteNode::new(host)?;
        let _entered = Entered::new(&node.host.netns)?;
        let nl = Netlink::current().map_err(net("open netlink"))?;
        let peers = TestNetns::new("grb-peers");
        let mut by_process = |call: &Call| spawn(&binary, call).map(|(ok, out, _)| (ok, out));
        match *shape {
            Shape::Fresh => {}
            Shape::History(n) => node.history(n, &mut by_process)?,
            Shape::LiveRoutes(n) => node.live(n, &peers, &mut by_process)?,
            Shape::Unrelated(n) => node.unrelated(n, &peers)?,
        }
        let setup = started.elapsed();
        let table_routes = node.table_size(&nl)?;
        let mut row = Row {
            shape: *shape,
            table_routes,
            add: Vec::new(),
            check: Vec::new(),
            del: Vec::new(),
            setup,
        };
        // The first rounds warm the page cache and the kernel's tables; they are not counted.
        for round in 0..WARM_UP + iterations {
            for (command, samples) in [
                ("ADD", &mut row.add),
                ("CHECK", &mut row.check),
                ("DEL", &mut row.del),
            ] {
                let call = node.probe(command);
                let (ok, stdout, elapsed) = spawn(&binary, &call)?;
                if !ok {
                    return Err(Error::Plugin {
                        plugin: "galactic-route".into(),
                        command: command.into(),
                        reply: String::from_utf8_lossy(&stdout).into_owned(),
                    });
                }
                if round >= WARM_UP {
                    samples.push(elapsed);
                }
            }
            node.drop_probe_routes(&nl)?;
            if node.table_size(&nl)? != table_routes {
                return Err(Error::Precondition(
                    "the probe's termination routes were not removed after its DEL".into(),
                ));
            }
            floor.push(spawn(Path::new("/bin/true"), &node.probe("ADD"))?.2);
        }
        rows.push(row);
    }
    let (floor, _) = median_p95(&mut floor);
    Ok((rows, floor))
}

/// The table of `rows`: medians and p95 per verb, and each median's ratio to the first row's.
pub fn table(rows: &[Row], floor: Duration, iterations: usize) -> String {
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    let mut out = format!(
        "{iterations} ADD/CHECK/DEL rounds per row (one attachment, 3 terminations), release \
         build, galactic-route run as a process in a throwaway host netns; times in ms\n"
    );
    out.push_str(&format!(
        "{:<44} {:>7} {:>7} {:>7} {:>7} {:>9} {:>7} {:>7} {:>7} {:>8}\n",
        "node",
        "ADD med",
        "ADD p95",
        "DEL med",
        "DEL p95",
        "CHECK med",
        "ADD ×",
        "DEL ×",
        "CHECK ×",
        "setup s"
    ));
    let mut fresh: Option<(f64, f64, f64)> = None;
    for row in rows {
        let (am, ap) = median_p95(&mut row.add.clone());
        let (dm, dp) = median_p95(&mut row.del.clone());
        let (cm, _) = median_p95(&mut row.check.clone());
        let secs = (am.as_secs_f64(), dm.as_secs_f64(), cm.as_secs_f64());
        let base = *fresh.get_or_insert(secs);
        out.push_str(&format!(
            "{:<44} {:>7} {:>7} {:>7} {:>7} {:>9} {:>7.2} {:>7.2} {:>7.2} {:>8.1}\n",
            row.shape.label(),
            ms(am),
            ms(ap),
            ms(dm),
            ms(dp),
            ms(cm),
            secs.0 / base.0,
            secs.1 / base.1,
            secs.2 / base.2,
            row.setup.as_secs_f64()
        ));
    }
    out.push_str(&format!(
        "spawn floor (/bin/true, same environment): {} ms median\n\
         ratios (×) are to the first row; setup is the time to produce the row's node\n",
        ms(floor)
    ));
    for row in rows {
        out.push_str(&format!(
            "  {}: {} routes in the VPC table before each probe ADD\n",
            row.shape.label(),
            row.table_routes
        ));
    }
    out
}
