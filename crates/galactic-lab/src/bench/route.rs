//! galactic-route's cost per call as its VPC and its node grow: ADD, CHECK and DEL of one
//! attachment's terminations on a fresh VPC, after 10 000 attachments of the VPC came and went,
//! with 10 000 other attachments' termination routes in the VPC's table, and with 10 000
//! unrelated routes in the node's other tables.
//!
//! Each row is its own throwaway host: the real master (`galactic-cni` with `galactic-ipam`)
//! attaches the *probe* pod, whose galactic-route ADD, CHECK and DEL are timed, each a fresh
//! process. After each DEL the bench removes the probe's termination routes, as the master's DEL
//! does by deleting the host interface, so every ADD installs them again. All rows' hosts are
//! built first, then the rows take turns round by round, each round with a spawn of `/bin/true`
//! (the floor), so load from elsewhere on the machine falls on every row alike. The other
//! attachments of a row are made the way the route plugin sees them: an attachment record (as
//! the master writes it), a host interface of the attachment's name (a veth whose peer lives in
//! a throwaway namespace) and a `prevResult` naming it; their ADD and DEL are real plugin calls
//! too ([`RouteNode::history`], [`RouteNode::live`]). [`RouteNode`] is also the fixture of
//! galactic-route's cost guard, which runs the same calls in-process and counts netlink messages.

pub use galactic_testkit::route_node::{Call, RouteNode, Runner};

use crate::stats::median_p95;
use galactic_core::net::netlink::Netlink;
use galactic_testkit::harness::{Entered, Error, Result};
use galactic_testkit::host::Host;
use galactic_testkit::privileged::TestNetns;
use galactic_testkit::process;
use galactic_testkit::route_node::net;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Rounds run before a row's measured ones.
const WARM_UP: usize = 3;

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
    /// `/bin/true` spawned once per round, between the row's calls: the row's spawn floor
    /// (it shows how loaded the machine was while the row ran).
    pub floor: Vec<Duration>,
    /// How long producing the row's node took.
    pub setup: Duration,
}

/// Spawns the plugin at `binary` for `call`; returns its wall time with its outcome.
fn spawn(binary: &Path, call: &Call) -> Result<(bool, Vec<u8>, Duration)> {
    let done = process::start(process::command(binary, &call.env), &call.stdin)?.wait()?;
    Ok((done.status.success(), done.stdout, done.elapsed))
}

/// A row's node while the bench runs.
struct Measured {
    node: RouteNode,
    /// The peers of its other attachments' host interfaces (they live as long as the node).
    _peers: TestNetns,
    row: Row,
}

/// Builds a node of `shape`, its other attachments' calls run as processes of `binary`.
fn build(paths: &Paths<'_>, binary: &Path, shape: Shape) -> Result<Measured> {
    let started = std::time::Instant::now();
    let host = Host::with_plugins_from(
        "grb-host",
        json!({"log_level": "info", "routing_domain": "auto"}),
        paths.plugins,
        &["galactic-cni", "galactic-ipam", "galactic-route"],
    )?;
    let node = RouteNode::new(host)?;
    let _entered = Entered::new(&node.host.netns)?;
    let peers = TestNetns::new("grb-peers");
    let mut by_process = |call: &Call| spawn(binary, call).map(|(ok, out, _)| (ok, out));
    match shape {
        Shape::Fresh => {}
        Shape::History(n) => node.history(n, &mut by_process)?,
        Shape::LiveRoutes(n) => node.live(n, &peers, &mut by_process)?,
        Shape::Unrelated(n) => node.unrelated(n, &peers)?,
    }
    let setup = started.elapsed();
    let nl = Netlink::current().map_err(net("open netlink"))?;
    let row = Row {
        shape,
        table_routes: node.table_size(&nl)?,
        add: Vec::new(),
        check: Vec::new(),
        del: Vec::new(),
        floor: Vec::new(),
        setup,
    };
    Ok(Measured {
        node,
        _peers: peers,
        row,
    })
}

/// One round on `m`'s node: ADD, CHECK and DEL of the probe, then its routes removed and the
/// spawn floor taken; samples are kept when `keep`.
fn round(binary: &Path, m: &mut Measured, keep: bool) -> Result<()> {
    let _entered = Entered::new(&m.node.host.netns)?;
    for command in ["ADD", "CHECK", "DEL"] {
        let (ok, stdout, elapsed) = spawn(binary, &m.node.probe(command))?;
        if !ok {
            return Err(Error::Plugin {
                plugin: "galactic-route".into(),
                command: command.into(),
                reply: String::from_utf8_lossy(&stdout).into_owned(),
            });
        }
        let samples = match command {
            "ADD" => &mut m.row.add,
            "CHECK" => &mut m.row.check,
            _ => &mut m.row.del,
        };
        if keep {
            samples.push(elapsed);
        }
    }
    let nl = Netlink::current().map_err(net("open netlink"))?;
    m.node.drop_probe_routes(&nl)?;
    if m.node.table_size(&nl)? != m.row.table_routes {
        return Err(Error::Precondition(
            "the probe's termination routes were not removed after its DEL".into(),
        ));
    }
    let floor = spawn(Path::new("/bin/true"), &m.node.probe("ADD"))?.2;
    if keep {
        m.row.floor.push(floor);
    }
    Ok(())
}

/// Builds a node of each of `shapes`, then measures `iterations` probe ADD/CHECK/DEL rounds on
/// each, with the spawn floor (`/bin/true`, same environment and stdin) once per round. The
/// rows take turns round by round, so a machine busy with other work slows them alike.
pub fn run(paths: &Paths<'_>, shapes: &[Shape], iterations: usize) -> Result<Vec<Row>> {
    let binary = paths.plugins.join("galactic-route");
    let mut nodes = Vec::new();
    for shape in shapes {
        nodes.push(build(paths, &binary, *shape)?);
    }
    // The first rounds warm the page cache and the kernel's tables; they are not counted.
    for n in 0..WARM_UP + iterations {
        for m in nodes.iter_mut() {
            round(&binary, m, n >= WARM_UP)?;
        }
    }
    Ok(nodes.into_iter().map(|m| m.row).collect())
}

/// The table of `rows`: medians and p95 per verb, and each median's ratio to the first row's.
pub fn table(rows: &[Row], iterations: usize) -> String {
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    let mut out = format!(
        "{iterations} ADD/CHECK/DEL rounds per row (one attachment, 3 terminations), release \
         build, galactic-route run as a process in a throwaway host netns; times in ms\n"
    );
    out.push_str(&format!(
        "{:<44} {:>7} {:>7} {:>7} {:>7} {:>9} {:>7} {:>7} {:>7} {:>9} {:>8}\n",
        "node",
        "ADD med",
        "ADD p95",
        "DEL med",
        "DEL p95",
        "CHECK med",
        "ADD ×",
        "DEL ×",
        "CHECK ×",
        "floor med",
        "setup s"
    ));
    let mut fresh: Option<(f64, f64, f64)> = None;
    for row in rows {
        let (am, ap) = median_p95(&mut row.add.clone());
        let (dm, dp) = median_p95(&mut row.del.clone());
        let (cm, _) = median_p95(&mut row.check.clone());
        let (floor, _) = median_p95(&mut row.floor.clone());
        let secs = (am.as_secs_f64(), dm.as_secs_f64(), cm.as_secs_f64());
        let base = *fresh.get_or_insert(secs);
        out.push_str(&format!(
            "{:<44} {:>7} {:>7} {:>7} {:>7} {:>9} {:>7.2} {:>7.2} {:>7.2} {:>9} {:>8.1}\n",
            row.shape.label(),
            ms(am),
            ms(ap),
            ms(dm),
            ms(dp),
            ms(cm),
            secs.0 / base.0,
            secs.1 / base.1,
            secs.2 / base.2,
            ms(floor),
            row.setup.as_secs_f64()
        ));
    }
    out.push_str(
        "ratios (×) are to the first row; floor: /bin/true spawned with the same environment once \
         per round of the row; setup: the time to produce the row's node\n",
    );
    for row in rows {
        out.push_str(&format!(
            "  {}: {} routes in the VPC table before each probe ADD\n",
            row.shape.label(),
            row.table_routes
        ));
    }
    out
}
