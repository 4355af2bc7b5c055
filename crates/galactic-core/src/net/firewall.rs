//! Forward-accept rules this project owns, whatever firewall the node runs.
//!
//! A node whose FORWARD policy is DROP (native nftables, iptables-nft, or iptables-legacy) would
//! drop every packet between pods. An accept in a table of our own would not help: every base
//! chain on the forward hook must accept. So each forward chain gets, at its top, an accept for
//! packets from and to the attachment's host interface, tagged with the comment `galactic:<H>`.
//! The comment is the ownership mark: rules are found, never duplicated, and removed by it alone.
//! Chains and tables are never created or deleted here.
//!
//! - nftables (native, and iptables-nft, whose tables are nftables tables): every base chain on
//!   the forward hook, of any family, through netlink ([`super::nftables::rules`]): no `nft`
//!   process on ADD, CHECK or DEL.
//! - iptables-legacy (x_tables, invisible to nftables): `filter FORWARD` of each family whose
//!   legacy `filter` table is loaded, through `iptables-legacy`/`ip6tables-legacy` (x_tables has
//!   no incremental interface; a node without a loaded legacy table never runs them).

use super::nftables::rules::{self, ChainRef, Change, Direction};
use super::NetError;
use std::process::Command;

mod legacy;

const TAG: &str = "galactic:";

/// Whether `nft` is installed (needed only once per node, for table mode's node-wide objects).
pub fn available() -> bool {
    Command::new("nft")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Makes sure every forward chain accepts traffic from and to `ifname`. Idempotent.
pub fn allow(ifname: &str) -> Result<(), NetError> {
    let comment = format!("{TAG}{ifname}");
    let mut changes = Vec::new();
    for chain in forward_chains()? {
        let owned = rules::rules(&chain)?
            .iter()
            .any(|r| r.comment.as_deref() == Some(comment.as_str()));
        if owned {
            continue;
        }
        // Inserted at the top in reverse, so the final order is iifname, then oifname.
        for direction in [Direction::Out, Direction::In] {
            changes.push(Change::InsertAccept {
                chain: chain.clone(),
                direction,
                ifname: ifname.to_owned(),
                comment: comment.clone(),
            });
        }
    }
    rules::apply(&changes)?;
    legacy::allow(ifname, &comment)
}

/// Removes every rule of ours for `ifname`. Missing rules are success.
pub fn remove(ifname: &str) -> Result<(), NetError> {
    let comment = format!("{TAG}{ifname}");
    let mut changes = Vec::new();
    for chain in forward_chains()? {
        for rule in rules::rules(&chain)? {
            if rule.comment.as_deref() == Some(comment.as_str()) {
                changes.push(Change::Delete {
                    chain: chain.clone(),
                    handle: rule.handle,
                });
            }
        }
    }
    rules::apply(&changes)?;
    legacy::remove(ifname, &comment)
}

/// Whether every forward chain has both rules for `ifname` (for CHECK).
pub fn is_allowed(ifname: &str) -> Result<bool, NetError> {
    let comment = format!("{TAG}{ifname}");
    for chain in forward_chains()? {
        let count = rules::rules(&chain)?
            .iter()
            .filter(|r| r.comment.as_deref() == Some(comment.as_str()))
            .count();
        if count < 2 {
            return Ok(false);
        }
    }
    legacy::is_allowed(ifname, &comment)
}

/// Interfaces that have rules of ours (for GC).
pub fn owned_interfaces() -> Result<Vec<String>, NetError> {
    let mut names = Vec::new();
    for chain in forward_chains()? {
        names.extend(
            rules::rules(&chain)?
                .into_iter()
                .filter_map(|r| r.comment?.strip_prefix(TAG).map(str::to_owned)),
        );
    }
    names.extend(legacy::owned_interfaces(TAG)?);
    names.sort();
    names.dedup();
    Ok(names)
}

/// Every nftables base chain on the forward hook (none on a node without nftables).
fn forward_chains() -> Result<Vec<ChainRef>, NetError> {
    Ok(super::nftables::chains()?
        .into_iter()
        .filter(|c| c.hook == Some(super::nftables::HOOK_FORWARD))
        .map(|c| ChainRef {
            family: c.family,
            table: c.table,
            name: c.name,
        })
        .collect())
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
        .map_err(|source| match source.kind() {
            // Checked here rather than by running `nft --version` first: one process, not two.
            std::io::ErrorKind::NotFound => NetError::Unsupported {
                what: "table-mode routing domains need nft (Debian package nftables) once per \
                       node, for the host-service filter and the VPC marks"
                    .into(),
            },
            _ => NetError::Io {
                what: what(),
                source,
            },
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

/// The table of our own for the host-service filter and the VPC marks (table-mode routing
/// domains).
pub const OWN_TABLE: &str = "galactic";
/// The prerouting chain and the `ifname : mark` map of the VPC marks (one name for both: nft
/// keeps chains and maps apart).
pub const VPC_MARKS: &str = "vpc_marks";
/// The VPC-mark chain's priority: raw's (-300) less 10, so it runs before every iptables table
/// and every nft chain at the usual priorities that could read or set marks (conntrack -200,
/// mangle -150, dstnat -100, filter 0).
const VPC_MARKS_PRIORITY: i32 = -310;
/// Its input chain, holding the one host-service rule.
const OWN_INPUT_CHAIN: &str = "input";

/// Which of table mode's node-wide nftables objects [`prepare_table_mode`] had to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prepared {
    /// The host-service filter (chain `input` and its rule).
    pub host_services: bool,
    /// The VPC marks (map, chain `vpc_marks` and its rule).
    pub vpc_marks: bool,
}

/// Table mode's node-wide nftables objects, both of them: the host-service filter and the VPC
/// marks. Idempotent; returns what had to be created.
///
/// - Host services: host sockets bound to the wildcard address would be reachable from pods at
///   their gateway address (a VRF hides them). TCP and UDP from `G*` interfaces to the host
///   itself are rejected in an input chain of our own table; pings and forwarding are
///   unaffected.
/// - VPC marks: a packet from a VPC host interface gets its VPC's mark, which the VPC's
///   `fwmark` rule steers into its table; packets of interfaces not in the map are untouched.
///   The map's elements (one per attachment) are written over netlink
///   ([`super::nftables::map`]). `meta mark set` replaces the whole mark, which is none on
///   these packets (a packet crossing a veth between namespaces, or written to a tap, carries
///   no mark) and which runs before anything else could set one.
///
/// One chain dump (netlink, no process) tells which are there; whatever is missing is created
/// by one `nft -f -` transaction, so a node's first table-mode ADD starts one `nft` process,
/// and every later one none. Each part's chain is created in the same transaction as its rule
/// (and map), so a chain seen means its part is complete.
pub fn prepare_table_mode() -> Result<Prepared, NetError> {
    create_missing(Prepared {
        host_services: true,
        vpc_marks: true,
    })
}

/// The VPC marks alone ([`prepare_table_mode`]); returns whether they had to be created.
pub fn mark_vpc_traffic() -> Result<bool, NetError> {
    create_missing(Prepared {
        host_services: false,
        vpc_marks: true,
    })
    .map(|created| created.vpc_marks)
}

/// Creates whichever of `wanted`'s parts is missing, in one `nft` transaction.
fn create_missing(wanted: Prepared) -> Result<Prepared, NetError> {
    let chains = super::nftables::chains()?;
    let has = |name: &str| {
        chains.iter().any(|c| {
            c.family == super::nftables::FAMILY_INET && c.table == OWN_TABLE && c.name == name
        })
    };
    let missing = Prepared {
        host_services: wanted.host_services && !has(OWN_INPUT_CHAIN),
        vpc_marks: wanted.vpc_marks && !has(VPC_MARKS),
    };
    if missing == Prepared::default() {
        return Ok(missing);
    }
    let mut batch = format!("add table inet {OWN_TABLE}\n");
    if missing.host_services {
        batch.push_str(&format!(
            "add chain inet {OWN_TABLE} {OWN_INPUT_CHAIN} {{ type filter hook input priority 0 ; policy accept ; }}\n\
             add rule inet {OWN_TABLE} {OWN_INPUT_CHAIN} iifname \"G*\" meta l4proto {{ tcp, udp }} reject comment \"galactic:host-services\"\n"
        ));
    }
    if missing.vpc_marks {
        batch.push_str(&format!(
            "add map inet {OWN_TABLE} {VPC_MARKS} {{ type ifname : mark ; }}\n\
             add chain inet {OWN_TABLE} {VPC_MARKS} {{ type filter hook prerouting priority {VPC_MARKS_PRIORITY} ; policy accept ; }}\n\
             add rule inet {OWN_TABLE} {VPC_MARKS} meta mark set iifname map @{VPC_MARKS} comment \"galactic:vpc-marks\"\n"
        ));
    }
    nft_batch(&batch)?;
    Ok(missing)
}

#[cfg(test)]
mod tests;
