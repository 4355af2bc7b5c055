//! The forward-accept rules in iptables-legacy's `filter FORWARD` (x_tables), for nodes whose
//! firewall is iptables-legacy: nftables never sees those tables, and a FORWARD DROP policy
//! there drops pod traffic whatever nftables accepts.
//!
//! A family is managed only while its legacy `filter` table is loaded in this network namespace
//! (`ip{,6}_tables_names` under `/proc/thread-self/net`: the calling thread's namespace, which
//! `/proc/net`, the process's, is not inside [`crate::net::netns::run_in`]; two small reads): a node without one never runs a process
//! here. x_tables offers no incremental change over a socket (a whole-table replace only), so the
//! node's `iptables-legacy`/`ip6tables-legacy` (or an `iptables` whose backend is legacy) does it.

use crate::net::NetError;
use std::process::{Command, Output};

/// Most copies of one rule removed per call (a crash between insert and record can repeat one).
const MAX_COPIES: usize = 64;

/// One family: where the kernel lists its loaded legacy tables, and its binaries.
struct Family {
    tables: &'static str,
    binary: &'static str,
    fallback: &'static str,
}

const FAMILIES: [Family; 2] = [
    Family {
        tables: "/proc/thread-self/net/ip_tables_names",
        binary: "iptables-legacy",
        fallback: "iptables",
    },
    Family {
        tables: "/proc/thread-self/net/ip6_tables_names",
        binary: "ip6tables-legacy",
        fallback: "ip6tables",
    },
];

/// The binaries of the families whose legacy `filter` table is loaded here.
fn active() -> Result<Vec<&'static str>, NetError> {
    FAMILIES
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f.tables).is_ok_and(|t| t.lines().any(|l| l == "filter"))
        })
        .map(binary)
        .collect()
}

/// `iptables-legacy`, or a plain `iptables` whose backend is legacy.
fn binary(family: &Family) -> Result<&'static str, NetError> {
    let version = |name: &str| {
        Command::new(name)
            .arg("-V")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    if version(family.binary).is_some() {
        return Ok(family.binary);
    }
    if version(family.fallback).is_some_and(|v| v.contains("legacy")) {
        return Ok(family.fallback);
    }
    Err(NetError::Unsupported {
        what: format!(
            "the legacy filter table is loaded ({}) but neither {} nor a legacy {} is installed to \
             let pod traffic through its FORWARD chain (Debian package iptables)",
            family.tables, family.binary, family.fallback
        ),
    })
}

fn rule<'a>(direction: &'a str, ifname: &'a str, comment: &'a str) -> [&'a str; 8] {
    [
        direction,
        ifname,
        "-m",
        "comment",
        "--comment",
        comment,
        "-j",
        "ACCEPT",
    ]
}

fn run(binary: &str, args: &[&str]) -> Result<Output, NetError> {
    Command::new(binary)
        .args(["-w", "5", "-t", "filter"])
        .args(args)
        .output()
        .map_err(|source| NetError::Io {
            what: format!("{binary} {}", args.join(" ")),
            source,
        })
}

/// Exit status 1 is "no such rule" for `-C`/`-D`; anything else but success is a failure.
fn absent(binary: &str, args: &[&str], out: &Output) -> Result<bool, NetError> {
    match out.status.code() {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        _ => Err(NetError::Io {
            what: format!("{binary} {}", args.join(" ")),
            source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        }),
    }
}

fn has(binary: &str, direction: &str, ifname: &str, comment: &str) -> Result<bool, NetError> {
    let mut args = vec!["-C", "FORWARD"];
    args.extend(rule(direction, ifname, comment));
    let out = run(binary, &args)?;
    Ok(!absent(binary, &args, &out)?)
}

/// Inserts the two accepts at the top of each loaded family's `filter FORWARD`, unless there.
pub fn allow(ifname: &str, comment: &str) -> Result<(), NetError> {
    for binary in active()? {
        // Inserted at the top in reverse, so the final order is -i, then -o.
        for direction in ["-o", "-i"] {
            if has(binary, direction, ifname, comment)? {
                continue;
            }
            let mut args = vec!["-I", "FORWARD", "1"];
            args.extend(rule(direction, ifname, comment));
            let out = run(binary, &args)?;
            if absent(binary, &args, &out)? {
                return Err(NetError::Io {
                    what: format!("{binary} {}", args.join(" ")),
                    source: std::io::Error::other(
                        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Deletes every copy of both accepts. Missing rules are success.
pub fn remove(ifname: &str, comment: &str) -> Result<(), NetError> {
    for binary in active()? {
        for direction in ["-i", "-o"] {
            let mut args = vec!["-D", "FORWARD"];
            args.extend(rule(direction, ifname, comment));
            for _ in 0..MAX_COPIES {
                let out = run(binary, &args)?;
                if absent(binary, &args, &out)? {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Whether each loaded family has both accepts.
pub fn is_allowed(ifname: &str, comment: &str) -> Result<bool, NetError> {
    for binary in active()? {
        for direction in ["-i", "-o"] {
            if !has(binary, direction, ifname, comment)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Interfaces with a rule of ours in a loaded family's `filter FORWARD`.
pub fn owned_interfaces(tag: &str) -> Result<Vec<String>, NetError> {
    let mut names = Vec::new();
    for binary in active()? {
        let args = ["-S", "FORWARD"];
        let out = run(binary, &args)?;
        if !out.status.success() {
            absent(binary, &args, &out)?;
            continue;
        }
        names.extend(owned_in(&String::from_utf8_lossy(&out.stdout), tag));
    }
    Ok(names)
}

/// The interfaces named by `--comment <tag><name>` in `iptables -S` output (quoted or not).
fn owned_in(listing: &str, tag: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| {
            let rest = line.split("--comment ").nth(1)?;
            let value = rest.trim_start_matches('"');
            let value = value.split(['"', ' ']).next()?;
            value.strip_prefix(tag).map(str::to_owned)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn owned_rules_are_read_from_the_listing() {
        let listing = "-P FORWARD DROP\n\
            -A FORWARD -i G1H -m comment --comment \"galactic:G1H\" -j ACCEPT\n\
            -A FORWARD -o G2H -m comment --comment galactic:G2H -j ACCEPT\n\
            -A FORWARD -i x -m comment --comment \"other\" -j ACCEPT\n";
        assert_eq!(super::owned_in(listing, "galactic:"), ["G1H", "G2H"]);
    }
}
