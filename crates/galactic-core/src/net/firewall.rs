//! Forward-accept rules this project owns in nftables.
//!
//! A node whose FORWARD policy is DROP (iptables-nft or native nftables) would drop every packet
//! between pods. An accept in a table of our own would not help: every base chain on the forward
//! hook must accept. So each forward base chain gets, at its top, `iifname H accept` and
//! `oifname H accept` for the attachment's host interface, tagged with the comment
//! `galactic:<H>`. The comment is the ownership mark: rules are found, never duplicated, and
//! removed by it alone. Chains and tables are never created or deleted here.
//!
//! `nft` (Debian package nftables) is driven through its JSON output; without it there is no
//! nftables ruleset this code could change, which is reported to the caller.

use super::NetError;
use serde_json::Value;
use std::process::Command;

const TAG: &str = "galactic:";

/// A forward base chain.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Chain {
    family: String,
    table: String,
    name: String,
}

/// One rule of ours: its chain, handle and the interface it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    chain: Chain,
    handle: u64,
    ifname: String,
}

/// Whether `nft` is installed.
pub fn available() -> bool {
    Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Makes sure every forward base chain accepts traffic from and to `ifname`. Idempotent.
pub fn allow(ifname: &str) -> Result<(), NetError> {
    if !forward_chains_exist() {
        return Ok(());
    }
    // Listing chains only (not every rule of the ruleset) keeps this cheap on nodes with large
    // rulesets; rules are read only for the forward chains, and all inserts go in one batch.
    let chains = forward_chains(&list(&["-j", "list", "chains"])?);
    let mut batch = String::new();
    for chain in chains {
        let rules = list(&[
            "-j",
            "list",
            "chain",
            &chain.family,
            &chain.table,
            &chain.name,
        ])?;
        if owned_rules(&rules).iter().any(|r| r.ifname == ifname) {
            continue;
        }
        // Inserted at the top in reverse, so the final order is iifname, then oifname.
        for direction in ["oifname", "iifname"] {
            batch += &format!(
                "insert rule {} {} {} {direction} \"{ifname}\" accept comment \"{TAG}{ifname}\"\n",
                chain.family, chain.table, chain.name
            );
        }
    }
    if batch.is_empty() {
        return Ok(());
    }
    nft_batch(&batch)
}

/// Removes every rule of ours for `ifname`. Missing rules are success.
pub fn remove(ifname: &str) -> Result<(), NetError> {
    if !forward_chains_exist() {
        return Ok(());
    }
    let ruleset = ruleset()?;
    for rule in owned_rules(&ruleset)
        .into_iter()
        .filter(|r| r.ifname == ifname)
    {
        nft(&[
            "delete",
            "rule",
            &rule.chain.family,
            &rule.chain.table,
            &rule.chain.name,
            "handle",
            &rule.handle.to_string(),
        ])?;
    }
    Ok(())
}

/// Whether every forward base chain has both rules for `ifname` (for CHECK).
pub fn is_allowed(ifname: &str) -> Result<bool, NetError> {
    if !forward_chains_exist() {
        return Ok(true);
    }
    let ruleset = ruleset()?;
    let owned = owned_rules(&ruleset);
    Ok(forward_chains(&ruleset).iter().all(|chain| {
        owned
            .iter()
            .filter(|r| &r.chain == chain && r.ifname == ifname)
            .count()
            >= 2
    }))
}

/// Interfaces that have rules of ours (for GC).
pub fn owned_interfaces() -> Result<Vec<String>, NetError> {
    if !forward_chains_exist() {
        return Ok(Vec::new());
    }
    let mut names: Vec<String> = owned_rules(&ruleset()?)
        .into_iter()
        .map(|r| r.ifname)
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Whether `nft` has any work to do: our rules only ever live in forward base chains, and
/// without one there is nothing to allow, check or remove. When the netlink dump itself fails,
/// `nft` decides.
fn forward_chains_exist() -> bool {
    super::nftables::has_forward_chain().unwrap_or(true)
}

fn ruleset() -> Result<Vec<Value>, NetError> {
    list(&["-j", "list", "ruleset"])
}

/// Runs an `nft -j list …` command and returns its objects.
fn list(args: &[&str]) -> Result<Vec<Value>, NetError> {
    let out = nft(args)?;
    let parsed: Value = serde_json::from_str(&out).map_err(|e| NetError::Io {
        what: format!("parse `nft {}`", args.join(" ")),
        source: std::io::Error::other(e),
    })?;
    Ok(parsed
        .get("nftables")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// Applies a batch of nft commands atomically (`nft -f -`).
fn nft_batch(batch: &str) -> Result<(), NetError> {
    use std::io::Write;
    let what = || format!("nft -f - ({} commands)", batch.lines().count());
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|source| NetError::Io {
            what: what(),
            source,
        })?;
    if let Some(mut input) = child.stdin.take() {
        input
            .write_all(batch.as_bytes())
            .map_err(|source| NetError::Io {
                what: what(),
                source,
            })?;
    }
    let out = child.wait_with_output().map_err(|source| NetError::Io {
        what: what(),
        source,
    })?;
    if !out.status.success() {
        return Err(NetError::Io {
            what: what(),
            source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        });
    }
    Ok(())
}

fn forward_chains(ruleset: &[Value]) -> Vec<Chain> {
    ruleset
        .iter()
        .filter_map(|item| item.get("chain"))
        .filter(|c| c.get("hook").and_then(Value::as_str) == Some("forward"))
        .filter_map(|c| {
            Some(Chain {
                family: c.get("family")?.as_str()?.to_owned(),
                table: c.get("table")?.as_str()?.to_owned(),
                name: c.get("name")?.as_str()?.to_owned(),
            })
        })
        .collect()
}

fn owned_rules(ruleset: &[Value]) -> Vec<Owned> {
    ruleset
        .iter()
        .filter_map(|item| item.get("rule"))
        .filter_map(|r| {
            let ifname = r.get("comment")?.as_str()?.strip_prefix(TAG)?.to_owned();
            Some(Owned {
                chain: Chain {
                    family: r.get("family")?.as_str()?.to_owned(),
                    table: r.get("table")?.as_str()?.to_owned(),
                    name: r.get("chain")?.as_str()?.to_owned(),
                },
                handle: r.get("handle")?.as_u64()?,
                ifname,
            })
        })
        .collect()
}

fn nft(args: &[&str]) -> Result<String, NetError> {
    let what = || format!("nft {}", args.join(" "));
    let out = Command::new("nft")
        .args(args)
        .output()
        .map_err(|source| NetError::Io {
            what: what(),
            source,
        })?;
    if !out.status.success() {
        return Err(NetError::Io {
            what: what(),
            source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The table of our own for the host-service filter (table-mode routing domains).
const OWN_TABLE: &str = "galactic";
/// Its input chain, holding the one host-service rule.
const OWN_INPUT_CHAIN: &str = "input";

/// Table mode only: host sockets bound to the wildcard address would be reachable from pods at
/// their gateway address (a VRF hides them). TCP and UDP from `G*` interfaces to the host itself
/// are rejected in an input chain of our own table; pings and forwarding are unaffected. Idempotent.
///
/// The table, chain and rule are created in one `nft -f -` transaction, so the chain's presence
/// (seen over netlink, no `nft` process) means the rule is there: every ADD after the first on a
/// node pays a netlink dump, not an exec.
pub fn protect_host_services() -> Result<(), NetError> {
    if super::nftables::has_chain(super::nftables::FAMILY_INET, OWN_TABLE, OWN_INPUT_CHAIN)? {
        return Ok(());
    }
    if !available() {
        return Err(NetError::Unsupported {
            what: "table-mode host-service filter needs nft (Debian package nftables)".into(),
        });
    }
    nft_batch(&format!(
        "add table inet {OWN_TABLE}\n\
         add chain inet {OWN_TABLE} {OWN_INPUT_CHAIN} {{ type filter hook input priority 0 ; policy accept ; }}\n\
         add rule inet {OWN_TABLE} {OWN_INPUT_CHAIN} iifname \"G*\" meta l4proto {{ tcp, udp }} reject comment \"galactic:host-services\"\n"
    ))
}
