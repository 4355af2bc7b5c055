//! A galactic-route node: VPC 1 on a throwaway host with the probe attachment the real master
//! made, and the VPC's other attachments as the route plugin sees them. galactic-route's cost
//! guard and `cargo xtask bench-route` (the lab's `bench::route`) run on it.

use crate::harness::{json, Error, Result};
use crate::host::{Host, Pod};
use crate::privileged::TestNetns;
use crate::runtime::Conflist;
use galactic_core::ident::ChainIds;
use galactic_core::ip::Family;
use galactic_core::net::netlink::{Netlink, RouteKind, RouteSpec};
use galactic_core::net::netns::Netns;
use galactic_core::net::NetError;
use ipnetwork::IpNetwork;
use serde_json::{json, Value};
use std::time::Duration;

/// The network name of every attachment of the bench.
const NETWORK: &str = "bench-route";
/// The VPC.
const VPC: &str = "1";
/// Another table of the node (another VPC's, a BGP daemon's): unrelated routes go there.
const OTHER_TABLE: u32 = 4242;
/// The main table.
const MAIN_TABLE: u32 = 254;

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

pub fn net(what: &str) -> impl FnOnce(NetError) -> Error + '_ {
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
