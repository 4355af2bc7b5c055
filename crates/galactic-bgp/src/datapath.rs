//! The eBPF uSID datapath registration of an attachment (upstream `registerEBPFDatapath`) and
//! its CHECK, over the pinned maps of `galactic_core::bpf`.
//!
//! Runs only when this node's BGPRouter has `srv6Locator` and `nodeID`. Order: the VPC's routing
//! table and the host interface are resolved first, every map is opened before the first
//! write (a node without the datapath fails the ADD with an actionable error and no partial
//! state), then the rows are written and the pinned egress program attached.

use crate::error::BgpError;
use crate::prev::{Facts, InterfaceKind};
use galactic_core::bpf::abi::{EGRESS_KIND_TAP, EGRESS_KIND_VETH};
use galactic_core::bpf::registry::{self, AttachmentRecord, Expected, Registration};
use galactic_core::bpf::tc::{self, AttachOutcome};
use galactic_core::bpf::usid::Usid;
use galactic_core::ident::VpcId;
use galactic_core::log;
use galactic_core::net::domain::Domains;
use galactic_core::net::netlink::Netlink;
use ipnetwork::IpNetwork;
use serde_json::json;
use std::path::Path;

/// Where the attachment lives on this node.
struct Local {
    vrf_table_id: u32,
    host_ifindex: u32,
}

fn resolve(state_dir: &Path, vpc: &VpcId, host_ifname: &str) -> Result<Local, BgpError> {
    let domain = Domains::new(state_dir)
        .get(vpc)?
        .ok_or_else(|| BgpError::NoDomain(vpc.raw().to_owned()))?;
    let host = Netlink::current()?.require_link(host_ifname)?;
    Ok(Local {
        vrf_table_id: domain.table,
        host_ifindex: host.index,
    })
}

fn parse_prefixes(prefixes: &[String]) -> Result<Vec<IpNetwork>, BgpError> {
    prefixes
        .iter()
        .map(|p| {
            p.parse()
                .map_err(|_| BgpError::PrevResult(format!("prefix {p:?} does not parse")))
        })
        .collect()
}

/// What a registration is about.
pub struct Attachment<'a> {
    /// Node state directory.
    pub state_dir: &'a Path,
    /// The pin directory of the datapath's maps.
    pub pin_dir: &'a Path,
    /// The VPC.
    pub vpc: &'a VpcId,
    /// The master's facts.
    pub facts: &'a Facts,
    /// The attachment's canonical prefixes.
    pub prefixes: &'a [String],
}

/// Registers the attachment (upstream §6.7 steps 7–11). Returns the record DEL removes by.
pub fn register(a: &Attachment<'_>, usid: Usid) -> Result<AttachmentRecord, BgpError> {
    let local = resolve(a.state_dir, a.vpc, &a.facts.host_ifname)?;
    let prefixes = parse_prefixes(a.prefixes)?;
    let record = registry::register_attachment(&Registration {
        pin_dir: a.pin_dir,
        state_dir: a.state_dir,
        usid,
        vrf_table_id: local.vrf_table_id,
        egress_kind: match a.facts.kind {
            InterfaceKind::Veth => EGRESS_KIND_VETH,
            InterfaceKind::Tap => EGRESS_KIND_TAP,
        },
        host_ifname: &a.facts.host_ifname,
        host_ifindex: local.host_ifindex,
        prefixes: &prefixes,
    })
    .map_err(BgpError::datapath("register eBPF uSID datapath"))?;
    attach(a.pin_dir, &a.facts.host_ifname)?;
    log::info(
        "ADD: eBPF uSID datapath registered",
        json!({"sid": usid.to_addr().to_string(), "vrfTable": local.vrf_table_id,
               "ifindex": local.host_ifindex, "prefixes": a.prefixes}),
    );
    Ok(record)
}

fn attach(pin_dir: &Path, ifname: &str) -> Result<(), BgpError> {
    let priority = tc::priority_from_env().unwrap_or_else(|raw| {
        log::warn(
            "ADD: invalid eBPF filter priority; using the default",
            json!({"value": raw, "default": tc::DEFAULT_FILTER_PRIORITY}),
        );
        tc::DEFAULT_FILTER_PRIORITY
    });
    match tc::attach_egress(pin_dir, ifname, priority)
        .map_err(BgpError::datapath("attach the uSID egress program"))?
    {
        AttachOutcome::NotPinned => log::debug(
            "ADD: no pinned usid_egress program; tc attachment skipped",
            json!({"pinDir": pin_dir.display().to_string()}),
        ),
        outcome => log::debug(
            "ADD: usid_egress attached",
            json!({"ifname": ifname, "priority": priority, "outcome": format!("{outcome:?}")}),
        ),
    }
    Ok(())
}

/// CHECK (upstream §6.9 step 5, plus this attachment's rows): every difference is reported.
pub fn check(a: &Attachment<'_>, usid: Usid) -> Result<(), BgpError> {
    let local = resolve(a.state_dir, a.vpc, &a.facts.host_ifname)?;
    let prefixes = parse_prefixes(a.prefixes)?;
    let problems = registry::verify(&Expected {
        pin_dir: a.pin_dir,
        usid,
        vrf_table_id: local.vrf_table_id,
        host_ifindex: local.host_ifindex,
        prefixes: &prefixes,
    })
    .map_err(BgpError::datapath("check eBPF uSID datapath"))?;
    match problems.is_empty() {
        true => Ok(()),
        false => Err(BgpError::Check(format!(
            "eBPF uSID datapath: {}",
            problems.join("; ")
        ))),
    }
}
