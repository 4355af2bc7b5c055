//! Attachments the upstream Go chain created before this node switched to ours (decision 0061).
//!
//! The Go masters kept no record: an attachment is its host interface `G{vpc:9}{att:3}H` (the
//! same name ours use), two `iptables`/`ip6tables` rules in `filter FORWARD` (`-i H -j ACCEPT`,
//! `-o H -j ACCEPT`, no comment, inserted without a duplicate check), the VRF membership, the
//! host gateway (address, pod route, neighbour: all on the link, so they go with it) and, on an
//! SRv6 node, its `ifindex_vrf_table` row. DEL and CHECK of such an attachment *adopt* it: once
//! it is proven to be the caller's, a record is written for it (under the attachment's lock) and
//! from then on it is torn down, checked and garbage-collected like one of ours.
//!
//! Proof of ownership, since nothing names the container:
//! - veth: the container's `CNI_IFNAME` is a veth whose peer is the host interface, and the
//!   host interface's peer is it (both `IFLA_LINK`s agree);
//! - tap: the Go chain served one tap per VPC attachment and deleted it on any container's DEL;
//!   a tap is adopted by the DEL or CHECK of its VPC attachment, as upstream.
//!
//! A host interface of another kind, or a veth whose peer is elsewhere, is left alone.
//!
//! GC cannot adopt (nothing names the container to record), but it can tell when the Go
//! attachment of its network is no longer valid: when every (container id, ifname) the runtime
//! lists for the network has a record of ours, none of them is the Go one, and GC removes it as
//! its DEL would ([`collect`]). While a listed attachment has no record, that one may be the Go
//! pod or VM, and its attachment stays.

use crate::conf::MasterConf;
use crate::device::Device;
use crate::error::MasterError;
use galactic_core::attachment::{Record, Records};
use galactic_core::bpf::maps::{self, IfindexVrfTable};
use galactic_core::cni::Request;
use galactic_core::log;
use galactic_core::net::netlink::Netlink;
use serde_json::json;
use std::collections::HashSet;
use std::process::Command;

/// Most duplicates of one Go rule removed per call (the Go chain re-inserted them on retries).
const MAX_DUPLICATES: usize = 64;

/// Adopts the Go-created attachment of `req`, when there is one and it is the caller's: writes
/// its record, removes its Go forward rules and its Go `ifindex_vrf_table` row (DEL; CHECK
/// replaces the rules with ours first). `None` when there is nothing to adopt.
pub fn adopt<D: Device>(
    req: &Request,
    records: &Records,
    replace_rules: bool,
) -> Result<Option<Record>, MasterError> {
    let Some(Unrecorded {
        conf,
        host_ifname,
        host,
        _lock,
    }) = unrecorded::<D>(req, records)?
    else {
        return Ok(None);
    };
    let Some(link) = host
        .link(&host_ifname)
        .map_err(MasterError::node("look up the host interface"))?
    else {
        // Nothing uses the name: what a failed Go DEL left of the rules can go.
        remove_go_rules(&host_ifname);
        return Ok(None);
    };
    if link.kind.as_deref() != Some(D::LINK_KIND) || !D::owned_by(req, &link)? {
        return Ok(None);
    }
    let record = conf.record(req, D::KIND)?;
    records
        .put(&record)
        .map_err(MasterError::node("write the adopted attachment's record"))?;
    if replace_rules {
        galactic_core::net::firewall::allow(&host_ifname)
            .map_err(MasterError::node("allow forwarding"))?;
    }
    remove_go_state(req, &host_ifname, link.index);
    log::info(
        "adopted an attachment created by the upstream chain",
        json!({"hostIfname": host_ifname, "kind": D::KIND}),
    );
    Ok(Some(record))
}

/// The attachment `req` names, locked, when no record of ours holds its host interface name
/// (what adoption and GC look at); `None` for a config that does not parse or a recorded name.
struct Unrecorded<O> {
    conf: MasterConf<O>,
    host_ifname: String,
    host: Netlink,
    _lock: galactic_core::lockfile::LockGuard,
}

fn unrecorded<D: Device>(
    req: &Request,
    records: &Records,
) -> Result<Option<Unrecorded<D::Options>>, MasterError> {
    let Ok(conf) = MasterConf::<D::Options>::parse(&req.conf.raw) else {
        return Ok(None);
    };
    let host_ifname = conf.host_ifname();
    let host = Netlink::current().map_err(MasterError::node("open the host netlink socket"))?;
    let lock = records.lock(&host_ifname).map_err(MasterError::lock)?;
    if records
        .get(&host_ifname)
        .map_err(MasterError::node("read the attachment record"))?
        .is_some()
    {
        return Ok(None);
    }
    Ok(Some(Unrecorded {
        conf,
        host_ifname,
        host,
        _lock: lock,
    }))
}

/// A Go attachment's state outside its interface: its Go forward rules and its Go
/// `ifindex_vrf_table` row.
fn remove_go_state(req: &Request, host_ifname: &str, ifindex: u32) {
    remove_go_rules(host_ifname);
    remove_go_row(
        &req.node.state_dir,
        &req.node.bpf_pin_dir,
        host_ifname,
        ifindex,
    );
}

/// GC's part (module comment): removes the Go-created attachment of `req`'s network when no
/// attachment in `valid` can be it, i.e. each has a record of ours. Its host interface goes
/// (a veth's container end and every route, address and neighbour on it with it), with its Go
/// forward rules and its Go `ifindex_vrf_table` row; its addresses are IPAM's GC to release.
pub fn collect<D: Device>(
    req: &Request,
    records: &Records,
    valid: &HashSet<(String, String)>,
) -> Result<(), MasterError> {
    let Some(Unrecorded {
        host_ifname,
        host,
        _lock,
        ..
    }) = unrecorded::<D>(req, records)?
    else {
        return Ok(());
    };
    let Some(link) = host
        .link(&host_ifname)
        .map_err(MasterError::node("look up the host interface"))?
    else {
        return Ok(());
    };
    if link.kind.as_deref() != Some(D::LINK_KIND) {
        return Ok(());
    }
    if let Some(unrecorded) = unrecorded_listed(req, records, valid)? {
        log::info(
            "GC: left the upstream chain's attachment: a listed attachment without a record of ours may be it",
            json!({"hostIfname": host_ifname, "listedContainerID": unrecorded}),
        );
        return Ok(());
    }
    remove_go_state(req, &host_ifname, link.index);
    host.delete_link(&host_ifname)
        .map_err(MasterError::node("delete the host interface"))?;
    log::info(
        "GC: removed the upstream chain's attachment: no listed attachment can be it",
        json!({"hostIfname": host_ifname, "kind": D::KIND}),
    );
    Ok(())
}

/// The container id of an attachment in `valid` that has no record of ours in `req`'s network.
fn unrecorded_listed(
    req: &Request,
    records: &Records,
    valid: &HashSet<(String, String)>,
) -> Result<Option<String>, MasterError> {
    let recorded: HashSet<(String, String)> = records
        .all()
        .map_err(MasterError::node("list attachment records"))?
        .into_iter()
        .filter(|r| r.network == req.conf.name)
        .map(|r| (r.container_id, r.ifname))
        .collect();
    Ok(valid
        .difference(&recorded)
        .next()
        .map(|(container, _)| container.clone()))
}

/// Deletes every copy of the Go chain's two forward rules for `ifname`, both families, with the
/// node's `iptables` (the binary the Go chain used, whichever backend it is). Best effort: a node
/// without iptables never had them.
pub fn remove_go_rules(ifname: &str) {
    if !go_rules_possible() {
        return;
    }
    for binary in ["iptables", "ip6tables"] {
        for direction in ["-i", "-o"] {
            for _ in 0..MAX_DUPLICATES {
                let deleted = Command::new(binary)
                    .args([
                        "-w", "5", "-t", "filter", "-D", "FORWARD", direction, ifname, "-j",
                        "ACCEPT",
                    ])
                    .output()
                    .is_ok_and(|o| o.status.success());
                if !deleted {
                    break;
                }
            }
        }
    }
}

/// Whether the Go chain's rules can exist here at all: they live in a forward base chain of
/// nftables (iptables-nft) or in a loaded x_tables `filter` table (iptables-legacy). One netlink
/// dump and two small reads spare every DEL on a node without them the `iptables` processes.
fn go_rules_possible() -> bool {
    let legacy_filter = [
        "/proc/thread-self/net/ip_tables_names",
        "/proc/thread-self/net/ip6_tables_names",
    ]
    .iter()
    .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t.lines().any(|l| l == "filter")));
    legacy_filter || galactic_core::net::nftables::has_forward_chain().unwrap_or(true)
}

/// Removes the Go chain's `ifindex_vrf_table` row of the interface at `ifindex`, unless a
/// registration of ours owns it. A node without the datapath has none.
fn remove_go_row(
    state_dir: &std::path::Path,
    pin_dir: &std::path::Path,
    host_ifname: &str,
    ifindex: u32,
) {
    // A record of ours, or one that cannot be read: the row is not the Go chain's to remove.
    if !matches!(
        galactic_core::bpf::registry::read_record(state_dir, host_ifname),
        Ok(None)
    ) {
        return;
    }
    let Ok(mut table) = maps::open_typed::<IfindexVrfTable>(pin_dir, maps::IFINDEX_VRF_TABLE)
    else {
        return;
    };
    if table.get(&ifindex, 0).is_ok() {
        if let Err(e) = table.remove(&ifindex) {
            log::warn(
                "could not remove the upstream chain's ifindex_vrf_table row",
                json!({"ifindex": ifindex, "err": e.to_string()}),
            );
        }
    }
}
