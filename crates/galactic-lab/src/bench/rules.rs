//! What table mode's VPC selection costs on the packet path: a ping round trip between two pods
//! of one VPC, both families, with the node's policy rules as the previous release wrote them (one
//! `iif <host end> lookup T` rule per attachment and family) and as this one does (one `fwmark`
//! rule per VPC and family, the mark set from the host interface by the node's nftables map).
//!
//! Each row is its own throwaway host namespace with two pod namespaces on veth pairs, their
//! addresses and routes in the VPC table only (as the master writes them), and filler
//! attachments: host ends of other VPCs (veth pairs within the host: this kernel may have no
//! `dummy`), six per VPC, each with its rules (previous
//! release) or its map element and its VPC's one rule (marks). The probe VPC's rules come last, so
//! its packets walk every filler rule before theirs, as a VPC added after the others does (and as
//! every packet that matches no VPC rule does). The map and chain are the ones
//! [`firewall::mark_vpc_traffic`] creates. All rows are built first; then round by round each row
//! pings, so load from elsewhere falls on every row alike. The figure is the median of the
//! per-packet round-trip times `ping` reports.

use crate::stats::Summary;
use galactic_core::net::firewall;
use galactic_core::net::netns::{self, Netns};
use galactic_testkit::harness::{Error, Result};
use galactic_testkit::privileged::TestNetns;
use std::time::Duration;

/// Attachments per filler VPC (the node of issue 27: 480 over 80 VPCs).
const PER_VPC: usize = 6;
/// The first filler VPC's table; the probe VPC's is [`PROBE_TABLE`].
const FIRST_FILLER_TABLE: usize = 2000;
const PROBE_TABLE: &str = "1000";
/// `table_mark_mask`'s default.
const MASK: u32 = 0xff00_0000;
/// Echo requests per row and round.
const PINGS: usize = 100;

/// How a row's node selects a VPC's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// One `iif` rule per host interface and family (the previous release).
    PerInterface,
    /// One `fwmark` rule per VPC and family, one map element per host interface.
    Mark,
}

impl Selection {
    fn label(self) -> &'static str {
        match self {
            Selection::PerInterface => "iif rule per attachment",
            Selection::Mark => "fwmark rule per VPC",
        }
    }
}

/// One row's node and samples.
pub struct Row {
    /// Attachments on the node (the two probe pods included).
    pub attachments: usize,
    /// How the node selects.
    pub selection: Selection,
    /// Policy rules per family at the VPC priority.
    pub rules: usize,
    /// Map elements.
    pub elements: usize,
    /// IPv4 round trips.
    pub v4: Vec<Duration>,
    /// IPv6 round trips.
    pub v6: Vec<Duration>,
    host: TestNetns,
    pods: [TestNetns; 2],
}

/// Builds one row per (size, selection) and runs `rounds` rounds of pings.
pub fn run(sizes: &[usize], rounds: usize) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        for (j, selection) in [Selection::PerInterface, Selection::Mark]
            .into_iter()
            .enumerate()
        {
            rows.push(build(&format!("br{i}{j}"), size.max(2), selection)?);
        }
    }
    for row in &mut rows {
        // Neighbours resolved, caches warm: the first round is not measured.
        ping_round(row)?;
        row.v4.clear();
        row.v6.clear();
    }
    for _ in 0..rounds {
        for row in &mut rows {
            ping_round(row)?;
        }
    }
    Ok(rows)
}

fn ping_round(row: &mut Row) -> Result<()> {
    row.v4.extend(ping(&row.pods[0], "10.200.2.2")?);
    row.v6.extend(ping(&row.pods[0], "fd00:200:2::2")?);
    Ok(())
}

/// The per-packet round trips of [`PINGS`] echo requests from `from` to `target`.
fn ping(from: &TestNetns, target: &str) -> Result<Vec<Duration>> {
    let count = PINGS.to_string();
    let out = from.exec(&["ping", "-n", "-c", &count, "-i", "0.002", "-W", "1", target]);
    let text = String::from_utf8_lossy(&out.stdout);
    let times: Vec<Duration> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ms| Duration::from_secs_f64(ms / 1e3))
        .collect();
    if times.len() < PINGS / 2 {
        return Err(Error::Precondition(format!(
            "ping {target} from {}: {} of {PINGS} answered: {text}",
            from.name(),
            times.len()
        )));
    }
    Ok(times)
}

/// Runs `ip -batch` lines in `ns`; a line that starts with `-6 ` runs in an IPv6 batch (a batch
/// line takes no options).
fn ip_batch(ns: &TestNetns, lines: &[String]) -> Result<()> {
    let (v6, any): (Vec<&String>, Vec<&String>) = lines.iter().partition(|l| l.starts_with("-6 "));
    let any: Vec<&str> = any.iter().map(|l| l.trim_start_matches("-4 ")).collect();
    let v6: Vec<&str> = v6.iter().map(|l| &l[3..]).collect();
    run_stdin(ns, &["ip", "-batch", "-"], &any.join("\n"))?;
    if !v6.is_empty() {
        run_stdin(ns, &["ip", "-6", "-batch", "-"], &v6.join("\n"))?;
    }
    Ok(())
}

/// Runs `nft -f -` with `lines` in `ns`.
fn nft_batch(ns: &TestNetns, lines: &[String]) -> Result<()> {
    run_stdin(ns, &["nft", "-f", "-"], &lines.join("\n"))
}

fn run_stdin(ns: &TestNetns, argv: &[&str], input: &str) -> Result<()> {
    use std::io::Write;
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", ns.name()])
        .args(argv)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(galactic_testkit::harness::io(format!("{argv:?}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(galactic_testkit::harness::io(format!("{argv:?} input")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(galactic_testkit::harness::io(format!("{argv:?}")))?;
    if !out.status.success() {
        return Err(Error::Precondition(format!(
            "{argv:?} in {}: {}",
            ns.name(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// One row's node: the host, two probe pods of the probe VPC and `attachments - 2` fillers.
fn build(tag: &str, attachments: usize, selection: Selection) -> Result<Row> {
    let host = TestNetns::new(&format!("{tag}h"));
    let pods = [
        TestNetns::new(&format!("{tag}a")),
        TestNetns::new(&format!("{tag}b")),
    ];
    connect_probes(tag, &host, &pods)?;
    let fillers = attachments - 2;
    let links: Vec<String> = (0..fillers)
        .map(|k| format!("link add {tag}f{k} type veth peer name {tag}g{k}"))
        .collect();
    ip_batch(&host, &links)?;
    let (rules, elements) = match selection {
        Selection::PerInterface => {
            ip_batch(&host, &per_interface_rules(tag, fillers))?;
            (attachments, 0)
        }
        Selection::Mark => select_by_mark(tag, fillers, &host)?,
    };
    Ok(Row {
        attachments,
        selection,
        rules,
        elements,
        v4: Vec::new(),
        v6: Vec::new(),
        host,
        pods,
    })
}

/// The probe pods' veth pairs, addresses and routes in the probe VPC's table, and the host's
/// forwarding settings (inside the row's own namespace).
fn connect_probes(tag: &str, host: &TestNetns, pods: &[TestNetns; 2]) -> Result<()> {
    let mut setup = vec!["link set lo up".to_owned()];
    for (i, pod) in pods.iter().enumerate() {
        let n = i + 1;
        setup.push(format!(
            "link add {tag}p{n} type veth peer name eth0 netns {}",
            pod.name()
        ));
        setup.push(format!("link set {tag}p{n} up"));
        setup.push(format!("addr add 10.200.{n}.1/32 dev {tag}p{n}"));
        setup.push(format!("addr add fd00:200:{n}::1/128 dev {tag}p{n} nodad"));
        setup.push(format!(
            "route add 10.200.{n}.2/32 dev {tag}p{n} table {PROBE_TABLE}"
        ));
        setup.push(format!(
            "-6 route add fd00:200:{n}::2/128 dev {tag}p{n} table {PROBE_TABLE}"
        ));
    }
    ip_batch(host, &setup)?;
    for key in [
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
    ] {
        host.exec(&["sysctl", "-qw", key]);
    }
    for (i, pod) in pods.iter().enumerate() {
        let n = i + 1;
        ip_batch(
            pod,
            &[
                "link set lo up".to_owned(),
                "link set eth0 up".to_owned(),
                format!("addr add 10.200.{n}.2/32 dev eth0"),
                format!("addr add fd00:200:{n}::2/128 dev eth0 nodad"),
                format!("route add 10.200.{n}.1/32 dev eth0"),
                format!("route add default via 10.200.{n}.1 dev eth0"),
                format!("-6 route add fd00:200:{n}::1/128 dev eth0"),
                format!("-6 route add default via fd00:200:{n}::1 dev eth0"),
            ],
        )?;
    }
    Ok(())
}

/// The previous release's selection: one `iif` rule per attachment and family.
fn per_interface_rules(tag: &str, fillers: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for k in 0..fillers {
        let table = FIRST_FILLER_TABLE + k / PER_VPC;
        for f in ["-4", "-6"] {
            lines.push(format!(
                "{f} rule add pref 1000 iif {tag}f{k} lookup {table}"
            ));
        }
    }
    for h in [format!("{tag}p1"), format!("{tag}p2")] {
        for f in ["-4", "-6"] {
            lines.push(format!(
                "{f} rule add pref 1000 iif {h} lookup {PROBE_TABLE}"
            ));
        }
    }
    lines
}

/// Table mode's selection: the VPC-mark chain, one map element per attachment and one `fwmark`
/// rule per VPC and family. Returns the (rules, elements) the row holds.
fn select_by_mark(tag: &str, fillers: usize, host: &TestNetns) -> Result<(usize, usize)> {
    let ns = Netns::open(&host.path()).map_err(|source| Error::Kernel {
        what: "open the row's host namespace",
        source,
    })?;
    netns::run_in(&ns, firewall::mark_vpc_traffic)
        .map_err(|source| Error::Kernel {
            what: "enter the row's host namespace",
            source,
        })?
        .map_err(|source| Error::Kernel {
            what: "create the VPC-mark chain",
            source,
        })?;
    let vpcs = fillers.div_ceil(PER_VPC);
    let mark = |vpc: usize| (vpc as u32 + 1) << MASK.trailing_zeros();
    let element = |ifname: &str, vpc: usize| {
        format!(
            "add element inet galactic vpc_marks {{ \"{ifname}\" : {:#x} }}",
            mark(vpc)
        )
    };
    let rule = |f: &str, vpc: usize, table: &dyn std::fmt::Display| {
        format!(
            "{f} rule add pref 1000 fwmark {:#x}/{MASK:#x} lookup {table}",
            mark(vpc)
        )
    };
    let mut elements: Vec<String> = (0..fillers)
        .map(|k| element(&format!("{tag}f{k}"), 1 + k / PER_VPC))
        .collect();
    elements.push(element(&format!("{tag}p1"), 0));
    elements.push(element(&format!("{tag}p2"), 0));
    let mut rules = Vec::new();
    for f in ["-4", "-6"] {
        rules.extend((0..vpcs).map(|v| rule(f, 1 + v, &(FIRST_FILLER_TABLE + v))));
        rules.push(rule(f, 0, &PROBE_TABLE));
    }
    nft_batch(host, &elements)?;
    ip_batch(host, &rules)?;
    Ok((vpcs + 1, fillers + 2))
}

impl Row {
    /// The rules the kernel holds at the VPC priority in `family` (`-4`, `-6`), counted.
    pub fn counted_rules(&self, family: &str) -> usize {
        self.host
            .ip(&[family, "rule", "show", "pref", "1000"])
            .lines()
            .count()
    }
}

/// The table: per row, rules and elements, the medians and p95 of both families, and the
/// ratio of each median to the previous release's at the same size.
pub fn table(rows: &mut [Row]) -> String {
    let mut out = format!(
        "table-mode VPC selection: ping round trip pod → pod of one VPC ({PINGS} per round, \
         median / p95 in µs)\n\n\
         | attachments | selection | VPC rules per family | map elements | IPv4 median | IPv4 p95 | IPv6 median | IPv6 p95 | IPv4 / iif | IPv6 / iif |\n\
         |---|---|---|---|---|---|---|---|---|---|\n"
    );
    let mut baseline = (0.0, 0.0);
    for row in rows.iter_mut() {
        let v4 = Summary::of(&mut row.v4);
        let v6 = Summary::of(&mut row.v6);
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        if row.selection == Selection::PerInterface {
            baseline = (us(v4.median), us(v6.median));
        }
        let counted = row.counted_rules("-4");
        out += &format!(
            "| {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |\n",
            row.attachments,
            row.selection.label(),
            if counted == row.rules {
                counted.to_string()
            } else {
                format!("{counted} (want {})", row.rules)
            },
            row.elements,
            us(v4.median),
            us(v4.p95),
            us(v6.median),
            us(v6.p95),
            us(v4.median) / baseline.0,
            us(v6.median) / baseline.1,
        );
    }
    out
}
