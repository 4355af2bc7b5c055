//! The fill bench's tables (Markdown, times in ms).

use super::{Chain, Report, Row, Samples, Verb};
use crate::stats::Summary;
use std::fmt::Write;
use std::time::Duration;

fn summary(samples: &[Duration]) -> Summary {
    Summary::of(&mut samples.to_vec())
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// `a / b` to two places, or `–` when either is missing.
fn ratio(a: Option<Duration>, b: Option<Duration>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if !b.is_zero() => format!("{:.2}", a.as_secs_f64() / b.as_secs_f64()),
        _ => "–".into(),
    }
}

fn median(row: &Row, verb: Verb) -> Option<Duration> {
    row.verbs
        .get(&verb)
        .filter(|s| !s.wall.is_empty())
        .map(|s| summary(&s.wall).median)
}

fn vpcs(row: &Row) -> String {
    match (row.chain, row.vpcs) {
        (Chain::Reference, _) => "–".into(),
        (_, 0) => "–".into(),
        (_, n) => n.to_string(),
    }
}

/// The tables of a run.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "probe rounds per level: {} (after 1 warm-up); our routing domains: {}; times in ms\n",
        report.options.iterations, report.backend
    );
    walls(&mut out, report);
    ratios(&mut out, report);
    per_plugin(&mut out, report);
    received(&mut out, report);
    objects(&mut out, report);
    let _ = match report.leftovers.is_empty() {
        true => writeln!(out, "\nleft behind: nothing"),
        false => writeln!(out, "\nleft behind: {}", report.leftovers.join("; ")),
    };
    out
}

fn walls(out: &mut String, report: &Report) {
    let mut head = String::from("| chain | VPCs | live |");
    let mut rule = String::from("|---|---:|---:|");
    for verb in Verb::ALL {
        let _ = write!(head, " {0} med | {0} p95 |", verb.name());
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for row in &report.rows {
        let _ = write!(
            out,
            "| {} | {} | {} |",
            row.chain.label(),
            vpcs(row),
            row.live
        );
        for verb in Verb::ALL {
            let cells = match row.verbs.get(&verb).filter(|s| !s.wall.is_empty()) {
                Some(s) => {
                    let s = summary(&s.wall);
                    format!(" {} | {} |", ms(s.median), ms(s.p95))
                }
                None => " – | – |".into(),
            };
            out.push_str(&cells);
        }
        out.push('\n');
    }
}

/// Each row's medians over its chain's empty node and (ours) over the reference at the same
/// number of live attachments.
fn ratios(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "\nmedian ratios: × empty (the same chain with no live attachment), × reference (at the \
         same live count)\n"
    );
    let mut head = String::from("| chain | VPCs | live |");
    let mut rule = String::from("|---|---:|---:|");
    for verb in Verb::ALL {
        let _ = write!(head, " {} × empty |", verb.name());
        rule.push_str("---:|");
    }
    for verb in [Verb::Add, Verb::Check, Verb::Del] {
        let _ = write!(head, " {} × ref |", verb.name());
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for row in &report.rows {
        let empty = report
            .rows
            .iter()
            .find(|r| r.chain == row.chain && r.live == 0);
        let reference = report
            .rows
            .iter()
            .find(|r| r.chain == Chain::Reference && r.live == row.live);
        let _ = write!(
            out,
            "| {} | {} | {} |",
            row.chain.label(),
            vpcs(row),
            row.live
        );
        for verb in Verb::ALL {
            let base = empty.and_then(|e| median(e, verb));
            let _ = write!(out, " {} |", ratio(median(row, verb), base));
        }
        for verb in [Verb::Add, Verb::Check, Verb::Del] {
            let cell = match row.chain {
                Chain::Ours => ratio(median(row, verb), reference.and_then(|r| median(r, verb))),
                Chain::Reference => "–".into(),
            };
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
}

/// Every plugin's wall median and, in brackets, its own time as it logs it.
fn per_plugin(out: &mut String, report: &Report) {
    let mut plugins: Vec<String> = Vec::new();
    for row in &report.rows {
        for s in row.verbs.values() {
            for name in s.stages.keys().chain(s.own.keys()) {
                if !plugins.contains(name) {
                    plugins.push(name.clone());
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\nper plugin process: wall median from spawn to reap (a master's includes its IPAM \
         delegate) and, in brackets, the plugin's own time as it logs it (`durationMs`)\n"
    );
    let mut head = String::from("| chain | VPCs | live | verb |");
    let mut rule = String::from("|---|---:|---:|---|");
    for p in &plugins {
        let _ = write!(head, " {p} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for row in &report.rows {
        for (verb, s) in &row.verbs {
            let _ = write!(
                out,
                "| {} | {} | {} | {} |",
                row.chain.label(),
                vpcs(row),
                row.live,
                verb.name()
            );
            for p in &plugins {
                let _ = write!(out, " {} |", plugin_cell(s, p));
            }
            out.push('\n');
        }
    }
}

/// The median of each plugin's `netlinkReceived`: what it read of the node, by count.
fn received(out: &mut String, report: &Report) {
    let mut plugins: Vec<&String> = Vec::new();
    for s in report.rows.iter().flat_map(|r| r.verbs.values()) {
        for name in s.received.keys() {
            if !plugins.contains(&name) {
                plugins.push(name);
            }
        }
    }
    if plugins.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "
kernel objects each plugin received over netlink (median `netlinkReceived` of its \
         log line: rtnetlink messages and nftables map elements)\n"
    );
    let mut head = String::from("| chain | VPCs | live | verb |");
    let mut rule = String::from("|---|---:|---:|---|");
    for p in &plugins {
        let _ = write!(head, " {p} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for row in report.rows.iter().filter(|r| r.chain == Chain::Ours) {
        for (verb, s) in &row.verbs {
            let _ = write!(
                out,
                "| {} | {} | {} | {} |",
                row.chain.label(),
                vpcs(row),
                row.live,
                verb.name()
            );
            for p in &plugins {
                let cell = s.received.get(*p).map_or_else(
                    || "–".to_owned(),
                    |n| {
                        let mut n = n.clone();
                        n.sort_unstable();
                        n[n.len() / 2].to_string()
                    },
                );
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
    }
}

fn plugin_cell(s: &Samples, plugin: &str) -> String {
    let wall = s.stages.get(plugin).map(|t| ms(summary(t).median));
    let own = s.own.get(plugin).map(|t| ms(summary(t).median));
    match (wall, own) {
        (Some(w), Some(o)) => format!("{w} ({o})"),
        (Some(w), None) => w,
        (None, Some(o)) => format!("({o})"),
        (None, None) => "–".into(),
    }
}

fn objects(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "\nkernel objects of the host namespace after each fill (the probe not attached), and the \
         fill step that produced the level\n"
    );
    let _ = writeln!(
        out,
        "| chain | VPCs | live | links | IPv4 rules | IPv6 rules | IPv4 routes | IPv6 routes | \
         nft rules | added | fill s | ADDs/s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for row in &report.rows {
        let _ = write!(
            out,
            "| {} | {} | {} |",
            row.chain.label(),
            vpcs(row),
            row.live
        );
        for n in row.objects.as_array() {
            let _ = write!(out, " {n} |");
        }
        let secs = row.fill_time.as_secs_f64();
        let rate = match secs > 0.0 {
            true => format!("{:.0}", row.filled as f64 / secs),
            false => "–".into(),
        };
        let _ = writeln!(out, " {} | {:.1} | {rate} |", row.filled, secs);
    }
    growth(out, report);
}

/// Objects per live attachment (over the chain's empty node) and per VPC (over the row with the
/// same live count and the fewest VPCs).
fn growth(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "\ngrowth: per attachment = (row − empty) / live; per VPC = (row − the same live count \
         over the fewest VPCs) / extra VPCs; links, IPv4 rules, IPv6 rules, IPv4 routes, IPv6 \
         routes, nft rules\n"
    );
    for row in report.rows.iter().filter(|r| r.live > 0) {
        let Some(empty) = report
            .rows
            .iter()
            .find(|r| r.chain == row.chain && r.live == 0)
        else {
            continue;
        };
        let per_att = per(&row.objects.as_array(), &empty.objects.as_array(), row.live);
        let _ = write!(
            out,
            "- {} {} VPCs, {} live: per attachment {per_att}",
            row.chain.label(),
            vpcs(row),
            row.live
        );
        let fewest = report
            .rows
            .iter()
            .filter(|r| r.chain == row.chain && r.live == row.live)
            .min_by_key(|r| r.vpcs);
        if let Some(base) = fewest.filter(|b| b.vpcs < row.vpcs) {
            let extra = row.vpcs - base.vpcs;
            let per_vpc = per(&row.objects.as_array(), &base.objects.as_array(), extra);
            let _ = write!(out, "; per VPC {per_vpc}");
        }
        out.push('\n');
    }
}

fn per(row: &[usize; 6], base: &[usize; 6], n: usize) -> String {
    row.iter()
        .zip(base)
        .map(|(r, b)| format!("{:.2}", (*r as f64 - *b as f64) / n.max(1) as f64))
        .collect::<Vec<_>>()
        .join(" / ")
}
